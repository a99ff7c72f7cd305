//! Recent positions of the live tracks, for the view's fading trajectory tails, and a longer
//! history of the one selected track, for its plot. Updated once per frame result.
//!
//! Memory stays flat on long runs: a track not seen for `tail_len` frames is dropped, and the
//! points kept over all tails are capped (`TAIL_POINT_BUDGET`), so a frame full of short-lived
//! noise tracks (a new ID per blob per frame) cannot pile up tails.

use crate::pipeline::FrameResult;
use std::collections::{HashMap, VecDeque};

/// Tail length (frames) when the settings say nothing.
pub const DEFAULT_TAIL_FRAMES: u32 = 30;
/// Tail lengths the settings accept: a tail needs two points; longer ones cost memory and
/// mesh size for every track in view.
pub const TAIL_FRAMES_MIN: u32 = 2;
pub const TAIL_FRAMES_MAX: u32 = 300;
/// Points kept for the selected track: 50 s at 60 frames/s.
pub const SELECTED_HISTORY_LEN: usize = 3_000;
/// Points kept over all tails (about 14 MB). With 30-frame tails that is 20,000 tracks; a
/// frame with more tracked components than fit keeps no tails (the view would not draw that
/// many anyway).
pub const TAIL_POINT_BUDGET: usize = 600_000;

/// One position of a track: pixel-index coordinates, as `FrameResult::position`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrackPoint {
    pub frame: u64,
    pub x: f64,
    pub y: f64,
}

/// The recent positions of one track.
#[derive(Clone, Debug, Default)]
pub struct Tail {
    /// The first frame it was seen in, while it has been kept here.
    pub first_frame: u64,
    /// Frames it was detected in, while it has been kept here.
    pub detections: u64,
    /// Oldest first; at most `tail_len` points, none `tail_len` or more frames old.
    pub points: VecDeque<TrackPoint>,
}

/// The selected track's longer history (up to `SELECTED_HISTORY_LEN` points).
#[derive(Clone, Debug)]
pub struct SelectedTrack {
    pub id: u64,
    /// None until it has been seen (selected before any frame with it was recorded).
    pub first_frame: Option<u64>,
    pub detections: u64,
    /// Oldest first.
    pub points: VecDeque<TrackPoint>,
}

impl SelectedTrack {
    fn push(&mut self, p: TrackPoint) {
        if self.points.len() == SELECTED_HISTORY_LEN {
            self.points.pop_front();
        }
        self.first_frame.get_or_insert(p.frame);
        self.detections += 1;
        self.points.push_back(p);
    }
}

#[derive(Clone, Debug)]
pub struct TrackHistory {
    tail_len: usize,
    tails: HashMap<u64, Tail>,
    selected: Option<SelectedTrack>,
    last_frame: Option<u64>,
    /// The last frame had more tracked components than tails can be kept for.
    pub over_budget: bool,
}

impl Default for TrackHistory {
    fn default() -> Self {
        Self::new(DEFAULT_TAIL_FRAMES)
    }
}

impl TrackHistory {
    pub fn new(tail_frames: u32) -> Self {
        Self {
            tail_len: clamp_tail(tail_frames),
            tails: HashMap::new(),
            selected: None,
            last_frame: None,
            over_budget: false,
        }
    }

    /// Points kept per tail (= frames a tail spans).
    pub fn tail_len(&self) -> usize {
        self.tail_len
    }

    /// Changes the tail length (clamped to `TAIL_FRAMES_MIN..=TAIL_FRAMES_MAX`); longer tails
    /// than that are cut at once.
    pub fn set_tail_len(&mut self, tail_frames: u32) {
        let len = clamp_tail(tail_frames);
        if len == self.tail_len {
            return;
        }
        self.tail_len = len;
        for tail in self.tails.values_mut() {
            while tail.points.len() > len {
                tail.points.pop_front();
            }
        }
    }

