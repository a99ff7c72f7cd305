//! How tracks start and end (a jump back, misses, clutter), the settings' checks, the
//! summaries and the trajectory tails.

use super::scenes::*;
use crate::track::*;
use rand_mt::Mt64;

#[test]
fn a_jump_back_in_frames_ends_every_track() {
    let mut tracker = Tracker::new(TrackerConfig::default()).unwrap();
    let d = [Detection::point(1.0, 1.0, 1.0)];
    let a = tracker.update(10, &d)[0];
    let b = tracker.update(3, &d)[0];
    assert_ne!(a, b);
    assert_eq!(tracker.finished().len(), 1);
}

#[test]
fn bad_settings_are_rejected_with_the_reason() {
    assert!(TrackerConfig::default().validate().is_ok());
    for cfg in [
        TrackerConfig {
            gate_px: 0.0,
            ..TrackerConfig::default()
        },
        TrackerConfig {
            velocity_smoothing: 1.5,
            ..TrackerConfig::default()
        },
        TrackerConfig {
            size_weight: f64::NAN,
            ..TrackerConfig::default()
        },
    ] {
        let err = Tracker::new(cfg).err().expect("rejected").to_string();
        assert!(err.contains("tracker settings"), "{err}");
    }
}

#[test]
fn summary_builder_agrees_with_the_tracker() {
    let scene = hard_scene(60, 80, 8);
    let mut tracker = Tracker::new(TrackerConfig::default()).unwrap();
    let mut builder = SummaryBuilder::new();
    let mut rng = Mt64::new(4);
    // Each side's summaries of the tracks as they end, then of those still running.
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for (f, truth) in scene.iter().enumerate() {
        let mut dets: Vec<Detection> = truth
            .iter()
            .map(|t| Detection::point(t.x, t.y, uniform(&mut rng, 10.0, 90.0)))
            .collect();
        // A few one-frame noise blobs beside the scene: tracks that end.
        dets.extend((0..3).map(|_| {
            let (x, y) = (
                uniform(&mut rng, 700.0, 900.0),
                uniform(&mut rng, 0.0, 480.0),
            );
            Detection::point(x, y, 5.0)
        }));
        let ids = tracker.update(f as u64, &dets);
        builder.add_frame(f as u64, &dets, &ids);
        let ended: Vec<TrackSummary> = tracker.drain_finished().collect();
        let ended_ids: Vec<u64> = ended.iter().map(|s| s.id).collect();
        builder.end_tracks(&ended_ids, &mut b);
        a.extend(ended);
        assert_eq!(builder.len(), tracker.active().len(), "frame {f}");
    }
    assert!(a.len() > 100, "noise ends tracks: {}", a.len());
    a.extend(tracker.summaries());
    b.extend(builder.summaries());
    a.sort_by_key(|s| s.id);
    b.sort_by_key(|s| s.id);
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(
            (x.id, x.first_frame, x.last_frame, x.length),
            (y.id, y.first_frame, y.last_frame, y.length)
        );
        assert!(
            (x.mean_area - y.mean_area).abs() < 1e-9 * x.mean_area,
            "{x:?} {y:?}"
        );
        assert!((x.path_length - y.path_length).abs() < 1e-9 * (1.0 + x.path_length));
        assert_eq!((x.last_x, x.last_y), (y.last_x, y.last_y));
    }
}

/// Clutter starts thousands of short tracks a frame. Told which tracks end, the builder holds
/// exactly the tracks still alive, a small fraction of all it has seen.
#[test]
fn summary_builder_holds_only_tracks_not_yet_ended() {
    let mut tracker = Tracker::default();
    let mut builder = SummaryBuilder::new();
    let mut rng = Mt64::new(11);
    let (mut written, mut most) = (Vec::new(), 0);
    for f in 0..150u64 {
        // 3,000 blobs in one of four bands 500 px apart in turn: none is near a blob of the
        // frame before, so every blob starts a track that ends three frames later.
        let x0 = (f % 4) as f64 * 500.0;
        let dets: Vec<Detection> = (0..3_000)
            .map(|_| {
                let (x, y) = (
                    uniform(&mut rng, x0, x0 + 400.0),
                    uniform(&mut rng, 0.0, 1080.0),
                );
                Detection::point(x, y, uniform(&mut rng, 1.0, 20.0))
            })
            .collect();
        let ids = tracker.update(f, &dets);
        builder.add_frame(f, &dets, &ids);
        let ended: Vec<u64> = tracker.drain_finished().map(|s| s.id).collect();
        builder.end_tracks(&ended, &mut written);
        assert_eq!(builder.len(), tracker.active().len(), "frame {f}");
        most = most.max(builder.len());
    }
    let all = written.len() + builder.len();
    assert_eq!(all, 450_000, "every track, once");
    assert!(written.iter().all(|s| s.length == 1));
    assert!(most <= 9_000, "held at most {most} of {all} tracks");
}

