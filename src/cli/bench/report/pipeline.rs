//! `bench --pipeline`'s rows: the frame path's stages, the count check and the tables.

use super::machine::HostLoad;
use super::tables::{label, left, right, table, wrap, Column};
use super::{mean_steps, BenchReport, Percentiles, StepMs};
use crate::fiducial::score::{IdCorners, MarkerScore};
use markerscope::track::score::{MotCounts, TrackPoint};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

/// `bench --pipeline`: one (scene, size, connectivity, algorithm) through the whole frame path,
/// or a peer's per-frame threshold + labeling on the same frames (see `pipeline` for the passes).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PipelineResult {
    /// `demo`, `clutter` or `video:PATH`.
    pub scene: String,
    pub width: u32,
    pub height: u32,
    pub algorithm: String,
    pub backend: String,
    #[serde(default = "super::results::markerscope")]
    pub source: String,
    pub connectivity: u8,
    /// The threshold (`otsu`, `fixed:T`, `adaptive:W:C`); a peer given markerscope's masks
    /// says `mask`.
    #[serde(default)]
    pub threshold: String,
    /// What one frame does.
    #[serde(default)]
    pub what: String,
    pub warmup: u32,
    /// Distinct frames made before timing; the frames fed cycle over them.
    pub prepared_frames: u32,
    /// The scene's source, per frame: render (demo, clutter) or decode (video), mean ms. Not
    /// part of the frame path timed here (None for peers, which get the same frames).
    #[serde(default)]
    pub source_ms: Option<f64>,
    /// Every timed frame's latency in order: markerscope: frame ready to tracked result, one
    /// frame in flight (the latency pass); peers: the per-frame call.
    pub frame_ms: Vec<f64>,
    /// Components of every timed frame (markerscope: the rate pass), in order.
    #[serde(default)]
    pub frame_components: Vec<u64>,
    /// markerscope: components of every frame of the latency pass, in the order of `frame_ms`
    /// (which frame kinds the slow ones are: `bench/scripts/frame_kinds.py`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency_components: Vec<u64>,
    /// markerscope: the sum of each latency-pass frame's steps (ms), in the order of
    /// `frame_ms`: the rest of a frame's latency is the hand-overs between the pipeline's
    /// threads (the table's `rest`, frame by frame).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency_steps_ms: Vec<f64>,
    /// Mean ms of each step per frame, one frame in flight (peers: their steps).
    #[serde(default)]
    pub steps: Vec<StepMs>,
    /// markerscope: the rate pass's wall time, last warm-up result to last result (s).
    #[serde(default)]
    pub rate_wall_s: Option<f64>,
    /// markerscope: mean ms of each step in the rate pass (both pipeline threads busy).
    #[serde(default)]
    pub steps_at_full_rate: Vec<StepMs>,
    /// markerscope: latency in the rate pass, queueing in the pipeline included.
    #[serde(default)]
    pub latency_at_full_rate: Option<Percentiles>,
    /// markerscope: the slowest 1 % of the latency pass's frames (the p99 tail) and where
    /// their time went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowest: Option<SlowestFrames>,
    /// markerscope: the latency pass's frames grouped by load (`AlikeFrames`), the group whose
    /// p99 is the largest multiple of its median.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alike: Option<AlikeFrames>,
    /// markerscope: how busy the machine was during the rate pass (this process, other work,
    /// stolen by a hypervisor), where the OS tells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_load: Option<HostLoad>,
    /// Timed frames per pass (filled in by `summarize`).
    #[serde(default)]
    pub frames: u32,
    /// markerscope: frames / rate wall time; peers: 1000 / mean per-frame ms.
    #[serde(default)]
    pub frames_per_s: f64,
    #[serde(default)]
    pub mean_components: f64,
    /// Of `frame_ms`.
    #[serde(default)]
    pub latency: Percentiles,
    /// The `markers` scenes: the markers found in the timed frames (markerscope: the rate
    /// pass) against the rendered truth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub markers: Option<MarkerScore>,
    /// A peer's markers of every timed frame, as it reported them (scored into `markers`).
    #[serde(default, skip_serializing)]
    pub frame_markers: Vec<FrameMarkers>,
    /// The `particles` scenes: the tracks of the timed frames (markerscope: the rate pass)
    /// against the truth, CLEAR MOT counts (MOTA, ID switches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracking: Option<MotCounts>,
    /// A peer's tracks of every timed frame, as it reported them (scored into `tracking`).
    #[serde(default, skip_serializing)]
    pub frame_tracks: Vec<FrameTracks>,
}

