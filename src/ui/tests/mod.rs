//! The window driven headless with egui_kittest: clicks and slider moves go through egui's
//! input like a user's, and the checks look at the app's state, at what the pipeline was told,
//! and at what the window shows. Frames come from `StillFeed`, which labels a fixed disc grid
//! on the test thread whenever the settings change (no pipeline threads).

use crate::ccl::BackendChoice;
use crate::ccl::{Backends, Connectivity};
use crate::frame::disc_grid::disc_grid;
use crate::threshold::spec::ThresholdSpec;
use crate::ui::config::ViewMode;
use crate::ui::still::StillFeed;
use crate::ui::{MarkerscopeApp, Tab, UiSettings};
use egui_kittest::kittest::{NodeT, Queryable};
use egui_kittest::Harness;
use std::sync::Arc;

// Feeds that record what the window asks of them or move markers; square markers; the panels
// and their effects.
mod feeds;
mod markers;
mod panels;
mod sources;

/// 10 × 5 discs (grey 220) on a 20..60 ramp: 50 components for thresholds 60..=219.
fn app() -> MarkerscopeApp {
    let backends = Arc::new(Backends::cpu_only());
    let grey = disc_grid(320, 200, 10, 5, 6.0).unwrap();
    let feed = StillFeed::new(grey, backends.clone(), false);
    let settings = UiSettings {
        backend: BackendChoice::Cpu,
        ..UiSettings::default()
    };
    MarkerscopeApp::new(settings, backends, Some(Box::new(feed)))
}

fn harness(app: MarkerscopeApp) -> Harness<'static, MarkerscopeApp> {
    let mut h = Harness::builder()
        .with_size(egui::vec2(1500.0, 950.0))
        .build_ui_state(|ui, app: &mut MarkerscopeApp| app.show(ui), app);
    // The app polls its feed, so it always asks for another frame: step, never `run`.
    h.run_steps(3);
    h
}

fn components_shown(h: &Harness<'_, MarkerscopeApp>) -> usize {
    h.state()
        .state
        .frame
        .as_ref()
        .map_or(0, |f| f.components.len())
}

#[test]
fn first_frame_is_labeled_and_shown() {
    let h = harness(app());
    assert_eq!(components_shown(&h), 50);
    h.get_by_label("50 components");
    assert_eq!(h.state().state.tab, Tab::Live);
    assert_eq!(h.state().state.frames_received, 1);
    // CPU-only: the banner says why, and CUDA is greyed out.
    assert!(
        h.state().state.backend_banner.starts_with("CPU backend: "),
        "{}",
        h.state().state.backend_banner
    );
    let cuda = h.get_by_label("cuda");
    assert!(cuda.accesskit_node().is_disabled());
    assert_eq!(h.state().view.last_overlay.boxes, 50);
}

#[test]
fn switching_algorithm_reaches_the_pipeline() {
    let mut h = harness(app());
    h.get_by_label("algorithm").click();
    h.run_steps(2);
    // GPU-only algorithms are listed but greyed out here (no CUDA).
    #[cfg(feature = "cuda")]
    assert!(h.get_by_label("ha4w (cuda)").accesskit_node().is_disabled());
    h.get_by_label("bfs (cpu)").click();
    h.run_steps(3);
    assert_eq!(h.state().state.settings.algorithm.as_deref(), Some("bfs"));
    let sent = h.state().state.frame.as_ref().unwrap();
    assert_eq!(sent.algorithm, "bfs");
    assert_eq!(components_shown(&h), 50);
}

#[test]
fn connectivity_greys_out_algorithms_that_lack_it() {
    let mut h = harness(app());
    h.get_by_label("4").click();
    h.run_steps(2);
    assert_eq!(h.state().state.settings.connectivity, Connectivity::Four);
    assert_eq!(
        h.state().state.frame.as_ref().unwrap().connectivity,
        Connectivity::Four
    );
}

#[test]
fn threshold_slider_changes_the_components() {
    let mut h = harness(app());
    h.get_by_label("method").click();
    h.run_steps(2);
    h.get_by_label("fixed").click();
    h.run_steps(3);
    assert_eq!(
        h.state().state.settings.threshold,
        ThresholdSpec::Fixed(128)
    );
    assert_eq!(components_shown(&h), 50);

    // Above the discs' grey (220): nothing is foreground.
    h.get_by_role(egui::accesskit::Role::Slider)
        .set_value_accesskit(230.0);
    h.run_steps(3);
    assert_eq!(
        h.state().state.settings.threshold,
        ThresholdSpec::Fixed(230)
    );
    assert_eq!(components_shown(&h), 0);
    h.get_by_label("0 components");

    // Below the background ramp's darkest grey: everything is one component.
    h.get_by_role(egui::accesskit::Role::Slider)
        .set_value_accesskit(5.0);
    h.run_steps(3);
    assert_eq!(h.state().state.settings.threshold, ThresholdSpec::Fixed(5));
    assert_eq!(components_shown(&h), 1);
}

