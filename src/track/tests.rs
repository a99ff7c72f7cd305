use super::score::{MotCounts, MotScorer, TrackPoint, TruthPoint};
use super::*;
use crate::ccl::cpu::lsl::Lsl;
use crate::ccl::subpixel::weighted_centroids;
use crate::ccl::{Connectivity, Labeler, Want};
use crate::frame::image::GrayImage;
use crate::frame::render::{draw, Shape};
use crate::threshold::apply;
use crate::threshold::levels::ThresholdLevels;
use crate::threshold::spec::ThresholdSpec;
use rand_mt::Mt64;

fn uniform(rng: &mut Mt64, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// Approximately normal (sum of 4 uniforms) with standard deviation `sigma`.
fn gauss(rng: &mut Mt64, sigma: f64) -> f64 {
    let s: f64 = (0..4).map(|_| uniform(rng, -0.5, 0.5)).sum();
    s * sigma * 3f64.sqrt()
}

/// The "standard" sequence on a 640×480 frame: visible truth markers per frame.
/// - 5 lane markers sweep left and right (sinusoids, up to ~6 px/frame); every other one is
///   hidden for 3 frames (a brief occlusion, within the default `max_missed`);
/// - 4 pairs of markers cross on perpendicular diagonals at 4.2 px/frame, 5 frames apart
///   (closest approach ~15 px, so rendered discs of radius 5 never touch).
fn standard_scene(frames: u64) -> Vec<Vec<TruthPoint>> {
    (0..frames)
        .map(|t| {
            let tf = t as f64;
            let mut v = Vec::new();
            for i in 0..5u64 {
                let occluded = i % 2 == 0 && (40 + 7 * i..43 + 7 * i).contains(&t);
                if !occluded {
                    let fi = i as f64;
                    v.push(TruthPoint {
                        id: 1 + i,
                        x: 320.0 + 250.0 * (0.02 * tf * (1.0 + 0.1 * fi) + fi).sin(),
                        y: 40.0 + 40.0 * fi,
                    });
                }
            }
            for k in 0..4u64 {
                let (cx, cy) = (100.0 + 140.0 * k as f64, 360.0);
                let tk = 30.0 + 25.0 * k as f64;
                for (j, (vx, delay)) in [(3.0, 0.0), (-3.0, 5.0)].into_iter().enumerate() {
                    let s = tf - tk - delay;
                    if s.abs() <= 30.0 {
                        v.push(TruthPoint {
                            id: 100 + 2 * k + j as u64,
                            x: cx + vx * s,
                            y: cy + 3.0 * s,
                        });
                    }
                }
            }
            v
        })
        .collect()
}

/// The harder sequence: `n` markers with random accelerations (σ 0.6 px/frame²) bouncing in a 640×480 box,
/// random occlusions of 2-10 frames, frequent close crossings.
fn hard_scene(n: usize, frames: u64, seed: u64) -> Vec<Vec<TruthPoint>> {
    let mut rng = Mt64::new(seed);
    let mut m: Vec<(f64, f64, f64, f64, u64)> = (0..n)
        .map(|_| {
            let a = uniform(&mut rng, 0.0, std::f64::consts::TAU);
            let s = uniform(&mut rng, 1.0, 6.0);
            (
                uniform(&mut rng, 10.0, 630.0),
                uniform(&mut rng, 10.0, 470.0),
                s * a.cos(),
                s * a.sin(),
                0,
            )
        })
        .collect();
    (0..frames)
        .map(|_| {
            let mut v = Vec::new();
            for (i, p) in m.iter_mut().enumerate() {
                // Damped random acceleration: speeds stay around 2-3 px/frame.
                p.2 = 0.95 * p.2 + gauss(&mut rng, 0.6);
                p.3 = 0.95 * p.3 + gauss(&mut rng, 0.6);
                p.0 += p.2;
                p.1 += p.3;
                if !(0.0..640.0).contains(&p.0) {
                    p.2 = -p.2;
                    p.0 = p.0.clamp(0.0, 639.0);
                }
                if !(0.0..480.0).contains(&p.1) {
                    p.3 = -p.3;
                    p.1 = p.1.clamp(0.0, 479.0);
                }
                if p.4 == 0 && uniform(&mut rng, 0.0, 1.0) < 0.01 {
                    p.4 = 2 + rng.next_u64() % 9;
                }
                if p.4 > 0 {
                    p.4 -= 1;
                    continue;
                }
                v.push(TruthPoint {
                    id: i as u64 + 1,
                    x: p.0,
                    y: p.1,
                });
            }
            v
        })
        .collect()
}

/// Tracks detections that are the truth plus noise, and scores the result.
fn track_and_score(
    scene: &[Vec<TruthPoint>],
    noise: f64,
    config: TrackerConfig,
    max_distance: f64,
) -> (MotCounts, Tracker) {
    let mut rng = Mt64::new(99);
    let mut tracker = Tracker::new(config).unwrap();
    let mut scorer = MotScorer::new(max_distance);
    for (f, truth) in scene.iter().enumerate() {
        let dets: Vec<Detection> = truth
            .iter()
            .map(|t| {
                let (x, y) = (t.x + gauss(&mut rng, noise), t.y + gauss(&mut rng, noise));
                Detection::point(x, y, 80.0)
            })
            .collect();
        let ids = tracker.update(f as u64, &dets);
        let points: Vec<TrackPoint> = dets
            .iter()
            .zip(&ids)
            .map(|(d, &track)| TrackPoint {
                track,
                x: d.x,
                y: d.y,
            })
            .collect();
        scorer.add_frame(truth, &points);
    }
    (scorer.counts(), tracker)
}

#[test]
fn standard_sequence_has_no_id_switches() {
    let scene = standard_scene(200);
    let (c, tracker) = track_and_score(&scene, 0.05, TrackerConfig::default(), 3.0);
    println!("standard sequence (detections = truth + 0.05 px noise): {c}");
    assert_eq!(c.id_switches, 0, "{c}");
    assert_eq!(c.fragmentations, 0, "{c}");
    assert_eq!((c.misses, c.false_positives), (0, 0), "{c}");
    // One track per truth marker: the occluded lane markers kept their IDs.
    let truth_ids: std::collections::HashSet<u64> = scene.iter().flatten().map(|t| t.id).collect();
    assert_eq!(tracker.summaries().len(), truth_ids.len());
}

#[test]
fn standard_sequence_rendered_labeled_and_tracked() {
    let scene = standard_scene(200);
    // The scene keeps rendered discs apart (radius 5): every pair ≥ 13 px apart.
    for truth in &scene {
        for (i, a) in truth.iter().enumerate() {
            for b in &truth[i + 1..] {
                assert!(
                    (a.x - b.x).hypot(a.y - b.y) >= 13.0,
                    "{a:?} and {b:?} touch"
                );
            }
        }
    }
    let spec = ThresholdSpec::Fixed(60);
    let mut lsl = Lsl::new();
    let mut tracker = Tracker::new(TrackerConfig::default()).unwrap();
    let mut scorer = MotScorer::new(1.0);
    for (f, truth) in scene.iter().enumerate() {
        let mut img = GrayImage::filled(640, 480, 20).unwrap();
        for t in truth {
            let disc = Shape::Disc {
                cx: t.x,
                cy: t.y,
                radius: 5.0,
            };
            draw(&mut img, &disc, 200);
        }
        let mask = apply(&img, &spec, false).unwrap();
        let out = lsl.label(&mask, Connectivity::Eight, Want::Both).unwrap();
        let (stats, labels) = (out.stats.unwrap(), out.labels.unwrap());
        let levels = ThresholdLevels::compute(&img, &spec, false).unwrap();
        let sub = weighted_centroids(&img, &labels, &stats, &levels, false).unwrap();
        let dets: Vec<Detection> = stats
            .iter()
            .zip(&sub)
            .map(|(s, c)| Detection::from_subpixel(s, c))
            .collect();
        let ids = tracker.update(f as u64, &dets);
        let points: Vec<TrackPoint> = dets
            .iter()
            .zip(&ids)
            .map(|(d, &track)| TrackPoint {
                track,
                x: d.x,
                y: d.y,
            })
            .collect();
        scorer.add_frame(truth, &points);
    }
    let c = scorer.counts();
    println!("standard sequence, rendered + lsl + sub-pixel centroids: {c}");
    assert_eq!(c.id_switches, 0, "{c}");
    assert_eq!(c.fragmentations, 0, "{c}");
    assert_eq!((c.misses, c.false_positives), (0, 0), "{c}");
    assert!(c.motp() < 0.1, "{c}");
}

#[test]
fn harder_sequence_reports_switches_and_fragmentations() {
    let scene = hard_scene(300, 200, 5);
    let (c, _) = track_and_score(&scene, 0.3, TrackerConfig::default(), 5.0);
    println!("harder sequence (300 markers, random acceleration σ 0.6 px/frame², occlusions 2-10 frames): {c}");
    assert_eq!(c.matches + c.misses, c.truth);
    // Dense crossings with random accelerations cause some switches and broken tracks: the
    // scorer has to see them.
    assert!(c.fragmentations > 0 && c.id_switches > 0, "{c}");
    assert!(c.mota() > 0.9, "{c}");
    // A 3 px gate cannot follow the accelerating markers: the scorer sees more breaks.
    let tight = TrackerConfig {
        gate_px: 3.0,
        gate_growth_px: 0.0,
        ..TrackerConfig::default()
    };
    let (ct, _) = track_and_score(&scene, 0.3, tight, 5.0);
    println!("harder sequence, 3 px gate: {ct}");
    assert!(ct.id_switches + ct.fragmentations > c.id_switches + c.fragmentations);
}

#[test]
fn occlusion_longer_than_max_missed_starts_a_new_track() {
    let cfg = TrackerConfig {
        max_missed: 2,
        ..TrackerConfig::default()
    };
    let mut tracker = Tracker::new(cfg).unwrap();
    let det = |x: f64| Detection::point(x, 50.0, 10.0);
    let a = tracker.update(0, &[det(10.0)])[0];
    assert_eq!(tracker.update(1, &[det(12.0)])[0], a);
    // Missed at 2 and 3, back at 4 where the prediction is 12 + 3·2 = 18.
    tracker.update(2, &[]);
    tracker.update(3, &[]);
    assert_eq!(tracker.update(4, &[det(18.5)])[0], a);
    // Missed at 5, 6, 7 (> max_missed): ended; a detection at 8 starts a new track.
    for f in 5..8 {
        tracker.update(f, &[]);
    }
    assert_eq!(tracker.active().len(), 0);
    let b = tracker.update(8, &[det(26.0)])[0];
    assert_ne!(a, b);
    let s = tracker.summaries();
    assert_eq!(s.len(), 2);
    assert_eq!(
        (s[0].id, s[0].first_frame, s[0].last_frame, s[0].length),
        (a, 0, 4, 3)
    );
    assert!((s[0].path_length - 8.5).abs() < 1e-12);
    assert_eq!(s[0].mean_area, 10.0);
}

#[test]
fn crossing_markers_keep_their_ids_thanks_to_the_prediction() {
    // Two markers cross head-on at x = 50 on the same row 1 px apart: nearest neighbour
    // without prediction would swap them at the crossing.
    let mut tracker = Tracker::new(TrackerConfig::default()).unwrap();
    let mut first = None;
    for f in 0..20u64 {
        let s = f as f64 * 5.0;
        let dets = [
            Detection::point(s, 50.0, 10.0),
            Detection::point(95.0 - s, 51.0, 10.0),
        ];
        let ids = tracker.update(f, &dets);
        let ids = (ids[0], ids[1]);
        assert_eq!(*first.get_or_insert(ids), ids, "frame {f}");
    }
}

#[test]
fn size_term_prefers_the_detection_of_similar_area() {
    let det = |x: f64, area: f64| Detection::point(x, 0.0, area);
    for (size_weight, expect_big) in [(0.0, false), (1.0, true)] {
        let cfg = TrackerConfig {
            size_weight,
            ..TrackerConfig::default()
        };
        let mut tracker = Tracker::new(cfg).unwrap();
        let id = tracker.update(0, &[det(0.0, 100.0)])[0];
        // The small blob is nearer; the big one (same area as the track) a little farther.
        let ids = tracker.update(1, &[det(2.0, 10.0), det(-3.0, 100.0)]);
        assert_eq!(
            ids[1] == id,
            expect_big,
            "size weight {size_weight}: {ids:?}"
        );
    }
}

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

/// The assignment (grid candidates, mutual-best pairs first, then the sorted remainder) equals
/// a brute-force greedy over every (track, detection) pair, on dense scenes full of conflicts:
/// with no limit on candidates, and with the default limit (each track's gate cut to the
/// frame's density, its cheapest `max_candidates` pairs kept).
#[test]
fn assignment_equals_brute_force_greedy() {
    for max_candidates in [u32::MAX, TrackerConfig::default().max_candidates] {
        assignment_equals_brute_force_greedy_with(max_candidates);
    }
}

fn assignment_equals_brute_force_greedy_with(max_candidates: u32) {
    let mut rng = Mt64::new(3);
    let cfg = TrackerConfig {
        size_weight: 0.5,
        max_candidates,
        ..TrackerConfig::default()
    };
    let mut tracker = Tracker::new(cfg).unwrap();
    let mut pts: Vec<(f64, f64, f64)> = (0..1500)
        .map(|_| {
            (
                uniform(&mut rng, 0.0, 300.0),
                uniform(&mut rng, 0.0, 300.0),
                uniform(&mut rng, 20.0, 80.0),
            )
        })
        .collect();
    let mut conflicts = 0usize;
    for frame in 0..12u64 {
        let dets: Vec<Detection> = pts
            .iter()
            .filter(|_| uniform(&mut rng, 0.0, 1.0) > 0.1)
            .map(|&(x, y, area)| Detection::point(x, y, area))
            .collect();
        // Brute force on the tracks as they are before the update.
        let dense = dense_radius(cfg.max_candidates, &dets);
        let mut pairs = Vec::new();
        for t in tracker.active() {
            let (px, py) = t.predict(frame);
            let gate = cfg.gate(frame - t.clean_frame).min(dense);
            let mut of_track = Vec::new();
            for (di, d) in dets.iter().enumerate() {
                let d2 = (d.x - px).powi(2) + (d.y - py).powi(2);
                if d2 <= gate * gate {
                    let cost = d2 / (cfg.gate_px * cfg.gate_px)
                        + cfg.size_weight * (d.area / t.area).ln().abs();
                    of_track.push((cost, t.id, di));
                }
            }
            of_track.sort_by(|a, b| a.0.total_cmp(&b.0));
            of_track.truncate(cfg.max_candidates as usize);
            pairs.extend(of_track);
        }
        pairs.sort_by(|a, b| a.0.total_cmp(&b.0).then((a.1, a.2).cmp(&(b.1, b.2))));
        let mut expected = vec![None; dets.len()];
        let mut taken = std::collections::HashSet::new();
        for &(_, id, di) in &pairs {
            if expected[di].is_none() && !taken.contains(&id) {
                expected[di] = Some(id);
                taken.insert(id);
            } else {
                conflicts += 1;
            }
        }
        let known: std::collections::HashSet<u64> = tracker.active().iter().map(|t| t.id).collect();
        let ids = tracker.update(frame, &dets);
        for (di, &id) in ids.iter().enumerate() {
            match expected[di] {
                Some(e) => assert_eq!(id, e, "frame {frame}, detection {di}"),
                None => assert!(
                    !known.contains(&id),
                    "frame {frame}: {di} should start a track"
                ),
            }
        }
        for p in &mut pts {
            p.0 += gauss(&mut rng, 3.0);
            p.1 += gauss(&mut rng, 3.0);
        }
    }
    assert!(
        conflicts > 1000,
        "the scene should be full of conflicts: {conflicts}"
    );
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

/// `n` markers on a jittered lattice at the density of 50,000 in a 1920×1080 frame (6.4 px
/// apart, so every gate is cut to the density and holds `max_candidates`), each circling its
/// own place at 0.2 px a frame (far less than the gate and the spacing): frames of detections
/// in raster order, as a labeler gives them.
fn lattice_scene(n: usize, frames: u64, seed: u64) -> Vec<Vec<Detection>> {
    let scale = (n as f64 / 50_000.0).sqrt();
    let (w, h) = (1920.0 * scale, 1080.0 * scale);
    let cols = ((n as f64 * w / h).sqrt().ceil() as usize).max(1);
    let rows = n.div_ceil(cols);
    let (sx, sy) = (w / cols as f64, h / rows as f64);
    let mut rng = Mt64::new(seed);
    let places: Vec<(f64, f64, f64)> = (0..n)
        .map(|i| {
            let (c, r) = ((i % cols) as f64, (i / cols) as f64);
            (
                (c + 0.5) * sx + uniform(&mut rng, -0.1, 0.1) * sx,
                (r + 0.5) * sy + uniform(&mut rng, -0.1, 0.1) * sy,
                uniform(&mut rng, 0.0, std::f64::consts::TAU),
            )
        })
        .collect();
    (0..frames)
        .map(|f| {
            places
                .iter()
                .map(|&(x, y, phase)| {
                    let a = phase + 0.2 * f as f64;
                    Detection::point(x + a.cos(), y + a.sin(), 20.0)
                })
                .collect()
        })
        .collect()
}

/// CPU time of this thread (s), or wall time where there is no such clock: the scaling test
/// must not count the time the thread waited for a core on a busy machine.
fn thread_time_s() -> f64 {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec through a valid pointer.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0 {
            return ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9;
        }
    }
    use std::sync::OnceLock;
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_secs_f64()
}

/// The tracker's cost grows about linearly with the detections: 10× the detections, at the
/// same density, may cost at most 30× the time per frame. Each track weighs a bounded number
/// of candidates, and every other step is a pass or a sort over tracks, detections or gated
/// pairs, so the ratio is about 10-12. 30 leaves room for what a shared 2-core CI machine adds
/// (caches shared with other tests, the larger frame's data spilling out of them) and still
/// fails a quadratic step, which would make it 100. (At a fixed frame size the ratio would
/// also hold the density's effect: 5,000 markers in 1080p have ~3 detections per gate, 50,000
/// the cap of 16, and each costs ~3× more per track, linearly still.)
///
/// Timed on one thread (a pool of one runs every phase on the calling thread) by its CPU time,
/// so other tests running beside it cannot stretch one size and not the other; the median of
/// several frames after the first two (which only start tracks).
#[test]
fn cost_grows_linearly_and_ids_hold_at_50k_detections() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let frames = 10;
    let per_frame = |n: usize| -> f64 {
        let scene = lattice_scene(n, frames, 21);
        pool.install(|| {
            let mut tracker = Tracker::default();
            let mut first_ids: Vec<u64> = Vec::new();
            let mut times = Vec::new();
            for (f, dets) in scene.iter().enumerate() {
                let start = thread_time_s();
                let ids = tracker.update(f as u64, dets);
                times.push(thread_time_s() - start);
                // Every marker keeps its ID from its first frame on.
                if f == 0 {
                    first_ids = ids;
                } else {
                    let changed = ids.iter().zip(&first_ids).filter(|(a, b)| a != b).count();
                    assert_eq!(changed, 0, "{n} markers, frame {f}: {changed} IDs changed");
                }
            }
            let mut steady = times[2..].to_vec();
            steady.sort_by(f64::total_cmp);
            steady[steady.len() / 2]
        })
    };
    let (small, large) = (per_frame(5_000), per_frame(50_000));
    let ratio = large / small;
    println!(
        "Tracker::update, one thread: 5,000 detections {:.3} ms, 50,000 {:.3} ms: {ratio:.1}×",
        small * 1e3,
        large * 1e3
    );
    assert!(ratio < 30.0, "10× the detections cost {ratio:.1}× the time");
}

