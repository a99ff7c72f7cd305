//! `Tracker`: the library's multi-object tracker (`markerscope::track`) for detections made
//! elsewhere.

use crate::errors::to_py;
use markerscope::track::{self, Assignment, Detection, TrackerConfig};
use numpy::{PyArray1, PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyModule, PyString};

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
