//! Test frames with known truth: markers of a dictionary printed on white paper and pasted into
//! a grey scene under perspective, with clutter, a light gradient, blur and noise. The corners
//! of each marker are known exactly (the detector's and OpenCV's convention: pixel centres at
//! whole coordinates), so detectors can be scored against the truth rather than each other.
//!
//! Each pixel is the area average of the scene over its square (4×4 samples where a marker
//! covers it), then the light, the blur and the noise are applied, and the result is rounded.

use super::dictionary::Dictionary;
use super::pose::square_homography;
use crate::error::{Error, Result};
use crate::frame::image::GrayImage;
use rand_mt::Mt64;

/// What to render.
#[derive(Clone, Debug, PartialEq)]
pub struct SceneSpec {
    pub width: u32,
    pub height: u32,
    /// Markers in the frame (distinct IDs, at most the dictionary's size); 0 for clutter only.
    pub markers: usize,
    /// Side of a marker (its black border included), in pixels, drawn between these.
    pub min_side: f64,
    pub max_side: f64,
    /// How far each corner may move off the square, as a share of the side (perspective).
    pub perspective: f64,
    /// Gaussian blur, in pixels (0: none).
    pub blur_sigma: f64,
    /// Gaussian noise, in grey levels (0: none).
    pub noise_sigma: f64,
    /// Light falls by up to this share across the frame (0: even light).
    pub light_gradient: f64,
    /// Random shapes (rectangles, discs, bars) in the background.
    pub clutter: usize,
    pub seed: u64,
}

impl Default for SceneSpec {
    fn default() -> Self {
        Self {
            width: 1920,
            height: 1080,
            markers: 16,
            min_side: 60.0,
            max_side: 180.0,
            perspective: 0.12,
            blur_sigma: 1.0,
            noise_sigma: 3.0,
            light_gradient: 0.5,
            clutter: 40,
            seed: 1,
        }
    }
}

/// A marker in a rendered frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RenderedMarker {
    pub id: u32,
    /// Its corners in OpenCV's order (clockwise on screen from the marker's top-left).
    pub corners: [[f64; 2]; 4],
}

/// A rendered frame and its truth.
#[derive(Clone, Debug)]
pub struct Scene {
    pub image: GrayImage,
    pub markers: Vec<RenderedMarker>,
}

pub(crate) const PAPER: f64 = 0.92;
pub(crate) const INK: f64 = 0.08;
/// Subsamples per pixel side where a marker is drawn.
const SUPERSAMPLE: usize = 4;

pub(crate) struct Rng(pub(crate) Mt64);

impl Rng {
    pub(crate) fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        let u = (self.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        lo + (hi - lo) * u
    }

