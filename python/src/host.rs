//! numpy in, numpy out: labeling and statistics of host arrays (on the CPU, or on the GPU with
//! an upload), thresholds, and what this machine can run.

use crate::errors::to_py;
use markerscope::ccl::stats::{self, ComponentStats, Moments};
use markerscope::ccl::subpixel::{GreyWeights, SubpixelCentroid, ThresholdLevels};
use markerscope::ccl::{
    keep_all, Backend, BackendChoice, Backends, Connectivity, Labeler, Labeling, Mask, Want,
};
use markerscope::frame::image::{BinaryImage, GrayImage};
use markerscope::frame::threshold::{self as thresholds, ThresholdSpec};
use markerscope::pipeline::{resolve_algorithm, PipelineSettings};
use numpy::ndarray::{Array2, ArrayView2};
use numpy::{PyArray2, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use rayon::prelude::*;
use std::sync::{Mutex, OnceLock};

/// The backends, found once per process: the CPU alone without touching the GPU, and the
/// detected ones (the GPU opened, its kernels loaded) on first need.
static CPU_ONLY: OnceLock<Backends> = OnceLock::new();
static DETECTED: OnceLock<Backends> = OnceLock::new();

pub fn backends(choice: BackendChoice) -> &'static Backends {
    match choice {
        BackendChoice::Cpu => CPU_ONLY.get_or_init(Backends::cpu_only),
        BackendChoice::Auto | BackendChoice::Cuda => DETECTED.get_or_init(Backends::detect),
    }
}

pub fn parse_backend(name: &str) -> PyResult<BackendChoice> {
    match name.to_ascii_lowercase().as_str() {
        "auto" => Ok(BackendChoice::Auto),
        "cpu" => Ok(BackendChoice::Cpu),
        "cuda" | "gpu" => Ok(BackendChoice::Cuda),
        other => Err(PyValueError::new_err(format!(
            "backend: unknown backend '{other}'; expected 'auto', 'cpu' or 'cuda'"
        ))),
    }
}

pub fn parse_connectivity(n: u8) -> PyResult<Connectivity> {
    Connectivity::from_number(n)
        .ok_or_else(|| PyValueError::new_err(format!("connectivity: expected 4 or 8, got {n}")))
}

/// Idle labelers by algorithm name. A call takes one out (or makes one) and puts it back, so
/// calls from several threads each get their own instance and buffers are reused.
static IDLE: Mutex<Vec<(&'static str, Box<dyn Labeler>)>> = Mutex::new(Vec::new());

fn take_labeler(
    backends: &Backends,
    name: &'static str,
    connectivity: Connectivity,
) -> markerscope::Result<Box<dyn Labeler>> {
    let mut idle = IDLE.lock().unwrap_or_else(|p| p.into_inner());
    match idle.iter().position(|(n, _)| *n == name) {
        Some(i) => Ok(idle.swap_remove(i).1),
        None => {
            drop(idle);
            backends.create(name, connectivity)
        }
    }
}

fn put_labeler(name: &'static str, labeler: Box<dyn Labeler>) {
    IDLE.lock()
        .unwrap_or_else(|p| p.into_inner())
        .push((name, labeler));
}

/// Idle mask buffers: a fresh buffer per call would cost its page faults every call (on a
/// 1920×1080 frame, more than the labeling on many cores).
static IDLE_MASKS: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

fn take_mask_buffer() -> Vec<u8> {
    IDLE_MASKS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .pop()
        .unwrap_or_default()
}

fn put_mask_buffer(buffer: Vec<u8>) {
    IDLE_MASKS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(buffer);
}

/// A 2-D uint8 or bool numpy array, read-only; any strides.
fn mask_of<'py>(image: &Bound<'py, PyAny>, name: &str) -> PyResult<Binarize<'py>> {
    if let Ok(a) = image.cast::<PyArray2<u8>>() {
        return Ok(Binarize::Bytes(a.readonly()));
    }
    if let Ok(a) = image.cast::<PyArray2<bool>>() {
        return Ok(Binarize::Bools(a.readonly()));
    }
    Err(wrong_array(image, name, "uint8 or bool"))
}

