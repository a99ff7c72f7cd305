//! The analysis of a whole source into result files: a video, image, folder, glob, camera or
//! the synthetic demo → threshold → components → CSV/JSONL, one row per component per frame
//! (with `markers`: one row per square fiducial per frame, `crate::output::markers`).
//! `markerscope analyze` runs it, the Python package's `analyze` iterates over its pipeline.
//!
//! Every frame goes through the live pipeline (`crate::pipeline`) with lossless delivery, so
//! analysis and the GUI share one code path. Everything that can be wrong with the request
//! (output not writable, no inputs, unreadable image headers, unknown algorithm, CUDA missing)
//! is checked before the first frame is decoded, and so is an output path that is one of the
//! input files (it would destroy the input). A file output is written to a temporary file
//! beside the target and renamed into place at the end. A damaged image, or undecodable data,
//! is skipped and the analysis goes on: the summary lists what was skipped, JSONL gets a side
//! record for each (`crate::output::export`), `--skipped FILE` a CSV of them. A video frame
//! decoded from damaged data is analysed and flagged (the `damaged` column, the summary's list,
//! `--skipped`), or skipped as the rest with `skip_damaged`. If the source
//! fails part way, the frames before it are kept and the summary says where it stopped; a run
//! that analysed nothing, or that a stop signal interrupted (`interrupt`), leaves no
//! output file behind.

mod frame_sets;
mod frames;
pub mod interrupt;
mod markers;
mod outputs;
mod start;
#[cfg(test)]
mod tests;
pub mod world;

pub use crate::source::images::{check_dimensions, list_inputs, IMAGE_EXTENSIONS};
pub use frame_sets::{FrameSets, Placement};
pub use frames::rss_kb;
pub use markers::marker_settings;
pub use start::{backends_for, start, start_on, Started};

use crate::ccl::{BackendChoice, Backends, Connectivity, StepTime};
use crate::error::{Error, Result};
use crate::fiducial::MarkerSettings;
use crate::frame::mask::Mask;
use crate::geometry::WorldMapping;
use crate::output::columns::{ColumnChoice, InUse};
use crate::output::export::{Encoding, Format};
use crate::output::markers::MarkerColumns;
use crate::output::record::{RecordSummary, Recorder};
use crate::output::stream::{StreamStatus, Streams};
use crate::output::writer::{BatchOptions, OutputTimes};
use crate::pipeline::{ComponentFilter, EventPolicy, Pipeline};
use crate::source::camera_controls::CameraControls;
use crate::source::live_schedule::StartTrigger;
use crate::source::video::VideoDecoding;
use crate::source::{Skipped, SourceSpec};
use crate::threshold::spec::ThresholdSpec;
use crate::tuning::Tuning;
use frames::{Ending, FrameLoop, Sinks, Tally, Writers};
use outputs::check_outputs;
use start::{open_together, Opened};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

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

    /// The file written, if any.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Output::Stdout => None,
            Output::File(p) => Some(p),
        }
    }
}

