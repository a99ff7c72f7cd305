//! Flag parsing and validation: everything is checked before any image is made.

mod args;
mod memory;
mod parse;
mod pipeline;
mod resolve;

pub use args::BenchArgs;
pub use memory::Limits;

use super::peer_setup::PeersSetup;
use super::spec::{BackendChoice, LatencyFrames, Mode, PlotFormat, Scene, Size};
use crate::ccl::{AlgorithmInfo, Backend, Connectivity};
use crate::error::Result;
use crate::pipeline::{ComponentFilter, PipelineSettings};
use crate::threshold::spec::ThresholdSpec;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatencyPlan {
    pub frames: u32,
    pub warmup: u32,
    /// What the frames show.
    pub source: LatencyFrames,
}

/// Distinct frames `--pipeline` renders or decodes before timing, at most; the frames fed
/// through the pipeline cycle over them.
pub const PIPELINE_PREPARED_FRAMES: u32 = 240;

/// Which algorithms `--algorithms` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlgorithmChoice {
    /// No `--algorithms`: every available one (but the oracle); with `--pipeline` each
    /// backend's default algorithm.
    Default,
    /// `--algorithms all`: every available one but the oracle.
    All,
    /// Registry names, as the registry spells them.
    Named(Vec<String>),
}

/// `--pipeline`'s flags, parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct PipelineFlags {
    pub scenes: Vec<Scene>,
    /// `--sizes` when given: demo and clutter run at these instead of their default sizes.
    pub sizes: Option<Vec<Size>>,
    /// Timed frames of each pass (see `pipeline`), after `warmup` untimed ones.
    pub frames: u32,
    pub warmup: u32,
    pub threshold: ThresholdSpec,
    pub subpixel: bool,
    /// The area and aspect limits (`--min-area`, `--max-area`, `--max-aspect`).
    pub filter: ComponentFilter,
    pub markdown: Option<PathBuf>,
    pub out: Option<RowsOut>,
}

/// `--out FORMAT[:PATH]`: every frame's rows also written, as `analyze` writes them.
#[derive(Clone, Debug, PartialEq)]
pub struct RowsOut {
    pub format: crate::output::export::Format,
    /// None: a file in the current folder, removed after each run.
    pub path: Option<PathBuf>,
}

/// One scene at one frame size, checked against this machine (a video was opened and its first
/// frame decoded).
#[derive(Clone, Debug, PartialEq)]
pub struct PipelineScene {
    pub scene: Scene,
    pub size: Size,
    /// Distinct frames made (rendered or decoded) before timing; the frames fed cycle over them.
    /// A video shorter than this gives all of its frames.
    pub prepared: u32,
}

/// A validated `--pipeline` run.
#[derive(Clone)]
pub struct PipelinePlan {
    /// The scenes at their sizes, checked against this machine.
    pub scenes: Vec<PipelineScene>,
    /// The flags the plan was made from: the frames of each pass, the threshold, the filter,
    /// where the rows go.
    pub flags: PipelineFlags,
    /// What runs on every scene, in this order: (connectivity, algorithm).
    pub runs: Vec<(Connectivity, &'static AlgorithmInfo)>,
}

impl PipelinePlan {
    /// The pipeline settings of one run: the window's and analyze's defaults, with the
    /// threshold, sub-pixel choice, connectivity and algorithm of this plan.
    pub fn settings(&self, connectivity: Connectivity, info: &AlgorithmInfo) -> PipelineSettings {
        PipelineSettings {
            threshold: self.flags.threshold,
            connectivity,
            algorithm: Some(info.name.to_string()),
            backend: match info.backend {
                Backend::Cpu => crate::ccl::BackendChoice::Cpu,
                Backend::Cuda => crate::ccl::BackendChoice::Cuda,
            },
            subpixel: self.flags.subpixel,
            filter: self.flags.filter,
            ..PipelineSettings::default()
        }
    }

