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

/// Accumulates MOT counts frame by frame.
pub struct MotScorer {
    max_distance: f64,
    state: IdMap<TruthState>,
    counts: MotCounts,
    grid: GridIndex,
}

impl MotScorer {
    /// `max_distance`: the farthest a track point may be from a truth marker and still match it.
    pub fn new(max_distance: f64) -> Self {
        Self {
            max_distance,
            state: IdMap::default(),
            counts: MotCounts::default(),
            grid: GridIndex::new(max_distance),
        }
    }

    pub fn add_frame(&mut self, truth: &[TruthPoint], tracks: &[TrackPoint]) {
        let c = &mut self.counts;
        c.frames += 1;
        c.truth += truth.len() as u64;
        let r = self.max_distance;
        let dist = |t: &TruthPoint, h: &TrackPoint| (t.x - h.x).hypot(t.y - h.y);

        let mut truth_match: Vec<Option<usize>> = vec![None; truth.len()];
        let mut track_taken = vec![false; tracks.len()];

        // 1. Keep last frame's correspondences that still hold.
        let mut track_index: IdMap<usize> =
            IdMap::with_capacity_and_hasher(tracks.len(), Default::default());
        for (i, h) in tracks.iter().enumerate() {
            track_index.entry(h.track).or_insert(i);
        }
        for (ti, t) in truth.iter().enumerate() {
            let Some(last) = self.state.get(&t.id).and_then(|s| s.last_track) else {
                continue;
            };
            if let Some(&hi) = track_index.get(&last) {
                if !track_taken[hi] && dist(t, &tracks[hi]) <= r {
                    truth_match[ti] = Some(hi);
                    track_taken[hi] = true;
                }
            }
        }

        // 2. Greedy by distance for the rest.
        self.grid
            .rebuild(tracks.len(), |i| (tracks[i].x, tracks[i].y), false);
        let mut pairs: Vec<(f64, usize, usize)> = Vec::new();
        for (ti, t) in truth.iter().enumerate() {
            if truth_match[ti].is_some() {
                continue;
            }
            self.grid.for_each_near(t.x, t.y, r, |hi, hx, hy| {
                let hi = hi as usize;
                let d = (t.x - hx).hypot(t.y - hy);
                if !track_taken[hi] && d <= r {
                    pairs.push((d, ti, hi));
                }
            });
        }
        pairs.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then((a.1, a.2).cmp(&(b.1, b.2))));
        for (_, ti, hi) in pairs {
            if truth_match[ti].is_none() && !track_taken[hi] {
                truth_match[ti] = Some(hi);
                track_taken[hi] = true;
            }
        }

        // 3. Count.
        for (t, m) in truth.iter().zip(&truth_match) {
            let s = self.state.entry(t.id).or_default();
            match m {
                Some(hi) => {
                    let h = &tracks[*hi];
                    c.matches += 1;
                    c.distance_sum += dist(t, h);
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
