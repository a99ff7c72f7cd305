//! One frame's association, in phases over chunks of tracks. Each phase reads what the one
//! before wrote for every track, so the chunks of one phase are independent: with many tracks
//! they run on the rayon pool, with few on the calling thread. Per-detection state lives in
//! atomics (`Slots`), so chunks that gate the same detection need no lock. A cost is kept as
//! the bits of its f64 (`Cost`): costs are ≥ +0, and such floats order as their bits do, so
//! every comparison is an integer one and a detection's cheapest cost an atomic minimum.
//!
//! 1. `gather`: each track's gated candidates, cut to its `max_candidates` cheapest; its
//!    cheapest pair; each detection's cheapest cost (an atomic minimum), and whether two pairs
//!    may share it (`Slots::tied`).
//! 2. `take_mutual_best`: a pair that is the cheapest of both its track and its detection, and
//!    the only pair of its detection at that cost, is taken (the greedy order takes it whatever
//!    else happens); each detection has one such pair at most, so the chunks cannot both take
//!    one. A pair whose cost another pair of its detection shares is left to the conflicts,
//!    whose order breaks the tie (by track): taking any subset of the pairs the greedy order
//!    takes first leaves it the same result on the rest.
//! 3. `collect_conflicts`: the pairs left between free tracks and free detections (few: the
//!    local conflicts), each track's in its order (cost, then slot). `settle_conflicts` then
//!    gives the result of the greedy order on them, without sorting them (see there), and
//!    `take_settled` takes it.
//! 4. `ride_merges` (`super::merges`): missed tracks ride on a larger component on their
//!    prediction; tracks that have been missed too often are listed to end.
//!
//! The atomics are relaxed: within a phase only their own values matter (minima, and stores
//! to distinct detections), and the join that ends a phase orders everything before it. Only
//! `settle_conflicts` hands state between threads within a phase (a track another thread let
//! go), through the acquire and release of a detection's lock.
//!
//! The scratch storage of every chunk is kept from frame to frame, so once the tracker has seen
//! as many tracks and detections before, a frame allocates only the IDs it returns.

use super::cheapest::{Cheapest, Cost};
use super::grid::GridIndex;
use super::{observe, Detection, Track, TrackerConfig};
use rayon::prelude::*;
use std::sync::atomic::{
    AtomicBool, AtomicU32, AtomicU64,
    Ordering::{Acquire, Relaxed, Release},
};

/// Tracks per chunk: the unit of parallel work and of scratch storage. Small enough that the
/// pool's threads balance tracks of unequal cost (a missed track searches a wider gate): on a
/// 16-core host the markers scene's tracker took 0.70–0.75 ms a frame with chunks of 64 tracks,
/// 0.76–0.85 with 16 or 32, 1.4–1.6 with 128 and 1.0–2.0 with 256.
pub(super) const CHUNK: usize = 64;
/// With fewer tracks than this a frame stays on the calling thread: a few hundred tracks take
/// well under a millisecond there, against ~10 µs per phase to hand work to the pool. Marker
/// scenes carry 3,500–4,500 tracks (the noise around the markers): on a 16-core host the pool
/// takes them at 618–657 frames/s for 100 markers against 451–506 on one thread, and their p99
/// latency from 2.8–3.4 to 1.6–1.9 ms.
pub(super) const PARALLEL_MIN: usize = 1024;
/// With fewer detections than this, the passes over the detections (their extent, the grid's
/// sort, the large components) stay on the calling thread, even when the tracks go to the pool:
/// a few thousand detections take tens of µs there, and on a 16-core host handing them to the
/// pool took up to 0.6 ms a frame (the markers scene: 1,700 detections, 4,100 tracks).
pub(super) const PARALLEL_MIN_DETECTIONS: usize = 8192;
/// With fewer gated pairs than this, the phases after `gather` stay on the calling thread
/// (on a 16-core host a frame of a few detections among 40,000 tracks spent ~60 µs in each
/// hand-over to the pool).
pub(super) const PARALLEL_MIN_PAIRS: usize = 1024;
/// No track, no pair.
pub(super) const NONE: u32 = u32::MAX;