/// The chunks of a frame run on several threads with atomics between them; the result is the
/// same as on one, frame by frame (clutter that moves, appears and disappears, with enough
/// tracks for the parallel path).
#[test]
fn parallel_association_equals_sequential() {
    let mut rng = Mt64::new(17);
    let mut blobs: Vec<(f64, f64, f64)> = (0..20_000)
        .map(|_| {
            (
                uniform(&mut rng, 0.0, 1920.0),
                uniform(&mut rng, 0.0, 1080.0),
                uniform(&mut rng, 2.0, 40.0).round(),
            )
        })
        .collect();
    let scene: Vec<Vec<Detection>> = (0..12)
        .map(|_| {
            for b in blobs.iter_mut() {
                if uniform(&mut rng, 0.0, 1.0) < 0.1 {
                    (b.0, b.1) = (
                        uniform(&mut rng, 0.0, 1920.0),
                        uniform(&mut rng, 0.0, 1080.0),
                    );
                } else {
                    b.0 += uniform(&mut rng, -1.0, 1.0);
                    b.1 += uniform(&mut rng, -1.0, 1.0);
                }
            }
            blobs
                .iter()
                .map(|&(x, y, area)| Detection::point(x, y, area))
                .collect()
        })
        .collect();
    let run = |threads: usize| -> Vec<Vec<u64>> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let mut tracker = Tracker::default();
            scene
                .iter()
                .enumerate()
                .map(|(f, dets)| tracker.update(f as u64, dets))
                .collect()
        })
    };
    let (one, four) = (run(1), run(4));
    for (f, (a, b)) in one.iter().zip(&four).enumerate() {
        assert!(a == b, "frame {f} differs");
    }
}

