//! The live pipeline: source → capture thread (grey, threshold, pack) → engine worker (label,
//! analyze, filter) → consumers (GUI, exporter), connected by crossbeam channels.
//!
//! CONTRACT (issue 7): the types and signatures here are shared by the pipeline, the GUI and
//! `analyze`. Change them only together with every user.

use crate::analyze::BackendChoice;
use crate::ccl::{Backend, Connectivity, StepTime};
use crate::image::{BinaryImage, GrayImage, LabelImage};
use crate::stats::ComponentStats;
use crate::subpixel::{GreyWeights, SubpixelCentroid, ThresholdLevels};
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
    /// Compute each component's grey-weighted (sub-pixel) centroid (`FrameResult::subpixel`);
    /// the tracker then follows those positions.
    pub subpixel: bool,
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
/// "filter" and "track". `latency_ms` = capture to result, including queueing.
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
    /// The track of each component (same order as `components`; IDs from 1, stable from frame
    /// to frame while the tracker follows the marker; see `crate::track`).
    pub track_ids: Vec<u64>,
    /// Grey-weighted (sub-pixel) centroid of each component (same order as `components`) when
    /// `PipelineSettings::subpixel` is on; empty otherwise. See `crate::subpixel`.
    pub subpixel: Vec<SubpixelCentroid>,
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

// The handle (issue 7): `Pipeline::start(source, settings, delivery, backends)`, `events()`,
// `set_settings()`, `set_source()`, `command()`, `counters()`, `stop()`; below.
//
// Live delivery: the worker never waits on consumers (a full event queue drops the oldest
// result). Lossless delivery: every frame reaches `events()`; the queue is bounded, so a slow
// consumer slows the worker (and, through the frame queue, the source) instead of growing memory.
//
// Sources: `SourceSpec::parse(&str) -> Result<SourceSpec>` and
// `SourceSpec::open(&self) -> Result<Box<dyn FrameSource>>`. The synthetic markers demo is
// deterministic and exposes its ground truth for tests and the tracker:
// `source::synthetic::MarkerScene::truth(frame) -> Vec<MarkerTruth { id, x, y, radius, visible }>`.

use crate::ccl::{
    algorithm_info, registry::unsupported_connectivity, Backends, Labeler, Labeling, Mask, Want,
};
use crate::error::{Error, Result};
use crate::image::PackedBinary;
use crate::source::{Frame, FrameSource};
use crate::track::{Detection, Tracker};
use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError};
use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Frames waiting for the worker: live delivery keeps this few (low latency, drop the oldest),
/// lossless a few more so that decoding overlaps labeling.
const LIVE_FRAME_QUEUE: usize = 2;
const LOSSLESS_FRAME_QUEUE: usize = 4;
/// Results waiting for the consumer.
const LIVE_EVENT_QUEUE: usize = 8;
const LOSSLESS_EVENT_QUEUE: usize = 16;
/// How often blocked threads look at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

impl Default for PipelineSettings {
    fn default() -> Self {
        Self {
            threshold: ThresholdSpec::Otsu,
            invert: false,
            connectivity: Connectivity::Eight,
            algorithm: None,
            backend: BackendChoice::Auto,
            filter: ComponentFilter::default(),
            want_labels: false,
            want_binary: false,
            subpixel: true,
        }
    }
}

impl ComponentFilter {
    /// Does `c` pass every limit that is set?
    pub fn accepts(&self, c: &ComponentStats) -> bool {
        let long = c.width.max(c.height) as f64;
        let short = c.width.min(c.height).max(1) as f64;
        self.min_area.is_none_or(|m| c.area >= m)
            && self.max_area.is_none_or(|m| c.area <= m)
            && self.max_aspect.is_none_or(|m| long / short <= m)
    }

    pub fn is_unlimited(&self) -> bool {
        *self == ComponentFilter::default()
    }
}

/// The algorithm that settings ask for, on the backends this process has.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedAlgorithm {
    pub name: &'static str,
    pub backend: Backend,
    /// Said once to the user when `auto` had to fall back to the CPU ("CPU backend: <why>").
    pub notice: Option<String>,
}

