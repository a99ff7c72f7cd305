//! The plain-text tables printed at the end of a run.

use super::super::spec::{LatencyFrames, AVERAGING};
use super::{BenchReport, StepMs, ThroughputResult};
use std::fmt::Write as _;

impl BenchReport {
    /// The tables printed at the end of a run.
    pub fn render_tables(&self) -> String {
        let mut out = String::new();
        self.render_heading(&mut out);
        if !self.pipeline.is_empty() {
            self.render_pipeline(&mut out);
        }
        if !self.throughput.is_empty() {
            self.render_throughput(&mut out);
            self.render_throughput_steps(&mut out);
        }
        if !self.comparisons.is_empty() {
            self.render_throughput_peers(&mut out);
        }
        if !self.latency.is_empty() {
            self.render_latency(&mut out);
            self.render_latency_steps(&mut out);
            self.render_latency_peers(&mut out);
        }
        self.render_unavailable(&mut out);
        self.render_count_mismatches(&mut out);
        out
    }

    /// The date, the machine, the copy ceilings and how the numbers are averaged.
    fn render_heading(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "markerscope bench — {} — {}",
            self.date, self.machine.cpu
        );
        if let Some(gpu) = &self.machine.gpu {
            let _ = writeln!(out, "GPU: {gpu}");
        }
        for b in &self.bandwidth {
            let _ = writeln!(
                out,
                "{} copy ceiling: {:.1} GB/s (read+write; {}, {} MiB, best of {})",
                b.backend.to_uppercase(),
                b.gb_s,
                b.method,
                b.bytes >> 20,
                b.repeat
            );
        }
        if !self.throughput.is_empty() || !self.latency.is_empty() {
            let _ = writeln!(
                out,
                "{AVERAGING}; % of ceiling = bytes/px (CCL 5, CCA 1) × Gpx/s / copy GB/s."
            );
        }
    }

    fn render_throughput(&self, out: &mut String) {
        let _ = writeln!(out, "\nThroughput");
        let rows = self
            .throughput
            .iter()
            .map(|r| {
                let mut row = throughput_key(r);
                row.extend([
                    format!("{:.3}", r.mean_gpx_s),
                    format!("{:.3}", r.mean_ms),
                    r.percent_of_ceiling
                        .map(|p| format!("{p:.1}%"))
                        .unwrap_or_else(|| "-".into()),
                ]);
                row
            })
            .collect();
        let columns = [
            THROUGHPUT_KEY.as_slice(),
            &[right("Gpx/s"), right("ms"), right("% ceiling")],
        ]
        .concat();
        *out += &table(&columns, rows);
    }

    fn render_throughput_steps(&self, out: &mut String) {
        let _ = writeln!(out, "\nPer-step times (mean over densities)");
        let mut rows = Vec::new();
        for r in &self.throughput {
            let total: f64 = r.steps.iter().map(|s| s.ms).sum();
            for s in &r.steps {
                let share = if total > 0.0 {
                    s.ms / total * 100.0
                } else {
                    0.0
                };
                let mut row = throughput_key(r);
                row.extend([
                    s.step.clone(),
                    format!("{:.3}", s.ms),
                    format!("{share:.0}%"),
                ]);
                rows.push(row);
            }
        }
        let columns = [
            THROUGHPUT_KEY.as_slice(),
            &[left("step"), right("ms"), right("share")],
        ]
        .concat();
        *out += &table(&columns, rows);
    }

    fn render_throughput_peers(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "\nPeers (ratio = markerscope Gpx/s / peer Gpx/s; > 1: markerscope is faster)"
        );
        let rows = self
            .comparisons
            .iter()
            .map(|c| {
                vec![
                    c.connectivity.to_string(),
                    c.mode.as_str().into(),
                    format!("{}x{}", c.width, c.height),
                    c.granularity.to_string(),
                    format!("{} ({})", c.peer, c.peer_backend),
                    format!("{:.3}", c.peer_gpx_s),
                    format!("{} ({})", c.best_algorithm, c.best_backend),
                    format!("{:.3}", c.best_gpx_s),
                    format!("{:.2}x", c.ratio),
                    match (&c.same_backend_algorithm, c.same_backend_ratio) {
                        (Some(a), Some(x)) if *a != c.best_algorithm => format!("{a}: {x:.2}x"),
                        (Some(_), Some(_)) => "same".into(),
                        _ => "-".into(),
                    },
                ]
            })
            .collect();
        let columns = [
            right("conn"),
            left("mode"),
            left("size"),
            right("g"),
            left("peer"),
            right("peer Gpx/s"),
            left("best"),
            right("best Gpx/s"),
            right("ratio"),
            left("same backend"),
        ];
        *out += &table(&columns, rows);
    }

    fn render_latency(&self, out: &mut String) {
        let source = self
            .inputs
            .latency
            .as_ref()
            .map_or(LatencyFrames::Random, |l| l.source);
        let _ = writeln!(out, "\nFrame latency, host to host ({})", source.describe());
        let rows = self
            .latency
            .iter()
            .map(|r| {
                vec![
                    label(&r.algorithm, &r.source),
                    r.backend.clone(),
                    r.connectivity.to_string(),
                    format!("{}x{}", r.width, r.height),
                    r.frames.to_string(),
                    format!("{:.3}", r.median_ms),
                    format!("{:.3}", r.p99_ms),
                    format!("{:.3}", r.mean_ms),
                    format!("{:.3}", r.max_ms),
                    r.mean_components
                        .map_or_else(|| "-".into(), |c| format!("{c:.0}")),
                    r.what.clone(),
                ]
            })
            .collect();
        let columns = [
            left("algorithm"),
            left("backend"),
            right("conn"),
            left("size"),
            right("frames"),
            right("median ms"),
            right("p99 ms"),
            right("mean ms"),
            right("max ms"),
            right("components"),
            left("frame"),
        ];
        *out += &table(&columns, rows);
    }

    /// The labeler's own step times per frame beside the wall time: the mean and a median frame.
    fn render_latency_steps(&self, out: &mut String) {
        let with_steps: Vec<_> = self
            .latency
            .iter()
            .filter(|r| !r.steps.is_empty())
            .collect();
        if with_steps.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "\nMs per frame of each step the labeler times itself, and of the rest of \
             the wall time (launches, waits, host copies): the mean over the frames, \
             and one median frame:"
        );
        let line = |steps: &[StepMs], wall: f64| {
            let timed: f64 = steps.iter().map(|s| s.ms).sum();
            let parts: Vec<String> = steps
                .iter()
                .map(|s| format!("{} {:.4}", s.step, s.ms))
                .collect();
            format!("{}; rest {:.4}", parts.join(", "), wall - timed)
        };
        for r in with_steps {
            let _ = writeln!(
                out,
                "  {} {}-conn, {}:\n    mean: {}",
                r.algorithm,
                r.connectivity,
                r.what,
                line(&r.steps, r.mean_ms)
            );
            if let Some(wall) = r.median_frame_ms {
                let _ = writeln!(
                    out,
                    "    a median frame ({wall:.4}): {}",
                    line(&r.median_frame_steps, wall)
                );
            }
        }
    }

    fn render_latency_peers(&self, out: &mut String) {
        if !self.latency_comparisons.is_empty() {
            let _ = writeln!(
                out,
                "\nPeers (ratio = peer median / markerscope's best median; > 1: markerscope is faster)"
            );
        }
        for c in &self.latency_comparisons {
            let _ = writeln!(
                out,
                "{}x{} {}-conn: {} median {:.3} ms, markerscope best {} ({}) {:.3} ms: ratio {:.2}x",
                c.width,
                c.height,
                c.connectivity,
                c.peer,
                c.peer_median_ms,
                c.best_algorithm,
                c.best_backend,
                c.best_median_ms,
                c.ratio
            );
        }
    }

    fn render_unavailable(&self, out: &mut String) {
        if self.unavailable.is_empty() {
            return;
        }
        let _ = writeln!(out);
        for u in &self.unavailable {
            let mode = u
                .mode
                .as_deref()
                .map(|m| format!(" {m}"))
                .unwrap_or_default();
            let _ = writeln!(out, "{} ({}{mode}): {}", u.algorithm, u.backend, u.reason);
        }
    }

    fn render_count_mismatches(&self, out: &mut String) {
        if self.count_mismatches.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "\nWARNING: component counts differ (the images or an algorithm are wrong):"
        );
        for m in self.count_mismatches.iter().take(20) {
            let _ = writeln!(out, "  {m}");
        }
    }
}

