//! The live pipeline: source → capture thread (grey, threshold, pack) → engine worker (label,
//! analyze, filter, markers) → tracking thread (track) → consumers (GUI, exporter).
//!
//! - `capture`: the capture thread (pulls frames, paces files, thresholds and packs in one pass);
//! - `ring`: the capture thread's reused mask buffers;
//! - `queue`: the frame queue between the two threads (drop-oldest or lossless);
//! - `engine`: which algorithm runs a frame, and the CPU fallback when the GPU fails;
//! - `worker`: the engine worker (label, filter, markers);
//! - `handover`: how the threads wait for frames labeled on the GPU (polling where one is near);
//! - `tracking`: the tracking stage (a thread that tracks the worker's frames in order) and
//!   the queue to the consumers;
//! - `markers`: the worker's marker step (square fiducials, their tracks, poses, world positions);
//! - `backlog`: the bytes of results a lossless consumer has not taken yet (a budget).
//!
//! The types and signatures in this file are shared by the pipeline, the GUI and `analyze`:
//! change them only together with every user.

mod backlog;
mod capture;
mod engine;
mod handover;
pub mod markers;
mod queue;
mod ring;
mod set_worker;
mod tracking;
mod worker;

pub use engine::{resolve_algorithm, ResolvedAlgorithm};

use crate::ccl::descriptors::ShapeDescriptors;
use crate::ccl::stats::ComponentStats;
use crate::ccl::subpixel::SubpixelCentroid;
use crate::ccl::{Backend, BackendChoice, Backends, Connectivity, RowFilter, StepTime};
use crate::error::{Error, Result};
use crate::fiducial::{MarkerObservation, MarkerSettings};
use crate::frame::grey::FrameGrey;
use crate::frame::image::{BinaryImage, LabelImage};
use crate::frame::mask::Mask;
use crate::geometry::WorldMapping;
use crate::source::FrameSource;
use crate::threshold::spec::ThresholdSpec;
use crate::track::TrackerConfig;
use capture::capture_loop;
pub use capture::frames_stay_on_gpu;
use crossbeam_channel::{Receiver, Sender};
use queue::{Doorbell, FrameQueue, Item};
pub use set_worker::frames_labeled_in_sets;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use tracking::{EventSink, TrackStage};
use worker::worker_loop;

/// Components kept after labeling. `None` = no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ComponentFilter {
    pub min_area: Option<u64>,
    pub max_area: Option<u64>,
    /// Bounding-box aspect ratio, long side / short side (≥ 1).
    pub max_aspect: Option<f64>,
    /// Circularity range, 4π area / perimeter² (`crate::ccl::descriptors`).
    pub min_circularity: Option<f64>,
    pub max_circularity: Option<f64>,
    /// Inertia ratio range, minor² / major² of the equivalent ellipse (OpenCV's
    /// SimpleBlobDetector; 1 = round, 0 = a line).
    pub min_inertia_ratio: Option<f64>,
    pub max_inertia_ratio: Option<f64>,
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
    /// Compute each component's grey-weighted (sub-pixel) centroid (`FrameResult::subpixel`);
    /// the tracker then follows those positions.
    pub subpixel: bool,
    /// Compute each kept component's shape descriptors (`FrameResult::shapes`); they are
    /// computed anyway when the filter has a shape limit.
    pub shapes: bool,
    /// Image → world mapping of the positions (`FrameResult::world`); None = pixels only.
    pub world: Option<Arc<WorldMapping>>,
    /// Pixels analysed (`crate::frame::mask`): the rest are cleared from the thresholded frame
    /// before labeling. A pixel mask of another size than the frames is scaled to them
    /// (nearest pixel), with a notice.
    pub mask: Option<Arc<Mask>>,
    /// Square fiducials to find in every frame (`FrameResult::markers`); None = none.
    pub markers: Option<Arc<MarkerSettings>>,
}

/// How frames are handed from the capture thread to the worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Bounded queue; the oldest frame is dropped when the worker is behind (and counted).
    Live,
    /// Every frame is processed; the capture thread waits for the worker (file analysis).
    Lossless,
}

