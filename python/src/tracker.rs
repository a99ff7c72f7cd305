//! `Tracker`: the library's multi-object tracker (`markerscope::track`) for detections made
//! elsewhere.

use crate::errors::to_py;
use crate::host::{backends, parse_backend, require_gpu};
use markerscope::ccl::BackendChoice;
use markerscope::track::{self, Assignment, Detection, TrackerConfig};
use numpy::{PyArray1, PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyModule, PyString};
use std::sync::{Arc, Mutex};

/// Frame-to-frame association with stable IDs (see the guide's Tracking section).
#[pyclass(module = "markerscope._markerscope")]
pub struct Tracker {
    inner: track::Tracker,
    /// The index the next `update` gets when none is given.
    next_frame: u64,
}

/// A 1-D float64 array of `obj`: a float64 numpy array as it is, any other float array-like
/// (a list, a pandas Series, float32 or integer values) converted by `numpy.asarray`.
fn floats<'py>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<PyReadonlyArray1<'py, f64>> {
    if let Ok(a) = obj.extract::<PyReadonlyArray1<'py, f64>>() {
        return Ok(a);
    }
    let refused = || {
        PyTypeError::new_err(format!(
            "{name}: expected a 1-D array of numbers (a numpy array, a list, a pandas Series), \
             got {}",
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| "an object of unknown type".into())
        ))
    };
    if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() {
        return Err(refused());
    }
    let numpy = PyModule::import(obj.py(), "numpy")?;
    let converted = numpy
        .call_method1("asarray", (obj,))
        .map_err(|_| refused())?;
    // Real numbers only: complex values would lose their imaginary part.
    let kind: String = converted.getattr("dtype")?.getattr("kind")?.extract()?;
    if !matches!(kind.as_str(), "b" | "i" | "u" | "f") {
        return Err(refused());
    }
    let converted = converted
        .call_method1("astype", (numpy.getattr("float64")?,))
        .map_err(|_| refused())?;
    let ndim: usize = converted.getattr("ndim")?.extract()?;
    if ndim != 1 {
        return Err(PyValueError::new_err(format!(
            "{name}: expected a 1-D array, got {ndim} dimension(s)"
        )));
    }
    converted
        .extract::<PyReadonlyArray1<'py, f64>>()
        .map_err(|_| refused())
}

