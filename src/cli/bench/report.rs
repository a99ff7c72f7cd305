//! Results: the JSON schema, the averaging, the tables.

use super::peer_setup::PeerCheck;
use super::plan::BenchPlan;
use super::spec::{LatencyFrames, Mode, Size, AVERAGING, SEED_RULE};
use crate::ccl::{Backends, StepTime};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt::Write as _;
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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepMs {
    pub step: String,
    pub ms: f64,
}

impl From<&StepTime> for StepMs {
    fn from(t: &StepTime) -> StepMs {
        StepMs {
            step: t.step.clone(),
            ms: t.ms,
        }
    }
}

/// The mean of each step over `n` runs, in the order the steps first appear (a step missing
/// from a run counts 0 ms there).
pub fn mean_steps<'a>(runs: impl IntoIterator<Item = &'a [StepMs]>, n: usize) -> Vec<StepMs> {
    let mut means: Vec<StepMs> = Vec::new();
    for s in runs.into_iter().flatten() {
        match means.iter_mut().find(|m| m.step == s.step) {
            Some(m) => m.ms += s.ms,
            None => means.push(s.clone()),
        }
    }
    let n = n.max(1) as f64;
    for m in &mut means {
        m.ms /= n;
    }
    means
}

/// One image: the best of `repeat` runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DensityResult {
    pub density: f64,
    /// The image's MT19937 seed (see `image_seed`).
    pub seed: u32,
    pub best_ms: f64,
    /// pixels / best time (filled in by `finalize`).
    #[serde(default)]
    pub gpx_s: f64,
    /// Components found (4/8-connectivity); every algorithm and peer must agree on it.
    pub count: u64,
    /// Steps of the fastest run.
    #[serde(default)]
    pub steps: Vec<StepMs>,
}

fn markerscope() -> String {
    "markerscope".into()
}

/// One (algorithm, backend, connectivity, mode, size, g) over every density.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ThroughputResult {
    pub algorithm: String,
    /// "cpu" or "cuda".
    pub backend: String,
    /// "markerscope" or "peer".
    #[serde(default = "markerscope")]
    pub source: String,
    pub connectivity: u8,
    pub mode: Mode,
    pub width: u32,
    pub height: u32,
    pub granularity: u32,
    #[serde(default)]
    pub repeat: u32,
    pub per_density: Vec<DensityResult>,
    /// Arithmetic mean over densities of the per-density Gpx/s.
    #[serde(default)]
    pub mean_gpx_s: f64,
    /// Arithmetic mean over densities of the best times.
    #[serde(default)]
    pub mean_ms: f64,
    /// Least bytes moved per pixel in this mode (CCL 5, CCA 1).
    #[serde(default)]
    pub bytes_per_px: f64,
    /// bytes_per_px × mean Gpx/s / copy GB/s of this backend × 100; None without a copy figure.
    #[serde(default)]
    pub percent_of_ceiling: Option<f64>,
    /// Per-step times, arithmetic mean over densities.
    #[serde(default)]
    pub steps: Vec<StepMs>,
}

impl ThroughputResult {
    pub fn size(&self) -> Size {
        Size {
            width: self.width,
            height: self.height,
        }
    }

    /// Fills the per-density throughputs and the means from the best times.
    pub fn summarize(&mut self) {
        let px = self.width as f64 * self.height as f64;
        let n = self.per_density.len().max(1) as f64;
        for d in &mut self.per_density {
            d.gpx_s = px / (d.best_ms.max(1e-9) * 1e-3) / 1e9;
        }
        self.mean_gpx_s = self.per_density.iter().map(|d| d.gpx_s).sum::<f64>() / n;
        self.mean_ms = self.per_density.iter().map(|d| d.best_ms).sum::<f64>() / n;
        self.steps = mean_steps(
            self.per_density.iter().map(|d| d.steps.as_slice()),
            self.per_density.len(),
        );
        self.bytes_per_px = self.mode.bytes_per_px();
    }
}

/// Host-to-host latency of one (algorithm, connectivity, size), frames cycling over the images.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LatencyResult {
    pub algorithm: String,
    pub backend: String,
    #[serde(default = "markerscope")]
    pub source: String,
    pub connectivity: u8,
    pub width: u32,
    pub height: u32,
    /// What one frame does, e.g. "upload + label + analyze + download stats".
    #[serde(default)]
    pub what: String,
    pub warmup: u32,
    /// Distinct images the frames cycle over (densities × granularities).
    pub images: u32,
    /// Every timed frame, in order.
    pub frame_ms: Vec<f64>,
    #[serde(default)]
    pub frames: u32,
    #[serde(default)]
    pub median_ms: f64,
    /// Nearest-rank 99th percentile.
    #[serde(default)]
    pub p99_ms: f64,
    #[serde(default)]
    pub mean_ms: f64,
    #[serde(default)]
    pub min_ms: f64,
    #[serde(default)]
    pub max_ms: f64,
    /// Mean per frame of each step the labeler timed itself (CUDA events on the GPU): with the
    /// mean wall time, it shows how much of a frame is spent outside them (launches, waits).
    #[serde(default)]
    pub steps: Vec<StepMs>,
    /// Wall time and step times of a median frame (the lower middle one by wall time).
    #[serde(default)]
    pub median_frame_ms: Option<f64>,
    #[serde(default)]
    pub median_frame_steps: Vec<StepMs>,
    /// Components per timed frame, mean (None for peers, which do not report them).
    #[serde(default)]
    pub mean_components: Option<f64>,
}

