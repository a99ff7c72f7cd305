//! Frame noise that changes every frame at the cost of a copy: a scene makes a pool of noise
//! once, `NOISE_OFFSETS` values longer than a row, and each row of a frame takes the window of
//! it that a hash of (seed, frame, row) picks, so any frame can be made without the ones before.

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
