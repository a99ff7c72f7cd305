//! Opening the window: the startup options checked before it opens, eframe's options, the
//! renderer fallback, and the app made over its feed (the live pipeline, or the benchmark's
//! fixed frame).

use super::script::Script;
use super::{MarkerscopeApp, STORAGE_KEY};
use crate::ccl::{BackendChoice, Backends};
use crate::error::{Error, Result};
use crate::frame::disc_grid::{disc_grid, disc_grid_fits};
use crate::ui::app::SourceStart;
use crate::ui::config::{UiSettings, ViewMode};
use crate::ui::live::LiveFeed;
use crate::ui::startup::{load_config, resolve_source, RendererChoice, StartupOptions};
use crate::ui::state::Tab;
use crate::ui::still::StillFeed;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Opens the window and runs until it is closed.
pub fn run(opts: StartupOptions) -> Result<()> {
    let (settings, problems) = load_config(opts.config.as_deref())?;
    let backends = check_startup(&opts, &settings)?;
    let scripted = opts.script.is_scripted();
    let mut native = native_options(&opts, scripted);
    // Glow needs OpenGL; where it cannot start (no GL driver), try wgpu before giving up.
    let mut renderers = vec![native.renderer];
    if native.renderer == eframe::Renderer::Glow {
        renderers.push(eframe::Renderer::Wgpu);
    }
    let mut last_error = None;
    for renderer in renderers {
        native.renderer = renderer;
        let start = Startup {
            opts: &opts,
            settings: settings.clone(),
            problems: problems.clone(),
            backends: backends.clone(),
            scripted,
        };
        match open_window(native.clone(), start) {
            Ok(()) => return Ok(()),
            // The app ran (or its source failed): nothing a second renderer would change.
            Err((e, true)) => return Err(e),
            Err((e, false)) => {
                eprintln!("the {renderer} renderer could not start: {e}");
                last_error = Some(e);
            }
        }
    }
    Err(last_error.expect("at least one renderer was tried"))
}

/// What the options name is checked before a window opens; returns the backends to label with.
fn check_startup(opts: &StartupOptions, settings: &UiSettings) -> Result<Arc<Backends>> {
    if let Some(a) = &opts.algorithm {
        crate::ccl::algorithm_info(a)?;
    }
    for s in &opts.sources {
        crate::source::SourceSpec::parse(s)?;
    }
    for url in &opts.streams {
        crate::output::stream::StreamSpec::parse(url)?;
    }
    let backends = Arc::new(match opts.backend {
        Some(BackendChoice::Cpu) => Backends::cpu_only_tuned(&opts.tuning),
        _ => Backends::detect_tuned(&opts.tuning),
    });
    if opts.backend == Some(BackendChoice::Cuda) {
        if let Some(why) = backends.cuda_unavailable_reason() {
            return Err(Error::CudaUnavailable(why));
        }
    }
    if let Some(path) = &opts.script.screenshot {
        check_screenshot_path(path)?;
    }
    // The benchmark frame must have room for its discs.
    if opts.script.bench_ui.is_some() {
        let (cols, rows) = bench_grid(opts.script.bench_components);
        disc_grid_fits(1920, 1080, cols, rows, 5.0).map_err(|e| {
            Error::Invalid(format!(
                "--bench-components {}: {e}",
                opts.script.bench_components
            ))
        })?;
    }
    // An algorithm, backend and connectivity asked for must fit together (the ha4w algorithm
    // on the CPU backend would leave the window waiting for a first frame).
    if opts.algorithm.is_some() || opts.backend.is_some() || opts.connectivity.is_some() {
        let mut asked = settings.clone();
        opts.apply_to(&mut asked);
        crate::pipeline::resolve_algorithm(&asked.pipeline_settings(), &backends)?;
    }
    Ok(backends)
}

/// What can be known of a screenshot path before the window opens: its folder exists and it
/// is not a folder itself. (Whether the file can be written is found when it is saved.)
fn check_screenshot_path(path: &Path) -> Result<()> {
    let bad = |why: String| {
        Err(Error::Invalid(format!(
            "--screenshot {}: {why}",
            path.display()
        )))
    };
    if path.as_os_str().is_empty() {
        return bad("the path is empty; name a .png file".into());
    }
    if path.is_dir() {
        return bad("this is a folder; name a .png file in it".into());
    }
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !folder.is_dir() {
        return bad(format!(
            "the folder {} does not exist; create it or choose another path",
            folder.display()
        ));
    }
    Ok(())
}

/// eframe's options: the window's size and title, the renderer, and no vsync for the
/// benchmark.
fn native_options(opts: &StartupOptions, scripted: bool) -> eframe::NativeOptions {
    let mut native = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("markerscope")
            .with_app_id("markerscope")
            .with_inner_size(opts.window_size)
            .with_drag_and_drop(true),
        persist_window: !scripted,
        ..Default::default()
    };
    native.renderer = match opts.renderer {
        RendererChoice::Glow => eframe::Renderer::Glow,
        RendererChoice::Wgpu => eframe::Renderer::Wgpu,
    };
    if opts.script.bench_ui.is_some() {
        // The benchmark measures how fast the window can redraw, not the display's rate.
        native.wgpu_options.surface.present_mode = eframe::wgpu::PresentMode::AutoNoVsync;
        native.glow_options.vsync = false;
    }
    // No dithering in egui's fragment shader: the window has hardly any gradients that would
    // band (popup shadows), and under software rendering (llvmpipe) the extra per-pixel
    // arithmetic costs over a tenth of a redraw (README).
    native.dithering = false;
    native
}

