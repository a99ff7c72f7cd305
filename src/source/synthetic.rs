//! The built-in demo source: no files, no camera, the same frames on every machine.
//!
//! - `Markers`: bright discs of radii 3–40 px moving on Lissajous paths over a darker noisy
//!   background, drawn with anti-aliased edges. Paths cross (two markers meet head-on at the
//!   centre every few seconds) and some markers are hidden for a few frames now and then
//!   (occlusion), so a tracker has something to get wrong. `MarkerScene::truth` gives the exact
//!   centre, radius and visibility of every marker in every frame.
//! - `Random`: the papers' random images (`crate::frame::random_image`) as grey 0/255 frames, cycling
//!   through densities 0, 0.1 … 1 and granularities 1, 4, 16; frame i uses seed i.
//!
//! Frame i is a pure function of (kind, size, seed, i), so seeking is exact.

use super::{ms_since, Frame, FrameSource, SyntheticKind};
use crate::error::Result;
use crate::frame::image::{check_size, GrayImage};
use crate::frame::random_image::{self, RandomImageSpec};
use crate::frame::render;
use std::f64::consts::TAU;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const DEFAULT_WIDTH: u32 = 1280;
pub const DEFAULT_HEIGHT: u32 = 720;
/// Nominal frame rate: paths move by frame index / this rate, and real-time mode paces at it.
pub const DEFAULT_FPS: f64 = 60.0;
/// Seed of the demo scene.
pub const DEFAULT_SEED: u64 = 1;

/// Number of markers in the scene.
pub const MARKERS: usize = 16;
const MIN_RADIUS: f64 = 3.0;
const MAX_RADIUS: f64 = 40.0;
/// Grey level of the background before noise, and the noise amplitude (±).
const BACKGROUND: i32 = 40;
const NOISE: i32 = 16;
/// Grey level of the markers.
const MARKER_LEVEL: u8 = 230;
/// Markers hidden now and then: every `HIDE_EVERY`-th marker, `HIDE_FRAMES` frames of every `HIDE_PERIOD`.
const HIDE_EVERY: usize = 4;
const HIDE_FRAMES: u64 = 20;
const HIDE_PERIOD: u64 = 240;

/// Where one marker is in one frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MarkerTruth {
    /// Stable identity, 0..number of markers.
    pub id: u32,
    /// Centre in pixel-index coordinates (pixel (x, y) covers [x − ½, x + ½) × [y − ½, y + ½)),
    /// which is what a component's centroid estimates.
    pub x: f64,
    pub y: f64,
    pub radius: f64,
    /// False while the marker is hidden (not drawn).
    pub visible: bool,
}

/// One marker's path: x(i) = mid_x + amp_x · sin(freq_x · i + phase_x), same for y.
#[derive(Clone, Debug)]
struct MarkerPath {
    radius: f64,
    mid: [f64; 2],
    amp: [f64; 2],
    freq: [f64; 2],
    phase: [f64; 2],
    /// Hidden in frames where (i + offset) % HIDE_PERIOD < HIDE_FRAMES.
    hide_offset: Option<u64>,
}

/// The deterministic moving-marker scene.
#[derive(Clone, Debug)]
pub struct MarkerScene {
    width: u32,
    height: u32,
    seed: u64,
    paths: Vec<MarkerPath>,
}

