//! The window's state, apart from the panels that draw it: the settings the user chose, the
//! latest frame, timing history and messages. It changes only through `handle_event` (what
//! the pipeline sends) and the panels (what the user does), so tests can drive it without
//! threads by feeding `PipelineEvent`s.

use super::config::{UiSettings, ViewMode};
use super::masks::MaskState;
use super::streams::StreamList;
use super::tracks::TrackHistory;
use super::world::WorldEditor;
use crate::ccl::{Backends, StepTime};
use crate::pipeline::{
    FrameResult, PipelineCounters, PipelineEvent, PipelineSettings, SourceCommand,
};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where frames come from: the live pipeline, or a fixed frame (benchmark). The window talks to
/// it only through this trait.
pub trait FrameFeed {
    /// Events that arrived since the last call; never blocks.
    fn poll(&mut self) -> Vec<PipelineEvent>;
    /// The pipeline applies `settings` from the next frame.
    fn set_settings(&mut self, settings: &PipelineSettings);
    fn command(&mut self, command: SourceCommand);
    /// Opens a source spec (`synthetic`, `camera:0`, a path, ...) and switches to it.
    fn open(&mut self, spec: &str) -> crate::Result<SourceInfo>;
    fn counters(&self) -> PipelineCounters;
    /// Camera controls for the cameras opened from now on; exposure and gain also go to a
    /// camera that is streaming.
    fn set_camera_controls(&mut self, controls: crate::source::camera_controls::CameraControls) {
        let _ = controls;
    }
}

/// What the window knows about the current source.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SourceInfo {
    pub description: String,
    pub is_live: bool,
    pub frame_count: Option<u64>,
    pub fps: Option<f64>,
    /// What a camera supports of the controls the window sets; None for other sources.
    pub camera: Option<crate::source::camera_controls::CameraCapabilities>,
}

/// Playback state of a file source (what the controls show).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Playback {
    pub playing: bool,
    pub speed: f64,
}

/// Which page the central area shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tab {
    Live,
    Compare,
}

/// Per-frame timings kept for the history plot.
#[derive(Clone, Debug)]
pub struct TimingRecord {
    pub index: u64,
    pub steps: Vec<StepTime>,
    pub latency_ms: f64,
}

/// How many frames the history plot keeps.
pub const HISTORY_LEN: usize = 300;

pub struct AppState {
    pub settings: UiSettings,
    pub tab: Tab,
    pub frame: Option<Arc<FrameResult>>,
    /// Frames received since start (for --exit-after-frames and the fps).
    pub frames_received: u64,
    pub counters: PipelineCounters,
    pub history: VecDeque<TimingRecord>,
    /// Arrival times of the last frames (result rate).
    arrivals: VecDeque<Instant>,
    /// Start times of the last UI passes (redraw rate).
    redraws: VecDeque<Instant>,
    /// Time of the last UI pass, shown as the "ui" step.
    pub ui_ms: f64,
    /// Newest last; each with when it arrived.
    pub messages: VecDeque<(Instant, String)>,
    /// The component highlighted in the view and the table (its label in the current frame).
    /// When it has a track, the selection follows that track from frame to frame
    /// (`tracks.selected_id()`); set it through `select`.
    pub selected: Option<u32>,
    /// Recent positions of the live tracks (view tails) and the selected track's history.
    pub tracks: TrackHistory,
    /// Ask the view to centre on the selected component (a click in the table).
    pub focus_selected: bool,
    pub source: SourceInfo,
    pub playback: Playback,
    pub end_of_stream: bool,
    /// GPU name, or `"CPU backend: <reason>"`.
    pub backend_banner: String,
    pub cuda_unavailable: Option<String>,
    /// Requests from the panels, carried out by the app after the pass.
    pub open_requests: Vec<String>,
    pub commands: Vec<SourceCommand>,
    /// Live result streams: every frame is published to them as it arrives.
    pub streams: StreamList,
    /// The mask applied before labeling, and the region or static mask being made.
    pub masks: MaskState,
    /// The spec of the source open now (to open it again with new camera controls).
    pub source_spec: String,
    /// The reference points being picked and typed for world coordinates.
    pub world: WorldEditor,
    /// Why the source stopped delivering (its error, or its end), until it delivers again.
    pub source_error: Option<String>,
}

