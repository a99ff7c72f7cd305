//! The fiducial detector's device buffers: the frame's (row sums, dark mask, each window's
//! labels), the statistics rows of each window's labeling, the candidates of a frame with the outline pool they are
//! traced into, and the quads to decode with their outcomes; and the pinned host memory the
//! frame's counts and outcomes come back through. Each grows to the largest need seen and is
//! kept from frame to frame.

use crate::ccl::cuda::subpixel::raw_device_ptr;
use crate::error::{Error, Result};
use crate::fiducial::candidates::Quad;
use crate::gpu::buffers::{alloc_err, at_least};
use crate::gpu::staging::download_prefix;
use crate::gpu::{cuda_err, Gpu};
use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, PinnedHostSlice, ValidAsZeroBits};

/// Mirror of `struct FidCandidate` in kernels/fiducial.cu.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GpuCandidate {
    /// Corners x0 y0 … x3 y3, clockwise on screen.
    pub quad: [f64; 8],
    /// Index of the threshold window it was found at.
    pub window: u32,
    /// Its component's label (labels run in raster order of the components' first pixels).
    pub label: u32,
}

// SAFETY: plain old data with the same layout as the CUDA struct.
unsafe impl DeviceRepr for GpuCandidate {}
// SAFETY: all-zero bits are a valid value (numbers only).
unsafe impl ValidAsZeroBits for GpuCandidate {}

/// Mirror of `struct FidLongOutline` in kernels/fiducial.cu: a component whose outline
/// `fid_long_outlines` traces by seeds.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GpuLongOutline {
    /// Its room in the pool: `room` points from point `at`.
    pub at: u64,
    pub room: u64,
    /// Points after which its trace stops.
    pub limit: u64,
    pub window: u32,
    pub label: u32,
    /// Its box.
    pub left: u32,
    pub top: u32,
    pub width: u32,
    pub height: u32,
    /// Its first pixel's x, on row `top`.
    pub start: u32,
    pub pad: u32,
}

// SAFETY: plain old data with the same layout as the CUDA struct.
unsafe impl DeviceRepr for GpuLongOutline {}
// SAFETY: all-zero bits are a valid value (numbers only).
unsafe impl ValidAsZeroBits for GpuLongOutline {}

/// Mirror of `struct FidOutcome` in kernels/fiducial.cu.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GpuOutcome {
    /// The refined quad, or the outline's when the refinement failed.
    pub corners: [f64; 8],
    /// 1: a marker of `dictionary`; 0: rejected.
    pub marker: u32,
    pub dictionary: u32,
    pub id: u32,
    pub rotation: u32,
    pub hamming: u32,
    pub pad: u32,
}

// SAFETY: plain old data with the same layout as the CUDA struct.
unsafe impl DeviceRepr for GpuOutcome {}
// SAFETY: all-zero bits are a valid value (numbers only).
unsafe impl ValidAsZeroBits for GpuOutcome {}

/// The buffers of one frame size.
pub struct FrameBuffers {
    pub width: u32,
    pub height: u32,
    /// Each pixel's sum over its window's column (fid_column_sums).
    pub column_sums: CudaSlice<u32>,
    /// 1 where dark (fid_threshold), the labeling's input: each window's mask, one after the
    /// other (`code_stride` apart), all made before the first labeling.
    pub masks: CudaSlice<u8>,
    /// The label image of each threshold window, one after the other.
    pub labels: CudaSlice<u32>,
    /// Each window's neighbour codes (fid_neighbours: a byte a pixel), one after the other.
    pub codes: CudaSlice<u8>,
    pub windows: usize,
}

impl FrameBuffers {
    pub fn alloc(gpu: &Gpu, width: u32, height: u32, windows: usize) -> Result<FrameBuffers> {
        let pixels = width as usize * height as usize;
        let s = &gpu.stream;
        // SAFETY: the kernels write every pixel of each buffer before the next kernel reads it.
        unsafe {
            Ok(FrameBuffers {
                width,
                height,
                column_sums: s.alloc::<u32>(pixels).map_err(alloc_err)?,
                masks: s
                    .alloc::<u8>(code_stride(pixels).saturating_mul(windows))
                    .map_err(alloc_err)?,
                labels: s
                    .alloc::<u32>(label_stride(pixels).saturating_mul(windows))
                    .map_err(alloc_err)?,
                codes: s
                    .alloc::<u8>(code_stride(pixels).saturating_mul(windows))
                    .map_err(alloc_err)?,
                windows,
            })
        }
    }

