//! The frame loop: every pipeline event written out, counted and shown.

use super::frame_sets::FrameSets;
use super::outputs::Sink;
use super::start::Started;
use super::world::{MergedFrame, MergedSet, Placed, WorldSets};
use super::{source_label, AnalyzeOptions, Output, SourceSummary, SKIPPED_LISTED, WARM_FRAMES};
use crate::ccl::StepTime;
use crate::error::{Error, Result};
use crate::frame::image::{check_run_memory, resident_memory, RunDensity};
use crate::output::columns::Columns;
use crate::output::export::Format;
use crate::output::export::{write_skipped_csv_row, SKIPPED_CSV_HEADER};
use crate::output::markers::{MarkerColumns, MarkerExporter, MarkerFrame};
use crate::output::record::Recorder;
use crate::output::row_text::{FrameRows, MergedObservation, SourceColumns};
use crate::output::stream::{SourceTag, Streams};
use crate::output::tracks::TrackFile;
use crate::output::writer::{BatchOptions, OutputTimes, RowWriter};
use crate::pipeline::{FrameResult, Pipeline, PipelineEvent};
use crate::source::{DamagedFrames, SkipAt, Skipped, TimeStamp};
use crate::track::{Detection, SummaryBuilder, TrackSummary};
use std::collections::{HashSet, VecDeque};
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The files a run writes, opened before any work: the rows, and `--tracks`, `--skipped` and
/// `--save-mask`.
pub(super) struct Sinks {
    rows: Sink,
    tracks: Option<Sink>,
    skipped: Option<Sink>,
    pub mask: Option<Sink>,
}

impl Sinks {
    pub(super) fn open(opts: &AnalyzeOptions) -> Result<Sinks> {
        let open = |path: &Option<std::path::PathBuf>| {
            path.as_ref()
                .map(|p| Sink::open(&Output::File(p.clone())))
                .transpose()
        };
        Ok(Sinks {
            rows: Sink::open(&opts.output)?,
            tracks: open(&opts.tracks)?,
            skipped: open(&opts.skipped)?,
            mask: open(&opts.save_mask)?,
        })
    }

    /// Each file renamed into place.
    pub(super) fn commit(self) -> Result<()> {
        if let Some(tracks) = self.tracks {
            tracks.commit()?;
        }
        if let Some(skipped) = self.skipped {
            skipped.commit()?;
        }
        if let Some(mask) = self.mask {
            mask.commit()?;
        }
        self.rows.commit()
    }
}

/// The rows of a run: one per component, or one per marker when markers are asked for. The
/// component rows (thousands a frame) are formatted on all cores and written by a thread of
/// their own; the marker rows (a few a frame) are written as they come, their time counted
/// as the output's writing.
enum Rows<'a> {
    Components(RowWriter),
    Markers {
        rows: MarkerExporter<Box<dyn Write + 'a>>,
        times: OutputTimes,
    },
}

/// The writers into the sinks: the rows (and JSONL's skip records), the skipped CSV, the
/// track rows.
pub(super) struct Writers<'a> {
    sinks: &'a Sinks,
    rows: Rows<'a>,
    skipped: Option<Box<dyn Write + 'a>>,
    /// Nothing is kept per track without --tracks.
    tracks: Option<TrackOutput<'a>>,
    /// Per source, the frames flagged damaged whose rows are still to come.
    damaged: Vec<DamagedFrames>,
    /// Component rows held to be formatted together: with several sources, a frame set's
    /// frames each have too few rows to spread over the cores alone, and one after the other
    /// they kept the frame loop's thread busy (eight files: 0.6–0.8 ms a frame of formatting).
    held: Vec<HeldRows>,
    /// Rows held.
    held_rows: usize,
    /// Frames held before they are formatted: the number of sources.
    hold: usize,
}

/// Rows held before they are formatted: at most this many (dense frames go on at once).
const HELD_ROWS: usize = 65_536;

/// A frame's source columns (`SourceColumns`), owned: held rows outlive the frame loop's
/// borrow of its source.
struct RowSource {
    index: u64,
    name: Arc<str>,
    time_source: &'static str,
    frame_set: u64,
    skew_ms: f64,
}

impl RowSource {
    fn columns(&self) -> SourceColumns<'_> {
        SourceColumns {
            index: self.index,
            name: &self.name,
            time_source: self.time_source,
            frame_set: self.frame_set,
            skew_ms: self.skew_ms,
        }
    }
}

