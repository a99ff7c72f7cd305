//! Shape descriptors of a component: second central moments, the equivalent ellipse
//! (orientation, major and minor axis, eccentricity), SimpleBlobDetector's inertia ratio, the
//! perimeter and the circularity.
//!
//! Conventions (the ones the tests compare against):
//! - moments are OpenCV's `cv2.moments` of the component's binary mask: `mu20 = Σ (x − x̄)²`,
//!   `mu02 = Σ (y − ȳ)²`, `mu11 = Σ (x − x̄)(y − ȳ)` (pixel-index coordinates, y down);
//! - the ellipse is scikit-image `regionprops`' one: with λ1 ≥ λ2 the eigenvalues of the
//!   covariance (`mu / area`), major axis = 4 √λ1, minor axis = 4 √λ2, eccentricity =
//!   √(1 − λ2/λ1);
//! - orientation = ½ atan2(2 mu11, mu20 − mu02): the angle of the major axis from the +x axis
//!   towards +y (clockwise on screen), in degrees in (−90, 90];
//! - inertia ratio = λ2 / λ1, as OpenCV's `SimpleBlobDetector` computes it (1 for a disc or a
//!   square, 0 for a line);
//! - perimeter = scikit-image's `perimeter_crofton` (4 directions) of the component's mask: the
//!   Crofton formula over its 2 × 2 pixel configurations, which for one component comes to
//!   (π/2)(1 + 1/√2) · area − (π/4) · (4-adjacent pixel pairs) − (π/(4√2)) · (diagonal pairs);
//! - circularity = 4π area / perimeter² (about 1 for a disc, 0.88 for a square; small
//!   components exceed 1: a single pixel 1.75).
//!
//! The inputs are exact integers (Σx², Σy², Σxy and the two pixel pair counts), so the GPU fills
//! the same `ShapeSums` with integer atomics and compares bit for bit. Σx² < area · width² fits
//! a u128 for every frame (< 2^32 pixels); the GPU's u64 sums are exact up to 65536 pixels per
//! side.

use crate::ccl::stats::ComponentStats;
use crate::ccl::Keep;
use crate::error::{Error, Result};
use crate::frame::image::{LabelImage, PackedBinary};
use rayon::prelude::*;
use serde::Serialize;

/// The exact sums the descriptors are made from, for one component.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ShapeSums {
    pub label: u32,
    /// Σ x², Σ y², Σ x·y over the component's pixels.
    pub sum_xx: u128,
    pub sum_yy: u128,
    pub sum_xy: u128,
    /// Pairs of the component's pixels that are 4-neighbours (side by side or one above the
    /// other), and pairs that are diagonal neighbours.
    pub pairs_4: u64,
    pub pairs_diagonal: u64,
}

/// The descriptors of one component; rows align with the `ComponentStats` rows they were
/// computed for.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ShapeDescriptors {
    pub label: u32,
    pub mu20: f64,
    pub mu02: f64,
    pub mu11: f64,
    pub orientation_deg: f64,
    pub major_axis: f64,
    pub minor_axis: f64,
    pub eccentricity: f64,
    pub inertia_ratio: f64,
    pub perimeter: f64,
    pub circularity: f64,
}

use std::f64::consts::{FRAC_1_SQRT_2, FRAC_PI_2, FRAC_PI_4};

/// The Crofton perimeter's weights (`ShapeSums::perimeter`).
const CROFTON_AREA: f64 = FRAC_PI_2 * (1.0 + FRAC_1_SQRT_2);
const CROFTON_PAIR_4: f64 = FRAC_PI_4;
const CROFTON_PAIR_DIAGONAL: f64 = FRAC_PI_4 * FRAC_1_SQRT_2;

/// `n · Σv² − (Σv)²` over `n²`, i.e. the variance, from exact sums; integer arithmetic while it
/// fits (no cancellation), f64 beyond.
fn covariance(n: u64, sum_a: u64, sum_b: u64, sum_ab: u128) -> f64 {
    let (n, a, b) = (n as i128, sum_a as i128, sum_b as i128);
    let exact = (sum_ab as i128)
        .checked_mul(n)
        .zip(a.checked_mul(b))
        .and_then(|(p, q)| p.checked_sub(q));
    match exact {
        Some(d) => d as f64 / (n as f64 * n as f64),
        None => {
            let (n, a, b) = (n as f64, a as f64, b as f64);
            sum_ab as f64 / n - (a / n) * (b / n)
        }
    }
}

