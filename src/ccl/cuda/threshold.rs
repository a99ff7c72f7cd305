//! Rust wrapper of `kernels/threshold.cu`: the grey frame on the device, its global threshold
//! level and its packed mask, so that a frame crosses PCIe once, as grey, and feeds both the
//! labeling and the sub-pixel centroids.
//!
//! The level comes from the device's histogram through `threshold::level_from_histogram`, the
//! function the CPU path uses, so the mask is the one the host would make, bit for bit.
//! Thresholds without one global level (adaptive) stay on the host.

use super::common::StepEvents;
use super::pixel::{launch_err, linear_launch, load};
use super::staging::{upload_pinned, HostStaging};
use super::{cuda_err, Gpu, KernelFile};
use crate::ccl::{GreyInput, StagedGrey};
use crate::error::{Error, Result};
use crate::frame::image::{GrayImage, PackedBinary};
use crate::frame::mask::PixelMask;
use crate::frame::threshold::{level_from_histogram, ThresholdSpec};
use cudarc::driver::{CudaFunction, CudaSlice, PushKernelArg};
use std::sync::Arc;

/// Threads per block of both kernels.
const THREADS: u32 = 256;
/// Most blocks of the histogram: each block's shared counts stay far below 2^32 even for the
/// largest frame (2^32 pixels / 1024 blocks = 2^22 per block).
const HISTOGRAM_BLOCKS_MAX: u64 = 1024;

/// Frames of at least this many bytes go up through the page-locked staging buffer
/// (`staging::HostStaging`); smaller ones go up straight from pageable memory.
const STAGED_MIN_BYTES: usize = 1 << 20;

/// The grey frame on the device (kept from frame to frame, grown to the largest seen).
#[derive(Default)]
pub struct DeviceGrey {
    data: Option<CudaSlice<u8>>,
    /// Page-locked host copy of the frame for the upload (frames of `STAGED_MIN_BYTES` or more).
    staging: HostStaging<u8>,
    pub width: u32,
    pub height: u32,
}

impl DeviceGrey {
    /// Queues the upload of `grey` on the GPU's stream.
    pub fn upload(&mut self, gpu: &Gpu, grey: &GrayImage) -> Result<()> {
        let pixels = grey.data.len();
        if pixels != grey.width as usize * grey.height as usize {
            return Err(Error::Invalid(format!(
                "a {}x{} grey frame with {pixels} bytes",
                grey.width, grey.height
            )));
        }
        let dst = device_buffer(&mut self.data, gpu, pixels)?;
        let up_err = |e| cuda_err("uploading the grey frame", e);
        if pixels >= STAGED_MIN_BYTES {
            // The previous upload from it is long done: each frame is waited for.
            let _reallocated = self.staging.fill(gpu, &grey.data)?;
            self.staging
                .upload(&gpu.stream, &mut dst.slice_mut(0..pixels))?;
        } else if pixels > 0 {
            gpu.stream
                .memcpy_htod(&grey.data, &mut dst.slice_mut(0..pixels))
                .map_err(up_err)?;
        }
        (self.width, self.height) = (grey.width, grey.height);
        Ok(())
    }

    /// Queues the upload of a frame already in page-locked memory, straight from there (the
    /// caller keeps `staged` until the stream has passed the copy).
    pub fn upload_staged(&mut self, gpu: &Gpu, staged: &StagedGrey) -> Result<()> {
        let pixels = staged.as_slice().len();
        let dst = device_buffer(&mut self.data, gpu, pixels)?;
        if pixels > 0 {
            // SAFETY: `staged` outlives the copy (the caller's promise).
            unsafe { upload_pinned(&gpu.stream, staged.as_slice(), dst)? };
        }
        (self.width, self.height) = (staged.width, staged.height);
        Ok(())
    }

    /// The uploaded frame, if it is `width × height`.
    pub fn get(&self, width: u32, height: u32) -> Option<&CudaSlice<u8>> {
        self.data
            .as_ref()
            .filter(|_| (self.width, self.height) == (width, height))
    }
}

