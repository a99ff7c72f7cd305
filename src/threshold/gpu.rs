//! Rust wrapper of `kernels/threshold.cu`: the grey frame on the device, its global threshold
//! level and its packed mask, so that a frame crosses PCIe once, as grey, and feeds both the
//! labeling and the sub-pixel centroids.
//!
//! The level comes from the device's histogram through `grey_level`, the device's copy of
//! `threshold::level_from_histogram` (the same f64 steps), so the mask is the one the host would
//! make, bit for bit; the level comes back with the frame's results, so the host never waits
//! in the middle of a frame. Thresholds without one global level (adaptive) stay on the host.

use super::spec::ThresholdSpec;
use super::GreyInput;
use crate::error::{Error, Result};
use crate::frame::image::{GrayImage, PackedBinary};
use crate::frame::mask::PixelMask;
use crate::gpu::events::StepEvents;
use crate::gpu::kernels::KernelFile;
use crate::gpu::launch::{launch_err, linear_launch, load};
use crate::gpu::staging::{upload_pinned, HostStaging, PinnedBuffer};
use crate::gpu::{cuda_err, Gpu};
use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr, DevicePtrMut, PushKernelArg};
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

/// Where a frame goes in `DeviceGrey`'s buffer: frame `k` of `frames`, `stride` bytes apart (a
/// frame set's: `set_stride`), or the one frame (`Slot::one`).
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    pub k: usize,
    pub frames: usize,
    pub stride: usize,
}

impl Slot {
    /// The buffer's one frame, of `pixels` bytes.
    pub fn one(pixels: usize) -> Slot {
        Slot {
            k: 0,
            frames: 1,
            stride: pixels,
        }
    }
}

impl DeviceGrey {
    /// Queues the upload of `grey` on the GPU's stream.
    pub fn upload(&mut self, gpu: &Gpu, grey: &GrayImage) -> Result<()> {
        let pixels = grey.width as usize * grey.height as usize;
        self.put_image(gpu, grey, Slot::one(pixels))?;
        (self.width, self.height) = (grey.width, grey.height);
        Ok(())
    }

    /// Queues `input`'s frame into `slot` on the GPU's stream: copied on the device from a
    /// decoder's plane (a failed copy, not expected, is said once and the frame goes through
    /// the host), else uploaded from its page-locked copy (`input.staged`, which the caller
    /// keeps until the stream has passed the copy), else as `upload` does. Returns whether it
    /// was copied on the device.
    pub fn put(&mut self, gpu: &Gpu, input: &GreyInput<'_>, slot: Slot) -> Result<bool> {
        let grey = input.grey;
        let (width, height) = (grey.width, grey.height);
        let pixels = width as usize * height as usize;
        if pixels > slot.stride || slot.k >= slot.frames {
            return Err(Error::Invalid(format!(
                "frame {} of {}: {width}x{height} does not fit {} bytes",
                slot.k, slot.frames, slot.stride
            )));
        }
        (self.width, self.height) = (width, height);
        let data = device_buffer(&mut self.data, gpu, slot.stride * slot.frames)?;
        if pixels == 0 {
            return Ok(false);
        }
        let at = slot.k * slot.stride;
        let mut dst = data.slice_mut(at..at + pixels);
        if let Some(plane) = grey.device_plane() {
            let (address, _sync) = dst.device_ptr_mut(&gpu.stream);
            // SAFETY: `dst` holds `pixels` bytes of this context's memory; the plane is the
            // frame's, `width × height`.
            let copied = unsafe {
                plane.queue_copy_to(address, width, height, gpu.stream.cu_stream().cast())
            };
            match copied {
                Ok(()) => return Ok(true),
                Err(why) => {
                    let e = cuda_err("reading the decoded frame on the GPU", why);
                    static SAID: std::sync::Once = std::sync::Once::new();
                    SAID.call_once(|| {
                        eprintln!("warning: {e}; frames decoded on the GPU go through the host")
                    });
                }
            }
        }
        match input.staged.filter(|s| s.fits(width, height)) {
            // SAFETY: the caller keeps `staged` until the stream has passed the copy.
            Some(staged) => unsafe { upload_pinned(&gpu.stream, staged.as_slice(), &mut dst)? },
            None => self.put_image(gpu, grey.image()?, slot)?,
        }
        Ok(false)
    }

