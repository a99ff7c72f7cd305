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

/// The window over a `RecordingFeed` of the disc grid, and the feed's log.
fn recording_app() -> (MarkerscopeApp, Arc<std::sync::Mutex<Vec<String>>>) {
    let backends = Arc::new(Backends::cpu_only());
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let feed = RecordingFeed {
        still: StillFeed::new(
            disc_grid(320, 200, 10, 5, 6.0).unwrap(),
            backends.clone(),
            false,
        ),
        log: log.clone(),
    };
    let app = MarkerscopeApp::new(UiSettings::default(), backends, Some(Box::new(feed)));
    (app, log)
}

/// A feed that records what the window asks of it (and shows a still frame).
struct RecordingFeed {
    still: StillFeed,
    log: Arc<std::sync::Mutex<Vec<String>>>,
}

impl crate::ui::state::FrameFeed for RecordingFeed {
    fn poll(&mut self) -> Vec<crate::pipeline::PipelineEvent> {
        self.still.poll()
    }
    fn set_settings(&mut self, settings: &crate::pipeline::PipelineSettings) {
        self.still.set_settings(settings)
    }
    fn command(&mut self, command: crate::pipeline::SourceCommand) {
        self.log.lock().unwrap().push(format!("{command:?}"));
    }
    fn open(&mut self, spec: &str) -> crate::Result<crate::ui::state::SourceInfo> {
        self.log.lock().unwrap().push(format!("open {spec}"));
        if spec.ends_with(".missing") {
            return Err(crate::Error::Invalid(format!("{spec}: no such file")));
        }
        Ok(crate::ui::state::SourceInfo {
            description: format!("file {spec}"),
            is_live: false,
            frame_count: Some(100),
            fps: Some(25.0),
            camera: None,
        })
    }
    fn counters(&self) -> crate::pipeline::PipelineCounters {
        self.still.counters()
    }
}

#[derive(Debug)]
struct DroppedPath(std::path::PathBuf);

impl egui::DroppedFile for DroppedPath {
    fn path(&self) -> &std::path::Path {
        &self.0
    }
    fn bytes(&self) -> Result<Vec<u8>, String> {
        std::fs::read(&self.0).map_err(|e| e.to_string())
    }
}

#[test]
fn sources_open_from_the_controls_and_by_drag_and_drop_and_files_play() {
    let (app, log) = recording_app();
    let mut h = harness(app);

    h.get_by_label("Synthetic demo").click();
    h.run_steps(2);
    assert_eq!(log.lock().unwrap().last().unwrap(), "open synthetic");

    // A file dropped on the window becomes the source; a file source gets playback controls.
    h.input_mut()
        .dropped_files
        .push(Arc::new(DroppedPath("/data/clip.mp4".into())));
    h.run_steps(2);
    assert_eq!(log.lock().unwrap().last().unwrap(), "open /data/clip.mp4");
    assert_eq!(h.state().state.source.description, "file /data/clip.mp4");
    h.get_by_label("Pause").click();
    h.run_steps(2);
    h.get_by_label("Step").click();
    h.run_steps(2);
    h.get_by_label("Play").click();
    h.run_steps(2);
    assert_eq!(
        log.lock().unwrap()[2..].to_vec(),
        ["Pause", "Pause", "Step", "Play"]
    );

    // A path that fails to open is reported in the window; the old source stays.
    h.input_mut()
        .dropped_files
        .push(Arc::new(DroppedPath("/data/nothing.missing".into())));
    h.run_steps(2);
    h.get_by_label("/data/nothing.missing: no such file");
    assert_eq!(h.state().state.source.description, "file /data/clip.mp4");
}

/// Six discs (radius 5, grey 220 on 30) moving 3 px right and 2 px down per frame; one frame per
/// poll while `budget` allows, tracked by the library's tracker as the pipeline does.
struct MovingFeed {
    backends: Arc<Backends>,
    settings: Option<crate::pipeline::PipelineSettings>,
    tracker: markerscope::track::Tracker,
    next: u64,
    /// Frames sent at most (the test raises it).
    budget: Arc<std::sync::atomic::AtomicU64>,
    counters: crate::pipeline::PipelineCounters,
}