/// Picks the algorithm for `settings` and checks everything `Backends::create` would, without
/// making it: unknown name, unsupported connectivity, CUDA asked for but missing. `analyze`
/// calls it before starting so that a bad request fails before the first frame.
pub fn resolve_algorithm(
    settings: &PipelineSettings,
    backends: &Backends,
) -> Result<ResolvedAlgorithm> {
    let connectivity = settings.connectivity;
    let cuda_missing = backends.cuda_unavailable_reason();
    if let (BackendChoice::Cuda, Some(reason)) = (settings.backend, &cuda_missing) {
        return Err(Error::Invalid(format!("--backend cuda: {reason}")));
    }
    let mut notice = None;
    let info = match &settings.algorithm {
        Some(name) => algorithm_info(name)?,
        None => {
            let backend = match (settings.backend, &cuda_missing) {
                (BackendChoice::Cpu, _) => Backend::Cpu,
                (BackendChoice::Auto, Some(reason)) => {
                    notice = Some(format!("CPU backend: {reason}"));
                    Backend::Cpu
                }
                _ => Backend::Cuda,
            };
            let info = algorithm_info(backends.default_algorithm(backend, connectivity))?;
            if backend == Backend::Cuda && info.backend == Backend::Cpu {
                // default_algorithm falls back to the CPU when no CUDA algorithm fits.
                let why = format!("no CUDA algorithm supports {connectivity}-connectivity");
                if settings.backend == BackendChoice::Cuda {
                    return Err(Error::Invalid(format!(
                        "--backend cuda: {why}; use --connectivity 4 or --backend cpu"
                    )));
                }
                notice = Some(format!("CPU backend: {why}"));
            }
            info
        }
    };
    if settings.backend == BackendChoice::Cuda && info.backend != Backend::Cuda {
        return Err(Error::Invalid(format!(
            "--backend cuda: algorithm '{}' runs on the {}, not on CUDA",
            info.name, info.backend
        )));
    }
    if !info.supports(connectivity) {
        return Err(unsupported_connectivity(info.name, connectivity));
    }
    if let (Backend::Cuda, Some(reason)) = (info.backend, &cuda_missing) {
        return Err(Error::CudaUnavailable(format!(
            "algorithm '{}' needs CUDA: {reason}",
            info.name
        )));
    }
    Ok(ResolvedAlgorithm {
        name: info.name,
        backend: info.backend,
        notice,
    })
}

/// What happens to results when the consumer is behind. `Pipeline::start` uses `DropOldest`
/// for `Delivery::Live` and `Lossless` for `Delivery::Lossless`; `start_with` can mix them
/// (`analyze camera:0`: drop frames the worker cannot keep up with, but export every result).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventPolicy {
    DropOldest,
    Lossless,
}

/// A thresholded frame on its way to the worker.
struct Captured {
    frame: Frame,
    settings: Arc<PipelineSettings>,
    /// The byte mask (always for CPU algorithms; for GPU ones only when `want_binary`).
    binary: Option<BinaryImage>,
    /// The bit-packed mask for GPU algorithms.
    packed: Option<PackedBinary>,
    /// The levels the frame was thresholded with (only when sub-pixel centroids are wanted).
    levels: Option<ThresholdLevels>,
    steps: Vec<StepTime>,
}

enum Item {
    Frame(Box<Captured>),
    /// A message from the capture thread, delivered in order with the frames.
    Event(PipelineEvent),
}

/// Capture thread → worker. A mutex-guarded deque rather than a channel, because live delivery
/// must drop the oldest *frame* while keeping messages (end of stream, source errors) in order.
struct FrameQueue {
    state: Mutex<QueueState>,
    changed: Condvar,
    capacity: usize,
}

struct QueueState {
    items: VecDeque<Item>,
    frames: usize,
    closed: bool,
}

impl FrameQueue {
    fn new(capacity: usize) -> Self {
        Self {
            state: Mutex::new(QueueState {
                items: VecDeque::new(),
                frames: 0,
                closed: false,
            }),
            changed: Condvar::new(),
            capacity,
        }
    }

    fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Live: never waits; drops the oldest queued frames to make room. Returns how many.
    fn push_dropping_oldest(&self, item: Item) -> u64 {
        let mut s = self.lock();
        let mut dropped = 0;
        if matches!(item, Item::Frame(_)) {
            while s.frames >= self.capacity {
                let Some(pos) = s.items.iter().position(|i| matches!(i, Item::Frame(_))) else {
                    break;
                };
                s.items.remove(pos);
                s.frames -= 1;
                dropped += 1;
            }
            s.frames += 1;
        }
        s.items.push_back(item);
        self.changed.notify_all();
        dropped
    }

