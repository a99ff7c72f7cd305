//! Fiducial tracking: frame-to-frame association of components into tracks with stable IDs.
//!
//! Each frame: predict every active track with constant velocity, find the detections inside
//! its gate (a circle around the prediction, widened for each missed frame) through a grid
//! index, score every gated (track, detection) pair, and assign greedily by increasing cost.
//! Unassigned detections start new tracks; a track that has gone undetected for more than
//! `max_missed` frames ends.
//!
//! Merges: two touching markers are one component. The track whose marker it mostly is takes
//! it; a missed track whose prediction lies on that (larger) component is *merged*: it rides on
//! the component's bounding box with its own velocity instead of drifting, for up to
//! `max_merged` frames. A track whose detection suddenly grows (`merge_area_ratio`) keeps its
//! velocity too, so neither follows the merged centroid. Velocities are measured between
//! clean (unmerged) detections, and gates widen with the frames since the last clean one, so
//! both markers can be taken back when they come apart.
//!
//! Why greedy by default rather than Hungarian: with gating, a track has one or two candidates and
//! conflicts are small local clusters, where the cheapest-pair-first choice is almost always
//! the optimal one (the constant-velocity prediction already separates markers whose paths
//! cross). Greedy is deterministic and linear: a pair that is the cheapest of both its track
//! and its detection is taken by the greedy order whatever else happens, so those are taken
//! first, and the rest (the local conflicts) gets the greedy order's result without a sort,
//! by deferred acceptance (`assign::settle_conflicts`). Hungarian is O(n³) per conflict
//! cluster for a rarely different answer. Where it is not rare (particles whose steps reach a
//! good part of their spacing, moving at random), `Assignment::Subnetwork` solves each conflict
//! cluster for the least total cost instead, as trackpy links (`subnets`).
//!
//! Scale: a track weighs at most `max_candidates` detections (its gate cut to the frame's
//! density), so a frame costs O(tracks + detections), on clutter (tens of thousands of blobs a
//! frame) as on markers. With many tracks every step runs on the rayon pool: the per-track
//! ones over chunks of tracks (`assign`), the grid index's sort over blocks of detections.
//! Tracks are plain records with no allocation of their own, a tentative track takes no tail
//! storage, and every per-frame buffer is kept for the next frame.
//!
//! Positions are in pixel-index coordinates (as `ComponentStats` centroids), frames are the
//! source's frame indices; a gap in the indices (dropped frames) counts as missed frames.

mod assign;
mod boxes;
mod cheapest;
#[cfg(feature = "cuda")]
pub mod gpu;
mod grid;
mod ln;
mod merges;
mod phases;
pub mod score;
mod subnets;
mod tails;

use crate::ccl::stats::ComponentStats;
use crate::ccl::subpixel::SubpixelCentroid;
use crate::error::{Error, Result};
use assign::{for_each_chunk, settle_conflicts, Chunk, Frame, Slots, CHUNK};
use assign::{PARALLEL_MIN, PARALLEL_MIN_DETECTIONS, PARALLEL_MIN_PAIRS};
use grid::GridIndex;
use merges::LargeComponents;
use phases::PhaseClock;
use rayon::prelude::*;
use serde::Serialize;
use std::mem::MaybeUninit;
use subnets::Subnets;
use tails::{Tails, NO_TAIL};

/// Are there detections enough for the pool's passes over them (`PARALLEL_MIN_DETECTIONS`)?
/// The CPU tracker, the GPU tracker's host passes and `Detection::from_rows` alike.
fn detections_on_pool(detections: usize) -> bool {
    detections >= PARALLEL_MIN_DETECTIONS
}

/// Tracker settings. The defaults suit markers that stray up to ~20 px per frame from their
/// constant-velocity prediction and are hidden for up to half a second at 60 frames/s (the
/// synthetic demo hides markers for 20 frames).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrackerConfig {
    /// Largest distance (px) between a track's predicted position and a detection it may take.
    pub gate_px: f64,
    /// The gate widens by this much (px) for every frame the track has been missed.
    pub gate_growth_px: f64,
    /// Frames a track may go undetected (occlusion, dropout) and still continue.
    pub max_missed: u32,
    /// Frames a *tentative* track may go undetected and still continue. A track is tentative
    /// until it is detected again in a frame sparse enough to gate (see `max_candidates`).
    /// Noise blobs kept for `max_missed` frames, with widening gates, would add to the tracks
    /// every later frame must gate against (on the papers' random images: 150,000 blobs in a
    /// 1080p frame, all of them tracks for 30 frames).
    pub tentative_max_missed: u32,
    /// Candidates a track considers: the cheapest this many detections in its gate. In a
    /// field denser than markers ever are (noise, the papers' random images) association past
    /// the nearest few means nothing, and the work would grow with gate² × density; the same
    /// number caps how far a missed track's gate widens (to hold about this many detections
    /// at the frame's mean density). In a frame where that cuts the base gate, no track is
    /// confirmed (it stays tentative).
    pub max_candidates: u32,
    /// Frames a track may stay merged into a larger component (two markers touching) and
    /// still continue. While merged, the track rides on that component's bounding box and
    /// keeps its velocity, so it can take its marker back when the two come apart.
    pub max_merged: u32,
    /// A detection this many times larger than a track's last one is taken as its marker
    /// merged with another: the track takes its ID but keeps its own velocity and rides on
    /// the component's bounding box, rather than following the merged centroid.
    pub merge_area_ratio: f64,
    /// Predict each track's position with its velocity (constant-velocity motion); false =
    /// search around its last position (Brownian motion, trackpy's linking without predictor).
    pub predict_velocity: bool,
    /// Weight of the newest velocity measurement, in (0, 1]: 1 = last displacement only.
    pub velocity_smoothing: f64,
    /// Weight of the size-dissimilarity term |ln(area / track area)| in the cost (0 = off).
    /// The distance term is (distance / gate_px)²: the same scale for every track, so a track
    /// whose gate has widened does not win detections that are nearer to another track.
    pub size_weight: f64,
    /// Recent positions kept per confirmed track (trajectory tails, `Tracker::tail`); 0 = none.
    pub tail_len: usize,
    /// How tracks and detections that compete for each other are paired.
    pub assignment: Assignment,
}

