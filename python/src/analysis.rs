//! `analyze(source, ...)`: the CLI's analysis (`markerscope::analysis::start`: the same
//! source opening, settings, algorithm and pipeline) as an iterator of per-frame columns.

use crate::errors::to_py;
use crate::host::{parse_backend, parse_connectivity};
use markerscope::analysis::{self, AnalyzeOptions, Output, Started};
use markerscope::ccl::descriptors::ShapeDescriptors;
use markerscope::pipeline::{FrameResult, PipelineEvent};
use numpy::PyArray1;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A running analysis. Iterating yields one dict per frame: `frame`, `time_s`, `file` and the
/// columns of the CSV export (numpy arrays, one value per component). Closing (or dropping)
/// it stops the pipeline.
#[pyclass(module = "markerscope._markerscope")]
pub struct Analysis {
    started: Option<Started>,
    max_frames: Option<u64>,
    frames: u64,
    /// Messages the CLI prints on stderr (the CPU fallback, skipped frames), in order.
    #[pyo3(get)]
    notices: Vec<String>,
    #[pyo3(get)]
    source: String,
    #[pyo3(get)]
    algorithm: String,
}

#[pymethods]
impl Analysis {
    #[new]
    #[pyo3(signature = (source, connectivity=8, threshold=None, invert=false, backend="auto", algorithm=None, max_frames=None, size=None, subpixel=true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        source: String,
        connectivity: u8,
        threshold: Option<String>,
        invert: bool,
        backend: &str,
        algorithm: Option<String>,
        max_frames: Option<u64>,
        size: Option<(u32, u32)>,
        subpixel: bool,
    ) -> PyResult<Self> {
        let mut opts = AnalyzeOptions::new(source, Output::Stdout);
        opts.connectivity = parse_connectivity(connectivity)?;
        if let Some(t) = threshold {
            opts.threshold = t.parse().map_err(to_py)?;
        }
        opts.invert = invert;
        opts.backend = parse_backend(backend)?;
        opts.algorithm = algorithm;
        opts.max_frames = max_frames;
        if let Some((w, h)) = size {
            if w == 0 || h == 0 {
                return Err(PyValueError::new_err(format!(
                    "size: width and height must be at least 1, got {w}x{h}"
                )));
            }
            opts.synthetic_size = Some((w, h));
        }
        opts.subpixel = subpixel;
        opts.tuning = crate::host::tuning().clone();
        let started = py
            .detach(|| {
                analysis::check_source(&opts)
                    .and_then(|spec| analysis::start(&opts, &spec, Default::default(), &mut |_| {}))
            })
            .map_err(to_py)?;
        Ok(Analysis {
            source: started.description.clone(),
            algorithm: started.algorithm.clone(),
            started: Some(started),
            max_frames: opts.max_frames,
            frames: 0,
            notices: Vec::new(),
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        if self.max_frames.is_some_and(|m| self.frames >= m) {
            self.close();
        }
        loop {
            let Some(started) = &self.started else {
                return Ok(None);
            };
            let events = started.pipeline.events().clone();
            // Wait in slices, so that Ctrl-C reaches Python between them.
            let event = py.detach(|| events.recv_timeout(std::time::Duration::from_millis(100)));
            py.check_signals()?;
            let event = match event {
                Ok(e) => e,
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => continue,
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                    self.close();
                    return Err(PyRuntimeError::new_err("the pipeline stopped unexpectedly"));
                }
            };
            match event {
                PipelineEvent::Frame(result) => {
                    self.frames += 1;
                    return Ok(Some(columns(py, &result)?));
                }
                PipelineEvent::Notice(message) => self.notices.push(message),
                PipelineEvent::Skipped(skip) => self.notices.push(format!("skipped: {skip}")),
                PipelineEvent::SourceError(why) | PipelineEvent::EngineError(why) => {
                    self.close();
                    return Err(PyRuntimeError::new_err(why));
                }
                PipelineEvent::EndOfStream { .. } => {
                    self.close();
                    return Ok(None);
                }
            }
        }
    }

    /// Stops the pipeline (the source is closed); iteration then ends.
    fn close(&mut self) {
        if let Some(started) = self.started.take() {
            started.pipeline.stop();
        }
    }

    /// Frames delivered so far.
    #[getter]
    fn frames(&self) -> u64 {
        self.frames
    }
}

fn column<'py, T: numpy::Element>(
    py: Python<'py>,
    result: &FrameResult,
    f: impl Fn(usize) -> T,
) -> Bound<'py, PyArray1<T>> {
    PyArray1::from_vec(py, (0..result.components.len()).map(f).collect())
}

/// The CSV export's columns for one frame (`markerscope::output::export`): frame, time_s and
/// file as scalars, the rest as arrays.
fn columns<'py>(py: Python<'py>, r: &FrameResult) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let c = &r.components;
    d.set_item("frame", r.index)?;
    d.set_item("file", &r.name)?;
    d.set_item("time_s", r.time_s)?;
    d.set_item("label", column(py, r, |i| c[i].label))?;
    d.set_item("left", column(py, r, |i| c[i].left))?;
    d.set_item("top", column(py, r, |i| c[i].top))?;
    d.set_item("width", column(py, r, |i| c[i].width))?;
    d.set_item("height", column(py, r, |i| c[i].height))?;
    d.set_item("area", column(py, r, |i| c[i].area))?;
    d.set_item("centroid_x", column(py, r, |i| c[i].centroid_x))?;
    d.set_item("centroid_y", column(py, r, |i| c[i].centroid_y))?;
    d.set_item("sum_x", column(py, r, |i| c[i].sum_x))?;
    d.set_item("sum_y", column(py, r, |i| c[i].sum_y))?;
    d.set_item("track", column(py, r, |i| r.track_ids[i]))?;
    let sub = |i: usize, y: bool| match r.subpixel.get(i) {
        Some(s) if y => s.y,
        Some(s) => s.x,
        None => f64::NAN,
    };
    d.set_item("subpixel_x", column(py, r, |i| sub(i, false)))?;
    d.set_item("subpixel_y", column(py, r, |i| sub(i, true)))?;
    // Shape descriptors and world positions: NaN where not computed (empty in the CSV).
    let shape = |i: usize, f: fn(&ShapeDescriptors) -> f64| r.shapes.get(i).map_or(f64::NAN, f);
    let shape_columns: [(&str, fn(&ShapeDescriptors) -> f64); 10] = [
        ("mu20", |d| d.mu20),
        ("mu02", |d| d.mu02),
        ("mu11", |d| d.mu11),
        ("orientation_deg", |d| d.orientation_deg),
        ("major_axis", |d| d.major_axis),
        ("minor_axis", |d| d.minor_axis),
        ("eccentricity", |d| d.eccentricity),
        ("inertia_ratio", |d| d.inertia_ratio),
        ("perimeter", |d| d.perimeter),
        ("circularity", |d| d.circularity),
    ];
    for (name, f) in shape_columns {
        d.set_item(name, column(py, r, |i| shape(i, f)))?;
    }
    let world = |i: usize, k: usize| r.world.get(i).map_or(f64::NAN, |w| w[k]);
    d.set_item("x_world", column(py, r, |i| world(i, 0)))?;
    d.set_item("y_world", column(py, r, |i| world(i, 1)))?;
    Ok(d)
}
