//! Pictures of the window for the README, drawn without a display: egui_kittest renders the
//! app with wgpu (Vulkan on a GPU machine), fed by the live pipeline on the synthetic demo with
//! the default backend (CUDA where there is a GPU), so the timings panel shows what users get.
//!
//! `cargo run --profile ci --no-default-features --features cuda,gui --example window_screenshots -- OUT_DIR`
//! writes OUT_DIR/main-view.png (after 120 frames) and OUT_DIR/compare-view.png (every
//! algorithm on one frame).

use egui_kittest::Harness;
use markerscope::ccl::Backends;
use markerscope::ui::live::LiveFeed;
use markerscope::ui::{MarkerscopeApp, Tab, UiSettings};
use std::path::PathBuf;
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

fn save(h: &mut Harness<'_, MarkerscopeApp>, path: &PathBuf) -> Result<(), String> {
    let image = h.render()?;
    image
        .save(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

fn main() -> Result<(), String> {
    let out = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| ".".into()));
    let backends = Arc::new(Backends::detect());
    let settings = UiSettings {
        source: "synthetic".into(),
        ..UiSettings::default()
    };
    let (feed, _) =
        LiveFeed::start("synthetic", &settings, backends.clone()).map_err(|e| e.to_string())?;
    let app = MarkerscopeApp::new(settings, backends, Some(Box::new(feed)));
    let mut h = Harness::builder()
        .with_size(egui::vec2(1600.0, 1000.0))
        .build_ui_state(|ui, app: &mut MarkerscopeApp| app.show(ui), app);
    step_until(&mut h, Duration::from_secs(60), "120 frames", |app| {
        app.state.frames_received >= 120
    })?;
    let banner = h.state().state.backend_banner.clone();
    eprintln!("backend: {banner}");
    save(&mut h, &out.join("main-view.png"))?;

    let app = h.state_mut();
    app.state.tab = Tab::Compare;
    app.compare.start(&app.state);
    h.run_steps(2);
    step_until(&mut h, Duration::from_secs(300), "the comparison", |app| {
        !app.compare.is_running()
    })?;
    h.run_steps(3);
    save(&mut h, &out.join("compare-view.png"))
}