    /// Lossless: waits while the queue holds `capacity` frames. False once closed.
    fn push_waiting(&self, item: Item) -> bool {
        let mut s = self.lock();
        if matches!(item, Item::Frame(_)) {
            while s.frames >= self.capacity && !s.closed {
                s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
            }
            s.frames += 1;
        }
        if s.closed {
            return false;
        }
        s.items.push_back(item);
        self.changed.notify_all();
        true
    }

    /// The next item, waiting for one; None once closed.
    fn pop(&self) -> Option<Item> {
        let mut s = self.lock();
        loop {
            if s.closed {
                return None;
            }
            if let Some(item) = s.items.pop_front() {
                if matches!(item, Item::Frame(_)) {
                    s.frames -= 1;
                }
                self.changed.notify_all();
                return Some(item);
            }
            s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }
}

/// State both threads and the handle see.
struct Shared {
    settings: Mutex<Arc<PipelineSettings>>,
    backends: Arc<Backends>,
    delivery: Delivery,
    queue: FrameQueue,
    stop: AtomicBool,
    captured: AtomicU64,
    processed: AtomicU64,
    dropped: AtomicU64,
}

impl Shared {
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
    Command(SourceCommand),
    Stop,
}

/// The running pipeline: a capture thread and an engine worker. Dropping it stops both.
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
        let events = match delivery {
            Delivery::Live => EventPolicy::DropOldest,
            Delivery::Lossless => EventPolicy::Lossless,
        };
        Self::start_with(source, settings, delivery, backends, events)
    }

    /// `start` with the event policy chosen apart from the frame delivery.
    pub fn start_with(
        source: Box<dyn FrameSource>,
        settings: PipelineSettings,
        delivery: Delivery,
        backends: Arc<Backends>,
        events: EventPolicy,
    ) -> Result<Pipeline> {
        let capacity = match delivery {
            Delivery::Live => LIVE_FRAME_QUEUE,
            Delivery::Lossless => LOSSLESS_FRAME_QUEUE,
        };
        let shared = Arc::new(Shared {
            settings: Mutex::new(Arc::new(settings)),
            backends,
            delivery,
            queue: FrameQueue::new(capacity),
            stop: AtomicBool::new(false),
            captured: AtomicU64::new(0),
            processed: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        });
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
        };
        let spawn_error =
            |what: &str, e: std::io::Error| Error::Invalid(format!("cannot start the {what}: {e}"));
        let worker = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("markerscope-engine".into())
                .spawn(move || worker_loop(&shared, &sink))
                .map_err(|e| spawn_error("engine worker thread", e))?
        };
        let mut pipeline = Pipeline {
            shared: shared.clone(),
            events: event_rx,
            control: control_tx,
            capture: None,
            worker: Some(worker),
        };
        let capture = std::thread::Builder::new()
            .name("markerscope-capture".into())
            .spawn(move || capture_loop(&shared, &control_rx, source))
            .map_err(|e| spawn_error("capture thread", e))?;
        pipeline.capture = Some(capture);
        Ok(pipeline)
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

    pub fn counters(&self) -> PipelineCounters {
        PipelineCounters {
            captured: self.shared.captured.load(Ordering::Relaxed),
            processed: self.shared.processed.load(Ordering::Relaxed),
            dropped: self.shared.dropped.load(Ordering::Relaxed),
        }
    }

    /// Stops both threads and waits for them (a frame being decoded or labeled is finished).
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        let _ = self.control.send(Control::Stop);
        self.shared.queue.close();
        for handle in [self.capture.take(), self.worker.take()]
            .into_iter()
            .flatten()
        {
            let _ = handle.join();
        }
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Playback state of the capture thread.
struct Playback {
    playing: bool,
    /// Deliver one frame while paused.
    step: bool,
    /// 1.0 = a file's real frame rate, 0 = as fast as possible (live sources pace themselves).
    speed: f64,
    /// The source has ended or failed; wait for a seek or a new source.
    ended: bool,
    /// Wall clock and media time of the first frame since the pacing (re)started.
    pace: Option<(Instant, f64)>,
    last_size: Option<(u32, u32)>,
    /// Frames captured from the current source.
    frames: u64,
}

