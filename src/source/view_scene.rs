//! `synthetic:view=K/N`: camera K of N side by side over one moving world scene, neighbouring
//! views overlapping by a seam band, so that several sources can be merged into one world
//! and an object walking from one view into the next can be followed.
//!
//! The world is a strip of `VIEW_MARKERS` lanes (world units: mm, y up), one disc a lane, each
//! swinging along its lane across the whole strip (through every seam) with a little sway
//! across it: the discs never meet, and each is seen whole by one view at least (the seam band
//! is wider than the largest disc). Camera K maps the world onto its frame by a known
//! homography (`PIXELS_PER_MM` pixels a millimetre, y flipped, shifted by K views less the
//! seam bands): `ViewScene::reference_file` gives its reference points, `ViewScene::truth` the
//! discs' world positions. Frame i is a pure function of (K, N, size, i).

use super::noise::NoisePool;
use super::{DEFAULT_FPS, DEFAULT_SEED};
use crate::error::{Error, Result};
use crate::frame::image::{check_size, GrayImage};
use crate::frame::render;
use crate::geometry::reference_file::ReferenceFile;
use crate::geometry::ReferencePoint;
use std::f64::consts::TAU;

/// Discs in the world, one a lane.
pub const VIEW_MARKERS: usize = 6;
/// Image pixels a world millimetre, in every view.
pub const PIXELS_PER_MM: f64 = 2.0;
/// Most views of one world.
pub const MAX_VIEWS: u32 = 8;
/// Grey level of the discs.
const LEVEL: u8 = 230;
/// The smallest disc's radius (px).
const MIN_RADIUS_PX: f64 = 3.0;

/// Where one disc of the world is in one frame (world units).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WorldMarker {
    /// Stable identity, 0..`VIEW_MARKERS`.
    pub id: u32,
    pub x: f64,
    pub y: f64,
    pub radius: f64,
}

/// One disc's path on the panorama (all views side by side, pixels of a view).
#[derive(Clone, Copy, Debug)]
struct Lane {
    radius: f64,
    mid: [f64; 2],
    amp: [f64; 2],
    freq: [f64; 2],
    phase: [f64; 2],
}

/// Camera `camera` of `cameras` over the world scene.
#[derive(Clone, Debug)]
pub struct ViewScene {
    camera: u32,
    cameras: u32,
    width: u32,
    height: u32,
    /// The width of the band neighbouring views share (px).
    seam_px: f64,
    lanes: Vec<Lane>,
    /// The noisy background of this view's frames, and its seed.
    background: NoisePool,
    seed: u64,
}

impl ViewScene {
    /// Errors: fewer than 2 or more than `MAX_VIEWS` views, a camera not among them, frames too
    /// small for the seam band.
    pub fn new(camera: u32, cameras: u32, width: u32, height: u32) -> Result<Self> {
        if !(2..=MAX_VIEWS).contains(&cameras) || camera >= cameras {
            return Err(Error::Invalid(format!(
                "synthetic:view={camera}/{cameras}: give camera K of N views, 0 ≤ K < N, \
                 2 ≤ N ≤ {MAX_VIEWS}"
            )));
        }
        check_size(width, height)?;
        let seed = DEFAULT_SEED + 1 + u64::from(camera);
        let background = NoisePool::new(width, seed);
        let (w, h) = (f64::from(width), f64::from(height));
        let lane_h = h / VIEW_MARKERS as f64;
        let max_radius = (0.3 * lane_h).max(MIN_RADIUS_PX);
        let seam_px = (2.0 * max_radius + 12.0).max(w / 10.0).round();
        if seam_px > w / 2.0 || lane_h < 2.0 * max_radius + 6.0 {
            return Err(Error::Invalid(format!(
                "synthetic:view: {width}×{height} frames are too small for the views' seam \
                 bands and lanes; give a larger --size (at least 160×120)"
            )));
        }
        let strip = f64::from(cameras) * (w - seam_px) + seam_px;
        let lanes = (0..VIEW_MARKERS)
            .map(|j| {
                let t = j as f64 / (VIEW_MARKERS - 1) as f64;
                // A low-discrepancy sequence: the lanes differ, the scene is the same anywhere.
                let u = |k: f64| (0.618_033_988_75 * (j as f64 + 1.0) * k).fract();
                let radius = MIN_RADIUS_PX + (max_radius - MIN_RADIUS_PX) * t;
                let (lo, hi) = (radius + 2.0, strip - 1.0 - radius - 2.0);
                let sway = (lane_h / 2.0 - radius - 3.0).max(0.0) * 0.5;
                Lane {
                    radius,
                    mid: [(lo + hi) / 2.0, (j as f64 + 0.5) * lane_h - 0.5],
                    amp: [(hi - lo) / 2.0 * (0.7 + 0.3 * u(1.0)), sway],
                    // Periods of 4 to 9 s along the strip, 2 to 5 s across.
                    freq: [
                        TAU / ((4.0 + 5.0 * u(2.0)) * DEFAULT_FPS),
                        TAU / ((2.0 + 3.0 * u(3.0)) * DEFAULT_FPS),
                    ],
                    phase: [TAU * u(5.0), TAU * u(7.0)],
                }
            })
            .collect();
        Ok(ViewScene {
            camera,
            cameras,
            width,
            height,
            seam_px,
            lanes,
            background,
            seed,
        })
    }

    pub fn camera(&self) -> u32 {
        self.camera
    }

    pub fn cameras(&self) -> u32 {
        self.cameras
    }

    /// Where the view's left edge is on the panorama (px).
    fn shift_px(&self) -> f64 {
        f64::from(self.camera) * (f64::from(self.width) - self.seam_px)
    }