/// A chunk's scratch, kept from frame to frame.
#[derive(Default)]
pub(super) struct Chunk {
    /// The gated candidates (cost, slot) of the chunk's tracks, one track after the other,
    /// up to the last track's end; past it, room the gather writes into (it only grows).
    pairs: Vec<(Cost, u32)>,
    /// Where each track's candidates end in `pairs`.
    ends: Vec<u32>,
    /// The scratch of the cut to each track's `max_candidates` cheapest.
    cheapest: Cheapest,
    /// Each track's cheapest pair (cost, slot); slot `NONE` when it has none.
    best: Vec<(Cost, u32)>,
    /// Each track has taken a detection this frame.
    pub(super) taken: Vec<bool>,
    /// The pairs (cost, slot) left after phase 2 between a free track and a free slot, one
    /// track after the other, each track's by cost, then slot.
    conflicts: Vec<(Cost, u32)>,
    /// Per track: where it is in its pairs in `conflicts` (see `settle_conflicts`).
    proposal: Vec<Proposal>,
    /// Tracks (indices) that end this frame, ascending.
    pub(super) ended: Vec<u32>,
    /// The chunk's confirmed tracks that may ride on a merged component this frame (their
    /// last clean detection within `max_merged` frames), less those taken as mutual best
    /// pairs: at least the tracks that will look for one.
    pub(super) riders: u32,
}

impl Chunk {
    /// The gated candidates of the chunk's tracks (`gather`).
    pub(super) fn pair_count(&self) -> usize {
        self.ends.last().map_or(0, |&end| end as usize)
    }

    /// Track `j`'s pairs left to settle (`collect_conflicts`), by cost, then slot.
    pub(super) fn pairs_of(&self, j: usize) -> &[(Cost, u32)] {
        if j >= self.proposal.len() {
            // A chunk without pairs lists no proposals.
            return &[];
        }
        let start = j.checked_sub(1).map_or(0, |i| self.proposal[i].end);
        &self.conflicts[start as usize..self.proposal[j].end as usize]
    }

    /// Settles track `j` on its `k`-th pair (`pairs_of`), or on none: what `take_settled`
    /// then takes.
    pub(super) fn settle(&self, j: usize, k: Option<usize>) {
        let p = &self.proposal[j];
        let start = j.checked_sub(1).map_or(0, |i| self.proposal[i].end);
        p.next.store(k.map_or(p.end, |k| start + k as u32), Relaxed);
    }
}

/// A track's place in its conflicting pairs.
pub(super) struct Proposal {
    /// Its pair it holds or proposes next (in the chunk's `conflicts`).
    next: AtomicU32,
    /// Where its pairs end.
    end: u32,
}

/// The detections (grid slots) as the chunks share them, one array per field so that a pass
/// over one field reads nothing else.
#[derive(Default)]
pub(super) struct Slots {
    /// ln(area), NaN when the area is not positive and finite (the size term compares
    /// logarithms).
    ln_area: Vec<AtomicU64>,
    /// The cheapest cost of any pair with the detection.
    best_cost: Vec<AtomicU64>,
    /// Two pairs with the detection were seen at one cost that was its cheapest when the
    /// second came: set whenever two pairs share its final cheapest cost (and, rarely, when
    /// they shared one that a cheaper pair then beat). Equal costs are rare (exactly equal
    /// distances and sizes), so ties need no pass of their own.
    tied: Vec<AtomicBool>,
    /// The track that took the detection (`NONE`: none yet).
    track: Vec<AtomicU32>,
    /// Its ID (0: none).
    id: Vec<AtomicU64>,
    /// The detections of this frame: the first `len` entries of each array (the arrays keep
    /// the length of the most so far, so that a dense frame after sparse ones does not fill
    /// them anew before `place` writes them).
    len: usize,
}

impl Slots {
    /// Room for `n` detections; what each holds is set by `place`.
    pub(super) fn resize(&mut self, n: usize) {
        if self.track.len() < n {
            self.ln_area.resize_with(n, AtomicU64::default);
            self.best_cost.resize_with(n, AtomicU64::default);
            self.tied.resize_with(n, AtomicBool::default);
            self.track.resize_with(n, AtomicU32::default);
            self.id.resize_with(n, AtomicU64::default);
        }
        self.len = n;
    }

    /// Fresh state for detection `d` in `slot` (called by the grid index as it places the
    /// detection, so no pass of its own visits the slots).
    #[inline]
    pub(super) fn place(&self, slot: usize, d: &Detection) {
        let ln_area = if d.area > 0.0 && d.area.is_finite() {
            super::ln::ln(d.area)
        } else {
            f64::NAN
        };
        self.ln_area[slot].store(ln_area.to_bits(), Relaxed);
        self.best_cost[slot].store(f64::INFINITY.to_bits(), Relaxed);
        self.tied[slot].store(false, Relaxed);
        self.track[slot].store(NONE, Relaxed);
        self.id[slot].store(0, Relaxed);
    }