/// How a frame's tracks and detections are paired where several could pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Assignment {
    /// The cheapest pair first (deterministic and linear; see the module's notes).
    #[default]
    Greedy,
    /// trackpy's subnetwork rule: each cluster of tracks and detections joined through their
    /// candidate pairs is solved for the least total cost, a track left unlinked costing a
    /// pair on its gate's edge (trackpy: `search_range²`); equal totals by a fixed order of
    /// the tracks and their candidates. Clusters of more than 2,000 tracks are paired
    /// greedily and counted (`Tracker::greedy_clusters`).
    Subnetwork,
}

impl std::str::FromStr for Assignment {
    type Err = Error;

    /// `greedy` or `subnet` (trackpy's name for its rule).
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "greedy" => Ok(Self::Greedy),
            "subnet" => Ok(Self::Subnetwork),
            _ => Err(Error::Invalid(format!(
                "tracker settings: the assignment must be \"greedy\" or \"subnet\", got {s:?}"
            ))),
        }
    }
}

impl Default for TrackerConfig {
    fn default() -> Self {
        Self {
            gate_px: 20.0,
            gate_growth_px: 3.0,
            max_missed: 30,
            tentative_max_missed: 2,
            max_candidates: 16,
            max_merged: 120,
            merge_area_ratio: 1.2,
            predict_velocity: true,
            velocity_smoothing: 0.5,
            size_weight: 0.5,
            tail_len: 32,
            assignment: Assignment::Greedy,
        }
    }
}

impl TrackerConfig {
    /// The engine's tracker: the defaults without trajectory tails (nothing downstream of the
    /// pipeline reads the tracker's own tails; the window keeps its own from the results).
    pub fn pipeline() -> Self {
        Self {
            tail_len: 0,
            ..Self::default()
        }
    }

    /// trackpy's linking rule within `search_range_px` (the particle scenes of the bench): a
    /// particle is looked for within the search range of its last position (no velocity
    /// prediction, no gate growth, no size term), each subnetwork is solved for the least total
    /// squared displacement, and a trajectory ends when its particle is not found.
    pub fn linking(search_range_px: f64) -> Self {
        Self {
            assignment: Assignment::Subnetwork,
            gate_px: search_range_px,
            gate_growth_px: 0.0,
            max_missed: 0,
            tentative_max_missed: 0,
            predict_velocity: false,
            size_weight: 0.0,
            ..Self::pipeline()
        }
    }

    pub fn validate(&self) -> Result<()> {
        let bad = |what: &str| Err(Error::Invalid(format!("tracker settings: {what}")));
        if !(self.gate_px.is_finite() && self.gate_px > 0.0) {
            return bad(&format!("the gate must be > 0 px, got {}", self.gate_px));
        }
        if !(self.gate_growth_px.is_finite() && self.gate_growth_px >= 0.0) {
            return bad(&format!(
                "the gate growth must be ≥ 0 px per missed frame, got {}",
                self.gate_growth_px
            ));
        }
        if self.max_candidates == 0 {
            return bad("a track must consider at least 1 candidate (max_candidates ≥ 1)");
        }
        if !(self.velocity_smoothing > 0.0 && self.velocity_smoothing <= 1.0) {
            return bad(&format!(
                "velocity smoothing must be in (0, 1], got {}",
                self.velocity_smoothing
            ));
        }
        if self.merge_area_ratio.is_nan() || self.merge_area_ratio < 1.0 {
            return bad(&format!(
                "the merge area ratio must be ≥ 1, got {}",
                self.merge_area_ratio
            ));
        }
        if !(self.size_weight.is_finite() && self.size_weight >= 0.0) {
            return bad(&format!(
                "the size weight must be ≥ 0, got {}",
                self.size_weight
            ));
        }
        Ok(())
    }

    /// The gate of a track last seen `since` frames ago (1 = seen in the previous frame).
    fn gate(&self, since: u64) -> f64 {
        self.gate_px + self.gate_growth_px * since.saturating_sub(1) as f64
    }

    /// Frames `t` may go undetected before it ends.
    fn max_missed_of(&self, t: &Track) -> u32 {
        if t.confirmed {
            self.max_missed
        } else {
            self.tentative_max_missed.min(self.max_missed)
        }
    }
}

/// One component as the tracker sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Detection {
    pub x: f64,
    pub y: f64,
    pub area: f64,
    /// Bounding box [left, top, right, bottom], pixel-index coordinates, inclusive.
    pub bbox: [f64; 4],
}

impl Detection {
    /// The binary centroid.
    pub fn from_stats(s: &ComponentStats) -> Self {
        Self::with_bbox_of(s, s.centroid_x, s.centroid_y)
    }

    /// The grey-weighted (sub-pixel) centroid.
    pub fn from_subpixel(s: &ComponentStats, c: &SubpixelCentroid) -> Self {
        Self::with_bbox_of(s, c.x, c.y)
    }

    /// One detection per component: at its sub-pixel centroid when `subpixel` has a row for
    /// every component (same order), at its binary centroid otherwise. A frame of many
    /// components is converted on the pool when called from one of its threads (the tracking
    /// stage's, which keeps to its own thread when several stages run).
    pub fn from_rows(stats: &[ComponentStats], subpixel: &[SubpixelCentroid]) -> Vec<Self> {
        let on_pool = detections_on_pool(stats.len())
            && rayon::current_thread_index().is_some()
            && rayon::current_num_threads() > 1;
        let measured = subpixel.len() == stats.len();
        let detection = |k: usize| Self::of_row(stats, subpixel, measured, k);
        if on_pool {
            (0..stats.len()).into_par_iter().map(detection).collect()
        } else {
            (0..stats.len()).map(detection).collect()
        }
    }

