//! MOTA-style scoring of tracker output against ground truth (CLEAR MOT counts).
//!
//! Per frame: a truth marker keeps the track it was matched to last time if that track is
//! still within `max_distance`; the remaining truth markers and tracks are matched greedily by
//! increasing distance (within `max_distance`). Then:
//! - miss: a visible truth marker with no track;
//! - false positive: a track with no truth marker;
//! - ID switch: a truth marker matched to a different track than the one it last had;
//! - fragmentation: a truth marker's tracking resumes after it was missed while visible
//!   (frames where the truth marker is not visible, e.g. occluded, do not interrupt it).
//!
//! MOTA = 1 − (misses + false positives + ID switches) / truth points.

use super::grid::GridIndex;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The scorer's maps from IDs (truth markers', tracks'), which take every point of every frame.
/// IDs are mostly given in order, so the bucket is the ID's low bits: one frame's points, taken
/// in ID order, fall into neighbouring buckets (with the default hasher every lookup was a cache
/// miss, and the score of a 50,000-particle frame took 18 ms on one core; now 5).
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0.rotate_left(8) ^ b as u64);
        }
    }

    fn write_u64(&mut self, id: u64) {
        // The map keeps 7 more bits of a hash to tell keys apart, from its top: give it
        // those of a Fibonacci product, so that small IDs do not all share them.
        self.0 = id ^ (id.wrapping_mul(0x9e37_79b9_7f4a_7c15) & (0x7f << 57));
    }
}

type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// A visible ground-truth marker in one frame.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TruthPoint {
    pub id: u64,
    pub x: f64,
    pub y: f64,
}

/// A tracker output point in one frame (a detection and its track ID).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrackPoint {
    pub track: u64,
    pub x: f64,
    pub y: f64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MotCounts {
    pub frames: u64,
    /// Visible truth points over all frames.
    pub truth: u64,
    pub matches: u64,
    pub misses: u64,
    pub false_positives: u64,
    pub id_switches: u64,
    pub fragmentations: u64,
    /// Sum of the matched distances (px).
    pub distance_sum: f64,
}

impl MotCounts {
    /// 1 − (misses + false positives + ID switches) / truth points (1 when there is no truth).
    pub fn mota(&self) -> f64 {
        if self.truth == 0 {
            return 1.0;
        }
        1.0 - (self.misses + self.false_positives + self.id_switches) as f64 / self.truth as f64
    }

    /// The counts of `self` and `other` together (two runs, or two stretches of one).
    pub fn plus(&self, other: &MotCounts) -> MotCounts {
        MotCounts {
            frames: self.frames + other.frames,
            truth: self.truth + other.truth,
            matches: self.matches + other.matches,
            misses: self.misses + other.misses,
            false_positives: self.false_positives + other.false_positives,
            id_switches: self.id_switches + other.id_switches,
            fragmentations: self.fragmentations + other.fragmentations,
            distance_sum: self.distance_sum + other.distance_sum,
        }
    }

    /// Mean distance of the matches (px).
    pub fn motp(&self) -> f64 {
        self.distance_sum / self.matches.max(1) as f64
    }
}

impl std::fmt::Display for MotCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} frames, {} truth points: {} matched, {} misses, {} false positives, \
             {} ID switches, {} fragmentations; MOTA {:.4}, MOTP {:.3} px",
            self.frames,
            self.truth,
            self.matches,
            self.misses,
            self.false_positives,
            self.id_switches,
            self.fragmentations,
            self.mota(),
            self.motp()
        )
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct TruthState {
    /// The track this truth marker was last matched to.
    last_track: Option<u64>,
    /// Missed while visible since its last match.
    interrupted: bool,
}

/// Truth IDs below this have their state in a table (a lookup in a map cost more than the
/// rest of a 50,000-particle frame's score).
const DENSE_IDS: usize = 1 << 22;

/// Each truth marker's state: by ID below `DENSE_IDS` (the scenes number their markers and
/// particles from 0), in a map above.
#[derive(Default)]
struct TruthStates {
    dense: Vec<TruthState>,
    sparse: IdMap<TruthState>,
}

impl TruthStates {
    fn get(&self, id: u64) -> Option<&TruthState> {
        match usize::try_from(id) {
            Ok(i) if i < DENSE_IDS => self.dense.get(i),
            _ => self.sparse.get(&id),
        }
    }

    fn entry(&mut self, id: u64) -> &mut TruthState {
        match usize::try_from(id) {
            Ok(i) if i < DENSE_IDS => {
                if i >= self.dense.len() {
                    self.dense.resize(i + 1, TruthState::default());
                }
                &mut self.dense[i]
            }
            _ => self.sparse.entry(id).or_default(),
        }
    }
}

/// Truth points from which a frame's candidates are found on rayon's pool.
const PARALLEL_TRUTH: usize = 8192;

/// Accumulates MOT counts frame by frame.
pub struct MotScorer {
    max_distance: f64,
    state: TruthStates,
    counts: MotCounts,
    grid: GridIndex,
    /// A frame's scratch, kept for the next (a 50,000-particle frame's would be fresh pages
    /// every frame): per truth point its track, per track whether it is taken, each track ID's
    /// point, the candidate pairs (squared distance, truth, track), the tracks left free.
    truth_match: Vec<Option<usize>>,
    track_taken: Vec<bool>,
    track_index: IdMap<usize>,
    pairs: Vec<(f64, usize, usize)>,
    /// The tracks step 1 did not take.
    free_tracks: Vec<u32>,
}

