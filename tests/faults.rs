//! Fault injection: a labeler that fails part way (a GPU error in flight), a source that fails
//! or stalls, an output that fills up, a consumer slower than the pipeline. File analysis
//! loses and repeats no frame and says what happened; the live path stays responsive.

use crate::util::{events_to_the_end, frames_of};
use markerscope::ccl::cpu::lsl::Lsl;
use markerscope::ccl::{
    BackendChoice, Backends, Completed, Connectivity, Keep, LabelRequest, Labeler, Labeling, Mask,
    Submission,
};
use markerscope::error::{Error, Result};
use markerscope::frame::image::GrayImage;
use markerscope::pipeline::{
    Delivery, EventPolicy, FrameResult, Pipeline, PipelineEvent, PipelineSettings,
};
use markerscope::source::{Frame, FrameSource};
use markerscope::threshold::spec::ThresholdSpec;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A 64×8 frame with `n` separate 2×2 squares.
fn squares(n: u32) -> GrayImage {
    let w = 64;
    let mut g = GrayImage::filled(w, 8, 0).unwrap();
    for k in 0..n {
        for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
            g.data[((1 + dy) * w + 1 + 4 * k + dx) as usize] = 255;
        }
    }
    g
}

/// Squares in frame i: 1 + i % 5, so a frame lost or repeated shows in the counts.
fn squares_in(i: u64) -> usize {
    1 + (i % 5) as usize
}

/// Frames of `squares_in(i)` squares; from frame `fail_at` on an error, or from `stall_at` on
/// it waits until `release` is set (a camera that hangs).
struct Source {
    next: u64,
    frames: u64,
    live: bool,
    fail_at: Option<u64>,
    stall_at: Option<u64>,
    release: Arc<AtomicBool>,
    /// Time between frames (a camera's frame interval).
    interval: Duration,
}

impl Source {
    fn new(frames: u64, live: bool) -> Self {
        Self {
            next: 0,
            frames,
            live,
            fail_at: None,
            stall_at: None,
            release: Arc::new(AtomicBool::new(false)),
            interval: Duration::ZERO,
        }
    }
}

impl FrameSource for Source {
    fn describe(&self) -> String {
        "fault source".into()
    }
    fn is_live(&self) -> bool {
        self.live
    }
    fn next_frame(&mut self) -> Result<Option<Frame>> {
        let index = self.next;
        if self.fail_at == Some(index) {
            return Err(Error::Invalid(format!(
                "frame {index}: the device went away"
            )));
        }
        if self.stall_at == Some(index) {
            // Bounded, so that a failing test still ends.
            let until = Instant::now() + Duration::from_secs(20);
            while !self.release.load(Ordering::Relaxed) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        if index >= self.frames {
            return Ok(None);
        }
        self.next += 1;
        std::thread::sleep(self.interval);
        Ok(Some(Frame {
            index,
            time_s: index as f64,
            grey: Arc::new(squares(squares_in(index) as u32)).into(),
            captured_at: Instant::now(),
            decode_ms: 0.0,
            name: String::new(),
        }))
    }
}

/// The CPU labeler, named like it, that fails as a GPU does from its `fail_from`-th call on.
struct FailingAfter {
    inner: Lsl,
    calls: Arc<AtomicUsize>,
    fail_from: usize,
}

impl Labeler for FailingAfter {
    fn name(&self) -> &'static str {
        "lsl"
    }
    fn label_mask(&mut self, request: LabelRequest<Mask<'_>>) -> Result<Labeling> {
        if self.calls.fetch_add(1, Ordering::Relaxed) >= self.fail_from {
            return Err(Error::Cuda {
                step: "launching the labeling kernel".into(),
                why: "an illegal memory access was encountered".into(),
            });
        }
        self.inner.label_mask(request)
    }
}

fn settings() -> PipelineSettings {
    PipelineSettings {
        threshold: ThresholdSpec::Fixed(127),
        ..PipelineSettings::default()
    }
}

