//! Rust wrapper of `kernels/subpixel.cu`: grey-weighted (sub-pixel) centroids on the GPU, over
//! a device label image numbered 1..=count in raster order (what a labeler leaves on the device
//! for `Want::Both`). The sums are exact integers, the same as the CPU's
//! `subpixel::weighted_centroids`, so selftest compares the two bit for bit.
//!
//! Use from a labeler: upload the grey frame (`threshold::DeviceGrey`) and `set_weights` (the
//! levels; per-pixel ones go up too) with the mask, label with `Want::Both`, read the component
//! count, then `launch` and `fetch`.

use super::downloads::convert_rows;
use super::launches::rows_launch;
use crate::ccl::stats::ComponentStats;
use crate::ccl::subpixel::{GreyWeights, SubpixelCentroid};
use crate::ccl::Keep;
use crate::error::{Error, Result};
use crate::gpu::buffers::cleared_sums;
use crate::gpu::kernels::KernelFile;
use crate::gpu::staging::PinnedBuffer;
use crate::gpu::{cuda_err, Gpu};
use crate::threshold::gpu::{DeviceGrey, QueuedLevel};
use crate::threshold::levels::ThresholdLevels;
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, PushKernelArg};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The arguments of `sp_accumulate` (kernels/subpixel.cu), device memory as raw pointers.
pub struct AccumulateArgs {
    /// u32 labels, `width × height`, numbered 1..=count (other values ignored).
    pub labels: u64,
    /// u8 grey frame, `width × height`.
    pub grey: u64,
    /// i32 per-pixel levels (read only with `per_pixel`).
    pub levels: u64,
    pub per_pixel: bool,
    pub level: i32,
    /// u32: the level on the device, read instead of `level` (0: none).
    pub level_at: u64,
    pub invert: bool,
    /// u64 Σ w, Σ w·x, Σ w·y per component: `3 × count`, cleared.
    pub sums: u64,
    pub count: u32,
    /// u32: the component count on the device (0: none); `count` then bounds it (the room of
    /// `sums`).
    pub count_at: u64,
    pub width: u32,
    pub height: u32,
    /// The frames of a frame set labeled as one image (`crate::ccl::frame_set`), each
    /// `width × height`; `FrameStrides::ONE` for one frame.
    pub frames: FrameStrides,
}

/// Where the frames of a frame set lie in the set's buffers: frame k's labels start
/// k × `label_stride` labels, its grey k × `grey_stride` bytes in (its level is `level_at[k]`).
#[derive(Clone, Copy, Debug)]
pub struct FrameStrides {
    pub frames: u32,
    pub label_stride: u64,
    pub grey_stride: u64,
}

impl FrameStrides {
    /// One frame.
    pub const ONE: FrameStrides = FrameStrides {
        frames: 1,
        label_stride: 0,
        grey_stride: 0,
    };
}

/// The device address of `buffer` (the stream tracks no events: nothing to wait for).
pub fn raw_device_ptr<T>(buffer: &CudaSlice<T>, stream: &CudaStream) -> u64 {
    cudarc::driver::DevicePtr::device_ptr(buffer, stream).0
}

/// Queues `sp_accumulate` on `gpu`'s stream.
///
/// # Safety
/// Every pointer of `args` must address device memory of `gpu`'s context of the size its
/// field says, alive until the stream has run the kernel.
pub unsafe fn launch_accumulate(
    gpu: &Gpu,
    accumulate: &CudaFunction,
    args: &AccumulateArgs,
) -> Result<()> {
    let (per_pixel, invert) = (args.per_pixel as i32, args.invert as i32);
    let mut cfg = rows_launch(args.height);
    cfg.grid_dim.2 = args.frames.frames.max(1);
    // SAFETY: matches sp_accumulate(const u32*, const u8*, const int*, int, int, const u32*,
    // int, u64*, u32, const u32*, u32, u32, u64, u64); sizes as the caller promised.
    unsafe {
        gpu.stream
            .launch_builder(accumulate)
            .arg(&args.labels)
            .arg(&args.grey)
            .arg(&args.levels)
            .arg(&per_pixel)
            .arg(&args.level)
            .arg(&args.level_at)
            .arg(&invert)
            .arg(&args.sums)
            .arg(&args.count)
            .arg(&args.count_at)
            .arg(&args.width)
            .arg(&args.height)
            .arg(&args.frames.label_stride)
            .arg(&args.frames.grey_stride)
            .launch(cfg)
            .map_err(|e| cuda_err("launching sp_accumulate", e))?;
    }
    Ok(())
}

