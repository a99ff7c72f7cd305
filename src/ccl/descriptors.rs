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
//! - perimeter = scikit-image's `regionprops` perimeter (4-neighbourhood): border pixels weighted
//!   1, √2 or (1 + √2)/2 by the arrangement of their border neighbours;
//! - circularity = 4π area / perimeter² (about 1 for a disc, π/4 for a square; small
//!   components can exceed 1).
//!
//! The inputs are exact integers (Σx², Σy², Σxy and the counts of the three kinds of border
//! pixel), so the GPU fills the same `ShapeSums` with integer atomics and compares bit for bit.
//! Σx² < area · width² fits a u128 for every frame (< 2^32 pixels); the GPU's u64 sums are
//! exact up to 65536 pixels per side.

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
    /// Border pixels of weight 1, √2 and (1 + √2)/2 (scikit-image's perimeter classes).
    pub border_straight: u64,
    pub border_diagonal: u64,
    pub border_corner: u64,
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

const SQRT2: f64 = std::f64::consts::SQRT_2;

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
    /// The perimeter from the border pixel counts (scikit-image's weights).
    pub fn perimeter(&self) -> f64 {
        self.border_straight as f64
            + SQRT2 * self.border_diagonal as f64
            + (1.0 + SQRT2) / 2.0 * self.border_corner as f64
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
        let perimeter = self.perimeter();
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

/// How a border pixel counts towards the perimeter, from `code` = 1 + 2 · (border 4-neighbours)
/// + 10 · (border diagonal neighbours) (scikit-image's convolution): 0 straight, 1 diagonal,
/// 2 corner, None for codes that weigh nothing.
#[inline]
pub fn border_class(code: u32) -> Option<usize> {
    match code {
        5 | 7 | 15 | 17 | 25 | 27 => Some(0),
        21 | 33 => Some(1),
        13 | 23 => Some(2),
        _ => None,
    }
}

/// Reads one component's pixels through `is_in(x, y)` (coordinates may lie one or two pixels
/// outside the image or the box: `is_in` says false there).
struct Region<F: Fn(i64, i64) -> bool> {
    is_in: F,
}

impl<F: Fn(i64, i64) -> bool> Region<F> {
    /// In the component with a 4-neighbour outside it (the image edge counts as outside).
    #[inline]
    fn is_border(&self, x: i64, y: i64) -> bool {
        let f = &self.is_in;
        f(x, y) && !(f(x - 1, y) && f(x + 1, y) && f(x, y - 1) && f(x, y + 1))
    }

    /// The perimeter class of pixel (x, y), which must be a border pixel.
    #[inline]
    fn class(&self, x: i64, y: i64) -> Option<usize> {
        let b = |dx, dy| self.is_border(x + dx, y + dy) as u32;
        let n4 = b(-1, 0) + b(1, 0) + b(0, -1) + b(0, 1);
        let nd = b(-1, -1) + b(1, -1) + b(-1, 1) + b(1, 1);
        border_class(1 + 2 * n4 + 10 * nd)
    }
}

/// Shape sums of the `stats` rows `keep` accepts (one output row per accepted row, in order),
/// from `labels` (numbered like `stats`: 1..=N in raster order, what `Want::Both` delivers) in
/// one pass over the image (`sums_by_words`).
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
    let all = sums_by_words(labels, stats.len());
    let mut sums = Vec::with_capacity(kept.len());
    for s in kept {
        let (part, pixels) = &all[s.label as usize - 1];
        if *pixels != s.area {
            return Err(Error::Invalid(format!(
                "shape descriptors: component {} has {pixels} pixels in the label image, its row says {}",
                s.label, s.area
            )));
        }
        sums.push(part.clone());
    }
    Ok(sums)
}

/// Rows per task of `sums_by_words`.
const BAND_ROWS: usize = 16;

/// Partial sums of the components one thread met, indexed by label through `slot`.
struct BandSums {
    /// Entry of label l at `slot[l - 1]` (u32::MAX: none yet).
    slot: Vec<u32>,
    entries: Vec<(ShapeSums, u64)>,
    /// The class masks of the row being summed.
    classes: Vec<[u32; 3]>,
}