    /// The detections `from_rows` makes, one at a time and none kept.
    pub(crate) fn each_of_rows<'a>(
        stats: &'a [ComponentStats],
        subpixel: &'a [SubpixelCentroid],
    ) -> impl Iterator<Item = Self> + 'a {
        let measured = subpixel.len() == stats.len();
        (0..stats.len()).map(move |k| Self::of_row(stats, subpixel, measured, k))
    }

    /// The detection of row `k` of `from_rows`'s rows (`measured`: with its sub-pixel
    /// centroid).
    #[inline]
    fn of_row(
        stats: &[ComponentStats],
        subpixel: &[SubpixelCentroid],
        measured: bool,
        k: usize,
    ) -> Self {
        if measured {
            Self::from_subpixel(&stats[k], &subpixel[k])
        } else {
            Self::from_stats(&stats[k])
        }
    }

    /// A detection without extent (its bounding box is the point).
    pub fn point(x: f64, y: f64, area: f64) -> Self {
        Self {
            x,
            y,
            area,
            bbox: [x, y, x, y],
        }
    }

    fn with_bbox_of(s: &ComponentStats, x: f64, y: f64) -> Self {
        let (l, t) = (s.left as f64, s.top as f64);
        Self {
            x,
            y,
            area: s.area as f64,
            bbox: [l, t, l + s.width as f64 - 1.0, t + s.height as f64 - 1.0],
        }
    }

    /// How far the bounding box reaches from the position, at most (along x or y).
    fn reach(&self) -> f64 {
        let [l, t, r, b] = self.bbox;
        (self.x - l).max(r - self.x).max(self.y - t).max(b - self.y)
    }

    /// Does the bounding box, widened by `margin` px, hold (x, y)?
    fn covers(&self, x: f64, y: f64, margin: f64) -> bool {
        let [l, t, r, b] = self.bbox;
        x >= l - margin && x <= r + margin && y >= t - margin && y <= b + margin
    }
}

/// A position on a track's tail.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TailPoint {
    pub frame: u64,
    pub x: f64,
    pub y: f64,
}

/// An active track: a plain record, so a new track allocates nothing.
///
/// Laid out in this order: the fields every pass over the tracks reads each frame (the
/// prediction, the gate, the size and the state) in the record's first 64 bytes, where they
/// were spread over its whole length (a frame of clutter passes over tens of thousands of
/// tracks several times).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Track {
    /// Where the track is believed to be at frame `est_frame`: the last detection, or while
    /// merged into a larger component, a point of that component.
    est_x: f64,
    est_y: f64,
    /// Velocity in px per frame (0 until the second detection).
    pub vx: f64,
    pub vy: f64,
    est_frame: u64,
    /// The frame of the last detection of its own (not merged): the gate widens with the
    /// frames since, and the next velocity is measured from there (`clean_x`, `clean_y`).
    clean_frame: u64,
    /// The marker's area, smoothed over its clean detections.
    pub area: f64,
    /// Its ring in the tracker's tails (`NO_TAIL` until it is confirmed).
    tail: u32,
    /// Merged into a larger component in the latest frame (drawn as such by a display).
    pub merged: bool,
    /// Detected again after its first detection, in a frame sparse enough to gate; until then
    /// the track is tentative and ends after `tentative_max_missed` missed frames.
    pub confirmed: bool,
    pub id: u64,
    pub first_frame: u64,
    /// The last frame with a detection.
    pub last_frame: u64,
    /// Frames with a detection.
    pub hits: u64,
    /// The last detected position.
    pub x: f64,
    pub y: f64,
    area_sum: f64,
    pub path_length: f64,
    clean_x: f64,
    clean_y: f64,
}

impl Track {
    /// A new (tentative) track on detection `d`.
    fn start(id: u64, frame: u64, d: &Detection) -> Self {
        Self {
            id,
            first_frame: frame,
            last_frame: frame,
            hits: 1,
            x: d.x,
            y: d.y,
            vx: 0.0,
            vy: 0.0,
            area: d.area,
            area_sum: d.area,
            path_length: 0.0,
            tail: NO_TAIL,
            est_x: d.x,
            est_y: d.y,
            est_frame: frame,
            clean_x: d.x,
            clean_y: d.y,
            clean_frame: frame,
            merged: false,
            confirmed: false,
        }
    }

    /// Constant-velocity prediction for `frame`.
    pub fn predict(&self, frame: u64) -> (f64, f64) {
        let dt = frame.saturating_sub(self.est_frame) as f64;
        (self.est_x + self.vx * dt, self.est_y + self.vy * dt)
    }

    pub fn summary(&self) -> TrackSummary {
        TrackSummary {
            id: self.id,
            first_frame: self.first_frame,
            last_frame: self.last_frame,
            length: self.hits,
            mean_area: self.area_sum / self.hits.max(1) as f64,
            path_length: self.path_length,
            last_x: self.x,
            last_y: self.y,
        }
    }
}

/// What is kept of a track (the `--tracks` export).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TrackSummary {
    pub id: u64,
    pub first_frame: u64,
    pub last_frame: u64,
    /// Frames with a detection (≤ last_frame − first_frame + 1; less after occlusions).
    pub length: u64,
    pub mean_area: f64,
    /// Sum of the distances between consecutive detections (px).
    pub path_length: f64,
    pub last_x: f64,
    pub last_y: f64,
}

/// Track summaries rebuilt from tracker output (frame, detections, their track IDs), for
/// consumers that see results rather than the tracker (`analyze --tracks`). Gives the same
/// numbers as `Tracker::summaries` for the frames it was shown.
///
/// It keeps one fixed-size record per track (running sums, first and last frame), and only
/// for the tracks not yet ended: `end_tracks` hands over the ones the tracker says have ended
/// (`FrameResult::ended_tracks`), so on clutter that starts thousands of short tracks a frame
/// what it holds stays bounded by the tracks alive at once.
#[derive(Clone, Debug, Default)]
pub struct SummaryBuilder {
    tracks: std::collections::HashMap<u64, TrackSummary>,
}