/// The TypeError / ValueError for an argument that is not the array asked for.
fn wrong_array(obj: &Bound<'_, PyAny>, name: &str, dtypes: &str) -> PyErr {
    match obj.cast::<PyUntypedArray>() {
        Ok(a) if a.ndim() != 2 => PyValueError::new_err(format!(
            "{name}: expected a 2-D array, got {} dimension(s) with shape {:?}",
            a.ndim(),
            a.shape()
        )),
        Ok(a) => PyTypeError::new_err(format!(
            "{name}: expected a {dtypes} array, got dtype {}",
            a.dtype()
        )),
        Err(_) => PyTypeError::new_err(format!(
            "{name}: expected a 2-D {dtypes} numpy array, a CuPy array or a PyTorch tensor, got {}",
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| "an object of unknown type".into())
        )),
    }
}

enum Binarize<'py> {
    Bytes(numpy::PyReadonlyArray2<'py, u8>),
    Bools(numpy::PyReadonlyArray2<'py, bool>),
}

/// The array's elements, readable without the GIL.
enum MaskView<'a> {
    Bytes(ArrayView2<'a, u8>),
    Bools(ArrayView2<'a, bool>),
}

impl MaskView<'_> {
    fn binarize(&self, width: u32, height: u32) -> markerscope::Result<BinaryImage> {
        match self {
            MaskView::Bytes(v) => binarize(v.view(), width, height, |&b| b != 0),
            MaskView::Bools(v) => binarize(v.view(), width, height, |&b| b),
        }
    }
}

fn size_of(shape: &[usize]) -> PyResult<(u32, u32)> {
    let (h, w) = (shape[0], shape[1]);
    match (u32::try_from(w), u32::try_from(h)) {
        (Ok(w), Ok(h)) => Ok((w, h)),
        _ => Err(PyValueError::new_err(format!(
            "image: shape {h}x{w} is too large (more than 2^32 - 2 pixels)"
        ))),
    }
}

/// The mask as a 0/1 BinaryImage (non-zero = foreground, as OpenCV), rows in parallel; reads
/// the array through its strides, so a non-contiguous array costs no extra copy.
fn binarize<T: Sync>(
    view: ArrayView2<'_, T>,
    width: u32,
    height: u32,
    foreground: impl Fn(&T) -> bool + Sync,
) -> markerscope::Result<BinaryImage> {
    markerscope::frame::image::check_size(width, height)?;
    let w = width as usize;
    // Every byte is written below (whole slices, or whole rows).
    let mut data = take_mask_buffer();
    if data.len() != w * height as usize {
        data.clear();
        data.resize(w * height as usize, 0);
    }
    match view.as_slice() {
        Some(all) => data
            .par_chunks_mut(1 << 16)
            .zip(all.par_chunks(1 << 16))
            .for_each(|(out, src)| {
                for (o, v) in out.iter_mut().zip(src) {
                    *o = foreground(v) as u8;
                }
            }),
        None => data.par_chunks_mut(w).enumerate().for_each(|(y, out)| {
            for (o, v) in out.iter_mut().zip(view.row(y)) {
                *o = foreground(v) as u8;
            }
        }),
    }
    Ok(BinaryImage {
        width,
        height,
        data,
    })
}

/// The grey image for sub-pixel centroids (a copy: the library's GrayImage owns its pixels).
fn grey_of(grey: &Bound<'_, PyAny>, width: u32, height: u32) -> PyResult<GrayImage> {
    let Ok(a) = grey.cast::<PyArray2<u8>>() else {
        return Err(wrong_array(grey, "grey", "uint8"));
    };
    let a = a.readonly();
    let view = a.as_array();
    if view.shape() != [height as usize, width as usize] {
        return Err(PyValueError::new_err(format!(
            "grey: shape {:?} differs from the image's ({height}, {width})",
            view.shape()
        )));
    }
    let data: Vec<u8> = view.iter().copied().collect();
    GrayImage::new(width, height, data).map_err(to_py)
}

/// OpenCV's `stats` (5 columns), `centroids` (2) and our sums (2) for the background row and
/// the components, in label order.
pub struct OpencvRows {
    pub stats: Vec<i32>,
    pub centroids: Vec<f64>,
    pub sums: Vec<i64>,
}

impl OpencvRows {
    pub fn new(background: &Moments, components: &[ComponentStats]) -> Self {
        let n = components.len() + 1;
        let mut rows = OpencvRows {
            stats: Vec::with_capacity(5 * n),
            centroids: Vec::with_capacity(2 * n),
            sums: Vec::with_capacity(2 * n),
        };
        if background.area == 0 {
            // What OpenCV writes when no pixel is background.
            rows.stats.extend([-1, i32::MAX, 0, 0, 0]);
            rows.centroids.extend([f64::NAN, f64::NAN]);
            rows.sums.extend([0, 0]);
        } else {
            rows.push(&background.to_stats(0));
        }
        for c in components {
            rows.push(c);
        }
        rows
    }

    fn push(&mut self, c: &ComponentStats) {
        self.stats.extend([
            c.left as i32,
            c.top as i32,
            c.width as i32,
            c.height as i32,
            c.area as i32,
        ]);
        self.centroids.extend([c.centroid_x, c.centroid_y]);
        self.sums.extend([c.sum_x as i64, c.sum_y as i64]);
    }
}

fn array2<'py, T: numpy::Element>(
    py: Python<'py>,
    data: Vec<T>,
    rows: usize,
    cols: usize,
) -> PyResult<Bound<'py, PyArray2<T>>> {
    let a = Array2::from_shape_vec((rows, cols), data)
        .map_err(|e| PyValueError::new_err(format!("result shape: {e}")))?;
    Ok(PyArray2::from_owned_array(py, a))
}

