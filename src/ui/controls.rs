//! Controls panel: source, threshold, labeling (algorithm, connectivity, backend), filters,
//! world, camera, masks, streams, markers and playback. Every change goes into `AppState`; the
//! app hands it to the pipeline after the pass.

use super::config::{backend_name, UiSettings};
use super::state::AppState;
use crate::ccl::BackendChoice;
use crate::ccl::{algorithms, Backend, Connectivity};
use crate::frame::grey::FrameGrey;
use crate::pipeline::SourceCommand;
use crate::threshold::spec::ThresholdSpec;

pub struct ControlsPanel {
    /// The path or spec typed in the source box.
    pub source_text: String,
    /// Cameras found (label, spec), or why none could be listed; None until asked.
    cameras: Option<Result<Vec<(String, String)>, String>>,
    /// Seek bar position, and whether the user is dragging it.
    seek: u64,
    seek_dragging: bool,
    /// The level an automatic threshold (otsu, triangle, background) picks for a frame's grey
    /// image, kept with the image, spec and polarity: a histogram of the whole frame, worked
    /// out once per image rather than at every redraw.
    level: Option<LevelCache>,
    /// The address typed in the Streams box.
    pub stream_text: String,
}

impl Default for ControlsPanel {
    fn default() -> Self {
        Self::new()
    }
}

impl ControlsPanel {
    pub fn new() -> Self {
        Self {
            source_text: String::new(),
            cameras: None,
            seek: 0,
            seek_dragging: false,
            level: None,
            stream_text: String::new(),
        }
    }

    pub fn ui(&mut self, ui: &mut egui::Ui, state: &mut AppState) {
        egui::ScrollArea::vertical().show(ui, |ui| {
            self.source_ui(ui, state);
            ui.separator();
            threshold_ui(ui, state, &mut self.level);
            ui.separator();
            labeling_ui(ui, state);
            ui.separator();
            filter_ui(ui, state);
            ui.separator();
            let messages = super::world::world_ui(ui, &mut state.world, &mut state.settings);
            for m in messages {
                state.message(m);
            }
            ui.separator();
            super::camera::camera_ui(ui, state);
            ui.separator();
            let frame_size = state.frame.as_ref().map(|f| (f.grey.width, f.grey.height));
            let messages = super::masks::mask_ui(ui, &mut state.masks, frame_size);
            for m in messages {
                state.message(m);
            }
            ui.separator();
            let messages = super::streams::streams_ui(
                ui,
                &mut state.streams,
                &mut self.stream_text,
                &mut state.settings.streams,
            );
            for m in messages {
                state.message(m);
            }
            // Last, so the sections above keep their places.
            ui.separator();
            super::markers::markers_ui(ui, &mut state.settings.markers);
        });
    }

    fn source_ui(&mut self, ui: &mut egui::Ui, state: &mut AppState) {
        ui.heading("Source");
        if !state.source.description.is_empty() {
            ui.label(&state.source.description);
        }
        ui.horizontal(|ui| {
            if ui.button("Synthetic demo").clicked() {
                state.open_requests.push("synthetic".into());
            }
            if ui.button("Random images").clicked() {
                state.open_requests.push("synthetic:random".into());
            }
        });
        self.open_line(ui, state);
        ui.weak("…or drop a file on the window");
        self.cameras_ui(ui, state);
        // Playback, for files (video, image lists); the seek bar when the length is known.
        if !state.source.is_live && !state.source.description.is_empty() {
            self.playback_ui(ui, state);
        }
    }

    /// The box for a path or source spec, and the button that opens it.
    fn open_line(&mut self, ui: &mut egui::Ui, state: &mut AppState) {
        ui.horizontal(|ui| {
            let name = ui.label("path");
            let edit = ui
                .add(
                    egui::TextEdit::singleline(&mut self.source_text)
                        .hint_text("video, image, folder or camera:N")
                        .desired_width(150.0),
                )
                .labelled_by(name.id);
            let enter = edit.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
            if (ui.button("Open").clicked() || enter) && !self.source_text.trim().is_empty() {
                state
                    .open_requests
                    .push(self.source_text.trim().to_string());
            }
        });
    }