impl SummaryBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Tracks held (seen and not ended).
    pub fn len(&self) -> usize {
        self.tracks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tracks.is_empty()
    }

    /// Appends the summaries of the tracks in `ended` to `out` (in that order; IDs it never
    /// saw are skipped) and forgets them.
    pub fn end_tracks(&mut self, ended: &[u64], out: &mut Vec<TrackSummary>) {
        out.extend(ended.iter().filter_map(|id| self.tracks.remove(id)));
    }

    /// Adds one frame; `ids[i]` is the track of `detections[i]` (0 = none, skipped).
    pub fn add_frame(&mut self, frame: u64, detections: &[Detection], ids: &[u64]) {
        for (d, &id) in detections.iter().zip(ids) {
            if id == 0 {
                continue;
            }
            let s = self.tracks.entry(id).or_insert(TrackSummary {
                id,
                first_frame: frame,
                last_frame: frame,
                length: 0,
                mean_area: 0.0,
                path_length: 0.0,
                last_x: d.x,
                last_y: d.y,
            });
            if s.length > 0 {
                s.path_length += distance(d.x - s.last_x, d.y - s.last_y);
            }
            // Running mean, so no second table of sums is needed.
            s.length += 1;
            s.mean_area += (d.area - s.mean_area) / s.length as f64;
            s.last_frame = frame;
            (s.last_x, s.last_y) = (d.x, d.y);
        }
    }

    /// Every track held (seen and not ended), by ID.
    pub fn summaries(&self) -> Vec<TrackSummary> {
        let mut all: Vec<TrackSummary> = self.tracks.values().copied().collect();
        all.sort_unstable_by_key(|s| s.id);
        all
    }
}

/// The tracker: feed it every frame's detections in frame order.
///
/// Tracks live in one vector of plain records in the order they started (a frame's new tracks
/// in its detections' order: raster order from a labeler, so neighbouring tracks lie near in
/// memory); trajectory tails in one buffer of rings that only confirmed tracks take.
pub struct Tracker {
    config: TrackerConfig,
    tracks: Vec<Track>,
    tails: Tails,
    finished: Vec<TrackSummary>,
    /// The tracks that go on are copied here, then the two vectors swap (`end_and_start`).
    spare: Vec<Track>,
    /// Per block of `START_BLOCK` detections: the tracks it starts.
    block_starts: Vec<usize>,
    next_id: u64,
    last_frame: Option<u64>,
    grid: GridIndex,
    /// Per grid slot (detection).
    slots: Slots,
    /// Per `CHUNK` tracks.
    chunks: Vec<Chunk>,
    /// The detections that reach far from their centroid (where missed tracks look for a
    /// component they merged into).
    large: LargeComponents,
    /// The frame's detections that are large (`merges::SMALL_REACH`), and their share.
    large_count: usize,
    large_share: f64,
    /// The subnetwork rule's clusters (`Assignment::Subnetwork`).
    subnets: Subnets,
    phases: PhaseClock,
    /// Many tracks and detections go to rayon's pool (else every phase runs on the calling
    /// thread): off where other work already holds the cores (`set_on_pool`).
    on_pool: bool,
    /// Settle the conflicts by a sort and a greedy pass (`assign::settle_by_sorting`), as the
    /// reference the tests compare with.
    #[cfg(test)]
    settle_by_sorting: bool,
}

impl Default for Tracker {
    /// A tracker with `TrackerConfig::default()` (valid: see the tests).
    fn default() -> Self {
        Self::with_valid_config(TrackerConfig::default())
    }
}