fn moving_discs(frame: u64) -> crate::frame::image::GrayImage {
    let (w, h) = (320u32, 200u32);
    let f = frame as f32;
    let centres: Vec<(f32, f32)> = (0..6)
        .map(|k| {
            (
                20.0 + 50.0 * k as f32 + 3.0 * f,
                40.0 + 30.0 * (k % 3) as f32 + 2.0 * f,
            )
        })
        .collect();
    let mut data = Vec::with_capacity((w * h) as usize);
    for y in 0..h {
        for x in 0..w {
            let (px, py) = (x as f32 + 0.5, y as f32 + 0.5);
            let inside = centres
                .iter()
                .any(|&(cx, cy)| (px - cx).powi(2) + (py - cy).powi(2) <= 25.0);
            data.push(if inside { 220 } else { 30 });
        }
    }
    crate::frame::image::GrayImage::new(w, h, data).unwrap()
}

impl crate::ui::state::FrameFeed for MovingFeed {
    fn poll(&mut self) -> Vec<crate::pipeline::PipelineEvent> {
        use std::sync::atomic::Ordering;
        let Some(settings) = &self.settings else {
            return Vec::new();
        };
        if self.next >= self.budget.load(Ordering::SeqCst) {
            return Vec::new();
        }
        let grey = Arc::new(moving_discs(self.next));
        let mut frame =
            crate::ui::still::label_frame(grey, self.next, settings, &self.backends).unwrap();
        let detections =
            markerscope::track::Detection::from_rows(&frame.components, &frame.subpixel);
        frame.track_ids = self.tracker.update(frame.index, &detections);
        self.next += 1;
        self.counters.processed += 1;
        vec![crate::pipeline::PipelineEvent::Frame(Arc::new(frame))]
    }
    fn set_settings(&mut self, settings: &crate::pipeline::PipelineSettings) {
        self.settings = Some(settings.clone());
    }
    fn command(&mut self, _command: crate::pipeline::SourceCommand) {}
    fn open(&mut self, spec: &str) -> crate::Result<crate::ui::state::SourceInfo> {
        Err(crate::Error::Invalid(format!("cannot open {spec}")))
    }
    fn counters(&self) -> crate::pipeline::PipelineCounters {
        self.counters
    }
}