/// File analysis: lossless delivery and events; `first` stands in for the registry's labeler.
fn start_file(
    source: Source,
    settings: PipelineSettings,
    first: Option<Box<dyn Labeler>>,
) -> Pipeline {
    Pipeline::start_with_labeler(
        Box::new(source),
        settings,
        Delivery::Lossless,
        Arc::new(Backends::cpu_only()),
        EventPolicy::Lossless,
        first,
    )
    .unwrap()
}

/// The live path (a camera in the window): drop-oldest frames and results.
fn start_live(source: Source) -> Pipeline {
    Pipeline::start(
        Box::new(source),
        settings(),
        Delivery::Live,
        Arc::new(Backends::cpu_only()),
    )
    .unwrap()
}

/// The notices that the GPU was given up for the CPU.
fn fallback_notices(events: &[PipelineEvent]) -> Vec<&String> {
    events
        .iter()
        .filter_map(|e| match e {
            PipelineEvent::Notice(m) if m.contains("from now on") => Some(m),
            _ => None,
        })
        .collect()
}

fn check_counts(frames: &[Arc<FrameResult>]) {
    for r in frames {
        assert_eq!(r.components.len(), squares_in(r.index), "frame {}", r.index);
    }
}

/// Under `--backend auto` with no algorithm named, the GPU failing at frame 5 hands that frame
/// and the rest to the CPU: every frame once, in order, and one notice that says why.
#[test]
fn a_labeler_failing_part_way_falls_back_to_the_cpu_and_loses_no_frame() {
    let calls = Arc::new(AtomicUsize::new(0));
    let failing = FailingAfter {
        inner: Lsl::new(),
        calls: calls.clone(),
        fail_from: 5,
    };
    let p = start_file(Source::new(12, false), settings(), Some(Box::new(failing)));
    let events = events_to_the_end(&p);
    let frames = frames_of(&events);
    let indices: Vec<u64> = frames.iter().map(|r| r.index).collect();
    assert_eq!(indices, (0..12).collect::<Vec<_>>());
    check_counts(&frames);
    assert_eq!(
        calls.load(Ordering::Relaxed),
        6,
        "the failing labeler is given up"
    );
    let fallback = fallback_notices(&events);
    assert_eq!(
        fallback,
        [
            "CPU backend from now on: lsl failed on frame 5: CUDA error during launching the \
          labeling kernel: an illegal memory access was encountered"
        ]
    );
    // The notice comes before the first frame the CPU made.
    let notice_at = events
        .iter()
        .position(|e| matches!(e, PipelineEvent::Notice(m) if m.contains("from now on")))
        .unwrap();
    let frame5_at = events
        .iter()
        .position(|e| matches!(e, PipelineEvent::Frame(r) if r.index == 5))
        .unwrap();
    assert!(notice_at < frame5_at);
    assert!(events
        .iter()
        .all(|e| !matches!(e, PipelineEvent::EngineError(_))));
    p.stop();
}

/// With the algorithm chosen there is no fallback: each failed frame is an error that names it,
/// and no frame is left out silently.
#[test]
fn a_chosen_labeler_failing_part_way_names_every_frame_it_failed() {
    let failing = FailingAfter {
        inner: Lsl::new(),
        calls: Arc::new(AtomicUsize::new(0)),
        fail_from: 3,
    };
    let chosen = PipelineSettings {
        algorithm: Some("lsl".into()),
        backend: BackendChoice::Auto,
        ..settings()
    };
    let p = start_file(Source::new(6, false), chosen, Some(Box::new(failing)));
    let events = events_to_the_end(&p);
    let mut accounted = Vec::new();
    for e in &events {
        match e {
            PipelineEvent::Frame(r) => accounted.push(r.index),
            PipelineEvent::EngineError(m) => {
                assert!(m.contains("CUDA error"), "{m}");
                let i: u64 = m
                    .split("on frame ")
                    .nth(1)
                    .and_then(|rest| rest.split(':').next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("the error names no frame: {m}"));
                accounted.push(i);
            }
            _ => {}
        }
    }
    assert_eq!(accounted, (0..6).collect::<Vec<_>>());
    p.stop();
}

