//! Sub-pixel centroids: the grey-weighted centroid of each component,
//! (Σ w·x / Σ w, Σ w·y / Σ w) over the component's pixels with w = grey − threshold.
//!
//! Anti-aliased edges carry the position information the binary centroid throws away: an edge
//! pixel half covered by a marker is half as bright above the threshold, so it counts half.
//!
//! Weights are integers and the sums are exact u64 (like `ComponentStats::sum_x`), so a GPU
//! implementation can fill the same `SubpixelCentroid` rows with integer atomics and compare
//! bit for bit. With `invert` (dark markers) the weight is the exact mirror image:
//! foreground is grey ≤ T and w = T + 1 − grey, so every foreground pixel weighs at least 1
//! in both cases and the centroid is always defined.
//!
//! Coordinates are pixel-index coordinates (pixel (x, y) centred on (x, y)), as in
//! `ComponentStats` and `render`.

use crate::ccl::stats::ComponentStats;
use crate::ccl::{keep_all, Keep};
use crate::error::{Error, Result};
use crate::frame::image::{GrayImage, LabelImage};
use crate::threshold::levels::ThresholdLevels;
use rayon::prelude::*;
use serde::Serialize;

/// The grey-weighted centroid of one component; rows align with the `ComponentStats` rows
/// they were computed for.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SubpixelCentroid {
    pub label: u32,
    /// Σ w over the component's pixels.
    pub weight: u64,
    pub sum_wx: u64,
    pub sum_wy: u64,
    pub x: f64,
    pub y: f64,
}

impl SubpixelCentroid {
    pub(crate) fn from_sums(label: u32, weight: u64, sum_wx: u64, sum_wy: u64) -> Self {
        // weight is 0 only for a row with no pixels in the label image (a caller error caught
        // before); keep the output finite anyway.
        let d = weight.max(1) as f64;
        Self {
            label,
            weight,
            sum_wx,
            sum_wy,
            x: sum_wx as f64 / d,
            y: sum_wy as f64 / d,
        }
    }
}

/// What a weighted centroid needs besides the labels: the grey frame and how it was
/// thresholded (the levels and `invert` that made the mask).
#[derive(Clone, Copy, Debug)]
pub struct GreyWeights<'a> {
    pub grey: &'a GrayImage,
    pub levels: &'a ThresholdLevels,
    pub invert: bool,
}

impl GreyWeights<'_> {
    /// The centroids of the `stats` rows `keep` accepts (one output row per accepted row, in
    /// order), from a host label image: the other rows are not read, nor their pixels.
    pub fn centroids(
        &self,
        labels: &LabelImage,
        stats: &[ComponentStats],
        keep: Keep<'_>,
    ) -> Result<Vec<SubpixelCentroid>> {
        weighted_centroids_of(&CentroidJob {
            weights: self,
            labels,
            stats,
            keep,
        })
    }
}

/// The rows of one labeling whose centroids are summed and the frame that weighs them: what
/// both ways of summing (`sums_by_bbox`, `sums_by_scan`) read.
struct CentroidJob<'a> {
    weights: &'a GreyWeights<'a>,
    labels: &'a LabelImage,
    stats: &'a [ComponentStats],
    keep: Keep<'a>,
}

/// Weight of a foreground pixel: grey − T, or T + 1 − grey with invert (≥ 1 for foreground,
/// at most 256).
#[inline(always)]
fn weight_u32(grey: u8, level: i32, invert: bool) -> u32 {
    let w = if invert {
        level + 1 - grey as i32
    } else {
        grey as i32 - level
    };
    w.max(0) as u32
}

/// `weight_u32` for sums in u64.
#[inline]
fn weight(grey: u8, level: i32, invert: bool) -> u64 {
    weight_u32(grey, level, invert) as u64
}

/// Grey-weighted centroids for the components in `stats` (any subset of the labeling's rows,
/// e.g. the ones that passed the filter), one output row per input row in the same order.
///
/// `labels` must number components as `stats` does (labels 1..=N in raster order, what
/// `Want::Both` delivers); `grey` is the frame that was thresholded with `levels` and `invert`.
/// Only the components' bounding boxes are read unless they add up to more than the image.
pub fn weighted_centroids(
    grey: &GrayImage,
    labels: &LabelImage,
    stats: &[ComponentStats],
    levels: &ThresholdLevels,
    invert: bool,
) -> Result<Vec<SubpixelCentroid>> {
    let weights = GreyWeights {
        grey,
        levels,
        invert,
    };
    weights.centroids(labels, stats, &keep_all)
}

