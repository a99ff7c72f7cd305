//! The built-in demo source: no files, no camera, the same frames on every machine.
//!
//! - `Markers`: `MARKERS` bright discs moving on Lissajous paths over a darker noisy background,
//!   drawn with anti-aliased edges. At the default 1280×720 their radii are 3–40 px; at other
//!   sizes radii (and paths, so speeds) scale with the frame's shorter side, so 1080p and 4K show
//!   the same scene, larger. Paths cross (two markers meet head-on at the centre every few
//!   seconds) and some markers are hidden for a few frames now and then (occlusion), so a
//!   tracker has something to get wrong. `MarkerScene::truth` gives the exact centre, radius
//!   and visibility of every marker in every frame.
//! - `Random`: the papers' random images (`crate::frame::random_image`) as grey 0/255 frames:
//!   `RANDOM_FRAMES` images (densities 0, 0.1 … 1, granularities 1, 4, 16 in turn), made once
//!   and shown in a cycle.
//!
//! - `Fiducials`: square fiducials moving with known corners (`super::fiducial_scene`).
//! - `Particles`: Brownian particles of known truth (`super::particle_scene`), stepped on from
//!   frame 0 (a seek back starts them again).
//!
//! Frame i is a pure function of (kind, size, seed, i), so seeking is exact.
//!
//! Frames are cheap to make (the demo is a frame source, not a load): the background noise is
//! a pool of noise bytes made once per scene, and each row of a frame is a copy of a window of
//! it chosen by a hash of (seed, frame, row), so the noise still changes from frame to frame;
//! markers are drawn over it in their bounding boxes only. Frame buffers that the pipeline has
//! let go of are drawn into again instead of allocating new ones.

use super::fiducial_scene::FiducialScene;
use super::frame_pool::FramePool;
use super::live_schedule::{LiveSchedule, LiveTiming, StartSignal};
use super::noise::{NoisePool, SplitMix};
use super::particle_scene::{ParticleOptions, ParticleScene};
use super::view_scene::ViewScene;
use super::{ms_since, Frame, FrameSource, SyntheticKind};
use crate::error::{Error, Result};
use crate::frame::image::{check_size, GrayImage};
use crate::frame::page_lock::PageLocker;
use crate::frame::random_image::{self, RandomImageSpec};
use crate::frame::render;
use rayon::prelude::*;
use std::f64::consts::TAU;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const DEFAULT_WIDTH: u32 = 1280;
pub const DEFAULT_HEIGHT: u32 = 720;
pub use super::{DEFAULT_FPS, DEFAULT_SEED};

/// Number of markers in the scene.
pub const MARKERS: usize = 16;
/// Radii at the default size; other sizes scale them (never below `MIN_RADIUS`).
const MIN_RADIUS: f64 = 3.0;
const MAX_RADIUS: f64 = 40.0;
/// Grey level of the markers.
const MARKER_LEVEL: u8 = 230;
/// Markers hidden now and then: every `HIDE_EVERY`-th marker, `HIDE_FRAMES` frames of every `HIDE_PERIOD`.
const HIDE_EVERY: usize = 4;
const HIDE_FRAMES: u64 = 20;
const HIDE_PERIOD: u64 = 240;
/// `synthetic:reflection`: frames without markers at the start (the empty scene a static mask
/// is learned from; `--learn-mask`), and the reflection's place and size as fractions of the
/// frame's width, height and shorter side.
pub const REFLECTION_EMPTY_FRAMES: u64 = 60;
const REFLECTION_AT: [f64; 2] = [0.8, 0.25];
const REFLECTION_RADIUS: f64 = 0.012;
/// Frame buffers a source keeps for reuse.
const KEEP_BUFFERS: usize = 4;
/// Images the random source makes once and cycles through.
pub const RANDOM_FRAMES: u64 = 11;

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
    noise: NoisePool,
}