#[pymethods]
impl Tracker {
    #[new]
    /// `link_strategy`: "greedy" (the cheapest pair first, the engine's rule) or "subnet"
    /// (each cluster of competing tracks and detections solved for the least total cost, as
    /// trackpy links).
    #[pyo3(signature = (gate=20.0, gate_growth=3.0, max_missed=30, tentative_max_missed=2, max_candidates=16, size_weight=0.5, velocity_smoothing=0.5, predict=true, link_strategy="greedy"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        gate: f64,
        gate_growth: f64,
        max_missed: u32,
        tentative_max_missed: u32,
        max_candidates: u32,
        size_weight: f64,
        velocity_smoothing: f64,
        predict: bool,
        link_strategy: &str,
    ) -> PyResult<Self> {
        let assignment: Assignment = link_strategy.parse().map_err(to_py)?;
        let config = TrackerConfig {
            gate_px: gate,
            gate_growth_px: gate_growth,
            max_missed,
            tentative_max_missed,
            max_candidates,
            size_weight,
            velocity_smoothing,
            predict_velocity: predict,
            assignment,
            ..TrackerConfig::default()
        };
        Ok(Tracker {
            inner: track::Tracker::new(config).map_err(to_py)?,
            next_frame: 0,
        })
    }

    /// Track IDs (int64, from 1) for one frame's detections, in their order. `x`, `y`: positions
    /// (px); `area`: their sizes (px², default 1 each); `frame`: the frame index (default: one
    /// more than the last). A frame index that goes back ends every track.
    #[pyo3(signature = (x, y, area=None, frame=None))]
    fn update<'py>(
        &mut self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        y: &Bound<'py, PyAny>,
        area: Option<&Bound<'py, PyAny>>,
        frame: Option<u64>,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let (x, y) = (floats(x, "x")?, floats(y, "y")?);
        let area = area.map(|a| floats(a, "area")).transpose()?;
        let n = x.len();
        if y.len() != n || area.as_ref().is_some_and(|a| a.len() != n) {
            return Err(PyValueError::new_err(format!(
                "x, y and area must have the same length, got {}, {} and {}",
                n,
                y.len(),
                area.as_ref().map_or(n, |a| a.len())
            )));
        }
        let (xs, ys) = (x.as_array(), y.as_array());
        let areas = area.as_ref().map(|a| a.as_array());
        let mut detections = Vec::with_capacity(n);
        for i in 0..n {
            let a = areas.as_ref().map_or(1.0, |a| a[i]);
            if !(xs[i].is_finite() && ys[i].is_finite() && a.is_finite() && a > 0.0) {
                return Err(PyValueError::new_err(format!(
                    "detection {i}: x, y must be finite and area > 0, got ({}, {}, {a})",
                    xs[i], ys[i]
                )));
            }
            detections.push(Detection::point(xs[i], ys[i], a));
        }
        let frame = frame.unwrap_or(self.next_frame);
        self.next_frame = frame + 1;
        let ids = py.detach(|| self.inner.update(frame, &detections));
        Ok(PyArray1::from_vec(
            py,
            ids.into_iter().map(|id| id as i64).collect(),
        ))
    }

    /// One row per track so far, as `analyze --tracks` writes them: a dict of arrays with the
    /// columns track, first_frame, last_frame, length, mean_area, path_length, last_x, last_y.
    fn summaries<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let rows = self.inner.summaries();
        let d = PyDict::new(py);
        let col_u = |f: fn(&track::TrackSummary) -> u64| {
            PyArray1::from_vec(py, rows.iter().map(|r| f(r) as i64).collect())
        };
        let col_f = |f: fn(&track::TrackSummary) -> f64| {
            PyArray1::from_vec(py, rows.iter().map(f).collect())
        };
        d.set_item("track", col_u(|r| r.id))?;
        d.set_item("first_frame", col_u(|r| r.first_frame))?;
        d.set_item("last_frame", col_u(|r| r.last_frame))?;
        d.set_item("length", col_u(|r| r.length))?;
        d.set_item("mean_area", col_f(|r| r.mean_area))?;
        d.set_item("path_length", col_f(|r| r.path_length))?;
        d.set_item("last_x", col_f(|r| r.last_x))?;
        d.set_item("last_y", col_f(|r| r.last_y))?;
        Ok(d)
    }

    /// Tracks alive now.
    #[getter]
    fn active(&self) -> usize {
        self.inner.active().len()
    }

    /// With link_strategy="subnet": clusters too large to solve exactly (more than 2,000
    /// tracks), paired by the greedy rule instead, over every frame so far.
    #[getter]
    fn greedy_clusters(&self) -> u64 {
        self.inner.greedy_clusters()
    }
}

/// GPU trackers `link_frames` used, kept with their device buffers and streams for the next
/// calls (making one, and its first frames' allocations, cost more than linking 20 frames of
/// 10,000 particles).
static IDLE_GPU_TRACKERS: Mutex<Vec<track::gpu::GpuTracker>> = Mutex::new(Vec::new());
const MAX_IDLE_GPU_TRACKERS: usize = 4;

/// The tracker `link_frames` runs: the GPU's or the CPU's (the same IDs).
enum Linker {
    Cpu(track::Tracker),
    Gpu(track::gpu::GpuTracker),
}

impl Linker {
    /// On the GPU for `backend` "cuda", or "auto" when there is one and it can run `config`;
    /// else on the CPU. A GPU asked for and not usable is an error.
    fn new(config: TrackerConfig, backend: &str) -> PyResult<Linker> {
        let choice = parse_backend(backend)?;
        if choice == BackendChoice::Cpu {
            return Ok(Linker::Cpu(track::Tracker::new(config).map_err(to_py)?));
        }
        let found = backends(choice);
        require_gpu(choice, found)?;
        let usable = track::gpu::GpuTracker::supports(&config);
        match (found.gpu(), usable) {
            (Ok(gpu), Ok(())) => {
                let idle = IDLE_GPU_TRACKERS
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .pop();
                let tracker = match idle.filter(|t| Arc::ptr_eq(&t.gpu().ctx, &gpu.ctx)) {
                    Some(mut t) => t.restart(config).map(|()| t),
                    None => (gpu.with_own_stream())
                        .and_then(|own| track::gpu::GpuTracker::new(Arc::new(own), config)),
                };
                Ok(Linker::Gpu(tracker.map_err(to_py)?))
            }
            (Ok(_), Err(why)) if choice == BackendChoice::Cuda => Err(PyValueError::new_err(
                format!("backend 'cuda': {why}; use backend 'cpu' or 'auto'"),
            )),
            _ => Ok(Linker::Cpu(track::Tracker::new(config).map_err(to_py)?)),
        }
    }

