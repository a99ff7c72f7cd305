//! Marker detection on the GPU, the CPU detector's twin (`detect::Detector` is the reference:
//! the same settings, the same results, corners within 1e-3 px). Kernels in
//! `kernels/fiducial.cu`.
//!
//! Per frame: the grey frame goes up once; per threshold window the mean-C threshold makes the
//! dark mask on the device (`fid_column_sums`, `fid_threshold`), the engine's device labeler
//! labels it (8-connectivity) into the window's own label image and writes OpenCV's statistics
//! rows there. Then, over all windows at once, `fid_neighbours` writes each pixel's
//! neighbours of its label as a byte and `fid_candidates` traces the outline of each component
//! whose statistics fit (a byte read a step) and fits its quad, one warp per component (the
//! windows' longest traces run side by side); `fid_long_outlines` takes the outlines whose
//! limit is long, a block each, cut at seed states into walks that run in parallel and are
//! chained into the same trace, and fits their quads with the whole block. `fid_distinct` puts the quads of all windows in the CPU's
//! order and drops the same outline found at a second window (`detect::add_distinct`:
//! a quad is kept when none kept before it matches); `fid_decode` refines, reads and
//! identifies the rest, one block per quad. Only the counters and the outcomes come back,
//! with one stream sync, for the final merge (`detect::merge`, the CPU's own code); a frame
//! with more candidates than `fid_distinct` takes has them ordered on the host.

mod buffers;
mod dictionaries;
mod launches;

use super::candidates::Quad;
use super::detect::{
    add_distinct, check_dictionaries, largest_grid, marker_of, merge, Detections, Outcome,
};
use super::dictionary::{Dictionary, Identified};
use super::params::DetectorParams;
use crate::ccl::cuda::device::{
    device_variant, DeviceLabeler, DeviceMask, DEFAULT_DEVICE_ALGORITHM,
};
use crate::ccl::cuda::subpixel::raw_device_ptr;
use crate::ccl::Connectivity;
use crate::error::{Error, Result};
use crate::frame::image::{check_size, GrayImage};
use crate::gpu::buffers::at_least;
use crate::gpu::kernels::KernelFile;
use crate::gpu::launch::{load, KernelLaunch};
use crate::gpu::{cuda_err, Gpu};
use crate::threshold::binarize::check_grey;
use crate::threshold::gpu::DeviceGrey;
use crate::threshold::spec::check_adaptive;
use buffers::{Candidates, FrameBuffers, GpuCandidate, GpuOutcome, Readback, StatsRows};
use cudarc::driver::CudaSlice;
use dictionaries::DeviceDictionaries;
use launches::{
    ColumnSums, DecodeQuads, DistinctQuads, FindQuads, Kernels, NeighbourCodes, Threshold,
    DISTINCT_MOST,
};
use std::sync::Arc;

/// A detector on the GPU that keeps its device buffers from frame to frame.
pub struct GpuDetector {
    gpu: Arc<Gpu>,
    params: DetectorParams,
    windows: Vec<u32>,
    kernels: Kernels,
    labeler: DeviceLabeler,
    grey: DeviceGrey,
    frame: Option<FrameBuffers>,
    /// The statistics rows of each window's labeling.
    rows: Vec<StatsRows>,
    /// Per window its stats rows' device address and component count (fid_candidates').
    window_table: Option<CudaSlice<u64>>,
    candidates: Option<Candidates>,
    readback: Option<Readback>,
    dictionaries: DeviceDictionaries,
}

