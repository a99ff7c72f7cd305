//! The subnetwork rule (`Assignment::Subnetwork`): trackpy's linking, where each *subnetwork*
//! of the candidate graph (tracks and detections joined through their gated pairs) is solved
//! for the least total cost, a track left unlinked costing what a pair on its gate's edge
//! costs (trackpy: `search_range²`; trackpy.linking.subnetlinker) and a detection left
//! unlinked (it starts a track) nothing.
//!
//! Clusters: the connected components of the pairs, over every track and detection. The
//! total cost is a sum over the pairs and over the tracks, and each pair and each track lies
//! in one component, so the least total of the frame is the sum of the least totals of the
//! components, solved apart: the cluster rule is exact. Mutual-best pairs are not taken
//! first, as the greedy rule takes them: one may be in no optimum (track A costs 1 to
//! detection a and 2 to b, track B only has a, at 2: A–a is the cheapest of both, but A–b and
//! B–a cost 4 against 1 + B's unlinked cost).
//!
//! Each cluster is an assignment problem, solved exactly on costs in fixed point (so that
//! sums are exact and equal totals are true ties): rows are the tracks and one row per
//! detection ("left unlinked"), columns the detections and one per track ("unlinked"); a
//! track's row reaches its detections at their cost and its own unlinked column at its
//! unlinked cost, a detection's row its own column and the unlinked column of each track it
//! is a candidate of, at 0. Its perfect matchings are the assignments of the tracks (a
//! detection a track took leaves its row to that track's unlinked column). Shortest
//! augmenting paths with potentials (Hungarian / Jonker–Volgenant, on the sparse pairs) find
//! an optimum and optimal potentials; every optimum is then a perfect matching of the pairs
//! the potentials leave tight, and among those the tie rule picks one:
//!
//! **Ties**: of equally cheap assignments, the first in the order of the tracks (by index:
//! the order they started) and, for each, of its options: its candidates by cost, then
//! detection slot, then unlinked. So each track in turn takes its first option that still
//! leaves an optimum, whatever the threads.
//!
//! Clusters above `EXACT_MAX_TRACKS` tracks are settled by the greedy rule (cheapest pair
//! first), and counted. Clusters are independent: many are solved at once on the rayon pool.

use super::assign::{Chunk, Slots, CHUNK, NONE};
use super::cheapest::Cost;
use super::{Track, TrackerConfig};
use rayon::prelude::*;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// Tracks a cluster may have and be solved exactly (trackpy refuses subnetworks of more than
/// 30 particles, its search being exponential; the assignment here is polynomial).
pub(super) const EXACT_MAX_TRACKS: usize = 2000;

/// What a track is to the clusters (`Subnets::kind`): without candidates, alone in its
/// cluster, or sharing one with other tracks.
const NO_PAIRS: u8 = 0;
const ALONE: u8 = 1;
const SHARED: u8 = 2;

/// Fixed-point costs: units of 2⁻³² of the cost unit ((distance / gate)²), at most 2⁴⁰ (a
/// cost of 256, far past any gate: costlier pairs compare as equal). A cluster's paths then
/// sum to well under 2⁶³.
const FIXED_ONE: f64 = (1u64 << 32) as f64;
const FIXED_MAX: i64 = 1 << 40;

/// A cost (its f64 bits) in fixed point.
pub(super) fn fixed(cost: Cost) -> i64 {
    let c = f64::from_bits(cost) * FIXED_ONE;
    // (NaN compares false: it ends at the top, as +∞.)
    if c < FIXED_MAX as f64 {
        c.round() as i64
    } else {
        FIXED_MAX
    }
}

/// The cost of leaving `t` unlinked: that of a pair on its gate's edge, and no less than its
/// costliest candidate (`pairs`), so that a size term never makes a candidate worse than no
/// link (without one, as in trackpy, every candidate costs at most the gate's edge).
fn unlinked_cost(t: &Track, frame: u64, cfg: &TrackerConfig, pairs: &[(Cost, u32)]) -> Cost {
    let edge = (cfg.gate(frame - t.clean_frame) / cfg.gate_px)
        .powi(2)
        .to_bits();
    pairs.iter().map(|p| p.0).fold(edge, Cost::max)
}

