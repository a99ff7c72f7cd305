//! The window's mask (`crate::frame::mask`): what it holds, the region being drawn in the view,
//! a static mask being learned, and the Mask section of the controls panel (draw a region,
//! learn a static mask, load, save, clear).

use super::widgets::{outcome, path_box, FileAction, FileButtons};
use crate::frame::image::BinaryImage;
use crate::frame::mask::{Mask, PixelMask, Roi, StaticMaskLearner};
use std::path::Path;
use std::sync::Arc;

/// Frames a static mask is learned from unless the user picks another number.
pub const DEFAULT_LEARN_FRAMES: u32 = 30;
/// Pixels a learned mask reaches beyond what was bright.
const LEARN_MARGIN: u32 = 2;

pub struct MaskState {
    /// The mask the pipeline applies.
    pub mask: Option<Arc<Mask>>,
    /// Corners of the region being drawn (pixel-index coordinates), while drawing.
    pub drawing: Option<Vec<[f64; 2]>>,
    /// A static mask being learned, and the frames it still needs.
    learning: Option<(StaticMaskLearner, u32)>,
    pub learn_frames: u32,
    /// The path typed in the mask box.
    pub path_text: String,
    /// The file that holds the mask (it was loaded from or saved to it), "" when none does:
    /// what the settings save as `mask.file`.
    pub file: String,
}

impl Default for MaskState {
    fn default() -> Self {
        Self {
            mask: None,
            drawing: None,
            learning: None,
            learn_frames: DEFAULT_LEARN_FRAMES,
            path_text: String::new(),
            file: String::new(),
        }
    }
}

impl MaskState {
    /// Whether frames are being collected for a static mask: the pipeline then runs without
    /// the mask and delivers the thresholded frames.
    pub fn is_learning(&self) -> bool {
        self.learning.is_some()
    }

    pub fn start_learning(&mut self) {
        self.learning = Some((
            StaticMaskLearner::new(LEARN_MARGIN),
            self.learn_frames.max(1),
        ));
    }

    /// Adds a thresholded frame while learning; the message when the mask is complete.
    pub fn learn_from(&mut self, binary: &BinaryImage) -> Option<String> {
        let (learner, left) = self.learning.as_mut()?;
        learner.add(binary);
        *left -= 1;
        if *left > 0 {
            return None;
        }
        let (learner, _) = self.learning.take()?;
        Some(match learner.finish() {
            Ok(pixels) => {
                let masked = pixels.masked_pixels();
                let learned = Mask {
                    pixels: Some(pixels),
                    rois: Vec::new(),
                };
                self.combine(learned);
                format!(
                    "learned a static mask from {} frame(s): {masked} pixel(s) masked",
                    learner.frames()
                )
            }
            Err(e) => format!("cannot learn a static mask: {e}"),
        })
    }

    /// Adds `more` to the mask (both must keep a pixel).
    fn combine(&mut self, more: Mask) {
        self.file.clear();
        let current = self.mask.as_deref().cloned().unwrap_or_default();
        self.mask = match current.and(more) {
            Ok(m) => Some(Arc::new(m)),
            Err(_) => self.mask.take(),
        };
    }

    /// Ends the region being drawn: a polygon of three corners or more joins the mask.
    pub fn finish_drawing(&mut self) -> Option<String> {
        let points = self.drawing.take()?;
        if points.len() < 3 {
            return Some("a region needs at least 3 corners".into());
        }
        self.combine(Mask {
            pixels: None,
            rois: vec![Roi::Polygon(points)],
        });
        None
    }

    /// Loads a mask file (PNG or `.toml` region) into the mask.
    pub fn load(&mut self, path: &Path) -> Result<(), String> {
        let loaded = Mask::load(path).map_err(|e| e.to_string())?;
        let alone = self.mask.is_none();
        self.combine(loaded);
        if alone {
            self.file = path.display().to_string();
        }
        Ok(())
    }

    /// Saves the mask: a `.toml` file holds its one region, anything else is a PNG at the
    /// frame size.
    pub fn save(&mut self, path: &Path, frame_size: Option<(u32, u32)>) -> Result<(), String> {
        self.write(path, frame_size)?;
        self.file = path.display().to_string();
        Ok(())
    }