#[test]
fn automatic_threshold_methods_and_k_from_the_controls() {
    let mut h = harness(app());
    assert_eq!(
        h.state().state.settings.threshold,
        ThresholdSpec::default(),
        "the window starts with the default threshold"
    );
    for (name, spec) in [
        ("triangle", ThresholdSpec::Triangle),
        ("otsu", ThresholdSpec::Otsu),
        ("background", ThresholdSpec::Background { k: 5.0 }),
    ] {
        h.get_by_label("method").click();
        h.run_steps(2);
        h.get_by_label(name).click();
        h.run_steps(3);
        assert_eq!(h.state().state.settings.threshold, spec);
        assert_eq!(components_shown(&h), 50, "{spec}");
        h.get_by_label_contains("level for this frame");
    }
    // K so large that the level passes the discs' grey: nothing is foreground.
    h.get_by_role(egui::accesskit::Role::Slider)
        .set_value_accesskit(20.0);
    h.run_steps(3);
    assert_eq!(
        h.state().state.settings.threshold,
        ThresholdSpec::Background { k: 20.0 }
    );
    assert_eq!(components_shown(&h), 0);
}

#[test]
fn view_toggles_ask_for_the_mask_and_labels() {
    let mut h = harness(app());
    // Uploaded for the first frame (and again if the layout around the view settled meanwhile:
    // the texture is the view's size); not again while nothing changes.
    let uploads = h.state().view.uploads;
    assert!(uploads >= 1);
    h.run_steps(3);
    assert_eq!(h.state().view.uploads, uploads);
    h.get_by_label("binary").click();
    h.run_steps(3);
    assert_eq!(h.state().state.settings.view, ViewMode::Binary);
    let f = h.state().state.frame.clone().unwrap();
    assert!(f.binary.is_some() && f.labels.is_none());
    assert!(h.state().view.uploads > uploads);

    h.get_by_label("labels").click();
    h.run_steps(3);
    let f = h.state().state.frame.clone().unwrap();
    assert!(f.labels.is_some() && f.binary.is_none());
    let image = crate::ui::view::frame_image(&f, ViewMode::Labels);
    let c = f.components[0];
    let centre = (c.centroid_y as usize) * 320 + c.centroid_x as usize;
    assert_eq!(image.pixels[centre], crate::ui::view::label_colour(c.label));
    assert_eq!(image.pixels[0], egui::Color32::BLACK);

    // Overlays off: nothing drawn; the texture is not re-uploaded while nothing changes.
    h.get_by_label("overlay").click();
    h.run_steps(2);
    let before = h.state().view.uploads;
    h.run_steps(3);
    assert_eq!(h.state().view.uploads, before);
    assert_eq!(h.state().view.last_overlay.boxes, 0);
}

#[test]
fn compare_view_runs_every_cpu_algorithm() {
    let mut h = harness(app());
    h.get_by_label("Compare algorithms").click();
    h.run_steps(2);
    assert_eq!(h.state().state.tab, Tab::Compare);
    h.get_by_label("Run on this frame").click();
    for _ in 0..500 {
        h.step();
        if h.state().compare.report.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    h.run_steps(2);
    let report = h
        .state()
        .compare
        .report
        .clone()
        .expect("comparison finished");
    let names: Vec<_> = report.rows.iter().map(|r| r.algorithm).collect();
    assert!(
        names.contains(&"bfs") && names.contains(&"lsl"),
        "{names:?}"
    );
    assert!(report
        .rows
        .iter()
        .all(|r| r.count == 50 && r.agrees.is_ok()));
    h.get_by_label("lsl");
    assert_eq!(
        h.query_all_by_label("agrees").count(),
        report.rows.len() - 1
    );
    h.get_by_label("reference");
}

#[test]
fn components_table_sorts_selects_and_exports() {
    let mut h = harness(app());
    // Sort by area, descending (second click).
    h.get_by_label("area").click();
    h.run_steps(2);
    h.get_by_label("area ^").click();
    h.run_steps(2);
    assert_eq!(
        h.state().components.sort,
        (crate::ui::components::Column::Area, false)
    );

    // The largest is first now; select it as a click in the view or the table does.
    let f = h.state().state.frame.clone().unwrap();
    let first = f.components[0];
    h.state_mut().state.selected = Some(first.label);
    h.run_steps(2);
    h.get_by_label_contains(&format!("selected {}", first.label));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("table.csv");
    h.state_mut().components.export_path = path.display().to_string();
    h.get_by_label("Export CSV").click();
    h.run_steps(2);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 51);
    assert!(text.starts_with(crate::output::export::CSV_HEADER));
    // The still frame gives each component its own track: the track column is filled.
    let track_col = crate::output::export::CSV_HEADER
        .split(',')
        .position(|c| c == "track")
        .unwrap();
    for line in text.lines().skip(1) {
        let id: u64 = line.split(',').nth(track_col).unwrap().parse().unwrap();
        assert!((1..=50).contains(&id), "{line}");
    }
    h.get_by_label_contains("wrote 50 rows");
}