#[derive(Clone, Debug)]
pub struct AnalyzeOptions {
    /// A source spec (`SourceSpec::parse`): video, image, folder, glob, `camera:N`, `synthetic`.
    pub input: String,
    /// Further sources analysed together with `input` in the same run (`analyze A B C`): each
    /// keeps its own tracker, and the rows carry the source columns (`Column::SOURCES`).
    pub more_inputs: Vec<String>,
    /// Seconds added to each source's frame times on the run's clock, in the order `input`,
    /// `more_inputs` (`--offset`, one per source); a source without one gets 0.
    pub offsets: Vec<f64>,
    pub connectivity: Connectivity,
    pub threshold: ThresholdSpec,
    pub invert: bool,
    pub backend: BackendChoice,
    /// Registry name; None = the backend's default algorithm.
    pub algorithm: Option<String>,
    /// None = from the output file's extension, else CSV.
    pub format: Option<Format>,
    /// The columns of the rows (`crate::output::columns`): all by default.
    pub columns: ColumnChoice,
    /// Parquet and Arrow: frames per row group, compression.
    pub batches: BatchOptions,
    pub output: Output,
    /// Stop after this many frames (required for sources that never end).
    pub max_frames: Option<u64>,
    /// Size of synthetic frames; None = 1280×720.
    pub synthetic_size: Option<(u32, u32)>,
    /// A progress bar on stderr (only drawn when stderr is a terminal), and once-a-second
    /// live statistics for camera sources.
    pub progress: bool,
    /// Also write one row per track (`export::TRACKS_CSV_HEADER`) to this file: CSV, or
    /// Parquet or Arrow by its extension (`crate::output::tracks`).
    pub tracks: Option<PathBuf>,
    /// Also write one row per skipped frame, image or undecodable part of the input
    /// (`export::SKIPPED_CSV_HEADER`) to this CSV file, and one per frame analysed but flagged
    /// damaged.
    pub skipped: Option<PathBuf>,
    /// Leave out the video frames decoded from damaged data (`SkipAt::Damaged`) instead of
    /// analysing them with the `damaged` flag.
    pub skip_damaged: bool,
    /// Grey-weighted (sub-pixel) centroids: the `subpixel_x`/`subpixel_y` columns, and the
    /// positions the tracker follows.
    pub subpixel: bool,
    /// Components kept (area, aspect, circularity, inertia ratio).
    pub filter: ComponentFilter,
    /// Shape descriptor columns (`crate::ccl::descriptors`).
    pub shapes: bool,
    /// Image → world mapping: the `x_world`/`y_world` columns (of every source).
    pub world: Option<Arc<WorldMapping>>,
    /// A mapping of each source, in the order `input`, `more_inputs` (`--world-file` once a
    /// source); empty: `world` applies to every source. When every source of several maps
    /// into the world, their observations are merged into one world view (`world::WorldMerge`).
    pub source_worlds: Vec<Arc<WorldMapping>>,
    /// The merged world view: observations of different sources closer than this (world
    /// units) are one object; None: `world::MERGE_RADIUS_PX` pixels of the coarsest source.
    pub merge_radius: Option<f64>,
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
    /// Other files the request was read from (a calibration, a world file): protected from
    /// the outputs as the source and the masks are.
    pub input_files: Vec<PathBuf>,
    /// Exposure and gain set on a camera source.
    pub camera: CameraControls,
    /// Where a video file is decoded (`auto`: on the GPU's NVDEC where it can and is the faster,
    /// `source::video::nvdec_by_default_for` the number of sources, unless the backend is the
    /// CPU).
    pub decoding: VideoDecoding,
    /// The `MARKERSCOPE_*` knobs (`Tuning::from_env`; the defaults unless the caller read them).
    pub tuning: Tuning,
    /// Square fiducials to find in every frame: the rows are then one per marker per frame
    /// (`crate::output::markers`), and the marker tracks join the `--tracks` rows.
    pub markers: Option<Arc<MarkerSettings>>,
}

impl AnalyzeOptions {
    /// Defaults for `input` written to `output`: 8-connectivity, the default threshold
    /// (`ThresholdSpec::default`), auto backend, no limit.
    pub fn new(input: impl Into<String>, output: Output) -> Self {
        Self {
            input: input.into(),
            more_inputs: Vec::new(),
            offsets: Vec::new(),
            connectivity: Connectivity::Eight,
            threshold: ThresholdSpec::default(),
            invert: false,
            backend: BackendChoice::Auto,
            algorithm: None,
            format: None,
            columns: ColumnChoice::All,
            batches: BatchOptions::default(),
            output,
            max_frames: None,
            synthetic_size: None,
            progress: false,
            tracks: None,
            skipped: None,
            skip_damaged: false,
            subpixel: true,
            filter: ComponentFilter::default(),
            shapes: false,
            world: None,
            source_worlds: Vec::new(),
            merge_radius: None,
            streams: Vec::new(),
            record: None,
            masks: Vec::new(),
            learn_mask: None,
            save_mask: None,
            input_files: Vec::new(),
            camera: CameraControls::default(),
            decoding: VideoDecoding::Auto,
            tuning: Tuning::default(),
            markers: None,
        }
    }