    pub fn pixels(&self) -> usize {
        self.width as usize * self.height as usize
    }

    /// Values from one window's label image to the next's.
    pub fn label_stride(&self) -> usize {
        label_stride(self.pixels())
    }

    /// Bytes from one window's neighbour codes (or mask) to the next's.
    pub fn code_stride(&self) -> usize {
        code_stride(self.pixels())
    }

    /// The device address of window `index`'s mask.
    pub fn mask_of(&self, index: usize, stream: &CudaStream) -> u64 {
        raw_device_ptr(&self.masks, stream) + (index * self.code_stride()) as u64
    }

    /// The device address of window `index`'s label image.
    pub fn labels_of(&self, index: usize, stream: &CudaStream) -> u64 {
        let bytes = (index * self.label_stride() * std::mem::size_of::<u32>()) as u64;
        raw_device_ptr(&self.labels, stream) + bytes
    }
}

/// Each window's label image starts on a 256-byte boundary, as a buffer of its own would (the
/// labeler may store whole vectors).
fn label_stride(pixels: usize) -> usize {
    pixels.div_ceil(64) * 64
}

/// Each window's neighbour codes and mask start on a 256-byte boundary too (the labeler
/// reads a mask in 16-byte vectors).
fn code_stride(pixels: usize) -> usize {
    pixels.div_ceil(256) * 256
}

/// The candidates of one frame: their list, the pool their outlines are traced into, the long
/// outlines left to `fid_long_outlines`, the quads to decode (the candidates in order, each
/// outline once) with their outcomes, and four counters: pool points taken, candidates found,
/// long outlines listed (these three keep counting past the capacities, so that the host
/// learns how much room a frame needs) and quads to decode.
pub struct Candidates {
    /// Outline points, x y each (int2 in the kernel).
    pub pool: CudaSlice<i32>,
    pub list: CudaSlice<GpuCandidate>,
    pub long: CudaSlice<GpuLongOutline>,
    pub counters: CudaSlice<u64>,
    /// x0 y0 … x3 y3 per quad, room for as many as the list holds.
    pub quads: CudaSlice<f64>,
    pub outcomes: CudaSlice<GpuOutcome>,
}

/// The counters of `Candidates`.
pub const COUNTERS: usize = 4;

/// What a frame's candidate kernels counted: pool points taken, candidates found, long
/// outlines listed, quads to decode.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CandidateCounts {
    pub points: u64,
    pub candidates: u64,
    pub long: u64,
    pub quads: u64,
}

/// Outline points the pool starts with: one per pixel of the frame. A component that passes
/// its statistics reserves room for the longest outline it can have (four visits a pixel, at
/// most the longest trace), and candidates are a few of the components.
const POOL_POINTS_PER_PIXEL: usize = 1;
/// Candidates the list starts with.
const FIRST_CAPACITY: usize = 4096;
/// Long outlines the list for `fid_long_outlines` starts with.
const FIRST_LONG_CAPACITY: usize = 1024;

impl Candidates {
    pub fn alloc(
        gpu: &Gpu,
        pool_points: usize,
        capacity: usize,
        long_capacity: usize,
    ) -> Result<Candidates> {
        let s = &gpu.stream;
        let capacity = capacity.max(1);
        // SAFETY: fid_candidates writes each pool point and list entry before the host or a
        // later kernel reads it, fid_distinct (or the host) each quad and fid_decode each
        // outcome of the counters[3] that are read; the counters are zeroed before every frame.
        unsafe {
            Ok(Candidates {
                pool: s.alloc::<i32>(2 * pool_points.max(1)).map_err(alloc_err)?,
                list: s.alloc::<GpuCandidate>(capacity).map_err(alloc_err)?,
                long: s
                    .alloc::<GpuLongOutline>(long_capacity.max(1))
                    .map_err(alloc_err)?,
                counters: s.alloc_zeros::<u64>(COUNTERS).map_err(alloc_err)?,
                quads: s.alloc::<f64>(8 * capacity).map_err(alloc_err)?,
                outcomes: s.alloc::<GpuOutcome>(capacity).map_err(alloc_err)?,
            })
        }
    }