impl LatencyResult {
    pub fn summarize(&mut self) {
        let mut v = self.frame_ms.clone();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        self.frames = n as u32;
        if n == 0 {
            return;
        }
        self.median_ms = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        let rank = ((0.99 * n as f64).ceil() as usize).clamp(1, n);
        self.p99_ms = v[rank - 1];
        self.mean_ms = v.iter().sum::<f64>() / n as f64;
        self.min_ms = v[0];
        self.max_ms = v[n - 1];
    }
}

/// Nearest-rank percentiles of per-frame times (ms).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub min: f64,
    pub mean: f64,
}

impl Percentiles {
    /// The p-th percentile is the value of rank ⌈p/100 · n⌉ in sorted order; all 0 without values.
    pub fn of(values: &[f64]) -> Percentiles {
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n == 0 {
            return Percentiles::default();
        }
        let rank = |p: f64| v[((p / 100.0 * n as f64).ceil() as usize).clamp(1, n) - 1];
        Percentiles {
            p50: rank(50.0),
            p90: rank(90.0),
            p99: rank(99.0),
            max: v[n - 1],
            min: v[0],
            mean: v.iter().sum::<f64>() / n as f64,
        }
    }
}

/// `bench --pipeline`: one (scene, size, connectivity, algorithm) through the whole frame path,
/// or a peer's per-frame threshold + labeling on the same frames (see `pipeline` for the passes).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PipelineResult {
    /// `demo`, `clutter` or `video:PATH`.
    pub scene: String,
    pub width: u32,
    pub height: u32,
    pub algorithm: String,
    pub backend: String,
    #[serde(default = "markerscope")]
    pub source: String,
    pub connectivity: u8,
    /// The threshold (`otsu`, `fixed:T`, `adaptive:W:C`); a peer given markerscope's masks
    /// says `mask`.
    #[serde(default)]
    pub threshold: String,
    /// What one frame does.
    #[serde(default)]
    pub what: String,
    pub warmup: u32,
    /// Distinct frames made before timing; the frames fed cycle over them.
    pub prepared_frames: u32,
    /// The scene's source, per frame: render (demo, clutter) or decode (video), mean ms. Not
    /// part of the frame path timed here (None for peers, which get the same frames).
    #[serde(default)]
    pub source_ms: Option<f64>,
    /// Every timed frame's latency in order: markerscope: frame ready to tracked result, one
    /// frame in flight (the latency pass); peers: the per-frame call.
    pub frame_ms: Vec<f64>,
    /// Components of every timed frame (markerscope: the rate pass), in order.
    #[serde(default)]
    pub frame_components: Vec<u64>,
    /// Mean ms of each step per frame, one frame in flight (peers: their steps).
    #[serde(default)]
    pub steps: Vec<StepMs>,
    /// markerscope: the rate pass's wall time, last warm-up result to last result (s).
    #[serde(default)]
    pub rate_wall_s: Option<f64>,
    /// markerscope: mean ms of each step in the rate pass (both pipeline threads busy).
    #[serde(default)]
    pub steps_at_full_rate: Vec<StepMs>,
    /// markerscope: latency in the rate pass, queueing in the pipeline included.
    #[serde(default)]
    pub latency_at_full_rate: Option<Percentiles>,
    /// Timed frames per pass (filled in by `summarize`).
    #[serde(default)]
    pub frames: u32,
    /// markerscope: frames / rate wall time; peers: 1000 / mean per-frame ms.
    #[serde(default)]
    pub frames_per_s: f64,
    #[serde(default)]
    pub mean_components: f64,
    /// Of `frame_ms`.
    #[serde(default)]
    pub latency: Percentiles,
}

/// Columns of the pipeline table: the steps grouped into stages (see `stage_of`).
const STAGES: &[&str] = &["threshold", "pack", "label", "sub-pixel", "filter", "track"];

/// The stage of a pipeline step: the pipeline's own steps and the sub-pixel centroids are
/// stages of their own; the threshold in one pass with the packing (on the capture thread, or
/// on the GPU after its histogram) is `threshold`; every other step is the labeler's (`label`:
/// uploads, kernels, downloads on the GPU, and "stage grey", the upload's copy into page-locked
/// memory when the capture thread makes it). `capture` (handing out a frame made before
/// timing) is in no column.
fn stage_of(step: &str) -> &str {
    match step {
        "capture" | "threshold" | "pack" | "filter" | "track" => step,
        "threshold+pack" | "histogram" => "threshold",
        crate::pipeline::FILTER_REST_STEP => "filter",
        "sub-pixel centroids" => "sub-pixel",
        _ => "label",
    }
}

impl PipelineResult {
    pub fn summarize(&mut self) {
        self.frames = self.frame_ms.len() as u32;
        self.latency = Percentiles::of(&self.frame_ms);
        self.frames_per_s = match self.rate_wall_s {
            Some(s) if s > 0.0 => self.frames as f64 / s,
            Some(_) => 0.0,
            None if self.latency.mean > 0.0 => 1e3 / self.latency.mean,
            None => 0.0,
        };
        self.mean_components = self.frame_components.iter().sum::<u64>() as f64
            / self.frame_components.len().max(1) as f64;
    }

