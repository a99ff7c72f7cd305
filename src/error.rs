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

    /// The reason is in the message and not a `source` of its own, so that a printed chain
    /// of causes says it once.
    #[error("{}: {why}", path.display())]
    Io { path: PathBuf, why: std::io::Error },

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

/// The largest text input file read (`Error::read_text_input`).
pub const TEXT_INPUT_LIMIT: u64 = 16 << 20;

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

    /// Reads a text input file (points, a calibration, a region of interest): one larger than
    /// `TEXT_INPUT_LIMIT` is refused rather than read until memory runs out (`/dev/zero`).
    pub fn read_text_input(path: &Path) -> std::io::Result<String> {
        use std::io::Read;
        let mut text = String::new();
        std::fs::File::open(path)?
            .take(TEXT_INPUT_LIMIT + 1)
            .read_to_string(&mut text)?;
        if text.len() as u64 > TEXT_INPUT_LIMIT {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "it is larger than {} MiB, more than such a file holds",
                    TEXT_INPUT_LIMIT >> 20
                ),
            ));
        }
        Ok(text)
    }

    pub fn io(path: &Path, why: std::io::Error) -> Self {
        Error::Io {
            path: path.to_path_buf(),
            why,
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

    /// The GPU had too little memory for a frame's buffers (`check_free_memory`, or an
    /// allocation the driver refused): another frame's buffers freed may make room.
    pub fn is_out_of_gpu_memory(&self) -> bool {
        match self {
            Error::Cuda { step, why } => {
                step.starts_with("allocating") || why.contains("out of memory")
            }
            Error::Context { source, .. } => source.is_out_of_gpu_memory(),
            _ => false,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
