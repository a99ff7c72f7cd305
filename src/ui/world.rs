//! The World coordinates section of the controls panel: reference points clicked in the view,
//! each with the world position typed beside it. Four or more that determine a homography
//! replace the mapping in use at once (the `x_world,y_world` columns, streams, the overlay);
//! a set that does not (too few, incomplete, repeated, three on one line) is named in the
//! panel and the last mapping that worked stays. The points in use are saved with the settings
//! and can be written to a file that `--world-file` (and the window's `--config`) reads.

use super::config::UiSettings;
use super::widgets::{outcome, path_box, FileAction, FileButtons};
use crate::geometry::reference_file::ReferenceFile;
use crate::geometry::ReferencePoint;
use std::path::Path;

/// Image points closer than this (pixels) count as the same point.
const SAME_POINT_PX: f64 = 0.5;

/// One reference point being edited: where it was clicked, and the world position as typed.
#[derive(Clone, Debug, PartialEq)]
pub struct PointRow {
    /// Pixel-index coordinates (pixel centres on whole numbers), as the centroids.
    pub image: [f64; 2],
    pub x: String,
    pub y: String,
}

#[derive(Clone, Debug, Default)]
pub struct WorldEditor {
    pub rows: Vec<PointRow>,
    /// Clicks in the view add points.
    pub picking: bool,
    /// Why the rows give no mapping now (the panel shows it); None when they give the one in
    /// use.
    pub problem: Option<String>,
    /// The path typed in the file box.
    pub path_text: String,
}

/// Numbers as typed and as shown: no trailing zeros.
fn number_text(v: f64) -> String {
    format!("{v}")
}

impl WorldEditor {
    /// The editor over the points the settings hold.
    pub fn from_settings(settings: &UiSettings) -> Self {
        let mut editor = WorldEditor::default();
        editor.set_rows(&settings.world_points);
        editor
    }

    fn set_rows(&mut self, points: &[ReferencePoint]) {
        self.rows = points
            .iter()
            .map(|p| PointRow {
                image: p.image,
                x: number_text(p.world[0]),
                y: number_text(p.world[1]),
            })
            .collect();
    }

    /// Adds a point clicked at image position `image`; its world position is typed next.
    pub fn add(&mut self, image: [f64; 2]) {
        self.rows.push(PointRow {
            image,
            x: String::new(),
            y: String::new(),
        });
    }

    /// The reference points the rows give, or what keeps them from giving a homography that
    /// the fit itself would not name (an empty or bad number, a repeated point, too few).
    pub fn points(&self) -> Result<Vec<ReferencePoint>, String> {
        // A point clicked twice is named before its coordinates are asked for.
        for (i, p) in self.rows.iter().enumerate() {
            for (j, q) in self.rows.iter().enumerate().skip(i + 1) {
                if (p.image[0] - q.image[0]).hypot(p.image[1] - q.image[1]) < SAME_POINT_PX {
                    return Err(format!(
                        "points {} and {} are the same image point; remove one",
                        i + 1,
                        j + 1
                    ));
                }
            }
        }
        let mut points: Vec<ReferencePoint> = Vec::with_capacity(self.rows.len());
        for (i, row) in self.rows.iter().enumerate() {
            let n = i + 1;
            let parse = |t: &str, axis: &str| {
                let t = t.trim();
                match t.parse::<f64>() {
                    Ok(v) if v.is_finite() => Ok(v),
                    _ if t.is_empty() => Err(format!("point {n}: type its world {axis}")),
                    _ => Err(format!("point {n}: world {axis} '{t}' is not a number")),
                }
            };
            let world = [parse(&row.x, "X")?, parse(&row.y, "Y")?];
            if let Some(m) = points.iter().position(|p| p.world == world) {
                return Err(format!(
                    "points {} and {n} have the same world position; correct one",
                    m + 1
                ));
            }
            points.push(ReferencePoint {
                image: row.image,
                world,
            });
        }
        if points.len() < 4 {
            return Err(format!(
                "{} point(s): at least 4 are needed, no three on one line",
                points.len()
            ));
        }
        Ok(points)
    }

    /// Fits the rows: a mapping replaces the one in `settings` (and its points are the ones
    /// saved); otherwise `problem` says why, and the settings keep the last mapping.
    pub fn apply(&mut self, settings: &mut UiSettings) {
        let fitted = self.points().and_then(|points| {
            let mut trial = settings.clone();
            trial.world_points = points;
            trial.refit_world()?;
            Ok(trial)
        });
        match fitted {
            Ok(trial) => {
                settings.world_points = trial.world_points;
                settings.world = trial.world;
                self.problem = None;
            }
            Err(why) => {
                let why = why.trim_start_matches("world: ").to_string();
                self.problem = Some(match &settings.world {
                    Some(w) => format!(
                        "{why}; still using the last mapping ({} points)",
                        w.points.len()
                    ),
                    None => format!("{why}; positions stay in pixels"),
                });
            }
        }
    }

