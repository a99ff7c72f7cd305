//! Grey → mask in one pass, written straight into the buffers the labeler takes: bit-packed
//! words for GPU algorithms, bytes for CPU ones (or both, when the window shows the mask), and
//! the per-pixel levels when sub-pixel centroids need them. Bit-exact with `threshold::apply`
//! followed by `BinaryImage::pack`.
//!
//! This module applies levels; it does not choose them. A global method's level comes from
//! `threshold::global_level` (its histogram, for Otsu and the like), a local method's levels
//! from wherever they are computed (`per_pixel`); only the mean-C adaptive threshold has its own
//! one-pass form here (running window sums, O(1) per pixel). A new level-finding method plugs in
//! through those two doors.
//!
//! Rows are cut into bands of at least `MIN_BAND_PIXELS` pixels that rayon spreads over the
//! cores; each row is compared 64 pixels at a time (fixed-size arrays, which the compiler
//! vectorises) straight into the byte mask, or into 64 bytes on the stack that are folded into
//! the row's two packed words. The output buffers are resized, not reallocated, so a caller
//! that keeps them from frame to frame allocates nothing.

use super::levels::global_level;
use super::spec::{check_adaptive, ThresholdSpec};
use crate::error::{Error, Result};
use crate::frame::image::{check_size, BinaryImage, GrayImage, PackedBinary};
use rayon::iter::Either;
use rayon::prelude::*;

/// Bands smaller than this are not worth a rayon job.
const MIN_BAND_PIXELS: usize = 1 << 16;

/// Where the mask of a frame goes. Each buffer present is resized to the frame and every pixel
/// (and every padding bit of the packed rows) is written.
#[derive(Default)]
pub struct Outputs<'a> {
    /// One byte per pixel, 0 or 1 (CPU labelers, the window's mask view).
    pub bytes: Option<&'a mut BinaryImage>,
    /// Bit-packed rows (GPU labelers): the layout of `PackedBinary`.
    pub packed: Option<&'a mut PackedBinary>,
    /// The level each pixel was compared with (foreground = grey > level), row-major; filled
    /// only by the local methods (sub-pixel weights need them).
    pub levels: Option<&'a mut Vec<i32>>,
}

/// What a frame was compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// One level for every pixel.
    Global(u8),
    /// One level per pixel, in `Outputs::levels` when it was given.
    PerPixel,
}

/// Thresholds frames into reused buffers. Holds the adaptive threshold's running sums between
/// frames, so that a steady stream of frames of one size allocates nothing.
#[derive(Default)]
pub struct Binarizer {
    /// Per band of the adaptive threshold: the column sums, then the row's window sums.
    sums: Vec<Vec<u32>>,
}

