//! `synthetic:markers`: square fiducials of a dictionary moving over a cluttered background,
//! under perspective, blur, noise and a light gradient, with the exact corners of every
//! marker in every frame (`FiducialScene::truth`), made fast enough to be a live source.
//!
//! Each marker has a slot of a grid over the frame and moves inside it (a Lissajous path, a
//! slow turn), so markers never overlap; every fourth is hidden for `HIDE_FRAMES` frames of
//! every `HIDE_PERIOD` (occlusion). Its printed look (paper, border, cells; the blur) is drawn
//! once, area-sampled, into a texture of two texels per pixel (`Texture`); a frame is the static
//! background (clutter, light, blur: `crate::fiducial::render`'s pieces, drawn once) with each
//! marker's texture mapped through its homography of that frame (bilinear), lit, and noise
//! added row by row from a pool (a hash of seed, frame and row picks the window), on every
//! core. Frame i is a pure function of (options, size, i).
//!
//! Corners follow the detector's and OpenCV's convention: pixel centres at whole coordinates.

use super::noise::{row_offset, NOISE_OFFSETS};
use crate::error::{Error, Result};
use crate::fiducial::dictionary::{predefined_names, Dictionary};
use crate::fiducial::pose::square_homography;
use crate::fiducial::render::{draw_clutter, gaussian_blur, invert3, Light, Rng, INK, PAPER};
use crate::frame::image::{check_size, GrayImage};
use rand_mt::Mt64;
use rayon::prelude::*;
use std::f64::consts::TAU;

/// Markers hidden now and then: every `HIDE_EVERY`-th, `HIDE_FRAMES` frames of every
/// `HIDE_PERIOD` (as the disc demo).
pub const HIDE_EVERY: usize = 4;
pub const HIDE_FRAMES: u64 = 20;
pub const HIDE_PERIOD: u64 = 240;
/// Nominal frame rate the paths are timed at.
const FPS: f64 = 60.0;
/// Rows a worker draws at a time.
const BAND_ROWS: usize = 16;
/// Texels per pixel of a marker's texture.
const TEXELS_PER_PIXEL: f64 = 2.0;
/// Subsamples per texel side when a texture is drawn.
const TEXTURE_SUPERSAMPLE: usize = 3;

/// What `synthetic:markers` shows: `synthetic:markers[:OPTION,...]` with the options
/// `dict=NAME` (or a bare dictionary name), `count=N`, `size=MIN-MAX` (pixels, the marker's
/// black square) and `seed=N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FiducialOptions {
    /// A predefined dictionary, as OpenCV names it.
    pub dictionary: &'static str,
    pub count: u32,
    pub min_side: u32,
    pub max_side: u32,
    pub seed: u64,
}

impl Default for FiducialOptions {
    fn default() -> Self {
        Self {
            dictionary: "DICT_4X4_50",
            count: 16,
            min_side: 60,
            max_side: 180,
            seed: 1,
        }
    }
}

impl FiducialOptions {
    /// Reads the options after `synthetic:markers:` (comma-separated; empty: the defaults).
    pub fn parse(text: &str) -> Result<Self> {
        let mut out = Self::default();
        let bad = |why: String| {
            Error::Invalid(format!(
                "synthetic:markers:{text}: {why} (options: dict=NAME, count=N, size=MIN-MAX, \
                 seed=N, comma-separated)"
            ))
        };
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, value) = item.split_once('=').unwrap_or(("dict", item));
            let number = |v: &str| {
                v.trim()
                    .parse::<u64>()
                    .map_err(|_| bad(format!("{key}: '{v}' is not a whole number")))
            };
            match key.trim().to_ascii_lowercase().as_str() {
                "dict" | "dictionary" => {
                    out.dictionary = predefined_name(value).map_err(|e| bad(e.to_string()))?
                }
                "count" => out.count = number(value)?.min(u32::MAX as u64) as u32,
                "seed" => out.seed = number(value)?,
                "size" => {
                    let (lo, hi) = value.split_once('-').unwrap_or((value, value));
                    out.min_side = number(lo)?.min(u32::MAX as u64) as u32;
                    out.max_side = number(hi)?.min(u32::MAX as u64) as u32;
                }
                other => return Err(bad(format!("unknown option '{other}'"))),
            }
        }
        let dict = Dictionary::predefined(out.dictionary)?;
        if out.count == 0 || out.count as usize > dict.len() {
            return Err(bad(format!(
                "count {}: give 1 to {} (the markers of {})",
                out.count,
                dict.len(),
                out.dictionary
            )));
        }
        if out.min_side < 8 || out.max_side < out.min_side {
            return Err(bad(format!(
                "size {}-{}: give sides of 8 px or more, the smaller first",
                out.min_side, out.max_side
            )));
        }
        Ok(out)
    }
}