    /// The cameras found when asked, each a button that opens it.
    fn cameras_ui(&mut self, ui: &mut egui::Ui, state: &mut AppState) {
        ui.horizontal(|ui| {
            if ui.button("List cameras").clicked() {
                self.cameras = Some(crate::source::devices::cameras().map(|list| {
                    list.into_iter()
                        .map(|c| {
                            (
                                format!("{}: {}", c.index, c.name),
                                format!("camera:{}", c.index),
                            )
                        })
                        .collect()
                }));
            }
        });
        match &self.cameras {
            Some(Ok(list)) if list.is_empty() => {
                ui.weak("no cameras found");
            }
            Some(Ok(list)) => {
                for (label, spec) in list {
                    if ui.button(label).clicked() {
                        state.open_requests.push(spec.clone());
                    }
                }
            }
            Some(Err(why)) => {
                ui.weak(format!("cameras: {why}"));
            }
            None => {}
        }
    }

    /// Play, pause and step; the seek bar when the length is known; the speed.
    fn playback_ui(&mut self, ui: &mut egui::Ui, state: &mut AppState) {
        ui.horizontal(|ui| {
            let label = if state.playback.playing {
                "Pause"
            } else {
                "Play"
            };
            if ui.button(label).clicked() {
                state.playback.playing = !state.playback.playing;
                state.commands.push(if state.playback.playing {
                    SourceCommand::Play
                } else {
                    SourceCommand::Pause
                });
            }
            if ui.button("Step").clicked() {
                state.playback.playing = false;
                state.commands.push(SourceCommand::Pause);
                state.commands.push(SourceCommand::Step);
            }
        });
        if let Some(total) = state.source.frame_count {
            // While the bar is dragged it shows where it is, not the playing frame.
            if let (Some(f), false) = (&state.frame, self.seek_dragging) {
                self.seek = f.index;
            }
            let seek = ui
                .add(egui::Slider::new(&mut self.seek, 0..=total.saturating_sub(1)).text("frame"));
            self.seek_dragging = seek.dragged();
            if seek.drag_stopped() || (seek.changed() && !seek.dragged()) {
                state.commands.push(SourceCommand::Seek(self.seek));
            }
        }
        let mut speed = state.playback.speed;
        let s = ui
            .add(
                egui::Slider::new(&mut speed, 0.0..=4.0)
                    .text("speed")
                    .suffix("×"),
            )
            .on_hover_text("0 = as fast as possible");
        if s.changed() {
            state.playback.speed = speed;
            state.commands.push(SourceCommand::Speed(speed));
        }
    }
}

/// (frame, spec, invert, level).
type LevelCache = (FrameGrey, ThresholdSpec, bool, u8);

/// Methods in the menu: name and the spec it starts with.
const METHODS: [(&str, ThresholdSpec); 5] = [
    ("fixed", ThresholdSpec::Fixed(128)),
    ("otsu", ThresholdSpec::Otsu),
    ("triangle", ThresholdSpec::Triangle),
    (
        "background",
        ThresholdSpec::Background {
            k: crate::threshold::spec::DEFAULT_BACKGROUND_K,
        },
    ),
    ("adaptive", ThresholdSpec::Adaptive { window: 31, c: 5.0 }),
];

fn method_name(spec: &ThresholdSpec) -> &'static str {
    match spec {
        ThresholdSpec::Fixed(_) => "fixed",
        ThresholdSpec::Otsu => "otsu",
        ThresholdSpec::Triangle => "triangle",
        ThresholdSpec::Background { .. } => "background",
        ThresholdSpec::Adaptive { .. } => "adaptive",
    }
}