impl Binarizer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Thresholds `grey` by `spec` into `out`. `Ok(None)` for a local method without a one-pass
    /// form here: compute its levels and call `per_pixel` (nothing was written).
    pub fn run(
        &mut self,
        grey: &GrayImage,
        spec: &ThresholdSpec,
        invert: bool,
        out: Outputs<'_>,
    ) -> Result<Option<Applied>> {
        if let Some(level) = global_level(grey, spec, invert) {
            global(grey, level, invert, out)?;
            return Ok(Some(Applied::Global(level)));
        }
        if let ThresholdSpec::Adaptive { window, c } = *spec {
            self.adaptive_mean(grey, window, c, invert, out)?;
            return Ok(Some(Applied::PerPixel));
        }
        Ok(None)
    }

    /// Mean-C adaptive threshold (see `threshold`): foreground = grey > round(mean of the W×W
    /// window, borders replicated) − ceil(C). Per band of rows, vertical window sums per column
    /// slide down one row at a time and each row's horizontal window sums slide across, so a
    /// pixel costs a few additions whatever W. With `out.levels`, the levels are written too
    /// and the mask is made from them.
    pub fn adaptive_mean(
        &mut self,
        grey: &GrayImage,
        window: u32,
        c: f64,
        invert: bool,
        out: Outputs<'_>,
    ) -> Result<()> {
        check_adaptive(window, c)?;
        check_size(grey.width, grey.height)?;
        check_grey(grey)?;
        let (w, h) = (grey.width as usize, grey.height as usize);
        let r = (window / 2) as usize;
        // Window sums + rounding, and the limits, stay below 256 · 4095² < 2³²: u32 throughout.
        let area = window * window;
        let half = area / 2;
        // OpenCV: foreground iff mean < grey + ceil(C), with mean = ⌊(sum + half) / area⌋
        // (area is odd: no ties), i.e. sum + half < (grey + ceil(C)) · area.
        let idelta = mean_c_delta(c);
        let flip = invert as u8;
        let magic = magic_for(area);
        // Each band starts its own column sums (2r + 1 rows): bands of at least 4W rows keep that
        // below a quarter of the work.
        let band_rows = (4 * window as usize)
            .max(64)
            .max(MIN_BAND_PIXELS.div_ceil(w));
        let bands = h.div_ceil(band_rows);
        if self.sums.len() < bands {
            self.sums.resize_with(bands, Vec::new);
        }
        for s in &mut self.sums[..bands] {
            s.resize(2 * w, 0);
        }
        let (bytes, packed, levels) = fit(out, w, h);
        let levels = levels.map(|l| {
            l.resize(w * h, 0);
            l.as_mut_slice()
        });
        let band = AdaptiveBand {
            grey,
            r,
            band_rows,
            half,
            area,
            idelta,
            flip,
            magic,
        };
        let sums = &mut self.sums[..bands];
        let wpr = PackedBinary::words_per_row_for(grey.width);
        if bands == 1 {
            band.run(0, (bytes, packed, levels), &mut sums[0]);
        } else {
            split(bytes, band_rows * w, bands)
                .zip(split(packed, band_rows * wpr, bands))
                .zip(split(levels, band_rows * w, bands))
                .zip(sums.par_iter_mut())
                .enumerate()
                .for_each(|(k, (((bytes, words), levels), sums))| {
                    band.run(k, (bytes, words, levels), sums)
                });
        }
        Ok(())
    }
}

/// The outputs of one band of rows: mask bytes, packed words, levels (each optional).
type BandOutputs<'o> = (
    Option<&'o mut [u8]>,
    Option<&'o mut [u32]>,
    Option<&'o mut [i32]>,
);

/// One band of rows of the mean-C adaptive threshold (`Binarizer::adaptive_mean`).
struct AdaptiveBand<'a> {
    grey: &'a GrayImage,
    /// The window's radius.
    r: usize,
    band_rows: usize,
    half: u32,
    area: u32,
    idelta: i32,
    flip: u8,
    magic: u64,
}

impl AdaptiveBand<'_> {
    /// Band `k`, on a build for the CPU's instruction set (AVX2 when the CPU has it: the
    /// window sums and the comparisons eight pixels at a time, the baseline four).
    fn run(&self, k: usize, out: BandOutputs<'_>, sums: &mut [u32]) {
        #[cfg(target_arch = "x86_64")]
        if crate::frame::cpu::has_v3() {
            // SAFETY: the CPU supports every feature `run_v3` is compiled for (checked above).
            unsafe { self.run_v3(k, out, sums) };
            return;
        }
        self.run_band(k, out, sums)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,popcnt,lzcnt")]
    unsafe fn run_v3(&self, k: usize, out: BandOutputs<'_>, sums: &mut [u32]) {
        self.run_band(k, out, sums)
    }

    /// Column sums of the band's first row's window, then row by row: the row's window sums,
    /// its mask (and levels), and the column sums slid down a row.
    #[inline(always)]
    fn run_band(&self, k: usize, out: BandOutputs<'_>, sums: &mut [u32]) {
        let grey = self.grey;
        let (w, h) = (grey.width as usize, grey.height as usize);
        let (r, band_rows, half, area, idelta, flip, magic) = (
            self.r,
            self.band_rows,
            self.half,
            self.area,
            self.idelta,
            self.flip,
            self.magic,
        );
        let (mut bytes, mut words, mut levels) = out;
        let wpr = PackedBinary::words_per_row_for(grey.width);
        let rows = |y: isize| -> &[u8] {
            let y = y.clamp(0, h as isize - 1) as usize;
            &grey.data[y * w..(y + 1) * w]
        };
        let (col, srow) = sums.split_at_mut(w);
        let y0 = k * band_rows;
        let y1 = (y0 + band_rows).min(h);
        col.fill(0);
        for dy in -(r as isize)..=(r as isize) {
            for (s, &v) in col.iter_mut().zip(rows(y0 as isize + dy)) {
                *s += v as u32;
            }
        }
        for y in y0..y1 {
            let (g, dy) = (rows(y as isize), y - y0);
            row_window_sums(col, r, srow);
            let bytes_row = bytes.as_deref_mut().map(|b| &mut b[dy * w..(dy + 1) * w]);
            let words_row = words
                .as_deref_mut()
                .map(|p| &mut p[dy * wpr..(dy + 1) * wpr]);
            match levels.as_deref_mut() {
                Some(lv) => {
                    let lv = &mut lv[dy * w..(dy + 1) * w];
                    for (l, &s) in lv.iter_mut().zip(srow.iter()) {
                        *l = div_by_magic(s + half, magic) as i32 - idelta;
                    }
                    let cmp = AboveLevels {
                        grey: g,
                        levels: lv,
                        flip,
                    };
                    write_row(w, bytes_row, words_row, &cmp);
                }
                None => {
                    let cmp = AboveWindowMean {
                        grey: g,
                        sums: srow,
                        half,
                        area,
                        idelta,
                        flip,
                    };
                    write_row(w, bytes_row, words_row, &cmp);
                }
            }
            if y + 1 < y1 {
                let (add, sub) = (rows((y + r + 1) as isize), rows(y as isize - r as isize));
                for ((s, &a), &b) in col.iter_mut().zip(add).zip(sub) {
                    *s = *s + a as u32 - b as u32;
                }
            }
        }
    }
}