/// The slowest frames of a pass: how many, their mean latency and components, and the mean
/// of each of their steps.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlowestFrames {
    pub frames: usize,
    pub latency_ms: f64,
    pub components: f64,
    pub steps: Vec<StepMs>,
}

impl SlowestFrames {
    /// The slowest `share` of the frames (at least one) by `latency_ms`; None without frames.
    pub fn of(
        share: f64,
        latency_ms: &[f64],
        components: &[u64],
        steps: &[Vec<StepMs>],
    ) -> Option<SlowestFrames> {
        let n = latency_ms.len().min(components.len()).min(steps.len());
        if n == 0 {
            return None;
        }
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| latency_ms[b].total_cmp(&latency_ms[a]));
        let k = ((share * n as f64).ceil() as usize).clamp(1, n);
        let slowest = &order[..k];
        let mean = |f: &dyn Fn(usize) -> f64| slowest.iter().map(|&i| f(i)).sum::<f64>() / k as f64;
        Some(SlowestFrames {
            frames: k,
            latency_ms: mean(&|i| latency_ms[i]),
            components: mean(&|i| components[i] as f64),
            steps: mean_steps(slowest.iter().map(|&i| steps[i].as_slice()), k),
        })
    }
}

/// The frames of a pass grouped by load: their components within one power of two, and those
/// of the frame before within one power of two (the tracker pairs a frame with the tracks the
/// frame before started or kept: an empty frame after the clutter scene's dense one ends its
/// 95,000 tracks, an empty frame after an empty one nothing). A scene of mixed frames, such as
/// the clutter scene's empty and dense ones, falls in several groups; a scene of like frames in
/// one. Of the group whose p99 latency is the largest multiple of its median: that multiple, its
/// mean components and percentiles; how many groups, and the frames of the smallest.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AlikeFrames {
    pub groups: usize,
    pub frames_each: usize,
    pub worst_ratio: f64,
    pub components: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

impl AlikeFrames {
    /// None without two frames.
    pub fn of(latency_ms: &[f64], components: &[u64]) -> Option<AlikeFrames> {
        // Group (g, b): components of bit length g (0 for none, 1 for one, 2 for two or three,
        // ...), the frame before's of bit length b. The first frame, with no frame before it
        // in the pass, is in none (alone, it would make a group of one frame).
        let bits = |c: u64| u64::BITS - c.leading_zeros();
        let mut groups: BTreeMap<(u32, u32), (Vec<f64>, u64)> = BTreeMap::new();
        for (i, (&ms, &c)) in latency_ms.iter().zip(components).enumerate().skip(1) {
            let g = groups
                .entry((bits(c), bits(components[i - 1])))
                .or_default();
            g.0.push(ms);
            g.1 += c;
        }
        let frames_each = groups.values().map(|g| g.0.len()).min()?;
        let mut worst: Option<AlikeFrames> = None;
        // In the order of load, so that of equal multiples the lighter group is named.
        for (latency, components) in groups.values() {
            let p = Percentiles::of(latency);
            let ratio = if p.p50 > 0.0 { p.p99 / p.p50 } else { 1.0 };
            if worst.as_ref().is_none_or(|w| ratio > w.worst_ratio) {
                worst = Some(AlikeFrames {
                    groups: groups.len(),
                    frames_each,
                    worst_ratio: ratio,
                    components: *components as f64 / latency.len() as f64,
                    p50_ms: p.p50,
                    p99_ms: p.p99,
                });
            }
        }
        worst
    }
}