/// Scratch of the clusters of a frame, kept from frame to frame.
#[derive(Default)]
pub(super) struct Subnets {
    /// Union-find over the detection slots of the tracks that share one.
    parent: Vec<u32>,
    /// Per slot: the tracks that have it among their candidates.
    naming: Vec<AtomicU32>,
    /// Per track: `NO_PAIRS`, `ALONE` (each of its candidates is its alone) or `SHARED`.
    kind: Vec<u8>,
    /// The tracks alone in their cluster, ascending: each takes its cheapest candidate.
    alone: Vec<u32>,
    /// Per slot: the cluster of the root, then the slot's index within its cluster.
    cluster_of: Vec<u32>,
    local: Vec<u32>,
    /// Per track: its cluster of several tracks (`NONE`: none).
    track_cluster: Vec<u32>,
    /// The tracks of each cluster, ascending, cluster after cluster; where each begins.
    tracks: Vec<u32>,
    track_starts: Vec<u32>,
    /// Scratch: each cluster's next place in `tracks` while they are placed.
    fill: Vec<u32>,
    /// The detection slots of each cluster, in the order its tracks first name them.
    slots: Vec<u32>,
    slot_starts: Vec<u32>,
    /// Clusters settled greedily (larger than `EXACT_MAX_TRACKS`), over every frame.
    pub(super) greedy_clusters: u64,
}

/// One track's pairs (cost, slot), each track's by cost then slot (`Chunk::pairs_of`).
fn pairs_of(chunks: &[Chunk], ti: u32) -> &[(Cost, u32)] {
    chunks[ti as usize / CHUNK].pairs_of(ti as usize % CHUNK)
}

/// Where the pairs of `ti` settle: the `k`-th of its pairs, or none.
fn settle_track(chunks: &[Chunk], slots: &Slots, ti: u32, k: Option<usize>) {
    let chunk = &chunks[ti as usize / CHUNK];
    let j = ti as usize % CHUNK;
    if let Some(k) = k {
        slots.hold(chunk.pairs_of(j)[k].1 as usize, ti);
    }
    chunk.settle(j, k);
}

fn find(parent: &mut [u32], mut x: u32) -> u32 {
    while parent[x as usize] != x {
        let up = parent[parent[x as usize] as usize];
        parent[x as usize] = up;
        x = up;
    }
    x
}

impl Subnets {
    /// Settles the pairs the chunks collected (`Frame::collect_conflicts`, every pair of every
    /// track when nothing was taken before) by the subnetwork rule: on return `slots` holds
    /// each detection's track and each track's proposal its pair, as `settle_conflicts`
    /// leaves them for `take_settled`.
    pub(super) fn settle(
        &mut self,
        chunks: &[Chunk],
        tracks: &[Track],
        slots: &Slots,
        (frame, cfg): (u64, &TrackerConfig),
        parallel: bool,
    ) {
        self.find_clusters(chunks, tracks.len(), slots.len(), parallel);
        let n_clusters = self.track_starts.len() - 1;
        let this = &*self;
        // Alone, a track takes its cheapest candidate (no dearer than unlinked).
        let alone = |&ti: &u32| settle_track(chunks, slots, ti, Some(0));
        if parallel {
            this.alone.par_iter().with_min_len(1024).for_each(alone);
        } else {
            this.alone.iter().for_each(alone);
        }
        let solve = |(solver, picks): &mut (Solver, Vec<u32>), c: usize| {
            let members =
                &this.tracks[this.track_starts[c] as usize..this.track_starts[c + 1] as usize];
            let n_slots = (this.slot_starts[c + 1] - this.slot_starts[c]) as usize;
            let cluster = Cluster {
                members,
                n_slots,
                pairs_of: |ti| pairs_of(chunks, ti),
                unlinked_of: |ti| {
                    unlinked_cost(&tracks[ti as usize], frame, cfg, pairs_of(chunks, ti))
                },
                local_of: |slot| this.local[slot as usize],
            };
            cluster.solve(solver, picks);
            for (&ti, &pick) in members.iter().zip(picks.iter()) {
                settle_track(chunks, slots, ti, (pick != NONE).then_some(pick as usize));
            }
        };
        if parallel {
            (0..n_clusters)
                .into_par_iter()
                .with_min_len(64)
                .for_each_init(Default::default, solve);
        } else {
            let mut scratch = Default::default();
            (0..n_clusters).for_each(|c| solve(&mut scratch, c));
        }
        self.greedy_clusters += (0..n_clusters)
            .filter(|&c| {
                (self.track_starts[c + 1] - self.track_starts[c]) as usize > EXACT_MAX_TRACKS
            })
            .count() as u64;
    }

