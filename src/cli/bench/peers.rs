//! The peers: `bench/peers/peers.py` times CuPy's `cupyx.scipy.ndimage.label` (GPU) and OpenCV's
//! `connectedComponents[WithStats]` (CPU) on the same images and writes JSON in bench's schema.

use super::peer_setup::PeersSetup;
use super::pipeline::{PreparedFrames, TrackScore};
use super::plan::{BenchPlan, PipelinePlan, PipelineScene};
use super::report::PeerReport;
use super::spec::{join, LatencyFrames};
use crate::error::{Error, Result};
use crate::fiducial::score::MarkerScore;
use crate::threshold;
use crate::threshold::spec::ThresholdSpec;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

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
    run_script(setup, cmd, &json)
}

/// `--pipeline`: the peers on one scene's frames, written raw to a temporary file
/// (`peers.py --pipeline-frames`): grey frames when the peers can threshold them as we do
/// (`otsu` with OpenCV's THRESH_OTSU, `fixed:T`), otherwise markerscope's 0/1 masks. On a
/// `markers` scene the peer is OpenCV's `ArucoDetector` on the grey frames (`--markers DICT`);
/// the markers it reports are scored here against the scene's truth. On a `particles` scene
/// the peer is trackpy (locate + link, `--particles SEARCH_RANGE`), and the tracks it reports
/// are scored here against the particles' truth as ours are.
pub fn run_pipeline_peers(
    plan: &PipelinePlan,
    setup: &PeersSetup,
    scene: &PipelineScene,
    prepared: &PreparedFrames,
) -> Result<PeerReport> {
    let frames = &prepared.frames;
    let markers = scene.scene.fiducials();
    let particles = scene.scene.particles();
    let (threshold, send_masks) = match plan.flags.threshold {
        _ if markers.is_some() || particles.is_some() => ("otsu".to_string(), false),
        ThresholdSpec::Otsu => ("otsu".to_string(), false),
        ThresholdSpec::Fixed(t) => (format!("fixed:{t}"), false),
        ThresholdSpec::Triangle
        | ThresholdSpec::Background { .. }
        | ThresholdSpec::Adaptive { .. } => ("mask".to_string(), true),
    };
    let mut file = tempfile::Builder::new()
        .prefix("markerscope-peers-frames-")
        .tempfile()
        .map_err(|e| Error::Invalid(format!("--peers: cannot create a temporary file: {e}")))?;
    for grey in frames {
        let bytes = if send_masks {
            threshold::apply(grey, &plan.flags.threshold, false)?.data
        } else {
            grey.data.clone()
        };
        file.write_all(&bytes)
            .map_err(|e| Error::io(file.path(), e))?;
    }
    file.flush().map_err(|e| Error::io(file.path(), e))?;
    let mut connectivities: Vec<u8> = Vec::new();
    for (c, _) in &plan.runs {
        if !connectivities.contains(&c.number()) {
            connectivities.push(c.number());
        }
    }
    let json = std::env::temp_dir().join(format!(
        "markerscope-peers-pipeline-{}.json",
        std::process::id()
    ));
    let mut cmd = Command::new(&setup.python);
    cmd.arg(&setup.script)
        .arg("--pipeline-frames")
        .arg(file.path())
        .arg("--pipeline-count")
        .arg(frames.len().to_string())
        .arg("--pipeline-scene")
        .arg(scene.scene.name())
        .arg("--sizes")
        .arg(scene.size.to_string())
        .arg("--threshold")
        .arg(threshold)
        .arg("--connectivity")
        .arg(join(connectivities.iter().map(|c| c.to_string()), ","))
        .arg("--backends")
        .arg(setup.backends.join(","))
        .arg("--frames")
        .arg(plan.flags.frames.to_string())
        .arg("--warmup")
        .arg(plan.flags.warmup.to_string())
        .arg("--json")
        .arg(&json)
        .stdin(Stdio::null());
    if let Some(f) = markers {
        cmd.arg("--markers").arg(f.dictionary);
    }
    if let Some(p) = particles {
        cmd.arg("--particles")
            .arg(format!("{:?}", p.search_range_px()))
            .arg("--particle-diameter")
            .arg(p.locate_diameter_px().to_string());
    }
    let mut report = run_script(setup, cmd, &json)?;
    drop(file);
    score_peer_rows(&mut report, scene, plan.flags.warmup as u64, prepared);
    Ok(report)
}

/// Scores what a peer found on a `markers` or `particles` scene against the scene's truth:
/// its row's timed frames are fed frames `warmup`, `warmup + 1`, ….
fn score_peer_rows(
    report: &mut PeerReport,
    scene: &PipelineScene,
    warmup: u64,
    prepared: &PreparedFrames,
) {
    for row in &mut report.pipeline {
        if scene.scene.fiducials().is_some() && !row.frame_markers.is_empty() {
            let mut score = MarkerScore::default();
            for (k, found) in row.frame_markers.iter().enumerate() {
                prepared.score(&mut score, warmup + k as u64, &found.detected());
            }
            row.markers = Some(score);
        }
        if scene.scene.particles().is_some() {
            let mut score = TrackScore::default();
            for (k, found) in row.frame_tracks.iter().enumerate() {
                prepared.score_tracks(&mut score, warmup + k as u64, &found.points());
            }
            row.tracking = Some(score.counts());
        }
    }
}

/// Runs the script (its progress goes to our stderr) and reads the JSON it wrote.
fn run_script(setup: &PeersSetup, mut cmd: Command, json: &Path) -> Result<PeerReport> {
    eprintln!("peers: {} {}", setup.python, setup.script.display());
    let status = cmd
        .status()
        .map_err(|e| Error::Invalid(format!("--peers: cannot run '{}': {e}", setup.python)))?;
    let text = std::fs::read_to_string(json);
    let _ = std::fs::remove_file(json);
    if !status.success() {
        return Err(Error::Invalid(format!(
            "--peers: {} exited with {status} (its messages are above)",
            setup.script.display()
        )));
    }
    let text = text.map_err(|e| Error::io(json, e))?;
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
    for r in &mut report.pipeline {
        r.source = "peer".into();
    }
    Ok(report)
}