/// `GreyWeights::centroids`: by the boxes or by one pass over the image, whichever reads less.
fn weighted_centroids_of(job: &CentroidJob<'_>) -> Result<Vec<SubpixelCentroid>> {
    let (grey, labels, stats, keep) = (job.weights.grey, job.labels, job.stats, job.keep);
    let size = (labels.width, labels.height);
    check_weights_cover(grey, job.weights.levels, "label image", size)?;
    let pixels = grey.len() as u64;
    let bbox_pixels: u64 = stats
        .iter()
        .filter(|s| keep(s))
        .map(|s| s.width as u64 * s.height as u64)
        .sum();

    // Boxes read only the kept components' pixels and their neighbours, branch-free; the scan
    // reads every pixel once but pays a branch per run of labels, several times a box pixel's
    // cost on cluttered frames: the boxes win unless they add up to several images
    // (overlapping boxes, nested components).
    let out = if bbox_pixels <= 4 * pixels {
        sums_by_bbox(job)
    } else {
        sums_by_scan(job)
    };
    if let Some(bad) = out.iter().find(|c| c.weight == 0) {
        return Err(Error::Invalid(format!(
            "sub-pixel centroid: component {} has no foreground pixel in the label image; \
             the label image and the statistics table must come from the same labeling \
             (labels and statistics both asked for)",
            bad.label
        )));
    }
    Ok(out)
}

/// Visits each component's bounding box (cheap for markers: boxes are small and few pixels).
/// A large box is cut into bands of rows summed in parallel.
fn sums_by_bbox(job: &CentroidJob<'_>) -> Vec<SubpixelCentroid> {
    let (grey, labels, stats, keep) = (job.weights.grey, job.labels, job.stats, job.keep);
    let (levels, invert) = (job.weights.levels, job.weights.invert);
    /// Pixels of a band of a large box (the bands are summed in parallel).
    const BAND_PIXELS: u32 = 1 << 16;
    stats
        .par_iter()
        // Markers' boxes are small: a few dozen to each rayon job, worth its scheduling.
        .with_min_len(32)
        .filter(|s| keep(s))
        .map(|s| {
            let bottom = s.top.saturating_add(s.height).min(grey.height);
            let band_rows = (BAND_PIXELS / s.width.max(1)).max(1);
            let (sw, swx, swy) = if s.height <= band_rows {
                box_sums(grey, labels, s, s.top..bottom, levels, invert)
            } else {
                (s.top..bottom)
                    .into_par_iter()
                    .step_by(band_rows as usize)
                    .map(|y0| {
                        let rows = y0..y0.saturating_add(band_rows).min(bottom);
                        box_sums(grey, labels, s, rows, levels, invert)
                    })
                    .reduce(|| (0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2))
            };
            SubpixelCentroid::from_sums(s.label, sw, swx, swy)
        })
        .collect()
}

/// Σ w, Σ w·x, Σ w·y over the pixels of component `s` in `rows` of its box. Branch-free over the
/// box: a pixel of another label weighs 0, so the loops vectorise whatever the labels.
#[inline(always)]
fn box_sums(
    grey: &GrayImage,
    labels: &LabelImage,
    s: &ComponentStats,
    rows: std::ops::Range<u32>,
    levels: &ThresholdLevels,
    invert: bool,
) -> (u64, u64, u64) {
    match levels {
        // Narrow boxes (most of a cluttered frame's) gain nothing from pieces of a row.
        ThresholdLevels::Global(t) if s.width >= 64 => {
            box_sums_global(grey, labels, s, rows, *t, invert)
        }
        ThresholdLevels::Global(t) => box_sums_with(grey, labels, s, rows, invert, |_| *t as i32),
        ThresholdLevels::Local { levels, .. } => {
            box_sums_with(grey, labels, s, rows, invert, |i| levels[i])
        }
    }
}

