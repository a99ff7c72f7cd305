//! Compare view: every available algorithm that supports the current connectivity, run `k` times
//! on the current frame's mask, with its times, throughput, component count and whether its
//! partition equals the oracle's. The runs happen on a worker thread; the table fills in when
//! they are done.

use super::state::AppState;
use super::timings::step_colour;
use super::widgets::{sort_arrow, sort_clicked};
use crate::ccl::partition::same_partition;
use crate::ccl::{algorithms, Backend, Backends, Connectivity, LabelRequest, StepTime, Want};
use crate::error::Result;
use crate::frame::image::BinaryImage;
use crossbeam_channel::Receiver;
use egui::Color32;
use egui_plot::{Bar, BarChart, Plot};
use std::sync::Arc;

/// One algorithm's result.
#[derive(Clone, Debug)]
pub struct CompareRow {
    pub algorithm: &'static str,
    pub backend: Backend,
    /// Best of k, host time around the whole run (see `Labeler::time_resident`).
    pub total_ms: f64,
    pub steps: Vec<StepTime>,
    pub gpx_per_s: f64,
    pub count: u32,
    /// Ok when the partition equals the oracle's; the oracle itself has `is_oracle`.
    pub agrees: std::result::Result<(), String>,
    pub is_oracle: bool,
}

#[derive(Clone, Debug)]
pub struct CompareReport {
    pub frame_index: u64,
    pub width: u32,
    pub height: u32,
    pub connectivity: Connectivity,
    pub repeats: u32,
    pub rows: Vec<CompareRow>,
    /// Algorithms left out, with why (no GPU, wrong connectivity, a failed run).
    pub skipped: Vec<String>,
}

