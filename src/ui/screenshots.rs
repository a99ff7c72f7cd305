//! Pictures of the window for the README, drawn without a display: egui_kittest renders the
//! app with wgpu (Vulkan on a GPU machine), fed by the live pipeline on the synthetic demo with
//! the default backend (CUDA where there is a GPU), so the timings panel shows what users get.
//!
//! `markerscope screenshots OUT_DIR [NAME...]` (a hidden subcommand) writes OUT_DIR/main-view.png (after 120 frames), OUT_DIR/compare-view.png (every
//! algorithm on one frame) and OUT_DIR/live-controls.png (the controls for live tracking set
//! as a user would: shape limits, world reference points, camera values, a mask region, two
//! streams; a selected marker's world position in the view), OUT_DIR/markers-view.png (square
//! fiducials of `synthetic:markers` found with their IDs and drawn with their axes),
//! OUT_DIR/sources-view.png (four views of one world side by side, `synthetic:view=K/4`, each
//! source with its own reference points), or only the NAMEs given (`main-view`,
//! `compare-view`, `live-controls`, `markers-view`, `sources-view`).

use crate::ccl::Backends;
use crate::frame::mask::{Mask, Roi};
use crate::geometry::calibration::Calibration;
use crate::geometry::WorldMapping;
use crate::source::camera_controls::{CameraControls, Exposure};
use crate::source::synthetic::{DEFAULT_HEIGHT, DEFAULT_WIDTH};
use crate::source::view_scene::ViewScene;
use crate::tuning::Tuning;
use crate::ui::app::SourceStart;
use crate::ui::live::LiveFeed;
use crate::ui::software_render::SoftwareRenderer;
use crate::ui::{MarkerscopeApp, Tab, UiSettings};
use egui_kittest::Harness;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Steps the app until `done` says so, or fails after `limit`.
fn step_until(
    h: &mut Harness<'_, MarkerscopeApp>,
    limit: Duration,
    what: &str,
    done: impl Fn(&MarkerscopeApp) -> bool,
) -> Result<(), String> {
    let start = Instant::now();
    while !done(h.state()) {
        if start.elapsed() > limit {
            return Err(format!("{what}: not done after {limit:?}"));
        }
        h.run_steps(1);
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// Where the pictures go, and what draws them.
pub struct Pictures<'a> {
    pub dir: &'a Path,
    /// Drawn on the CPU (`software_render`) instead of by wgpu.
    pub software: bool,
}

impl Pictures<'_> {
    /// The app in a headless harness of `size`, drawn when a picture is taken.
    fn harness(&self, size: egui::Vec2, app: MarkerscopeApp) -> Harness<'static, MarkerscopeApp> {
        let builder = Harness::builder().with_size(size);
        let builder = match self.software {
            true => builder.renderer(SoftwareRenderer::default()),
            false => builder,
        };
        builder.build_ui_state(|ui, app: &mut MarkerscopeApp| app.show(ui), app)
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.join(format!("{name}.png"))
    }
}

/// The harness's picture. egui_kittest panics when wgpu finds no adapter (a machine without a
/// display or a software renderer): that comes back as an error.
fn render(h: &mut Harness<'_, MarkerscopeApp>) -> Result<image::RgbaImage, String> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let drawn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| h.render()));
    std::panic::set_hook(hook);
    match drawn {
        Ok(image) => image,
        Err(payload) => {
            let why = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("unknown reason");
            Err(format!(
                "cannot draw the window here: {why} (wgpu needs a Vulkan, Metal, DX12 or GL \
                 adapter; on a machine without a display, Mesa's lavapipe gives one, or \
                 `--software` draws on the CPU)"
            ))
        }
    }
}