impl ShapeSums {
    /// The perimeter of a component of `area` pixels (scikit-image's `perimeter_crofton`).
    pub fn perimeter(&self, area: u64) -> f64 {
        CROFTON_AREA * area as f64
            - CROFTON_PAIR_4 * self.pairs_4 as f64
            - CROFTON_PAIR_DIAGONAL * self.pairs_diagonal as f64
    }

    /// The descriptors of the component `stats` describes (same label).
    pub fn descriptors(&self, stats: &ComponentStats) -> ShapeDescriptors {
        let area = stats.area.max(1);
        let (vxx, vyy, vxy) = (
            covariance(area, stats.sum_x, stats.sum_x, self.sum_xx),
            covariance(area, stats.sum_y, stats.sum_y, self.sum_yy),
            covariance(area, stats.sum_x, stats.sum_y, self.sum_xy),
        );
        let a = area as f64;
        // Eigenvalues of [[vxx, vxy], [vxy, vyy]].
        let mean = (vxx + vyy) / 2.0;
        let half_diff = ((vxx - vyy) / 2.0).hypot(vxy);
        let l1 = (mean + half_diff).max(0.0);
        let l2 = (mean - half_diff).max(0.0);
        let orientation = if vxy == 0.0 && vxx == vyy {
            0.0
        } else {
            0.5 * (2.0 * vxy).atan2(vxx - vyy)
        };
        let perimeter = self.perimeter(stats.area);
        ShapeDescriptors {
            label: stats.label,
            mu20: vxx * a,
            mu02: vyy * a,
            mu11: vxy * a,
            // atan2 gives (−π, π]; half of it lies in (−90°, 90°].
            orientation_deg: orientation.to_degrees(),
            major_axis: 4.0 * l1.sqrt(),
            minor_axis: 4.0 * l2.sqrt(),
            eccentricity: if l1 > 0.0 {
                (1.0 - l2 / l1).max(0.0).sqrt()
            } else {
                0.0
            },
            inertia_ratio: if l1 > 0.0 { l2 / l1 } else { 1.0 },
            perimeter,
            circularity: if perimeter > 0.0 {
                4.0 * std::f64::consts::PI * a / (perimeter * perimeter)
            } else {
                0.0
            },
        }
    }
}

/// Shape sums of the `stats` rows `keep` accepts (one output row per accepted row, in order),
/// from `labels` (numbered like `stats`: 1..=N in raster order, what `Want::Both` delivers) in
/// one pass over the image (`sums_by_runs`).
pub fn shape_sums_of(
    labels: &LabelImage,
    stats: &[ComponentStats],
    keep: Keep<'_>,
) -> Result<Vec<ShapeSums>> {
    let kept: Vec<&ComponentStats> = stats.iter().filter(|s| keep(s)).collect();
    for s in &kept {
        let fits = s.left as u64 + s.width as u64 <= labels.width as u64
            && s.top as u64 + s.height as u64 <= labels.height as u64;
        if !fits || s.label == 0 {
            return Err(Error::Invalid(format!(
                "shape descriptors: component {} (box {}x{} at {},{}) lies outside the {}x{} label image",
                s.label, s.width, s.height, s.left, s.top, labels.width, labels.height
            )));
        }
    }
    // Every component at once, a band of rows per task (one pass over the image, however the
    // boxes overlap), then the kept rows.
    let all = sums_by_runs(labels, stats.len());
    let mut sums = Vec::with_capacity(kept.len());
    for s in kept {
        let (part, pixels) = &all[s.label as usize - 1];
        if *pixels != s.area {
            return Err(Error::Invalid(format!(
                "shape descriptors: component {} has {pixels} pixels in the label image, its row says {}",
                s.label, s.area
            )));
        }
        sums.push(*part);
    }
    Ok(sums)
}

/// Rows per task of `sums_by_runs`.
const BAND_ROWS: usize = 16;

/// Partial sums of the components one thread met, indexed by label through `slot`.
struct BandSums {
    /// Entry of label l at `slot[l - 1]` (u32::MAX: none yet).
    slot: Vec<u32>,
    entries: Vec<(ShapeSums, u64)>,
}

impl BandSums {
    fn new(n: usize) -> BandSums {
        BandSums {
            slot: vec![u32::MAX; n],
            entries: Vec::new(),
        }
    }

    fn entry(&mut self, label: u32) -> &mut (ShapeSums, u64) {
        let slot = &mut self.slot[label as usize - 1];
        if *slot == u32::MAX {
            *slot = self.entries.len() as u32;
            let sums = ShapeSums {
                label,
                ..ShapeSums::default()
            };
            self.entries.push((sums, 0));
        }
        &mut self.entries[*slot as usize]
    }

