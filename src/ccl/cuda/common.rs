//! Pieces every CUDA labeler shares: the statistics row layout, the per-step event pool, and
//! the download of the component count and statistics through pinned memory.

use super::{cuda_err, Gpu};
use crate::ccl::stats::ComponentStats;
use crate::ccl::{Connectivity, ResidentTiming, StepTime};
use crate::error::{Error, Result};
use cudarc::driver::{
    CudaEvent, CudaFunction, CudaSlice, DeviceRepr, LaunchArgs, PinnedHostSlice, PushKernelArg,
};
use std::sync::atomic::{AtomicU64, Ordering};

/// Statistics rows downloaded together with the component count (see `StatsDownload::fetch`).
pub const EAGER_ROWS: usize = 1024;

/// Mirror of `struct GpuStats` in kernels/common.cuh.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GpuStats {
    pub sum_x: u64,
    pub sum_y: u64,
    pub area: u32,
    pub min_x: u32,
    pub max_x: u32,
    pub max_y: u32,
    pub top: u32,
    pub pad: u32,
}

// SAFETY: plain old data with the same layout as the CUDA struct.
unsafe impl DeviceRepr for GpuStats {}
// SAFETY: all-zero bits are a valid value (integers only).
unsafe impl cudarc::driver::ValidAsZeroBits for GpuStats {}

impl GpuStats {
    pub fn to_stats(self, label: u32) -> ComponentStats {
        ComponentStats {
            label,
            left: self.min_x,
            top: self.top,
            width: self.max_x - self.min_x + 1,
            height: self.max_y - self.top + 1,
            area: self.area as u64,
            sum_x: self.sum_x,
            sum_y: self.sum_y,
            centroid_x: self.sum_x as f64 / self.area as f64,
            centroid_y: self.sum_y as f64 / self.area as f64,
        }
    }
}

/// A growing pool of timing events: event i starts step i, event i + 1 ends it.
#[derive(Default)]
pub struct StepEvents {
    events: Vec<CudaEvent>,
    /// While off, `record` records nothing: during a frame graph's capture (events inside a
    /// graph do not time its steps, `frame_graph`) and in runs nobody times (a caller's device
    /// arrays, where each event is host time before the next launch).
    off: bool,
}

impl StepEvents {
    /// Turns recording off or on again.
    pub fn set_off(&mut self, off: bool) {
        self.off = off;
    }

    /// Records event `i` on the stream, growing the pool when needed.
    pub fn record(&mut self, gpu: &Gpu, i: usize) -> Result<()> {
        if self.off {
            return Ok(());
        }
        while self.events.len() <= i {
            self.events.push(gpu.timing_event()?);
        }
        self.events[i]
            .record(&gpu.stream)
            .map_err(|e| cuda_err("recording an event", e))
    }

    /// Waits until event `i` has happened.
    pub fn wait(&self, i: usize) -> Result<()> {
        self.events[i]
            .synchronize()
            .map_err(|e| cuda_err("waiting for the GPU", e))
    }

    /// Milliseconds between events `from` and `to`.
    pub fn elapsed_ms(&self, from: usize, to: usize) -> Result<f64> {
        self.events[from]
            .elapsed_ms(&self.events[to])
            .map(|ms| ms as f64)
            .map_err(|e| cuda_err("reading event times", e))
    }

    /// The timing of a run whose step i ended at event i + 1 (event 0 recorded before the
    /// first): waits for the last event.
    pub fn resident_timing(&self, steps: &[impl AsRef<str>]) -> Result<ResidentTiming> {
        let last = steps.len();
        self.wait(last)?;
        Ok(ResidentTiming {
            total_ms: self.elapsed_ms(0, last)?,
            steps: self.step_times(steps)?,
            count: 0,
        })
    }

    /// The durations of `steps` (step i between events i and i + 1).
    pub fn step_times(&self, steps: &[impl AsRef<str>]) -> Result<Vec<StepTime>> {
        steps
            .iter()
            .enumerate()
            .map(|(i, name)| Ok(StepTime::new(name.as_ref(), self.elapsed_ms(i, i + 1)?)))
            .collect()
    }
}

/// The error for a component count above the `rows` a statistics buffer holds (a kernel fault).
pub fn check_count(count: usize, rows: usize) -> Result<()> {
    if count > rows {
        return Err(Error::Cuda {
            step: "downloading statistics".into(),
            why: format!("component count {count} exceeds the buffer ({rows})"),
        });
    }
    Ok(())
}