impl MarkerScene {
    pub fn new(width: u32, height: u32, seed: u64) -> Result<Self> {
        check_size(width, height)?;
        let mut rng = SplitMix(seed ^ 0x6d61_726b_6572);
        let (w, h) = (width as f64, height as f64);
        // Radii 3..40 spaced geometrically; smaller frames get proportionally smaller markers.
        let scale = (w.min(h) / DEFAULT_HEIGHT as f64).min(1.0);
        let fit = (w.min(h) / 4.0 - 1.0).max(0.5);
        let paths = (0..MARKERS)
            .map(|i| {
                let t = i as f64 / (MARKERS - 1) as f64;
                let nominal = MIN_RADIUS * (MAX_RADIUS / MIN_RADIUS).powf(t);
                let radius = (nominal * scale).max(MIN_RADIUS).min(fit);
                let mut path = MarkerPath {
                    radius,
                    mid: [0.0; 2],
                    amp: [0.0; 2],
                    freq: [0.0; 2],
                    phase: [0.0; 2],
                    hide_offset: (i % HIDE_EVERY == HIDE_EVERY - 1)
                        .then(|| rng.next() % HIDE_PERIOD),
                };
                for (axis, len) in [w, h].into_iter().enumerate() {
                    // Keep the whole disc (plus a pixel of anti-aliasing) inside the frame, so
                    // the centroid of its pixels is its centre.
                    let lo = radius + 1.5;
                    let hi = (len - 1.0 - radius - 1.5).max(lo);
                    let half = (hi - lo) / 2.0;
                    let amp = half * (0.35 + 0.65 * rng.unit());
                    path.amp[axis] = amp;
                    path.mid[axis] = lo + amp + (half - amp) * 2.0 * rng.unit();
                    // Periods of 3 to 12 seconds at the nominal rate.
                    let period = (3.0 + 9.0 * rng.unit()) * DEFAULT_FPS;
                    path.freq[axis] = TAU / period;
                    path.phase[axis] = TAU * rng.unit();
                }
                path
            })
            .collect::<Vec<_>>();
        let mut scene = Self {
            width,
            height,
            seed,
            paths,
        };
        scene.make_head_on_pair();
        Ok(scene)
    }

    /// Markers 6 and 9 run along the same horizontal line in opposite directions and meet in the
    /// middle every 4 seconds: a guaranteed crossing for trackers.
    fn make_head_on_pair(&mut self) {
        let (w, h) = (self.width as f64, self.height as f64);
        let r = self.paths[6].radius.max(self.paths[9].radius);
        let lo = r + 1.5;
        let amp = ((w - 1.0 - 2.0 * lo) / 2.0).max(0.0);
        let freq = TAU / (8.0 * DEFAULT_FPS);
        for (k, phase) in [(6, 0.0), (9, TAU / 2.0)] {
            let p = &mut self.paths[k];
            p.mid = [(w - 1.0) / 2.0, (h - 1.0) / 2.0];
            p.amp = [amp, 0.0];
            p.freq = [freq, 0.0];
            p.phase = [phase, 0.0];
            p.hide_offset = None;
        }
    }

    pub fn width(&self) -> u32 {
        self.width
    }

    pub fn height(&self) -> u32 {
        self.height
    }

    /// Every marker in frame `frame`, by id.
    pub fn truth(&self, frame: u64) -> Vec<MarkerTruth> {
        let i = frame as f64;
        self.paths
            .iter()
            .enumerate()
            .map(|(id, p)| MarkerTruth {
                id: id as u32,
                x: p.mid[0] + p.amp[0] * (p.freq[0] * i + p.phase[0]).sin(),
                y: p.mid[1] + p.amp[1] * (p.freq[1] * i + p.phase[1]).sin(),
                radius: p.radius,
                visible: p
                    .hide_offset
                    .is_none_or(|off| (frame + off) % HIDE_PERIOD >= HIDE_FRAMES),
            })
            .collect()
    }

    /// Draws frame `frame`: noise, then every visible marker.
    pub fn render(&self, frame: u64) -> GrayImage {
        let mut image = noisy_background(self.width, self.height, self.seed, frame);
        for m in self.truth(frame).iter().filter(|m| m.visible) {
            draw_disc(&mut image, m.x, m.y, m.radius, MARKER_LEVEL);
        }
        image
    }
}

/// Background level ± noise, a different pattern in every frame (uniform, from a hash of the
/// seed, frame and row, so any frame can be made without the ones before it).
fn noisy_background(width: u32, height: u32, seed: u64, frame: u64) -> GrayImage {
    let w = width as usize;
    let mut data = vec![0u8; w * height as usize];
    let span = (2 * NOISE + 1) as u64;
    for (y, row) in data.chunks_exact_mut(w).enumerate() {
        let mut rng =
            SplitMix(seed ^ frame.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ ((y as u64) << 40));
        for px in row.chunks_mut(4) {
            // Four 16-bit draws per 64-bit step.
            let mut bits = rng.next();
            for p in px {
                let noise = (((bits & 0xffff) * span) >> 16) as i32 - NOISE;
                *p = (BACKGROUND + noise) as u8;
                bits >>= 16;
            }
        }
    }
    GrayImage {
        width,
        height,
        data,
    }
}

