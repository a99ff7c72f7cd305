//! The papers' random test images (Cabaret, Hennequin, Lemaitre): density d, granularity g.
//!
//! Exact procedure, so that other tools can regenerate the same images bit for bit:
//! 1. Seed an MT19937 generator with the 32-bit `seed` (standard `init_genrand`).
//! 2. The image is cut into g×g blocks; there are ceil(h/g) block rows and ceil(w/g) block columns.
//! 3. For each block in raster order (block row by block row, left to right), draw one double
//!    u in [0, 1) with 53-bit resolution: a = next_u32 >> 5, b = next_u32 >> 6,
//!    u = (a · 2^26 + b) / 2^53 (MT19937's `genrand_res53`).
//! 4. The whole block is foreground when u < d (blocks cut by the right/bottom edge are clipped).
//!
//! This is exactly numpy's `RandomState(seed).random_sample((ceil(h/g), ceil(w/g))) < d`
//! expanded by g with `np.kron` and cropped, which is how `bench/peers` rebuilds them.

use crate::error::{Error, Result};
use crate::frame::image::{check_size, BinaryImage};
use rand_mt::Mt;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RandomImageSpec {
    pub width: u32,
    pub height: u32,
    pub density: f64,
    pub granularity: u32,
    pub seed: u32,
}

/// One double in [0, 1) from two 32-bit draws (genrand_res53).
fn next_f64(mt: &mut Mt) -> f64 {
    let a = (mt.next_u32() >> 5) as f64;
    let b = (mt.next_u32() >> 6) as f64;
    (a * 67_108_864.0 + b) / 9_007_199_254_740_992.0
}

pub fn generate(spec: &RandomImageSpec) -> Result<BinaryImage> {
    check_size(spec.width, spec.height)?;
    if !(0.0..=1.0).contains(&spec.density) {
        return Err(Error::Invalid(format!(
            "density {} is outside [0, 1]",
            spec.density
        )));
    }
    if spec.granularity == 0 {
        return Err(Error::Invalid("granularity must be at least 1".into()));
    }
    let g = spec.granularity as usize;
    let (w, h) = (spec.width as usize, spec.height as usize);
    let (bw, bh) = (w.div_ceil(g), h.div_ceil(g));
    let mut mt = Mt::new(spec.seed);
    let mut data = vec![0u8; w * h];
    let mut block_row = vec![0u8; bw];
    for by in 0..bh {
        for b in block_row.iter_mut() {
            *b = (next_f64(&mut mt) < spec.density) as u8;
        }
        // The block row's first pixel row, a run of g pixels per block (the last one clipped),
        // then copied to the block row's other pixel rows.
        let rows = &mut data[by * g * w..((by + 1) * g).min(h) * w];
        let (first, rest) = rows.split_at_mut(w);
        for (run, &b) in first.chunks_mut(g).zip(&block_row) {
            run.fill(b);
        }
        for row in rest.chunks_exact_mut(w) {
            row.copy_from_slice(first);
        }
    }
    BinaryImage::new(spec.width, spec.height, data)
}

/// The seed of the image for (base seed, density d, granularity g), as the benchmarks draw them:
/// `(seed · 1_000_003 + g · 1_009 + floor(d · 10^6 + 0.5)) mod 2^32`, in exact integer arithmetic.
/// The size does not enter (images of different sizes differ anyway). `bench/peers/peers.py`
/// has the same rule.
pub fn image_seed(seed: u32, density: f64, granularity: u32) -> u32 {
    let micro = (density * 1e6 + 0.5).floor() as u64;
    let s = seed as u64 * 1_000_003 + granularity as u64 * 1_009 + micro;
    (s & 0xffff_ffff) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_numpy_random_state() {
        // numpy: np.random.RandomState(5489).random_sample(3)
        //   -> [0.8147236863931789, 0.9057919370756192, 0.12698681629350606]
        let mut mt = Mt::new(5489);
        let got: Vec<f64> = (0..3).map(|_| next_f64(&mut mt)).collect();
        let want = [0.8147236863931789, 0.9057919370756192, 0.12698681629350606];
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-15, "{got:?}");
        }
    }

    #[test]
    fn density_extremes_and_granularity_blocks() {
        let spec = RandomImageSpec {
            width: 37,
            height: 29,
            density: 1.0,
            granularity: 4,
            seed: 1,
        };
        assert_eq!(generate(&spec).unwrap().foreground_count(), 37 * 29);
        let zero = generate(&RandomImageSpec {
            density: 0.0,
            ..spec
        })
        .unwrap();
        assert_eq!(zero.foreground_count(), 0);
        let half = generate(&RandomImageSpec {
            density: 0.5,
            ..spec
        })
        .unwrap();
        // Every pixel equals its block's top-left pixel.
        for y in 0..29 {
            for x in 0..37 {
                assert_eq!(half.get(x, y), half.get(x / 4 * 4, y / 4 * 4));
            }
        }
    }

    /// The image pixel by pixel from the procedure above: each pixel its block's draw.
    fn by_pixel(spec: &RandomImageSpec) -> Vec<u8> {
        let g = spec.granularity as usize;
        let (w, h) = (spec.width as usize, spec.height as usize);
        let mut mt = Mt::new(spec.seed);
        let draws: Vec<Vec<u8>> = (0..h.div_ceil(g))
            .map(|_| {
                (0..w.div_ceil(g))
                    .map(|_| (next_f64(&mut mt) < spec.density) as u8)
                    .collect()
            })
            .collect();
        (0..h)
            .flat_map(|y| (0..w).map(move |x| (y, x)))
            .map(|(y, x)| draws[y / g][x / g])
            .collect()
    }

    #[test]
    fn every_pixel_is_its_blocks_draw() {
        for (width, height, granularity) in [(37, 29, 4), (64, 48, 16), (33, 17, 1), (5, 3, 7)] {
            let spec = RandomImageSpec {
                width,
                height,
                density: 0.4,
                granularity,
                seed: 9,
            };
            assert_eq!(generate(&spec).unwrap().data, by_pixel(&spec), "{spec:?}");
        }
    }

    #[test]
    fn rejects_bad_parameters() {
        let spec = RandomImageSpec {
            width: 8,
            height: 8,
            density: 1.5,
            granularity: 1,
            seed: 0,
        };
        assert!(generate(&spec).is_err());
        assert!(generate(&RandomImageSpec {
            density: 0.5,
            granularity: 0,
            ..spec
        })
        .is_err());
    }

    #[test]
    fn image_seed_rule() {
        assert_eq!(image_seed(0, 0.0, 0), 0);
        assert_eq!(
            image_seed(1, 0.5, 4),
            (1_000_003 + 4 * 1_009 + 500_000) as u32
        );
        // 0.3 is 0.29999999999999998890 in binary; the +0.5 makes it 300000, not 299999.
        assert_eq!(image_seed(0, 0.3, 0), 300_000);
        // Wraps modulo 2^32.
        let s = u32::MAX;
        assert_eq!(
            image_seed(s, 1.0, 16),
            ((s as u64 * 1_000_003 + 16 * 1_009 + 1_000_000) % (1u64 << 32)) as u32
        );
    }
}
