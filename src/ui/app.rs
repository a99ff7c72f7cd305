//! The window: panels laid out around the frame view, the settings hand-over to the pipeline,
//! and the scripted modes (--exit-after-frames, --screenshot, --bench-ui).

use super::compare::ComparePanel;
use super::components::ComponentsPanel;
use super::config::{UiSettings, ViewMode, DEFAULT_CONFIG};
use super::controls::ControlsPanel;
use super::state::{AppState, FrameFeed, Tab};
use super::timings::TimingsPanel;
use super::track_plot::TrackPlotPanel;
use super::tracks::{TAIL_FRAMES_MAX, TAIL_FRAMES_MIN};
use super::view::ViewPanel;
use crate::ccl::BackendChoice;
use crate::ccl::{Backends, Connectivity};
use crate::error::{Error, Result};
use crate::pipeline::PipelineSettings;
use crate::threshold::spec::ThresholdSpec;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Key of the saved settings in eframe's storage (TOML, the layout of `config/default.toml`).
pub const STORAGE_KEY: &str = "markerscope.settings";

/// What `markerscope` (no subcommand) was asked for on the command line.
#[derive(Clone, Debug, Default)]
pub struct GuiOptions {
    pub source: Option<String>,
    /// Config file; None = `./config/default.toml` when present, else the built-in defaults.
    pub config: Option<PathBuf>,
    pub threshold: Option<ThresholdSpec>,
    pub invert: bool,
    pub algorithm: Option<String>,
    pub connectivity: Option<Connectivity>,
    pub backend: Option<BackendChoice>,
    /// Close the window after this many frames were shown.
    pub exit_after_frames: Option<u64>,
    /// Save a PNG of the window after `exit_after_frames` frames (default 30), then go on
    /// (or close, with --exit-after-frames).
    pub screenshot: Option<PathBuf>,
    /// Measure the redraw rate for this many seconds on a fixed frame of
    /// `bench_components` components, print it, and close.
    pub bench_ui: Option<f64>,
    pub bench_components: u32,
    /// In the benchmark, keep showing the same frame (no texture upload per redraw).
    pub bench_same_frame: bool,
    /// Inner window size in points.
    pub window_size: [f32; 2],
    /// Open on the compare page and run the comparison on the first frame.
    pub compare: bool,
    pub renderer: RendererChoice,
    /// Shape filters and descriptors, world reference points and calibration.
    pub shape: crate::cli::shape_args::ShapeArgs,
    /// Live result streams, added to those of the settings.
    pub streams: Vec<String>,
    /// Camera exposure and gain, over those of the settings.
    pub exposure: Option<crate::source::camera_controls::Exposure>,
    pub gain: Option<u32>,
    /// The `MARKERSCOPE_*` knobs (`crate::tuning::Tuning::from_env`).
    pub tuning: crate::tuning::Tuning,
}

/// The renderer eframe draws the window with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum RendererChoice {
    /// OpenGL through glow. Under software rendering (Mesa's llvmpipe, e.g. Xvfb) it redraws
    /// about 4× faster than wgpu on lavapipe, so it is the default.
    #[default]
    Glow,
    /// wgpu (Vulkan, else OpenGL).
    Wgpu,
}

/// Frames shown before the screenshot when --exit-after-frames is not given.
const SCREENSHOT_AFTER_DEFAULT: u64 = 30;

/// A screenshot asked for, and the outcome the callback leaves.
struct ScreenshotJob {
    path: PathBuf,
    after_frames: u64,
    requested: bool,
    done: Arc<Mutex<Option<std::result::Result<(), String>>>>,
}

/// Redraw benchmark bookkeeping.
struct BenchJob {
    seconds: f64,
    started: Instant,
    /// Measuring starts after a warm-up second.
    measuring_since: Option<(Instant, u64)>,
    passes: u64,
    pass_ms: Vec<f64>,
}