/// A file source that fails at frame 4: the frames before it all arrive, then the error.
#[test]
fn a_source_failing_part_way_keeps_the_frames_before_it_and_says_why() {
    let mut source = Source::new(10, false);
    source.fail_at = Some(4);
    let p = start_file(source, settings(), None);
    let events = events_to_the_end(&p);
    let frames = frames_of(&events);
    assert_eq!(
        frames.iter().map(|r| r.index).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    check_counts(&frames);
    match events.last() {
        Some(PipelineEvent::SourceError(m)) => {
            assert!(m.contains("frame 4: the device went away"), "{m}")
        }
        other => panic!("expected the source error, got {other:?}"),
    }
    p.stop();
}

/// A live source that hangs: the frames before it are delivered at once (not held back by
/// the hung capture), and `stop` returns promptly.
#[test]
fn a_stalled_live_source_leaves_the_pipeline_responsive_and_stoppable() {
    let mut source = Source::new(10, true);
    source.stall_at = Some(2);
    let release = source.release.clone();
    let p = start_live(source);
    let mut seen = Vec::new();
    let started = Instant::now();
    while seen.len() < 2 && started.elapsed() < Duration::from_secs(10) {
        if let Ok(PipelineEvent::Frame(r)) = p.events().recv_timeout(Duration::from_millis(100)) {
            seen.push(r.index);
        }
    }
    assert_eq!(seen, [0, 1], "the frames before the stall");
    // Settings still change while the source hangs.
    p.set_settings(PipelineSettings {
        invert: true,
        ..settings()
    });
    let t = Instant::now();
    p.stop();
    let took = t.elapsed();
    release.store(true, Ordering::Relaxed);
    assert!(
        took < Duration::from_secs(2),
        "stop waited {took:?} for a hung source"
    );
}

/// A consumer slower than the pipeline on the live path: the oldest results make room for
/// the newest, the counters say how many, and what the consumer gets stays recent.
#[test]
fn a_slow_live_consumer_gets_recent_results_and_the_drops_are_counted() {
    let n = 300;
    // A 1000 frames/s camera; the consumer takes 5 ms a result.
    let mut source = Source::new(n, true);
    source.interval = Duration::from_millis(1);
    let p = start_live(source);
    let mut seen = Vec::new();
    let mut worst_lag = 0;
    loop {
        match p.events().recv_timeout(Duration::from_secs(30)).unwrap() {
            PipelineEvent::Frame(r) => {
                // How far behind the newest frame captured is the one the consumer gets?
                let newest = p.counters().captured.saturating_sub(1);
                worst_lag = worst_lag.max(newest.saturating_sub(r.index));
                seen.push(r.index);
                check_counts(std::slice::from_ref(&r));
                std::thread::sleep(Duration::from_millis(5));
            }
            PipelineEvent::EndOfStream { frames } => {
                assert_eq!(frames, n);
                break;
            }
            PipelineEvent::Notice(_) => {}
            other => panic!("{other:?}"),
        }
    }
    let c = p.counters();
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "out of order: {seen:?}"
    );
    assert!(c.dropped_results > 0, "the consumer kept up: {c:?}");
    assert_eq!(
        c.dropped + c.processed,
        c.captured,
        "every frame captured is processed or counted as dropped: {c:?}"
    );
    assert_eq!(
        seen.len() as u64 + c.dropped_results,
        c.processed,
        "every result made is delivered or counted as dropped: {c:?}"
    );
    // Behind the newest frame are at most the frame queue (2), the frame being labeled, the
    // tracking stage's queue (1) and the frame being tracked (a host of 4 threads or more tracks
    // beside the labeling), and the event queue (8): the consumer is never further behind.
    assert!(
        worst_lag <= 14,
        "the consumer fell {worst_lag} frames behind"
    );
    p.stop();
}