impl GpuDetector {
    pub fn new(gpu: Arc<Gpu>, params: DetectorParams) -> Result<Self> {
        let windows = params.windows()?;
        for &window in &windows {
            check_adaptive(window, params.threshold_constant)?;
        }
        let load = |name: &str| load(&gpu, KernelFile::Fiducial, name);
        let kernels = Kernels {
            column_sums: load("fid_column_sums")?,
            threshold: load("fid_threshold")?,
            neighbours: load("fid_neighbours")?,
            candidates: load("fid_candidates")?,
            long_outlines: load("fid_long_outlines")?,
            distinct: load("fid_distinct")?,
            decode: load("fid_decode")?,
        };
        let variant = device_variant(DEFAULT_DEVICE_ALGORITHM).ok_or_else(|| {
            Error::Invalid(format!(
                "{DEFAULT_DEVICE_ALGORITHM} cannot label device memory"
            ))
        })?;
        let rows = windows.iter().map(|_| StatsRows::default()).collect();
        Ok(Self {
            labeler: DeviceLabeler::new(gpu.clone(), variant)?,
            gpu,
            params,
            windows,
            kernels,
            grey: DeviceGrey::default(),
            frame: None,
            rows,
            window_table: None,
            candidates: None,
            readback: None,
            dictionaries: DeviceDictionaries::default(),
        })
    }

    pub fn params(&self) -> &DetectorParams {
        &self.params
    }

    /// The markers of `dictionaries` in a grey frame, as `Detector::detect` finds them.
    pub fn detect(&mut self, grey: &GrayImage, dictionaries: &[&Dictionary]) -> Result<Detections> {
        check_dictionaries(dictionaries)?;
        check_size(grey.width, grey.height)?;
        check_grey(grey)?;
        self.labeler.bind()?;
        self.grey.upload(&self.gpu, grey)?;
        let (w, h) = (grey.width, grey.height);
        if !self
            .frame
            .as_ref()
            .is_some_and(|f| (f.width, f.height) == (w, h))
        {
            self.frame = None;
            self.frame = Some(FrameBuffers::alloc(&self.gpu, w, h, self.windows.len())?);
        }
        let outcomes = self.find_and_decode(w, h, dictionaries)?;
        Ok(merge(outcomes.iter().map(outcome_of)))
    }