    pub(crate) fn normal(&mut self) -> f64 {
        let u = self.uniform(f64::MIN_POSITIVE, 1.0);
        let v = self.uniform(0.0, 1.0);
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// Renders a scene of `spec.markers` markers of `dict` (none: clutter only).
pub fn render_scene(dict: &Dictionary, spec: &SceneSpec) -> Result<Scene> {
    let (w, h) = (spec.width as usize, spec.height as usize);
    if spec.markers > dict.len() {
        return Err(Error::Invalid(format!(
            "{} markers asked of {}, which has {}",
            spec.markers,
            dict.name(),
            dict.len()
        )));
    }
    if !(spec.min_side >= 8.0 && spec.max_side >= spec.min_side) {
        return Err(Error::Invalid(format!(
            "marker sides {} to {} px: give 8 or more, the smaller first",
            spec.min_side, spec.max_side
        )));
    }
    crate::frame::image::check_size(spec.width, spec.height)?;
    let mut rng = Rng(Mt64::new(spec.seed));
    let background = rng.uniform(0.35, 0.65);
    let mut canvas = vec![background; w * h];
    draw_clutter(&mut canvas, w, h, spec.clutter, &mut rng);
    let mut markers = Vec::new();
    if spec.markers > 0 {
        let cols = (spec.markers as f64 * w as f64 / h as f64)
            .sqrt()
            .ceil()
            .max(1.0) as usize;
        let rows = spec.markers.div_ceil(cols);
        let (cw, ch) = (w as f64 / cols as f64, h as f64 / rows as f64);
        let mut ids: Vec<u32> = (0..dict.len() as u32).collect();
        for k in 0..spec.markers {
            let pick =
                k + (rng.uniform(0.0, (ids.len() - k) as f64) as usize).min(ids.len() - k - 1);
            ids.swap(k, pick);
            let id = ids[k];
            let (gx, gy) = ((k % cols) as f64, (k / cols) as f64);
            let cells = (dict.marker_size() + 2) as f64;
            // Paper one cell wider than the marker on each side, all of it inside the slot.
            let room = 0.95 * cw.min(ch)
                / ((1.0 + 2.0 / cells) * std::f64::consts::SQRT_2 * (1.0 + 2.0 * spec.perspective));
            let side = rng.uniform(spec.min_side, spec.max_side).min(room);
            let centre = [(gx + 0.5) * cw, (gy + 0.5) * ch];
            let angle = rng.uniform(0.0, std::f64::consts::TAU);
            let (s, c) = angle.sin_cos();
            let corners: [[f64; 2]; 4] = std::array::from_fn(|i| {
                let (u, v) = [(-0.5, -0.5), (0.5, -0.5), (0.5, 0.5), (-0.5, 0.5)][i];
                let jitter = [
                    rng.uniform(-spec.perspective, spec.perspective),
                    rng.uniform(-spec.perspective, spec.perspective),
                ];
                let (x, y) = ((u + jitter[0]) * side, (v + jitter[1]) * side);
                [centre[0] + c * x - s * y, centre[1] + s * x + c * y]
            });
            let grid = [[0.0, 0.0], [cells, 0.0], [cells, cells], [0.0, cells]];
            let Some(hom) = square_homography(&grid, &corners) else {
                continue;
            };
            draw_marker(&mut canvas, w, h, dict, id, &hom);
            markers.push(RenderedMarker { id, corners });
        }
    }
    let light = Light::random(w, h, spec.light_gradient, &mut rng);
    for y in 0..h {
        for x in 0..w {
            canvas[y * w + x] *= light.at(x as f64, y as f64);
        }
    }
    if spec.blur_sigma > 0.0 {
        gaussian_blur(&mut canvas, w, h, spec.blur_sigma);
    }
    let data = canvas
        .iter()
        .map(|&v| {
            let noise = if spec.noise_sigma > 0.0 {
                rng.normal() * spec.noise_sigma
            } else {
                0.0
            };
            (v * 255.0 + noise).round().clamp(0.0, 255.0) as u8
        })
        .collect();
    Ok(Scene {
        image: GrayImage::new(spec.width, spec.height, data)?,
        markers,
    })
}

/// Light that falls linearly across the frame, along a direction, by up to a share.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Light {
    dx: f64,
    dy: f64,
    span: f64,
    offset: f64,
    gradient: f64,
}

impl Light {
    /// A random direction, falling by `gradient` (0: even light) across a w × h frame.
    pub(crate) fn random(w: usize, h: usize, gradient: f64, rng: &mut Rng) -> Self {
        let dir = rng.uniform(0.0, std::f64::consts::TAU);
        let (dx, dy) = (dir.cos(), dir.sin());
        let span = (w as f64 * dx.abs() + h as f64 * dy.abs()).max(1.0);
        let offset = (if dx < 0.0 { w as f64 * -dx } else { 0.0 })
            + (if dy < 0.0 { h as f64 * -dy } else { 0.0 });
        Self {
            dx,
            dy,
            span,
            offset,
            gradient,
        }
    }

