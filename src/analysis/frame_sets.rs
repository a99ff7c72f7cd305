//! Frame sets: the frames of several sources grouped by their time on the run's clock. A frame
//! joins an open set that holds no frame of its source yet, has a frame within half a frame
//! period of the fastest source of its own, and spans no more than one period with it; of
//! those, the set whose nearest frame is nearest. Otherwise it starts a new set, whose
//! reference time is its own. Sets are numbered from 0 in the order they start; a frame's skew
//! is its time minus its set's reference time.
//!
//! Two sources pair each frame with the other's nearest, within half a period. Several can
//! spread over more than half a period and still make one set a period (cameras captured
//! 0, 3, 7 and 11 ms after a common trigger at 60 frames/s: each frame is within half a period
//! of the one before it), while a set never holds two frames a period apart.
//!
//! Frames come in time order (the frame loop merges the sources by time), so only the last
//! few sets can still be joined; a source that stalls or ends is simply missing from the sets
//! made meanwhile, and a source that comes back joins the sets of its time again.

use std::collections::VecDeque;

/// The frame rate assumed for a source that does not know its own.
pub const DEFAULT_RATE: f64 = 30.0;

/// Sets kept open for frames that come a little out of time order (live sources).
const OPEN_SETS: usize = 16;

/// Where a frame went: its set, and its time minus the set's reference time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Placement {
    pub set: u64,
    pub skew_s: f64,
}

#[derive(Debug)]
struct OpenSet {
    id: u64,
    reference_s: f64,
    /// The sources with a frame in the set, and their frames' times.
    members: Vec<(usize, f64)>,
}

impl OpenSet {
    /// How far a frame of `source` at `time_s` is from the set's nearest frame, if it may join
    /// it: no frame of its source yet, within `tolerance_s` of one of its frames and within
    /// twice that (a period) of all.
    fn distance(&self, source: usize, time_s: f64, tolerance_s: f64) -> Option<f64> {
        let mut nearest = f64::INFINITY;
        for &(member, t) in &self.members {
            let d = (time_s - t).abs();
            if member == source || d > 2.0 * tolerance_s {
                return None;
            }
            nearest = nearest.min(d);
        }
        (nearest <= tolerance_s).then_some(nearest)
    }
}

/// The grouping of a run's frames into sets.
#[derive(Debug)]
pub struct FrameSets {
    /// Half a frame period of the fastest source (seconds).
    tolerance_s: f64,
    open: VecDeque<OpenSet>,
    next_id: u64,
}

impl FrameSets {
    /// For sources of these frame rates (None: unknown, `DEFAULT_RATE`).
    pub fn new(rates: &[Option<f64>]) -> FrameSets {
        let fastest = rates
            .iter()
            .map(|r| {
                r.filter(|r| r.is_finite() && *r > 0.0)
                    .unwrap_or(DEFAULT_RATE)
            })
            .fold(0.0, f64::max);
        let fastest = if fastest > 0.0 { fastest } else { DEFAULT_RATE };
        FrameSets {
            tolerance_s: 0.5 / fastest,
            open: VecDeque::new(),
            next_id: 0,
        }
    }

    /// Half a frame period of the fastest source, in seconds.
    pub fn tolerance_s(&self) -> f64 {
        self.tolerance_s
    }

    /// The longest a set spans (a frame period of the fastest source): no frame later than
    /// this after a set's reference time joins it.
    pub fn span_s(&self) -> f64 {
        2.0 * self.tolerance_s
    }

    /// The set of a frame of `source` at `time_s`.
    pub fn place(&mut self, source: usize, time_s: f64) -> Placement {
        let tolerance_s = self.tolerance_s;
        let nearest = self
            .open
            .iter_mut()
            .filter_map(|s| Some((s.distance(source, time_s, tolerance_s)?, s)))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((_, set)) = nearest {
            set.members.push((source, time_s));
            return Placement {
                set: set.id,
                skew_s: time_s - set.reference_s,
            };
        }
        let id = self.next_id;
        self.next_id += 1;
        if self.open.len() == OPEN_SETS {
            self.open.pop_front();
        }
        self.open.push_back(OpenSet {
            id,
            reference_s: time_s,
            members: vec![(source, time_s)],
        });
        Placement {
            set: id,
            skew_s: 0.0,
        }
    }