fn capture_loop(shared: &Shared, control: &Receiver<Control>, source: Box<dyn FrameSource>) {
    let mut source = Some(source);
    let mut play = Playback {
        playing: true,
        step: false,
        speed: match shared.delivery {
            Delivery::Live => 1.0,
            Delivery::Lossless => 0.0,
        },
        ended: false,
        pace: None,
        last_size: None,
        frames: 0,
    };
    // Whether the current settings label on the GPU (pack the mask), cached per settings value.
    let mut pack_for: Option<(Arc<PipelineSettings>, bool)> = None;
    let mut last_threshold_error: Option<String> = None;
    while !shared.stopping() {
        let idle = source.is_none() || play.ended || (!play.playing && !play.step);
        let message = if idle {
            match control.recv() {
                Ok(m) => Some(m),
                Err(_) => break,
            }
        } else {
            match control.try_recv() {
                Ok(m) => Some(m),
                Err(TryRecvError::Empty) => None,
                Err(TryRecvError::Disconnected) => break,
            }
        };
        if let Some(message) = message {
            match message {
                Control::Stop => break,
                Control::Source(new) => {
                    source = Some(new);
                    play.ended = false;
                    play.pace = None;
                    play.last_size = None;
                    play.frames = 0;
                }
                Control::Command(command) => {
                    if !apply_command(shared, &mut play, &mut source, command) {
                        break;
                    }
                }
            }
            continue;
        }
        let Some(src) = source.as_mut() else {
            continue;
        };
        let pulled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| src.next_frame()))
            .unwrap_or_else(|_| {
                Err(Error::Invalid(format!(
                    "{}: the source crashed while reading a frame",
                    src.describe()
                )))
            });
        let mut frame = match pulled {
            Ok(Some(frame)) => frame,
            Ok(None) => {
                play.ended = true;
                if !shared.push(Item::Event(PipelineEvent::EndOfStream {
                    frames: play.frames,
                })) {
                    break;
                }
                continue;
            }
            Err(e) => {
                play.ended = true;
                if !shared.push(Item::Event(PipelineEvent::SourceError(e.to_string()))) {
                    break;
                }
                continue;
            }
        };
        play.step = false;
        if !src.is_live() && play.speed > 0.0 {
            wait_until_due(shared, &mut play, frame.time_s);
            // Latency counts from when the frame is due, not from when it was decoded ahead.
            frame.captured_at = Instant::now();
        }
        let size = (frame.grey.width, frame.grey.height);
        if let Some(prev) = play.last_size.filter(|&p| p != size) {
            let notice = format!(
                "frame size changed from {}x{} to {}x{} at frame {}",
                prev.0, prev.1, size.0, size.1, frame.index
            );
            if !shared.push(Item::Event(PipelineEvent::Notice(notice))) {
                break;
            }
        }
        play.last_size = Some(size);
        play.frames += 1;
        shared.captured.fetch_add(1, Ordering::Relaxed);

        let settings = shared.settings();
        let pack = match &pack_for {
            Some((s, pack)) if Arc::ptr_eq(s, &settings) => *pack,
            _ => {
                let pack = resolve_algorithm(&settings, &shared.backends)
                    .is_ok_and(|r| r.backend == Backend::Cuda);
                pack_for = Some((settings.clone(), pack));
                pack
            }
        };
        let item = match threshold_frame(frame, settings, pack) {
            Ok(captured) => {
                last_threshold_error = None;
                Item::Frame(Box::new(captured))
            }
            Err(why) if last_threshold_error.as_deref() == Some(&why) => continue,
            Err(why) => {
                last_threshold_error = Some(why.clone());
                Item::Event(PipelineEvent::EngineError(why))
            }
        };
        if !shared.push(item) {
            break;
        }
    }
}

/// Applies a playback command; false when the pipeline is stopping.
fn apply_command(
    shared: &Shared,
    play: &mut Playback,
    source: &mut Option<Box<dyn FrameSource>>,
    command: SourceCommand,
) -> bool {
    match command {
        SourceCommand::Play => {
            play.playing = true;
            play.pace = None;
        }
        SourceCommand::Pause => play.playing = false,
        SourceCommand::Step => play.step = true,
        SourceCommand::Speed(speed) => {
            play.speed = if speed.is_finite() {
                speed.max(0.0)
            } else {
                0.0
            };
            play.pace = None;
        }
        SourceCommand::Seek(index) => {
            let Some(src) = source.as_mut() else {
                return true;
            };
            match src.seek(index) {
                Ok(()) => {
                    play.ended = false;
                    play.pace = None;
                    // Paused: show the frame sought to.
                    play.step = !play.playing;
                }
                Err(e) => return shared.push(Item::Event(PipelineEvent::Notice(e.to_string()))),
            }
        }
    }
    true
}

