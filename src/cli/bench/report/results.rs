//! The measured rows (throughput, latency, bandwidth) and how each is summarized.

use super::super::spec::Mode;
use crate::ccl::StepTime;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepMs {
    pub step: String,
    pub ms: f64,
}

impl From<&StepTime> for StepMs {
    fn from(t: &StepTime) -> StepMs {
        StepMs {
            step: t.step.clone(),
            ms: t.ms,
        }
    }
}

/// The mean of each step over `n` runs, in the order the steps first appear (a step missing
/// from a run counts 0 ms there).
pub fn mean_steps<'a>(runs: impl IntoIterator<Item = &'a [StepMs]>, n: usize) -> Vec<StepMs> {
    let mut means: Vec<StepMs> = Vec::new();
    for s in runs.into_iter().flatten() {
        match means.iter_mut().find(|m| m.step == s.step) {
            Some(m) => m.ms += s.ms,
            None => means.push(s.clone()),
        }
    }
    let n = n.max(1) as f64;
    for m in &mut means {
        m.ms /= n;
    }
    means
}

/// One image: the best of `repeat` runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DensityResult {
    pub density: f64,
    /// The image's MT19937 seed (see `image_seed`).
    pub seed: u32,
    pub best_ms: f64,
    /// pixels / best time (filled in by `finalize`).
    #[serde(default)]
    pub gpx_s: f64,
    /// Components found (4/8-connectivity); every algorithm and peer must agree on it.
    pub count: u64,
    /// Steps of the fastest run.
    #[serde(default)]
    pub steps: Vec<StepMs>,
}

pub(super) fn markerscope() -> String {
    "markerscope".into()
}

/// One (algorithm, backend, connectivity, mode, size, g) over every density.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ThroughputResult {
    pub algorithm: String,
    /// "cpu" or "cuda".
    pub backend: String,
    /// "markerscope" or "peer".
    #[serde(default = "markerscope")]
    pub source: String,
    pub connectivity: u8,
    pub mode: Mode,
    pub width: u32,
    pub height: u32,
    pub granularity: u32,
    #[serde(default)]
    pub repeat: u32,
    pub per_density: Vec<DensityResult>,
    /// Arithmetic mean over densities of the per-density Gpx/s.
    #[serde(default)]
    pub mean_gpx_s: f64,
    /// Arithmetic mean over densities of the best times.
    #[serde(default)]
    pub mean_ms: f64,
    /// Least bytes moved per pixel in this mode (CCL 5, CCA 1).
    #[serde(default)]
    pub bytes_per_px: f64,
    /// bytes_per_px × mean Gpx/s / copy GB/s of this backend × 100; None without a copy figure.
    #[serde(default)]
    pub percent_of_ceiling: Option<f64>,
    /// Per-step times, arithmetic mean over densities.
    #[serde(default)]
    pub steps: Vec<StepMs>,
}

impl ThroughputResult {
    /// Fills the per-density throughputs and the means from the best times.
    pub fn summarize(&mut self) {
        let px = self.width as f64 * self.height as f64;
        let n = self.per_density.len().max(1) as f64;
        for d in &mut self.per_density {
            d.gpx_s = px / (d.best_ms.max(1e-9) * 1e-3) / 1e9;
        }
        self.mean_gpx_s = self.per_density.iter().map(|d| d.gpx_s).sum::<f64>() / n;
        self.mean_ms = self.per_density.iter().map(|d| d.best_ms).sum::<f64>() / n;
        self.steps = mean_steps(
            self.per_density.iter().map(|d| d.steps.as_slice()),
            self.per_density.len(),
        );
        self.bytes_per_px = self.mode.bytes_per_px();
    }
}

/// Host-to-host latency of one (algorithm, connectivity, size), frames cycling over the images.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LatencyResult {
    pub algorithm: String,
    pub backend: String,
    #[serde(default = "markerscope")]
    pub source: String,
    pub connectivity: u8,
    pub width: u32,
    pub height: u32,
    /// What one frame does, e.g. "upload + label + analyze + download stats".
    #[serde(default)]
    pub what: String,
    pub warmup: u32,
    /// Distinct images the frames cycle over (densities × granularities).
    pub images: u32,
    /// Every timed frame, in order.
    pub frame_ms: Vec<f64>,
    #[serde(default)]
    pub frames: u32,
    #[serde(default)]
    pub median_ms: f64,
    /// Nearest-rank 99th percentile.
    #[serde(default)]
    pub p99_ms: f64,
    #[serde(default)]
    pub mean_ms: f64,
    #[serde(default)]
    pub min_ms: f64,
    #[serde(default)]
    pub max_ms: f64,
    /// Mean per frame of each step the labeler timed itself (CUDA events on the GPU): with the
    /// mean wall time, it shows how much of a frame is spent outside them (launches, waits).
    #[serde(default)]
    pub steps: Vec<StepMs>,
    /// Wall time and step times of a median frame (the lower middle one by wall time).
    #[serde(default)]
    pub median_frame_ms: Option<f64>,
    #[serde(default)]
    pub median_frame_steps: Vec<StepMs>,
    /// Components per timed frame, mean (None for peers, which do not report them).
    #[serde(default)]
    pub mean_components: Option<f64>,
}