    /// The buffers a frame of `pixels` pixels starts with.
    pub fn for_frame(gpu: &Gpu, pixels: usize) -> Result<Candidates> {
        Self::alloc(
            gpu,
            (pixels * POOL_POINTS_PER_PIXEL).max(1 << 16),
            FIRST_CAPACITY,
            FIRST_LONG_CAPACITY,
        )
    }

    pub fn pool_points(&self) -> u64 {
        (self.pool.len() / 2) as u64
    }

    pub fn capacity(&self) -> u64 {
        self.list.len() as u64
    }

    pub fn long_capacity(&self) -> u64 {
        self.long.len() as u64
    }

    /// Whether everything `counts` says the frame needed fitted.
    pub fn fits(&self, counts: CandidateCounts) -> bool {
        counts.points <= self.pool_points()
            && counts.candidates <= self.capacity()
            && counts.long <= self.long_capacity()
    }

    /// Zeroes the counters before a frame.
    pub fn clear(&mut self, gpu: &Gpu) -> Result<()> {
        gpu.stream
            .memset_zeros(&mut self.counters)
            .map_err(|e| cuda_err("clearing the candidate counters", e))
    }

    /// Makes `quads` the quads to decode, their number counters[3].
    pub fn upload_quads(&mut self, gpu: &Gpu, quads: &[Quad]) -> Result<()> {
        let up = |e| cuda_err("uploading the candidate quads", e);
        let flat: Vec<f64> = quads.iter().flatten().flatten().copied().collect();
        if !flat.is_empty() {
            gpu.stream
                .memcpy_htod(&flat, &mut self.quads.slice_mut(0..flat.len()))
                .map_err(up)?;
        }
        gpu.stream
            .memcpy_htod(&[quads.len() as u64], &mut self.counters.slice_mut(3..4))
            .map_err(up)
    }

    /// The first `n` candidates.
    pub fn download(&self, gpu: &Gpu, n: usize) -> Result<Vec<GpuCandidate>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        gpu.stream
            .clone_dtoh(&self.list.slice(0..n))
            .map_err(|e| cuda_err("downloading the candidate quads", e))
    }
}

/// Outcomes that come back with the counters before their number is known, at least.
const EAGER_OUTCOMES: usize = 64;

/// Pinned host memory for a frame's counters and outcomes: the counters and as many outcomes
/// as the last frame had (and a quarter more) come back together, so that a frame needs one
/// stream sync unless it has many more quads than the last.
pub struct Readback {
    counters: PinnedHostSlice<u64>,
    outcomes: Option<PinnedHostSlice<GpuOutcome>>,
    /// Outcomes to copy before their number is known.
    eager: usize,
    /// Outcomes of this frame's decode in `outcomes`.
    copied: usize,
}

impl Readback {
    pub fn new(gpu: &Gpu) -> Result<Readback> {
        // SAFETY: read only after a copy from the device has written it.
        let counters = unsafe { gpu.ctx.alloc_pinned_with_flags::<u64>(COUNTERS, 0) }
            .map_err(|e| cuda_err("allocating pinned memory", e))?;
        Ok(Readback {
            counters,
            outcomes: None,
            eager: EAGER_OUTCOMES,
            copied: 0,
        })
    }