/// The worker's filter step when the labeler applied the area and aspect limits itself
/// (`Labeler::set_row_filter`): what is left, the shape limits.
pub const FILTER_REST_STEP: &str = "filter (rest)";

/// Per-frame timing record. `steps` in execution order: "capture" (decode), "threshold" (CPU
/// algorithms: grey → byte mask) or "threshold+pack" (GPU algorithms: grey → bit-packed mask in
/// the same pass), then the labeler's steps ("upload", kernels, "download" for GPU algorithms;
/// GPU labelers that threshold on the device: "upload grey" ("copy grey" for a frame a decoder
/// left on the GPU), "histogram", "threshold+pack";
/// "sub-pixel centroids" of the kept components), then "filter" (`FILTER_REST_STEP` when the
/// labeler dropped the rejected rows), "track" and, with `PipelineSettings::markers`, "markers". `latency_ms` =
/// capture to result, including queueing.
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
    /// On the host, or on the GPU where its decoder left it (copied to the host when read).
    pub grey: FrameGrey,
    /// Present when `want_binary` was set.
    pub binary: Option<Arc<BinaryImage>>,
    /// Present when `want_labels` was set; numbered like `all_count` (1..=N, raster order).
    pub labels: Option<Arc<LabelImage>>,
    /// Components that passed the filter, in label order.
    pub components: Vec<ComponentStats>,
    /// The track of each component (same order as `components`; IDs from 1, stable from frame
    /// to frame while the tracker follows the marker; see `crate::track`).
    pub track_ids: Vec<u64>,
    /// Tracks that ended with this frame (missed too often, or all of them when the frame
    /// index went back): their IDs never come again, so a consumer that keeps something per
    /// track (`track::SummaryBuilder`) can let go of it.
    pub ended_tracks: Vec<u64>,
    /// Grey-weighted (sub-pixel) centroid of each component (same order as `components`) when
    /// `PipelineSettings::subpixel` is on; empty otherwise. See `crate::ccl::subpixel`.
    pub subpixel: Vec<SubpixelCentroid>,
    /// Shape descriptors of each component (same order as `components`) when
    /// `PipelineSettings::shapes` is on or the filter has a shape limit; empty otherwise.
    pub shapes: Vec<ShapeDescriptors>,
    /// World position of each component (same order as `components`; of `position(i)`) when
    /// `PipelineSettings::world` is set; empty otherwise.
    pub world: Vec<[f64; 2]>,
    /// The square fiducials found in the frame when `PipelineSettings::markers` is set; empty
    /// otherwise.
    pub markers: Vec<MarkerObservation>,
    /// Components before filtering.
    pub all_count: u32,
    pub timings: FrameTimings,
    /// The algorithm and backend that produced this frame.
    pub algorithm: &'static str,
    pub backend: Backend,
    pub connectivity: Connectivity,
}

impl FrameResult {
    /// The best position estimate of component `i`: its sub-pixel centroid when one was
    /// computed, its binary centroid otherwise (pixel-index coordinates).
    pub fn position(&self, i: usize) -> (f64, f64) {
        match self.subpixel.get(i) {
            Some(c) => (c.x, c.y),
            None => (self.components[i].centroid_x, self.components[i].centroid_y),
        }
    }
}

/// Running counters, readable at any time.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PipelineCounters {
    pub captured: u64,
    pub processed: u64,
    /// Frames dropped because the worker was behind (live delivery only; file analysis: 0).
    pub dropped: u64,
    /// Results dropped because the consumer was behind (`EventPolicy::DropOldest` only): the
    /// oldest waiting result makes room for the newest.
    pub dropped_results: u64,
}

/// What consumers receive.
#[derive(Clone, Debug)]
pub enum PipelineEvent {
    Frame(Arc<FrameResult>),
    /// A one-line message for the user (CPU fallback, a changed frame size, ...).
    Notice(String),
    /// The source failed (camera gone, a file that cannot be read on). The pipeline stays
    /// alive and can be given a new source.
    SourceError(String),
    /// The source left out a damaged frame or image, or data it could not read, and goes on.
    Skipped(crate::source::Skipped),
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
    /// Exposure and gain for a streaming camera (other sources ignore them).
    CameraControls(crate::source::camera_controls::CameraControls),
}

