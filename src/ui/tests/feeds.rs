//! The window over feeds of its own: one that records what it is asked, one of moving markers.

use super::*;

/// The window over a `RecordingFeed` of the disc grid, and the feed's log.
pub(super) fn recording_app() -> (MarkerscopeApp, Arc<std::sync::Mutex<Vec<String>>>) {
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