    /// Tracks kept at most: the point budget over the tail length.
    fn max_tracks(&self) -> usize {
        TAIL_POINT_BUDGET / self.tail_len
    }

    /// Forgets everything (a new source, or the frame index went back: the tracker then starts
    /// new tracks, so the old IDs will not come back).
    pub fn reset(&mut self) {
        self.tails.clear();
        self.selected = None;
        self.last_frame = None;
        self.over_budget = false;
    }

    /// Records the positions of the tracked components of `frame`.
    pub fn update(&mut self, frame: &FrameResult) {
        let now = frame.index;
        if self.last_frame.is_some_and(|last| now <= last) {
            self.reset();
        }
        self.last_frame = Some(now);

        // A frame whose track IDs do not match its components (should not happen) counts only
        // the rows both have.
        let n = frame.components.len().min(frame.track_ids.len());
        self.over_budget = n > self.max_tracks();
        if self.over_budget {
            // Frees the memory too, not only the entries.
            self.tails = HashMap::new();
        }
        for i in 0..n {
            let id = frame.track_ids[i];
            // 0: no track (the tracker's answer for a position it could not use).
            if id == 0 {
                continue;
            }
            let (x, y) = frame.position(i);
            if !(x.is_finite() && y.is_finite()) {
                continue;
            }
            let p = TrackPoint { frame: now, x, y };
            if !self.over_budget {
                let tail = self.tails.entry(id).or_insert_with(|| Tail {
                    first_frame: now,
                    detections: 0,
                    points: VecDeque::with_capacity(4),
                });
                if tail.points.len() >= self.tail_len {
                    tail.points.pop_front();
                }
                tail.points.push_back(p);
                tail.detections += 1;
            }
            if let Some(s) = &mut self.selected {
                if s.id == id {
                    s.push(p);
                }
            }
        }
        self.prune(now);
    }

    /// Drops points `tail_len` or more frames old, and the tracks left without points. If many
    /// short-lived tracks still exceed the budget, only those seen in this frame are kept.
    fn prune(&mut self, now: u64) {
        let len = self.tail_len as u64;
        self.tails.retain(|_, tail| {
            while tail
                .points
                .front()
                .is_some_and(|p| now.saturating_sub(p.frame) >= len)
            {
                tail.points.pop_front();
            }
            !tail.points.is_empty()
        });
        if self.tails.len() > self.max_tracks() {
            self.tails
                .retain(|_, tail| tail.points.back().is_some_and(|p| p.frame == now));
        }
    }

    /// Follows track `id` (None: no track), seeding its history from its tail.
    pub fn select(&mut self, id: Option<u64>) {
        if self.selected_id() == id {
            return;
        }
        self.selected = id.map(|id| match self.tails.get(&id) {
            Some(tail) => SelectedTrack {
                id,
                first_frame: Some(tail.first_frame),
                detections: tail.detections,
                points: tail.points.clone(),
            },
            None => SelectedTrack {
                id,
                first_frame: None,
                detections: 0,
                points: VecDeque::new(),
            },
        });
    }

    pub fn selected_id(&self) -> Option<u64> {
        self.selected.as_ref().map(|s| s.id)
    }

    pub fn selected(&self) -> Option<&SelectedTrack> {
        self.selected.as_ref()
    }

    pub fn tail(&self, id: u64) -> Option<&Tail> {
        self.tails.get(&id)
    }

    /// Tracks with a tail kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.tails.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.tails.is_empty()
    }

    /// The frame index of the last update.
    #[cfg(test)]
    pub fn last_frame(&self) -> Option<u64> {
        self.last_frame
    }
}