impl Tracker {
    pub fn new(config: TrackerConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self::with_valid_config(config))
    }

    fn with_valid_config(config: TrackerConfig) -> Self {
        Self {
            config,
            tracks: Vec::new(),
            tails: Tails::new(config.tail_len),
            finished: Vec::new(),
            spare: Vec::new(),
            block_starts: Vec::new(),
            next_id: 1,
            last_frame: None,
            grid: GridIndex::new(config.gate_px),
            slots: Slots::default(),
            chunks: Vec::new(),
            large: LargeComponents::default(),
            large_count: 0,
            large_share: 0.0,
            subnets: Subnets::default(),
            phases: PhaseClock::default(),
            on_pool: true,
            #[cfg(test)]
            settle_by_sorting: false,
        }
    }

    pub fn config(&self) -> &TrackerConfig {
        &self.config
    }

    /// Whether `update` may hand its phases to rayon's pool when the frame is large enough
    /// (the default), or runs them all on the calling thread: several trackers running at once
    /// (a run of several sources) waited on each other's jobs in the one pool. The IDs are the
    /// same either way.
    pub fn set_on_pool(&mut self, on: bool) {
        self.on_pool = on;
    }

    /// Would `update` of a frame of `detections` hand any phase to rayon's pool (from
    /// `PARALLEL_MIN` tracks or `PARALLEL_MIN_DETECTIONS` detections)? If not, a caller may run
    /// it outside the pool and save the hand-overs to a pool thread and back.
    pub fn would_use_pool(&self, detections: usize) -> bool {
        self.tracks_on_pool() || detections_on_pool(detections)
    }

    /// Are there tracks enough for the pool (`PARALLEL_MIN`)?
    fn tracks_on_pool(&self) -> bool {
        self.tracks.len() >= PARALLEL_MIN
    }

    /// The ID the next new track takes (every ID given so far is below it).
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// The frame of the latest `update`, if any.
    pub fn last_frame(&self) -> Option<u64> {
        self.last_frame
    }

    /// New tracks take IDs from `next_id` on, where that is above the next ID this tracker
    /// would give: a tracker that takes over from another (which failed) keeps the IDs of one
    /// run unique.
    pub fn continue_ids_from(&mut self, next_id: u64) {
        self.next_id = self.next_id.max(next_id);
    }

    /// Conflict clusters too large to solve exactly (`Assignment::Subnetwork`), paired by the
    /// greedy rule instead, over every frame so far.
    pub fn greedy_clusters(&self) -> u64 {
        self.subnets.greedy_clusters
    }

    /// Times the phases of every `update` from now on (`on`), or stops (for benchmarks: see
    /// `phase_times`).
    pub fn time_phases(&mut self, on: bool) {
        self.phases.set(on);
    }

    /// The wall-clock time (ms) of each phase of the latest `update`, in order, while
    /// `time_phases` is on (empty otherwise).
    pub fn phase_times(&self) -> &[(&'static str, f64)] {
        self.phases.times()
    }

    /// Assigns the detections of `frame` to tracks and returns the track ID of each detection
    /// (same order; IDs start at 1; a detection with a non-finite position gets 0, no track).
    /// A new track's ID is larger than every ID before it. A frame index not after the
    /// previous one (a seek back, a restarted stream) ends every track first.
    pub fn update(&mut self, frame: u64, detections: &[Detection]) -> Vec<u64> {
        if self.last_frame.is_some_and(|last| frame <= last) {
            self.end_all();
        }
        self.last_frame = Some(frame);
        self.phases.start();
        // The pool takes the work when there is enough of it (and more than one thread: one
        // would only add the hand-over).
        let pool = self.on_pool && rayon::current_num_threads() > 1;
        let parallel = pool && self.tracks_on_pool();
        let many_detections = pool && detections_on_pool(detections.len());
        let (dense_radius, reach) = self.index_detections(detections, many_detections);
        self.phases.lap("extent + grid + slots");
        let n_chunks = self.tracks.len().div_ceil(CHUNK);
        let many = (parallel, many_detections);
        self.associate(frame, detections, (dense_radius, reach), n_chunks, many);
        let mut ids = self.label_detections(detections, parallel);
        self.extend_tails(frame);
        self.phases.lap("ids + tails");
        self.end_and_start_tracks(frame, detections, &mut ids, n_chunks, parallel);
        self.phases.lap("compaction + new tracks");
        ids
    }

    /// Places the detections with a finite position in the grid and their slots; returns the
    /// frame's dense radius (no gate holds many more than `max_candidates` detections at the
    /// frame's density) and the reach of a track's search.
    fn index_detections(&mut self, detections: &[Detection], many_detections: bool) -> (f64, f64) {
        let cfg = self.config;
        let extent = Extent::of(detections, many_detections);
        let dense_radius = extent.dense_radius(cfg.max_candidates);
        // Cells of a gate: a query visits 2×2 to 3×3 of them. (Smaller cells visit fewer
        // detections, but more rows of cells, which cost more than the detections saved.)
        self.grid.set_min_cell(cfg.gate_px.min(dense_radius));
        // Per-detection state, in grid slot order (near slots are near detections), set as the
        // grid places each detection: the index holds exactly the detections with a finite
        // position.
        self.slots.resize(extent.finite);
        let slots = &self.slots;
        self.grid.rebuild_within(
            extent.bounds,
            detections.len(),
            |i| (detections[i].x, detections[i].y),
            |i, slot| slots.place(slot, &detections[i]),
            many_detections,
        );
        assert_eq!(self.grid.len(), self.slots.len(), "grid and slots disagree");
        let reach = (4.0 * cfg.gate_px).min(dense_radius).min(extent.reach) + 1.0;
        self.large_count = extent.large;
        self.large_share = extent.large as f64 / extent.finite.max(1) as f64;
        (dense_radius, reach)
    }

    /// Associates tracks and detections, chunk by chunk of tracks: candidates gathered,
    /// mutual best pairs taken, the conflicts settled greedily (or, with the subnetwork rule,
    /// every pair settled by its cluster's optimum), the settled pairs taken and merged
    /// detections ridden.
    fn associate(
        &mut self,
        frame: u64,
        detections: &[Detection],
        (dense_radius, reach): (f64, f64),
        n_chunks: usize,
        (parallel, many_detections): (bool, bool),
    ) {
        let cfg = self.config;
        if self.chunks.len() < n_chunks {
            self.chunks.resize_with(n_chunks, Chunk::default);
        }
        let chunks = &mut self.chunks[..n_chunks];
        let tracks = &mut self.tracks;
        let f = Frame {
            frame,
            cfg: &cfg,
            grid: &self.grid,
            slots: &self.slots,
            detections,
            dense_radius,
            confirm: dense_radius >= cfg.gate_px,
            reach,
            parallel,
        };
        if self.grid.len() == 0 {
            // No detection: nothing to pair, nothing to ride on; every track is missed.
            for_each_chunk(parallel, chunks, tracks, |first, chunk, ts| {
                f.miss_all(first, chunk, ts)
            });
            self.phases.lap("no detections: all missed");
            return;
        }
        for_each_chunk(parallel, chunks, tracks, |_, chunk, ts| f.gather(chunk, ts));
        self.phases.lap("gather");
        // A frame of few pairs (a few detections among thousands of tracks) pairs them on
        // this thread: handing each phase to the pool would cost more than its work.
        let pairs: usize = chunks.iter().map(Chunk::pair_count).sum();
        let spread = parallel && pairs >= PARALLEL_MIN_PAIRS;
        let greedy = cfg.assignment == Assignment::Greedy;
        if greedy {
            for_each_chunk(spread, chunks, tracks, |first, chunk, ts| {
                f.take_mutual_best(first, chunk, ts)
            });
            self.phases.lap("mutual best");
        }
        // With the subnetwork rule nothing was taken: every pair is collected.
        for_each_chunk(spread, chunks, tracks, |_, chunk, _| {
            f.collect_conflicts(chunk)
        });
        self.phases.lap("conflicts: collect");
        if greedy {
            // The rest as greedily by increasing cost (ties: track, then slot).
            #[cfg(test)]
            if self.settle_by_sorting {
                assign::settle_by_sorting(chunks, f.slots);
            } else {
                settle_conflicts(chunks, f.slots, spread);
            }
            #[cfg(not(test))]
            settle_conflicts(chunks, f.slots, spread);
            self.phases.lap("conflicts: settle");
        } else {
            (self.subnets).settle(chunks, tracks, f.slots, (frame, &cfg), parallel);
            self.phases.lap("subnetworks");
        }
        // Only confirmed tracks that were not taken may ride on merged components. An index of
        // the large components pays when they are few among the detections (markers among
        // noise), not in clutter of every size, and when the tracks that may look for one are
        // not much fewer than they are (a dense frame: thousands of large components, the
        // confirmed tracks nearly all taken).
        self.large.clear();
        let riders: usize = chunks.iter().map(|c| c.riders as usize).sum();
        let threads = if parallel {
            rayon::current_num_threads()
        } else {
            1
        };
        if merges::index_pays(self.large_count, self.large_share, riders, threads) {
            (self.large).index(detections, &self.grid, many_detections);
        }
        let large = &self.large;
        self.phases.lap("large components");
        // Settled, `slots.track` is what merges look at: one pass takes and rides.
        for_each_chunk(parallel, chunks, tracks, |first, chunk, ts| {
            f.take_settled(first, chunk, ts);
            f.ride_merges(first, chunk, ts, large)
        });
        self.phases.lap("take + merges");
    }

    /// Each detection's track ID (0: none yet) and, per block of detections, the tracks the
    /// block starts (`block_starts`): one pass.
    fn label_detections(&mut self, detections: &[Detection], parallel: bool) -> Vec<u64> {
        let mut ids = vec![0u64; detections.len()];
        let (grid, slots) = (&self.grid, &self.slots);
        let label = |(b, of_block): (usize, &mut [u64])| -> usize {
            let first = b * START_BLOCK;
            let mut starts = 0;
            for (k, id) in of_block.iter_mut().enumerate() {
                *id = grid.slot_of(first + k).map_or(0, |slot| slots.id(slot));
                starts += starts_track(&detections[first + k], *id) as usize;
            }
            starts
        };
        if parallel {
            ids.par_chunks_mut(START_BLOCK)
                .enumerate()
                .map(label)
                .collect_into_vec(&mut self.block_starts);
        } else {
            self.block_starts.clear();
            let starts = ids.chunks_mut(START_BLOCK).enumerate().map(label);
            self.block_starts.extend(starts);
        }
        ids
    }

    /// Adds this frame's position to the tail of each confirmed track that took a detection.
    fn extend_tails(&mut self, frame: u64) {
        if self.config.tail_len == 0 {
            return;
        }
        for slot in 0..self.slots.len() {
            if let Some((ti, _)) = self.slots.taken_by(slot) {
                let t = &mut self.tracks[ti as usize];
                if t.confirmed {
                    let p = TailPoint {
                        frame,
                        x: t.x,
                        y: t.y,
                    };
                    self.tails.push(&mut t.tail, p);
                }
            }
        }
    }

    /// Tracks missed once too often end; the others keep their order (neighbours in memory
    /// stay neighbours, so the grid queries of one chunk touch nearby cells); the detections
    /// no track took start new ones.
    fn end_and_start_tracks(
        &mut self,
        frame: u64,
        detections: &[Detection],
        ids: &mut [u64],
        n_chunks: usize,
        parallel: bool,
    ) {
        let chunks = &mut self.chunks[..n_chunks];
        if self.config.tail_len > 0 {
            for &ti in chunks.iter().flat_map(|c| c.ended.iter()) {
                self.tails.release(self.tracks[ti as usize].tail);
            }
        }
        write_summaries(&mut self.finished, &self.tracks, chunks, parallel);
        let births = Births {
            detections,
            ids,
            per_block: &self.block_starts,
            first_id: self.next_id,
            frame,
        };
        self.next_id = end_and_start(&mut self.tracks, &mut self.spare, chunks, births, parallel);
    }

    /// Tracks still running (in no particular order).
    pub fn active(&self) -> &[Track] {
        &self.tracks
    }

    /// The trajectory tail of an active track: its last `tail_len` detections since it was
    /// confirmed, oldest first (none while it is tentative).
    pub fn tail(&self, track: &Track) -> impl Iterator<Item = TailPoint> + '_ {
        self.tails.points(track.tail)
    }

    /// Tracks that have ended, in the order they ended.
    pub fn finished(&self) -> &[TrackSummary] {
        &self.finished
    }

    /// Hands over the ended tracks and forgets them (a long-running tracker that does not
    /// need them calls this, or `drain_finished`, to keep its memory bounded).
    pub fn take_finished(&mut self) -> Vec<TrackSummary> {
        std::mem::take(&mut self.finished)
    }

    /// Like `take_finished`, but keeps the storage for the next ones.
    pub fn drain_finished(&mut self) -> std::vec::Drain<'_, TrackSummary> {
        self.finished.drain(..)
    }

    /// Every track so far, ended and active, by ID.
    pub fn summaries(&self) -> Vec<TrackSummary> {
        let mut all: Vec<TrackSummary> = self.finished.clone();
        all.extend(self.tracks.iter().map(Track::summary));
        all.sort_unstable_by_key(|s| s.id);
        all
    }

    /// Ends every active track (end of stream, or a jump back in the frame index).
    pub fn end_all(&mut self) {
        self.finished
            .extend(self.tracks.drain(..).map(|t| t.summary()));
        self.tails.clear();
    }
}