    fn add(&mut self, other: BandSums) {
        for (part, pixels) in other.entries {
            let (e, n) = self.entry(part.label);
            add_sums(e, &part);
            *n += pixels;
        }
    }
}

pub(crate) fn add_sums(e: &mut ShapeSums, part: &ShapeSums) {
    e.sum_xx += part.sum_xx;
    e.sum_yy += part.sum_yy;
    e.sum_xy += part.sum_xy;
    e.pairs_4 += part.pairs_4;
    e.pairs_diagonal += part.pairs_diagonal;
}

/// The first position at or after `from` (below `width`) whose bit in the mask row `bits` is
/// `set`; None if there is none.
fn next_bit(bits: &[u32], from: u32, width: u32, set: bool) -> Option<u32> {
    if from >= width {
        return None;
    }
    let mut w = from / 32;
    let flip = if set { 0 } else { u32::MAX };
    let mut word = (bits[w as usize] ^ flip) & (u32::MAX << (from % 32));
    loop {
        if word != 0 {
            let x = 32 * w + word.trailing_zeros();
            return (x < width).then_some(x);
        }
        w += 1;
        if 32 * w >= width {
            return None;
        }
        word = bits[w as usize] ^ flip;
    }
}

/// The runs of set bits of the mask row `bits`, left to right: (first x, one past the last).
fn row_runs(bits: &[u32], width: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
    let mut x = 0;
    std::iter::from_fn(move || {
        let a0 = next_bit(bits, x, width, true)?;
        let a1 = next_bit(bits, a0, width, false).unwrap_or(width);
        x = a1;
        Some((a0, a1))
    })
}

/// The shape sums and pixel count of every component of `labels` (numbered 1..=n; other values
/// are not counted), as the GPU computes them: per run, the moments in closed form and the pixel
/// pairs from the packed row above (`run_pairs`; a diagonal contact whose pixels share no
/// foreground 4-neighbour decided by the labels). Bands of rows on all cores.
fn sums_by_runs(labels: &LabelImage, n: usize) -> Vec<(ShapeSums, u64)> {
    let (width, height) = (labels.width, labels.height);
    let (w, wpr) = (width as usize, PackedBinary::words_per_row_for(width));
    let data = &labels.data;
    let mut words = vec![0u32; wpr * height as usize];
    words.par_chunks_mut(wpr).enumerate().for_each(|(y, row)| {
        for (word, pixels) in row.iter_mut().zip(data[y * w..(y + 1) * w].chunks(32)) {
            *word = pixels
                .iter()
                .enumerate()
                .fold(0, |acc, (i, &l)| acc | u32::from(l != 0) << i);
        }
    });
    let row = |y: usize| &words[y * wpr..(y + 1) * wpr];
    let label_at = |x: u32, y: usize| data[y * w + x as usize];
    let bands = (height as usize).div_ceil(BAND_ROWS);
    // Each task's partial sums index all n labels: a few tasks per thread, not one per band.
    let per_task = bands.div_ceil(2 * rayon::current_num_threads()).max(1);
    let totals = (0..bands)
        .into_par_iter()
        .with_min_len(per_task)
        .fold(
            || BandSums::new(n),
            |mut acc, band| {
                let rows = band * BAND_ROWS..((band + 1) * BAND_ROWS).min(height as usize);
                let mut ranks = Vec::with_capacity(wpr);
                for y in rows {
                    let bits = row(y);
                    let up = y.checked_sub(1).map(|y| RankedRow::new(row(y), &mut ranks));
                    for (a0, a1) in row_runs(bits, width) {
                        // A run is one component: its pixels are 4-neighbours.
                        let l = label_at(a0, y);
                        if l == 0 || l as usize > n {
                            continue;
                        }
                        let pairs = run_pairs(up, width, a0, a1, |qx| label_at(qx, y - 1) == l);
                        let (e, pixels) = acc.entry(l);
                        add_run(e, a0, a1, y as u32, pairs);
                        *pixels += (a1 - a0) as u64;
                    }
                }
                acc
            },
        )
        .reduce(
            || BandSums::new(0),
            |mut a, b| {
                if a.slot.is_empty() {
                    return b;
                }
                a.add(b);
                a
            },
        );
    let mut out: Vec<(ShapeSums, u64)> = (1..=n as u32)
        .map(|label| {
            let sums = ShapeSums {
                label,
                ..ShapeSums::default()
            };
            (sums, 0)
        })
        .collect();
    for (part, pixels) in totals.entries {
        let (e, n) = &mut out[part.label as usize - 1];
        add_sums(e, &part);
        *n += pixels;
    }
    out
}

