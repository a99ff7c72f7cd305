//! Components table: the current frame's components, sortable; a click selects one (it is
//! highlighted in the view); the table exports to CSV.

use super::state::AppState;
use super::widgets::{sort_arrow, sort_clicked};
use crate::output::export::{Exporter, Format};
use crate::pipeline::FrameResult;
use std::io::Write;
use std::path::Path;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    Id,
    Track,
    Area,
    Left,
    Top,
    Width,
    Height,
    CentroidX,
    CentroidY,
}

impl Column {
    const ALL: [Column; 9] = [
        Column::Id,
        Column::Track,
        Column::Area,
        Column::Left,
        Column::Top,
        Column::Width,
        Column::Height,
        Column::CentroidX,
        Column::CentroidY,
    ];

    fn title(self) -> &'static str {
        match self {
            Column::Id => "id",
            Column::Track => "track",
            Column::Area => "area",
            Column::Left => "left",
            Column::Top => "top",
            Column::Width => "w",
            Column::Height => "h",
            Column::CentroidX => "cx",
            Column::CentroidY => "cy",
        }
    }

    /// Compares rows `i` and `j` of `frame`.
    fn cmp(self, frame: &FrameResult, i: usize, j: usize) -> std::cmp::Ordering {
        let (a, b) = (&frame.components[i], &frame.components[j]);
        match self {
            Column::Id => a.label.cmp(&b.label),
            Column::Track => frame.track_ids.get(i).cmp(&frame.track_ids.get(j)),
            Column::Area => a.area.cmp(&b.area),
            Column::Left => a.left.cmp(&b.left),
            Column::Top => a.top.cmp(&b.top),
            Column::Width => a.width.cmp(&b.width),
            Column::Height => a.height.cmp(&b.height),
            Column::CentroidX => frame.position(i).0.total_cmp(&frame.position(j).0),
            Column::CentroidY => frame.position(i).1.total_cmp(&frame.position(j).1),
        }
    }
}

pub struct ComponentsPanel {
    pub sort: (Column, bool),
    pub export_path: String,
    pub export_message: Option<String>,
    /// Row order for (frame index, sort), kept until either changes.
    order: Vec<usize>,
    order_key: Option<(u64, usize, Column, bool)>,
}

impl Default for ComponentsPanel {
    fn default() -> Self {
        Self {
            sort: (Column::Id, true),
            export_path: "components.csv".into(),
            export_message: None,
            order: Vec::new(),
            order_key: None,
        }
    }
}

impl ComponentsPanel {
    /// Rows in display order (indices into `frame.components`).
    pub fn order(&mut self, frame: &FrameResult) -> &[usize] {
        let key = (
            frame.index,
            std::ptr::from_ref(frame) as usize,
            self.sort.0,
            self.sort.1,
        );
        if self.order_key != Some(key) {
            let (col, ascending) = self.sort;
            self.order = (0..frame.components.len()).collect();
            self.order.sort_by(|&a, &b| {
                let o = col.cmp(frame, a, b);
                if ascending {
                    o
                } else {
                    o.reverse()
                }
            });
            self.order_key = Some(key);
        }
        &self.order
    }

    pub fn ui(&mut self, ui: &mut egui::Ui, state: &mut AppState) {
        let Some(frame) = state.frame.clone() else {
            ui.label("no frame yet");
            return;
        };
        selection_line(ui, &frame, state);
        self.export_line(ui, &frame);
        if let Some(m) = &self.export_message {
            ui.label(m);
        }
        ui.separator();
        self.headings(ui);
        let order = self.order(&frame).to_vec();
        let row_height = ui.text_style_height(&egui::TextStyle::Body) + 4.0;
        egui::ScrollArea::vertical()
            .auto_shrink([false, false])
            .show_rows(ui, row_height, order.len(), |ui, range| {
                for &i in &order[range] {
                    component_row(ui, &frame, i, row_height, state);
                }
            });
    }

    /// The path box and the button that writes the table as CSV.
    fn export_line(&mut self, ui: &mut egui::Ui, frame: &FrameResult) {
        ui.horizontal(|ui| {
            let name = ui.label("file");
            ui.add(egui::TextEdit::singleline(&mut self.export_path).desired_width(140.0))
                .labelled_by(name.id);
            if ui.button("Export CSV").clicked() {
                let path = Path::new(&self.export_path).to_path_buf();
                self.export_message = Some(match export_csv(frame, &path) {
                    Ok(()) => format!(
                        "wrote {} rows to {}",
                        frame.components.len(),
                        path.display()
                    ),
                    Err(e) => format!("export failed: {e}"),
                });
            }
        });
    }

    /// The column headings: a click sorts by the column (again: the other way).
    fn headings(&mut self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            for (col, w) in Column::ALL.into_iter().zip(COLUMN_WIDTHS) {
                let title = format!("{}{}", col.title(), sort_arrow(self.sort, col));
                let b = egui::Button::new(title).min_size(egui::vec2(w, 0.0));
                if ui.add(b).clicked() {
                    self.sort = sort_clicked(self.sort, col);
                }
            }
        });
    }
}