/// Blends a filled disc into `image` by the exact fraction of each pixel it covers
/// (`crate::frame::render`), so the centroid of its pixels is (cx, cy).
fn draw_disc(image: &mut GrayImage, cx: f64, cy: f64, radius: f64, level: u8) {
    render::draw(image, &render::Shape::Disc { cx, cy, radius }, level);
}

/// SplitMix64: tiny, fast, good enough for noise and scene layout.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The random-image frame `frame`: density (frame % 11) / 10, granularity 1, 4, 16 in turn
/// every 11 frames, seed = frame.
pub fn random_frame(width: u32, height: u32, frame: u64) -> Result<GrayImage> {
    let spec = RandomImageSpec {
        width,
        height,
        density: (frame % 11) as f64 / 10.0,
        granularity: [1, 4, 16][(frame / 11 % 3) as usize],
        seed: frame as u32,
    };
    let binary = random_image::generate(&spec)?;
    let data = binary.data.iter().map(|&v| v * 255).collect();
    GrayImage::new(width, height, data)
}

/// `FrameSource` over the synthetic scenes.
pub struct SyntheticSource {
    kind: SyntheticKind,
    scene: MarkerScene,
    realtime: bool,
    next: u64,
    opened: Instant,
    /// Real-time pacing: frame `pace.1` was due at `pace.0`.
    pace: Option<(Instant, u64)>,
}

impl SyntheticSource {
    /// `realtime`: deliver frames at `DEFAULT_FPS` and count as a live source (the GUI demo);
    /// otherwise as fast as they can be drawn (analysis).
    pub fn new(kind: SyntheticKind, width: u32, height: u32, realtime: bool) -> Result<Self> {
        Ok(Self {
            kind,
            scene: MarkerScene::new(width, height, DEFAULT_SEED)?,
            realtime,
            next: 0,
            opened: Instant::now(),
            pace: None,
        })
    }

    /// The scene behind `SyntheticKind::Markers` frames (ground truth for tests and trackers).
    pub fn scene(&self) -> &MarkerScene {
        &self.scene
    }

    /// Sleeps until frame `self.next` is due. After a pause (more than a frame late) the clock
    /// restarts instead of catching up in a burst.
    fn wait_for_due(&mut self) {
        let period = Duration::from_secs_f64(1.0 / DEFAULT_FPS);
        let now = Instant::now();
        let due = match self.pace {
            Some((t0, i0)) if self.next >= i0 => t0 + period.mul_f64((self.next - i0) as f64),
            _ => now,
        };
        if now > due + period {
            self.pace = Some((now, self.next));
            return;
        }
        if due > now {
            std::thread::sleep(due - now);
        }
        if self.pace.is_none() {
            self.pace = Some((due, self.next));
        }
    }
}

impl FrameSource for SyntheticSource {
    fn describe(&self) -> String {
        let what = match self.kind {
            SyntheticKind::Markers => "synthetic markers",
            SyntheticKind::Random => "synthetic random images",
        };
        format!(
            "{what} {}×{} @{}",
            self.scene.width(),
            self.scene.height(),
            DEFAULT_FPS
        )
    }

    fn is_live(&self) -> bool {
        self.realtime
    }

    fn next_frame(&mut self) -> Result<Option<Frame>> {
        if self.realtime {
            self.wait_for_due();
        }
        let index = self.next;
        let started = Instant::now();
        let grey = match self.kind {
            SyntheticKind::Markers => self.scene.render(index),
            SyntheticKind::Random => random_frame(self.scene.width(), self.scene.height(), index)?,
        };
        let decode_ms = ms_since(started);
        self.next += 1;
        Ok(Some(Frame {
            index,
            time_s: if self.realtime {
                self.opened.elapsed().as_secs_f64()
            } else {
                index as f64 / DEFAULT_FPS
            },
            grey: Arc::new(grey),
            captured_at: Instant::now(),
            decode_ms,
            name: String::new(),
        }))
    }

