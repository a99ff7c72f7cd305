//! `markerscope analyze`: a video, image, folder, glob, camera or the synthetic demo →
//! threshold → components → CSV/JSONL, one row per component per frame.
//!
//! Every frame goes through the live pipeline (`crate::pipeline`) with lossless delivery, so
//! analysis and the GUI share one code path. Everything that can be wrong with the request
//! (output not writable, no inputs, unreadable image headers, unknown algorithm, CUDA missing)
//! is checked before the first frame is decoded, and so is an output path that is one of the
//! input files (it would destroy the input). A file output is written to a temporary file
//! beside the target and renamed into place at the end. A damaged video frame or image is
//! skipped and the analysis goes on: the summary lists what was skipped, JSONL gets a side
//! record for each (`crate::output::export`), `--skipped FILE` a CSV of them. If the source
//! fails part way, the frames before it are kept and the summary says where it stopped; a run
//! that analysed nothing, or that a stop signal interrupted (`super::interrupt`), leaves no
//! output file behind.

use crate::ccl::{BackendChoice, Connectivity};
use crate::error::{Error, Result};
use crate::frame::mask::{Mask, StaticMaskLearner};
use crate::geometry::WorldMapping;
use crate::output::export::{write_skipped_csv_row, SKIPPED_CSV_HEADER};
use crate::output::export::{Exporter, Format, RowExtras, TrackWriter};
use crate::output::record::{RecordSummary, Recorder};
use crate::output::stream::{StreamStatus, Streams};
use crate::pipeline::{
    resolve_algorithm, ComponentFilter, Delivery, EventPolicy, Pipeline, PipelineEvent,
    PipelineSettings,
};
use crate::source::camera_controls::CameraControls;
use crate::source::video::VideoDecoding;
use crate::source::{OpenOptions, SkipAt, Skipped, SourceSpec};
use crate::threshold::spec::ThresholdSpec;
use crate::track::{Detection, SummaryBuilder, TrackSummary};
use crate::tuning::Tuning;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::source::images::{check_dimensions, list_inputs, IMAGE_EXTENSIONS};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    Stdout,
    File(PathBuf),
}

impl Output {
    /// `-` is standard output; anything else a file path.
    pub fn parse(s: &str) -> Output {
        if s == "-" {
            Output::Stdout
        } else {
            Output::File(PathBuf::from(s))
        }
    }
}

#[derive(Clone, Debug)]
pub struct AnalyzeOptions {
    /// A source spec (`SourceSpec::parse`): video, image, folder, glob, `camera:N`, `synthetic`.
    pub input: String,
    pub connectivity: Connectivity,
    pub threshold: ThresholdSpec,
    pub invert: bool,
    pub backend: BackendChoice,
    /// Registry name; None = the backend's default algorithm.
    pub algorithm: Option<String>,
    /// None = from the output file's extension, else CSV.
    pub format: Option<Format>,
    pub output: Output,
    /// Stop after this many frames (required for sources that never end).
    pub max_frames: Option<u64>,
    /// Size of synthetic frames; None = 1280×720.
    pub synthetic_size: Option<(u32, u32)>,
    /// A progress bar on stderr (only drawn when stderr is a terminal), and once-a-second
    /// live statistics for camera sources.
    pub progress: bool,
    /// Also write one row per track (`export::TRACKS_CSV_HEADER`) to this CSV file.
    pub tracks: Option<PathBuf>,
    /// Also write one row per skipped frame, image or undecodable part of the input
    /// (`export::SKIPPED_CSV_HEADER`) to this CSV file.
    pub skipped: Option<PathBuf>,
    /// Grey-weighted (sub-pixel) centroids: the `subpixel_x`/`subpixel_y` columns, and the
    /// positions the tracker follows.
    pub subpixel: bool,
    /// Components kept (area, aspect, circularity, inertia ratio).
    pub filter: ComponentFilter,
    /// Shape descriptor columns (`crate::ccl::descriptors`).
    pub shapes: bool,
    /// Image → world mapping: the `x_world`/`y_world` columns.
    pub world: Option<Arc<WorldMapping>>,
    /// Live streams (`crate::output::stream`): every frame's results also go to these
    /// addresses. A bad address is refused before any work.
    pub streams: Vec<String>,
    /// Also save the grey frames analysed to this file (FFV1 in Matroska, `.mkv`).
    pub record: Option<PathBuf>,
    /// Mask files (`crate::frame::mask`: a PNG, or a `.toml` region of interest): only the
    /// pixels every one of them keeps are analysed.
    pub masks: Vec<PathBuf>,
    /// Learn a static mask from the first N frames (the scene without markers): what is
    /// foreground in any of them is masked from then on. These N frames are not analysed.
    pub learn_mask: Option<u64>,
    /// Save the mask used (the files' and the learned one together) as a PNG at the frame size.
    pub save_mask: Option<PathBuf>,
    /// Exposure and gain set on a camera source.
    pub camera: CameraControls,
    /// Where a video file is decoded (`auto`: on the GPU's NVDEC where it can and is the faster,
    /// `source::video::nvdec_by_default`, unless the backend is the CPU).
    pub decoding: VideoDecoding,
    /// The `MARKERSCOPE_*` knobs (`Tuning::from_env`; the defaults unless the caller read them).
    pub tuning: Tuning,
}