impl MotScorer {
    /// `max_distance`: the farthest a track point may be from a truth marker and still match it.
    pub fn new(max_distance: f64) -> Self {
        Self {
            max_distance,
            state: TruthStates::default(),
            counts: MotCounts::default(),
            grid: GridIndex::new(max_distance),
            truth_match: Vec::new(),
            track_taken: Vec::new(),
            track_index: IdMap::default(),
            pairs: Vec::new(),
            free_tracks: Vec::new(),
        }
    }

    /// Distances are compared squared: the square root (`hypot`, 30 ns) of every pair near a
    /// truth point took most of a 50,000-particle frame's score.
    pub fn add_frame(&mut self, truth: &[TruthPoint], tracks: &[TrackPoint]) {
        let c = &mut self.counts;
        c.frames += 1;
        c.truth += truth.len() as u64;
        let r2 = self.max_distance * self.max_distance;
        let dist2 = |t: &TruthPoint, h: &TrackPoint| {
            let (dx, dy) = (t.x - h.x, t.y - h.y);
            dx * dx + dy * dy
        };
        let truth_match = &mut self.truth_match;
        truth_match.clear();
        let track_taken = &mut self.track_taken;
        track_taken.clear();
        track_taken.resize(tracks.len(), false);

        // Frames of many points find their candidates on rayon's pool, in blocks of truth
        // points; the choices are then made in order, as on one thread.
        let parallel = truth.len() >= PARALLEL_TRUTH && rayon::current_num_threads() > 1;

        // 1. Keep last frame's correspondences that still hold: each truth point's last
        // track, if it is in this frame within reach.
        let track_index = &mut self.track_index;
        track_index.clear();
        for (i, h) in tracks.iter().enumerate() {
            track_index.entry(h.track).or_insert(i);
        }
        let state = &self.state;
        let kept = |t: &TruthPoint| -> Option<usize> {
            let hi = *track_index.get(&state.get(t.id)?.last_track?)?;
            (dist2(t, &tracks[hi]) <= r2).then_some(hi)
        };
        if parallel {
            truth.par_iter().map(kept).collect_into_vec(truth_match);
        } else {
            truth_match.extend(truth.iter().map(kept));
        }
        for m in truth_match.iter_mut() {
            if let Some(hi) = *m {
                if track_taken[hi] {
                    *m = None;
                } else {
                    track_taken[hi] = true;
                }
            }
        }

        // 2. Greedy by distance for the rest: the tracks not taken (after step 1 most are, in a
        // crowd) indexed, the truth points not matched looking for them.
        let free = &mut self.free_tracks;
        free.clear();
        free.extend((0..tracks.len() as u32).filter(|&hi| !track_taken[hi as usize]));
        let free = &*free;
        self.grid.rebuild(
            free.len(),
            |i| (tracks[free[i] as usize].x, tracks[free[i] as usize].y),
            parallel && free.len() >= PARALLEL_TRUTH,
        );
        let (grid, r) = (&self.grid, self.max_distance);
        let matched = &*truth_match;
        let near = |ti: usize, pairs: &mut Vec<(f64, usize, usize)>| {
            if matched[ti].is_some() {
                return;
            }
            let t = &truth[ti];
            grid.for_each_near(t.x, t.y, r, |i, hx, hy| {
                let (dx, dy) = (t.x - hx, t.y - hy);
                let d2 = dx * dx + dy * dy;
                if d2 <= r2 {
                    pairs.push((d2, ti, free[i as usize] as usize));
                }
            });
        };
        let pairs = &mut self.pairs;
        pairs.clear();
        if parallel {
            let blocks: Vec<Vec<(f64, usize, usize)>> = (0..truth.len())
                .into_par_iter()
                .chunks(PARALLEL_TRUTH / 4)
                .map(|block| {
                    let mut pairs = Vec::new();
                    block.into_iter().for_each(|ti| near(ti, &mut pairs));
                    pairs
                })
                .collect();
            blocks.iter().for_each(|b| pairs.extend_from_slice(b));
        } else {
            (0..truth.len()).for_each(|ti| near(ti, pairs));
        }
        pairs.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then((a.1, a.2).cmp(&(b.1, b.2))));
        for &(_, ti, hi) in pairs.iter() {
            if truth_match[ti].is_none() && !track_taken[hi] {
                truth_match[ti] = Some(hi);
                track_taken[hi] = true;
            }
        }

        // 3. Count.
        for (t, m) in truth.iter().zip(truth_match.iter()) {
            let s = self.state.entry(t.id);
            match m {
                Some(hi) => {
                    let h = &tracks[*hi];
                    c.matches += 1;
                    c.distance_sum += dist2(t, h).sqrt();
                    if s.last_track.is_some_and(|last| last != h.track) {
                        c.id_switches += 1;
                    }
                    if s.interrupted {
                        c.fragmentations += 1;
                        s.interrupted = false;
                    }
                    s.last_track = Some(h.track);
                }
                None => {
                    c.misses += 1;
                    if s.last_track.is_some() {
                        s.interrupted = true;
                    }
                }
            }
        }
        c.false_positives += track_taken.iter().filter(|&&t| !t).count() as u64;
    }

    pub fn counts(&self) -> MotCounts {
        self.counts
    }
}