    /// Queues the upload of a host frame into `slot`: from its page-locked memory, through the
    /// staging buffer (a large frame alone in the buffer: frames of a set would share it), or
    /// from its pageable memory (the driver has copied it when the call returns).
    fn put_image(&mut self, gpu: &Gpu, grey: &GrayImage, slot: Slot) -> Result<()> {
        let pixels = grey.data.len();
        if pixels != grey.width as usize * grey.height as usize || pixels > slot.stride {
            return Err(Error::Invalid(format!(
                "a {}x{} grey frame with {pixels} bytes",
                grey.width, grey.height
            )));
        }
        let data = device_buffer(&mut self.data, gpu, slot.stride * slot.frames)?;
        let at = slot.k * slot.stride;
        let mut dst = data.slice_mut(at..at + pixels);
        if pixels > 0 && grey.page_locked() {
            // SAFETY: page-locked by its source (`frame::page_lock`); its holder keeps the frame,
            // unwritten, until the stream has passed the copy (the labeling waits for its
            // results, or the frame in flight is held until it is completed).
            unsafe { upload_pinned(&gpu.stream, &grey.data, &mut dst)? };
        } else if slot.frames == 1 && pixels >= STAGED_MIN_BYTES {
            // The previous upload from it is long done: each frame is waited for.
            let _reallocated = self.staging.fill(gpu, &grey.data)?;
            self.staging.upload(&gpu.stream, &mut dst)?;
        } else if pixels > 0 {
            gpu.stream
                .memcpy_htod(&grey.data, &mut dst)
                .map_err(|e| cuda_err("uploading the grey frame", e))?;
        }
        Ok(())
    }

    /// The uploaded frame, if it is `width × height`.
    pub fn get(&self, width: u32, height: u32) -> Option<&CudaSlice<u8>> {
        self.data
            .as_ref()
            .filter(|_| (self.width, self.height) == (width, height))
    }
}