/// A frame whose component rows wait for those of the frames after it.
struct HeldRows {
    result: Arc<FrameResult>,
    time_s: f64,
    damaged: bool,
    source: RowSource,
    merged: Arc<[MergedObservation]>,
}

impl HeldRows {
    fn rows(&self) -> FrameRows<'_> {
        let mut frame = FrameRows::of(&self.result);
        frame.time_s = self.time_s;
        frame.extras.damaged = self.damaged;
        frame.extras.source = Some(self.source.columns());
        frame.extras.merged = &self.merged;
        frame
    }
}

impl<'a> Writers<'a> {
    /// `markers`: one row per marker rather than per component (CSV or JSONL only), with
    /// these columns beyond a single source's; `sources`: how many sources the rows are of.
    pub(super) fn open(
        sinks: &'a Sinks,
        format: Format,
        columns: Columns,
        batches: BatchOptions,
        markers: Option<MarkerColumns>,
        sources: usize,
    ) -> Result<Writers<'a>> {
        let rows = match markers {
            Some(columns) => MarkerExporter::with_columns(sinks.rows.writer(), format, columns)
                .map(|rows| Rows::Markers {
                    rows,
                    times: OutputTimes::default(),
                }),
            None => RowWriter::start(sinks.rows.owned_writer()?, format, columns, batches.clone())
                .map(Rows::Components),
        };
        let rows = rows.map_err(|e| sinks.rows.error(e))?;
        let skipped = match &sinks.skipped {
            Some(s) => {
                let mut w = s.writer();
                writeln!(w, "{SKIPPED_CSV_HEADER}").map_err(|e| s.error(e))?;
                Some(w)
            }
            None => None,
        };
        let tracks = sinks
            .tracks
            .as_ref()
            .map(|sink| TrackOutput::open(sink, &batches))
            .transpose()?;
        Ok(Writers {
            sinks,
            rows,
            skipped,
            tracks,
            damaged: vec![DamagedFrames::default(); sources],
            held: Vec::new(),
            held_rows: 0,
            hold: sources.max(1),
        })
    }

    /// The rows of `result`, of source `k`, at `time_s` on the run's clock (`merged`,
    /// `merged_markers`: the merged world view's columns of its component rows and of its
    /// marker rows, or none). Component rows are held until a frame set's worth is (`flush`).
    fn frame(
        &mut self,
        k: usize,
        result: &Arc<FrameResult>,
        (time_s, source): (f64, RowSource),
        merged: Arc<[MergedObservation]>,
        merged_markers: &[MergedObservation],
    ) -> Result<()> {
        let damaged = self.damaged[k].take(result.index);
        match &mut self.rows {
            Rows::Components(_) => {
                self.held_rows += result.components.len();
                self.held.push(HeldRows {
                    result: result.clone(),
                    time_s,
                    damaged,
                    source,
                    merged,
                });
                if self.held.len() >= self.hold || self.held_rows >= HELD_ROWS {
                    self.flush()?;
                }
                Ok(())
            }
            Rows::Markers { rows, times } => {
                let clock = Instant::now();
                let written = rows.write_rows(&MarkerFrame {
                    index: result.index,
                    time_s,
                    file: &result.name,
                    damaged,
                    markers: &result.markers,
                    source: Some(source.columns()),
                    merged: merged_markers,
                });
                times.write_ms += clock.elapsed().as_secs_f64() * 1e3;
                times.frames += 1;
                written.map_err(|e| self.sinks.rows.error(e))
            }
        }
    }

    /// The held component rows formatted (together, on all cores) and queued for the writer.
    pub(super) fn flush(&mut self) -> Result<()> {
        let Rows::Components(rows) = &mut self.rows else {
            return Ok(());
        };
        if self.held.is_empty() {
            return Ok(());
        }
        let frames: Vec<FrameRows<'_>> = self.held.iter().map(HeldRows::rows).collect();
        let written = rows.write_frames(&frames);
        drop(frames);
        self.held.clear();
        self.held_rows = 0;
        written.map_err(|e| self.sinks.rows.error(e))
    }

    /// Something source `k` skipped.
    fn skipped(&mut self, k: usize, skip: &Skipped) -> Result<()> {
        // JSONL's skip records come in order among the rows.
        self.flush()?;
        self.damaged[k].note(skip);
        match &mut self.rows {
            Rows::Components(rows) => rows.write_skipped(skip),
            Rows::Markers { rows, .. } => rows.write_skipped(skip),
        }
        .map_err(|e| self.sinks.rows.error(e))?;
        if let (Some(w), Some(s)) = (&mut self.skipped, &self.sinks.skipped) {
            write_skipped_csv_row(w, skip).map_err(|e| s.error(e))?;
        }
        Ok(())
    }

    /// Everything flushed (the sinks are committed apart); the rows written and the time
    /// their formatting and writing took.
    pub(super) fn finish(mut self) -> Result<OutputTimes> {
        self.flush()?;
        let times = match self.rows {
            Rows::Components(rows) => rows.finish(),
            Rows::Markers { rows, mut times } => {
                times.rows = rows.rows();
                let clock = Instant::now();
                let flushed = rows.finish();
                times.write_ms += clock.elapsed().as_secs_f64() * 1e3;
                flushed.map(|_| times)
            }
        };
        let times = times.map_err(|e| self.sinks.rows.error(e))?;
        if let (Some(mut w), Some(s)) = (self.skipped, &self.sinks.skipped) {
            w.flush().map_err(|e| s.error(e))?;
        }
        self.tracks.map(TrackOutput::finish).transpose()?;
        Ok(times)
    }
}

