//! The Camera section of the controls panel: exposure (automatic or a time), gain, resolution,
//! frame rate and pixel format, with the ranges and modes the open camera reports
//! (`SourceInfo::camera`); what it lacks is greyed out, with the reason on hover. Exposure and
//! gain go to the streaming camera as they change; the mode needs the camera opened again
//! (`Apply`). A value the camera cannot take is listed under the controls, and the camera keeps
//! its own setting.

use super::state::AppState;
use crate::source::camera_controls::{
    CameraCapabilities, CameraControls, ControlRange, Exposure, MAX_EXPOSURE,
};
use crate::source::SourceSpec;

/// Colour of the messages about values the camera cannot take.
const WARNING: egui::Color32 = egui::Color32::from_rgb(255, 170, 0);

pub fn camera_ui(ui: &mut egui::Ui, state: &mut AppState) {
    ui.heading("Camera");
    let capabilities = state.source.camera.clone();
    let caps = capabilities.as_ref();
    let is_camera = caps.is_some() || state.source_spec.starts_with("camera");
    match caps.and_then(|c| c.current) {
        Some(mode) => ui.label(format!("streaming {mode}")),
        None if is_camera => ui.label("the camera reported no modes"),
        None => ui.weak("not a camera: these apply when one is opened"),
    };
    let controls = &mut state.settings.camera;
    exposure_ui(ui, controls, caps);
    gain_ui(ui, controls, caps);
    mode_ui(ui, controls, caps);
    if let Some(caps) = caps {
        let (_, problems) = caps.fit(controls);
        for p in problems {
            ui.colored_label(WARNING, p);
        }
        let current = caps.current.map(|m| CameraControls {
            resolution: Some((m.width, m.height)),
            fps: Some(m.fps),
            format: Some(m.format),
            ..CameraControls::default()
        });
        if controls.resolution.is_some() || controls.fps.is_some() || controls.format.is_some() {
            let streaming = current.is_some_and(|c| {
                controls.resolution.is_none_or(|r| c.resolution == Some(r))
                    && controls.fps.is_none_or(|f| c.fps == Some(f))
                    && controls.format.is_none_or(|f| c.format == Some(f))
            });
            if !streaming {
                ui.weak("the new mode applies when the camera is opened again (Apply)");
            }
        }
    }
    let apply = ui
        .add_enabled(is_camera, egui::Button::new("Apply to the camera"))
        .on_hover_text(if is_camera {
            "open the camera again with these settings"
        } else {
            "the source is not a camera: the settings apply when one is opened"
        });
    if apply.clicked() {
        let spec = reopen_spec(&state.source_spec, &state.settings.camera);
        state.open_requests.push(spec);
    }
}

/// The spec to open the camera again with: without the spec's own mode when the controls name
/// one (the spec's mode would come first).
fn reopen_spec(spec: &str, controls: &CameraControls) -> String {
    let names_mode =
        controls.resolution.is_some() || controls.fps.is_some() || controls.format.is_some();
    match SourceSpec::parse(spec) {
        Ok(SourceSpec::Camera { index, .. }) if names_mode => format!("camera:{index}"),
        _ => spec.to_string(),
    }
}

/// A control the camera lacks: greyed out, with why on hover.
fn lacking(response: egui::Response, why: &str) -> egui::Response {
    response.on_disabled_hover_text(why)
}

/// The range a value control offers: the camera's (from at least `floor`), else `fallback`.
fn range_of(range: Option<ControlRange>, floor: i64, fallback: (u32, u32)) -> (u32, u32) {
    match range {
        Some(r) => {
            let lo = r.min.max(floor).clamp(0, u32::MAX as i64) as u32;
            let hi = r.max.clamp(lo as i64, u32::MAX as i64) as u32;
            (lo, hi)
        }
        None => fallback,
    }
}