/// The descriptors of the `stats` rows `keep` accepts, one row per accepted row, in order.
pub fn describe_of(
    labels: &LabelImage,
    stats: &[ComponentStats],
    keep: Keep<'_>,
) -> Result<Vec<ShapeDescriptors>> {
    let sums = shape_sums_of(labels, stats, keep)?;
    Ok(stats
        .iter()
        .filter(|s| keep(s))
        .zip(&sums)
        .map(|(s, sums)| sums.descriptors(s))
        .collect())
}

/// Σ i² for i in 0..k.
#[inline]
fn sum_of_squares_below(k: u64) -> u128 {
    let k = k as u128;
    if k == 0 {
        0
    } else {
        (k - 1) * k * (2 * k - 1) / 6
    }
}

/// Σ k² for k < n, for the run lengths most runs have (the product and division cost more than
/// a load on the CPU's hot path).
const SQUARES_BELOW: [u64; 1024] = {
    let mut table = [0u64; 1024];
    let mut n = 1;
    while n < 1024 {
        table[n] = table[n - 1] + ((n - 1) * (n - 1)) as u64;
        n += 1;
    }
    table
};

/// Adds the run [a0, a1) of row y: its moments, in closed form, and its pixel pairs
/// (4-adjacent, diagonal: `run_pairs`).
#[inline(always)]
pub(crate) fn add_run(e: &mut ShapeSums, a0: u32, a1: u32, y: u32, pairs: (u64, u64)) {
    e.pairs_4 += pairs.0;
    e.pairs_diagonal += pairs.1;
    if a1 <= 1 << 21 && y < 1 << 21 {
        // Σ (a0 + k)² for k < n = n a0 (a1 − 1) + n (n − 1)(2n − 1) / 6, and n y², Σx · y: all
        // below 2^64 here, and 64-bit arithmetic is a few instructions (a 128-bit division is
        // a call).
        let (n, a0, a1, y) = (a1 as u64 - a0 as u64, a0 as u64, a1 as u64, y as u64);
        let squares = match SQUARES_BELOW.get(n as usize) {
            Some(&t) => t,
            None => n * (n - 1) * (2 * n - 1) / 6,
        };
        e.sum_xx += (n * a0 * (a1 - 1) + squares) as u128;
        e.sum_yy += (n * y * y) as u128;
        e.sum_xy += ((a0 + a1 - 1) * n / 2 * y) as u128;
        return;
    }
    let (nrun, yy) = ((a1 - a0) as u128, y as u128);
    let sum_x = (a0 as u128 + a1 as u128 - 1) * nrun / 2;
    e.sum_xx += sum_of_squares_below(a1 as u64) - sum_of_squares_below(a0 as u64);
    e.sum_yy += nrun * yy * yy;
    e.sum_xy += sum_x * yy;
}