/// The same slow consumer in file analysis: every frame, in order, nothing dropped.
#[test]
fn a_slow_consumer_in_file_analysis_gets_every_frame_in_order() {
    let n = 60;
    let p = start_file(Source::new(n, false), settings(), None);
    let mut seen = Vec::new();
    loop {
        match p.events().recv_timeout(Duration::from_secs(30)).unwrap() {
            PipelineEvent::Frame(r) => {
                check_counts(std::slice::from_ref(&r));
                seen.push(r.index);
                std::thread::sleep(Duration::from_millis(5));
            }
            PipelineEvent::EndOfStream { .. } => break,
            PipelineEvent::Notice(_) => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(seen, (0..n).collect::<Vec<_>>());
    let c = p.counters();
    assert_eq!((c.dropped, c.dropped_results, c.processed), (0, 0, n));
    p.stop();
}

/// A recording that fills up part way (a file-size limit of 256 KiB stands in for a full disk;
/// a 640×480 frame takes about 200 KiB of FFV1, the rows of 60 demo frames about 120 KiB): the
/// recording is lost with its reason, exit code 1, but the rows are whole — every frame's, under
/// their final name — and no temporary file is left.
#[cfg(target_os = "linux")]
#[test]
fn a_recording_that_fills_up_loses_no_row() {
    use crate::util::{limit_file_size, markerscope_command};
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rows.csv");
    let recording = dir.path().join("run.mkv");
    let mut command = markerscope_command(&[]);
    command.args([
        "analyze",
        "synthetic",
        "--size",
        "640x480",
        "--max-frames",
        "60",
        "--out",
        out.to_str().unwrap(),
        "--record",
        recording.to_str().unwrap(),
    ]);
    limit_file_size(&mut command, 256 << 10);
    let run = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("run.mkv") && stderr.contains("the recording is lost"),
        "{stderr}"
    );
    let rows = std::fs::read_to_string(&out).unwrap();
    let frames: std::collections::BTreeSet<&str> = rows
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').next())
        .collect();
    assert_eq!(frames.len(), 60, "{stderr}");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, [std::ffi::OsString::from("rows.csv")], "{stderr}");
}