/// What the frame loop counted, for the summary.
#[derive(Default)]
pub(super) struct Tally {
    pub frames: u64,
    pub components: u64,
    /// The size of the first frame (the saved mask's size).
    pub first_size: Option<(u32, u32)>,
    /// Per step, the sum over the frames.
    pub step_sums: Vec<StepTime>,
    pub latency_sum: f64,
    /// The first `SKIPPED_LISTED` things skipped or flagged, and the counts of all.
    pub skipped: Vec<Skipped>,
    pub skipped_frames: u64,
    pub skipped_data: u64,
    pub damaged_frames: u64,
    /// Frames `--learn-mask` took before the analysis.
    pub learned_frames: u64,
    pub tracks: TrackCount,
    pub markers: MarkerTally,
    pub rss_start: Option<u64>,
    pub rss_warm: Option<u64>,
}

impl Tally {
    fn frame(&mut self, result: &FrameResult) {
        self.frames += 1;
        self.components += result.components.len() as u64;
        self.latency_sum += result.timings.latency_ms;
        for step in &result.timings.steps {
            match self.step_sums.iter_mut().find(|s| s.step == step.step) {
                Some(sum) => sum.ms += step.ms,
                None => self.step_sums.push(step.clone()),
            }
        }
        if self.frames == WARM_FRAMES {
            self.rss_warm = rss_kb();
        }
    }

    fn skipped(&mut self, skip: Skipped) {
        match skip.at {
            SkipAt::Frame(_) => self.skipped_frames += 1,
            SkipAt::Before(_) => self.skipped_data += 1,
            SkipAt::Damaged(_) => self.damaged_frames += 1,
        }
        if self.skipped.len() < SKIPPED_LISTED {
            self.skipped.push(skip);
        }
    }

    /// The mean time per frame of each step, in the order they run.
    pub fn mean_steps(&self) -> Vec<StepTime> {
        self.step_sums
            .iter()
            .map(|s| StepTime::new(s.step.clone(), s.ms / self.frames.max(1) as f64))
            .collect()
    }
}

/// Why the frame loop ended, besides the end of the sources or the frame limit.
pub(super) struct Ending {
    /// A source (or the engine) failed: with one source, the run stopped there; with several,
    /// the others went on.
    pub stopped_by: Option<String>,
    /// A stop signal came.
    pub interrupted: Option<i32>,
}

/// How long the earliest frame waits for a live source that has none to put beside it (a
/// stalled camera): then the others go on without it. Files and rendered frames are always
/// waited for, so that the order of the rows does not depend on the speed of the machine.
const LIVE_WAIT: Duration = Duration::from_millis(200);

/// How long the frame loop waits for an event before it shows the live statistics again.
const RECEIVE_WAIT: Duration = Duration::from_millis(100);