    /// Mean ms per frame of a stage of `STAGES` (the labeler's steps summed as `label`); None
    /// when no step of it ran.
    pub fn stage_ms(&self, stage: &str) -> Option<f64> {
        let mut steps = self
            .steps
            .iter()
            .filter(|s| stage_of(&s.step) == stage)
            .peekable();
        steps.peek()?;
        Some(steps.map(|s| s.ms).sum())
    }

    /// The mean latency not spent in a stage: the hand-out of the frame, the hand-offs between
    /// the threads and their wake-ups.
    pub fn rest_ms(&self) -> f64 {
        let staged: f64 = STAGES.iter().filter_map(|s| self.stage_ms(s)).sum();
        self.latency.mean - staged
    }

    fn label(&self) -> String {
        format!(
            "{} ({})",
            label(&self.algorithm, &self.source),
            self.backend
        )
    }

    fn size(&self) -> String {
        format!("{}x{}", self.width, self.height)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BandwidthResult {
    /// "cpu" or "cuda".
    pub backend: String,
    pub method: String,
    pub bytes: u64,
    pub repeat: u32,
    /// (bytes read + bytes written) / best time.
    pub gb_s: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Unavailable {
    pub algorithm: String,
    pub backend: String,
    #[serde(default)]
    pub mode: Option<String>,
    /// `"unavailable: <reason>"` or `"not measured: <reason>"`.
    pub reason: String,
}

/// A peer beside markerscope's best on the same images.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub connectivity: u8,
    pub mode: Mode,
    pub width: u32,
    pub height: u32,
    pub granularity: u32,
    pub peer: String,
    pub peer_backend: String,
    pub peer_gpx_s: f64,
    /// markerscope's fastest algorithm on any backend.
    pub best_algorithm: String,
    pub best_backend: String,
    pub best_gpx_s: f64,
    /// best_gpx_s / peer_gpx_s.
    pub ratio: f64,
    /// markerscope's fastest on the peer's backend (CPU vs OpenCV, CUDA vs CuPy), when it ran.
    pub same_backend_algorithm: Option<String>,
    pub same_backend_gpx_s: Option<f64>,
    pub same_backend_ratio: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct LatencyComparison {
    pub connectivity: u8,
    pub width: u32,
    pub height: u32,
    pub peer: String,
    pub peer_median_ms: f64,
    pub best_algorithm: String,
    pub best_backend: String,
    pub best_median_ms: f64,
    /// peer median / markerscope's best median (> 1: markerscope is faster).
    pub ratio: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Tool {
    pub name: &'static str,
    pub version: &'static str,
}

#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    pub cpu: String,
    pub cpu_threads: usize,
    pub rayon_threads: usize,
    pub os: String,
    pub gpu: Option<String>,
    pub cuda_unavailable: Option<String>,
}

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

/// `bench --pipeline`'s protocol in words, for the JSON and the table heading.
pub const PIPELINE_PROTOCOL: &str =
    "frames made before timing (source ms = render/decode per frame, apart), \
     fed through the live pipeline (lossless delivery) after the warm-up frames: \
     frames/s = frames of the rate pass (as fast as the pipeline takes them) / its wall time; \
     latency = frame ready to result with tracks, one frame in flight (the latency pass), \
     nearest-rank percentiles; steps = mean ms per frame in the latency pass";

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

impl BenchReport {
    pub fn new(plan: &BenchPlan, backends: &Backends) -> Self {
        BenchReport {
            schema: SCHEMA,
            tool: Tool {
                name: "markerscope",
                version: env!("CARGO_PKG_VERSION"),
            },
            date: utc_now_rfc3339(),
            inputs: Inputs {
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
                    frames: p.frames,
                    warmup: p.warmup,
                    threshold: p.threshold.to_string(),
                    subpixel: p.subpixel,
                    tracking: true,
                    protocol: PIPELINE_PROTOCOL,
                }),
                peers: plan.peers.is_some(),
            },
            machine: Machine {
                cpu: cpu_name(),
                cpu_threads: std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(1),
                rayon_threads: rayon::current_num_threads(),
                os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
                gpu: backends.gpu_name(),
                cuda_unavailable: backends.cuda_unavailable_reason(),
            },
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

    fn size_rank(&self, w: u32, h: u32) -> usize {
        self.inputs
            .sizes
            .iter()
            .position(|s| s.width == w && s.height == h)
            .unwrap_or(usize::MAX)
    }

    /// Averages, percentages, comparisons and the count cross-check; call once after all rows are in.
    pub fn finalize(&mut self) {
        let ceilings: HashMap<String, f64> = self
            .bandwidth
            .iter()
            .map(|b| (b.backend.clone(), b.gb_s))
            .collect();
        for r in &mut self.throughput {
            r.summarize();
            r.percent_of_ceiling = ceilings
                .get(&r.backend)
                .map(|gbs| r.bytes_per_px * r.mean_gpx_s / gbs * 100.0);
        }
        for r in &mut self.latency {
            r.summarize();
        }
        let mut rows = std::mem::take(&mut self.throughput);
        rows.sort_by_key(|r| {
            (
                self.size_rank(r.width, r.height),
                r.connectivity,
                r.mode,
                r.granularity,
                r.source != "markerscope",
                r.backend.clone(),
                r.algorithm.clone(),
            )
        });
        self.throughput = rows;
        let mut lat = std::mem::take(&mut self.latency);
        lat.sort_by_key(|r| {
            (
                self.size_rank(r.width, r.height),
                r.connectivity,
                r.source != "markerscope",
                r.backend.clone(),
                r.algorithm.clone(),
            )
        });
        self.latency = lat;
        for r in &mut self.pipeline {
            r.summarize();
        }
        self.check_pipeline_counts();

        // Every algorithm and peer labels the same images: counts must agree.
        // (width, height, connectivity, g, density bits) -> (count, who found it first)
        type ImageKey = (u32, u32, u8, u32, u64);
        let mut seen: HashMap<ImageKey, (u64, String)> = HashMap::new();
        for r in &self.throughput {
            for d in &r.per_density {
                let k = (
                    r.width,
                    r.height,
                    r.connectivity,
                    r.granularity,
                    d.density.to_bits(),
                );
                let who = format!("{} ({}, {})", r.algorithm, r.backend, r.mode.as_str());
                match seen.get(&k) {
                    None => {
                        seen.insert(k, (d.count, who));
                    }
                    Some((c, first)) if *c != d.count => self.count_mismatches.push(format!(
                        "{}x{} {}-conn g={} d={}: {first} found {c} components, {who} found {}",
                        r.width, r.height, r.connectivity, r.granularity, d.density, d.count
                    )),
                    _ => {}
                }
            }
        }

        // Peers beside markerscope's best.
        self.comparisons.clear();
        for p in self.throughput.iter().filter(|r| r.source == "peer") {
            let same = |r: &&ThroughputResult| {
                r.source == "markerscope"
                    && r.connectivity == p.connectivity
                    && r.mode == p.mode
                    && r.width == p.width
                    && r.height == p.height
                    && r.granularity == p.granularity
            };
            let fastest = |a: &&ThroughputResult, b: &&ThroughputResult| {
                a.mean_gpx_s.total_cmp(&b.mean_gpx_s)
            };
            let Some(best) = self.throughput.iter().filter(same).max_by(fastest) else {
                continue;
            };
            let same_backend = self
                .throughput
                .iter()
                .filter(same)
                .filter(|r| r.backend == p.backend)
                .max_by(fastest);
            self.comparisons.push(Comparison {
                connectivity: p.connectivity,
                mode: p.mode,
                width: p.width,
                height: p.height,
                granularity: p.granularity,
                peer: p.algorithm.clone(),
                peer_backend: p.backend.clone(),
                peer_gpx_s: p.mean_gpx_s,
                best_algorithm: best.algorithm.clone(),
                best_backend: best.backend.clone(),
                best_gpx_s: best.mean_gpx_s,
                ratio: best.mean_gpx_s / p.mean_gpx_s,
                same_backend_algorithm: same_backend.map(|r| r.algorithm.clone()),
                same_backend_gpx_s: same_backend.map(|r| r.mean_gpx_s),
                same_backend_ratio: same_backend.map(|r| r.mean_gpx_s / p.mean_gpx_s),
            });
        }
        self.latency_comparisons.clear();
        for p in self.latency.iter().filter(|r| r.source == "peer") {
            let Some(best) = self
                .latency
                .iter()
                .filter(|r| {
                    r.source == "markerscope"
                        && r.connectivity == p.connectivity
                        && r.width == p.width
                        && r.height == p.height
                })
                .min_by(|a, b| a.median_ms.total_cmp(&b.median_ms))
            else {
                continue;
            };
            self.latency_comparisons.push(LatencyComparison {
                connectivity: p.connectivity,
                width: p.width,
                height: p.height,
                peer: p.algorithm.clone(),
                peer_median_ms: p.median_ms,
                best_algorithm: best.algorithm.clone(),
                best_backend: best.backend.clone(),
                best_median_ms: best.median_ms,
                ratio: p.median_ms / best.median_ms,
            });
        }
    }

    /// In `--pipeline`, every algorithm and peer of a (scene, size, connectivity) sees the same
    /// frames in the same order: their component counts must agree frame by frame. A peer given
    /// a threshold of its own (OpenCV's Otsu) is held to it too: the levels are OpenCV's.
    fn check_pipeline_counts(&mut self) {
        let mut first: HashMap<(String, u32, u32, u8), usize> = HashMap::new();
        for (i, r) in self.pipeline.iter().enumerate() {
            if r.frame_components.is_empty() {
                continue;
            }
            let key = (r.scene.clone(), r.width, r.height, r.connectivity);
            let Some(&j) = first.get(&key) else {
                first.insert(key, i);
                continue;
            };
            let a = &self.pipeline[j];
            let differ = a
                .frame_components
                .iter()
                .zip(&r.frame_components)
                .position(|(x, y)| x != y);
            if let Some(k) = differ {
                self.count_mismatches.push(format!(
                    "{} {}x{} {}-conn timed frame {k}: {} found {} components, {} found {}",
                    r.scene,
                    r.width,
                    r.height,
                    r.connectivity,
                    a.label(),
                    a.frame_components[k],
                    r.label(),
                    r.frame_components[k]
                ));
            }
        }
    }

    /// The pipeline results as rows of the table (text and Markdown share them).
    fn pipeline_rows(&self) -> (Vec<&'static str>, Vec<Vec<String>>) {
        let mut headers = vec![
            "scene",
            "size",
            "algorithm (backend)",
            "conn",
            "components/frame",
            "frames/s",
            "p50 ms",
            "p99 ms",
            "source ms/frame",
        ];
        headers.extend(STAGES);
        headers.push("rest");
        let ms = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.3}"));
        let rows = self
            .pipeline
            .iter()
            .map(|r| {
                let mut row = vec![
                    r.scene.clone(),
                    r.size(),
                    r.label(),
                    r.connectivity.to_string(),
                    if r.frame_components.is_empty() {
                        "-".into()
                    } else {
                        format!("{:.1}", r.mean_components)
                    },
                    format!("{:.1}", r.frames_per_s),
                    format!("{:.3}", r.latency.p50),
                    format!("{:.3}", r.latency.p99),
                    ms(r.source_ms),
                ];
                row.extend(STAGES.iter().map(|s| ms(r.stage_ms(s))));
                row.push(format!("{:.3}", r.rest_ms()));
                row
            })
            .collect();
        (headers, rows)
    }

    /// The pipeline table in Markdown (for a README), with a line on how it was measured.
    pub fn render_pipeline_markdown(&self) -> String {
        let (headers, rows) = self.pipeline_rows();
        let mut out = String::new();
        let line = |cells: Vec<&str>| format!("| {} |\n", cells.join(" | "));
        out += &line(headers.clone());
        let numeric = |h: &str| !matches!(h, "scene" | "size" | "algorithm (backend)");
        out += &line(
            headers
                .iter()
                .map(|h| if numeric(h) { "---:" } else { "---" })
                .collect(),
        );
        for r in &rows {
            out += &line(r.iter().map(String::as_str).collect());
        }
        let _ = writeln!(
            out,
            "\nTimes in ms per frame. Starred rows are peers (their frames/s: one frame at a time). \
             How: {}; stages: the pipeline's steps, the labeler's summed as `label` (sub-pixel \
             centroids apart); rest: the mean \
             latency outside them (hand-out, hand-offs between the threads).",
            PIPELINE_PROTOCOL
        );
        out
    }

    pub fn write_json(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| Error::Invalid(format!("cannot encode the benchmark as JSON: {e}")))?;
        std::fs::write(path, text + "\n").map_err(|e| Error::io(path, e))
    }

    /// The tables printed at the end of a run.
    pub fn render_tables(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "markerscope bench — {} — {}",
            self.date, self.machine.cpu
        );
        if let Some(gpu) = &self.machine.gpu {
            let _ = writeln!(out, "GPU: {gpu}");
        }
        for b in &self.bandwidth {
            let _ = writeln!(
                out,
                "{} copy ceiling: {:.1} GB/s (read+write; {}, {} MiB, best of {})",
                b.backend.to_uppercase(),
                b.gb_s,
                b.method,
                b.bytes >> 20,
                b.repeat
            );
        }
        if !self.throughput.is_empty() || !self.latency.is_empty() {
            let _ = writeln!(
                out,
                "{AVERAGING}; % of ceiling = bytes/px (CCL 5, CCA 1) × Gpx/s / copy GB/s."
            );
        }
        if !self.pipeline.is_empty() {
            self.render_pipeline(&mut out);
        }

        if !self.throughput.is_empty() {
            let _ = writeln!(out, "\nThroughput");
            let rows = self
                .throughput
                .iter()
                .map(|r| {
                    vec![
                        label(&r.algorithm, &r.source),
                        r.backend.clone(),
                        r.connectivity.to_string(),
                        r.mode.as_str().into(),
                        format!("{}x{}", r.width, r.height),
                        r.granularity.to_string(),
                        format!("{:.3}", r.mean_gpx_s),
                        format!("{:.3}", r.mean_ms),
                        r.percent_of_ceiling
                            .map(|p| format!("{p:.1}%"))
                            .unwrap_or_else(|| "-".into()),
                    ]
                })
                .collect();
            out += &table(
                &[
                    "algorithm",
                    "backend",
                    "conn",
                    "mode",
                    "size",
                    "g",
                    "Gpx/s",
                    "ms",
                    "% ceiling",
                ],
                rows,
                &[false, false, true, false, false, true, true, true, true],
            );
            let _ = writeln!(out, "\nPer-step times (mean over densities)");
            let mut rows = Vec::new();
            for r in &self.throughput {
                let total: f64 = r.steps.iter().map(|s| s.ms).sum();
                for s in &r.steps {
                    rows.push(vec![
                        label(&r.algorithm, &r.source),
                        r.backend.clone(),
                        r.connectivity.to_string(),
                        r.mode.as_str().into(),
                        format!("{}x{}", r.width, r.height),
                        r.granularity.to_string(),
                        s.step.clone(),
                        format!("{:.3}", s.ms),
                        format!(
                            "{:.0}%",
                            if total > 0.0 {
                                s.ms / total * 100.0
                            } else {
                                0.0
                            }
                        ),
                    ]);
                }
            }
            out += &table(
                &[
                    "algorithm",
                    "backend",
                    "conn",
                    "mode",
                    "size",
                    "g",
                    "step",
                    "ms",
                    "share",
                ],
                rows,
                &[false, false, true, false, false, true, false, true, true],
            );
        }
        if !self.comparisons.is_empty() {
            let _ = writeln!(
                out,
                "\nPeers (ratio = markerscope Gpx/s / peer Gpx/s; > 1: markerscope is faster)"
            );
            let rows = self
                .comparisons
                .iter()
                .map(|c| {
                    vec![
                        c.connectivity.to_string(),
                        c.mode.as_str().into(),
                        format!("{}x{}", c.width, c.height),
                        c.granularity.to_string(),
                        format!("{} ({})", c.peer, c.peer_backend),
                        format!("{:.3}", c.peer_gpx_s),
                        format!("{} ({})", c.best_algorithm, c.best_backend),
                        format!("{:.3}", c.best_gpx_s),
                        format!("{:.2}x", c.ratio),
                        match (&c.same_backend_algorithm, c.same_backend_ratio) {
                            (Some(a), Some(x)) if *a != c.best_algorithm => format!("{a}: {x:.2}x"),
                            (Some(_), Some(_)) => "same".into(),
                            _ => "-".into(),
                        },
                    ]
                })
                .collect();
            out += &table(
                &[
                    "conn",
                    "mode",
                    "size",
                    "g",
                    "peer",
                    "peer Gpx/s",
                    "best",
                    "best Gpx/s",
                    "ratio",
                    "same backend",
                ],
                rows,
                &[
                    true, false, false, true, false, true, false, true, true, false,
                ],
            );
        }
        if !self.latency.is_empty() {
            let source = self
                .inputs
                .latency
                .as_ref()
                .map_or(LatencyFrames::Random, |l| l.source);
            let _ = writeln!(out, "\nFrame latency, host to host ({})", source.describe());
            let rows = self
                .latency
                .iter()
                .map(|r| {
                    vec![
                        label(&r.algorithm, &r.source),
                        r.backend.clone(),
                        r.connectivity.to_string(),
                        format!("{}x{}", r.width, r.height),
                        r.frames.to_string(),
                        format!("{:.3}", r.median_ms),
                        format!("{:.3}", r.p99_ms),
                        format!("{:.3}", r.mean_ms),
                        format!("{:.3}", r.max_ms),
                        r.mean_components
                            .map_or_else(|| "-".into(), |c| format!("{c:.0}")),
                        r.what.clone(),
                    ]
                })
                .collect();
            out += &table(
                &[
                    "algorithm",
                    "backend",
                    "conn",
                    "size",
                    "frames",
                    "median ms",
                    "p99 ms",
                    "mean ms",
                    "max ms",
                    "components",
                    "frame",
                ],
                rows,
                &[
                    false, false, true, false, true, true, true, true, true, true, false,
                ],
            );
            let with_steps: Vec<_> = self
                .latency
                .iter()
                .filter(|r| !r.steps.is_empty())
                .collect();
            if !with_steps.is_empty() {
                let _ = writeln!(
                    out,
                    "\nMs per frame of each step the labeler times itself, and of the rest of \
                     the wall time (launches, waits, host copies): the mean over the frames, \
                     and one median frame:"
                );
                let line = |steps: &[StepMs], wall: f64| {
                    let timed: f64 = steps.iter().map(|s| s.ms).sum();
                    let parts: Vec<String> = steps
                        .iter()
                        .map(|s| format!("{} {:.4}", s.step, s.ms))
                        .collect();
                    format!("{}; rest {:.4}", parts.join(", "), wall - timed)
                };
                for r in with_steps {
                    let _ = writeln!(
                        out,
                        "  {} {}-conn, {}:\n    mean: {}",
                        r.algorithm,
                        r.connectivity,
                        r.what,
                        line(&r.steps, r.mean_ms)
                    );
                    if let Some(wall) = r.median_frame_ms {
                        let _ = writeln!(
                            out,
                            "    a median frame ({wall:.4}): {}",
                            line(&r.median_frame_steps, wall)
                        );
                    }
                }
            }
            if !self.latency_comparisons.is_empty() {
                let _ = writeln!(
                    out,
                    "\nPeers (ratio = peer median / markerscope's best median; > 1: markerscope is faster)"
                );
            }
            for c in &self.latency_comparisons {
                let _ = writeln!(
                    out,
                    "{}x{} {}-conn: {} median {:.3} ms, markerscope best {} ({}) {:.3} ms: ratio {:.2}x",
                    c.width,
                    c.height,
                    c.connectivity,
                    c.peer,
                    c.peer_median_ms,
                    c.best_algorithm,
                    c.best_backend,
                    c.best_median_ms,
                    c.ratio
                );
            }
        }
        if !self.unavailable.is_empty() {
            let _ = writeln!(out);
            for u in &self.unavailable {
                let mode = u
                    .mode
                    .as_deref()
                    .map(|m| format!(" {m}"))
                    .unwrap_or_default();
                let _ = writeln!(out, "{} ({}{mode}): {}", u.algorithm, u.backend, u.reason);
            }
        }
        if !self.count_mismatches.is_empty() {
            let _ = writeln!(
                out,
                "\nWARNING: component counts differ (the images or an algorithm are wrong):"
            );
            for m in self.count_mismatches.iter().take(20) {
                let _ = writeln!(out, "  {m}");
            }
        }
        out
    }
}