/// Column widths (points), in the order of `Column::ALL`.
const COLUMN_WIDTHS: [f32; 9] = [40.0, 48.0, 48.0, 40.0, 40.0, 30.0, 30.0, 60.0, 60.0];

/// The component count, and what is known of the selected component.
fn selection_line(ui: &mut egui::Ui, frame: &FrameResult, state: &AppState) {
    ui.horizontal(|ui| {
        ui.strong(format!("{} components", frame.components.len()));
        if let Some(c) = state.selected_component() {
            let track = match super::state::track_of_label(frame, c.label) {
                Some(id) => format!(", track #{id}"),
                None => String::new(),
            };
            ui.label(format!("· selected {} (area {}{track})", c.label, c.area));
            if let Some(i) = frame.components.iter().position(|k| k.label == c.label) {
                let details = selected_details(frame, i, state.settings.world.as_deref());
                if !details.is_empty() {
                    ui.label(details);
                }
            }
        }
    });
}

/// Row `i` of the table, its cells painted as text; a click selects the component and brings
/// it into view.
fn component_row(
    ui: &mut egui::Ui,
    frame: &FrameResult,
    i: usize,
    row_height: f32,
    state: &mut AppState,
) {
    let c = &frame.components[i];
    let selected = state.selected == Some(c.label);
    let row = ui.horizontal(|ui| {
        for (text, w) in row_cells(frame, i).iter().zip(COLUMN_WIDTHS) {
            let (rect, _) =
                ui.allocate_exact_size(egui::vec2(w, row_height - 4.0), egui::Sense::hover());
            ui.painter().text(
                rect.left_center(),
                egui::Align2::LEFT_CENTER,
                text,
                egui::TextStyle::Body.resolve(ui.style()),
                ui.visuals().text_color(),
            );
        }
    });
    let response = ui
        .interact(
            row.response.rect,
            ui.scope_id().with(("component_row", c.label)),
            egui::Sense::click(),
        )
        .on_hover_text("click to highlight it in the view");
    if selected {
        ui.painter().rect_filled(
            row.response.rect,
            0.0,
            ui.visuals().selection.bg_fill.gamma_multiply(0.4),
        );
    }
    if response.clicked() {
        state.select(Some(c.label));
        state.focus_selected = true;
    }
}

/// The texts of row `i`, in the order of `Column::ALL`.
fn row_cells(frame: &FrameResult, i: usize) -> [String; 9] {
    let c = &frame.components[i];
    // Centroid: the sub-pixel one when the frame has it.
    let (cx, cy) = frame.position(i);
    [
        c.label.to_string(),
        frame
            .track_ids
            .get(i)
            .map(|t| format!("#{t}"))
            .unwrap_or_default(),
        c.area.to_string(),
        c.left.to_string(),
        c.top.to_string(),
        c.width.to_string(),
        c.height.to_string(),
        format!("{cx:.2}"),
        format!("{cy:.2}"),
    ]
}

/// The world position (in the mapping's units) and the shape of component `i`, where computed.
pub fn selected_details(
    frame: &FrameResult,
    i: usize,
    world: Option<&crate::geometry::WorldMapping>,
) -> String {
    let mut parts = Vec::new();
    if let Some([x, y]) = frame.world.get(i) {
        let units = world.map_or("", |w| w.units.as_str());
        parts.push(
            format!("world ({x:.2}, {y:.2}) {units}")
                .trim_end()
                .to_string(),
        );
    }
    if let Some(d) = frame.shapes.get(i) {
        parts.push(format!(
            "circularity {:.2}, inertia ratio {:.2}, {:.0}°",
            d.circularity, d.inertia_ratio, d.orientation_deg
        ));
    }
    parts.join(" · ")
}

/// Writes the frame's components as CSV (the `analyze` columns) to a temporary file beside
/// `path`, renamed into place on success.
pub fn export_csv(frame: &FrameResult, path: &Path) -> crate::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let out_err = |why: String| crate::Error::Output {
        path: path.to_path_buf(),
        why,
    };
    let tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| out_err(e.to_string()))?;
    let mut exporter = Exporter::new(std::io::BufWriter::new(tmp), Format::Csv)
        .map_err(|e| out_err(e.to_string()))?;
    // With the track IDs and sub-pixel centroids when the frame has them (a still image's
    // frame has no tracker behind it, but still one ID per component).
    if frame.track_ids.len() == frame.components.len() {
        exporter.write_frame_with(
            frame.index,
            frame.time_s,
            &frame.name,
            &frame.components,
            &crate::output::row_text::RowExtras::of(frame),
        )
    } else {
        exporter.write_frame_at(frame.index, frame.time_s, &frame.name, &frame.components)
    }
    .map_err(|e| out_err(e.to_string()))?;
    let mut writer = exporter.finish().map_err(|e| out_err(e.to_string()))?;
    writer.flush().map_err(|e| out_err(e.to_string()))?;
    let tmp = writer
        .into_inner()
        .map_err(|e| out_err(e.error().to_string()))?;
    tmp.persist(path)
        .map_err(|e| out_err(e.error.to_string()))?;
    Ok(())
}