/// The device buffer of a grey frame, grown to hold `pixels` bytes.
fn device_buffer<'a>(
    data: &'a mut Option<CudaSlice<u8>>,
    gpu: &Gpu,
    pixels: usize,
) -> Result<&'a mut CudaSlice<u8>> {
    if data.as_ref().is_none_or(|d| d.len() < pixels) {
        *data = None;
        // SAFETY: an upload writes the first `pixels` bytes, the only ones read.
        *data = Some(
            unsafe { gpu.stream.alloc::<u8>(pixels.max(1)) }
                .map_err(|e| cuda_err("allocating the grey frame", e))?,
        );
    }
    Ok(data.as_mut().expect("allocated above"))
}

/// The grey frame on the device, and the kernels and buffers that threshold it there.
pub struct GreyStage {
    gpu: Arc<Gpu>,
    histogram: CudaFunction,
    pack: CudaFunction,
    counts: CudaSlice<u64>,
    host_counts: [u64; 256],
    pub grey: DeviceGrey,
    /// The mask ANDed into the packed frame, on the device, with the host mask it was
    /// uploaded from (held, so that a new mask is never taken for it).
    keep: Option<(Arc<PixelMask>, CudaSlice<u32>)>,
}

impl GreyStage {
    pub fn new(gpu: Arc<Gpu>) -> Result<GreyStage> {
        let histogram = load(&gpu, KernelFile::Threshold, "grey_histogram")?;
        let pack = load(&gpu, KernelFile::Threshold, "threshold_pack")?;
        let counts = gpu
            .stream
            .alloc_zeros::<u64>(256)
            .map_err(|e| cuda_err("allocating the histogram", e))?;
        Ok(GreyStage {
            gpu,
            histogram,
            pack,
            counts,
            host_counts: [0; 256],
            grey: DeviceGrey::default(),
            keep: None,
        })
    }

    /// Queues the upload of the grey frame.
    pub fn upload(&mut self, grey: &GrayImage) -> Result<()> {
        self.grey.upload(&self.gpu, grey)
    }

    /// Uploads `grey` (from `input.staged` when that holds this frame) and thresholds it into
    /// `mask` (see `pack`), recording an event after
    /// each step, the first at `first_event`. Returns the level and the steps: "upload grey",
    /// "histogram" (unless the level is fixed), "threshold+pack".
    pub fn threshold_into(
        &mut self,
        input: &GreyInput<'_>,
        mask: &mut CudaSlice<u32>,
        events: &mut StepEvents,
        first_event: usize,
    ) -> Result<(u8, Vec<&'static str>)> {
        let GreyInput {
            grey,
            threshold: spec,
            invert,
            pixel_mask,
            staged,
        } = *input;
        let mut steps = vec!["upload grey"];
        match staged.filter(|s| s.fits(grey.width, grey.height)) {
            Some(staged) => self.grey.upload_staged(&self.gpu, staged)?,
            None => self.upload(grey)?,
        }
        events.record(&self.gpu, first_event + steps.len())?;
        let level = self.level(spec, invert)?;
        if !matches!(spec, ThresholdSpec::Fixed(_)) {
            steps.push("histogram");
            events.record(&self.gpu, first_event + steps.len())?;
        }
        self.set_keep(pixel_mask)?;
        self.pack(level, invert, mask)?;
        steps.push("threshold+pack");
        events.record(&self.gpu, first_event + steps.len())?;
        Ok((level, steps))
    }