    /// Every source, in the order given.
    pub fn inputs(&self) -> Vec<&str> {
        std::iter::once(self.input.as_str())
            .chain(self.more_inputs.iter().map(String::as_str))
            .collect()
    }

    /// These options for source `k` alone (its input, its offset, its world mapping).
    fn for_source(&self, k: usize) -> AnalyzeOptions {
        let inputs = self.inputs();
        AnalyzeOptions {
            input: inputs[k].to_string(),
            more_inputs: Vec::new(),
            offsets: vec![self.offset(k)],
            world: self.world_of(k),
            source_worlds: Vec::new(),
            ..self.clone()
        }
    }

    /// Source `k`'s world mapping: its own, else the one of every source.
    pub fn world_of(&self, k: usize) -> Option<Arc<WorldMapping>> {
        self.source_worlds.get(k).or(self.world.as_ref()).cloned()
    }

    /// Several sources, each with a world mapping: their observations are merged into one
    /// world view.
    pub fn merges_world(&self) -> bool {
        let sources = self.inputs().len();
        sources > 1 && (0..sources).all(|k| self.world_of(k).is_some())
    }

    /// Source `k`'s `--offset` (0 when none was given).
    pub fn offset(&self, k: usize) -> f64 {
        self.offsets.get(k).copied().unwrap_or(0.0)
    }
}

/// What a run did, for the closing lines on stderr.
#[derive(Clone, Debug, PartialEq)]
pub struct AnalyzeSummary {
    /// The source as opened ("clip.mp4 (h264 1920×1080 @30, 300 frames)"); with several, each
    /// of them, separated by "; ".
    pub source: String,
    /// What each source gave, in the order given (one entry for a run of one source).
    pub sources: Vec<SourceSummary>,
    /// Frame sets formed (several sources; for one, each frame is a set).
    pub frame_sets: u64,
    /// The merged world view, when every source of several maps into the world.
    pub world: Option<WorldSummary>,
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
    /// Markers found over all frames, and the distinct markers (marker tracks) among them;
    /// None without `AnalyzeOptions::markers`.
    pub markers: Option<MarkerCount>,
    /// Mean time per frame of each pipeline step (capture, threshold, the labeler's steps,
    /// filter, track), in the order they run.
    pub mean_steps: Vec<crate::ccl::StepTime>,
    /// Mean end-to-end latency, capture to result (ms).
    pub mean_latency_ms: f64,
    /// The rows written, and the time their formatting and writing took (the `format` and
    /// `write` stages, also at the end of `mean_steps`).
    pub output: OutputTimes,
    /// The first `SKIPPED_LISTED` things the source left out (damaged frames or images,
    /// undecodable data) or flagged (frames decoded from damaged data), in stream order.
    pub skipped: Vec<Skipped>,
    /// How many frames or images were left out, how many undecodable parts of the input gave
    /// no frame, and how many frames were analysed but flagged damaged.
    pub skipped_frames: u64,
    pub skipped_data: u64,
    pub damaged_frames: u64,
    /// What each `--stream` sent and dropped.
    pub streams: Vec<StreamStatus>,
    /// What `--record` saved.
    pub recording: Option<RecordSummary>,
    /// Why `--record` saved nothing, when its encoder stopped part way (a full disk); the rows
    /// are whole all the same.
    pub recording_failed: Option<String>,
}

impl AnalyzeSummary {
    pub fn components_per_frame(&self) -> f64 {
        self.components as f64 / self.frames.max(1) as f64
    }

    pub fn frames_per_second(&self) -> f64 {
        self.frames as f64 / self.elapsed_s.max(1e-9)
    }

    /// Everything that was left out or flagged damaged: each makes the run doubtful.
    pub fn skipped_count(&self) -> u64 {
        self.skipped_frames + self.skipped_data + self.damaged_frames
    }

