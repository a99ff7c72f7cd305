//! Several sources side by side: the central area split into about square cells (2 → 2×1,
//! 3–4 → 2×2, 5–6 → 3×2, …), each the frame view of one source (`ViewPanel`, with its overlay)
//! under a title: its number and name, its frames/s and frame time, and a button that
//! enlarges it to the whole area and back. A click in a cell selects its source; a source
//! that failed or ended shows why in its cell, with a button that opens it again.

use super::state::AppState;
use super::view::ViewPanel;
use egui::{Color32, Rect, Sense, Vec2};

/// A source's cell this pass.
pub struct Cell<'a> {
    pub state: &'a mut AppState,
    pub view: &'a mut ViewPanel,
    pub selected: bool,
}

#[derive(Default)]
pub struct GridPanel {
    /// The source shown alone over the whole area, if one is.
    pub enlarged: Option<usize>,
}

/// Columns × rows for `n` cells: about square, wider than tall.
pub fn grid_shape(n: usize) -> (usize, usize) {
    let cols = ((n as f64).sqrt().ceil() as usize).max(1);
    (cols, n.div_ceil(cols).max(1))
}

/// The rectangles of `n` cells over `area`, row by row.
fn cell_rects(area: Rect, n: usize) -> Vec<Rect> {
    let (cols, rows) = grid_shape(n);
    let size = Vec2::new(area.width() / cols as f32, area.height() / rows as f32);
    (0..n)
        .map(|k| {
            let at = Vec2::new((k % cols) as f32 * size.x, (k / cols) as f32 * size.y);
            Rect::from_min_size(area.min + at, size)
        })
        .collect()
}

/// Frames per second and frame time (the frame's steps together) of a source.
fn rate_text(state: &AppState) -> String {
    let fps = state.result_fps();
    match &state.frame {
        Some(f) => {
            let ms: f64 = f.timings.steps.iter().map(|s| s.ms).sum();
            format!("{fps:.1} fps · {ms:.2} ms/frame")
        }
        None => format!("{fps:.1} fps"),
    }
}

impl GridPanel {
    /// Draws the cells (only the enlarged one while one is); returns the index of the cell
    /// clicked, to be selected.
    pub fn ui(&mut self, ui: &mut egui::Ui, cells: Vec<Cell<'_>>) -> Option<usize> {
        if self.enlarged.is_some_and(|e| e >= cells.len()) {
            self.enlarged = None;
        }
        let shown: Vec<(usize, Cell)> = cells
            .into_iter()
            .enumerate()
            .filter(|(i, _)| self.enlarged.is_none_or(|e| e == *i))
            .collect();
        let rects = cell_rects(ui.available_rect_before_wrap(), shown.len());
        let mut clicked = None;
        for ((i, cell), rect) in shown.into_iter().zip(rects) {
            if self.cell_ui(ui, i, cell, rect) {
                clicked = Some(i);
            }
        }
        clicked
    }

    /// One cell: its title, its error, its view, and a frame (highlighted when selected).
    /// Returns whether it was clicked.
    fn cell_ui(&mut self, ui: &mut egui::Ui, i: usize, cell: Cell<'_>, rect: Rect) -> bool {
        let inner = rect.shrink(4.0);
        let builder = egui::UiBuilder::new()
            .max_rect(inner)
            .id_salt(("source cell", i));
        let mut clicked = false;
        ui.scope_builder(builder, |ui| {
            clicked = self.title(ui, i, cell.state);
            let failed = error_line(ui, cell.state);
            if !(failed && cell.state.frame.is_none()) {
                cell.view.ui(ui, cell.state);
            }
        });
        let stroke = if cell.selected {
            ui.visuals().selection.stroke
        } else {
            ui.visuals().widgets.noninteractive.bg_stroke
        };
        let stroke = egui::Stroke::new(if cell.selected { 2.5 } else { 1.0 }, stroke.color);
        ui.painter()
            .rect_stroke(rect.shrink(1.5), 3.0, stroke, egui::StrokeKind::Inside);
        let pressed_here = ui.input(|inp| {
            inp.pointer.primary_clicked()
                && inp.pointer.interact_pos().is_some_and(|p| rect.contains(p))
        });
        clicked || pressed_here
    }

    /// The title line: number and name (click: select; double-click: enlarge or back),
    /// rate, and the enlarge button. Returns whether the title was clicked.
    fn title(&mut self, ui: &mut egui::Ui, i: usize, state: &AppState) -> bool {
        let mut clicked = false;
        ui.horizontal(|ui| {
            let name = egui::RichText::new(format!("{} {}", i + 1, state.source_name())).strong();
            let title = ui
                .add(egui::Label::new(name).sense(Sense::click()).truncate())
                .on_hover_text("click: select this source; double-click: enlarge it or back");
            clicked = title.clicked();
            let enlarged = self.enlarged == Some(i);
            if title.double_clicked() {
                self.toggle(i);
            }
            ui.weak(rate_text(state));
            let button = if enlarged { "back to grid" } else { "enlarge" };
            if ui.small_button(button).clicked() {
                self.toggle(i);
            }
        });
        clicked
    }

    fn toggle(&mut self, i: usize) {
        self.enlarged = match self.enlarged {
            Some(e) if e == i => None,
            _ => Some(i),
        };
    }
}

/// Why the source stopped, with a button that opens it again. Returns whether there was one.
fn error_line(ui: &mut egui::Ui, state: &mut AppState) -> bool {
    let Some(why) = state.source_error.clone() else {
        return false;
    };
    ui.horizontal_wrapped(|ui| {
        ui.colored_label(Color32::from_rgb(255, 110, 90), why);
        if !state.source_spec.is_empty() && ui.small_button("reopen").clicked() {
            state.open_requests.push(state.source_spec.clone());
        }
    });
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_is_about_square() {
        let shapes: Vec<(usize, usize)> = (1..=9).map(grid_shape).collect();
        assert_eq!(
            shapes,
            [
                (1, 1),
                (2, 1),
                (2, 2),
                (2, 2),
                (3, 2),
                (3, 2),
                (3, 3),
                (3, 3),
                (3, 3)
            ]
        );
        let area = Rect::from_min_size(egui::pos2(10.0, 20.0), Vec2::new(300.0, 200.0));
        let rects = cell_rects(area, 3);
        assert_eq!(rects[1].min, egui::pos2(160.0, 20.0));
        assert_eq!(rects[2].min, egui::pos2(10.0, 120.0));
        assert_eq!(rects[2].size(), Vec2::new(150.0, 100.0));
    }
}