#[test]
fn many_components_are_summarised_and_culled() {
    let backends = Arc::new(Backends::cpu_only());
    let grey = disc_grid(1920, 1080, 100, 50, 5.0).unwrap();
    let feed = StillFeed::new(grey, backends.clone(), false);
    let app = MarkerscopeApp::new(UiSettings::default(), backends, Some(Box::new(feed)));
    let mut h = harness(app);
    assert_eq!(components_shown(&h), 5000);
    let o = h.state().view.last_overlay;
    assert_eq!((o.in_view, o.boxes, o.crosses, o.ids), (5000, 5000, 0, 0));
    h.get_by_label_contains("centroids hidden: zoom in");

    // Focus on one component (as a click in the table does): the view zooms in, so most
    // boxes are off-screen and culled, and the ids come back.
    let label = h.state().state.frame.as_ref().unwrap().components[2550].label;
    h.state_mut().state.selected = Some(label);
    h.state_mut().state.focus_selected = true;
    h.run_steps(2);
    let o = h.state().view.last_overlay;
    assert!(o.in_view < 5000 && o.in_view > 0, "{o:?}");
    assert_eq!(o.boxes, o.in_view);
    assert!(o.ids > 0, "{o:?}");
}

/// The frame view alone on a fixed frame (the rest of the window shows measured times, which
/// change from run to run): grey frame, boxes, centroid crosses, ids, one selected component.
fn view_snapshot(mode: ViewMode, name: &str) {
    use crate::pipeline::PipelineEvent;
    use crate::ui::state::AppState;
    use crate::ui::view::ViewPanel;
    let backends = Backends::cpu_only();
    let settings = UiSettings {
        view: mode,
        ..UiSettings::default()
    };
    let grey = Arc::new(disc_grid(320, 200, 10, 5, 6.0).unwrap());
    let mut frame =
        crate::ui::still::label_frame(grey, 0, &settings.pipeline_settings(), &backends).unwrap();
    // The pinned images show component labels, the overlay's names without tracking; track IDs
    // (`#N`) are checked in `moving_markers_show_track_ids_tails_and_the_selected_track`.
    frame.track_ids.clear();
    let mut state = AppState::new(settings, &backends);
    state.handle_event(PipelineEvent::Frame(Arc::new(frame)));
    state.selected = Some(23);
    let mut h = Harness::builder()
        .with_size(egui::vec2(660.0, 420.0))
        .build_ui_state(
            |ui, (view, state): &mut (ViewPanel, AppState)| {
                egui::CentralPanel::no_frame().show(ui, |ui| view.ui(ui, state));
            },
            (ViewPanel::new(), state),
        );
    h.run();
    let o = h.state().0.last_overlay;
    assert_eq!((o.boxes, o.crosses, o.ids), (50, 50, 50));
    h.get_by_label_contains("50 component(s)");
    h.snapshot(name);
}

#[test]
fn main_view_snapshot_grey() {
    view_snapshot(ViewMode::Grey, "main_view_grey");
}

#[test]
fn main_view_snapshot_labels() {
    view_snapshot(ViewMode::Labels, "main_view_labels");
}

/// A click at texture point (x, y) of the view (pixel centres at +0.5).
fn click_view(h: &mut Harness<'_, MarkerscopeApp>, x: f32, y: f32) {
    let at = h.state().view.image_to_screen(x, y).unwrap();
    h.hover_at(at);
    for pressed in [true, false] {
        h.event(egui::Event::PointerButton {
            pos: at,
            button: egui::PointerButton::Primary,
            pressed,
            modifiers: egui::Modifiers::NONE,
        });
    }
}