/// The grey frame of a `width × height` label image on the device (the frames of a set, each
/// that size, laid out as `frames` says), once both are there.
fn frame_grey<'a>(
    labels: &CudaSlice<u32>,
    grey: &'a DeviceGrey,
    (width, height): (u32, u32),
    frames: FrameStrides,
) -> Result<&'a CudaSlice<u8>> {
    let grey = grey
        .get(width, height)
        .ok_or_else(|| no_grey_frame(width, height))?;
    let pixels = width as u64 * height as u64;
    let before = u64::from(frames.frames.max(1) - 1);
    if (grey.len() as u64) < before * frames.grey_stride + pixels {
        return Err(no_grey_frame(width, height));
    }
    if (labels.len() as u64) < before * frames.label_stride + pixels {
        return Err(Error::Invalid(format!(
            "sub-pixel centroid: the label buffer holds {} pixels, {width}x{height} needs more",
            labels.len()
        )));
    }
    Ok(grey)
}

fn no_grey_frame(width: u32, height: u32) -> Error {
    Error::Invalid(format!(
        "sub-pixel centroid: no {width}x{height} grey frame was uploaded for this label image"
    ))
}

/// Components the sums queued before the count is known have room for, at least (they take
/// room for the most components of a frame so far).
const EARLY_ROOM_MIN: usize = 4096;

/// Reusable device buffers; each grows to the largest frame (or component count) seen.
pub struct SubpixelStage {
    gpu: Arc<Gpu>,
    accumulate: CudaFunction,
    /// Per-pixel levels (adaptive threshold); a one-element stand-in otherwise.
    levels: CudaSlice<i32>,
    /// Σ w, Σ w·x, Σ w·y per component.
    sums: Option<CudaSlice<u64>>,
    /// What `set_weights` was told.
    uploaded: Option<Uploaded>,
    /// The sums' page-locked copy (grown on demand), and how many of them the last `launch`
    /// queued (3 × count).
    host_sums: Option<PinnedBuffer<u64>>,
    queued_sums: usize,
    /// The most components of a frame so far: the room of the sums `launch_early` queues.
    early_room: usize,
    /// `launch_early` queued sums with room for this many components, not yet finished.
    early: Option<usize>,
}

#[derive(Clone, Copy)]
struct Uploaded {
    width: u32,
    height: u32,
    per_pixel: bool,
    level: i32,
    invert: bool,
}

impl SubpixelStage {
    pub fn new(gpu: Arc<Gpu>) -> Result<SubpixelStage> {
        let accumulate = gpu
            .module(KernelFile::Subpixel)
            .load_function("sp_accumulate")
            .map_err(|e| cuda_err("loading kernel sp_accumulate", e))?;
        let levels = gpu
            .stream
            .alloc_zeros::<i32>(1)
            .map_err(|e| cuda_err("allocating the level buffer", e))?;
        Ok(SubpixelStage {
            gpu,
            accumulate,
            levels,
            sums: None,
            uploaded: None,
            host_sums: None,
            queued_sums: 0,
            early_room: EARLY_ROOM_MIN,
            early: None,
        })
    }

    /// How a `width × height` grey frame (uploaded by the caller) was thresholded: one global
    /// level (`set_weights` with `ThresholdLevels::Global`, without the frame at hand).
    pub fn set_global_level(&mut self, width: u32, height: u32, level: u8, invert: bool) {
        self.uploaded = Some(Uploaded {
            width,
            height,
            per_pixel: false,
            level: level as i32,
            invert,
        });
    }