/// Reference: the shape sums of every component of a label image numbered 1..=n, pixel by pixel
/// over the whole image (no boxes), for the tests and selftest.
pub fn shape_sums_by_scan(labels: &LabelImage, n: u32) -> Vec<ShapeSums> {
    let (w, h) = (labels.width as i64, labels.height as i64);
    let mut out: Vec<ShapeSums> = (1..=n)
        .map(|label| ShapeSums {
            label,
            ..ShapeSums::default()
        })
        .collect();
    let at = |x: i64, y: i64| {
        if x < 0 || y < 0 || x >= w || y >= h {
            0
        } else {
            labels.data[(y * w + x) as usize]
        }
    };
    for y in 0..h {
        for x in 0..w {
            let l = at(x, y);
            if l == 0 || l > n {
                continue;
            }
            let e = &mut out[l as usize - 1];
            let (xu, yu) = (x as u128, y as u128);
            e.sum_xx += xu * xu;
            e.sum_yy += yu * yu;
            e.sum_xy += xu * yu;
            // Each pair once, from its lower pixel (side by side: its right one).
            let same = |dx: i64, dy: i64| u64::from(at(x + dx, y + dy) == l);
            e.pairs_4 += same(-1, 0) + same(0, -1);
            e.pairs_diagonal += same(-1, -1) + same(1, -1);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Pixel pairs from the bit-packed mask, a run at a time: the model of the fused accumulation on
// the GPU (`run_pairs` in kernels/flsl.cu computes the same way), proven here against the pixel
// scan, and the CPU backend's own pass.
//
// Each pair is counted once, from its lower pixel (side by side: from its right one). A run
// [a0, a1) holds a1 − a0 − 1 pairs side by side; its pairs with the row above are the foreground
// pixels there straight above, up-right and up-left of its pixels. With F(p) the foreground
// pixels of the row above in [0, p] (0 for p < 0, F(width − 1) past the row), those are
// F(a1 − 1) − F(a0 − 1), F(a1) − F(a0) and F(a1 − 2) − F(a0 − 2). With B(p) the pixel p of the
// row above (0 outside it), the second is the first − B(a0) + B(a1) and the third the first +
// B(a0 − 1) − B(a1 − 1): one count difference (each count the row's foreground rank before a
// word plus a popcount in it) and four bits of the two end words, so a run of any length costs
// the same. A pixel above touching the run through a foreground 4-neighbour is in the run's
// component. Only the two diagonal contacts at the ends may lack one: (a1 − 1, y) with (a1, y − 1) when
// (a1 − 1, y − 1) is background, (a0, y) with (a0 − 1, y − 1) when (a0, y − 1) is. With
// 8-connectivity they are in the component; with 4-connectivity the caller decides (on the GPU:
// the roots of the two runs).

/// A packed mask row and its foreground ranks: entry w is the number of foreground pixels in
/// the words before w (what the GPU's strip kernel writes beside the edge ranks).
#[derive(Clone, Copy, Debug)]
pub struct RankedRow<'a> {
    pub bits: &'a [u32],
    pub ranks: &'a [u32],
}

impl<'a> RankedRow<'a> {
    /// The row `bits` with its ranks, computed into `ranks` (reused from row to row).
    pub fn new(bits: &'a [u32], ranks: &'a mut Vec<u32>) -> RankedRow<'a> {
        ranks.clear();
        let mut before = 0;
        for word in bits {
            ranks.push(before);
            before += word.count_ones();
        }
        RankedRow { bits, ranks }
    }

    /// F(x): the foreground pixels in [0, x], for 0 <= x < the width (one word and its rank).
    #[inline(always)]
    pub fn upto(&self, x: u32) -> u32 {
        let (w, b) = ((x / 32) as usize, x % 32);
        self.ranks[w] + (self.bits[w] & (u32::MAX >> (31 - b))).count_ones()
    }

    /// F(x − 1): the foreground pixels in [0, x), for 0 <= x < the width.
    #[inline(always)]
    pub fn before(&self, x: u32) -> u32 {
        let (w, b) = ((x / 32) as usize, x % 32);
        self.ranks[w] + (self.bits[w] & ((1u64 << b) - 1) as u32).count_ones()
    }

    /// B(x): pixel x, for 0 <= x < the width.
    #[inline(always)]
    pub fn pixel(&self, x: u32) -> u32 {
        (self.bits[(x / 32) as usize] >> (x % 32)) & 1
    }
}

/// What the run [a0, a1) of a row touches in the packed row above it (`up`; None: the first row).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunContacts {
    /// Foreground pixels straight above the run's pixels.
    pub vertical: u32,
    /// Foreground pixels diagonally above the run's pixels that touch the run through a
    /// foreground 4-neighbour (the run's component).
    pub diagonal: u32,
    /// (a1, y − 1) is foreground and (a1 − 1, y − 1) background: a contact that may lie in another
    /// component; likewise (a0 − 1, y − 1) with (a0, y − 1).
    pub unsure_right: bool,
    pub unsure_left: bool,
}

/// The contacts of the run [a0, a1) (a0 < a1 <= width) with the row above.
#[inline(always)]
pub fn run_contacts(up: Option<RankedRow<'_>>, width: u32, a0: u32, a1: u32) -> RunContacts {
    let Some(up) = up else {
        return RunContacts::default();
    };
    let vertical = up.upto(a1 - 1) - up.before(a0);
    // B(a0), B(a1 − 1), B(a0 − 1) and B(a1) (0 past the row).
    let (first, last) = (up.pixel(a0), up.pixel(a1 - 1));
    let left_of = if a0 > 0 { up.pixel(a0 - 1) } else { 0 };
    let past = if a1 < width { up.pixel(a1) } else { 0 };
    // Pixels above-right of the run: above [a0 + 1, a1 + 1); above-left: above [a0 − 1, a1 − 1).
    let (right, left) = (vertical - first + past, vertical + left_of - last);
    let unsure_right = past == 1 && last == 0;
    let unsure_left = left_of == 1 && first == 0;
    RunContacts {
        vertical,
        diagonal: right + left - unsure_right as u32 - unsure_left as u32,
        unsure_right,
        unsure_left,
    }
}

