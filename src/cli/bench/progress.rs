//! Progress on stderr: an indicatif bar on a terminal, a plain line every few seconds otherwise
//! (logs of the GPU machine, CI), nothing in tests.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

pub struct Progress {
    bar: Option<ProgressBar>,
    total: u64,
    done: u64,
    message: String,
    started: Instant,
    last_line: Instant,
    plain: bool,
}

/// Seconds between plain progress lines.
const PLAIN_EVERY: Duration = Duration::from_secs(5);

impl Progress {
    /// A bar on an interactive stderr; plain lines otherwise. `quiet` (`BenchTuning::quiet`)
    /// silences both.
    pub fn new(total: u64, quiet: bool) -> Self {
        let interactive = std::io::stderr().is_terminal();
        let bar = (!quiet && interactive).then(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len} (eta {eta}) {msg}",
            ) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar
        });
        let now = Instant::now();
        Progress {
            bar,
            total,
            done: 0,
            message: String::new(),
            started: now,
            last_line: now,
            plain: !quiet && !interactive,
        }
    }

    pub fn message(&mut self, msg: &str) {
        if let Some(b) = &self.bar {
            b.set_message(msg.to_string());
        }
        self.message.clear();
        self.message.push_str(msg);
    }

    pub fn inc(&mut self, n: u64) {
        self.done += n;
        if let Some(b) = &self.bar {
            b.inc(n);
        } else if self.plain && self.last_line.elapsed() >= PLAIN_EVERY {
            self.last_line = Instant::now();
            eprintln!(
                "[bench {:>6.1}s] {}/{} ({:.0}%) {}",
                self.started.elapsed().as_secs_f64(),
                self.done,
                self.total,
                self.done as f64 / self.total.max(1) as f64 * 100.0,
                self.message
            );
        }
    }

    pub fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        if self.plain {
            eprintln!(
                "[bench {:>6.1}s] {}/{} done",
                self.started.elapsed().as_secs_f64(),
                self.done,
                self.total
            );
        }
    }
}