/// Foreground = grey > `level` (grey ≤ level with `invert`): fixed thresholds and Otsu.
pub fn global(grey: &GrayImage, level: u8, invert: bool, out: Outputs<'_>) -> Result<()> {
    check_size(grey.width, grey.height)?;
    check_grey(grey)?;
    let (w, h) = (grey.width as usize, grey.height as usize);
    let flip = invert as u8;
    let (bytes, packed, _) = fit(out, w, h);
    for_each_row(grey, bytes, packed, None, |g, _, bytes, words| {
        write_row(
            w,
            bytes,
            words,
            &AboveLevel {
                grey: g,
                level,
                flip,
            },
        )
    });
    Ok(())
}

/// Foreground = grey > the pixel's own level (row-major `levels`, one per pixel; may lie
/// outside 0..=255): any local method whose levels were computed elsewhere.
pub fn per_pixel(grey: &GrayImage, levels: &[i32], invert: bool, out: Outputs<'_>) -> Result<()> {
    check_size(grey.width, grey.height)?;
    check_grey(grey)?;
    if levels.len() != grey.data.len() {
        return Err(Error::InvalidSize {
            width: grey.width,
            height: grey.height,
            why: format!(
                "{} threshold levels for {} pixels",
                levels.len(),
                grey.data.len()
            ),
        });
    }
    let (w, h) = (grey.width as usize, grey.height as usize);
    let flip = invert as u8;
    let (bytes, packed, _) = fit(out, w, h);
    for_each_row(grey, bytes, packed, Some(levels), |g, lv, bytes, words| {
        let levels = lv.unwrap_or(&[]);
        write_row(
            w,
            bytes,
            words,
            &AboveLevels {
                grey: g,
                levels,
                flip,
            },
        )
    });
    Ok(())
}

/// Resizes the masks of `out` to a `w × h` frame (keeping their memory) and returns their
/// pixels, and the levels buffer as it is (the adaptive threshold's business).
#[allow(clippy::type_complexity)]
fn fit<'a>(
    out: Outputs<'a>,
    w: usize,
    h: usize,
) -> (
    Option<&'a mut [u8]>,
    Option<&'a mut [u32]>,
    Option<&'a mut Vec<i32>>,
) {
    let (width, height) = (w as u32, h as u32);
    let bytes = out.bytes.map(|b| {
        b.width = width;
        b.height = height;
        b.data.resize(w * h, 0);
        b.data.as_mut_slice()
    });
    let packed = out.packed.map(|p| {
        p.width = width;
        p.height = height;
        p.words_per_row = PackedBinary::words_per_row_for(width);
        p.resize_words(p.words_per_row * h);
        p.words.as_mut_slice()
    });
    (bytes, packed, out.levels)
}

pub(crate) fn check_grey(grey: &GrayImage) -> Result<()> {
    let expected = grey.width as usize * grey.height as usize;
    if grey.data.len() != expected {
        return Err(Error::InvalidSize {
            width: grey.width,
            height: grey.height,
            why: format!(
                "buffer holds {} pixels, expected {expected}",
                grey.data.len()
            ),
        });
    }
    Ok(())
}

