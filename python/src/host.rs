//! numpy in, numpy out: labeling and statistics of host arrays (on the CPU, or on the GPU with
//! an upload), thresholds, and what this machine can run.

use crate::errors::to_py;
use markerscope::ccl::cpu::lsl::Lsl;
use markerscope::ccl::stats::{self, ComponentStats, Moments};
use markerscope::ccl::subpixel::{GreyWeights, SubpixelCentroid};
use markerscope::ccl::{
    keep_all, Backend, BackendChoice, Backends, Connectivity, Labeler, Labeling, Mask, Want,
};
use markerscope::frame::image::{BinaryImage, GrayImage};
use markerscope::pipeline::{resolve_algorithm, PipelineSettings};
use markerscope::threshold as thresholds;
use markerscope::threshold::levels::ThresholdLevels;
use markerscope::threshold::spec::ThresholdSpec;
use markerscope::tuning::Tuning;
use numpy::ndarray::{Array2, ArrayView2};
use numpy::{PyArray2, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::sync::{Mutex, OnceLock};

/// The backends, found once per process: the CPU alone without touching the GPU, and the
/// detected ones (the GPU opened, its kernels loaded) on first need.
static CPU_ONLY: OnceLock<Backends> = OnceLock::new();
static DETECTED: OnceLock<Backends> = OnceLock::new();

pub fn backends(choice: BackendChoice) -> &'static Backends {
    match choice {
        BackendChoice::Cpu => CPU_ONLY.get_or_init(|| Backends::cpu_only_tuned(tuning())),
        BackendChoice::Auto | BackendChoice::Cuda => {
            DETECTED.get_or_init(|| Backends::detect_tuned(tuning()))
        }
    }
}

/// The `MARKERSCOPE_*` knobs, read once per process. A value that cannot be used at all (an
/// invalid `MARKERSCOPE_CUDA_GRAPHS`) is said on stderr and the defaults are used instead:
/// importing the package must not fail on it.
pub fn tuning() -> &'static Tuning {
    static TUNING: OnceLock<Tuning> = OnceLock::new();
    TUNING.get_or_init(|| {
        Tuning::from_env().unwrap_or_else(|e| {
            eprintln!("markerscope: {e}; using the default tuning");
            Tuning::default()
        })
    })
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

impl Binarize<'_> {
    /// The array's bytes when its rows lie back to back in memory (C order): any non-zero
    /// byte is foreground, and a bool is one byte, 0 or 1.
    fn c_contiguous_bytes(&self) -> Option<&[u8]> {
        match self {
            Binarize::Bytes(a) if a.is_c_contiguous() => a.as_slice().ok(),
            Binarize::Bools(a) if a.is_c_contiguous() => a.as_slice().ok().map(|b| {
                // SAFETY: bool has the size and alignment of u8, and 0 / 1 are valid u8 values.
                unsafe { std::slice::from_raw_parts(b.as_ptr().cast::<u8>(), b.len()) }
            }),
            _ => None,
        }
    }
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

/// A new C-ordered numpy array of `rows × cols` values, uninitialised, and its values as a
/// slice to fill (every value must be written before Python sees the array).
fn uninit_array<'py, T: numpy::Element>(
    py: Python<'py>,
    rows: usize,
    cols: usize,
) -> (Bound<'py, PyArray2<T>>, &'py mut [MaybeUninit<T>]) {
    // SAFETY: a fresh C-ordered array owns rows × cols contiguous values that nothing else
    // references; `MaybeUninit` makes no claim about their contents.
    unsafe {
        let array = PyArray2::<T>::new(py, [rows, cols], false);
        let values = std::slice::from_raw_parts_mut(array.data().cast(), rows * cols);
        (array, values)
    }
}

/// OpenCV's `stats` (int32, 5 columns), `centroids` (float64, 2) and our sums (int64, 2) of
/// the background row and the components, in label order, written straight into new numpy
/// arrays.
pub struct OpencvRows<'py> {
    pub stats: Bound<'py, PyArray2<i32>>,
    pub centroids: Bound<'py, PyArray2<f64>>,
    pub sums: Bound<'py, PyArray2<i64>>,
}