/// Pinned host buffers for the component count and the statistics rows.
pub struct StatsDownload {
    host_total: PinnedHostSlice<u32>,
    /// Grows on demand to the largest component count seen.
    host_stats: Option<PinnedHostSlice<GpuStats>>,
}

impl StatsDownload {
    pub fn new(gpu: &Gpu) -> Result<Self> {
        // SAFETY: read only after a copy from the device has written it.
        let host_total = unsafe { gpu.ctx.alloc_pinned_with_flags::<u32>(1, 0) }
            .map_err(|e| cuda_err("allocating pinned memory", e))?;
        Ok(Self {
            host_total,
            host_stats: None,
        })
    }

    /// Downloads the component count and, when `want_stats`, the first `count` rows of `stats`
    /// as rows labeled 1..=count. The count and the first EAGER_ROWS rows come back together,
    /// before the count is known: a frame with few components (the marker case) needs a single
    /// stream sync. Synchronizes the stream.
    pub fn fetch(
        &mut self,
        gpu: &Gpu,
        total: &CudaSlice<u32>,
        stats: &CudaSlice<GpuStats>,
        want_stats: bool,
    ) -> Result<(u32, Option<Vec<ComponentStats>>)> {
        let s = &gpu.stream;
        let dl = |e| cuda_err("downloading results", e);
        s.memcpy_dtoh(total, &mut self.host_total).map_err(dl)?;
        let eager = if want_stats {
            EAGER_ROWS.min(stats.len())
        } else {
            0
        };
        self.copy_rows(gpu, stats, eager)?;
        // Copies into pinned memory are asynchronous, and with event tracking off the pinned
        // slices do not wait for them by themselves: wait for the stream before reading.
        s.synchronize().map_err(dl)?;
        let count = self.host_total.as_slice().map_err(dl)?[0];
        if !want_stats {
            return Ok((count, None));
        }
        let n = count as usize;
        check_count(n, stats.len())?;
        if n > eager {
            self.copy_rows(gpu, stats, n)?;
            s.synchronize().map_err(dl)?;
        }
        let rows = match self.host_stats.as_ref() {
            Some(h) => &h.as_slice().map_err(dl)?[..n],
            None => &[][..],
        };
        Ok((
            count,
            Some(
                rows.iter()
                    .enumerate()
                    .map(|(i, g)| g.to_stats(i as u32 + 1))
                    .collect(),
            ),
        ))
    }

    /// Downloads the count alone (benchmarks).
    pub fn fetch_count(&mut self, gpu: &Gpu, total: &CudaSlice<u32>) -> Result<u32> {
        let dl = |e| cuda_err("downloading the count", e);
        gpu.stream
            .memcpy_dtoh(total, &mut self.host_total)
            .map_err(dl)?;
        gpu.stream.synchronize().map_err(dl)?;
        Ok(self.host_total.as_slice().map_err(dl)?[0])
    }

    /// Queues a copy of the first `rows` rows into the pinned buffer, growing it when needed.
    fn copy_rows(&mut self, gpu: &Gpu, stats: &CudaSlice<GpuStats>, rows: usize) -> Result<()> {
        if rows == 0 {
            return Ok(());
        }
        if self.host_stats.as_ref().is_none_or(|h| h.len() < rows) {
            // SAFETY: only rows written by a copy from the device are read.
            self.host_stats = Some(
                unsafe {
                    gpu.ctx
                        .alloc_pinned_with_flags::<GpuStats>(rows.max(EAGER_ROWS), 0)
                }
                .map_err(|e| cuda_err("allocating pinned memory", e))?,
            );
        }
        let host = self.host_stats.as_mut().expect("allocated above");
        let dst = host
            .as_mut_slice()
            .map_err(|e| cuda_err("downloading results", e))?;
        gpu.stream
            .memcpy_dtoh(&stats.slice(0..rows), &mut dst[..rows])
            .map_err(|e| cuda_err("downloading results", e))
    }
}

