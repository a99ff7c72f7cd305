//! `analyze(source, ...)`: the CLI's analysis (`markerscope::analysis::start`: the same
//! source opening, settings, algorithm and pipeline) as an iterator of per-frame columns.

use crate::errors::to_py;
use crate::frames::{PythonFrames, Raised};
use crate::host::{backends, parse_backend, parse_connectivity, require_gpu};
use markerscope::analysis::{self, AnalyzeOptions, Output, Started};
use markerscope::ccl::descriptors::ShapeDescriptors;
use markerscope::frame::mask::Mask;
use markerscope::geometry::calibration::Calibration;
use markerscope::geometry::{ReferencePoint, WorldMapping};
use markerscope::pipeline::{ComponentFilter, FrameResult, PipelineEvent};
use markerscope::source::video::VideoDecoding;
use markerscope::source::{DamagedFrames, SourceSpec};
use numpy::PyArray1;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;
use std::sync::Arc;

/// A running analysis. Iterating yields one dict per frame: `frame`, `time_s`, `file` and the
/// columns of the CSV export (numpy arrays, one value per component). Closing (or dropping)
/// it stops the pipeline.
#[pyclass(module = "markerscope._markerscope")]
pub struct Analysis {
    started: Option<Started>,
    max_frames: Option<u64>,
    frames: u64,
    /// Frames flagged damaged whose results are still to come.
    damaged: DamagedFrames,
    /// Messages the CLI prints on stderr (the CPU fallback, skipped frames), in order.
    #[pyo3(get)]
    notices: Vec<String>,
    #[pyo3(get)]
    source: String,
    #[pyo3(get)]
    algorithm: String,
    /// What a source of Python frames raised, raised again as it was.
    raised: Raised,
}

/// The filters, shape columns, masks and world mapping `analyze` takes besides the basics, as
/// the CLI's flags of the same names give them.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct Extras {
    shapes: bool,
    min_area: Option<u64>,
    max_area: Option<u64>,
    max_aspect: Option<f64>,
    min_circularity: Option<f64>,
    max_circularity: Option<f64>,
    min_inertia_ratio: Option<f64>,
    max_inertia_ratio: Option<f64>,
    masks: Vec<PathBuf>,
    world_points: Vec<PointArg>,
    calibration: Option<PathBuf>,
    world_units: String,
}

/// A reference point: `"x,y=X,Y"` or `((x, y), (X, Y))`, image pixel (x, y) at world (X, Y).
#[derive(FromPyObject)]
enum PointArg {
    Text(String),
    Pair([f64; 2], [f64; 2]),
}

impl Extras {
    fn apply(self, opts: &mut AnalyzeOptions) -> PyResult<()> {
        opts.shapes = self.shapes;
        opts.filter = ComponentFilter {
            min_area: self.min_area,
            max_area: self.max_area,
            max_aspect: self.max_aspect,
            min_circularity: self.min_circularity,
            max_circularity: self.max_circularity,
            min_inertia_ratio: self.min_inertia_ratio,
            max_inertia_ratio: self.max_inertia_ratio,
        };
        opts.masks = self.masks;
        let points = self
            .world_points
            .into_iter()
            .map(|p| match p {
                PointArg::Pair(image, world) => Ok(ReferencePoint { image, world }),
                PointArg::Text(text) => text
                    .parse()
                    .map_err(|e| PyValueError::new_err(format!("world_points: {e}"))),
            })
            .collect::<PyResult<Vec<ReferencePoint>>>()?;
        if points.is_empty() {
            if self.calibration.is_some() {
                return Err(PyValueError::new_err(
                    "calibration: needs four or more world_points ((x, y), (X, Y)) to map onto",
                ));
            }
            return Ok(());
        }
        let calibration = self
            .calibration
            .as_deref()
            .map(Calibration::load)
            .transpose()
            .map_err(to_py)?;
        let mapping = WorldMapping::new(points, calibration, &self.world_units)
            .map_err(|e| PyValueError::new_err(format!("world_points: {e}")))?;
        opts.world = Some(Arc::new(mapping));
        Ok(())
    }
}

/// The settings `analyze` and `analyze_to_file` take (a dict of them, `extras` a dict of its
/// own), as the CLI's flags of the same names give them.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct Settings {
    connectivity: u8,
    threshold: Option<String>,
    invert: bool,
    backend: String,
    algorithm: Option<String>,
    max_frames: Option<u64>,
    size: Option<(u32, u32)>,
    subpixel: bool,
    decoder: String,
    extras: Extras,
}

