//! The live pipeline: source → capture thread (grey, threshold, pack) → engine worker (label,
//! analyze, filter) → consumers (GUI, exporter), connected by crossbeam channels.
//!
//! CONTRACT (issue 7): the types and signatures here are shared by the pipeline, the GUI and
//! `analyze`. Change them only together with every user.

use crate::analyze::BackendChoice;
use crate::ccl::{Backend, Connectivity, StepTime};
use crate::image::{BinaryImage, GrayImage, LabelImage};
use crate::stats::ComponentStats;
use crate::threshold::ThresholdSpec;
use std::sync::Arc;

/// Components kept after labeling. `None` = no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ComponentFilter {
    pub min_area: Option<u64>,
    pub max_area: Option<u64>,
    /// Bounding-box aspect ratio, long side / short side (≥ 1).
    pub max_aspect: Option<f64>,
}

/// Everything the worker needs to turn a grey frame into components. The GUI changes it at
/// any time; the capture thread and worker pick the new value up at the next frame.
#[derive(Clone, Debug, PartialEq)]
pub struct PipelineSettings {
    pub threshold: ThresholdSpec,
    pub invert: bool,
    pub connectivity: Connectivity,
    /// Registry name; None = the backend's default for the connectivity.
    pub algorithm: Option<String>,
    pub backend: BackendChoice,
    pub filter: ComponentFilter,
    /// Also deliver the label image (GUI label view); costs a download per frame.
    pub want_labels: bool,
    /// Also deliver the binary mask (GUI binary view).
    pub want_binary: bool,
}

/// How frames are handed from the capture thread to the worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Bounded queue; the oldest frame is dropped when the worker is behind (and counted).
    Live,
    /// Every frame is processed; the capture thread waits for the worker (file analysis).
    Lossless,
}

/// Per-frame timing record. `steps` in execution order: "capture" (decode), "threshold",
/// "pack", then the labeler's steps ("upload", kernels, "download" for GPU algorithms), then
/// "filter". `latency_ms` = capture to result, including queueing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FrameTimings {
    pub steps: Vec<StepTime>,
    pub latency_ms: f64,
}

/// The result of one frame.
#[derive(Clone, Debug)]
pub struct FrameResult {
    pub index: u64,
    pub time_s: f64,
    /// Image name for folder sources (export `file` column); empty otherwise.
    pub name: String,
    pub grey: Arc<GrayImage>,
    /// Present when `want_binary` was set.
    pub binary: Option<Arc<BinaryImage>>,
    /// Present when `want_labels` was set; numbered like `all_count` (1..=N, raster order).
    pub labels: Option<Arc<LabelImage>>,
    /// Components that passed the filter, in label order.
    pub components: Vec<ComponentStats>,
    /// Components before filtering.
    pub all_count: u32,
    pub timings: FrameTimings,
    /// The algorithm and backend that produced this frame.
    pub algorithm: &'static str,
    pub backend: Backend,
    pub connectivity: Connectivity,
}

/// Running counters, readable at any time.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PipelineCounters {
    pub captured: u64,
    pub processed: u64,
    /// Frames dropped because the worker was behind (live delivery only; file analysis: 0).
    pub dropped: u64,
}

/// What consumers receive.
#[derive(Clone, Debug)]
pub enum PipelineEvent {
    Frame(Arc<FrameResult>),
    /// A one-line message for the user (CPU fallback, a changed frame size, ...).
    Notice(String),
    /// The source failed (camera gone, decode error at a frame). The pipeline stays alive and
    /// can be given a new source.
    SourceError(String),
    /// The worker could not process a frame with the current settings (e.g. the algorithm does
    /// not support the connectivity). It keeps running and retries with the next settings.
    EngineError(String),
    /// The source has no more frames; every captured frame has been processed.
    EndOfStream {
        frames: u64,
    },
}

/// Commands for the capture thread (video playback in the GUI).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SourceCommand {
    Play,
    Pause,
    /// Deliver exactly one more frame while paused.
    Step,
    Seek(u64),
    /// Playback speed for files played at their real frame rate (1.0 = real time; 0 = as fast as possible).
    Speed(f64),
}

// The handle (issue 7 implements it; the GUI and `analyze` use exactly this):
//
//   pub struct Pipeline { .. }   // owns the capture thread and the engine worker; Drop stops both
//   impl Pipeline {
//       pub fn start(source: Box<dyn FrameSource>, settings: PipelineSettings,
//                    delivery: Delivery, backends: Arc<Backends>) -> Result<Pipeline>;
//       pub fn events(&self) -> &crossbeam_channel::Receiver<PipelineEvent>;
//       pub fn set_settings(&self, settings: PipelineSettings);   // applies from the next frame
//       pub fn set_source(&self, source: Box<dyn FrameSource>);    // switch source live
//       pub fn command(&self, command: SourceCommand);
//       pub fn counters(&self) -> PipelineCounters;
//       pub fn stop(self);                                         // joins the threads
//   }
//
// Live delivery: the worker never waits on consumers (a full event queue drops the oldest
// result for the GUI). Lossless delivery: every frame reaches `events()` (unbounded).
//
// Sources: `SourceSpec::parse(&str) -> Result<SourceSpec>` and
// `SourceSpec::open(&self) -> Result<Box<dyn FrameSource>>`. The synthetic markers demo is
// deterministic and exposes its ground truth for tests and the tracker:
// `source::synthetic::MarkerScene::truth(frame) -> Vec<MarkerTruth { id, x, y, radius, visible }>`.
