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
//! Why greedy rather than Hungarian: with gating, a track has one or two candidates and
//! conflicts are small local clusters, where the cheapest-pair-first choice is almost always
//! the optimal one (the constant-velocity prediction already separates markers whose paths
//! cross). Greedy costs O(P log P) for P gated pairs — about 1 ms for 10,000 markers — and is
//! deterministic; Hungarian is O(n³) per conflict cluster for a rarely different answer.
//!
//! Positions are in pixel-index coordinates (as `ComponentStats` centroids), frames are the
//! source's frame indices; a gap in the indices (dropped frames) counts as missed frames.

mod grid;
pub mod score;

use crate::ccl::stats::ComponentStats;
use crate::ccl::subpixel::SubpixelCentroid;
use crate::error::{Error, Result};
use grid::GridIndex;
use serde::Serialize;
use std::collections::VecDeque;

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
    /// Weight of the newest velocity measurement, in (0, 1]: 1 = last displacement only.
    pub velocity_smoothing: f64,
    /// Weight of the size-dissimilarity term |ln(area / track area)| in the cost (0 = off).
    /// The distance term is (distance / gate_px)²: the same scale for every track, so a track
    /// whose gate has widened does not win detections that are nearer to another track.
    pub size_weight: f64,
    /// Recent positions kept per active track (trajectory tails for display).
    pub tail_len: usize,
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
            velocity_smoothing: 0.5,
            size_weight: 0.5,
            tail_len: 32,
        }
    }
}

impl TrackerConfig {
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
    /// every component (same order), at its binary centroid otherwise.
    pub fn from_rows(stats: &[ComponentStats], subpixel: &[SubpixelCentroid]) -> Vec<Self> {
        if subpixel.len() == stats.len() {
            stats
                .iter()
                .zip(subpixel)
                .map(|(s, c)| Self::from_subpixel(s, c))
                .collect()
        } else {
            stats.iter().map(Self::from_stats).collect()
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

/// An active track.
#[derive(Clone, Debug)]
pub struct Track {
    pub id: u64,
    pub first_frame: u64,
    /// The last frame with a detection.
    pub last_frame: u64,
    /// Frames with a detection.
    pub hits: u64,
    /// The last detected position.
    pub x: f64,
    pub y: f64,
    /// Velocity in px per frame (0 until the second detection).
    pub vx: f64,
    pub vy: f64,
    /// The marker's area, smoothed over its clean detections.
    pub area: f64,
    area_sum: f64,
    pub path_length: f64,
    /// The last `tail_len` detected positions, oldest first.
    pub tail: VecDeque<TailPoint>,
    /// Where the track is believed to be at frame `est_frame`: the last detection, or while
    /// merged into a larger component, a point of that component.
    est_x: f64,
    est_y: f64,
    est_frame: u64,
    /// The last detection of its own (not merged) and its frame: the gate widens with the
    /// frames since, and the next velocity is measured from there.
    clean_x: f64,
    clean_y: f64,
    clean_frame: u64,
    /// Merged into a larger component in the latest frame (drawn as such by a display).
    pub merged: bool,
    /// Detected again after its first detection, in a frame sparse enough to gate; until then
    /// the track is tentative and ends after `tentative_max_missed` missed frames.
    pub confirmed: bool,
}

impl Track {
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
#[derive(Clone, Debug, Default)]
pub struct SummaryBuilder {
    tracks: std::collections::HashMap<u64, TrackSummary>,
}

impl SummaryBuilder {
    pub fn new() -> Self {
        Self::default()
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
                s.path_length += (d.x - s.last_x).hypot(d.y - s.last_y);
            }
            // Running mean, so no second table of sums is needed.
            s.length += 1;
            s.mean_area += (d.area - s.mean_area) / s.length as f64;
            s.last_frame = frame;
            (s.last_x, s.last_y) = (d.x, d.y);
        }
    }

    /// Every track seen, by ID.
    pub fn summaries(&self) -> Vec<TrackSummary> {
        let mut all: Vec<TrackSummary> = self.tracks.values().copied().collect();
        all.sort_unstable_by_key(|s| s.id);
        all
    }
}

/// The tracker: feed it every frame's detections in frame order.
pub struct Tracker {
    config: TrackerConfig,
    active: Vec<Track>,
    finished: Vec<TrackSummary>,
    next_id: u64,
    last_frame: Option<u64>,
    grid: GridIndex,
    pairs: Vec<(f64, u32, u32)>,
    /// One track's gated candidates (cost, slot), before the `max_candidates` cut.
    candidates: Vec<(f64, u32)>,
    /// ln(area) of the detection in each grid slot.
    ln_area: Vec<f64>,
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
            active: Vec::new(),
            finished: Vec::new(),
            next_id: 1,
            last_frame: None,
            grid: GridIndex::new(config.gate_px),
            pairs: Vec::new(),
            candidates: Vec::new(),
            ln_area: Vec::new(),
        }
    }