/// Detections per block when new tracks are counted and written.
const START_BLOCK: usize = 4096;

/// An unassigned detection (ID 0) with a finite position starts a track.
fn starts_track(d: &Detection, id: u64) -> bool {
    id == 0 && d.x.is_finite() && d.y.is_finite()
}

/// The tracks a frame starts: its detections and their IDs so far, the count of new tracks in
/// each block of `START_BLOCK` detections, the first new ID, the frame.
struct Births<'a> {
    detections: &'a [Detection],
    ids: &'a mut [u64],
    per_block: &'a [usize],
    first_id: u64,
    frame: u64,
}

/// Cuts `free` into consecutive parts of the lengths `lens` (what is left over stays out): one
/// part for each task that fills its own share of a vector's free capacity.
fn parts_of<T>(mut free: &mut [T], lens: impl IntoIterator<Item = usize>) -> Vec<&mut [T]> {
    lens.into_iter()
        .map(|n| {
            let (part, rest) = std::mem::take(&mut free).split_at_mut(n);
            free = rest;
            part
        })
        .collect()
}

/// Appends the summaries of the tracks the chunks list as ended to `finished`, chunk after
/// chunk, each chunk's into its own part (on the rayon pool when `parallel`: a frame of
/// clutter ends thousands of tracks).
fn write_summaries(
    finished: &mut Vec<TrackSummary>,
    tracks: &[Track],
    chunks: &[Chunk],
    parallel: bool,
) {
    let ended: usize = chunks.iter().map(|c| c.ended.len()).sum();
    finished.reserve(ended);
    let len = finished.len();
    let free = &mut finished.spare_capacity_mut()[..ended];
    let parts = parts_of(free, chunks.iter().map(|c| c.ended.len()));
    let write = |(part, chunk): (&mut [MaybeUninit<TrackSummary>], &Chunk)| {
        for (slot, &ti) in part.iter_mut().zip(&chunk.ended) {
            slot.write(tracks[ti as usize].summary());
        }
    };
    if parallel {
        parts.into_par_iter().zip(chunks).for_each(write);
    } else {
        parts.into_iter().zip(chunks).for_each(write);
    }
    // SAFETY: the parts cover the first `ended` slots of the capacity, each as long as its
    // chunk's `ended` list, whose every entry wrote one. `TrackSummary` is `Copy`.
    unsafe { finished.set_len(len + ended) };
}

