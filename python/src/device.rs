//! CUDA arrays in, CUDA arrays out: a mask already in device memory (CuPy, PyTorch; described
//! by the Python layer from `__cuda_array_interface__`) labeled in place, the results written
//! into arrays the caller's library allocated (`alloc`), with no host copy of any image.

use crate::errors::to_py;
use crate::host::{backends, parse_connectivity};
use markerscope::ccl::cuda::device::{DeviceLabeler, DeviceMask};
use markerscope::ccl::BackendChoice;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::sync::Mutex;

/// Idle device labelers (one per concurrent call, buffers kept).
static IDLE: Mutex<Vec<DeviceLabeler>> = Mutex::new(Vec::new());

fn take() -> markerscope::Result<DeviceLabeler> {
    if let Some(l) = IDLE.lock().unwrap_or_else(|p| p.into_inner()).pop() {
        return Ok(l);
    }
    let gpu = backends(BackendChoice::Cuda).gpu()?.clone();
    DeviceLabeler::new(gpu)
}

fn put(labeler: DeviceLabeler) {
    IDLE.lock().unwrap_or_else(|p| p.into_inner()).push(labeler);
}

/// The device pointer of an array the caller's library allocated: `array.data_ptr()` for
/// torch, `array.data.ptr` for CuPy, or `__cuda_array_interface__["data"][0]`.
fn pointer_of(array: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    let cai = array.getattr("__cuda_array_interface__").map_err(|_| {
        PyValueError::new_err(format!(
            "{what}: the allocated array has no __cuda_array_interface__"
        ))
    })?;
    let data = cai.get_item("data")?;
    data.get_item(0)?.extract::<u64>()
}

/// Labels the device mask at `ptr` (`height` rows of `width` bytes, `row_pitch` bytes apart;
/// non-zero = foreground). `stream`: the array's stream from `__cuda_array_interface__`, waited
/// for first when it is neither absent nor a default stream (1, 2). `alloc(kind, rows)` returns
/// a new device array of the caller's library: kind "labels" (rows ignored; int32, the mask's
/// shape, C-contiguous), "stats" (int32, rows × 5), "centroids" (float64, rows × 2) or "sums"
/// (int64, rows × 2). Returns `(n, labels | None, stats, centroids, sums | None)`, n counting
/// the background row.
#[pyfunction]
#[pyo3(signature = (ptr, width, height, row_pitch, stream, connectivity, want_labels, want_sums, alloc))]
#[allow(clippy::too_many_arguments)]
pub fn label_device<'py>(
    py: Python<'py>,
    ptr: u64,
    width: u32,
    height: u32,
    row_pitch: usize,
    stream: Option<u64>,
    connectivity: u8,
    want_labels: bool,
    want_sums: bool,
    alloc: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let connectivity = parse_connectivity(connectivity)?;
    markerscope::frame::image::check_size(width, height).map_err(to_py)?;
    let mut labeler = take().map_err(to_py)?;
    let labels = match want_labels {
        true => Some(alloc.call1(("labels", 0usize))?),
        false => None,
    };
    let labels_ptr = labels
        .as_ref()
        .map(|l| pointer_of(l, "labels"))
        .transpose()?;
    let mask = DeviceMask {
        ptr,
        width,
        height,
        row_pitch,
    };
    let count = py.detach(|| -> markerscope::Result<u32> {
        if let Some(s) = stream.filter(|&s| s > 2) {
            // SAFETY: a stream handle of this device's context, from the array's interface.
            unsafe { markerscope::ccl::cuda::device::wait_for_stream(s)? };
        }
        // SAFETY: the Python layer read ptr, width, height and row_pitch from the array's
        // interface and keeps the array alive during the call; the label array was allocated
        // above with width × height int32 values and is alive in `labels`.
        unsafe { labeler.label(&mask, connectivity, labels_ptr) }
    });
    let count = match count {
        Ok(c) => c,
        Err(e) => {
            if !e.is_gpu_failure() {
                put(labeler);
            }
            return Err(to_py(e));
        }
    };
    let rows = count as usize + 1;
    let stats = alloc.call1(("stats", rows))?;
    let centroids = alloc.call1(("centroids", rows))?;
    let sums = match want_sums {
        true => Some(alloc.call1(("sums", rows))?),
        false => None,
    };
    let (stats_ptr, centroids_ptr) = (
        pointer_of(&stats, "stats")?,
        pointer_of(&centroids, "centroids")?,
    );
    let sums_ptr = sums.as_ref().map(|s| pointer_of(s, "sums")).transpose()?;
    // SAFETY: the three arrays were just allocated with `rows` rows of the layout
    // write_opencv_rows writes, and are alive until the function returns.
    let written =
        py.detach(|| unsafe { labeler.write_opencv_rows(stats_ptr, centroids_ptr, sums_ptr) });
    match written {
        Ok(()) => put(labeler),
        Err(e) => return Err(to_py(e)),
    }
    let none = || py.None().into_bound(py);
    let out = (
        rows,
        labels.unwrap_or_else(none),
        stats,
        centroids,
        sums.unwrap_or_else(none),
    );
    Ok(out.into_pyobject(py)?.into_any())
}
