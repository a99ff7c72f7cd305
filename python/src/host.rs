//! numpy in, numpy out: labeling and statistics of host arrays (on the CPU, or on the GPU with
//! an upload), thresholds, and what this machine can run.

use crate::errors::{check_memory, gpu_unavailable, to_py, try_vec};
use markerscope::ccl::cpu::lsl::Lsl;
use markerscope::ccl::stats::{self, ComponentStats, Moments};
use markerscope::ccl::subpixel::{GreyWeights, SubpixelCentroid};
use markerscope::ccl::{
    keep_all, Backend, BackendChoice, Backends, CentroidRows, Connectivity, LabelRequest, Labeler,
    Labeling, Mask, Want,
};
use markerscope::frame::image::{BinaryImage, GrayImage};
use markerscope::pipeline::{resolve_algorithm, PipelineSettings};
use markerscope::threshold as thresholds;
use markerscope::threshold::levels::ThresholdLevels;
use markerscope::threshold::spec::ThresholdSpec;
use markerscope::tuning::Tuning;
use numpy::ndarray::{Array2, ArrayView2};
use numpy::npyffi::{get_type_object, npy_intp, NpyTypes};
use numpy::{
    PyArray2, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods,
    PY_ARRAY_API,
};
use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
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
    let mut data = try_vec::<u8>("the grey image's copy", view.len())?;
    for (o, v) in data.iter_mut().zip(view.iter()) {
        *o = *v;
    }
    GrayImage::new(width, height, data).map_err(to_py)
}

/// A new numpy array and its values, still to be written.
pub type Uninit<'py, T> = (Bound<'py, PyArray2<T>>, &'py mut [MaybeUninit<T>]);

/// A new C-ordered numpy array of `rows × cols` values, uninitialised, and its values as a
/// slice to fill (every value must be written before Python sees the array); a
/// `MemoryError` (numpy's, with the size) when it cannot be allocated.
pub fn uninit_array<'py, T: numpy::Element>(
    py: Python<'py>,
    rows: usize,
    cols: usize,
) -> PyResult<Uninit<'py, T>> {
    let mut dims = [rows as npy_intp, cols as npy_intp];
    // SAFETY: numpy's array constructor with a new descriptor reference (stolen), no strides
    // and no data (numpy allocates C-ordered data); a null result is numpy's exception.
    let array = unsafe {
        let ptr = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            get_type_object(py, NpyTypes::PyArray_Type),
            T::get_dtype(py).into_dtype_ptr(),
            2,
            dims.as_mut_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
        );
        Bound::from_owned_ptr_or_err(py, ptr)?.cast_into_unchecked::<PyArray2<T>>()
    };
    // SAFETY: a fresh C-ordered array owns rows × cols contiguous values that nothing else
    // references; `MaybeUninit` makes no claim about their contents.
    let values = unsafe { std::slice::from_raw_parts_mut(array.data().cast(), rows * cols) };
    Ok((array, values))
}

/// The integer type of the statistics: OpenCV's int32, or int64 for components and rows of
/// 2^31 pixels or more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatsType {
    Int32,
    Int64,
}

impl StatsType {
    pub fn parse(name: &str) -> PyResult<StatsType> {
        match name {
            "int32" => Ok(StatsType::Int32),
            "int64" => Ok(StatsType::Int64),
            other => Err(PyValueError::new_err(format!(
                "stats_dtype: expected numpy.int32 or numpy.int64, got {other}"
            ))),
        }
    }
}

/// OpenCV's `stats` (5 columns), `centroids` (float64, 2) and our sums (int64, 2) of the
/// background row and the components, in label order, written straight into new numpy
/// arrays.
pub struct OpencvRows<'py> {
    pub stats: Bound<'py, PyAny>,
    pub centroids: Bound<'py, PyArray2<f64>>,
    pub sums: Bound<'py, PyArray2<i64>>,
}

type Row = ([i64; 5], [f64; 2], [i64; 2]);

fn row_of(c: &ComponentStats) -> Row {
    (
        [
            c.left as i64,
            c.top as i64,
            c.width as i64,
            c.height as i64,
            c.area as i64,
        ],
        [c.centroid_x, c.centroid_y],
        [c.sum_x as i64, c.sum_y as i64],
    )
}

/// Fills a new `rows × C` array from `values`.
fn filled<'py, T: numpy::Element + 'py, const C: usize>(
    py: Python<'py>,
    rows: usize,
    values: impl Iterator<Item = [T; C]>,
) -> PyResult<Bound<'py, PyArray2<T>>> {
    let (array, slots) = uninit_array::<T>(py, rows, C)?;
    let mut written = 0;
    for (out, row) in slots.chunks_exact_mut(C).zip(values) {
        for (o, v) in out.iter_mut().zip(row) {
            o.write(v);
        }
        written += 1;
    }
    if written != rows {
        return Err(pyo3::exceptions::PyRuntimeError::new_err(format!(
            "result rows: {written} written of {rows}"
        )));
    }
    Ok(array)
}