impl<'py> OpencvRows<'py> {
    pub fn new(py: Python<'py>, background: &Moments, components: &[ComponentStats]) -> Self {
        let n = components.len() + 1;
        let (stats, stat_values) = uninit_array::<i32>(py, n, 5);
        let (centroids, centroid_values) = uninit_array::<f64>(py, n, 2);
        let (sums, sum_values) = uninit_array::<i64>(py, n, 2);
        let mut stat_rows = stat_values.chunks_exact_mut(5);
        let mut centroid_rows = centroid_values.chunks_exact_mut(2);
        let mut sum_rows = sum_values.chunks_exact_mut(2);
        let mut put = |s: [i32; 5], c: [f64; 2], m: [i64; 2]| {
            let rows = (stat_rows.next(), centroid_rows.next(), sum_rows.next());
            if let (Some(sr), Some(cr), Some(mr)) = rows {
                for (o, v) in sr.iter_mut().zip(s) {
                    o.write(v);
                }
                for (o, v) in cr.iter_mut().zip(c) {
                    o.write(v);
                }
                for (o, v) in mr.iter_mut().zip(m) {
                    o.write(v);
                }
            }
        };
        let row = |c: &ComponentStats| {
            (
                [
                    c.left as i32,
                    c.top as i32,
                    c.width as i32,
                    c.height as i32,
                    c.area as i32,
                ],
                [c.centroid_x, c.centroid_y],
                [c.sum_x as i64, c.sum_y as i64],
            )
        };
        if background.area == 0 {
            // What OpenCV writes when no pixel is background.
            put([-1, i32::MAX, 0, 0, 0], [f64::NAN, f64::NAN], [0, 0]);
        } else {
            let (s, c, m) = row(&background.to_stats(0));
            put(s, c, m);
        }
        for component in components {
            let (s, c, m) = row(component);
            put(s, c, m);
        }
        OpencvRows {
            stats,
            centroids,
            sums,
        }
    }
}

/// A label image the library allocated, as a numpy int32 array without a copy (labels are
/// below 2^31: at most one component per two pixels).
fn labels_array(
    py: Python<'_>,
    labels: Vec<u32>,
    width: u32,
    height: u32,
) -> PyResult<Bound<'_, PyAny>> {
    let mut labels = std::mem::ManuallyDrop::new(labels);
    let (ptr, len, cap) = (labels.as_mut_ptr(), labels.len(), labels.capacity());
    // SAFETY: u32 and i32 have the same size and alignment; the buffer changes owner whole.
    let labels = unsafe { Vec::from_raw_parts(ptr.cast::<i32>(), len, cap) };
    let a = Array2::from_shape_vec((height as usize, width as usize), labels)
        .map_err(|e| PyValueError::new_err(format!("result shape: {e}")))?;
    Ok(PyArray2::from_owned_array(py, a).into_any())
}

/// The sub-pixel centroids as OpenCV-style rows (row 0, the background, NaN).
fn subpixel_array<'py>(py: Python<'py>, centroids: &[SubpixelCentroid]) -> Bound<'py, PyAny> {
    let (array, values) = uninit_array::<f64>(py, centroids.len() + 1, 2);
    let rows = std::iter::once([f64::NAN, f64::NAN]).chain(centroids.iter().map(|c| [c.x, c.y]));
    for (out, row) in values.chunks_exact_mut(2).zip(rows) {
        out[0].write(row[0]);
        out[1].write(row[1]);
    }
    array.into_any()
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
/// algorithm)`, n counting the background row as OpenCV does. `labels` are int32.
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
    if resolved.name == RUN_BASED && grey.is_none() {
        if let Some(data) = source.c_contiguous_bytes() {
            return label_in_place(py, data, width, height, connectivity, want_labels);
        }
    }
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
    let labels = match result.labeling.labels {
        Some(l) => labels_array(py, l.data, width, height)?,
        None => py.None().into_bound(py),
    };
    let subpixel = match &result.subpixel {
        Some(c) => subpixel_array(py, c),
        None => py.None().into_bound(py),
    };
    let stats_rows = result.labeling.stats.as_deref().unwrap_or(&[]);
    results(
        py,
        labels,
        &result.background,
        stats_rows,
        subpixel,
        result.algorithm,
    )
}

/// `label_host`'s tuple.
fn results<'py>(
    py: Python<'py>,
    labels: Bound<'py, PyAny>,
    background: &Moments,
    components: &[ComponentStats],
    subpixel: Bound<'py, PyAny>,
    algorithm: &'static str,
) -> PyResult<Bound<'py, PyAny>> {
    let rows = OpencvRows::new(py, background, components);
    let out = (
        components.len() + 1,
        labels,
        rows.stats,
        rows.centroids,
        rows.sums,
        subpixel,
        algorithm,
    );
    Ok(out.into_pyobject(py)?.into_any())
}

/// The registry name of the run-based CPU labeler, which reads a C-ordered numpy mask where
/// it is and writes the label image into the numpy array returned.
const RUN_BASED: &str = "lsl";