    /// "output: 14.2 ms a frame (format 3.1, write 11.1), the slowest stage" when writing the
    /// rows takes longer a frame than any step of the pipeline, and a quarter of the run's
    /// time at least: the output sets the rate (not a few microseconds beside faster ones).
    pub fn output_bottleneck(&self) -> Option<String> {
        let (format_ms, write_ms) = self.output.per_frame();
        let output_ms = format_ms + write_ms;
        let slowest_step = self
            .mean_steps
            .iter()
            .filter(|s| s.step != OUTPUT_FORMAT_STEP && s.step != OUTPUT_WRITE_STEP)
            .map(|s| s.ms)
            .fold(0.0, f64::max);
        let output_share = output_ms * self.frames as f64 / (self.elapsed_s * 1e3).max(1e-9);
        (self.frames > 0 && output_ms > slowest_step && output_share >= 0.25).then(|| {
            format!(
                "output: {output_ms:.1} ms a frame (format {format_ms:.1}, write {write_ms:.1}), \
                 the slowest stage"
            )
        })
    }
}

/// What the merged world view of a run of several sources did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WorldSummary {
    /// World tracks started.
    pub tracks: u64,
    /// Markers (`--markers`) placed in the world, each one object across the sources.
    pub markers: u64,
    /// The merge radius used, in world units.
    pub merge_radius: f64,
}

/// What one source of a run gave.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceSummary {
    /// The source as given.
    pub name: String,
    /// The source as opened.
    pub description: String,
    /// What its frames' times are measured by (`TimeStamp::name`).
    pub time_source: &'static str,
    pub frames: u64,
    pub components: u64,
    /// Frames its worker could not keep up with (live sources only).
    pub dropped: u64,
    /// Frames or images it left out, undecodable parts, frames flagged damaged.
    pub skipped: u64,
    /// Why it stopped before its end (it failed); the other sources went on.
    pub stopped_by: Option<String>,
}

/// What a run with markers found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MarkerCount {
    /// Markers over all frames (the marker rows).
    pub seen: u64,
    /// Distinct markers: one track per (dictionary, ID).
    pub tracks: u64,
}

/// How many skipped items the summary keeps (the count covers them all).
pub const SKIPPED_LISTED: usize = 10;

/// Pixels a learned static mask reaches beyond what was bright (noise at its edges).
pub const LEARNED_MASK_MARGIN: u32 = 2;

/// The names of the output's stages in `AnalyzeSummary::mean_steps`: the rows' formatting and
/// their writing.
pub const OUTPUT_FORMAT_STEP: &str = "format";
pub const OUTPUT_WRITE_STEP: &str = "write";

/// Frames after which the "warm" memory sample is taken (buffers allocated, queues full).
pub const WARM_FRAMES: u64 = 100;