impl std::fmt::Display for FiducialOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "dict={},count={},size={}-{},seed={}",
            self.dictionary, self.count, self.min_side, self.max_side, self.seed
        )
    }
}

/// The predefined dictionary's name as OpenCV spells it (any case, with or without `DICT_`).
fn predefined_name(name: &str) -> Result<&'static str> {
    let wanted = name.trim().to_ascii_uppercase();
    let wanted = wanted.strip_prefix("DICT_").unwrap_or(&wanted).to_string();
    predefined_names()
        .find(|n| n[5..].eq_ignore_ascii_case(&wanted))
        .ok_or_else(|| match Dictionary::predefined(name) {
            Err(e) => e,
            Ok(_) => Error::Invalid(format!("unknown marker dictionary '{name}'")),
        })
}

/// Where one marker is in one frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FiducialTruth {
    pub id: u32,
    /// Corners of its black square in OpenCV's order (clockwise on screen from its top-left).
    pub corners: [[f64; 2]; 4],
    /// False while it is hidden (not drawn).
    pub visible: bool,
}

type Mat3 = [[f64; 3]; 3];

/// A marker's printed look: grey (premultiplied by coverage) and coverage per texel, over
/// the cell grid from −`margin` to `cells` + `margin` (the black square is 0..cells).
struct Texture {
    side: usize,
    per_cell: f64,
    margin: f64,
    value: Vec<f32>,
    alpha: Vec<f32>,
}

impl Texture {
    fn new(bits: &[u8], n: usize, px_per_cell: f64, blur_px: f64) -> Texture {
        let cells = (n + 2) as f64;
        let per_cell = (TEXELS_PER_PIXEL * px_per_cell).clamp(4.0, 96.0).ceil();
        // Room for the blur's tail beyond the paper (one cell around the marker).
        let margin = 1.0 + (3.0 * blur_px / px_per_cell).max(0.5);
        let side = ((cells + 2.0 * margin) * per_cell).ceil() as usize;
        let (mut value, mut alpha) = (vec![0.0f64; side * side], vec![0.0f64; side * side]);
        let s = TEXTURE_SUPERSAMPLE as f64;
        let ni = n as i64;
        for ty in 0..side {
            for tx in 0..side {
                let (mut v, mut a) = (0.0, 0.0);
                for i in 0..TEXTURE_SUPERSAMPLE {
                    for j in 0..TEXTURE_SUPERSAMPLE {
                        let u = (tx as f64 + (j as f64 + 0.5) / s) / per_cell - margin;
                        let w = (ty as f64 + (i as f64 + 0.5) / s) / per_cell - margin;
                        if !(u >= -1.0 && w >= -1.0 && u < cells + 1.0 && w < cells + 1.0) {
                            continue;
                        }
                        let (cu, cv) = (u.floor() as i64 - 1, w.floor() as i64 - 1);
                        let white = if (0..ni).contains(&cu) && (0..ni).contains(&cv) {
                            bits[(cv * ni + cu) as usize] == 1
                        } else {
                            !(-1..=ni).contains(&cu) || !(-1..=ni).contains(&cv)
                        };
                        v += if white { PAPER } else { INK };
                        a += 1.0;
                    }
                }
                let total = s * s;
                value[ty * side + tx] = v / total;
                alpha[ty * side + tx] = a / total;
            }
        }
        // At least half a pixel of blur, so that the texture's sampling does not alias.
        let sigma = blur_px.max(0.5) * per_cell / px_per_cell;
        gaussian_blur(&mut value, side, side, sigma);
        gaussian_blur(&mut alpha, side, side, sigma);
        Texture {
            side,
            per_cell,
            margin,
            value: value.iter().map(|&v| v as f32).collect(),
            alpha: alpha.iter().map(|&v| v as f32).collect(),
        }
    }

