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

/// Frames of many points are scored on rayon's pool: the counts equal one thread's, on a
/// crowd where tracks compete for truth points, switch and vanish, with truth IDs in the table
/// and in the map.
#[test]
fn scores_on_the_pool_equal_one_threads() {
    let mut rng = rand_mt::Mt64::new(11);
    let mut next = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let n = 30_000;
    let mut at: Vec<(f64, f64)> = (0..n).map(|_| (next() * 800.0, next() * 600.0)).collect();
    let mut frames: Vec<(Vec<TruthPoint>, Vec<TrackPoint>)> = Vec::new();
    for f in 0..12u64 {
        let (mut truth, mut tracks) = (Vec::new(), Vec::new());
        for (i, p) in at.iter_mut().enumerate() {
            p.0 += next() - 0.5;
            p.1 += next() - 0.5;
            if next() < 0.95 {
                // Every tenth ID above the table's range.
                let id = if i % 10 == 0 {
                    u64::MAX - i as u64
                } else {
                    i as u64
                };
                truth.push(TruthPoint { id, x: p.0, y: p.1 });
            }
            if next() < 0.6 {
                let switched = next() < 0.1;
                let track = if switched {
                    1_000_000 * (f + 1) + i as u64
                } else {
                    i as u64
                };
                let x = p.0 + next() - 0.5;
                tracks.push(TrackPoint { track, x, y: p.1 });
            }
        }
        frames.push((truth, tracks));
    }
    let score = || {
        let mut s = MotScorer::new(1.5);
        frames
            .iter()
            .for_each(|(truth, tracks)| s.add_frame(truth, tracks));
        s.counts()
    };
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(score);
    let four = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .unwrap()
        .install(score);
    assert_eq!(one, four);
    assert!(
        one.id_switches > 1000 && one.misses > 10_000 && one.false_positives > 1000,
        "{one}"
    );
}