/// Frames waiting for the worker: live delivery keeps this few (low latency, drop the oldest),
/// lossless a few more so that decoding overlaps labeling.
const LIVE_FRAME_QUEUE: usize = 2;
const LOSSLESS_FRAME_QUEUE: usize = 4;
/// Results waiting for the consumer.
const LIVE_EVENT_QUEUE: usize = 8;
const LOSSLESS_EVENT_QUEUE: usize = 16;
/// How long stopping waits for the capture thread to finish a read.
const CAPTURE_STOP_WAIT: Duration = Duration::from_millis(500);
/// How often blocked threads look at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

impl Default for PipelineSettings {
    fn default() -> Self {
        Self {
            threshold: ThresholdSpec::default(),
            invert: false,
            connectivity: Connectivity::Eight,
            algorithm: None,
            backend: BackendChoice::Auto,
            filter: ComponentFilter::default(),
            want_labels: false,
            want_binary: false,
            subpixel: true,
            shapes: false,
            world: None,
            mask: None,
            markers: None,
        }
    }
}

impl ComponentFilter {
    /// Does `c` pass the area and aspect limits that are set (`RowFilter::accepts`)? The shape
    /// limits need the descriptors (`accepts_shape`).
    pub fn accepts(&self, c: &ComponentStats) -> bool {
        self.rows().accepts(c)
    }

    /// The area and aspect limits: what a labeler may apply to its rows itself.
    pub fn rows(&self) -> RowFilter {
        RowFilter {
            min_area: self.min_area,
            max_area: self.max_area,
            max_aspect: self.max_aspect,
        }
    }

    pub fn is_unlimited(&self) -> bool {
        *self == ComponentFilter::default()
    }

    /// Is a circularity or inertia-ratio limit set (descriptors needed)?
    pub fn has_shape_limits(&self) -> bool {
        self.min_circularity.is_some()
            || self.max_circularity.is_some()
            || self.min_inertia_ratio.is_some()
            || self.max_inertia_ratio.is_some()
    }

    /// Does a component with descriptors `d` pass the shape limits that are set?
    pub fn accepts_shape(&self, d: &ShapeDescriptors) -> bool {
        let within = |v: f64, lo: Option<f64>, hi: Option<f64>| {
            lo.is_none_or(|m| v >= m) && hi.is_none_or(|m| v <= m)
        };
        within(d.circularity, self.min_circularity, self.max_circularity)
            && within(
                d.inertia_ratio,
                self.min_inertia_ratio,
                self.max_inertia_ratio,
            )
    }

