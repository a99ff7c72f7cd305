//! `bench --pipeline`: the whole frame path, end to end, through the live `Pipeline` that the
//! window and `analyze` use.
//!
//! Per scene and size, the frames are made first: `prepared` frames rendered (demo, clutter) or
//! decoded (video) one after the other by the scene's own `FrameSource`, each timed (the
//! "source" column: what the source itself costs per frame, apart from the pipeline). Then, per
//! (connectivity, algorithm), one pipeline with lossless delivery is fed from a source that
//! hands out those frames in memory, cycling over them, and runs:
//! 1. `warmup` untimed frames (labeler creation, kernel compilation, first allocations);
//! 2. the **rate pass**, `frames` frames as fast as the pipeline takes them (capture thread and
//!    engine worker both busy, as when a file is analysed): frames/s = `frames` / the time from
//!    the last warm-up result to the last result of the pass; the component counts;
//! 3. the **latency pass**, `frames` more frames one at a time (the next one is handed out when
//!    the previous result has arrived, as a camera slower than the pipeline does): latency =
//!    `FrameTimings::latency_ms`, from the frame leaving the source (ready) to its result with
//!    tracks, without queueing; p50/p90/p99/max, and the mean of each step.
//!
//! Frame indices run on over the passes, so the tracker follows the markers throughout.
//!
//! The `markers` scenes also find the square fiducials in every frame (`--markers`, the
//! scene's dictionary), and the rate pass's markers are scored against the rendered truth
//! (`fiducial::score`): detection rate, false IDs, corner RMS.
//!
//! The `particles` scenes track Brownian particles with trackpy's linking rule (search around
//! the last position within the scene's search range, no memory: `TrackerConfig::linking`),
//! and the rate pass's tracks are scored against the particles' truth (`track::score`: MOTA,
//! ID switches). The fed frames cycle over the prepared ones, where every particle jumps back
//! to where it started: the score starts afresh at each such wrap.
//!
//! With `--out FORMAT[:PATH]`, every result's rows are also written as `analyze` writes them
//! (`crate::output::writer`), during both passes: the rate pass then includes the writer, and
//! the output's `format` and `write` stages join the steps.

use super::plan::{PipelinePlan, PipelineScene, RowsOut};
use super::progress::Progress;
use super::report::{
    mean_steps, AlikeFrames, LoadClock, Percentiles, PipelineResult, SlowestFrames, StepMs,
};
use super::spec::Scene;
use crate::ccl::{AlgorithmInfo, Backends, Connectivity};
use crate::error::{Error, Result};
use crate::fiducial::score::{IdCorners, MarkerScore};
use crate::fiducial::{Dictionary, MarkerSettings};
use crate::frame::image::GrayImage;
use crate::frame::page_lock::PageLocker;
use crate::output::columns::Columns;
use crate::output::row_text::FrameRows;
use crate::output::writer::{BatchOptions, OutputTimes, RowWriter};
use crate::pipeline::{Delivery, FrameResult, Pipeline, PipelineEvent};
use crate::source::fiducial_scene::FiducialScene;
use crate::source::particle_scene::ParticleScene;
use crate::source::synthetic::DEFAULT_FPS;
use crate::source::{Frame, FrameSource, OpenOptions, SourceSpec, SyntheticKind, SyntheticSpec};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use markerscope::track::score::{MotCounts, MotScorer, TrackPoint, TruthPoint};
use markerscope::track::TrackerConfig;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A pipeline that delivers nothing for this long is reported as stuck.
const STUCK: Duration = Duration::from_secs(300);

/// The frames of one scene at one size, made before timing.
pub struct PreparedFrames {
    pub frames: Vec<Arc<GrayImage>>,
    /// Time the scene's source took to make each frame (render or decode), ms.
    pub source_ms: Vec<f64>,
    /// The source as it describes itself.
    pub description: String,
    pub fps: f64,
    /// The `markers` scenes: the visible markers of each frame (empty for other scenes).
    pub truth: Vec<Vec<IdCorners>>,
    /// The `particles` scenes: every particle of each frame (empty for other scenes).
    pub particles: Vec<Vec<TruthPoint>>,
    /// The `particles` scenes: how far a tracked point may lie from its particle.
    pub match_distance: f64,
}