struct HostResult {
    labeling: Labeling,
    background: Moments,
    subpixel: Option<Vec<SubpixelCentroid>>,
    algorithm: &'static str,
}

/// Labels a numpy mask: `(n, labels | None, stats, centroids, sums, subpixel | None,
/// algorithm)`, n counting the background row as OpenCV does. `labels` are uint32.
#[pyfunction]
#[pyo3(signature = (image, connectivity, want_labels, backend, algorithm=None, grey=None, level=None, invert=false))]
#[allow(clippy::too_many_arguments)]
pub fn label_host<'py>(
    py: Python<'py>,
    image: &Bound<'py, PyAny>,
    connectivity: u8,
    want_labels: bool,
    backend: &str,
    algorithm: Option<String>,
    grey: Option<&Bound<'py, PyAny>>,
    level: Option<u8>,
    invert: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let connectivity = parse_connectivity(connectivity)?;
    let backend = parse_backend(backend)?;
    let source = mask_of(image, "image")?;
    let shape = match &source {
        Binarize::Bytes(a) => a.shape().to_vec(),
        Binarize::Bools(a) => a.shape().to_vec(),
    };
    let (width, height) = size_of(&shape)?;
    let grey = match (grey, level) {
        (Some(g), Some(_)) => Some(grey_of(g, width, height)?),
        (Some(_), None) => {
            return Err(PyValueError::new_err(
                "level: the threshold level the mask was made with is needed with grey \
                 (threshold() returns it)",
            ))
        }
        (None, _) => None,
    };
    let backends = backends(backend);
    let settings = PipelineSettings {
        connectivity,
        algorithm,
        backend,
        want_labels,
        subpixel: grey.is_some(),
        ..PipelineSettings::default()
    };
    let resolved = resolve_algorithm(&settings, backends).map_err(to_py)?;
    let want = if want_labels { Want::Both } else { Want::Stats };
    let levels = level.map(ThresholdLevels::Global);
    let view = match &source {
        Binarize::Bytes(a) => MaskView::Bytes(a.as_array()),
        Binarize::Bools(a) => MaskView::Bools(a.as_array()),
    };
    let result = py
        .detach(|| {
            let mask = view.binarize(width, height)?;
            let result = run(
                &mask,
                connectivity,
                want,
                resolved.name,
                backends,
                &grey,
                &levels,
                invert,
            );
            put_mask_buffer(mask.data);
            result
        })
        .map_err(to_py)?;
    let stats_rows = result.labeling.stats.as_deref().unwrap_or(&[]);
    let n = stats_rows.len() + 1;
    let rows = OpencvRows::new(&result.background, stats_rows);
    let labels = match result.labeling.labels {
        // uint32, handed over without a copy; the Python layer views it as int32 (labels are
        // below 2^31: at most one component per two pixels).
        Some(l) => array2(py, l.data, height as usize, width as usize)?.into_any(),
        None => py.None().into_bound(py),
    };
    let subpixel = match result.subpixel {
        Some(c) => {
            let mut data = Vec::with_capacity(2 * n);
            data.extend([f64::NAN, f64::NAN]);
            for s in c {
                data.extend([s.x, s.y]);
            }
            array2(py, data, n, 2)?.into_any()
        }
        None => py.None().into_bound(py),
    };
    let out = (
        n,
        labels,
        array2(py, rows.stats, n, 5)?,
        array2(py, rows.centroids, n, 2)?,
        array2(py, rows.sums, n, 2)?,
        subpixel,
        result.algorithm,
    );
    Ok(out.into_pyobject(py)?.into_any())
}

