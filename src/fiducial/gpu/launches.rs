//! One type per kernel launch of `kernels/fiducial.cu`: each holds its kernel and buffers,
//! pushes the kernel's arguments in the order of its signature and knows its grid and step.
//! `GpuDetector` queues them in sequence on the GPU's stream.

use super::buffers::{Candidates, FrameBuffers, GpuOutcome};
use crate::error::Result;
use crate::fiducial::candidates::OutlineLimits;
use crate::fiducial::params::DetectorParams;
use crate::gpu::launch::{launch, linear_launch, KernelLaunch};
use crate::threshold::binarize::mean_c_delta;
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, PushKernelArg};

/// Threads per block of every fiducial kernel but fid_decode, fid_long_outlines and
/// fid_distinct; fid_threshold's block takes as many pixels of a row (FID_ROW_SPAN).
const THREADS: u32 = 256;
/// Rows a thread of fid_column_sums takes (FID_SUM_RUN).
const SUM_RUN: u32 = 32;
/// Threads of fid_decode's block for one quad: a warp per side (FID_DECODE_THREADS).
const DECODE_THREADS: u32 = 128;
/// Threads that take one component in fid_candidates: a warp.
const WARP: u64 = 32;
/// Threads of fid_long_outlines' block for one long outline: one per seed state
/// (FID_LONG_THREADS).
const LONG_THREADS: u32 = 1024;
/// Blocks of fid_long_outlines: two a multiprocessor of the largest GPUs; each takes every
/// LONG_BLOCKS-th long outline of the frame (their number is known on the device only).
const LONG_BLOCKS: u32 = 264;
/// Blocks of fid_decode: four a multiprocessor of the largest GPUs; each takes every
/// DECODE_BLOCKS-th quad (their number too is known on the device only).
const DECODE_BLOCKS: u32 = 528;
/// Threads of fid_distinct's one block (FID_DISTINCT_THREADS).
const DISTINCT_THREADS: u32 = 1024;
/// Candidates fid_distinct orders and de-duplicates at most (FID_DISTINCT_MOST); the host
/// does it for a frame with more.
pub const DISTINCT_MOST: u64 = 2048;

/// The kernels, loaded once.
pub struct Kernels {
    pub column_sums: CudaFunction,
    pub threshold: CudaFunction,
    pub neighbours: CudaFunction,
    pub candidates: CudaFunction,
    pub long_outlines: CudaFunction,
    pub distinct: CudaFunction,
    pub decode: CudaFunction,
}

/// `fid_column_sums`: each pixel's sum over its window's column, borders replicated.
pub struct ColumnSums<'a> {
    pub kernels: &'a Kernels,
    pub grey: &'a CudaSlice<u8>,
    pub frame: &'a mut FrameBuffers,
    pub window: u32,
}

impl KernelLaunch for ColumnSums<'_> {
    fn step(&self) -> &'static str {
        "window column sums"
    }

    fn queue(self, stream: &CudaStream) -> Result<()> {
        let f = self.frame;
        let r = (self.window / 2) as i32;
        let runs = f.height.div_ceil(SUM_RUN) as u64;
        let config = linear_launch(f.width as u64 * runs, THREADS);
        let mut args = stream.launch_builder(&self.kernels.column_sums);
        args.arg(self.grey)
            .arg(&mut f.column_sums)
            .arg(&f.width)
            .arg(&f.height)
            .arg(&r);
        // SAFETY: fid_column_sums(grey, sums, width, height, r); grey and sums hold width ×
        // height values (the grey frame was uploaded at this size, FrameBuffers allocated for
        // it).
        unsafe { launch(&mut args, config, "fid_column_sums") }
    }
}

/// `fid_threshold`: the dark pixels under the mean-C threshold of one window, OpenCV's
/// THRESH_BINARY_INV adaptive threshold, as `Binarizer::adaptive_mean` makes it, into the
/// mask of window `index`.
pub struct Threshold<'a> {
    pub kernels: &'a Kernels,
    pub grey: &'a CudaSlice<u8>,
    pub frame: &'a mut FrameBuffers,
    pub index: usize,
    pub window: u32,
    pub c: f64,
}