/// Bytes between the frames of a frame set on the device: a `width × height` frame rounded up
/// to 256, so that each frame starts as aligned as the buffer (`grey_histogram`'s 16-byte loads).
pub fn set_stride(width: u32, height: u32) -> usize {
    (width as usize * height as usize).div_ceil(256) * 256
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

/// What `grey_level` computes (its LEVEL_* in kernels/threshold.cu).
#[derive(Clone, Copy, Debug, PartialEq)]
enum GreyLevelKind {
    Otsu = 1,
    Triangle = 2,
    Background = 3,
}

/// The frames a threshold launch covers: one, or the frames of a frame set, their grey
/// `grey_stride` bytes apart (`set_stride`) and their masks `mask_stride` words apart.
#[derive(Clone, Copy, Debug)]
struct Frames {
    count: u32,
    grey_stride: u64,
    mask_stride: u64,
}

impl Frames {
    const ONE: Frames = Frames {
        count: 1,
        grey_stride: 0,
        mask_stride: 0,
    };
}

/// The level of the frame `GreyStage::threshold_into` queued last, before the host has read it.
#[derive(Clone, Copy, Debug)]
pub enum QueuedLevel<'a> {
    /// A fixed level, known at once.
    Known(u8),
    /// Picked on the device: `grey_level` writes it there ahead of any work queued after (a
    /// frame set's: one a frame).
    OnDevice(&'a CudaSlice<u32>),
}

/// The level of the frame last thresholded.
#[derive(Clone, Copy, Debug)]
enum FrameLevel {
    /// A fixed level, known at once.
    Fixed(u8),
    /// Picked on the device, copied into `GreyStage::level_host` by the frame's stream (a frame
    /// set's: one a frame).
    Copied { frames: usize },
}

/// The grey frame on the device, and the kernels and buffers that threshold it there.
pub struct GreyStage {
    gpu: Arc<Gpu>,
    histogram: CudaFunction,
    level_kernel: CudaFunction,
    pack: CudaFunction,
    counts: CudaSlice<u64>,
    /// The level grey_level picked, on the device and its copy on the host.
    level: CudaSlice<u32>,
    level_host: PinnedBuffer<u32>,
    frame_level: FrameLevel,
    pub grey: DeviceGrey,
    /// The mask ANDed into the packed frame, on the device, with the host mask it was
    /// uploaded from (held, so that a new mask is never taken for it).
    keep: Option<(Arc<PixelMask>, CudaSlice<u32>)>,
}

impl GreyStage {
    pub fn new(gpu: Arc<Gpu>) -> Result<GreyStage> {
        let histogram = load(&gpu, KernelFile::Threshold, "grey_histogram")?;
        let level_kernel = load(&gpu, KernelFile::Threshold, "grey_level")?;
        let pack = load(&gpu, KernelFile::Threshold, "threshold_pack")?;
        let alloc_err = |e| cuda_err("allocating the histogram", e);
        let counts = gpu.stream.alloc_zeros::<u64>(256).map_err(alloc_err)?;
        let level = gpu.stream.alloc_zeros::<u32>(1).map_err(alloc_err)?;
        let level_host = PinnedBuffer::alloc(&gpu, 1, false)?;
        Ok(GreyStage {
            gpu,
            histogram,
            level_kernel,
            pack,
            counts,
            level,
            level_host,
            frame_level: FrameLevel::Fixed(0),
            grey: DeviceGrey::default(),
            keep: None,
        })
    }

    /// Queues the upload of the grey frame.
    pub fn upload(&mut self, grey: &GrayImage) -> Result<()> {
        self.grey.upload(&self.gpu, grey)
    }

    /// Queues the upload of `grey` (from `input.staged` when that holds this frame) and its
    /// thresholding into `mask` (see `pack`), recording an event after each step, the first at
    /// `first_event`. Returns the steps: "upload grey", "histogram + level" (unless the level
    /// is fixed), "threshold+pack". The level is `last_level` once the stream has passed the
    /// frame's later work (its results' download).
    pub fn threshold_into(
        &mut self,
        input: &GreyInput<'_>,
        mask: &mut CudaSlice<u32>,
        events: &mut StepEvents,
        first_event: usize,
    ) -> Result<Vec<&'static str>> {
        let GreyInput {
            grey,
            threshold: spec,
            invert,
            pixel_mask,
            ..
        } = *input;
        let pixels = grey.width as usize * grey.height as usize;
        // A frame decoded on the GPU is copied there (the faster way, host copy made or not).
        let on_device = self.grey.put(&self.gpu, input, Slot::one(pixels))?;
        let steps = vec![if on_device {
            "copy grey"
        } else {
            "upload grey"
        }];
        events.record(&self.gpu, first_event + steps.len())?;
        self.level_and_pack(
            spec,
            invert,
            pixel_mask,
            mask,
            Frames::ONE,
            (events, first_event),
            steps,
        )
    }

    /// `threshold_into` for the frames of a frame set (`crate::ccl::frame_set`): each of one
    /// size, with one threshold and polarity and no pixel mask, put `set_stride` bytes apart
    /// and thresholded each with its own level into `mask`, where frame k's rows start
    /// k × `mask_stride` words in. The words between one frame's rows and the next's are not
    /// written. The levels are `last_levels` once the stream has passed the set's later work.
    pub fn threshold_set_into(
        &mut self,
        inputs: &[GreyInput<'_>],
        mask: &mut CudaSlice<u32>,
        mask_stride: usize,
        (events, first_event): (&mut StepEvents, usize),
    ) -> Result<Vec<&'static str>> {
        let first = inputs
            .first()
            .ok_or_else(|| Error::Invalid("a frame set without frames".into()))?;
        let (width, height) = (first.grey.width, first.grey.height);
        for input in inputs {
            let same = (input.grey.width, input.grey.height) == (width, height)
                && input.threshold == first.threshold
                && input.invert == first.invert
                && input.pixel_mask.is_none();
            if !same {
                return Err(Error::Invalid(
                    "a frame set's frames need one size, one threshold and no pixel mask".into(),
                ));
            }
        }
        let stride = set_stride(width, height);
        let mut on_device = true;
        for (k, input) in inputs.iter().enumerate() {
            let slot = Slot {
                k,
                frames: inputs.len(),
                stride,
            };
            on_device &= self.grey.put(&self.gpu, input, slot)?;
        }
        let steps = vec![if on_device {
            "copy grey"
        } else {
            "upload grey"
        }];
        events.record(&self.gpu, first_event + steps.len())?;
        let frames = Frames {
            count: inputs.len() as u32,
            grey_stride: stride as u64,
            mask_stride: mask_stride as u64,
        };
        let (spec, invert) = (first.threshold, first.invert);
        self.level_and_pack(
            spec,
            invert,
            None,
            mask,
            frames,
            (events, first_event),
            steps,
        )
    }

    /// The steps after the upload of `threshold_into` and `threshold_set_into`.
    #[allow(clippy::too_many_arguments)]
    fn level_and_pack(
        &mut self,
        spec: &ThresholdSpec,
        invert: bool,
        pixel_mask: Option<&Arc<PixelMask>>,
        mask: &mut CudaSlice<u32>,
        frames: Frames,
        (events, first_event): (&mut StepEvents, usize),
        mut steps: Vec<&'static str>,
    ) -> Result<Vec<&'static str>> {
        self.queue_level(spec, invert, frames)?;
        if !matches!(spec, ThresholdSpec::Fixed(_)) {
            steps.push("histogram + level");
            events.record(&self.gpu, first_event + steps.len())?;
        }
        self.set_keep(pixel_mask)?;
        self.pack(invert, mask, frames)?;
        self.queue_level_copy()?;
        steps.push("threshold+pack");
        events.record(&self.gpu, first_event + steps.len())?;
        Ok(steps)
    }

    /// Where the level of the frame `threshold_into` queued last is, for work queued before
    /// the host reads it (`last_level`).
    pub fn queued_level(&self) -> QueuedLevel<'_> {
        match self.frame_level {
            FrameLevel::Fixed(t) => QueuedLevel::Known(t),
            FrameLevel::Copied { .. } => QueuedLevel::OnDevice(&self.level),
        }
    }

    /// The level of the frame `threshold_into` queued last: foreground = grey > level (≤ with
    /// `invert`). A level picked on the device is read from its copy: call this only once the
    /// stream has passed the frame's later work.
    pub fn last_level(&self) -> u8 {
        match self.frame_level {
            FrameLevel::Fixed(t) => t,
            FrameLevel::Copied { .. } => self.level_host.as_slice()[0] as u8,
        }
    }

    /// Queues the choice of the global level of `spec` for the uploaded frame: the histogram,
    /// then `grey_level` (unless `spec` is a fixed level). Errors for a threshold without one
    /// global level.
    fn queue_level(&mut self, spec: &ThresholdSpec, invert: bool, frames: Frames) -> Result<()> {
        match *spec {
            ThresholdSpec::Fixed(t) => {
                self.frame_level = FrameLevel::Fixed(t);
                return Ok(());
            }
            ThresholdSpec::Adaptive { .. } => {
                return Err(Error::Invalid(format!(
                    "threshold {spec}: no single level for the whole frame, so it is applied on the host"
                )))
            }
            _ => {}
        }
        let grey = &self.grey;
        let data = grey
            .data
            .as_ref()
            .ok_or_else(|| Error::Invalid("no grey frame was uploaded".into()))?;
        let n = grey.width as u64 * grey.height as u64;
        let count = frames.count.max(1) as usize;
        if data.len() < frames.grey_stride as usize * (count - 1) + n as usize {
            return Err(Error::Invalid(
                "the grey frames were not all uploaded".into(),
            ));
        }
        let s = &self.gpu.stream;
        let alloc_err = |e| cuda_err("allocating the histogram", e);
        if self.counts.len() < 256 * count {
            self.counts = s.alloc_zeros::<u64>(256 * count).map_err(alloc_err)?;
            self.level = s.alloc_zeros::<u32>(count).map_err(alloc_err)?;
            // The stream has passed every copy into the old buffer: its frame was waited for.
            self.level_host = PinnedBuffer::alloc(&self.gpu, count, false)?;
        }
        s.memset_zeros(&mut self.counts.slice_mut(0..256 * count))
            .map_err(|e| cuda_err("clearing the histogram", e))?;
        let mut cfg = linear_launch(n.div_ceil(16 * 4), THREADS);
        cfg.grid_dim.0 = cfg.grid_dim.0.min(HISTOGRAM_BLOCKS_MAX as u32);
        cfg.grid_dim.2 = count as u32;
        // SAFETY: matches `grey_histogram(const uchar*, u64, u64*, u64)`; `data` holds the
        // frames, n bytes each, `grey_stride` apart (a multiple of 256: each starts 256-byte
        // aligned, as the device allocation does), `counts` 256 values a frame (checked above).
        unsafe {
            s.launch_builder(&self.histogram)
                .arg(data)
                .arg(&n)
                .arg(&mut self.counts)
                .arg(&frames.grey_stride)
                .launch(cfg)
                .map_err(|e| launch_err("grey_histogram", e))?;
        }
        self.launch_level(spec, invert, count)
    }

    /// Queues `grey_level` on the histogram in `counts` (`spec` not fixed or adaptive).
    fn launch_level(&mut self, spec: &ThresholdSpec, invert: bool, frames: usize) -> Result<()> {
        let (kind, k) = match *spec {
            ThresholdSpec::Otsu => (GreyLevelKind::Otsu, 0.0),
            ThresholdSpec::Triangle => (GreyLevelKind::Triangle, 0.0),
            ThresholdSpec::Background { k } => (GreyLevelKind::Background, k),
            ThresholdSpec::Fixed(_) | ThresholdSpec::Adaptive { .. } => {
                return Err(Error::Invalid(format!(
                    "threshold {spec}: not picked from a histogram"
                )))
            }
        };
        let (kind, invert) = (kind as u32, i32::from(invert));
        let mut cfg = linear_launch(1, 1);
        cfg.grid_dim.2 = frames as u32;
        // SAFETY: matches `grey_level(const u64*, u32, double, int, u32*)`; `counts` holds 256
        // values a frame, `level` one a frame (`queue_level` grew them).
        unsafe {
            self.gpu
                .stream
                .launch_builder(&self.level_kernel)
                .arg(&self.counts)
                .arg(&kind)
                .arg(&k)
                .arg(&invert)
                .arg(&mut self.level)
                .launch(cfg)
                .map_err(|e| launch_err("grey_level", e))?;
        }
        self.frame_level = FrameLevel::Copied { frames };
        Ok(())
    }

    /// The level `grey_level` picks from histogram `h` (for `check_levels`); waits for it.
    pub fn level_of_histogram(
        &mut self,
        h: &[u64; 256],
        spec: &ThresholdSpec,
        invert: bool,
    ) -> Result<u8> {
        self.gpu
            .stream
            .memcpy_htod(&h[..], &mut self.counts)
            .map_err(|e| cuda_err("uploading the histogram", e))?;
        self.launch_level(spec, invert, 1)?;
        self.queue_level_copy()?;
        self.gpu
            .stream
            .synchronize()
            .map_err(|e| cuda_err("waiting for the level", e))?;
        Ok(self.last_level())
    }

    /// Queues the copy of a level picked on the device to the host (`last_level`).
    fn queue_level_copy(&mut self) -> Result<()> {
        let FrameLevel::Copied { frames } = self.frame_level else {
            return Ok(());
        };
        let s = &self.gpu.stream;
        let (src, _sync) = self.level.device_ptr(s);
        let dst = &mut self.level_host.as_mut_slice()[..frames];
        // SAFETY: `level_host` is page-locked and lives as long as this stage; it is read only
        // after the stream has passed the copy (`last_level`), and the next copy into it is
        // queued after that read.
        unsafe { cudarc::driver::result::memcpy_dtoh_async(dst, src, s.cu_stream()) }
            .map_err(|e| cuda_err("downloading the threshold level", e))
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
    /// `PackedBinary::words_per_row_for(width)` words, padding bits cleared) at the level
    /// `queue_level` set.
    fn pack(&self, invert: bool, mask: &mut CudaSlice<u32>, frames: Frames) -> Result<()> {
        let (width, height) = (self.grey.width, self.grey.height);
        let data = self
            .grey
            .data
            .as_ref()
            .ok_or_else(|| Error::Invalid("no grey frame was uploaded".into()))?;
        let words_per_row = PackedBinary::words_per_row_for(width);
        let count = frames.count.max(1) as usize;
        let needed = frames.mask_stride as usize * (count - 1) + words_per_row * height as usize;
        let pixels = width as usize * height as usize;
        if data.len() < frames.grey_stride as usize * (count - 1) + pixels
            || (count > 1 && (frames.grey_stride as usize) < pixels)
        {
            return Err(Error::Invalid(
                "the grey frames were not all uploaded".into(),
            ));
        }
        let too_close =
            count > 1 && (frames.mask_stride as usize) < words_per_row * height as usize;
        if mask.len() < needed || too_close {
            return Err(Error::Invalid(format!(
                "the device mask holds {} words, {count} {width}x{height} frame(s) need {needed}",
                mask.len(),
            )));
        }
        let wpr = words_per_row as u32;
        let warps = wpr.div_ceil(32) as u64 * height as u64;
        let (level, invert) = match self.frame_level {
            FrameLevel::Fixed(t) => (i32::from(t), i32::from(invert)),
            FrameLevel::Copied { .. } => (0, i32::from(invert)),
        };
        let null = 0u64; // a null `keep` or `level_at`
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
            None => launch.arg(&null),
        };
        match self.frame_level {
            FrameLevel::Fixed(_) => launch.arg(&null),
            FrameLevel::Copied { .. } => launch.arg(&self.level),
        };
        launch.arg(&frames.grey_stride).arg(&frames.mask_stride);
        let mut cfg = linear_launch(warps * 32, THREADS);
        cfg.grid_dim.2 = count as u32;
        // SAFETY: matches `threshold_pack(const uchar*, u32*, u32, u32, u32, int, int, const
        // u32*, const u32*, u64, u64)`; `data` holds the frames' width × height bytes
        // `grey_stride` apart (`queue_level` checked it for a picked level, the uploads wrote
        // them), `mask` their words_per_row × height words `mask_stride` apart (checked
        // above), `keep` is null or as many words of this frame's size (`set_keep`),
        // `level_at` null or the levels grey_level writes, one a frame.
        unsafe {
            launch
                .launch(cfg)
                .map_err(|e| launch_err("threshold_pack", e))?;
        }
        Ok(())
    }
}