impl MarkerScene {
    pub fn new(width: u32, height: u32, seed: u64) -> Result<Self> {
        check_size(width, height)?;
        let mut rng = SplitMix(seed ^ 0x6d61_726b_6572);
        let (w, h) = (width as f64, height as f64);
        // Radii 3..40 spaced geometrically at the default size, scaled by the shorter side (at
        // 16:9 that is the frame's size relative to 1280×720). The paths span the frame, so
        // speeds scale too.
        let scale = w.min(h) / DEFAULT_HEIGHT as f64;
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
            noise: NoisePool::new(width, seed),
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
        (0..self.paths.len())
            .map(|id| self.marker(id, frame))
            .collect()
    }

    /// Marker `id` in frame `frame`.
    fn marker(&self, id: usize, frame: u64) -> MarkerTruth {
        let i = frame as f64;
        let p = &self.paths[id];
        MarkerTruth {
            id: id as u32,
            x: p.mid[0] + p.amp[0] * (p.freq[0] * i + p.phase[0]).sin(),
            y: p.mid[1] + p.amp[1] * (p.freq[1] * i + p.phase[1]).sin(),
            radius: p.radius,
            visible: p
                .hide_offset
                .is_none_or(|off| (frame + off) % HIDE_PERIOD >= HIDE_FRAMES),
        }
    }

    /// Draws frame `frame`: noise, then every visible marker.
    pub fn render(&self, frame: u64) -> GrayImage {
        let mut image = GrayImage::empty();
        self.render_into(frame, &mut image);
        image
    }

    /// The static reflection of `synthetic:reflection`: centre and radius of its three discs.
    pub fn reflection(&self) -> [(f64, f64, f64); 3] {
        let (w, h) = (self.width as f64, self.height as f64);
        let r = (REFLECTION_RADIUS * w.min(h)).max(2.0);
        let (x, y) = (REFLECTION_AT[0] * w, REFLECTION_AT[1] * h);
        [(x - r, y - r, r), (x, y, r), (x + r, y + r, r)]
    }

    /// `synthetic:reflection` frame `frame`: the scene's frame with a bright static reflection
    /// (a glint on a shiny surface), and no markers in the first `REFLECTION_EMPTY_FRAMES`.
    pub fn render_reflection_into(&self, frame: u64, image: &mut GrayImage) {
        if frame < REFLECTION_EMPTY_FRAMES {
            self.render_background_into(frame, image);
        } else {
            self.render_into(frame, image);
        }
        for (x, y, r) in self.reflection() {
            draw_disc(image, x, y, r, MARKER_LEVEL);
        }
    }

    /// The noisy background of frame `frame` alone.
    fn render_background_into(&self, frame: u64, image: &mut GrayImage) {
        self.noise
            .render_into(self.seed, frame, self.width, self.height, image);
    }

    /// Draws frame `frame` into `image`, reusing its buffer (resized to the scene if needed).
    pub fn render_into(&self, frame: u64, image: &mut GrayImage) {
        self.render_background_into(frame, image);
        for id in 0..self.paths.len() {
            let m = self.marker(id, frame);
            if m.visible {
                draw_disc(image, m.x, m.y, m.radius, MARKER_LEVEL);
            }
        }
    }
}

/// Blends a filled disc into `image` by the exact fraction of each pixel it covers
/// (`crate::frame::render`), so the centroid of its pixels is (cx, cy).
fn draw_disc(image: &mut GrayImage, cx: f64, cy: f64, radius: f64, level: u8) {
    render::draw(image, &render::Shape::Disc { cx, cy, radius }, level);
}

/// The random-image frame `frame`: image k = frame % `RANDOM_FRAMES` has density k / 10,
/// granularity 1, 4, 16 in turn (k % 3) and seed k.
pub fn random_frame(width: u32, height: u32, frame: u64) -> Result<GrayImage> {
    let k = frame % RANDOM_FRAMES;
    let spec = RandomImageSpec {
        width,
        height,
        density: k as f64 / 10.0,
        granularity: [1, 4, 16][(k % 3) as usize],
        seed: k as u32,
    };
    let binary = random_image::generate(&spec)?;
    let data = binary.data.iter().map(|&v| v * 255).collect();
    GrayImage::new(width, height, data)
}

