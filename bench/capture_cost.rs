//! Per-frame cost of the capture thread's threshold and of the worker's sub-pixel centroids and
//! filter, before and after the one-pass threshold and the kept-components-only centroids.
//!
//! "before" is the two-step path the capture thread used to run (a fresh byte mask from
//! `threshold::apply`, or from `ThresholdLevels::compute` + `mask` in sub-pixel mode, then
//! `pack`; Otsu's histogram counted into one table per chunk), and the worker's centroids for
//! every component (the former box and scan code, copied here) followed by the filter. "after" is `threshold::binarize` into buffers kept from frame
//! to frame, and centroids for the kept components only. Each time is the best of K runs (wall
//! clock, ms); allocations are counted over the last "after" run (every thread).
//!
//! cargo run --profile ci --example capture_cost -- [WxH ...] [--repeat K]
//! (default 1920x1080 3840x2160, K = 15)

use markerscope::ccl::cpu::lsl::Lsl;
use markerscope::ccl::stats::ComponentStats;
use markerscope::ccl::subpixel::{GreyWeights, SubpixelCentroid};
use markerscope::ccl::{Connectivity, Labeler, Want};
use markerscope::frame::image::{BinaryImage, GrayImage, LabelImage, PackedBinary};
use markerscope::pipeline::ComponentFilter;
use markerscope::source::synthetic::{random_frame, MarkerScene};
use markerscope::threshold::apply;
use markerscope::threshold::binarize::{Binarizer, Outputs};
use markerscope::threshold::levels::otsu_from_histogram;
use markerscope::threshold::levels::ThresholdLevels;
use markerscope::threshold::spec::ThresholdSpec;
use rayon::prelude::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Counts allocations (and their bytes) of every thread.
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator; the counters are plain atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Best of `k` runs of `f` (ms), and the allocations (count, bytes) of the last run.
fn best<R>(k: u32, mut f: impl FnMut() -> R) -> (f64, (u64, u64)) {
    let mut best = f64::INFINITY;
    let mut allocs = (0, 0);
    for _ in 0..k.max(1) {
        let (a0, b0) = (
            ALLOCS.load(Ordering::Relaxed),
            BYTES.load(Ordering::Relaxed),
        );
        let t = Instant::now();
        let r = f();
        let ms = t.elapsed().as_secs_f64() * 1e3;
        allocs = (
            ALLOCS.load(Ordering::Relaxed) - a0,
            BYTES.load(Ordering::Relaxed) - b0,
        );
        drop(r);
        best = best.min(ms);
    }
    (best, allocs)
}

/// Otsu's histogram as the capture thread counted it before: one u64 table per 2^18 pixels.
fn histogram_before(grey: &[u8]) -> [u64; 256] {
    grey.par_chunks(1 << 18)
        .map(|chunk| {
            let mut h = [0u64; 256];
            for &v in chunk {
                h[v as usize] += 1;
            }
            h
        })
        .reduce(
            || [0u64; 256],
            |mut a, b| {
                for (x, y) in a.iter_mut().zip(b) {
                    *x += y;
                }
                a
            },
        )
}

/// The two-step path: a fresh byte mask (from the levels in sub-pixel mode), then `pack`.
fn before(grey: &GrayImage, spec: &ThresholdSpec, subpixel: bool, pack: bool) -> usize {
    let mask = if subpixel {
        let levels = match spec {
            ThresholdSpec::Otsu => {
                ThresholdLevels::Global(otsu_from_histogram(&histogram_before(&grey.data)))
            }
            _ => ThresholdLevels::compute(grey, spec, false).unwrap(),
        };
        levels.mask(grey, false).unwrap()
    } else {
        let spec = match spec {
            ThresholdSpec::Otsu => {
                ThresholdSpec::Fixed(otsu_from_histogram(&histogram_before(&grey.data)))
            }
            s => *s,
        };
        apply(grey, &spec, false).unwrap()
    };
    if pack {
        mask.pack().words.len()
    } else {
        mask.data.len()
    }
}