/// Histograms that try `grey_level`'s edges: empty, one level (0, 255, between), two levels,
/// flat, a dark background with bright markers (either polarity), the extremes of the counts,
/// and seeded random ones (dense, sparse, bimodal).
pub fn level_test_histograms() -> Vec<[u64; 256]> {
    let mut out = vec![[0u64; 256]];
    for v in [0usize, 255, 17] {
        let mut h = [0u64; 256];
        h[v] = 1000;
        out.push(h);
    }
    let mut two = [0u64; 256];
    two[10] = 5;
    two[200] = 7;
    out.push(two);
    out.push([3u64; 256]);
    let mut markers = [0u64; 256];
    for (v, n) in markers.iter_mut().enumerate() {
        *n = if v < 40 {
            90_000 - 2_000 * v as u64
        } else if v > 220 {
            300
        } else {
            5
        };
    }
    out.push(markers);
    let mut bright = markers;
    bright.reverse();
    out.push(bright);
    let mut huge = [0u64; 256];
    huge[3] = (1u64 << 32) - 7;
    huge[250] = 6;
    out.push(huge);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for i in 0..60 {
        let mut h = [0u64; 256];
        for (v, n) in h.iter_mut().enumerate() {
            let r = next();
            *n = match i % 3 {
                0 => r % 100_000,
                1 if r % 9 == 0 => r % 50,
                1 => 0,
                _ => {
                    let near = |c: usize| v.abs_diff(c) < 12;
                    if near(40 + i) || near(180 + i / 2) {
                        r % 20_000
                    } else {
                        r % 30
                    }
                }
            };
        }
        out.push(h);
    }
    out
}

