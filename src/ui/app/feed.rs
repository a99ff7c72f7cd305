//! The window's side of the pipeline: events taken from the feed each pass, and what the
//! window hands back (settings changes, camera controls, playback commands, sources to open).

use super::MarkerscopeApp;
use crate::pipeline::PipelineEvent;

impl MarkerscopeApp {
    /// Takes the feed's events into the state (notices and errors also go to stderr), and the
    /// notices of the streams.
    pub(super) fn take_events(&mut self) {
        if let Some(feed) = &mut self.feed {
            for event in feed.poll() {
                match &event {
                    PipelineEvent::Notice(m)
                    | PipelineEvent::SourceError(m)
                    | PipelineEvent::EngineError(m) => eprintln!("{m}"),
                    PipelineEvent::Skipped(s) => eprintln!("skipped {s}"),
                    _ => {}
                }
                self.state.handle_event(event);
            }
            self.state.counters = feed.counters();
        }
        for m in self.state.streams.open.notices() {
            eprintln!("{m}");
            self.state.message(m);
        }
    }

    /// Files dropped on the window are opened as the source.
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

    /// Hands settings changes, playback commands and source requests to the feed.
    pub(super) fn hand_over(&mut self) {
        let mut settings = self.state.settings.pipeline_settings();
        // While a static mask is learned: the thresholded frames, without the mask.
        if self.state.masks.is_learning() {
            settings.want_binary = true;
        } else {
            settings.mask = self.state.masks.mask.clone();
        }
        let changed = self.sent_settings.as_ref() != Some(&settings);
        let Some(feed) = &mut self.feed else {
            self.sent_settings = Some(settings);
            self.state.commands.clear();
            return;
        };
        if changed {
            feed.set_settings(&settings);
            self.sent_settings = Some(settings);
        }
        if self.sent_camera != Some(self.state.settings.camera) {
            feed.set_camera_controls(self.state.settings.camera);
            self.sent_camera = Some(self.state.settings.camera);
        }
        for c in self.state.commands.drain(..) {
            feed.command(c);
        }
        self.open_requested();
    }

    /// Opens the sources the panels asked for (the last one opened stays).
    fn open_requested(&mut self) {
        let Some(feed) = &mut self.feed else {
            return;
        };
        for spec in std::mem::take(&mut self.state.open_requests) {
            match feed.open(&spec) {
                Ok(info) => {
                    self.state.message(format!("opened {}", info.description));
                    self.state.source = info;
                    self.state.source_spec = spec;
                    self.state.playback.playing = true;
                    // New source, new tracks.
                    self.state.reset_tracks();
                }
                Err(e) => {
                    eprintln!("{e}");
                    self.state.message(e.to_string());
                }
            }
        }
    }
}
