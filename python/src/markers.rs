//! Square fiducials from Python: detection in OpenCV's `detectMarkers` layout, marker images
//! to print (`generateImageMarker`) and the square-marker pose (`solvePnP` with
//! `SOLVEPNP_IPPE_SQUARE`). The Python layer shapes the results as OpenCV does.

use crate::errors::{check_memory, to_py};
use crate::host::{backends, parse_backend, require_gpu, uninit_array};
use markerscope::ccl::BackendChoice;
use markerscope::fiducial::dictionary::predefined_names;
use markerscope::fiducial::{self, Detections, DetectorParams, Dictionary, MarkerDetector};
use markerscope::frame::image::GrayImage;
use markerscope::geometry::calibration::Calibration;
use numpy::{PyArray2, PyArrayMethods, PyReadonlyArray2, PyReadonlyArray3, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The predefined dictionaries' names, in OpenCV's order (`cv2.aruco.DICT_*` values).
pub fn dictionary_names() -> Vec<&'static str> {
    predefined_names().collect()
}

/// Predefined dictionaries made so far (their tables are parsed once).
static PREDEFINED: Mutex<Vec<Arc<Dictionary>>> = Mutex::new(Vec::new());

/// A predefined dictionary by name (as `Dictionary::predefined` reads it), or one from an
/// OpenCV dictionary file at that path; an unknown name is a `ValueError` listing the names.
fn dictionary(name: &str) -> PyResult<Arc<Dictionary>> {
    match Dictionary::predefined(name) {
        Ok(made) => {
            let mut known = PREDEFINED.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(d) = known.iter().find(|d| d.name() == made.name()) {
                return Ok(d.clone());
            }
            let made = Arc::new(made);
            known.push(made.clone());
            Ok(made)
        }
        Err(_) if Path::new(name).is_file() => {
            Ok(Arc::new(Dictionary::load(Path::new(name)).map_err(to_py)?))
        }
        Err(unknown) => Err(PyValueError::new_err(format!("dictionary: {unknown}"))),
    }
}

fn dictionaries(names: &[String]) -> PyResult<Vec<Arc<Dictionary>>> {
    if names.is_empty() {
        return Err(PyValueError::new_err(
            "dictionary: give at least one marker dictionary",
        ));
    }
    names.iter().map(|n| dictionary(n)).collect()
}

/// The detector's settings from keyword values: `refine` and the `DetectorParams` fields by
/// name; an unknown name is a `TypeError` listing the known ones.
fn detector_params(
    refine: bool,
    parameters: Option<&Bound<'_, PyDict>>,
) -> PyResult<DetectorParams> {
    let mut p = DetectorParams {
        refine_corners: refine,
        ..DetectorParams::default()
    };
    let Some(parameters) = parameters else {
        return Ok(p);
    };
    for (key, value) in parameters.iter() {
        let key: String = key.extract()?;
        let float = |v: &Bound<'_, PyAny>| -> PyResult<f64> {
            let x: f64 = v.extract().map_err(|_| {
                PyTypeError::new_err(format!("parameters['{key}']: expected a number, got {v}"))
            })?;
            if x.is_finite() {
                Ok(x)
            } else {
                Err(PyValueError::new_err(format!(
                    "parameters['{key}']: expected a finite number, got {x}"
                )))
            }
        };
        let whole = |v: &Bound<'_, PyAny>| -> PyResult<u32> {
            v.extract().map_err(|_| {
                PyTypeError::new_err(format!(
                    "parameters['{key}']: expected an integer in 0..=4294967295, got {v}"
                ))
            })
        };
        match key.as_str() {
            "window_min" => p.window_min = whole(&value)?,
            "window_max" => p.window_max = whole(&value)?,
            "window_step" => p.window_step = whole(&value)?,
            "min_distance_to_border" => p.min_distance_to_border = whole(&value)?,
            "threshold_constant" => p.threshold_constant = float(&value)?,
            "min_perimeter_rate" => p.min_perimeter_rate = float(&value)?,
            "max_perimeter_rate" => p.max_perimeter_rate = float(&value)?,
            "polygon_accuracy_rate" => p.polygon_accuracy_rate = float(&value)?,
            "min_corner_distance_rate" => p.min_corner_distance_rate = float(&value)?,
            "cell_margin" => p.cell_margin = float(&value)?,
            "min_cell_std_dev" => p.min_cell_std_dev = float(&value)?,
            "max_border_error_rate" => p.max_border_error_rate = float(&value)?,
            "error_correction_rate" => p.error_correction_rate = float(&value)?,
            other => {
                return Err(PyTypeError::new_err(format!(
                    "parameters: unknown setting '{other}'; known: {}",
                    PARAMETER_NAMES.join(", ")
                )))
            }
        }
    }
    Ok(p)
}