impl AnalyzeOptions {
    /// Defaults for `input` written to `output`: 8-connectivity, the default threshold
    /// (`ThresholdSpec::default`), auto backend, no limit.
    pub fn new(input: impl Into<String>, output: Output) -> Self {
        Self {
            input: input.into(),
            connectivity: Connectivity::Eight,
            threshold: ThresholdSpec::default(),
            invert: false,
            backend: BackendChoice::Auto,
            algorithm: None,
            format: None,
            output,
            max_frames: None,
            synthetic_size: None,
            progress: false,
            tracks: None,
            skipped: None,
            subpixel: true,
            filter: ComponentFilter::default(),
            shapes: false,
            world: None,
            streams: Vec::new(),
            record: None,
            masks: Vec::new(),
            learn_mask: None,
            save_mask: None,
            camera: CameraControls::default(),
            decoding: VideoDecoding::Auto,
            tuning: Tuning::default(),
        }
    }
}

/// What a run did, for the closing lines on stderr.
#[derive(Clone, Debug, PartialEq)]
pub struct AnalyzeSummary {
    /// The source as opened ("clip.mp4 (h264 1920×1080 @30, 300 frames)").
    pub source: String,
    pub frames: u64,
    pub components: u64,
    pub algorithm: String,
    /// Wall time from the first frame requested to the last result written.
    pub elapsed_s: f64,
    /// Frames the worker could not keep up with (live sources only; files never drop).
    pub dropped: u64,
    /// The source (or the engine) failed after `frames` frames: the output holds the frames
    /// before it, and the run counts as failed.
    pub stopped_by: Option<String>,
    /// Resident memory (VmRSS, kB) at the start, after the first `WARM_FRAMES` frames, and at the end.
    pub rss_kb: [Option<u64>; 3],
    /// Tracks the tracker followed (all of them, whether or not `--tracks` was asked for).
    pub tracks: u64,
    /// Mean time per frame of each pipeline step (capture, threshold, the labeler's steps,
    /// filter, track), in the order they run.
    pub mean_steps: Vec<crate::ccl::StepTime>,
    /// Mean end-to-end latency, capture to result (ms).
    pub mean_latency_ms: f64,
    /// The first `SKIPPED_LISTED` things the source left out (damaged frames or images,
    /// undecodable data), in stream order.
    pub skipped: Vec<Skipped>,
    /// How many frames or images were left out, and how many undecodable parts of the input
    /// gave no frame.
    pub skipped_frames: u64,
    pub skipped_data: u64,
    /// What each `--stream` sent and dropped.
    pub streams: Vec<StreamStatus>,
    /// What `--record` saved.
    pub recording: Option<RecordSummary>,
}

impl AnalyzeSummary {
    pub fn components_per_frame(&self) -> f64 {
        self.components as f64 / self.frames.max(1) as f64
    }

    pub fn frames_per_second(&self) -> f64 {
        self.frames as f64 / self.elapsed_s.max(1e-9)
    }

    /// Everything that was left out.
    pub fn skipped_count(&self) -> u64 {
        self.skipped_frames + self.skipped_data
    }
}

/// How many skipped items the summary keeps (the count covers them all).
pub const SKIPPED_LISTED: usize = 10;

/// Pixels a learned static mask reaches beyond what was bright (noise at its edges).
pub const LEARNED_MASK_MARGIN: u32 = 2;

/// Frames after which the "warm" memory sample is taken (buffers allocated, queues full).
pub const WARM_FRAMES: u64 = 100;