/// Why the app could not be made, and what eframe is told.
type StartFailure = (Error, &'static str);

/// Everything the app is made from, once eframe has a window for it.
struct Startup<'a> {
    opts: &'a StartupOptions,
    settings: UiSettings,
    problems: Vec<String>,
    backends: Arc<Backends>,
    scripted: bool,
}

/// Opens the window with `native` and runs until it is closed. On failure, also says whether
/// the app had been created (false: the renderer itself could not start).
fn open_window(
    native: eframe::NativeOptions,
    start: Startup,
) -> std::result::Result<(), (Error, bool)> {
    let mut startup_error: Option<Error> = None;
    let startup_slot = &mut startup_error;
    let script_failure = Arc::new(Mutex::new(None));
    let script_slot = script_failure.clone();
    let mut created = false;
    let created_flag = &mut created;
    let result = eframe::run_native(
        "markerscope",
        native,
        Box::new(move |cc| {
            let saved = cc.storage.and_then(|s| s.get_string(STORAGE_KEY));
            match start.make_app(saved, script_slot) {
                Ok(app) => {
                    *created_flag = true;
                    Ok(Box::new(app))
                }
                // The app's own failure, not the renderer's: no other renderer is tried.
                Err((e, why)) => {
                    *startup_slot = Some(e);
                    Err(why.into())
                }
            }
        }),
    );
    if let Some(e) = startup_error {
        return Err((e, true));
    }
    if let Some(why) = script_failure.lock().ok().and_then(|mut f| f.take()) {
        return Err((Error::Invalid(why), true));
    }
    result.map_err(|e| {
        let e = Error::Invalid(format!(
            "cannot open the window: {e} (is a display available? DISPLAY={})",
            std::env::var("DISPLAY").unwrap_or_else(|_| "unset".into())
        ));
        (e, created)
    })
}

impl Startup<'_> {
    /// The app over its feed, its settings being the config's, the saved copy's (not for
    /// scripted runs) and the options', in that order.
    fn make_app(
        mut self,
        saved: Option<String>,
        script_failure: Arc<Mutex<Option<String>>>,
    ) -> std::result::Result<MarkerscopeApp, StartFailure> {
        if let Some(text) = saved.filter(|_| !self.scripted) {
            let problems = self.settings.apply_toml(&text, "saved settings");
            self.problems.extend(problems);
        }
        let opts = self.opts;
        opts.apply_to(&mut self.settings);
        let mut app = match opts.script.bench_ui {
            Some(_) => self.bench_app()?,
            None => self.live_app()?,
        };
        app.persist = !self.scripted;
        if opts.compare {
            app.state.tab = Tab::Compare;
            app.auto_compare = true;
        }
        app.script = Script::new(&opts.script, script_failure);
        for p in self.problems {
            eprintln!("{p}");
            app.state.message(p);
        }
        Ok(app)
    }

    /// The live pipeline over each source of the settings. One source without sections is
    /// the window as it always was: a source that cannot be opened stops it. With several,
    /// such a source shows why in its cell, and the others run.
    fn live_app(&mut self) -> std::result::Result<MarkerscopeApp, StartFailure> {
        let backends = self.backends.clone();
        if self.settings.sources.is_empty() {
            let spec = resolve_source(&self.settings.source);
            let (feed, info) = LiveFeed::start(&spec, &self.settings, backends.clone())
                .map_err(|e| (e, "the source could not be opened"))?;
            let mut app =
                MarkerscopeApp::new(self.settings.clone(), backends, Some(Box::new(feed)));
            app.state.source = info;
            app.state.source_spec = spec;
            return Ok(app);
        }
        // Each source's pipeline queues its GPU work on a stream of its own.
        let mut starts = Vec::new();
        for settings in self.settings.source_settings() {
            let own = backends
                .on_own_stream()
                .map_err(|e| (e, "a GPU stream could not be made"))?;
            starts.push(SourceStart::live(settings, &Arc::new(own)));
        }
        Ok(MarkerscopeApp::with_sources(
            self.settings.clone(),
            backends,
            starts,
        ))
    }

    /// The benchmark's fixed frame.
    fn bench_app(&mut self) -> std::result::Result<MarkerscopeApp, StartFailure> {
        let (cols, rows) = bench_grid(self.opts.script.bench_components);
        let grey = disc_grid(1920, 1080, cols, rows, 5.0)
            .map_err(|e| (e, "the benchmark frame could not be made"))?;
        self.settings.view = ViewMode::Grey;
        self.settings.overlays = true;
        let feed = StillFeed::new(
            grey,
            self.backends.clone(),
            !self.opts.script.bench_same_frame,
        );
        let mut app = MarkerscopeApp::new(
            self.settings.clone(),
            self.backends.clone(),
            Some(Box::new(feed)),
        );
        app.state.source.description = format!("benchmark frame: {cols}×{rows} discs, 1920×1080");
        Ok(app)
    }
}

/// Columns × rows of the benchmark's disc grid for about `n` components on a 16:9 frame.
fn bench_grid(n: u32) -> (u32, u32) {
    let rows = ((n as f64 / 2.0).sqrt().round() as u32).max(1);
    (n.div_ceil(rows).max(1), rows)
}