/// The columns that name a throughput row; its table and the per-step table start with them.
const THROUGHPUT_KEY: [Column; 6] = [
    left("algorithm"),
    left("backend"),
    right("conn"),
    left("mode"),
    left("size"),
    right("g"),
];

/// The cells of `THROUGHPUT_KEY` for one row.
fn throughput_key(r: &ThroughputResult) -> Vec<String> {
    vec![
        label(&r.algorithm, &r.source),
        r.backend.clone(),
        r.connectivity.to_string(),
        r.mode.as_str().into(),
        format!("{}x{}", r.width, r.height),
        r.granularity.to_string(),
    ]
}

/// A table column: its heading and whether its cells are right-aligned (numbers).
#[derive(Clone, Copy)]
pub(super) struct Column {
    pub header: &'static str,
    pub right: bool,
}

pub(super) const fn left(header: &'static str) -> Column {
    Column {
        header,
        right: false,
    }
}

pub(super) const fn right(header: &'static str) -> Column {
    Column {
        header,
        right: true,
    }
}

/// `text` in lines of at most `width` characters, broken at spaces.
pub(super) fn wrap(text: &str, width: usize) -> String {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines.join("\n")
}

/// Peers are starred in tables.
pub(super) fn label(algorithm: &str, source: &str) -> String {
    if source == "markerscope" {
        algorithm.to_string()
    } else {
        format!("{algorithm}*")
    }
}

/// A plain text table; each column as wide as its widest cell.
pub(super) fn table(columns: &[Column], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = columns.iter().map(|c| c.header.chars().count()).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            let pad = widths[i].saturating_sub(c.chars().count());
            if i > 0 {
                s.push_str("  ");
            }
            if columns.get(i).is_some_and(|c| c.right) {
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            } else {
                s.push_str(c);
                if i + 1 < cells.len() {
                    s.push_str(&" ".repeat(pad));
                }
            }
        }
        s.push('\n');
        s
    };
    let mut out = line(columns.iter().map(|c| c.header).collect());
    out += &line(
        widths
            .iter()
            .map(|w| "-".repeat(*w))
            .collect::<Vec<_>>()
            .iter()
            .map(|s| s.as_str())
            .collect(),
    );
    for r in &rows {
        out += &line(r.iter().map(|s| s.as_str()).collect());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_breaks_at_spaces() {
        assert_eq!(wrap("aa bb cc", 5), "aa bb\ncc");
        assert_eq!(wrap("longword x", 3), "longword\nx");
    }
}