    /// Panorama pixel (x, y) in world units (mm, y up).
    fn world_of(&self, x: f64, y: f64) -> [f64; 2] {
        [
            x / PIXELS_PER_MM,
            (f64::from(self.height) - 1.0 - y) / PIXELS_PER_MM,
        ]
    }

    /// Lane `j`'s disc on the panorama in frame `frame`: centre and radius (px).
    fn disc(&self, j: usize, frame: u64) -> (f64, f64, f64) {
        let (l, i) = (&self.lanes[j], frame as f64);
        let at = |k: usize| l.mid[k] + l.amp[k] * (l.freq[k] * i + l.phase[k]).sin();
        (at(0), at(1), l.radius)
    }

    /// Every disc in frame `frame`, in world units (the same in every view).
    pub fn truth(&self, frame: u64) -> Vec<WorldMarker> {
        (0..self.lanes.len())
            .map(|j| {
                let (x, y, r) = self.disc(j, frame);
                let [wx, wy] = self.world_of(x, y);
                WorldMarker {
                    id: j as u32,
                    x: wx,
                    y: wy,
                    radius: r / PIXELS_PER_MM,
                }
            })
            .collect()
    }

    /// The world x of the middle of each seam band (between views k and k + 1).
    pub fn seams(&self) -> Vec<f64> {
        let step = f64::from(self.width) - self.seam_px;
        (1..self.cameras)
            .map(|k| (f64::from(k) * step + (self.seam_px - 1.0) / 2.0) / PIXELS_PER_MM)
            .collect()
    }

    /// This view's reference points (its frame's corners and where they lie in the world),
    /// as `--world-file` reads them.
    pub fn reference_file(&self) -> ReferenceFile {
        let (w, h) = (f64::from(self.width) - 1.0, f64::from(self.height) - 1.0);
        let points = [(0.0, 0.0), (w, 0.0), (w, h), (0.0, h)]
            .into_iter()
            .map(|(x, y)| ReferencePoint {
                image: [x, y],
                world: self.world_of(x + self.shift_px(), y),
            })
            .collect();
        ReferenceFile {
            points,
            calibration: None,
            units: "mm".into(),
        }
    }

    /// Draws frame `frame`: the noisy background, then every disc that reaches into the view.
    pub fn render_into(&self, frame: u64, image: &mut GrayImage) {
        self.background
            .render_into(self.seed, frame, self.width, self.height, image);
        let shift = self.shift_px();
        let (w, h) = (f64::from(self.width), f64::from(self.height));
        for j in 0..self.lanes.len() {
            let (x, y, r) = self.disc(j, frame);
            let x = x - shift;
            if x + r > -1.0 && x - r < w && y + r > -1.0 && y - r < h {
                render::draw(
                    image,
                    &render::Shape::Disc {
                        cx: x,
                        cy: y,
                        radius: r,
                    },
                    LEVEL,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::WorldMapping;

    #[test]
    fn each_view_maps_its_pixels_onto_the_one_world() {
        let views: Vec<ViewScene> = (0..3)
            .map(|k| ViewScene::new(k, 3, 320, 240).unwrap())
            .collect();
        for view in &views {
            let file = view.reference_file();
            let mapping = WorldMapping::new(file.points, None, &file.units).unwrap();
            for marker in view.truth(17) {
                // The disc's image position in this view maps back onto its world position.
                let (x, y, _) = view.disc(marker.id as usize, 17);
                let w = mapping.to_world(x - view.shift_px(), y);
                assert!((w[0] - marker.x).abs() < 1e-9 && (w[1] - marker.y).abs() < 1e-9);
            }
            assert!((mapping.pixels_per_unit(100.0, 100.0) - PIXELS_PER_MM).abs() < 1e-9);
        }
        // Neighbouring views share the seam band: its middle is inside both.
        for (k, seam) in views[0].seams().into_iter().enumerate() {
            let px = seam * PIXELS_PER_MM;
            for view in &views[k..k + 2] {
                let x = px - view.shift_px();
                assert!(x > 0.0 && x < 319.0, "seam {k}: {x}");
            }
        }
    }

    #[test]
    fn every_disc_is_seen_whole_by_one_view_at_least_and_crosses_the_seams() {
        let views: Vec<ViewScene> = (0..2)
            .map(|k| ViewScene::new(k, 2, 320, 240).unwrap())
            .collect();
        let seam = views[0].seams()[0];
        let mut crossings = 0;
        for frame in 0..600 {
            for (j, marker) in views[0].truth(frame).iter().enumerate() {
                let whole = views.iter().any(|v| {
                    let (x, y, r) = v.disc(j, frame);
                    let x = x - v.shift_px();
                    x - r > 0.5 && x + r < 318.5 && y - r > 0.5 && y + r < 238.5
                });
                assert!(whole, "frame {frame}: disc {j} is cut in every view");
                let before = views[0].truth(frame.saturating_sub(1))[j].x;
                crossings += usize::from((before - seam).signum() != (marker.x - seam).signum());
            }
        }
        assert!(crossings >= 10, "{crossings} seam crossings");
    }

    #[test]
    fn bad_views_are_refused() {
        for (k, n) in [(0, 1), (2, 2), (0, 9)] {
            let err = ViewScene::new(k, n, 320, 240).unwrap_err().to_string();
            assert!(err.contains("camera K of N views"), "{k}/{n}: {err}");
        }
        let err = ViewScene::new(0, 2, 64, 48).unwrap_err().to_string();
        assert!(err.contains("too small"), "{err}");
    }
}