    /// The connected components of the pairs: the tracks alone in theirs (`alone`), and each
    /// cluster of several tracks with its tracks (ascending) and slots. A track is alone when
    /// no other track has any of its candidates, which one pass over the pairs tells on all
    /// cores; only the tracks that share a candidate (50,000 particles: 1,100–2,100 clusters of
    /// 2–4 tracks among 29,000 tracks) go through the union-find and the numbering, one after
    /// the other (all of them took 0.8 ms a frame on one thread).
    fn find_clusters(&mut self, chunks: &[Chunk], n_tracks: usize, n_slots: usize, parallel: bool) {
        self.naming.clear();
        self.naming.resize_with(n_slots, || AtomicU32::new(0));
        let naming = &self.naming;
        let name = |ti: usize| {
            for &(_, slot) in pairs_of(chunks, ti as u32) {
                naming[slot as usize].fetch_add(1, Relaxed);
            }
        };
        let kind_of = |ti: usize| match pairs_of(chunks, ti as u32) {
            [] => NO_PAIRS,
            pairs
                if pairs
                    .iter()
                    .all(|&(_, s)| naming[s as usize].load(Relaxed) == 1) =>
            {
                ALONE
            }
            _ => SHARED,
        };
        if parallel {
            (0..n_tracks)
                .into_par_iter()
                .with_min_len(1024)
                .for_each(name);
            (0..n_tracks)
                .into_par_iter()
                .with_min_len(1024)
                .map(kind_of)
                .collect_into_vec(&mut self.kind);
        } else {
            (0..n_tracks).for_each(name);
            self.kind.clear();
            self.kind.extend((0..n_tracks).map(kind_of));
        }
        let kind = &self.kind;
        let of_kind = |k: u8| (0..n_tracks as u32).filter(move |&ti| kind[ti as usize] == k);
        self.alone.clear();
        self.alone.extend(of_kind(ALONE));
        // The shared ones' clusters.
        let parent = &mut self.parent;
        parent.clear();
        parent.extend(0..n_slots as u32);
        for ti in of_kind(SHARED) {
            if let Some((&(_, first), rest)) = pairs_of(chunks, ti).split_first() {
                let mut a = find(parent, first);
                for &(_, slot) in rest {
                    let b = find(parent, slot);
                    parent[a.max(b) as usize] = a.min(b);
                    a = a.min(b);
                }
            }
        }
        // Clusters numbered by their first track; tracks counted per cluster.
        self.cluster_of.clear();
        self.cluster_of.resize(n_slots, NONE);
        self.track_cluster.clear();
        self.track_cluster.resize(n_tracks, NONE);
        self.track_starts.clear();
        for ti in of_kind(SHARED) {
            let (_, slot) = pairs_of(chunks, ti)[0];
            let root = find(parent, slot) as usize;
            if self.cluster_of[root] == NONE {
                self.cluster_of[root] = self.track_starts.len() as u32;
                self.track_starts.push(0);
            }
            let c = self.cluster_of[root];
            self.track_starts[c as usize] += 1;
            self.track_cluster[ti as usize] = c;
        }
        // Counts to starts; then the tracks in order, each into its cluster's next place.
        let mut sum = 0;
        for s in &mut self.track_starts {
            (*s, sum) = (sum, sum + *s);
        }
        self.track_starts.push(sum);
        self.tracks.clear();
        self.tracks.resize(sum as usize, 0);
        self.fill.clear();
        self.fill.extend_from_slice(&self.track_starts);
        for (ti, &c) in self.track_cluster.iter().enumerate() {
            if c != NONE {
                self.tracks[self.fill[c as usize] as usize] = ti as u32;
                self.fill[c as usize] += 1;
            }
        }
        // Each cluster's slots, numbered within it.
        self.local.clear();
        self.local.resize(n_slots, NONE);
        self.slots.clear();
        self.slot_starts.clear();
        for c in 0..self.track_starts.len() - 1 {
            self.slot_starts.push(self.slots.len() as u32);
            let first = self.slots.len();
            for &ti in
                &self.tracks[self.track_starts[c] as usize..self.track_starts[c + 1] as usize]
            {
                for &(_, slot) in pairs_of(chunks, ti) {
                    if self.local[slot as usize] == NONE {
                        self.local[slot as usize] = (self.slots.len() - first) as u32;
                        self.slots.push(slot);
                    }
                }
            }
        }
        self.slot_starts.push(self.slots.len() as u32);
    }
}