/// One source of the frame loop: its pipeline, its place on the run's clock, the results
/// received and not yet written, and what it gave.
struct SourceRun<'a> {
    /// The source as given.
    name: Arc<str>,
    pipeline: &'a Pipeline,
    live: bool,
    time_stamp: TimeStamp,
    description: &'a str,
    /// Seconds from the run's clock origin to the source's own (live sources opened later
    /// than the first), plus its `--offset`.
    shift_s: f64,
    density: DensityCheck,
    stats: LiveStats,
    /// Results received, waiting for their turn in time order, with when each came.
    ready: VecDeque<(Arc<FrameResult>, Instant)>,
    /// No more events are read from it (its end, a failure, its frame limit).
    done: bool,
    frames: u64,
    components: u64,
    skipped: u64,
    stopped_by: Option<String>,
    /// Its pipeline's drop count when it reached the frame limit: a live source goes on
    /// capturing, unread, while the others reach theirs, and those frames are not its drops.
    dropped_at_limit: Option<u64>,
}

impl SourceRun<'_> {
    /// The time of `result` on the run's clock.
    fn clock_s(&self, result: &FrameResult) -> f64 {
        result.time_s + self.shift_s
    }

    /// It goes on and has no result waiting: the next is to be received.
    fn waiting(&self) -> bool {
        !self.done && self.ready.is_empty()
    }

    /// Its events are read: it has no result waiting, or it is live (a live source's results
    /// are taken as they come even while others are waited for, or it would drop frames: a
    /// stalled camera must not make the others lose theirs). Files wait until their results
    /// are written, so that their results are never held in memory in bulk.
    fn listened(&self) -> bool {
        !self.done && (self.ready.is_empty() || self.live)
    }

    /// No more events: the result the memory check held, if any, is still written.
    fn end(&mut self, why: Option<String>) {
        self.done = true;
        if self.stopped_by.is_none() {
            self.stopped_by = why;
        }
        if let Some(first) = self.density.rest() {
            self.ready.push_back((first, Instant::now()));
        }
    }
}

/// The frame loop: the results of every source, merged in time order on the run's clock,
/// grouped into frame sets, and each to the writers, the streams and the recording, and
/// counted.
pub(super) struct FrameLoop<'a> {
    opts: &'a AnalyzeOptions,
    sources: Vec<SourceRun<'a>>,
    sets: FrameSets,
    /// The merged world view, when every source of several maps into the world.
    world: Option<WorldSets>,
    streams: &'a Streams,
    recorder: Option<&'a mut Recorder>,
    pub progress: Progress,
    pub tally: Tally,
}

