//! Square fiducials in the window: the Markers controls (on or off, the dictionary, the printed
//! size for poses), their overlay on the frame (outline, ID, and with a pose the marker frame's
//! axes as `cv2.drawFrameAxes` draws them) and their table beside the components'.

use super::config::MarkerChoice;
use crate::fiducial::dictionary::predefined_names;
use crate::fiducial::pose::project_point;
use crate::fiducial::{Dictionary, MarkerObservation};
use crate::geometry::calibration::Calibration;
use crate::pipeline::FrameResult;
use egui::{Color32, Pos2, Shape, Stroke, Vec2};
use std::sync::Arc;

/// Marker outline and ID colour: distinct from the components' and from any grey.
pub const MARKER_COLOUR: Color32 = Color32::from_rgb(255, 128, 0);
/// The first corner's square (the marker's top-left, as OpenCV marks it).
pub const FIRST_CORNER_COLOUR: Color32 = Color32::from_rgb(255, 40, 40);
/// Axis colours as `cv2.drawFrameAxes`: x red, y green, z blue.
pub const AXIS_COLOURS: [Color32; 3] = [
    Color32::from_rgb(255, 0, 0),
    Color32::from_rgb(0, 255, 0),
    Color32::from_rgb(0, 0, 255),
];
const OUTLINE_WIDTH: f32 = 2.0;
const AXIS_WIDTH: f32 = 2.5;
/// Rows of the marker table drawn at most (a frame rarely holds more markers).
const MAX_TABLE_ROWS: usize = 200;

/// What the marker overlay drew.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MarkerOverlay {
    /// Markers outlined with their IDs.
    pub outlines: usize,
    /// Markers whose axes were drawn (those with a pose, given a calibration and a length).
    pub axes: usize,
}

/// The Markers section of the controls: detection on or off, the dictionary, and the side of
/// the printed markers (0 = no poses).
pub fn markers_ui(ui: &mut egui::Ui, markers: &mut MarkerChoice) {
    ui.strong("Markers");
    ui.checkbox(&mut markers.enabled, "find markers")
        .on_hover_text("ArUco and AprilTag squares: outline, ID and, with a pose, axes");
    let shown = match markers.dictionaries.as_slice() {
        [] => "none".to_string(),
        [one] => one.name().to_string(),
        several => format!("{} dictionaries", several.len()),
    };
    egui::ComboBox::from_label("dictionary")
        .selected_text(shown)
        .height(400.0)
        .show_ui(ui, |ui| {
            for name in predefined_names() {
                let chosen =
                    markers.dictionaries.len() == 1 && markers.dictionaries[0].name() == name;
                if ui.selectable_label(chosen, name).clicked() && !chosen {
                    if let Ok(d) = Dictionary::predefined(name) {
                        markers.dictionaries = vec![Arc::new(d)];
                    }
                }
            }
        });
    ui.horizontal(|ui| {
        let mut length = markers.length.unwrap_or(0.0);
        let name = ui.label("marker length");
        ui.add(
            egui::DragValue::new(&mut length)
                .range(0.0..=1e6)
                .speed(0.001)
                .max_decimals(4),
        )
        .labelled_by(name.id)
        .on_hover_text(
            "side of the printed black square, in the unit the poses are wanted in; \
             0 = no poses (a pose also needs a lens calibration)",
        );
        markers.length = (length > 0.0).then_some(length);
    });
}