/// One cluster of several tracks as its solvers read it: its tracks (ascending), its
/// detection slots' number, each track's pairs (cost, slot) by cost then slot, each track's
/// unlinked cost, and each slot's index within the cluster (0..n_slots).
pub(super) struct Cluster<'a, P, U, L> {
    pub(super) members: &'a [u32],
    pub(super) n_slots: usize,
    pub(super) pairs_of: P,
    pub(super) unlinked_of: U,
    pub(super) local_of: L,
}

impl<'a, 'p, P, U, L> Cluster<'a, P, U, L>
where
    P: Fn(u32) -> &'p [(Cost, u32)],
    U: Fn(u32) -> Cost,
    L: Fn(u32) -> u32,
{
    /// Each member's pick into `picks` (the index of its pair, `NONE`: unlinked): the least
    /// total cost, ties by the tie rule; above `EXACT_MAX_TRACKS` tracks the greedy rule's.
    pub(super) fn solve(&self, solver: &mut Solver, picks: &mut Vec<u32>) {
        picks.clear();
        if self.members.len() > EXACT_MAX_TRACKS {
            self.greedy(picks);
            return;
        }
        solver.clear(self.n_slots);
        for &ti in self.members {
            let pairs = (self.pairs_of)(ti);
            let options = pairs
                .iter()
                .map(|&(cost, slot)| (fixed(cost), (self.local_of)(slot)));
            solver.add_track(fixed((self.unlinked_of)(ti)), options);
        }
        picks.extend_from_slice(solver.solve());
    }

    /// The greedy rule on the cluster's pairs: by cost, then track, then slot, a pair is taken
    /// unless its track or its detection was.
    fn greedy(&self, picks: &mut Vec<u32>) {
        let mut pairs: Vec<(Cost, u32, u32, u32)> = (self.members.iter().enumerate())
            .flat_map(|(m, &ti)| {
                (self.pairs_of)(ti)
                    .iter()
                    .enumerate()
                    .map(move |(k, &(cost, slot))| (cost, m as u32, slot, k as u32))
            })
            .collect();
        // Members ascend with their tracks: (cost, member, slot) is (cost, track, slot).
        pairs.sort_unstable();
        picks.resize(self.members.len(), NONE);
        let mut taken = vec![false; self.n_slots];
        for &(_, m, slot, k) in &pairs {
            let local = (self.local_of)(slot) as usize;
            if picks[m as usize] == NONE && !taken[local] {
                taken[local] = true;
                picks[m as usize] = k;
            }
        }
    }
}

