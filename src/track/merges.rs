//! Phase 4 of a frame's association: a missed track whose prediction lies on a component that
//! another track took, and that is larger than the track's own, is merged into it (two touching
//! markers form one component): it rides on that component instead of drifting away.
//!
//! The component's bounding box must hold the prediction: a marker merged into a component lies
//! inside that component's box (by its own half size, more than a prediction's error), while a
//! margin as wide as the gate let noise tracked by chance ride on every larger component near
//! its prediction for `max_merged` frames (thousands of riders on a noisy markers scene, the
//! tracker's time growing with the run's length). A component that reaches only a few pixels
//! from its centroid can therefore only be near it. A scene of markers has a few
//! large components (the markers, the shapes behind them) among many small ones (noise, the
//! markers' cells), and many missed tracks to place (noise that was tracked for a while). Each
//! missed track therefore looks among the small components only within their reach
//! (`SMALL_REACH`), and among the large ones only at those whose box holds its prediction, from
//! an index of their boxes (`LargeComponents`), instead of among all within the largest reach:
//! the same component as that search, at a fraction of the detections visited (on markers,
//! tens of components a missed track before, a handful now). Where the large components are many (`LARGE_SHARE`: clutter of
//! every size), the one search among all detections costs less, and stays; so it does where
//! the large components are many for each track that may look for one (a dense frame, where
//! nearly every confirmed track is taken), counting the threads the searches run on: the index
//! is built on one (on a 16-core host a dense clutter frame's 9,361 large components took
//! 1.1–1.4 ms to index, more than the searches they saved).

use super::assign::{Chunk, Frame, NONE};
use super::boxes::{Box2, BoxIndex};
use super::grid::GridIndex;
use super::{Detection, Track};
use rayon::prelude::*;

/// Components that reach no farther than this (px) from their centroid are small: a missed
/// track finds them among the detections within this reach.
pub(super) const SMALL_REACH: f64 = 4.0;
/// The large components are indexed on their own when they are at most this share of the
/// detections (else the one search among all of them costs less than two).
pub(super) const LARGE_SHARE: f64 = 0.25;
/// Nor when there are more than this many of them for each confirmed track (a track that
/// might look for one): a look among all detections near a track costs a few large
/// components' indexing.
const LARGE_PER_RIDER: usize = 4;

/// Does an index of `large` large components (`share` of the detections) pay, for
/// `riders` tracks that may look for one, on `threads` threads? The index is built on one
/// thread, while the searches it saves run on all of them.
pub(super) fn index_pays(large: usize, share: f64, riders: usize, threads: usize) -> bool {
    share <= LARGE_SHARE && riders > 0 && large * threads <= LARGE_PER_RIDER * riders
}

/// The frame's large components (reach beyond `SMALL_REACH`): their grid slots, and an index
/// of their bounding boxes.
#[derive(Default)]
pub(super) struct LargeComponents {
    /// Indexed this frame (else a missed track searches among all detections).
    pub(super) indexed: bool,
    /// Their grid slots and boxes (the index's boxes, in this order).
    found: Vec<(u32, Box2)>,
    boxes: BoxIndex,
    /// Look among all detections within the search radius instead, as the reference the
    /// tests compare with.
    #[cfg(test)]
    pub(super) full_search: bool,
}

impl LargeComponents {
    /// Not indexed this frame.
    pub(super) fn clear(&mut self) {
        self.indexed = false;
    }

    /// Indexes the bounding boxes of the large components among `detections` (placed in
    /// `grid`), in cells of at least the grid's; lists them on the rayon pool with `parallel`.
    pub(super) fn index(&mut self, detections: &[Detection], grid: &GridIndex, parallel: bool) {
        // Each with its box, read here in the detections' order (by slot it would be a cache
        // miss each).
        let large = |(i, d): (usize, &Detection)| {
            (d.reach() > SMALL_REACH)
                .then(|| grid.slot_of(i).map(|slot| (slot as u32, d.bbox)))
                .flatten()
        };
        self.found.clear();
        if parallel {
            self.found
                .par_extend(detections.par_iter().enumerate().filter_map(large));
        } else {
            self.found
                .extend(detections.iter().enumerate().filter_map(large));
        }
        self.boxes
            .rebuild(self.found.iter().map(|f| f.1), grid.cell());
        self.indexed = true;
    }
}