/// The sub-pixel centroids as the worker computed them before, for every component: a parallel
/// visit of each box with a branch per pixel when the boxes cover at most a quarter of the
/// image, else one scan by runs of labels.
fn centroids_before(
    grey: &GrayImage,
    labels: &LabelImage,
    stats: &[ComponentStats],
    levels: &ThresholdLevels,
) -> Vec<SubpixelCentroid> {
    let level = |i: usize| match levels {
        ThresholdLevels::Global(t) => *t as i32,
        ThresholdLevels::Local { levels, .. } => levels[i],
    };
    let weight = |g: u8, l: i32| (g as i32 - l).max(0) as u64;
    let row = |label: u32, (w, wx, wy): (u64, u64, u64)| SubpixelCentroid {
        label,
        weight: w,
        sum_wx: wx,
        sum_wy: wy,
        x: wx as f64 / w.max(1) as f64,
        y: wy as f64 / w.max(1) as f64,
    };
    let w = grey.width as usize;
    let bbox_pixels: u64 = stats.iter().map(|s| s.width as u64 * s.height as u64).sum();
    if bbox_pixels <= grey.data.len() as u64 / 4 {
        return stats
            .par_iter()
            .map(|s| {
                let (mut sw, mut swx, mut swy) = (0u64, 0u64, 0u64);
                for y in s.top..s.top + s.height {
                    for x in s.left..s.left + s.width {
                        let i = y as usize * w + x as usize;
                        if labels.data[i] == s.label {
                            let wt = weight(grey.data[i], level(i));
                            sw += wt;
                            swx += wt * x as u64;
                            swy += wt * y as u64;
                        }
                    }
                }
                row(s.label, (sw, swx, swy))
            })
            .collect();
    }
    let max_label = stats.iter().map(|s| s.label).max().unwrap_or(0) as usize;
    let mut row_of = vec![u32::MAX; max_label + 1];
    for (r, s) in stats.iter().enumerate() {
        row_of[s.label as usize] = r as u32;
    }
    let mut sums = vec![(0u64, 0u64, 0u64); stats.len()];
    for (y, lab) in labels.data.chunks_exact(w).enumerate() {
        let row0 = y * w;
        let mut x = 0;
        while x < w {
            let l = lab[x];
            let start = x;
            while x < w && lab[x] == l {
                x += 1;
            }
            let slot = match row_of.get(l as usize) {
                Some(&r) if l != 0 && r != u32::MAX => r as usize,
                _ => continue,
            };
            let (mut sw, mut swx) = (0u64, 0u64);
            for (k, &g) in grey.data[row0 + start..row0 + x].iter().enumerate() {
                let wt = weight(g, level(row0 + start + k));
                sw += wt;
                swx += wt * (start + k) as u64;
            }
            let e = &mut sums[slot];
            e.0 += sw;
            e.1 += swx;
            e.2 += sw * y as u64;
        }
    }
    stats
        .iter()
        .zip(sums)
        .map(|(s, e)| row(s.label, e))
        .collect()
}

struct Buffers {
    binarizer: Binarizer,
    bytes: BinaryImage,
    packed: PackedBinary,
    levels: Vec<i32>,
}