/// Drops the tracks the chunks list as ended, keeping the order of the others, and appends
/// the new tracks: unassigned detections with a finite position, in detection order, with IDs
/// from `births.first_id` on (written to `births.ids`); returns the next free ID.
///
/// When tracks end, the survivors are copied into `spare`, each chunk's into its own part,
/// the new tracks after them, each block's into its own part (all at once on the rayon pool
/// when `parallel`), and the two vectors swap. Copying in place would be one sequential pass
/// over every track after the first that ended: with clutter (tens of thousands of tracks, a
/// few ending in every chunk) megabytes a frame on one core. When none end, the new tracks
/// are written after the others in place, unless the tracks have no room for them and the
/// spare has (the two swap roles, so the larger one may be the spare): then they go the same
/// way as when tracks end, which reuses memory where growing would fault in fresh pages.
fn end_and_start(
    tracks: &mut Vec<Track>,
    spare: &mut Vec<Track>,
    chunks: &[Chunk],
    births: Births,
    parallel: bool,
) -> u64 {
    let born: usize = births.per_block.iter().sum();
    let ended: usize = chunks.iter().map(|c| c.ended.len()).sum();
    let next_id = births.first_id + born as u64;
    let kept = tracks.len() - ended;
    // In place when no track ends, unless only the spare has room for the new ones: growing the
    // tracks would copy them into fresh memory (and fault in its pages) while the spare, as
    // large as the most tracks held so far, sits unused.
    let room = |v: &Vec<Track>| v.capacity() >= kept + born;
    if ended == 0 && (room(tracks) || !room(spare)) {
        tracks.reserve(born);
        let whole = write_births(&mut tracks.spare_capacity_mut()[..born], births, parallel);
        assert!(whole, "the tracker's new tracks do not match their count");
        let len = tracks.len() + born;
        // SAFETY: the `born` slots after the tracks were written whole (checked above).
        // `Track` is `Copy`: nothing to drop.
        unsafe { tracks.set_len(len) };
        return next_id;
    }
    spare.clear();
    if !room(spare) {
        // A new vector rather than a grown one (growing would copy what it held before), with
        // the room growing would give: at least twice the old, so that a count of tracks that
        // creeps up does not take new memory every frame.
        *spare = Vec::with_capacity((kept + born).max(2 * spare.capacity()));
    }
    let (free, newborn) = spare.spare_capacity_mut()[..kept + born].split_at_mut(kept);
    // Each chunk's survivors go to its own slice of the free capacity.
    let of_chunks = || chunks.iter().zip(tracks.chunks(CHUNK));
    let survivors = of_chunks().map(|(chunk, from)| from.len() - chunk.ended.len());
    let parts: Vec<_> = of_chunks()
        .zip(parts_of(free, survivors))
        .enumerate()
        .map(|(c, ((chunk, from), part))| ((c * CHUNK) as u32, chunk, from, part))
        .collect();
    let copy = |(first, chunk, from, part): (u32, &Chunk, &[Track], &mut [MaybeUninit<Track>])| {
        let mut ended = chunk
            .ended
            .iter()
            .map(|&ti| (ti - first) as usize)
            .peekable();
        let (mut out, mut written) = (part.iter_mut(), 0);
        for (j, t) in from.iter().enumerate() {
            if ended.peek() == Some(&j) {
                ended.next();
            } else if let Some(slot) = out.next() {
                slot.write(*t);
                written += 1;
            }
        }
        written == part.len()
    };
    let (survived, started) = if parallel {
        rayon::join(
            || {
                parts
                    .into_par_iter()
                    .map(copy)
                    .reduce(|| true, |a, b| a && b)
            },
            || write_births(newborn, births, true),
        )
    } else {
        let survived = parts.into_iter().map(copy).fold(true, |a, b| a && b);
        (survived, write_births(newborn, births, false))
    };
    // `ended` lists each chunk's own tracks, ascending, each once (`ride_merges`): then a chunk
    // of n tracks with e ended writes its n − e survivors into its n − e slots.
    assert!(
        survived,
        "the tracker's ended list does not match its tracks"
    );
    assert!(started, "the tracker's new tracks do not match their count");
    // SAFETY: the parts cover the first `kept + born` slots of the capacity and each was
    // written whole (checked above). `Track` is `Copy`: nothing to drop.
    unsafe { spare.set_len(kept + born) };
    std::mem::swap(tracks, spare);
    next_id
}

/// Writes the new tracks into `free` (as many slots as they are), each block of detections
/// its own part, on the rayon pool when `parallel`; true when every part was written whole.
fn write_births(free: &mut [MaybeUninit<Track>], births: Births, parallel: bool) -> bool {
    let Births {
        detections,
        ids,
        per_block,
        first_id,
        frame,
    } = births;
    // Each block's first ID: the IDs before it and the ones it starts.
    let firsts = per_block.iter().scan(first_id, |id, &n| {
        let first = *id;
        *id += n as u64;
        Some(first)
    });
    let parts: Vec<_> = firsts
        .zip(parts_of(free, per_block.iter().copied()))
        .collect();
    let write = |((mut id, part), (ds, is)): (
        (u64, &mut [MaybeUninit<Track>]),
        (&[Detection], &mut [u64]),
    )| {
        let mut out = part.iter_mut();
        for (d, slot_id) in ds.iter().zip(is) {
            if starts_track(d, *slot_id) {
                let Some(t) = out.next() else {
                    return false;
                };
                *slot_id = id;
                t.write(Track::start(id, frame, d));
                id += 1;
            }
        }
        out.next().is_none()
    };
    if parallel {
        parts
            .into_par_iter()
            .zip(
                detections
                    .par_chunks(START_BLOCK)
                    .zip(ids.par_chunks_mut(START_BLOCK)),
            )
            .map(write)
            .reduce(|| true, |a, b| a && b)
    } else {
        parts
            .into_iter()
            .zip(
                detections
                    .chunks(START_BLOCK)
                    .zip(ids.chunks_mut(START_BLOCK)),
            )
            .map(write)
            .fold(true, |a, b| a && b)
    }
}