/// Sleeps until a file's frame at media time `time_s` is due at the current speed. A frame
/// more than half a second late (after a pause, a slow worker, a loop) restarts the clock.
fn wait_until_due(shared: &Shared, play: &mut Playback, time_s: f64) {
    let now = Instant::now();
    let (wall0, media0) = *play.pace.get_or_insert((now, time_s));
    let offset = (time_s - media0) / play.speed;
    if !(0.0..1e6).contains(&offset) {
        play.pace = Some((now, time_s));
        return;
    }
    let due = wall0 + Duration::from_secs_f64(offset);
    if now > due + Duration::from_millis(500) {
        play.pace = Some((now, time_s));
        return;
    }
    while !shared.stopping() {
        let left = due.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(STOP_POLL));
    }
}

/// Threshold (and pack for GPU algorithms) on the capture thread.
fn threshold_frame(
    frame: Frame,
    settings: Arc<PipelineSettings>,
    pack: bool,
) -> std::result::Result<Captured, String> {
    let mut steps = vec![StepTime::new("capture", frame.decode_ms)];
    let t = Instant::now();
    let threshold_err = |e: Error| format!("threshold {}: {e}", settings.threshold);
    // Sub-pixel centroids weigh pixels by how far above their level they are: keep the levels,
    // and make the mask from them so that the two cannot disagree.
    let (binary, levels) = if settings.subpixel {
        let levels =
            ThresholdLevels::compute(&frame.grey, &settings.threshold).map_err(threshold_err)?;
        let binary = levels
            .mask(&frame.grey, settings.invert)
            .map_err(threshold_err)?;
        (binary, Some(levels))
    } else {
        let binary = crate::threshold::apply(&frame.grey, &settings.threshold, settings.invert)
            .map_err(threshold_err)?;
        (binary, None)
    };
    steps.push(StepTime::new("threshold", ms(t)));
    let (binary, packed) = if pack {
        let t = Instant::now();
        let packed = binary.pack();
        steps.push(StepTime::new("pack", ms(t)));
        (settings.want_binary.then_some(binary), Some(packed))
    } else {
        (Some(binary), None)
    };
    Ok(Captured {
        frame,
        settings,
        binary,
        packed,
        levels,
        steps,
    })
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Worker → consumers.
struct EventSink {
    tx: Sender<PipelineEvent>,
    /// To drop the oldest result when a live consumer is behind.
    rx: Receiver<PipelineEvent>,
    policy: EventPolicy,
    shared: Arc<Shared>,
}

impl EventSink {
    fn send(&self, event: PipelineEvent) {
        match self.policy {
            EventPolicy::Lossless => {
                let mut event = event;
                loop {
                    match self.tx.send_timeout(event, STOP_POLL) {
                        Ok(()) => return,
                        Err(crossbeam_channel::SendTimeoutError::Timeout(e)) => {
                            if self.shared.stopping() {
                                return;
                            }
                            event = e;
                        }
                        Err(crossbeam_channel::SendTimeoutError::Disconnected(_)) => return,
                    }
                }
            }
            EventPolicy::DropOldest => {
                let mut event = event;
                // Make room by dropping the oldest frame result; messages are put back.
                for _ in 0..=LIVE_EVENT_QUEUE {
                    match self.tx.try_send(event) {
                        Ok(()) => return,
                        Err(TrySendError::Disconnected(_)) => return,
                        Err(TrySendError::Full(e)) => {
                            event = e;
                            match self.rx.try_recv() {
                                Ok(PipelineEvent::Frame(_)) | Err(_) => {}
                                Ok(message) => {
                                    let _ = self.tx.try_send(message);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// What one frame asks of the labeler.
struct LabelRequest<'a> {
    mask: Mask<'a>,
    want: Want,
    /// Grey-weighted centroids too (sub-pixel mode).
    weights: Option<GreyWeights<'a>>,
    /// Frame index, for messages.
    frame: u64,
}

/// The engine's labeler, with the CPU fallback of `--backend auto`: when the GPU fails on a
/// frame (a CUDA error, out of GPU memory, a failed launch) and the user chose neither the
/// backend nor the algorithm, the CPU labels that frame again, and every later one; the user is
/// told once, with the GPU's error. No frame is lost to it.
#[derive(Default)]
struct EngineLabeler {
    labeler: Option<Box<dyn Labeler>>,
    /// Why the GPU was given up, once it was.
    gpu_failed: Option<String>,
}

/// The GPU may be given up for the CPU only where the user chose neither backend nor algorithm.
fn may_fall_back(settings: &PipelineSettings) -> bool {
    settings.backend == BackendChoice::Auto && settings.algorithm.is_none()
}

impl EngineLabeler {
    /// Labels one frame; returns the labeling, the sub-pixel centroids (when asked) and the
    /// algorithm that did it. `notify` gets the one-line messages for the user.
    fn label(
        &mut self,
        settings: &PipelineSettings,
        backends: &Backends,
        request: &LabelRequest<'_>,
        notify: &mut dyn FnMut(String),
    ) -> std::result::Result<(Labeling, Option<Vec<SubpixelCentroid>>, ResolvedAlgorithm), String>
    {
        let resolved = self.resolve(settings, backends)?;
        if let Some(notice) = &resolved.notice {
            notify(notice.clone());
        }
        match self.run(resolved.name, settings.connectivity, backends, request) {
            Ok((labeling, centroids)) => Ok((labeling, centroids, resolved)),
            Err(e)
                if may_fall_back(settings) && self.gpu_failed.is_none() && e.is_gpu_failure() =>
            {
                let why = format!("{} failed on frame {}: {e}", resolved.name, request.frame);
                self.gpu_failed = Some(why.clone());
                self.labeler = None;
                notify(format!("CPU backend from now on: {why}"));
                let cpu = self.resolve(settings, backends)?;
                match self.run(cpu.name, settings.connectivity, backends, request) {
                    Ok((labeling, centroids)) => Ok((labeling, centroids, cpu)),
                    Err(e) => Err(format!("{} on frame {}: {e}", cpu.name, request.frame)),
                }
            }
            Err(e) => Err(format!("{} on frame {}: {e}", resolved.name, request.frame)),
        }
    }

    /// The settings' algorithm, or the CPU's default once the GPU was given up (`auto` only).
    fn resolve(
        &self,
        settings: &PipelineSettings,
        backends: &Backends,
    ) -> std::result::Result<ResolvedAlgorithm, String> {
        if self.gpu_failed.is_some() && may_fall_back(settings) {
            return Ok(ResolvedAlgorithm {
                name: backends.default_algorithm(Backend::Cpu, settings.connectivity),
                backend: Backend::Cpu,
                notice: None,
            });
        }
        resolve_algorithm(settings, backends).map_err(|e| e.to_string())
    }

    /// Runs algorithm `name` on the request, creating the labeler when it changes.
    fn run(
        &mut self,
        name: &'static str,
        connectivity: Connectivity,
        backends: &Backends,
        request: &LabelRequest<'_>,
    ) -> Result<(Labeling, Option<Vec<SubpixelCentroid>>)> {
        let labeler = match &mut self.labeler {
            Some(l) if l.name() == name => l,
            slot => slot.insert(backends.create(name, connectivity)?),
        };
        match &request.weights {
            Some(weights) => {
                let (labeling, centroids) =
                    labeler.label_weighted(request.mask, connectivity, request.want, weights)?;
                Ok((labeling, Some(centroids)))
            }
            None => {
                let labeling = match request.mask {
                    Mask::Packed(p) => labeler.label_packed(p, connectivity, request.want),
                    Mask::Bytes(b) => labeler.label(b, connectivity, request.want),
                }?;
                Ok((labeling, None))
            }
        }
    }
}

/// The labeler in use and what has been said about it.
struct Engine {
    labeler: EngineLabeler,
    /// Follows the filtered components from frame to frame; a new source restarts the frame
    /// index, which ends every track.
    tracker: Tracker,
    notices: HashSet<String>,
    last_error: Option<String>,
}

fn worker_loop(shared: &Shared, sink: &EventSink) {
    let mut engine = Engine {
        labeler: EngineLabeler::default(),
        tracker: Tracker::default(),
        notices: HashSet::new(),
        last_error: None,
    };
    while let Some(item) = shared.queue.pop() {
        match item {
            Item::Event(event) => sink.send(event),
            Item::Frame(captured) => {
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    engine.process(*captured, shared, sink)
                }))
                .unwrap_or_else(|_| {
                    engine.labeler.labeler = None;
                    Err("the labeler crashed on this frame; it will be recreated".to_string())
                });
                match outcome {
                    Ok(result) => {
                        engine.last_error = None;
                        shared.processed.fetch_add(1, Ordering::Relaxed);
                        sink.send(PipelineEvent::Frame(Arc::new(result)));
                    }
                    // The same failure on every frame is said once.
                    Err(why) if engine.last_error.as_deref() == Some(&why) => {}
                    Err(why) => {
                        engine.last_error = Some(why.clone());
                        sink.send(PipelineEvent::EngineError(why));
                    }
                }
            }
        }
    }
}

impl Engine {
    /// Labels, analyzes and filters one frame.
    fn process(
        &mut self,
        captured: Captured,
        shared: &Shared,
        sink: &EventSink,
    ) -> std::result::Result<FrameResult, String> {
        let Captured {
            frame,
            settings,
            binary,
            packed,
            levels,
            mut steps,
        } = captured;
        let want = if settings.want_labels {
            Want::Both
        } else {
            Want::Stats
        };
        let mask = match (&packed, &binary) {
            (Some(p), _) => Mask::Packed(p),
            (None, Some(b)) => Mask::Bytes(b),
            (None, None) => {
                return Err("internal: a frame reached the worker without a mask".into())
            }
        };
        let weights = levels.as_ref().map(|levels| GreyWeights {
            grey: &frame.grey,
            levels,
            invert: settings.invert,
        });
        let request = LabelRequest {
            mask,
            want,
            weights,
            frame: frame.index,
        };
        let mut notify = |notice: String| {
            if self.notices.insert(notice.clone()) {
                sink.send(PipelineEvent::Notice(notice));
            }
        };
        let (labeling, subpixel, resolved) =
            self.labeler
                .label(&settings, &shared.backends, &request, &mut notify)?;
        let connectivity = settings.connectivity;
        steps.extend(labeling.timings);
        let all = labeling
            .stats
            .ok_or_else(|| format!("algorithm '{}' returned no statistics", resolved.name))?;
        let t = Instant::now();
        let all_count = labeling.count;
        // Filter the statistics rows and their centroids together (same order).
        let (components, subpixel): (Vec<ComponentStats>, Vec<SubpixelCentroid>) = match subpixel {
            Some(centroids) if centroids.len() == all.len() => all
                .into_iter()
                .zip(centroids)
                .filter(|(c, _)| settings.filter.accepts(c))
                .unzip(),
            Some(centroids) => {
                return Err(format!(
                    "{}: {} sub-pixel centroids for {} components",
                    resolved.name,
                    centroids.len(),
                    all.len()
                ))
            }
            None if settings.filter.is_unlimited() => (all, Vec::new()),
            None => (
                all.into_iter()
                    .filter(|c| settings.filter.accepts(c))
                    .collect(),
                Vec::new(),
            ),
        };
        steps.push(StepTime::new("filter", ms(t)));
        let t = Instant::now();
        let detections = Detection::from_rows(&components, &subpixel);
        let track_ids = self.tracker.update(frame.index, &detections);
        // Consumers rebuild summaries from the results (`track::SummaryBuilder`); dropping the
        // ended tracks here keeps a long live run's memory flat.
        drop(self.tracker.take_finished());
        steps.push(StepTime::new("track", ms(t)));
        Ok(FrameResult {
            index: frame.index,
            time_s: frame.time_s,
            name: frame.name,
            grey: frame.grey,
            binary: binary.filter(|_| settings.want_binary).map(Arc::new),
            labels: labeling
                .labels
                .filter(|_| settings.want_labels)
                .map(Arc::new),
            components,
            track_ids,
            subpixel,
            all_count,
            timings: FrameTimings {
                steps,
                latency_ms: ms(frame.captured_at),
            },
            algorithm: resolved.name,
            backend: resolved.backend,
            connectivity,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stands in for a GPU labeler whose device fails (named like the CPU default, which is what
    /// `auto` resolves to on a machine without a GPU, so the engine keeps it for the first frame).
    struct FailingLabeler {
        error: fn() -> Error,
    }

    impl Labeler for FailingLabeler {
        fn name(&self) -> &'static str {
            "lsl"
        }
        fn label(&mut self, _: &BinaryImage, _: Connectivity, _: Want) -> Result<Labeling> {
            Err((self.error)())
        }
    }

    fn out_of_memory() -> Error {
        Error::Cuda {
            step: "allocating device buffers".into(),
            why: "out of memory".into(),
        }
    }

    fn two_blobs() -> BinaryImage {
        BinaryImage::from_fn(16, 8, |x, y| (1..4).contains(&y) && !(4..=10).contains(&x)).unwrap()
    }

    fn label_once(
        engine: &mut EngineLabeler,
        settings: &PipelineSettings,
        image: &BinaryImage,
        frame: u64,
        notices: &mut Vec<String>,
    ) -> std::result::Result<(u32, ResolvedAlgorithm), String> {
        let request = LabelRequest {
            mask: Mask::Bytes(image),
            want: Want::Stats,
            weights: None,
            frame,
        };
        // Only the fallback's notices: `auto` on this GPU-less machine also says "CPU backend: …".
        let (labeling, _, resolved) =
            engine.label(settings, &Backends::cpu_only(), &request, &mut |n| {
                if n.starts_with("CPU backend from now on") {
                    notices.push(n)
                }
            })?;
        Ok((labeling.count, resolved))
    }

    #[test]
    fn a_gpu_failure_under_auto_moves_to_the_cpu_without_losing_the_frame() {
        let mut engine = EngineLabeler {
            labeler: Some(Box::new(FailingLabeler {
                error: out_of_memory,
            })),
            gpu_failed: None,
        };
        let settings = PipelineSettings::default();
        let image = two_blobs();
        let mut notices = Vec::new();
        let (count, resolved) =
            label_once(&mut engine, &settings, &image, 7, &mut notices).unwrap();
        assert_eq!(count, 2, "the failed frame is labeled again on the CPU");
        assert_eq!(resolved.backend, Backend::Cpu);
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert!(
            notices[0].starts_with("CPU backend from now on: lsl failed on frame 7: CUDA error")
                && notices[0].contains("out of memory"),
            "{}",
            notices[0]
        );
        // Later frames stay on the CPU, silently.
        let (count, resolved) =
            label_once(&mut engine, &settings, &image, 8, &mut notices).unwrap();
        assert_eq!((count, resolved.backend), (2, Backend::Cpu));
        assert_eq!(notices.len(), 1);
    }

    #[test]
    fn no_fallback_when_the_user_chose_or_the_input_is_at_fault() {
        let image = two_blobs();
        // The algorithm was chosen: its failure is the frame's error.
        let chosen = PipelineSettings {
            algorithm: Some("lsl".into()),
            ..PipelineSettings::default()
        };
        let mut engine = EngineLabeler {
            labeler: Some(Box::new(FailingLabeler {
                error: out_of_memory,
            })),
            gpu_failed: None,
        };
        let mut notices = Vec::new();
        let err = label_once(&mut engine, &chosen, &image, 3, &mut notices).unwrap_err();
        assert!(err.starts_with("lsl on frame 3: CUDA error"), "{err}");
        assert!(notices.is_empty() && engine.gpu_failed.is_none());
        // Not a GPU failure (a bad input): no fallback either.
        let mut engine = EngineLabeler {
            labeler: Some(Box::new(FailingLabeler {
                error: || Error::Invalid("packed mask has an unexpected row pitch".into()),
            })),
            gpu_failed: None,
        };
        let err = label_once(
            &mut engine,
            &PipelineSettings::default(),
            &image,
            4,
            &mut notices,
        )
        .unwrap_err();
        assert!(err.contains("unexpected row pitch"), "{err}");
        assert!(notices.is_empty() && engine.gpu_failed.is_none());
    }

    #[test]
    fn gpu_failures_are_told_apart_from_input_errors() {
        assert!(out_of_memory().is_gpu_failure());
        assert!(Error::CudaUnavailable("no driver".into()).is_gpu_failure());
        assert!(Error::context("frame 3", out_of_memory()).is_gpu_failure());
        assert!(!Error::Invalid("bad".into()).is_gpu_failure());
    }
}