/// The particles a peer located in one frame and the trajectory each was linked into.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct FrameTracks {
    pub x: Vec<f64>,
    pub y: Vec<f64>,
    pub particle: Vec<u64>,
}

impl FrameTracks {
    pub fn points(&self) -> Vec<TrackPoint> {
        self.x
            .iter()
            .zip(&self.y)
            .zip(&self.particle)
            .map(|((&x, &y), &track)| TrackPoint { track, x, y })
            .collect()
    }
}

/// The markers a peer found in one frame, in OpenCV's layout: IDs, and corners in the same
/// order.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct FrameMarkers {
    pub ids: Vec<u32>,
    pub corners: Vec<[[f64; 2]; 4]>,
}

impl FrameMarkers {
    pub fn detected(&self) -> Vec<IdCorners> {
        self.ids
            .iter()
            .copied()
            .zip(self.corners.iter().copied())
            .collect()
    }
}

/// Columns of the pipeline table: the steps grouped into stages (see `stage_of`).
const STAGES: &[&str] = &[
    "threshold",
    "pack",
    "label",
    "sub-pixel",
    "filter",
    "track",
    "markers",
];

/// The stage of a pipeline step: the pipeline's own steps and the sub-pixel centroids are
/// stages of their own; the threshold in one pass with the packing (on the capture thread, or
/// on the GPU after its histogram) is `threshold`; every other step is the labeler's (`label`:
/// uploads, kernels, downloads on the GPU and the conversion of their rows, and "stage grey",
/// the upload's copy into page-locked memory when the capture thread makes it). `capture` (handing out a frame made before
/// timing) is in no column. `markers` (the square fiducials) is a stage of its own.
fn stage_of(step: &str) -> &str {
    match step {
        "capture" | "threshold" | "pack" | "filter" | "track" | "markers" => step,
        "threshold+pack" | "histogram" => "threshold",
        crate::pipeline::FILTER_REST_STEP => "filter",
        "sub-pixel centroids" | crate::ccl::SUBPIXEL_ROWS_STEP => "sub-pixel",
        // The tracker's input, made on the device (the host packed and uploaded it in `track`).
        crate::ccl::DEVICE_DETECTIONS_STEP => "track",
        // trackpy's linking (the particles scenes' peer).
        "link" => "track",
        _ => "label",
    }
}

impl PipelineResult {
    pub fn summarize(&mut self) {
        self.frames = self.frame_ms.len() as u32;
        self.latency = Percentiles::of(&self.frame_ms);
        self.frames_per_s = match self.rate_wall_s {
            Some(s) if s > 0.0 => self.frames as f64 / s,
            Some(_) => 0.0,
            None if self.latency.mean > 0.0 => 1e3 / self.latency.mean,
            None => 0.0,
        };
        self.mean_components = self.frame_components.iter().sum::<u64>() as f64
            / self.frame_components.len().max(1) as f64;
    }

    /// Mean ms per frame of a stage of `STAGES` (the labeler's steps summed as `label`); None
    /// when no step of it ran.
    pub fn stage_ms(&self, stage: &str) -> Option<f64> {
        let mut steps = self
            .steps
            .iter()
            .filter(|s| stage_of(&s.step) == stage)
            .peekable();
        steps.peek()?;
        Some(steps.map(|s| s.ms).sum())
    }

    /// The mean latency not spent in a stage: the hand-out of the frame, the hand-offs between
    /// the threads and their wake-ups. The markers are found on a lane from the frame's
    /// submission, beside its labeling, sub-pixel centroids and filter: the longer of the two
    /// counts.
    pub fn rest_ms(&self) -> f64 {
        let staged: f64 = STAGES.iter().filter_map(|s| self.stage_ms(s)).sum();
        let worker: f64 = ["label", "sub-pixel", "filter"]
            .iter()
            .filter_map(|s| self.stage_ms(s))
            .sum();
        let overlap = self.stage_ms("markers").map_or(0.0, |m| m.min(worker));
        self.latency.mean - (staged - overlap)
    }