/// The exact solver of one cluster (see the module's notes), with its scratch.
///
/// Rows: tracks `0..n`, then detection `j`'s "left unlinked" row `n + j`; columns: detections
/// `0..m`, then track `i`'s unlinked column `m + i`. Reduced cost of an edge: cost − u[row] −
/// v[column], kept ≥ 0, and 0 on the matched edges.
#[derive(Default)]
pub(super) struct Solver {
    n_dets: usize,
    /// Each track's options (cost, detection) in its order, track after track; where each
    /// track's begin (one more entry at the end); its unlinked cost.
    options: Vec<(i64, u32)>,
    option_starts: Vec<u32>,
    unlinked: Vec<i64>,
    /// The rows' edges (column, cost), row after row, and where each row's begin.
    edges: Vec<(u32, i64)>,
    edge_starts: Vec<u32>,
    /// Per detection: where its row's next edge goes (while the edges are built).
    next_edge: Vec<u32>,
    u: Vec<i64>,
    v: Vec<i64>,
    row_col: Vec<u32>,
    col_row: Vec<u32>,
    /// Shortest paths: per column its distance, the row it was reached from, done; per row
    /// its distance; the rows and columns touched.
    dist: Vec<i64>,
    from: Vec<u32>,
    done: Vec<bool>,
    row_dist: Vec<i64>,
    seen_rows: Vec<u32>,
    seen_cols: Vec<u32>,
    heap: BinaryHeap<Reverse<(i64, u32)>>,
    /// Tie rule: rows whose column is settled; the search for an alternating path (per row:
    /// the row before it and the column it takes; a mark per search).
    fixed: Vec<bool>,
    parent: Vec<(u32, u32)>,
    mark: Vec<u32>,
    generation: u32,
    queue: Vec<u32>,
    /// Per track: its option taken, `NONE` for unlinked.
    picks: Vec<u32>,
}

impl Solver {
    /// A new cluster of `n_dets` detections (numbered 0..n_dets) and no tracks yet.
    pub(super) fn clear(&mut self, n_dets: usize) {
        self.n_dets = n_dets;
        self.options.clear();
        self.option_starts.clear();
        self.option_starts.push(0);
        self.unlinked.clear();
    }

    /// The next track: its unlinked cost and its options (cost, detection) in its order
    /// (distinct detections; costs ≥ 0).
    pub(super) fn add_track(
        &mut self,
        unlinked: i64,
        options: impl IntoIterator<Item = (i64, u32)>,
    ) {
        self.options.extend(options);
        self.option_starts.push(self.options.len() as u32);
        self.unlinked.push(unlinked);
    }

    fn n_tracks(&self) -> usize {
        self.unlinked.len()
    }

    /// Each track's option (`NONE`: unlinked) of the least total cost, ties by the tie rule.
    pub(super) fn solve(&mut self) -> &[u32] {
        self.build_edges();
        let (n, m) = (self.n_tracks(), self.n_dets);
        let size = n + m;
        self.u.clear();
        self.u.resize(size, 0);
        self.v.clear();
        self.v.resize(size, 0);
        self.row_col.clear();
        self.row_col.resize(size, NONE);
        self.col_row.clear();
        self.col_row.resize(size, NONE);
        self.dist.clear();
        self.dist.resize(size, i64::MAX);
        self.from.clear();
        self.from.resize(size, NONE);
        self.done.clear();
        self.done.resize(size, false);
        self.row_dist.clear();
        self.row_dist.resize(size, 0);
        // A detection's own row takes its column at 0: tight with zero potentials.
        for j in 0..m {
            self.row_col[n + j] = j as u32;
            self.col_row[j] = (n + j) as u32;
        }
        for i in 0..n {
            self.augment(i as u32);
        }
        self.break_ties();
        &self.picks
    }