/// What one pass over a frame's detections tells.
struct Extent {
    /// Detections with a finite position, and their bounding box.
    finite: usize,
    bounds: [f64; 4],
    /// How far a detection's bounding box reaches from its centroid, at most.
    reach: f64,
    /// Detections that reach farther than `merges::SMALL_REACH`.
    large: usize,
}

/// Detections per task of `Extent::of` on the pool (a few µs of work each).
const EXTENT_BLOCK: usize = 4096;

impl Extent {
    const NONE: Extent = Extent {
        finite: 0,
        bounds: [f64::MAX, f64::MAX, f64::MIN, f64::MIN],
        reach: 0.0,
        large: 0,
    };

    /// With `parallel`, on the rayon pool.
    fn of(detections: &[Detection], parallel: bool) -> Self {
        Self::of_each(detections.len(), |k| detections[k], parallel)
    }

    /// `of` the detections `Detection::from_rows` makes of these rows, each made on the fly
    /// and not kept (the same extent, none of their memory).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    fn of_rows(stats: &[ComponentStats], subpixel: &[SubpixelCentroid], parallel: bool) -> Self {
        let measured = subpixel.len() == stats.len();
        let detection = |k| Detection::of_row(stats, subpixel, measured, k);
        Self::of_each(stats.len(), detection, parallel)
    }

    /// The extent of detections `0..n`, `detection(k)` the k-th.
    #[inline]
    fn of_each(n: usize, detection: impl Fn(usize) -> Detection + Sync, parallel: bool) -> Self {
        let with_one = |e: Self, k: usize| e.with(&detection(k));
        if parallel {
            (0..n)
                .into_par_iter()
                .with_min_len(EXTENT_BLOCK)
                .fold(|| Self::NONE, with_one)
                .reduce(|| Self::NONE, Self::union)
        } else {
            (0..n).fold(Self::NONE, with_one)
        }
    }

    fn with(mut self, d: &Detection) -> Self {
        let reach = d.reach();
        self.reach = self.reach.max(reach);
        self.large += (reach > merges::SMALL_REACH) as usize;
        if d.x.is_finite() && d.y.is_finite() {
            self.finite += 1;
            let [x0, y0, x1, y1] = &mut self.bounds;
            (*x0, *y0, *x1, *y1) = (x0.min(d.x), y0.min(d.y), x1.max(d.x), y1.max(d.y));
        }
        self
    }

    fn union(self, o: Self) -> Self {
        let ([a0, b0, a1, b1], [c0, d0, c1, d1]) = (self.bounds, o.bounds);
        Self {
            finite: self.finite + o.finite,
            bounds: [a0.min(c0), b0.min(d0), a1.max(c1), b1.max(d1)],
            reach: self.reach.max(o.reach),
            large: self.large + o.large,
        }
    }

    /// The radius of a circle that holds `max_candidates` detections at the mean density of
    /// the detections (over their bounding box); infinite when there are no more than that.
    fn dense_radius(&self, max_candidates: u32) -> f64 {
        if self.finite <= max_candidates as usize {
            return f64::INFINITY;
        }
        let [x0, y0, x1, y1] = self.bounds;
        let area = (x1 - x0).max(1.0) * (y1 - y0).max(1.0);
        (max_candidates as f64 * area / (std::f64::consts::PI * self.finite as f64)).sqrt()
    }
}

/// `Extent::dense_radius` of `detections`.
#[cfg(test)]
fn dense_radius(max_candidates: u32, detections: &[Detection]) -> f64 {
    Extent::of(detections, false).dense_radius(max_candidates)
}

/// √(dx² + dy²): `hypot` guards against overflow that pixel coordinates never reach, at
/// several times the cost.
fn distance(dx: f64, dy: f64) -> f64 {
    (dx * dx + dy * dy).sqrt()
}

/// Moves a track to a new detection.
/// `confirm`: the frame was sparse enough to gate, so a tentative track becomes confirmed.
fn observe(t: &mut Track, frame: u64, d: &Detection, cfg: &TrackerConfig, confirm: bool) {
    t.confirmed |= confirm;
    if t.hits > 1 && d.area > cfg.merge_area_ratio * t.area {
        // Its marker merged with another: keep the velocity and the size, ride on the box.
        let (px, py) = t.predict(frame);
        let [l, top, r, b] = d.bbox;
        (t.est_x, t.est_y, t.est_frame) = (px.clamp(l, r), py.clamp(top, b), frame);
        t.merged = true;
        t.path_length += distance(d.x - t.x, d.y - t.y);
        (t.x, t.y) = (d.x, d.y);
        t.last_frame = frame;
        t.hits += 1;
        t.area_sum += d.area;
        return;
    }
    // Without prediction the velocity stays 0: the prediction is the last position.
    if cfg.predict_velocity {
        // Measured from the last clean detection: positions while missed or merged are guesses.
        let dt = (frame - t.clean_frame) as f64;
        let (vx, vy) = ((d.x - t.clean_x) / dt, (d.y - t.clean_y) / dt);
        if t.hits == 1 {
            (t.vx, t.vy) = (vx, vy);
        } else {
            let a = cfg.velocity_smoothing;
            t.vx = a * vx + (1.0 - a) * t.vx;
            t.vy = a * vy + (1.0 - a) * t.vy;
        }
    }
    t.path_length += distance(d.x - t.x, d.y - t.y);
    t.x = d.x;
    t.y = d.y;
    (t.est_x, t.est_y, t.est_frame) = (d.x, d.y, frame);
    (t.clean_x, t.clean_y, t.clean_frame) = (d.x, d.y, frame);
    t.merged = false;
    t.last_frame = frame;
    t.hits += 1;
    // Slowly: a marker that merges with another grows over a few frames, and the merge
    // test compares with the size before.
    t.area += 0.2 * (d.area - t.area);
    t.area_sum += d.area;
}

#[cfg(test)]
mod tests;