/// Per-element features of the OTF variants (HA+OTF: per segment head; FLSL+OTF: per run), one
/// array per field: `Feat` in common.cuh.
pub struct OtfFeatures {
    area: CudaSlice<u32>,
    min_x: CudaSlice<u32>,
    max_x: CudaSlice<u32>,
    max_y: CudaSlice<u32>,
    sum_x: CudaSlice<u64>,
    sum_y: CudaSlice<u64>,
}

impl OtfFeatures {
    /// Device bytes per element.
    pub const BYTES_PER_ELEMENT: usize = 4 * 4 + 2 * 8;

    /// Arrays of `n` elements, uninitialised: the strip kernels write an element's features
    /// before any kernel reads them.
    pub fn alloc(gpu: &Gpu, n: usize) -> Result<OtfFeatures> {
        let s = &gpu.stream;
        let e = |e| cuda_err("allocating device buffers", e);
        // SAFETY: see above; every element read was written by a strip kernel first.
        unsafe {
            Ok(OtfFeatures {
                area: s.alloc::<u32>(n).map_err(e)?,
                min_x: s.alloc::<u32>(n).map_err(e)?,
                max_x: s.alloc::<u32>(n).map_err(e)?,
                max_y: s.alloc::<u32>(n).map_err(e)?,
                sum_x: s.alloc::<u64>(n).map_err(e)?,
                sum_y: s.alloc::<u64>(n).map_err(e)?,
            })
        }
    }

    /// Pushes the six arrays in the order of the OTF kernels' trailing parameters
    /// `(area, min_x, max_x, max_y, sum_x, sum_y)`.
    pub fn push_args<'a>(&'a self, launch: &mut LaunchArgs<'a>) {
        launch
            .arg(&self.area)
            .arg(&self.min_x)
            .arg(&self.max_x)
            .arg(&self.max_y)
            .arg(&self.sum_x)
            .arg(&self.sum_y);
    }
}

/// Downloads a device label image into a `LabelImage`.
pub fn download_labels(
    gpu: &Gpu,
    labels: &CudaSlice<u32>,
    width: u32,
    height: u32,
) -> Result<crate::frame::image::LabelImage> {
    let mut data = vec![0u32; width as usize * height as usize];
    gpu.stream
        .memcpy_dtoh(labels, &mut data)
        .map_err(|e| cuda_err("downloading the label image", e))?;
    Ok(crate::frame::image::LabelImage {
        width,
        height,
        data,
    })
}

/// The error for an algorithm that only supports `supported`, asked for `connectivity`.
pub fn check_connectivity(
    name: &str,
    connectivity: Connectivity,
    supported: &[Connectivity],
) -> Result<()> {
    if !supported.contains(&connectivity) {
        return Err(crate::ccl::registry::unsupported_connectivity(
            name,
            connectivity,
        ));
    }
    Ok(())
}

/// The most components a `width × height` image can have: a checkerboard for 4-connectivity
/// (every other pixel), isolated pixels on every other row and column for 8-connectivity.
/// Statistics buffers are sized with it.
pub fn max_components(width: u32, height: u32, connectivity: Connectivity) -> usize {
    let (w, h) = (width as usize, height as usize);
    match connectivity {
        Connectivity::Four => (w * h).div_ceil(2),
        Connectivity::Eight => w.div_ceil(2) * h.div_ceil(2),
    }
}

/// Rows per block of the row kernels (one warp per row); BLOCK_ROWS in ha4.cu, which sizes the
/// shared memory of HA's relabel.
pub const ROWS_PER_BLOCK: u32 = 8;

/// Launch geometry of a kernel with one warp per image row: blockDim = (32, rows_per_block).
fn warp_rows_launch(height: u32, rows_per_block: u32) -> cudarc::driver::LaunchConfig {
    cudarc::driver::LaunchConfig {
        grid_dim: (height.div_ceil(rows_per_block), 1, 1),
        block_dim: (32, rows_per_block, 1),
        shared_mem_bytes: 0,
    }
}

/// Launch geometry of a row kernel: blockDim = (32, ROWS_PER_BLOCK), one warp per image row.
pub fn rows_launch(height: u32) -> cudarc::driver::LaunchConfig {
    warp_rows_launch(height, ROWS_PER_BLOCK)
}

/// Most warps that share one border row in the border-merge kernels.
const BORDER_PARTS_MAX: u32 = 16;