/// Runs the comparison. CCA (statistics) is what is timed; the partition is checked on a
/// separate labels run.
pub fn run_comparison(
    binary: &BinaryImage,
    connectivity: Connectivity,
    backends: &Backends,
    repeats: u32,
    frame_index: u64,
) -> Result<CompareReport> {
    let oracle_info = algorithms()
        .iter()
        .find(|a| a.is_oracle)
        .ok_or_else(|| crate::Error::Invalid("the registry has no oracle".into()))?;
    let reference = backends
        .create(oracle_info.name, connectivity)?
        .label(binary, connectivity, Want::Labels)?
        .labels
        .ok_or_else(|| crate::Error::Invalid("the oracle returned no label image".into()))?;
    let mut report = CompareReport {
        frame_index,
        width: binary.width,
        height: binary.height,
        connectivity,
        repeats,
        rows: Vec::new(),
        skipped: Vec::new(),
    };
    for info in algorithms() {
        if !info.supports(connectivity) {
            report.skipped.push(format!(
                "{}: no {}-connectivity",
                info.name,
                connectivity.number()
            ));
            continue;
        }
        if !backends.is_available(info) {
            report.skipped.push(format!(
                "{}: {}",
                info.name,
                backends.cuda_unavailable_reason().unwrap_or_default()
            ));
            continue;
        }
        let row = (|| -> Result<CompareRow> {
            let mut labeler = backends.create(info.name, connectivity)?;
            let request = LabelRequest::new(binary, connectivity, Want::Stats);
            let timing = labeler.time_resident(request, repeats)?;
            let labels = labeler
                .label(binary, connectivity, Want::Labels)?
                .labels
                .ok_or_else(|| crate::Error::Invalid("no label image returned".into()))?;
            Ok(CompareRow {
                algorithm: info.name,
                backend: info.backend,
                total_ms: timing.total_ms,
                gpx_per_s: binary.pixels() as f64 / (timing.total_ms * 1e6).max(1e-9),
                steps: timing.steps,
                count: timing.count,
                agrees: same_partition(&reference, &labels),
                is_oracle: info.is_oracle,
            })
        })();
        match row {
            Ok(r) => report.rows.push(r),
            Err(e) => report.skipped.push(format!("{}: {e}", info.name)),
        }
    }
    Ok(report)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortBy {
    Algorithm,
    Total,
    Throughput,
    Count,
}

pub struct ComparePanel {
    pub repeats: u32,
    pub report: Option<CompareReport>,
    pub error: Option<String>,
    running: Option<Receiver<Result<CompareReport>>>,
    pub sort: (SortBy, bool),
    backends: Arc<Backends>,
}

impl ComparePanel {
    pub fn new(backends: Arc<Backends>) -> Self {
        Self {
            repeats: 5,
            report: None,
            error: None,
            running: None,
            sort: (SortBy::Total, true),
            backends,
        }
    }

    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Starts a comparison on the current frame (its mask made again from the grey frame with
    /// the current threshold settings, exactly as the pipeline makes it).
    pub fn start(&mut self, state: &AppState) {
        let Some(frame) = &state.frame else {
            self.error = Some("no frame to compare on yet".into());
            return;
        };
        let (grey, index) = (frame.grey.clone(), frame.index);
        let (spec, invert) = (state.settings.threshold, state.settings.invert);
        let connectivity = state.settings.connectivity;
        let (repeats, backends) = (self.repeats, self.backends.clone());
        let (tx, rx) = crossbeam_channel::bounded(1);
        let spawned = std::thread::Builder::new()
            .name("compare".into())
            .spawn(move || {
                let result = crate::threshold::apply(&grey, &spec, invert).and_then(|binary| {
                    run_comparison(&binary, connectivity, &backends, repeats, index)
                });
                let _ = tx.send(result);
            });
        match spawned {
            Ok(_) => {
                self.running = Some(rx);
                self.error = None;
            }
            Err(e) => self.error = Some(format!("cannot start the comparison thread: {e}")),
        }
    }

    /// Collects a finished comparison, if any.
    pub fn poll(&mut self) {
        let Some(rx) = &self.running else { return };
        match rx.try_recv() {
            Ok(Ok(report)) => {
                self.report = Some(report);
                self.running = None;
            }
            Ok(Err(e)) => {
                self.error = Some(e.to_string());
                self.running = None;
            }
            Err(crossbeam_channel::TryRecvError::Empty) => {}
            Err(crossbeam_channel::TryRecvError::Disconnected) => {
                self.error = Some("the comparison thread stopped without a result".into());
                self.running = None;
            }
        }
    }

    pub fn ui(&mut self, ui: &mut egui::Ui, state: &AppState) {
        self.poll();
        self.run_bar(ui, state);
        if let Some(e) = &self.error {
            ui.colored_label(Color32::from_rgb(255, 100, 100), e);
        }
        let Some(report) = &self.report else {
            ui.label(
                "Runs every algorithm that supports the current connectivity on the current frame.",
            );
            return;
        };
        ui.label(format!(
            "frame {} · {}×{} · {}-connectivity · best of {} · statistics (CCA) timed host to host",
            report.frame_index, report.width, report.height, report.connectivity, report.repeats
        ));
        let order = sorted_rows(report, self.sort);
        results_table(ui, report, &order, &mut self.sort);
        for s in &report.skipped {
            ui.weak(format!("not run: {s}"));
        }
        total_bars(ui, report, &order);
    }

    /// The heading, the number of runs and the button that starts them.
    fn run_bar(&mut self, ui: &mut egui::Ui, state: &AppState) {
        ui.horizontal(|ui| {
            ui.heading("Algorithm comparison");
            ui.add(
                egui::DragValue::new(&mut self.repeats)
                    .range(1..=100)
                    .prefix("k = "),
            )
            .on_hover_text("runs per algorithm; the best one counts");
            let button = ui.add_enabled(!self.is_running(), egui::Button::new("Run on this frame"));
            if button.clicked() {
                self.start(state);
            }
            if self.is_running() {
                ui.spinner();
                ui.ctx().request_repaint();
            }
        });
    }
}

/// The report's rows in the order of `sort` (indices into `report.rows`).
fn sorted_rows(report: &CompareReport, (by, ascending): (SortBy, bool)) -> Vec<usize> {
    let mut order: Vec<usize> = (0..report.rows.len()).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (&report.rows[a], &report.rows[b]);
        let o = match by {
            SortBy::Algorithm => ra.algorithm.cmp(rb.algorithm),
            SortBy::Total => ra.total_ms.total_cmp(&rb.total_ms),
            SortBy::Throughput => ra.gpx_per_s.total_cmp(&rb.gpx_per_s),
            SortBy::Count => ra.count.cmp(&rb.count),
        };
        if ascending {
            o
        } else {
            o.reverse()
        }
    });
    order
}

/// The table of results; a click on a sortable heading sorts by it (again: the other way).
fn results_table(
    ui: &mut egui::Ui,
    report: &CompareReport,
    order: &[usize],
    sort: &mut (SortBy, bool),
) {
    egui::Grid::new("compare_table")
        .striped(true)
        .num_columns(7)
        .show(ui, |ui| {
            for (text, key) in [
                ("algorithm", Some(SortBy::Algorithm)),
                ("backend", None),
                ("total ms", Some(SortBy::Total)),
                ("Gpx/s", Some(SortBy::Throughput)),
                ("components", Some(SortBy::Count)),
                ("oracle", None),
                ("steps (ms)", None),
            ] {
                match key {
                    Some(k) => {
                        if ui
                            .button(format!("{text}{}", sort_arrow(*sort, k)))
                            .clicked()
                        {
                            *sort = sort_clicked(*sort, k);
                        }
                    }
                    None => {
                        ui.strong(text);
                    }
                }
            }
            ui.end_row();
            for &i in order {
                result_row(ui, &report.rows[i]);
                ui.end_row();
            }
        });
}