    fn update(&mut self, frame: u64, detections: &[Detection]) -> markerscope::Result<Vec<u64>> {
        match self {
            Linker::Cpu(t) => Ok(t.update(frame, detections)),
            Linker::Gpu(t) => t.update(frame, detections),
        }
    }

    fn greedy_clusters(&self) -> u64 {
        match self {
            Linker::Cpu(t) => t.greedy_clusters(),
            Linker::Gpu(t) => t.greedy_clusters(),
        }
    }

    /// Gives a GPU tracker back to the idle ones (a few at most: each holds the device memory
    /// of the largest frames it linked).
    fn done(self) {
        if let Linker::Gpu(t) = self {
            let mut idle = IDLE_GPU_TRACKERS.lock().unwrap_or_else(|p| p.into_inner());
            if idle.len() < MAX_IDLE_GPU_TRACKERS {
                idle.push(t);
            }
        }
    }

    fn backend(&self) -> &'static str {
        match self {
            Linker::Cpu(_) => "cpu",
            Linker::Gpu(_) => "cuda",
        }
    }
}

/// Links every frame of a feature table in one call (`markerscope.link`): rows `x`, `y` sorted
/// by frame, frame k's rows from `starts[k]` to `starts[k + 1]`, its index `frames[k]` (from 0,
/// increasing); trackpy's rule within `gate` px of the last position, a particle missing for up
/// to `memory` frames. Returns each row's track ID, the subnetworks paired greedily (more than
/// 2,000 particles) and the backend that linked ("cpu" or "cuda").
#[pyfunction]
#[pyo3(signature = (x, y, starts, frames, gate, memory, predict, max_candidates, link_strategy, backend))]
#[allow(clippy::too_many_arguments)]
pub fn link_frames<'py>(
    py: Python<'py>,
    x: PyReadonlyArray1<'py, f64>,
    y: PyReadonlyArray1<'py, f64>,
    starts: PyReadonlyArray1<'py, i64>,
    frames: PyReadonlyArray1<'py, i64>,
    gate: f64,
    memory: u32,
    predict: bool,
    max_candidates: u32,
    link_strategy: &str,
    backend: &str,
) -> PyResult<(Bound<'py, PyArray1<i64>>, u64, &'static str)> {
    let (x, y) = (x.as_slice()?, y.as_slice()?);
    let (starts, frames) = (starts.as_slice()?, frames.as_slice()?);
    let n = x.len();
    let bounds_ok = y.len() == n
        && starts.len() == frames.len() + 1
        && starts.first() == Some(&0)
        && starts.last() == Some(&(n as i64))
        && starts.windows(2).all(|w| w[0] <= w[1])
        && frames.first().is_none_or(|&f| f >= 0)
        && frames.windows(2).all(|w| w[0] < w[1]);
    if !bounds_ok {
        return Err(PyValueError::new_err(
            "link_frames: x and y must be as long, and the frames' row starts run from 0 to \
             their length with increasing frame indices from 0",
        ));
    }
    if let Some(i) = (0..n).find(|&i| !(x[i].is_finite() && y[i].is_finite())) {
        return Err(PyValueError::new_err(format!(
            "link_frames: row {i}: positions must be finite, got ({}, {})",
            x[i], y[i]
        )));
    }
    let config = TrackerConfig {
        gate_px: gate,
        // trackpy looks for a vanished particle within search_range of where it was last seen.
        gate_growth_px: 0.0,
        max_missed: memory,
        // Every new trajectory may vanish for `memory` frames, as in trackpy.
        tentative_max_missed: memory,
        max_candidates,
        // Position only: trackpy does not compare sizes.
        size_weight: 0.0,
        predict_velocity: predict,
        assignment: link_strategy.parse().map_err(to_py)?,
        tail_len: 0,
        ..TrackerConfig::default()
    };
    let mut linker = Linker::new(config, backend)?;
    let detections: Vec<Detection> = (0..n).map(|i| Detection::point(x[i], y[i], 1.0)).collect();
    let ids = py.detach(|| -> markerscope::Result<Vec<i64>> {
        let mut ids = Vec::with_capacity(n);
        for (k, &frame) in frames.iter().enumerate() {
            let rows = &detections[starts[k] as usize..starts[k + 1] as usize];
            ids.extend(
                linker
                    .update(frame as u64, rows)?
                    .into_iter()
                    .map(|id| id as i64),
            );
        }
        Ok(ids)
    });
    let (greedy_clusters, backend) = (linker.greedy_clusters(), linker.backend());
    // A tracker that failed is not kept: its device state is in doubt.
    let ids = ids.map_err(to_py)?;
    linker.done();
    Ok((PyArray1::from_vec(py, ids), greedy_clusters, backend))
}
