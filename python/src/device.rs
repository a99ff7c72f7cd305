//! CUDA arrays in, CUDA arrays out: a mask already in device memory (CuPy, PyTorch; described
//! by the Python layer from `__cuda_array_interface__`) labeled in place, the results written
//! into arrays the caller's library allocated (`alloc`), with no host copy of any image.

use crate::errors::to_py;
use crate::host::{backends, parse_connectivity};
use markerscope::ccl::cuda::device::{
    device_algorithms, device_variant, pointer_device, DeviceLabeler, DeviceMask,
    KeepCurrentContext, DEFAULT_DEVICE_ALGORITHM,
};
use markerscope::ccl::cuda::flsl::Variant;
use markerscope::ccl::{algorithm_info, BackendChoice, Connectivity};
use markerscope::gpu::Gpu;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::{Arc, Mutex};

/// Idle device labelers (one per concurrent call, buffers kept), of every device and variant.
static IDLE: Mutex<Vec<DeviceLabeler>> = Mutex::new(Vec::new());

/// The devices opened besides the backends' own (a context each, kernels loaded once).
static OPENED: Mutex<Vec<Arc<Gpu>>> = Mutex::new(Vec::new());

/// The opened device `ordinal`: the backends' GPU when it is that one, else opened once.
fn gpu(ordinal: usize) -> markerscope::Result<Arc<Gpu>> {
    let detected = backends(BackendChoice::Cuda).gpu()?;
    if detected.ctx.ordinal() == ordinal {
        return Ok(detected.clone());
    }
    let mut opened = OPENED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(g) = opened.iter().find(|g| g.ctx.ordinal() == ordinal) {
        return Ok(g.clone());
    }
    let g = Arc::new(Gpu::open(ordinal, &crate::host::tuning().gpu)?);
    opened.push(g.clone());
    Ok(g)
}

fn take(ordinal: usize, variant: Variant) -> markerscope::Result<DeviceLabeler> {
    {
        let mut idle = IDLE.lock().unwrap_or_else(|p| p.into_inner());
        let found = idle
            .iter()
            .position(|l| l.ordinal() == ordinal && l.variant() == variant);
        if let Some(i) = found {
            return Ok(idle.swap_remove(i));
        }
    }
    DeviceLabeler::new(gpu(ordinal)?, variant)
}

/// The FLSL variant for `algorithm` (None: the default), or a ValueError naming the
/// algorithms that can label CUDA arrays.
fn device_algorithm(algorithm: Option<&str>, connectivity: Connectivity) -> PyResult<Variant> {
    let name = algorithm.unwrap_or(DEFAULT_DEVICE_ALGORITHM);
    let info = algorithm_info(name).map_err(to_py)?;
    let usable = || device_algorithms().collect::<Vec<_>>().join(", ");
    let variant = device_variant(info.name).ok_or_else(|| {
        PyValueError::new_err(format!(
            "algorithm: '{}' cannot label CUDA arrays; use one of {} (or pass a numpy array)",
            info.name,
            usable()
        ))
    })?;
    if !info.supports(connectivity) {
        return Err(PyValueError::new_err(format!(
            "algorithm: '{}' does not support {connectivity}-connectivity",
            info.name
        )));
    }
    Ok(variant)
}

fn put(labeler: DeviceLabeler) {
    IDLE.lock().unwrap_or_else(|p| p.into_inner()).push(labeler);
}