impl PreparedFrames {
    pub fn mean_source_ms(&self) -> f64 {
        self.source_ms.iter().sum::<f64>() / self.source_ms.len().max(1) as f64
    }

    /// Scores the tracked points of fed frame `index` against the particles there.
    pub fn score_tracks(&self, score: &mut TrackScore, index: u64, tracks: &[TrackPoint]) {
        if self.particles.is_empty() {
            return;
        }
        let k = (index % self.particles.len() as u64) as usize;
        if k == 0 || score.scorer.is_none() {
            score.restart(self.match_distance);
        }
        if let Some(scorer) = &mut score.scorer {
            scorer.add_frame(&self.particles[k], tracks);
        }
    }

    /// Scores the markers of fed frame `index` (frames cycle over the prepared ones).
    pub fn score(&self, score: &mut MarkerScore, index: u64, detected: &[IdCorners]) {
        if !self.truth.is_empty() {
            score.add(
                &self.truth[(index % self.truth.len() as u64) as usize],
                detected,
            );
        }
    }
}

/// Tracks scored against a particle scene's truth: a scorer per stretch of frames without a
/// wrap (see the module's words), their counts summed.
#[derive(Default)]
pub struct TrackScore {
    scorer: Option<MotScorer>,
    done: MotCounts,
    /// Seconds spent scoring: on one thread (of several summed, the busiest's), and in all.
    busy_s: f64,
    total_busy_s: f64,
    /// Seconds the rate pass waited to hand frames to the scoring threads (their queues full).
    waited_s: f64,
}

impl TrackScore {
    fn restart(&mut self, match_distance: f64) {
        if let Some(old) = self.scorer.replace(MotScorer::new(match_distance)) {
            self.done = self.done.plus(&old.counts());
        }
    }

    /// Adds the counts of `other`, scored on another thread.
    fn absorb(&mut self, other: TrackScore) {
        self.done = self.counts().plus(&other.counts());
        self.scorer = None;
        self.total_busy_s += other.busy_s;
        self.busy_s = self.busy_s.max(other.busy_s);
    }

    pub fn counts(&self) -> MotCounts {
        match &self.scorer {
            Some(s) => self.done.plus(&s.counts()),
            None => self.done,
        }
    }
}

/// Renders `scene.prepared` frames of a particle scene and the particles of each.
fn prepare_particles(scene: &PipelineScene, what: &str) -> Result<PreparedFrames> {
    let options = scene.scene.particles().unwrap_or_default();
    let mut particles = ParticleScene::new(options, scene.size.width, scene.size.height)
        .map_err(|e| Error::context(what, e))?;
    let mut prepared = PreparedFrames {
        frames: Vec::with_capacity(scene.prepared as usize),
        source_ms: Vec::with_capacity(scene.prepared as usize),
        description: format!(
            "{} Brownian particles (step {} px per axis, spots of σ {} px)",
            options.count, options.step_px, options.spot_sigma_px
        ),
        fps: DEFAULT_FPS,
        truth: Vec::new(),
        particles: Vec::with_capacity(scene.prepared as usize),
        match_distance: options.match_distance_px(),
    };
    for _ in 0..scene.prepared {
        let started = Instant::now();
        let frame = particles.render()?;
        prepared
            .source_ms
            .push(started.elapsed().as_secs_f64() * 1e3);
        prepared.frames.push(Arc::new(frame));
        let truth = particles
            .positions()
            .map(|(id, x, y)| TruthPoint { id, x, y });
        prepared.particles.push(truth.collect());
        particles.step();
    }
    Ok(prepared)
}