impl BandSums {
    fn new(n: usize) -> BandSums {
        BandSums {
            slot: vec![u32::MAX; n],
            entries: Vec::new(),
            classes: Vec::new(),
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

fn add_sums(e: &mut ShapeSums, part: &ShapeSums) {
    e.sum_xx += part.sum_xx;
    e.sum_yy += part.sum_yy;
    e.sum_xy += part.sum_xy;
    e.border_straight += part.border_straight;
    e.border_diagonal += part.border_diagonal;
    e.border_corner += part.border_corner;
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

/// The shape sums and pixel count of every component of `labels` (numbered 1..=n; other values
/// are not counted), as the GPU computes them: the border classes of 32 pixels at a time by bit
/// operations on the foreground mask (`border_class_words`' steps, a row at a time; a diagonal
/// contact through two background pixels decided by the labels), the moments of each run in
/// closed form. Bands of rows on all cores.
fn sums_by_words(labels: &LabelImage, n: usize) -> Vec<(ShapeSums, u64)> {
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
    let mask = PackedBinary {
        width,
        height,
        words_per_row: wpr,
        lock: Default::default(),
        words,
    };
    let row = |y: i64| -> Option<&[u32]> {
        (y >= 0 && y < height as i64).then(|| &mask.words[y as usize * wpr..(y as usize + 1) * wpr])
    };
    let label_at = |x: u32, y: u32| data[y as usize * w + x as usize];
    let nwords = width.div_ceil(32);
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
                for y in rows {
                    let y32 = y as u32;
                    acc.classes.clear();
                    for wi in 0..nwords {
                        let windows: [u64; 5] = std::array::from_fn(|r| {
                            row_window(row(y as i64 + r as i64 - 2), wi, width)
                        });
                        // 4-connectivity's rule with the labels deciding: right for either
                        // connectivity (diagonal neighbours of one 8-component share a label).
                        let mut nb = word_neighbours(&windows, false);
                        for (d, &(dx, dy)) in DIAGONALS.iter().enumerate() {
                            let mut unsure = nb.unsure[d] & nb.border;
                            while unsure != 0 {
                                let b = unsure.trailing_zeros();
                                let x = 32 * wi + b;
                                let (qx, qy) =
                                    ((x as i64 + dx as i64) as u32, (y as i64 + dy as i64) as u32);
                                if label_at(qx, qy) == label_at(x, y32) {
                                    nb.diagonal[d] |= 1 << b;
                                }
                                unsure &= unsure - 1;
                            }
                        }
                        let c = class_masks(&nb);
                        acc.classes.push([c.straight, c.diagonal, c.corner]);
                    }
                    // Runs from the mask's bits (a run is one component: its pixels are
                    // 4-neighbours), each one's label read once.
                    let bits = &mask.words[y * wpr..(y + 1) * wpr];
                    let mut x = 0;
                    while let Some(a0) = next_bit(bits, x, width, true) {
                        let a1 = next_bit(bits, a0, width, false).unwrap_or(width);
                        x = a1;
                        let l = label_at(a0, y32);
                        if l == 0 || l as usize > n {
                            continue;
                        }
                        let mut classes = [0u64; 3];
                        for wi in a0 / 32..=(a1 - 1) / 32 {
                            let bits = run_bits(wi, a0, a1);
                            for (k, c) in classes.iter_mut().enumerate() {
                                *c += (acc.classes[wi as usize][k] & bits).count_ones() as u64;
                            }
                        }
                        let (e, pixels) = acc.entry(l);
                        let (nrun, yy) = ((a1 - a0) as u128, y as u128);
                        let sum_x = (a0 as u128 + a1 as u128 - 1) * nrun / 2;
                        e.sum_xx +=
                            sum_of_squares_below(a1 as u64) - sum_of_squares_below(a0 as u64);
                        e.sum_yy += nrun * yy * yy;
                        e.sum_xy += sum_x * yy;
                        e.border_straight += classes[0];
                        e.border_diagonal += classes[1];
                        e.border_corner += classes[2];
                        *pixels += nrun as u64;
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
            let region = Region {
                is_in: |a: i64, b: i64| at(a, b) == l,
            };
            if region.is_border(x, y) {
                match region.class(x, y) {
                    Some(0) => e.border_straight += 1,
                    Some(1) => e.border_diagonal += 1,
                    Some(_) => e.border_corner += 1,
                    None => {}
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Border classes from the bit-packed mask, 32 pixels at a time: the model of the fused
// accumulation on the GPU (`word_classes` and `run_shape_part` in kernels/flsl.cu mirror these
// functions line by line), proven here against the per-pixel definition.
//
// A border pixel is foreground with a 4-neighbour that is background or outside the image. Its
// foreground 4-neighbours always lie in its own component, so being a border pixel is a matter
// of the mask alone. Its class counts the border pixels *of its component* among its 4- and
// diagonal neighbours: the 4-neighbours are again a matter of the mask; a diagonal neighbour q
// is in the component when one of the two pixels p and q both touch (the shared 4-neighbours)
// is foreground, or always with 8-connectivity. With 4-connectivity and both shared pixels
// background, q may belong to another component (`unsure`): the caller decides by comparing
// components (on the GPU: the roots of the two runs).

/// Word `w` of a packed row (`None`: a row outside the image), 0 outside the row, the bits at
/// or past `width` cleared.
fn mask_word(row: Option<&[u32]>, w: i64, width: u32) -> u32 {
    let nwords = width.div_ceil(32) as i64;
    match row {
        Some(r) if w >= 0 && w < nwords => {
            let m = r[w as usize];
            if w == nwords - 1 && width % 32 != 0 {
                m & ((1u32 << (width % 32)) - 1)
            } else {
                m
            }
        }
        _ => 0,
    }
}

/// Pixels 32w − 2 … 32w + 61 of a packed row as bits 0 … 63 (bit k = pixel 32w − 2 + k), so
/// that the pixels of word w (bits 2 … 33) have both horizontal neighbours in the window, and
/// those neighbours theirs.
pub fn row_window(row: Option<&[u32]>, w: u32, width: u32) -> u64 {
    let w = w as i64;
    (mask_word(row, w - 1, width) >> 30) as u64
        | (mask_word(row, w, width) as u64) << 2
        | (mask_word(row, w + 1, width) as u64) << 34
}

/// Border pixels of the middle row of three windows: foreground and not all four
/// 4-neighbours foreground. Exact at bits 1 … 62 (bits 0 and 63 lack a neighbour).
#[inline]
pub fn border_bits(up: u64, mid: u64, down: u64) -> u64 {
    mid & !((mid << 1) & (mid >> 1) & up & down)
}

/// Diagonal neighbours (dx, dy) in the order of `WordNeighbours::diagonal`.
pub const DIAGONALS: [(i32, i32); 4] = [(-1, -1), (1, -1), (-1, 1), (1, 1)];

/// The neighbourhood of the 32 pixels of one word (bit i = pixel 32w + i).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WordNeighbours {
    /// The pixel is a border pixel.
    pub border: u32,
    /// Its left, right, upper, lower neighbour is a border pixel.
    pub n4: [u32; 4],
    /// Its diagonal neighbour (`DIAGONALS` order) is a border pixel of its component.
    pub diagonal: [u32; 4],
    /// Its diagonal neighbour is a border pixel that may lie in another component (4-connectivity,
    /// both shared 4-neighbours background); not in `diagonal` until the caller decides.
    pub unsure: [u32; 4],
}

/// The neighbourhood of word w of row y from the windows of rows y − 2 … y + 2 (`row_window`).
pub fn word_neighbours(x: &[u64; 5], eight: bool) -> WordNeighbours {
    let up = border_bits(x[0], x[1], x[2]);
    let mid = border_bits(x[1], x[2], x[3]);
    let down = border_bits(x[2], x[3], x[4]);
    // Bits 2 … 33 of a window: the pixels of the word. `v << 1` moves pixel x − 1 to x.
    let word = |v: u64| (v >> 2) as u32;
    let n4 = [word(mid << 1), word(mid >> 1), word(up), word(down)];
    let corner = [
        word(up << 1),
        word(up >> 1),
        word(down << 1),
        word(down >> 1),
    ];
    if eight {
        return WordNeighbours {
            border: word(mid),
            n4,
            diagonal: corner,
            unsure: [0; 4],
        };
    }
    // The shared 4-neighbours of p = (x, y) and q = (x + dx, y + dy): (x + dx, y) and (x, y + dy).
    let shared = [
        word(x[2] << 1) | word(x[1]),
        word(x[2] >> 1) | word(x[1]),
        word(x[2] << 1) | word(x[3]),
        word(x[2] >> 1) | word(x[3]),
    ];
    WordNeighbours {
        border: word(mid),
        n4,
        diagonal: std::array::from_fn(|d| corner[d] & shared[d]),
        unsure: std::array::from_fn(|d| corner[d] & !shared[d]),
    }
}

/// The sum of four masks per bit, as bit planes: count = `planes[0] + 2 planes[1] + 4 planes[2]`
/// (0 … 4). Two half adders, then the carries: at most two of c0, c1, c2 are set (c2 only when
/// each pair holds one bit, so c0 = c1 = 0), so their sum is c0 ^ c1 ^ c2 with a carry c0 & c1.
#[inline]
pub fn count4(m: [u32; 4]) -> [u32; 3] {
    let (t0, c0) = (m[0] ^ m[1], m[0] & m[1]);
    let (t1, c1) = (m[2] ^ m[3], m[2] & m[3]);
    let c2 = t0 & t1;
    [t0 ^ t1, c0 ^ c1 ^ c2, c0 & c1]
}

/// The border pixels of a word by perimeter class (`border_class`): straight n4 ∈ {2, 3} and
/// nd ≤ 2; diagonal (n4, nd) ∈ {(0, 2), (1, 3)}; corner (n4, nd) ∈ {(1, 1), (1, 2)}.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassMasks {
    pub straight: u32,
    pub diagonal: u32,
    pub corner: u32,
}

/// The class masks of a word whose `unsure` neighbours have been decided (`diagonal` complete).
pub fn class_masks(n: &WordNeighbours) -> ClassMasks {
    let [s0, s1, s2] = count4(n.n4);
    let [d0, d1, d2] = count4(n.diagonal);
    let n4_0 = !s2 & !s1 & !s0;
    let n4_1 = !s2 & !s1 & s0;
    let n4_2_or_3 = !s2 & s1;
    let nd_1 = !d2 & !d1 & d0;
    let nd_2 = !d2 & d1 & !d0;
    let nd_3 = !d2 & d1 & d0;
    let nd_at_most_2 = !d2 & !(d1 & d0);
    ClassMasks {
        straight: n.border & n4_2_or_3 & nd_at_most_2,
        diagonal: n.border & ((n4_0 & nd_2) | (n4_1 & nd_3)),
        corner: n.border & n4_1 & (nd_1 | nd_2),
    }
}

/// The bits of word w inside the run [a0, a1) (which must overlap the word).
#[inline]
pub fn run_bits(w: u32, a0: u32, a1: u32) -> u32 {
    let lo = a0.max(32 * w) - 32 * w;
    let hi = a1.min(32 * w + 32) - 32 * w;
    let below_hi = if hi == 32 { u32::MAX } else { (1u32 << hi) - 1 };
    below_hi & !((1u32 << lo) - 1)
}

/// The class masks of every word of the mask, then `shape_sums_of_runs` per run, as on the GPU
/// (where each warp computes the words its runs cover, one lane per word, inside
/// `flsl_accumulate*_shapes`, and counts each run's bits in them). Word w of row y at
/// `y * words_per_row + w`: [straight, diagonal, corner]. `component(x, y)` is the label of a
/// foreground pixel; it decides the `unsure` diagonal neighbours.
pub fn border_class_words(
    mask: &PackedBinary,
    eight: bool,
    component: impl Fn(u32, u32) -> u32,
) -> Vec<[u32; 3]> {
    let (width, height, wpr) = (mask.width, mask.height, mask.words_per_row);
    let row = |y: i64| -> Option<&[u32]> {
        (y >= 0 && y < height as i64).then(|| &mask.words[y as usize * wpr..(y as usize + 1) * wpr])
    };
    let mut classes = vec![[0u32; 3]; wpr * height as usize];
    for y in 0..height {
        for w in 0..width.div_ceil(32) {
            let windows: [u64; 5] =
                std::array::from_fn(|r| row_window(row(y as i64 + r as i64 - 2), w, width));
            let mut nb = word_neighbours(&windows, eight);
            for (d, &(dx, dy)) in DIAGONALS.iter().enumerate() {
                let mut unsure = nb.unsure[d] & nb.border;
                while unsure != 0 {
                    let b = unsure.trailing_zeros();
                    let x = 32 * w + b;
                    let (qx, qy) = (x as i64 + dx as i64, y as i64 + dy as i64);
                    if component(qx as u32, qy as u32) == component(x, y) {
                        nb.diagonal[d] |= 1 << b;
                    }
                    unsure &= unsure - 1;
                }
            }
            let c = class_masks(&nb);
            classes[y as usize * wpr + w as usize] = [c.straight, c.diagonal, c.corner];
        }
    }
    classes
}

/// The shape sums of every component from the bit-packed mask and its runs, one run at a time
/// as the fused GPU accumulation does: moments in closed form, border pixels by class from the
/// masks of `border_class_words`, counted within the run's bits of each word it covers.
/// `component(x, y)` is the label (1 ..= n) of a foreground pixel.
pub fn shape_sums_of_runs(
    mask: &PackedBinary,
    eight: bool,
    n: u32,
    component: impl Fn(u32, u32) -> u32,
) -> Vec<ShapeSums> {
    let (width, height, wpr) = (mask.width, mask.height, mask.words_per_row);
    let classes = border_class_words(mask, eight, &component);
    let mut out: Vec<ShapeSums> = (1..=n)
        .map(|label| ShapeSums {
            label,
            ..ShapeSums::default()
        })
        .collect();
    let is_set =
        |y: u32, x: u32| mask.words[y as usize * wpr + x as usize / 32] >> (x % 32) & 1 == 1;
    for y in 0..height {
        let mut x = 0;
        while x < width {
            if !is_set(y, x) {
                x += 1;
                continue;
            }
            let a0 = x;
            while x < width && is_set(y, x) {
                x += 1;
            }
            let a1 = x;
            let e = &mut out[component(a0, y) as usize - 1];
            let (nrun, yy) = ((a1 - a0) as u128, y as u128);
            let sum_x = (a0 as u128 + a1 as u128 - 1) * nrun / 2;
            e.sum_xx += sum_of_squares_below(a1 as u64) - sum_of_squares_below(a0 as u64);
            e.sum_yy += nrun * yy * yy;
            e.sum_xy += sum_x * yy;
            for w in a0 / 32..=(a1 - 1) / 32 {
                let bits = run_bits(w, a0, a1);
                let [straight, diagonal, corner] = classes[y as usize * wpr + w as usize];
                e.border_straight += (straight & bits).count_ones() as u64;
                e.border_diagonal += (diagonal & bits).count_ones() as u64;
                e.border_corner += (corner & bits).count_ones() as u64;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
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
        // Border pixels: 2·7 + 2·2 straight, the 4 corners (two border 4-neighbours and no
        // border diagonal: code 5) also straight.
        let sums = shape_sums_of(&labels, &stats, &keep_all).unwrap();
        assert_eq!(
            (
                sums[0].border_straight,
                sums[0].border_diagonal,
                sums[0].border_corner
            ),
            (22, 0, 0)
        );
        assert_eq!(d[0].perimeter, 22.0);
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
        // scikit-image's perimeter of a digital disc of radius 20 is about 3 % long: 0.94.
        assert!(d.circularity > 0.9 && d.circularity < 1.05, "{d:?}");
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

    /// The bit-plane class formula gives `border_class` of the code for every (n4, nd).
    #[test]
    fn class_masks_match_the_code_table_for_every_count() {
        for n4 in 0..=4u32 {
            for nd in 0..=4u32 {
                // Pixel 0 of the word with n4 border 4-neighbours and nd diagonal ones.
                let masks = |k: u32| std::array::from_fn(|i| u32::from((i as u32) < k));
                let n = WordNeighbours {
                    border: 1,
                    n4: masks(n4),
                    diagonal: masks(nd),
                    unsure: [0; 4],
                };
                let c = class_masks(&n);
                let got = match (c.straight, c.diagonal, c.corner) {
                    (1, 0, 0) => Some(0),
                    (0, 1, 0) => Some(1),
                    (0, 0, 1) => Some(2),
                    (0, 0, 0) => None,
                    other => panic!("several classes for ({n4}, {nd}): {other:?}"),
                };
                assert_eq!(got, border_class(1 + 2 * n4 + 10 * nd), "n4 {n4}, nd {nd}");
                assert_eq!(count4(masks(n4)), [n4 & 1, n4 >> 1 & 1, n4 >> 2 & 1]);
            }
        }
    }

    /// The word-level model over runs gives the per-pixel sums, both connectivities, on random
    /// masks (odd widths, one row, one column, words split between components) and the
    /// correctness shapes; with 4-connectivity the diagonal contacts between components (the
    /// `unsure` case) occur both ways: same component and another one.
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

    /// Unsure diagonal contacts between border pixels (4-connectivity): (same component, other).
    fn unsure_contacts(mask: &PackedBinary, at: &impl Fn(u32, u32) -> u32) -> (usize, usize) {
        let (width, height) = (mask.width, mask.height);
        let row = |y: i64| {
            (y >= 0 && y < height as i64).then(|| {
                let s = y as usize * mask.words_per_row;
                &mask.words[s..s + mask.words_per_row]
            })
        };
        let (mut same, mut other) = (0, 0);
        for y in 0..height {
            for w in 0..width.div_ceil(32) {
                let x = std::array::from_fn(|r| row_window(row(y as i64 + r as i64 - 2), w, width));
                let nb = word_neighbours(&x, false);
                for (d, &(dx, dy)) in DIAGONALS.iter().enumerate() {
                    let mut u = nb.unsure[d] & nb.border;
                    while u != 0 {
                        let b = u.trailing_zeros();
                        let px = 32 * w + b;
                        let q = at(
                            (px as i64 + dx as i64) as u32,
                            (y as i64 + dy as i64) as u32,
                        );
                        if q == at(px, y) {
                            same += 1;
                        } else {
                            other += 1;
                        }
                        u &= u - 1;
                    }
                }
            }
        }
        (same, other)
    }
}