    pub fn config(&self) -> &TrackerConfig {
        &self.config
    }

    /// Assigns the detections of `frame` to tracks and returns the track ID of each detection
    /// (same order; IDs start at 1; a detection with a non-finite position gets 0, no track).
    /// A frame index not after the previous one (a seek back, a restarted stream) ends every
    /// track first.
    pub fn update(&mut self, frame: u64, detections: &[Detection]) -> Vec<u64> {
        if self.last_frame.is_some_and(|last| frame <= last) {
            self.end_all();
        }
        self.last_frame = Some(frame);

        // Gated candidate pairs (cost, track, grid slot of the detection), and the cheapest pair
        // of every track and of every detection. Tracks are kept sorted by the grid cell of
        // their prediction so that neighbouring tracks touch neighbouring memory (the order
        // barely changes between frames, so the sort is cheap).
        const NO_PAIR: u32 = u32::MAX;
        let cfg = self.config;
        // No gate holds many more than `max_candidates` detections at the frame's density.
        let dense_radius = dense_radius(cfg.max_candidates, detections);
        self.grid.set_min_cell(cfg.gate_px.min(dense_radius));
        let confirm = dense_radius >= cfg.gate_px;
        self.grid.rebuild(detections.iter().map(|d| (d.x, d.y)));
        let grid = &self.grid;
        self.active.sort_by_cached_key(|t| {
            let (px, py) = t.predict(frame);
            grid.cell_key(px, py)
        });
        self.pairs.clear();
        let inv_base2 = 1.0 / (cfg.gate_px * cfg.gate_px);
        let mut best_of_track = vec![NO_PAIR; self.active.len()];
        // Per slot: (cost, track, pair) of its cheapest pair so far.
        let mut best_of_slot = vec![(f64::INFINITY, u32::MAX, NO_PAIR); self.grid.len()];
        let keep = cfg.max_candidates as usize;
        // ln(area) once per detection, in slot order (the size term compares logarithms).
        self.ln_area.clear();
        self.ln_area.extend((0..self.grid.len()).map(|slot| {
            let area = detections[self.grid.slot(slot).0 as usize].area;
            if area > 0.0 {
                area.ln()
            } else {
                f64::NAN
            }
        }));
        for (ti, t) in self.active.iter().enumerate() {
            let ti = ti as u32;
            let (px, py) = t.predict(frame);
            let gate = cfg.gate(frame - t.clean_frame).min(dense_radius);
            let (candidates, grid, ln_area) = (&mut self.candidates, &self.grid, &self.ln_area);
            candidates.clear();
            let size_term = cfg.size_weight > 0.0 && t.area > 0.0;
            let ln_track_area = t.area.ln();
            grid.for_each_slot_near(px, py, gate, |slot| {
                let (_, x, y) = grid.slot(slot);
                let d2 = (x - px).powi(2) + (y - py).powi(2);
                if d2 > gate * gate {
                    return;
                }
                let mut cost = d2 * inv_base2;
                let ln_area = ln_area[slot];
                if size_term && !ln_area.is_nan() {
                    cost += cfg.size_weight * (ln_area - ln_track_area).abs();
                }
                candidates.push((cost, slot as u32));
            });
            if candidates.len() > keep {
                candidates.select_nth_unstable_by(keep - 1, |a, b| {
                    a.0.total_cmp(&b.0).then(a.1.cmp(&b.1))
                });
                candidates.truncate(keep);
            }
            let mut best_t = (f64::INFINITY, u32::MAX, NO_PAIR);
            for &(cost, slot) in candidates.iter() {
                let k = self.pairs.len() as u32;
                self.pairs.push((cost, ti, slot));
                // Keys (cost, track, slot) follow the greedy order (within one track: cost,
                // then slot, as the `max_candidates` cut above ranks them).
                if (cost, slot) < (best_t.0, best_t.1) {
                    best_t = (cost, slot, k);
                }
                let bs = &mut best_of_slot[slot as usize];
                if (cost, ti) < (bs.0, bs.1) {
                    *bs = (cost, ti, k);
                }
            }
            best_of_track[ti as usize] = best_t.2;
        }

        // Greedy by increasing cost (ties: track, then slot). A pair that is the cheapest of
        // both its track and its detection is taken by the greedy order whatever else happens,
        // so those are assigned first and only the remaining conflicts are sorted: the same
        // result as sorting every pair, at a fraction of the cost.
        const NONE: u64 = 0;
        let mut id_of_slot = vec![NONE; self.grid.len()];
        let mut track_taken = vec![false; self.active.len()];
        for (k, &(_, ti, slot)) in self.pairs.iter().enumerate() {
            let (ti, slot) = (ti as usize, slot as usize);
            if best_of_track[ti] == k as u32 && best_of_slot[slot].2 == k as u32 {
                track_taken[ti] = true;
                let t = &mut self.active[ti];
                id_of_slot[slot] = t.id;
                let di = self.grid.slot(slot).0 as usize;
                observe(t, frame, &detections[di], &cfg, confirm);
            }
        }
        self.pairs.retain(|&(_, ti, slot)| {
            !track_taken[ti as usize] && id_of_slot[slot as usize] == NONE
        });
        self.pairs.sort_unstable_by(order);
        for &(_, ti, slot) in &self.pairs {
            let (ti, slot) = (ti as usize, slot as usize);
            if track_taken[ti] || id_of_slot[slot] != NONE {
                continue;
            }
            track_taken[ti] = true;
            let t = &mut self.active[ti];
            id_of_slot[slot] = t.id;
            let di = self.grid.slot(slot).0 as usize;
            observe(t, frame, &detections[di], &cfg, confirm);
        }
        let mut ids = vec![NONE; detections.len()];
        for (slot, &id) in id_of_slot.iter().enumerate() {
            ids[self.grid.slot(slot).0 as usize] = id;
        }

        // A missed track whose prediction lies on a component that another track took, and
        // that is larger than this track's own, is merged into it (two touching markers form
        // one component): it rides on that component instead of drifting away.
        let reach = (4.0 * cfg.gate_px).min(dense_radius).min(
            detections
                .iter()
                .map(|d| {
                    let [l, t, r, b] = d.bbox;
                    (d.x - l).max(r - d.x).max(d.y - t).max(b - d.y)
                })
                .fold(0.0, f64::max),
        ) + 1.0;
        for (ti, t) in self.active.iter_mut().enumerate() {
            if track_taken[ti] {
                continue; // `observe` has set `merged`
            }
            t.merged = false;
            // A tentative track has no size or velocity of its own to ride a merge with.
            if !t.confirmed || frame - t.clean_frame > cfg.max_merged as u64 {
                continue;
            }
            let (px, py) = t.predict(frame);
            let mut host: Option<(f64, usize)> = None;
            self.grid
                .for_each_near(px, py, reach + cfg.gate_px.min(dense_radius), |di, x, y| {
                    let d = &detections[di as usize];
                    if ids[di as usize] != NONE && d.area > t.area && d.covers(px, py, cfg.gate_px)
                    {
                        let d2 = (x - px).powi(2) + (y - py).powi(2);
                        if host.is_none_or(|(best, _)| d2 < best) {
                            host = Some((d2, di as usize));
                        }
                    }
                });
            if let Some((_, di)) = host {
                let [l, top, r, b] = detections[di].bbox;
                (t.est_x, t.est_y, t.est_frame) = (px.clamp(l, r), py.clamp(top, b), frame);
                t.merged = true;
            }
        }

        // Tracks missed once too often end.
        // (Order-preserving, so the tracks stay nearly sorted for the next frame.)
        let finished = &mut self.finished;
        self.active.retain(|t| {
            let ended = frame - t.est_frame > cfg.max_missed_of(t) as u64;
            if ended {
                finished.push(t.summary());
            }
            !ended
        });

        // Unassigned detections start tracks.
        for (d, id) in detections.iter().zip(ids.iter_mut()) {
            if *id == NONE && d.x.is_finite() && d.y.is_finite() {
                *id = self.next_id;
                self.next_id += 1;
                let mut tail = VecDeque::with_capacity(cfg.tail_len.min(64));
                if cfg.tail_len > 0 {
                    tail.push_back(TailPoint {
                        frame,
                        x: d.x,
                        y: d.y,
                    });
                }
                self.active.push(Track {
                    id: *id,
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
                    tail,
                    est_x: d.x,
                    est_y: d.y,
                    est_frame: frame,
                    clean_x: d.x,
                    clean_y: d.y,
                    clean_frame: frame,
                    merged: false,
                    confirmed: false,
                });
            }
        }
        ids
    }