pub struct MarkerscopeApp {
    pub state: AppState,
    pub view: ViewPanel,
    pub controls: ControlsPanel,
    pub timings: TimingsPanel,
    pub compare: ComparePanel,
    pub components: ComponentsPanel,
    pub track_plot: TrackPlotPanel,
    feed: Option<Box<dyn FrameFeed>>,
    /// What the feed was last given (so it is told only about changes).
    sent_settings: Option<PipelineSettings>,
    /// The camera controls the feed was last given.
    sent_camera: Option<crate::source::camera_controls::CameraControls>,
    exit_after_frames: Option<u64>,
    /// Said once: the source ended before the frame count the script asked for.
    source_end_reported: bool,
    screenshot: Option<ScreenshotJob>,
    /// Why the script failed (a screenshot that could not be saved): the run then ends with
    /// that error once the window has closed.
    script_failure: Arc<Mutex<Option<String>>>,
    bench: Option<BenchJob>,
    /// Whether `save` writes the settings (not for scripted runs).
    persist: bool,
    close_requested: bool,
    /// Run the comparison as soon as a frame is there (--compare).
    auto_compare: bool,
}

impl MarkerscopeApp {
    /// A window over `feed` (None: events come only through `state.handle_event`, as in tests).
    pub fn new(
        settings: UiSettings,
        backends: Arc<Backends>,
        feed: Option<Box<dyn FrameFeed>>,
    ) -> Self {
        Self {
            state: AppState::new(settings, &backends),
            view: ViewPanel::new(),
            controls: ControlsPanel::new(),
            timings: TimingsPanel::default(),
            compare: ComparePanel::new(backends),
            components: ComponentsPanel::default(),
            track_plot: TrackPlotPanel::default(),
            feed,
            sent_settings: None,
            sent_camera: None,
            exit_after_frames: None,
            source_end_reported: false,
            screenshot: None,
            script_failure: Arc::new(Mutex::new(None)),
            bench: None,
            persist: true,
            close_requested: false,
            auto_compare: false,
        }
    }

    /// The settings the pipeline was last given (None before the first pass).
    pub fn sent_settings(&self) -> Option<&PipelineSettings> {
        self.sent_settings.as_ref()
    }