    /// The outcome of every candidate quad of every window, in the CPU's order, each outline
    /// once. The candidate kernels, fid_distinct and fid_decode are queued one after the other
    /// and the counters come back with the first outcomes: one stream sync. When the outlines
    /// or candidates overflow the buffers, the kernels run once more with buffers of the size
    /// they need (the counters count past the capacities).
    fn find_and_decode(
        &mut self,
        w: u32,
        h: u32,
        dictionaries: &[&Dictionary],
    ) -> Result<Vec<GpuOutcome>> {
        let pixels = w as usize * h as usize;
        if self.candidates.is_none() {
            self.candidates = Some(Candidates::for_frame(&self.gpu, pixels)?);
        }
        if self.readback.is_none() {
            self.readback = Some(Readback::new(&self.gpu)?);
        }
        self.threshold_windows()?;
        let mut table = Vec::with_capacity(2 * self.windows.len());
        for index in 0..self.windows.len() {
            let count = self.label_window(index)?;
            let stats = self.rows[index]
                .stats
                .as_ref()
                .ok_or_else(missing_buffers)?;
            table.push(raw_device_ptr(stats, &self.gpu.stream));
            table.push(count as u64);
        }
        let most = table.iter().skip(1).step_by(2).copied().max().unwrap_or(0);
        if most == 0 {
            return Ok(Vec::new());
        }
        let gpu = &self.gpu;
        let windows = at_least(gpu, &mut self.window_table, table.len())?;
        gpu.stream
            .memcpy_htod(&table, &mut windows.slice_mut(0..table.len()))
            .map_err(|e| cuda_err("uploading the windows' statistics addresses", e))?;
        let frame = self.frame.as_mut().ok_or_else(missing_buffers)?;
        NeighbourCodes {
            kernels: &self.kernels,
            frame: &mut *frame,
        }
        .queue(&gpu.stream)?;
        let frame = &*frame;
        let grey = self.grey.get(w, h).ok_or_else(missing_buffers)?;
        let tables = self.dictionaries.get(gpu, dictionaries, &self.params)?;
        let readback = self.readback.as_mut().ok_or_else(missing_buffers)?;
        let decode = |found: &mut Candidates| {
            DecodeQuads {
                kernels: &self.kernels,
                quads: &found.quads,
                counters: &found.counters,
                grey,
                width: w,
                height: h,
                params: &self.params,
                largest_grid: largest_grid(dictionaries),
                dictionaries: tables,
                dictionary_count: dictionaries.len() as u32,
                out: &mut found.outcomes,
            }
            .queue(&gpu.stream)
        };
        loop {
            let found = self.candidates.as_mut().ok_or_else(missing_buffers)?;
            found.clear(gpu)?;
            FindQuads {
                kernels: &self.kernels,
                frame,
                windows,
                window_count: self.windows.len() as u32,
                most: most as u32,
                params: &self.params,
                found: &mut *found,
            }
            .queue(&gpu.stream)?;
            DistinctQuads {
                kernels: &self.kernels,
                found: &mut *found,
            }
            .queue(&gpu.stream)?;
            decode(found)?;
            let counts = readback.counts(gpu, found)?;
            if found.fits(counts) {
                if counts.candidates <= DISTINCT_MOST {
                    return readback.outcomes(gpu, found, counts.quads as usize);
                }
                // More candidates than fid_distinct takes: ordered here and decoded again.
                let quads = distinct_quads(found.download(gpu, counts.candidates as usize)?);
                found.upload_quads(gpu, &quads)?;
                decode(found)?;
                readback.decoded_again();
                return readback.outcomes(gpu, found, quads.len());
            }
            // Room for what this frame needs, and a quarter more for the next ones.
            let grow = |need: u64, have: u64| need.max(have).saturating_add(need / 4) as usize;
            let (pool, capacity, long) = (
                grow(counts.points, found.pool_points()),
                grow(counts.candidates, found.capacity()),
                grow(counts.long, found.long_capacity()),
            );
            self.candidates = None;
            self.candidates = Some(Candidates::alloc(gpu, pool, capacity, long)?);
        }
    }

    /// The dark mask of every window, queued on the stream before any labeling, so that the
    /// GPU has them in hand while the host waits for a labeling's count.
    fn threshold_windows(&mut self) -> Result<()> {
        let frame = self.frame.as_mut().ok_or_else(missing_buffers)?;
        let (w, h) = (frame.width, frame.height);
        let grey = self.grey.get(w, h).ok_or_else(missing_buffers)?;
        let stream = &self.gpu.stream;
        for (index, &window) in self.windows.iter().enumerate() {
            ColumnSums {
                kernels: &self.kernels,
                grey,
                frame: &mut *frame,
                window,
            }
            .queue(stream)?;
            Threshold {
                kernels: &self.kernels,
                grey,
                frame: &mut *frame,
                index,
                window,
                c: self.params.threshold_constant,
            }
            .queue(stream)?;
        }
        Ok(())
    }

    /// Labeling and statistics rows of window `index` (its mask made by `threshold_windows`),
    /// queued on the stream; the labeling waits for its component count, which it returns.
    fn label_window(&mut self, index: usize) -> Result<u32> {
        let frame = self.frame.as_mut().ok_or_else(missing_buffers)?;
        let (w, h) = (frame.width, frame.height);
        let stream = &self.gpu.stream;
        let mask = DeviceMask {
            ptr: frame.mask_of(index, stream),
            width: w,
            height: h,
            row_pitch: w as usize,
        };
        let labels = frame.labels_of(index, stream);
        // SAFETY: window `index`'s mask holds width × height bytes and its label image as many
        // u32, both of this device and alive here; every later use is on this stream, after
        // the labeling.
        let count = unsafe {
            self.labeler
                .label(&mask, Connectivity::Eight, Some(labels))?
        };
        let rows = &mut self.rows[index];
        rows.ensure(&self.gpu, count as usize + 1)?;
        let (Some(stats), Some(centroids)) = (&rows.stats, &rows.centroids) else {
            return Err(missing_buffers());
        };
        // SAFETY: both hold count + 1 rows (ensured above) on this device.
        unsafe {
            self.labeler.write_opencv_rows(
                raw_device_ptr(stats, stream),
                raw_device_ptr(centroids, stream),
                None,
            )?;
        }
        Ok(count)
    }
}