    /// How the grey frame (uploaded by the caller) was thresholded: the global level, or the
    /// per-pixel levels of an adaptive threshold, whose upload this queues on the GPU's stream.
    pub fn set_weights(&mut self, weights: &GreyWeights<'_>) -> Result<()> {
        let grey = weights.grey;
        let pixels = grey.len();
        let s = &self.gpu.stream;
        let alloc_err = |e| cuda_err("allocating the threshold levels", e);
        let (per_pixel, level) = match weights.levels {
            ThresholdLevels::Global(t) => {
                self.set_global_level(grey.width, grey.height, *t, weights.invert);
                return Ok(());
            }
            ThresholdLevels::Local {
                width,
                height,
                levels,
            } => {
                if (*width, *height) != (grey.width, grey.height) || levels.len() != pixels {
                    return Err(Error::Invalid(format!(
                        "sub-pixel centroid: the threshold levels are {width}x{height} but the \
                         grey frame is {}x{}",
                        grey.width, grey.height
                    )));
                }
                if self.levels.len() < pixels {
                    // SAFETY: written by the upload below before any read.
                    self.levels = unsafe { s.alloc::<i32>(pixels) }.map_err(alloc_err)?;
                }
                s.memcpy_htod(levels, &mut self.levels.slice_mut(0..pixels))
                    .map_err(|e| cuda_err("uploading the threshold levels", e))?;
                (true, 0)
            }
        };
        self.uploaded = Some(Uploaded {
            width: grey.width,
            height: grey.height,
            per_pixel,
            level,
            invert: weights.invert,
        });
        Ok(())
    }

    /// The device sums of the last `launch` (3 × count: Σ w, Σ w·x, Σ w·y per label), if it
    /// had components.
    pub fn sums(&self) -> Option<&CudaSlice<u64>> {
        self.sums.as_ref().filter(|_| self.queued_sums > 0)
    }

    /// Queues the accumulation over `labels` (`width × height`, numbered 1..=count; other
    /// values are ignored) and the download of the sums. `grey` must hold the frame
    /// `set_weights` described.
    pub fn launch(
        &mut self,
        labels: &CudaSlice<u32>,
        grey: &DeviceGrey,
        width: u32,
        height: u32,
        count: u32,
    ) -> Result<()> {
        let up = self
            .uploaded
            .filter(|u| (u.width, u.height) == (width, height))
            .ok_or_else(|| no_grey_frame(width, height))?;
        let grey = frame_grey(labels, grey, (width, height), FrameStrides::ONE)?;
        let n = 3 * count as usize;
        self.queued_sums = 0;
        self.early = None;
        if n == 0 {
            return Ok(());
        }
        self.host_room(n)?;
        let sums = cleared_sums(&self.gpu, &mut self.sums, n, "centroid sums")?;
        let s = &self.gpu.stream;
        let args = AccumulateArgs {
            labels: raw_device_ptr(labels, s),
            grey: raw_device_ptr(grey, s),
            levels: raw_device_ptr(&self.levels, s),
            per_pixel: up.per_pixel,
            level: up.level,
            level_at: 0,
            invert: up.invert,
            sums: raw_device_ptr(sums, s),
            count,
            count_at: 0,
            width,
            height,
            frames: FrameStrides::ONE,
        };
        // SAFETY: labels and grey (and levels when per_pixel) hold width × height values, sums
        // 3 × count, all of this context and alive until the download below is done.
        unsafe { launch_accumulate(&self.gpu, &self.accumulate, &args)? };
        self.queue_download(n)
    }

