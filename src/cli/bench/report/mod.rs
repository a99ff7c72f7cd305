//! Results: the JSON schema, the averaging, the tables.

mod finalize;
mod machine;
mod pipeline;
mod results;
mod tables;

pub use finalize::{Comparison, LatencyComparison};
pub use machine::{utc_now_rfc3339, LoadClock, Machine, Tool};
pub use pipeline::{AlikeFrames, PipelineResult, SlowestFrames, PIPELINE_PROTOCOL};
pub use results::{
    mean_steps, BandwidthResult, DensityResult, LatencyResult, Percentiles, StepMs,
    ThroughputResult, Unavailable,
};

use super::peer_setup::PeerCheck;
use super::plan::BenchPlan;
use super::spec::{LatencyFrames, Mode, Size, AVERAGING, SEED_RULE};
use crate::ccl::Backends;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

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
    pub pipeline: Vec<PipelineResult>,
    #[serde(default)]
    pub unavailable: Vec<Unavailable>,
}

pub const SCHEMA: &str = "markerscope-bench/1";

#[derive(Clone, Debug, Serialize)]
pub struct LatencyInputs {
    pub frames: u32,
    pub warmup: u32,
    /// What the frames show: "random" or "demo" (see `bench --help`).
    pub source: LatencyFrames,
}

#[derive(Clone, Debug, Serialize)]
pub struct PipelineSceneInputs {
    pub scene: String,
    pub width: u32,
    pub height: u32,
    pub prepared_frames: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct PipelineInputs {
    pub scenes: Vec<PipelineSceneInputs>,
    /// Timed frames per pass.
    pub frames: u32,
    pub warmup: u32,
    pub threshold: String,
    pub subpixel: bool,
    pub tracking: bool,
    /// How the numbers are taken, in words.
    pub protocol: &'static str,
}

#[derive(Clone, Debug, Serialize)]
pub struct Inputs {
    pub command_line: Vec<String>,
    pub sizes: Vec<Size>,
    pub densities: Vec<f64>,
    pub granularities: Vec<u32>,
    pub connectivities: Vec<u8>,
    pub algorithms: Vec<String>,
    pub backend: String,
    pub modes: Vec<Mode>,
    pub repeat: u32,
    pub seed: u32,
    pub latency: Option<LatencyInputs>,
    pub pipeline: Option<PipelineInputs>,
    pub peers: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct PeersInfo {
    pub script: String,
    pub python: String,
    pub check: PeerCheck,
}

#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub schema: &'static str,
    pub tool: Tool,
    /// UTC, RFC 3339.
    pub date: String,
    pub inputs: Inputs,
    pub machine: Machine,
    pub seed_rule: &'static str,
    pub averaging: &'static str,
    pub bandwidth: Vec<BandwidthResult>,
    pub throughput: Vec<ThroughputResult>,
    pub latency: Vec<LatencyResult>,
    pub pipeline: Vec<PipelineResult>,
    pub unavailable: Vec<Unavailable>,
    pub peers: Option<PeersInfo>,
    pub comparisons: Vec<Comparison>,
    pub latency_comparisons: Vec<LatencyComparison>,
    /// Images on which two algorithms (or an algorithm and a peer) found different component counts.
    pub count_mismatches: Vec<String>,
    pub notes: Vec<String>,
}

impl Inputs {
    /// What the plan asks for, as the report records it.
    fn of(plan: &BenchPlan) -> Inputs {
        Inputs {
            command_line: std::env::args().collect(),
            sizes: plan.sizes.clone(),
            densities: plan.densities.clone(),
            granularities: plan.granularities.clone(),
            connectivities: plan.connectivities.iter().map(|c| c.number()).collect(),
            algorithms: plan.algorithms.iter().map(|a| a.name.to_string()).collect(),
            backend: plan.backend.as_str().into(),
            modes: plan.modes.clone(),
            repeat: plan.repeat,
            seed: plan.seed,
            latency: plan.latency.map(|l| LatencyInputs {
                frames: l.frames,
                warmup: l.warmup,
                source: l.source,
            }),
            pipeline: plan.pipeline.as_ref().map(|p| PipelineInputs {
                scenes: p
                    .scenes
                    .iter()
                    .map(|s| PipelineSceneInputs {
                        scene: s.scene.name(),
                        width: s.size.width,
                        height: s.size.height,
                        prepared_frames: s.prepared,
                    })
                    .collect(),
                frames: p.flags.frames,
                warmup: p.flags.warmup,
                threshold: p.flags.threshold.to_string(),
                subpixel: p.flags.subpixel,
                tracking: true,
                protocol: PIPELINE_PROTOCOL,
            }),
            peers: plan.peers.is_some(),
        }
    }
}

impl BenchReport {
    /// An empty report of `plan` on this machine; the measurements add their rows.
    pub fn new(plan: &BenchPlan, backends: &Backends) -> Self {
        BenchReport {
            schema: SCHEMA,
            tool: Tool::this(),
            date: utc_now_rfc3339(),
            inputs: Inputs::of(plan),
            machine: Machine::detect(backends),
            seed_rule: SEED_RULE,
            averaging: AVERAGING,
            bandwidth: Vec::new(),
            throughput: Vec::new(),
            latency: Vec::new(),
            pipeline: Vec::new(),
            unavailable: Vec::new(),
            peers: plan.peers.as_ref().map(|p| PeersInfo {
                script: p.script.display().to_string(),
                python: p.python.clone(),
                check: p.check.clone(),
            }),
            comparisons: Vec::new(),
            latency_comparisons: Vec::new(),
            count_mismatches: Vec::new(),
            notes: plan.notes.clone(),
        }
    }

    pub fn merge_peers(&mut self, peer: PeerReport) {
        if let Some(info) = &mut self.peers {
            info.check = peer.check.clone();
        }
        self.throughput.extend(peer.throughput);
        self.latency.extend(peer.latency);
        self.pipeline.extend(peer.pipeline);
        for u in peer.unavailable {
            // Peers run once per scene with --pipeline: say each missing one once.
            if !self
                .unavailable
                .iter()
                .any(|x| (&x.algorithm, &x.backend, &x.mode) == (&u.algorithm, &u.backend, &u.mode))
            {
                self.unavailable.push(u);
            }
        }
    }

    pub fn write_json(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| Error::Invalid(format!("cannot encode the benchmark as JSON: {e}")))?;
        std::fs::write(path, text + "\n").map_err(|e| Error::io(path, e))
    }
}
