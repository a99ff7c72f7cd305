//! The window's side of one source's pipeline (`Link`): events taken from its feed each pass,
//! and what the window hands back (settings changes, camera controls, playback commands,
//! sources to open). Files dropped on the window open as the selected source.

use super::MarkerscopeApp;
use crate::ccl::Backends;
use crate::pipeline::{PipelineEvent, PipelineSettings};
use crate::source::camera_controls::CameraControls;
use crate::ui::live::LiveFeed;
use crate::ui::state::{AppState, FrameFeed, SourceInfo};
use std::sync::Arc;

/// One source's pipeline as the window talks to it.
#[derive(Default)]
pub struct Link {
    pub(super) feed: Option<Box<dyn FrameFeed>>,
    /// What the feed was last given (so it is told only about changes).
    pub(super) sent_settings: Option<PipelineSettings>,
    /// The camera controls the feed was last given.
    pub(super) sent_camera: Option<CameraControls>,
    /// Backends to start a live pipeline on when the source is opened while there is none
    /// (its first opening failed); None: a source without a feed stays without one.
    pub(super) restart: Option<Arc<Backends>>,
}

impl Link {
    /// Takes the feed's events into `state` (notices and errors also go to stderr).
    pub(super) fn take_events(&mut self, state: &mut AppState) {
        let Some(feed) = &mut self.feed else {
            return;
        };
        for event in feed.poll() {
            match &event {
                PipelineEvent::Notice(m)
                | PipelineEvent::SourceError(m)
                | PipelineEvent::EngineError(m) => eprintln!("{m}"),
                PipelineEvent::Skipped(s) => eprintln!("skipped {s}"),
                _ => {}
            }
            state.handle_event(event);
        }
        state.counters = feed.counters();
    }

    /// Hands settings changes, playback commands and source requests to the feed.
    pub(super) fn hand_over(&mut self, state: &mut AppState) {
        if self.feed.is_none() && self.restart.is_some() {
            self.open_requested(state);
        }
        let mut settings = state.settings.pipeline_settings();
        // While a static mask is learned: the thresholded frames, without the mask.
        if state.masks.is_learning() {
            settings.want_binary = true;
        } else {
            settings.mask = state.masks.mask.clone();
        }
        let changed = self.sent_settings.as_ref() != Some(&settings);
        let Some(feed) = &mut self.feed else {
            self.sent_settings = Some(settings);
            state.commands.clear();
            return;
        };
        if changed {
            feed.set_settings(&settings);
            self.sent_settings = Some(settings);
        }
        if self.sent_camera != Some(state.settings.camera) {
            feed.set_camera_controls(state.settings.camera);
            self.sent_camera = Some(state.settings.camera);
        }
        for c in state.commands.drain(..) {
            feed.command(c);
        }
        self.open_requested(state);
    }

    /// Opens the sources the panels asked for (the last one opened stays).
    fn open_requested(&mut self, state: &mut AppState) {
        for spec in std::mem::take(&mut state.open_requests) {
            match self.open(&spec, &state.settings) {
                Ok(info) => {
                    state.message(format!("opened {}", info.description));
                    state.source = info;
                    state.source_spec = spec;
                    state.playback.playing = true;
                    state.source_error = None;
                    // New source, new tracks.
                    state.reset_tracks();
                }
                Err(e) => {
                    eprintln!("{e}");
                    state.message(e.to_string());
                    state.source_error = Some(e.to_string());
                }
            }
        }
    }

    /// Opens `spec` on the feed, or starts a live pipeline on it when there is no feed.
    fn open(&mut self, spec: &str, settings: &crate::ui::UiSettings) -> crate::Result<SourceInfo> {
        if let Some(feed) = &mut self.feed {
            return feed.open(spec);
        }
        let backends = self.restart.clone().ok_or_else(|| {
            crate::Error::Invalid(format!("{spec}: this window has no pipeline to open it on"))
        })?;
        let (feed, info) = LiveFeed::start(spec, settings, backends)?;
        self.feed = Some(Box::new(feed));
        // The new pipeline is told everything (the mask, the camera controls) on the next pass.
        self.sent_settings = None;
        self.sent_camera = None;
        Ok(info)
    }
}

impl MarkerscopeApp {
    /// Files dropped on the window are opened as the selected source.
    pub(super) fn take_dropped_files(&mut self, ctx: &egui::Context) {
        let dropped = ctx.input(|i| i.raw.dropped_files.clone());
        for file in dropped {
            let path = file.path();
            if path.as_os_str().is_empty() {
                self.state
                    .message("cannot open the dropped item: it has no file path".into());
            } else {
                self.state
                    .open_requests
                    .push(path.to_string_lossy().into_owned());
            }
        }
    }
}