/// The rows of component `s`'s box in `rows`: each row's y, the row-major index of its first
/// pixel in the box, and the box's labels and grey values on it.
fn box_rows<'a>(
    grey: &'a GrayImage,
    labels: &'a LabelImage,
    s: &ComponentStats,
    rows: std::ops::Range<u32>,
) -> impl Iterator<Item = (u64, usize, &'a [u32], &'a [u8])> + 'a {
    let w = grey.width as usize;
    let (x0, x1) = (
        s.left as usize,
        s.left.saturating_add(s.width).min(grey.width) as usize,
    );
    rows.map(move |y| {
        let at = y as usize * w + x0;
        let span = at..at + (x1 - x0);
        (y as u64, at, &labels.data[span.clone()], &grey.data[span])
    })
}

/// Pixels of a row summed in u32 with one level for the frame (`box_sums_global`, `run_sums`): a
/// weight is at most 256, so Σ w < 2¹⁸ and Σ w·k < 2²⁸ with k the pixel's place in its piece,
/// which vectorises twice as wide as u64 and has no 64-bit multiply; each piece's sums go into
/// the row's in u64.
const WEIGHT_PIECE: usize = 1024;

/// `box_sums` with one level for the frame, in pieces of `WEIGHT_PIECE` pixels. The same sums
/// as `box_sums_with`.
fn box_sums_global(
    grey: &GrayImage,
    labels: &LabelImage,
    s: &ComponentStats,
    rows: std::ops::Range<u32>,
    level: u8,
    invert: bool,
) -> (u64, u64, u64) {
    let level = level as i32;
    let x0 = s.left as usize;
    let (mut sw, mut swx, mut swy) = (0u64, 0u64, 0u64);
    for (y, _, lab, g) in box_rows(grey, labels, s, rows) {
        let (mut rw, mut rwx) = (0u64, 0u64);
        let pieces = lab.chunks(WEIGHT_PIECE).zip(g.chunks(WEIGHT_PIECE));
        for (p, (lab, g)) in pieces.enumerate() {
            let (mut pw, mut pwk) = (0u32, 0u32);
            for (k, (&l, &g)) in lab.iter().zip(g).enumerate() {
                let wt = weight_u32(g, level, invert) * (l == s.label) as u32;
                pw += wt;
                pwk += wt * k as u32;
            }
            let start = (x0 + p * WEIGHT_PIECE) as u64;
            rw += pw as u64;
            rwx += pwk as u64 + pw as u64 * start;
        }
        sw += rw;
        swx += rwx;
        swy += rw * y;
    }
    (sw, swx, swy)
}

/// `box_sums` with the level of pixel i (row-major index) given by `level`.
#[inline(always)]
fn box_sums_with(
    grey: &GrayImage,
    labels: &LabelImage,
    s: &ComponentStats,
    rows: std::ops::Range<u32>,
    invert: bool,
    level: impl Fn(usize) -> i32,
) -> (u64, u64, u64) {
    let x0 = s.left as usize;
    let (mut sw, mut swx, mut swy) = (0u64, 0u64, 0u64);
    for (y, at, lab, g) in box_rows(grey, labels, s, rows) {
        let (mut rw, mut rwx) = (0u64, 0u64);
        for (k, (&l, &g)) in lab.iter().zip(g).enumerate() {
            let wt = weight(g, level(at + k), invert) * (l == s.label) as u64;
            rw += wt;
            rwx += wt * (x0 + k) as u64;
        }
        sw += rw;
        swx += rwx;
        swy += rw * y;
    }
    (sw, swx, swy)
}

