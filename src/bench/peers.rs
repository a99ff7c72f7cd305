//! The peers: `bench/peers/peers.py` times CuPy's `cupyx.scipy.ndimage.label` (GPU) and OpenCV's
//! `connectedComponents[WithStats]` (CPU) on the same images and writes JSON in bench's schema.

use super::plan::{join, BackendChoice, BenchPlan, LatencyFrames};
use super::report::{LatencyResult, ThroughputResult, Unavailable};
use crate::ccl::Backends;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::io::Write;
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

/// The JSON `peers.py` writes.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct PeerReport {
    #[serde(default)]
    pub check: PeerCheck,
    #[serde(default)]
    pub throughput: Vec<ThroughputResult>,
    #[serde(default)]
    pub latency: Vec<LatencyResult>,
    #[serde(default)]
    pub unavailable: Vec<Unavailable>,
}

/// `bench/peers/peers.py` relative to the current folder, then to each folder above the binary
/// (a binary in `<repo>/target/release/` finds `<repo>/bench/...`), then to the source tree it
/// was built from. `MARKERSCOPE_PEERS` overrides all of them.
pub fn find_peers_script() -> std::result::Result<PathBuf, Vec<PathBuf>> {
    if let Some(p) = std::env::var_os("MARKERSCOPE_PEERS") {
        let p = PathBuf::from(p);
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

fn python() -> String {
    std::env::var("MARKERSCOPE_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Finds python3 and the script and asks the script what it can run; errors before any work.
pub fn setup(backend: BackendChoice, backends: &Backends) -> Result<PeersSetup> {
    let _ = backends;
    let script = find_peers_script().map_err(|tried| {
        Error::Invalid(format!(
            "--peers: {SCRIPT} not found (looked at {}); run from the repository root or set MARKERSCOPE_PEERS",
            join(tried.iter().take(4).map(|p| p.display().to_string()), ", ")
        ))
    })?;
    let python = python();
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

/// The latency frames of every size, in the plan's size order, as raw row-major 0/1 bytes in a
/// temporary file (peers.py's `--masks`).
fn write_masks(plan: &BenchPlan, source: LatencyFrames) -> Result<tempfile::NamedTempFile> {
    let mut file = tempfile::Builder::new()
        .prefix("markerscope-peers-masks-")
        .tempfile()
        .map_err(|e| Error::Invalid(format!("--peers: cannot create a temporary file: {e}")))?;
    for &size in &plan.sizes {
        for frame in super::measure::latency_frames(plan, size, source)? {
            file.write_all(&frame.data)
                .map_err(|e| Error::io(file.path(), e))?;
        }
    }
    file.flush().map_err(|e| Error::io(file.path(), e))?;
    Ok(file)
}

/// Runs the peers on the plan's images; their progress goes to our stderr.
pub fn run_peers(plan: &BenchPlan, setup: &PeersSetup) -> Result<PeerReport> {
    let json = std::env::temp_dir().join(format!("markerscope-peers-{}.json", std::process::id()));
    let mut cmd = Command::new(&setup.python);
    cmd.arg(&setup.script)
        .arg("--sizes")
        .arg(join(plan.sizes.iter().map(|s| s.to_string()), ","))
        // Shortest round-trip decimal: Python parses back the very same doubles.
        .arg("--densities")
        .arg(join(plan.densities.iter().map(|d| format!("{d:?}")), ","))
        .arg("--granularities")
        .arg(join(plan.granularities.iter().map(|g| g.to_string()), ","))
        .arg("--connectivity")
        .arg(join(plan.connectivities.iter().map(|c| c.to_string()), ","))
        .arg("--modes")
        .arg(join(plan.modes.iter().map(|m| m.as_str().to_string()), ","))
        .arg("--backends")
        .arg(setup.backends.join(","))
        .arg("--repeat")
        .arg(plan.repeat.to_string())
        .arg("--seed")
        .arg(plan.seed.to_string())
        .arg("--json")
        .arg(&json)
        .stdin(Stdio::null());
    // Demo frames are not made by the script: it reads ours from this file (kept until it ends).
    let mut _masks = None;
    if let Some(l) = plan.latency {
        cmd.arg("--latency")
            .arg("--frames")
            .arg(l.frames.to_string())
            .arg("--warmup")
            .arg(l.warmup.to_string());
        if l.source == LatencyFrames::Demo {
            let file = write_masks(plan, l.source)?;
            cmd.arg("--masks")
                .arg(file.path())
                .arg("--mask-frames")
                .arg(LatencyFrames::DEMO_FRAMES.to_string());
            _masks = Some(file);
        }
    }
    eprintln!("peers: {} {}", setup.python, setup.script.display());
    let status = cmd
        .status()
        .map_err(|e| Error::Invalid(format!("--peers: cannot run '{}': {e}", setup.python)))?;
    let text = std::fs::read_to_string(&json);
    let _ = std::fs::remove_file(&json);
    if !status.success() {
        return Err(Error::Invalid(format!(
            "--peers: {} exited with {status} (its messages are above)",
            setup.script.display()
        )));
    }
    let text = text.map_err(|e| Error::io(&json, e))?;
    let mut report: PeerReport = serde_json::from_str(&text).map_err(|e| {
        Error::Invalid(format!(
            "--peers: {} wrote JSON bench cannot read: {e}",
            setup.script.display()
        ))
    })?;
    for r in &mut report.throughput {
        r.source = "peer".into();
    }
    for r in &mut report.latency {
        r.source = "peer".into();
    }
    Ok(report)
}
