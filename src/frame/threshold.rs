//! Grey → binary thresholding, bit-exact with OpenCV so that our component tables can be compared
//! with `cv2.connectedComponentsWithStats` run on an OpenCV-thresholded image.
//!
//! - `fixed:T`: foreground = grey > T (`THRESH_BINARY`).
//! - `otsu`: the threshold `THRESH_OTSU` picks (same histogram arithmetic and tie-breaking), then `fixed`.
//! - `adaptive:W:C`: foreground = grey > mean of the W×W window − C
//!   (`adaptiveThreshold(.., ADAPTIVE_THRESH_MEAN_C, THRESH_BINARY, W, C)`, borders replicated,
//!   the mean rounded to the nearest integer, C rounded up as OpenCV does).
//! - `invert`: the exact complement (dark markers on a light background). That is OpenCV's
//!   `THRESH_BINARY_INV` for fixed and Otsu, and for adaptive with an integer C (OpenCV rounds a
//!   fractional C down instead of up for `THRESH_BINARY_INV`, so it is not a complement there).
//!
//! OpenCV's box filter rounds the window mean three ways (fixed point for W ≤ 15, float32 in its
//! SIMD loop and double elsewhere for larger W). All three equal the exact rounding for every
//! possible window sum when W ≤ 163; for W ≥ 165 its float32 path is off by one for a few sums in
//! a million. We use the exact rounding (OpenCV's double path), so a W ≥ 165 window can differ
//! from OpenCV in rare pixels.

use crate::error::{Error, Result};
use crate::frame::image::{BinaryImage, GrayImage};
use rayon::prelude::*;
use std::fmt;
use std::str::FromStr;

/// Largest adaptive window: window sums plus rounding stay within u32.
pub const MAX_ADAPTIVE_WINDOW: u32 = 4095;

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum ThresholdSpec {
    /// Foreground = grey > T.
    Fixed(u8),
    /// Foreground = grey > the Otsu threshold of the image.
    #[default]
    Otsu,
    /// Foreground = grey > mean of the `window`×`window` neighbourhood − `c`.
    Adaptive { window: u32, c: f64 },
}

impl fmt::Display for ThresholdSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThresholdSpec::Fixed(t) => write!(f, "fixed:{t}"),
            ThresholdSpec::Otsu => f.write_str("otsu"),
            ThresholdSpec::Adaptive { window, c } => write!(f, "adaptive:{window}:{c}"),
        }
    }
}

impl FromStr for ThresholdSpec {
    type Err = Error;

    fn from_str(spec: &str) -> Result<Self> {
        let bad = |why: String| Error::InvalidThreshold {
            spec: spec.to_string(),
            why,
        };
        let lower = spec.trim().to_ascii_lowercase();
        let parts: Vec<&str> = lower.split(':').map(str::trim).collect();
        match parts.as_slice() {
            ["otsu"] => Ok(ThresholdSpec::Otsu),
            ["fixed", t] => {
                let t: u32 = t
                    .parse()
                    .map_err(|_| bad(format!("T must be an integer in 0..=255, got '{t}'")))?;
                let t =
                    u8::try_from(t).map_err(|_| bad(format!("T must be in 0..=255, got {t}")))?;
                Ok(ThresholdSpec::Fixed(t))
            }
            ["adaptive", w, c] => {
                let window: u32 = w
                    .parse()
                    .map_err(|_| bad(format!("W must be an odd integer >= 3, got '{w}'")))?;
                if window < 3 || window % 2 == 0 || window > MAX_ADAPTIVE_WINDOW {
                    return Err(bad(format!(
                        "W must be odd and in 3..={MAX_ADAPTIVE_WINDOW}, got {window}"
                    )));
                }
                let c: f64 = c
                    .parse()
                    .map_err(|_| bad(format!("C must be a number, got '{c}'")))?;
                if !c.is_finite() {
                    return Err(bad(format!("C must be a finite number, got {c}")));
                }
                Ok(ThresholdSpec::Adaptive { window, c })
            }
            ["fixed"] => Err(bad("fixed needs a value: fixed:T".into())),
            ["adaptive", ..] => Err(bad(
                "adaptive needs a window and a constant: adaptive:W:C".into()
            )),
            _ => Err(bad("unknown method".into())),
        }
    }
}

impl ThresholdSpec {
    /// The one level a global method compares every pixel with (foreground = grey > level): the
    /// fixed value, or the one found from the frame (its histogram, for Otsu); None for a local
    /// method, which has a level per pixel. `binarize` applies it in one pass.
    pub fn global_level(&self, image: &GrayImage) -> Option<u8> {
        match *self {
            ThresholdSpec::Fixed(t) => Some(t),
            ThresholdSpec::Otsu => Some(otsu_threshold(image)),
            ThresholdSpec::Adaptive { .. } => None,
        }
    }
}