    /// The rows' edges (see the struct).
    fn build_edges(&mut self) {
        let (n, m) = (self.n_tracks(), self.n_dets);
        self.edges.clear();
        self.edge_starts.clear();
        for i in 0..n {
            self.edge_starts.push(self.edges.len() as u32);
            let (a, b) = (
                self.option_starts[i] as usize,
                self.option_starts[i + 1] as usize,
            );
            self.edges
                .extend(self.options[a..b].iter().map(|&(cost, j)| (j, cost)));
            self.edges.push(((m + i) as u32, self.unlinked[i]));
        }
        // A detection's row: its own column, and the unlinked column of each of its tracks
        // (counted, then placed, in track order).
        let next = &mut self.next_edge;
        next.clear();
        next.resize(m, 1);
        for &(_, j) in &self.options {
            next[j as usize] += 1;
        }
        let mut at = self.edges.len() as u32;
        for count in next.iter_mut() {
            self.edge_starts.push(at);
            (*count, at) = (at + 1, at + *count);
        }
        self.edge_starts.push(at);
        self.edges.resize(at as usize, (0, 0));
        for j in 0..m {
            self.edges[self.edge_starts[n + j] as usize] = (j as u32, 0);
        }
        for i in 0..n {
            let (a, b) = (
                self.option_starts[i] as usize,
                self.option_starts[i + 1] as usize,
            );
            for k in a..b {
                let j = self.options[k].1 as usize;
                self.edges[next[j] as usize] = ((m + i) as u32, 0);
                next[j] += 1;
            }
        }
    }

    fn row_edges(&self, r: u32) -> std::ops::Range<usize> {
        self.edge_starts[r as usize] as usize..self.edge_starts[r as usize + 1] as usize
    }

    fn reduced(&self, r: u32, (c, cost): (u32, i64)) -> i64 {
        cost - self.u[r as usize] - self.v[c as usize]
    }

    /// Relaxes the edges of row `r`, reached at distance `d`.
    fn relax(&mut self, r: u32, d: i64) {
        self.row_dist[r as usize] = d;
        self.seen_rows.push(r);
        for e in self.row_edges(r) {
            let (c, _) = self.edges[e];
            let to = d + self.reduced(r, self.edges[e]);
            if !self.done[c as usize] && to < self.dist[c as usize] {
                if self.dist[c as usize] == i64::MAX {
                    self.seen_cols.push(c);
                }
                self.dist[c as usize] = to;
                self.from[c as usize] = r;
                self.heap.push(Reverse((to, c)));
            }
        }
    }

    /// Matches the free row `s` by a shortest augmenting path (Dijkstra on the reduced costs),
    /// then moves the potentials so that the path is tight and no reduced cost goes below 0.
    fn augment(&mut self, s: u32) {
        self.heap.clear();
        self.relax(s, 0);
        let (sink, delta) = loop {
            let Some(Reverse((d, c))) = self.heap.pop() else {
                unreachable!("a track's unlinked column is always free or reachable");
            };
            if self.done[c as usize] || d > self.dist[c as usize] {
                continue;
            }
            self.done[c as usize] = true;
            let r = self.col_row[c as usize];
            if r == NONE {
                break (c, d);
            }
            self.relax(r, d);
        };
        for &c in &self.seen_cols {
            let c = c as usize;
            if self.done[c] {
                self.v[c] -= delta - self.dist[c];
            }
        }
        for &r in &self.seen_rows {
            self.u[r as usize] += delta - self.row_dist[r as usize];
        }
        let mut c = sink;
        loop {
            let r = self.from[c as usize];
            let before = self.row_col[r as usize];
            self.row_col[r as usize] = c;
            self.col_row[c as usize] = r;
            if r == s {
                break;
            }
            c = before;
        }
        for &c in &self.seen_cols {
            self.dist[c as usize] = i64::MAX;
            self.done[c as usize] = false;
        }
        self.seen_cols.clear();
        self.seen_rows.clear();
    }

    /// The tie rule: each track in order takes its first option that is in some optimum given
    /// the tracks before it (an optimum is a perfect matching of the tight edges, the
    /// potentials being optimal), moving the others along an alternating path.
    fn break_ties(&mut self) {
        let (n, m) = (self.n_tracks(), self.n_dets);
        self.fixed.clear();
        self.fixed.resize(n + m, false);
        self.mark.clear();
        self.mark.resize(n + m, 0);
        self.parent.clear();
        self.parent.resize(n + m, (NONE, NONE));
        self.generation = 0;
        self.picks.clear();
        for i in 0..n {
            let r = i as u32;
            let (a, b) = (
                self.option_starts[i] as usize,
                self.option_starts[i + 1] as usize,
            );
            // Its options in order: candidates, then unlinked (k = b − a).
            let mut pick = NONE;
            for k in 0..=b - a {
                let edge = match self.options.get(a + k) {
                    Some(&(cost, j)) if k < b - a => (j, cost),
                    _ => ((m + i) as u32, self.unlinked[i]),
                };
                if self.reduced(r, edge) == 0 && self.move_to(r, edge.0) {
                    pick = if k < b - a { k as u32 } else { NONE };
                    break;
                }
            }
            debug_assert!(
                self.row_col[i] != NONE,
                "a track's own column is always an option"
            );
            self.fixed[i] = true;
            self.picks.push(pick);
        }
    }