impl KernelLaunch for Threshold<'_> {
    fn step(&self) -> &'static str {
        "mean-C threshold"
    }

    fn queue(self, stream: &CudaStream) -> Result<()> {
        let f = self.frame;
        let r = (self.window / 2) as i32;
        // The window's area and half of it (the mean rounded: ⌊(sum + half) / area⌋); the
        // window was checked (odd, at most MAX_ADAPTIVE_WINDOW), so 256 · area fits a u32.
        let area = self.window * self.window;
        let half = area / 2;
        let delta = mean_c_delta(self.c);
        // A block for each THREADS pixels of each row.
        let spans = f.width.div_ceil(THREADS) as u64;
        let config = linear_launch(spans * f.height as u64 * THREADS as u64, THREADS);
        let at = self.index * f.code_stride();
        let mut mask = f.masks.slice_mut(at..at + f.pixels());
        let mut args = stream.launch_builder(&self.kernels.threshold);
        args.arg(self.grey)
            .arg(&f.column_sums)
            .arg(&mut mask)
            .arg(&f.width)
            .arg(&f.height)
            .arg(&r)
            .arg(&half)
            .arg(&area)
            .arg(&delta);
        // SAFETY: fid_threshold(grey, sums, mask, width, height, r, half, area, idelta); every
        // buffer holds width × height values.
        unsafe { launch(&mut args, config, "fid_threshold") }
    }
}

/// `fid_neighbours`: each pixel's neighbours of its own label, a byte, for every window.
pub struct NeighbourCodes<'a> {
    pub kernels: &'a Kernels,
    pub frame: &'a mut FrameBuffers,
}

impl KernelLaunch for NeighbourCodes<'_> {
    fn step(&self) -> &'static str {
        "neighbour codes"
    }

    fn queue(self, stream: &CudaStream) -> Result<()> {
        let f = self.frame;
        let (label_stride, code_stride) = (f.label_stride() as u64, f.code_stride() as u64);
        let mut config = linear_launch(f.pixels() as u64, THREADS);
        config.grid_dim.1 = f.windows as u32;
        let mut args = stream.launch_builder(&self.kernels.neighbours);
        args.arg(&f.labels)
            .arg(&label_stride)
            .arg(&mut f.codes)
            .arg(&code_stride)
            .arg(&f.width)
            .arg(&f.height);
        // SAFETY: fid_neighbours(labels, label_stride, codes, code_stride, width, height); labels
        // and codes hold `windows` images of width × height values at their strides.
        unsafe { launch(&mut args, config, "fid_neighbours") }
    }
}

/// `fid_candidates`, then `fid_long_outlines`: the candidate quads of every window's
/// components (the windows along y), one warp a component, and a block for each outline that
/// the first listed as long. Both kernels take the same parameters.
pub struct FindQuads<'a> {
    pub kernels: &'a Kernels,
    pub frame: &'a FrameBuffers,
    /// Per window: its stats rows' device address (rows 0..=count of its labeling) and its
    /// component count.
    pub windows: &'a CudaSlice<u64>,
    pub window_count: u32,
    /// The most components of a window.
    pub most: u32,
    pub params: &'a DetectorParams,
    pub found: &'a mut Candidates,
}

impl KernelLaunch for FindQuads<'_> {
    fn step(&self) -> &'static str {
        "candidate quads"
    }

    fn queue(self, stream: &CudaStream) -> Result<()> {
        let f = self.frame;
        let p = self.params;
        let limits = OutlineLimits::of(p, f.width, f.height);
        let longest_trace = limits.longest_trace as u64;
        let border = p.min_distance_to_border as f64;
        let found = self.found;
        let (pool_points, capacity) = (found.pool_points(), found.capacity());
        let long_capacity = found.long_capacity();
        let (label_stride, code_stride) = (f.label_stride() as u64, f.code_stride() as u64);
        let mut per_component = linear_launch(self.most as u64 * WARP, THREADS);
        per_component.grid_dim.1 = self.window_count;
        let per_long = linear_launch(LONG_BLOCKS as u64 * LONG_THREADS as u64, LONG_THREADS);
        for (kernel, config, name) in [
            (&self.kernels.candidates, per_component, "fid_candidates"),
            (&self.kernels.long_outlines, per_long, "fid_long_outlines"),
        ] {
            let mut args = stream.launch_builder(kernel);
            args.arg(&f.labels)
                .arg(&label_stride)
                .arg(&f.codes)
                .arg(&code_stride)
                .arg(self.windows)
                .arg(&f.width)
                .arg(&f.height)
                .arg(&limits.min_perimeter)
                .arg(&limits.max_perimeter)
                .arg(&longest_trace)
                .arg(&p.polygon_accuracy_rate)
                .arg(&p.min_corner_distance_rate)
                .arg(&border)
                .arg(&mut found.pool)
                .arg(&pool_points)
                .arg(&mut found.list)
                .arg(&capacity)
                .arg(&mut found.long)
                .arg(&long_capacity)
                .arg(&mut found.counters);
            // SAFETY: the kernels' parameters in order; labels hold window_count label images
            // of width × height values, label_stride apart, and codes as many bytes,
            // code_stride apart, `windows` 2 × window_count values, each window's stats address
            // count + 1 rows of 5 (the labeler wrote them, the buffers alive until the frame
            // ends), the pool `pool_points` int2, the list `capacity` entries and the long list
            // `long_capacity`, past which the kernels write nothing (fid_long_outlines reads
            // the first counters[2] entries, at most `long_capacity`, that fid_candidates
            // wrote before it on this stream); counters four u64.
            unsafe { launch(&mut args, config, name) }?;
        }
        Ok(())
    }
}