    /// Bilinear (value, alpha) at cell coordinates (u, v); outside: nothing.
    #[inline]
    fn sample(&self, u: f64, v: f64) -> (f32, f32) {
        let x = (u + self.margin) * self.per_cell - 0.5;
        let y = (v + self.margin) * self.per_cell - 0.5;
        let last = (self.side - 1) as f64;
        if !(x >= 0.0 && y >= 0.0 && x < last && y < last) {
            return (0.0, 0.0);
        }
        let (x0, y0) = (x as usize, y as usize);
        let (fx, fy) = ((x - x0 as f64) as f32, (y - y0 as f64) as f32);
        let i = y0 * self.side + x0;
        let mix = |t: &[f32]| {
            let top = t[i] + (t[i + 1] - t[i]) * fx;
            let bottom = t[i + self.side] + (t[i + self.side + 1] - t[i + self.side]) * fx;
            top + (bottom - top) * fy
        };
        (mix(&self.value), mix(&self.alpha))
    }
}

/// One marker: its texture, its shape (cell grid → offsets from its centre, perspective
/// included) and its path in its slot.
struct MovingMarker {
    id: u32,
    texture: Texture,
    shape: Mat3,
    /// Distance from the centre to the farthest texel, in pixels (the drawing's reach).
    reach: f64,
    mid: [f64; 2],
    amp: [f64; 2],
    freq: [f64; 2],
    phase: [f64; 2],
    angle: f64,
    spin: f64,
    hide_offset: Option<u64>,
}

impl MovingMarker {
    /// Cell grid → image in frame `frame`.
    fn homography(&self, frame: u64) -> Mat3 {
        let i = frame as f64;
        let c = [
            self.mid[0] + self.amp[0] * (self.freq[0] * i + self.phase[0]).sin(),
            self.mid[1] + self.amp[1] * (self.freq[1] * i + self.phase[1]).sin(),
        ];
        let (s, k) = (self.angle + self.spin * i).sin_cos();
        let place = [[k, -s, c[0]], [s, k, c[1]], [0.0, 0.0, 1.0]];
        mul3(&place, &self.shape)
    }

    fn visible(&self, frame: u64) -> bool {
        self.hide_offset
            .is_none_or(|off| (frame + off) % HIDE_PERIOD >= HIDE_FRAMES)
    }
}

/// The scene: a static background and the moving markers.
pub struct FiducialScene {
    options: FiducialOptions,
    width: u32,
    height: u32,
    cells: f64,
    background: Vec<u8>,
    light: Light,
    noise: Vec<i8>,
    markers: Vec<MovingMarker>,
}

impl std::fmt::Debug for FiducialScene {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "FiducialScene({} {}x{})",
            self.options, self.width, self.height
        )
    }
}

/// The look every scene has (`fiducial::render::SceneSpec`'s defaults).
const PERSPECTIVE: f64 = 0.12;
const BLUR_SIGMA: f64 = 1.0;
const NOISE_SIGMA: f64 = 3.0;
const LIGHT_GRADIENT: f64 = 0.5;
const CLUTTER: usize = 40;