const PARAMETER_NAMES: [&str; 13] = [
    "window_min",
    "window_max",
    "window_step",
    "threshold_constant",
    "min_perimeter_rate",
    "max_perimeter_rate",
    "polygon_accuracy_rate",
    "min_corner_distance_rate",
    "min_distance_to_border",
    "cell_margin",
    "min_cell_std_dev",
    "max_border_error_rate",
    "error_correction_rate",
];

/// Idle detectors (buffers kept between calls), one per concurrent call, with the backend
/// choice each was made for.
static IDLE: Mutex<Vec<(BackendChoice, MarkerDetector)>> = Mutex::new(Vec::new());

/// The one place a marker detector is made for the Python package: `fiducial::MarkerDetector`
/// on the backend choice (cuda, and auto with a usable GPU: the GPU detector; cpu: the CPU's).
fn take_detector(
    backend: BackendChoice,
    params: DetectorParams,
) -> PyResult<(BackendChoice, MarkerDetector)> {
    let found = backends(backend);
    require_gpu(backend, found)?;
    let mut idle = IDLE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(i) = idle
        .iter()
        .position(|(b, d)| *b == backend && *d.params() == params)
    {
        return Ok(idle.swap_remove(i));
    }
    drop(idle);
    match MarkerDetector::new(params, backend, found) {
        Ok(d) => Ok((backend, d)),
        Err(e @ markerscope::error::Error::Invalid(_)) => {
            Err(PyValueError::new_err(format!("parameters: {e}")))
        }
        Err(e) => Err(to_py(e)),
    }
}

fn put_detector(detector: (BackendChoice, MarkerDetector)) {
    IDLE.lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(detector);
}

/// Detects the markers of `dictionaries` (names or file paths) in a 2-D uint8 grey image:
/// `(corners (N, 4, 2) float32, ids (N,) int32, dictionary indices (N,) int32, rejected (M,
/// 4, 2) float32)`.
#[pyfunction]
#[pyo3(signature = (grey, dictionaries, backend="auto", refine=true, parameters=None))]
pub fn detect_markers<'py>(
    py: Python<'py>,
    grey: PyReadonlyArray2<'py, u8>,
    dictionaries: Vec<String>,
    backend: &str,
    refine: bool,
    parameters: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyAny>> {
    let backend = parse_backend(backend)?;
    let dictionaries = self::dictionaries(&dictionaries)?;
    let params = detector_params(refine, parameters)?;
    let shape = grey.shape();
    let (Ok(height), Ok(width)) = (u32::try_from(shape[0]), u32::try_from(shape[1])) else {
        return Err(PyValueError::new_err(format!(
            "image: shape {shape:?} is too large"
        )));
    };
    markerscope::frame::image::check_size(width, height)
        .map_err(|e| PyValueError::new_err(format!("image: {e}")))?;
    // The grey copy, and per threshold window a mask and 32-bit labels.
    let windows = params
        .windows()
        .map_err(|e| PyValueError::new_err(format!("parameters: {e}")))?
        .len() as u64;
    let pixels = width as u64 * height as u64;
    check_memory(
        &format!("finding markers in a {width}x{height} image"),
        pixels * (1 + windows * 9),
    )?;
    let view = grey.as_array();
    let data = match view.as_slice() {
        Some(s) => s.to_vec(),
        None => view.iter().copied().collect(),
    };
    let image = GrayImage::new(width, height, data).map_err(to_py)?;
    let mut detector = take_detector(backend, params)?;
    let found = py.detach(|| {
        let refs: Vec<&Dictionary> = dictionaries.iter().map(|d| d.as_ref()).collect();
        detector.1.detect(&image, &refs)
    });
    put_detector(detector);
    let found: Detections = found.map_err(to_py)?;
    let corners = quads(py, found.markers.iter().map(|m| m.corners))?;
    let ids: Vec<i32> = found.markers.iter().map(|m| m.id as i32).collect();
    let indices: Vec<i32> = found.markers.iter().map(|m| m.dictionary as i32).collect();
    let rejected = quads(py, found.rejected.iter().copied())?;
    let out = (
        corners,
        numpy::PyArray1::from_vec(py, ids),
        numpy::PyArray1::from_vec(py, indices),
        rejected,
    );
    Ok(out.into_pyobject(py)?.into_any())
}

