//! Finding the peers' script (`bench/peers/peers.py`) and Python, and asking the script what it
//! can run here: all before any work starts.

use super::spec::{join, BackendChoice};
use crate::ccl::Backends;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const SCRIPT: &str = "bench/peers/peers.py";

/// What `peers.py --check` found.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PeerCheck {
    #[serde(default)]
    pub python: String,
    #[serde(default)]
    pub numpy: Option<String>,
    /// Version, or "unavailable: <reason>".
    #[serde(default)]
    pub opencv: String,
    /// Version, or "unavailable: <reason>".
    #[serde(default)]
    pub cupy: String,
    #[serde(default)]
    pub gpu: Option<String>,
    /// Threads OpenCV was told to use.
    #[serde(default)]
    pub opencv_threads: Option<usize>,
}

#[derive(Clone, Debug)]
pub struct PeersSetup {
    pub python: String,
    pub script: PathBuf,
    pub check: PeerCheck,
    /// Which peer backends to run: "cpu" (OpenCV), "cuda" (CuPy).
    pub backends: Vec<&'static str>,
}

/// `bench/peers/peers.py` relative to the current folder, then to each folder above the binary
/// (a binary in `<repo>/target/release/` finds `<repo>/bench/...`), then to the source tree it
/// was built from. `peers` (`BenchTuning::peers`) overrides all of them.
pub fn find_peers_script(peers: Option<&Path>) -> std::result::Result<PathBuf, Vec<PathBuf>> {
    if let Some(p) = peers {
        let p = p.to_path_buf();
        return if p.is_file() { Ok(p) } else { Err(vec![p]) };
    }
    let mut tried = Vec::new();
    let mut candidates = vec![PathBuf::from(SCRIPT)];
    if let Ok(exe) = std::env::current_exe() {
        candidates.extend(exe.ancestors().skip(1).map(|a| a.join(SCRIPT)));
    }
    candidates.push(Path::new(env!("CARGO_MANIFEST_DIR")).join(SCRIPT));
    for c in candidates {
        if c.is_file() {
            return Ok(c);
        }
        tried.push(c);
    }
    Err(tried)
}

/// Finds python3 and the script and asks the script what it can run; errors before any work.
pub fn setup(backend: BackendChoice, backends: &Backends) -> Result<PeersSetup> {
    let tuning = &backends.tuning().bench;
    let script = find_peers_script(tuning.peers.as_deref()).map_err(|tried| {
        Error::Invalid(format!(
            "--peers: {SCRIPT} not found (looked at {}); run from the repository root or set MARKERSCOPE_PEERS",
            join(tried.iter().take(4).map(|p| p.display().to_string()), ", ")
        ))
    })?;
    let python = tuning.python.clone();
    let out = Command::new(&python)
        .arg(&script)
        .arg("--check")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            Error::Invalid(if e.kind() == std::io::ErrorKind::NotFound {
                format!(
                    "--peers: '{python}' not found; install Python 3 with numpy (and opencv-python, \
                     cupy for the GPU) or set MARKERSCOPE_PYTHON, or drop --peers"
                )
            } else {
                format!("--peers: cannot run '{python}': {e}")
            })
        })?;
    if !out.status.success() {
        return Err(Error::Invalid(format!(
            "--peers: '{python} {} --check' failed ({}): {}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let check: PeerCheck = serde_json::from_slice(&out.stdout).map_err(|e| {
        Error::Invalid(format!(
            "--peers: '{} --check' printed something that is not its JSON ({e}): {}",
            script.display(),
            String::from_utf8_lossy(&out.stdout).trim()
        ))
    })?;
    let backends: Vec<&'static str> = match backend {
        BackendChoice::Cpu => vec!["cpu"],
        BackendChoice::Cuda => vec!["cuda"],
        BackendChoice::All => vec!["cpu", "cuda"],
    };
    Ok(PeersSetup {
        python,
        script,
        check,
        backends,
    })
}