impl<'py> OpencvRows<'py> {
    /// An `OverflowError` when a value does not fit int32 statistics (OpenCV refuses such
    /// images; the int64 sums are exact either way).
    pub fn new(
        py: Python<'py>,
        background: &Moments,
        components: &[ComponentStats],
        stats_type: StatsType,
    ) -> PyResult<Self> {
        // What OpenCV writes when no pixel is background.
        let no_background: Row = ([-1, i32::MAX as i64, 0, 0, 0], [f64::NAN, f64::NAN], [0, 0]);
        let first = match background.area {
            0 => no_background,
            _ => row_of(&background.to_stats(0)),
        };
        let rows = || std::iter::once(first).chain(components.iter().map(row_of));
        if stats_type == StatsType::Int32 {
            check_int32(rows().map(|r| r.0))?;
        }
        let n = components.len() + 1;
        let stats = match stats_type {
            StatsType::Int32 => filled(py, n, rows().map(|r| r.0.map(|v| v as i32)))?.into_any(),
            StatsType::Int64 => filled(py, n, rows().map(|r| r.0))?.into_any(),
        };
        Ok(OpencvRows {
            stats,
            centroids: filled(py, n, rows().map(|r| r.1))?,
            sums: filled(py, n, rows().map(|r| r.2))?,
        })
    }
}

const STAT_NAMES: [&str; 5] = ["left", "top", "width", "height", "area"];

/// An `OverflowError` naming the first row and statistic above int32's range.
fn check_int32(rows: impl Iterator<Item = [i64; 5]>) -> PyResult<()> {
    for (label, row) in rows.enumerate() {
        if let Some(k) = row.iter().position(|&v| v > i32::MAX as i64) {
            return Err(PyOverflowError::new_err(format!(
                "label {label}: its {} is {} px, above the int32 statistics' 2147483647 (OpenCV \
                 refuses such images); pass stats_dtype=numpy.int64 for int64 statistics",
                STAT_NAMES[k], row[k]
            )));
        }
    }
    Ok(())
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
fn subpixel_array<'py>(
    py: Python<'py>,
    centroids: &[SubpixelCentroid],
) -> PyResult<Bound<'py, PyAny>> {
    let rows = std::iter::once([f64::NAN, f64::NAN]).chain(centroids.iter().map(|c| [c.x, c.y]));
    Ok(filled(py, centroids.len() + 1, rows)?.into_any())
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
#[pyo3(signature = (image, connectivity, want_labels, backend, algorithm=None, grey=None, level=None, invert=false, stats_dtype="int32"))]
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
    stats_dtype: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let connectivity = parse_connectivity(connectivity)?;
    let backend = parse_backend(backend)?;
    let stats_type = StatsType::parse(stats_dtype)?;
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
    require_gpu(backend, backends)?;
    let settings = PipelineSettings {
        connectivity,
        algorithm,
        backend,
        want_labels,
        subpixel: grey.is_some(),
        ..PipelineSettings::default()
    };
    let resolved = resolve_algorithm(&settings, backends).map_err(to_py)?;
    let pixels = width as u64 * height as u64;
    let in_place = resolved.name == RUN_BASED && grey.is_none();
    let in_place = in_place.then(|| source.c_contiguous_bytes()).flatten();
    // The label image when asked for; a mask read in place needs at most a byte a pixel of
    // runs besides, a copied one the copy and the library's scratch labels too.
    let per_pixel = 4 * want_labels as u64 + if in_place.is_some() { 1 } else { 1 + 4 };
    check_memory(
        &format!("labeling a {width}x{height} image"),
        pixels * per_pixel,
    )?;
    if let Some(data) = in_place {
        return label_in_place(
            py,
            data,
            width,
            height,
            connectivity,
            want_labels,
            stats_type,
        );
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
        Some(c) => subpixel_array(py, c)?,
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
        stats_type,
    )
}

/// The `GpuUnavailableError` when the CUDA backend is asked for and there is none.
pub fn require_gpu(backend: BackendChoice, backends: &Backends) -> PyResult<()> {
    match (backend, backends.cuda_unavailable_reason()) {
        (BackendChoice::Cuda, Some(reason)) => Err(gpu_unavailable(&reason)),
        _ => Ok(()),
    }
}

/// `label_host`'s tuple.
fn results<'py>(
    py: Python<'py>,
    labels: Bound<'py, PyAny>,
    background: &Moments,
    components: &[ComponentStats],
    subpixel: Bound<'py, PyAny>,
    algorithm: &'static str,
    stats_type: StatsType,
) -> PyResult<Bound<'py, PyAny>> {
    let rows = OpencvRows::new(py, background, components, stats_type)?;
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
    stats_type: StatsType,
) -> PyResult<Bound<'py, PyAny>> {
    let (labels, values) = match want_labels {
        true => {
            let (labels, values) = uninit_array::<i32>(py, height as usize, width as usize)?;
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
        stats_type,
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
            let request = LabelRequest::new(Mask::Bytes(mask), connectivity, want);
            let rows = CentroidRows {
                weights: &weights,
                keep: &keep_all,
            };
            labeler
                .label_weighted(request, rows)
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
    markerscope::frame::image::check_size(width, height)
        .map_err(|e| PyValueError::new_err(format!("grey: {e}")))?;
    // The grey copy, the mask, and an adaptive threshold's integral image.
    let pixels = width as u64 * height as u64;
    check_memory(
        &format!("thresholding a {width}x{height} image"),
        pixels * 10,
    )?;
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
                .map(|c| u32::from(c.number()))
                .collect::<Vec<u32>>(),
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