/// An output that fills up part way (a file-size limit of 64 KiB stands in for a full disk:
/// the same write error at the same place): a clear error that names the output and why, and
/// no partial file left, nor a temporary one. A device that is full (/dev/full): the same.
#[cfg(target_os = "linux")]
#[test]
fn an_output_that_fills_up_is_a_clear_error_and_leaves_no_partial_file() {
    use crate::util::{fails_past_a_file_size_limit, markerscope_command, write_checkerboard};
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("board.pgm");
    // A 200×200 checkerboard: 20,000 components at 4-connectivity, over 1 MB of rows.
    write_checkerboard(&input, 200);
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let out = out_dir.join("rows.csv");
    let mut command = markerscope_command(&[]);
    command.args([
        "analyze",
        input.to_str().unwrap(),
        "--connectivity",
        "4",
        "--out",
        out.to_str().unwrap(),
    ]);
    fails_past_a_file_size_limit(command, &out, &out_dir);

    let run = markerscope_command(&[])
        .args(["analyze", input.to_str().unwrap(), "--out", "/dev/full"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "{stderr}");
    assert!(
        stderr.contains("/dev/full") && stderr.contains("No space left on device"),
        "{stderr}"
    );
}

/// What an `InFlightLabeler` and its twins saw.
#[derive(Default)]
struct FlightLog {
    /// The connectivity of each frame in flight now, oldest first.
    in_flight: Vec<Connectivity>,
    most_in_flight: usize,
    submitted: usize,
    completed: usize,
    /// The first instance and its twins.
    instances: usize,
    /// Frames submitted while frames of another connectivity were in flight.
    mixed: usize,
}

/// The CPU labeler, named like it, keeping `frames` frames in flight as a GPU labeler does:
/// `submit` labels on a thread of its own after a delay that makes later frames ready before
/// earlier ones, `complete` waits for that thread. From submission `fail_from` on, `complete`
/// fails as a GPU does.
struct InFlightLabeler {
    frames: usize,
    fail_from: usize,
    log: Arc<Mutex<FlightLog>>,
    /// The submission number and the thread labeling it.
    running: Option<(usize, std::thread::JoinHandle<Result<Labeling>>)>,
}

impl InFlightLabeler {
    fn new(frames: usize, fail_from: usize) -> (Self, Arc<Mutex<FlightLog>>) {
        let log = Arc::new(Mutex::new(FlightLog {
            instances: 1,
            ..FlightLog::default()
        }));
        let labeler = Self {
            frames,
            fail_from,
            log: log.clone(),
            running: None,
        };
        (labeler, log)
    }
}

impl Labeler for InFlightLabeler {
    fn name(&self) -> &'static str {
        "lsl"
    }
    fn label_mask(&mut self, request: LabelRequest<Mask<'_>>) -> Result<Labeling> {
        Lsl::new().label_mask(request)
    }
    fn submit(&mut self, request: LabelRequest<Submission<'_>>) -> Result<bool> {
        let (c, want) = (request.connectivity, request.want);
        let image = match request.input {
            Submission::Mask(mask) => mask.bytes().into_owned(),
            Submission::Grey(_) | Submission::WeightedGrey(_) => return Ok(false),
        };
        assert!(self.running.is_none(), "one frame at a time per instance");
        let mut log = self.log.lock().unwrap();
        let n = log.submitted;
        log.submitted += 1;
        if log.in_flight.iter().any(|&other| other != c) {
            log.mixed += 1;
        }
        log.in_flight.push(c);
        log.most_in_flight = log.most_in_flight.max(log.in_flight.len());
        let delay = Duration::from_millis([8, 1, 4, 2][n % 4]);
        let thread = std::thread::spawn(move || {
            std::thread::sleep(delay);
            Lsl::new().label(&image, c, want)
        });
        self.running = Some((n, thread));
        Ok(true)
    }
    fn complete(&mut self, _keep: Keep<'_>) -> Result<Completed> {
        let (n, thread) = self.running.take().expect("a frame was submitted");
        let labeled = thread.join().expect("the labeling thread ends");
        let mut log = self.log.lock().unwrap();
        log.in_flight.remove(0);
        log.completed += 1;
        if n >= self.fail_from {
            return Err(Error::Cuda {
                step: "downloading results".into(),
                why: "an illegal memory access was encountered".into(),
            });
        }
        labeled.map(|labeling| (labeling, None))
    }
    fn frames_in_flight(&self) -> usize {
        self.frames
    }
    fn twin(&self) -> Result<Box<dyn Labeler>> {
        self.log.lock().unwrap().instances += 1;
        Ok(Box::new(Self {
            frames: self.frames,
            fail_from: self.fail_from,
            log: self.log.clone(),
            running: None,
        }))
    }
}

/// Settings whose frames a labeler can take in flight (no sub-pixel centroids).
fn in_flight_settings() -> PipelineSettings {
    PipelineSettings {
        subpixel: false,
        ..settings()
    }
}

/// File analysis of `frames` frames with `labeler`: the pipeline, every event to the end of
/// the stream and the frame results, checked to be every frame once, in order, with its own
/// components.
fn analyze_in_flight(
    labeler: InFlightLabeler,
    frames: u64,
) -> (Pipeline, Vec<PipelineEvent>, Vec<Arc<FrameResult>>) {
    let p = start_file(
        Source::new(frames, false),
        in_flight_settings(),
        Some(Box::new(labeler)),
    );
    let events = events_to_the_end(&p);
    let results = frames_of(&events);
    let indices: Vec<u64> = results.iter().map(|r| r.index).collect();
    assert_eq!(indices, (0..frames).collect::<Vec<_>>());
    check_counts(&results);
    (p, events, results)
}

/// File analysis with three frames in flight whose results are ready out of order: every
/// frame once, in frame order, with its own components; three frames were in flight at once.
#[test]
fn frames_in_flight_leave_the_worker_in_order_once_each() {
    let (labeler, log) = InFlightLabeler::new(3, usize::MAX);
    let (p, _, frames) = analyze_in_flight(labeler, 40);
    assert!(frames
        .iter()
        .all(|r| r.timings.steps.iter().any(|s| s.step == "track")));
    let log = log.lock().unwrap();
    assert_eq!((log.submitted, log.completed), (40, 40));
    assert_eq!(log.most_in_flight, 3);
    assert!(log.instances <= 4, "{} instances", log.instances);
    p.stop();
}