/// Runs the analysis. `notice` receives one-line messages meant for stderr (the CPU fallback,
/// a frame size change, live statistics).
pub fn run(opts: &AnalyzeOptions, mut notice: impl FnMut(&str)) -> Result<AnalyzeSummary> {
    let spec = check_source(opts)?;
    let format = opts.format.unwrap_or(match &opts.output {
        Output::File(p) => Format::from_path(p).unwrap_or(Format::Csv),
        Output::Stdout => Format::Csv,
    });
    // Outputs that would overwrite an input, or each other, are refused before anything is
    // opened.
    let mut outputs: Vec<(&str, &Path)> = Vec::new();
    if let Output::File(out) = &opts.output {
        outputs.push(("--out", out));
    }
    if let Some(tracks) = &opts.tracks {
        outputs.push(("--tracks", tracks));
    }
    if let Some(skipped) = &opts.skipped {
        outputs.push(("--skipped", skipped));
    }
    if let Some(record) = &opts.record {
        outputs.push(("--record", record));
    }
    if let Some(save_mask) = &opts.save_mask {
        outputs.push(("--save-mask", save_mask));
    }
    if opts.learn_mask == Some(0) {
        return Err(Error::Invalid(
            "--learn-mask must be at least 1 frame".into(),
        ));
    }
    let mut mask = Mask::default();
    for path in &opts.masks {
        mask = mask.and(Mask::load(path)?)?;
    }
    check_outputs(&spec, &outputs)?;
    opts.filter.validate()?;
    // Open the output before any work: an unwritable path fails in milliseconds.
    let sink = Sink::open(&opts.output)?;
    let tracks_sink = match &opts.tracks {
        Some(path) => Some(Sink::open(&Output::File(path.clone()))?),
        None => None,
    };
    let skipped_sink = match &opts.skipped {
        Some(path) => Some(Sink::open(&Output::File(path.clone()))?),
        None => None,
    };
    let mut recorder = opts.record.as_deref().map(Recorder::create).transpose()?;
    // A bad stream address, or a WebSocket port in use, is a bad request: refused here.
    let streams = Streams::open_all(&opts.streams)?;
    for status in streams.statuses() {
        notice(&format!("streaming to {}", status.url));
    }
    let Started {
        pipeline,
        description,
        algorithm,
        live,
        total,
        mask,
    } = start(opts, &spec, mask, &mut notice)?;
    let mut exporter = Exporter::new(sink.writer(), format).map_err(|e| sink.error(e))?;
    let mut skipped_writer = match &skipped_sink {
        Some(s) => {
            let mut w = s.writer();
            writeln!(w, "{SKIPPED_CSV_HEADER}").map_err(|e| s.error(e))?;
            Some(w)
        }
        None => None,
    };
    let mut skipped: Vec<Skipped> = Vec::new();
    let (mut skipped_frames, mut skipped_data) = (0u64, 0u64);
    // Nothing is kept per track without --tracks.
    let mut track_output = tracks_sink.as_ref().map(TrackOutput::open).transpose()?;
    let mut tracks = TrackCount::default();
    let mut progress = Progress::new(opts.progress && !live, total);
    let mut stats = LiveStats::new(opts.progress && live, &description);
    let rss_start = rss_kb();
    let mut rss_warm = None;
    let started = Instant::now();
    let (mut frames, mut components) = (0u64, 0u64);
    let mut first_size = None;
    let mut stopped_by = None;
    let mut step_sums: Vec<crate::ccl::StepTime> = Vec::new();
    let mut latency_sum = 0.0;
    let mut interrupted = None;
    loop {
        if let Some(signal) = super::interrupt::requested() {
            interrupted = Some(signal);
            break;
        }
        let event = match pipeline.events().recv_timeout(Duration::from_millis(100)) {
            Ok(event) => event,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                stats.tick(&pipeline, &mut notice);
                continue;
            }
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                stopped_by = Some("the pipeline stopped unexpectedly".to_string());
                break;
            }
        };
        match event {
            PipelineEvent::Frame(result) => {
                exporter
                    .write_frame_with(
                        result.index,
                        result.time_s,
                        &result.name,
                        &result.components,
                        &RowExtras::of(&result),
                    )
                    .map_err(|e| sink.error(e))?;
                first_size.get_or_insert((result.grey.width, result.grey.height));
                streams.publish(&result);
                if let Some(r) = &mut recorder {
                    r.record(&result)?;
                }
                for message in streams.notices() {
                    progress.suspend(|| notice(&message));
                }
                tracks.add(&result.track_ids);
                if let Some(out) = &mut track_output {
                    out.frame(&result)?;
                }
                frames += 1;
                components += result.components.len() as u64;
                latency_sum += result.timings.latency_ms;
                for step in &result.timings.steps {
                    match step_sums.iter_mut().find(|s| s.step == step.step) {
                        Some(sum) => sum.ms += step.ms,
                        None => step_sums.push(step.clone()),
                    }
                }
                progress.inc();
                stats.frame(&result);
                stats.tick(&pipeline, &mut notice);
                if frames == WARM_FRAMES {
                    rss_warm = rss_kb();
                }
                if opts.max_frames.is_some_and(|m| frames >= m) {
                    break;
                }
            }
            PipelineEvent::Notice(message) => progress.suspend(|| notice(&message)),
            PipelineEvent::Skipped(skip) => {
                exporter.write_skipped(&skip).map_err(|e| sink.error(e))?;
                if let (Some(w), Some(s)) = (&mut skipped_writer, &skipped_sink) {
                    write_skipped_csv_row(w, &skip).map_err(|e| s.error(e))?;
                }
                match skip.at {
                    SkipAt::Frame(_) => skipped_frames += 1,
                    SkipAt::Before(_) => skipped_data += 1,
                }
                if skipped.len() < SKIPPED_LISTED {
                    skipped.push(skip);
                }
            }
            PipelineEvent::SourceError(why) | PipelineEvent::EngineError(why) => {
                stopped_by = Some(why);
                break;
            }
            PipelineEvent::EndOfStream { .. } => break,
        }
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    let dropped = pipeline.counters().dropped;
    pipeline.stop();
    // Sends what the streams still hold, then closes them.
    let stream_statuses = streams.close();
    let recording = recorder.map(Recorder::finish).transpose()?;
    if let Some(why) = recording.as_ref().and_then(|r| r.ended_early.as_ref()) {
        notice(why);
    }
    progress.finish();
    if let Some(signal) = interrupted.or_else(super::interrupt::requested) {
        // The temporary files are removed with the sinks.
        return Err(Error::Interrupted {
            signal,
            name: super::interrupt::signal_name(signal),
        });
    }
    if let (Some(why), 0) = (&stopped_by, frames) {
        // Nothing analysed: no output (the temporary file is removed with `sink`).
        return Err(Error::Invalid(why.clone()));
    }
    if let (Some(first), 0) = (skipped.first(), frames) {
        let more = skipped_frames + skipped_data - 1;
        let more = if more > 0 {
            format!(" (and {more} more skipped)")
        } else {
            String::new()
        };
        return Err(Error::Invalid(format!(
            "{}: nothing could be analysed: {first}{more}",
            opts.input
        )));
    }
    let writer = exporter.finish().map_err(|e| sink.error(e))?;
    drop(writer);
    if let (Some(mut w), Some(s)) = (skipped_writer, &skipped_sink) {
        w.flush().map_err(|e| s.error(e))?;
    }
    track_output.map(TrackOutput::finish).transpose()?;
    if let Some(tracks_sink) = tracks_sink {
        tracks_sink.commit()?;
    }
    if let Some(skipped_sink) = skipped_sink {
        skipped_sink.commit()?;
    }
    sink.commit()?;
    if let (Some(path), Some((w, h))) = (&opts.save_mask, first_size) {
        mask.fit(w, h)?.save_png(path)?;
    }
    Ok(AnalyzeSummary {
        source: description,
        frames,
        components,
        algorithm,
        elapsed_s,
        dropped,
        stopped_by,
        rss_kb: [rss_start, rss_warm, rss_kb()],
        tracks: tracks.count,
        mean_steps: step_sums
            .into_iter()
            .map(|s| crate::ccl::StepTime::new(s.step, s.ms / frames.max(1) as f64))
            .collect(),
        mean_latency_ms: latency_sum / frames.max(1) as f64,
        skipped,
        skipped_frames,
        skipped_data,
        streams: stream_statuses,
        recording,
    })
}