    /// The share of the light at (x, y).
    pub(crate) fn at(&self, x: f64, y: f64) -> f64 {
        let t = (x * self.dx + y * self.dy + self.offset) / self.span;
        1.0 - self.gradient * t.clamp(0.0, 1.0)
    }
}

/// The marker's paper (one white cell around it) and cells, area-sampled, through `hom` (cell
/// grid → image).
fn draw_marker(
    canvas: &mut [f64],
    w: usize,
    h: usize,
    dict: &Dictionary,
    id: u32,
    hom: &[[f64; 3]; 3],
) {
    let Some(bits) = dict.bits(id) else {
        return;
    };
    let n = dict.marker_size() as i64;
    let cells = (n + 2) as f64;
    let Some(inv) = invert3(hom) else {
        return;
    };
    let map = |m: &[[f64; 3]; 3], x: f64, y: f64| {
        let z = m[2][0] * x + m[2][1] * y + m[2][2];
        [
            (m[0][0] * x + m[0][1] * y + m[0][2]) / z,
            (m[1][0] * x + m[1][1] * y + m[1][2]) / z,
        ]
    };
    let paper = [
        [-1.0, -1.0],
        [cells + 1.0, -1.0],
        [cells + 1.0, cells + 1.0],
        [-1.0, cells + 1.0],
    ]
    .map(|[u, v]| map(hom, u, v));
    let x0 = paper
        .iter()
        .map(|p| p[0])
        .fold(f64::MAX, f64::min)
        .floor()
        .max(0.0) as usize;
    let y0 = paper
        .iter()
        .map(|p| p[1])
        .fold(f64::MAX, f64::min)
        .floor()
        .max(0.0) as usize;
    let x1 = (paper.iter().map(|p| p[0]).fold(f64::MIN, f64::max).ceil() as usize + 1).min(w);
    let y1 = (paper.iter().map(|p| p[1]).fold(f64::MIN, f64::max).ceil() as usize + 1).min(h);
    let s = SUPERSAMPLE as f64;
    for y in y0..y1 {
        for x in x0..x1 {
            let mut sum = 0.0;
            let mut on_paper = 0usize;
            for i in 0..SUPERSAMPLE {
                for j in 0..SUPERSAMPLE {
                    let px = x as f64 - 0.5 + (j as f64 + 0.5) / s;
                    let py = y as f64 - 0.5 + (i as f64 + 0.5) / s;
                    let [u, v] = map(&inv, px, py);
                    if !(u >= -1.0 && v >= -1.0 && u < cells + 1.0 && v < cells + 1.0) {
                        continue;
                    }
                    on_paper += 1;
                    let (cu, cv) = (u.floor() as i64 - 1, v.floor() as i64 - 1);
                    let white = if (0..n).contains(&cu) && (0..n).contains(&cv) {
                        bits[(cv * n + cu) as usize] == 1
                    } else {
                        !(-1..=n).contains(&cu) || !(-1..=n).contains(&cv)
                    };
                    sum += if white { PAPER } else { INK };
                }
            }
            if on_paper > 0 {
                let total = (SUPERSAMPLE * SUPERSAMPLE) as f64;
                let c = &mut canvas[y * w + x];
                *c = (sum + *c * (total - on_paper as f64)) / total;
            }
        }
    }
}

/// Random rectangles, discs and bars of random grey in the background.
pub(crate) fn draw_clutter(canvas: &mut [f64], w: usize, h: usize, count: usize, rng: &mut Rng) {
    for _ in 0..count {
        let grey = rng.uniform(0.05, 0.95);
        let (cx, cy) = (rng.uniform(0.0, w as f64), rng.uniform(0.0, h as f64));
        let size = rng.uniform(5.0, 0.12 * w.min(h) as f64);
        let kind = rng.uniform(0.0, 3.0) as u32;
        let angle = rng.uniform(0.0, std::f64::consts::PI);
        let (s, c) = angle.sin_cos();
        let (hw, hh) = match kind {
            0 => (size, size * rng.uniform(0.3, 1.0)),
            1 => (size, size),
            _ => (size * 2.0, rng.uniform(1.0, 4.0)),
        };
        let r = hw.max(hh) * 1.5;
        let (x0, x1) = ((cx - r).max(0.0) as usize, ((cx + r) as usize + 1).min(w));
        let (y0, y1) = ((cy - r).max(0.0) as usize, ((cy + r) as usize + 1).min(h));
        for y in y0..y1 {
            for x in x0..x1 {
                let (dx, dy) = (x as f64 - cx, y as f64 - cy);
                let (u, v) = (c * dx + s * dy, -s * dx + c * dy);
                let hit = if kind == 1 {
                    u * u + v * v <= hw * hw
                } else {
                    u.abs() <= hw && v.abs() <= hh
                };
                if hit {
                    canvas[y * w + x] = grey;
                }
            }
        }
    }
}

pub(crate) fn invert3(m: &[[f64; 3]; 3]) -> Option<[[f64; 3]; 3]> {
    let c = |r: usize, k: usize| {
        let (r1, r2, k1, k2) = ((r + 1) % 3, (r + 2) % 3, (k + 1) % 3, (k + 2) % 3);
        m[r1][k1] * m[r2][k2] - m[r1][k2] * m[r2][k1]
    };
    let det = m[0][0] * c(0, 0) + m[0][1] * c(0, 1) + m[0][2] * c(0, 2);
    if det.abs() < 1e-300 {
        return None;
    }
    Some(std::array::from_fn(|i| {
        std::array::from_fn(|j| c(j, i) / det)
    }))
}

/// Separable Gaussian blur, edges replicated.
pub(crate) fn gaussian_blur(img: &mut [f64], w: usize, h: usize, sigma: f64) {
    let r = (3.0 * sigma).ceil() as i64;
    let kernel: Vec<f64> = (-r..=r)
        .map(|i| (-(i * i) as f64 / (2.0 * sigma * sigma)).exp())
        .collect();
    let total: f64 = kernel.iter().sum();
    let kernel: Vec<f64> = kernel.iter().map(|k| k / total).collect();
    let mut tmp = vec![0.0; w * h];
    for y in 0..h {
        for x in 0..w {
            tmp[y * w + x] = kernel
                .iter()
                .enumerate()
                .map(|(i, k)| {
                    k * img[y * w + (x as i64 + i as i64 - r).clamp(0, w as i64 - 1) as usize]
                })
                .sum();
        }
    }
    for y in 0..h {
        for x in 0..w {
            img[y * w + x] = kernel
                .iter()
                .enumerate()
                .map(|(i, k)| {
                    k * tmp[(y as i64 + i as i64 - r).clamp(0, h as i64 - 1) as usize * w + x]
                })
                .sum();
        }
    }
}
