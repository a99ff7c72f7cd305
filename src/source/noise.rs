//! Frame noise that changes every frame at the cost of a copy: a scene makes a pool of noise
//! once, `NOISE_OFFSETS` values longer than a row, and each row of a frame takes the window of
//! it that a hash of (seed, frame, row) picks, so any frame can be made without the ones before.

use crate::frame::image::GrayImage;

/// Grey level of the background before noise, and the noise amplitude (±).
pub(super) const BACKGROUND: i32 = 40;
pub(super) const NOISE: i32 = 16;

/// Distinct row offsets into a noise pool (the pool is this much longer than a row).
pub(super) const NOISE_OFFSETS: usize = 1 << 16;

/// Where row `y` of frame `frame` starts in the noise pool.
pub(super) fn row_offset(seed: u64, frame: u64, y: u64) -> usize {
    let mut z =
        seed ^ frame.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ y.wrapping_mul(0xd1b5_4a32_d192_ed03);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ((z ^ (z >> 31)) % NOISE_OFFSETS as u64) as usize
}

/// Background level ± noise, made once per scene: `width + NOISE_OFFSETS` bytes, each row of a
/// frame a window of it.
#[derive(Clone)]
pub(super) struct NoisePool(Vec<u8>);

impl std::fmt::Debug for NoisePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NoisePool({} bytes)", self.0.len())
    }
}

impl NoisePool {
    /// `width + NOISE_OFFSETS` bytes of background level ± noise (uniform), from the seed.
    pub(super) fn new(width: u32, seed: u64) -> NoisePool {
        let mut rng = SplitMix(seed ^ 0x006e_6f69_7365);
        let span = (2 * NOISE + 1) as u64;
        let mut pool = vec![0u8; width as usize + NOISE_OFFSETS];
        for px in pool.chunks_mut(4) {
            // Four 16-bit draws per 64-bit step.
            let mut bits = rng.next();
            for p in px {
                let noise = (((bits & 0xffff) * span) >> 16) as i32 - NOISE;
                *p = (BACKGROUND + noise) as u8;
                bits >>= 16;
            }
        }
        NoisePool(pool)
    }

    /// Frame `frame` of the background alone: each row the window `row_offset` picks.
    pub(super) fn render_into(
        &self,
        seed: u64,
        frame: u64,
        width: u32,
        height: u32,
        image: &mut GrayImage,
    ) {
        let w = width as usize;
        image.set_size(width, height);
        for (y, row) in image.data.chunks_exact_mut(w).enumerate() {
            let at = row_offset(seed, frame, y as u64);
            row.copy_from_slice(&self.0[at..at + w]);
        }
    }
}

/// SplitMix64: tiny, fast, good enough for noise and scene layout.
pub(super) struct SplitMix(pub(super) u64);

impl SplitMix {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub(super) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}