/// Renders or decodes `scene.prepared` frames with the scene's own source, one after the other,
/// then page-locks them with `locker` (untimed), as the sources of the window and `analyze` write
/// their frames into page-locked buffers when there is a GPU (`source::frame_pool`).
pub fn prepare(
    scene: &PipelineScene,
    locker: Option<Arc<dyn PageLocker>>,
) -> Result<PreparedFrames> {
    let what = format!(
        "making the frames of {} at {}",
        scene.scene.name(),
        scene.size
    );
    let mut source = match &scene.scene {
        Scene::Particles(_) => return lock(prepare_particles(scene, &what)?, locker),
        Scene::Demo | Scene::Clutter | Scene::Markers(_) => {
            SourceSpec::Synthetic(SyntheticSpec::from(match scene.scene {
                Scene::Demo => SyntheticKind::Markers,
                Scene::Markers(_) => {
                    SyntheticKind::Fiducials(scene.scene.fiducials().unwrap_or_default())
                }
                _ => SyntheticKind::Random,
            }))
            .open_with(&OpenOptions {
                realtime: false,
                synthetic_width: scene.size.width,
                synthetic_height: scene.size.height,
                ..OpenOptions::default()
            })?
        }
        Scene::Video(path) => crate::source::video::open(path, false)?,
    };
    let mut frames = Vec::with_capacity(scene.prepared as usize);
    let mut source_ms = Vec::with_capacity(scene.prepared as usize);
    while frames.len() < scene.prepared as usize {
        match source.next_frame() {
            Ok(Some(frame)) => {
                if (frame.grey.width, frame.grey.height) != (scene.size.width, scene.size.height) {
                    return Err(Error::Invalid(format!(
                        "{what}: frame {} is {}x{}, the first was {}",
                        frame.index, frame.grey.width, frame.grey.height, scene.size
                    )));
                }
                source_ms.push(frame.decode_ms);
                // Replayed from host memory.
                frames.push(Arc::clone(frame.grey.image()?));
            }
            Ok(None) => break,
            Err(e) => return Err(Error::context(what, e)),
        }
    }
    if frames.is_empty() {
        return Err(Error::Invalid(format!("{what}: the source gave no frame")));
    }
    let description = source.describe();
    let fps = source.fps().filter(|f| *f > 0.0).unwrap_or(DEFAULT_FPS);
    // The source's own references to its buffers go with it.
    drop(source);
    let truth = match scene.scene.fiducials() {
        Some(options) => {
            let markers = FiducialScene::new(options, scene.size.width, scene.size.height)?;
            (0..frames.len() as u64)
                .map(|i| {
                    let truth = markers.truth(i).into_iter().filter(|t| t.visible);
                    truth.map(|t| (t.id, t.corners)).collect()
                })
                .collect()
        }
        None => Vec::new(),
    };
    let prepared = PreparedFrames {
        frames,
        source_ms,
        description,
        fps,
        truth,
        particles: Vec::new(),
        match_distance: 0.0,
    };
    lock(prepared, locker)
}

/// Page-locks the prepared frames with `locker` (untimed).
fn lock(
    mut prepared: PreparedFrames,
    locker: Option<Arc<dyn PageLocker>>,
) -> Result<PreparedFrames> {
    if let Some(locker) = locker {
        // A frame handed out more than once (the clutter scene cycles over a few) is locked
        // once: every reference to it gets the same locked image.
        let mut locked: Vec<(*const GrayImage, Arc<GrayImage>)> = Vec::new();
        for frame in prepared.frames.iter_mut() {
            let old = Arc::as_ptr(frame);
            if let Some((_, done)) = locked.iter().find(|(p, _)| *p == old) {
                *frame = done.clone();
                continue;
            }
            Arc::make_mut(frame).lock(locker.as_ref());
            locked.push((old, frame.clone()));
        }
    }
    Ok(prepared)
}

/// The markers of a result as the score takes them.
fn detected(result: &FrameResult) -> Vec<IdCorners> {
    result
        .markers
        .iter()
        .map(|o| (o.marker.id, std::array::from_fn(|k| o.marker.corner(k))))
        .collect()
}

/// The tracked points of a result: each component's position (sub-pixel when measured) and
/// its track.
fn tracked(result: &FrameResult) -> Vec<TrackPoint> {
    (0..result.components.len())
        .map(|k| {
            let (x, y) = match result.subpixel.get(k) {
                Some(c) => (c.x, c.y),
                None => (
                    result.components[k].centroid_x,
                    result.components[k].centroid_y,
                ),
            };
            TrackPoint {
                track: result.track_ids.get(k).copied().unwrap_or(0),
                x,
                y,
            }
        })
        .collect()
}

/// Hands out prepared frames, cycling over them, `total` in all. From index `gated_from` on,
/// each frame waits for a token on `gate` (sent when the previous result has arrived); a closed
/// gate ends the stream.
struct PreparedSource {
    frames: Vec<Arc<GrayImage>>,
    next: u64,
    total: u64,
    gated_from: u64,
    gate: Receiver<()>,
    fps: f64,
    description: String,
}