/// The particle scene of `synthetic:particles:COUNT` (the bench scene's look and motion).
fn particles(count: u32, width: u32, height: u32) -> Result<ParticleScene> {
    let options = ParticleOptions {
        count,
        ..ParticleOptions::default()
    };
    ParticleScene::new(options, width, height)
}

/// `FrameSource` over the synthetic scenes.
pub struct SyntheticSource {
    kind: SyntheticKind,
    scene: MarkerScene,
    /// The scene of `SyntheticKind::Fiducials`.
    fiducials: Option<FiducialScene>,
    /// The particles of `SyntheticKind::Particles`, at the frame drawn last.
    particles: Option<ParticleScene>,
    /// The view of `SyntheticKind::View`.
    view: Option<ViewScene>,
    /// The buffers marker frames are drawn into.
    buffers: FramePool,
    /// The random images, made at the first random frame (on the capture thread).
    random: Vec<Arc<GrayImage>>,
    realtime: bool,
    /// Delivered live, as a camera (`SPEC?live…`): paced on its schedule, stamped at arrival.
    live: Option<LiveSchedule>,
    next: u64,
    opened: Instant,
    /// Real-time pacing: frame `pace.1` was due at `pace.0`.
    pace: Option<(Instant, u64)>,
}

impl SyntheticSource {
    /// `realtime`: deliver frames at `DEFAULT_FPS` and count as a live source (the GUI demo);
    /// otherwise as fast as they can be drawn (analysis).
    pub fn new(kind: SyntheticKind, width: u32, height: u32, realtime: bool) -> Result<Self> {
        crate::frame::image::check_size(width, height)?;
        crate::frame::image::check_frame_memory(width, height)?;
        Ok(Self {
            kind,
            scene: MarkerScene::new(width, height, DEFAULT_SEED)?,
            fiducials: match kind {
                SyntheticKind::Fiducials(options) => {
                    Some(FiducialScene::new(options, width, height)?)
                }
                _ => None,
            },
            particles: match kind {
                SyntheticKind::Particles(count) => Some(particles(count, width, height)?),
                _ => None,
            },
            view: match kind {
                SyntheticKind::View { camera, cameras } => {
                    Some(ViewScene::new(camera, cameras, width, height)?)
                }
                _ => None,
            },
            buffers: FramePool::new(KEEP_BUFFERS, None),
            random: Vec::new(),
            realtime,
            live: None,
            next: 0,
            opened: Instant::now(),
            pace: None,
        })
    }

    /// Delivered live from now on: on `timing`'s schedule from `start` (or from the first
    /// frame), each frame stamped when it is made (`live_schedule`).
    pub fn live(mut self, timing: LiveTiming, start: Option<StartSignal>) -> Self {
        self.live = Some(LiveSchedule::new(timing, start));
        self
    }

    /// The scene behind `SyntheticKind::Markers` frames (ground truth for tests and trackers).
    pub fn scene(&self) -> &MarkerScene {
        &self.scene
    }

    /// The scene behind `SyntheticKind::Fiducials` frames (their truth).
    pub fn fiducial_scene(&self) -> Option<&FiducialScene> {
        self.fiducials.as_ref()
    }

    /// The view behind `SyntheticKind::View` frames (the world's truth, the view's
    /// reference points).
    pub fn view_scene(&self) -> Option<&ViewScene> {
        self.view.as_ref()
    }

