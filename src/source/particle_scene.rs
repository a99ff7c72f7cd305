//! Brownian particles of known truth (`bench --pipeline --scenes particles:N`): N bright
//! Gaussian spots on a dark, noisy background, each taking an independent Gaussian step per
//! axis every frame and reflected at the frame's edges, so that the count stays N. The
//! positions of every frame are the truth a tracker's IDs are scored against
//! (`track::score`), as particle-tracking users film colloids and beads.
//!
//! Seeded: frame i is a pure function of (options, size, i), made by stepping the particles
//! from frame 0 (a scene is read in order).

use crate::error::{Error, Result};
use crate::frame::image::{check_size, GrayImage};
use rand_mt::Mt64;
use rayon::prelude::*;

/// Background grey level and the half-width of its uniform noise.
const BACKGROUND: f64 = 20.0;
const NOISE: u64 = 4;
/// A spot is drawn out to this many of its σ.
const SPOT_EXTENT_SIGMAS: f64 = 3.0;
/// Rows a worker finishes at a time.
const BAND_ROWS: usize = 16;

/// What a particle scene shows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParticleOptions {
    pub count: u32,
    /// Standard deviation of a particle's step per axis per frame (px).
    pub step_px: f64,
    /// Standard deviation of a spot's Gaussian profile (px).
    pub spot_sigma_px: f64,
    /// A spot's peak above the background (grey levels).
    pub peak: f64,
    pub seed: u64,
}

impl Default for ParticleOptions {
    fn default() -> Self {
        Self {
            count: 10_000,
            step_px: 0.5,
            spot_sigma_px: 0.8,
            peak: 160.0,
            seed: 1,
        }
    }
}

impl ParticleOptions {
    /// The farthest a particle moves between frames, to all practical purposes (5 σ per axis):
    /// the search range a linker needs.
    pub fn search_range_px(&self) -> f64 {
        5.0 * self.step_px * std::f64::consts::SQRT_2
    }

    /// The diameter (odd, px) trackpy's `locate` looks for these spots with: the smallest odd
    /// number of pixels that spans ±2.5 σ of a spot.
    pub fn locate_diameter_px(&self) -> u32 {
        let d = (5.0 * self.spot_sigma_px).ceil() as u32;
        d.max(3) | 1
    }

    /// The farthest a detection may lie from its particle and still be that particle when
    /// tracks are scored: half the least spacing at which two spots stay apart.
    pub fn match_distance_px(&self) -> f64 {
        2.0 * self.spot_sigma_px
    }
}

/// The particles of one scene, at the frame last stepped to.
pub struct ParticleScene {
    options: ParticleOptions,
    width: u32,
    height: u32,
    frame: u64,
    x: Vec<f64>,
    y: Vec<f64>,
    rng: Mt64,
}

impl ParticleScene {
    pub fn new(options: ParticleOptions, width: u32, height: u32) -> Result<Self> {
        check_size(width, height)?;
        if options.count == 0 {
            return Err(Error::Invalid(
                "a particle scene needs at least 1 particle".into(),
            ));
        }
        let mut rng = Mt64::new(options.seed);
        let (w, h) = (width as f64 - 1.0, height as f64 - 1.0);
        let (x, y) = (0..options.count)
            .map(|_| (uniform(&mut rng) * w, uniform(&mut rng) * h))
            .unzip();
        Ok(Self {
            options,
            width,
            height,
            frame: 0,
            x,
            y,
            rng,
        })
    }

    pub fn options(&self) -> &ParticleOptions {
        &self.options
    }

    /// The frame the positions are of.
    pub fn frame(&self) -> u64 {
        self.frame
    }

    /// Every particle's position now, (ID, x, y); its index is its ID.
    pub fn positions(&self) -> impl Iterator<Item = (u64, f64, f64)> + '_ {
        (0..self.x.len()).map(|i| (i as u64, self.x[i], self.y[i]))
    }

    /// One Brownian step of every particle, reflected at the edges.
    pub fn step(&mut self) {
        let s = self.options.step_px;
        let (w, h) = (self.width as f64 - 1.0, self.height as f64 - 1.0);
        for i in 0..self.x.len() {
            let (dx, dy) = normal_pair(&mut self.rng);
            self.x[i] = reflect(self.x[i] + s * dx, w);
            self.y[i] = reflect(self.y[i] + s * dy, h);
        }
        self.frame += 1;
    }

    /// The frame: the spots summed over the background and its noise, rounded, clamped.
    pub fn render(&self) -> Result<GrayImage> {
        let (w, h) = (self.width as usize, self.height as usize);
        // Spots binned by the band of rows they touch, so that bands are drawn in parallel.
        let sigma = self.options.spot_sigma_px;
        let reach = (SPOT_EXTENT_SIGMAS * sigma).ceil() as isize;
        let bands = h.div_ceil(BAND_ROWS);
        let mut in_band: Vec<Vec<usize>> = vec![Vec::new(); bands];
        for (i, &y) in self.y.iter().enumerate() {
            let top = (y.round() as isize - reach).max(0) as usize / BAND_ROWS;
            let bottom = ((y.round() as isize + reach).max(0) as usize / BAND_ROWS).min(bands - 1);
            for band in &mut in_band[top..=bottom] {
                band.push(i);
            }
        }
        let mut data = vec![0u8; w * h];
        let inv = -0.5 / (sigma * sigma);
        let (peak, seed, frame) = (self.options.peak, self.options.seed, self.frame);
        data.par_chunks_mut(BAND_ROWS * w)
            .zip(in_band.par_iter())
            .enumerate()
            .for_each(|(band, (rows, spots))| {
                let top = band * BAND_ROWS;
                let mut light = vec![0.0f64; rows.len()];
                for &i in spots {
                    let (px, py) = (self.x[i], self.y[i]);
                    let (cx, cy) = (px.round() as isize, py.round() as isize);
                    let y0 = (cy - reach).max(top as isize);
                    let y1 = (cy + reach).min((top + rows.len() / w) as isize - 1);
                    let x0 = (cx - reach).max(0);
                    let x1 = (cx + reach).min(w as isize - 1);
                    for yy in y0..=y1 {
                        let dy = yy as f64 - py;
                        let row = (yy as usize - top) * w;
                        for xx in x0..=x1 {
                            let dx = xx as f64 - px;
                            light[row + xx as usize] += peak * ((dx * dx + dy * dy) * inv).exp();
                        }
                    }
                }
                for (k, (out, l)) in rows.iter_mut().zip(&light).enumerate() {
                    let noise = hash(seed, frame, (top * w + k) as u64) % (2 * NOISE + 1);
                    let v = BACKGROUND + l + noise as f64 - NOISE as f64;
                    *out = v.round().clamp(0.0, 255.0) as u8;
                }
            });
        GrayImage::new(self.width, self.height, data)
    }
}

