//! The bar above the panels: the page tabs, the view mode, the overlay switches, the notices;
//! and the hint over the window while files are dragged onto it.

use super::MarkerscopeApp;
use crate::ui::config::ViewMode;
use crate::ui::state::Tab;
use crate::ui::tracks::{TAIL_FRAMES_MAX, TAIL_FRAMES_MIN};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How long the newest notice stays in the bar.
const NOTICE_SHOWN_FOR: Duration = Duration::from_secs(10);

impl MarkerscopeApp {
    pub(super) fn top_bar(&mut self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            ui.selectable_value(&mut self.state.tab, Tab::Live, "Live view");
            ui.selectable_value(&mut self.state.tab, Tab::Compare, "Compare algorithms");
            ui.separator();
            for m in ViewMode::ALL {
                if ui
                    .selectable_label(self.state.settings.view == m, m.name())
                    .clicked()
                {
                    self.state.set_view(m);
                }
            }
            ui.separator();
            self.overlay_switches(ui);
            ui.separator();
            notices(ui, &mut self.state.messages);
        });
    }

    fn overlay_switches(&mut self, ui: &mut egui::Ui) {
        let settings = &mut self.state.settings;
        ui.checkbox(&mut settings.overlays, "overlay");
        ui.checkbox(&mut settings.ids, "ids");
        ui.checkbox(&mut settings.show_tails, "tails")
            .on_hover_text("fading trajectory tails behind tracked markers");
        ui.add_enabled(
            settings.show_tails,
            egui::DragValue::new(&mut settings.tail_frames)
                .range(TAIL_FRAMES_MIN..=TAIL_FRAMES_MAX)
                .suffix(" frames"),
        )
        .on_hover_text("tail length");
        if ui
            .button("Fit")
            .on_hover_text("or double-click the frame")
            .clicked()
        {
            self.view.reset_zoom();
        }
    }
}

/// Every notice stays listed (source errors, skipped frames, config problems); the newest is
/// also shown in the bar for a while.
fn notices(ui: &mut egui::Ui, messages: &mut VecDeque<(Instant, String)>) {
    let count = messages.len();
    if count > 0 {
        ui.menu_button(format!("notices ({count})"), |ui| {
            egui::ScrollArea::vertical()
                .max_height(400.0)
                .show(ui, |ui| {
                    for (at, msg) in messages.iter().rev() {
                        ui.label(format!("{:.0} s ago: {msg}", at.elapsed().as_secs_f64()));
                    }
                });
            if ui.button("clear").clicked() {
                messages.clear();
            }
        })
        .response
        .on_hover_text("every notice of this run, newest first");
    }
    if let Some((at, msg)) = messages.back() {
        if at.elapsed() < NOTICE_SHOWN_FOR {
            ui.label(msg);
        }
    }
}

/// Darkens the window and says what a drop does, while files are dragged over it.
pub(super) fn drop_hint(ctx: &egui::Context) {
    if ctx.input(|i| i.raw.hovered_files.is_empty()) {
        return;
    }
    let painter = ctx.layer_painter(egui::LayerId::new(
        egui::Order::Foreground,
        egui::Id::unique("drop_hint"),
    ));
    let rect = ctx.content_rect();
    painter.rect_filled(rect, 0.0, egui::Color32::from_black_alpha(160));
    painter.text(
        rect.center(),
        egui::Align2::CENTER_CENTER,
        "Drop to open as the source",
        egui::FontId::proportional(28.0),
        egui::Color32::WHITE,
    );
}