/// `fid_distinct`: the candidates in the CPU's order, each outline once, into the quads to
/// decode (their number in counters[3]); none when there are more than DISTINCT_MOST.
pub struct DistinctQuads<'a> {
    pub kernels: &'a Kernels,
    pub found: &'a mut Candidates,
}

impl KernelLaunch for DistinctQuads<'_> {
    fn step(&self) -> &'static str {
        "distinct quads"
    }

    fn queue(self, stream: &CudaStream) -> Result<()> {
        let found = self.found;
        let capacity = found.capacity();
        let config = linear_launch(DISTINCT_THREADS as u64, DISTINCT_THREADS);
        let mut args = stream.launch_builder(&self.kernels.distinct);
        args.arg(&found.list)
            .arg(&capacity)
            .arg(&mut found.counters)
            .arg(&mut found.quads);
        // SAFETY: fid_distinct(found, capacity, counters, quads); the list holds `capacity`
        // candidates (the first min(counters[1], capacity) written by the candidate kernels
        // before it on this stream), counters four u64, quads 8 × capacity values.
        unsafe { launch(&mut args, config, "fid_distinct") }
    }
}

/// `fid_decode`: refines, reads and identifies the quads, as many as counters[3] says, one
/// block a quad.
pub struct DecodeQuads<'a> {
    pub kernels: &'a Kernels,
    /// x0 y0 … x3 y3 per quad; counters[3] of them.
    pub quads: &'a CudaSlice<f64>,
    pub counters: &'a CudaSlice<u64>,
    pub grey: &'a CudaSlice<u8>,
    pub width: u32,
    pub height: u32,
    pub params: &'a DetectorParams,
    pub largest_grid: f64,
    /// DICT_WORDS u32 per dictionary, and the codes (`dictionaries::tables`).
    pub dictionaries: &'a (CudaSlice<u32>, CudaSlice<u64>),
    pub dictionary_count: u32,
    pub out: &'a mut CudaSlice<GpuOutcome>,
}

impl KernelLaunch for DecodeQuads<'_> {
    fn step(&self) -> &'static str {
        "corners + codes"
    }

    fn queue(self, stream: &CudaStream) -> Result<()> {
        let p = self.params;
        let refine = i32::from(p.refine_corners);
        let config = linear_launch(DECODE_BLOCKS as u64 * DECODE_THREADS as u64, DECODE_THREADS);
        let (info, codes) = self.dictionaries;
        let mut args = stream.launch_builder(&self.kernels.decode);
        args.arg(self.quads)
            .arg(self.counters)
            .arg(self.grey)
            .arg(&self.width)
            .arg(&self.height)
            .arg(&refine)
            .arg(&self.largest_grid)
            .arg(&p.cell_margin)
            .arg(&p.min_cell_std_dev)
            .arg(info)
            .arg(&self.dictionary_count)
            .arg(codes)
            .arg(self.out);
        // SAFETY: fid_decode's parameters in order; quads hold 8 and out one entry for each of
        // the counters[3] quads (at most the candidates' capacity, which both are sized for),
        // grey width × height bytes, the dictionary tables what `tables` made.
        unsafe { launch(&mut args, config, "fid_decode") }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fiducial::candidates::seeded_trace::SEED_SLOTS;
    use crate::threshold::spec::MAX_ADAPTIVE_WINDOW;

    /// The launch sizes that the kernels are written for are theirs.
    #[test]
    fn launch_sizes_are_the_kernels() {
        let source = include_str!("../../../kernels/fiducial.cu");
        for line in [
            format!("#define FID_DECODE_THREADS {DECODE_THREADS}\n"),
            format!("#define FID_ROW_SPAN {THREADS}\n"),
            format!("#define FID_SUM_RUN {SUM_RUN}\n"),
            format!("#define FID_ROW_REACH {}\n", MAX_ADAPTIVE_WINDOW / 2),
            format!("#define FID_DISTINCT_MOST {DISTINCT_MOST}\n"),
            format!("#define FID_DISTINCT_THREADS {DISTINCT_THREADS}\n"),
            "#define FID_LONG_THREADS FID_SEED_STATES\n".to_string(),
            "#define FID_SEED_STATES (4 * FID_SEED_SLOTS)\n".to_string(),
        ] {
            assert!(source.contains(&line), "{line}");
        }
        // One thread a seed state: four backtracks a seed pixel.
        assert_eq!(LONG_THREADS as usize, 4 * SEED_SLOTS);
    }
}