/// Launch geometry of a border-merge kernel: one warp per border row and part of it, the parts
/// (gridDim.y) being about 1024 pixels each. There are few border rows (one per strip), and a
/// warp per row alone leaves most of the GPU idle while each warp walks its row.
pub fn border_launch(borders: u32, width: u32) -> cudarc::driver::LaunchConfig {
    cudarc::driver::LaunchConfig {
        grid_dim: (
            borders.div_ceil(ROWS_PER_BLOCK),
            width.div_ceil(1024).clamp(1, BORDER_PARTS_MAX),
            1,
        ),
        block_dim: (32, ROWS_PER_BLOCK, 1),
        shared_mem_bytes: 0,
    }
}

/// Rows per block of the kernels that sum features in a shared-memory table (`TABLE_ROWS` in
/// common.cuh).
pub const TABLE_ROWS: u32 = 16;

/// Whether a frame `width` pixels wide fits the block table: an entry keeps Σ area · dy (dy the
/// row within the block) in 32 bits, at most (0 + 1 + … + TABLE_ROWS − 1) · width (`TableOf` in
/// common.cuh). Wider frames (over 35.7 million pixels) take the kernels without a table.
pub fn table_fits(width: u32) -> bool {
    let dy_sum = (TABLE_ROWS as u64) * (TABLE_ROWS as u64 - 1) / 2;
    dy_sum * width as u64 <= u32::MAX as u64
}

/// Launch geometry of a row kernel with a block table: blockDim = (32, TABLE_ROWS).
pub fn table_launch(height: u32) -> cudarc::driver::LaunchConfig {
    warp_rows_launch(height, TABLE_ROWS)
}

/// Launch geometry of the single-block row-count scan (`scan_rows`, SCAN_THREADS in common.cuh).
pub fn scan_launch() -> cudarc::driver::LaunchConfig {
    cudarc::driver::LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1024, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Rows per block of the numbering kernels (`NUMBER_ROWS` in common.cuh).
pub const NUMBER_ROWS: u32 = 16;

/// State of the one-pass root numbering (`number_rows_offset` in common.cuh): a look-back status
/// word per block of NUMBER_ROWS rows, and the epoch of the next launch. Every launch gets a new
/// epoch, so the words of earlier frames read as unpublished and need no clearing.
pub struct Lookback {
    pub status: CudaSlice<u64>,
    epoch: u32,
}

impl Lookback {
    /// Epochs are 1 .. 2^31 - 1 (31 bits of the status word; 0 is the cleared array's).
    const LAST_EPOCH: u32 = (1 << 31) - 1;

    pub fn new(gpu: &Gpu, height: u32) -> Result<Lookback> {
        let blocks = height.div_ceil(NUMBER_ROWS).max(1) as usize;
        let status = gpu
            .stream
            .alloc_zeros::<u64>(blocks)
            .map_err(|e| cuda_err("allocating device buffers", e))?;
        Ok(Lookback { status, epoch: 0 })
    }

    /// The epoch for the next launch; after the last one the array is cleared and epochs start
    /// again (stream order puts the clearing after every earlier launch).
    pub fn next_epoch(&mut self, gpu: &Gpu) -> Result<u32> {
        if self.epoch == Self::LAST_EPOCH {
            gpu.stream
                .memset_zeros(&mut self.status)
                .map_err(|e| cuda_err("clearing the look-back status", e))?;
            self.epoch = 0;
        }
        self.epoch += 1;
        Ok(self.epoch)
    }

    /// Queues the clearing of the status array and starts the epochs again at 1 for the next
    /// launch. A frame graph begins with it, so that its launches, all with epoch 1, find no
    /// word of an earlier launch published; the plain launches after it go on from epoch 2.
    pub fn restart(&mut self, gpu: &Gpu) -> Result<()> {
        gpu.stream
            .memset_zeros(&mut self.status)
            .map_err(|e| cuda_err("clearing the look-back status", e))?;
        self.epoch = 0;
        Ok(())
    }

    /// Launch geometry of a numbering kernel: blockDim = (32, NUMBER_ROWS), one warp per row.
    pub fn launch(height: u32) -> cudarc::driver::LaunchConfig {
        warp_rows_launch(height, NUMBER_ROWS)
    }
}

/// Fails with a clear message when a frame needs more GPU memory than is free.
pub fn check_free_memory(gpu: &Gpu, needed: usize, width: u32, height: u32) -> Result<()> {
    let (free, _) = gpu
        .ctx
        .mem_get_info()
        .map_err(|e| cuda_err("querying memory", e))?;
    if needed > free {
        return Err(Error::Cuda {
            step: "allocating buffers".into(),
            why: format!(
                "a {width}x{height} frame needs about {} MiB of GPU memory, {} MiB are free",
                needed >> 20,
                free >> 20
            ),
        });
    }
    Ok(())
}

/// Where the frame's mask is when the kernels start (FLSL and the HA family).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum MaskInput {
    /// Bit-packed, in `buffers.mask` (uploaded packed).
    Packed,
    /// Bytes in `buffers.bytes`, rows 16-byte aligned: the strip kernel packs them into
    /// `buffers.mask` itself, which saves the separate packing pass and its launch.
    Bytes,
    /// Bytes in `buffers.bytes` that `pack_bytes` packs first, as its own step ("pack bits").
    PackFirst,
}