/// Splits an optional output into `bands` parts of `per_band` values (the last one shorter);
/// an absent output gives `None` for every band, so that the outputs zip band for band.
fn split<T: Send>(
    data: Option<&mut [T]>,
    per_band: usize,
    bands: usize,
) -> impl IndexedParallelIterator<Item = Option<&mut [T]>> {
    match data {
        Some(d) => Either::Left(d.par_chunks_mut(per_band.max(1)).map(Some)),
        None => Either::Right((0..bands).into_par_iter().map(|_| None)),
    }
}

/// Calls `row(grey row, levels row, bytes row, words row)` for every row, over bands of rows in
/// parallel when the frame is large enough.
fn for_each_row(
    grey: &GrayImage,
    bytes: Option<&mut [u8]>,
    packed: Option<&mut [u32]>,
    levels: Option<&[i32]>,
    row: impl Fn(&[u8], Option<&[i32]>, Option<&mut [u8]>, Option<&mut [u32]>) + Sync,
) {
    let (w, h) = (grey.width as usize, grey.height as usize);
    let wpr = PackedBinary::words_per_row_for(grey.width);
    let band_rows = MIN_BAND_PIXELS.div_ceil(w).min(h);
    let bands = h.div_ceil(band_rows);
    let band = |k: usize, mut bytes: Option<&mut [u8]>, mut words: Option<&mut [u32]>| {
        let y0 = k * band_rows;
        for y in y0..(y0 + band_rows).min(h) {
            let dy = y - y0;
            row(
                &grey.data[y * w..(y + 1) * w],
                levels.map(|l| &l[y * w..(y + 1) * w]),
                bytes.as_deref_mut().map(|b| &mut b[dy * w..(dy + 1) * w]),
                words
                    .as_deref_mut()
                    .map(|p| &mut p[dy * wpr..(dy + 1) * wpr]),
            );
        }
    };
    if bands == 1 {
        band(0, bytes, packed);
    } else {
        split(bytes, band_rows * w, bands)
            .zip(split(packed, band_rows * wpr, bands))
            .enumerate()
            .for_each(|(k, (bytes, words))| band(k, bytes, words));
    }
}

/// How one row decides foreground: 64 pixels at once (fixed-size arrays: vectorised), and one
/// pixel at a time for the row's last, partial chunk. 1 = foreground, 0 = background.
trait RowTest {
    fn chunk(&self, x0: usize, out: &mut [u8; 64]);
    fn pixel(&self, x: usize) -> u8;
}

/// The first 64 values from `x0` (the caller keeps x0 + 64 within the row).
#[inline(always)]
fn at64<T>(row: &[T], x0: usize) -> &[T; 64] {
    row[x0..].first_chunk().expect("a full chunk of 64 pixels")
}

/// grey > level, flipped by `flip` (fixed thresholds, Otsu).
struct AboveLevel<'a> {
    grey: &'a [u8],
    level: u8,
    flip: u8,
}

impl RowTest for AboveLevel<'_> {
    #[inline(always)]
    fn chunk(&self, x0: usize, out: &mut [u8; 64]) {
        let g = at64(self.grey, x0);
        for i in 0..64 {
            out[i] = (g[i] > self.level) as u8 ^ self.flip;
        }
    }
    #[inline(always)]
    fn pixel(&self, x: usize) -> u8 {
        (self.grey[x] > self.level) as u8 ^ self.flip
    }
}

/// grey > the pixel's own level, flipped by `flip`.
struct AboveLevels<'a> {
    grey: &'a [u8],
    levels: &'a [i32],
    flip: u8,
}

impl RowTest for AboveLevels<'_> {
    #[inline(always)]
    fn chunk(&self, x0: usize, out: &mut [u8; 64]) {
        let (g, l) = (at64(self.grey, x0), at64(self.levels, x0));
        for i in 0..64 {
            out[i] = (g[i] as i32 > l[i]) as u8 ^ self.flip;
        }
    }
    #[inline(always)]
    fn pixel(&self, x: usize) -> u8 {
        (self.grey[x] as i32 > self.levels[x]) as u8 ^ self.flip
    }
}

/// The adaptive test on window sums: sum + half < (grey + ceil(C)) · area, flipped by `flip`.
struct AboveWindowMean<'a> {
    grey: &'a [u8],
    sums: &'a [u32],
    half: u32,
    area: u32,
    idelta: i32,
    flip: u8,
}