    /// Gives row `r` the tight column `c`, if a perfect matching of tight edges keeps the
    /// fixed rows' columns: an alternating path from the row that holds `c` to `r`'s column,
    /// through rows not fixed, avoiding `c`.
    fn move_to(&mut self, r: u32, c: u32) -> bool {
        let target = self.row_col[r as usize];
        if target == c {
            return true;
        }
        let start = self.col_row[c as usize];
        if self.fixed[start as usize] {
            return false;
        }
        self.generation += 1;
        let generation = self.generation;
        self.mark[start as usize] = generation;
        self.queue.clear();
        self.queue.push(start);
        let mut head = 0;
        let end = 'search: loop {
            let Some(&x) = self.queue.get(head) else {
                return false;
            };
            head += 1;
            for e in self.row_edges(x) {
                let (y, _) = self.edges[e];
                if y == c || self.reduced(x, self.edges[e]) != 0 {
                    continue;
                }
                if y == target {
                    break 'search (x, y);
                }
                let z = self.col_row[y as usize];
                if z == x || self.fixed[z as usize] || self.mark[z as usize] == generation {
                    continue;
                }
                self.mark[z as usize] = generation;
                self.parent[z as usize] = (x, y);
                self.queue.push(z);
            }
        };
        // Along the path back: each row takes the column found for it, its own goes to the
        // row before it; the first row's (`c`) goes to `r`.
        let (mut row, mut col) = end;
        loop {
            let own = self.row_col[row as usize];
            self.row_col[row as usize] = col;
            self.col_row[col as usize] = row;
            if row == start {
                break;
            }
            (row, col) = (self.parent[row as usize].0, own);
        }
        self.row_col[r as usize] = c;
        self.col_row[c as usize] = r;
        true
    }
}

/// A cluster as tests give it: per track its unlinked cost and its options (cost, detection)
/// in its order.
#[cfg(test)]
pub(super) type Problem = [(i64, Vec<(i64, u32)>)];