/// New device arrays of the caller's library, one per kind, with their device pointers:
/// `alloc(kinds, rows)` returns an `(array, pointer)` pair per kind, in one call (each Python
/// call between the labeling and the row writing leaves the GPU idle).
fn allocate<'py>(
    alloc: &Bound<'py, PyAny>,
    kinds: &[&str],
    rows: usize,
) -> PyResult<Vec<(Bound<'py, PyAny>, u64)>> {
    let made = alloc.call1((PyTuple::new(alloc.py(), kinds)?, rows))?;
    let pairs = made
        .try_iter()?
        .map(|pair| pair?.extract::<(Bound<'py, PyAny>, u64)>())
        .collect::<PyResult<Vec<_>>>()?;
    if pairs.len() != kinds.len() {
        return Err(PyValueError::new_err(format!(
            "alloc: {} arrays for {} kinds",
            pairs.len(),
            kinds.len()
        )));
    }
    Ok(pairs)
}

/// A grey image in device memory for sub-pixel centroids: `width × height` bytes, rows back
/// to back, on the mask's device, with the level the mask was thresholded at.
#[derive(Clone, Copy, Debug)]
struct DeviceGrey {
    ptr: u64,
    stream: Option<u64>,
    level: u8,
    invert: bool,
}

/// Labels the device mask at `ptr` (`height` rows of `width` bytes, `row_pitch` bytes apart;
/// non-zero = foreground) on the device that holds it, with `algorithm` (None: flsl_cdb; a
/// registry name that can label device memory). `stream`: the array's stream from
/// `__cuda_array_interface__`: when it is neither absent nor a default stream (1, 2), the
/// labeling waits on the GPU for its work, and its later work waits for the results (no host
/// wait; the default streams are ordered with the labeling's already). `alloc(kinds, rows)` returns, per kind, a new device array of the caller's
/// library on that device and its device pointer: kind "labels" (rows ignored; int32, the
/// mask's shape, C-contiguous), "stats" (int32, rows × 5), "centroids" (float64, rows × 2),
/// "sums" (int64, rows × 2) or "subpixel" (float64, rows × 2). With `grey` = `(ptr, stream, level, invert)` (a uint8 device image of
/// the mask's shape, rows back to back), the grey-weighted centroids (row 0 NaN). Returns `(n,
/// labels | None, stats, centroids, sums | None, subpixel | None, algorithm)`, n counting the
/// background row.
#[pyfunction]
#[pyo3(signature = (ptr, width, height, row_pitch, stream, connectivity, want_labels, want_sums, alloc, algorithm=None, grey=None))]
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
    algorithm: Option<&str>,
    grey: Option<(u64, Option<u64>, u8, bool)>,
) -> PyResult<Bound<'py, PyAny>> {
    let grey = grey.map(|(ptr, stream, level, invert)| DeviceGrey {
        ptr,
        stream,
        level,
        invert,
    });
    let connectivity = parse_connectivity(connectivity)?;
    let variant = device_algorithm(algorithm, connectivity)?;
    markerscope::frame::image::check_size(width, height).map_err(to_py)?;
    // The driver is initialised by opening the backends' device; then the mask's device
    // decides where the labeling runs.
    backends(BackendChoice::Cuda).gpu().map_err(to_py)?;
    // Labeling on the array's device makes that device's context current; the caller's comes
    // back on return.
    let _keep = KeepCurrentContext::new();
    let ordinal = pointer_device(ptr, "image").map_err(to_py)?;
    let mut labeler = take(ordinal, variant).map_err(to_py)?;
    let (labels, labels_ptr) = match want_labels {
        true => {
            let (array, ptr) = allocate(alloc, &["labels"], 0)?.remove(0);
            (Some(array), Some(ptr))
        }
        false => (None, None),
    };
    let mask = DeviceMask {
        ptr,
        width,
        height,
        row_pitch,
    };
    let streams = [stream, grey.and_then(|g| g.stream)];
    let count = py.detach(|| -> markerscope::Result<u32> {
        labeler.bind()?;
        for s in streams.into_iter().flatten() {
            // SAFETY: a stream handle of this device's context, from an array's interface.
            unsafe { labeler.order_after(s)? };
        }
        // SAFETY: the Python layer read ptr, width, height and row_pitch from the array's
        // interface and keeps the array alive during the call; the label array was allocated
        // above with width × height int32 values and is alive in `labels`.
        unsafe {
            match grey {
                Some(_) => labeler.label_for_subpixel(&mask, connectivity, labels_ptr),
                None => labeler.label(&mask, connectivity, labels_ptr),
            }
        }
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
    let mut kinds = vec!["stats", "centroids"];
    if want_sums {
        kinds.push("sums");
    }
    if grey.is_some() {
        kinds.push("subpixel");
    }
    // The labeling kernels still run while the caller's library allocates.
    let made = match allocate(alloc, &kinds, rows) {
        Ok(made) => made,
        Err(e) => {
            // The kernels write the caller's arrays: they finish before those can be freed.
            let waiting = &mut labeler; // `&mut`: Send without the labeler being Sync
            if py.detach(move || waiting.finish()).is_ok() {
                put(labeler);
            }
            return Err(e);
        }
    };
    // `allocate` checked that there is one array per kind.
    let mut made = made.into_iter();
    let mut optional = |wanted: bool| match wanted {
        true => made.next().map(|(array, ptr)| (Some(array), Some(ptr))),
        false => Some((None, None)),
    };
    let rows_out = (
        optional(true),
        optional(true),
        optional(want_sums),
        optional(grey.is_some()),
    );
    let (
        Some((Some(stats), Some(stats_ptr))),
        Some((Some(centroids), Some(centroids_ptr))),
        Some((sums, sums_ptr)),
        Some((subpixel, subpixel_ptr)),
    ) = rows_out
    else {
        // The label image is written by kernels still running.
        let waiting = &mut labeler;
        let _ = py.detach(move || waiting.finish());
        return Err(PyValueError::new_err("alloc: fewer arrays than kinds"));
    };
    // SAFETY: the arrays were just allocated with `rows` rows of the layouts
    // write_opencv_rows and write_subpixel_rows write, and go to the caller; the grey image is
    // the caller's, width × height bytes back to back (the Python layer checked its shape and
    // made it contiguous). Memory the caller frees afterwards is reused by its library on the
    // stream it was allocated on, which order_before (or the legacy default stream) puts after
    // these kernels.
    let written = py.detach(|| -> markerscope::Result<()> {
        // The allocations above ran the caller's library, which may have changed devices.
        labeler.bind()?;
        unsafe {
            labeler.write_opencv_rows(stats_ptr, centroids_ptr, sums_ptr)?;
            if let (Some(g), Some(out)) = (grey, subpixel_ptr) {
                labeler.write_subpixel_rows(g.ptr, g.level, g.invert, out)?;
            }
            // The caller's library orders its later work on these streams after the rows (the
            // legacy default stream, where both arrays' libraries work by default, needs
            // nothing); the host does not wait.
            for s in streams.into_iter().flatten() {
                labeler.order_before(s)?;
            }
        }
        Ok(())
    });
    let algorithm = labeler.name();
    match written {
        Ok(()) => put(labeler),
        Err(e) => {
            if !e.is_gpu_failure() {
                put(labeler);
            }
            return Err(to_py(e));
        }
    }
    let none = || py.None().into_bound(py);
    let out = (
        rows,
        labels.unwrap_or_else(none),
        stats,
        centroids,
        sums.unwrap_or_else(none),
        subpixel.unwrap_or_else(none),
        algorithm,
    );
    Ok(out.into_pyobject(py)?.into_any())
}