#[allow(clippy::too_many_arguments)]
fn run(
    mask: &BinaryImage,
    connectivity: Connectivity,
    want: Want,
    name: &'static str,
    backends: &Backends,
    grey: &Option<GrayImage>,
    levels: &Option<ThresholdLevels>,
    invert: bool,
) -> markerscope::Result<HostResult> {
    let mut labeler = take_labeler(backends, name, connectivity)?;
    let outcome = match (grey, levels) {
        (Some(grey), Some(levels)) => {
            let weights = GreyWeights {
                grey,
                levels,
                invert,
            };
            labeler
                .label_weighted(Mask::Bytes(mask), connectivity, want, &weights, &keep_all)
                .map(|(l, c)| (l, Some(c)))
        }
        _ => labeler.label(mask, connectivity, want).map(|l| (l, None)),
    };
    // A labeler whose GPU failed is not reused.
    if !matches!(&outcome, Err(e) if e.is_gpu_failure()) {
        put_labeler(name, labeler);
    }
    let (labeling, subpixel) = outcome?;
    let rows = labeling.stats.as_deref().unwrap_or(&[]);
    Ok(HostResult {
        background: stats::background(mask, rows),
        labeling,
        subpixel,
        algorithm: name,
    })
}

/// `(level | None, mask)`: the mask is uint8 0 / 255 as `cv2.threshold` gives it; the level
/// is None for `adaptive`, whose level differs from pixel to pixel.
#[pyfunction]
#[pyo3(signature = (grey, spec, invert=false))]
pub fn threshold<'py>(
    py: Python<'py>,
    grey: &Bound<'py, PyAny>,
    spec: &str,
    invert: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let spec: ThresholdSpec = spec.parse().map_err(to_py)?;
    let Ok(a) = grey.cast::<PyArray2<u8>>() else {
        return Err(wrong_array(grey, "grey", "uint8"));
    };
    let (width, height) = size_of(a.shape())?;
    let image = grey_of(grey, width, height)?;
    let (level, mask) = py
        .detach(|| -> markerscope::Result<_> {
            let level = thresholds::global_level(&image, &spec, invert);
            let mut mask = thresholds::apply(&image, &spec, invert)?;
            mask.data.par_iter_mut().for_each(|v| *v *= 255);
            Ok((level, mask))
        })
        .map_err(to_py)?;
    let mask = array2(py, mask.data, height as usize, width as usize)?;
    Ok((level, mask).into_pyobject(py)?.into_any())
}