/// The pixel pairs (4-adjacent, diagonal) the run [a0, a1) of row y makes with itself and the
/// packed row above (`up`); `same(x)` says whether pixel (x, y − 1) is in the run's component
/// (asked only for the unsure contacts).
#[inline(always)]
pub fn run_pairs(
    up: Option<RankedRow<'_>>,
    width: u32,
    a0: u32,
    a1: u32,
    same: impl Fn(u32) -> bool,
) -> (u64, u64) {
    let c = run_contacts(up, width, a0, a1);
    let diagonal = c.diagonal
        + u32::from(c.unsure_right && same(a1))
        + u32::from(c.unsure_left && same(a0 - 1));
    ((a1 - a0 - 1 + c.vertical) as u64, diagonal as u64)
}

/// The shape sums of every component from the bit-packed mask and its runs, one run at a time
/// as the fused GPU accumulation does. `component(x, y)` is the label (1 ..= n) of a foreground
/// pixel; with 8-connectivity (`eight`) no contact is unsure and it is not asked.
pub fn shape_sums_of_runs(
    mask: &PackedBinary,
    eight: bool,
    n: u32,
    component: impl Fn(u32, u32) -> u32,
) -> Vec<ShapeSums> {
    let (width, height, wpr) = (mask.width, mask.height, mask.words_per_row);
    let mut out: Vec<ShapeSums> = (1..=n)
        .map(|label| ShapeSums {
            label,
            ..ShapeSums::default()
        })
        .collect();
    let row = |y: u32| &mask.words[y as usize * wpr..(y as usize + 1) * wpr];
    let mut ranks = Vec::with_capacity(wpr);
    for y in 0..height {
        let bits = row(y);
        let up = y.checked_sub(1).map(|y| RankedRow::new(row(y), &mut ranks));
        for (a0, a1) in row_runs(bits, width) {
            let l = component(a0, y);
            let pairs = run_pairs(up, width, a0, a1, |qx| eight || component(qx, y - 1) == l);
            add_run(&mut out[l as usize - 1], a0, a1, y, pairs);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table of Σk² for short runs holds what the closed form gives.
    #[test]
    fn the_short_run_squares_are_the_closed_form() {
        for (n, &t) in SQUARES_BELOW.iter().enumerate() {
            assert_eq!(t as u128, sum_of_squares_below(n as u64), "n = {n}");
        }
    }
    use crate::ccl::cpu::lsl::Lsl;
    use crate::ccl::cpu::oracle::flood_fill;
    use crate::ccl::{keep_all, Connectivity, Labeler, Want};
    use crate::frame::image::BinaryImage;
    use crate::frame::random_image::{generate, RandomImageSpec};

    fn random(width: u32, height: u32, density: f64, granularity: u32, seed: u32) -> BinaryImage {
        generate(&RandomImageSpec {
            width,
            height,
            density,
            granularity,
            seed,
        })
        .unwrap()
    }

    fn label(image: &BinaryImage, c: Connectivity) -> (LabelImage, Vec<ComponentStats>) {
        let out = Lsl::new().label(image, c, Want::Both).unwrap();
        (out.labels.unwrap(), out.stats.unwrap())
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1.0)
    }

    #[test]
    fn rectangle_has_the_closed_form_moments_and_perimeter() {
        // A 9 × 4 rectangle at (3, 2): mu20 = A (w² − 1)/12, mu11 = 0.
        let image =
            BinaryImage::from_fn(20, 10, |x, y| (3..12).contains(&x) && (2..6).contains(&y))
                .unwrap();
        let (labels, stats) = label(&image, Connectivity::Eight);
        let d = describe_of(&labels, &stats, &keep_all).unwrap();
        assert_eq!(d.len(), 1);
        let (w, h, a) = (9.0, 4.0, 36.0);
        assert!(close(d[0].mu20, a * (w * w - 1.0) / 12.0, 1e-12), "{d:?}");
        assert!(close(d[0].mu02, a * (h * h - 1.0) / 12.0, 1e-12), "{d:?}");
        assert_eq!(d[0].mu11, 0.0);
        assert_eq!(d[0].orientation_deg, 0.0);
        assert!(close(
            d[0].major_axis,
            4.0 * ((w * w - 1.0) / 12.0).sqrt(),
            1e-12
        ));
        assert!(close(
            d[0].inertia_ratio,
            (h * h - 1.0) / (w * w - 1.0),
            1e-12
        ));
        // 9 · 4 pixels, 8 · 4 + 9 · 3 pairs 4-adjacent, 2 · 8 · 3 diagonal; scikit-image's
        // perimeter_crofton of this rectangle: 23.538824938641923.
        let sums = shape_sums_of(&labels, &stats, &keep_all).unwrap();
        assert_eq!((sums[0].pairs_4, sums[0].pairs_diagonal), (59, 48));
        assert!(close(d[0].perimeter, 23.538824938641923, 1e-12), "{d:?}");
    }

    #[test]
    fn a_diagonal_line_points_at_45_degrees_down_right() {
        let image = BinaryImage::from_fn(12, 12, |x, y| x == y).unwrap();
        let (labels, stats) = label(&image, Connectivity::Eight);
        let d = describe_of(&labels, &stats, &keep_all).unwrap();
        assert!(close(d[0].orientation_deg, 45.0, 1e-12), "{d:?}");
        assert!(close(d[0].eccentricity, 1.0, 1e-12));
        assert_eq!(d[0].minor_axis, 0.0);
        let anti = BinaryImage::from_fn(12, 12, |x, y| x + y == 11).unwrap();
        let (labels, stats) = label(&anti, Connectivity::Eight);
        let d = describe_of(&labels, &stats, &keep_all).unwrap();
        assert!(close(d[0].orientation_deg, -45.0, 1e-12), "{d:?}");
        // A single pixel: no extent, a perfect inertia ratio, and no division by zero.
        let dot = BinaryImage::from_fn(3, 3, |x, y| x == 1 && y == 1).unwrap();
        let (labels, stats) = label(&dot, Connectivity::Four);
        let d = describe_of(&labels, &stats, &keep_all).unwrap();
        assert_eq!((d[0].major_axis, d[0].eccentricity), (0.0, 0.0));
        assert_eq!(d[0].inertia_ratio, 1.0);
        // perimeter_crofton of one pixel: 2.681517061334488.
        assert!(close(d[0].perimeter, 2.681517061334488, 1e-12), "{d:?}");
        assert!(d[0].circularity.is_finite());
    }

    #[test]
    fn a_disc_is_round_and_a_bar_is_not() {
        let disc = BinaryImage::from_fn(64, 64, |x, y| {
            let (dx, dy) = (x as f64 - 31.3, y as f64 - 30.8);
            dx * dx + dy * dy <= 20.0 * 20.0
        })
        .unwrap();
        let (labels, stats) = label(&disc, Connectivity::Eight);
        let d = describe_of(&labels, &stats, &keep_all).unwrap()[0];
        assert!(d.inertia_ratio > 0.98 && d.eccentricity < 0.15, "{d:?}");
        // scikit-image's perimeter_crofton of this disc: 125.58757457328278.
        assert!(close(d.perimeter, 125.58757457328278, 1e-12), "{d:?}");
        assert!(d.circularity > 0.99 && d.circularity < 1.01, "{d:?}");
        let bar =
            BinaryImage::from_fn(64, 64, |x, y| (4..60).contains(&x) && (30..34).contains(&y))
                .unwrap();
        let (labels, stats) = label(&bar, Connectivity::Eight);
        let b = describe_of(&labels, &stats, &keep_all).unwrap()[0];
        assert!(b.circularity < 0.3 && b.inertia_ratio < 0.01, "{b:?}");
    }

    /// The word-at-a-time sums and the pixel-by-pixel scan agree on random images and the
    /// correctness shapes, labeled by the BFS oracle and by lsl; a kept subset gives the full
    /// table's rows, filtered.
    #[test]
    fn word_sums_agree_with_the_whole_image_scan_over_the_oracle() {
        let mut images = Vec::new();
        for (d, g) in [(0.3, 1), (0.55, 1), (0.5, 4), (0.8, 2)] {
            images.push(random(97, 61, d, g, 9));
            images.push(random(64, 40, d, g, 10));
        }
        for s in crate::ccl::shapes::hard_shapes(67, 33) {
            images.push(s.image);
        }
        for image in &images {
            for c in [Connectivity::Four, Connectivity::Eight] {
                let (oracle_labels, moments) = flood_fill(image, c);
                let n = moments.len() as u32;
                let reference = shape_sums_by_scan(&oracle_labels, n);
                let (labels, stats) = label(image, c);
                assert_eq!(stats.len(), n as usize);
                assert_eq!(
                    shape_sums_of(&labels, &stats, &keep_all).unwrap(),
                    reference
                );
                let big = |s: &ComponentStats| s.area >= 3;
                let kept: Vec<ShapeSums> = stats
                    .iter()
                    .zip(&reference)
                    .filter(|(s, _)| big(s))
                    .map(|(_, r)| *r)
                    .collect();
                assert_eq!(shape_sums_of(&labels, &stats, &big).unwrap(), kept);
            }
        }
    }

    #[test]
    fn next_bit_finds_runs_up_to_the_row_end() {
        // 64 pixels: two words, no padding; then 70 pixels: the last word has 6.
        let row = [0xf000_0000u32, 0x8000_0001];
        assert_eq!(next_bit(&row, 0, 64, true), Some(28));
        assert_eq!(next_bit(&row, 28, 64, false), Some(33));
        assert_eq!(next_bit(&row, 33, 64, true), Some(63));
        assert_eq!(next_bit(&row, 63, 64, false), None);
        assert_eq!(next_bit(&row, 64, 64, true), None);
        let row = [0u32, 0, 0x3f, 0];
        assert_eq!(next_bit(&row, 0, 70, true), Some(64));
        assert_eq!(next_bit(&row, 64, 70, false), None);
        assert_eq!(next_bit(&[0u32, 0], 5, 64, true), None);
        assert_eq!(next_bit(&[u32::MAX, u32::MAX], 0, 64, false), None);
    }

    #[test]
    fn rows_outside_the_label_image_are_errors() {
        let labels = LabelImage::zeros(8, 8);
        let mut m = crate::ccl::stats::Moments::EMPTY;
        m.add_run(9, 1, 4);
        let err = describe_of(&labels, &[m.to_stats(1)], &keep_all)
            .unwrap_err()
            .to_string();
        assert!(err.contains("component 1") && err.contains("8x8"), "{err}");
        let mut m = crate::ccl::stats::Moments::EMPTY;
        m.add_run(2, 1, 4);
        let err = describe_of(&labels, &[m.to_stats(1)], &keep_all)
            .unwrap_err()
            .to_string();
        assert!(err.contains("0 pixels"), "{err}");
    }

    /// The model over runs gives the per-pixel sums, both connectivities, on random masks (odd
    /// widths, one row, one column, words split between components) and the correctness shapes;
    /// with 4-connectivity the unsure diagonal contacts occur both ways: same component and
    /// another one.
    #[test]
    fn sums_over_runs_from_the_packed_mask_match_the_pixel_scan() {
        let mut images = Vec::new();
        for (w, h) in [(97, 61), (33, 40), (64, 17), (1, 50), (50, 1), (130, 3)] {
            for (d, g) in [(0.2, 1), (0.5, 1), (0.6, 2), (0.5, 4), (0.9, 1)] {
                images.push(random(w, h, d, g, 3));
            }
        }
        for s in crate::ccl::shapes::hard_shapes(67, 33) {
            images.push(s.image);
        }
        // A ring whose ends touch diagonally (one component, the long way round), and a pixel
        // touching it diagonally (another component).
        let ring = [
            (0, 0),
            (1, 0),
            (2, 0),
            (0, 1),
            (2, 1),
            (0, 2),
            (1, 2),
            (3, 2),
        ];
        images.push(BinaryImage::from_fn(6, 5, |x, y| ring.contains(&(x, y))).unwrap());
        let (mut same, mut other) = (0, 0);
        for image in &images {
            let packed = image.pack();
            for c in [Connectivity::Four, Connectivity::Eight] {
                let (labels, moments) = flood_fill(image, c);
                let n = moments.len() as u32;
                let at = |x: u32, y: u32| labels.data[(y * labels.width + x) as usize];
                let got = shape_sums_of_runs(&packed, c == Connectivity::Eight, n, at);
                let want = shape_sums_by_scan(&labels, n);
                let wrong = got.iter().zip(&want).find(|(g, w)| g != w);
                assert!(wrong.is_none(), "{c}-connectivity: {wrong:?} (got, want)");
                if c == Connectivity::Four {
                    let (s, o) = unsure_contacts(&packed, &at);
                    same += s;
                    other += o;
                }
            }
        }
        assert!(same > 0 && other > 0, "same {same}, other {other}");
    }

    /// Unsure diagonal contacts at the runs' ends (4-connectivity): (same component, other).
    fn unsure_contacts(mask: &PackedBinary, at: &impl Fn(u32, u32) -> u32) -> (usize, usize) {
        let (width, wpr) = (mask.width, mask.words_per_row);
        let row = |y: u32| &mask.words[y as usize * wpr..(y as usize + 1) * wpr];
        let (mut same, mut other) = (0, 0);
        let mut ranks = Vec::new();
        for y in 1..mask.height {
            let up = RankedRow::new(row(y - 1), &mut ranks);
            for (a0, a1) in row_runs(row(y), width) {
                let c = run_contacts(Some(up), width, a0, a1);
                for (unsure, qx) in [(c.unsure_right, a1), (c.unsure_left, a0.wrapping_sub(1))] {
                    if unsure {
                        if at(qx, y - 1) == at(a0, y) {
                            same += 1;
                        } else {
                            other += 1;
                        }
                    }
                }
            }
        }
        (same, other)
    }
}