impl FiducialScene {
    pub fn new(options: FiducialOptions, width: u32, height: u32) -> Result<Self> {
        check_size(width, height)?;
        let dict = Dictionary::predefined(options.dictionary)?;
        let count = options.count as usize;
        if count == 0 || count > dict.len() {
            return Err(Error::Invalid(format!(
                "synthetic:markers: {count} markers asked of {}, which has {}",
                dict.name(),
                dict.len()
            )));
        }
        let (w, h) = (width as usize, height as usize);
        let mut rng = Rng(Mt64::new(options.seed));
        let level = rng.uniform(0.35, 0.65);
        let mut canvas = vec![level; w * h];
        draw_clutter(&mut canvas, w, h, CLUTTER, &mut rng);
        let light = Light::random(w, h, LIGHT_GRADIENT, &mut rng);
        for y in 0..h {
            for x in 0..w {
                canvas[y * w + x] *= light.at(x as f64, y as f64);
            }
        }
        gaussian_blur(&mut canvas, w, h, BLUR_SIGMA);
        let background = canvas
            .iter()
            .map(|v| (v * 255.0).round().clamp(0.0, 255.0) as u8)
            .collect();
        let noise = (0..w + NOISE_OFFSETS)
            .map(|_| (rng.normal() * NOISE_SIGMA).round().clamp(-127.0, 127.0) as i8)
            .collect();
        let n = dict.marker_size() as usize;
        let cells = (n + 2) as f64;
        let cols = ((count as f64 * w as f64 / h as f64).sqrt().ceil() as usize).max(1);
        let rows = count.div_ceil(cols);
        let (cw, ch) = (w as f64 / cols as f64, h as f64 / rows as f64);
        // The paper's rotated, perspective extent per pixel of side.
        let extent = (1.0 + 2.0 / cells) * std::f64::consts::SQRT_2 * (1.0 + 2.0 * PERSPECTIVE);
        let room = 0.95 * cw.min(ch) / extent;
        let mut ids: Vec<u32> = (0..dict.len() as u32).collect();
        let mut markers = Vec::with_capacity(count);
        for k in 0..count {
            let pick =
                k + (rng.uniform(0.0, (ids.len() - k) as f64) as usize).min(ids.len() - k - 1);
            ids.swap(k, pick);
            let id = ids[k];
            // Three quarters of the room at most: the rest is the path's.
            let side = rng
                .uniform(options.min_side as f64, options.max_side as f64 + 1e-9)
                .min(0.75 * room)
                .max(8.0);
            let corners: [[f64; 2]; 4] = std::array::from_fn(|i| {
                let (u, v) = [(-0.5, -0.5), (0.5, -0.5), (0.5, 0.5), (-0.5, 0.5)][i];
                let du = rng.uniform(-PERSPECTIVE, PERSPECTIVE);
                let dv = rng.uniform(-PERSPECTIVE, PERSPECTIVE);
                [(u + du) * side, (v + dv) * side]
            });
            let grid = [[0.0, 0.0], [cells, 0.0], [cells, cells], [0.0, cells]];
            let shape = square_homography(&grid, &corners)
                .ok_or_else(|| Error::Invalid("synthetic:markers: a degenerate marker".into()))?;
            let bits = dict
                .bits(id)
                .ok_or_else(|| Error::Invalid(format!("marker {id} missing")))?;
            let texture = Texture::new(&bits, n, side / cells, BLUR_SIGMA);
            let m = texture.margin;
            let reach = [
                [-m, -m],
                [cells + m, -m],
                [cells + m, cells + m],
                [-m, cells + m],
            ]
            .iter()
            .map(|&[u, v]| {
                let p = apply(&shape, u, v);
                p[0].hypot(p[1])
            })
            .fold(0.0, f64::max);
            let slot = [
                ((k % cols) as f64 + 0.5) * cw,
                ((k / cols) as f64 + 0.5) * ch,
            ];
            let slack = [
                ((cw / 2.0 - reach) * 0.9).max(0.0),
                ((ch / 2.0 - reach) * 0.9).max(0.0),
            ];
            let mut path = MovingMarker {
                id,
                texture,
                shape,
                reach,
                mid: slot,
                amp: [0.0; 2],
                freq: [0.0; 2],
                phase: [0.0; 2],
                angle: rng.uniform(0.0, TAU),
                spin: rng.uniform(-0.5, 0.5) / FPS,
                hide_offset: (k % HIDE_EVERY == HIDE_EVERY - 1)
                    .then(|| (rng.uniform(0.0, HIDE_PERIOD as f64) as u64) % HIDE_PERIOD),
            };
            for axis in 0..2 {
                path.amp[axis] = slack[axis] * rng.uniform(0.5, 1.0);
                path.freq[axis] = TAU / (rng.uniform(3.0, 12.0) * FPS);
                path.phase[axis] = rng.uniform(0.0, TAU);
            }
            markers.push(path);
        }
        Ok(Self {
            options,
            width,
            height,
            cells,
            background,
            light,
            noise,
            markers,
        })
    }

    pub fn options(&self) -> &FiducialOptions {
        &self.options
    }

    pub fn width(&self) -> u32 {
        self.width
    }

    pub fn height(&self) -> u32 {
        self.height
    }

    /// Every marker in frame `frame`, visible or hidden.
    pub fn truth(&self, frame: u64) -> Vec<FiducialTruth> {
        let c = self.cells;
        self.markers
            .iter()
            .map(|m| {
                let hom = m.homography(frame);
                FiducialTruth {
                    id: m.id,
                    corners: [[0.0, 0.0], [c, 0.0], [c, c], [0.0, c]]
                        .map(|[u, v]| apply(&hom, u, v)),
                    visible: m.visible(frame),
                }
            })
            .collect()
    }

    pub fn render(&self, frame: u64) -> GrayImage {
        let mut image = GrayImage::empty();
        self.render_into(frame, &mut image);
        image
    }

