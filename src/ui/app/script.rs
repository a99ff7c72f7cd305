//! The scripted modes of the window: close after N frames, save a screenshot, measure the
//! redraw rate. Each is asked for in the startup options; a window a person uses has none.

use super::MarkerscopeApp;
use crate::ui::startup::ScriptOptions;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Frames shown before the screenshot when no frame count to exit after is given.
const SCREENSHOT_AFTER_DEFAULT: u64 = 30;

/// What a scripted run asked for, and how far it got.
#[derive(Default)]
pub(super) struct Script {
    /// Close the window after this many frames were shown.
    exit_after_frames: Option<u64>,
    /// Said once: the source ended before the frame count the script asked for.
    source_end_reported: bool,
    screenshot: Option<ScreenshotJob>,
    /// Why the script failed (a screenshot that could not be saved): the run then ends with
    /// that error once the window has closed.
    failure: Arc<Mutex<Option<String>>>,
    bench: Option<BenchJob>,
    close_requested: bool,
}

/// A screenshot asked for, and the outcome the callback leaves.
struct ScreenshotJob {
    path: PathBuf,
    after_frames: u64,
    requested: bool,
    done: Arc<Mutex<Option<Result<(), String>>>>,
}

impl ScreenshotJob {
    fn new(path: PathBuf, after_frames: u64) -> Self {
        Self {
            path,
            after_frames,
            requested: false,
            done: Arc::new(Mutex::new(None)),
        }
    }
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

impl BenchJob {
    fn new(seconds: f64) -> Self {
        Self {
            seconds,
            started: Instant::now(),
            measuring_since: None,
            passes: 0,
            pass_ms: Vec::new(),
        }
    }
}

impl Script {
    /// The script `options` ask for; `failure` is where it leaves why it failed.
    pub fn new(options: &ScriptOptions, failure: Arc<Mutex<Option<String>>>) -> Self {
        let screenshot = options.screenshot.clone().map(|path| {
            let after = options
                .exit_after_frames
                .unwrap_or(SCREENSHOT_AFTER_DEFAULT);
            ScreenshotJob::new(path, after)
        });
        // A screenshot alone closes the window once it is saved, as a scripted run should.
        let exit_after_frames = options
            .exit_after_frames
            .or(screenshot.as_ref().map(|job| job.after_frames));
        Self {
            exit_after_frames,
            source_end_reported: false,
            screenshot,
            failure,
            bench: options.bench_ui.map(BenchJob::new),
            close_requested: false,
        }
    }

    /// Notes how long a UI pass took (for the benchmark's report).
    pub fn note_pass(&mut self, ms: f64) {
        if let Some(b) = &mut self.bench {
            b.pass_ms.push(ms);
        }
    }
}

impl MarkerscopeApp {
    /// One pass of the script: the screenshot, the close after N frames, the benchmark.
    pub(super) fn scripted(&mut self, ctx: &egui::Context) {
        let frames = self.state.frames_received;
        // A source that ends (or fails) before the frame count asked for ends the script too:
        // every frame it had has been shown.
        let ended = self.state.end_of_stream;
        let reached = |n: u64| frames >= n || ended;
        if ended && !self.script.source_end_reported {
            self.report_early_end(frames);
        }
        let compare_busy = self.auto_compare || self.compare.is_running();
        if let Some(job) = &mut self.script.screenshot {
            if !job.requested && reached(job.after_frames) && !compare_busy {
                request_screenshot(ctx, job);
            }
            self.take_screenshot_outcome(ctx);
        }
        let screenshot_pending = self.script.screenshot.is_some();
        if let Some(n) = self.script.exit_after_frames {
            if reached(n) && !screenshot_pending && !self.script.close_requested {
                self.script.close_requested = true;
                ctx.send_viewport_cmd(egui::ViewportCommand::Close);
            }
        }
        if self.script.bench.is_some() {
            self.bench_pass(ctx);
        }
    }

    /// Says once that the source ended before a frame count the script asked for.
    fn report_early_end(&mut self, frames: u64) {
        let asked = [
            self.script.exit_after_frames,
            self.script.screenshot.as_ref().map(|j| j.after_frames),
        ];
        if let Some(n) = asked.into_iter().flatten().filter(|&n| frames < n).max() {
            self.script.source_end_reported = true;
            eprintln!("the source ended after {frames} frame(s), before the {n} asked for");
        }
    }

    /// The screenshot's outcome, once the callback has left it: saved, or the script fails.
    fn take_screenshot_outcome(&mut self, ctx: &egui::Context) {
        let Some(job) = &self.script.screenshot else {
            return;
        };
        let outcome = job.done.lock().ok().and_then(|mut s| s.take());
        match outcome {
            Some(Ok(())) => {
                eprintln!("screenshot saved to {}", job.path.display());
                self.script.screenshot = None;
            }
            Some(Err(e)) => {
                self.state.message(e.clone());
                if let Ok(mut failure) = self.script.failure.lock() {
                    *failure = Some(e);
                }
                self.script.screenshot = None;
            }
            None => ctx.request_repaint(),
        }
    }

    /// Counts a benchmark pass; after the warm-up second and the time asked for, prints the
    /// redraw rate and closes the window.
    fn bench_pass(&mut self, ctx: &egui::Context) {
        let Some(b) = &mut self.script.bench else {
            return;
        };
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
                let (mean, p95) = mean_and_p95(&b.pass_ms);
                self.print_bench(elapsed, passes, mean, p95);
                ctx.send_viewport_cmd(egui::ViewportCommand::Close);
                self.script.bench = None;
            }
            _ => {}
        }
    }

    fn print_bench(&self, elapsed: f64, passes: u64, mean: f64, p95: f64) {
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
    }
}

/// Asks egui for a screenshot; the callback saves it and leaves the outcome in the job.
fn request_screenshot(ctx: &egui::Context, job: &mut ScreenshotJob) {
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

/// The mean and the 95th percentile of pass times (ms).
fn mean_and_p95(pass_ms: &[f64]) -> (f64, f64) {
    let mut ms = pass_ms.to_vec();
    ms.sort_by(f64::total_cmp);
    let mean = ms.iter().sum::<f64>() / ms.len().max(1) as f64;
    let p95 = ms
        .get((ms.len() as f64 * 0.95) as usize)
        .copied()
        .unwrap_or(0.0);
    (mean, p95)
}

fn save_png(image: &egui::ColorImage, path: &Path) -> Result<(), String> {
    let [w, h] = image.size;
    let bytes = image.as_raw().to_vec();
    let rgba = image::RgbaImage::from_raw(w as u32, h as u32, bytes)
        .ok_or_else(|| format!("{}: screenshot has an unexpected size", path.display()))?;
    rgba.save_with_format(path, image::ImageFormat::Png)
        .map_err(|e| format!("{}: cannot save the screenshot: {e}", path.display()))
}