/// Frames of at least this many pixels are packed by `pack_bytes16` before the strip kernel
/// rather than inside it. Measured on an H100 (`bench/device_call.rs`, 1920×1080 to 8192², the
/// papers' images): the strip kernel that packs the bytes itself was 2–5 % faster at every size,
/// so by default no frame is packed first (only widths the strip kernel's vector loads cannot
/// read); `set_pack_first_min_pixels` lets a benchmark compare the two forms on another GPU.
pub const PACK_FIRST_MIN_PIXELS: u64 = u64::MAX;

/// The threshold `MaskInput::for_bytes` uses: PACK_FIRST_MIN_PIXELS unless a benchmark set it.
static PACK_FIRST_FROM: AtomicU64 = AtomicU64::new(PACK_FIRST_MIN_PIXELS);

impl MaskInput {
    /// Bytes are packed inside the strip kernel when its vector loads allow (width % 16 == 0)
    /// and the frame is smaller than the pack-first threshold (PACK_FIRST_MIN_PIXELS, or what
    /// `set_pack_first_min_pixels` set).
    pub fn for_bytes(width: u32, height: u32) -> MaskInput {
        Self::for_size(width, height, Self::pack_first_min_pixels())
    }

    /// The form for a `width × height` byte mask when frames of `pack_first_from` pixels or
    /// more are packed first.
    pub fn for_size(width: u32, height: u32, pack_first_from: u64) -> MaskInput {
        let pixels = u64::from(width) * u64::from(height);
        if width % 16 == 0 && pixels < pack_first_from {
            MaskInput::Bytes
        } else {
            MaskInput::PackFirst
        }
    }

    /// Benchmarks only: frames of `pixels` or more are packed first from now on, in every
    /// labeler of the process (0: always; u64::MAX: only when the width needs it).
    pub fn set_pack_first_min_pixels(pixels: u64) {
        PACK_FIRST_FROM.store(pixels, Ordering::Relaxed);
    }

    /// The threshold in use (PACK_FIRST_MIN_PIXELS unless a benchmark set another).
    pub fn pack_first_min_pixels() -> u64 {
        PACK_FIRST_FROM.load(Ordering::Relaxed)
    }
}

/// Packs a byte mask (0 / non-zero per pixel) into the bit-packed mask with `pack_bytes`, or
/// with the vectorised `pack_bytes16` when rows start 16-byte aligned (width % 16 == 0).
/// `pack` and `pack16` are those kernels of the caller's module (every kernel file has them).
#[allow(clippy::too_many_arguments)]
pub fn launch_pack_bytes(
    gpu: &Gpu,
    pack: &CudaFunction,
    pack16: &CudaFunction,
    bytes: &CudaSlice<u8>,
    mask: &mut CudaSlice<u32>,
    width: u32,
    height: u32,
    words_per_row: usize,
) -> Result<()> {
    let (w, h, wpr) = (width as i32, height as i32, words_per_row as i32);
    let kernel = if width % 16 == 0 { pack16 } else { pack };
    // SAFETY: matches `pack_bytes[16](const uchar*, u32*, int, int, int)`; the caller sizes
    // `bytes` to width × height and `mask` to words_per_row × height.
    unsafe {
        gpu.stream
            .launch_builder(kernel)
            .arg(bytes)
            .arg(mask)
            .arg(&w)
            .arg(&h)
            .arg(&wpr)
            .launch(rows_launch(height))
            .map_err(|e| cuda_err("launching pack_bytes", e))?;
    }
    Ok(())
}