    /// Draws frame `frame` into `image`, reusing its buffer (resized to the scene if needed).
    pub fn render_into(&self, frame: u64, image: &mut GrayImage) {
        let w = self.width as usize;
        image.set_size(self.width, self.height);
        // Per visible marker: image → cell grid, and the rows and columns it may touch.
        let drawn: Vec<(&MovingMarker, Mat3, [usize; 4])> = self
            .markers
            .iter()
            .filter(|m| m.visible(frame))
            .filter_map(|m| {
                let hom = m.homography(frame);
                let inverse = invert3(&hom)?;
                let centre = apply(&hom, self.cells / 2.0, self.cells / 2.0);
                let r = m.reach + 2.0;
                let clip = |v: f64, len: u32| v.clamp(0.0, len as f64) as usize;
                let bounds = [
                    clip((centre[0] - r).floor(), self.width),
                    clip((centre[0] + r).ceil() + 1.0, self.width),
                    clip((centre[1] - r).floor(), self.height),
                    clip((centre[1] + r).ceil() + 1.0, self.height),
                ];
                Some((m, inverse, bounds))
            })
            .collect();
        let seed = self.options.seed;
        image
            .data
            .par_chunks_mut(BAND_ROWS * w)
            .enumerate()
            .for_each(|(band, rows)| {
                let first = band * BAND_ROWS;
                rows.copy_from_slice(&self.background[first * w..first * w + rows.len()]);
                let last = first + rows.len() / w;
                for (m, inverse, [x0, x1, y0, y1]) in &drawn {
                    for y in (*y0).max(first)..(*y1).min(last) {
                        let row = &mut rows[(y - first) * w..(y - first + 1) * w];
                        self.draw_row(m, inverse, y, *x0, *x1, row);
                    }
                }
                for y in first..last {
                    let at = row_offset(seed, frame, y as u64);
                    let row = &mut rows[(y - first) * w..(y - first + 1) * w];
                    for (p, &n) in row.iter_mut().zip(&self.noise[at..at + w]) {
                        *p = p.saturating_add_signed(n);
                    }
                }
            });
    }

    /// Blends marker `m`'s texture into row `y` between columns x0 and x1.
    fn draw_row(
        &self,
        m: &MovingMarker,
        inverse: &Mat3,
        y: usize,
        x0: usize,
        x1: usize,
        row: &mut [u8],
    ) {
        let yf = y as f64;
        for (x, p) in row.iter_mut().enumerate().take(x1).skip(x0) {
            let xf = x as f64;
            let [u, v] = apply(inverse, xf, yf);
            let (value, alpha) = m.texture.sample(u, v);
            if alpha <= 0.0 {
                continue;
            }
            let lit = 255.0 * value * self.light.at(xf, yf) as f32;
            let out = *p as f32 * (1.0 - alpha) + lit;
            *p = out.round().clamp(0.0, 255.0) as u8;
        }
    }
}

fn apply(m: &Mat3, x: f64, y: f64) -> [f64; 2] {
    let z = m[2][0] * x + m[2][1] * y + m[2][2];
    [
        (m[0][0] * x + m[0][1] * y + m[0][2]) / z,
        (m[1][0] * x + m[1][1] * y + m[1][2]) / z,
    ]
}