/// The source of `opts`, parsed, with the checks that need no file: an endless source needs a
/// frame limit, and the limit is at least 1.
pub fn check_source(opts: &AnalyzeOptions) -> Result<SourceSpec> {
    let spec = SourceSpec::parse(&opts.input)?;
    if spec.is_endless() && opts.max_frames.is_none() {
        return Err(Error::Invalid(format!(
            "{spec} never ends: give --max-frames N"
        )));
    }
    if opts.max_frames == Some(0) {
        return Err(Error::Invalid("--max-frames must be at least 1".into()));
    }
    Ok(spec)
}

/// An analysis under way: the pipeline on the opened source, and what the summary reports
/// about it.
pub struct Started {
    /// Every result comes as an event (lossless delivery of results; a live source may still
    /// drop frames before labeling).
    pub pipeline: Pipeline,
    /// The source as opened ("clip.mp4 (h264 1920×1080 @30, 300 frames)").
    pub description: String,
    pub algorithm: String,
    pub live: bool,
    /// Frames to expect, when the source knows (and `max_frames` bounds it).
    pub total: Option<u64>,
    /// The mask applied to every frame: `opts`' masks and the learned static mask (empty: none).
    pub mask: Mask,
}

/// Opens `spec` (image sources read every header here, so bad files fail before any
/// decoding), learns the static mask when asked (`--learn-mask`: from the source's first
/// frames) and adds it to `mask`, resolves the algorithm and starts the pipeline with `opts`'
/// settings: what `run` analyses, and what the Python package's `analyze` iterates over.
pub fn start(
    opts: &AnalyzeOptions,
    spec: &SourceSpec,
    mut mask: Mask,
    notice: &mut dyn FnMut(&str),
) -> Result<Started> {
    let (width, height) = opts.synthetic_size.unwrap_or((
        crate::source::synthetic::DEFAULT_WIDTH,
        crate::source::synthetic::DEFAULT_HEIGHT,
    ));
    let backends = match opts.backend {
        BackendChoice::Cpu => crate::ccl::Backends::cpu_only_tuned(&opts.tuning),
        BackendChoice::Auto | BackendChoice::Cuda => {
            crate::ccl::Backends::detect_tuned(&opts.tuning)
        }
    };
    let mut source = spec.open_with(&OpenOptions {
        realtime: false,
        synthetic_width: width,
        synthetic_height: height,
        camera: opts.camera,
        // Auto without a GPU in use (none there, or the CPU backend asked for): the CPU.
        video_decoding: match opts.decoding {
            VideoDecoding::Auto if backends.gpu_name().is_none() => VideoDecoding::Cpu,
            decoding => decoding,
        },
        nvdec_decoders: opts.tuning.nvdec_decoders,
    })?;
    if let Some(n) = opts.learn_mask {
        let learner = learn_static_mask(source.as_mut(), n, opts)?;
        let learned = learner.finish()?;
        notice(&format!(
            "learned a static mask from {} frame(s): {} pixel(s) masked",
            learner.frames(),
            learned.masked_pixels()
        ));
        mask = mask.and(Mask {
            pixels: Some(learned),
            rois: Vec::new(),
        })?;
    }
    let settings = PipelineSettings {
        threshold: opts.threshold,
        invert: opts.invert,
        connectivity: opts.connectivity,
        algorithm: opts.algorithm.clone(),
        backend: opts.backend,
        filter: opts.filter,
        want_labels: false,
        want_binary: false,
        subpixel: opts.subpixel,
        shapes: opts.shapes,
        world: opts.world.clone(),
        mask: (!mask.is_empty()).then(|| Arc::new(mask.clone())),
    };
    let algorithm = resolve_algorithm(&settings, &backends)?.name.to_string();
    let description = source.describe();
    let live = source.is_live();
    let total = match (source.frame_count(), opts.max_frames) {
        (Some(n), Some(m)) => Some(n.min(m)),
        (n, m) => n.or(m),
    };
    // A live source (camera) drops frames the worker cannot keep up with, and counts them;
    // every result that is made is delivered.
    let delivery = if live {
        Delivery::Live
    } else {
        Delivery::Lossless
    };
    let pipeline = Pipeline::start_with(
        source,
        settings,
        delivery,
        Arc::new(backends),
        EventPolicy::Lossless,
    )?;
    Ok(Started {
        pipeline,
        description,
        algorithm,
        live,
        total,
        mask,
    })
}