/// `grey_level` on every `level_test_histograms` histogram, for Otsu, triangle and
/// background:K (several K) in both polarities, against `level_from_histogram`. Returns the
/// number of checks and the failures.
pub fn check_levels(gpu: Arc<Gpu>) -> (usize, Vec<String>) {
    use super::levels::level_from_histogram;
    let mut stage = match GreyStage::new(gpu) {
        Ok(s) => s,
        Err(e) => return (1, vec![format!("threshold levels: {e}")]),
    };
    let specs = [
        ThresholdSpec::Otsu,
        ThresholdSpec::Triangle,
        ThresholdSpec::Background { k: 0.0 },
        ThresholdSpec::Background { k: 1.5 },
        ThresholdSpec::Background { k: 5.0 },
        ThresholdSpec::Background { k: -3.0 },
        ThresholdSpec::Background { k: 400.0 },
    ];
    let (mut checks, mut failures) = (0, Vec::new());
    for (i, h) in level_test_histograms().iter().enumerate() {
        for spec in &specs {
            for invert in [false, true] {
                checks += 1;
                let expected = level_from_histogram(h, spec, invert);
                match (stage.level_of_histogram(h, spec, invert), expected) {
                    (Ok(got), Some(exp)) if got == exp => {}
                    (Ok(got), exp) => failures.push(format!(
                        "threshold level of histogram {i} ({spec}, invert {invert}): {got} on the GPU, {exp:?} on the host"
                    )),
                    (Err(e), _) => failures.push(format!(
                        "threshold level of histogram {i} ({spec}, invert {invert}): {e}"
                    )),
                }
            }
        }
    }
    (checks, failures)
}