    /// The ID of the track that took detection `slot` (0: none).
    pub(super) fn id(&self, slot: usize) -> u64 {
        self.id[slot].load(Relaxed)
    }

    /// The track that took detection `slot` and its ID, if one did.
    pub(super) fn taken_by(&self, slot: usize) -> Option<(u32, u64)> {
        let track = self.track[slot].load(Relaxed);
        (track != NONE).then(|| (track, self.id[slot].load(Relaxed)))
    }

    /// Detection `slot` is held by track `ti` (settled, to be taken by `take_settled`).
    pub(super) fn hold(&self, slot: usize, ti: u32) {
        self.track[slot].store(ti, Relaxed);
    }

    /// The track that took detection `slot` (`NONE`: none).
    #[inline]
    pub(super) fn track_of(&self, slot: usize) -> u32 {
        self.track[slot].load(Relaxed)
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }
}

/// Runs `f(first track index, chunk, its tracks)` over the chunks, on the rayon pool when
/// `parallel`.
pub(super) fn for_each_chunk(
    parallel: bool,
    chunks: &mut [Chunk],
    tracks: &mut [Track],
    f: impl Fn(u32, &mut Chunk, &mut [Track]) + Sync,
) {
    let run = |(c, (chunk, tracks)): (usize, (&mut Chunk, &mut [Track]))| {
        f((c * CHUNK) as u32, chunk, tracks)
    };
    if parallel {
        chunks
            .par_iter_mut()
            .zip(tracks.par_chunks_mut(CHUNK))
            .enumerate()
            .for_each(run);
    } else {
        chunks
            .iter_mut()
            .zip(tracks.chunks_mut(CHUNK))
            .enumerate()
            .for_each(run);
    }
}

/// The result of the greedy order (by cost, then track, then slot) on the pairs the chunks
/// collected (`collect_conflicts`), without sorting them. Both ends rank the pairs by that one
/// order (a track its detections by (cost, slot), a detection its tracks by (cost, track)), so
/// there is exactly one stable matching (where no track and detection both prefer each other
/// to what they have): of two, the first pair in the order that is in one only would be
/// preferred by both its ends in the other. The greedy matching is stable (a pair that it
/// skips comes after one that took its track or its detection), so it is that one, and so is
/// what deferred acceptance finds: each free track proposes its pairs in its order; a detection
/// holds the best track that proposed so far, and the track it lets go proposes its next pair.
/// Each pair is proposed at most once: linear in the pairs, where a sort is not. In which order
/// the tracks propose makes no difference, so with `parallel` the chunks propose at once on
/// the rayon pool, a detection's holder changing under a lock in its `slots.track` entry.
///
/// On return `slots.track` holds each detection's track, and a track holds the detection of
/// its next pair (`Chunk::proposal`) if it has one left.
pub(super) fn settle_conflicts(chunks: &[Chunk], slots: &Slots, parallel: bool) {
    let propose = |(c, chunk): (usize, &Chunk)| {
        for j in 0..chunk.proposal.len() {
            propose_from((c * CHUNK + j) as u32, chunks, slots);
        }
    };
    if parallel {
        chunks.par_iter().enumerate().for_each(propose);
    } else {
        chunks.iter().enumerate().for_each(propose);
    }
}

/// `slots.track` while one thread decides who holds the detection.
const LOCKED: u32 = u32::MAX - 1;