/// Every text shape the last pass painted (the overlay's ids are painted, not widgets).
fn painted_texts(h: &Harness<'_, MarkerscopeApp>) -> Vec<String> {
    fn walk(shape: &egui::Shape, out: &mut Vec<String>) {
        match shape {
            egui::Shape::Text(t) => out.push(t.galley.text().to_string()),
            egui::Shape::Vec(v) => v.iter().for_each(|s| walk(s, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for clipped in &h.output().shapes {
        walk(&clipped.shape, &mut out);
    }
    out
}

#[test]
fn moving_markers_show_track_ids_tails_and_the_selected_track() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let backends = Arc::new(Backends::cpu_only());
    let budget = Arc::new(AtomicU64::new(4));
    let feed = MovingFeed {
        backends: backends.clone(),
        settings: None,
        tracker: markerscope::track::Tracker::default(),
        next: 0,
        budget: budget.clone(),
        counters: Default::default(),
    };
    let settings = UiSettings {
        backend: BackendChoice::Cpu,
        ..UiSettings::default()
    };
    let mut h = harness(MarkerscopeApp::new(
        settings,
        backends,
        Some(Box::new(feed)),
    ));
    h.run_steps(4);
    assert_eq!(h.state().state.frames_received, 4);
    let f = h.state().state.frame.clone().unwrap();
    assert_eq!(f.index, 3);
    assert_eq!(f.components.len(), 6);
    let mut ids = f.track_ids.clone();
    ids.sort_unstable();
    ids.dedup();
    assert!(ids.len() == 6 && ids[0] > 0, "{:?}", f.track_ids);

    // Every marker moved: six tails of four points, ending at the marker.
    assert_eq!(h.state().view.last_overlay.tails, 6);
    assert_eq!(h.state().view.last_overlay.boxes, 6);
    let tracks = &h.state().state.tracks;
    for (i, &id) in f.track_ids.iter().enumerate() {
        let tail = tracks.tail(id).expect("a tail per track");
        assert_eq!(tail.points.len(), 4);
        let newest = tail.points.back().unwrap();
        assert_eq!(
            (newest.frame, newest.x, newest.y),
            (3, f.position(i).0, f.position(i).1)
        );
        let oldest = tail.points.front().unwrap();
        assert!((newest.x - oldest.x - 9.0).abs() < 0.5, "{tail:?}");
    }
    // The overlay names the markers by track ID.
    let texts = painted_texts(&h);
    for id in &f.track_ids {
        assert!(texts.contains(&format!("#{id}")), "#{id} not in {texts:?}");
    }
    h.get_by_label_contains("No track selected");
    assert_eq!(h.state().track_plot.shown, None);

    // A click on the third marker in the view selects it and follows its track.
    let (x, y) = f.position(2);
    let (clicked_x, clicked_y) = (x, y);
    let id = f.track_ids[2];
    click_view(&mut h, x as f32 + 0.5, y as f32 + 0.5);
    h.run_steps(2);
    assert_eq!(h.state().state.selected, Some(f.components[2].label));
    assert_eq!(h.state().state.tracks.selected_id(), Some(id));
    h.get_by_label(&format!("Track #{id}"));
    // Its plot starts with the tail's four points.
    assert_eq!(h.state().track_plot.shown, Some((id, 4)));
    h.get_by_label_contains(&format!("track #{id})"));

    // Five more frames: the selection moves with the marker and its plot grows.
    budget.store(9, Ordering::SeqCst);
    h.run_steps(7);
    assert_eq!(h.state().state.frames_received, 9);
    let f = h.state().state.frame.clone().unwrap();
    let i = f
        .track_ids
        .iter()
        .position(|&t| t == id)
        .expect("the track goes on");
    assert_eq!(h.state().state.selected, Some(f.components[i].label));
    assert_eq!(h.state().track_plot.shown, Some((id, 9)));
    h.get_by_label("first seen at frame 0 · 9 frames long · 9 detections");
    let (x, y) = f.position(i);
    // Five frames on: 15 px right, 10 px down.
    assert!((x - clicked_x - 15.0).abs() < 0.5, "{x} from {clicked_x}");
    assert!((y - clicked_y - 10.0).abs() < 0.5, "{y} from {clicked_y}");
    h.get_by_label(&format!("at ({x:.2}, {y:.2}) px"));
    // Tails are capped at the default 30 frames, so these hold all nine.
    assert_eq!(h.state().state.tracks.tail(id).unwrap().points.len(), 9);

    // Tails off: none drawn, the boxes stay; clicking the background ends the selection.
    h.get_by_label("tails").click();
    h.run_steps(2);
    assert!(!h.state().state.settings.show_tails);
    assert_eq!(h.state().view.last_overlay.tails, 0);
    assert_eq!(h.state().view.last_overlay.boxes, 6);
    click_view(&mut h, 300.0, 190.0);
    h.run_steps(2);
    assert_eq!(h.state().state.selected, None);
    assert_eq!(h.state().state.tracks.selected_id(), None);
    h.get_by_label_contains("No track selected");
}

/// Notices stay listed after the 10 s the bar shows the newest one: source errors, skipped
/// frames and config problems can all be read back from the "notices" menu.
#[test]
fn notices_stay_listed_in_the_notices_menu() {
    let mut h = harness(app());
    for msg in [
        "source: frame 3 is damaged",
        "skipped frame 7",
        "config: bad key",
    ] {
        h.state_mut().state.message(msg.to_string());
    }
    h.run_steps(2);
    h.get_by_label("notices (3)").click();
    h.run_steps(2);
    for msg in ["frame 3 is damaged", "skipped frame 7"] {
        h.get_by_label_contains(msg);
    }
    // The newest is in the list and in the bar.
    assert_eq!(h.get_all_by_label_contains("config: bad key").count(), 2);
}

/// The shape limits in the controls reach the labeling: a minimum circularity above what the
/// discs reach drops them all, a lower one keeps them with their descriptors; a minimum
/// cannot be set above its maximum.
#[test]
fn circularity_and_inertia_limits_from_the_controls() {
    let mut h = harness(app());
    assert!(h.state().state.frame.as_ref().unwrap().shapes.is_empty());
    h.get_by_label("min circularity").click();
    h.run_steps(3);
    assert_eq!(h.state().state.settings.filter.min_circularity, Some(0.8));
    let frame = h.state().state.frame.clone().unwrap();
    assert_eq!(components_shown(&h), 50);
    assert_eq!(
        frame.shapes.len(),
        50,
        "descriptors come with a shape limit"
    );
    assert!(frame.shapes.iter().all(|d| d.circularity > 0.8));
    h.get_by_role_and_label(egui::accesskit::Role::SpinButton, "min circularity")
        .set_value_accesskit(5.0);
    h.run_steps(3);
    assert_eq!(h.state().state.settings.filter.min_circularity, Some(5.0));
    assert_eq!(components_shown(&h), 0);
    // With a maximum of 1.2 set, the minimum's range ends there.
    h.get_by_label("max circularity").click();
    h.run_steps(2);
    let f = h.state().state.settings.filter;
    assert_eq!(
        f.max_circularity,
        Some(5.0),
        "the maximum starts at or above the minimum"
    );
    h.get_by_label("min inertia ratio").click();
    h.run_steps(3);
    let f = h.state().state.settings.filter;
    assert_eq!(f.min_inertia_ratio, Some(0.5));
    assert!(f.validate().is_ok());
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

#[test]
fn a_region_drawn_in_the_view_and_a_learned_static_mask_take_components_away() {
    let mut h = harness(app());
    assert_eq!(components_shown(&h), 50);
    click_in_panel(&mut h, "Draw region");
    // The left half of the 320×200 frame: its 5 columns of discs stay.
    for (x, y) in [(0.0, 0.0), (160.0, 0.0), (160.0, 200.0), (0.0, 200.0)] {
        click_view(&mut h, x, y);
        // Far enough in time from the next click that they make no double click.
        h.run_steps(20);
    }
    assert_eq!(
        h.state().state.masks.drawing.as_ref().map(Vec::len),
        Some(4)
    );
    assert_eq!(
        h.state().state.selected,
        None,
        "a click while drawing selects nothing"
    );
    click_in_panel(&mut h, "Finish");
    h.run_steps(1);
    let mask = h.state().state.masks.mask.clone().unwrap();
    assert_eq!(mask.rois.len(), 1);
    assert_eq!(components_shown(&h), 25);
    let f = h.state().state.frame.clone().unwrap();
    assert!(f.components.iter().all(|c| c.left + c.width <= 160));
    h.get_by_label("1 region(s)");

    // Saved as a .toml region, cleared, loaded back.
    let dir = tempfile::tempdir().unwrap();
    let roi = dir.path().join("roi.toml");
    h.state_mut().state.masks.path_text = roi.display().to_string();
    click_in_panel(&mut h, "Save");
    assert!(std::fs::read_to_string(&roi).unwrap().contains("polygon"));
    click_in_panel(&mut h, "Clear");
    h.run_steps(1);
    assert_eq!(components_shown(&h), 50);
    click_in_panel(&mut h, "Load");
    h.run_steps(1);
    assert_eq!(components_shown(&h), 25);
    click_in_panel(&mut h, "Clear");
    h.run_steps(1);

    // Learning from the frame as it is: every disc is "a static reflection", so none is left.
    h.state_mut().state.masks.learn_frames = 1;
    click_in_panel(&mut h, "Learn static mask");
    h.run_steps(4);
    assert!(!h.state().state.masks.is_learning());
    assert!(h
        .state()
        .state
        .masks
        .mask
        .as_ref()
        .unwrap()
        .pixels
        .is_some());
    assert_eq!(components_shown(&h), 0);
    assert!(h
        .state()
        .state
        .messages
        .iter()
        .any(|(_, m)| m.starts_with("learned a static mask from 1 frame(s)")));
    let png = dir.path().join("mask.png");
    h.state_mut().state.masks.path_text = png.display().to_string();
    click_in_panel(&mut h, "Save");
    let saved = image::open(&png).unwrap().into_luma8();
    assert_eq!(saved.dimensions(), (320, 200));
}

#[test]
fn streams_are_added_from_the_controls_receive_frames_and_are_removed() {
    let receiver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    receiver
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let url = format!("udp://127.0.0.1:{}", receiver.local_addr().unwrap().port());
    let mut h = harness(app());
    h.state_mut().controls.stream_text = url.clone();
    click_in_panel(&mut h, "Add stream");
    assert_eq!(h.state().state.settings.streams, [url.clone()]);
    h.get_by_label(&url);
    // A new frame (the mask view asks for one) goes out on the stream.
    click_in_panel(&mut h, "binary");
    h.run_steps(1);
    let mut buf = vec![0u8; 65_536];
    let n = receiver.recv(&mut buf).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&buf[..n]).unwrap();
    assert_eq!(v["components"].as_array().unwrap().len(), 50);

    // A bad address is listed with the reason and kept in the settings until removed.
    h.state_mut().controls.stream_text = "tcp://127.0.0.1:1".into();
    click_in_panel(&mut h, "Add stream");
    // In its row and as the newest notice.
    assert_eq!(
        h.get_all_by_label_contains("unknown scheme 'tcp'").count(),
        2
    );
    assert!(h.state().state.streams.failed[0]
        .1
        .contains("unknown scheme"));
    assert_eq!(h.state().state.settings.streams.len(), 2);
    for _ in 0..2 {
        h.get_all_by_label("remove").next().unwrap().click();
        h.run_steps(2);
    }
    assert!(h.state().state.settings.streams.is_empty());
    assert!(h.state().state.streams.open.is_empty());
}

#[test]
fn camera_exposure_and_gain_are_kept_and_apply_by_reopening_the_camera() {
    let (app, log) = recording_app();
    let mut h = harness(app);
    // Not a camera: nothing to apply to.
    assert!(h
        .get_by_label("Apply to the camera")
        .accesskit_node()
        .is_disabled());
    h.get_by_label("exposure").click();
    h.get_by_label("gain").click();
    h.run_steps(2);
    let camera = h.state().state.settings.camera;
    assert_eq!(
        camera.exposure,
        Some(crate::source::camera_controls::Exposure::Auto)
    );
    assert_eq!(camera.gain, Some(0));
    assert!(h
        .state()
        .state
        .settings
        .to_toml()
        .contains("exposure = \"auto\""));

    h.state_mut().state.source_spec = "camera:0".into();
    h.run_steps(2);
    h.get_by_label("Apply to the camera").click();
    h.run_steps(2);
    assert_eq!(log.lock().unwrap().last().unwrap(), "open camera:0");
}

/// Clicks the widget labelled `label` in the controls panel, scrolled into view first when it
/// lies below the window's edge.
fn click_in_panel(h: &mut Harness<'_, MarkerscopeApp>, label: &str) {
    if h.get_by_label(label).rect().max.y > 940.0 {
        h.get_by_label(label).scroll_to_me();
        h.run_steps(10);
    }
    h.get_by_label(label).click();
    h.run_steps(2);
}

/// Types `text` into the text field labelled `label` (replacing what it holds).
fn type_into(h: &mut Harness<'_, MarkerscopeApp>, label: &str, text: &str) {
    h.get_by_role_and_label(egui::accesskit::Role::TextInput, label)
        .focus();
    h.run_steps(1);
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::A);
    h.run_steps(1);
    h.get_by_role_and_label(egui::accesskit::Role::TextInput, label)
        .type_text(text);
    h.run_steps(2);
}

/// Clicks reference points at image pixels `points` (pixel-index coordinates).
fn pick(h: &mut Harness<'_, MarkerscopeApp>, points: &[(f32, f32)]) {
    for &(x, y) in points {
        click_view(h, x + 0.5, y + 0.5);
        // Far enough in time from the next click that they make no double click.
        h.run_steps(20);
    }
}

/// Four points clicked in the view and their world positions typed give the homography that
/// maps them; it reaches the labeling (world positions per component), the overlay (the
/// selected component's position in the units typed) and the saved settings. Incomplete,
/// repeated and collinear sets are named in the panel and the last mapping stays; Clear
/// goes back to pixels.
#[test]
fn world_points_clicked_in_the_view_and_typed_give_the_homography() {
    let mut h = harness(app());
    h.get_by_label("positions in pixels: pick 4 or more points");
    click_in_panel(&mut h, "Pick points");
    assert!(h.state().state.world.picking);
    // A rectangle of 280 × 180 px that is 140 × 90 mm: half a millimetre a pixel.
    let image = [(20.0, 10.0), (300.0, 10.0), (300.0, 190.0), (20.0, 190.0)];
    let world = [(0.0, 0.0), (140.0, 0.0), (140.0, 90.0), (0.0, 90.0)];
    pick(&mut h, &image);
    let rows = h.state().state.world.rows.clone();
    assert_eq!(rows.len(), 4);
    for (row, (x, y)) in rows.iter().zip(image) {
        assert!(
            (row.image[0] - x as f64).abs() < 0.6 && (row.image[1] - y as f64).abs() < 0.6,
            "clicked at {:?}, wanted ({x}, {y})",
            row.image
        );
    }
    assert_eq!(
        h.state().state.selected,
        None,
        "a click while picking selects nothing"
    );
    h.get_by_label_contains("point 1: type its world X");
    for (n, (x, y)) in world.iter().enumerate() {
        type_into(&mut h, &format!("X{}", n + 1), &x.to_string());
        type_into(&mut h, &format!("Y{}", n + 1), &y.to_string());
    }
    type_into(&mut h, "units", "mm");
    h.run_steps(3);
    let mapping = h.state().state.settings.world.clone().expect("a mapping");
    assert_eq!(mapping.units, "mm");
    for (row, (x, y)) in rows.iter().zip(world) {
        let w = mapping.to_world(row.image[0], row.image[1]);
        assert!(
            (w[0] - x).abs() < 1e-6 && (w[1] - y).abs() < 1e-6,
            "{:?} → {w:?}, wanted ({x}, {y})",
            row.image
        );
    }
    // In between, the mapping follows the clicks: 0.5 mm a pixel from (20, 10).
    let c = mapping.to_world(160.0, 100.0);
    let want = [
        (160.0 - rows[0].image[0]) * 140.0 / (rows[1].image[0] - rows[0].image[0]),
        (100.0 - rows[0].image[1]) * 90.0 / (rows[3].image[1] - rows[0].image[1]),
    ];
    assert!(
        (c[0] - want[0]).abs() < 1e-3 && (c[1] - want[1]).abs() < 1e-3,
        "{c:?} {want:?}"
    );
    h.get_by_label_contains("mapping from 4 points");
    // The labeling gives every component its world position.
    let frame = h.state().state.frame.clone().unwrap();
    assert_eq!(frame.world.len(), frame.components.len());
    assert!(h.state().sent_settings().unwrap().world.is_some());
    assert!(h
        .state()
        .state
        .settings
        .to_toml()
        .contains("units = \"mm\""));

    // Stop picking: a click selects, and the overlay gives its world position.
    click_in_panel(&mut h, "Stop picking");
    let target = frame.components[0].clone();
    click_view(
        &mut h,
        target.centroid_x as f32 + 0.5,
        target.centroid_y as f32 + 0.5,
    );
    h.run_steps(2);
    assert_eq!(h.state().state.selected, Some(target.label));
    let at = mapping.to_world(target.centroid_x, target.centroid_y);
    h.get_by_label_contains(&format!("selected at ({:.2}, {:.2}) mm", at[0], at[1]));

    // Three points: too few; the mapping stays.
    h.get_all_by_label("remove").nth(3).unwrap().click();
    h.run_steps(2);
    h.get_by_label(
        "3 point(s): at least 4 are needed, no three on one line; still using the last \
         mapping (4 points)",
    );
    assert!(Arc::ptr_eq(
        h.state().state.settings.world.as_ref().unwrap(),
        &mapping
    ));
    // A fourth on the line through the first two: no homography.
    click_in_panel(&mut h, "Pick points");
    pick(&mut h, &[(160.0, 10.0)]);
    type_into(&mut h, "X4", "70");
    type_into(&mut h, "Y4", "0");
    let problem = h.state().state.world.problem.clone().unwrap();
    assert!(
        problem.contains("one line")
            && problem.ends_with("still using the last mapping (4 points)"),
        "{problem}"
    );
    h.get_by_label(&problem);
    // A repeated point.
    h.get_all_by_label("remove").nth(3).unwrap().click();
    h.run_steps(2);
    pick(&mut h, &[image[0]]);
    assert_eq!(
        h.state().state.world.problem.as_deref(),
        Some("points 1 and 4 are the same image point; remove one; still using the last mapping (4 points)")
    );
    assert!(Arc::ptr_eq(
        h.state().state.settings.world.as_ref().unwrap(),
        &mapping
    ));
    // Clear: pixels again, and the labeling is told.
    click_in_panel(&mut h, "Clear points");
    h.run_steps(3);
    assert!(h.state().state.settings.world.is_none());
    assert!(h.state().state.settings.world_points.is_empty());
    assert!(h.state().sent_settings().unwrap().world.is_none());
    assert!(h.state().state.frame.as_ref().unwrap().world.is_empty());
}

/// A camera as the window sees it: it streams 640×480 YUYV, offers automatic and manual
/// exposure (3..=2047) and no gain, and refuses exposure times above 1000 as some cameras do.
struct FakeCameraFeed {
    still: StillFeed,
    log: Arc<std::sync::Mutex<Vec<String>>>,
    pending: Vec<crate::pipeline::PipelineEvent>,
}

fn fake_camera() -> crate::source::camera_controls::CameraCapabilities {
    use crate::source::camera_controls::{
        CameraCapabilities, CameraMode, ControlRange, PixelFormat,
    };
    let mode = |width, height, fps, format| CameraMode {
        width,
        height,
        fps,
        format,
    };
    CameraCapabilities {
        exposure_auto: true,
        exposure_manual: true,
        exposure_time: Some(ControlRange {
            min: 3,
            max: 2047,
            step: 1,
            default: 250,
            value: 250,
        }),
        gain: None,
        modes: vec![
            mode(1280, 720, 10, PixelFormat::Yuyv),
            mode(1280, 720, 30, PixelFormat::Mjpeg),
            mode(640, 480, 30, PixelFormat::Yuyv),
        ],
        current: Some(mode(640, 480, 30, PixelFormat::Yuyv)),
    }
}

impl crate::ui::state::FrameFeed for FakeCameraFeed {
    fn poll(&mut self) -> Vec<crate::pipeline::PipelineEvent> {
        let mut events = std::mem::take(&mut self.pending);
        events.extend(self.still.poll());
        events
    }
    fn set_settings(&mut self, settings: &crate::pipeline::PipelineSettings) {
        self.still.set_settings(settings)
    }
    fn command(&mut self, _command: crate::pipeline::SourceCommand) {}
    fn open(&mut self, spec: &str) -> crate::Result<crate::ui::state::SourceInfo> {
        self.log.lock().unwrap().push(format!("open {spec}"));
        Ok(crate::ui::state::SourceInfo {
            description: format!("{spec}: fake"),
            is_live: true,
            frame_count: None,
            fps: Some(30.0),
            camera: Some(fake_camera()),
        })
    }
    fn counters(&self) -> crate::pipeline::PipelineCounters {
        self.still.counters()
    }
    fn set_camera_controls(&mut self, controls: crate::source::camera_controls::CameraControls) {
        use crate::source::camera_controls::Exposure;
        self.log
            .lock()
            .unwrap()
            .push(format!("controls {:?}", controls.exposure));
        if let Some(Exposure::Manual(t)) = controls
            .exposure
            .filter(|e| matches!(e, Exposure::Manual(t) if *t > 1000))
        {
            self.pending.push(crate::pipeline::PipelineEvent::Notice(format!(
                "camera 0: it did not take exposure {t} (exposure time: Rejected); it keeps its own setting"
            )));
        }
    }
}

/// The camera panel lists what the camera reports: gain (which it lacks) greyed out with the
/// reason, the saved gain named as not applied, the exposure time clamped to the camera's range
/// and sent to the streaming camera, a refusal shown, the modes offered listed, and a new mode
/// applied by opening the camera again.
#[test]
fn camera_panel_offers_what_the_camera_supports() {
    use crate::source::camera_controls::{Exposure, PixelFormat};
    let backends = Arc::new(Backends::cpu_only());
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let feed = FakeCameraFeed {
        still: StillFeed::new(
            disc_grid(320, 200, 10, 5, 6.0).unwrap(),
            backends.clone(),
            false,
        ),
        log: log.clone(),
        pending: Vec::new(),
    };
    let mut settings = UiSettings {
        backend: BackendChoice::Cpu,
        ..UiSettings::default()
    };
    // Saved with another camera, which had gain.
    settings.camera.gain = Some(4);
    let app = MarkerscopeApp::new(settings, backends, Some(Box::new(feed)));
    let mut h = harness(app);
    // No camera yet: its modes cannot be listed.
    assert!(h.get_by_label("resolution").accesskit_node().is_disabled());
    assert!(!h.get_by_label("gain").accesskit_node().is_disabled());

    h.state_mut().state.open_requests.push("camera:0".into());
    h.run_steps(3);
    h.get_by_label("streaming 640x480 @30 yuyv");
    assert!(h.get_by_label("gain").accesskit_node().is_disabled());
    h.get_by_label("gain 4: this camera has no gain control; it keeps its own setting");
    assert_eq!(
        h.state().state.settings.camera.gain,
        Some(4),
        "kept for other cameras"
    );

    // Exposure: manual, clamped to the camera's range, sent to the camera as it changes.
    click_in_panel(&mut h, "exposure");
    assert_eq!(
        h.state().state.settings.camera.exposure,
        Some(Exposure::Auto)
    );
    h.get_by_role_and_label(egui::accesskit::Role::CheckBox, "auto")
        .click();
    h.run_steps(2);
    h.get_by_role_and_label(egui::accesskit::Role::SpinButton, "time")
        .set_value_accesskit(100_000.0);
    h.run_steps(3);
    assert_eq!(
        h.state().state.settings.camera.exposure,
        Some(Exposure::Manual(2047))
    );
    assert!(log
        .lock()
        .unwrap()
        .iter()
        .any(|l| l == "controls Some(Manual(2047))"));
    // The camera refused it: the notice is shown.
    h.run_steps(2);
    h.get_all_by_label_contains("it did not take exposure 2047")
        .next()
        .unwrap();

    // Modes: those offered; a new one applies by opening the camera again.
    click_in_panel(&mut h, "resolution");
    h.get_by_label("1280x720").click();
    h.run_steps(2);
    click_in_panel(&mut h, "frame rate");
    assert!(h.query_by_label("10 fps").is_some() && h.query_by_label("30 fps").is_some());
    h.get_by_label("30 fps").click();
    h.run_steps(2);
    click_in_panel(&mut h, "pixel format");
    assert!(h.query_by_label("gray").is_none(), "not offered");
    h.get_by_label("mjpeg").click();
    h.run_steps(2);
    let camera = h.state().state.settings.camera;
    assert_eq!(
        (camera.resolution, camera.fps, camera.format),
        (Some((1280, 720)), Some(30), Some(PixelFormat::Mjpeg))
    );
    h.get_by_label("the new mode applies when the camera is opened again (Apply)");
    click_in_panel(&mut h, "Apply to the camera");
    assert_eq!(log.lock().unwrap().last().unwrap(), "open camera:0");
    let saved = h.state().state.settings.to_toml();
    assert!(
        saved.contains("resolution = \"1280x720\"") && saved.contains("format = \"mjpeg\""),
        "{saved}"
    );
}

/// Under zoom and pan, a point picked in the view is the frame pixel under the pointer, where
/// that pixel is drawn.
#[test]
fn points_picked_in_a_zoomed_and_panned_view_land_on_the_pixel_clicked() {
    let mut h = harness(app());
    let c = h.state().state.frame.as_ref().unwrap().components[12].clone();
    // Zoom in on a component (as a click in the table does), then drag the frame aside.
    h.state_mut().state.selected = Some(c.label);
    h.state_mut().state.focus_selected = true;
    h.run_steps(2);
    let zoom = h.state().view.zoom().unwrap();
    assert!(zoom >= 4.0, "{zoom}");
    let from = h
        .state()
        .view
        .image_to_screen(c.centroid_x as f32, c.centroid_y as f32)
        .unwrap();
    let to = from + egui::vec2(-37.0, 23.0);
    h.event(egui::Event::PointerMoved(from));
    h.event(egui::Event::PointerButton {
        pos: from,
        button: egui::PointerButton::Primary,
        pressed: true,
        modifiers: egui::Modifiers::NONE,
    });
    h.run_steps(1);
    for k in 1..=10 {
        h.event(egui::Event::PointerMoved(
            from + (to - from) * (k as f32 / 10.0),
        ));
        h.run_steps(1);
    }
    h.event(egui::Event::PointerButton {
        pos: to,
        button: egui::PointerButton::Primary,
        pressed: false,
        modifiers: egui::Modifiers::NONE,
    });
    h.run_steps(20);
    let moved = h
        .state()
        .view
        .image_to_screen(c.centroid_x as f32, c.centroid_y as f32)
        .unwrap();
    // (egui starts a drag a few points into the move.)
    assert!(
        (moved - from).length() > 30.0 && (moved - to).length() < 8.0,
        "panned to {moved:?}, wanted about {to:?}"
    );

    click_in_panel(&mut h, "Pick points");
    // Pixel (x, y) is drawn centred at texture point (x + 0.5, y + 0.5).
    let (x, y) = (c.left as f32 + 2.0, c.top as f32 + 1.0);
    pick(&mut h, &[(x, y)]);
    let row = h.state().state.world.rows[0].clone();
    let tolerance = 1.0 / zoom as f64;
    assert!(
        (row.image[0] - x as f64).abs() < tolerance && (row.image[1] - y as f64).abs() < tolerance,
        "picked {:?} at zoom {zoom}, wanted ({x}, {y})",
        row.image
    );
}