#[test]
fn only_confirmed_tracks_keep_a_tail() {
    let cfg = TrackerConfig {
        tail_len: 4,
        ..TrackerConfig::default()
    };
    let mut tracker = Tracker::new(cfg).unwrap();
    for f in 0..7u64 {
        let x = 10.0 + 2.0 * f as f64;
        tracker.update(f, &[Detection::point(x, 10.0, 5.0)]);
        let t = &tracker.active()[0];
        let tail: Vec<(u64, f64)> = tracker.tail(t).map(|p| (p.frame, p.x)).collect();
        // Confirmed at its second detection; the tail holds the last 4 since.
        let expected: Vec<(u64, f64)> = (f.saturating_sub(3).max(1)..=f)
            .map(|g| (g, 10.0 + 2.0 * g as f64))
            .collect();
        assert_eq!((t.confirmed, tail), (f > 0, expected), "frame {f}");
    }
    // Dense clutter confirms nothing: no tail storage at all, however many tracks.
    let mut tracker = Tracker::new(cfg).unwrap();
    let mut rng = Mt64::new(2);
    for f in 0..5u64 {
        let dets: Vec<Detection> = (0..40_000)
            .map(|_| {
                let (x, y) = (
                    uniform(&mut rng, 0.0, 1920.0),
                    uniform(&mut rng, 0.0, 1080.0),
                );
                Detection::point(x, y, 4.0)
            })
            .collect();
        tracker.update(f, &dets);
    }
    assert!(tracker.active().len() > 40_000);
    assert_eq!(tracker.tails.rings(), (0, 0));
    // A ring goes back when its track ends, and the next confirmed track takes it.
    let mut tracker = Tracker::new(cfg).unwrap();
    for f in 0..3u64 {
        tracker.update(f, &[Detection::point(10.0, 10.0, 5.0)]);
    }
    assert_eq!(tracker.tails.rings(), (1, 0));
    for f in 3..40u64 {
        tracker.update(f, &[]);
    }
    assert!(tracker.active().is_empty());
    assert_eq!(tracker.tails.rings(), (0, 1));
    for f in 40..42u64 {
        tracker.update(f, &[Detection::point(50.0, 50.0, 5.0)]);
    }
    assert_eq!(tracker.tails.rings(), (1, 0));
}

#[test]
fn a_track_seen_once_ends_after_the_tentative_miss_limit() {
    let cfg = TrackerConfig {
        tentative_max_missed: 2,
        ..TrackerConfig::default()
    };
    let mut tracker = Tracker::new(cfg).unwrap();
    let a = tracker.update(0, &[Detection::point(10.0, 10.0, 5.0)])[0];
    tracker.update(1, &[]);
    tracker.update(2, &[]);
    assert_eq!(tracker.active().len(), 1, "missed twice: still tentative");
    tracker.update(3, &[]);
    assert_eq!(tracker.active().len(), 0, "missed a third time: ended");
    let s = tracker.summaries();
    assert_eq!((s[0].id, s[0].length), (a, 1));
    // Within the limit, the blob is taken back by its track.
    let b = tracker.update(4, &[Detection::point(50.0, 50.0, 5.0)])[0];
    tracker.update(5, &[]);
    assert_eq!(
        tracker.update(6, &[Detection::point(51.0, 50.0, 5.0)])[0],
        b
    );
}

#[test]
fn a_missed_gate_widens_only_as_far_as_the_density_allows() {
    // A track missed for 8 frames has a 20 + 3·8 = 44 px gate; its marker comes back 35 px
    // from the prediction. Alone in the frame it is taken back; beside a dense field of noise
    // (4,000 blobs: 16 candidates fit in a ~26 px circle there) the gate stops at ~26 px.
    for (noise, taken_back) in [(0usize, true), (4_000, false)] {
        let mut tracker = Tracker::new(TrackerConfig::default()).unwrap();
        let a = tracker.update(0, &[Detection::point(100.0, 100.0, 10.0)])[0];
        assert_eq!(
            tracker.update(1, &[Detection::point(100.0, 100.0, 10.0)])[0],
            a
        );
        for f in 2..10 {
            tracker.update(f, &[]);
        }
        let mut rng = Mt64::new(3);
        let mut dets = vec![Detection::point(135.0, 100.0, 10.0)];
        dets.extend((0..noise).map(|_| {
            let (x, y) = (
                uniform(&mut rng, 1000.0, 1400.0),
                uniform(&mut rng, 0.0, 400.0),
            );
            Detection::point(x, y, 10.0)
        }));
        let ids = tracker.update(10, &dets);
        assert_eq!(ids[0] == a, taken_back, "{noise} noise blobs");
    }
}

