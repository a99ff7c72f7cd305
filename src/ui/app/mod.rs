//! The window: the panels laid out around the frame view (this file), the top bar
//! (`top_bar`), the hand-over to each source's pipeline (`feed`), several sources and the one
//! selected (`sources`), the scripted modes (`script`: exit after N frames, screenshot, redraw
//! benchmark) and opening the window (`launch`).

mod feed;
mod launch;
mod script;
mod sources;
mod top_bar;

pub use launch::run;
pub use sources::SourceStart;

use super::compare::ComparePanel;
use super::components::ComponentsPanel;
use super::config::UiSettings;
use super::controls::ControlsPanel;
use super::grid::{Cell, GridPanel};
use super::state::{AppState, FrameFeed, Tab};
use super::timings::TimingsPanel;
use super::track_plot::TrackPlotPanel;
use super::view::ViewPanel;
use crate::ccl::Backends;
use feed::Link;
use script::Script;
use sources::Parked;
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
    /// The sources side by side, when there are several.
    pub grid: GridPanel,
    /// The selected source's pipeline.
    link: Link,
    /// Every source in order; the selected one's place is None (its parts are `state`,
    /// `view` and `link`).
    sources: Vec<Option<Parked>>,
    /// A source clicked in the grid or the timings, selected after the pass.
    clicked_source: Option<usize>,
    /// The settings the sources came from (top level and sections), for the saved copy;
    /// None for a window of one source without sections (it saves that source's).
    defaults: Option<super::config::UiSettings>,
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
            grid: GridPanel::default(),
            link: Link {
                feed,
                ..Link::default()
            },
            sources: vec![None],
            clicked_source: None,
            defaults: None,
            script: Script::default(),
            persist: true,
            auto_compare: false,
        }
    }

    /// The settings the pipeline was last given (None before the first pass).
    #[cfg(test)]
    pub fn sent_settings(&self) -> Option<&crate::pipeline::PipelineSettings> {
        self.link.sent_settings.as_ref()
    }

    /// One UI pass over the whole window.
    pub fn show(&mut self, ui: &mut egui::Ui) {
        let pass_start = Instant::now();
        self.state.note_redraw();
        let ctx = ui.ctx().clone();
        self.take_all_events();
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
        if let Some(i) = self.clicked_source.take() {
            self.select_source(i);
        }
        self.hand_over_all();
        self.scripted(&ctx);
        self.state.ui_ms = pass_start.elapsed().as_secs_f64() * 1e3;
        self.script.note_pass(self.state.ui_ms);
        if self.any_feed() {
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
        let lines = self.source_lines();
        egui::Panel::bottom("timings")
            .frame(frame)
            .resizable(true)
            .default_size(230.0)
            .show(ui, |ui| {
                if let Some(i) = super::timings::source_lines_ui(ui, &lines) {
                    self.clicked_source = Some(i);
                }
                self.timings.ui(ui, &self.state)
            });
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
                egui::CentralPanel::no_frame().show(ui, |ui| self.central(ui));
            }
            Tab::Compare => {
                egui::CentralPanel::default()
                    .frame(egui::Frame::central_panel(ui.style()).fill(egui::Color32::TRANSPARENT))
                    .show(ui, |ui| self.compare.ui(ui, &self.state));
            }
        }
    }
}

impl MarkerscopeApp {
    /// The frame view of the one source, or the grid of several.
    fn central(&mut self, ui: &mut egui::Ui) {
        if self.sources.len() < 2 {
            self.view.ui(ui, &mut self.state);
            return;
        }
        let cells = sources::parts(
            (&mut self.state, &mut self.view, &mut self.link),
            &mut self.sources,
        )
        .into_iter()
        .map(|p| Cell {
            state: p.state,
            view: p.view,
            selected: p.selected,
        })
        .collect();
        if let Some(i) = self.grid.ui(ui, cells) {
            self.clicked_source = Some(i);
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
            storage.set_string(STORAGE_KEY, self.saved_settings().to_toml());
        }
    }
}