/// One pass over the whole image (when the boxes overlap a lot, e.g. nested components).
/// Each label is expected at most once in `stats`. Row by row, a run of equal labels is summed
/// locally and added to its component once, so the cost is one read per pixel. Bands of rows
/// are summed apart on the rayon pool, each into sums of its own, then added: the sums are
/// exact integers, so they are the same whatever the bands (a 1080p frame of interlocked
/// components: 2.5–3.1 ms on one thread, 1.7–2.0 on two).
fn sums_by_scan(job: &CentroidJob<'_>) -> Vec<SubpixelCentroid> {
    /// Rows of the smallest band (fewer would not pay for a band's sums).
    const MIN_BAND_ROWS: usize = 32;
    /// Bytes the bands' sums may take in all.
    const BAND_SUM_BYTES: usize = 64 << 20;
    let (grey, labels, stats, keep) = (job.weights.grey, job.labels, job.stats, job.keep);
    let (levels, invert) = (job.weights.levels, job.weights.invert);
    let w = grey.width as usize;
    let kept = || stats.iter().filter(|s| keep(s));
    let max_label = kept().map(|s| s.label).max().unwrap_or(0) as usize;
    let mut row_of = vec![u32::MAX; max_label + 1];
    let mut n = 0;
    for (r, s) in kept().enumerate() {
        row_of[s.label as usize] = r as u32;
        n = r + 1;
    }
    let sum_rows = |rows: std::ops::Range<usize>, sums: &mut [(u64, u64, u64)]| {
        for y in rows {
            let row0 = y * w;
            let row = &labels.data[row0..row0 + w];
            let mut x = 0;
            while x < w {
                let l = row[x];
                let start = x;
                while x < w && row[x] == l {
                    x += 1;
                }
                let slot = match row_of.get(l as usize) {
                    Some(&r) if l != 0 && r != u32::MAX => r as usize,
                    _ => continue,
                };
                let g = &grey.data[row0 + start..row0 + x];
                let (sw, swx) = run_sums(g, start, row0 + start, levels, invert);
                let e = &mut sums[slot];
                e.0 += sw;
                e.1 += swx;
                e.2 += sw * y as u64;
            }
        }
    };
    let h = grey.height as usize;
    let sum_bytes = (n * std::mem::size_of::<(u64, u64, u64)>()).max(1);
    let bands = rayon::current_num_threads()
        .min(h / MIN_BAND_ROWS)
        .min(BAND_SUM_BYTES / sum_bytes)
        .max(1);
    let band_rows = h.div_ceil(bands);
    let mut partial: Vec<Vec<(u64, u64, u64)>> = (0..bands)
        .into_par_iter()
        .map(|b| {
            let mut sums = vec![(0u64, 0u64, 0u64); n];
            sum_rows(b * band_rows..((b + 1) * band_rows).min(h), &mut sums);
            sums
        })
        .collect();
    let mut sums = partial.swap_remove(0);
    const ADD_CHUNK: usize = 4096;
    sums.par_chunks_mut(ADD_CHUNK)
        .enumerate()
        .for_each(|(c, chunk)| {
            for band in &partial {
                for (e, p) in chunk.iter_mut().zip(&band[c * ADD_CHUNK..]) {
                    e.0 += p.0;
                    e.1 += p.1;
                    e.2 += p.2;
                }
            }
        });
    kept()
        .zip(sums)
        .map(|(s, (sw, swx, swy))| SubpixelCentroid::from_sums(s.label, sw, swx, swy))
        .collect()
}

/// The grey frame (and its levels) must be the size of what it weighs (`what`: the label image,
/// the mask).
pub(crate) fn check_weights_cover(
    grey: &GrayImage,
    levels: &ThresholdLevels,
    what: &str,
    (width, height): (u32, u32),
) -> Result<()> {
    if (width, height) != (grey.width, grey.height) {
        return Err(Error::Invalid(format!(
            "sub-pixel centroid: the {what} is {width}x{height} but the grey frame is {}x{}",
            grey.width, grey.height
        )));
    }
    levels.check_covers(grey)
}