#[test]
fn tracks_born_in_clutter_end_soon_after_it() {
    // Like the papers' random images: 5 frames of dense noise (40,000 fresh blobs, more than
    // 16 within a 20 px gate), then 15 frames of sparse noise (400 fresh blobs). No track is
    // confirmed in clutter, so the clutter's tracks end `tentative_max_missed` frames after
    // it, except the few that took a sparse blob (at most one a blob and frame).
    let cfg = TrackerConfig::default();
    let mut tracker = Tracker::new(cfg).unwrap();
    let mut rng = Mt64::new(7);
    const DENSE: usize = 40_000;
    const SPARSE: usize = 400;
    for f in 0..20u64 {
        let n = if f < 5 { DENSE } else { SPARSE };
        let dets: Vec<Detection> = (0..n)
            .map(|_| {
                let (x, y) = (
                    uniform(&mut rng, 0.0, 1920.0),
                    uniform(&mut rng, 0.0, 1080.0),
                );
                Detection::point(x, y, uniform(&mut rng, 1.0, 20.0))
            })
            .collect();
        tracker.update(f, &dets);
        if f == 4 {
            assert!(tracker.active().iter().all(|t| !t.confirmed));
        }
    }
    let from_clutter = tracker
        .active()
        .iter()
        .filter(|t| t.first_frame < 5)
        .count();
    let most = (cfg.tentative_max_missed as usize + 1) * SPARSE;
    assert!(
        from_clutter <= most,
        "{from_clutter} tracks from the clutter still active, more than {most}"
    );
}

/// Without velocity prediction a track searches around its last position: a point that
/// drifts 6 px a frame stays in a 4 px gate only with prediction, and one that steps back and
/// forth (Brownian-like) only without it.
#[test]
fn without_prediction_the_gate_stays_on_the_last_position() {
    let ids = |predict_velocity: bool, xs: &[f64]| {
        let cfg = TrackerConfig {
            gate_px: 4.0,
            gate_growth_px: 0.0,
            predict_velocity,
            ..TrackerConfig::default()
        };
        let mut tracker = Tracker::new(cfg).unwrap();
        let ids: Vec<u64> = xs
            .iter()
            .enumerate()
            .map(|(f, &x)| tracker.update(f as u64, &[Detection::point(x, 10.0, 1.0)])[0])
            .collect();
        ids.iter().collect::<std::collections::BTreeSet<_>>().len()
    };
    let drift = [0.0, 3.0, 9.0, 15.0, 21.0, 27.0];
    let jitter = [0.0, 3.0, 0.0, 3.0, 0.0, 3.0];
    assert_eq!(ids(true, &drift), 1);
    assert!(ids(false, &drift) > 1);
    assert_eq!(ids(false, &jitter), 1);
    assert!(ids(true, &jitter) > 1);
}

/// A frame that starts more tracks than the track vector has room for, and ends none, writes
/// them into the spare vector when that has room (the two swap roles as tracks end), so the
/// tracker's record storage stays as large as the most tracks it held, not twice that.
#[test]
fn new_tracks_reuse_the_storage_of_ended_ones() {
    let mut tracker = Tracker::new(TrackerConfig::pipeline()).unwrap();
    const N: usize = 5_000;
    // Points 50 px apart: every one starts a track of its own.
    let field: Vec<Detection> = (0..N)
        .map(|i| Detection::point((i % 100) as f64 * 50.0, (i / 100) as f64 * 50.0, 4.0))
        .collect();
    let storage = |t: &Tracker| t.tracks.capacity() + t.spare.capacity();
    tracker.update(0, &field);
    let held = storage(&tracker);
    assert!(held >= N);
    // Tentative tracks missed 3 frames end, all at once: the spare takes the (no) survivors.
    for f in 1..=3 {
        tracker.update(f, &[]);
    }
    assert!(tracker.active().is_empty());
    // As many new tracks again, none ending.
    let ids = tracker.update(4, &field);
    assert_eq!(tracker.active().len(), N);
    assert!(ids.iter().all(|&id| id > N as u64), "new tracks, new IDs");
    assert_eq!(
        storage(&tracker),
        held,
        "the new tracks went into new memory beside the spare"
    );
}