impl FrameSource for PreparedSource {
    fn describe(&self) -> String {
        format!("{} (frames held in memory)", self.description)
    }

    fn is_live(&self) -> bool {
        false
    }

    fn next_frame(&mut self) -> Result<Option<Frame>> {
        if self.next >= self.total {
            return Ok(None);
        }
        if self.next >= self.gated_from && self.gate.recv().is_err() {
            return Ok(None);
        }
        let started = Instant::now();
        let index = self.next;
        let grey = self.frames[(index % self.frames.len() as u64) as usize].clone();
        self.next += 1;
        Ok(Some(Frame {
            index,
            time_s: index as f64 / self.fps,
            grey: grey.into(),
            captured_at: Instant::now(),
            decode_ms: started.elapsed().as_secs_f64() * 1e3,
            name: String::new(),
        }))
    }

    fn frame_count(&self) -> Option<u64> {
        Some(self.total)
    }

    fn fps(&self) -> Option<f64> {
        Some(self.fps)
    }
}

/// A running pipeline and the gate of its source. Fields drop in order: the gate closes
/// before the pipeline is stopped, so a source waiting at the gate lets the capture thread end.
struct Running {
    gate: Sender<()>,
    pipeline: Pipeline,
}

/// `--out`: the rows of every frame of a run, written as `analyze` writes them.
struct BenchRows {
    writer: RowWriter,
    /// The file in the current folder (removed when dropped), without a path of its own.
    _temp: Option<tempfile::NamedTempFile>,
    path: std::path::PathBuf,
}

impl BenchRows {
    fn open(out: &RowsOut) -> Result<BenchRows> {
        let (file, temp, path) = match &out.path {
            Some(path) => {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(path)
                    .map_err(|e| Error::io(path, e))?;
                (file, None, path.clone())
            }
            None => {
                let ext = format!(".{:?}", out.format).to_ascii_lowercase();
                let temp = tempfile::Builder::new()
                    .prefix(".markerscope-bench-rows.")
                    .suffix(&ext)
                    .tempfile_in(".")
                    .map_err(|e| Error::io(std::path::Path::new("."), e))?;
                let path = temp.path().to_path_buf();
                let file = temp
                    .as_file()
                    .try_clone()
                    .map_err(|e| Error::io(&path, e))?;
                (file, Some(temp), path)
            }
        };
        let writer = RowWriter::start(
            Box::new(file),
            out.format,
            Columns::all(),
            BatchOptions::default(),
        )
        .map_err(|e| Error::io(&path, e))?;
        Ok(BenchRows {
            writer,
            _temp: temp,
            path,
        })
    }

    fn frame(&mut self, result: &FrameResult) -> Result<()> {
        self.writer
            .write_frame(&FrameRows::of(result))
            .map_err(|e| Error::io(&self.path, e))
    }

    /// Everything written; the file in the current folder removed.
    fn finish(self) -> Result<OutputTimes> {
        self.writer.finish().map_err(|e| Error::io(&self.path, e))
    }
}

/// What one description of a frame's work reads like in the report.
fn what(info: &AlgorithmInfo, plan: &PipelinePlan, scene: &Scene) -> String {
    let gpu = info.backend == crate::ccl::Backend::Cuda;
    let mut parts = vec![
        format!("threshold {}", plan.flags.threshold),
        if gpu { "pack" } else { "" }.to_string(),
        format!("label + statistics ({})", info.name),
        if plan.flags.subpixel {
            "sub-pixel centroids"
        } else {
            ""
        }
        .to_string(),
        "filter".into(),
        match scene.particles() {
            Some(p) => format!(
                "track (last position, search range {:.2} px)",
                p.search_range_px()
            ),
            None => "track".into(),
        },
        scene
            .fiducials()
            .map(|f| {
                let detector = if gpu { "GPU detector" } else { "CPU detector" };
                format!("markers ({}, {detector})", f.dictionary)
            })
            .unwrap_or_default(),
        plan.flags.out.as_ref().map_or(String::new(), |o| {
            format!("rows to {:?}", o.format).to_lowercase()
        }),
    ];
    parts.retain(|p| !p.is_empty());
    parts.join(" + ")
}