fn mul3(a: &Mat3, b: &Mat3) -> Mat3 {
    std::array::from_fn(|i| std::array::from_fn(|j| (0..3).map(|k| a[i][k] * b[k][j]).sum()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fiducial::{detect, DetectorParams};

    #[test]
    fn options_parse_and_bad_ones_are_named() {
        assert_eq!(
            FiducialOptions::parse("").unwrap(),
            FiducialOptions::default()
        );
        let o = FiducialOptions::parse("apriltag_36h11, count=100,size=30-50,seed=4").unwrap();
        assert_eq!(o.dictionary, "DICT_APRILTAG_36h11");
        assert_eq!((o.count, o.min_side, o.max_side, o.seed), (100, 30, 50, 4));
        assert_eq!(FiducialOptions::parse(&o.to_string()).unwrap(), o);
        for (bad, want) in [
            ("dict=DICT_4X4_51", "unknown marker dictionary"),
            ("count=51", "count 51: give 1 to 50"),
            ("count=x", "not a whole number"),
            ("size=50-20", "the smaller first"),
            ("speed=3", "unknown option 'speed'"),
        ] {
            let err = FiducialOptions::parse(bad).unwrap_err().to_string();
            assert!(err.contains(want), "{bad}: {err}");
        }
    }

    #[test]
    fn frames_are_deterministic_and_show_every_visible_marker_at_its_corners() {
        let options = FiducialOptions::parse("count=12,size=50-90,seed=3").unwrap();
        let scene = FiducialScene::new(options, 960, 540).unwrap();
        let again = FiducialScene::new(options, 960, 540).unwrap();
        assert_eq!(scene.render(5), again.render(5));
        assert_ne!(scene.render(5), scene.render(6));
        let dict = Dictionary::predefined(options.dictionary).unwrap();
        let mut hidden = 0;
        for frame in (0..HIDE_PERIOD).step_by(7) {
            let image = scene.render(frame);
            let found = detect(&image, &DetectorParams::default(), &[&dict]).unwrap();
            let truth = scene.truth(frame);
            let visible: Vec<&FiducialTruth> = truth.iter().filter(|t| t.visible).collect();
            hidden += truth.len() - visible.len();
            assert_eq!(found.markers.len(), visible.len(), "frame {frame}");
            for t in visible {
                let m = found
                    .markers
                    .iter()
                    .find(|m| m.id == t.id)
                    .unwrap_or_else(|| panic!("frame {frame}: marker {} missed", t.id));
                for k in 0..4 {
                    let c = m.corner(k);
                    let d = (c[0] - t.corners[k][0]).hypot(c[1] - t.corners[k][1]);
                    assert!(d < 0.5, "frame {frame} marker {} corner {k}: {d}", t.id);
                }
            }
        }
        assert!(hidden > 0, "some markers hide now and then");
    }
}

/// The marker detector's outline walks on these frames (the fiducial stage's seeded trace,
/// measured on the scene the bench renders).
#[cfg(test)]
mod outline_walks {
    use super::{FiducialOptions, FiducialScene};

    /// The GPU's sequential part on the bench's frames (`synthetic:markers` at 1080p and
    /// 4K): the longest sequential trace, against the longest chained segment and the
    /// longest walk of any seed when outlines whose limit passes SEEDED_FROM are traced
    /// by seeds; every seed's walk is shorter than the short outlines' one-warp walks.
    #[test]
    fn seeds_cut_the_longest_walk_of_the_bench_frames() {
        use crate::fiducial::candidates::seeded_trace::{
            components, trace_by_seeds, SEEDED_FROM, SEED_LINES, SEED_SLOTS,
        };
        use crate::fiducial::candidates::{component_outline, OutlineLimits};
        use crate::fiducial::params::DetectorParams;
        const FULL: (u32, usize) = (SEED_LINES, SEED_SLOTS);
        let params = DetectorParams::default();
        for (w, h) in [(1920, 1080), (3840, 2160)] {
            let scene = FiducialScene::new(FiducialOptions::default(), w, h).unwrap();
            let limits = OutlineLimits::of(&params, w, h);
            let (mut sequential, mut chained, mut walked, mut seeded) = (0, 0, 0, 0);
            let mut seed_walk = 0;
            for frame in 0..2 {
                let grey = scene.render(frame);
                for window in params.windows().unwrap() {
                    let (labels, stats) = components(&grey, window, &params);
                    let (lw, lh) = (w as i32, h as i32);
                    let (mut seq, mut by_seeds) = (Vec::new(), Vec::new());
                    for s in &stats {
                        let Some(limit) = limits.trace_limit(s) else {
                            continue;
                        };
                        let closed = component_outline(&labels, s, limit, &mut seq);
                        sequential = sequential.max(seq.len());
                        if limit <= SEEDED_FROM {
                            chained = chained.max(seq.len());
                            walked = walked.max(seq.len());
                            continue;
                        }
                        seeded += 1;
                        let is = |x: i32, y: i32| {
                            x >= 0
                                && y >= 0
                                && x < lw
                                && y < lh
                                && labels.data[(y * lw + x) as usize] == s.label
                        };
                        let bbox = (s.left as i32, s.top as i32, s.width as i32, s.height as i32);
                        let (ok, c) = trace_by_seeds(&is, seq[0], bbox, FULL, limit, &mut by_seeds);
                        assert_eq!((ok, &by_seeds), (closed, &seq));
                        chained = chained.max(c.longest_segment);
                        walked = walked.max(c.longest_walk);
                        seed_walk = seed_walk.max(c.longest_walk);
                    }
                }
            }
            eprintln!(
                "{w}x{h}: longest sequential trace {sequential} steps; {seeded} outlines by \
                 seeds: longest chained segment or short trace {chained}, longest walk {walked}, \
                 longest walk of a seed {seed_walk}"
            );
            assert!(seed_walk < SEEDED_FROM, "{seed_walk}");
            assert!(
                seeded > 0 && 3 * walked < sequential,
                "{walked} of {sequential}"
            );
        }
    }
}