fn result_row(ui: &mut egui::Ui, r: &CompareRow) {
    ui.label(r.algorithm);
    ui.label(r.backend.to_string());
    ui.label(format!("{:.3}", r.total_ms));
    ui.label(format!("{:.3}", r.gpx_per_s));
    ui.label(r.count.to_string());
    match (&r.agrees, r.is_oracle) {
        (_, true) => {
            ui.label("reference");
        }
        (Ok(()), false) => {
            ui.horizontal(|ui| {
                check_mark(ui, true);
                ui.colored_label(AGREES, "agrees");
            });
        }
        (Err(why), false) => {
            ui.horizontal(|ui| {
                check_mark(ui, false);
                ui.colored_label(DIFFERS, "differs")
                    .on_hover_text(why.as_str());
            });
        }
    }
    let steps: Vec<String> = r
        .steps
        .iter()
        .map(|s| format!("{} {:.3}", s.step, s.ms))
        .collect();
    ui.label(if steps.is_empty() {
        "–".to_string()
    } else {
        steps.join(", ")
    });
}

/// Each algorithm's total time as a bar, in the table's order.
fn total_bars(ui: &mut egui::Ui, report: &CompareReport, order: &[usize]) {
    let bars: Vec<Bar> = order
        .iter()
        .enumerate()
        .map(|(x, &i)| {
            let r = &report.rows[i];
            Bar::new(x as f64, r.total_ms)
                .name(r.algorithm)
                .fill(step_colour(r.algorithm))
        })
        .collect();
    let names: Vec<&'static str> = order.iter().map(|&i| report.rows[i].algorithm).collect();
    Plot::new("compare_bars")
        .height(ui.available_height().max(120.0))
        .y_axis_label("ms (best of k)")
        .x_axis_formatter(move |mark, _range| {
            let i = mark.value.round();
            if (mark.value - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < names.len() {
                names[i as usize].to_string()
            } else {
                String::new()
            }
        })
        .allow_scroll(false)
        .show(ui, |plot| {
            plot.bar_chart(BarChart::new("total ms", bars));
        });
}

const AGREES: Color32 = Color32::from_rgb(80, 220, 80);
const DIFFERS: Color32 = Color32::from_rgb(255, 90, 90);

/// A drawn check mark (agrees) or cross (differs): the default fonts have neither glyph.
fn check_mark(ui: &mut egui::Ui, ok: bool) {
    let size = ui.text_style_height(&egui::TextStyle::Body);
    let (rect, _) = ui.allocate_exact_size(egui::vec2(size, size), egui::Sense::hover());
    let r = rect.shrink(size * 0.15);
    let p = ui.painter();
    if ok {
        let stroke = egui::Stroke::new(2.0, AGREES);
        let points = vec![
            egui::pos2(r.left(), r.center().y),
            egui::pos2(r.left() + r.width() * 0.4, r.bottom()),
            egui::pos2(r.right(), r.top()),
        ];
        p.add(egui::Shape::line(points, stroke));
    } else {
        let stroke = egui::Stroke::new(2.0, DIFFERS);
        p.line_segment([r.left_top(), r.right_bottom()], stroke);
        p.line_segment([r.right_top(), r.left_bottom()], stroke);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cpu_algorithm_agrees_on_a_disc_grid() {
        let grey = crate::frame::disc_grid::disc_grid(120, 80, 6, 4, 5.0).unwrap();
        let binary =
            crate::threshold::apply(&grey, &crate::threshold::spec::ThresholdSpec::Otsu, false)
                .unwrap();
        let report =
            run_comparison(&binary, Connectivity::Four, &Backends::cpu_only(), 2, 7).unwrap();
        let names: Vec<_> = report.rows.iter().map(|r| r.algorithm).collect();
        assert!(
            names.contains(&"bfs") && names.contains(&"lsl"),
            "{names:?}"
        );
        for r in &report.rows {
            assert_eq!(r.count, 24, "{}", r.algorithm);
            assert!(r.agrees.is_ok(), "{}: {:?}", r.algorithm, r.agrees);
            assert!(r.total_ms > 0.0 && r.gpx_per_s > 0.0);
        }
        assert_eq!(report.frame_index, 7);
        // CUDA algorithms are listed as skipped with the reason (this build has them when the
        // cuda feature is on).
        let cuda = algorithms()
            .iter()
            .filter(|a| a.backend == Backend::Cuda)
            .count();
        assert_eq!(report.skipped.len(), cuda);
    }
}