impl<'a> FrameLoop<'a> {
    /// `started`: the sources in the order given (their names are `opts.inputs()`).
    pub(super) fn new(
        opts: &'a AnalyzeOptions,
        started: &'a [Started],
        streams: &'a Streams,
        recorder: Option<&'a mut Recorder>,
    ) -> Result<FrameLoop<'a>> {
        // The clock starts when the first live source opened; files and rendered frames
        // carry times of their own.
        let origin = started.iter().filter_map(|s| s.clock_origin).min();
        let names = opts.inputs();
        let sources = started
            .iter()
            .enumerate()
            .map(|(k, s)| {
                let since_origin = match (s.clock_origin, origin) {
                    (Some(own), Some(first)) => own.duration_since(first).as_secs_f64(),
                    _ => 0.0,
                };
                SourceRun {
                    name: names[k].into(),
                    pipeline: &s.pipeline,
                    live: s.live,
                    time_stamp: s.time_stamp,
                    description: &s.description,
                    shift_s: since_origin + opts.offset(k),
                    density: DensityCheck::default(),
                    stats: LiveStats::new(opts.progress && s.live, &s.description),
                    ready: VecDeque::new(),
                    done: false,
                    frames: 0,
                    components: 0,
                    skipped: 0,
                    stopped_by: None,
                    dropped_at_limit: None,
                }
            })
            .collect();
        let any_live = started.iter().any(|s| s.live);
        let total = started.iter().map(|s| s.total).sum::<Option<u64>>();
        let rates: Vec<Option<f64>> = started.iter().map(|s| s.fps).collect();
        let world = match opts.merges_world() {
            true => {
                let mappings = (0..started.len())
                    .filter_map(|k| opts.world_of(k))
                    .collect();
                Some(WorldSets::new(mappings, opts.merge_radius)?)
            }
            false => None,
        };
        Ok(FrameLoop {
            opts,
            sources,
            sets: FrameSets::new(&rates),
            world,
            streams,
            recorder,
            progress: Progress::new(opts.progress && !any_live, total),
            tally: Tally {
                rss_start: rss_kb(),
                learned_frames: started.iter().map(|s| s.learned_frames).sum(),
                ..Tally::default()
            },
        })
    }

    /// Until every source ended, reached the frame limit or failed, or a stop signal comes;
    /// an output that cannot be written is an error.
    pub(super) fn run(
        &mut self,
        writers: &mut Writers<'_>,
        notice: &mut impl FnMut(&str),
    ) -> Result<Ending> {
        let mut ending = Ending {
            stopped_by: None,
            interrupted: None,
        };
        loop {
            if let Some(signal) = super::interrupt::requested() {
                ending.interrupted = Some(signal);
                break;
            }
            self.write_ready(writers, notice)?;
            if self.sources.iter().all(|s| s.done && s.ready.is_empty()) {
                break;
            }
            self.receive(writers, notice)?;
        }
        // The sets still open are whole now (an interrupted run writes nothing).
        if let (Some(world), None) = (&mut self.world, ending.interrupted) {
            for set in world.finish() {
                self.write_set(set, writers, notice)?;
            }
        }
        ending.stopped_by = self.stopped_by();
        Ok(ending)
    }

    /// Why sources failed: one's reason as it is, several's each with its name.
    fn stopped_by(&self) -> Option<String> {
        if let [only] = self.sources.as_slice() {
            return only.stopped_by.clone();
        }
        let failed: Vec<String> = self
            .sources
            .iter()
            .enumerate()
            .filter_map(|(k, s)| {
                let why = s.stopped_by.as_ref()?;
                Some(format!("{}: {why}", source_label(k, &s.name)))
            })
            .collect();
        (!failed.is_empty()).then(|| failed.join("; "))
    }

    /// Waits (a little) for the next event of a source that has no result waiting or is live,
    /// and handles it.
    fn receive(&mut self, writers: &mut Writers<'_>, notice: &mut impl FnMut(&str)) -> Result<()> {
        let mut listened = self
            .sources
            .iter()
            .enumerate()
            .filter(|(_, s)| s.listened());
        let (first, second) = (listened.next(), listened.next());
        let received = match (first, second) {
            (None, _) => {
                // Every file has a result waiting, every live source ended.
                writers.flush()?;
                std::thread::sleep(Duration::from_millis(5));
                return Ok(());
            }
            // One source to wait for (every frame of a run of one): its queue alone, with
            // nothing to gather a frame.
            (Some((k, source)), None) => {
                match source.pipeline.events().recv_timeout(RECEIVE_WAIT) {
                    Ok(event) => Some((k, Ok(event))),
                    Err(crossbeam_channel::RecvTimeoutError::Timeout) => None,
                    Err(crossbeam_channel::RecvTimeoutError::Disconnected) => Some((k, Err(()))),
                }
            }
            // The rows held are formatted while the loop would wait anyway.
            (Some(_), Some(_)) => match self.select_event(Duration::ZERO) {
                Some(event) => Some(event),
                None => {
                    writers.flush()?;
                    self.select_event(RECEIVE_WAIT)
                }
            },
        };
        match received {
            None => {
                for s in &mut self.sources {
                    s.stats.tick(s.pipeline, notice);
                }
                Ok(())
            }
            Some((k, Ok(event))) => self.event(k, event, writers, notice),
            Some((k, Err(()))) => {
                self.sources[k].end(Some("the pipeline stopped unexpectedly".to_string()));
                Ok(())
            }
        }
    }

    /// The first event of the sources listened to (several), with its source; none within
    /// `wait`; an error where a source's pipeline is gone.
    fn select_event(
        &self,
        wait: Duration,
    ) -> Option<(usize, std::result::Result<PipelineEvent, ()>)> {
        let listened: Vec<usize> = (0..self.sources.len())
            .filter(|&k| self.sources[k].listened())
            .collect();
        let mut select = crossbeam_channel::Select::new();
        for &k in &listened {
            select.recv(self.sources[k].pipeline.events());
        }
        let operation = select.select_timeout(wait).ok()?;
        let k = listened[operation.index()];
        let event = operation.recv(self.sources[k].pipeline.events());
        Some((k, event.map_err(|_| ())))
    }

    fn event(
        &mut self,
        k: usize,
        event: PipelineEvent,
        writers: &mut Writers<'_>,
        notice: &mut impl FnMut(&str),
    ) -> Result<()> {
        let several = self.sources.len() > 1;
        let source = &mut self.sources[k];
        let label = || source_label(k, &source.name);
        match event {
            PipelineEvent::Frame(result) => {
                // A calibration made at another size than the frames' maps them wrongly:
                // refused at the first frame, before its rows are written.
                if let Some(world) = self.opts.world_of(k) {
                    let (w, h) = (result.grey.width, result.grey.height);
                    match world.check_frame_size(w, h) {
                        Err(e) if several => return Err(Error::context(label(), e)),
                        checked => checked?,
                    }
                }
                let only = self.opts.max_frames == Some(1);
                match source.density.admit(result, only) {
                    Ok(ready) => {
                        let now = Instant::now();
                        source
                            .ready
                            .extend(ready.into_iter().flatten().map(|r| (r, now)));
                    }
                    Err(why) => source.end(Some(why)),
                }
            }
            PipelineEvent::Notice(message) if several => {
                let message = format!("{}: {message}", label());
                self.progress.suspend(|| notice(&message));
            }
            PipelineEvent::Notice(message) => self.progress.suspend(|| notice(&message)),
            PipelineEvent::Skipped(mut skip) => {
                if several {
                    skip.reason = format!("{}: {}", label(), skip.reason);
                }
                source.skipped += 1;
                writers.skipped(k, &skip)?;
                self.tally.skipped(skip);
            }
            PipelineEvent::SourceError(why) | PipelineEvent::EngineError(why) => {
                if several {
                    let message = format!("{}: stopped: {why}; the other sources go on", label());
                    self.progress.suspend(|| notice(&message));
                }
                self.sources[k].end(Some(why));
            }
            PipelineEvent::EndOfStream { .. } => source.end(None),
        }
        Ok(())
    }

    /// Writes the waiting results in time order, as far as it is known: while every source
    /// that goes on has a result waiting (a live source that has none is not waited for past
    /// `LIVE_WAIT`).
    fn write_ready(
        &mut self,
        writers: &mut Writers<'_>,
        notice: &mut impl FnMut(&str),
    ) -> Result<()> {
        loop {
            let mut earliest: Option<(usize, f64)> = None;
            for (k, s) in self.sources.iter().enumerate() {
                if let Some((result, _)) = s.ready.front() {
                    let t = s.clock_s(result);
                    if earliest.is_none_or(|(_, e)| t < e) {
                        earliest = Some((k, t));
                    }
                }
            }
            let Some((k, time_s)) = earliest else {
                return Ok(());
            };
            // Sources that go on with no result waiting: the earliest waits for them.
            let mut missing = self.sources.iter().filter(|s| s.waiting()).peekable();
            let may_go_on = missing.peek().is_none() || {
                let waited = self.sources[k]
                    .ready
                    .front()
                    .is_some_and(|(_, came)| came.elapsed() >= LIVE_WAIT);
                waited && missing.all(|s| s.live)
            };
            if !may_go_on {
                return Ok(());
            }
            if let Some((result, _)) = self.sources[k].ready.pop_front() {
                self.frame(k, time_s, writers, &result, notice)?;
            }
        }
    }

    /// Places the frame in its set, counts it, and writes it, or holds it until its set is
    /// whole (the merged world view).
    fn frame(
        &mut self,
        k: usize,
        time_s: f64,
        writers: &mut Writers<'_>,
        result: &Arc<FrameResult>,
        notice: &mut impl FnMut(&str),
    ) -> Result<()> {
        let placement = self.sets.place(k, time_s);
        let source = &mut self.sources[k];
        source.frames += 1;
        if self.opts.max_frames.is_some_and(|m| source.frames >= m) {
            source.done = true;
            source.ready.clear();
            source.dropped_at_limit = Some(source.pipeline.counters().dropped);
        }
        let placed = Placed {
            source: k,
            time_s,
            placement,
            result: result.clone(),
        };
        match &mut self.world {
            None => self.write(placed, Arc::new([]), &[], writers, notice),
            Some(world) => {
                for set in world.add(placed, self.sets.span_s()) {
                    self.write_set(set, writers, notice)?;
                }
                Ok(())
            }
        }
    }

    /// A merged frame set: its frames, then its world view to the streams.
    fn write_set(
        &mut self,
        set: MergedSet,
        writers: &mut Writers<'_>,
        notice: &mut impl FnMut(&str),
    ) -> Result<()> {
        for MergedFrame {
            frame,
            components,
            markers,
        } in set.frames
        {
            self.write(frame, components.into(), &markers, writers, notice)?;
        }
        if !self.streams.is_empty() {
            self.streams.publish_world(&Arc::new(set.view));
        }
        Ok(())
    }

    /// The frame's rows, streams and recording, and what the summary counts of it (`merged`,
    /// `merged_markers`: the merged world view's columns of its component and marker rows).
    fn write(
        &mut self,
        frame: Placed,
        merged: Arc<[MergedObservation]>,
        merged_markers: &[MergedObservation],
        writers: &mut Writers<'_>,
        notice: &mut impl FnMut(&str),
    ) -> Result<()> {
        let Placed {
            source: k,
            time_s,
            placement: placed,
            result,
        } = frame;
        let result = &result;
        let several = self.sources.len() > 1;
        let source = &mut self.sources[k];
        let columns = RowSource {
            index: k as u64,
            name: source.name.clone(),
            time_source: source.time_stamp.name(),
            frame_set: placed.set,
            skew_ms: placed.skew_s * 1e3,
        };
        writers.frame(k, result, (time_s, columns), merged.clone(), merged_markers)?;
        self.tally
            .first_size
            .get_or_insert((result.grey.width, result.grey.height));
        if several {
            let tag = SourceTag {
                index: k,
                name: source.name.clone(),
                frame_set: placed.set,
                merged,
                merged_markers: merged_markers.into(),
            };
            self.streams.publish_from(result, &tag);
        } else {
            self.streams.publish(result);
        }
        if let Some(r) = &mut self.recorder {
            r.record(result);
        }
        for message in self.streams.notices() {
            self.progress.suspend(|| notice(&message));
        }
        self.tally.tracks.add(&result.track_ids);
        self.tally.markers.add(result);
        if let Some(out) = &mut writers.tracks {
            out.frame(result)?;
        }
        self.tally.frame(result);
        self.progress.inc();
        source.components += result.components.len() as u64;
        source.stats.frame(result);
        source.stats.tick(source.pipeline, notice);
        Ok(())
    }

    /// What each source gave (its pipeline's drop count read now: before it stops).
    pub(super) fn source_summaries(&self) -> Vec<SourceSummary> {
        self.sources
            .iter()
            .map(|s| SourceSummary {
                name: s.name.to_string(),
                description: s.description.to_string(),
                time_source: s.time_stamp.name(),
                frames: s.frames,
                components: s.components,
                dropped: s
                    .dropped_at_limit
                    .unwrap_or_else(|| s.pipeline.counters().dropped),
                skipped: s.skipped,
                stopped_by: s.stopped_by.clone(),
            })
            .collect()
    }

    /// The frame sets formed.
    pub(super) fn frame_sets(&self) -> u64 {
        self.sets.count()
    }

    /// What the merged world view did, if there is one.
    pub(super) fn world_summary(&self) -> Option<super::WorldSummary> {
        self.world.as_ref().map(WorldSets::summary)
    }
}