/// Learns a static mask from the next `n` frames of `source` (thresholded as the analysis
/// will be); fewer when the source ends first, none is an error.
fn learn_static_mask(
    source: &mut dyn crate::source::FrameSource,
    n: u64,
    opts: &AnalyzeOptions,
) -> Result<StaticMaskLearner> {
    let mut learner = StaticMaskLearner::new(LEARNED_MASK_MARGIN);
    for _ in 0..n {
        let Some(frame) = source.next_frame()? else {
            break;
        };
        learner.add(&crate::threshold::apply(
            &frame.grey,
            &opts.threshold,
            opts.invert,
        )?);
    }
    if learner.frames() == 0 {
        return Err(Error::Invalid(format!(
            "{}: no frame to learn the mask from (--learn-mask {n})",
            opts.input
        )));
    }
    Ok(learner)
}

/// Refuses an output path that is one of the input files (the input would be replaced by the
/// results: for a folder or glob, any of its images), or that another output also names. Paths
/// are compared as the files they reach: device and inode for existing files (through
/// symlinks and hard links), the resolved path otherwise.
fn check_outputs(spec: &SourceSpec, outputs: &[(&str, &Path)]) -> Result<()> {
    #[cfg(unix)]
    fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
        use std::os::unix::fs::MetadataExt;
        a.dev() == b.dev() && a.ino() == b.ino()
    }
    #[cfg(not(unix))]
    fn same_file(_: &std::fs::Metadata, _: &std::fs::Metadata) -> bool {
        false
    }
    let inputs: Vec<PathBuf> = match spec {
        SourceSpec::Video { path, .. } => vec![path.clone()],
        // A listing that fails is reported when the source is opened.
        SourceSpec::Images(s) => crate::source::images::image_paths(s).unwrap_or_default(),
        SourceSpec::Synthetic(_) | SourceSpec::Camera { .. } => Vec::new(),
    };
    let input_meta: Vec<(&PathBuf, std::fs::Metadata)> = inputs
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok().map(|m| (p, m)))
        .filter(|(_, m)| m.is_file())
        .collect();
    for (i, (flag, out)) in outputs.iter().enumerate() {
        if out.as_os_str().is_empty() {
            return Err(Error::Invalid(format!("{flag} is empty: give a file path")));
        }
        if let Ok(meta) = std::fs::metadata(out) {
            if let Some((input, _)) = input_meta.iter().find(|(_, m)| same_file(m, &meta)) {
                let is = if input.as_path() == *out {
                    "is the input".to_string()
                } else {
                    format!("is the same file as the input {}", input.display())
                };
                return Err(Error::Invalid(format!(
                    "{flag} {} {is}: writing the results there would destroy it; choose another output path",
                    out.display()
                )));
            }
        }
        for (other_flag, other) in &outputs[..i] {
            if resolved(out) == resolved(other) {
                return Err(Error::Invalid(format!(
                    "{flag} {} is also the {other_flag} file; give each output its own file",
                    out.display()
                )));
            }
        }
    }
    Ok(())
}

/// Where a path leads: symlinks followed (also one that leads nowhere yet) and the folder made
/// absolute, as far as it exists.
fn resolved(path: &Path) -> PathBuf {
    let path = &follow_symlinks(path);
    if let Ok(p) = std::fs::canonicalize(path) {
        return p;
    }
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => {
            let dir = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            };
            std::fs::canonicalize(dir)
                .map(|d| d.join(name))
                .unwrap_or_else(|_| path.to_path_buf())
        }
        _ => path.to_path_buf(),
    }
}

