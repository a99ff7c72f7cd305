//! After the last row: summaries, sorting, the component-count cross-check and the peer comparisons.

use super::super::spec::Mode;
use super::{BenchReport, ThroughputResult};
use serde::Serialize;
use std::collections::HashMap;

/// A peer beside markerscope's best on the same images.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub connectivity: u8,
    pub mode: Mode,
    pub width: u32,
    pub height: u32,
    pub granularity: u32,
    pub peer: String,
    pub peer_backend: String,
    pub peer_gpx_s: f64,
    /// markerscope's fastest algorithm on any backend.
    pub best_algorithm: String,
    pub best_backend: String,
    pub best_gpx_s: f64,
    /// best_gpx_s / peer_gpx_s.
    pub ratio: f64,
    /// markerscope's fastest on the peer's backend (CPU vs OpenCV, CUDA vs CuPy), when it ran.
    pub same_backend_algorithm: Option<String>,
    pub same_backend_gpx_s: Option<f64>,
    pub same_backend_ratio: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct LatencyComparison {
    pub connectivity: u8,
    pub width: u32,
    pub height: u32,
    pub peer: String,
    pub peer_median_ms: f64,
    pub best_algorithm: String,
    pub best_backend: String,
    pub best_median_ms: f64,
    /// peer median / markerscope's best median (> 1: markerscope is faster).
    pub ratio: f64,
}

impl BenchReport {
    /// Averages, percentages, comparisons and the count cross-check; call once after all rows are in.
    pub fn finalize(&mut self) {
        self.summarize_rows();
        self.sort_rows();
        self.check_pipeline_counts();
        self.check_image_counts();
        self.compare_throughput_peers();
        self.compare_latency_peers();
    }

    /// Each row's means and percentiles; throughput as a share of its backend's copy ceiling.
    fn summarize_rows(&mut self) {
        let ceilings: HashMap<String, f64> = self
            .bandwidth
            .iter()
            .map(|b| (b.backend.clone(), b.gb_s))
            .collect();
        for r in &mut self.throughput {
            r.summarize();
            r.percent_of_ceiling = ceilings
                .get(&r.backend)
                .map(|gbs| r.bytes_per_px * r.mean_gpx_s / gbs * 100.0);
        }
        for r in &mut self.latency {
            r.summarize();
        }
        for r in &mut self.pipeline {
            r.summarize();
        }
    }

    /// Rows in the order of the sizes asked for, markerscope before the peers.
    fn sort_rows(&mut self) {
        let mut rows = std::mem::take(&mut self.throughput);
        rows.sort_by_key(|r| {
            (
                self.size_rank(r.width, r.height),
                r.connectivity,
                r.mode,
                r.granularity,
                r.source != "markerscope",
                r.backend.clone(),
                r.algorithm.clone(),
            )
        });
        self.throughput = rows;
        let mut lat = std::mem::take(&mut self.latency);
        lat.sort_by_key(|r| {
            (
                self.size_rank(r.width, r.height),
                r.connectivity,
                r.source != "markerscope",
                r.backend.clone(),
                r.algorithm.clone(),
            )
        });
        self.latency = lat;
    }

    fn size_rank(&self, w: u32, h: u32) -> usize {
        self.inputs
            .sizes
            .iter()
            .position(|s| s.width == w && s.height == h)
            .unwrap_or(usize::MAX)
    }

    /// Every algorithm and peer labels the same images: counts must agree.
    fn check_image_counts(&mut self) {
        // (width, height, connectivity, g, density bits) -> (count, who found it first)
        type ImageKey = (u32, u32, u8, u32, u64);
        let mut seen: HashMap<ImageKey, (u64, String)> = HashMap::new();
        for r in &self.throughput {
            for d in &r.per_density {
                let k = (
                    r.width,
                    r.height,
                    r.connectivity,
                    r.granularity,
                    d.density.to_bits(),
                );
                let who = format!("{} ({}, {})", r.algorithm, r.backend, r.mode.as_str());
                match seen.get(&k) {
                    None => {
                        seen.insert(k, (d.count, who));
                    }
                    Some((c, first)) if *c != d.count => self.count_mismatches.push(format!(
                        "{}x{} {}-conn g={} d={}: {first} found {c} components, {who} found {}",
                        r.width, r.height, r.connectivity, r.granularity, d.density, d.count
                    )),
                    _ => {}
                }
            }
        }
    }

    /// Each throughput peer beside markerscope's fastest, on any backend and on the peer's.
    fn compare_throughput_peers(&mut self) {
        self.comparisons.clear();
        for p in self.throughput.iter().filter(|r| r.source == "peer") {
            let same = |r: &&ThroughputResult| {
                r.source == "markerscope"
                    && r.connectivity == p.connectivity
                    && r.mode == p.mode
                    && r.width == p.width
                    && r.height == p.height
                    && r.granularity == p.granularity
            };
            let fastest = |a: &&ThroughputResult, b: &&ThroughputResult| {
                a.mean_gpx_s.total_cmp(&b.mean_gpx_s)
            };
            let Some(best) = self.throughput.iter().filter(same).max_by(fastest) else {
                continue;
            };
            let same_backend = self
                .throughput
                .iter()
                .filter(same)
                .filter(|r| r.backend == p.backend)
                .max_by(fastest);
            self.comparisons.push(Comparison {
                connectivity: p.connectivity,
                mode: p.mode,
                width: p.width,
                height: p.height,
                granularity: p.granularity,
                peer: p.algorithm.clone(),
                peer_backend: p.backend.clone(),
                peer_gpx_s: p.mean_gpx_s,
                best_algorithm: best.algorithm.clone(),
                best_backend: best.backend.clone(),
                best_gpx_s: best.mean_gpx_s,
                ratio: best.mean_gpx_s / p.mean_gpx_s,
                same_backend_algorithm: same_backend.map(|r| r.algorithm.clone()),
                same_backend_gpx_s: same_backend.map(|r| r.mean_gpx_s),
                same_backend_ratio: same_backend.map(|r| r.mean_gpx_s / p.mean_gpx_s),
            });
        }
    }

    /// Each latency peer beside markerscope's lowest median.
    fn compare_latency_peers(&mut self) {
        self.latency_comparisons.clear();
        for p in self.latency.iter().filter(|r| r.source == "peer") {
            let Some(best) = self
                .latency
                .iter()
                .filter(|r| {
                    r.source == "markerscope"
                        && r.connectivity == p.connectivity
                        && r.width == p.width
                        && r.height == p.height
                })
                .min_by(|a, b| a.median_ms.total_cmp(&b.median_ms))
            else {
                continue;
            };
            self.latency_comparisons.push(LatencyComparison {
                connectivity: p.connectivity,
                width: p.width,
                height: p.height,
                peer: p.algorithm.clone(),
                peer_median_ms: p.median_ms,
                best_algorithm: best.algorithm.clone(),
                best_backend: best.backend.clone(),
                best_median_ms: best.median_ms,
                ratio: p.median_ms / best.median_ms,
            });
        }
    }
}