fn missing_buffers() -> Error {
    Error::Invalid("the frame's device buffers are missing".into())
}

/// The candidates in the CPU detector's order (window by window, each window's in its
/// components' raster order), the same outline found twice kept once.
fn distinct_quads(mut found: Vec<GpuCandidate>) -> Vec<Quad> {
    found.sort_by_key(|c| (c.window, c.label));
    let mut quads = Vec::new();
    for c in &found {
        add_distinct(&mut quads, quad_of(&c.quad));
    }
    quads
}

fn quad_of(flat: &[f64; 8]) -> Quad {
    std::array::from_fn(|k| [flat[2 * k], flat[2 * k + 1]])
}

/// What a quad became, as the CPU's decoding says it.
fn outcome_of(o: &GpuOutcome) -> Outcome {
    let quad = quad_of(&o.corners);
    if o.marker == 0 {
        return Outcome::Rejected(quad);
    }
    let found = Identified {
        id: o.id,
        rotation: o.rotation as u8,
        hamming: o.hamming,
    };
    Outcome::Marker(marker_of(&quad, found, o.dictionary as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(window: u32, label: u32, x: f64, side: f64) -> GpuCandidate {
        let q = [
            x,
            10.0,
            x + side,
            10.0,
            x + side,
            10.0 + side,
            x,
            10.0 + side,
        ];
        GpuCandidate {
            quad: q,
            window,
            label,
        }
    }

    /// Candidates come back in any order; they are put in the CPU's (window, then label) and
    /// an outline found again at a later window gives way to the first.
    #[test]
    fn candidates_in_the_cpu_order_each_outline_once() {
        let found = vec![
            candidate(1, 2, 100.4, 40.0), // the outline of (0, 7) again, a little off
            candidate(0, 9, 300.0, 30.0),
            candidate(1, 1, 200.0, 20.0),
            candidate(0, 7, 100.0, 40.0),
            candidate(2, 1, 500.0, 20.0),
        ];
        let quads = distinct_quads(found);
        let xs: Vec<f64> = quads.iter().map(|q| q[0][0]).collect();
        assert_eq!(xs, [100.0, 300.0, 200.0, 500.0]);
        assert_eq!(quads[0], quad_of(&candidate(0, 7, 100.0, 40.0).quad));
    }

    /// A marker outcome is turned to OpenCV's corner order as the CPU turns it; a rejected
    /// one keeps its corners.
    #[test]
    fn outcomes_become_markers_as_on_the_cpu() {
        let corners = [10.0, 20.0, 50.0, 21.0, 49.0, 60.0, 9.0, 59.0];
        let quad = quad_of(&corners);
        for rotation in 0..4 {
            let o = GpuOutcome {
                corners,
                marker: 1,
                dictionary: 1,
                id: 17,
                rotation,
                hamming: 2,
                pad: 0,
            };
            let found = Identified {
                id: 17,
                rotation: rotation as u8,
                hamming: 2,
            };
            let Outcome::Marker(m) = outcome_of(&o) else {
                panic!("a marker")
            };
            assert_eq!(m, marker_of(&quad, found, 1));
            let k = (4 - rotation as usize) % 4;
            assert_eq!(m.corner(0), quad[k]);
        }
        let rejected = GpuOutcome {
            corners,
            ..GpuOutcome::default()
        };
        assert!(matches!(outcome_of(&rejected), Outcome::Rejected(q) if q == quad));
    }
}
