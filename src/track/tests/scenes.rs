//! The scenes the tracker tests run on: markers that sweep, cross and hide, lattices, drifting
//! clutter and the papers' random images, as truth or as detections.

use crate::ccl::cpu::lsl::Lsl;
use crate::ccl::{Connectivity, Labeler, Want};
use crate::threshold::apply;
use crate::threshold::spec::ThresholdSpec;
use crate::track::score::TruthPoint;
use crate::track::*;
use rand_mt::Mt64;

pub(super) fn uniform(rng: &mut Mt64, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// Approximately normal (sum of 4 uniforms) with standard deviation `sigma`.
pub(super) fn gauss(rng: &mut Mt64, sigma: f64) -> f64 {
    let s: f64 = (0..4).map(|_| uniform(rng, -0.5, 0.5)).sum();
    s * sigma * 3f64.sqrt()
}

/// The "standard" sequence on a 640×480 frame: visible truth markers per frame.
/// - 5 lane markers sweep left and right (sinusoids, up to ~6 px/frame); every other one is
///   hidden for 3 frames (a brief occlusion, within the default `max_missed`);
/// - 4 pairs of markers cross on perpendicular diagonals at 4.2 px/frame, 5 frames apart
///   (closest approach ~15 px, so rendered discs of radius 5 never touch).
pub(super) fn standard_scene(frames: u64) -> Vec<Vec<TruthPoint>> {
    (0..frames)
        .map(|t| {
            let tf = t as f64;
            let mut v = Vec::new();
            for i in 0..5u64 {
                let occluded = i % 2 == 0 && (40 + 7 * i..43 + 7 * i).contains(&t);
                if !occluded {
                    let fi = i as f64;
                    v.push(TruthPoint {
                        id: 1 + i,
                        x: 320.0 + 250.0 * (0.02 * tf * (1.0 + 0.1 * fi) + fi).sin(),
                        y: 40.0 + 40.0 * fi,
                    });
                }
            }
            for k in 0..4u64 {
                let (cx, cy) = (100.0 + 140.0 * k as f64, 360.0);
                let tk = 30.0 + 25.0 * k as f64;
                for (j, (vx, delay)) in [(3.0, 0.0), (-3.0, 5.0)].into_iter().enumerate() {
                    let s = tf - tk - delay;
                    if s.abs() <= 30.0 {
                        v.push(TruthPoint {
                            id: 100 + 2 * k + j as u64,
                            x: cx + vx * s,
                            y: cy + 3.0 * s,
                        });
                    }
                }
            }
            v
        })
        .collect()
}

/// The harder sequence: `n` markers with random accelerations (σ 0.6 px/frame²) bouncing in a 640×480 box,
/// random occlusions of 2-10 frames, frequent close crossings.
pub(super) fn hard_scene(n: usize, frames: u64, seed: u64) -> Vec<Vec<TruthPoint>> {
    let mut rng = Mt64::new(seed);
    let mut m: Vec<(f64, f64, f64, f64, u64)> = (0..n)
        .map(|_| {
            let a = uniform(&mut rng, 0.0, std::f64::consts::TAU);
            let s = uniform(&mut rng, 1.0, 6.0);
            (
                uniform(&mut rng, 10.0, 630.0),
                uniform(&mut rng, 10.0, 470.0),
                s * a.cos(),
                s * a.sin(),
                0,
            )
        })
        .collect();
    (0..frames)
        .map(|_| {
            let mut v = Vec::new();
            for (i, p) in m.iter_mut().enumerate() {
                // Damped random acceleration: speeds stay around 2-3 px/frame.
                p.2 = 0.95 * p.2 + gauss(&mut rng, 0.6);
                p.3 = 0.95 * p.3 + gauss(&mut rng, 0.6);
                p.0 += p.2;
                p.1 += p.3;
                if !(0.0..640.0).contains(&p.0) {
                    p.2 = -p.2;
                    p.0 = p.0.clamp(0.0, 639.0);
                }
                if !(0.0..480.0).contains(&p.1) {
                    p.3 = -p.3;
                    p.1 = p.1.clamp(0.0, 479.0);
                }
                if p.4 == 0 && uniform(&mut rng, 0.0, 1.0) < 0.01 {
                    p.4 = 2 + rng.next_u64() % 9;
                }
                if p.4 > 0 {
                    p.4 -= 1;
                    continue;
                }
                v.push(TruthPoint {
                    id: i as u64 + 1,
                    x: p.0,
                    y: p.1,
                });
            }
            v
        })
        .collect()
}

/// `n` markers on a jittered lattice at the density of 50,000 in a 1920×1080 frame (6.4 px
/// apart, so every gate is cut to the density and holds `max_candidates`), each circling its
/// own place at 0.2 px a frame (far less than the gate and the spacing): frames of detections
/// in raster order, as a labeler gives them.
pub(super) fn lattice_scene(n: usize, frames: u64, seed: u64) -> Vec<Vec<Detection>> {
    let scale = (n as f64 / 50_000.0).sqrt();
    let (w, h) = (1920.0 * scale, 1080.0 * scale);
    let cols = ((n as f64 * w / h).sqrt().ceil() as usize).max(1);
    let rows = n.div_ceil(cols);
    let (sx, sy) = (w / cols as f64, h / rows as f64);
    let mut rng = Mt64::new(seed);
    let places: Vec<(f64, f64, f64)> = (0..n)
        .map(|i| {
            let (c, r) = ((i % cols) as f64, (i / cols) as f64);
            (
                (c + 0.5) * sx + uniform(&mut rng, -0.1, 0.1) * sx,
                (r + 0.5) * sy + uniform(&mut rng, -0.1, 0.1) * sy,
                uniform(&mut rng, 0.0, std::f64::consts::TAU),
            )
        })
        .collect();
    (0..frames)
        .map(|f| {
            places
                .iter()
                .map(|&(x, y, phase)| {
                    let a = phase + 0.2 * f as f64;
                    Detection::point(x + a.cos(), y + a.sin(), 20.0)
                })
                .collect()
        })
        .collect()
}

/// Drifting clutter as `track_clutter` makes it: `n` blobs a frame that move ~0.5 px, 10% of
/// them replaced every frame, in raster order.
pub(super) fn drifting_clutter(n: usize, frames: usize, seed: u64) -> Vec<Vec<Detection>> {
    let (w, h) = (1920.0, 1080.0);
    let mut rng = Mt64::new(seed);
    let mut blobs: Vec<(f64, f64, f64)> = Vec::new();
    (0..frames)
        .map(|_| {
            for b in blobs.iter_mut() {
                if uniform(&mut rng, 0.0, 1.0) < 0.1 {
                    (b.0, b.1) = (uniform(&mut rng, 0.0, w), uniform(&mut rng, 0.0, h));
                } else {
                    b.0 += uniform(&mut rng, -0.5, 0.5);
                    b.1 += uniform(&mut rng, -0.5, 0.5);
                }
            }
            while blobs.len() < n {
                let area = uniform(&mut rng, 2.0, 60.0).round();
                blobs.push((uniform(&mut rng, 0.0, w), uniform(&mut rng, 0.0, h), area));
            }
            let mut dets: Vec<Detection> = blobs
                .iter()
                .map(|&(x, y, area)| {
                    let r = (area / std::f64::consts::PI).sqrt();
                    Detection {
                        x: x + uniform(&mut rng, -0.1, 0.1),
                        y: y + uniform(&mut rng, -0.1, 0.1),
                        area,
                        bbox: [x - r, y - r, x + r, y + r],
                    }
                })
                .collect();
            dets.sort_by(|a, b| {
                (a.bbox[1].floor(), a.bbox[0].floor())
                    .partial_cmp(&(b.bbox[1].floor(), b.bbox[0].floor()))
                    .unwrap()
            });
            dets
        })
        .collect()
}

/// 300 markers that cross and hide (`hard_scene`), as detections with 0.5 px of noise.
pub(super) fn crossing_markers() -> Vec<Vec<Detection>> {
    let mut rng = Mt64::new(5);
    hard_scene(300, 60, 9)
        .iter()
        .map(|truth| {
            truth
                .iter()
                .map(|t| {
                    Detection::point(t.x + gauss(&mut rng, 0.5), t.y + gauss(&mut rng, 0.5), 30.0)
                })
                .collect()
        })
        .collect()
}

/// `frames` of the papers' random images (640×480), labeled (8-connectivity).
pub(super) fn random_images(frames: u64) -> Vec<Vec<Detection>> {
    labeled(frames, ThresholdSpec::Fixed(127), |f| {
        crate::source::synthetic::random_frame(640, 480, f).unwrap()
    })
}

/// Frames 0..`frames` of `grey`, thresholded by `threshold` and labeled (8-connectivity).
fn labeled(
    frames: u64,
    threshold: ThresholdSpec,
    grey: impl Fn(u64) -> crate::frame::image::GrayImage,
) -> Vec<Vec<Detection>> {
    let mut lsl = Lsl::new();
    (0..frames)
        .map(|f| {
            let mask = apply(&grey(f), &threshold, false).unwrap();
            let stats = lsl
                .label(&mask, Connectivity::Eight, Want::Stats)
                .unwrap()
                .stats
                .unwrap();
            stats.iter().map(Detection::from_stats).collect()
        })
        .collect()
}

/// Detections on a lattice 10 px apart that all step 5 px to the right every frame: each lies
/// exactly halfway between the predictions of two tracks of the same size (costs that tie),
/// and every few frames some vanish.
pub(super) fn halfway_lattice(frames: u64) -> Vec<Vec<Detection>> {
    (0..frames)
        .map(|f| {
            let mut dets = Vec::new();
            for r in 0..60 {
                for c in 0..80 {
                    if (r * 80 + c + f as usize) % 7 == 0 {
                        continue;
                    }
                    let x = 10.0 * c as f64 + 5.0 * f as f64;
                    dets.push(Detection::point(x, 10.0 * r as f64, 12.0));
                }
            }
            dets
        })
        .collect()
}

/// `frames` of the `synthetic:markers` scene (16 markers moving over clutter, blur and noise)
/// at `width`×`height`, thresholded as the engine does by default and labeled (8-connectivity):
/// a few large components among many small ones, and noise that tracks start on.
pub(super) fn fiducial_frames(width: u32, height: u32, frames: u64) -> Vec<Vec<Detection>> {
    use crate::source::fiducial_scene::{FiducialOptions, FiducialScene};
    let scene = FiducialScene::new(FiducialOptions::default(), width, height).unwrap();
    labeled(frames, ThresholdSpec::default(), |f| scene.render(f))
}