/// The one-pass path into kept buffers: packed bits (GPU) or bytes (CPU), levels in sub-pixel mode.
fn after(b: &mut Buffers, grey: &GrayImage, spec: &ThresholdSpec, subpixel: bool, pack: bool) {
    let out = Outputs {
        bytes: (!pack).then_some(&mut b.bytes),
        packed: pack.then_some(&mut b.packed),
        levels: subpixel.then_some(&mut b.levels),
    };
    b.binarizer.run(grey, spec, false, out).unwrap().unwrap();
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut sizes = Vec::new();
    let mut repeat = 15;
    let mut i = 0;
    while i < args.len() {
        if args[i] == "--repeat" {
            repeat = args
                .get(i + 1)
                .and_then(|v| v.parse().ok())
                .expect("--repeat K");
            i += 2;
            continue;
        }
        let (w, h) = args[i].split_once('x').expect("sizes as WxH");
        sizes.push((w.parse::<u32>().unwrap(), h.parse::<u32>().unwrap()));
        i += 1;
    }
    if sizes.is_empty() {
        sizes = vec![(1920, 1080), (3840, 2160)];
    }
    println!(
        "{} rayon threads, best of {repeat} (ms); allocations of one 'after' run: count / bytes",
        rayon::current_num_threads()
    );
    let specs = [
        ThresholdSpec::Fixed(127),
        ThresholdSpec::Otsu,
        ThresholdSpec::Adaptive { window: 31, c: 5.0 },
    ];
    for &(w, h) in &sizes {
        let scene = MarkerScene::new(w, h, 1).unwrap();
        let grey = scene.render(10);
        let mut bufs = Buffers {
            binarizer: Binarizer::new(),
            bytes: BinaryImage::zeros(1, 1).unwrap(),
            packed: BinaryImage::zeros(1, 1).unwrap().pack(),
            levels: Vec::new(),
        };
        println!("\n{w}x{h} demo scene frame: threshold (+ pack for GPU algorithms)");
        println!(
            "{:<16} {:>9} {:>6} | {:>9} {:>9} {:>7} | {:>14}",
            "threshold", "sub-pixel", "pack", "before", "after", "ratio", "after allocs"
        );
        for spec in &specs {
            for subpixel in [false, true] {
                for pack in [true, false] {
                    let (t0, _) = best(repeat, || before(&grey, spec, subpixel, pack));
                    after(&mut bufs, &grey, spec, subpixel, pack); // buffers sized
                    let (t1, (n, bytes)) =
                        best(repeat, || after(&mut bufs, &grey, spec, subpixel, pack));
                    println!(
                        "{:<16} {:>9} {:>6} | {t0:>9.3} {t1:>9.3} {:>6.1}x | {n:>6} / {bytes:>6}",
                        spec.to_string(),
                        if subpixel { "on" } else { "off" },
                        if pack { "GPU" } else { "CPU" },
                        t0 / t1
                    );
                }
            }
        }

        println!("\n{w}x{h} random frames (cluttered): sub-pixel centroids + filter");
        println!(
            "{:<12} {:>8} {:<20} {:>7} {:>6} | {:>9} {:>9} {:>7}",
            "frame", "comps", "filter", "kept", "boxes", "before", "after", "ratio"
        );
        let filters = [
            ("none", ComponentFilter::default()),
            (
                "min_area 16",
                ComponentFilter {
                    min_area: Some(16),
                    ..ComponentFilter::default()
                },
            ),
            (
                "area 16..=400, asp 2",
                ComponentFilter {
                    min_area: Some(16),
                    max_area: Some(400),
                    max_aspect: Some(2.0),
                    ..ComponentFilter::default()
                },
            ),
        ];
        let mut lsl = Lsl::new();
        // density 0.3 / 0.5 / 0.8 at granularity 4, density 0.5 at granularity 1 and 16.
        for frame in [14u64, 16, 19, 5, 27] {
            let grey = random_frame(w, h, frame).unwrap();
            let spec = ThresholdSpec::Fixed(127);
            let levels = ThresholdLevels::compute(&grey, &spec, false).unwrap();
            let weights = GreyWeights {
                grey: &grey,
                levels: &levels,
                invert: false,
            };
            let mask = apply(&grey, &spec, false).unwrap();
            let out = lsl.label(&mask, Connectivity::Eight, Want::Both).unwrap();
            let (labels, stats) = (out.labels.unwrap(), out.stats.unwrap());
            let name = format!(
                "d {:.1} g {}",
                (frame % 11) as f64 / 10.0,
                [1, 4, 16][(frame / 11 % 3) as usize]
            );
            for (fname, filter) in &filters {
                let accepts = |c: &ComponentStats| filter.accepts(c);
                let (t0, _) = best(repeat.min(7), || {
                    let all = stats.clone();
                    let c = centroids_before(&grey, &labels, &all, &levels);
                    let (kept, sub): (Vec<ComponentStats>, Vec<_>) =
                        all.into_iter().zip(c).filter(|(c, _)| accepts(c)).unzip();
                    (kept, sub)
                });
                let (t1, _) = best(repeat.min(7), || {
                    let mut all = stats.clone();
                    let c = weights.centroids(&labels, &all, &accepts).unwrap();
                    if !filter.is_unlimited() {
                        all.retain(|c| accepts(c));
                    }
                    assert_eq!(all.len(), c.len());
                    (all, c)
                });
                // The same rows either way.
                let all = stats.clone();
                let old = centroids_before(&grey, &labels, &all, &levels);
                let (_, old): (Vec<ComponentStats>, Vec<_>) =
                    all.into_iter().zip(old).filter(|(c, _)| accepts(c)).unzip();
                let new = weights.centroids(&labels, &stats, &accepts).unwrap();
                assert_eq!(old, new, "{name} {fname}");
                let kept = stats.iter().filter(|c| accepts(c)).count();
                let boxes: u64 = stats
                    .iter()
                    .filter(|c| accepts(c))
                    .map(|c| c.width as u64 * c.height as u64)
                    .sum();
                // The clone of the table (the labeler's output) is in both runs.
                println!(
                    "{name:<12} {:>8} {fname:<20} {kept:>7} {:>6.2} | {t0:>9.3} {t1:>9.3} {:>6.1}x",
                    stats.len(),
                    boxes as f64 / (w as f64 * h as f64),
                    t0 / t1
                );
            }
        }
    }
}