/// Runs every (connectivity, algorithm) of the plan on one scene's prepared frames.
pub fn run_scene(
    plan: &PipelinePlan,
    scene: &PipelineScene,
    prepared: &PreparedFrames,
    backends: &Arc<Backends>,
    progress: &mut Progress,
    notices: &mut Vec<String>,
) -> Result<Vec<PipelineResult>> {
    let mut rows = Vec::new();
    for &(connectivity, info) in &plan.runs {
        let label = format!(
            "{} {} {} {connectivity}-conn",
            scene.scene.name(),
            scene.size,
            info.name
        );
        progress.message(&label);
        let row = run_one(
            plan,
            scene,
            prepared,
            connectivity,
            info,
            backends,
            progress,
            notices,
        )
        .map_err(|e| Error::context(format!("bench --pipeline {label}"), e))?;
        rows.push(row);
    }
    Ok(rows)
}

/// The next frame's result, which must be frame `received`, labeled by `info`; notices are
/// collected (each once), anything else is an error.
fn next_result(
    running: &Running,
    info: &AlgorithmInfo,
    received: u64,
    total: u64,
    notices: &mut Vec<String>,
) -> Result<Arc<FrameResult>> {
    let result = loop {
        let event = match running.pipeline.events().recv_timeout(STUCK) {
            Ok(event) => event,
            Err(RecvTimeoutError::Timeout) => {
                return Err(Error::Invalid(format!(
                    "no result for {} s after {received} of {total} frames",
                    STUCK.as_secs()
                )))
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(Error::Invalid(format!(
                    "the pipeline stopped after {received} of {total} frames"
                )))
            }
        };
        match event {
            PipelineEvent::Frame(result) => break result,
            PipelineEvent::Notice(n) => {
                if !notices.contains(&n) {
                    notices.push(n);
                }
            }
            PipelineEvent::SourceError(e) | PipelineEvent::EngineError(e) => {
                return Err(Error::Invalid(e));
            }
            // Frames prepared in memory are never damaged: one missing would skew every figure.
            PipelineEvent::Skipped(s) => {
                return Err(Error::Invalid(format!("a prepared frame was skipped: {s}")));
            }
            PipelineEvent::EndOfStream { frames } => {
                return Err(Error::Invalid(format!(
                    "the stream ended after {frames} frames, {received} results of {total}"
                )));
            }
        }
    };
    if result.index != received {
        return Err(Error::Invalid(format!(
            "result of frame {} arrived where frame {received} was due",
            result.index
        )));
    }
    if result.algorithm != info.name {
        return Err(Error::Invalid(format!(
            "frame {} was labeled by {} ({}), not by {}",
            result.index, result.algorithm, result.backend, info.name
        )));
    }
    Ok(result)
}

/// Threads that score the rate pass's tracks. The score of a stretch of frames between two
/// wraps depends on nothing before it, so stretch s goes to thread s % `SCORE_THREADS` and the
/// stretches are scored side by side (at 50,000 particles one thread took 3 ms a frame, and
/// set the rate).
const SCORE_THREADS: usize = 3;

/// Frames of tracked points a scoring thread may hold, at least (a 50,000-particle frame's:
/// 0.6 MB); a whole stretch otherwise, so that each thread may fall a stretch behind while the
/// next ones start (with half a stretch, the 50,000-particle scene's pipeline waited for the
/// first thread: its busiest thread was busy 95 % of the rate pass).
const SCORE_QUEUE: usize = 32;

/// The rate pass's scoring of tracked points: per thread, where its frames go and the thread.
type Scoring<'s> = Option<
    Vec<(
        Sender<(u64, Vec<TrackPoint>)>,
        std::thread::ScopedJoinHandle<'s, TrackScore>,
    )>,
>;

/// Ends the scoring: the scorers take what is queued and hand their counts over, summed.
fn finish_scoring(scoring: &mut Scoring<'_>) -> Result<TrackScore> {
    let mut all = TrackScore::default();
    for (to_score, scorer) in scoring.take().unwrap_or_default() {
        drop(to_score);
        let one =
            (scorer.join()).map_err(|_| Error::Invalid("the tracks' scoring failed".into()))?;
        all.absorb(one);
    }
    Ok(all)
}

/// Per-frame numbers of one pass.
#[derive(Default)]
struct Pass {
    latency_ms: Vec<f64>,
    components: Vec<u64>,
    steps: Vec<Vec<StepMs>>,
}