impl AppState {
    pub fn new(settings: UiSettings, backends: &Backends) -> Self {
        let cuda_unavailable = backends.cuda_unavailable_reason();
        let backend_banner = match (backends.gpu_name(), &cuda_unavailable) {
            (Some(name), _) => format!("GPU: {name}"),
            (None, Some(why)) => format!("CPU backend: {why}"),
            (None, None) => "CPU backend".into(),
        };
        let tracks = TrackHistory::new(settings.tail_frames);
        let world = WorldEditor::from_settings(&settings);
        let (streams, stream_problems) = StreamList::open_all(&settings.streams);
        let mut state = Self {
            settings,
            tab: Tab::Live,
            frame: None,
            frames_received: 0,
            counters: PipelineCounters::default(),
            history: VecDeque::with_capacity(HISTORY_LEN),
            arrivals: VecDeque::new(),
            redraws: VecDeque::new(),
            ui_ms: 0.0,
            messages: VecDeque::new(),
            selected: None,
            tracks,
            focus_selected: false,
            source: SourceInfo::default(),
            playback: Playback {
                playing: true,
                speed: 1.0,
            },
            end_of_stream: false,
            backend_banner,
            cuda_unavailable,
            open_requests: Vec::new(),
            commands: Vec::new(),
            streams,
            masks: MaskState::default(),
            source_spec: String::new(),
            world,
            source_error: None,
        };
        for problem in stream_problems {
            state.message(problem);
        }
        let mask_file = state.settings.mask_file.clone();
        if !mask_file.is_empty() {
            if let Err(e) = state.masks.load(std::path::Path::new(&mask_file)) {
                state.message(format!("mask.file: {e}"));
            }
        }
        state
    }

    /// The state of a source shown beside the selected one. The window's streams stay with
    /// the selected source's state (`hand_window_to`), so none are opened here.
    pub fn beside(settings: UiSettings, backends: &Backends) -> Self {
        let streams = settings.streams.clone();
        let mut state = Self::new(
            UiSettings {
                streams: Vec::new(),
                ..settings
            },
            backends,
        );
        state.settings.streams = streams;
        state
    }

    /// Hands what belongs to the window rather than to one source (the page shown, the
    /// notices, the streams, the redraw times) to `next`, the state of the source selected now.
    pub fn hand_window_to(&mut self, next: &mut AppState) {
        std::mem::swap(&mut self.tab, &mut next.tab);
        std::mem::swap(&mut self.messages, &mut next.messages);
        std::mem::swap(&mut self.streams, &mut next.streams);
        std::mem::swap(&mut self.redraws, &mut next.redraws);
        next.ui_ms = self.ui_ms;
    }

    /// The source's name in titles: its spec, else its description.
    pub fn source_name(&self) -> &str {
        match (self.source_spec.as_str(), self.source.description.as_str()) {
            ("", "") => "no source",
            ("", description) => description,
            (spec, _) => spec,
        }
    }

    pub fn handle_event(&mut self, event: PipelineEvent) {
        match event {
            PipelineEvent::Frame(frame) => {
                self.streams.open.publish(&frame);
                if let Some(binary) = frame.binary.as_deref().filter(|_| self.masks.is_learning()) {
                    if let Some(done) = self.masks.learn_from(binary) {
                        self.message(done);
                    }
                }
                let now = Instant::now();
                self.arrivals.push_back(now);
                trim_older(&mut self.arrivals, now);
                if self.history.len() == HISTORY_LEN {
                    self.history.pop_front();
                }
                self.history.push_back(TimingRecord {
                    index: frame.index,
                    steps: frame.timings.steps.clone(),
                    latency_ms: frame.timings.latency_ms,
                });
                self.frames_received += 1;
                self.end_of_stream = false;
                self.source_error = None;

                // A component picked on the previous frame names the track to follow.
                self.sync_selection();
                let following = self.tracks.selected_id().is_some();
                self.tracks.set_tail_len(self.settings.tail_frames);
                self.tracks.update(&frame);
                if following {
                    // The selection moves with its track: the component with its ID in this
                    // frame, none while it is hidden (or when a restart ended the track).
                    self.selected = self
                        .tracks
                        .selected_id()
                        .and_then(|id| label_of_track(&frame, id));
                }
                self.frame = Some(frame);
            }
            PipelineEvent::Notice(msg) => self.message(msg),
            PipelineEvent::SourceError(msg) => {
                // The capture thread stops at a source error until it is given a new source.
                self.end_of_stream = true;
                self.source_error = Some(msg.clone());
                self.message(format!("source: {msg}"));
            }
            PipelineEvent::Skipped(skipped) => self.message(format!("skipped {skipped}")),
            PipelineEvent::EngineError(msg) => self.message(format!("labeling: {msg}")),
            PipelineEvent::EndOfStream { frames } => {
                self.end_of_stream = true;
                let ended = format!("end of stream after {frames} frame(s)");
                self.source_error = Some(ended.clone());
                self.message(ended);
            }
        }
    }

