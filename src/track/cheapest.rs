//! The cheapest few of a track's candidates, by a histogram of their costs instead of a
//! quickselect. A missed track's gate on a markers scene often holds 30-100 detections (the
//! noise clusters around the markers, where its track began) of which it keeps 16; a
//! quickselect over them mispredicts a branch on about every other comparison. Here the costs
//! are counted into buckets (one pass), the bucket that holds the cut is found, and one pass
//! without a branch on the data moves the cheaper buckets to the front; only the few pairs in
//! the cut's own bucket are ordered exactly. The kept set is the one the exact order (cost,
//! then slot) keeps.

/// A pair's cost, as the bits of its (non-negative) f64 value.
pub(super) type Cost = u64;

/// Buckets of the costs' bits: the exponent and the top 3 bits of the mantissa, 8 buckets to
/// an octave, the top ones for the largest cost expected and beyond, the bottom one for all
/// below the ~8 octaves under it.
const BUCKETS: usize = 64;
/// The shift that leaves a non-negative float's exponent and top 3 mantissa bits.
const SHIFT: u32 = 49;

/// Scratch storage, kept from call to call.
#[derive(Default)]
pub(super) struct Cheapest {
    /// Each pair's bucket.
    bucket: Vec<u8>,
    /// The pairs in the bucket of the cut.
    at_cut: Vec<(Cost, u32)>,
}

impl Cheapest {
    /// Moves the `keep` smallest of `pairs` (by cost, then slot; slots are distinct) to its
    /// front, in no particular order; what follows them is left as scratch. `top` is about the
    /// largest cost expected (where the buckets end). Costs are ≥ +0, not NaN.
    pub(super) fn keep(&mut self, pairs: &mut [(Cost, u32)], keep: usize, top: f64) {
        if pairs.len() <= keep || keep == 0 {
            return;
        }
        // The bits of a non-negative float grow with it, and so does its bucket (a shift, a
        // saturating subtraction and a minimum: no conversion of a float).
        let top_key = (top.max(f64::MIN_POSITIVE).to_bits() >> SHIFT) as usize;
        let base = (top_key + 1).saturating_sub(BUCKETS - 1);
        let bucket_of = |cost: Cost| {
            ((cost >> SHIFT) as usize)
                .saturating_sub(base)
                .min(BUCKETS - 1)
        };
        let mut counts = [0u32; BUCKETS];
        self.bucket.clear();
        self.bucket.extend(pairs.iter().map(|&(cost, _)| {
            let b = bucket_of(cost);
            counts[b] += 1;
            b as u8
        }));
        // The cut's bucket: fewer than `keep` pairs before it, at least `keep` up to its end.
        // The cut lies high (most pairs are cheaper than the gate's edge): from the top down.
        let (mut cut, mut before) = (BUCKETS - 1, pairs.len() as u32 - counts[BUCKETS - 1]);
        while before >= keep as u32 {
            cut -= 1;
            before -= counts[cut];
        }
        let cut = cut as u8;
        // The cheaper buckets to the front (each write lands at or before its read), the cut's
        // bucket aside: every pair is written to both places, and the place advances only for
        // the pairs that belong there (no branch on the bucket). One more slot aside takes the
        // writes after the cut's last pair.
        let at_cut = counts[cut as usize] as usize;
        self.at_cut.clear();
        self.at_cut.resize(at_cut + 1, (0, 0));
        let (mut front, mut aside) = (0, 0);
        for k in 0..pairs.len() {
            let (pair, b) = (pairs[k], self.bucket[k]);
            pairs[front] = pair;
            front += (b < cut) as usize;
            self.at_cut[aside] = pair;
            aside += (b == cut) as usize;
        }
        debug_assert_eq!((front, aside), (before as usize, at_cut));
        let (need, at_cut) = (keep - front, &mut self.at_cut[..at_cut]);
        if at_cut.len() > need {
            at_cut.select_nth_unstable(need - 1);
        }
        pairs[front..keep].copy_from_slice(&at_cut[..need]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_mt::Mt64;

    /// The set the exact order keeps, sorted.
    fn by_select(pairs: &[(Cost, u32)], keep: usize) -> Vec<(Cost, u32)> {
        let mut all = pairs.to_vec();
        all.sort_unstable();
        all.truncate(keep);
        all
    }

    /// The kept set is the exact one: costs across the range, beyond it, many equal costs
    /// (their order is by slot), few and many pairs, a cut inside one crowded bucket.
    #[test]
    fn keeps_what_the_exact_order_keeps() {
        let mut rng = Mt64::new(41);
        let mut cheapest = Cheapest::default();
        let mut crowded_cuts = 0;
        for round in 0..3000 {
            let n = (rng.next_u64() % 200) as usize;
            let keep = 1 + (rng.next_u64() % 20) as usize;
            let top = [1.0, 16.0, 0.01, 1e6][round % 4];
            let mut pairs: Vec<(Cost, u32)> = (0..n as u32)
                .map(|slot| {
                    let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                    let cost = match rng.next_u64() % 5 {
                        0 => 0.5,               // ties
                        1 => 1.5 * top * u,     // beyond the range too
                        2 => (u * 4.0).floor(), // ties in a few values
                        _ => top * u,
                    };
                    (cost.to_bits(), slot.wrapping_mul(2_654_435_761) % 1000)
                })
                .collect();
            // Slots are distinct within a track.
            pairs.sort_unstable_by_key(|p| p.1);
            pairs.dedup_by_key(|p| p.1);
            let expected = by_select(&pairs, keep);
            let mut got = pairs.clone();
            cheapest.keep(&mut got, keep, top);
            let mut kept = got[..keep.min(got.len())].to_vec();
            kept.sort_unstable();
            assert_eq!(
                kept,
                expected,
                "round {round}: {} pairs, keep {keep}",
                pairs.len()
            );
            if pairs.len() > keep {
                crowded_cuts += (cheapest.at_cut.len() > 5) as usize;
            }
        }
        assert!(crowded_cuts > 100, "too few crowded cuts: {crowded_cuts}");
    }
}
