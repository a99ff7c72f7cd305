//! Library errors. Each message says what failed, on which input, and what to do.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {why}", path.display())]
    Image { path: PathBuf, why: String },

    #[error("invalid image size {width}x{height}: {why}")]
    InvalidSize {
        width: u32,
        height: u32,
        why: String,
    },

    #[error("unknown algorithm '{name}'; available: {available}")]
    UnknownAlgorithm { name: String, available: String },

    #[error("algorithm '{algorithm}' does not support {connectivity}-connectivity; algorithms that do: {supported}")]
    UnsupportedConnectivity {
        algorithm: String,
        connectivity: u8,
        supported: String,
    },

    #[error("invalid threshold '{spec}': {why} (expected fixed:T with T in 0..=255, otsu, triangle, background:K with a number K >= 0, or adaptive:W:C with odd W in 3..=4095 and a number C)")]
    InvalidThreshold { spec: String, why: String },

    #[error("CUDA backend unavailable: {0}")]
    CudaUnavailable(String),

    #[error("CUDA error during {step}: {why}")]
    Cuda { step: String, why: String },

    #[error("{0}")]
    Invalid(String),

    #[error("{}: cannot write the output: {why}", path.display())]
    Output { path: PathBuf, why: String },

    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A result stream (`--stream URL`) that cannot be opened or sent to.
    #[error("stream '{url}': {why}")]
    Stream { url: String, why: String },

    /// A stop signal (SIGINT, SIGTERM, SIGHUP) ended the work; nothing was written.
    #[error("interrupted by {name}: stopped without writing any output")]
    Interrupted { signal: i32, name: String },

    /// An error with what was being done when it happened (e.g. which benchmark image).
    #[error("{what}: {source}")]
    Context {
        what: String,
        #[source]
        source: Box<Error>,
    },
}

impl Error {
    pub fn image(path: &Path, why: impl Into<String>) -> Self {
        Error::Image {
            path: path.to_path_buf(),
            why: why.into(),
        }
    }

    pub fn context(what: impl Into<String>, source: Error) -> Self {
        Error::Context {
            what: what.into(),
            source: Box::new(source),
        }
    }

    pub fn io(path: &Path, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// The GPU failed (a CUDA call, out of GPU memory, a kernel launch), as opposed to a bad
    /// input: the CPU backend could do the same work.
    pub fn is_gpu_failure(&self) -> bool {
        match self {
            Error::Cuda { .. } | Error::CudaUnavailable(_) => true,
            Error::Context { source, .. } => source.is_gpu_failure(),
            _ => false,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