    /// Tracks still running (in no particular order).
    pub fn active(&self) -> &[Track] {
        &self.active
    }

    /// Tracks that have ended, in the order they ended.
    pub fn finished(&self) -> &[TrackSummary] {
        &self.finished
    }

    /// Hands over the ended tracks and forgets them (a long-running tracker that does not
    /// need them calls this to keep its memory bounded).
    pub fn take_finished(&mut self) -> Vec<TrackSummary> {
        std::mem::take(&mut self.finished)
    }

    /// Every track so far, ended and active, by ID.
    pub fn summaries(&self) -> Vec<TrackSummary> {
        let mut all: Vec<TrackSummary> = self.finished.clone();
        all.extend(self.active.iter().map(Track::summary));
        all.sort_unstable_by_key(|s| s.id);
        all
    }

    /// Ends every active track (end of stream, or a jump back in the frame index).
    pub fn end_all(&mut self) {
        self.finished
            .extend(self.active.drain(..).map(|t| t.summary()));
    }
}

/// The radius of a circle that holds `max_candidates` detections at the mean density of the
/// frame's detections (over their bounding box); infinite when there are no more than that.
fn dense_radius(max_candidates: u32, detections: &[Detection]) -> f64 {
    let (mut n, mut x0, mut y0, mut x1, mut y1) = (0usize, f64::MAX, f64::MAX, f64::MIN, f64::MIN);
    for d in detections
        .iter()
        .filter(|d| d.x.is_finite() && d.y.is_finite())
    {
        n += 1;
        (x0, y0, x1, y1) = (x0.min(d.x), y0.min(d.y), x1.max(d.x), y1.max(d.y));
    }
    if n <= max_candidates as usize {
        return f64::INFINITY;
    }
    let area = (x1 - x0).max(1.0) * (y1 - y0).max(1.0);
    (max_candidates as f64 * area / (std::f64::consts::PI * n as f64)).sqrt()
}

/// The greedy order of candidate pairs (cost, track, slot): cost, then track, then slot.
fn order(a: &(f64, u32, u32), b: &(f64, u32, u32)) -> std::cmp::Ordering {
    a.0.total_cmp(&b.0).then((a.1, a.2).cmp(&(b.1, b.2)))
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
        t.path_length += (d.x - t.x).hypot(d.y - t.y);
        (t.x, t.y) = (d.x, d.y);
        t.last_frame = frame;
        t.hits += 1;
        t.area_sum += d.area;
        push_tail(t, frame, d, cfg);
        return;
    }
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
    t.path_length += (d.x - t.x).hypot(d.y - t.y);
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
    push_tail(t, frame, d, cfg);
}

fn push_tail(t: &mut Track, frame: u64, d: &Detection, cfg: &TrackerConfig) {
    if cfg.tail_len > 0 {
        if t.tail.len() == cfg.tail_len {
            t.tail.pop_front();
        }
        t.tail.push_back(TailPoint {
            frame,
            x: d.x,
            y: d.y,
        });
    }
}

#[cfg(test)]
mod tests;
