//! The window: the panels laid out around the frame view (this file), the top bar
//! (`top_bar`), the hand-over to the pipeline (`feed`), the scripted modes (`script`:
//! exit after N frames, screenshot, redraw benchmark) and opening the window (`launch`).

mod feed;
mod launch;
mod script;
mod top_bar;

pub use launch::run;

use super::compare::ComparePanel;
use super::components::ComponentsPanel;
use super::config::UiSettings;
use super::controls::ControlsPanel;
use super::state::{AppState, FrameFeed, Tab};
use super::timings::TimingsPanel;
use super::track_plot::TrackPlotPanel;
use super::view::ViewPanel;
use crate::ccl::Backends;
use crate::pipeline::PipelineSettings;
use script::Script;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Key of the saved settings in eframe's storage (TOML, the layout of `config/default.toml`).
pub const STORAGE_KEY: &str = "markerscope.settings";

pub struct MarkerscopeApp {
    pub state: AppState,
    pub view: ViewPanel,
    pub controls: ControlsPanel,
    pub timings: TimingsPanel,
    pub compare: ComparePanel,
    pub components: ComponentsPanel,
    pub track_plot: TrackPlotPanel,
    feed: Option<Box<dyn FrameFeed>>,
    /// What the feed was last given (so it is told only about changes).
    sent_settings: Option<PipelineSettings>,
    /// The camera controls the feed was last given.
    sent_camera: Option<crate::source::camera_controls::CameraControls>,
    /// What a scripted run asked for (nothing, for a window a person uses).
    script: Script,
    /// Whether `save` writes the settings (not for scripted runs).
    persist: bool,
    /// Run the comparison as soon as a frame is there (the compare startup option).
    auto_compare: bool,
}

impl MarkerscopeApp {
    /// A window over `feed` (None: events come only through `state.handle_event`, as in tests).
    pub fn new(
        settings: UiSettings,
        backends: Arc<Backends>,
        feed: Option<Box<dyn FrameFeed>>,
    ) -> Self {
        Self {
            state: AppState::new(settings, &backends),
            view: ViewPanel::new(),
            controls: ControlsPanel::new(),
            timings: TimingsPanel::default(),
            compare: ComparePanel::new(backends),
            components: ComponentsPanel::default(),
            track_plot: TrackPlotPanel::default(),
            feed,
            sent_settings: None,
            sent_camera: None,
            script: Script::default(),
            persist: true,
            auto_compare: false,
        }
    }

    /// The settings the pipeline was last given (None before the first pass).
    #[cfg(test)]
    pub fn sent_settings(&self) -> Option<&PipelineSettings> {
        self.sent_settings.as_ref()
    }

    /// One UI pass over the whole window.
    pub fn show(&mut self, ui: &mut egui::Ui) {
        let pass_start = Instant::now();
        self.state.note_redraw();
        let ctx = ui.ctx().clone();
        self.take_events();
        // A selection set directly (not through `AppState::select`) follows its track too.
        self.state.sync_selection();
        self.take_dropped_files(&ctx);
        if self.auto_compare && self.state.frame.is_some() {
            self.auto_compare = false;
            self.state.tab = Tab::Compare;
            self.compare.start(&self.state);
        }
        self.panels(ui);
        top_bar::drop_hint(&ctx);
        self.hand_over();
        self.scripted(&ctx);
        self.state.ui_ms = pass_start.elapsed().as_secs_f64() * 1e3;
        self.script.note_pass(self.state.ui_ms);
        if self.feed.is_some() {
            // The pipeline cannot wake the window, so it is polled: at most every 5 ms.
            ctx.request_repaint_after(Duration::from_millis(5));
        }
    }

    /// The panels around the page of the current tab.
    fn panels(&mut self, ui: &mut egui::Ui) {
        let frame = panel_frame(ui.style());
        egui::Panel::top("top_bar")
            .frame(frame)
            .show(ui, |ui| self.top_bar(ui));
        egui::Panel::left("controls")
            .frame(frame)
            .default_size(250.0)
            .show(ui, |ui| self.controls.ui(ui, &mut self.state));
        egui::Panel::bottom("timings")
            .frame(frame)
            .resizable(true)
            .default_size(230.0)
            .show(ui, |ui| self.timings.ui(ui, &self.state));
        match self.state.tab {
            Tab::Live => {
                egui::Panel::right("components")
                    .frame(frame)
                    .default_size(390.0)
                    .show(ui, |ui| {
                        // The selected track's plot under the table (the table fills the rest).
                        egui::Panel::bottom("selected_track")
                            .frame(frame)
                            .resizable(true)
                            .default_size(250.0)
                            .show(ui, |ui| self.track_plot.ui(ui, &self.state));
                        if self.state.settings.markers.enabled {
                            egui::Panel::top("markers").frame(frame).show(ui, |ui| {
                                if let Some(f) = &self.state.frame {
                                    super::markers::marker_table(ui, f);
                                }
                            });
                        }
                        self.components.ui(ui, &mut self.state);
                    });
                egui::CentralPanel::no_frame().show(ui, |ui| self.view.ui(ui, &mut self.state));
            }
            Tab::Compare => {
                egui::CentralPanel::default()
                    .frame(egui::Frame::central_panel(ui.style()).fill(egui::Color32::TRANSPARENT))
                    .show(ui, |ui| self.compare.ui(ui, &self.state));
            }
        }
    }
}

/// The frame of the window's panels: egui's, without its fill. The window is cleared to the
/// panels' colour instead (`clear_color`): under software rendering, filling most of the window
/// a second time costs over a tenth of a redraw (README).
fn panel_frame(style: &egui::Style) -> egui::Frame {
    egui::Frame::side_top_panel(style).fill(egui::Color32::TRANSPARENT)
}

impl eframe::App for MarkerscopeApp {
    /// The panels' colour: the panels leave it unpainted (`panel_frame`).
    fn clear_color(&self, visuals: &egui::Visuals) -> [f32; 4] {
        visuals.panel_fill.to_normalized_gamma_f32()
    }

    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.show(ui);
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        if self.persist {
            storage.set_string(STORAGE_KEY, self.state.settings.to_toml());
        }
    }
}