/// The run's memory, checked as its frames show how dense they are
/// (`image::check_run_memory`): on each frame denser than any checked before (more components,
/// or more of them new tracks), so a run stops with the figures before it outgrows the memory,
/// not killed part way. Where the first frame's components would not fit if each started a
/// track every frame, its result is held until the second frame says how many tracks a frame
/// starts, so that a run too dense from the start stops before any row is written (exit 2, no
/// output). Held only then: it costs one result's memory.
#[derive(Default)]
struct DensityCheck {
    held: Option<Arc<FrameResult>>,
    /// The highest track ID so far: a frame's tracks above it are new.
    last_track: u64,
    /// The densest frame checked so far.
    checked: Option<RunDensity>,
}

impl DensityCheck {
    /// The results to hand on now, in order, or why the run cannot go on. `only`: the run
    /// takes one frame, so nothing is held (and nothing grows).
    fn admit(
        &mut self,
        result: Arc<FrameResult>,
        only: bool,
    ) -> std::result::Result<[Option<Arc<FrameResult>>; 2], String> {
        let components = result.components.len() as u64;
        if self.checked.is_none() && self.held.is_none() && !only {
            // The first frame: all its tracks are new; whether they stay so, the next says.
            self.last_track = max_track(&result);
            self.checked = Some(density(&result, 0));
            if check_run_memory(density(&result, components)).is_err() {
                self.held = Some(result);
                return Ok([None, None]);
            }
            return Ok([Some(result), None]);
        }
        // One pass: the tracks above the highest so far are new, and the highest moves on.
        let (mut new_tracks, mut highest) = (0u64, self.last_track);
        for &id in &result.track_ids {
            new_tracks += u64::from(id > self.last_track);
            highest = highest.max(id);
        }
        self.last_track = highest;
        let now = density(&result, new_tracks);
        let denser = self
            .checked
            .is_none_or(|c| now.components > c.components || now.new_tracks > c.new_tracks);
        // A run stopped here writes nothing of a held first frame.
        let first = self.held.take();
        if denser && !only {
            self.checked = Some(now);
            check_run_memory(now).map_err(|e| format!("frame {}: {e}", result.index))?;
        }
        Ok([first, Some(result)])
    }