impl Frame<'_> {
    /// Phase 4 for the tracks of one chunk (`first`: the index of its first track); lists the
    /// tracks that have been missed too often to go on.
    pub(super) fn ride_merges(
        &self,
        first: u32,
        chunk: &mut Chunk,
        tracks: &mut [Track],
        large: &LargeComponents,
    ) {
        chunk.ended.clear();
        for (j, t) in tracks.iter_mut().enumerate() {
            // A tentative track has no size or velocity of its own to ride a merge with.
            if !chunk.taken[j] {
                // Written only when set: most missed tracks are not merged, and a store would
                // dirty their record for nothing (a frame of clutter misses tens of thousands).
                if t.merged {
                    t.merged = false;
                }
                if self.may_ride(t) {
                    let (px, py) = t.predict(self.frame);
                    if let Some(di) = self.merge_host(t.area, px, py, large) {
                        let [l, top, r, b] = self.detections[di].bbox;
                        (t.est_x, t.est_y, t.est_frame) =
                            (px.clamp(l, r), py.clamp(top, b), self.frame);
                        t.merged = true;
                    }
                }
            }
            if self.missed_too_often(t) {
                chunk.ended.push(first + j as u32);
            }
        }
    }

    /// A frame without detections: what `ride_merges` does when no track took one and there is
    /// no component to ride on (every track missed, none merged; those missed too often are
    /// listed to end), without the phases before it.
    pub(super) fn miss_all(&self, first: u32, chunk: &mut Chunk, tracks: &mut [Track]) {
        chunk.ended.clear();
        for (j, t) in tracks.iter_mut().enumerate() {
            if t.merged {
                t.merged = false;
            }
            if self.missed_too_often(t) {
                chunk.ended.push(first + j as u32);
            }
        }
    }

    /// Track `t`, missed this frame, has been missed once too often: it ends.
    #[inline]
    fn missed_too_often(&self, t: &Track) -> bool {
        self.frame - t.est_frame > self.cfg.max_missed_of(t) as u64
    }

    /// Track `t` rides on a component it merged into if it is missed this frame: it is
    /// confirmed, and its last clean detection lies within `max_merged` frames.
    #[inline]
    pub(super) fn may_ride(&self, t: &Track) -> bool {
        t.confirmed && self.frame - t.clean_frame <= self.cfg.max_merged as u64
    }

    /// The detection a missed track of `area` predicted at (px, py) is merged into, if any:
    /// of the detections another track took, larger than `area`, whose bounding box holds
    /// the prediction, and that lie in the grid cells within the search
    /// radius, the nearest (ties: the first slot).
    fn merge_host(&self, area: f64, px: f64, py: f64, large: &LargeComponents) -> Option<usize> {
        let (cfg, grid) = (self.cfg, self.grid);
        let radius = self.reach + cfg.gate_px.min(self.dense_radius);
        let mut host: Option<(f64, usize)> = None;
        let mut consider = |slot: usize| {
            // The slot-ordered tests first: the detection itself (in the caller's order, a
            // cache miss) only for a taken, nearer one.
            if self.slots.track_of(slot) == NONE {
                return;
            }
            let (di, x, y) = grid.slot(slot);
            let d2 = (x - px).powi(2) + (y - py).powi(2);
            if host.is_some_and(|(best, at)| d2 > best || (d2 == best && slot >= at)) {
                return;
            }
            let d = &self.detections[di as usize];
            if d.area > area && d.covers(px, py, 0.0) {
                host = Some((d2, slot));
            }
        };
        #[cfg(test)]
        let indexed = large.indexed && !large.full_search;
        #[cfg(not(test))]
        let indexed = large.indexed;
        if !indexed {
            grid.for_each_slot_near(px, py, radius, &mut consider);
            return host.map(|(_, slot)| grid.slot(slot).0 as usize);
        }
        // A small component covers the prediction only if its centroid is within its reach of
        // it (along x and along y), so among the slots near it (+1 px: no rounding decides)
        // only those (the others, and the large ones, cost no look at their detection).
        let near = (SMALL_REACH + 1.0).min(radius);
        let (xs, ys) = (grid.xs(), grid.ys());
        grid.for_each_slot_near(px, py, near, |slot| {
            if (xs[slot] - px).abs() <= SMALL_REACH && (ys[slot] - py).abs() <= SMALL_REACH {
                consider(slot);
            }
        });
        // A large one: of those whose box holds the prediction, the ones in the cells the
        // search visits.
        if let Some(window) = grid.window(px, py, radius) {
            large.boxes.for_each_holding(px, py, |k| {
                let slot = large.found[k].0 as usize;
                if window.holds(grid.cell_of_slot(slot)) {
                    consider(slot);
                }
            });
        }
        host.map(|(_, slot)| grid.slot(slot).0 as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The index is built for markers among noise (a few large components, thousands of
    /// confirmed tracks), not for a dense frame after sparse ones (thousands of large
    /// components, a few hundred confirmed tracks), nor for clutter of every size.
    #[test]
    fn the_large_components_are_indexed_only_where_it_pays() {
        assert!(index_pays(71, 0.04, 3476, 1));
        assert!(index_pays(71, 0.04, 3476, 16));
        assert!(!index_pays(9361, 0.095, 616, 1));
        assert!(index_pays(9361, 0.095, 13_000, 1));
        assert!(!index_pays(9361, 0.095, 13_000, 16));
        assert!(!index_pays(874, 0.415, 5000, 1));
        assert!(!index_pays(3, 0.01, 0, 1));
    }
}