    fn label(&self) -> String {
        format!(
            "{} ({})",
            label(&self.algorithm, &self.source),
            self.backend
        )
    }

    fn size(&self) -> String {
        format!("{}x{}", self.width, self.height)
    }
}

/// `bench --pipeline`'s protocol in words, for the JSON and the table heading.
pub const PIPELINE_PROTOCOL: &str =
    "frames made before timing (source ms = render/decode per frame, apart), \
     fed through the live pipeline (lossless delivery) after the warm-up frames: \
     frames/s = frames of the rate pass (as fast as the pipeline takes them) / its wall time; \
     latency = frame ready to result with tracks, one frame in flight (the latency pass), \
     nearest-rank percentiles; steps = mean ms per frame in the latency pass";

impl BenchReport {
    /// In `--pipeline`, every algorithm and peer of a (scene, size, connectivity) sees the same
    /// frames in the same order: their component counts must agree frame by frame. A peer given
    /// a threshold of its own (OpenCV's Otsu) is held to it too: the levels are OpenCV's.
    pub(super) fn check_pipeline_counts(&mut self) {
        let mut first: HashMap<(String, u32, u32, u8), usize> = HashMap::new();
        for (i, r) in self.pipeline.iter().enumerate() {
            if r.frame_components.is_empty() {
                continue;
            }
            let key = (r.scene.clone(), r.width, r.height, r.connectivity);
            let Some(&j) = first.get(&key) else {
                first.insert(key, i);
                continue;
            };
            let a = &self.pipeline[j];
            let differ = a
                .frame_components
                .iter()
                .zip(&r.frame_components)
                .position(|(x, y)| x != y);
            if let Some(k) = differ {
                self.count_mismatches.push(format!(
                    "{} {}x{} {}-conn timed frame {k}: {} found {} components, {} found {}",
                    r.scene,
                    r.width,
                    r.height,
                    r.connectivity,
                    a.label(),
                    a.frame_components[k],
                    r.label(),
                    r.frame_components[k]
                ));
            }
        }
    }