    /// One UI pass over the whole window.
    pub fn show(&mut self, ui: &mut egui::Ui) {
        let pass_start = Instant::now();
        self.state.note_redraw();
        let ctx = ui.ctx().clone();
        if let Some(feed) = &mut self.feed {
            for event in feed.poll() {
                if let crate::pipeline::PipelineEvent::Notice(m)
                | crate::pipeline::PipelineEvent::SourceError(m)
                | crate::pipeline::PipelineEvent::EngineError(m) = &event
                {
                    eprintln!("{m}");
                }
                if let crate::pipeline::PipelineEvent::Skipped(s) = &event {
                    eprintln!("skipped {s}");
                }
                self.state.handle_event(event);
            }
            self.state.counters = feed.counters();
        }
        for m in self.state.streams.open.notices() {
            eprintln!("{m}");
            self.state.message(m);
        }
        // A selection set directly (not through `AppState::select`) follows its track too.
        self.state.sync_selection();
        self.take_dropped_files(&ctx);
        if self.auto_compare && self.state.frame.is_some() {
            self.auto_compare = false;
            self.state.tab = Tab::Compare;
            self.compare.start(&self.state);
        }

        let frame = panel_frame(ui.style());
        egui::Panel::top("top_bar")
            .frame(frame)
            .show(ui, |ui| self.top_bar(ui));
        egui::Panel::left("controls")
            .frame(frame)
            .default_size(250.0)
            .show(ui, |ui| self.controls.ui(ui, &mut self.state));
        egui::Panel::bottom("timings")
            .frame(frame)
            .resizable(true)
            .default_size(230.0)
            .show(ui, |ui| self.timings.ui(ui, &self.state));
        match self.state.tab {
            Tab::Live => {
                egui::Panel::right("components")
                    .frame(frame)
                    .default_size(390.0)
                    .show(ui, |ui| {
                        // The selected track's plot under the table (the table fills the rest).
                        egui::Panel::bottom("selected_track")
                            .frame(frame)
                            .resizable(true)
                            .default_size(250.0)
                            .show(ui, |ui| self.track_plot.ui(ui, &self.state));
                        self.components.ui(ui, &mut self.state);
                    });
                egui::CentralPanel::no_frame().show(ui, |ui| self.view.ui(ui, &mut self.state));
            }
            Tab::Compare => {
                egui::CentralPanel::default()
                    .frame(egui::Frame::central_panel(ui.style()).fill(egui::Color32::TRANSPARENT))
                    .show(ui, |ui| self.compare.ui(ui, &self.state));
            }
        }
        if ctx.input(|i| !i.raw.hovered_files.is_empty()) {
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

        self.hand_over();
        self.scripted(&ctx);
        self.state.ui_ms = pass_start.elapsed().as_secs_f64() * 1e3;
        if let Some(b) = &mut self.bench {
            b.pass_ms.push(self.state.ui_ms);
        }
        if self.feed.is_some() {
            // The pipeline cannot wake the window, so it is polled: at most every 5 ms.
            ctx.request_repaint_after(Duration::from_millis(5));
        }
    }

    fn top_bar(&mut self, ui: &mut egui::Ui) {
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
            ui.checkbox(&mut self.state.settings.overlays, "overlay");
            ui.checkbox(&mut self.state.settings.ids, "ids");
            ui.checkbox(&mut self.state.settings.show_tails, "tails")
                .on_hover_text("fading trajectory tails behind tracked markers");
            ui.add_enabled(
                self.state.settings.show_tails,
                egui::DragValue::new(&mut self.state.settings.tail_frames)
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
            ui.separator();
            // Every notice stays listed (source errors, skipped frames, config problems); the
            // newest is also shown in the bar for 10 s.
            let count = self.state.messages.len();
            if count > 0 {
                let messages = &mut self.state.messages;
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
            if let Some((at, msg)) = self.state.messages.back() {
                if at.elapsed() < Duration::from_secs(10) {
                    ui.label(msg);
                }
            }
        });
    }

    fn take_dropped_files(&mut self, ctx: &egui::Context) {
        let dropped = ctx.input(|i| i.raw.dropped_files.clone());
        for file in dropped {
            let path = file.path();
            if path.as_os_str().is_empty() {
                self.state
                    .message("cannot open the dropped item: it has no file path".into());
            } else {
                self.state
                    .open_requests
                    .push(path.to_string_lossy().into_owned());
            }
        }
    }

    /// Hands settings changes, playback commands and source requests to the feed.
    fn hand_over(&mut self) {
        let mut settings = self.state.settings.pipeline_settings();
        // While a static mask is learned: the thresholded frames, without the mask.
        if self.state.masks.is_learning() {
            settings.want_binary = true;
        } else {
            settings.mask = self.state.masks.mask.clone();
        }
        let changed = self.sent_settings.as_ref() != Some(&settings);
        let Some(feed) = &mut self.feed else {
            self.sent_settings = Some(settings);
            self.state.commands.clear();
            return;
        };
        if changed {
            feed.set_settings(&settings);
            self.sent_settings = Some(settings);
        }
        if self.sent_camera != Some(self.state.settings.camera) {
            feed.set_camera_controls(self.state.settings.camera);
            self.sent_camera = Some(self.state.settings.camera);
        }
        for c in self.state.commands.drain(..) {
            feed.command(c);
        }
        for spec in std::mem::take(&mut self.state.open_requests) {
            match feed.open(&spec) {
                Ok(info) => {
                    self.state.message(format!("opened {}", info.description));
                    self.state.source = info;
                    self.state.source_spec = spec;
                    self.state.playback.playing = true;
                    // New source, new tracks.
                    self.state.reset_tracks();
                }
                Err(e) => {
                    eprintln!("{e}");
                    self.state.message(e.to_string());
                }
            }
        }
    }

    /// --exit-after-frames, --screenshot and --bench-ui.
    fn scripted(&mut self, ctx: &egui::Context) {
        let frames = self.state.frames_received;
        // A source that ends (or fails) before the frame count asked for ends the script too:
        // every frame it had has been shown.
        let ended = self.state.end_of_stream;
        let reached = |n: u64| frames >= n || ended;
        if ended && !self.source_end_reported {
            let asked = [
                self.exit_after_frames,
                self.screenshot.as_ref().map(|j| j.after_frames),
            ];
            if let Some(n) = asked.into_iter().flatten().filter(|&n| frames < n).max() {
                self.source_end_reported = true;
                eprintln!("the source ended after {frames} frame(s), before the {n} asked for");
            }
        }
        if let Some(job) = &mut self.screenshot {
            let compare_busy = self.auto_compare || self.compare.is_running();
            if !job.requested && reached(job.after_frames) && !compare_busy {
                job.requested = true;
                let (path, done) = (job.path.clone(), job.done.clone());
                let waker = ctx.clone();
                ctx.request_screenshot(move |image| {
                    let outcome = save_png(&image, &path);
                    if let Ok(mut slot) = done.lock() {
                        *slot = Some(outcome);
                    }
                    waker.request_repaint();
                });
            }
            let outcome = job.done.lock().ok().and_then(|mut s| s.take());
            match outcome {
                Some(Ok(())) => {
                    eprintln!("screenshot saved to {}", job.path.display());
                    self.screenshot = None;
                }
                Some(Err(e)) => {
                    self.state.message(e.clone());
                    if let Ok(mut failure) = self.script_failure.lock() {
                        *failure = Some(e);
                    }
                    self.screenshot = None;
                }
                None => ctx.request_repaint(),
            }
        }
        let screenshot_pending = self.screenshot.is_some();
        if let Some(n) = self.exit_after_frames {
            if reached(n) && !screenshot_pending && !self.close_requested {
                self.close_requested = true;
                ctx.send_viewport_cmd(egui::ViewportCommand::Close);
            }
        }
        if let Some(b) = &mut self.bench {
            b.passes += 1;
            ctx.request_repaint();
            let now = Instant::now();
            match b.measuring_since {
                None if now.duration_since(b.started) >= Duration::from_secs(1) => {
                    b.measuring_since = Some((now, b.passes));
                    b.pass_ms.clear();
                }
                Some((since, first)) if now.duration_since(since).as_secs_f64() >= b.seconds => {
                    let elapsed = now.duration_since(since).as_secs_f64();
                    let passes = b.passes - first;
                    let mut ms = b.pass_ms.clone();
                    ms.sort_by(f64::total_cmp);
                    let mean = ms.iter().sum::<f64>() / ms.len().max(1) as f64;
                    let p95 = ms
                        .get((ms.len() as f64 * 0.95) as usize)
                        .copied()
                        .unwrap_or(0.0);
                    let components = self.state.frame.as_ref().map_or(0, |f| f.components.len());
                    println!(
                        "bench-ui: {:.1} redraws/s over {elapsed:.1} s ({passes} passes); \
                         {components} components, {} boxes drawn, {}; \
                         UI pass (layout + overlay, without rendering) mean {mean:.2} ms, p95 {p95:.2} ms",
                        passes as f64 / elapsed,
                        self.view.last_overlay.boxes,
                        if self.view.uploads > 2 {
                            "a new frame (texture upload) every redraw"
                        } else {
                            "the same frame (no texture upload)"
                        },
                    );
                    ctx.send_viewport_cmd(egui::ViewportCommand::Close);
                    self.bench = None;
                }
                _ => {}
            }
        }
    }
}

/// The frame of the window's panels: egui's, without its fill. The window is cleared to the
/// panels' colour instead (`clear_color`): under software rendering, filling most of the window
/// a second time costs over a tenth of a redraw (README).
fn panel_frame(style: &egui::Style) -> egui::Frame {
    egui::Frame::side_top_panel(style).fill(egui::Color32::TRANSPARENT)
}

impl eframe::App for MarkerscopeApp {
    /// The panels' colour: the panels leave it unpainted (`panel_frame`).
    fn clear_color(&self, visuals: &egui::Visuals) -> [f32; 4] {
        visuals.panel_fill.to_normalized_gamma_f32()
    }

    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.show(ui);
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        if self.persist {
            storage.set_string(STORAGE_KEY, self.state.settings.to_toml());
        }
    }
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

fn save_png(image: &egui::ColorImage, path: &Path) -> std::result::Result<(), String> {
    let [w, h] = image.size;
    let bytes = image.as_raw().to_vec();
    let rgba = image::RgbaImage::from_raw(w as u32, h as u32, bytes)
        .ok_or_else(|| format!("{}: screenshot has an unexpected size", path.display()))?;
    rgba.save_with_format(path, image::ImageFormat::Png)
        .map_err(|e| format!("{}: cannot save the screenshot: {e}", path.display()))
}

/// Settings from the config file (explicit path, else ./config/default.toml when present, else
/// the built-in copy of it). Problems are returned, not fatal; only an explicit --config that
/// cannot be read is an error.
pub fn load_config(path: Option<&Path>) -> Result<(UiSettings, Vec<String>)> {
    let mut settings = UiSettings::default();
    let (text, origin) = match path {
        Some(p) => (
            std::fs::read_to_string(p).map_err(|e| Error::io(p, e))?,
            p.display().to_string(),
        ),
        None => {
            let local = Path::new("config/default.toml");
            match std::fs::read_to_string(local) {
                Ok(t) => (t, local.display().to_string()),
                Err(_) => (DEFAULT_CONFIG.to_string(), "built-in defaults".to_string()),
            }
        }
    };
    let problems = settings.apply_toml(&text, &origin);
    Ok((settings, problems))
}

/// Command-line overrides, applied last.
pub fn apply_cli(settings: &mut UiSettings, opts: &GuiOptions) {
    if let Some(s) = &opts.source {
        settings.source = s.clone();
    }
    if let Some(t) = opts.threshold {
        settings.threshold = t;
    }
    if opts.invert {
        settings.invert = true;
    }
    if let Some(a) = &opts.algorithm {
        settings.algorithm = Some(a.clone());
    }
    if let Some(c) = opts.connectivity {
        settings.connectivity = c;
    }
    if let Some(b) = opts.backend {
        settings.backend = b;
    }
    // Checked by `run` before the window opens.
    if let Ok(filter) = opts.shape.filter(settings.filter) {
        settings.filter = filter;
    }
    settings.shapes |= opts.shape.shapes;
    // Checked by `run` before the window opens (--world-point, --world-file).
    if let Ok(reference) = opts.shape.reference() {
        if !reference.points.is_empty() {
            settings.world_points = reference.points;
            settings.calibration = reference
                .calibration
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            settings.world_units = reference.units;
            if settings.refit_world().is_err() {
                settings.world = None;
            }
        }
    }
    if opts.exposure.is_some() {
        settings.camera.exposure = opts.exposure;
    }
    if opts.gain.is_some() {
        settings.camera.gain = opts.gain;
    }
    for url in &opts.streams {
        if !settings.streams.contains(url) {
            settings.streams.push(url.clone());
        }
    }
}

/// "auto" = camera 0 when one is found, else the synthetic demo.
pub fn resolve_source(spec: &str) -> String {
    if !spec.eq_ignore_ascii_case("auto") {
        return spec.to_string();
    }
    match crate::source::devices::cameras() {
        Ok(list) if !list.is_empty() => "camera:0".into(),
        _ => "synthetic".into(),
    }
}

/// Opens the window and runs until it is closed.
pub fn run(opts: GuiOptions) -> Result<()> {
    let (settings, problems) = load_config(opts.config.as_deref())?;
    // What the command line names is checked before a window opens.
    if let Some(a) = &opts.algorithm {
        crate::ccl::algorithm_info(a)?;
    }
    if let Some(s) = &opts.source {
        crate::source::SourceSpec::parse(s)?;
    }
    opts.shape
        .filter(crate::pipeline::ComponentFilter::default())?;
    opts.shape.world()?;
    for url in &opts.streams {
        crate::output::stream::StreamSpec::parse(url)?;
    }
    let scripted = opts.exit_after_frames.is_some() || opts.bench_ui.is_some();
    let backends = Arc::new(match opts.backend {
        Some(BackendChoice::Cpu) => Backends::cpu_only_tuned(&opts.tuning),
        _ => Backends::detect_tuned(&opts.tuning),
    });
    if opts.backend == Some(BackendChoice::Cuda) {
        if let Some(why) = backends.cuda_unavailable_reason() {
            return Err(Error::CudaUnavailable(why));
        }
    }
    if let Some(path) = &opts.screenshot {
        check_screenshot_path(path)?;
    }
    // The --bench-ui frame must have room for its discs (found before a window opens).
    if opts.bench_ui.is_some() {
        let (cols, rows) = bench_grid(opts.bench_components);
        super::still::disc_grid_fits(1920, 1080, cols, rows, 5.0).map_err(|e| {
            Error::Invalid(format!("--bench-components {}: {e}", opts.bench_components))
        })?;
    }
    // An algorithm, backend and connectivity named on the command line must fit together
    // (`--algorithm ha4w --backend cpu` would leave the window waiting for a first frame).
    if opts.algorithm.is_some() || opts.backend.is_some() || opts.connectivity.is_some() {
        let mut asked = settings.clone();
        apply_cli(&mut asked, &opts);
        crate::pipeline::resolve_algorithm(&asked.pipeline_settings(), &backends)?;
    }
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
    if opts.bench_ui.is_some() {
        // The benchmark measures how fast the window can redraw, not the display's rate.
        native.wgpu_options.surface.present_mode = eframe::wgpu::PresentMode::AutoNoVsync;
        native.glow_options.vsync = false;
    }
    // No dithering in egui's fragment shader: the window has hardly any gradients that would
    // band (popup shadows), and under software rendering (llvmpipe) the extra per-pixel
    // arithmetic costs over a tenth of a redraw (README).
    native.dithering = false;
    // Glow needs OpenGL; where it cannot start (no GL driver), try wgpu before giving up.
    let mut renderers = vec![native.renderer];
    if native.renderer == eframe::Renderer::Glow {
        renderers.push(eframe::Renderer::Wgpu);
    }
    let mut last_error = None;
    for renderer in renderers {
        native.renderer = renderer;
        match open_window(
            native.clone(),
            &opts,
            settings.clone(),
            problems.clone(),
            backends.clone(),
            scripted,
        ) {
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

/// Opens the window with `native` and runs until it is closed. On failure, also says whether
/// the app had been created (false: the renderer itself could not start).
fn open_window(
    native: eframe::NativeOptions,
    opts: &GuiOptions,
    mut settings: UiSettings,
    mut problems: Vec<String>,
    backends: Arc<Backends>,
    scripted: bool,
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
            if !scripted {
                if let Some(text) = cc.storage.and_then(|s| s.get_string(STORAGE_KEY)) {
                    problems.extend(settings.apply_toml(&text, "saved settings"));
                }
            }
            apply_cli(&mut settings, opts);
            let mut source = super::state::SourceInfo::default();
            let mut opened_spec = String::new();
            let feed: Box<dyn FrameFeed> = match opts.bench_ui {
                Some(_) => {
                    let (cols, rows) = bench_grid(opts.bench_components);
                    let grey = match super::still::disc_grid(1920, 1080, cols, rows, 5.0) {
                        Ok(grey) => grey,
                        // The app's own failure, not the renderer's: no other renderer is tried.
                        Err(e) => {
                            *startup_slot = Some(e);
                            return Err("the benchmark frame could not be made".into());
                        }
                    };
                    settings.view = ViewMode::Grey;
                    settings.overlays = true;
                    source.description = format!("benchmark frame: {cols}×{rows} discs, 1920×1080");
                    Box::new(super::still::StillFeed::new(
                        grey,
                        backends.clone(),
                        !opts.bench_same_frame,
                    ))
                }
                None => {
                    let spec = resolve_source(&settings.source);
                    match super::live::LiveFeed::start(&spec, &settings, backends.clone()) {
                        Ok((feed, info)) => {
                            source = info;
                            opened_spec = spec;
                            Box::new(feed)
                        }
                        Err(e) => {
                            *startup_slot = Some(e);
                            return Err("the source could not be opened".into());
                        }
                    }
                }
            };
            *created_flag = true;
            let mut app = MarkerscopeApp::new(settings, backends, Some(feed));
            app.persist = !scripted;
            if opts.compare {
                app.state.tab = Tab::Compare;
                app.auto_compare = true;
            }
            app.exit_after_frames = opts.exit_after_frames;
            app.script_failure = script_slot;
            app.screenshot = opts.screenshot.clone().map(|path| ScreenshotJob {
                path,
                after_frames: opts.exit_after_frames.unwrap_or(SCREENSHOT_AFTER_DEFAULT),
                requested: false,
                done: Arc::new(Mutex::new(None)),
            });
            app.bench = opts.bench_ui.map(|seconds| BenchJob {
                seconds,
                started: Instant::now(),
                measuring_since: None,
                passes: 0,
                pass_ms: Vec::new(),
            });
            app.state.source = source;
            app.state.source_spec = opened_spec;
            for p in problems {
                eprintln!("{p}");
                app.state.message(p);
            }
            Ok(Box::new(app))
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

/// Columns × rows of the benchmark's disc grid for about `n` components on a 16:9 frame.
fn bench_grid(n: u32) -> (u32, u32) {
    let rows = ((n as f64 / 2.0).sqrt().round() as u32).max(1);
    (n.div_ceil(rows).max(1), rows)
}
