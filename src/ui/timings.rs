//! Timings panel: the backend banner, rates and counters, the current frame's steps as a stacked
//! bar, and a history plot per step.

use super::state::AppState;
use egui::{Color32, Rect, Sense, Vec2};
use egui_plot::{Legend, Line, Plot, PlotPoints};

/// A fixed colour per step name, so a step keeps its colour in the bar, the legend and the plot.
/// The pipeline's own steps have their own colours; kernel names share the rest by hash.
pub fn step_colour(step: &str) -> Color32 {
    const FIXED: [(&str, Color32); 8] = [
        ("capture", Color32::from_rgb(31, 119, 180)),
        ("threshold", Color32::from_rgb(255, 127, 14)),
        // GPU algorithms: threshold and bit-pack in one pass on the capture thread.
        ("threshold+pack", Color32::from_rgb(44, 160, 44)),
        ("upload", Color32::from_rgb(214, 39, 40)),
        ("download", Color32::from_rgb(140, 86, 75)),
        ("filter", Color32::from_rgb(188, 189, 34)),
        (
            crate::pipeline::FILTER_REST_STEP,
            Color32::from_rgb(188, 189, 34),
        ),
        ("ui", Color32::from_rgb(160, 160, 160)),
    ];
    const OTHERS: [Color32; 6] = [
        Color32::from_rgb(148, 103, 189),
        Color32::from_rgb(227, 119, 194),
        Color32::from_rgb(23, 190, 207),
        Color32::from_rgb(255, 187, 120),
        Color32::from_rgb(152, 223, 138),
        Color32::from_rgb(174, 199, 232),
    ];
    if let Some((_, c)) = FIXED.iter().find(|(name, _)| *name == step) {
        return *c;
    }
    // FNV-1a: stable across runs (std's hasher is seeded per process).
    let mut h: u32 = 0x811c_9dc5;
    for b in step.bytes() {
        h = (h ^ b as u32).wrapping_mul(0x0100_0193);
    }
    OTHERS[h as usize % OTHERS.len()]
}

/// One source's line in the timings panel of a window of several sources.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceLine {
    pub text: String,
    pub selected: bool,
}

impl SourceLine {
    /// Source `i`'s rate, latency and dropped frames, or why it stopped.
    pub fn of(i: usize, state: &AppState, selected: bool) -> Self {
        let c = &state.counters;
        let mut text = format!(
            "{} {}: {:.1} fps",
            i + 1,
            state.source_name(),
            state.result_fps()
        );
        if let Some(f) = &state.frame {
            text += &format!(" · latency {:.2} ms", f.timings.latency_ms);
        }
        text += &format!(" · dropped {}", c.dropped + c.dropped_results);
        if let Some(why) = &state.source_error {
            text += &format!(" · stopped: {why}");
        }
        Self { text, selected }
    }
}

/// A line per source (a click selects it); returns the index of the line clicked.
pub fn source_lines_ui(ui: &mut egui::Ui, lines: &[SourceLine]) -> Option<usize> {
    let mut clicked = None;
    for (i, line) in lines.iter().enumerate() {
        if ui.selectable_label(line.selected, &line.text).clicked() {
            clicked = Some(i);
        }
    }
    if !lines.is_empty() {
        ui.separator();
    }
    clicked
}

#[derive(Default)]
pub struct TimingsPanel {}

impl TimingsPanel {
    pub fn ui(&mut self, ui: &mut egui::Ui, state: &AppState) {
        let banner_colour = if state.cuda_unavailable.is_some() {
            Color32::from_rgb(255, 170, 0)
        } else {
            Color32::from_rgb(120, 220, 120)
        };
        ui.colored_label(banner_colour, &state.backend_banner);

        let Some(frame) = &state.frame else {
            ui.label("no frame yet");
            return;
        };
        ui.horizontal_wrapped(|ui| {
            ui.label(format!("results {:.1} fps", state.result_fps()));
            ui.separator();
            ui.label(format!("redraw {:.1} fps", state.redraw_fps()));
            ui.separator();
            // Frames the worker had no time for, and results the window had no time for.
            let c = &state.counters;
            ui.label(format!("dropped {}", c.dropped + c.dropped_results));
            ui.separator();
            ui.label(format!("latency {:.2} ms", frame.timings.latency_ms));
            ui.separator();
            ui.label(format!(
                "{} ({}, {}-conn.)",
                frame.algorithm, frame.backend, frame.connectivity
            ));
        });

        // The current frame: pipeline steps, then this window's own last pass.
        let mut steps: Vec<(&str, f64)> = frame
            .timings
            .steps
            .iter()
            .map(|s| (s.step.as_str(), s.ms))
            .collect();
        steps.push(("ui", state.ui_ms));
        stacked_bar(ui, &steps);

        let history = &state.history;
        let mut names: Vec<&str> = Vec::new();
        for record in history {
            for s in &record.steps {
                if !names.contains(&s.step.as_str()) {
                    names.push(&s.step);
                }
            }
        }
        Plot::new("timing_history")
            .legend(Legend::default())
            .height(ui.available_height().max(80.0))
            .x_axis_label("frame")
            .y_axis_label("ms")
            .allow_scroll(false)
            .show(ui, |plot| {
                for name in &names {
                    let points: PlotPoints = history
                        .iter()
                        .filter_map(|r| {
                            r.steps
                                .iter()
                                .find(|s| s.step == *name)
                                .map(|s| [r.index as f64, s.ms])
                        })
                        .collect();
                    plot.line(Line::new(*name, points).color(step_colour(name)));
                }
                let latency: PlotPoints = history
                    .iter()
                    .map(|r| [r.index as f64, r.latency_ms])
                    .collect();
                plot.line(Line::new("latency", latency).color(Color32::WHITE));
            });
    }
}

/// One horizontal bar split by step, with a legend of times under it.
fn stacked_bar(ui: &mut egui::Ui, steps: &[(&str, f64)]) {
    let total: f64 = steps.iter().map(|s| s.1).sum();
    let width = ui.available_width();
    let (rect, response) = ui.allocate_exact_size(Vec2::new(width, 18.0), Sense::hover());
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 2.0, ui.visuals().extreme_bg_color);
    if total > 0.0 {
        let mut x = rect.left();
        for (name, ms) in steps {
            let w = (*ms / total) as f32 * rect.width();
            let r = Rect::from_min_max(egui::pos2(x, rect.top()), egui::pos2(x + w, rect.bottom()));
            painter.rect_filled(r, 0.0, step_colour(name));
            x += w;
        }
    }
    response.on_hover_text(format!("total {total:.3} ms"));
    ui.horizontal_wrapped(|ui| {
        ui.spacing_mut().item_spacing.x = 10.0;
        for (name, ms) in steps {
            let h = ui.text_style_height(&egui::TextStyle::Body) * 0.7;
            let (swatch, _) = ui.allocate_exact_size(Vec2::splat(h), Sense::hover());
            ui.painter().rect_filled(swatch, 1.0, step_colour(name));
            ui.label(format!("{name} {ms:.3} ms"));
        }
        ui.label(format!("= {total:.3} ms"));
    });
}