    fn fps(&self) -> Option<f64> {
        Some(DEFAULT_FPS)
    }

    fn seek(&mut self, index: u64) -> Result<()> {
        self.next = index;
        self.pace = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_deterministic_and_seekable() {
        let mut a = SyntheticSource::new(SyntheticKind::Markers, 160, 120, false).unwrap();
        let mut b = SyntheticSource::new(SyntheticKind::Markers, 160, 120, false).unwrap();
        let f0 = a.next_frame().unwrap().unwrap();
        let f1 = a.next_frame().unwrap().unwrap();
        assert_ne!(f0.grey.data, f1.grey.data, "the scene moves");
        b.seek(1).unwrap();
        let g1 = b.next_frame().unwrap().unwrap();
        assert_eq!(g1.index, 1);
        assert_eq!(f1.grey, g1.grey);
        assert_eq!(f1.time_s, 1.0 / DEFAULT_FPS);
    }

    #[test]
    fn markers_stay_inside_and_some_hide() {
        let scene = MarkerScene::new(320, 240, 7).unwrap();
        let mut hidden = 0;
        for f in 0..HIDE_PERIOD {
            for m in scene.truth(f) {
                assert!(m.x - m.radius >= 0.5 && m.x + m.radius <= 318.5, "{m:?}");
                assert!(m.y - m.radius >= 0.5 && m.y + m.radius <= 238.5, "{m:?}");
                hidden += (!m.visible) as u64;
            }
        }
        // Over one period each hiding marker is hidden for exactly HIDE_FRAMES frames.
        let hiders = (0..MARKERS)
            .filter(|i| i % HIDE_EVERY == HIDE_EVERY - 1)
            .count() as u64;
        assert_eq!(hidden, hiders * HIDE_FRAMES);
    }

    #[test]
    fn radii_span_small_to_large_at_full_size() {
        let scene = MarkerScene::new(DEFAULT_WIDTH, DEFAULT_HEIGHT, 1).unwrap();
        let r: Vec<f64> = scene.truth(0).iter().map(|m| m.radius).collect();
        assert_eq!(r[0], MIN_RADIUS);
        assert!((r[MARKERS - 1] - MAX_RADIUS).abs() < 1e-9);
    }

    #[test]
    fn head_on_pair_meets() {
        let scene = MarkerScene::new(640, 480, 3).unwrap();
        let meet = (0..480u64)
            .map(|f| {
                let t = scene.truth(f);
                (t[6].x - t[9].x).abs()
            })
            .fold(f64::INFINITY, f64::min);
        assert!(meet < 10.0, "closest approach {meet}");
    }

    #[test]
    fn disc_coverage_gives_the_exact_area_and_centre() {
        let mut img = GrayImage::filled(64, 64, 0).unwrap();
        draw_disc(&mut img, 30.3, 31.7, 12.0, 255);
        let (mut sum, mut sx, mut sy) = (0.0, 0.0, 0.0);
        for y in 0..64 {
            for x in 0..64 {
                let v = img.data[y * 64 + x] as f64 / 255.0;
                sum += v;
                sx += v * x as f64;
                sy += v * y as f64;
            }
        }
        let area = std::f64::consts::PI * 144.0;
        assert!((sum - area).abs() < 1.0, "{sum} vs {area}");
        assert!((sx / sum - 30.3).abs() < 0.01 && (sy / sum - 31.7).abs() < 0.01);
    }

    #[test]
    fn random_frames_cycle_density() {
        let f0 = random_frame(32, 16, 0).unwrap();
        assert!(f0.data.iter().all(|&v| v == 0));
        let f10 = random_frame(32, 16, 10).unwrap();
        assert!(f10.data.iter().all(|&v| v == 255));
    }
}