/// Thresholds `image` by `spec`; `invert` returns the complement (dark markers on light ground).
pub fn apply(image: &GrayImage, spec: &ThresholdSpec, invert: bool) -> Result<BinaryImage> {
    let data = match *spec {
        ThresholdSpec::Fixed(t) => fixed(&image.data, t, invert),
        ThresholdSpec::Otsu => fixed(&image.data, otsu_threshold(image), invert),
        ThresholdSpec::Adaptive { window, c } => adaptive_mean(image, window, c, invert)?,
    };
    Ok(BinaryImage {
        width: image.width,
        height: image.height,
        data,
    })
}

fn fixed(grey: &[u8], t: u8, invert: bool) -> Vec<u8> {
    let flip = invert as u8;
    let mut out = vec![0u8; grey.len()];
    // Plain zipped loops over chunks: the compiler vectorizes the compare.
    out.par_chunks_mut(1 << 16)
        .zip(grey.par_chunks(1 << 16))
        .for_each(|(o, g)| {
            for (o, &v) in o.iter_mut().zip(g) {
                *o = (v > t) as u8 ^ flip;
            }
        });
    out
}

/// The threshold OpenCV's `THRESH_OTSU` picks for an 8-bit image: the first grey level that
/// maximises the between-class variance, with OpenCV's exact floating-point steps (including
/// skipping levels where either class weight is within FLT_EPSILON of 0 or 1). 0 for a flat image.
pub fn otsu_threshold(image: &GrayImage) -> u8 {
    otsu_from_histogram(&histogram(&image.data))
}

/// 256-bin histogram, counted in parallel over bands of rows (see `binarize::histogram`).
pub fn histogram(grey: &[u8]) -> [u64; 256] {
    crate::frame::binarize::histogram(grey)
}

/// OpenCV's `getThreshVal_Otsu` on a histogram, step for step.
pub fn otsu_from_histogram(h: &[u64; 256]) -> u8 {
    let total: u64 = h.iter().sum();
    if total == 0 {
        return 0;
    }
    let scale = 1.0 / total as f64;
    let mut mu = 0.0f64;
    for (i, &n) in h.iter().enumerate() {
        mu += i as f64 * n as f64;
    }
    mu *= scale;
    let eps = f32::EPSILON as f64;
    let (mut mu1, mut q1) = (0.0f64, 0.0f64);
    let (mut max_sigma, mut max_val) = (0.0f64, 0u8);
    for (i, &n) in h.iter().enumerate() {
        let p_i = n as f64 * scale;
        // OpenCV scales mu1 back by the old q1 before testing the weights; keep that order.
        mu1 *= q1;
        q1 += p_i;
        let q2 = 1.0 - q1;
        if q1.min(q2) < eps || q1.max(q2) > 1.0 - eps {
            continue;
        }
        mu1 = (mu1 + i as f64 * p_i) / q1;
        let mu2 = (mu - q1 * mu1) / q2;
        let sigma = q1 * q2 * (mu1 - mu2) * (mu1 - mu2);
        if sigma > max_sigma {
            max_sigma = sigma;
            max_val = i as u8;
        }
    }
    max_val
}