    /// Queues the accumulation of a frame thresholded on the device (`GreyStage`) before the
    /// host has read its component count or its level: the kernel reads the count at
    /// `count_at` and the level where `level` says, into sums with room for the most
    /// components of a frame so far. The GPU sums while the host waits for the count; then
    /// `finish_early`. `grey` must hold the frame, `labels` its label image numbered
    /// 1..=count.
    /// For a frame set (`frames`), `width × height` is each frame's size and each frame's
    /// level is its own (`QueuedLevel::OnDevice`: one a frame).
    #[allow(clippy::too_many_arguments)]
    pub fn launch_early(
        &mut self,
        labels: &CudaSlice<u32>,
        grey: &DeviceGrey,
        (width, height): (u32, u32),
        frames: FrameStrides,
        invert: bool,
        level: QueuedLevel<'_>,
        count_at: &CudaSlice<u32>,
    ) -> Result<()> {
        self.queued_sums = 0;
        let room = self.early_room;
        let sizes = ((width, height), frames);
        self.queue_sums(labels, grey, sizes, (invert, level), (room, Some(count_at)))?;
        self.early = Some(room);
        Ok(())
    }

    /// The sums of every component of a frame set (`frames`, each `width × height`, each with
    /// its own level), queued with their download: a set with more components than
    /// `launch_early` had room for.
    #[allow(clippy::too_many_arguments)]
    pub fn launch_set(
        &mut self,
        labels: &CudaSlice<u32>,
        grey: &DeviceGrey,
        (width, height): (u32, u32),
        frames: FrameStrides,
        invert: bool,
        level: QueuedLevel<'_>,
        count: u32,
    ) -> Result<()> {
        let n = 3 * count as usize;
        self.queued_sums = 0;
        self.early = None;
        if n == 0 {
            return Ok(());
        }
        self.host_room(n)?;
        let sizes = ((width, height), frames);
        self.queue_sums(labels, grey, sizes, (invert, level), (count as usize, None))?;
        self.queue_download(n)
    }

