//! Library errors as Python exceptions, with the CLI's messages.

use markerscope::Error;
use pyo3::exceptions::{PyKeyboardInterrupt, PyOSError, PyRuntimeError, PyValueError};
use pyo3::PyErr;

/// A bad request is a `ValueError`, a file that cannot be read or written an `OSError`, a GPU
/// failure a `RuntimeError`.
pub fn to_py(error: Error) -> PyErr {
    let message = error.to_string();
    match kind(&error) {
        Kind::Value => PyValueError::new_err(message),
        Kind::Os => PyOSError::new_err(message),
        Kind::Runtime => PyRuntimeError::new_err(message),
        Kind::Interrupt => PyKeyboardInterrupt::new_err(message),
    }
}

enum Kind {
    Value,
    Os,
    Runtime,
    Interrupt,
}

fn kind(error: &Error) -> Kind {
    match error {
        Error::Image { .. } | Error::Io { .. } | Error::Output { .. } | Error::Stream { .. } => {
            Kind::Os
        }
        Error::Cuda { .. } | Error::CudaUnavailable(_) => Kind::Runtime,
        Error::Interrupted { .. } => Kind::Interrupt,
        Error::Context { source, .. } => kind(source),
        Error::InvalidSize { .. }
        | Error::UnknownAlgorithm { .. }
        | Error::UnsupportedConnectivity { .. }
        | Error::InvalidThreshold { .. }
        | Error::Invalid(_) => Kind::Value,
    }
}
