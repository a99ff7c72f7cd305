//! The level a pixel is compared with: one global level from the histogram (`fixed`, `otsu`,
//! `triangle`, `background`), or one per pixel for `adaptive` (`ThresholdLevels`).

use super::spec::{check_adaptive, ThresholdSpec};
use crate::error::{Error, Result};
use crate::frame::image::{BinaryImage, GrayImage};
use rayon::prelude::*;

/// The one level the whole image is compared with: foreground = grey > level, or grey ≤ level
/// with `invert`. None for `adaptive`, whose level differs from pixel to pixel.
pub fn global_level(image: &GrayImage, spec: &ThresholdSpec, invert: bool) -> Option<u8> {
    match *spec {
        ThresholdSpec::Fixed(t) => Some(t),
        ThresholdSpec::Adaptive { .. } => None,
        _ => Some(level_from_histogram(&histogram(&image.data), spec, invert)?),
    }
}

/// `global_level` from the image's histogram (None for `adaptive`).
pub fn level_from_histogram(h: &[u64; 256], spec: &ThresholdSpec, invert: bool) -> Option<u8> {
    match *spec {
        ThresholdSpec::Fixed(t) => Some(t),
        ThresholdSpec::Otsu => Some(otsu_from_histogram(h)),
        ThresholdSpec::Triangle => Some(triangle_from_histogram(h)),
        ThresholdSpec::Background { k } => Some(background_from_histogram(h, k, invert)),
        ThresholdSpec::Adaptive { .. } => None,
    }
}

/// The threshold OpenCV's `THRESH_OTSU` picks for an 8-bit image: the first grey level that
/// maximises the between-class variance, with OpenCV's exact floating-point steps (including
/// skipping levels where either class weight is within FLT_EPSILON of 0 or 1). 0 for a flat image.
pub fn otsu_threshold(image: &GrayImage) -> u8 {
    otsu_from_histogram(&histogram(&image.data))
}