impl BenchReport {
    fn render_pipeline(&self, out: &mut String) {
        let inputs = self.inputs.pipeline.as_ref();
        let _ = writeln!(
            out,
            "\nThe frame path, end to end: threshold {}, sub-pixel centroids {}, tracking on; {} \
             timed frames per pass after {} warm-up frames.\n{}",
            inputs.map_or("-", |i| i.threshold.as_str()),
            if inputs.is_some_and(|i| i.subpixel) {
                "on"
            } else {
                "off"
            },
            inputs.map_or(0, |i| i.frames),
            inputs.map_or(0, |i| i.warmup),
            wrap(&format!("How: {PIPELINE_PROTOCOL}."), 100),
        );
        let (headers, rows) = self.pipeline_rows();
        let right: Vec<bool> = headers
            .iter()
            .map(|h| !matches!(*h, "scene" | "size" | "algorithm (backend)"))
            .collect();
        *out += &table(&headers, rows, &right);
        let _ = writeln!(
            out,
            "\nEvery step, mean ms per frame (one frame in flight; at full rate in brackets), and \
             the latency at full rate (queueing included):"
        );
        for r in &self.pipeline {
            let at_full_rate = |step: &str| {
                r.steps_at_full_rate
                    .iter()
                    .find(|s| s.step == step)
                    .map(|s| format!(" [{:.3}]", s.ms))
                    .unwrap_or_default()
            };
            let steps: Vec<String> = r
                .steps
                .iter()
                .map(|s| format!("{} {:.3}{}", s.step, s.ms, at_full_rate(&s.step)))
                .collect();
            let _ = writeln!(
                out,
                "  {} {} {} {}-conn: {}",
                r.scene,
                r.size(),
                r.label(),
                r.connectivity,
                if steps.is_empty() {
                    "-".to_string()
                } else {
                    steps.join(", ")
                }
            );
            let _ = writeln!(
                out,
                "    {}; latency p50 {:.3}, p90 {:.3}, p99 {:.3}, max {:.3}{}",
                r.what,
                r.latency.p50,
                r.latency.p90,
                r.latency.p99,
                r.latency.max,
                r.latency_at_full_rate
                    .map(|p| format!("; at full rate p50 {:.3}, p99 {:.3}", p.p50, p.p99))
                    .unwrap_or_default()
            );
        }
        if !self.notes.is_empty() {
            let _ = writeln!(out, "\nNotes:");
            for n in &self.notes {
                let _ = writeln!(out, "  {n}");
            }
        }
    }
}