    /// Sets started so far.
    pub fn count(&self) -> u64 {
        self.next_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Places the frames of each source (times in seconds) in time order, as the frame loop
    /// does; the placements per source.
    fn place_all(rates: &[Option<f64>], times: &[Vec<f64>]) -> Vec<Vec<Placement>> {
        let mut sets = FrameSets::new(rates);
        let mut frames: Vec<(f64, usize)> = times
            .iter()
            .enumerate()
            .flat_map(|(s, ts)| ts.iter().map(move |&t| (t, s)))
            .collect();
        frames.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut out = vec![Vec::new(); times.len()];
        for (t, s) in frames {
            out[s].push(sets.place(s, t));
        }
        out
    }

    fn times(rate: f64, offset: f64, frames: std::ops::Range<u32>) -> Vec<f64> {
        frames.map(|i| f64::from(i) / rate + offset).collect()
    }

    #[test]
    fn two_sources_with_a_known_offset_share_every_set_with_that_skew() {
        let placed = place_all(
            &[Some(60.0), Some(60.0)],
            &[times(60.0, 0.0, 0..100), times(60.0, 0.005, 0..100)],
        );
        assert_eq!((placed[0].len(), placed[1].len()), (100, 100));
        for (i, (first, late)) in placed[0].iter().zip(&placed[1]).enumerate() {
            assert_eq!(first.set, i as u64);
            assert_eq!(late.set, i as u64);
            assert_eq!(first.skew_s, 0.0);
            assert!((late.skew_s - 0.005).abs() < 1e-9, "{late:?}");
        }
    }

    #[test]
    fn a_slower_source_joins_every_other_set_of_the_faster() {
        let placed = place_all(
            &[Some(60.0), Some(30.0)],
            &[times(60.0, 0.0, 0..60), times(30.0, 0.002, 0..30)],
        );
        assert_eq!(placed[0].last().unwrap().set, 59);
        for (k, p) in placed[1].iter().enumerate() {
            assert_eq!(p.set, 2 * k as u64);
            assert!((p.skew_s - 0.002).abs() < 1e-9);
        }
    }

    #[test]
    fn a_frame_beyond_half_a_period_starts_a_set_of_its_own() {
        // 10 ms apart at 60 frames/s: more than half a period (8.3 ms).
        let placed = place_all(
            &[Some(60.0), Some(60.0)],
            &[vec![0.0, 1.0 / 60.0], vec![0.010]],
        );
        assert_eq!(placed[0][0].set, 0);
        assert_eq!(placed[1][0].set, 1);
        assert_eq!(placed[1][0].skew_s, 0.0);
        // The next frame of source 0 (16.7 ms) is 6.7 ms from set 1: it joins it.
        assert_eq!(placed[0][1].set, 1);
        assert!((placed[0][1].skew_s - (1.0 / 60.0 - 0.010)).abs() < 1e-9);
    }

    /// Four sources captured 0, 3, 7 and 11 ms after each frame of a common clock at 60
    /// frames/s (11 ms is more than half a period): one set a frame, each frame with its delay
    /// as its skew; late frames (a few ms) keep their sets.
    #[test]
    fn sources_spread_over_more_than_half_a_period_share_one_set_a_period() {
        let delays = [0.0, 0.003, 0.007, 0.011];
        let late = |k: usize, i: u32| match (k, i % 7) {
            (3, 2) => 0.004,
            (2, 4) => 0.003,
            _ => 0.0,
        };
        let frames: Vec<Vec<f64>> = (0..4)
            .map(|k| {
                (0..60)
                    .map(|i| f64::from(i) / 60.0 + delays[k] + late(k, i))
                    .collect()
            })
            .collect();
        let placed = place_all(&[Some(60.0); 4], &frames);
        for (k, source) in placed.iter().enumerate() {
            for (i, p) in source.iter().enumerate() {
                assert_eq!(p.set, i as u64, "source {k} frame {i}");
                let truth = delays[k] + late(k, i as u32) - late(0, i as u32);
                assert!(
                    (p.skew_s - truth).abs() < 1e-9,
                    "source {k} frame {i}: {p:?}"
                );
            }
        }
    }

    /// Two sources almost a period apart: each frame goes with the other's nearest (the next),
    /// not with the one a period before it.
    #[test]
    fn a_source_almost_a_period_late_goes_with_the_next_frames() {
        let placed = place_all(
            &[Some(60.0), Some(60.0)],
            &[times(60.0, 0.0, 0..10), times(60.0, 0.016, 0..10)],
        );
        for i in 0..9 {
            assert_eq!(placed[1][i].set, placed[0][i + 1].set, "frame {i}");
            assert!((placed[0][i + 1].skew_s - (1.0 / 60.0 - 0.016)).abs() < 1e-9);
        }
    }

    /// A set spans at most a period: a frame within half a period of the set's last frame but
    /// further than a period from its first starts a set of its own.
    #[test]
    fn a_set_spans_at_most_one_period() {
        let placed = place_all(
            &[Some(60.0); 4],
            &[vec![0.0], vec![0.008], vec![0.016], vec![0.017]],
        );
        let sets: Vec<u64> = placed.iter().map(|p| p[0].set).collect();
        assert_eq!(sets, [0, 0, 0, 1]);
    }

    #[test]
    fn a_source_that_stalls_is_missing_from_the_sets_meanwhile_and_comes_back() {
        let mut stalled = times(60.0, 0.001, 0..10);
        stalled.extend(times(60.0, 0.001, 30..40));
        let placed = place_all(
            &[Some(60.0), Some(60.0)],
            &[times(60.0, 0.0, 0..40), stalled],
        );
        let sets: Vec<u64> = placed[1].iter().map(|p| p.set).collect();
        let expected: Vec<u64> = (0..10).chain(30..40).collect();
        assert_eq!(sets, expected);
        assert!(placed[1].iter().all(|p| (p.skew_s - 0.001).abs() < 1e-9));
    }

    #[test]
    fn after_a_source_ends_the_sets_hold_the_others_alone() {
        let placed = place_all(
            &[Some(60.0), Some(60.0), Some(60.0)],
            &[
                times(60.0, 0.0, 0..20),
                times(60.0, 0.003, 0..5),
                times(60.0, -0.002, 0..20),
            ],
        );
        // Source 2 runs 2 ms early: it starts each set, the others join it.
        assert_eq!((placed[0].len(), placed[2].len()), (20, 20));
        for (i, (on_time, early)) in placed[0].iter().zip(&placed[2]).enumerate() {
            assert_eq!(early.set, i as u64);
            assert_eq!(on_time.set, i as u64);
            assert!((on_time.skew_s - 0.002).abs() < 1e-9);
        }
        assert_eq!(placed[1].len(), 5);
        assert!((placed[1][4].skew_s - 0.005).abs() < 1e-9);
    }

    #[test]
    fn two_frames_of_one_source_never_share_a_set() {
        // A source with frames closer than the tolerance (a burst): each its own set.
        let placed = place_all(&[Some(30.0)], &[vec![0.0, 0.001, 0.002]]);
        let sets: Vec<u64> = placed[0].iter().map(|p| p.set).collect();
        assert_eq!(sets, [0, 1, 2]);
    }

    #[test]
    fn unknown_rates_take_the_default() {
        let sets = FrameSets::new(&[None, Some(f64::NAN), Some(0.0)]);
        assert!((sets.tolerance_s() - 0.5 / DEFAULT_RATE).abs() < 1e-12);
        let sets = FrameSets::new(&[None, Some(120.0)]);
        assert!((sets.tolerance_s() - 0.5 / 120.0).abs() < 1e-12);
    }
}