fn clamp_tail(tail_frames: u32) -> usize {
    tail_frames.clamp(TAIL_FRAMES_MIN, TAIL_FRAMES_MAX) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ccl::stats::ComponentStats;
    use crate::ccl::{Backend, Connectivity};
    use crate::frame::image::GrayImage;
    use crate::pipeline::FrameTimings;

    /// A frame with one component per (track ID, x, y), centred there.
    fn frame(index: u64, tracks: &[(u64, f64, f64)]) -> FrameResult {
        let components = tracks
            .iter()
            .enumerate()
            .map(|(i, &(_, x, y))| ComponentStats {
                label: i as u32 + 1,
                left: x as u32,
                top: y as u32,
                width: 1,
                height: 1,
                area: 1,
                sum_x: x as u64,
                sum_y: y as u64,
                centroid_x: x,
                centroid_y: y,
            })
            .collect();
        FrameResult {
            index,
            time_s: 0.0,
            name: String::new(),
            grey: GrayImage::new(1, 1, vec![0]).unwrap().into(),
            binary: None,
            labels: None,
            components,
            track_ids: tracks.iter().map(|t| t.0).collect(),
            ended_tracks: Vec::new(),
            subpixel: Vec::new(),
            shapes: Vec::new(),
            world: Vec::new(),
            markers: Vec::new(),
            all_count: tracks.len() as u32,
            timings: FrameTimings {
                steps: Vec::new(),
                latency_ms: 0.0,
            },
            algorithm: "test",
            backend: Backend::Cpu,
            connectivity: Connectivity::Eight,
        }
    }

    fn frames(h: &mut TrackHistory, range: std::ops::Range<u64>, tracks: &[u64]) {
        for f in range {
            let rows: Vec<_> = tracks
                .iter()
                .map(|&id| (id, f as f64, id as f64 * 10.0))
                .collect();
            h.update(&frame(f, &rows));
        }
    }

    #[test]
    fn appends_positions_per_track() {
        let mut h = TrackHistory::new(30);
        h.update(&frame(5, &[(7, 1.5, 2.0), (9, 10.0, 20.0), (0, 3.0, 3.0)]));
        h.update(&frame(6, &[(9, 11.0, 21.0), (7, 2.5, 2.0)]));
        // ID 0 is "no track": not kept.
        assert_eq!(h.len(), 2);
        let t = h.tail(7).unwrap();
        assert_eq!(
            t.points.iter().copied().collect::<Vec<_>>(),
            [
                TrackPoint {
                    frame: 5,
                    x: 1.5,
                    y: 2.0
                },
                TrackPoint {
                    frame: 6,
                    x: 2.5,
                    y: 2.0
                }
            ]
        );
        assert_eq!((t.first_frame, t.detections), (5, 2));
        assert_eq!(h.tail(9).unwrap().points.back().unwrap().x, 11.0);
        assert!(h.tail(0).is_none());
    }

    #[test]
    fn ring_keeps_the_newest_tail_len_points() {
        let mut h = TrackHistory::new(4);
        frames(&mut h, 0..10, &[1]);
        let frames_kept: Vec<u64> = h.tail(1).unwrap().points.iter().map(|p| p.frame).collect();
        assert_eq!(frames_kept, [6, 7, 8, 9]);
        assert_eq!(h.tail(1).unwrap().detections, 10);
        // A shorter tail cuts the kept ones at once; lengths out of range are clamped.
        h.set_tail_len(2);
        assert_eq!(h.tail(1).unwrap().points.len(), 2);
        h.set_tail_len(0);
        assert_eq!(h.tail_len(), TAIL_FRAMES_MIN as usize);
        h.set_tail_len(u32::MAX);
        assert_eq!(h.tail_len(), TAIL_FRAMES_MAX as usize);
    }

    #[test]
    fn tracks_not_seen_for_a_tail_length_are_pruned() {
        let mut h = TrackHistory::new(5);
        frames(&mut h, 0..3, &[1, 2]);
        // Track 2 is gone from frame 3 on: its points age out one by one.
        frames(&mut h, 3..6, &[1]);
        let kept: Vec<u64> = h.tail(2).unwrap().points.iter().map(|p| p.frame).collect();
        assert_eq!(kept, [1, 2]);
        frames(&mut h, 6..8, &[1]);
        assert!(h.tail(2).is_none());
        assert_eq!(h.len(), 1);

        // Many short-lived tracks (noise): memory stays flat.
        let mut h = TrackHistory::new(30);
        for f in 0..200u64 {
            let rows: Vec<_> = (0..1000u64)
                .map(|k| (f * 1000 + k + 1, k as f64, 0.0))
                .collect();
            h.update(&frame(f, &rows));
            assert!(
                h.len() <= TAIL_POINT_BUDGET / 30,
                "{} at frame {f}",
                h.len()
            );
        }
        // 1,000 new tracks a frame, each kept 30 frames: 20,000 fit the budget, 30,000 do not.
        assert!(h.len() >= 1000 && h.len() <= 20_000, "{}", h.len());
    }

    #[test]
    fn too_many_tracks_in_a_frame_keep_no_tails() {
        let mut h = TrackHistory::new(300);
        let rows: Vec<_> = (1..=3000u64).map(|k| (k, k as f64, 0.0)).collect();
        h.select(Some(17));
        h.update(&frame(0, &rows));
        assert!(h.over_budget);
        assert!(h.is_empty());
        // The selected track is still followed.
        assert_eq!(h.selected().unwrap().points.len(), 1);
        h.update(&frame(1, &rows[..100]));
        assert!(!h.over_budget);
        assert_eq!(h.len(), 100);
    }

    #[test]
    fn resets_when_the_frame_index_goes_back() {
        let mut h = TrackHistory::new(30);
        frames(&mut h, 10..20, &[1, 2]);
        h.select(Some(2));
        assert_eq!(h.len(), 2);
        frames(&mut h, 3..4, &[5]);
        assert_eq!(h.len(), 1);
        assert!(h.tail(1).is_none() && h.tail(2).is_none());
        assert_eq!(h.tail(5).unwrap().points.len(), 1);
        assert_eq!(h.selected_id(), None);
        assert_eq!(h.last_frame(), Some(3));
        // The same index again is a restart too (the tracker ends its tracks then).
        frames(&mut h, 3..4, &[6]);
        assert!(h.tail(5).is_none());
        h.reset();
        assert!(h.is_empty() && h.last_frame().is_none());
    }

    #[test]
    fn selected_track_keeps_a_long_history_seeded_from_its_tail() {
        let mut h = TrackHistory::new(30);
        frames(&mut h, 0..50, &[1, 2]);
        h.select(Some(2));
        let s = h.selected().unwrap();
        assert_eq!((s.id, s.first_frame, s.detections), (2, Some(0), 50));
        // Seeded with the 30 points of its tail, frames 20..50.
        assert_eq!(s.points.len(), 30);
        assert_eq!(s.points.front().unwrap().frame, 20);
        // Selecting it again keeps the history.
        h.select(Some(2));
        assert_eq!(h.selected().unwrap().points.len(), 30);

        frames(&mut h, 50..5000, &[1, 2]);
        let s = h.selected().unwrap();
        assert_eq!(s.points.len(), SELECTED_HISTORY_LEN);
        assert_eq!(s.points.back().unwrap().frame, 4999);
        assert_eq!(s.points.back().unwrap().y, 20.0);
        assert_eq!(s.detections, 5000);
        assert_eq!(h.tail(2).unwrap().points.len(), 30);

        // Hidden for longer than a tail: its tail is pruned, its history stays.
        frames(&mut h, 5000..5100, &[1]);
        assert!(h.tail(2).is_none());
        assert_eq!(h.selected().unwrap().points.len(), SELECTED_HISTORY_LEN);

        // A track not seen yet starts empty; None stops following.
        h.select(Some(99));
        assert_eq!(h.selected().unwrap().first_frame, None);
        assert!(h.selected().unwrap().points.is_empty());
        h.select(None);
        assert!(h.selected().is_none());
    }
}