impl LatencyResult {
    pub fn summarize(&mut self) {
        let mut v = self.frame_ms.clone();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        self.frames = n as u32;
        if n == 0 {
            return;
        }
        self.median_ms = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        let rank = ((0.99 * n as f64).ceil() as usize).clamp(1, n);
        self.p99_ms = v[rank - 1];
        self.mean_ms = v.iter().sum::<f64>() / n as f64;
        self.min_ms = v[0];
        self.max_ms = v[n - 1];
    }
}

/// Nearest-rank percentiles of per-frame times (ms).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub min: f64,
    pub mean: f64,
}

impl Percentiles {
    /// The p-th percentile is the value of rank ⌈p/100 · n⌉ in sorted order; all 0 without values.
    pub fn of(values: &[f64]) -> Percentiles {
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n == 0 {
            return Percentiles::default();
        }
        let rank = |p: f64| v[((p / 100.0 * n as f64).ceil() as usize).clamp(1, n) - 1];
        Percentiles {
            p50: rank(50.0),
            p90: rank(90.0),
            p99: rank(99.0),
            max: v[n - 1],
            min: v[0],
            mean: v.iter().sum::<f64>() / n as f64,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BandwidthResult {
    /// "cpu" or "cuda".
    pub backend: String,
    pub method: String,
    pub bytes: u64,
    pub repeat: u32,
    /// (bytes read + bytes written) / best time.
    pub gb_s: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Unavailable {
    pub algorithm: String,
    pub backend: String,
    #[serde(default)]
    pub mode: Option<String>,
    /// `"unavailable: <reason>"` or `"not measured: <reason>"`.
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_steps_keep_first_appearance_order_and_count_missing_steps_as_zero() {
        let ms = |step: &str, ms: f64| StepMs {
            step: step.into(),
            ms,
        };
        let runs = [
            vec![ms("a", 1.0), ms("b", 2.0)],
            vec![ms("c", 4.0), ms("a", 3.0)],
        ];
        let means = mean_steps(runs.iter().map(Vec::as_slice), runs.len());
        assert_eq!(means, vec![ms("a", 2.0), ms("b", 1.0), ms("c", 2.0)]);
        assert!(mean_steps(std::iter::empty(), 0).is_empty());
    }

    #[test]
    fn latency_percentiles() {
        let mut r = LatencyResult {
            algorithm: "x".into(),
            backend: "cpu".into(),
            source: "markerscope".into(),
            connectivity: 4,
            width: 1,
            height: 1,
            what: String::new(),
            warmup: 0,
            images: 1,
            frame_ms: (1..=200).rev().map(|i| i as f64).collect(),
            frames: 0,
            median_ms: 0.0,
            p99_ms: 0.0,
            mean_ms: 0.0,
            min_ms: 0.0,
            max_ms: 0.0,
            steps: Vec::new(),
            median_frame_ms: None,
            median_frame_steps: Vec::new(),
            mean_components: None,
        };
        r.summarize();
        assert_eq!(r.frames, 200);
        assert_eq!(r.median_ms, 100.5);
        assert_eq!(r.p99_ms, 198.0);
        assert_eq!(r.min_ms, 1.0);
        assert_eq!(r.max_ms, 200.0);
    }

    #[test]
    fn means_over_densities() {
        let mut r = ThroughputResult {
            algorithm: "x".into(),
            backend: "cpu".into(),
            source: "markerscope".into(),
            connectivity: 4,
            mode: Mode::Ccl,
            width: 1000,
            height: 1000,
            granularity: 1,
            repeat: 1,
            per_density: vec![
                DensityResult {
                    density: 0.0,
                    seed: 0,
                    best_ms: 1.0,
                    gpx_s: 0.0,
                    count: 0,
                    steps: vec![StepMs {
                        step: "a".into(),
                        ms: 1.0,
                    }],
                },
                DensityResult {
                    density: 1.0,
                    seed: 0,
                    best_ms: 4.0,
                    gpx_s: 0.0,
                    count: 1,
                    steps: vec![
                        StepMs {
                            step: "a".into(),
                            ms: 2.0,
                        },
                        StepMs {
                            step: "b".into(),
                            ms: 2.0,
                        },
                    ],
                },
            ],
            mean_gpx_s: 0.0,
            mean_ms: 0.0,
            bytes_per_px: 0.0,
            percent_of_ceiling: None,
            steps: vec![],
        };
        r.summarize();
        // 1 Mpx in 1 ms = 1 Gpx/s; in 4 ms = 0.25 Gpx/s; mean of throughputs, not of times.
        assert!((r.mean_gpx_s - 0.625).abs() < 1e-12);
        assert_eq!(r.mean_ms, 2.5);
        assert_eq!(
            r.steps,
            vec![
                StepMs {
                    step: "a".into(),
                    ms: 1.5
                },
                StepMs {
                    step: "b".into(),
                    ms: 1.0
                }
            ]
        );
        assert_eq!(r.bytes_per_px, 5.0);
    }
}