/// Runs the analysis. `notice` receives one-line messages meant for stderr (the CPU fallback,
/// a frame size change, live statistics).
pub fn run(opts: &AnalyzeOptions, mut notice: impl FnMut(&str)) -> Result<AnalyzeSummary> {
    let specs = check_sources(opts)?;
    let mask = check_request(opts, &specs)?;
    if let Some(pixels) = &mask.pixels {
        let all = pixels.width() as usize * pixels.height() as usize;
        if pixels.masked_pixels() == all {
            notice("the mask keeps no pixel (it is black everywhere): no component can be found");
        }
    }
    // Open the outputs before any work: an unwritable path fails in milliseconds.
    let sinks = Sinks::open(opts)?;
    let mut recorder = opts.record.as_deref().map(Recorder::create).transpose()?;
    let _recording_temp = recorder
        .as_ref()
        .and_then(Recorder::temp_path)
        .map(|p| interrupt::TempFile::register(p.to_path_buf()));
    // A bad stream address, or a WebSocket port in use, is a bad request: refused here.
    let streams = Streams::open_all(&opts.streams)?;
    for status in streams.statuses() {
        notice(&format!("streaming to {}", status.url));
    }
    let started = start_all(opts, &specs, mask, &mut notice)?;
    // The pipeline computes the shape descriptors also for a filter on them.
    let in_use = InUse {
        subpixel: opts.subpixel,
        shapes: opts.shapes || opts.filter.has_shape_limits(),
        world: opts.world_of(0).is_some(),
        sources: started.len() > 1,
        world_merge: opts.merges_world(),
    };
    let columns = opts.columns.resolve(in_use);
    let mut writers = Writers::open(
        &sinks,
        output_format(opts),
        columns,
        opts.batches.clone(),
        opts.markers.as_ref().map(|_| MarkerColumns {
            sources: in_use.sources,
            world_merge: in_use.world_merge,
        }),
        started.len(),
    )?;
    let mut frames = FrameLoop::new(opts, &started, &streams, recorder.as_mut())?;
    let clock = Instant::now();
    let ending = frames.run(&mut writers, &mut notice)?;
    // The rows still queued are written before the clock stops.
    let finished = writers.finish();
    let elapsed_s = clock.elapsed().as_secs_f64();
    let sources = frames.source_summaries();
    let frame_sets = frames.frame_sets();
    let world = frames.world_summary();
    let FrameLoop {
        mut progress,
        tally,
        ..
    } = frames;
    let dropped = sources.iter().map(|s| s.dropped).sum();
    let description = started
        .iter()
        .map(|s| s.description.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    let algorithm = started[0].algorithm.clone();
    let mask = started[0].mask.clone();
    for source in &started {
        source.pipeline.begin_stop();
    }
    for source in started {
        source.pipeline.stop();
    }
    // Sends what the streams still hold, then closes them.
    let stream_statuses = streams.close();
    progress.finish();
    // Before the recording is renamed into place: an interrupted run keeps the old one.
    check_ending(opts, &ending, &tally)?;
    // A recording that failed part way is lost, the rows are not: they are committed below
    // and the failure reported with them.
    let (recording, recording_failed) = match recorder.map(Recorder::finish).transpose() {
        Ok(recording) => (recording, None),
        Err(e) => (None, Some(e.to_string())),
    };
    if let Some(why) = recording.as_ref().and_then(|r| r.ended_early.as_ref()) {
        notice(why);
    }
    let output = finished?;
    let mut mean_steps = tally.mean_steps();
    let (format_ms, write_ms) = output.per_frame();
    mean_steps.push(StepTime::new(OUTPUT_FORMAT_STEP, format_ms));
    mean_steps.push(StepTime::new(OUTPUT_WRITE_STEP, write_ms));
    if let (Some(sink), Some((w, h))) = (&sinks.mask, tally.first_size) {
        sink.write_all(&mask.fit(w, h)?.png(sink.path())?)?;
    }
    sinks.commit()?;
    Ok(AnalyzeSummary {
        source: description,
        sources,
        frame_sets,
        world,
        frames: tally.frames,
        components: tally.components,
        algorithm,
        elapsed_s,
        dropped,
        stopped_by: ending.stopped_by,
        rss_kb: [tally.rss_start, tally.rss_warm, rss_kb()],
        tracks: tally.tracks.count,
        markers: opts.markers.as_ref().map(|_| tally.markers.count()),
        mean_steps,
        mean_latency_ms: tally.latency_sum / tally.frames.max(1) as f64,
        output,
        skipped: tally.skipped,
        skipped_frames: tally.skipped_frames,
        skipped_data: tally.skipped_data,
        damaged_frames: tally.damaged_frames,
        streams: stream_statuses,
        recording,
        recording_failed,
    })
}

/// The format of the rows: `--format`, else the output file's extension, else CSV.
fn output_format(opts: &AnalyzeOptions) -> Format {
    opts.format.unwrap_or(match &opts.output {
        Output::File(p) => Format::from_path(p).unwrap_or(Format::Csv),
        Output::Stdout => Format::Csv,
    })
}

/// The checks of the request that come before anything is opened: the mask files loaded
/// (their intersection is returned), outputs that would overwrite an input or each other
/// refused, the filter valid.
fn check_request(opts: &AnalyzeOptions, specs: &[SourceSpec]) -> Result<Mask> {
    let named = [
        ("--out", opts.output.path()),
        ("--tracks", opts.tracks.as_deref()),
        ("--skipped", opts.skipped.as_deref()),
        ("--record", opts.record.as_deref()),
        ("--save-mask", opts.save_mask.as_deref()),
    ];
    let outputs: Vec<(&str, &Path)> = named
        .into_iter()
        .filter_map(|(flag, path)| path.map(|p| (flag, p)))
        .collect();
    if opts.batches.frames_per_group == 0 {
        return Err(Error::Invalid(
            "--row-group-frames must be at least 1 frame".into(),
        ));
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
    let inputs: Vec<&Path> = opts
        .masks
        .iter()
        .chain(&opts.input_files)
        .map(PathBuf::as_path)
        .collect();
    for spec in specs {
        check_outputs(spec, &inputs, &outputs)?;
    }
    if specs.len() > 1 {
        check_several(opts, specs.len())?;
    }
    opts.filter.validate()?;
    if let Some(markers) = &opts.markers {
        markers.validate()?;
        check_marker_rows(opts)?;
    }
    Ok(mask)
}

/// What a run of several sources does not do yet: each of these needs a file or a mask of
/// each source.
fn check_several(opts: &AnalyzeOptions, sources: usize) -> Result<()> {
    let alone = [
        ("--tracks", opts.tracks.is_some()),
        ("--record", opts.record.is_some()),
        ("--learn-mask", opts.learn_mask.is_some()),
        ("--save-mask", opts.save_mask.is_some()),
    ];
    if let Some((flag, _)) = alone.iter().find(|(_, given)| *given) {
        return Err(Error::Invalid(format!(
            "{flag} works with one source; with {sources} sources, analyse each of them alone \
             for it"
        )));
    }
    Ok(())
}

/// Marker rows have columns of their own, in CSV or JSONL: the columnar formats and the
/// column choice are the component rows'.
fn check_marker_rows(opts: &AnalyzeOptions) -> Result<()> {
    if let Encoding::Columnar(_) = output_format(opts).encoding() {
        return Err(Error::Invalid(
            "--markers writes its rows as CSV or JSONL; Parquet and Arrow hold component rows \
             only: give --out a .csv or .jsonl file"
                .into(),
        ));
    }
    if opts.columns != ColumnChoice::All {
        return Err(Error::Invalid(
            "--columns chooses among the component rows' columns; the marker rows of --markers \
             always have all of theirs"
                .into(),
        ));
    }
    Ok(())
}

/// A run that was interrupted, or that analysed nothing (a file with no frame, a source whose
/// frames `--learn-mask` took), is an error (and leaves no output: the temporary files are
/// removed with the sinks).
fn check_ending(opts: &AnalyzeOptions, ending: &Ending, tally: &Tally) -> Result<()> {
    if let Some(signal) = ending.interrupted.or_else(interrupt::requested) {
        return Err(Error::Interrupted {
            signal,
            name: interrupt::signal_name(signal),
        });
    }
    if let (Some(why), 0) = (&ending.stopped_by, tally.frames) {
        return Err(Error::Invalid(why.clone()));
    }
    if let (Some(first), 0) = (tally.skipped.first(), tally.frames) {
        let more = tally.skipped_frames + tally.skipped_data + tally.damaged_frames - 1;
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
    if tally.frames == 0 {
        let why = match opts.learn_mask {
            Some(n) => format!(
                "--learn-mask {n} took every frame the source has ({learned}), so none was left \
                 to analyse; learn from fewer frames",
                learned = tally.learned_frames
            ),
            None => "the source gave no frame (a file cut before its first frame?)".to_string(),
        };
        return Err(Error::Invalid(format!("{}: {why}", opts.input)));
    }
    Ok(())
}

/// Every source of `opts`, parsed and checked as `check_source` does; at most one `--offset`
/// per source, each a finite number of seconds.
fn check_sources(opts: &AnalyzeOptions) -> Result<Vec<SourceSpec>> {
    let inputs = opts.inputs();
    if opts.offsets.len() > inputs.len() {
        return Err(Error::Invalid(format!(
            "{} --offset values for {} source(s): give one per source, in the order of the \
             sources",
            opts.offsets.len(),
            inputs.len()
        )));
    }
    if let Some(bad) = opts.offsets.iter().find(|o| !o.is_finite()) {
        return Err(Error::Invalid(format!(
            "--offset {bad}: give a number of seconds"
        )));
    }
    if !opts.source_worlds.is_empty() && opts.source_worlds.len() != inputs.len() {
        return Err(Error::Invalid(format!(
            "{} --world-file values for {} source(s): give one for all, or one per source in \
             the order of the sources",
            opts.source_worlds.len(),
            inputs.len()
        )));
    }
    if let Some(r) = opts.merge_radius.filter(|r| !(r.is_finite() && *r > 0.0)) {
        return Err(Error::Invalid(format!(
            "--merge-radius {r}: give a distance in world units above 0"
        )));
    }
    if opts.merge_radius.is_some() && !opts.merges_world() {
        return Err(Error::Invalid(
            "--merge-radius merges the observations of several sources that each have a world \
             mapping (--world-file, one per source or one for all)"
                .into(),
        ));
    }
    (0..inputs.len())
        .map(|k| {
            let spec = check_source(&opts.for_source(k));
            match spec {
                Err(e) if inputs.len() > 1 => Err(Error::context(source_label(k, inputs[k]), e)),
                spec => spec,
            }
        })
        .collect()
}

/// "source 2 (clip.mp4)": a source named in messages of a run of several.
fn source_label(k: usize, name: &str) -> String {
    format!("source {k} ({name})")
}

/// Opens every source and starts a pipeline on each (`start`); one that fails to open is an
/// error that names it, before any frame is analysed. Live synthetic sources start capturing
/// together once all are started. Several sources whose frames a GPU labeler takes as frame
/// sets (`pipeline::frames_labeled_in_sets`) share one worker (`Pipeline::start_set`).
fn start_all(
    opts: &AnalyzeOptions,
    specs: &[SourceSpec],
    mask: Mask,
    notice: &mut dyn FnMut(&str),
) -> Result<Vec<Started>> {
    let several = specs.len() > 1;
    let inputs = opts.inputs();
    let mut opened: Vec<Opened> = Vec::with_capacity(specs.len());
    // Declared after `opened`, so dropped before it when a source fails to open: the
    // sources opened wait for no start while they are dropped.
    let mut together = StartTrigger::new();
    // The device is opened once for the run: several sources' pipelines each queue their GPU
    // work on a stream of their own on it, one source on its default stream.
    let shared = start::backends_for(opts);
    // The sets' labeler: a stream of its own too.
    let set_backends = match several {
        true => Some(shared.on_own_stream()?),
        false => None,
    };
    let backends: Vec<Backends> = match several {
        true => (0..specs.len())
            .map(|_| shared.on_own_stream())
            .collect::<Result<_>>()?,
        false => vec![shared],
    };
    for ((k, spec), backends) in specs.iter().enumerate().zip(backends) {
        let label = source_label(k, inputs[k]);
        let mut prefixed = |m: &str| {
            if several {
                notice(&format!("{label}: {m}"))
            } else {
                notice(m)
            }
        };
        let signal = Some(together.signal());
        match open_together(
            &opts.for_source(k),
            spec,
            mask.clone(),
            &mut prefixed,
            signal,
            (backends, specs.len()),
        ) {
            Ok(s) => opened.push(s),
            Err(e @ Error::Interrupted { .. }) => return Err(e),
            Err(e) if several => return Err(Error::context(label, e)),
            Err(e) => return Err(e),
        }
    }
    let in_sets = set_backends.filter(|_| {
        opened.iter().all(|o| {
            crate::pipeline::frames_labeled_in_sets(&o.member.settings, &o.member.backends)
        })
    });
    let started = match in_sets {
        Some(set_backends) => {
            let (members, facts): (Vec<_>, Vec<_>) =
                opened.into_iter().map(|o| (o.member, o.facts)).unzip();
            let pipelines =
                Pipeline::start_set(members, EventPolicy::Lossless, Arc::new(set_backends))?;
            facts
                .into_iter()
                .zip(pipelines)
                .map(|(f, p)| f.started(p))
                .collect()
        }
        None => opened
            .into_iter()
            .map(Opened::start)
            .collect::<Result<Vec<_>>>()?,
    };
    together.fire();
    Ok(started)
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