/// `--tracks`: one summary row per track, written when the tracker says the track ended (the
/// rows of the tracks still running at the end come last, by ID), so that what is held is
/// one record per track alive, not per track seen.
struct TrackOutput<'a> {
    builder: SummaryBuilder,
    writer: TrackWriter<Box<dyn Write + 'a>>,
    sink: &'a Sink,
    /// The ended tracks of one frame (kept for the next).
    ended: Vec<TrackSummary>,
}

impl<'a> TrackOutput<'a> {
    fn open(sink: &'a Sink) -> Result<Self> {
        Ok(Self {
            builder: SummaryBuilder::new(),
            writer: TrackWriter::new(sink.writer()).map_err(|e| sink.error(e))?,
            sink,
            ended: Vec::new(),
        })
    }

    fn frame(&mut self, result: &crate::pipeline::FrameResult) -> Result<()> {
        let detections = Detection::from_rows(&result.components, &result.subpixel);
        self.builder
            .add_frame(result.index, &detections, &result.track_ids);
        self.ended.clear();
        self.builder
            .end_tracks(&result.ended_tracks, &mut self.ended);
        self.writer
            .write(&self.ended)
            .map_err(|e| self.sink.error(e))
    }

    fn finish(mut self) -> Result<()> {
        let running = self.builder.summaries();
        self.writer
            .write(&running)
            .map_err(|e| self.sink.error(e))?;
        drop(self.writer.finish().map_err(|e| self.sink.error(e))?);
        Ok(())
    }
}

/// Counts the tracks in the results without keeping anything per track: the tracker gives a
/// new track an ID larger than every ID before it, so the IDs of a frame that are larger than
/// every ID of the frames before are its new tracks.
#[derive(Debug, Default)]
struct TrackCount {
    count: u64,
    max_id: u64,
}

impl TrackCount {
    fn add(&mut self, ids: &[u64]) {
        let before = self.max_id;
        for &id in ids {
            if id > before {
                self.count += 1;
                self.max_id = self.max_id.max(id);
            }
        }
    }
}

/// The process's resident memory in kB (Linux: VmRSS of /proc/self/status).
pub fn rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// The progress bar: frames, fps and ETA on stderr; indicatif hides it when stderr is not a
/// terminal (logs, tests).
struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    fn new(show: bool, total: Option<u64>) -> Self {
        use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
        if !show {
            return Self(None);
        }
        let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr());
        let template = if total.is_some() {
            "{elapsed_precise} [{bar:30}] {pos}/{len} frames, {per_sec}, ETA {eta}"
        } else {
            "{elapsed_precise} {spinner} {pos} frames, {per_sec}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        Self(Some(bar))
    }

    fn inc(&self) {
        if let Some(bar) = &self.0 {
            bar.inc(1);
        }
    }

    /// Prints around the bar without tearing it.
    fn suspend(&self, f: impl FnOnce()) {
        match &self.0 {
            Some(bar) => bar.suspend(f),
            None => f(),
        }
    }

    fn finish(&mut self) {
        if let Some(bar) = self.0.take() {
            bar.finish_and_clear();
        }
    }
}

/// Once-a-second statistics for live sources (camera): fps, latency, components, drops.
struct LiveStats {
    show: bool,
    what: String,
    since: Instant,
    frames: u64,
    latency_ms: f64,
    components: u64,
}

impl LiveStats {
    fn new(show: bool, what: &str) -> Self {
        Self {
            show,
            what: what.to_string(),
            since: Instant::now(),
            frames: 0,
            latency_ms: 0.0,
            components: 0,
        }
    }

    fn frame(&mut self, result: &crate::pipeline::FrameResult) {
        self.frames += 1;
        self.latency_ms += result.timings.latency_ms;
        self.components += result.components.len() as u64;
    }

    fn tick(&mut self, pipeline: &Pipeline, notice: &mut impl FnMut(&str)) {
        let elapsed = self.since.elapsed().as_secs_f64();
        if !self.show || elapsed < 1.0 {
            return;
        }
        let n = self.frames.max(1) as f64;
        notice(&format!(
            "{}: {:.1} fps, latency {:.1} ms, {:.1} components, {} dropped",
            self.what,
            self.frames as f64 / elapsed,
            self.latency_ms / n,
            self.components as f64 / n,
            pipeline.counters().dropped
        ));
        *self = Self::new(true, &self.what);
    }
}

/// Where the rows go: stdout, or a temporary file renamed onto the target on success
/// (dropped, and so deleted, on failure).
enum Sink {
    Stdout,
    File {
        target: PathBuf,
        temp: tempfile::NamedTempFile,
    },
    /// An existing device or pipe (`/dev/null`, a FIFO): written directly, never replaced.
    Device {
        target: PathBuf,
        file: std::fs::File,
    },
}