/// Every assignment in the tie rule's order (track by track, each's options in order, then
/// unlinked): the least total and the first assignment with it (each track's option, `NONE`
/// for unlinked). The reference of the solver's tests.
#[cfg(test)]
pub(super) fn brute_force(cluster: &Problem, n_dets: usize) -> (i64, Vec<u32>) {
    fn walk(
        cluster: &Problem,
        i: usize,
        used: &mut Vec<bool>,
        cost: i64,
        picks: &mut Vec<u32>,
        best: &mut (i64, Vec<u32>),
    ) {
        let Some((unlinked, options)) = cluster.get(i) else {
            if cost < best.0 {
                *best = (cost, picks.clone());
            }
            return;
        };
        for (k, &(c, j)) in options.iter().enumerate() {
            if !used[j as usize] {
                used[j as usize] = true;
                picks.push(k as u32);
                walk(cluster, i + 1, used, cost + c, picks, best);
                picks.pop();
                used[j as usize] = false;
            }
        }
        picks.push(NONE);
        walk(cluster, i + 1, used, cost + unlinked, picks, best);
        picks.pop();
    }
    let mut best = (i64::MAX, Vec::new());
    walk(
        cluster,
        0,
        &mut vec![false; n_dets],
        0,
        &mut Vec::new(),
        &mut best,
    );
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_mt::Mt64;

    fn total(cluster: &Problem, picks: &[u32]) -> i64 {
        cluster
            .iter()
            .zip(picks)
            .map(|((unlinked, options), &k)| {
                if k == NONE {
                    *unlinked
                } else {
                    options[k as usize].0
                }
            })
            .sum()
    }

    /// Random clusters: costs from a few values (many ties), unlinked costs below, among and
    /// above the pairs', more tracks than detections and the reverse.
    fn random_cluster(rng: &mut Mt64) -> (Vec<(i64, Vec<(i64, u32)>)>, usize) {
        let n_tracks = 1 + (rng.next_u64() % 7) as usize;
        let n_dets = 1 + (rng.next_u64() % 7) as usize;
        let values = [0, 1, 2, 2, 3, 5, 8];
        let cluster = (0..n_tracks)
            .map(|_| {
                let mut dets: Vec<u32> = (0..n_dets as u32)
                    .filter(|_| rng.next_u64() % 2 == 0)
                    .collect();
                // Options in a random order (the solver follows the order it is given).
                for k in (1..dets.len()).rev() {
                    dets.swap(k, (rng.next_u64() % (k as u64 + 1)) as usize);
                }
                let options = dets
                    .into_iter()
                    .map(|j| (values[(rng.next_u64() % values.len() as u64) as usize], j))
                    .collect();
                (
                    values[(rng.next_u64() % values.len() as u64) as usize] + 1,
                    options,
                )
            })
            .collect();
        (cluster, n_dets)
    }

    /// The solver gives the brute force's assignment (the least total, ties by the rule) on
    /// thousands of small random clusters, with one solver's scratch reused throughout.
    #[test]
    fn the_exact_solver_equals_brute_force_with_its_tie_rule() {
        let mut rng = Mt64::new(41);
        let mut solver = Solver::default();
        let (mut ties, mut unlinked_with_candidates) = (0, 0);
        for round in 0..5000 {
            let (cluster, n_dets) = random_cluster(&mut rng);
            let (best, expected) = brute_force(&cluster, n_dets);
            solver.clear(n_dets);
            for (unlinked, options) in &cluster {
                solver.add_track(*unlinked, options.iter().copied());
            }
            let got = solver.solve().to_vec();
            assert_eq!(total(&cluster, &got), best, "round {round}: {cluster:?}");
            assert_eq!(got, expected, "round {round}: {cluster:?}");
            // How many optima there were: a tie when the order chose.
            let mut optima = 0;
            count_optima(&cluster, n_dets, best, &mut optima);
            ties += (optima > 1) as usize;
            unlinked_with_candidates += cluster
                .iter()
                .zip(&got)
                .filter(|((_, o), &k)| k == NONE && !o.is_empty())
                .count();
        }
        assert!(ties > 1000, "too few ties: {ties}");
        assert!(
            unlinked_with_candidates > 1000,
            "too few unlinked tracks: {unlinked_with_candidates}"
        );
    }

    fn count_optima(cluster: &Problem, n_dets: usize, best: i64, count: &mut usize) {
        fn walk(
            cluster: &Problem,
            i: usize,
            used: &mut Vec<bool>,
            cost: i64,
            best: i64,
            count: &mut usize,
        ) {
            let Some((unlinked, options)) = cluster.get(i) else {
                *count += (cost == best) as usize;
                return;
            };
            for &(c, j) in options {
                if !used[j as usize] {
                    used[j as usize] = true;
                    walk(cluster, i + 1, used, cost + c, best, count);
                    used[j as usize] = false;
                }
            }
            walk(cluster, i + 1, used, cost + unlinked, best, count);
        }
        walk(cluster, 0, &mut vec![false; n_dets], 0, best, count);
    }

    /// Fixed point: exact sums of costs on the scale of a gate, monotone, capped.
    #[test]
    fn fixed_point_costs() {
        assert_eq!(fixed(1.0f64.to_bits()), 1 << 32);
        assert_eq!(fixed(0.0f64.to_bits()), 0);
        assert_eq!(fixed(1e9f64.to_bits()), FIXED_MAX);
        assert_eq!(fixed(f64::INFINITY.to_bits()), FIXED_MAX);
        assert!(fixed(0.25f64.to_bits()) < fixed(0.2500001f64.to_bits()));
    }
}