/// Drifting clutter as `track_clutter` makes it: `n` blobs a frame that move ~0.5 px, 10% of
/// them replaced every frame, in raster order.
fn drifting_clutter(n: usize, frames: usize, seed: u64) -> Vec<Vec<Detection>> {
    let (w, h) = (1920.0, 1080.0);
    let mut rng = Mt64::new(seed);
    let mut blobs: Vec<(f64, f64, f64)> = Vec::new();
    (0..frames)
        .map(|_| {
            for b in blobs.iter_mut() {
                if uniform(&mut rng, 0.0, 1.0) < 0.1 {
                    (b.0, b.1) = (uniform(&mut rng, 0.0, w), uniform(&mut rng, 0.0, h));
                } else {
                    b.0 += uniform(&mut rng, -0.5, 0.5);
                    b.1 += uniform(&mut rng, -0.5, 0.5);
                }
            }
            while blobs.len() < n {
                let area = uniform(&mut rng, 2.0, 60.0).round();
                blobs.push((uniform(&mut rng, 0.0, w), uniform(&mut rng, 0.0, h), area));
            }
            let mut dets: Vec<Detection> = blobs
                .iter()
                .map(|&(x, y, area)| {
                    let r = (area / std::f64::consts::PI).sqrt();
                    Detection {
                        x: x + uniform(&mut rng, -0.1, 0.1),
                        y: y + uniform(&mut rng, -0.1, 0.1),
                        area,
                        bbox: [x - r, y - r, x + r, y + r],
                    }
                })
                .collect();
            dets.sort_by(|a, b| {
                (a.bbox[1].floor(), a.bbox[0].floor())
                    .partial_cmp(&(b.bbox[1].floor(), b.bbox[0].floor()))
                    .unwrap()
            });
            dets
        })
        .collect()
}