    pub fn message(&mut self, msg: String) {
        if self.messages.len() == 50 {
            self.messages.pop_front();
        }
        self.messages.push_back((Instant::now(), msg));
    }

    /// Called at the start of every UI pass.
    pub fn note_redraw(&mut self) {
        let now = Instant::now();
        self.redraws.push_back(now);
        trim_older(&mut self.redraws, now);
    }

    /// Frames received per second, over the last two seconds.
    pub fn result_fps(&self) -> f64 {
        rate(&self.arrivals)
    }

    /// UI passes per second, over the last two seconds.
    pub fn redraw_fps(&self) -> f64 {
        rate(&self.redraws)
    }

    pub fn set_view(&mut self, view: ViewMode) {
        self.settings.view = view;
    }

    /// Selects a component of the current frame by label (None: nothing), and follows its
    /// track, if it has one.
    pub fn select(&mut self, label: Option<u32>) {
        self.selected = label;
        let track = label.and_then(|l| self.frame.as_deref().and_then(|f| track_of_label(f, l)));
        self.tracks.select(track);
    }

    /// Follows the track of `selected` when it was set directly (not through `select`). A
    /// selection without a component in this frame (its track hidden) keeps the track.
    pub fn sync_selection(&mut self) {
        let Some(label) = self.selected else {
            return;
        };
        let track = self.frame.as_deref().and_then(|f| track_of_label(f, label));
        if track.is_some() && track != self.tracks.selected_id() {
            self.tracks.select(track);
        }
    }

    /// Forgets the selection and the track history (a new source).
    pub fn reset_tracks(&mut self) {
        self.selected = None;
        self.tracks.reset();
    }

    /// The selected component's row in the current frame, if it is there.
    pub fn selected_component(&self) -> Option<&crate::ccl::stats::ComponentStats> {
        let label = self.selected?;
        let frame = self.frame.as_ref()?;
        frame.components.iter().find(|c| c.label == label)
    }
}

/// The track ID of the component labelled `label` in `frame` (None: no such component, or it
/// has no track).
pub fn track_of_label(frame: &FrameResult, label: u32) -> Option<u64> {
    let i = frame.components.iter().position(|c| c.label == label)?;
    frame.track_ids.get(i).copied().filter(|&id| id != 0)
}

/// The label of the component of track `id` in `frame`, if it is there.
pub fn label_of_track(frame: &FrameResult, id: u64) -> Option<u32> {
    let i = frame.track_ids.iter().position(|&t| t == id)?;
    frame.components.get(i).map(|c| c.label)
}

const RATE_WINDOW: Duration = Duration::from_secs(2);

fn trim_older(times: &mut VecDeque<Instant>, now: Instant) {
    while times
        .front()
        .is_some_and(|&t| now.duration_since(t) > RATE_WINDOW)
    {
        times.pop_front();
    }
}

fn rate(times: &VecDeque<Instant>) -> f64 {
    match (times.front(), times.back()) {
        (Some(first), Some(last)) if times.len() > 1 => {
            let span = last.duration_since(*first).as_secs_f64();
            if span > 0.0 {
                (times.len() - 1) as f64 / span
            } else {
                0.0
            }
        }
        _ => 0.0,
    }
}
