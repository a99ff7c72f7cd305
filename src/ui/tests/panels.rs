//! The controls panel's sections (limits, masks, streams, camera, world points) and their effects.

use super::feeds::recording_app;
use super::*;

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