impl Settings {
    /// The options of an analysis of `input` (`spec` when it is a source spec rather than
    /// Python frames), checked as far as they can be without opening it.
    fn options(self, input: String, spec: Option<&SourceSpec>) -> PyResult<AnalyzeOptions> {
        let mut opts = AnalyzeOptions::new(input, Output::Stdout);
        opts.connectivity = parse_connectivity(self.connectivity)?;
        if let Some(t) = self.threshold {
            opts.threshold = t.parse().map_err(to_py)?;
        }
        opts.invert = self.invert;
        opts.backend = parse_backend(&self.backend)?;
        opts.algorithm = self.algorithm;
        if self.max_frames == Some(0) {
            return Err(PyValueError::new_err("max_frames: must be at least 1"));
        }
        opts.max_frames = self.max_frames;
        if let Some(spec) = spec.filter(|s| s.is_endless() && self.max_frames.is_none()) {
            return Err(PyValueError::new_err(format!(
                "{spec} never ends: give max_frames=N"
            )));
        }
        if let Some((w, h)) = self.size {
            if !matches!(spec, Some(SourceSpec::Synthetic(_))) {
                return Err(PyValueError::new_err(format!(
                    "size: only synthetic frames are made at a size; {} has its own",
                    opts.input
                )));
            }
            if w == 0 || h == 0 {
                return Err(PyValueError::new_err(format!(
                    "size: width and height must be at least 1, got {w}x{h}"
                )));
            }
            opts.synthetic_size = Some((w, h));
        }
        opts.subpixel = self.subpixel;
        opts.decoding = self
            .decoder
            .parse::<VideoDecoding>()
            .map_err(|e| PyValueError::new_err(format!("decoder: {e}")))?;
        opts.tuning = crate::host::tuning().clone();
        self.extras.apply(&mut opts)?;
        opts.filter.validate().map_err(to_py)?;
        require_gpu(opts.backend, backends(opts.backend))?;
        Ok(opts)
    }
}

/// `analyze_to_file(source, out, settings, tracks, metadata)`: the analysis of a source spec
/// written to files by the engine's own writers, as `markerscope analyze SOURCE --out OUT
/// --tracks TRACKS` writes them (the format from each file's extension; each written under a
/// temporary name and renamed into place at the end), with `metadata` added to the Parquet
/// and Arrow files' key-value metadata. Runs without the GIL. Returns what the run did: rows,
/// frames, components, tracks, the skipped (left out or flagged damaged) counts, the first
/// skipped items, `stopped_by` (the source failed part way: the files hold the frames before
/// it), the source and algorithm, the seconds and the notices the CLI prints on stderr.
#[pyfunction]
#[pyo3(signature = (source, out, settings, tracks=None, metadata=Vec::new()))]
pub fn analyze_to_file<'py>(
    py: Python<'py>,
    source: String,
    out: PathBuf,
    settings: Settings,
    tracks: Option<PathBuf>,
    metadata: Vec<(String, String)>,
) -> PyResult<Bound<'py, PyDict>> {
    let spec = SourceSpec::parse(&source).map_err(to_py)?;
    let mut opts = settings.options(source, Some(&spec))?;
    opts.output = Output::File(out);
    opts.tracks = tracks;
    opts.batches.metadata = metadata;
    let mut notices: Vec<String> = Vec::new();
    let summary = py
        .detach(|| analysis::run(&opts, |n| notices.push(n.to_string())))
        .map_err(to_py)?;
    let d = PyDict::new(py);
    d.set_item("rows", summary.output.rows)?;
    d.set_item("frames", summary.frames)?;
    d.set_item("components", summary.components)?;
    d.set_item("tracks", summary.tracks)?;
    d.set_item("skipped_frames", summary.skipped_frames)?;
    d.set_item("skipped_data", summary.skipped_data)?;
    d.set_item("damaged_frames", summary.damaged_frames)?;
    let skipped: Vec<String> = summary.skipped.iter().map(|s| s.to_string()).collect();
    d.set_item("skipped", skipped)?;
    d.set_item("stopped_by", summary.stopped_by)?;
    d.set_item("source", summary.source)?;
    d.set_item("algorithm", summary.algorithm)?;
    d.set_item("seconds", summary.elapsed_s)?;
    d.set_item("notices", notices)?;
    Ok(d)
}

