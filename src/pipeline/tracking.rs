//! The tracking stage: a thread of its own that tracks the worker's frames in order and hands
//! the results to the consumers.
//!
//! With the labeling (and the markers) on the GPU, the worker's thread mostly waits for the
//! device, and the tracker is the frame's longest step on the host: run in the worker, it added
//! to every frame. Here frame k is tracked while the worker labels frame k + 1 and finds its
//! markers, so a frame costs the slower of the two, not their sum. A frame labeled on the CPU
//! without markers is tracked beside the next frame's labeling too, on rayon's pool, where the
//! host has `CPU_BESIDE_MIN_THREADS` threads or more and the frame is not one of the very
//! largest (`cpu_frames_tracked_beside`): each stage's parallel steps leave cores idle between
//! them (their serial parts, the hand-overs) that the other fills. H200 host, `bench --pipeline
//! --backend cpu`, frames/s one after the other → beside: 16 threads clutter 360–366 → 466–500,
//! particles 376–388 → 512–537, 50,000 particles 136–146 → 139–184; 8 threads (`taskset`)
//! clutter 259–279 → 286, particles 327–329 → 382–383; 4 threads clutter 175–189 → 187–203,
//! particles 273–278 → 285–315. On 2 cores the two only competed (31 frames/s one after the
//! other, 20 at the same time): there the worker waits until the frame is tracked. With
//! markers, found on lanes beside the worker (`markers`), the cores are shared by several
//! frames anyway, and the frame is tracked beside them too.
//!
//! A frame labeled on the CPU whose markers were on a lane is tracked on the stage pool of
//! `markers::CpuMarkerPools`, apart from the lanes' detections.
//!
//! A frame labeled on the GPU is tracked by the GPU tracker (`track::gpu`, the same IDs), on a
//! stream of its own, where the settings allow it (`FrameTracker::for_gpu_frames`); H200 host,
//! the clutter scene: 400–502 frames/s with the CPU tracker, 777–795 with the GPU's. With the
//! CPU tracker, it is tracked on a pool of its own (`gpu_frames_pool`), smaller
//! than the host by the threads that drive the GPU (the worker, the marker lanes): they wait
//! for it spinning, and rayon's pool of one thread a core, woken for each of the tracker's
//! phases, took their cores. H200 host of 16 cores, the markers scenes on the GPU, frames/s
//! with the tracker on 16 threads, 13 and 10: 16 markers 1080p 1,103, 1,120–1,148, 1,059; 4K
//! 852, 982–990, 982; 100 markers 1080p 1,058, 1,210–1,239, 1,241; 4K 380, 377–424, 350.

use super::backlog::{event_bytes, result_bytes, Backlog, LOSSLESS_RESULT_BUDGET};
use super::handover::{self, Herald, Heralded};
use super::markers::made_cpu_marker_pools;
use super::{
    ms, Delivery, EventPolicy, FrameResult, PipelineEvent, Shared, StepTime, LIVE_EVENT_QUEUE,
    STOP_POLL,
};
use crate::ccl::stats::ComponentStats;
use crate::ccl::subpixel::SubpixelCentroid;
use crate::ccl::DeviceDetections;
use crate::geometry::WorldMapping;
use crate::track::{Detection, Tracker, TrackerConfig};
use crossbeam_channel::{Receiver, Sender, TrySendError};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;

/// The tracking stage → consumers.
pub(super) struct EventSink {
    pub(super) tx: Sender<PipelineEvent>,
    /// To drop the oldest result when a live consumer is behind.
    pub(super) rx: Receiver<PipelineEvent>,
    pub(super) policy: EventPolicy,
    pub(super) shared: Arc<Shared>,
    /// What the lossless queue's results hold (only the worker sends).
    pub(super) backlog: std::sync::Mutex<Backlog>,
}