    /// Marker frame `index`, drawn into a buffer the pipeline has let go of when there is one.
    fn marker_frame(&mut self, index: u64) -> Arc<GrayImage> {
        let (scene, fiducials, kind) = (&self.scene, &self.fiducials, self.kind);
        let view = &self.view;
        let drawn = self.buffers.frame(scene.width(), scene.height(), |image| {
            match (fiducials, view) {
                (_, Some(v)) => v.render_into(index, image),
                (Some(f), None) => f.render_into(index, image),
                (None, None) if kind == SyntheticKind::Reflection => {
                    scene.render_reflection_into(index, image)
                }
                (None, None) => scene.render_into(index, image),
            }
            Ok(())
        });
        drawn.expect("drawing a frame does not fail")
    }

    /// Random frame `index`: one of the `RANDOM_FRAMES` images, made once.
    fn random_frame(&mut self, index: u64) -> Result<Arc<GrayImage>> {
        if self.random.is_empty() {
            let (w, h) = (self.scene.width(), self.scene.height());
            self.random = (0..RANDOM_FRAMES)
                .into_par_iter()
                .map(|k| random_frame(w, h, k).map(Arc::new))
                .collect::<Result<_>>()?;
        }
        Ok(self.random[(index % RANDOM_FRAMES) as usize].clone())
    }