#[pymethods]
impl Analysis {
    #[new]
    fn new(py: Python<'_>, source: &Bound<'_, PyAny>, settings: Settings) -> PyResult<Self> {
        // A str is a source spec; anything else an iterable of grey frames.
        let spec_text = source.extract::<String>().ok();
        let raised = Raised::default();
        let frames = match &spec_text {
            Some(_) => None,
            None => Some(PythonFrames::new(source, raised.clone())?),
        };
        let spec = spec_text
            .as_deref()
            .map(SourceSpec::parse)
            .transpose()
            .map_err(to_py)?;
        let input = spec_text.unwrap_or_else(|| "frames".into());
        let opts = settings.options(input, spec.as_ref())?;
        let mut mask = Mask::default();
        for path in &opts.masks {
            mask = mask.and(Mask::load(path).map_err(to_py)?).map_err(to_py)?;
        }
        let started = py
            .detach(|| match (spec, frames) {
                (Some(spec), _) => analysis::start(&opts, &spec, mask, &mut |_| {}),
                (None, Some(frames)) => analysis::start_on(
                    &opts,
                    Box::new(frames),
                    analysis::backends_for(&opts),
                    mask,
                    &mut |_| {},
                ),
                (None, None) => Err(markerscope::Error::Invalid(
                    "source: nothing to analyse".into(),
                )),
            })
            .map_err(to_py)?;
        Ok(Analysis {
            source: started.description.clone(),
            algorithm: started.algorithm.clone(),
            started: Some(started),
            max_frames: opts.max_frames,
            frames: 0,
            damaged: DamagedFrames::default(),
            notices: Vec::new(),
            raised,
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        if self.max_frames.is_some_and(|m| self.frames >= m) {
            self.close(py);
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
                    self.close(py);
                    return Err(PyRuntimeError::new_err("the pipeline stopped unexpectedly"));
                }
            };
            match event {
                PipelineEvent::Frame(result) => {
                    self.frames += 1;
                    let damaged = self.damaged.take(result.index);
                    return Ok(Some(columns(py, &result, damaged)?));
                }
                PipelineEvent::Notice(message) => self.notices.push(message),
                PipelineEvent::Skipped(skip) => {
                    self.damaged.note(&skip);
                    self.notices.push(format!("skipped: {skip}"))
                }
                PipelineEvent::SourceError(why) | PipelineEvent::EngineError(why) => {
                    self.close(py);
                    let raised = self.raised.lock().unwrap_or_else(|p| p.into_inner()).take();
                    return Err(raised.unwrap_or_else(|| PyRuntimeError::new_err(why)));
                }
                PipelineEvent::EndOfStream { .. } => {
                    self.close(py);
                    return Ok(None);
                }
            }
        }
    }

    /// Stops the pipeline (the source is closed); iteration then ends.
    fn close(&mut self, py: Python<'_>) {
        stop(py, self.started.take());
    }

    /// Frames delivered so far.
    #[getter]
    fn frames(&self) -> u64 {
        self.frames
    }
}

/// Stops the pipeline without the GIL: a source of Python frames takes it to get the next one.
fn stop(py: Python<'_>, started: Option<Started>) {
    if let Some(started) = started {
        py.detach(move || started.pipeline.stop());
    }
}

impl Drop for Analysis {
    fn drop(&mut self) {
        let started = self.started.take();
        if started.is_some() {
            Python::attach(|py| stop(py, started));
        }
    }
}

fn column<'py, T: numpy::Element>(
    py: Python<'py>,
    result: &FrameResult,
    f: impl Fn(usize) -> T,
) -> Bound<'py, PyArray1<T>> {
    PyArray1::from_vec(py, (0..result.components.len()).map(f).collect())
}

/// A shape descriptor column: its name and how to read it.
type ShapeColumn = (&'static str, fn(&ShapeDescriptors) -> f64);

/// The CSV export's columns for one frame (`markerscope::output::export`): frame, time_s and
/// file as scalars, and damaged (the frame was decoded from damaged data), the rest as arrays.
fn columns<'py>(py: Python<'py>, r: &FrameResult, damaged: bool) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let c = &r.components;
    d.set_item("frame", r.index)?;
    d.set_item("file", &r.name)?;
    d.set_item("time_s", r.time_s)?;
    d.set_item("damaged", damaged)?;
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
    let shape_columns: [ShapeColumn; 10] = [
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