impl Sink {
    fn open(output: &Output) -> Result<Sink> {
        match output {
            Output::Stdout if stdout_was_closed() => Err(output_error(
                Path::new("<stdout>"),
                "standard output is closed, so the rows would be lost; redirect it (>/dev/null \
                 to discard them) or use --out FILE",
            )),
            Output::Stdout => Ok(Sink::Stdout),
            Output::File(named) => {
                if named.as_os_str().is_empty() {
                    return Err(output_error(
                        named,
                        "the output path is empty; give a file name",
                    ));
                }
                if named.is_dir() {
                    return Err(output_error(named, "it is a folder"));
                }
                if named.as_os_str().to_string_lossy().ends_with('/') {
                    return Err(output_error(
                        named,
                        "the path ends with /, so it names a folder; give a file name",
                    ));
                }
                if std::fs::metadata(named).is_ok_and(|m| !m.is_file()) {
                    // Renaming a temporary file onto /dev/null would replace the device.
                    let file = std::fs::OpenOptions::new()
                        .write(true)
                        .open(named)
                        .map_err(|e| output_error(named, &e.to_string()))?;
                    return Ok(Sink::Device {
                        target: named.clone(),
                        file,
                    });
                }
                // A symlink is written through: the file it points to is replaced, the link stays.
                let target = follow_symlinks(named);
                let dir = match target.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                    _ => PathBuf::from("."),
                };
                if !dir.is_dir() {
                    let why = if dir.exists() {
                        "is not a folder"
                    } else {
                        "does not exist"
                    };
                    return Err(output_error(named, &format!("{} {why}", dir.display())));
                }
                // An existing file keeps its mode; a new one gets the usual 0666 less the umask
                // (not the temporary file's 0600).
                #[cfg(unix)]
                let mode = {
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::metadata(&target)
                        .ok()
                        .map(|m| m.permissions().mode() & 0o777)
                };
                let prefix = temp_prefix(&target);
                let mut builder = tempfile::Builder::new();
                builder.prefix(&prefix).suffix(".tmp");
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    builder.permissions(std::fs::Permissions::from_mode(0o666));
                }
                // Report the bare reason: tempfile's message names the random temp file.
                let temp = builder.tempfile_in(&dir).map_err(|e| {
                    let why = std::io::Error::from(e.kind());
                    output_error(
                        named,
                        &format!("cannot create a file in {}: {why}", dir.display()),
                    )
                })?;
                #[cfg(unix)]
                if let Some(mode) = mode {
                    use std::os::unix::fs::PermissionsExt;
                    temp.as_file()
                        .set_permissions(std::fs::Permissions::from_mode(mode))
                        .map_err(|e| output_error(named, &e.to_string()))?;
                }
                Ok(Sink::File {
                    target: target.clone(),
                    temp,
                })
            }
        }
    }

    fn writer(&self) -> Box<dyn Write + '_> {
        match self {
            Sink::Stdout => Box::new(BufWriter::new(std::io::stdout().lock())),
            Sink::File { temp, .. } => Box::new(BufWriter::with_capacity(1 << 16, temp.as_file())),
            Sink::Device { file, .. } => Box::new(BufWriter::with_capacity(1 << 16, file)),
        }
    }

    fn error(&self, e: std::io::Error) -> Error {
        match self {
            Sink::Stdout => output_error(Path::new("<stdout>"), &e.to_string()),
            Sink::File { target, .. } | Sink::Device { target, .. } => {
                output_error(target, &e.to_string())
            }
        }
    }

    fn commit(self) -> Result<()> {
        match self {
            Sink::Stdout | Sink::Device { .. } => Ok(()),
            Sink::File { target, temp } => {
                temp.as_file()
                    .sync_all()
                    .map_err(|e| output_error(&target, &e.to_string()))?;
                temp.persist(&target)
                    .map_err(|e| output_error(&target, &e.error.to_string()))?;
                Ok(())
            }
        }
    }
}

/// The temporary file's name is `.NAME.XXXXXX.tmp`; NAME is shortened (on a character
/// boundary) so that the whole stays within the 255 bytes a file name may have.
fn temp_prefix(target: &Path) -> String {
    const MAX_NAME: usize = 255 - ".".len() - ".XXXXXX.tmp".len();
    let name = target
        .file_name()
        .map_or("markerscope".into(), |n| n.to_string_lossy());
    let mut end = name.len().min(MAX_NAME);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!(".{}.", &name[..end])
}

/// The path a chain of symlinks leads to (the path itself when it is not a link). A link
/// that leads nowhere yet gives where the file would be created.
fn follow_symlinks(path: &Path) -> PathBuf {
    let mut path = path.to_path_buf();
    // As many links as the kernel follows.
    for _ in 0..40 {
        let is_link = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link {
            break;
        }
        let Ok(next) = std::fs::read_link(&path) else {
            break;
        };
        path = match path.parent() {
            Some(dir) if next.is_relative() => dir.join(next),
            _ => next,
        };
    }
    path
}

/// Whether the process was started with its standard output closed (`>&-`). Rust's runtime
/// then puts /dev/null, opened read-write, in its place, where every row would vanish without
/// an error; a shell's `>/dev/null` opens it write-only.
#[cfg(target_os = "linux")]
fn stdout_was_closed() -> bool {
    // SAFETY: fcntl(F_GETFL) only reads the descriptor's flags.
    let flags = unsafe { libc::fcntl(1, libc::F_GETFL) };
    if flags < 0 {
        return true;
    }
    flags & libc::O_ACCMODE == libc::O_RDWR
        && std::fs::read_link("/proc/self/fd/1").is_ok_and(|p| p == Path::new("/dev/null"))
}