/// Uniform in [0, 1).
fn uniform(rng: &mut Mt64) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// Two independent standard normal values (Box–Muller).
fn normal_pair(rng: &mut Mt64) -> (f64, f64) {
    let u = 1.0 - uniform(rng);
    let v = uniform(rng);
    let r = (-2.0 * u.ln()).sqrt();
    let (s, c) = (std::f64::consts::TAU * v).sin_cos();
    (r * c, r * s)
}

/// `v` folded back into [0, max] at both ends.
fn reflect(v: f64, max: f64) -> f64 {
    let v = if v < 0.0 { -v } else { v };
    let v = if v > max { 2.0 * max - v } else { v };
    v.clamp(0.0, max)
}

/// A pixel's noise draw (SplitMix64 of the seed, frame and pixel).
fn hash(seed: u64, frame: u64, pixel: u64) -> u64 {
    let mut z = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(frame.wrapping_mul(0xBF58_476D_1CE4_E5B9))
        .wrapping_add(pixel);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A particle's ID and position, with named fields.
    #[derive(Debug, PartialEq)]
    struct At {
        id: u64,
        x: f64,
        y: f64,
    }

    fn truth_of(scene: &ParticleScene) -> Vec<At> {
        scene
            .positions()
            .map(|(id, x, y)| At { id, x, y })
            .collect()
    }

    #[test]
    fn the_same_seed_gives_the_same_frames_and_particles_stay_inside() {
        let options = ParticleOptions {
            count: 300,
            step_px: 2.0,
            ..ParticleOptions::default()
        };
        let mut a = ParticleScene::new(options, 160, 120).unwrap();
        let mut b = ParticleScene::new(options, 160, 120).unwrap();
        for _ in 0..20 {
            assert_eq!(a.render().unwrap().data, b.render().unwrap().data);
            assert_eq!(truth_of(&a), truth_of(&b));
            a.step();
            b.step();
        }
        assert_eq!(a.frame(), 20);
        assert!(truth_of(&a)
            .iter()
            .all(|t| (0.0..=159.0).contains(&t.x) && (0.0..=119.0).contains(&t.y)));
        assert!(ParticleScene::new(
            ParticleOptions {
                count: 0,
                ..options
            },
            8,
            8
        )
        .is_err());
    }

    /// Each spot is drawn where its particle is: the brightest pixel near a lone particle is
    /// its nearest pixel, and the steps have the asked-for spread.
    #[test]
    fn spots_sit_on_their_particles_and_steps_have_the_asked_spread() {
        let options = ParticleOptions {
            count: 20,
            step_px: 1.0,
            ..ParticleOptions::default()
        };
        let mut scene = ParticleScene::new(options, 400, 300).unwrap();
        let image = scene.render().unwrap();
        let truth = truth_of(&scene);
        for t in &truth {
            let lone = truth
                .iter()
                .all(|o| o.id == t.id || (o.x - t.x).hypot(o.y - t.y) > 6.0);
            let (cx, cy) = (t.x.round() as u32, t.y.round() as u32);
            if !lone || cx < 2 || cy < 2 || cx > 397 || cy > 297 {
                continue;
            }
            let at = |x: u32, y: u32| image.data[(y * 400 + x) as usize];
            let best = (cy - 2..=cy + 2)
                .flat_map(|y| (cx - 2..=cx + 2).map(move |x| (x, y)))
                .max_by_key(|&(x, y)| at(x, y))
                .unwrap();
            assert!(at(cx, cy) + 8 >= at(best.0, best.1), "{t:?}");
            assert!(at(cx, cy) > 100, "{t:?}");
        }
        let mut squares = 0.0;
        let mut n = 0.0;
        for _ in 0..200 {
            let before = truth_of(&scene);
            scene.step();
            for (a, b) in before.iter().zip(truth_of(&scene)) {
                squares += (b.x - a.x).powi(2);
                n += 1.0;
            }
        }
        let spread = (squares / n).sqrt();
        assert!((spread - 1.0).abs() < 0.05, "{spread}");
    }
}