/// A device label image of `pixels` values, allocated once and kept (CCA alone never needs it).
pub fn ensure_label_image(
    gpu: &Gpu,
    out: &mut Option<CudaSlice<u32>>,
    pixels: usize,
) -> Result<()> {
    if out.is_none() {
        // SAFETY: the relabel kernels write every pixel of the label image before it is read.
        *out = Some(
            unsafe { gpu.stream.alloc::<u32>(pixels) }
                .map_err(|e| cuda_err("allocating the label image", e))?,
        );
    }
    Ok(())
}

/// The value of `#define name value` in a kernel source (tests: constants the host shares with
/// the kernels).
#[cfg(test)]
pub(super) fn define(source: &str, name: &str) -> u32 {
    source
        .lines()
        .find_map(|line| {
            let mut words = line.split_whitespace();
            match (words.next(), words.next(), words.next()) {
                (Some("#define"), Some(n), Some(v)) if n == name => v.parse().ok(),
                _ => None,
            }
        })
        .unwrap_or_else(|| panic!("no #define {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block shapes launched here are the ones the kernels size their shared memory for: a
    /// mismatch would index past it (the look-back's row table, the block feature table).
    #[test]
    fn block_shapes_match_the_kernels() {
        let common = include_str!("../../../kernels/common.cuh");
        assert_eq!(define(common, "NUMBER_ROWS"), NUMBER_ROWS);
        assert_eq!(define(common, "TABLE_ROWS"), TABLE_ROWS);
        assert_eq!(define(common, "SCAN_THREADS"), scan_launch().block_dim.0);
        let ha4 = include_str!("../../../kernels/ha4.cu");
        assert_eq!(define(ha4, "BLOCK_ROWS"), ROWS_PER_BLOCK);
        assert_eq!(Lookback::launch(100).block_dim, (32, NUMBER_ROWS, 1));
        assert_eq!(Lookback::launch(100).grid_dim.0, 7);
    }

    #[test]
    fn the_block_table_takes_frames_up_to_its_32_bit_row_sums() {
        assert!(table_fits(1) && table_fits(65536) && table_fits(35_791_394));
        assert!(!table_fits(35_791_395) && !table_fits(u32::MAX));
    }

    /// Widths the vector loads cannot take are always packed first; the others are packed
    /// inside the strip kernel below the threshold and first from it on.
    #[test]
    fn byte_masks_are_packed_first_from_the_threshold() {
        let from = 1u64 << 22;
        assert!(MaskInput::for_size(1920, 1080, from) == MaskInput::Bytes);
        assert!(MaskInput::for_size(2048, 2047, from) == MaskInput::Bytes);
        assert!(MaskInput::for_size(2048, 2048, from) == MaskInput::PackFirst);
        assert!(MaskInput::for_size(8192, 8192, from) == MaskInput::PackFirst);
        assert!(MaskInput::for_size(1918, 1080, from) == MaskInput::PackFirst);
        assert!(MaskInput::for_size(8192, 8192, u64::MAX) == MaskInput::Bytes);
        assert!(MaskInput::for_size(16, 1, 0) == MaskInput::PackFirst);
        // 2^32 × 2^32 does not overflow.
        assert!(MaskInput::for_size(u32::MAX - 15, u32::MAX, u64::MAX) == MaskInput::Bytes);
    }
}

/// `n` zeroed u64 per-component sums on the GPU's stream, in `slot` (grown to a power of two
/// when too small, reused otherwise); `what` names them in errors.
pub fn cleared_sums<'a>(
    gpu: &Gpu,
    slot: &'a mut Option<CudaSlice<u64>>,
    n: usize,
    what: &str,
) -> Result<&'a mut CudaSlice<u64>> {
    let s = &gpu.stream;
    if slot.as_ref().is_none_or(|b| b.len() < n) {
        *slot = None;
        *slot = Some(
            s.alloc_zeros::<u64>(n.next_power_of_two())
                .map_err(|e| cuda_err(&format!("allocating the {what}"), e))?,
        );
    }
    let sums = slot.as_mut().expect("allocated above");
    s.memset_zeros(&mut sums.slice_mut(0..n))
        .map_err(|e| cuda_err(&format!("clearing the {what}"), e))?;
    Ok(sums)
}