impl AboveWindowMean<'_> {
    /// (grey + ceil(C)) · area, clamped to 0 (never foreground) and 256 · area (always, since
    /// the mean is at most 255).
    #[inline(always)]
    fn limit(&self, g: u8) -> u32 {
        (g as i32 + self.idelta).clamp(0, 256) as u32 * self.area
    }
}

impl RowTest for AboveWindowMean<'_> {
    #[inline(always)]
    fn chunk(&self, x0: usize, out: &mut [u8; 64]) {
        let (g, s) = (at64(self.grey, x0), at64(self.sums, x0));
        for i in 0..64 {
            out[i] = ((s[i] + self.half) < self.limit(g[i])) as u8 ^ self.flip;
        }
    }
    #[inline(always)]
    fn pixel(&self, x: usize) -> u8 {
        ((self.sums[x] + self.half) < self.limit(self.grey[x])) as u8 ^ self.flip
    }
}

/// One row of the mask, 64 pixels at a time: straight into the bytes when only bytes are
/// wanted, else into 64 bytes on the stack that are folded into the row's two words for those
/// pixels (and copied to the bytes when wanted too). Padding bits of the last words stay 0.
#[inline(always)]
fn write_row(w: usize, bytes: Option<&mut [u8]>, words: Option<&mut [u32]>, test: &impl RowTest) {
    let full = w / 64 * 64;
    match (bytes, words) {
        (Some(bytes), None) => {
            for x0 in (0..full).step_by(64) {
                test.chunk(x0, bytes[x0..].first_chunk_mut().expect("64 bytes"));
            }
            for (x, o) in bytes.iter_mut().enumerate().take(w).skip(full) {
                *o = test.pixel(x);
            }
        }
        (mut bytes, Some(words)) => {
            let mut b = [0u8; 64];
            for (k, x0) in (0..w).step_by(64).enumerate() {
                if x0 < full {
                    test.chunk(x0, &mut b);
                    if let Some(bytes) = bytes.as_deref_mut() {
                        *bytes[x0..].first_chunk_mut().expect("64 bytes") = b;
                    }
                } else {
                    b = [0; 64];
                    for (i, o) in b.iter_mut().enumerate().take(w - x0) {
                        *o = test.pixel(x0 + i);
                    }
                    if let Some(bytes) = bytes.as_deref_mut() {
                        bytes[x0..w].copy_from_slice(&b[..w - x0]);
                    }
                }
                let bits = pack64(&b);
                words[2 * k] = bits as u32;
                words[2 * k + 1] = (bits >> 32) as u32;
            }
        }
        (None, None) => {}
    }
}

/// 64 bytes of 0 or 1 → 64 bits, bit i = byte i. Per eight bytes: the multiplication puts byte
/// j's bit on bit 56 + j of the product and nothing carries into the top byte.
#[inline(always)]
fn pack64(b: &[u8; 64]) -> u64 {
    let mut bits = 0u64;
    for (k, eight) in b.chunks_exact(8).enumerate() {
        let t = u64::from_le_bytes(eight.try_into().expect("8 bytes"));
        bits |= (t.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * k);
    }
    bits
}

/// ⌊n / d⌋ for any u32 n, by a multiplication: `magic` = ⌈2⁶⁴ / d⌉ for a d that is not a power
/// of two (Lemire, Kaser & Kurz, "Faster remainder by direct computation", 2019). A division per
/// pixel would cost more than all the rest of the adaptive threshold.
#[inline(always)]
fn div_by_magic(n: u32, magic: u64) -> u32 {
    ((magic as u128 * n as u128) >> 64) as u32
}

/// The mean-C threshold's whole-number offset: ceil(C), clamped to ±1000 so that the limits
/// stay in range (the device threshold of the fiducial detector uses the same).
pub(crate) fn mean_c_delta(c: f64) -> i32 {
    c.ceil().clamp(-1000.0, 1000.0) as i32
}

/// `div_by_magic`'s multiplier for an odd divisor d > 1.
fn magic_for(d: u32) -> u64 {
    (u64::MAX / d as u64) + 1
}