/// Σ w and Σ w·x over the pixels `x0..x0 + g.len()` of one row, whose first pixel has
/// row-major index `at` (for per-pixel levels): the sums of one run of a component. With one
/// level, in pieces of `WEIGHT_PIECE` pixels as `box_sums_global`; the same sums as
/// `box_sums_with`.
#[inline(always)]
pub(crate) fn run_sums(
    g: &[u8],
    x0: usize,
    at: usize,
    levels: &ThresholdLevels,
    invert: bool,
) -> (u64, u64) {
    match levels {
        ThresholdLevels::Global(t) => {
            let level = *t as i32;
            let (mut rw, mut rwx) = (0u64, 0u64);
            for (p, g) in g.chunks(WEIGHT_PIECE).enumerate() {
                let (mut pw, mut pwk) = (0u32, 0u32);
                for (k, &g) in g.iter().enumerate() {
                    let wt = weight_u32(g, level, invert);
                    pw += wt;
                    pwk += wt * k as u32;
                }
                rw += pw as u64;
                rwx += pwk as u64 + pw as u64 * (x0 + p * WEIGHT_PIECE) as u64;
            }
            (rw, rwx)
        }
        ThresholdLevels::Local { levels, .. } => {
            let (mut rw, mut rwx) = (0u64, 0u64);
            for (k, (&g, &level)) in g.iter().zip(&levels[at..at + g.len()]).enumerate() {
                let wt = weight(g, level, invert);
                rw += wt;
                rwx += wt * (x0 + k) as u64;
            }
            (rw, rwx)
        }
    }
}

