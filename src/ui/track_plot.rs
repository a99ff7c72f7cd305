//! Selected-track panel: the followed track's x and y against the frame index, with its ID,
//! the first frame it was seen in, its length and its current position.

use super::state::AppState;
use egui::Color32;
use egui_plot::{Legend, Line, Plot, PlotPoints};

const X_COLOUR: Color32 = Color32::from_rgb(255, 127, 14);
const Y_COLOUR: Color32 = Color32::from_rgb(31, 180, 255);
/// The panel grows to fit its contents; this keeps the plot readable.
const PLOT_MIN_HEIGHT: f32 = 160.0;

#[derive(Default)]
pub struct TrackPlotPanel {
    /// (track ID, points plotted) in the last pass; None when no track was shown.
    pub shown: Option<(u64, usize)>,
}

impl TrackPlotPanel {
    pub fn ui(&mut self, ui: &mut egui::Ui, state: &AppState) {
        ui.strong("Selected track");
        let Some(track) = state.tracks.selected() else {
            self.shown = None;
            ui.weak("No track selected: click a component in the view or the table.");
            return;
        };
        ui.label(format!("Track #{}", track.id));
        let (Some(first), Some(last)) = (track.first_frame, track.points.back()) else {
            self.shown = Some((track.id, 0));
            ui.weak("not seen yet");
            return;
        };
        ui.label(format!(
            "first seen at frame {first} · {} frames long · {} detections",
            last.frame.saturating_sub(first) + 1,
            track.detections
        ));
        let now = state.frame.as_ref().map(|f| f.index);
        if now == Some(last.frame) {
            ui.label(format!("at ({:.2}, {:.2}) px", last.x, last.y));
        } else {
            ui.label(format!(
                "not in this frame; last at ({:.2}, {:.2}) px in frame {}",
                last.x, last.y, last.frame
            ));
        }

        Plot::new("selected_track_plot")
            .legend(Legend::default())
            .height(ui.available_height().max(PLOT_MIN_HEIGHT))
            .x_axis_label("frame")
            .y_axis_label("px")
            .allow_scroll(false)
            .show(ui, |plot| {
                let xs: PlotPoints = track.points.iter().map(|p| [p.frame as f64, p.x]).collect();
                let ys: PlotPoints = track.points.iter().map(|p| [p.frame as f64, p.y]).collect();
                plot.line(Line::new("x", xs).color(X_COLOUR));
                plot.line(Line::new("y", ys).color(Y_COLOUR));
            });
        self.shown = Some((track.id, track.points.len()));
    }
}