    /// The counters and the first outcomes of `found`, once the stream has passed the frame's
    /// kernels (it waits for them).
    pub fn counts(&mut self, gpu: &Gpu, found: &Candidates) -> Result<CandidateCounts> {
        let dl = |e| cuda_err("downloading the candidate counts", e);
        gpu.stream
            .memcpy_dtoh(&found.counters, &mut self.counters)
            .map_err(dl)?;
        let eager = self.eager.min(found.outcomes.len());
        self.copy_outcomes(gpu, found, eager)?;
        self.copied = eager;
        // Copies into pinned memory are asynchronous: wait for the stream before reading.
        gpu.stream.synchronize().map_err(dl)?;
        let c = self.counters.as_slice().map_err(dl)?;
        Ok(CandidateCounts {
            points: c[0],
            candidates: c[1],
            long: c[2],
            quads: c[3],
        })
    }

    /// Forgets the outcomes that came back with the counters: the quads are decoded again.
    pub fn decoded_again(&mut self) {
        self.copied = 0;
    }

    /// The first `n` outcomes of `found` (`n` its counters[3], read by `counts` or written by
    /// the host), downloading those that did not come back with the counters.
    pub fn outcomes(&mut self, gpu: &Gpu, found: &Candidates, n: usize) -> Result<Vec<GpuOutcome>> {
        let dl = |e| cuda_err("downloading the marker outcomes", e);
        if n > found.outcomes.len() {
            return Err(Error::Cuda {
                step: "downloading the marker outcomes".into(),
                why: format!("{n} quads exceed the buffer ({})", found.outcomes.len()),
            });
        }
        if n > self.copied {
            self.copy_outcomes(gpu, found, n)?;
            gpu.stream.synchronize().map_err(dl)?;
            self.copied = n;
        }
        self.eager = (n + n / 4).max(EAGER_OUTCOMES);
        match self.outcomes.as_ref() {
            Some(h) if n > 0 => Ok(h.as_slice().map_err(dl)?[..n].to_vec()),
            _ => Ok(Vec::new()),
        }
    }

    /// Queues a copy of the first `n` outcomes into the pinned buffer, growing it when needed.
    fn copy_outcomes(&mut self, gpu: &Gpu, found: &Candidates, n: usize) -> Result<()> {
        let step = "downloading the marker outcomes";
        download_prefix(gpu, &mut self.outcomes, &found.outcomes, n, 0, step)
    }
}

/// OpenCV's statistics rows of one window's labeling (the centroids are written too, unused).
#[derive(Default)]
pub struct StatsRows {
    pub stats: Option<CudaSlice<i32>>,
    pub centroids: Option<CudaSlice<f64>>,
}

impl StatsRows {
    /// Room for `rows` rows.
    pub fn ensure(&mut self, gpu: &Gpu, rows: usize) -> Result<()> {
        at_least(gpu, &mut self.stats, 5 * rows)?;
        at_least(gpu, &mut self.centroids, 2 * rows)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cuda_fields(name: &str) -> Vec<String> {
        crate::gpu::kernels::struct_fields(include_str!("../../../kernels/fiducial.cu"), name)
    }

    /// The Rust mirrors have the CUDA structs' fields in the same order and the same size.
    #[test]
    fn mirrors_match_the_kernel_structs() {
        assert_eq!(
            cuda_fields("FidCandidate"),
            ["double quad[8]", "u32 window", "u32 label"]
        );
        assert_eq!(std::mem::size_of::<GpuCandidate>(), 8 * 8 + 2 * 4);
        assert_eq!(
            cuda_fields("FidLongOutline"),
            [
                "u64 at",
                "u64 room",
                "u64 limit",
                "u32 window",
                "u32 label",
                "u32 left",
                "u32 top",
                "u32 width",
                "u32 height",
                "u32 start",
                "u32 pad"
            ]
        );
        assert_eq!(std::mem::size_of::<GpuLongOutline>(), 3 * 8 + 8 * 4);
        assert_eq!(
            cuda_fields("FidOutcome"),
            [
                "double corners[8]",
                "u32 marker",
                "u32 dictionary",
                "u32 id",
                "u32 rotation",
                "u32 hamming",
                "u32 pad"
            ]
        );
        assert_eq!(std::mem::size_of::<GpuOutcome>(), 8 * 8 + 6 * 4);
    }
}