/// Mean-C adaptive threshold with replicated borders, as OpenCV computes it.
///
/// Horizontal window sums per row, then vertical running sums over row bands (each band starts
/// its own column sums), so the cost per pixel is a few additions, independent of W.
fn adaptive_mean(image: &GrayImage, window: u32, c: f64, invert: bool) -> Result<Vec<u8>> {
    if window < 3 || window % 2 == 0 || window > MAX_ADAPTIVE_WINDOW || !c.is_finite() {
        return Err(Error::InvalidThreshold {
            spec: ThresholdSpec::Adaptive { window, c }.to_string(),
            why: format!("W must be odd and in 3..={MAX_ADAPTIVE_WINDOW}, C finite"),
        });
    }
    let (w, h) = (image.width as usize, image.height as usize);
    let r = (window / 2) as usize;
    let area = window as u64 * window as u64;

    // OpenCV: foreground iff src - mean > -ceil(C), with mean = round(sum / area).
    // mean < src + idelta  ⟺  sum + (area-1)/2 < (src + idelta) · area, so no division per pixel.
    let idelta = c.ceil().clamp(-1000.0, 1000.0) as i64;
    let half = (area - 1) / 2;
    let mut limit = [0u64; 256];
    for (v, l) in limit.iter_mut().enumerate() {
        *l = (v as i64 + idelta).clamp(0, 256) as u64 * area;
    }

    // Horizontal sums: hsum[y][x] = Σ_{|k| <= r} grey[y][clamp(x + k)].
    let mut hsum = vec![0u32; w * h];
    hsum.par_chunks_mut(w)
        .zip(image.data.par_chunks(w))
        .for_each(|(out, row)| row_window_sums(row, r, out));

    let band_rows = (4 * window as usize).max(64);
    let flip = invert as u8;
    let mut out = vec![0u8; w * h];
    out.par_chunks_mut(band_rows * w)
        .enumerate()
        .for_each(|(band, out_band)| {
            let y0 = band * band_rows;
            let rows = out_band.len() / w;
            let row = |y: isize| -> &[u32] {
                let y = y.clamp(0, h as isize - 1) as usize;
                &hsum[y * w..(y + 1) * w]
            };
            // Column sums for the first row of the band.
            let mut col = vec![0u32; w];
            for k in -(r as isize)..=(r as isize) {
                for (s, &v) in col.iter_mut().zip(row(y0 as isize + k)) {
                    *s += v;
                }
            }
            for dy in 0..rows {
                let y = y0 + dy;
                let grey = &image.data[y * w..(y + 1) * w];
                for ((o, &s), &g) in out_band[dy * w..(dy + 1) * w]
                    .iter_mut()
                    .zip(&col)
                    .zip(grey)
                {
                    *o = ((s as u64 + half) < limit[g as usize]) as u8 ^ flip;
                }
                if dy + 1 < rows {
                    let add = row(y as isize + r as isize + 1);
                    let sub = row(y as isize - r as isize);
                    for ((s, &a), &b) in col.iter_mut().zip(add).zip(sub) {
                        *s = *s + a - b;
                    }
                }
            }
        });
    Ok(out)
}