/// Quads as an `(N, 4, 2)` float32 array.
fn quads<'py>(
    py: Python<'py>,
    corners: impl ExactSizeIterator<Item = [f32; 8]>,
) -> PyResult<Bound<'py, PyAny>> {
    let n = corners.len();
    let (array, values) = uninit_array::<f32>(py, n, 8)?;
    for (out, quad) in values.chunks_exact_mut(8).zip(corners) {
        for (o, v) in out.iter_mut().zip(quad) {
            o.write(v);
        }
    }
    Ok(array.reshape([n, 4, 2])?.into_any())
}

/// Marker `id` of `dictionary` as a `size`² uint8 image with `border_bits` cells of black
/// border: `cv2.aruco.generateImageMarker`.
#[pyfunction]
#[pyo3(signature = (dictionary, id, size, border_bits=1))]
pub fn generate_marker<'py>(
    py: Python<'py>,
    dictionary: &str,
    id: u32,
    size: u32,
    border_bits: u32,
) -> PyResult<Bound<'py, PyArray2<u8>>> {
    let dict = self::dictionary(dictionary)?;
    let mut image = fiducial::generate_marker(&dict, id, size, border_bits).map_err(to_py)?;
    let side = size as usize;
    let data = std::mem::take(&mut image.data);
    let array = numpy::ndarray::Array2::from_shape_vec((side, side), data)
        .map_err(|e| PyValueError::new_err(format!("marker image: {e}")))?;
    Ok(PyArray2::from_owned_array(py, array))
}

/// The poses of markers from their corners (`(N, 4, 2)` float64, OpenCV's corner order):
/// `(rvecs (N, 3), tvecs (N, 3))`, each `cv2.solvePnP(..., SOLVEPNP_IPPE_SQUARE)`.
/// `camera`: fx, fy, cx, cy; `dist`: k1, k2, p1, p2, k3.
#[pyfunction]
pub fn estimate_pose<'py>(
    py: Python<'py>,
    corners: PyReadonlyArray3<'py, f64>,
    marker_length: f64,
    camera: [f64; 4],
    dist: [f64; 5],
) -> PyResult<Bound<'py, PyAny>> {
    let [fx, fy, cx, cy] = camera;
    let calibration = Calibration {
        fx,
        fy,
        cx,
        cy,
        dist,
    };
    let view = corners.as_array();
    if view.shape()[1..] != [4, 2] {
        return Err(PyValueError::new_err(format!(
            "corners: expected N x 4 x 2 values, got shape {:?}",
            view.shape()
        )));
    }
    let n = view.shape()[0];
    let (rvecs, rvec_values) = uninit_array::<f64>(py, n, 3)?;
    let (tvecs, tvec_values) = uninit_array::<f64>(py, n, 3)?;
    for (i, (r, t)) in rvec_values
        .chunks_exact_mut(3)
        .zip(tvec_values.chunks_exact_mut(3))
        .enumerate()
    {
        let quad: [[f64; 2]; 4] = std::array::from_fn(|k| [view[[i, k, 0]], view[[i, k, 1]]]);
        let pose = fiducial::estimate_pose(&quad, marker_length, &calibration)
            .map_err(|e| PyValueError::new_err(format!("marker {i}: {e}")))?;
        for (o, v) in r.iter_mut().zip(pose.rvec) {
            o.write(v);
        }
        for (o, v) in t.iter_mut().zip(pose.tvec) {
            o.write(v);
        }
    }
    Ok((rvecs, tvecs).into_pyobject(py)?.into_any())
}