/// Draws every marker of `frame`: its outline with the first corner marked, its ID (with its
/// dictionary when the frame holds several), and its axes when it has a pose and `axes` gives
/// the calibration and the axes' length. `to_screen` maps image coordinates (pixel centres at
/// whole numbers) to the screen.
pub fn draw_markers(
    painter: &egui::Painter,
    frame: &FrameResult,
    to_screen: &dyn Fn([f64; 2]) -> Pos2,
    axes: Option<(&Calibration, f64)>,
) -> MarkerOverlay {
    let mut drawn = MarkerOverlay::default();
    let several = frame
        .markers
        .iter()
        .any(|m| m.dictionary != frame.markers[0].dictionary);
    let font = egui::FontId::monospace(12.0);
    for m in &frame.markers {
        let corners: Vec<Pos2> = (0..4).map(|k| to_screen(m.marker.corner(k))).collect();
        painter.add(Shape::closed_line(
            corners.clone(),
            Stroke::new(OUTLINE_WIDTH, MARKER_COLOUR),
        ));
        painter.rect_filled(
            egui::Rect::from_center_size(corners[0], Vec2::splat(5.0)),
            0.0,
            FIRST_CORNER_COLOUR,
        );
        painter.text(
            to_screen(m.marker.centre()),
            egui::Align2::CENTER_CENTER,
            marker_label(m, several),
            font.clone(),
            MARKER_COLOUR,
        );
        drawn.outlines += 1;
        if let (Some(pose), Some((calibration, length))) = (&m.pose, axes) {
            if draw_axes(painter, pose, calibration, length, to_screen) {
                drawn.axes += 1;
            }
        }
    }
    drawn
}

/// The marker frame's x, y and z axes of `length` from its centre; false when a point of them
/// is not in front of the camera.
fn draw_axes(
    painter: &egui::Painter,
    pose: &crate::fiducial::Pose,
    calibration: &Calibration,
    length: f64,
    to_screen: &dyn Fn([f64; 2]) -> Pos2,
) -> bool {
    let ends = [
        [0.0, 0.0, 0.0],
        [length, 0.0, 0.0],
        [0.0, length, 0.0],
        [0.0, 0.0, length],
    ]
    .map(|p| project_point(pose, calibration, p));
    let [Some(origin), Some(x), Some(y), Some(z)] = ends else {
        return false;
    };
    let origin = to_screen(origin);
    for (end, colour) in [x, y, z].into_iter().zip(AXIS_COLOURS) {
        painter.line_segment([origin, to_screen(end)], Stroke::new(AXIS_WIDTH, colour));
    }
    true
}

/// "ID 23", or "ID 23 DICT_4X4_50" when the frame holds markers of several dictionaries.
pub fn marker_label(m: &MarkerObservation, with_dictionary: bool) -> String {
    if with_dictionary {
        format!("ID {} {}", m.marker.id, m.dictionary)
    } else {
        format!("ID {}", m.marker.id)
    }
}

/// The frame's markers as a table: track, ID, dictionary, bit errors, centre, angle and, with
/// a pose, the distance from the camera.
pub fn marker_table(ui: &mut egui::Ui, frame: &FrameResult) {
    ui.strong(format!("{} markers", frame.markers.len()));
    if frame.markers.is_empty() {
        return;
    }
    egui::ScrollArea::vertical()
        .id_salt("marker_table")
        .max_height(180.0)
        .show(ui, |ui| {
            egui::Grid::new("markers")
                .striped(true)
                .num_columns(8)
                .show(ui, |ui| {
                    for title in ["track", "id", "dict", "bits", "x", "y", "angle", "distance"] {
                        ui.label(title);
                    }
                    ui.end_row();
                    for m in frame.markers.iter().take(MAX_TABLE_ROWS) {
                        for cell in marker_cells(m) {
                            ui.monospace(cell);
                        }
                        ui.end_row();
                    }
                });
            if frame.markers.len() > MAX_TABLE_ROWS {
                ui.label(format!("… {} more", frame.markers.len() - MAX_TABLE_ROWS));
            }
        });
}

/// One row of the marker table.
fn marker_cells(m: &MarkerObservation) -> [String; 8] {
    let [x, y] = m.marker.centre();
    let distance = m.pose.map_or(String::new(), |p| {
        let [a, b, c] = p.tvec;
        format!("{:.3}", (a * a + b * b + c * c).sqrt())
    });
    [
        format!("#{}", m.track),
        m.marker.id.to_string(),
        m.dictionary.to_string(),
        m.marker.hamming.to_string(),
        format!("{x:.1}"),
        format!("{y:.1}"),
        format!("{:.1}°", m.marker.angle_deg),
        distance,
    ]
}