    /// Particle frame `index`: the particles stepped on to it (from the start after a seek
    /// back).
    fn particle_frame(&mut self, index: u64) -> Result<Arc<GrayImage>> {
        let (w, h) = (self.scene.width(), self.scene.height());
        let scene = match self.particles.take() {
            Some(scene) if scene.frame() <= index => scene,
            Some(scene) => particles(scene.options().count, w, h)?,
            None => return Err(Error::Invalid("no particle scene".into())),
        };
        let scene = self.particles.insert(scene);
        while scene.frame() < index {
            scene.step();
        }
        scene.render().map(Arc::new)
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
            SyntheticKind::Reflection => "synthetic markers with a static reflection",
            SyntheticKind::Random => "synthetic random images",
            SyntheticKind::Fiducials(_) => "synthetic square fiducials",
            SyntheticKind::Particles(_) => "synthetic Brownian particles",
            SyntheticKind::View { .. } => "synthetic world view",
        };
        let (w, h) = (self.scene.width(), self.scene.height());
        match &self.live {
            Some(live) => {
                let timing = live.timing();
                format!(
                    "{what} {w}×{h} @{}, live, {} ms late",
                    timing.fps,
                    timing.delay_s * 1e3
                )
            }
            None => format!("{what} {w}×{h} @{DEFAULT_FPS}"),
        }
    }

    fn is_live(&self) -> bool {
        self.realtime || self.live.is_some()
    }

    fn next_frame(&mut self) -> Result<Option<Frame>> {
        if let Some(live) = &mut self.live {
            self.next = live.wait_for(self.next);
        } else if self.realtime {
            self.wait_for_due();
        }
        let index = self.next;
        let started = Instant::now();
        let grey = match self.kind {
            SyntheticKind::Markers
            | SyntheticKind::Reflection
            | SyntheticKind::Fiducials(_)
            | SyntheticKind::View { .. } => self.marker_frame(index),
            SyntheticKind::Random => self.random_frame(index)?,
            SyntheticKind::Particles(_) => self.particle_frame(index)?,
        };
        let decode_ms = ms_since(started);
        self.next += 1;
        Ok(Some(Frame {
            index,
            time_s: if self.is_live() {
                self.opened.elapsed().as_secs_f64()
            } else {
                index as f64 / DEFAULT_FPS
            },
            grey: grey.into(),
            captured_at: Instant::now(),
            decode_ms,
            name: String::new(),
        }))
    }

    fn fps(&self) -> Option<f64> {
        Some(self.live.as_ref().map_or(DEFAULT_FPS, |l| l.timing().fps))
    }

    /// Live, the frames are stamped as a camera's without a driver timestamp.
    fn time_stamp(&self) -> super::TimeStamp {
        match self.live {
            Some(_) => super::TimeStamp::Arrival,
            None => super::TimeStamp::Synthetic,
        }
    }

    /// Paced in real time, the frames' times count from the opening.
    fn clock_origin(&self) -> Option<Instant> {
        self.is_live().then_some(self.opened)
    }

    /// A live source goes on on its schedule, as a camera: it cannot seek.
    fn seek(&mut self, index: u64) -> Result<()> {
        if self.live.is_some() {
            return Err(Error::Invalid(format!(
                "{} cannot seek: it is live",
                self.describe()
            )));
        }
        self.next = index;
        self.pace = None;
        Ok(())
    }
    /// Marker frames only (the random images are made once, for the whole run).
    fn set_page_locker(&mut self, locker: Arc<dyn PageLocker>) {
        self.buffers = FramePool::new(KEEP_BUFFERS, Some(locker));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::noise::{BACKGROUND, NOISE};

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
        assert_eq!(*f1.grey, *g1.grey);
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
    fn marker_frames_are_the_scene_while_buffers_are_reused() {
        let scene = MarkerScene::new(320, 240, DEFAULT_SEED).unwrap();
        let mut source = SyntheticSource::new(SyntheticKind::Markers, 320, 240, false).unwrap();
        let mut held = Vec::new();
        for i in 0..40u64 {
            let frame = source.next_frame().unwrap().unwrap();
            assert_eq!(*frame.grey, scene.render(i), "frame {i}");
            // Hold some frames for a while (as the window does), drop the others at once.
            if i % 3 == 0 {
                held.push(frame);
            }
            if held.len() > 5 {
                let old = held.remove(0);
                assert_eq!(
                    *old.grey,
                    scene.render(old.index),
                    "held frame {}",
                    old.index
                );
            }
        }
        assert!(source.buffers.kept() <= KEEP_BUFFERS);
        // A buffer of another size is resized, and the result is the same frame.
        let mut other = GrayImage::filled(7, 3, 200).unwrap();
        scene.render_into(17, &mut other);
        assert_eq!(other, scene.render(17));
    }

    #[test]
    fn demo_frames_are_deterministic_per_size_seed_and_frame() {
        for (w, h) in [(160, 120), (1280, 720)] {
            let a = MarkerScene::new(w, h, 5).unwrap();
            let b = MarkerScene::new(w, h, 5).unwrap();
            assert_eq!(a.render(33), b.render(33));
            assert_ne!(a.render(33), a.render(34), "the noise and markers change");
            assert_ne!(a.render(33), MarkerScene::new(w, h, 6).unwrap().render(33));
        }
    }

    #[test]
    fn noise_stays_in_range_and_changes_every_frame() {
        let scene = MarkerScene::new(640, 360, DEFAULT_SEED).unwrap();
        let (f0, f1) = (scene.render(0), scene.render(1));
        let lo = (BACKGROUND - NOISE) as u8;
        let hi = (BACKGROUND + NOISE) as u8;
        let mut same = 0usize;
        let mut sum = 0u64;
        let mut n = 0u64;
        for (i, (&a, &b)) in f0.data.iter().zip(&f1.data).enumerate() {
            let (x, y) = ((i % 640) as f64, (i / 640) as f64);
            let clear = |f: u64| {
                scene
                    .truth(f)
                    .iter()
                    .all(|m| (m.x - x).hypot(m.y - y) > m.radius + 1.5)
            };
            if clear(0) && clear(1) {
                assert!((lo..=hi).contains(&a) && (lo..=hi).contains(&b), "{a} {b}");
                same += (a == b) as usize;
                sum += a as u64;
                n += 1;
            }
        }
        // Independent levels agree in 1 of 33 pixels; a copied frame would agree everywhere.
        assert!(
            same * 10 < n as usize,
            "{same} of {n} background pixels unchanged"
        );
        let mean = sum as f64 / n as f64;
        assert!((mean - BACKGROUND as f64).abs() < 0.5, "mean {mean}");
    }

    #[test]
    fn markers_scale_with_the_frame() {
        let base = MarkerScene::new(DEFAULT_WIDTH, DEFAULT_HEIGHT, DEFAULT_SEED).unwrap();
        for (w, h, s) in [(1920, 1080, 1.5), (3840, 2160, 3.0)] {
            let scene = MarkerScene::new(w, h, DEFAULT_SEED).unwrap();
            for (a, b) in base.truth(0).iter().zip(scene.truth(0)) {
                assert!(
                    (b.radius - a.radius * s).abs() < 1e-9,
                    "{w}x{h}: {a:?} {b:?}"
                );
            }
            // Paths span the frame, so the fastest marker moves s times as far per frame.
            let step = |sc: &MarkerScene| {
                (0..120)
                    .map(|f| {
                        let (p, q) = (sc.truth(f), sc.truth(f + 1));
                        p.iter()
                            .zip(&q)
                            .map(|(p, q)| (p.x - q.x).hypot(p.y - q.y))
                            .fold(0.0, f64::max)
                    })
                    .fold(0.0, f64::max)
            };
            let ratio = step(&scene) / step(&base);
            assert!((ratio - s).abs() < 0.05 * s, "{w}x{h}: speed ratio {ratio}");
        }
    }

    #[test]
    fn drawn_frames_agree_with_the_truth_at_every_size() {
        for (w, h) in [(1280, 720), (1920, 1080), (3840, 2160)] {
            let scene = MarkerScene::new(w, h, DEFAULT_SEED).unwrap();
            for f in [0u64, 57, 130] {
                let img = scene.render(f);
                let truth = scene.truth(f);
                for m in truth.iter().filter(|m| m.visible) {
                    // The inner square of the disc is the marker level; a ring just outside
                    // it is background unless another marker is there.
                    let r = m.radius / std::f64::consts::SQRT_2 - 1.0;
                    for dy in [-r, 0.0, r] {
                        for dx in [-r, 0.0, r] {
                            let (x, y) = ((m.x + dx).round() as u32, (m.y + dy).round() as u32);
                            assert_eq!(img.data[(y * w + x) as usize], MARKER_LEVEL, "{m:?}");
                        }
                    }
                    for k in 0..16 {
                        let a = k as f64 * TAU / 16.0;
                        let d = m.radius + 1.5;
                        let (x, y) = (m.x + d * a.cos(), m.y + d * a.sin());
                        let (px, py) = (x.round(), y.round());
                        let other = truth.iter().any(|o| {
                            o.visible && o.id != m.id && (o.x - px).hypot(o.y - py) < o.radius + 1.5
                        });
                        if !other {
                            let v = img.data[(py as u32 * w + px as u32) as usize] as i32;
                            assert!((v - BACKGROUND).abs() <= NOISE, "{w}x{h} frame {f}: {m:?}");
                        }
                    }
                }
                // Hidden markers are not drawn.
                for m in truth.iter().filter(|m| !m.visible) {
                    let covered = truth
                        .iter()
                        .any(|o| o.visible && (o.x - m.x).hypot(o.y - m.y) < o.radius + 1.5);
                    let v = img.data[(m.y.round() as u32 * w + m.x.round() as u32) as usize];
                    assert!(covered || (v as i32 - BACKGROUND).abs() <= NOISE, "{m:?}");
                }
            }
        }
    }

    /// Components the visible markers of `truth` should make: overlapping discs are one. None
    /// when two discs are so close (−1 to 2 px apart) that it depends on single edge pixels.
    fn expected_components(truth: &[MarkerTruth]) -> Option<usize> {
        let visible: Vec<&MarkerTruth> = truth.iter().filter(|m| m.visible).collect();
        let mut group: Vec<usize> = (0..visible.len()).collect();
        fn root(group: &mut [usize], mut i: usize) -> usize {
            while group[i] != i {
                i = group[i];
            }
            i
        }
        for i in 0..visible.len() {
            for j in i + 1..visible.len() {
                let (a, b) = (visible[i], visible[j]);
                let gap = (a.x - b.x).hypot(a.y - b.y) - a.radius - b.radius;
                if gap < -1.0 {
                    let (ri, rj) = (root(&mut group, i), root(&mut group, j));
                    group[ri] = rj;
                } else if gap < 2.0 {
                    return None;
                }
            }
        }
        Some(
            (0..visible.len())
                .filter(|&i| root(&mut group, i) == i)
                .count(),
        )
    }

    #[test]
    fn default_threshold_finds_exactly_the_visible_markers_at_every_size() {
        use crate::ccl::cpu::lsl::Lsl;
        use crate::ccl::{Connectivity, Labeler, Want};
        use crate::threshold;
        use crate::threshold::spec::ThresholdSpec;
        let spec = ThresholdSpec::default();
        let mut lsl = Lsl::new();
        for (w, h) in [(1280, 720), (1920, 1080), (3840, 2160)] {
            let scene = MarkerScene::new(w, h, DEFAULT_SEED).unwrap();
            let (mut checked, mut all_sixteen) = (0, 0);
            for f in 0..110u64 {
                let truth = scene.truth(f);
                let Some(want) = expected_components(&truth) else {
                    continue;
                };
                let mask = threshold::apply(&scene.render(f), &spec, false).unwrap();
                let out = lsl.label(&mask, Connectivity::Eight, Want::Stats).unwrap();
                let stats = out.stats.unwrap();
                assert_eq!(stats.len(), want, "{w}x{h} frame {f}, {spec}");
                // Each marker clear of the others is one component centred on it.
                for m in truth.iter().filter(|m| m.visible) {
                    let near = stats
                        .iter()
                        .filter(|c| (c.centroid_x - m.x).hypot(c.centroid_y - m.y) < m.radius)
                        .collect::<Vec<_>>();
                    let alone = truth.iter().all(|o| {
                        !o.visible
                            || o.id == m.id
                            || (o.x - m.x).hypot(o.y - m.y) > o.radius + m.radius + 2.0
                    });
                    if alone {
                        assert_eq!(near.len(), 1, "{w}x{h} frame {f}: {m:?}");
                        let c = near[0];
                        assert!(
                            (c.centroid_x - m.x).hypot(c.centroid_y - m.y) < 1.0,
                            "{w}x{h} frame {f}: {m:?} -> {c:?}"
                        );
                    }
                }
                checked += 1;
                all_sixteen += (want == MARKERS) as usize;
            }
            assert!(checked >= 100, "{w}x{h}: only {checked} frames checked");
            assert!(
                all_sixteen >= 20,
                "{w}x{h}: {all_sixteen} frames with all 16 apart"
            );
        }
    }

    #[test]
    fn random_source_cycles_images_made_once() {
        let mut source = SyntheticSource::new(SyntheticKind::Random, 48, 32, false).unwrap();
        let frames: Vec<Frame> = (0..2 * RANDOM_FRAMES)
            .map(|_| source.next_frame().unwrap().unwrap())
            .collect();
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(
                *f.grey,
                random_frame(48, 32, i as u64).unwrap(),
                "frame {i}"
            );
        }
        for i in 0..RANDOM_FRAMES as usize {
            let (a, b) = (&frames[i].grey, &frames[i + RANDOM_FRAMES as usize].grey);
            assert!(
                Arc::ptr_eq(a.image().unwrap(), b.image().unwrap()),
                "frame {i} is not made again"
            );
        }
        source.seek(3 * RANDOM_FRAMES + 4).unwrap();
        let f = source.next_frame().unwrap().unwrap();
        assert!(Arc::ptr_eq(
            f.grey.image().unwrap(),
            frames[4].grey.image().unwrap()
        ));
    }

    #[test]
    fn random_frames_cycle_density() {
        let f0 = random_frame(32, 16, 0).unwrap();
        assert!(f0.data.iter().all(|&v| v == 0));
        let f10 = random_frame(32, 16, 10).unwrap();
        assert!(f10.data.iter().all(|&v| v == 255));
    }
}