/// Track `ti` proposes until a detection holds it or it has no pair left; a track it displaces
/// proposes next, on this thread.
fn propose_from(mut ti: u32, chunks: &[Chunk], slots: &Slots) {
    let proposal = |ti: u32| &chunks[ti as usize / CHUNK].proposal[ti as usize % CHUNK];
    let pair = |ti: u32, k: u32| chunks[ti as usize / CHUNK].conflicts[k as usize];
    loop {
        let (next, end) = (proposal(ti).next.load(Relaxed), proposal(ti).end);
        if next == end {
            return;
        }
        let (cost, slot) = pair(ti, next);
        let held = &slots.track[slot as usize];
        // Take the detection's lock (or the detection, if no track holds it). It is held for
        // a few instructions; a thread that waits long yields its core, in case the holder
        // lost its own to another process.
        let mut waits = 0u32;
        let holder = loop {
            match held.load(Acquire) {
                LOCKED => {
                    waits += 1;
                    if waits % 64 == 0 {
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                }
                NONE => {
                    if held.compare_exchange(NONE, ti, Release, Relaxed).is_ok() {
                        return;
                    }
                }
                holder => {
                    if held
                        .compare_exchange(holder, LOCKED, Acquire, Relaxed)
                        .is_ok()
                    {
                        break holder;
                    }
                }
            }
        };
        // The holder's next pair is the one with this detection while it holds it.
        let of_holder = proposal(holder);
        let holder_cost = pair(holder, of_holder.next.load(Relaxed)).0;
        if (cost, ti) < (holder_cost, holder) {
            of_holder.next.fetch_add(1, Relaxed);
            held.store(ti, Release);
            ti = holder;
        } else {
            proposal(ti).next.store(next + 1, Relaxed);
            held.store(holder, Release);
        }
    }
}

/// What every phase reads of the frame.
pub(super) struct Frame<'a> {
    pub(super) frame: u64,
    pub(super) cfg: &'a TrackerConfig,
    pub(super) grid: &'a GridIndex,
    pub(super) slots: &'a Slots,
    pub(super) detections: &'a [Detection],
    /// No gate reaches past this (see `dense_radius`).
    pub(super) dense_radius: f64,
    /// The frame is sparse enough to gate: a detected track becomes confirmed.
    pub(super) confirm: bool,
    /// How far from its centroid a component reaches, at most (+1 px): bounds the search for
    /// a component a missed track's prediction lies on.
    pub(super) reach: f64,
    /// The chunks run on several threads (else the shared minima need no atomic update).
    pub(super) parallel: bool,
}