    /// The pipeline results as rows of the table (text and Markdown share them).
    fn pipeline_rows(&self) -> (Vec<Column>, Vec<Vec<String>>) {
        let mut columns = vec![
            left("scene"),
            left("size"),
            left("algorithm (backend)"),
            right("conn"),
            right("components/frame"),
            right("frames/s"),
            right("p50 ms"),
            right("p99 ms"),
            right("source ms/frame"),
        ];
        columns.extend(STAGES.iter().map(|s| right(s)));
        columns.push(right("rest"));
        let markers = self.pipeline.iter().any(|r| r.markers.is_some());
        if markers {
            columns.extend([
                right("markers found"),
                right("false IDs"),
                right("corner RMS px"),
            ]);
        }
        let tracking = self.pipeline.iter().any(|r| r.tracking.is_some());
        if tracking {
            columns.extend([right("MOTA"), right("ID switches"), right("tracked frames")]);
        }
        let ms = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.3}"));
        let rows = self
            .pipeline
            .iter()
            .map(|r| {
                let mut row = vec![
                    r.scene.clone(),
                    r.size(),
                    r.label(),
                    r.connectivity.to_string(),
                    if r.frame_components.is_empty() {
                        "-".into()
                    } else {
                        format!("{:.1}", r.mean_components)
                    },
                    format!("{:.1}", r.frames_per_s),
                    format!("{:.3}", r.latency.p50),
                    format!("{:.3}", r.latency.p99),
                    ms(r.source_ms),
                ];
                row.extend(STAGES.iter().map(|s| ms(r.stage_ms(s))));
                row.push(format!("{:.3}", r.rest_ms()));
                if markers {
                    row.extend(match &r.markers {
                        Some(m) => [
                            format!("{:.2}% of {}", 100.0 * m.rate(), m.truth),
                            m.false_ids.to_string(),
                            format!("{:.3}", m.corner_rms()),
                        ],
                        None => ["-".into(), "-".into(), "-".into()],
                    });
                }
                if tracking {
                    row.extend(match &r.tracking {
                        Some(t) => [
                            format!("{:.4}", t.mota()),
                            t.id_switches.to_string(),
                            t.frames.to_string(),
                        ],
                        None => ["-".into(), "-".into(), "-".into()],
                    });
                }
                row
            })
            .collect();
        (columns, rows)
    }

    /// The pipeline table in Markdown (for a README), with a line on how it was measured.
    pub fn render_pipeline_markdown(&self) -> String {
        let (columns, rows) = self.pipeline_rows();
        let mut out = String::new();
        let line = |cells: Vec<&str>| format!("| {} |\n", cells.join(" | "));
        out += &line(columns.iter().map(|c| c.header).collect());
        out += &line(
            columns
                .iter()
                .map(|c| if c.right { "---:" } else { "---" })
                .collect(),
        );
        for r in &rows {
            out += &line(r.iter().map(String::as_str).collect());
        }
        let _ = writeln!(
            out,
            "\nTimes in ms per frame. Starred rows are peers (their frames/s: one frame at a time). \
             How: {}; stages: the pipeline's steps, the labeler's summed as `label` (sub-pixel \
             centroids apart); rest: the mean \
             latency outside them (hand-out, hand-offs between the threads), the markers counted \
             beside the labeling, centroids and filter (their lane runs at the same time).",
            PIPELINE_PROTOCOL
        );
        out
    }

    pub(super) fn render_pipeline(&self, out: &mut String) {
        let inputs = self.inputs.pipeline.as_ref();
        let _ = writeln!(
            out,
            "\nThe frame path, end to end: threshold {}, sub-pixel centroids {}, tracking on; {} \
             timed frames per pass after {} warm-up frames.\n{}",
            inputs.map_or("-", |i| i.threshold.as_str()),
            if inputs.is_some_and(|i| i.subpixel) {
                "on"
            } else {
                "off"
            },
            inputs.map_or(0, |i| i.frames),
            inputs.map_or(0, |i| i.warmup),
            wrap(&format!("How: {PIPELINE_PROTOCOL}."), 100),
        );
        let (columns, rows) = self.pipeline_rows();
        *out += &table(&columns, rows);
        let _ = writeln!(
            out,
            "\nEvery step, mean ms per frame (one frame in flight; at full rate in brackets), and \
             the latency at full rate (queueing included):"
        );
        for r in &self.pipeline {
            let at_full_rate = |step: &str| {
                r.steps_at_full_rate
                    .iter()
                    .find(|s| s.step == step)
                    .map(|s| format!(" [{:.3}]", s.ms))
                    .unwrap_or_default()
            };
            let steps: Vec<String> = r
                .steps
                .iter()
                .map(|s| format!("{} {:.3}{}", s.step, s.ms, at_full_rate(&s.step)))
                .collect();
            let _ = writeln!(
                out,
                "  {} {} {} {}-conn: {}",
                r.scene,
                r.size(),
                r.label(),
                r.connectivity,
                if steps.is_empty() {
                    "-".to_string()
                } else {
                    steps.join(", ")
                }
            );
            let _ = writeln!(
                out,
                "    {}; latency p50 {:.3}, p90 {:.3}, p99 {:.3}, max {:.3}{}",
                r.what,
                r.latency.p50,
                r.latency.p90,
                r.latency.p99,
                r.latency.max,
                r.latency_at_full_rate
                    .map(|p| format!("; at full rate p50 {:.3}, p99 {:.3}", p.p50, p.p99))
                    .unwrap_or_default()
            );
            if let Some(a) = &r.alike {
                let _ = writeln!(
                    out,
                    "    frames alike ({} group{} of components, and of the frame before's, within \
                     a power of two, {}+ frames each): p99 at most {:.2}× the median (the group \
                     of {:.0} components: p50 {:.3}, p99 {:.3})",
                    a.groups,
                    if a.groups == 1 { "" } else { "s" },
                    a.frames_each,
                    a.worst_ratio,
                    a.components,
                    a.p50_ms,
                    a.p99_ms
                );
            }
            if let Some(h) = &r.host_load {
                let _ = writeln!(
                    out,
                    "    the machine during the rate pass, in cores of its {}: this process {:.1}, \
                     other processes {:.1}, interrupts {:.1}, stolen by the hypervisor {:.1}{}",
                    h.cpus,
                    h.this_process,
                    h.others,
                    h.interrupts,
                    h.stolen,
                    if h.shared() {
                        " (shared: the rate is that of a busy machine)"
                    } else {
                        ""
                    }
                );
            }
            if let Some(s) = &r.slowest {
                let steps: Vec<String> = (s.steps.iter())
                    .map(|s| format!("{} {:.3}", s.step, s.ms))
                    .collect();
                let _ = writeln!(
                    out,
                    "    slowest {} frame{} (mean latency {:.3} ms, {:.0} components): {}",
                    s.frames,
                    if s.frames == 1 { "" } else { "s" },
                    s.latency_ms,
                    s.components,
                    steps.join(", ")
                );
            }
        }
        if !self.notes.is_empty() {
            let _ = writeln!(out, "\nNotes:");
            for n in &self.notes {
                let _ = writeln!(out, "  {n}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipeline_percentiles_stages_and_rate() {
        let p = Percentiles::of(&(1..=200).rev().map(f64::from).collect::<Vec<_>>());
        assert_eq!(
            (p.p50, p.p90, p.p99, p.max, p.min),
            (100.0, 180.0, 198.0, 200.0, 1.0)
        );
        assert_eq!(p.mean, 100.5);
        assert_eq!(Percentiles::of(&[]), Percentiles::default());
        assert_eq!(Percentiles::of(&[3.0]).p99, 3.0);

        let step = |step: &str, ms: f64| StepMs {
            step: step.into(),
            ms,
        };
        let mut r = PipelineResult {
            scene: "demo".into(),
            width: 4,
            height: 2,
            algorithm: "x".into(),
            backend: "cuda".into(),
            source: "markerscope".into(),
            connectivity: 8,
            threshold: "otsu".into(),
            what: String::new(),
            warmup: 0,
            prepared_frames: 2,
            source_ms: Some(1.0),
            frame_ms: vec![2.25, 4.25],
            frame_components: vec![3, 4],
            latency_components: vec![3, 4],
            latency_steps_ms: Vec::new(),
            steps: vec![
                step("capture", 0.01),
                step("threshold", 0.5),
                step("pack", 0.25),
                step("upload", 0.5),
                step("kernels", 1.0),
                step("sub-pixel centroids", 0.25),
                step("filter", 0.125),
                step("track", 0.5),
            ],
            rate_wall_s: Some(0.5),
            steps_at_full_rate: Vec::new(),
            latency_at_full_rate: None,
            slowest: None,
            alike: None,
            host_load: None,
            frames: 0,
            frames_per_s: 0.0,
            mean_components: 0.0,
            latency: Percentiles::default(),
            markers: None,
            frame_markers: Vec::new(),
            tracking: None,
            frame_tracks: Vec::new(),
        };
        r.summarize();
        assert_eq!(r.frames, 2);
        assert_eq!(r.frames_per_s, 4.0);
        assert_eq!(r.mean_components, 3.5);
        assert_eq!(r.stage_ms("label"), Some(1.5));
        assert_eq!(r.stage_ms("sub-pixel"), Some(0.25));
        assert_eq!(r.stage_ms("pack"), Some(0.25));
        // 3.25 ms mean latency; the stages take 3.125, the hand-out 0.01 is in the rest.
        assert!((r.rest_ms() - 0.125).abs() < 1e-12);
        // Markers found beside the labeling, in less time: the rest stays; in more, only what
        // they take past the labeling, centroids and filter counts.
        r.steps.push(step("markers", 0.25));
        assert!((r.rest_ms() - 0.125).abs() < 1e-12);
        let worker = ["label", "sub-pixel", "filter"]
            .iter()
            .filter_map(|s| r.stage_ms(s))
            .sum::<f64>();
        r.steps.pop();
        r.steps.push(step("markers", worker + 0.1));
        assert!((r.rest_ms() - 0.025).abs() < 1e-12);
        r.steps.pop();
        // A peer: no wall time of its own, frames one after the other.
        r.rate_wall_s = None;
        r.steps.retain(|s| s.step != "pack");
        r.summarize();
        assert!((r.frames_per_s - 1e3 / 3.25).abs() < 1e-9);
        assert_eq!(r.stage_ms("pack"), None);
    }

    #[test]
    fn the_slowest_frames_are_the_tail_of_the_latencies_with_their_steps() {
        let step = |ms: f64| {
            vec![StepMs {
                step: "track".into(),
                ms,
            }]
        };
        let latency: Vec<f64> = (1..=250).map(f64::from).collect();
        let components: Vec<u64> = (1..=250).collect();
        let steps: Vec<_> = latency.iter().map(|&l| step(l / 2.0)).collect();
        // 1 % of 250 frames: the three slowest (rounded up).
        let s = SlowestFrames::of(0.01, &latency, &components, &steps).expect("frames");
        assert_eq!(s.frames, 3);
        assert_eq!(s.latency_ms, 249.0);
        assert_eq!(s.components, 249.0);
        assert_eq!(s.steps, step(124.5));
        // Never fewer than one frame; none without frames.
        let one = SlowestFrames::of(0.01, &latency[..5], &components[..5], &steps[..5]);
        assert_eq!(one.map(|s| (s.frames, s.latency_ms)), Some((1, 5.0)));
        assert_eq!(SlowestFrames::of(0.01, &[], &[], &[]), None);
    }

    #[test]
    fn frames_alike_name_the_group_whose_p99_is_the_largest_multiple_of_its_median() {
        // Three empty frames, then one of 110 components, in turn: empty frames at 1 ms, the
        // empty frame after the full one at 3 ms (it ends that frame's tracks), the full ones
        // at 2 ms, one of those at 8 ms. Three groups; the full frames' p99 four times their
        // median, and without the 8 ms frame every group is even: the empty frames after a
        // full one are a group of their own.
        let components: Vec<u64> = (0..40).map(|i| if i % 4 == 3 { 110 } else { 0 }).collect();
        let latency = |spike: bool| -> Vec<f64> {
            (0..40)
                .map(|i| match (i % 4, i) {
                    (3, 15) if spike => 8.0,
                    (3, _) => 2.0,
                    (0, i) if i > 0 => 3.0,
                    _ => 1.0,
                })
                .collect()
        };
        let a = AlikeFrames::of(&latency(true), &components).expect("frames");
        assert_eq!((a.groups, a.frames_each), (3, 9));
        assert_eq!(
            (a.worst_ratio, a.components, a.p50_ms, a.p99_ms),
            (4.0, 110.0, 2.0, 8.0)
        );
        let even = AlikeFrames::of(&latency(false), &components).expect("frames");
        assert_eq!((even.groups, even.worst_ratio), (3, 1.0));
        // 64 and 127 components are alike, 128 not (the first frame is in no group).
        let one = AlikeFrames::of(&[1.0; 3], &[64, 127, 64]).expect("frames");
        assert_eq!((one.groups, one.frames_each), (1, 2));
        assert_eq!(
            AlikeFrames::of(&[1.0; 3], &[64, 128, 64]).map(|a| a.groups),
            Some(2)
        );
        assert_eq!(AlikeFrames::of(&[1.0], &[64]), None);
        assert_eq!(AlikeFrames::of(&[], &[]), None);
    }
}