impl EventSink {
    pub(super) fn send(&self, event: PipelineEvent) {
        match self.policy {
            EventPolicy::Lossless => {
                let mut backlog = self.backlog.lock().unwrap_or_else(|e| e.into_inner());
                backlog.make_room(
                    event_bytes(&event),
                    || self.tx.len(),
                    || self.shared.stopping(),
                );
                let mut event = event;
                loop {
                    if self.shared.stopping() {
                        // No consumer waits for it: it goes where there is room, else nowhere
                        // (no wait for room that will not come).
                        if self.tx.try_send(event).is_err() {
                            backlog.unsent();
                        }
                        return;
                    }
                    match self.tx.send_timeout(event, STOP_POLL) {
                        Ok(()) => return,
                        Err(crossbeam_channel::SendTimeoutError::Timeout(e)) => event = e,
                        Err(crossbeam_channel::SendTimeoutError::Disconnected(_)) => {
                            backlog.unsent();
                            return;
                        }
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
                                Ok(PipelineEvent::Frame(_)) => {
                                    self.shared.dropped_results.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(_) => {}
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

/// Threads of rayon's pool from which a frame labeled on the CPU is tracked beside the next
/// frame's labeling (see the module's notes).
const CPU_BESIDE_MIN_THREADS: usize = 4;

/// Whether a frame labeled on the CPU (its markers, if any, not on a lane) whose result holds
/// `bytes` is tracked while the worker labels the next one: on hosts of
/// `CPU_BESIDE_MIN_THREADS` threads or more, and for results of up to a quarter of the
/// lossless budget. A larger frame (a 1000×1000 checkerboard's 500,000 components, over 30
/// MB) is tracked first: the tracker's state for it and the next frame's labeling at once took
/// the peak memory of `analyze` to a blocked writer from 745 to 873 MB; the clutter scene's
/// dense frame (98,871 components, 13 MB) stays beside.
pub(super) fn cpu_frames_tracked_beside(bytes: u64) -> bool {
    super::markers::pipeline_threads() >= CPU_BESIDE_MIN_THREADS
        && bytes <= LOSSLESS_RESULT_BUDGET / 4
}

/// Frames the worker may be ahead of the tracker on the live path (a camera's frames, which
/// are dropped when the worker is behind): one being tracked, one waiting. More would only add
/// latency to the newest frame.
const LIVE_STAGE_QUEUE: usize = 1;

/// Frames the worker may be ahead of the tracker when every frame and every result is delivered
/// (`analyze` of files, `bench`), while their results hold at most `LOSSLESS_RESULT_BUDGET`
/// bytes. A dense frame is
/// slow in both stages: with one frame waiting, the worker stood still while the tracker took
/// it, and the tracker while the worker made it, so its two costs added up. With room for the
/// light frames around it, each stage keeps working. H200 hosts, the clutter scene on the GPU
/// (a frame of 98,871 components among ten light ones), frames/s with 1, 4 and 16 frames:
/// 736–871, 943–944, 1,271–1,298; on another, 1, 16 and 32: 727–800, 1,069–1,104, 1,117–1,128.
/// The markers scene, whose frames are alike, is unchanged (1,240–1,431 at every depth).
const LOSSLESS_STAGE_QUEUE: usize = 16;

/// A frame labeled, filtered and searched for markers, but not tracked yet.
pub(super) struct Untracked {
    /// The result with empty `track_ids`, `ended_tracks` and `world`, and the latency not set.
    pub(super) result: FrameResult,
    /// Maps the tracked positions to the world (`FrameResult::world`).
    pub(super) world: Option<Arc<WorldMapping>>,
    /// When the frame was captured: its latency is measured once it is tracked.
    pub(super) captured_at: Instant,
    /// The frame's markers were found on a lane (`markers`): a frame labeled on the CPU is then
    /// tracked on the stage pool, apart from the lanes' detections.
    pub(super) markers_on_lane: bool,
    /// The labeler's detections of the frame on the device, for a GPU tracker
    /// (`Labeling::device_detections`); read where their rows match the result's components.
    pub(super) device_detections: Option<Arc<DeviceDetections>>,
}

/// Worker → tracking stage, in the order of the frames.
enum Staged {
    /// A frame to track; `wait`: the worker waits until it is sent on.
    Frame(Box<Untracked>, bool),
    /// A message that keeps its place among the frames (a notice, an error, the end).
    Event(PipelineEvent),
}

/// Tracking stages running in this process, one a pipeline. While several run (a run of
/// several sources, the window's grid), each tracker keeps to its own thread: in rayon's one
/// pool their phases waited on each other's jobs (eight 1080p videos analysed together: 6.5
/// ms a frame to track 1,047 components, on a 16-core host).
static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// Does no other tracking stage run (one pipeline in the process)? Its tracker may then hand
/// its phases to rayon's pool, and its threads poll for frames labeled on the GPU (`handover`).
pub(super) fn single_stage() -> bool {
    RUNNING.load(Ordering::Relaxed) <= 1
}

/// Threads of a pipeline that wait for the GPU spinning, and keep a core each while a GPU
/// frame is tracked: the worker and the marker lanes.
const GPU_THREADS: usize = 1 + super::markers::MARKER_LANES;

/// The pool that tracks the frames labeled on the GPU: the host's threads less `GPU_THREADS`;
/// None (rayon's pool) where fewer than two would be left.
fn gpu_frames_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let threads = super::markers::pipeline_threads().saturating_sub(GPU_THREADS);
        if threads < 2 {
            return None;
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|k| format!("markerscope-track-{k}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// The worker's end of the tracking stage.
pub(super) struct TrackStage {
    tx: Option<Sender<Staged>>,
    /// The bytes of the frames waiting (a lossless stage's queue holds up to
    /// `LOSSLESS_STAGE_QUEUE` frames within a budget); None on the live path.
    backlog: Option<std::sync::Mutex<Backlog>>,
    shared: Arc<Shared>,
    /// A frame sent with `wait` is acknowledged here once the consumers have it.
    tracked: Receiver<()>,
    thread: Option<JoinHandle<()>>,
    /// The stage tracks on the GPU (set by its thread once it has chosen its tracker).
    on_gpu: Arc<AtomicBool>,
    /// Tells the stage's thread that a frame is being labeled on the GPU (`handover`).
    herald: Herald,
}

impl TrackStage {
    /// Starts the stage's thread, which sends on to `sink`.
    pub(super) fn start(
        sink: EventSink,
        shared: Arc<Shared>,
        config: TrackerConfig,
    ) -> std::io::Result<TrackStage> {
        // A live source (`analyze camera:0` delivers every result too) keeps one frame
        // waiting: its newest frame comes first.
        let (depth, backlog) = match (shared.delivery, sink.policy) {
            (Delivery::Lossless, EventPolicy::Lossless) => (
                LOSSLESS_STAGE_QUEUE,
                Some(std::sync::Mutex::new(Backlog::new(LOSSLESS_RESULT_BUDGET))),
            ),
            _ => (LIVE_STAGE_QUEUE, None),
        };
        let (tx, rx) = crossbeam_channel::bounded(depth);
        let (ack, tracked) = crossbeam_channel::bounded(1);
        let (herald, heralded) = handover::herald();
        let stage_shared = shared.clone();
        let on_gpu = Arc::new(AtomicBool::new(false));
        let stage_on_gpu = on_gpu.clone();
        let thread = std::thread::Builder::new()
            .name("markerscope-track".into())
            .spawn(move || {
                let input = (&rx, &heralded);
                track_loop(input, &sink, (&stage_shared, &stage_on_gpu), config, &ack)
            })?;
        RUNNING.fetch_add(1, Ordering::Relaxed);
        Ok(TrackStage {
            tx: Some(tx),
            backlog,
            shared,
            tracked,
            thread: Some(thread),
            on_gpu,
            herald,
        })
    }

    /// A frame is being labeled on the GPU: the stage's thread keeps its core until it comes.
    pub(super) fn expect_frame(&self) {
        self.herald.announce();
    }

    /// Whether the stage tracks on the GPU: the labeler may then leave the frames' detections
    /// on the device for it (`Labeler::keep_detections_on_device`).
    pub(super) fn tracks_on_gpu(&self) -> bool {
        self.on_gpu.load(Ordering::Relaxed)
    }

    /// Whether `n` frames (or messages) handed over now would not wait for room in the
    /// stage's queue.
    pub(super) fn has_room_for(&self, n: usize) -> bool {
        self.tx
            .as_ref()
            .is_some_and(|tx| tx.capacity().is_none_or(|c| tx.len() + n <= c))
    }

    /// Sends a message on after the frames before it.
    pub(super) fn send(&self, event: PipelineEvent) {
        self.put(Staged::Event(event), 0);
    }

    /// Hands a frame to the tracker. With `wait` this returns once the frame is tracked and
    /// sent on; otherwise at once (unless the stage's queue is full).
    pub(super) fn track(&self, frame: Untracked, wait: bool) {
        let bytes = result_bytes(&frame.result);
        if self.put(Staged::Frame(Box::new(frame), wait), bytes) && wait {
            let _ = self.tracked.recv();
        }
    }

    /// Queues `staged` (holding `bytes`) once the budget has room for it; false if the stage
    /// has ended.
    fn put(&self, staged: Staged, bytes: u64) -> bool {
        let Some(tx) = &self.tx else { return false };
        let Some(backlog) = &self.backlog else {
            return tx.send(staged).is_ok();
        };
        let mut backlog = backlog.lock().unwrap_or_else(|e| e.into_inner());
        backlog.make_room(bytes, || tx.len(), || self.shared.stopping());
        let sent = tx.send(staged).is_ok();
        if !sent {
            backlog.unsent();
        }
        sent
    }
}

impl Drop for TrackStage {
    /// Every frame handed over is tracked and sent on (unless stopping) before the worker ends.
    fn drop(&mut self) {
        self.tx = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        RUNNING.fetch_sub(1, Ordering::Relaxed);
    }
}

fn track_loop(
    (rx, heralded): (&Receiver<Staged>, &Heralded),
    sink: &EventSink,
    (shared, on_gpu): (&Shared, &AtomicBool),
    config: TrackerConfig,
    ack: &Sender<()>,
) {
    let mut tracker = FrameTracker::cpu(config);
    let mut first = true;
    while let Some(staged) = heralded.next(rx) {
        match staged {
            Staged::Event(event) => sink.send(event),
            // Stopping, the frames still queued are not tracked: no one reads their results,
            // and tracking each (a dense frame's milliseconds) held up the stop, one
            // pipeline after the other in a run of several sources.
            Staged::Frame(_, wait) if shared.stopping() => {
                if wait {
                    let _ = ack.send(());
                }
            }
            Staged::Frame(frame, wait) => {
                if std::mem::take(&mut first) && frame.result.backend == crate::ccl::Backend::Cuda {
                    tracker = FrameTracker::for_gpu_frames(shared, config);
                }
                // Inside the pool: the tracker's parallel phases then start from a pool thread,
                // not each as a job injected from outside (tens of µs each). A frame whose
                // tracking has no parallel phase stays on this thread: handing it to a pool
                // thread and back cost a light frame two wake-ups (`handover`).
                let on_pool =
                    single_stage() && tracker.would_use_pool(frame.result.components.len());
                tracker.set_on_pool(on_pool);
                let own_pool = match frame.result.backend {
                    crate::ccl::Backend::Cuda => gpu_frames_pool(),
                    // Labeled on the CPU, its markers on a lane: the stage pool
                    // (`markers::cpu_marker_pools`) is the tracker's.
                    _ if frame.markers_on_lane => made_cpu_marker_pools().map(|p| &p.stages),
                    _ => None,
                };
                let tracked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    match (on_pool, own_pool) {
                        (true, Some(pool)) => pool.install(|| track_frame(&mut tracker, *frame)),
                        (true, None) => rayon::scope(|_| track_frame(&mut tracker, *frame)),
                        (false, _) => track_frame(&mut tracker, *frame),
                    }
                }));
                on_gpu.store(tracker.is_gpu(), Ordering::Relaxed);
                match tracked {
                    Ok(result) => {
                        if let Some(why) = tracker.take_fallback() {
                            sink.send(PipelineEvent::EngineError(why));
                        }
                        shared.processed.fetch_add(1, Ordering::Relaxed);
                        sink.send(PipelineEvent::Frame(Arc::new(result)));
                    }
                    Err(_) => {
                        tracker = tracker.take_over(config);
                        sink.send(PipelineEvent::EngineError(
                            "the tracker crashed on this frame; its tracks start again".into(),
                        ));
                    }
                }
                if wait {
                    let _ = ack.send(());
                }
            }
        }
    }
}

/// The stage's tracker: the CPU's, or for frames labeled on the GPU the GPU's (the same IDs;
/// `MARKERSCOPE_GPU_TRACKER=0` keeps the CPU's) from the first frame that is heavy enough for
/// it (`GPU_TRACKER_FROM`).
struct FrameTracker {
    on: Tracking,
    /// The GPU tracker, waiting for a heavy frame: it then takes over the CPU tracker's tracks.
    #[cfg(feature = "cuda")]
    gpu_later: Option<crate::track::gpu::GpuTracker>,
    /// Why the GPU tracker gave way to the CPU's, until the stage says so.
    fallback: Option<String>,
    /// Tracks of a tracker that gave way, ended with this frame.
    ended_before: Vec<u64>,
}

/// Detections of a frame, or tracks running, from which frames labeled on the GPU are tracked
/// by the GPU tracker rather than the CPU's. Below, the CPU tracker takes microseconds and
/// the GPU's a fixed ~0.1 ms a frame (its 18 kernels and the wait for them), more at full rate
/// beside the labeling's: H200 host, the demo scene (15 markers, 1080p) 1,737–2,309 frames/s
/// with the GPU tracker, 4,573–4,636 with the CPU's. From a few thousand on the GPU's wins
/// (markers, 1,766 components among ~4,000 tracks: 0.61 → 0.34 ms a frame).
#[cfg(feature = "cuda")]
const GPU_TRACKER_FROM: usize = 1024;

enum Tracking {
    Cpu(Tracker),
    #[cfg(feature = "cuda")]
    Gpu(crate::track::gpu::GpuTracker),
}

impl FrameTracker {
    fn cpu(config: TrackerConfig) -> FrameTracker {
        FrameTracker {
            on: Tracking::Cpu(Tracker::new(config).unwrap_or_default()),
            #[cfg(feature = "cuda")]
            gpu_later: None,
            fallback: None,
            ended_before: Vec::new(),
        }
    }

    /// The ID the tracker's next new track takes: above every ID it gave.
    fn next_id(&self) -> u64 {
        match &self.on {
            Tracking::Cpu(t) => t.next_id(),
            #[cfg(feature = "cuda")]
            Tracking::Gpu(gpu) => gpu.next_id(),
        }
    }

    /// A CPU tracker that takes over from `self` (which failed, or panicked): its IDs continue
    /// above every ID given so far.
    fn take_over(&self, config: TrackerConfig) -> FrameTracker {
        let mut cpu = Tracker::new(config).unwrap_or_default();
        cpu.continue_ids_from(self.next_id());
        FrameTracker {
            on: Tracking::Cpu(cpu),
            ..Self::cpu(config)
        }
    }

    /// The CPU's tracker, and the GPU's on a stream of its own for the first heavy frame,
    /// where the settings and the device allow it.
    fn for_gpu_frames(shared: &Shared, config: TrackerConfig) -> FrameTracker {
        #[cfg(feature = "cuda")]
        if let Ok(gpu) = shared.backends.gpu() {
            use crate::track::gpu::GpuTracker;
            if gpu.tuning.gpu_tracker && GpuTracker::supports(&config).is_ok() {
                let made =
                    (gpu.with_own_stream()).and_then(|own| GpuTracker::new(Arc::new(own), config));
                match made {
                    Ok(tracker) => {
                        return FrameTracker {
                            gpu_later: Some(tracker),
                            ..Self::cpu(config)
                        }
                    }
                    Err(e) => {
                        let mut cpu = Self::cpu(config);
                        cpu.fallback = Some(format!(
                            "the GPU tracker could not start ({e}); tracking on the CPU"
                        ));
                        return cpu;
                    }
                }
            }
        }
        let _ = shared;
        Self::cpu(config)
    }

    /// Tracks on the GPU (until it gives way).
    fn is_gpu(&self) -> bool {
        match &self.on {
            Tracking::Cpu(_) => false,
            #[cfg(feature = "cuda")]
            Tracking::Gpu(_) => true,
        }
    }

    /// Would tracking a frame of `detections` use rayon's pool?
    fn would_use_pool(&self, detections: usize) -> bool {
        match &self.on {
            Tracking::Cpu(t) => t.would_use_pool(detections),
            #[cfg(feature = "cuda")]
            Tracking::Gpu(gpu) => gpu.would_use_pool(detections),
        }
    }

    fn set_on_pool(&mut self, on: bool) {
        match &mut self.on {
            Tracking::Cpu(t) => t.set_on_pool(on),
            #[cfg(feature = "cuda")]
            Tracking::Gpu(gpu) => gpu.set_on_pool(on),
        }
    }

    /// `Tracker::update` of the detections of a frame's rows (`Detection::from_rows`). A GPU
    /// tracker reads them from `on_device` where it holds them (`GpuTracker::update_from_rows`),
    /// without making them. A GPU tracker that fails gives way to a CPU tracker: its tracks end
    /// (where it can still say which), and the CPU's start again with this frame, with IDs
    /// above the ones given (`take_fallback` says why).
    fn update(
        &mut self,
        frame: u64,
        rows: (&[ComponentStats], &[SubpixelCentroid]),
        on_device: Option<&DeviceDetections>,
    ) -> Vec<u64> {
        let made = || Detection::from_rows(rows.0, rows.1);
        #[cfg(not(feature = "cuda"))]
        let _ = on_device;
        #[cfg(feature = "cuda")]
        self.take_gpu_if_heavy(rows.0.len());
        match &mut self.on {
            Tracking::Cpu(t) => t.update(frame, &made()),
            #[cfg(feature = "cuda")]
            Tracking::Gpu(gpu) => {
                let tracked = match on_device {
                    Some(d) => gpu.update_from_rows(frame, rows, d),
                    None => gpu.update(frame, &made()),
                };
                match tracked {
                    Ok(ids) => ids,
                    Err(e) => {
                        self.fallback = Some(format!(
                            "the GPU tracker failed ({e}); tracking goes on on the CPU, its \
                             tracks start again"
                        ));
                        if gpu.end_all().is_ok() {
                            self.ended_before.extend(gpu.drain_ended());
                        }
                        let mut cpu = Tracker::new(*gpu.config()).unwrap_or_default();
                        cpu.continue_ids_from(gpu.next_id());
                        let ids = cpu.update(frame, &made());
                        self.on = Tracking::Cpu(cpu);
                        ids
                    }
                }
            }
        }
    }

    /// Hands the CPU tracker's tracks to the waiting GPU tracker when this frame's
    /// `detections` or the tracks running reach `GPU_TRACKER_FROM`; where it cannot take
    /// them, the CPU's keeps tracking (and the stage says why).
    #[cfg(feature = "cuda")]
    fn take_gpu_if_heavy(&mut self, detections: usize) {
        let Tracking::Cpu(cpu) = &mut self.on else {
            return;
        };
        if self.gpu_later.is_none() || detections.max(cpu.active().len()) < GPU_TRACKER_FROM {
            return;
        }
        let mut gpu = self.gpu_later.take().expect("checked above");
        self.ended_before.extend(cpu.drain_finished().map(|s| s.id));
        match gpu.adopt(cpu) {
            Ok(()) => self.on = Tracking::Gpu(gpu),
            Err(e) => {
                self.fallback = Some(format!(
                    "the GPU tracker could not take the tracks over ({e}); tracking goes on on \
                     the CPU"
                ))
            }
        }
    }

    /// The IDs of the tracks that ended since the last call.
    fn ended(&mut self) -> Vec<u64> {
        let mut ended = std::mem::take(&mut self.ended_before);
        match &mut self.on {
            Tracking::Cpu(t) => ended.extend(t.drain_finished().map(|s| s.id)),
            #[cfg(feature = "cuda")]
            Tracking::Gpu(gpu) => ended.extend(gpu.drain_ended()),
        }
        ended
    }

    /// Why the GPU tracker gave way to the CPU's, once.
    fn take_fallback(&mut self) -> Option<String> {
        self.fallback.take()
    }
}

/// Tracks one frame: its track IDs, the tracks that ended, its world positions, its latency.
fn track_frame(tracker: &mut FrameTracker, frame: Untracked) -> FrameResult {
    let Untracked {
        mut result,
        world,
        captured_at,
        device_detections,
        ..
    } = frame;
    let t = Instant::now();
    // Rows made with the sub-pixel centroids (the tracker checks there is one per detection:
    // none was dropped after).
    let on_device = device_detections
        .as_deref()
        .filter(|_| result.subpixel.len() == result.components.len());
    let rows = (&result.components[..], &result.subpixel[..]);
    result.track_ids = tracker.update(result.index, rows, on_device);
    // The device rows go as soon as they are read.
    drop(device_detections);
    // Consumers rebuild summaries from the results (`track::SummaryBuilder`): the ended tracks
    // are only named to them, and the tracker forgets them, so a long live run's memory stays
    // flat.
    result.ended_tracks = tracker.ended();
    // The track step goes before the markers' (the steps' order).
    let steps = &mut result.timings.steps;
    let at = steps
        .iter()
        .position(|s| s.step == "markers")
        .unwrap_or(steps.len());
    steps.insert(at, StepTime::new("track", ms(t)));
    if let Some(mapping) = &world {
        result.world = Detection::each_of_rows(&result.components, &result.subpixel)
            .map(|d| mapping.to_world(d.x, d.y))
            .collect();
    }
    result.timings.latency_ms = ms(captured_at);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ccl::stats::ComponentStats;
    use crate::ccl::{Backend, Backends, Connectivity};
    use crate::frame::image::GrayImage;
    use crate::pipeline::backlog::{Backlog, LOSSLESS_RESULT_BUDGET};
    use crate::pipeline::{Delivery, EventPolicy, FrameTimings, PipelineSettings};
    use std::sync::Mutex;
    use std::time::Duration;

    /// Frame `k` of dots that glide, some of them gone in some frames.
    fn components(k: u64) -> Vec<ComponentStats> {
        (0..40u64)
            .filter(|i| (i + k) % 7 != 0)
            .map(|i| {
                let (x, y) = (
                    10.0 + 20.0 * i as f64 + 1.5 * k as f64,
                    30.0 + (i % 5) as f64,
                );
                ComponentStats {
                    label: i as u32 + 1,
                    left: x as u32 - 2,
                    top: y as u32 - 2,
                    width: 5,
                    height: 5,
                    area: 21,
                    sum_x: (x * 21.0) as u64,
                    sum_y: (y * 21.0) as u64,
                    centroid_x: x,
                    centroid_y: y,
                }
            })
            .collect()
    }

    fn untracked(k: u64, grey: &Arc<GrayImage>) -> Untracked {
        let result = FrameResult {
            index: k,
            time_s: k as f64 / 60.0,
            name: String::new(),
            grey: grey.clone().into(),
            binary: None,
            labels: None,
            components: components(k),
            track_ids: Vec::new(),
            ended_tracks: Vec::new(),
            subpixel: Vec::new(),
            shapes: Vec::new(),
            world: Vec::new(),
            markers: Vec::new(),
            all_count: 40,
            timings: FrameTimings {
                steps: vec![StepTime::new("markers", 0.5)],
                latency_ms: 0.0,
            },
            algorithm: "test",
            backend: Backend::Cuda,
            connectivity: Connectivity::Eight,
        };
        Untracked {
            result,
            world: None,
            captured_at: Instant::now(),
            markers_on_lane: false,
            device_detections: None,
        }
    }

    /// A lossless sink of a pipeline's shared state, and the consumers' end of its queue.
    fn lossless_sink() -> (EventSink, Receiver<PipelineEvent>) {
        let shared = Arc::new(Shared::new(
            PipelineSettings::default(),
            Arc::new(Backends::cpu_only()),
            Delivery::Lossless,
            None,
        ));
        let (tx, rx) = crossbeam_channel::unbounded();
        let sink = EventSink {
            tx,
            rx: rx.clone(),
            policy: EventPolicy::Lossless,
            shared,
            backlog: Mutex::new(Backlog::new(LOSSLESS_RESULT_BUDGET)),
        };
        (sink, rx)
    }

    /// Delivering every result, the worker may hand `LOSSLESS_STAGE_QUEUE` frames ahead of a
    /// tracker that is held up (here by a consumer that takes nothing), so a dense frame does
    /// not stop it; stopping lets both go, and the frames still queued then are not tracked
    /// (each waited for room in the consumers' queue before: 50 ms a frame, 0.8 s a pipeline).
    #[test]
    fn a_lossless_stage_takes_its_queue_of_frames_ahead_of_a_busy_tracker() {
        let (mut sink, _) = lossless_sink();
        let (tx, rx) = crossbeam_channel::bounded(1);
        (sink.tx, sink.rx) = (tx, rx.clone());
        let shared = sink.shared.clone();
        let grey = Arc::new(GrayImage::filled(8, 8, 0).unwrap());
        let stage = TrackStage::start(sink, shared.clone(), TrackerConfig::pipeline()).unwrap();
        // One result in the consumers' queue, one the tracker is trying to send, the stage's
        // queue full.
        let frames = 2 + LOSSLESS_STAGE_QUEUE as u64;
        let (done, handed) = crossbeam_channel::bounded(1);
        let worker = std::thread::spawn(move || {
            for k in 0..frames {
                stage.track(untracked(k, &grey), false);
            }
            let _ = done.send(());
            stage
        });
        assert!(
            handed.recv_timeout(Duration::from_secs(30)).is_ok(),
            "the worker waited with {frames} frames handed over"
        );
        shared.stop.store(true, Ordering::Relaxed);
        drop(worker.join().unwrap());
        assert_eq!(rx.len(), 1);
        // The frame in the consumers' queue and the one the tracker held when the stop came.
        assert_eq!(shared.processed.load(Ordering::Relaxed), 2);
    }

    /// Frames handed over at once (tracked while the next is worked on) or waited for come out
    /// in order, between the messages sent around them, with the IDs of the tracker run inline.
    #[test]
    fn frames_come_out_in_order_with_the_ids_of_the_tracker_run_inline() {
        let (sink, rx) = lossless_sink();
        let shared = sink.shared.clone();
        let config = TrackerConfig::pipeline();
        let grey = Arc::new(GrayImage::filled(8, 8, 0).unwrap());
        let stage = TrackStage::start(sink, shared.clone(), config).unwrap();
        for k in 0..30 {
            if k % 10 == 5 {
                stage.send(PipelineEvent::Notice(format!("before {k}")));
            }
            stage.track(untracked(k, &grey), k % 3 == 0);
        }
        drop(stage);
        let mut inline = Tracker::new(config).unwrap();
        let mut next = 0;
        for event in rx.try_iter() {
            match event {
                PipelineEvent::Notice(said) => assert_eq!(said, format!("before {next}")),
                PipelineEvent::Frame(result) => {
                    assert_eq!(result.index, next);
                    let detections = Detection::from_rows(&components(next), &[]);
                    assert_eq!(result.track_ids, inline.update(next, &detections));
                    let ended: Vec<u64> = inline.drain_finished().map(|s| s.id).collect();
                    assert_eq!(result.ended_tracks, ended);
                    let steps: Vec<&str> = result
                        .timings
                        .steps
                        .iter()
                        .map(|s| s.step.as_str())
                        .collect();
                    assert_eq!(steps, ["track", "markers"]);
                    assert!(result.timings.latency_ms > 0.0);
                    next += 1;
                }
                _ => panic!("an event that was not sent"),
            }
        }
        assert_eq!(next, 30, "every frame handed over comes out");
        assert_eq!(shared.processed.load(Ordering::Relaxed), 30);
    }

    /// A tracker that takes over from one that panicked gives IDs above every ID given before,
    /// so the IDs of one run stay unique (the consumers' summaries are keyed by them).
    #[test]
    fn a_tracker_that_takes_over_continues_the_ids() {
        let config = TrackerConfig::pipeline();
        let mut first = FrameTracker::cpu(config);
        let mut given = Vec::new();
        for k in 0..5 {
            given.extend(first.update(k, (&components(k), &[]), None));
        }
        let highest = *given.iter().max().unwrap();
        assert!(highest >= 40, "the first tracker gave {highest} IDs");
        let mut next = first.take_over(config);
        let ids = next.update(5, (&components(5), &[]), None);
        assert!(!ids.is_empty());
        assert!(
            ids.iter().all(|&id| id > highest),
            "{ids:?} after {highest}"
        );
        let mut plain = Tracker::new(config).unwrap();
        plain.continue_ids_from(7);
        assert_eq!(plain.update(0, &[Detection::point(1.0, 1.0, 4.0)]), [7]);
        plain.continue_ids_from(3);
        assert_eq!(plain.update(1, &[Detection::point(90.0, 1.0, 4.0)]), [8]);
    }

    /// While two stages run, neither tracker hands its phases to the pool (other tests' stages
    /// can only add to the count).
    #[test]
    fn trackers_keep_to_their_threads_while_several_stages_run() {
        let stage = || {
            let (sink, _) = lossless_sink();
            let shared = sink.shared.clone();
            TrackStage::start(sink, shared, TrackerConfig::pipeline()).unwrap()
        };
        let (a, b) = (stage(), stage());
        assert!(RUNNING.load(Ordering::Relaxed) >= 2);
        assert!(!single_stage());
        drop((a, b));
    }
}