impl Frame<'_> {
    /// Track `ti` takes the detection in `slot` (the caller marks the track taken).
    pub(super) fn take(&self, slot: u32, ti: u32, t: &mut Track) {
        self.slots.track[slot as usize].store(ti, Relaxed);
        self.slots.id[slot as usize].store(t.id, Relaxed);
        let d = &self.detections[self.grid.slot(slot as usize).0 as usize];
        observe(t, self.frame, d, self.cfg, self.confirm);
    }

    /// Phase 1.
    pub(super) fn gather(&self, chunk: &mut Chunk, tracks: &[Track]) {
        let (cfg, grid) = (self.cfg, self.grid);
        let (xs, ys, ln_areas) = (grid.xs(), grid.ys(), &self.slots.ln_area[..]);
        let inv_base2 = 1.0 / (cfg.gate_px * cfg.gate_px);
        let keep = cfg.max_candidates as usize;
        let Chunk {
            pairs,
            ends,
            cheapest,
            best,
            taken,
            riders,
            ..
        } = chunk;
        ends.clear();
        best.clear();
        taken.clear();
        taken.resize(tracks.len(), false);
        let mut filled = 0;
        *riders = 0;
        for t in tracks {
            *riders += self.may_ride(t) as u32;
            let (px, py) = t.predict(self.frame);
            let gate = cfg.gate(self.frame - t.clean_frame).min(self.dense_radius);
            let gate2 = gate * gate;
            // The track's candidates go straight to the end of its chunk's pairs: `used`
            // of them past `filled`, before the `max_candidates` cut.
            let mut used = 0;
            grid.for_each_run_near(px, py, gate, |run| {
                // Every slot of the run is written, and the next write goes past it only if
                // it is in the gate: no branch to mispredict on the ~2/3 of slots that are in
                // the gate's cells but not in the gate. Only the distance here: the size term
                // is for the slots in the gate (below).
                let end = filled + used + run.len();
                if pairs.len() < end {
                    pairs.resize(end, (0, 0));
                }
                let out = &mut pairs[filled + used..end];
                let mut n = 0;
                let (xs, ys) = (&xs[run.clone()], &ys[run.clone()]);
                for (k, (&x, &y)) in xs.iter().zip(ys).enumerate() {
                    let d2 = (x - px).powi(2) + (y - py).powi(2);
                    out[n] = (d2.to_bits(), (run.start + k) as u32);
                    n += (d2 <= gate2) as usize;
                }
                used += n;
            });
            // The cost of each candidate, from its squared distance. Weight 0: the track has
            // no usable size of its own. (Its logarithm only for a track with candidates: in
            // clutter most tracks that missed have none.)
            let (weight, ln_track_area) =
                if used > 0 && cfg.size_weight > 0.0 && t.area > 0.0 && t.area.is_finite() {
                    (cfg.size_weight, super::ln::ln(t.area))
                } else {
                    (0.0, 0.0)
                };
            for (cost, slot) in &mut pairs[filled..filled + used] {
                let d2 = f64::from_bits(*cost);
                let ln_area = f64::from_bits(ln_areas[*slot as usize].load(Relaxed));
                let size = (ln_area - ln_track_area).abs();
                let size = if size.is_nan() { 0.0 } else { weight * size };
                *cost = (d2 * inv_base2 + size).to_bits();
            }
            let mut found = &mut pairs[filled..filled + used];
            if found.len() > keep {
                // The costs spread over about the distance term's range (the gate's edge).
                cheapest.keep(found, keep, gate2 * inv_base2);
                found = &mut found[..keep];
            }
            // Within one track the greedy order is cost, then slot.
            let mut b = (Cost::MAX, NONE);
            for &(cost, slot) in found.iter() {
                b = b.min((cost, slot));
                let best_cost = &self.slots.best_cost[slot as usize];
                // Most pairs are not their detection's cheapest: a plain load rules them out,
                // and on one thread a plain store does the rest. Of two pairs at one cost, the
                // later to reach the minimum sees its own cost there (in the load, or in what
                // the atomic minimum replaced).
                let held = best_cost.load(Relaxed);
                let tie = if cost < held {
                    if self.parallel {
                        best_cost.fetch_min(cost, Relaxed) == cost
                    } else {
                        best_cost.store(cost, Relaxed);
                        false
                    }
                } else {
                    cost == held
                };
                if tie {
                    self.slots.tied[slot as usize].store(true, Relaxed);
                }
            }
            filled += found.len();
            best.push(b);
            ends.push(filled as u32);
        }
    }

    /// Phase 2.
    pub(super) fn take_mutual_best(&self, first: u32, chunk: &mut Chunk, tracks: &mut [Track]) {
        if chunk.pair_count() == 0 {
            return;
        }
        for (j, (t, &(cost, slot))) in tracks.iter_mut().zip(&chunk.best).enumerate() {
            if slot == NONE {
                continue;
            }
            let ti = first + j as u32;
            let s = slot as usize;
            if self.slots.best_cost[s].load(Relaxed) == cost && !self.slots.tied[s].load(Relaxed) {
                chunk.riders -= self.may_ride(t) as u32;
                self.take(slot, ti, t);
                chunk.taken[j] = true;
            }
        }
    }

    /// Phase 3.
    pub(super) fn collect_conflicts(&self, chunk: &mut Chunk) {
        let no_pairs = chunk.pair_count() == 0;
        let Chunk {
            pairs,
            ends,
            conflicts,
            proposal,
            taken,
            ..
        } = chunk;
        conflicts.clear();
        proposal.clear();
        if no_pairs {
            // No pairs: no proposals (`take_settled` and the settling see none).
            return;
        }
        let mut start = 0;
        for (&end, &taken) in ends.iter().zip(taken.iter()) {
            let of_track = &pairs[start..end as usize];
            start = end as usize;
            let first = conflicts.len();
            if !taken {
                for &(cost, slot) in of_track {
                    if self.slots.track[slot as usize].load(Relaxed) == NONE {
                        conflicts.push((cost, slot));
                    }
                }
                conflicts[first..].sort_unstable();
            }
            proposal.push(Proposal {
                next: AtomicU32::new(first as u32),
                end: conflicts.len() as u32,
            });
        }
    }

    /// Phase 3, after `settle_conflicts`: each track that holds a detection takes it.
    pub(super) fn take_settled(&self, first: u32, chunk: &mut Chunk, tracks: &mut [Track]) {
        let Chunk {
            conflicts,
            proposal,
            taken,
            ..
        } = chunk;
        for (j, (t, p)) in tracks.iter_mut().zip(proposal.iter_mut()).enumerate() {
            let next = *p.next.get_mut();
            if next < p.end {
                let ti = first + j as u32;
                let slot = conflicts[next as usize].1;
                debug_assert_eq!(self.slots.track[slot as usize].load(Relaxed), ti);
                self.take(slot, ti, t);
                taken[j] = true;
            }
        }
    }
}