fn exposure_ui(
    ui: &mut egui::Ui,
    controls: &mut CameraControls,
    caps: Option<&CameraCapabilities>,
) {
    let offers_auto = caps.is_none_or(|c| c.exposure_auto);
    let offers_manual = caps.is_none_or(|c| c.exposure_manual && c.exposure_time.is_some());
    ui.horizontal(|ui| {
        let mut set = controls.exposure.is_some();
        let any = offers_auto || offers_manual;
        let r = ui
            .add_enabled(any, egui::Checkbox::new(&mut set, "exposure"))
            .on_hover_text("off: the camera's own setting");
        lacking(r, "this camera reports no exposure control");
        if !set {
            controls.exposure = None;
            return;
        }
        // A saved mode the camera lacks stays (the message under the controls says so); one
        // just switched on starts with what the camera offers.
        let mut auto = match controls.exposure {
            Some(Exposure::Auto) => true,
            Some(Exposure::Manual(_)) => false,
            None => offers_auto || !offers_manual,
        };
        // Either way round when the camera offers both; away from a mode it lacks.
        let can_switch =
            (offers_auto && offers_manual) || (auto && !offers_auto) || (!auto && !offers_manual);
        let r = ui.add_enabled(can_switch, egui::Checkbox::new(&mut auto, "auto"));
        lacking(
            r,
            if offers_auto {
                "this camera offers only automatic exposure"
            } else {
                "this camera offers only a manual exposure time"
            },
        );
        let (lo, hi) = range_of(caps.and_then(|c| c.exposure_time), 1, (1, MAX_EXPOSURE));
        let mut time = match controls.exposure {
            Some(Exposure::Manual(t)) => t,
            _ => caps
                .and_then(|c| c.exposure_time)
                .map_or(100, |r| r.value.clamp(lo as i64, hi as i64) as u32),
        };
        let name = ui.label("time");
        let r = ui
            .add_enabled(
                !auto && offers_manual,
                egui::DragValue::new(&mut time)
                    .range(lo..=hi)
                    .suffix(" ×100 µs"),
            )
            .labelled_by(name.id);
        lacking(
            r,
            if offers_manual {
                "automatic exposure: the camera sets the time"
            } else {
                "this camera has no manual exposure time"
            },
        );
        controls.exposure = Some(if auto {
            Exposure::Auto
        } else {
            Exposure::Manual(time)
        });
    });
}

fn gain_ui(ui: &mut egui::Ui, controls: &mut CameraControls, caps: Option<&CameraCapabilities>) {
    let offered = caps.is_none_or(|c| c.gain.is_some());
    ui.horizontal(|ui| {
        let mut set = controls.gain.is_some();
        let r = ui
            .add_enabled(offered, egui::Checkbox::new(&mut set, "gain"))
            .on_hover_text("off: the camera's own setting");
        lacking(r, "this camera has no gain control it lets markerscope set");
        let range = caps.and_then(|c| c.gain);
        let (lo, hi) = range_of(range, 0, (0, 10_000));
        let mut gain = controls
            .gain
            .unwrap_or_else(|| range.map_or(0, |r| r.value.clamp(lo as i64, hi as i64) as u32));
        let name = ui.label("value");
        let r = ui
            .add_enabled(
                set && offered,
                egui::DragValue::new(&mut gain).range(lo..=hi),
            )
            .labelled_by(name.id);
        lacking(
            r,
            if offered {
                "off: the camera's own setting"
            } else {
                "this camera has no gain control it lets markerscope set"
            },
        );
        // A saved gain the camera lacks stays in the settings (for other cameras).
        if offered || !set {
            controls.gain = set.then_some(gain);
        }
    });
}

