//! The MOT scorer the accuracy tests count with.

use crate::track::score::{MotScorer, TrackPoint, TruthPoint};

#[test]
fn scorer_counts_switches_misses_fragmentations_and_false_positives() {
    let t = |id, x| TruthPoint { id, x, y: 0.0 };
    let h = |track, x| TrackPoint { track, x, y: 0.0 };
    let mut s = MotScorer::new(1.0);
    // Frame 0: both matched.
    s.add_frame(&[t(1, 0.0), t(2, 10.0)], &[h(7, 0.1), h(8, 10.0)]);
    // Frame 1: truth 1 missed, one far false positive.
    s.add_frame(&[t(1, 0.0), t(2, 10.0)], &[h(8, 10.0), h(9, 50.0)]);
    // Frame 2: truth 1 back under a new track (switch + fragmentation); truth 2 invisible.
    s.add_frame(&[t(1, 0.0)], &[h(11, 0.5)]);
    // Frame 3: truth 2 back with its old track: neither a switch nor a fragmentation.
    s.add_frame(&[t(1, 0.0), t(2, 10.0)], &[h(11, 0.0), h(8, 10.0)]);
    let c = s.counts();
    assert_eq!(
        (c.frames, c.truth, c.matches, c.misses, c.false_positives),
        (4, 7, 6, 1, 1)
    );
    assert_eq!((c.id_switches, c.fragmentations), (1, 1));
    assert!((c.mota() - (1.0 - 3.0 / 7.0)).abs() < 1e-12);
    assert!((c.motp() - 0.1).abs() < 1e-12);
}

#[test]
fn scorer_keeps_a_correspondence_when_another_track_comes_closer() {
    let mut s = MotScorer::new(2.0);
    let t = [TruthPoint {
        id: 1,
        x: 0.0,
        y: 0.0,
    }];
    s.add_frame(
        &t,
        &[TrackPoint {
            track: 5,
            x: 1.0,
            y: 0.0,
        }],
    );
    // Track 6 is nearer now, but 5 is still within the distance: no switch (CLEAR MOT).
    s.add_frame(
        &t,
        &[
            TrackPoint {
                track: 6,
                x: 0.1,
                y: 0.0,
            },
            TrackPoint {
                track: 5,
                x: 1.5,
                y: 0.0,
            },
        ],
    );
    let c = s.counts();
    assert_eq!((c.id_switches, c.false_positives, c.matches), (0, 1, 2));
}
