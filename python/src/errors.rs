//! Library errors as Python exceptions: a bad request is a `ValueError`, a file that cannot be
//! read or written an `OSError`, a GPU failure a `RuntimeError`, no usable GPU a
//! `GpuUnavailableError`, memory that cannot be had a `MemoryError`.

use markerscope::Error;
use pyo3::exceptions::{
    PyKeyboardInterrupt, PyMemoryError, PyOSError, PyRuntimeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};
use pyo3::PyErr;

pub fn to_py(error: Error) -> PyErr {
    let message = python_words(error.to_string());
    match kind(&error) {
        Kind::Value => PyValueError::new_err(message),
        Kind::Os => PyOSError::new_err(message),
        Kind::Runtime => PyRuntimeError::new_err(message),
        Kind::Interrupt => PyKeyboardInterrupt::new_err(message),
        Kind::NoGpu(reason) => gpu_unavailable(&reason),
    }
}

/// The CLI's flags that library messages name, as the Python arguments of the same meaning.
const FLAGS: [(&str, &str); 6] = [
    ("--backend cuda", "backend='cuda'"),
    ("--backend cpu", "backend='cpu'"),
    ("--backend auto", "backend='auto'"),
    ("--connectivity 4", "connectivity=4"),
    ("--connectivity 8", "connectivity=8"),
    ("--max-frames N", "max_frames=N"),
];

fn python_words(mut message: String) -> String {
    for (flag, argument) in FLAGS {
        if message.contains(flag) {
            message = message.replace(flag, argument);
        }
    }
    message
}

enum Kind {
    Value,
    Os,
    Runtime,
    Interrupt,
    NoGpu(String),
}

fn kind(error: &Error) -> Kind {
    match error {
        Error::Image { .. } | Error::Io { .. } | Error::Output { .. } | Error::Stream { .. } => {
            Kind::Os
        }
        Error::Cuda { .. } => Kind::Runtime,
        Error::CudaUnavailable(reason) => Kind::NoGpu(reason.clone()),
        Error::Interrupted { .. } => Kind::Interrupt,
        Error::Context { source, .. } => kind(source),
        Error::InvalidSize { .. }
        | Error::UnknownAlgorithm { .. }
        | Error::UnsupportedConnectivity { .. }
        | Error::InvalidThreshold { .. }
        | Error::Invalid(_) => Kind::Value,
    }
}

/// `markerscope.GpuUnavailableError`: the one exception for "no usable GPU", whatever the call.
/// It is a `RuntimeError` (the machine lacks something) and a `ValueError` (the request asked
/// for the GPU), so handlers written for either catch it.
pub fn gpu_unavailable_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    static TYPE: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let ty = TYPE.get_or_try_init(py, || -> PyResult<Py<PyType>> {
        let bases = PyTuple::new(
            py,
            [
                py.get_type::<PyRuntimeError>(),
                py.get_type::<PyValueError>(),
            ],
        )?;
        let namespace = PyDict::new(py);
        namespace.set_item("__module__", "markerscope")?;
        namespace.set_item(
            "__doc__",
            "No usable GPU: no NVIDIA driver or device, or the CUDA backend could not start on it \
             (the message says why). A RuntimeError and a ValueError.",
        )?;
        let made = py
            .get_type::<PyType>()
            .call1(("GpuUnavailableError", bases, namespace))?;
        Ok(made.cast_into::<PyType>()?.unbind())
    })?;
    Ok(ty.bind(py))
}

/// The `GpuUnavailableError` for `reason` (what the driver or the device said).
pub fn gpu_unavailable(reason: &str) -> PyErr {
    let message = format!("CUDA backend unavailable: {reason}");
    Python::attach(|py| match gpu_unavailable_type(py) {
        Ok(ty) => PyErr::from_type(ty.clone(), message),
        Err(e) => e,
    })
}

/// The `MemoryError` for `bytes` that `what` needs and that cannot be allocated.
pub fn out_of_memory(what: &str, bytes: u64) -> PyErr {
    PyMemoryError::new_err(format!(
        "{what} needs {} of memory, which cannot be allocated here",
        human_bytes(bytes)
    ))
}

fn human_bytes(bytes: u64) -> String {
    const GIB: f64 = (1u64 << 30) as f64;
    const MIB: f64 = (1u64 << 20) as f64;
    match bytes as f64 {
        b if b >= GIB => format!("{:.1} GiB ({bytes} bytes)", b / GIB),
        b if b >= MIB => format!("{:.1} MiB ({bytes} bytes)", b / MIB),
        _ => format!("{bytes} bytes"),
    }
}

/// Checks that `bytes` can be reserved now (address space and commit limits: `ulimit -v`, no
/// overcommit) before work that allocates about that much inside the library, where a failed
/// allocation would end the process. The reservation is given back at once; its pages are
/// never touched, so it costs no memory.
pub fn check_memory(what: &str, bytes: u64) -> PyResult<()> {
    let fits = usize::try_from(bytes)
        .ok()
        .is_some_and(|n| Vec::<u8>::new().try_reserve_exact(n).is_ok());
    if fits {
        Ok(())
    } else {
        Err(out_of_memory(what, bytes))
    }
}

/// A zeroed vector of `len` values, or a `MemoryError` naming `what`.
pub fn try_vec<T: Clone + Default>(what: &str, len: usize) -> PyResult<Vec<T>> {
    let mut v = Vec::new();
    let bytes = len as u64 * std::mem::size_of::<T>() as u64;
    v.try_reserve_exact(len)
        .map_err(|_| out_of_memory(what, bytes))?;
    v.resize(len, T::default());
    Ok(v)
}