fn threshold_ui(ui: &mut egui::Ui, state: &mut AppState, cache: &mut Option<LevelCache>) {
    ui.heading("Threshold");
    let invert = state.settings.invert;
    let t = &mut state.settings.threshold;
    let mode = method_name(t);
    egui::ComboBox::from_label("method")
        .selected_text(mode)
        .show_ui(ui, |ui| {
            for (name, start) in METHODS {
                // Choosing the method in use keeps its values.
                if ui.selectable_label(mode == name, name).clicked() && mode != name {
                    *t = start;
                }
            }
        });
    match t {
        ThresholdSpec::Fixed(v) => {
            ui.add(egui::Slider::new(v, 0..=255).text("threshold"))
                .on_hover_text("foreground = grey > threshold");
        }
        ThresholdSpec::Otsu | ThresholdSpec::Triangle => {}
        ThresholdSpec::Background { k } => {
            ui.add(egui::Slider::new(k, 0.0..=20.0).text("K"))
                .on_hover_text(
                    "foreground = grey > background level (median) + K robust deviations, \
                     measured on the background's far side from the markers",
                );
        }
        ThresholdSpec::Adaptive { window, c } => {
            let mut w = *window;
            ui.add(egui::Slider::new(&mut w, 3..=255).text("window"));
            // The window must be odd.
            *window = w | 1;
            ui.add(egui::Slider::new(c, -50.0..=50.0).text("C"));
        }
    }
    let spec = *t;
    if !matches!(
        spec,
        ThresholdSpec::Fixed(_) | ThresholdSpec::Adaptive { .. }
    ) {
        if let Some(f) = &state.frame {
            let level = match cache {
                Some((grey, s, inv, level))
                    if grey.same_frame(&f.grey) && *s == spec && *inv == invert =>
                {
                    Some(*level)
                }
                _ => {
                    let level = crate::threshold::levels::global_level(&f.grey, &spec, invert);
                    *cache = level.map(|l| (f.grey.clone(), spec, invert, l));
                    level
                }
            };
            if let Some(level) = level {
                let side = if invert { "≤" } else { ">" };
                ui.weak(format!("level for this frame: grey {side} {level}"));
            }
        }
    }
    ui.checkbox(&mut state.settings.invert, "invert (dark markers)");
}

fn labeling_ui(ui: &mut egui::Ui, state: &mut AppState) {
    ui.heading("Labeling");
    let cuda_unavailable = state.cuda_unavailable.as_deref();
    let s = &mut state.settings;
    ui.horizontal(|ui| {
        ui.label("connectivity");
        ui.radio_value(&mut s.connectivity, Connectivity::Four, "4");
        ui.radio_value(&mut s.connectivity, Connectivity::Eight, "8");
    });
    backend_line(ui, s, cuda_unavailable);
    let selected = s.algorithm.clone().unwrap_or_else(|| "fastest".into());
    egui::ComboBox::from_label("algorithm")
        .selected_text(selected)
        .show_ui(ui, |ui| algorithm_menu(ui, s, cuda_unavailable));
    // A connectivity change can leave the chosen algorithm without support: say so.
    if let Some(info) = s
        .algorithm
        .as_deref()
        .and_then(|n| crate::ccl::algorithm_info(n).ok())
    {
        if !info.supports(s.connectivity) {
            ui.colored_label(
                egui::Color32::from_rgb(255, 170, 0),
                format!(
                    "{} does not support {}-connectivity; pick another algorithm",
                    info.name, s.connectivity
                ),
            );
        }
    }
}

/// The backend choice; CUDA greyed out (with why) where it cannot run.
fn backend_line(ui: &mut egui::Ui, s: &mut UiSettings, cuda_unavailable: Option<&str>) {
    ui.horizontal(|ui| {
        ui.label("backend");
        for b in [BackendChoice::Auto, BackendChoice::Cpu, BackendChoice::Cuda] {
            let enabled = b != BackendChoice::Cuda || cuda_unavailable.is_none();
            let r = ui.add_enabled(
                enabled,
                egui::RadioButton::new(s.backend == b, backend_name(b)),
            );
            let r = match cuda_unavailable {
                Some(why) if !enabled => r.on_disabled_hover_text(why),
                _ => r,
            };
            if r.clicked() {
                s.backend = b;
                drop_algorithm_of_other_backend(s, b);
            }
        }
    });
}

/// An algorithm of the other backend no longer fits the one just chosen.
fn drop_algorithm_of_other_backend(s: &mut UiSettings, b: BackendChoice) {
    let Some(info) = s
        .algorithm
        .as_deref()
        .and_then(|n| crate::ccl::algorithm_info(n).ok())
    else {
        return;
    };
    let wanted = match b {
        BackendChoice::Cpu => Some(Backend::Cpu),
        BackendChoice::Cuda => Some(Backend::Cuda),
        BackendChoice::Auto => None,
    };
    if wanted.is_some_and(|w| w != info.backend) {
        s.algorithm = None;
    }
}