/// 256-bin histogram of a frame (Otsu and the other histogram methods): rayon over bands of
/// rows, each counted into four interleaved tables (so that neighbouring pixels of one grey
/// level, common on a marker frame's background, do not wait on each other's increments), then
/// merged.
pub fn histogram(grey: &[u8]) -> [u64; 256] {
    let count = |chunk: &[u8]| {
        let mut h = [[0u32; 256]; 4];
        let mut quads = chunk.chunks_exact(4);
        for q in &mut quads {
            h[0][q[0] as usize] += 1;
            h[1][q[1] as usize] += 1;
            h[2][q[2] as usize] += 1;
            h[3][q[3] as usize] += 1;
        }
        for &v in quads.remainder() {
            h[0][v as usize] += 1;
        }
        let mut total = [0u64; 256];
        for (i, t) in total.iter_mut().enumerate() {
            *t = h.iter().map(|h| h[i] as u64).sum();
        }
        total
    };
    // Chunks of at most 2^20 pixels keep the u32 counters far from overflowing.
    let chunk = (grey.len() / (4 * rayon::current_num_threads()).max(1)).clamp(1 << 16, 1 << 20);
    if grey.len() <= chunk {
        return count(grey);
    }
    grey.par_chunks(chunk).map(count).reduce(
        || [0u64; 256],
        |mut a, b| {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
            a
        },
    )
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

/// scikit-image's `threshold_triangle` on a uint8 image with histogram `h`, step for step
/// (see the module docs); 0 for an empty histogram.
pub fn triangle_from_histogram(h: &[u64; 256]) -> u8 {
    let (Some(low), Some(high)) = (
        h.iter().position(|&n| n > 0),
        h.iter().rposition(|&n| n > 0),
    ) else {
        return 0;
    };
    if low == high {
        return low as u8;
    }
    // The first fullest bin, as np.argmax.
    let peak = (0..256).fold(0, |best, i| if h[i] > h[best] { i } else { best });
    let peak_height = h[peak];
    // Mirror when the tail below the peak is the shorter one: index j of the mirrored
    // histogram is level 255 − j (scikit-image mirrors its min..=max histogram; same bins).
    let flip = peak - low < high - peak;
    let at = |j: usize| if flip { h[255 - j] } else { h[j] };
    let (low, peak) = if flip {
        (255 - high, 255 - peak)
    } else {
        (low, peak)
    };
    let width = (peak - low) as u64;
    // The distance below the line from (low, h[low]) to (peak, peak_height), up to a constant
    // and a common factor, with scikit-image's normalisation and float64 steps.
    let norm =
        ((peak_height as u128 * peak_height as u128 + (width * width) as u128) as f64).sqrt();
    let (ph, w) = (peak_height as f64 / norm, width as f64 / norm);
    let mut best = (f64::NEG_INFINITY, 0usize);
    for x in 0..width as usize {
        let length = ph * x as f64 - w * at(x + low) as f64;
        if length > best.0 {
            best = (length, x);
        }
    }
    let level = best.1 + low;
    (if flip { 255 - level } else { level }) as u8
}

/// The `background:K` level (see the module docs): foreground = grey > level, or with
/// `invert` grey ≤ level. 0 for an empty histogram.
pub fn background_from_histogram(h: &[u64; 256], k: f64, invert: bool) -> u8 {
    let at = |v: usize| if invert { h[255 - v] } else { h[v] };
    let total: u64 = h.iter().sum();
    if total == 0 {
        return 0;
    }
    // The median: the smallest level with at least half of the pixels at or below it.
    let mut below = 0u64;
    let mut median = 255;
    for v in 0..256 {
        below += at(v);
        if 2 * below >= total {
            median = v;
            break;
        }
    }
    // The median distance below it, over the pixels at or below it.
    // (Levels median − d ..= median; d never passes median, where they hold all of `below`.)
    let (mut within, mut d) = (0u64, 0);
    loop {
        within += at(median - d);
        if 2 * within >= below {
            break;
        }
        d += 1;
    }
    let sigma = 1.4826 * d as f64;
    let level = (median as f64 + k * sigma).floor().min(255.0);
    if invert {
        // Foreground = 255 − grey > level, i.e. grey ≤ 254 − level.
        (254.0 - level).max(0.0) as u8
    } else {
        level as u8
    }
}

/// The threshold each pixel was compared with: one level for `fixed`, `otsu`, `triangle` and
/// `background`, a per-pixel level for `adaptive` (the window mean − C, as `threshold::apply`
/// computes it).
#[derive(Clone, Debug, PartialEq)]
pub enum ThresholdLevels {
    Global(u8),
    /// Row-major, one level per pixel; foreground = grey > level (may lie outside 0..=255).
    Local {
        width: u32,
        height: u32,
        levels: Vec<i32>,
    },
}

impl ThresholdLevels {
    /// The levels `threshold::apply(grey, spec, invert)` compares with (`invert` matters to
    /// `background`, which measures from the side away from the markers).
    pub fn compute(grey: &GrayImage, spec: &ThresholdSpec, invert: bool) -> Result<Self> {
        match (global_level(grey, spec, invert), *spec) {
            (Some(t), _) => Ok(ThresholdLevels::Global(t)),
            (None, ThresholdSpec::Adaptive { window, c }) => adaptive_levels(grey, window, c),
            (None, other) => Err(Error::InvalidThreshold {
                spec: other.to_string(),
                why: "no threshold level for this image".into(),
            }),
        }
    }

    /// The mask these levels give: foreground = grey > level (grey ≤ level with `invert`),
    /// exactly what `threshold::apply` returns for the spec the levels were computed from.
    pub fn mask(&self, grey: &GrayImage, invert: bool) -> Result<BinaryImage> {
        match self {
            ThresholdLevels::Global(t) => super::apply(grey, &ThresholdSpec::Fixed(*t), invert),
            ThresholdLevels::Local { levels, .. } => {
                self.check_covers(grey)?;
                let flip = invert as u8;
                let mut data = vec![0u8; grey.len()];
                data.par_chunks_mut(1 << 16)
                    .zip(grey.data.par_chunks(1 << 16))
                    .zip(levels.par_chunks(1 << 16))
                    .for_each(|((o, g), l)| {
                        for ((o, &v), &lv) in o.iter_mut().zip(g).zip(l) {
                            *o = ((v as i32) > lv) as u8 ^ flip;
                        }
                    });
                Ok(BinaryImage {
                    width: grey.width,
                    height: grey.height,
                    data,
                })
            }
        }
    }

    /// The level of pixel `i` (row-major index).
    #[inline]
    pub fn level(&self, i: usize) -> i32 {
        match self {
            ThresholdLevels::Global(t) => *t as i32,
            ThresholdLevels::Local { levels, .. } => levels[i],
        }
    }

    /// Per-pixel levels must cover the grey frame exactly.
    pub fn check_covers(&self, grey: &GrayImage) -> Result<()> {
        let size = |w: u32, h: u32| format!("{w}x{h}");
        if let ThresholdLevels::Local {
            width,
            height,
            levels,
        } = self
        {
            if (*width, *height) != (grey.width, grey.height) || levels.len() != grey.len() {
                return Err(Error::Invalid(format!(
                    "sub-pixel centroid: the threshold levels are {} but the grey frame is {}",
                    size(*width, *height),
                    size(grey.width, grey.height)
                )));
            }
        }
        Ok(())
    }
}

/// Per-pixel adaptive levels: round(mean of the W×W window, borders replicated) − ceil(C),
/// so that grey > level ⟺ `threshold::apply` marks the pixel (see `threshold`).
fn adaptive_levels(grey: &GrayImage, window: u32, c: f64) -> Result<ThresholdLevels> {
    check_adaptive(window, c)?;
    let (w, h) = (grey.width as usize, grey.height as usize);
    let r = (window / 2) as isize;
    let area = window as u64 * window as u64;
    let idelta = c.ceil().clamp(-1000.0, 1000.0) as i32;
    let clamp = |v: isize, n: usize| v.clamp(0, n as isize - 1) as usize;

    // Horizontal window sums per row, then vertical sums of those (u32 holds 4095² × 255).
    let mut hsum = vec![0u32; w * h];
    hsum.par_chunks_mut(w)
        .zip(grey.data.par_chunks(w))
        .for_each(|(out, row)| {
            let mut s: u32 = (-r..=r).map(|k| row[clamp(k, w)] as u32).sum();
            for (x, o) in out.iter_mut().enumerate() {
                *o = s;
                let x = x as isize;
                s = s + row[clamp(x + r + 1, w)] as u32 - row[clamp(x - r, w)] as u32;
            }
        });
    let mut levels = vec![0i32; w * h];
    levels.par_chunks_mut(w).enumerate().for_each(|(y, out)| {
        let y = y as isize;
        for (x, o) in out.iter_mut().enumerate() {
            let sum: u64 = (-r..=r).map(|k| hsum[clamp(y + k, h) * w + x] as u64).sum();
            // area is odd, so there are no ties: round(sum / area) = ⌊(sum + ⌊area/2⌋) / area⌋.
            let mean = ((sum + area / 2) / area) as i32;
            *o = mean - idelta;
        }
    });
    Ok(ThresholdLevels::Local {
        width: grey.width,
        height: grey.height,
        levels,
    })
}

#[cfg(test)]
mod tests {
    use super::super::apply;
    use super::super::tests::grey;
    use super::*;

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

    /// A histogram from (level, count) pairs.
    fn hist(pairs: impl IntoIterator<Item = (usize, u64)>) -> [u64; 256] {
        let mut h = [0u64; 256];
        for (v, n) in pairs {
            h[v] += n;
        }
        h
    }

    fn mirrored(h: &[u64; 256]) -> [u64; 256] {
        let mut m = *h;
        m.reverse();
        m
    }

    /// The image whose histogram is `h` (levels in order).
    fn image_of(h: &[u64; 256]) -> GrayImage {
        let data: Vec<u8> = (0..256)
            .flat_map(|v| std::iter::repeat_n(v as u8, h[v] as usize))
            .collect();
        GrayImage::new(data.len() as u32, 1, data).unwrap()
    }

    /// Histograms of `skimage_reference_histograms` (same generator in the comment there).
    fn generated_histogram(t: u64) -> [u64; 256] {
        let mut state = t + 1;
        let mut r = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            state >> 33
        };
        let lo = r() % 100;
        let hi = 150 + r() % 106;
        let p = lo + r() % (hi - lo + 1);
        let mut h = [0u64; 256];
        for v in lo..=hi {
            let mut c = r() % 50;
            if v.abs_diff(p) < 10 {
                c += 1000 - 90 * v.abs_diff(p);
            }
            if r() % 7 == 0 {
                c = 0;
            }
            h[v as usize] = c;
        }
        h
    }

    #[test]
    fn triangle_matches_scikit_image() {
        // int(skimage.filters.threshold_triangle(np.repeat(np.arange(256, dtype=np.uint8), h)))
        // with scikit-image 0.26.0, for the histograms below.
        let one_peak = hist(
            [(38, 300), (39, 600), (40, 1000), (41, 600), (42, 300)]
                .into_iter()
                .chain((43..=200).map(|v| (v, 5))),
        );
        let bimodal = hist((0..256usize).map(|v| {
            let a = 500u64.saturating_sub(40 * v.abs_diff(60) as u64);
            let b = 300u64.saturating_sub(30 * v.abs_diff(180) as u64);
            (v, a + b)
        }));
        let cases = [
            ("one peak, bright tail", one_peak, 43),
            ("one peak, dark tail", mirrored(&one_peak), 212),
            ("bimodal", bimodal, 73),
            ("two levels", hist([(30, 700), (220, 300)]), 31),
            ("ramp", hist((0..256).map(|v| (v, 1))), 1),
            ("constant", hist([(90, 50)]), 90),
            ("all 255", hist([(255, 50)]), 255),
            ("all 0", hist([(0, 50)]), 0),
        ];
        for (what, h, want) in cases {
            assert_eq!(triangle_from_histogram(&h), want, "{what}");
            let img = image_of(&h);
            assert_eq!(
                global_level(&img, &ThresholdSpec::Triangle, false),
                Some(want)
            );
        }
        // Ragged histograms with gaps, from the generator in `generated_histogram` (the same
        // LCG in numpy gives the same histograms).
        let want = [
            113, 99, 112, 134, 148, 182, 193, 77, 196, 47, 150, 198, 122, 79, 73, 143, 179, 111,
            162, 162, 120, 95, 123, 66, 149, 212, 137, 154, 152, 79, 97, 146, 150, 209, 72, 80,
            139, 115, 103, 178,
        ];
        for (t, &w) in want.iter().enumerate() {
            assert_eq!(
                triangle_from_histogram(&generated_histogram(t as u64)),
                w,
                "histogram {t}"
            );
        }
        assert_eq!(triangle_from_histogram(&[0; 256]), 0, "empty");
    }

    #[test]
    fn triangle_splits_markers_from_the_background_and_inverts_as_the_complement() {
        let img = grey(40, 10, |x, y| {
            if x < 4 && y < 4 {
                230
            } else {
                40 + (x % 3) as u8
            }
        });
        let t = global_level(&img, &ThresholdSpec::Triangle, false).unwrap();
        assert!((42..230).contains(&t), "{t}");
        let b = apply(&img, &ThresholdSpec::Triangle, false).unwrap();
        assert_eq!(b.foreground_count(), 16);
        let inv = apply(&img, &ThresholdSpec::Triangle, true).unwrap();
        assert!(b.data.iter().zip(&inv.data).all(|(a, b)| a ^ b == 1));
    }

    #[test]
    fn background_level_on_crafted_histograms() {
        // Uniform noise 24..=56 (100 each) and 50 marker pixels at 230: median 40, half of the
        // 1700 pixels at or below it lie within 8 levels (32..=40), σ = 1.4826 · 8.
        let noise = hist((24..=56).map(|v| (v, 100)).chain([(230, 50)]));
        let sigma: f64 = 1.4826 * 8.0;
        for k in [0.0, 1.0, 2.5, 5.0, 10.0] {
            let want = (40.0 + k * sigma).floor() as u8;
            assert_eq!(background_from_histogram(&noise, k, false), want, "k {k}");
            // Dark markers on a light ground: the mirror image, foreground = grey ≤ 254 − level.
            assert_eq!(
                background_from_histogram(&mirrored(&noise), k, true),
                254 - want,
                "k {k}"
            );
        }
        assert_eq!(background_from_histogram(&noise, 5.0, false), 99);
        // Many more marker pixels (15 %) move the median by 3 levels (43) and the spread below
        // it by one (d = 9): 43 + 5 · 1.4826 · 9 = 109.7.
        let busy = hist((24..=56).map(|v| (v, 100)).chain([(230, 600)]));
        assert_eq!(background_from_histogram(&busy, 5.0, false), 109);
        // Large K saturates: nothing is foreground.
        assert_eq!(background_from_histogram(&noise, 100.0, false), 255);
        // Two clean levels: the background level itself, so every brighter pixel is foreground.
        let two = hist([(30, 700), (220, 300)]);
        assert_eq!(background_from_histogram(&two, 5.0, false), 30);
        assert_eq!(background_from_histogram(&mirrored(&two), 5.0, true), 224);
        // Bimodal with the darker mode the larger: measured on that one.
        let bimodal = hist((0..256usize).map(|v| {
            let a = 500u64.saturating_sub(40 * v.abs_diff(60) as u64);
            let b = 300u64.saturating_sub(30 * v.abs_diff(180) as u64);
            (v, a + b)
        }));
        let t = background_from_histogram(&bimodal, 3.0, false);
        assert!((61..171).contains(&t), "{t}");
        // Flat images: nothing is foreground, either way.
        for v in [0usize, 90, 255] {
            let flat = hist([(v, 50)]);
            assert_eq!(background_from_histogram(&flat, 5.0, false), v as u8);
            let img = image_of(&flat);
            let spec = ThresholdSpec::Background { k: 5.0 };
            assert_eq!(apply(&img, &spec, false).unwrap().foreground_count(), 0);
            if v > 0 {
                assert_eq!(apply(&img, &spec, true).unwrap().foreground_count(), 0);
            }
        }
        // A black frame with invert: the level would be below 0; clamped, grey 0 is foreground.
        assert_eq!(background_from_histogram(&hist([(0, 50)]), 5.0, true), 0);
        assert_eq!(background_from_histogram(&[0; 256], 5.0, false), 0, "empty");
    }

    #[test]
    fn background_finds_bright_and_dark_markers() {
        let noisy = |x: u32, y: u32| 40 + ((x * 7 + y * 13) % 17) as u8;
        let marker = |x: u32, y: u32| (10..14).contains(&x) && (5..9).contains(&y);
        let spec = ThresholdSpec::Background { k: 5.0 };
        let bright = grey(64, 16, |x, y| if marker(x, y) { 200 } else { noisy(x, y) });
        assert_eq!(apply(&bright, &spec, false).unwrap().foreground_count(), 16);
        let dark = grey(64, 16, |x, y| {
            if marker(x, y) {
                20
            } else {
                180 + noisy(x, y) - 40
            }
        });
        let mask = apply(&dark, &spec, true).unwrap();
        assert_eq!(mask.foreground_count(), 16);
        assert!((0..16u32).all(|y| (0..64u32).all(|x| mask.get(x, y) == marker(x, y))));
    }

    #[test]
    fn small_markers_on_a_large_frame_defeat_otsu_but_not_the_default() {
        // Uniform noise 24..=56 over 1000×1000 px and four discs of radius 5 at 230: markers
        // are 0.03 % of the pixels, so Otsu's best split is through the noise.
        let mut img = grey(1000, 1000, |x, y| {
            let mut z = (y as u64) << 32 | x as u64;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            24 + ((z ^ (z >> 31)) % 33) as u8
        });
        let mut disc_pixels = 0;
        for (cx, cy) in [(100, 100), (800, 150), (450, 600), (900, 900)] {
            for y in cy - 5..=cy + 5 {
                for x in cx - 5..=cx + 5 {
                    if (x - cx) * (x - cx) + (y - cy) * (y - cy) <= 25 {
                        img.data[(y * 1000 + x) as usize] = 230;
                        disc_pixels += 1;
                    }
                }
            }
        }
        let otsu = apply(&img, &ThresholdSpec::Otsu, false).unwrap();
        assert!(
            otsu.foreground_count() > 100_000,
            "{}",
            otsu.foreground_count()
        );
        let chosen = apply(&img, &ThresholdSpec::default(), false).unwrap();
        assert_eq!(chosen.foreground_count(), disc_pixels);
    }
}