/// Resolution, frame rate and pixel format: the camera's modes; greyed out without a camera.
fn mode_ui(ui: &mut egui::Ui, controls: &mut CameraControls, caps: Option<&CameraCapabilities>) {
    let no_modes = caps.is_none_or(|c| c.modes.is_empty());
    let why = "open a camera to choose among the modes it offers";
    let current = caps.and_then(|c| c.current);
    let size = controls.resolution.or(current.map(|m| (m.width, m.height)));
    let show = |v: Option<String>, own: &str| v.unwrap_or_else(|| own.to_string());
    ui.scope(|ui| {
        if no_modes {
            ui.disable();
        }
        let text = show(
            controls.resolution.map(|(w, h)| format!("{w}x{h}")),
            "camera's own",
        );
        let r = egui::ComboBox::from_label("resolution")
            .selected_text(text)
            .show_ui(ui, |ui| {
                ui.selectable_value(&mut controls.resolution, None, "camera's own");
                for (w, h) in caps.map(|c| c.resolutions()).unwrap_or_default() {
                    ui.selectable_value(&mut controls.resolution, Some((w, h)), format!("{w}x{h}"));
                }
            })
            .response;
        lacking(r, why);
        let rates = match (caps, size) {
            (Some(c), Some(s)) => c.frame_rates(s),
            _ => Vec::new(),
        };
        let text = show(controls.fps.map(|f| format!("{f} fps")), "highest");
        let r = egui::ComboBox::from_label("frame rate")
            .selected_text(text)
            .show_ui(ui, |ui| {
                ui.selectable_value(&mut controls.fps, None, "highest");
                for f in rates {
                    ui.selectable_value(&mut controls.fps, Some(f), format!("{f} fps"));
                }
            })
            .response;
        lacking(r, why);
        let formats = match (caps, size) {
            (Some(c), Some(s)) => c.formats(s),
            _ => Vec::new(),
        };
        let text = show(controls.format.map(|f| f.to_string()), "best for grey");
        let r = egui::ComboBox::from_label("pixel format")
            .selected_text(text)
            .show_ui(ui, |ui| {
                ui.selectable_value(&mut controls.format, None, "best for grey");
                for f in formats {
                    ui.selectable_value(&mut controls.format, Some(f), f.name());
                }
            })
            .response
            .on_hover_text("gray, yuyv and nv12 need no colour conversion; mjpeg is decoded");
        lacking(r, why);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reopening_drops_the_specs_mode_only_when_the_controls_name_one() {
        let plain = CameraControls::default();
        assert_eq!(
            reopen_spec("camera:1:640x480@30", &plain),
            "camera:1:640x480@30"
        );
        let mode = CameraControls {
            fps: Some(60),
            ..CameraControls::default()
        };
        assert_eq!(reopen_spec("camera:1:640x480@30", &mode), "camera:1");
        assert_eq!(reopen_spec("synthetic", &mode), "synthetic");
    }

    /// A camera with manual exposure only, and "auto" saved from another: the setting stays and
    /// is named, and can be switched to manual, not back.
    #[test]
    fn a_saved_mode_the_camera_lacks_is_named_and_can_be_left() {
        use crate::ccl::Backends;
        use crate::ui::UiSettings;
        use egui_kittest::kittest::{NodeT, Queryable};
        let mut settings = UiSettings::default();
        settings.camera.exposure = Some(Exposure::Auto);
        let mut state = AppState::new(settings, &Backends::cpu_only());
        state.source.camera = Some(CameraCapabilities {
            exposure_manual: true,
            exposure_time: Some(ControlRange {
                min: 1,
                max: 500,
                step: 1,
                default: 40,
                value: 40,
            }),
            ..CameraCapabilities::default()
        });
        let mut h = egui_kittest::Harness::builder()
            .with_size(egui::vec2(400.0, 400.0))
            .build_ui_state(|ui, state: &mut AppState| camera_ui(ui, state), state);
        h.run();
        assert_eq!(h.state().settings.camera.exposure, Some(Exposure::Auto));
        h.get_by_label(
            "exposure auto: this camera has no automatic exposure; it keeps its own setting",
        );
        let auto = || egui::accesskit::Role::CheckBox;
        h.get_by_role_and_label(auto(), "auto").click();
        h.run();
        assert_eq!(
            h.state().settings.camera.exposure,
            Some(Exposure::Manual(40)),
            "the camera's own time to start from"
        );
        assert!(h
            .get_by_role_and_label(auto(), "auto")
            .accesskit_node()
            .is_disabled());
    }
}