/// Window sums along one row of column sums with the edge values replicated:
/// out[x] = Σ_{|k| ≤ r} col[clamp(x + k)].
#[inline(always)]
#[allow(clippy::needless_range_loop)] // x indexes two arrays at different offsets
fn row_window_sums(col: &[u32], r: usize, out: &mut [u32]) {
    let w = col.len();
    let at = |x: isize| col[x.clamp(0, w as isize - 1) as usize];
    let mut s: u32 = (-(r as isize)..=(r as isize)).map(at).sum();
    out[0] = s;
    // Window [x − r, x + r] moves right: add x + r, drop x − r − 1. Clamp only near the edges.
    let x1 = (r + 1).min(w);
    let x2 = w.saturating_sub(r).max(x1);
    for x in 1..x1 {
        s = s + at((x + r) as isize) - col[0];
        out[x] = s;
    }
    // In the middle, the differences first (vectorised), then their running sum. Wrapping: a
    // difference may be negative, every running sum is a true window sum.
    if x1 < x2 {
        let mid = &mut out[x1..x2];
        for ((d, &add), &sub) in mid.iter_mut().zip(&col[x1 + r..]).zip(&col[x1 - r - 1..]) {
            *d = add.wrapping_sub(sub);
        }
        s = running_sums(mid, s);
    }
    for x in x2..w {
        s = s + col[w - 1] - col[x - r - 1];
        out[x] = s;
    }
}

/// Running sums in place from `s` (wrapping): d[i] = s + d[0] + … + d[i]; returns the last.
/// One addition a value on the dependency chain took a third of the adaptive threshold's time;
/// four values at a time (a prefix sum within an SSE2 register, then the carry) take two
/// instructions on the chain per four values.
#[inline(always)]
fn running_sums(d: &mut [u32], mut s: u32) -> u32 {
    #[cfg(target_arch = "x86_64")]
    let d = {
        use std::arch::x86_64::*;
        let mut fours = d.chunks_exact_mut(4);
        // SAFETY: SSE2 is part of x86-64; each load and store is of the four values of one
        // chunk, unaligned.
        unsafe {
            let mut carry = _mm_set1_epi32(s as i32);
            for four in &mut fours {
                let at = four.as_mut_ptr() as *mut __m128i;
                let mut x = _mm_loadu_si128(at);
                x = _mm_add_epi32(x, _mm_slli_si128::<4>(x));
                x = _mm_add_epi32(x, _mm_slli_si128::<8>(x));
                x = _mm_add_epi32(x, carry);
                _mm_storeu_si128(at, x);
                carry = _mm_shuffle_epi32::<0xFF>(x);
            }
            s = _mm_cvtsi128_si32(carry) as u32;
        }
        fours.into_remainder()
    };
    for v in d {
        s = s.wrapping_add(*v);
        *v = s;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::spec::MAX_ADAPTIVE_WINDOW;
    use super::*;

    /// Every window's area, on both sides of every multiple a mean can reach, and the ends of u32.
    #[test]
    fn division_by_magic_is_exact() {
        for window in (3..=MAX_ADAPTIVE_WINDOW).step_by(2) {
            let d = window * window;
            let magic = magic_for(d);
            for k in 0..=256u64 {
                for n in [
                    k * d as u64,
                    (k * d as u64).wrapping_sub(1),
                    k * d as u64 + 1,
                ] {
                    let n = n.min(u32::MAX as u64) as u32;
                    assert_eq!(div_by_magic(n, magic), n / d, "{n} / {d}");
                }
            }
            assert_eq!(div_by_magic(u32::MAX, magic), u32::MAX / d);
        }
    }

    /// The vectorised running sums equal the plain ones, wrapping included, at every length
    /// around the four values a step.
    #[test]
    fn running_sums_equal_the_plain_ones() {
        let mut v = 0x9e37_79b9u32;
        for n in 0..40 {
            let d: Vec<u32> = (0..n)
                .map(|_| {
                    v = v.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    v
                })
                .collect();
            let start = v.rotate_left(7);
            let mut got = d.clone();
            let last = running_sums(&mut got, start);
            let mut s = start;
            let want: Vec<u32> = d
                .iter()
                .map(|&x| {
                    s = s.wrapping_add(x);
                    s
                })
                .collect();
            assert_eq!(got, want, "length {n}");
            assert_eq!(last, s, "length {n}");
        }
    }

    #[test]
    fn pack64_puts_byte_i_on_bit_i() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..1000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let b: [u8; 64] = std::array::from_fn(|i| (state >> i) as u8 & 1);
            assert_eq!(pack64(&b), state);
        }
    }
}