    /// Checks the limits: every minimum at most its maximum, ratios in their ranges. The
    /// message names the limits (`what` prefixes it: the flag or config section).
    pub fn validate(&self) -> Result<()> {
        let bad = |why: String| Err(Error::Invalid(why));
        if let (Some(lo), Some(hi)) = (self.min_area, self.max_area) {
            if lo > hi {
                return bad(format!(
                    "filter: min area {lo} is above max area {hi}; lower the minimum or raise the maximum"
                ));
            }
        }
        if let Some(a) = self.max_aspect {
            if !(a.is_finite() && a >= 1.0) {
                return bad(format!("filter: max aspect {a} must be a number >= 1"));
            }
        }
        for (name, lo, hi, top) in [
            (
                "circularity",
                self.min_circularity,
                self.max_circularity,
                None,
            ),
            (
                "inertia ratio",
                self.min_inertia_ratio,
                self.max_inertia_ratio,
                Some(1.0),
            ),
        ] {
            for v in [lo, hi].into_iter().flatten() {
                if !(v.is_finite() && v >= 0.0 && top.is_none_or(|t| v <= t)) {
                    let range = if top.is_some() { "0..=1" } else { ">= 0" };
                    return bad(format!("filter: {name} {v} must be a number in {range}"));
                }
            }
            if let (Some(lo), Some(hi)) = (lo, hi) {
                if lo > hi {
                    return bad(format!(
                        "filter: min {name} {lo} is above max {name} {hi}; lower the minimum or raise the maximum"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// What happens to results when the consumer is behind. `Pipeline::start` uses `DropOldest`
/// for `Delivery::Live` and `Lossless` for `Delivery::Lossless`; `start_with` can mix them
/// (`analyze camera:0`: drop frames the worker cannot keep up with, but export every result).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventPolicy {
    DropOldest,
    Lossless,
}

/// State the threads and the handle see.
struct Shared {
    settings: Mutex<Arc<PipelineSettings>>,
    backends: Arc<Backends>,
    delivery: Delivery,
    queue: FrameQueue,
    stop: AtomicBool,
    captured: AtomicU64,
    processed: AtomicU64,
    dropped: AtomicU64,
    dropped_results: AtomicU64,
    /// The worker gave the GPU up for the CPU (`--backend auto`): the capture thread then makes
    /// the CPU's masks instead of handing frames over for the GPU.
    gpu_given_up: AtomicBool,
}

impl Shared {
    /// Nothing captured yet; the frame queue as long as `delivery` keeps it, ringing `bell`
    /// when one is given (a set worker's).
    fn new(
        settings: PipelineSettings,
        backends: Arc<Backends>,
        delivery: Delivery,
        bell: Option<Arc<Doorbell>>,
    ) -> Shared {
        let capacity = match delivery {
            Delivery::Live => LIVE_FRAME_QUEUE,
            Delivery::Lossless => LOSSLESS_FRAME_QUEUE,
        };
        let queue = match bell {
            Some(bell) => FrameQueue::new(capacity).with_bell(bell),
            None => FrameQueue::new(capacity),
        };
        Shared {
            settings: Mutex::new(Arc::new(settings)),
            backends,
            delivery,
            queue,
            stop: AtomicBool::new(false),
            captured: AtomicU64::new(0),
            processed: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            dropped_results: AtomicU64::new(0),
            gpu_given_up: AtomicBool::new(false),
        }
    }

    fn settings(&self) -> Arc<PipelineSettings> {
        self.settings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Capture thread → worker, by the delivery policy. False when the pipeline is stopping.
    fn push(&self, item: Item) -> bool {
        match self.delivery {
            Delivery::Live => {
                let dropped = self.queue.push_dropping_oldest(item);
                self.dropped.fetch_add(dropped, Ordering::Relaxed);
                true
            }
            Delivery::Lossless => self.queue.push_waiting(item),
        }
    }
}

enum Control {
    Source(Box<dyn FrameSource>),
    /// Drop the source, then say so.
    Close(Sender<()>),
    Command(SourceCommand),
    Stop,
}

/// The running pipeline: a capture thread, an engine worker and its tracking thread. Dropping
/// it stops them.
pub struct Pipeline {
    shared: Arc<Shared>,
    events: Receiver<PipelineEvent>,
    control: Sender<Control>,
    capture: Option<JoinHandle<()>>,
    worker: Option<JoinHandle<()>>,
}

impl Pipeline {
    /// Starts capturing from `source` at once. Problems with the settings (unknown algorithm,
    /// no CUDA) are reported as `EngineError` events; call `resolve_algorithm` first to fail early.
    pub fn start(
        source: Box<dyn FrameSource>,
        settings: PipelineSettings,
        delivery: Delivery,
        backends: Arc<Backends>,
    ) -> Result<Pipeline> {
        let tracker = TrackerConfig::pipeline();
        Self::start_tracking(source, settings, tracker, delivery, backends)
    }

    /// `start` with the event policy chosen apart from the frame delivery.
    pub fn start_with(
        source: Box<dyn FrameSource>,
        settings: PipelineSettings,
        delivery: Delivery,
        backends: Arc<Backends>,
        events: EventPolicy,
    ) -> Result<Pipeline> {
        Self::start_with_labeler(source, settings, delivery, backends, events, None)
    }

    /// `start_with`, with `first` as the labeler of the first frames: it stands in for the one
    /// the registry would make for the same name (`Labeler::name`) and is replaced like it when
    /// the algorithm changes or fails. For fault injection: a labeler that fails as a GPU can.
    pub fn start_with_labeler(
        source: Box<dyn FrameSource>,
        settings: PipelineSettings,
        delivery: Delivery,
        backends: Arc<Backends>,
        events: EventPolicy,
        first: Option<Box<dyn crate::ccl::Labeler>>,
    ) -> Result<Pipeline> {
        let tracker = TrackerConfig::pipeline();
        Self::launch(source, settings, tracker, delivery, backends, events, first)
    }

    /// `start` (lossless or live as `delivery` says) with a tracker of other settings than the
    /// engine's defaults: particles that move at random rather than markers that glide.
    pub fn start_tracking(
        source: Box<dyn FrameSource>,
        settings: PipelineSettings,
        tracker: TrackerConfig,
        delivery: Delivery,
        backends: Arc<Backends>,
    ) -> Result<Pipeline> {
        let events = match delivery {
            Delivery::Live => EventPolicy::DropOldest,
            Delivery::Lossless => EventPolicy::Lossless,
        };
        tracker.validate()?;
        Self::launch(source, settings, tracker, delivery, backends, events, None)
    }

    fn launch(
        source: Box<dyn FrameSource>,
        settings: PipelineSettings,
        tracker: TrackerConfig,
        delivery: Delivery,
        backends: Arc<Backends>,
        events: EventPolicy,
        first: Option<Box<dyn crate::ccl::Labeler>>,
    ) -> Result<Pipeline> {
        let member = SetMember {
            source,
            settings,
            delivery,
            backends,
        };
        let (mut pipeline, stage, capture) = Self::assemble(member, tracker, events, None)?;
        let shared = pipeline.shared.clone();
        let worker = std::thread::Builder::new()
            .name("markerscope-engine".into())
            .spawn(move || worker_loop(&shared, &stage, first))
            .map_err(|e| spawn_error("engine worker thread", e))?;
        pipeline.worker = Some(worker);
        pipeline.capture = Some(capture()?);
        Ok(pipeline)
    }

    /// Starts the pipelines of several sources whose frames one worker labels, as frame sets
    /// where they can go together (`set_worker`): each source has its capture thread, tracking
    /// stage, events and counters as `start_with` gives it; `set_backends` holds the device for
    /// the sets' labeler (a stream of its own). The first pipeline owns the worker: stopping
    /// it stops the worker for all.
    pub fn start_set(
        members: Vec<SetMember>,
        events: EventPolicy,
        set_backends: Arc<Backends>,
    ) -> Result<Vec<Pipeline>> {
        let bell = Arc::new(Doorbell::default());
        let tracker = TrackerConfig::pipeline();
        let mut pipelines = Vec::with_capacity(members.len());
        let mut workers = Vec::with_capacity(members.len());
        let mut captures = Vec::with_capacity(members.len());
        for member in members {
            let (pipeline, stage, capture) =
                Self::assemble(member, tracker, events, Some(bell.clone()))?;
            workers.push(set_worker::Member::new(pipeline.shared.clone(), stage));
            pipelines.push(pipeline);
            captures.push(capture);
        }
        let worker = std::thread::Builder::new()
            .name("markerscope-engine".into())
            .spawn(move || set_worker::set_worker_loop(workers, &bell, set_backends))
            .map_err(|e| spawn_error("engine worker thread", e))?;
        if let Some(first) = pipelines.first_mut() {
            first.worker = Some(worker);
        }
        for (pipeline, capture) in pipelines.iter_mut().zip(captures) {
            pipeline.capture = Some(capture()?);
        }
        Ok(pipelines)
    }

    /// A pipeline's parts before its worker runs: the handle (no threads yet), its tracking
    /// stage, and what starts its capture thread.
    #[allow(clippy::type_complexity)]
    fn assemble(
        member: SetMember,
        tracker: TrackerConfig,
        events: EventPolicy,
        bell: Option<Arc<Doorbell>>,
    ) -> Result<(
        Pipeline,
        TrackStage,
        Box<dyn FnOnce() -> Result<JoinHandle<()>>>,
    )> {
        let SetMember {
            source,
            settings,
            delivery,
            backends,
        } = member;
        if let Some(markers) = &settings.markers {
            markers.validate()?;
        }
        let shared = Arc::new(Shared::new(settings, backends, delivery, bell));
        let (event_tx, event_rx) = crossbeam_channel::bounded(match events {
            EventPolicy::DropOldest => LIVE_EVENT_QUEUE,
            EventPolicy::Lossless => LOSSLESS_EVENT_QUEUE,
        });
        let (control_tx, control_rx) = crossbeam_channel::unbounded();
        let sink = EventSink {
            tx: event_tx,
            rx: event_rx.clone(),
            policy: events,
            shared: shared.clone(),
            backlog: std::sync::Mutex::new(backlog::Backlog::new(backlog::LOSSLESS_RESULT_BUDGET)),
        };
        let stage = TrackStage::start(sink, shared.clone(), tracker)
            .map_err(|e| spawn_error("tracking thread", e))?;
        let pipeline = Pipeline {
            shared: shared.clone(),
            events: event_rx,
            control: control_tx,
            capture: None,
            worker: None,
        };
        let capture = move || {
            std::thread::Builder::new()
                .name("markerscope-capture".into())
                .spawn(move || capture_loop(&shared, &control_rx, source))
                .map_err(|e| spawn_error("capture thread", e))
        };
        Ok((pipeline, stage, Box::new(capture)))
    }

    /// Results, notices and errors, in frame order.
    pub fn events(&self) -> &Receiver<PipelineEvent> {
        &self.events
    }

    /// Applies from the next captured frame (threshold) and its labeling.
    pub fn set_settings(&self, settings: PipelineSettings) {
        *self
            .shared
            .settings
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Arc::new(settings);
    }

    /// Replaces the source; frames already captured from the old one are still processed.
    pub fn set_source(&self, source: Box<dyn FrameSource>) {
        let _ = self.control.send(Control::Source(source));
    }

    pub fn command(&self, command: SourceCommand) {
        let _ = self.control.send(Control::Command(command));
    }

    /// Drops the source (frames already captured are still processed) and waits up to
    /// `timeout` for it to be gone: a camera is then free to be opened again, in another mode.
    /// False when the capture thread did not confirm in time.
    pub fn close_source(&self, timeout: Duration) -> bool {
        let (done, wait) = crossbeam_channel::bounded(1);
        self.control.send(Control::Close(done)).is_ok() && wait.recv_timeout(timeout).is_ok()
    }

    pub fn counters(&self) -> PipelineCounters {
        PipelineCounters {
            captured: self.shared.captured.load(Ordering::Relaxed),
            processed: self.shared.processed.load(Ordering::Relaxed),
            dropped: self.shared.dropped.load(Ordering::Relaxed),
            dropped_results: self.shared.dropped_results.load(Ordering::Relaxed),
        }
    }

    /// Stops both threads and waits for them (a frame being decoded or labeled is finished);
    /// a source that hangs in a read is not waited for longer than half a second.
    pub fn stop(mut self) {
        self.shutdown();
    }

    /// Tells both threads to stop and returns: a run of several sources tells every pipeline
    /// before it waits for one, so that they wind down together.
    pub fn begin_stop(&self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        let _ = self.control.send(Control::Stop);
        self.shared.queue.close();
    }

    fn shutdown(&mut self) {
        self.begin_stop();
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
        // A source that hangs in a read (a camera that stopped answering, a stalled network
        // file) cannot be interrupted: its thread is left to end when the read returns, and
        // stopping does not wait for it.
        if let Some(capture) = self.capture.take() {
            let deadline = std::time::Instant::now() + CAPTURE_STOP_WAIT;
            while !capture.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if capture.is_finished() {
                let _ = capture.join();
            }
        }
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A thread that could not be started.
fn spawn_error(what: &str, e: std::io::Error) -> Error {
    Error::Invalid(format!("cannot start the {what}: {e}"))
}

/// One source of `Pipeline::start_set` (and of every pipeline): its source, settings, frame
/// delivery and backends (for the frames it labels alone: a stream of its own).
pub struct SetMember {
    pub source: Box<dyn FrameSource>,
    pub settings: PipelineSettings,
    pub delivery: Delivery,
    pub backends: Arc<Backends>,
}

/// Milliseconds since `t`.
fn ms(t: std::time::Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}