impl Pass {
    fn add(&mut self, latency_ms: f64, components: u64, steps: Vec<StepMs>) {
        self.latency_ms.push(latency_ms);
        self.components.push(components);
        self.steps.push(steps);
    }

    fn mean_steps(&self) -> Vec<StepMs> {
        mean_steps(self.steps.iter().map(Vec::as_slice), self.steps.len())
    }
}

#[allow(clippy::too_many_arguments)]
fn run_one(
    plan: &PipelinePlan,
    scene: &PipelineScene,
    prepared: &PreparedFrames,
    connectivity: Connectivity,
    info: &'static AlgorithmInfo,
    backends: &Arc<Backends>,
    progress: &mut Progress,
    notices: &mut Vec<String>,
) -> Result<PipelineResult> {
    let (warmup, frames) = (plan.flags.warmup as u64, plan.flags.frames as u64);
    let gated_from = warmup + frames;
    let total = plan.frames_per_run();
    let (gate, gate_rx) = crossbeam_channel::unbounded();
    let source = PreparedSource {
        frames: prepared.frames.clone(),
        next: 0,
        total,
        gated_from,
        gate: gate_rx,
        fps: prepared.fps,
        description: prepared.description.clone(),
    };
    let mut settings = plan.settings(connectivity, info);
    if let Some(f) = scene.scene.fiducials() {
        let dictionary = Arc::new(Dictionary::predefined(f.dictionary)?);
        settings.markers = Some(Arc::new(MarkerSettings::new(vec![dictionary])));
    }

    let started = Instant::now();
    let running = Running {
        gate,
        pipeline: match scene.scene.particles() {
            Some(p) => Pipeline::start_tracking(
                Box::new(source),
                settings,
                TrackerConfig::linking(p.search_range_px()),
                Delivery::Lossless,
                backends.clone(),
            )?,
            None => Pipeline::start(
                Box::new(source),
                settings,
                Delivery::Lossless,
                backends.clone(),
            )?,
        },
    };
    let mut rows = plan.flags.out.as_ref().map(BenchRows::open).transpose()?;
    // The rate pass is timed from the last warm-up result (or the start, without warm-up).
    let mut rate_start = started;
    let mut rate_s = 0.0;
    let mut load_clock = LoadClock::start();
    let mut host_load = None;
    let (mut rate, mut latency) = (Pass::default(), Pass::default());
    let mut score = MarkerScore::default();
    let tracking = std::thread::scope(|scope| -> Result<TrackScore> {
        // The rate pass's tracked points are scored against a particle scene's truth on
        // threads of their own: with 50,000 particles the score takes milliseconds a frame on
        // one core, and in this loop it set the rate.
        let stretch = prepared.particles.len().max(1) as u64;
        let queue = SCORE_QUEUE.max(stretch as usize);
        let threads = (0..SCORE_THREADS).map(|_| {
            let (to_score, scored) = crossbeam_channel::bounded::<(u64, Vec<TrackPoint>)>(queue);
            let scorer = scope.spawn(move || {
                let mut tracking = TrackScore::default();
                for (i, points) in scored {
                    let start = Instant::now();
                    prepared.score_tracks(&mut tracking, i, &points);
                    tracking.busy_s += start.elapsed().as_secs_f64();
                }
                tracking
            });
            (to_score, scorer)
        });
        let mut scoring: Scoring = Some(threads.collect());
        let mut tracking = TrackScore::default();
        let mut waited_s = 0.0;
        let particles = !prepared.particles.is_empty();
        for received in 0..total {
            let result = next_result(&running, info, received, total, notices)?;
            if let Some(rows) = &mut rows {
                rows.frame(&result)?;
            }
            let i = result.index;
            let steps = || result.timings.steps.iter().map(StepMs::from).collect();
            let components = result.components.len() as u64;
            if i < warmup {
                if i + 1 == warmup {
                    rate_start = Instant::now();
                    load_clock = LoadClock::start();
                }
            } else if i < gated_from {
                rate.add(result.timings.latency_ms, components, steps());
                prepared.score(&mut score, i, &detected(&result));
                let thread = (i / stretch) as usize % SCORE_THREADS;
                if let Some((to_score, _)) =
                    scoring.as_ref().filter(|_| particles).map(|t| &t[thread])
                {
                    let points = tracked(&result);
                    let start = Instant::now();
                    if to_score.send((i, points)).is_err() {
                        return Err(Error::Invalid("the tracks' scoring stopped".into()));
                    }
                    waited_s += start.elapsed().as_secs_f64();
                }
                if i + 1 == gated_from {
                    rate_s = rate_start.elapsed().as_secs_f64();
                    host_load = load_clock.as_ref().and_then(LoadClock::stop);
                    // Before the latency pass, whose frames it would share the cores with.
                    tracking = finish_scoring(&mut scoring)?;
                    tracking.waited_s = waited_s;
                }
            } else {
                latency.add(result.timings.latency_ms, components, steps());
            }
            // The latency pass: the next frame goes out when this result is in.
            if i + 1 >= gated_from && i + 1 < total && running.gate.send(()).is_err() {
                return Err(Error::Invalid("the source stopped early".into()));
            }
            progress.inc(1);
        }
        if scoring.is_some() {
            tracking = finish_scoring(&mut scoring)?;
            tracking.waited_s = waited_s;
        }
        Ok(tracking)
    })?;
    drop(running);
    // The score runs beside the pipeline; when the rate pass waited for it, it may have set
    // the rate: say so.
    if tracking.waited_s > 0.05 * rate_s && rate_s > 0.0 {
        notices.push(format!(
            "{} {} {}: the rate pass waited {:.0} % of its time for the scoring of the tracks \
             against the truth ({:.2} ms a frame scored, the busiest thread busy {:.0} % of the \
             pass): the frames/s may be the score's",
            scene.scene.name(),
            scene.size,
            info.name,
            100.0 * tracking.waited_s / rate_s,
            tracking.total_busy_s * 1e3 / frames.max(1) as f64,
            100.0 * tracking.busy_s / rate_s,
        ));
    }
    if let Some(h) = host_load.filter(|h| h.shared()) {
        notices.push(format!(
            "{} {} {}: other processes and machines took {:.1} cores of its {} during the rate \
             pass ({:.1} stolen by the hypervisor): its frames/s are those of a shared machine",
            scene.scene.name(),
            scene.size,
            info.name,
            h.others + h.stolen,
            h.cpus,
            h.stolen
        ));
    }
    let mut steps_at_full_rate = rate.mean_steps();
    if let Some(rows) = rows {
        let (format_ms, write_ms) = rows.finish()?.per_frame();
        steps_at_full_rate.push(StepMs {
            step: "format".into(),
            ms: format_ms,
        });
        steps_at_full_rate.push(StepMs {
            step: "write".into(),
            ms: write_ms,
        });
    }
    let mean_components = rate.components.iter().sum::<u64>() as f64 / frames.max(1) as f64;
    Ok(PipelineResult {
        scene: scene.scene.name(),
        width: scene.size.width,
        height: scene.size.height,
        algorithm: info.name.to_string(),
        backend: info.backend.to_string(),
        source: "markerscope".into(),
        connectivity: connectivity.number(),
        threshold: plan.flags.threshold.to_string(),
        what: what(info, plan, &scene.scene),
        warmup: plan.flags.warmup,
        prepared_frames: prepared.frames.len() as u32,
        source_ms: Some(prepared.mean_source_ms()),
        frame_ms: latency.latency_ms.clone(),
        frame_components: rate.components.clone(),
        latency_components: latency.components.clone(),
        latency_steps_ms: (latency.steps.iter())
            .map(|steps| steps.iter().map(|s| s.ms).sum())
            .collect(),
        steps: latency.mean_steps(),
        rate_wall_s: Some(rate_s),
        steps_at_full_rate,
        latency_at_full_rate: Some(Percentiles::of(&rate.latency_ms)),
        alike: AlikeFrames::of(&latency.latency_ms, &latency.components),
        host_load,
        slowest: SlowestFrames::of(
            0.01,
            &latency.latency_ms,
            &latency.components,
            &latency.steps,
        ),
        frames: 0,
        frames_per_s: 0.0,
        mean_components,
        latency: Percentiles::default(),
        markers: scene.scene.fiducials().map(|_| score),
        frame_markers: Vec::new(),
        tracking: scene.scene.particles().map(|_| tracking.counts()),
        frame_tracks: Vec::new(),
    })
}