/// The algorithm menu: "fastest", then every algorithm, those that cannot run greyed out with
/// why.
fn algorithm_menu(ui: &mut egui::Ui, s: &mut UiSettings, cuda_unavailable: Option<&str>) {
    if ui
        .selectable_label(s.algorithm.is_none(), "fastest")
        .on_hover_text("the fastest algorithm for the backend and connectivity")
        .clicked()
    {
        s.algorithm = None;
    }
    for info in algorithms() {
        let why_not = if !info.supports(s.connectivity) {
            Some(format!(
                "no {}-connectivity (supports {})",
                s.connectivity,
                info.connectivities
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        } else if info.backend == Backend::Cuda {
            cuda_unavailable.map(|why| format!("needs CUDA: {why}"))
        } else {
            None
        };
        let chosen = s.algorithm.as_deref() == Some(info.name);
        let r = ui.add_enabled(
            why_not.is_none(),
            egui::Button::selectable(chosen, format!("{} ({})", info.name, info.backend)),
        );
        let r = match &why_not {
            Some(why) => r.on_disabled_hover_text(why.as_str()),
            None => r.on_hover_text(info.summary),
        };
        if r.clicked() {
            s.algorithm = Some(info.name.to_string());
        }
    }
}

fn filter_ui(ui: &mut egui::Ui, state: &mut AppState) {
    ui.heading("Filter");
    let f = &mut state.settings.filter;
    limit_ui(ui, "min area", &mut f.min_area, 1);
    limit_ui(ui, "max area", &mut f.max_area, 10_000);
    ratio_ui(ui, "max aspect", &mut f.max_aspect, 4.0, 1.0..=1000.0);
    range_ui(
        ui,
        "circularity",
        (&mut f.min_circularity, &mut f.max_circularity),
        (0.8, 1.2),
        10.0,
    );
    range_ui(
        ui,
        "inertia ratio",
        (&mut f.min_inertia_ratio, &mut f.max_inertia_ratio),
        (0.5, 1.0),
        1.0,
    );
    ui.checkbox(&mut state.settings.shapes, "shape descriptors")
        .on_hover_text("orientation, axes, eccentricity, inertia ratio, perimeter and circularity in the table and the CSV export (always on with a shape limit)");
}

/// A "min NAME" and a "max NAME" limit in 0..=top, each starting at its `initial` value. A
/// minimum's range ends at its maximum and the other way round: min > max cannot be set.
fn range_ui(
    ui: &mut egui::Ui,
    name: &str,
    (min, max): (&mut Option<f64>, &mut Option<f64>),
    initial: (f64, f64),
    top: f64,
) {
    let hi = max.unwrap_or(top);
    ratio_ui(ui, &format!("min {name}"), min, initial.0.min(hi), 0.0..=hi);
    let lo = min.unwrap_or(0.0);
    ratio_ui(ui, &format!("max {name}"), max, initial.1.max(lo), lo..=top);
}

/// An optional number: a checkbox that sets it (to `initial`) or clears it, and its value.
fn ratio_ui(
    ui: &mut egui::Ui,
    label: &str,
    value: &mut Option<f64>,
    initial: f64,
    range: std::ops::RangeInclusive<f64>,
) {
    ui.horizontal(|ui| {
        let mut on = value.is_some();
        let name = ui.checkbox(&mut on, label);
        match (on, *value) {
            (true, None) => *value = Some(initial),
            (false, Some(_)) => *value = None,
            _ => {}
        }
        if let Some(v) = value {
            ui.add(egui::DragValue::new(v).range(range).speed(0.01))
                .labelled_by(name.id);
        }
    });
}

fn limit_ui(ui: &mut egui::Ui, label: &str, value: &mut Option<u64>, initial: u64) {
    ui.horizontal(|ui| {
        let mut on = value.is_some();
        ui.checkbox(&mut on, label);
        match (on, *value) {
            (true, None) => *value = Some(initial),
            (false, Some(_)) => *value = None,
            _ => {}
        }
        if let Some(v) = value {
            ui.add(egui::DragValue::new(v).range(0..=u32::MAX as u64));
        }
    });
}