    /// Frames fed per run: the warm-up, then two timed passes (see `pipeline`).
    pub fn frames_per_run(&self) -> u64 {
        self.flags.warmup as u64 + 2 * self.flags.frames as u64
    }
}

/// The flags, parsed but not yet checked against this machine.
#[derive(Clone, Debug)]
pub struct ParsedArgs {
    pub sizes: Vec<Size>,
    pub densities: Vec<f64>,
    pub granularities: Vec<u32>,
    pub connectivities: Vec<Connectivity>,
    pub algorithms: AlgorithmChoice,
    pub backend: BackendChoice,
    pub modes: Vec<Mode>,
    pub repeat: u32,
    pub seed: u32,
    pub json: Option<PathBuf>,
    pub plot: Option<(PathBuf, PlotFormat)>,
    pub peers: bool,
    pub latency: Option<LatencyPlan>,
    pub pipeline: Option<PipelineFlags>,
}

impl ParsedArgs {
    /// Checks every flag on its own (no machine knowledge needed).
    pub fn parse(args: &BenchArgs) -> Result<ParsedArgs> {
        let pipeline = pipeline::parse_pipeline(args)?;
        parse::parsed_args(args, pipeline)
    }
}

/// A validated benchmark: every combination listed here can run on this machine.
#[derive(Clone)]
pub struct BenchPlan {
    pub sizes: Vec<Size>,
    pub densities: Vec<f64>,
    pub granularities: Vec<u32>,
    pub connectivities: Vec<Connectivity>,
    /// Selected algorithms, all available here.
    pub algorithms: Vec<&'static AlgorithmInfo>,
    pub backend: BackendChoice,
    pub modes: Vec<Mode>,
    pub repeat: u32,
    pub seed: u32,
    pub json: Option<PathBuf>,
    pub plot: Option<(PathBuf, PlotFormat)>,
    pub peers: Option<PeersSetup>,
    pub latency: Option<LatencyPlan>,
    pub pipeline: Option<PipelinePlan>,
    /// Things skipped on purpose (unsupported connectivity, CUDA absent with --backend all).
    pub notes: Vec<String>,
}

impl BenchPlan {
    /// Parses and resolves in one go.
    #[cfg(test)]
    pub fn new(
        args: &BenchArgs,
        backends: &crate::ccl::Backends,
        limits: &Limits,
    ) -> Result<BenchPlan> {
        BenchPlan::resolve(ParsedArgs::parse(args)?, backends, limits)
    }

    /// The algorithms that run for one connectivity, in registry order.
    pub fn algorithms_for(
        &self,
        c: Connectivity,
    ) -> impl Iterator<Item = &'static AlgorithmInfo> + '_ {
        self.algorithms
            .iter()
            .copied()
            .filter(move |a| a.supports(c))
    }

    /// Progress units: one per timed image run (throughput) or per frame (latency, pipeline).
    pub fn work_units(&self) -> u64 {
        if let Some(p) = &self.pipeline {
            return p.scenes.len() as u64 * p.runs.len() as u64 * p.frames_per_run();
        }
        let pairs: u64 = self
            .connectivities
            .iter()
            .map(|c| self.algorithms_for(*c).count() as u64)
            .sum();
        // Latency: a GPU algorithm runs once per upload (bytes, packed, packed page-locked)
        // and launch mode (plain, graph); one without graphs or without a GPU page-locker
        // runs fewer, and the bar ends early.
        let latency_runs: u64 = self
            .connectivities
            .iter()
            .flat_map(|c| self.algorithms_for(*c))
            .map(|a| if a.backend == Backend::Cuda { 6 } else { 1 })
            .sum();
        match self.latency {
            Some(l) => self.sizes.len() as u64 * latency_runs * (l.frames + l.warmup) as u64,
            None => {
                self.sizes.len() as u64
                    * self.densities.len() as u64
                    * self.granularities.len() as u64
                    * pairs
                    * self.modes.len() as u64
            }
        }
    }
}