/// Window sums along one row with the edge pixels replicated.
#[allow(clippy::needless_range_loop)] // x indexes three arrays at different offsets
fn row_window_sums(row: &[u8], r: usize, out: &mut [u32]) {
    let w = row.len();
    let at = |x: isize| row[x.clamp(0, w as isize - 1) as usize] as u32;
    let mut s: u32 = (-(r as isize)..=(r as isize)).map(at).sum();
    out[0] = s;
    // Window [x - r, x + r] moves right: add x + r, drop x - r - 1. Clamp only near the edges:
    // x < x1 drops row[0], x >= x2 adds row[w - 1].
    let x1 = (r + 1).min(w);
    let x2 = w.saturating_sub(r).max(x1);
    for x in 1..x1 {
        s = s + at((x + r) as isize) - row[0] as u32;
        out[x] = s;
    }
    for x in x1..x2 {
        s = s + row[x + r] as u32 - row[x - r - 1] as u32;
        out[x] = s;
    }
    for x in x2..w {
        s = s + row[w - 1] as u32 - row[x - r - 1] as u32;
        out[x] = s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grey(w: u32, h: u32, f: impl Fn(u32, u32) -> u8) -> GrayImage {
        let data = (0..h)
            .flat_map(|y| (0..w).map(move |x| (x, y)))
            .map(|(x, y)| f(x, y))
            .collect();
        GrayImage::new(w, h, data).unwrap()
    }

    /// Straightforward mean-C reference: clamp every window coordinate, exact rounding.
    fn adaptive_reference(img: &GrayImage, window: u32, c: f64) -> Vec<u8> {
        let (w, h, r) = (img.width as i64, img.height as i64, (window / 2) as i64);
        let area = (window * window) as i64;
        let mut out = Vec::new();
        for y in 0..h {
            for x in 0..w {
                let mut s = 0i64;
                for dy in -r..=r {
                    for dx in -r..=r {
                        let (xx, yy) = ((x + dx).clamp(0, w - 1), (y + dy).clamp(0, h - 1));
                        s += img.data[(yy * w + xx) as usize] as i64;
                    }
                }
                let mean = (2 * s + area) / (2 * area);
                let src = img.data[(y * w + x) as usize] as i64;
                out.push((src - mean > -(c.ceil() as i64)) as u8);
            }
        }
        out
    }

    #[test]
    fn parses_specs() {
        assert_eq!(
            "fixed:127".parse::<ThresholdSpec>().unwrap(),
            ThresholdSpec::Fixed(127)
        );
        assert_eq!(
            " OTSU ".parse::<ThresholdSpec>().unwrap(),
            ThresholdSpec::Otsu
        );
        assert_eq!(
            "adaptive:11:2".parse::<ThresholdSpec>().unwrap(),
            ThresholdSpec::Adaptive { window: 11, c: 2.0 }
        );
        assert_eq!(
            "adaptive:3:-2.5".parse::<ThresholdSpec>().unwrap(),
            ThresholdSpec::Adaptive { window: 3, c: -2.5 }
        );
        for s in ["fixed:127", "otsu", "adaptive:11:2", "adaptive:31:-4.5"] {
            let spec: ThresholdSpec = s.parse().unwrap();
            assert_eq!(spec.to_string().parse::<ThresholdSpec>().unwrap(), spec);
        }
    }

    #[test]
    fn rejects_bad_specs_with_clear_messages() {
        for (s, needle) in [
            ("", "unknown method"),
            ("median", "unknown method"),
            ("fixed", "fixed:T"),
            ("fixed:256", "0..=255"),
            ("fixed:-1", "0..=255"),
            ("fixed:abc", "0..=255"),
            ("adaptive:4:2", "odd"),
            ("adaptive:1:2", "odd"),
            ("adaptive:11", "adaptive:W:C"),
            ("adaptive:11:x", "C must be a number"),
            ("adaptive:11:inf", "finite"),
            ("adaptive:99999:2", "odd"),
            ("otsu:3", "unknown method"),
        ] {
            let err = s.parse::<ThresholdSpec>().unwrap_err();
            assert!(matches!(err, Error::InvalidThreshold { .. }), "{s}: {err}");
            let msg = err.to_string();
            assert!(msg.contains(needle), "'{s}' -> {msg}");
            assert!(
                msg.contains(&format!("'{s}'")),
                "message names the spec: {msg}"
            );
        }
    }

    #[test]
    fn fixed_is_strictly_greater_and_invert_is_the_complement() {
        let img = grey(256, 1, |x, _| x as u8);
        let b = apply(&img, &ThresholdSpec::Fixed(100), false).unwrap();
        assert!(b.data[..=100].iter().all(|&v| v == 0));
        assert!(b.data[101..].iter().all(|&v| v == 1));
        let inv = apply(&img, &ThresholdSpec::Fixed(100), true).unwrap();
        assert!(b.data.iter().zip(&inv.data).all(|(a, b)| a ^ b == 1));
        assert_eq!(
            apply(&img, &ThresholdSpec::Fixed(255), false)
                .unwrap()
                .foreground_count(),
            0
        );
    }

    #[test]
    fn otsu_splits_two_levels_and_is_zero_on_flat_images() {
        // Two levels: any t in [lo, hi) separates them; OpenCV keeps the first maximum, lo.
        let img = grey(10, 10, |x, _| if x < 5 { 40 } else { 200 });
        assert_eq!(otsu_threshold(&img), 40);
        assert_eq!(otsu_threshold(&grey(7, 3, |_, _| 90)), 0);
        let b = apply(&img, &ThresholdSpec::Otsu, false).unwrap();
        assert_eq!(b.foreground_count(), 50);
    }

    #[test]
    fn otsu_matches_known_opencv_values() {
        // cv2.threshold(np.arange(256, dtype=np.uint8)[None], 0, 255, THRESH_OTSU)[0] == 127
        assert_eq!(otsu_threshold(&grey(256, 1, |x, _| x as u8)), 127);
    }

    #[test]
    fn adaptive_matches_the_direct_definition() {
        let mut seed = 12345u32;
        let mut next = move || {
            seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
            (seed >> 24) as u8
        };
        for (w, h) in [(1, 1), (1, 9), (9, 1), (5, 4), (37, 23), (70, 3)] {
            let data: Vec<u8> = (0..w * h).map(|_| next()).collect();
            let img = GrayImage::new(w, h, data).unwrap();
            for window in [3, 5, 7, 15, 17, 41] {
                for c in [0.0, 2.0, -3.0, 2.5, 300.0] {
                    let spec = ThresholdSpec::Adaptive { window, c };
                    let got = apply(&img, &spec, false).unwrap();
                    assert_eq!(
                        got.data,
                        adaptive_reference(&img, window, c),
                        "{w}x{h} {spec}"
                    );
                    let inv = apply(&img, &spec, true).unwrap();
                    assert!(got.data.iter().zip(&inv.data).all(|(a, b)| a ^ b == 1));
                }
            }
        }
    }

    #[test]
    fn adaptive_bands_agree_on_tall_images() {
        // Taller than several bands so that band starts are exercised.
        let img = grey(13, 700, |x, y| {
            ((x * 31 + y * 17 + (x * y) % 7) % 256) as u8
        });
        for window in [3, 9, 31] {
            let spec = ThresholdSpec::Adaptive { window, c: 1.0 };
            assert_eq!(
                apply(&img, &spec, false).unwrap().data,
                adaptive_reference(&img, window, 1.0)
            );
        }
    }
}