/// The error for a component whose pixels weigh nothing: the grey frame and levels are not
/// those that made its mask.
pub(crate) fn no_weight(label: u32) -> Error {
    Error::Invalid(format!(
        "sub-pixel centroid: the pixels of component {label} weigh nothing in the grey frame; \
         the grey frame and threshold levels must be those that made the mask"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ccl::cpu::lsl::Lsl;
    use crate::ccl::{Connectivity, Labeler, Want};
    use crate::frame::render::{draw, Shape};
    use crate::threshold::apply;
    use crate::threshold::spec::ThresholdSpec;
    use rand_mt::Mt64;

    /// The centroids of the rows `keep` accepts, summed over the boxes and over the whole image.
    fn by_bbox_and_scan(
        weights: &GreyWeights<'_>,
        labels: &LabelImage,
        stats: &[ComponentStats],
        keep: Keep<'_>,
    ) -> (Vec<SubpixelCentroid>, Vec<SubpixelCentroid>) {
        let job = CentroidJob {
            weights,
            labels,
            stats,
            keep,
        };
        (sums_by_bbox(&job), sums_by_scan(&job))
    }

    fn uniform(rng: &mut Mt64, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Approximately normal noise (sum of 4 uniforms), standard deviation `sigma`.
    fn noise(rng: &mut Mt64, sigma: f64) -> f64 {
        let s: f64 = (0..4).map(|_| uniform(rng, -0.5, 0.5)).sum();
        s * sigma * 3f64.sqrt()
    }

    /// Renders one shape per trial at a random sub-pixel position, thresholds, labels with lsl,
    /// and returns the RMS error of the weighted centroid (and, for comparison, of the binary one).
    fn rms_error(seed: u64, sigma: f64, invert: bool, k: (f64, f64)) -> (f64, f64, usize) {
        let mut rng = Mt64::new(seed);
        let (mut se_w, mut se_b, mut n) = (0.0, 0.0, 0usize);
        let mut lsl = Lsl::new();
        for trial in 0..400 {
            let size = uniform(&mut rng, 3.0, 20.0);
            let contrast = uniform(&mut rng, 100.0, 200.0);
            let (bg, fg) = if invert {
                (230.0, 230.0 - contrast)
            } else {
                (25.0, 25.0 + contrast)
            };
            let side = (2.0 * size + 12.0).ceil() as u32;
            let c = side as f64 / 2.0;
            let (cx, cy) = (
                c + uniform(&mut rng, -1.0, 1.0),
                c + uniform(&mut rng, -1.0, 1.0),
            );
            let shape = if trial % 2 == 0 {
                Shape::Disc {
                    cx,
                    cy,
                    radius: size,
                }
            } else {
                Shape::Square {
                    cx,
                    cy,
                    side: 2.0 * size,
                }
            };
            let mut img = GrayImage::filled(side, side, bg as u8).unwrap();
            draw(&mut img, &shape, fg.round() as u8);
            for v in &mut img.data {
                *v = (*v as f64 + noise(&mut rng, sigma))
                    .round()
                    .clamp(0.0, 255.0) as u8;
            }
            // Threshold between 20 % and 50 % of the way from background to marker.
            let t = bg + (fg - bg) * uniform(&mut rng, k.0, k.1);
            let spec = ThresholdSpec::Fixed(if invert { t.floor() } else { t.round() } as u8);
            let mask = apply(&img, &spec, invert).unwrap();
            let out = lsl.label(&mask, Connectivity::Eight, Want::Both).unwrap();
            let stats = out.stats.unwrap();
            assert_eq!(stats.len(), 1, "trial {trial}: one component expected");
            let levels = ThresholdLevels::compute(&img, &spec, invert).unwrap();
            let labels = out.labels.unwrap();
            let sub = weighted_centroids(&img, &labels, &stats, &levels, invert).unwrap();
            se_w += (sub[0].x - cx).powi(2) + (sub[0].y - cy).powi(2);
            se_b += (stats[0].centroid_x - cx).powi(2) + (stats[0].centroid_y - cy).powi(2);
            n += 1;
        }
        // RMS per axis.
        (
            (se_w / (2 * n) as f64).sqrt(),
            (se_b / (2 * n) as f64).sqrt(),
            n,
        )
    }

    /// The weights are measured from the threshold, so the accuracy depends on where the
    /// threshold sits between background and marker: edge pixels covered less than that
    /// fraction drop out and the others lose weight. Thresholds up to 30 % of the contrast
    /// above the background meet 0.05 px; the midpoint gives about 0.07 px (printed below).
    #[test]
    fn recovers_rendered_positions_to_five_hundredths_of_a_pixel() {
        for (seed, sigma, invert) in [(1, 0.0, false), (2, 2.0, false), (3, 2.0, true)] {
            let (rms, rms_binary, n) = rms_error(seed, sigma, invert, (0.1, 0.3));
            println!(
                "sub-pixel centroid, {n} discs/squares r 3-20 px, contrast 100-200, noise σ {sigma}, \
                 invert {invert}, threshold 10-30 % of contrast: RMS error per axis {rms:.4} px \
                 (binary centroid {rms_binary:.4} px)"
            );
            assert!(
                rms <= 0.05,
                "RMS {rms} px > 0.05 px (noise {sigma}, invert {invert})"
            );
            assert!(
                rms < rms_binary / 2.0,
                "weighted {rms} vs binary {rms_binary}"
            );
        }
        for k in [0.1, 0.2, 0.3, 0.4, 0.5] {
            let (rms, rms_binary, _) = rms_error(4, 2.0, false, (k, k));
            println!(
                "threshold at {:.0} % of contrast, noise σ 2: RMS {rms:.4} px (binary {rms_binary:.4} px)",
                k * 100.0
            );
            assert!(
                rms < rms_binary,
                "weighted {rms} vs binary {rms_binary} at {k}"
            );
        }
    }

    #[test]
    fn bbox_and_full_scan_paths_agree() {
        let mut img = GrayImage::filled(64, 48, 20).unwrap();
        let mut rng = Mt64::new(7);
        for _ in 0..12 {
            let shape = Shape::Disc {
                cx: uniform(&mut rng, 4.0, 60.0),
                cy: uniform(&mut rng, 4.0, 44.0),
                radius: uniform(&mut rng, 1.5, 6.0),
            };
            draw(&mut img, &shape, 200);
        }
        let spec = ThresholdSpec::Fixed(60);
        let mask = apply(&img, &spec, false).unwrap();
        let out = Lsl::new()
            .label(&mask, Connectivity::Eight, Want::Both)
            .unwrap();
        let stats = out.stats.unwrap();
        let labels = out.labels.unwrap();
        let levels = ThresholdLevels::compute(&img, &spec, false).unwrap();
        let weights = GreyWeights {
            grey: &img,
            levels: &levels,
            invert: false,
        };
        let (by_bbox, by_scan) = by_bbox_and_scan(&weights, &labels, &stats, &keep_all);
        assert_eq!(by_scan, by_bbox);
        assert_eq!(
            weighted_centroids(&img, &labels, &stats, &levels, false).unwrap(),
            by_bbox
        );
        assert!(stats.len() > 5);
        // Every weight is at least the pixel count (w ≥ 1 on foreground).
        for (s, c) in stats.iter().zip(&by_bbox) {
            assert!(c.weight >= s.area);
        }
    }

    /// Large components (boxes cut into bands of rows), overlapping boxes, per-pixel levels,
    /// both polarities, and a subset of the rows: boxes, scan and a plain sum over every pixel
    /// agree, and the subset's centroids are those of the full table, filtered.
    #[test]
    fn box_bands_scan_and_kept_subsets_agree() {
        let spec = crate::frame::random_image::RandomImageSpec {
            width: 301,
            height: 733,
            density: 0.55,
            granularity: 1,
            seed: 5,
        };
        let mask = crate::frame::random_image::generate(&spec).unwrap();
        let mut rng = Mt64::new(3);
        let data = mask
            .data
            .iter()
            .map(|&m| if m != 0 { 120 } else { 0 } + (rng.next_u64() % 100) as u8)
            .collect();
        let grey = GrayImage::new(spec.width, spec.height, data).unwrap();
        for (t, invert) in [(99, false), (120, true)] {
            for levels in [
                ThresholdLevels::Global(t),
                ThresholdLevels::compute(
                    &grey,
                    &ThresholdSpec::Adaptive { window: 9, c: -3.0 },
                    invert,
                )
                .unwrap(),
            ] {
                let mask = levels.mask(&grey, invert).unwrap();
                let out = Lsl::new()
                    .label(&mask, Connectivity::Eight, Want::Both)
                    .unwrap();
                let (labels, stats) = (out.labels.unwrap(), out.stats.unwrap());
                assert!(stats.iter().any(|s| s.height > 300), "a large component");
                // Plain sums over every pixel.
                let mut plain = vec![(0u64, 0u64, 0u64); stats.len()];
                for (i, &l) in labels.data.iter().enumerate() {
                    if l != 0 {
                        let (x, y) = ((i % 301) as u64, (i / 301) as u64);
                        let wt = weight(grey.data[i], levels.level(i), invert);
                        let e = &mut plain[l as usize - 1];
                        (e.0, e.1, e.2) = (e.0 + wt, e.1 + wt * x, e.2 + wt * y);
                    }
                }
                let plain: Vec<SubpixelCentroid> = stats
                    .iter()
                    .zip(plain)
                    .map(|(s, (w, wx, wy))| SubpixelCentroid::from_sums(s.label, w, wx, wy))
                    .collect();
                let weights = GreyWeights {
                    grey: &grey,
                    levels: &levels,
                    invert,
                };
                let big = |s: &ComponentStats| s.area >= 4;
                let (by_bbox, by_scan) = by_bbox_and_scan(&weights, &labels, &stats, &keep_all);
                assert_eq!(by_bbox, plain);
                assert_eq!(by_scan, plain);
                // The scan in as many bands of rows as a pool of 7 threads makes (7 of 105).
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(7)
                    .build()
                    .unwrap();
                let all = pool.install(|| by_bbox_and_scan(&weights, &labels, &stats, &keep_all));
                assert_eq!(all.1, plain);
                let some = pool.install(|| by_bbox_and_scan(&weights, &labels, &stats, &big));
                assert_eq!(some.1, some.0);
                let kept: Vec<SubpixelCentroid> = stats
                    .iter()
                    .zip(&plain)
                    .filter(|(s, _)| big(s))
                    .map(|(_, c)| *c)
                    .collect();
                assert!(kept.len() < plain.len() && !kept.is_empty());
                let (by_bbox, by_scan) = by_bbox_and_scan(&weights, &labels, &stats, &big);
                assert_eq!(by_bbox, kept);
                assert_eq!(by_scan, kept);
                assert_eq!(weights.centroids(&labels, &stats, &big).unwrap(), kept);
            }
        }
    }

    /// Boxes wider than a row piece of the one-level path (1,024 pixels): sums of three
    /// pieces and a part, both polarities, as the scan adds them.
    #[test]
    fn wide_boxes_sum_their_row_pieces_as_the_scan_does() {
        let (w, h) = (2_600u32, 24u32);
        let mut rng = Mt64::new(17);
        let data = (0..w * h)
            .map(|i| {
                let (x, y) = (i % w, i / w);
                let bar = (4..20).contains(&y) && (3..w - 2).contains(&x);
                (if bar { 140 } else { 0 }) + (rng.next_u64() % 100) as u8
            })
            .collect();
        let grey = GrayImage::new(w, h, data).unwrap();
        for (t, invert) in [(110, false), (120, true)] {
            let levels = ThresholdLevels::Global(t);
            let mask = levels.mask(&grey, invert).unwrap();
            let out = Lsl::new()
                .label(&mask, Connectivity::Eight, Want::Both)
                .unwrap();
            let (labels, stats) = (out.labels.unwrap(), out.stats.unwrap());
            assert!(
                stats.iter().any(|s| s.width > 2 * 1024),
                "a box of three pieces"
            );
            let weights = GreyWeights {
                grey: &grey,
                levels: &levels,
                invert,
            };
            let (by_bbox, by_scan) = by_bbox_and_scan(&weights, &labels, &stats, &keep_all);
            assert_eq!(by_bbox, by_scan);
        }
    }

    #[test]
    fn adaptive_levels_reproduce_the_threshold_mask() {
        let mut rng = Mt64::new(11);
        let data: Vec<u8> = (0..37 * 23).map(|_| (rng.next_u64() % 256) as u8).collect();
        let img = GrayImage::new(37, 23, data).unwrap();
        for (window, c) in [(3, 0.0), (5, 2.5), (15, -3.0), (41, 7.0)] {
            let spec = ThresholdSpec::Adaptive { window, c };
            let ThresholdLevels::Local { levels, .. } =
                ThresholdLevels::compute(&img, &spec, false).unwrap()
            else {
                panic!("adaptive gives local levels");
            };
            for invert in [false, true] {
                let mask = apply(&img, &spec, invert).unwrap();
                for (i, (&g, &l)) in img.data.iter().zip(&levels).enumerate() {
                    let fg = (g as i32 > l) ^ invert;
                    assert_eq!(
                        fg,
                        mask.data[i] != 0,
                        "W {window} C {c} invert {invert} pixel {i}"
                    );
                    if fg {
                        assert!(weight(g, l, invert) >= 1);
                    }
                }
            }
        }
    }

    #[test]
    fn global_levels_are_the_mask_level_for_every_method() {
        // Dim noise with brighter and darker blobs, so that every method finds a level inside.
        let mut rng = Mt64::new(5);
        let mut img = GrayImage::filled(64, 48, 0).unwrap();
        for v in &mut img.data {
            *v = 90 + (rng.next_u64() % 21) as u8;
        }
        draw(
            &mut img,
            &Shape::Disc {
                cx: 15.3,
                cy: 12.6,
                radius: 6.2,
            },
            230,
        );
        draw(
            &mut img,
            &Shape::Disc {
                cx: 44.8,
                cy: 30.1,
                radius: 4.7,
            },
            10,
        );
        for spec in [
            ThresholdSpec::Fixed(120),
            ThresholdSpec::Otsu,
            ThresholdSpec::Triangle,
            ThresholdSpec::Background { k: 5.0 },
            ThresholdSpec::Background { k: 0.0 },
        ] {
            for invert in [false, true] {
                let levels = ThresholdLevels::compute(&img, &spec, invert).unwrap();
                let ThresholdLevels::Global(t) = levels else {
                    panic!("{spec}: one level for the frame");
                };
                assert_eq!(
                    Some(t),
                    crate::threshold::levels::global_level(&img, &spec, invert)
                );
                let mask = apply(&img, &spec, invert).unwrap();
                assert_eq!(levels.mask(&img, invert).unwrap(), mask, "{spec} {invert}");
                assert!(mask.foreground_count() > 0, "{spec} {invert}");
            }
        }
    }

    #[test]
    fn mismatched_inputs_are_errors() {
        let img = GrayImage::filled(8, 8, 0).unwrap();
        let labels = LabelImage::zeros(8, 7);
        let err = weighted_centroids(&img, &labels, &[], &ThresholdLevels::Global(5), false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("8x7") && err.contains("8x8"), "{err}");
        // A row whose label is not in the label image.
        let labels = LabelImage::zeros(8, 8);
        let mut m = crate::ccl::stats::Moments::EMPTY;
        m.add_run(2, 1, 4);
        let err = weighted_centroids(
            &img,
            &labels,
            &[m.to_stats(1)],
            &ThresholdLevels::Global(5),
            false,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("component 1"), "{err}");
    }
}
