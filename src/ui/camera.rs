//! The Camera section of the controls panel: exposure (automatic or a time) and gain, set on a
//! camera when it is opened; `Apply` opens the current camera again with them. A camera that
//! lacks a control or refuses a value keeps its own setting, with a notice.

use super::state::AppState;
use crate::source::camera_controls::{Exposure, MAX_EXPOSURE};

pub fn camera_ui(ui: &mut egui::Ui, state: &mut AppState) {
    ui.heading("Camera");
    let is_camera = state.source_spec.starts_with("camera");
    let controls = &mut state.settings.camera;
    ui.horizontal(|ui| {
        let mut set = controls.exposure.is_some();
        ui.checkbox(&mut set, "exposure")
            .on_hover_text("off: the camera's own setting");
        if !set {
            controls.exposure = None;
            return;
        }
        let mut auto = matches!(controls.exposure, Some(Exposure::Auto) | None);
        ui.checkbox(&mut auto, "auto");
        let mut time = match controls.exposure {
            Some(Exposure::Manual(t)) => t,
            _ => 100,
        };
        let name = ui.label("time");
        ui.add_enabled(
            !auto,
            egui::DragValue::new(&mut time)
                .range(1..=MAX_EXPOSURE)
                .suffix(" ×100 µs"),
        )
        .labelled_by(name.id);
        controls.exposure = Some(if auto {
            Exposure::Auto
        } else {
            Exposure::Manual(time)
        });
    });
    ui.horizontal(|ui| {
        let mut set = controls.gain.is_some();
        ui.checkbox(&mut set, "gain")
            .on_hover_text("off: the camera's own setting");
        let mut gain = controls.gain.unwrap_or(0);
        let name = ui.label("value");
        ui.add_enabled(set, egui::DragValue::new(&mut gain).range(0..=10_000))
            .labelled_by(name.id);
        controls.gain = set.then_some(gain);
    });
    let apply = ui
        .add_enabled(is_camera, egui::Button::new("Apply to the camera"))
        .on_hover_text(if is_camera {
            "open the camera again with these settings"
        } else {
            "the source is not a camera: the settings apply when one is opened"
        });
    if apply.clicked() {
        let spec = state.source_spec.clone();
        state.open_requests.push(spec);
    }
}