fn save(h: &mut Harness<'_, MarkerscopeApp>, path: &Path) -> Result<(), String> {
    let image = render(h)?;
    image
        .save(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// Writes the pictures `names` asks for (all of them when empty) into `out`.
pub fn run(out: &Pictures, names: &[String], tuning: &Tuning) -> Result<(), String> {
    let known = [
        "main-view",
        "compare-view",
        "live-controls",
        "markers-view",
        "sources-view",
    ];
    if let Some(bad) = names.iter().find(|n| !known.contains(&n.as_str())) {
        return Err(format!(
            "unknown picture '{bad}': expected {}",
            known.join(", ")
        ));
    }
    let wanted = |name: &str| names.is_empty() || names.iter().any(|n| n == name);
    let backends = Arc::new(Backends::detect_tuned(tuning));
    if wanted("main-view") || wanted("compare-view") {
        main_and_compare(
            out,
            backends.clone(),
            wanted("main-view"),
            wanted("compare-view"),
        )?;
    }
    if wanted("live-controls") {
        live_controls(out, backends.clone())?;
    }
    if wanted("markers-view") {
        markers_view(out, backends.clone())?;
    }
    if wanted("sources-view") {
        sources_view(out, backends)?;
    }
    Ok(())
}

/// Four views of one world side by side (`synthetic:view=K/4`), each source with its own
/// reference points (its camera's place in the world), the second one selected.
fn sources_view(out: &Pictures, backends: Arc<Backends>) -> Result<(), String> {
    const VIEWS: u32 = 4;
    let defaults = UiSettings::default();
    let mut starts = Vec::new();
    for k in 0..VIEWS {
        let spec = format!("synthetic:view={k}/{VIEWS}");
        let mut settings = defaults.defaults_for(&spec);
        let scene =
            ViewScene::new(k, VIEWS, DEFAULT_WIDTH, DEFAULT_HEIGHT).map_err(|e| e.to_string())?;
        let world = scene.reference_file();
        settings.world_points = world.points;
        settings.world_units = world.units;
        settings.refit_world()?;
        let start = SourceStart::live(settings, &backends);
        if let Err(why) = &start.opened {
            return Err(format!("{spec}: {why}"));
        }
        starts.push(start);
    }
    let mut app = MarkerscopeApp::with_sources(defaults, backends, starts);
    app.select_source(1);
    let mut h = out.harness(egui::vec2(1800.0, 1100.0), app);
    step_until(
        &mut h,
        Duration::from_secs(120),
        "60 frames of every source",
        |app| app.source_states().iter().all(|s| s.frames_received >= 60),
    )?;
    eprintln!("backend: {}", h.state().state.backend_banner);
    save(&mut h, &out.path("sources-view"))
}

/// The fiducial demo: `synthetic:markers` with marker detection on, each marker outlined with
/// its ID and, from a pose, its axes (a pinhole camera of 1,000 px focal length at the frame's
/// centre; markers 50 mm a side).
fn markers_view(out: &Pictures, backends: Arc<Backends>) -> Result<(), String> {
    const SOURCE: &str = "synthetic:markers";
    let mut settings = UiSettings {
        source: SOURCE.into(),
        ..UiSettings::default()
    };
    settings.markers.enabled = true;
    settings.markers.length = Some(50.0);
    // The axes need a lens calibration; the world mapping carries it (the corners of the
    // scene's 1280×720 frame as reference points, in pixels).
    let calibration = Calibration {
        fx: 1000.0,
        fy: 1000.0,
        cx: 639.5,
        cy: 359.5,
        dist: [0.0; 5],
    };
    let points = [
        "0,0=0,0",
        "1279,0=1279,0",
        "1279,719=1279,719",
        "0,719=0,719",
    ]
    .iter()
    .map(|p| p.parse().map_err(|e: crate::Error| e.to_string()))
    .collect::<Result<_, _>>()?;
    settings.world = Some(Arc::new(
        WorldMapping::new(points, Some(calibration), "px").map_err(|e| e.to_string())?,
    ));
    let (feed, info) =
        LiveFeed::start(SOURCE, &settings, backends.clone()).map_err(|e| e.to_string())?;
    let mut app = MarkerscopeApp::new(settings, backends, Some(Box::new(feed)));
    app.state.source = info;
    app.state.source_spec = SOURCE.into();
    let mut h = out.harness(egui::vec2(1600.0, 1000.0), app);
    step_until(
        &mut h,
        Duration::from_secs(120),
        "60 frames with markers",
        |app| {
            app.state.frames_received >= 60
                && app
                    .state
                    .frame
                    .as_ref()
                    .is_some_and(|f| !f.markers.is_empty())
        },
    )?;
    eprintln!("backend: {}", h.state().state.backend_banner);
    save(&mut h, &out.path("markers-view"))
}

fn main_and_compare(
    out: &Pictures,
    backends: Arc<Backends>,
    main_view: bool,
    compare_view: bool,
) -> Result<(), String> {
    let settings = UiSettings {
        source: "synthetic".into(),
        ..UiSettings::default()
    };
    let (feed, _) =
        LiveFeed::start("synthetic", &settings, backends.clone()).map_err(|e| e.to_string())?;
    let app = MarkerscopeApp::new(settings, backends, Some(Box::new(feed)));
    let mut h = out.harness(egui::vec2(1600.0, 1000.0), app);
    step_until(&mut h, Duration::from_secs(60), "120 frames", |app| {
        app.state.frames_received >= 120
    })?;
    let banner = h.state().state.backend_banner.clone();
    eprintln!("backend: {banner}");
    if main_view {
        save(&mut h, &out.path("main-view"))?;
    }
    if !compare_view {
        return Ok(());
    }
    let app = h.state_mut();
    app.state.tab = Tab::Compare;
    app.compare.start(&app.state);
    h.run_steps(2);
    step_until(&mut h, Duration::from_secs(300), "the comparison", |app| {
        !app.compare.is_running()
    })?;
    h.run_steps(3);
    save(&mut h, &out.path("compare-view"))
}

/// The demo with the live-tracking controls in use, the window tall enough to show every
/// section of the controls panel.
fn live_controls(out: &Pictures, backends: Arc<Backends>) -> Result<(), String> {
    // Receivers for the two streams, so that they run as they would with a client.
    let bind = || std::net::UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string());
    let (osc, udp) = (bind()?, bind()?);
    let port = |s: &std::net::UdpSocket| s.local_addr().map(|a| a.port()).unwrap_or(0);
    let mut settings = UiSettings {
        source: "synthetic".into(),
        shapes: true,
        // The demo's 1280×720 frame is 640 × 360 mm.
        world_points: [
            "40,40=20,20",
            "1240,40=620,20",
            "1240,680=620,340",
            "40,680=20,340",
        ]
        .iter()
        .map(|p| p.parse().map_err(|e: crate::Error| e.to_string()))
        .collect::<Result<_, _>>()?,
        world_units: "mm".into(),
        streams: vec![
            format!("osc://127.0.0.1:{}", port(&osc)),
            format!("udp://127.0.0.1:{}", port(&udp)),
        ],
        camera: CameraControls {
            exposure: Some(Exposure::Manual(50)),
            gain: Some(4),
            ..CameraControls::default()
        },
        ..UiSettings::default()
    };
    settings.filter.min_circularity = Some(0.8);
    settings.filter.min_inertia_ratio = Some(0.5);
    settings.refit_world()?;
    let (feed, info) =
        LiveFeed::start("synthetic", &settings, backends.clone()).map_err(|e| e.to_string())?;
    let mut app = MarkerscopeApp::new(settings, backends, Some(Box::new(feed)));
    app.state.source = info;
    app.state.source_spec = "synthetic".into();
    // A region of interest that leaves out the frame's border.
    app.state.masks.mask = Some(Arc::new(Mask {
        pixels: None,
        rois: vec![Roi::Rect {
            left: 24,
            top: 24,
            width: 1232,
            height: 672,
        }],
    }));
    let mut h = out.harness(egui::vec2(1800.0, 1400.0), app);
    step_until(&mut h, Duration::from_secs(60), "60 frames", |app| {
        app.state.frames_received >= 60
    })?;
    // Select the marker nearest the frame's centre: the view gives its world position.
    let frame = h.state().state.frame.clone().ok_or("no frame")?;
    let nearest = frame.components.iter().min_by(|a, b| {
        let d = |c: &crate::ccl::stats::ComponentStats| {
            (c.centroid_x - 640.0).hypot(c.centroid_y - 360.0)
        };
        d(a).total_cmp(&d(b))
    });
    h.state_mut().state.select(nearest.map(|c| c.label));
    step_until(&mut h, Duration::from_secs(60), "90 frames", |app| {
        app.state.frames_received >= 90
    })?;
    eprintln!("backend: {}", h.state().state.backend_banner);
    save(&mut h, &out.path("live-controls"))?;
    drop((osc, udp));
    Ok(())
}