#[test]
fn detections_made_on_the_pool_equal_those_made_on_one_thread() {
    use crate::ccl::stats::ComponentStats;
    use crate::ccl::subpixel::SubpixelCentroid;
    let n = 3 * assign::PARALLEL_MIN_DETECTIONS + 7;
    let stats: Vec<ComponentStats> = (0..n as u32)
        .map(|k| ComponentStats {
            label: k + 1,
            left: k % 1000,
            top: k / 1000,
            width: 1 + k % 3,
            height: 1 + k % 5,
            area: 1 + u64::from(k % 7),
            sum_x: u64::from(k),
            sum_y: u64::from(2 * k),
            centroid_x: f64::from(k) + 0.25,
            centroid_y: f64::from(k) * 0.5,
        })
        .collect();
    let subpixel: Vec<SubpixelCentroid> = (0..n as u32)
        .map(|k| SubpixelCentroid::from_sums(k + 1, 4, u64::from(k) * 3, u64::from(k) * 5))
        .collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    for centroids in [&subpixel[..], &[][..]] {
        let alone = Detection::from_rows(&stats, centroids);
        let pooled = pool.install(|| Detection::from_rows(&stats, centroids));
        assert_eq!(alone.len(), n);
        assert_eq!(alone, pooled);
    }
}

/// A frame without detections skips the pairing (`Tracker::associate`): every track must come
/// out of it as out of a frame whose one detection is far from every track (missed, no longer
/// merged, the same ones ended), on one thread and on the pool.
#[test]
fn a_frame_without_detections_misses_every_track_as_one_with_nothing_near_them() {
    let far = Detection::point(1e7, 1e7, 1.0);
    let scenes = [
        ("crossing markers", crossing_markers()),
        ("drifting clutter", drifting_clutter(3000, 16, 5)),
    ];
    let mut merged_tracks = 0;
    for (name, frames) in scenes {
        for on_pool in [false, true] {
            for empty in (2..frames.len()).step_by(3) {
                let tracker = || {
                    let mut t = Tracker::new(TrackerConfig::default()).unwrap();
                    t.set_on_pool(on_pool);
                    t
                };
                let (mut a, mut b) = (tracker(), tracker());
                for (f, dets) in frames[..empty].iter().enumerate() {
                    assert_eq!(a.update(f as u64, dets), b.update(f as u64, dets));
                }
                merged_tracks += a.active().iter().filter(|t| t.merged).count();
                a.update(empty as u64, &[]);
                b.update(empty as u64, &[far]);
                // `b` started one track far away; every other track is the same in both.
                let near = |t: &Tracker| -> Vec<String> {
                    (t.active().iter())
                        .filter(|t| t.x < 1e6)
                        .map(|t| format!("{t:?}"))
                        .collect()
                };
                let at = format!("{name}, frame {empty}, pool {on_pool}");
                assert_eq!(near(&a), near(&b), "{at}");
                assert_eq!(a.active().len() + 1, b.active().len(), "{at}");
                let ended =
                    |t: &Tracker| -> Vec<u64> { t.finished().iter().map(|s| s.id).collect() };
                assert_eq!(ended(&a), ended(&b), "{at}");
                assert!(a.active().iter().all(|t| !t.merged), "{at}");
            }
        }
    }
    assert!(merged_tracks > 0, "no merged track before an empty frame");
}

#[test]
fn a_light_frame_is_said_to_need_no_pool_and_a_heavy_one_is() {
    let mut tracker = Tracker::new(TrackerConfig::pipeline()).unwrap();
    assert!(!tracker.would_use_pool(0));
    assert!(!tracker.would_use_pool(assign::PARALLEL_MIN_DETECTIONS - 1));
    assert!(tracker.would_use_pool(assign::PARALLEL_MIN_DETECTIONS));
    // From PARALLEL_MIN tracks on, even an empty frame's tracks go to the pool.
    let grid = |n: usize| -> Vec<Detection> {
        (0..n)
            .map(|k| Detection::point((k % 100) as f64 * 20.0, (k / 100) as f64 * 20.0, 5.0))
            .collect()
    };
    tracker.update(0, &grid(assign::PARALLEL_MIN - 1));
    assert!(!tracker.would_use_pool(0));
    tracker.update(1, &grid(assign::PARALLEL_MIN));
    assert_eq!(tracker.active().len(), assign::PARALLEL_MIN);
    assert!(tracker.would_use_pool(0));
}