/// Every algorithm of the registry: name, backend, connectivities, summary, and whether it
/// can run here (with the reason when not).
#[pyfunction]
pub fn algorithms(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let backends = backends(BackendChoice::Auto);
    let out = PyList::empty(py);
    for info in markerscope::ccl::algorithms() {
        let d = PyDict::new(py);
        d.set_item("name", info.name)?;
        d.set_item("backend", info.backend.to_string())?;
        d.set_item(
            "connectivity",
            info.connectivities
                .iter()
                .map(|c| c.number())
                .collect::<Vec<_>>(),
        )?;
        d.set_item("summary", info.summary)?;
        let why_not = match info.backend {
            Backend::Cpu => None,
            Backend::Cuda => backends
                .cuda_unavailable_reason()
                .map(|r| format!("CUDA backend unavailable: {r}")),
        };
        d.set_item("usable", why_not.is_none())?;
        d.set_item("why_not", why_not)?;
        out.append(d)?;
    }
    Ok(out)
}

/// The GPU (or why none is usable) and the cameras found.
#[pyfunction]
pub fn devices(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let backends = backends(BackendChoice::Auto);
    let out = PyList::empty(py);
    let gpu = PyDict::new(py);
    gpu.set_item("kind", "cuda")?;
    gpu.set_item("name", backends.gpu_name())?;
    let why_not = backends
        .cuda_unavailable_reason()
        .map(|r| format!("CUDA backend unavailable: {r}"));
    gpu.set_item("usable", why_not.is_none())?;
    gpu.set_item("why_not", why_not)?;
    gpu.set_item("kernels", backends.gpu_kernels())?;
    out.append(gpu)?;
    match markerscope::source::devices::cameras() {
        Ok(cameras) => {
            for c in cameras {
                let d = PyDict::new(py);
                d.set_item("kind", "camera")?;
                d.set_item("index", c.index)?;
                d.set_item("name", c.name)?;
                d.set_item("description", c.description)?;
                d.set_item("usable", true)?;
                d.set_item("why_not", None::<String>)?;
                out.append(d)?;
            }
        }
        Err(why) => {
            let d = PyDict::new(py);
            d.set_item("kind", "camera")?;
            d.set_item("name", None::<String>)?;
            d.set_item("usable", false)?;
            d.set_item("why_not", why)?;
            out.append(d)?;
        }
    }
    Ok(out)
}

/// Seconds of each of `repeat` calls of the library's labeler on a mask prepared once from
/// `image` (the Rust call that the Python layer's per-call overhead is measured against;
/// `python/bench/bench_gpu.py`).
#[pyfunction]
pub fn time_rust_call(
    py: Python<'_>,
    image: &Bound<'_, PyAny>,
    connectivity: u8,
    want_labels: bool,
    algorithm: &str,
    repeat: usize,
) -> PyResult<Vec<f64>> {
    let connectivity = parse_connectivity(connectivity)?;
    let Ok(a) = image.cast::<PyArray2<u8>>() else {
        return Err(wrong_array(image, "image", "uint8"));
    };
    let (width, height) = size_of(a.shape())?;
    let a = a.readonly();
    let view = a.as_array();
    let want = if want_labels { Want::Both } else { Want::Stats };
    py.detach(|| -> markerscope::Result<Vec<f64>> {
        let mask = binarize(view, width, height, |&v| v != 0)?;
        let mut labeler = backends(BackendChoice::Cpu).create(algorithm, connectivity)?;
        for _ in 0..5 {
            labeler.label(&mask, connectivity, want)?;
        }
        (0..repeat)
            .map(|_| {
                let start = std::time::Instant::now();
                labeler.label(&mask, connectivity, want)?;
                Ok(start.elapsed().as_secs_f64())
            })
            .collect()
    })
    .map_err(to_py)
}