/// 300 markers that cross and hide (`hard_scene`), as detections with 0.5 px of noise.
fn crossing_markers() -> Vec<Vec<Detection>> {
    let mut rng = Mt64::new(5);
    hard_scene(300, 60, 9)
        .iter()
        .map(|truth| {
            truth
                .iter()
                .map(|t| {
                    Detection::point(t.x + gauss(&mut rng, 0.5), t.y + gauss(&mut rng, 0.5), 30.0)
                })
                .collect()
        })
        .collect()
}

/// `frames` of the papers' random images (640×480), labeled (8-connectivity).
fn random_images(frames: u64) -> Vec<Vec<Detection>> {
    let mut lsl = Lsl::new();
    (0..frames)
        .map(|f| {
            let grey = crate::source::synthetic::random_frame(640, 480, f).unwrap();
            let mask = apply(&grey, &ThresholdSpec::Fixed(127), false).unwrap();
            let stats = lsl
                .label(&mask, Connectivity::Eight, Want::Stats)
                .unwrap()
                .stats
                .unwrap();
            stats.iter().map(Detection::from_stats).collect()
        })
        .collect()
}

/// The conflicts settled without a sort give the IDs the sort and the greedy pass give, frame
/// by frame, on one thread and on several: on drifting clutter (sparse and dense enough to
/// cut the gates), on markers that cross and hide, and on the papers' random images.
#[test]
fn settled_conflicts_give_the_ids_of_the_sorted_greedy_pass() {
    let scenes: [(&str, Vec<Vec<Detection>>); 4] = [
        ("15,000 drifting blobs", drifting_clutter(15_000, 8, 1)),
        ("50,000 drifting blobs", drifting_clutter(50_000, 5, 2)),
        ("300 crossing markers", crossing_markers()),
        ("random images", random_images(6)),
    ];
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .unwrap();
    for (name, scene) in &scenes {
        let run = |threads: usize, by_sorting: bool| -> Vec<Vec<u64>> {
            let run = || {
                let mut tracker = Tracker::new(TrackerConfig::pipeline()).unwrap();
                tracker.settle_by_sorting = by_sorting;
                scene
                    .iter()
                    .enumerate()
                    .map(|(f, dets)| tracker.update(f as u64, dets))
                    .collect()
            };
            if threads == 1 {
                run()
            } else {
                pool.install(run)
            }
        };
        let expected = run(1, true);
        for threads in [1, 4] {
            let got = run(threads, false);
            for (f, (a, b)) in got.iter().zip(&expected).enumerate() {
                assert!(a == b, "{name}, {threads} threads: frame {f} differs");
            }
        }
    }
}