    /// Forgets every point and the mapping: positions in pixels.
    pub fn clear(&mut self, settings: &mut UiSettings) {
        self.rows.clear();
        self.problem = None;
        settings.world_points.clear();
        settings.world = None;
    }

    /// Writes the points in use (with calibration and units) as a reference-point file.
    pub fn save(&self, settings: &UiSettings, path: &Path) -> Result<(), String> {
        if settings.world.is_none() {
            return Err("no mapping to save: give four or more points first".into());
        }
        let file = ReferenceFile {
            points: settings.world_points.clone(),
            calibration: (!settings.calibration.is_empty())
                .then(|| settings.calibration.clone().into()),
            units: settings.world_units.clone(),
        };
        std::fs::write(path, file.to_toml()).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Reads a reference-point file (or a config file with a `[world]` table) into the rows
    /// and fits them.
    pub fn load(&mut self, settings: &mut UiSettings, path: &Path) -> Result<(), String> {
        let file = ReferenceFile::load(path).map_err(|e| e.to_string())?;
        self.set_rows(&file.points);
        let before = (settings.calibration.clone(), settings.world_units.clone());
        settings.calibration = file
            .calibration
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        settings.world_units = file.units;
        self.apply(settings);
        if let Some(why) = &self.problem {
            // The file's calibration and units go with its points: the mapping kept goes
            // with the old ones.
            (settings.calibration, settings.world_units) = before;
            return Err(format!("{}: {why}", path.display()));
        }
        Ok(())
    }
}

/// Colour of the reference points in the view.
pub const POINT_COLOUR: egui::Color32 = egui::Color32::from_rgb(255, 128, 0);
const GOOD: egui::Color32 = egui::Color32::from_rgb(90, 200, 120);
const WARNING: egui::Color32 = egui::Color32::from_rgb(255, 170, 0);

/// The section. Returns messages for the notices.
pub fn world_ui(
    ui: &mut egui::Ui,
    editor: &mut WorldEditor,
    settings: &mut UiSettings,
) -> Vec<String> {
    ui.heading("World coordinates");
    let mut changed = picking_line(ui, editor, settings);
    changed |= point_rows(ui, editor);
    if changed {
        editor.apply(settings);
    }
    mapping_status(ui, editor, settings);
    if !settings.calibration.is_empty() {
        ui.weak(format!("lens calibration: {}", settings.calibration));
    }
    path_box(ui, &mut editor.path_text, "points.toml");
    file_buttons(ui, editor, settings)
}

/// The button that starts and stops picking points, and the units. Returns whether the
/// units changed.
fn picking_line(ui: &mut egui::Ui, editor: &mut WorldEditor, settings: &mut UiSettings) -> bool {
    let mut changed = false;
    ui.horizontal(|ui| {
        let text = if editor.picking {
            "Stop picking"
        } else {
            "Pick points"
        };
        if ui
            .selectable_label(editor.picking, text)
            .on_hover_text(
                "click reference points in the view, then type where each lies in the world",
            )
            .clicked()
        {
            editor.picking = !editor.picking;
        }
        let name = ui.label("units");
        changed = ui
            .add(
                egui::TextEdit::singleline(&mut settings.world_units)
                    .hint_text("mm")
                    .desired_width(40.0),
            )
            .labelled_by(name.id)
            .changed();
    });
    changed
}

/// A row per point: its number and image position, its world position typed, a remove button.
/// Returns whether a point changed or went.
fn point_rows(ui: &mut egui::Ui, editor: &mut WorldEditor) -> bool {
    let mut changed = false;
    let mut remove = None;
    for (i, row) in editor.rows.iter_mut().enumerate() {
        let n = i + 1;
        ui.horizontal(|ui| {
            ui.colored_label(POINT_COLOUR, format!("{n}"))
                .on_hover_text("image position, pixels");
            ui.label(format!("({:.1}, {:.1})", row.image[0], row.image[1]));
            for (axis, text) in [("X", &mut row.x), ("Y", &mut row.y)] {
                let name = ui.label(format!("{axis}{n}"));
                changed |= ui
                    .add(egui::TextEdit::singleline(text).desired_width(44.0))
                    .labelled_by(name.id)
                    .changed();
            }
            if ui.small_button("remove").clicked() {
                remove = Some(i);
            }
        });
    }
    if let Some(i) = remove {
        editor.rows.remove(i);
        changed = true;
    }
    changed
}

/// The mapping in use and how well it fits, or why the points give none.
fn mapping_status(ui: &mut egui::Ui, editor: &WorldEditor, settings: &UiSettings) {
    match (&editor.problem, &settings.world) {
        (Some(why), _) => {
            ui.colored_label(WARNING, why);
        }
        (None, Some(w)) => {
            let units = if w.units.is_empty() { "" } else { &w.units };
            ui.colored_label(
                GOOD,
                format!(
                    "mapping from {} points, largest residual {:.3} {units}",
                    w.points.len(),
                    w.max_residual()
                ),
            );
        }
        (None, None) if editor.rows.is_empty() => {
            ui.weak("positions in pixels: pick 4 or more points");
        }
        (None, None) => {}
    }
}

/// Load, save and clear the points. Returns messages for the notices.
fn file_buttons(
    ui: &mut egui::Ui,
    editor: &mut WorldEditor,
    settings: &mut UiSettings,
) -> Vec<String> {
    let buttons = FileButtons {
        names: ["Load points", "Save points", "Clear points"],
        can_save: settings.world.is_some(),
        can_clear: !editor.rows.is_empty() || settings.world.is_some(),
        save_hover: Some("for --world-file, or the window's --config"),
    };
    let (action, path) = match buttons.ui(ui, &editor.path_text) {
        Some(clicked) => clicked,
        None => return Vec::new(),
    };
    let message = match action {
        FileAction::Load => {
            let loaded = editor.load(settings, Path::new(&path));
            outcome(loaded, format!("reference points loaded from {path}"))
        }
        FileAction::Save => {
            let saved = editor.save(settings, Path::new(&path));
            outcome(saved, format!("reference points saved to {path}"))
        }
        FileAction::Clear => {
            editor.clear(settings);
            return Vec::new();
        }
    };
    vec![message]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 100×50 px rectangle that is 10×5 cm in the world.
    fn square(editor: &mut WorldEditor) {
        for (image, world) in [
            ([0.0, 0.0], ("0", "0")),
            ([100.0, 0.0], ("10", "0")),
            ([100.0, 50.0], ("10", "5")),
            ([0.0, 50.0], ("0", "5")),
        ] {
            editor.add(image);
            let row = editor.rows.last_mut().unwrap();
            (row.x, row.y) = (world.0.into(), world.1.into());
        }
    }

    #[test]
    fn bad_point_sets_are_named_and_the_last_mapping_stays() {
        let mut settings = UiSettings::default();
        let mut editor = WorldEditor::default();
        editor.add([1.0, 2.0]);
        editor.apply(&mut settings);
        assert_eq!(
            editor.problem.as_deref(),
            Some("point 1: type its world X; positions stay in pixels")
        );
        editor.rows[0].x = "1,5".into();
        editor.rows[0].y = "0".into();
        assert_eq!(
            editor.points().unwrap_err(),
            "point 1: world X '1,5' is not a number"
        );
        editor.rows.clear();
        square(&mut editor);
        editor.apply(&mut settings);
        assert_eq!(editor.problem, None);
        let world = settings.world.clone().unwrap();
        let w = world.to_world(50.0, 25.0);
        assert!(
            (w[0] - 5.0).abs() < 1e-9 && (w[1] - 2.5).abs() < 1e-9,
            "{w:?}"
        );
        assert_eq!(settings.world_points.len(), 4);

        // A fifth point on the first: named, and the mapping stays.
        editor.add([0.2, 0.1]);
        (editor.rows[4].x, editor.rows[4].y) = ("3".into(), "3".into());
        editor.apply(&mut settings);
        assert_eq!(
            editor.problem.as_deref(),
            Some("points 1 and 5 are the same image point; remove one; still using the last mapping (4 points)")
        );
        assert!(Arc::ptr_eq(settings.world.as_ref().unwrap(), &world));
        // Four on one line: the fit says so.
        editor.rows.truncate(4);
        editor.rows[2].image = [50.0, 0.0];
        editor.rows[3].image = [75.0, 0.0];
        editor.apply(&mut settings);
        let problem = editor.problem.clone().unwrap();
        assert!(
            problem.contains("one line") && problem.ends_with("(4 points)"),
            "{problem}"
        );
        assert_eq!(settings.world_points.len(), 4);
        // Too few.
        editor.rows.truncate(3);
        editor.apply(&mut settings);
        assert!(editor
            .problem
            .as_deref()
            .unwrap()
            .starts_with("3 point(s): at least 4"));
        editor.clear(&mut settings);
        assert!(settings.world.is_none() && settings.world_points.is_empty());
    }

    use std::sync::Arc;

    #[test]
    fn points_save_to_a_file_that_loads_back() {
        let mut settings = UiSettings {
            world_units: "cm".into(),
            ..UiSettings::default()
        };
        let mut editor = WorldEditor::default();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("points.toml");
        assert!(editor
            .save(&settings, &path)
            .unwrap_err()
            .contains("no mapping"));
        square(&mut editor);
        editor.apply(&mut settings);
        editor.save(&settings, &path).unwrap();
        let mut other = UiSettings::default();
        let mut loaded = WorldEditor::default();
        loaded.load(&mut other, &path).unwrap();
        assert_eq!(loaded.rows, editor.rows);
        assert_eq!(other.world_points, settings.world_points);
        assert_eq!(other.world.as_ref().unwrap().units, "cm");
        // A file without a usable set keeps what was there, and says why.
        std::fs::write(&path, "[world]\npoints = [\"0,0=0,0\"]\nunits = \"m\"\n").unwrap();
        let err = loaded.load(&mut other, &path).unwrap_err();
        assert!(err.contains("points.toml: 1 point(s)"), "{err}");
        assert_eq!(other.world_units, "cm");
        assert_eq!(other.world.as_ref().unwrap().points.len(), 4);
    }
}