    /// Clears sums for `room` components and queues `sp_accumulate` over the frames (each
    /// `width × height`, laid out as `frames` says) with one level a frame, the count read at
    /// `count_at` (bounded by `room`) or `room` itself.
    fn queue_sums(
        &mut self,
        labels: &CudaSlice<u32>,
        grey: &DeviceGrey,
        ((width, height), frames): ((u32, u32), FrameStrides),
        (invert, level): (bool, QueuedLevel<'_>),
        (room, count_at): (usize, Option<&CudaSlice<u32>>),
    ) -> Result<()> {
        let grey = frame_grey(labels, grey, (width, height), frames)?;
        let sums = cleared_sums(&self.gpu, &mut self.sums, 3 * room, "centroid sums")?;
        let s = &self.gpu.stream;
        let (level, level_at) = match level {
            QueuedLevel::Known(t) => (t as i32, 0),
            QueuedLevel::OnDevice(at) => (0, raw_device_ptr(at, s)),
        };
        let args = AccumulateArgs {
            labels: raw_device_ptr(labels, s),
            grey: raw_device_ptr(grey, s),
            levels: raw_device_ptr(&self.levels, s),
            per_pixel: false,
            level,
            level_at,
            invert,
            sums: raw_device_ptr(sums, s),
            count: room as u32,
            count_at: count_at.map_or(0, |c| raw_device_ptr(c, s)),
            width,
            height,
            frames,
        };
        // SAFETY: the frames' labels and grey lie as `frames` says within their buffers
        // (checked by `frame_grey`), sums hold 3 × room, the count and the levels (one a frame)
        // are u32s of the stage that made them; all of this context and alive until the stream
        // has run the kernel (the caller waits for the frame before reusing any of them).
        unsafe { launch_accumulate(&self.gpu, &self.accumulate, &args) }
    }

    /// After `launch_early`, with the frame's component `count` read: queues the sums'
    /// download and returns true, or returns false when the frame has more components than
    /// the sums had room for (nothing queued: the caller `launch`es the frame's sums after
    /// `set_weights`; the room grows for the next frames).
    pub fn finish_early(&mut self, count: u32) -> Result<bool> {
        let Some(room) = self.early.take() else {
            return Ok(false);
        };
        let count = count as usize;
        self.early_room = self.early_room.max(count);
        if count > room {
            return Ok(false);
        }
        self.queue_download(3 * count)?;
        Ok(true)
    }

    /// Room for `n` sums on the host (page-locked).
    fn host_room(&mut self, n: usize) -> Result<()> {
        if self.host_sums.as_ref().is_none_or(|h| h.len() < n) {
            // A copy queued before (its frame failed before `fetch`) may still be writing.
            self.gpu
                .stream
                .synchronize()
                .map_err(|e| cuda_err("waiting for the centroid sums", e))?;
            self.host_sums = None;
            self.host_sums = Some(PinnedBuffer::alloc(
                &self.gpu,
                n.next_power_of_two(),
                false,
            )?);
        }
        Ok(())
    }

    /// Queues the download of the first `n` sums (3 × count) for `fetch`.
    fn queue_download(&mut self, n: usize) -> Result<()> {
        self.queued_sums = 0;
        if n == 0 {
            return Ok(());
        }
        self.host_room(n)?;
        let s = &self.gpu.stream;
        let sums = self
            .sums
            .as_ref()
            .filter(|sums| sums.len() >= n)
            .ok_or_else(|| Error::Invalid("sub-pixel centroid: no sums were queued".into()))?;
        let host = self.host_sums.as_mut().expect("allocated above");
        let dst = &mut host.as_mut_slice()[..n];
        let copied = sums.slice(0..n);
        let (src, _sync) = cudarc::driver::DevicePtr::device_ptr(&copied, s);
        // SAFETY: `dst` is page-locked and holds n sums; it is reallocated only after the
        // stream has been waited for (`host_room`), and read only after `fetch` waits for it.
        unsafe { cudarc::driver::result::memcpy_dtoh_async(dst, src, s.cu_stream()) }
            .map_err(|e| cuda_err("downloading the centroid sums", e))?;
        self.queued_sums = n;
        Ok(())
    }

    /// The centroids of the `stats` rows (labeled 1..=count) that `keep` accepts, from the sums
    /// `launch` queued for every component. Synchronizes the stream.
    pub fn fetch(&self, stats: &[ComponentStats], keep: Keep<'_>) -> Result<Vec<SubpixelCentroid>> {
        self.gpu
            .stream
            .synchronize()
            .map_err(|e| cuda_err("waiting for the centroid sums", e))?;
        let sums = match &self.host_sums {
            Some(host) => &host.as_slice()[..self.queued_sums],
            None => &[][..],
        };
        // A row without sums (or without weight) gets weight 0 here and is refused below.
        let centroid = |st: &ComponentStats| {
            let row = st.label.checked_sub(1).map(|k| 3 * k as usize);
            match row.and_then(|i| sums.get(i..i + 3)) {
                Some(&[w, wx, wy]) => SubpixelCentroid::from_sums(st.label, w, wx, wy),
                _ => SubpixelCentroid::from_sums(st.label, 0, 0, 0),
            }
        };
        // Every row converted in place (on the pool for many rows), the rows `keep` refuses
        // dropped after (none where the rows were filtered on the device): a filtered collect
        // built its result in pieces, in fresh pages, at several times the cost.
        let (some_refused, some_missing) = (AtomicBool::new(false), AtomicBool::new(false));
        let mut out = Vec::new();
        convert_rows(stats, 0, &mut out, |_, st| {
            let c = centroid(st);
            if !keep(st) {
                some_refused.store(true, Ordering::Relaxed);
            } else if c.weight == 0 {
                some_missing.store(true, Ordering::Relaxed);
            }
            c
        });
        if some_refused.into_inner() {
            let mut kept = stats.iter().map(keep);
            out.retain(|_| kept.next().unwrap_or(false));
        }
        let missing = some_missing
            .into_inner()
            .then(|| out.iter().find(|c| c.weight == 0))
            .flatten();
        match missing {
            Some(c) => Err(Error::Invalid(format!(
                "sub-pixel centroid: component {} has no weighted pixel on the GPU",
                c.label
            ))),
            None => Ok(out),
        }
    }
}