/// A small marker passes over a large one: while they are one component the small one's
/// track rides on it, and both keep their IDs when they come apart.
#[test]
fn markers_keep_their_ids_through_a_merge() {
    let mut tracker = Tracker::new(TrackerConfig::default()).unwrap();
    let disc = |x: f64, y: f64, r: f64| Detection {
        x,
        y,
        area: std::f64::consts::PI * r * r,
        bbox: [x - r, y - r, x + r, y + r],
    };
    let (mut id_a, mut id_b) = (0, 0);
    let mut merged_frames = 0;
    for f in 0..60u64 {
        let big = disc(100.0, 100.0, 18.0);
        let small = disc(40.0 + 2.5 * f as f64, 103.0, 5.0);
        let dets = if (small.x - big.x).abs() < 23.0 {
            // One component: area-weighted centroid, union of the boxes.
            let a = big.area + small.area;
            let [l, t, r, b] = big.bbox;
            let [l2, t2, r2, b2] = small.bbox;
            merged_frames += 1;
            vec![Detection {
                x: (big.x * big.area + small.x * small.area) / a,
                y: (big.y * big.area + small.y * small.area) / a,
                area: a,
                bbox: [l.min(l2), t.min(t2), r.max(r2), b.max(b2)],
            }]
        } else {
            vec![big, small]
        };
        let ids = tracker.update(f, &dets);
        if dets.len() == 2 {
            if id_a == 0 {
                (id_a, id_b) = (ids[0], ids[1]);
            }
            assert_eq!((ids[0], ids[1]), (id_a, id_b), "frame {f}");
        } else {
            assert_eq!(
                ids[0], id_a,
                "frame {f}: the merged component keeps the big marker's ID"
            );
            let b = tracker
                .active()
                .iter()
                .find(|t| t.id == id_b)
                .expect("still tracked");
            assert!(b.merged, "frame {f}");
        }
    }
    assert!(merged_frames > 15, "{merged_frames}");
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

/// FNV-1a (64 bits) over every frame's track IDs, each frame closed by `u64::MAX`, as
/// `track_clutter` prints it.
fn ids_digest(frames: &[Vec<u64>]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for ids in frames {
        for b in ids
            .iter()
            .chain([&u64::MAX])
            .flat_map(|id| id.to_le_bytes())
        {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// Detections on a lattice 10 px apart that all step 5 px to the right every frame: each lies
/// exactly halfway between the predictions of two tracks of the same size (costs that tie),
/// and every few frames some vanish.
fn halfway_lattice(frames: u64) -> Vec<Vec<Detection>> {
    (0..frames)
        .map(|f| {
            let mut dets = Vec::new();
            for r in 0..60 {
                for c in 0..80 {
                    if (r * 80 + c + f as usize) % 7 == 0 {
                        continue;
                    }
                    let x = 10.0 * c as f64 + 5.0 * f as f64;
                    dets.push(Detection::point(x, 10.0 * r as f64, 12.0));
                }
            }
            dets
        })
        .collect()
}

/// The association gives exactly the track IDs it gave when these digests were taken, on one
/// thread and on four: drifting clutter (sparse, and dense enough to cut the gates), markers
/// that cross and hide, costs that tie, and the papers' random images. A faster association
/// must give the same IDs.
#[test]
fn track_ids_are_those_of_the_reference_association() {
    let scenes: [(&str, Vec<Vec<Detection>>, u64); 5] = [
        (
            "15,000 drifting blobs",
            drifting_clutter(15_000, 10, 1),
            0x5aad_0eef_8fbe_99ec,
        ),
        (
            "50,000 drifting blobs",
            drifting_clutter(50_000, 6, 2),
            0x9b69_ad86_1a01_b7c9,
        ),
        (
            "300 crossing markers",
            crossing_markers(),
            0x3bf2_649c_6a1a_0d6a,
        ),
        (
            "a lattice halfway between tracks",
            halfway_lattice(12),
            0xf186_574c_33b9_8172,
        ),
        ("random images", random_images(8), 0x0ad7_bb68_838e_c293),
    ];
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .unwrap();
    for (name, scene, expected) in &scenes {
        let run = || -> Vec<Vec<u64>> {
            let mut tracker = Tracker::new(TrackerConfig::pipeline()).unwrap();
            scene
                .iter()
                .enumerate()
                .map(|(f, dets)| tracker.update(f as u64, dets))
                .collect()
        };
        let one = ids_digest(&run());
        let four = ids_digest(&pool.install(run));
        assert_eq!(one, *expected, "{name}, one thread");
        assert_eq!(four, *expected, "{name}, four threads");
    }
}