    /// The global level of `spec` for the uploaded frame: foreground = grey > level (≤ with
    /// `invert`). Counts the histogram on the device and waits for it, unless `spec` is a fixed
    /// level. Errors for a threshold without one global level.
    pub fn level(&mut self, spec: &ThresholdSpec, invert: bool) -> Result<u8> {
        let unsupported = || {
            Error::Invalid(format!(
                "threshold {spec}: no single level for the whole frame, so it is applied on the host"
            ))
        };
        if let ThresholdSpec::Fixed(t) = *spec {
            return Ok(t);
        }
        if matches!(spec, ThresholdSpec::Adaptive { .. }) {
            return Err(unsupported());
        }
        let grey = &self.grey;
        let data = grey
            .data
            .as_ref()
            .ok_or_else(|| Error::Invalid("no grey frame was uploaded".into()))?;
        let n = grey.width as u64 * grey.height as u64;
        let s = &self.gpu.stream;
        s.memset_zeros(&mut self.counts)
            .map_err(|e| cuda_err("clearing the histogram", e))?;
        let mut cfg = linear_launch(n.div_ceil(16 * 4), THREADS);
        cfg.grid_dim.0 = cfg.grid_dim.0.min(HISTOGRAM_BLOCKS_MAX as u32);
        // SAFETY: matches `grey_histogram(const uchar*, u64, u64*)`; `data` holds n bytes and
        // starts 256-byte aligned (a device allocation), `counts` 256 values.
        unsafe {
            s.launch_builder(&self.histogram)
                .arg(data)
                .arg(&n)
                .arg(&mut self.counts)
                .launch(cfg)
                .map_err(|e| launch_err("grey_histogram", e))?;
        }
        s.memcpy_dtoh(&self.counts, &mut self.host_counts[..])
            .map_err(|e| cuda_err("downloading the histogram", e))?;
        s.synchronize()
            .map_err(|e| cuda_err("waiting for the histogram", e))?;
        level_from_histogram(&self.host_counts, spec, invert).ok_or_else(unsupported)
    }

    /// The mask `pack` applies (uploaded when it changes); `None`: none.
    fn set_keep(&mut self, keep: Option<&Arc<PixelMask>>) -> Result<()> {
        let Some(keep) = keep else {
            self.keep = None;
            return Ok(());
        };
        if self
            .keep
            .as_ref()
            .is_some_and(|(k, _)| Arc::ptr_eq(k, keep))
        {
            return Ok(());
        }
        let (width, height) = (self.grey.width, self.grey.height);
        let packed = keep.packed();
        if (packed.width, packed.height) != (width, height)
            || packed.words_per_row != PackedBinary::words_per_row_for(width)
        {
            return Err(Error::Invalid(format!(
                "the mask is {}x{}, the frame {width}x{height}",
                packed.width, packed.height
            )));
        }
        self.keep = None;
        let words = self
            .gpu
            .stream
            .clone_htod(&packed.words)
            .map_err(|e| cuda_err("uploading the mask", e))?;
        self.keep = Some((keep.clone(), words));
        Ok(())
    }

    /// Queues the thresholding of the uploaded frame into `mask` (bit-packed, rows of
    /// `PackedBinary::words_per_row_for(width)` words, padding bits cleared).
    pub fn pack(&self, level: u8, invert: bool, mask: &mut CudaSlice<u32>) -> Result<()> {
        let (width, height) = (self.grey.width, self.grey.height);
        let data = self
            .grey
            .data
            .as_ref()
            .ok_or_else(|| Error::Invalid("no grey frame was uploaded".into()))?;
        let words_per_row = PackedBinary::words_per_row_for(width);
        if mask.len() < words_per_row * height as usize {
            return Err(Error::Invalid(format!(
                "the device mask holds {} words, a {width}x{height} frame needs {}",
                mask.len(),
                words_per_row * height as usize
            )));
        }
        let wpr = words_per_row as u32;
        let warps = wpr.div_ceil(32) as u64 * height as u64;
        let (level, invert) = (level as i32, invert as i32);
        let no_keep = 0u64; // a null `keep`
        let mut launch = self.gpu.stream.launch_builder(&self.pack);
        launch
            .arg(data)
            .arg(mask)
            .arg(&width)
            .arg(&height)
            .arg(&wpr)
            .arg(&level)
            .arg(&invert);
        match &self.keep {
            Some((_, words)) => launch.arg(words),
            None => launch.arg(&no_keep),
        };
        // SAFETY: matches `threshold_pack(const uchar*, u32*, u32, u32, u32, int, int, const
        // u32*)`; `data` holds width × height bytes, `mask` words_per_row × height words (checked
        // above), `keep` is null or as many words of this frame's size (`set_keep`).
        unsafe {
            launch
                .launch(linear_launch(warps * 32, THREADS))
                .map_err(|e| launch_err("threshold_pack", e))?;
        }
        Ok(())
    }
}