/// `text` in lines of at most `width` characters, broken at spaces.
fn wrap(text: &str, width: usize) -> String {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines.join("\n")
}

/// Peers are starred in tables.
fn label(algorithm: &str, source: &str) -> String {
    if source == "markerscope" {
        algorithm.to_string()
    } else {
        format!("{algorithm}*")
    }
}

/// A plain text table; `right[i]` right-aligns column i.
fn table(headers: &[&str], rows: Vec<Vec<String>>, right: &[bool]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            let pad = widths[i].saturating_sub(c.chars().count());
            if i > 0 {
                s.push_str("  ");
            }
            if right.get(i).copied().unwrap_or(false) {
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            } else {
                s.push_str(c);
                if i + 1 < cells.len() {
                    s.push_str(&" ".repeat(pad));
                }
            }
        }
        s.push('\n');
        s
    };
    let mut out = line(headers.to_vec());
    out += &line(
        widths
            .iter()
            .map(|w| "-".repeat(*w))
            .collect::<Vec<_>>()
            .iter()
            .map(|s| s.as_str())
            .collect(),
    );
    for r in &rows {
        out += &line(r.iter().map(|s| s.as_str()).collect());
    }
    out
}

fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| format!("unknown {} CPU", std::env::consts::ARCH))
}