/// Idle run-based labelers (one per concurrent call, buffers kept).
static IDLE_RUN_BASED: Mutex<Vec<Lsl>> = Mutex::new(Vec::new());

/// Labels a C-ordered mask without copying it: the label image is written straight into the
/// int32 array returned, the statistics into the row arrays.
fn label_in_place<'py>(
    py: Python<'py>,
    data: &[u8],
    width: u32,
    height: u32,
    connectivity: Connectivity,
    want_labels: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let (labels, values) = match want_labels {
        true => {
            let (labels, values) = uninit_array::<i32>(py, height as usize, width as usize);
            // SAFETY: i32 and u32 have the same size and alignment.
            let values = unsafe {
                std::slice::from_raw_parts_mut(
                    values.as_mut_ptr().cast::<MaybeUninit<u32>>(),
                    values.len(),
                )
            };
            (Some(labels), Some(values))
        }
        false => (None, None),
    };
    let want = if want_labels { Want::Both } else { Want::Stats };
    let (labeling, background) = py
        .detach(|| -> markerscope::Result<_> {
            let idle = IDLE_RUN_BASED
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop();
            let mut lsl = idle.unwrap_or_default();
            let labeling = lsl.label_bytes(data, width, height, connectivity, want, values);
            IDLE_RUN_BASED
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(lsl);
            let labeling = labeling?;
            let rows = labeling.stats.as_deref().unwrap_or(&[]);
            let background = stats::background_of_bytes(data, width, height, rows);
            Ok((labeling, background))
        })
        .map_err(to_py)?;
    // Every value of `labels` was written by label_bytes (it returned Ok).
    let labels = match labels {
        Some(l) => l.into_any(),
        None => py.None().into_bound(py),
    };
    let rows = labeling.stats.as_deref().unwrap_or(&[]);
    results(
        py,
        labels,
        &background,
        rows,
        py.None().into_bound(py),
        RUN_BASED,
    )
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
            let level = thresholds::levels::global_level(&image, &spec, invert);
            let mut mask = thresholds::apply(&image, &spec, invert)?;
            mask.data.par_iter_mut().for_each(|v| *v *= 255);
            Ok((level, mask))
        })
        .map_err(to_py)?;
    let mask = array2(py, mask.data, height as usize, width as usize)?;
    Ok((level, mask).into_pyobject(py)?.into_any())
}

/// Every algorithm of the registry: name, backend, connectivities, summary, whether it labels
/// CUDA arrays where they are (`device_input`), and whether it can run here (with the reason
/// when not).
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
        d.set_item("device_input", info.labels_device_memory())?;
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

/// The library call that the Python layer's per-call overhead is measured against
/// (`python/bench/overhead.py`): the labeler's `label` on a mask prepared once from `image`,
/// CPU backend, timed in Rust. The labeler and its buffers are kept, so that timed calls can
/// alternate with the Python calls they are compared with.
#[pyclass(module = "markerscope._markerscope", unsendable)]
pub struct RustCall {
    mask: BinaryImage,
    labeler: Box<dyn Labeler>,
    connectivity: Connectivity,
    want: Want,
}

#[pymethods]
impl RustCall {
    #[new]
    fn new(
        image: &Bound<'_, PyAny>,
        connectivity: u8,
        want_labels: bool,
        algorithm: &str,
    ) -> PyResult<Self> {
        let connectivity = parse_connectivity(connectivity)?;
        let Ok(a) = image.cast::<PyArray2<u8>>() else {
            return Err(wrong_array(image, "image", "uint8"));
        };
        let (width, height) = size_of(a.shape())?;
        let a = a.readonly();
        let mask = binarize(a.as_array(), width, height, |&v| v != 0).map_err(to_py)?;
        let labeler = backends(BackendChoice::Cpu)
            .create(algorithm, connectivity)
            .map_err(to_py)?;
        let want = if want_labels { Want::Both } else { Want::Stats };
        Ok(RustCall {
            mask,
            labeler,
            connectivity,
            want,
        })
    }

    /// Seconds of each of `repeat` calls.
    fn time(&mut self, py: Python<'_>, repeat: usize) -> PyResult<Vec<f64>> {
        py.detach(|| -> markerscope::Result<Vec<f64>> {
            (0..repeat)
                .map(|_| {
                    let start = std::time::Instant::now();
                    // Its results freed inside the timing, as a discarded Python result is.
                    drop(
                        self.labeler
                            .label(&self.mask, self.connectivity, self.want)?,
                    );
                    Ok(start.elapsed().as_secs_f64())
                })
                .collect()
        })
        .map_err(to_py)
    }
}