/// The greedy order as a sort, then one pass: a pair is taken unless its track or its
/// detection was. What `settle_conflicts` must give; it leaves the same state.
#[cfg(test)]
pub(super) fn settle_by_sorting(chunks: &[Chunk], slots: &Slots) {
    let mut pairs: Vec<(Cost, u32, u32, u32)> = Vec::new();
    for (c, chunk) in chunks.iter().enumerate() {
        for (j, p) in chunk.proposal.iter().enumerate() {
            let from = p.next.load(Relaxed);
            for k in from..p.end {
                let (cost, slot) = chunk.conflicts[k as usize];
                pairs.push((cost, (c * CHUNK + j) as u32, slot, k));
            }
        }
    }
    pairs.sort_unstable();
    let mut taken = std::collections::HashSet::new();
    for (_, ti, slot, k) in pairs {
        if slots.track[slot as usize].load(Relaxed) == NONE && !taken.contains(&ti) {
            slots.track[slot as usize].store(ti, Relaxed);
            taken.insert(ti);
            chunks[ti as usize / CHUNK].proposal[ti as usize % CHUNK]
                .next
                .store(k, Relaxed);
        }
    }
    // A track that took nothing has no pair left.
    for (c, chunk) in chunks.iter().enumerate() {
        for (j, p) in chunk.proposal.iter().enumerate() {
            if !taken.contains(&((c * CHUNK + j) as u32)) {
                p.next.store(p.end, Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_mt::Mt64;

    /// `tracks` tracks with up to 8 pairs each among `n_slots` detections, costs from a
    /// handful of values (so that many pairs tie), each track's in its order.
    fn random_conflicts(rng: &mut Mt64, tracks: usize, n_slots: u32) -> Vec<Chunk> {
        let costs = [0.0f64, 0.25, 0.5, 0.5, 1.0, 2.0];
        let mut chunks: Vec<Chunk> = (0..tracks.div_ceil(CHUNK))
            .map(|_| Chunk::default())
            .collect();
        for ti in 0..tracks {
            let chunk = &mut chunks[ti / CHUNK];
            let first = chunk.conflicts.len();
            let mut slots: Vec<u32> = (0..rng.next_u64() % 9)
                .map(|_| (rng.next_u64() % n_slots as u64) as u32)
                .collect();
            slots.sort_unstable();
            slots.dedup();
            for slot in slots {
                let cost = costs[(rng.next_u64() % costs.len() as u64) as usize];
                chunk.conflicts.push((cost.to_bits(), slot));
            }
            chunk.conflicts[first..].sort_unstable();
            chunk.proposal.push(Proposal {
                next: AtomicU32::new(first as u32),
                end: chunk.conflicts.len() as u32,
            });
        }
        chunks
    }

    fn free_slots(n: u32) -> Slots {
        Slots {
            track: (0..n).map(|_| AtomicU32::new(NONE)).collect(),
            len: n as usize,
            ..Slots::default()
        }
    }

    /// What each detection holds and where each track is in its pairs.
    fn state(chunks: &[Chunk], slots: &Slots) -> (Vec<u32>, Vec<u32>) {
        let held = slots.track.iter().map(|t| t.load(Relaxed)).collect();
        let next = chunks
            .iter()
            .flat_map(|c| c.proposal.iter().map(|p| p.next.load(Relaxed)))
            .collect();
        (held, next)
    }

    /// Deferred acceptance gives what the sort and the greedy pass give, on one thread and on
    /// several, with many ties, more tracks than detections and the reverse.
    #[test]
    fn settling_conflicts_equals_the_sorted_greedy_pass() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        let mut rng = Mt64::new(12);
        let mut contested = 0;
        for round in 0..60 {
            let tracks = 1 + (rng.next_u64() % (4 * CHUNK as u64)) as usize;
            let n_slots = 1 + (rng.next_u64() % (2 * tracks as u64)) as u32;
            let expected = {
                let chunks = random_conflicts(&mut Mt64::new(round), tracks, n_slots);
                let slots = free_slots(n_slots);
                settle_by_sorting(&chunks, &slots);
                state(&chunks, &slots)
            };
            for parallel in [false, true] {
                let chunks = random_conflicts(&mut Mt64::new(round), tracks, n_slots);
                let slots = free_slots(n_slots);
                pool.install(|| settle_conflicts(&chunks, &slots, parallel));
                let got = state(&chunks, &slots);
                assert!(
                    got == expected,
                    "round {round} ({tracks} tracks, {n_slots} detections, parallel {parallel})"
                );
            }
            let pairs: usize = random_conflicts(&mut Mt64::new(round), tracks, n_slots)
                .iter()
                .map(|c| c.conflicts.len())
                .sum();
            contested += pairs.saturating_sub(n_slots as usize);
        }
        assert!(contested > 10_000, "too few contested pairs: {contested}");
    }
}