/// Now in UTC as RFC 3339 (civil-from-days, no time-zone crate needed).
pub fn utc_now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + (month <= 2) as i64;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_steps_keep_first_appearance_order_and_count_missing_steps_as_zero() {
        let ms = |step: &str, ms: f64| StepMs {
            step: step.into(),
            ms,
        };
        let runs = [
            vec![ms("a", 1.0), ms("b", 2.0)],
            vec![ms("c", 4.0), ms("a", 3.0)],
        ];
        let means = mean_steps(runs.iter().map(Vec::as_slice), runs.len());
        assert_eq!(means, vec![ms("a", 2.0), ms("b", 1.0), ms("c", 2.0)]);
        assert!(mean_steps(std::iter::empty(), 0).is_empty());
    }

    #[test]
    fn latency_percentiles() {
        let mut r = LatencyResult {
            algorithm: "x".into(),
            backend: "cpu".into(),
            source: "markerscope".into(),
            connectivity: 4,
            width: 1,
            height: 1,
            what: String::new(),
            warmup: 0,
            images: 1,
            frame_ms: (1..=200).rev().map(|i| i as f64).collect(),
            frames: 0,
            median_ms: 0.0,
            p99_ms: 0.0,
            mean_ms: 0.0,
            min_ms: 0.0,
            max_ms: 0.0,
            steps: Vec::new(),
            median_frame_ms: None,
            median_frame_steps: Vec::new(),
            mean_components: None,
        };
        r.summarize();
        assert_eq!(r.frames, 200);
        assert_eq!(r.median_ms, 100.5);
        assert_eq!(r.p99_ms, 198.0);
        assert_eq!(r.min_ms, 1.0);
        assert_eq!(r.max_ms, 200.0);
    }

    #[test]
    fn means_over_densities() {
        let mut r = ThroughputResult {
            algorithm: "x".into(),
            backend: "cpu".into(),
            source: "markerscope".into(),
            connectivity: 4,
            mode: Mode::Ccl,
            width: 1000,
            height: 1000,
            granularity: 1,
            repeat: 1,
            per_density: vec![
                DensityResult {
                    density: 0.0,
                    seed: 0,
                    best_ms: 1.0,
                    gpx_s: 0.0,
                    count: 0,
                    steps: vec![StepMs {
                        step: "a".into(),
                        ms: 1.0,
                    }],
                },
                DensityResult {
                    density: 1.0,
                    seed: 0,
                    best_ms: 4.0,
                    gpx_s: 0.0,
                    count: 1,
                    steps: vec![
                        StepMs {
                            step: "a".into(),
                            ms: 2.0,
                        },
                        StepMs {
                            step: "b".into(),
                            ms: 2.0,
                        },
                    ],
                },
            ],
            mean_gpx_s: 0.0,
            mean_ms: 0.0,
            bytes_per_px: 0.0,
            percent_of_ceiling: None,
            steps: vec![],
        };
        r.summarize();
        // 1 Mpx in 1 ms = 1 Gpx/s; in 4 ms = 0.25 Gpx/s; mean of throughputs, not of times.
        assert!((r.mean_gpx_s - 0.625).abs() < 1e-12);
        assert_eq!(r.mean_ms, 2.5);
        assert_eq!(
            r.steps,
            vec![
                StepMs {
                    step: "a".into(),
                    ms: 1.5
                },
                StepMs {
                    step: "b".into(),
                    ms: 1.0
                }
            ]
        );
        assert_eq!(r.bytes_per_px, 5.0);
    }

    #[test]
    fn pipeline_percentiles_stages_and_rate() {
        let p = Percentiles::of(&(1..=200).rev().map(f64::from).collect::<Vec<_>>());
        assert_eq!(
            (p.p50, p.p90, p.p99, p.max, p.min),
            (100.0, 180.0, 198.0, 200.0, 1.0)
        );
        assert_eq!(p.mean, 100.5);
        assert_eq!(Percentiles::of(&[]), Percentiles::default());
        assert_eq!(Percentiles::of(&[3.0]).p99, 3.0);

        let step = |step: &str, ms: f64| StepMs {
            step: step.into(),
            ms,
        };
        let mut r = PipelineResult {
            scene: "demo".into(),
            width: 4,
            height: 2,
            algorithm: "x".into(),
            backend: "cuda".into(),
            source: "markerscope".into(),
            connectivity: 8,
            threshold: "otsu".into(),
            what: String::new(),
            warmup: 0,
            prepared_frames: 2,
            source_ms: Some(1.0),
            frame_ms: vec![2.25, 4.25],
            frame_components: vec![3, 4],
            steps: vec![
                step("capture", 0.01),
                step("threshold", 0.5),
                step("pack", 0.25),
                step("upload", 0.5),
                step("kernels", 1.0),
                step("sub-pixel centroids", 0.25),
                step("filter", 0.125),
                step("track", 0.5),
            ],
            rate_wall_s: Some(0.5),
            steps_at_full_rate: Vec::new(),
            latency_at_full_rate: None,
            frames: 0,
            frames_per_s: 0.0,
            mean_components: 0.0,
            latency: Percentiles::default(),
        };
        r.summarize();
        assert_eq!(r.frames, 2);
        assert_eq!(r.frames_per_s, 4.0);
        assert_eq!(r.mean_components, 3.5);
        assert_eq!(r.stage_ms("label"), Some(1.5));
        assert_eq!(r.stage_ms("sub-pixel"), Some(0.25));
        assert_eq!(r.stage_ms("pack"), Some(0.25));
        // 3.25 ms mean latency; the stages take 3.125, the hand-out 0.01 is in the rest.
        assert!((r.rest_ms() - 0.125).abs() < 1e-12);
        // A peer: no wall time of its own, frames one after the other.
        r.rate_wall_s = None;
        r.steps.retain(|s| s.step != "pack");
        r.summarize();
        assert!((r.frames_per_s - 1e3 / 3.25).abs() < 1e-9);
        assert_eq!(r.stage_ms("pack"), None);
    }

    #[test]
    fn wrap_breaks_at_spaces() {
        assert_eq!(wrap("aa bb cc", 5), "aa bb\ncc");
        assert_eq!(wrap("longword x", 3), "longword\nx");
    }

    #[test]
    fn date_format() {
        let d = utc_now_rfc3339();
        assert_eq!(d.len(), 20, "{d}");
        assert!(d.starts_with("20") && d.ends_with('Z'));
    }
}