    /// The first frame, when no second came.
    fn rest(&mut self) -> Option<Arc<FrameResult>> {
        self.held.take()
    }
}

fn max_track(result: &FrameResult) -> u64 {
    result.track_ids.iter().copied().max().unwrap_or(0)
}

/// The density of frames like `result`, `new_tracks` of whose components start a track.
fn density(result: &FrameResult, new_tracks: u64) -> RunDensity {
    RunDensity {
        width: result.grey.width,
        height: result.grey.height,
        components: result.components.len() as u64,
        new_tracks,
    }
}

/// `--tracks`: one summary row per track, written when the tracker says the track ended (the
/// rows of the tracks still running at the end come last, by ID), so that what is held is
/// one record per track alive, not per track seen.
struct TrackOutput<'a> {
    builder: SummaryBuilder,
    writer: TrackFile,
    sink: &'a Sink,
    /// The ended tracks of one frame (kept for the next).
    ended: Vec<TrackSummary>,
}

impl<'a> TrackOutput<'a> {
    fn open(sink: &'a Sink, batches: &BatchOptions) -> Result<Self> {
        let file = TrackFile::create(sink.owned_writer()?, sink.path(), batches);
        Ok(Self {
            builder: SummaryBuilder::new(),
            writer: file.map_err(|e| sink.error(e))?,
            sink,
            ended: Vec::new(),
        })
    }