    fn write(&self, path: &Path, frame_size: Option<(u32, u32)>) -> Result<(), String> {
        let mask = self.mask.as_deref().ok_or("there is no mask to save")?;
        let is_toml = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("toml"));
        if is_toml {
            return match (&mask.pixels, mask.rois.as_slice()) {
                (None, [roi]) => std::fs::write(path, roi.to_toml())
                    .map_err(|e| format!("{}: {e}", path.display())),
                _ => Err(format!(
                    "{}: a .toml file holds one region; this mask has a pixel mask or several \
                     regions: save it as a .png",
                    path.display()
                )),
            };
        }
        let (w, h) = mask
            .pixel_size()
            .or(frame_size)
            .ok_or("no frame yet: the mask's size is not known")?;
        let pixels: PixelMask = mask.fit(w, h).map_err(|e| e.to_string())?;
        pixels.save_png(path).map_err(|e| e.to_string())
    }
}

/// The Mask section. Returns messages for the notices.
pub fn mask_ui(
    ui: &mut egui::Ui,
    masks: &mut MaskState,
    frame_size: Option<(u32, u32)>,
) -> Vec<String> {
    let mut messages = Vec::new();
    ui.heading("Mask");
    ui.label(mask_summary(masks.mask.as_deref()));
    ui.horizontal(|ui| match masks.drawing.as_ref().map(Vec::len) {
        None => {
            if ui
                .button("Draw region")
                .on_hover_text("click the corners in the view, then Finish")
                .clicked()
            {
                masks.drawing = Some(Vec::new());
            }
        }
        Some(n) => {
            ui.label(format!("{n} corner(s)"));
            if ui
                .add_enabled(n >= 3, egui::Button::new("Finish"))
                .clicked()
            {
                messages.extend(masks.finish_drawing());
            }
            if ui.button("Cancel").clicked() {
                masks.drawing = None;
            }
        }
    });
    learn_line(ui, masks);
    path_box(ui, &mut masks.path_text, "mask.png or roi.toml");
    messages.extend(file_buttons(ui, masks, frame_size));
    messages
}

/// What the mask holds, in a few words.
fn mask_summary(mask: Option<&Mask>) -> String {
    let Some(m) = mask else {
        return "none: every pixel is analysed".to_string();
    };
    let mut parts = Vec::new();
    if let Some((w, h)) = m.pixel_size() {
        parts.push(format!("pixel mask {w}x{h}"));
    }
    if !m.rois.is_empty() {
        parts.push(format!("{} region(s)", m.rois.len()));
    }
    parts.join(", ")
}

/// The button that learns a static mask, its number of frames, and how far it got.
fn learn_line(ui: &mut egui::Ui, masks: &mut MaskState) {
    ui.horizontal(|ui| {
        let learning = masks.is_learning();
        if ui
            .add_enabled(!learning, egui::Button::new("Learn static mask"))
            .on_hover_text("with the scene empty: mask everything bright in the next frames")
            .clicked()
        {
            masks.start_learning();
        }
        let name = ui.label("frames");
        ui.add_enabled(
            !learning,
            egui::DragValue::new(&mut masks.learn_frames).range(1..=600),
        )
        .labelled_by(name.id);
    });
    if let Some((_, left)) = &masks.learning {
        ui.label(format!("learning: {left} frame(s) to go"));
    }
}

/// Load, save and clear the mask. Returns the message for the notices.
fn file_buttons(
    ui: &mut egui::Ui,
    masks: &mut MaskState,
    frame_size: Option<(u32, u32)>,
) -> Option<String> {
    let buttons = FileButtons {
        names: ["Load", "Save", "Clear"],
        can_save: masks.mask.is_some(),
        can_clear: masks.mask.is_some(),
        save_hover: None,
    };
    let (action, path) = buttons.ui(ui, &masks.path_text)?;
    match action {
        FileAction::Load => {
            let loaded = masks.load(Path::new(&path));
            Some(outcome(loaded, format!("mask loaded from {path}")))
        }
        FileAction::Save => {
            let saved = masks.save(Path::new(&path), frame_size);
            Some(outcome(saved, format!("mask saved to {path}")))
        }
        FileAction::Clear => {
            masks.mask = None;
            masks.file.clear();
            None
        }
    }
}