/// The live path with two frames in flight: results in frame order, none twice, and every
/// captured frame either processed or counted as dropped.
#[test]
fn frames_in_flight_on_the_live_path_stay_in_order() {
    let (labeler, log) = InFlightLabeler::new(2, usize::MAX);
    let mut source = Source::new(60, true);
    source.interval = Duration::from_millis(1);
    let p = Pipeline::start_with_labeler(
        Box::new(source),
        in_flight_settings(),
        Delivery::Live,
        Arc::new(Backends::cpu_only()),
        EventPolicy::Lossless,
        Some(Box::new(labeler)),
    )
    .unwrap();
    let events = events_to_the_end(&p);
    let frames = frames_of(&events);
    assert!(!frames.is_empty());
    assert!(frames.windows(2).all(|w| w[0].index < w[1].index));
    check_counts(&frames);
    let c = p.counters();
    assert_eq!(c.processed + c.dropped, c.captured, "{c:?}");
    assert_eq!(c.processed, frames.len() as u64);
    let log = log.lock().unwrap();
    assert_eq!(log.submitted, log.completed);
    assert!(log.most_in_flight <= 2);
    p.stop();
}

/// Under `--backend auto`, the GPU failing at frame 5 with three frames in flight: frame 5 and
/// the frames in flight behind it are labeled again on the CPU, in order, with one notice; the
/// failed labeler's frames are all waited for, and it gets no frame after.
#[test]
fn a_failure_in_flight_labels_every_frame_in_flight_again_on_the_cpu() {
    let (labeler, log) = InFlightLabeler::new(3, 5);
    let (p, events, _) = analyze_in_flight(labeler, 12);
    let fallback = fallback_notices(&events);
    assert_eq!(
        fallback,
        [
            "CPU backend from now on: lsl failed on frame 5: CUDA error during downloading \
             results: an illegal memory access was encountered"
        ]
    );
    assert!(events
        .iter()
        .all(|e| !matches!(e, PipelineEvent::EngineError(_))));
    let log = log.lock().unwrap();
    // Frame 5 and at most the two behind it were submitted before its failure was seen.
    assert!((6..=8).contains(&log.submitted), "{}", log.submitted);
    assert_eq!(log.completed, log.submitted);
    p.stop();
}

/// A settings change (here the connectivity) while frames are in flight: they are completed
/// before the first frame of the new settings is submitted, and every frame arrives, in order.
#[test]
fn a_settings_change_drains_the_frames_in_flight() {
    let (labeler, log) = InFlightLabeler::new(3, usize::MAX);
    let p = start_file(
        Source::new(40, false),
        in_flight_settings(),
        Some(Box::new(labeler)),
    );
    let mut frames = Vec::new();
    let mut events = Vec::new();
    while let Ok(e) = p.events().recv_timeout(Duration::from_secs(30)) {
        if let PipelineEvent::Frame(r) = &e {
            if frames.is_empty() {
                p.set_settings(PipelineSettings {
                    connectivity: Connectivity::Four,
                    ..in_flight_settings()
                });
            }
            frames.push(r.clone());
        }
        let end = matches!(e, PipelineEvent::EndOfStream { .. });
        events.push(e);
        if end {
            break;
        }
    }
    let indices: Vec<u64> = frames.iter().map(|r| r.index).collect();
    assert_eq!(indices, (0..40).collect::<Vec<_>>());
    check_counts(&frames);
    let first_four = frames
        .iter()
        .position(|r| r.connectivity == Connectivity::Four)
        .expect("the new connectivity reached the frames");
    assert!(first_four > 0);
    assert!(frames[first_four..]
        .iter()
        .all(|r| r.connectivity == Connectivity::Four));
    let log = log.lock().unwrap();
    assert_eq!(
        log.mixed, 0,
        "frames of both connectivities were in flight at once"
    );
    assert_eq!((log.submitted, log.completed), (40, 40));
    p.stop();
}
