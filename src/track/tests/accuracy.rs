//! Tracking quality on scored scenes: no identity switches where the motion allows it, new
//! tracks after long occlusions, crossings and merges that keep their IDs.

use super::scenes::*;
use crate::ccl::cpu::lsl::Lsl;
use crate::ccl::subpixel::weighted_centroids;
use crate::ccl::{Connectivity, Labeler, Want};
use crate::frame::image::GrayImage;
use crate::frame::render::{draw, Shape};
use crate::threshold::apply;
use crate::threshold::levels::ThresholdLevels;
use crate::threshold::spec::ThresholdSpec;
use crate::track::score::{MotCounts, MotScorer, TrackPoint, TruthPoint};
use crate::track::*;
use rand_mt::Mt64;

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
        scorer.add_frame(truth, &track_points(&dets, &ids));
    }
    (scorer.counts(), tracker)
}

/// The detections with the track IDs given them, as the scorer takes them.
fn track_points(detections: &[Detection], ids: &[u64]) -> Vec<TrackPoint> {
    detections
        .iter()
        .zip(ids)
        .map(|(d, &track)| TrackPoint {
            track,
            x: d.x,
            y: d.y,
        })
        .collect()
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
        scorer.add_frame(truth, &track_points(&dets, &ids));
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