#[cfg(not(target_os = "linux"))]
fn stdout_was_closed() -> bool {
    false
}

fn output_error(path: &Path, why: &str) -> Error {
    Error::Output {
        path: path.to_path_buf(),
        why: why.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_png(path: &Path, w: u32, h: u32, f: impl Fn(u32, u32) -> u8) {
        let img = image::GrayImage::from_fn(w, h, |x, y| image::Luma([f(x, y)]));
        img.save(path).unwrap();
    }

    fn opts(input: &Path, output: Output) -> AnalyzeOptions {
        AnalyzeOptions {
            threshold: ThresholdSpec::Fixed(127),
            backend: BackendChoice::Cpu,
            ..AnalyzeOptions::new(input.to_str().unwrap(), output)
        }
    }

    #[test]
    fn folder_is_sorted_by_name_and_skips_other_files() {
        let dir = tempfile::tempdir().unwrap();
        write_png(&dir.path().join("b.png"), 4, 4, |x, _| {
            if x == 0 {
                255
            } else {
                0
            }
        });
        write_png(&dir.path().join("a.PNG"), 4, 4, |x, y| {
            if x == y {
                255
            } else {
                0
            }
        });
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        std::fs::create_dir(dir.path().join("sub.png")).unwrap();
        let files = list_inputs(dir.path()).unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap())
            .collect();
        assert_eq!(names, ["a.PNG", "b.png"]);

        let out = dir.path().join("out.jsonl");
        let summary = run(&opts(dir.path(), Output::File(out.clone())), |_| {}).unwrap();
        assert_eq!(summary.frames, 2);
        assert_eq!(summary.stopped_by, None);
        assert_eq!(summary.components, 2);
        assert_eq!(summary.algorithm, "lsl");
        let text = std::fs::read_to_string(&out).unwrap();
        let rows: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(rows[0]["frame"], 0);
        assert_eq!(rows[0]["file"], "a.PNG");
        assert_eq!(rows[0]["area"], 4);
        assert_eq!(rows[1]["frame"], 1);
        assert_eq!(rows[1]["height"], 4);
        // No temporary file left beside the output.
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn empty_folder_and_missing_path_are_errors_naming_the_input() {
        let dir = tempfile::tempdir().unwrap();
        let err = list_inputs(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains(&dir.path().display().to_string()) && err.contains("no image files"),
            "{err}"
        );
        let missing = dir.path().join("nope.png");
        let err = list_inputs(&missing).unwrap_err().to_string();
        assert!(err.contains("nope.png"), "{err}");
    }

    #[test]
    fn a_bad_image_is_skipped_and_nothing_analysed_leaves_no_output_file() {
        let dir = tempfile::tempdir().unwrap();
        write_png(&dir.path().join("a.png"), 4, 4, |_, _| 255);
        std::fs::write(dir.path().join("b.png"), b"not a png").unwrap();
        let out = dir.path().join("out.csv");
        let summary = run(&opts(dir.path(), Output::File(out.clone())), |_| {}).unwrap();
        assert_eq!((summary.frames, summary.skipped_frames), (1, 1));
        assert_eq!(summary.skipped[0].name, "b.png");
        assert_eq!(summary.skipped[0].at, SkipAt::Frame(1));
        std::fs::remove_file(&out).unwrap();

        // A header that reads but data that does not decode: nothing analysed, no output.
        let mut cut = std::fs::read(dir.path().join("a.png")).unwrap();
        cut.truncate(cut.len() - 20);
        let single = dir.path().join("cut.png");
        std::fs::write(&single, cut).unwrap();
        let err = run(&opts(&single, Output::File(out.clone())), |_| {})
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cut.png") && err.contains("nothing could be analysed"),
            "{err}"
        );
        assert!(!out.exists());
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            3,
            "temp file removed"
        );
    }

    #[test]
    fn a_device_output_is_written_in_place_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        write_png(&dir.path().join("a.png"), 4, 4, |_, _| 255);
        let null = Path::new("/dev/null");
        let before = std::fs::metadata(null).unwrap();
        assert!(!before.is_file());
        run(&opts(dir.path(), Output::File(null.to_path_buf())), |_| {}).unwrap();
        assert!(
            !std::fs::metadata(null).unwrap().is_file(),
            "/dev/null replaced"
        );
    }

    #[test]
    fn unknown_algorithm_fails_before_work() {
        let dir = tempfile::tempdir().unwrap();
        write_png(&dir.path().join("a.png"), 4, 4, |_, _| 255);
        let mut o = opts(dir.path(), Output::File(dir.path().join("o.csv")));
        o.algorithm = Some("nope".into());
        let err = run(&o, |_| {}).unwrap_err();
        assert!(matches!(err, Error::UnknownAlgorithm { .. }), "{err}");
        assert!(!dir.path().join("o.csv").exists());
    }
}