    /// The frame's component tracks and marker tracks (a marker track never ends: its
    /// marker may come back; its row comes at the end).
    fn frame(&mut self, result: &FrameResult) -> Result<()> {
        let detections = Detection::from_rows(&result.components, &result.subpixel);
        self.builder
            .add_frame(result.index, &detections, &result.track_ids);
        if !result.markers.is_empty() {
            let (points, tracks) = marker_points(result);
            self.builder.add_frame(result.index, &points, &tracks);
        }
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
        self.writer.finish().map_err(|e| self.sink.error(e))
    }
}

/// Each marker of a frame as a tracked point (its centre and area) and its track.
fn marker_points(result: &FrameResult) -> (Vec<Detection>, Vec<u64>) {
    result
        .markers
        .iter()
        .map(|o| {
            let [x, y] = o.marker.centre();
            (Detection::point(x, y, o.marker.area()), o.track)
        })
        .unzip()
}

/// The markers of a run: how many rows, and the distinct marker tracks (at most one per
/// marker of the dictionaries).
#[derive(Debug, Default)]
pub(super) struct MarkerTally {
    seen: u64,
    tracks: HashSet<u64>,
}

impl MarkerTally {
    fn add(&mut self, result: &FrameResult) {
        self.seen += result.markers.len() as u64;
        self.tracks.extend(result.markers.iter().map(|o| o.track));
    }

    pub fn count(&self) -> super::MarkerCount {
        super::MarkerCount {
            seen: self.seen,
            tracks: self.tracks.len() as u64,
        }
    }
}

/// Counts the tracks in the results without keeping anything per track: the tracker gives a
/// new track an ID larger than every ID before it, so the IDs of a frame that are larger than
/// every ID of the frames before are its new tracks.
#[derive(Debug, Default)]
pub(super) struct TrackCount {
    pub count: u64,
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
    resident_memory().map(|b| b / 1024)
}

/// The progress bar: frames, fps and ETA on stderr; indicatif hides it when stderr is not a
/// terminal (logs, tests).
pub(super) struct Progress(Option<indicatif::ProgressBar>);

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

    pub(super) fn finish(&mut self) {
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

    fn frame(&mut self, result: &FrameResult) {
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
