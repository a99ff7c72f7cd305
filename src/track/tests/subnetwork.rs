//! The subnetwork assignment (`Assignment::Subnetwork`): the least total cost of every frame
//! against the solver's brute force over all the tracks, the case where the greedy rule's mutual-best
//! pair is not optimal, the same IDs on one thread and on several, fewer identity switches
//! than the greedy rule on Brownian particles, and the greedy fallback for huge clusters.

use super::association::update_as_expected;
use super::scenes::*;
use crate::track::assign::NONE;
use crate::track::subnets::{brute_force, fixed};
use crate::track::*;
use rand_mt::Mt64;

fn subnet(cfg: TrackerConfig) -> TrackerConfig {
    TrackerConfig {
        assignment: Assignment::Subnetwork,
        ..cfg
    }
}

/// Particles linked by position only, around their last position (trackpy's linking).
fn brownian_config(gate: f64) -> TrackerConfig {
    subnet(TrackerConfig {
        gate_px: gate,
        gate_growth_px: 0.0,
        max_missed: 0,
        tentative_max_missed: 0,
        size_weight: 0.0,
        predict_velocity: false,
        ..TrackerConfig::default()
    })
}

/// `n` Brownian particles in a `size`² field (steps of `step` px per axis), `frames` frames:
/// each frame's detections, in particle order.
fn brownian(n: usize, frames: usize, step: f64, size: f64, seed: u64) -> Vec<Vec<Detection>> {
    let mut rng = Mt64::new(seed);
    let mut p: Vec<(f64, f64)> = (0..n)
        .map(|_| (uniform(&mut rng, 0.0, size), uniform(&mut rng, 0.0, size)))
        .collect();
    (0..frames)
        .map(|_| {
            let dets = p
                .iter()
                .map(|&(x, y)| Detection::point(x, y, 1.0))
                .collect();
            for q in &mut p {
                q.0 += gauss(&mut rng, step);
                q.1 += gauss(&mut rng, step);
            }
            dets
        })
        .collect()
}

/// Links between consecutive frames of a particle that change its ID (detections in
/// particle order, every particle in every frame).
fn id_switches(ids: &[Vec<u64>]) -> usize {
    ids.windows(2)
        .map(|w| w[0].iter().zip(&w[1]).filter(|(a, b)| a != b).count())
        .sum()
}

/// A frame's pairing is the least total cost over all its tracks (a brute force over every
/// assignment, ties by the rule), on small crowded scenes with sizes, velocities, missed
/// tracks whose gates widened and detections that appear and vanish.
#[test]
fn subnetwork_assignment_is_the_least_total_cost() {
    let cfg = subnet(TrackerConfig {
        gate_px: 10.0,
        gate_growth_px: 3.0,
        max_missed: 3,
        tentative_max_missed: 2,
        max_candidates: u32::MAX,
        size_weight: 0.5,
        ..TrackerConfig::default()
    });
    let mut rng = Mt64::new(17);
    let (mut checked, mut unlinked_with_candidates, mut not_greedy) = (0, 0, 0);
    for scene in 0..300 {
        let mut tracker = Tracker::new(cfg).unwrap();
        let n = 3 + scene % 5;
        let mut pts: Vec<(f64, f64, f64)> = (0..n)
            .map(|_| {
                let x = uniform(&mut rng, 0.0, 30.0);
                (
                    x,
                    uniform(&mut rng, 0.0, 30.0),
                    uniform(&mut rng, 20.0, 60.0),
                )
            })
            .collect();
        for frame in 0..8u64 {
            let dets: Vec<Detection> = pts
                .iter()
                .filter(|_| uniform(&mut rng, 0.0, 1.0) > 0.15)
                .map(|&(x, y, area)| Detection::point(x, y, area))
                .collect();
            for p in &mut pts {
                p.0 += gauss(&mut rng, 4.0);
                p.1 += gauss(&mut rng, 4.0);
            }
            let active = tracker.active();
            if active.len() > 8 {
                tracker.update(frame, &dets);
                continue;
            }
            // Each track's gated candidates by cost, and its unlinked cost, as the solver
            // takes them.
            let dense = dense_radius(cfg.max_candidates, &dets);
            let inv_base2 = 1.0 / (cfg.gate_px * cfg.gate_px);
            let options: Vec<(i64, Vec<(i64, u32)>)> = active
                .iter()
                .map(|t| {
                    let (px, py) = t.predict(frame);
                    let gate = cfg.gate(frame - t.clean_frame);
                    let cut = gate.min(dense);
                    let mut of_track: Vec<(f64, usize)> = dets
                        .iter()
                        .enumerate()
                        .filter_map(|(di, d)| {
                            let d2 = (d.x - px).powi(2) + (d.y - py).powi(2);
                            let size =
                                (crate::track::ln::ln(d.area) - crate::track::ln::ln(t.area)).abs()
                                    * cfg.size_weight;
                            (d2 <= cut * cut).then_some((d2 * inv_base2 + size, di))
                        })
                        .collect();
                    of_track.sort_by(|a, b| a.0.total_cmp(&b.0));
                    let edge = (gate / cfg.gate_px).powi(2);
                    let unlinked = of_track.iter().map(|c| c.0).fold(edge, f64::max);
                    let fixed = |c: f64| fixed(c.to_bits());
                    let of_track = of_track
                        .iter()
                        .map(|&(c, di)| (fixed(c), di as u32))
                        .collect();
                    (fixed(unlinked), of_track)
                })
                .collect();
            // Each track's detection, or none.
            let picks: Vec<Option<usize>> = (brute_force(&options, dets.len()).1)
                .iter()
                .zip(&options)
                .map(|(&k, (_, o))| (k != NONE).then(|| o[k as usize].1 as usize))
                .collect();
            let mut expected = vec![None; dets.len()];
            for (t, pick) in active.iter().zip(&picks) {
                if let Some(di) = *pick {
                    expected[di] = Some(t.id);
                }
            }
            unlinked_with_candidates += options
                .iter()
                .zip(&picks)
                .filter(|((_, o), p)| p.is_none() && !o.is_empty())
                .count();
            // Where the cheapest pair is not in the optimum.
            not_greedy += options
                .iter()
                .zip(&picks)
                .filter(|((_, o), p)| o.first().is_some_and(|c| Some(c.1 as usize) != **p))
                .count();
            let context = format!("scene {scene}, ");
            update_as_expected(&mut tracker, frame, &dets, &expected, &context);
            checked += 1;
        }
    }
    assert!(checked > 1500, "too few frames checked: {checked}");
    assert!(
        unlinked_with_candidates > 100,
        "too few unlinked tracks: {unlinked_with_candidates}"
    );
    assert!(not_greedy > 300, "too few non-greedy picks: {not_greedy}");
}

/// A pair that is the cheapest of both its track and its detection (the greedy rule takes it
/// first) is not in the optimum when taking it leaves the other track unlinked.
#[test]
fn the_mutual_best_pair_gives_way_to_the_least_total() {
    // A at 0 and B at 3; then a at 1.4 (A 1.96, B 2.56) and b at −1.5 (A 2.25, B out of its
    // gate of 2). Greedy: A–a, B unlinked (4), b new: 5.96 px². Optimal: A–b, B–a: 4.81 px².
    let first = [
        Detection::point(0.0, 0.0, 1.0),
        Detection::point(3.0, 0.0, 1.0),
    ];
    let second = [
        Detection::point(1.4, 0.0, 1.0),
        Detection::point(-1.5, 0.0, 1.0),
    ];
    let run = |cfg: TrackerConfig| {
        let mut tracker = Tracker::new(cfg).unwrap();
        let ids = tracker.update(0, &first);
        (ids, tracker.update(1, &second))
    };
    let cfg = brownian_config(2.0);
    let (started, subnet) = run(cfg);
    let (a, b) = (started[0], started[1]);
    assert_eq!(subnet, vec![b, a]);
    let greedy = run(TrackerConfig {
        assignment: Assignment::Greedy,
        ..cfg
    })
    .1;
    assert_eq!(greedy[0], a);
    assert!(greedy[1] > b, "{greedy:?}");
}

/// The same IDs on one thread and on four (enough tracks for the pool), where the rule
/// decides many clusters; and fewer identity switches than the greedy rule.
#[test]
fn subnetwork_ids_do_not_depend_on_threads_and_switch_less_than_greedy() {
    // 4,000 particles, ~16 px apart, steps of 1.5 px per axis, a 6 px search (as the
    // Python tests' scene).
    let scene = brownian(4000, 10, 1.5, 1000.0, 5);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .unwrap();
    let run = |cfg: TrackerConfig| -> Vec<Vec<u64>> {
        let mut tracker = Tracker::new(cfg).unwrap();
        let ids = scene
            .iter()
            .enumerate()
            .map(|(f, dets)| tracker.update(f as u64, dets))
            .collect();
        assert_eq!(tracker.greedy_clusters(), 0);
        ids
    };
    let cfg = brownian_config(6.0);
    let one = run(cfg);
    let four = pool.install(|| run(cfg));
    for (f, (a, b)) in one.iter().zip(&four).enumerate() {
        assert!(a == b, "frame {f} differs between one thread and four");
    }
    let greedy = pool.install(|| {
        run(TrackerConfig {
            assignment: Assignment::Greedy,
            ..cfg
        })
    });
    let (ours, theirs) = (id_switches(&one), id_switches(&greedy));
    assert!(ours < theirs, "subnetwork {ours} switches, greedy {theirs}");
}

/// A cluster of more than `EXACT_MAX_TRACKS` tracks (a line of particles 1 px apart, each
/// within the gate of its neighbours) is paired by the greedy rule, and counted.
#[test]
fn a_huge_cluster_is_paired_greedily_and_counted() {
    let line = |shift: f64| -> Vec<Detection> {
        (0..2100)
            .map(|i| Detection::point(i as f64 + shift, 0.3 * (i % 3) as f64, 1.0))
            .collect()
    };
    let frames = [line(0.0), line(0.4), line(0.1)];
    let run = |cfg: TrackerConfig| {
        let mut tracker = Tracker::new(cfg).unwrap();
        let ids: Vec<Vec<u64>> = frames
            .iter()
            .enumerate()
            .map(|(f, dets)| tracker.update(f as u64, dets))
            .collect();
        (ids, tracker.greedy_clusters())
    };
    let cfg = brownian_config(1.5);
    let (subnet, counted) = run(cfg);
    assert_eq!(counted, 2);
    let (greedy, _) = run(TrackerConfig {
        assignment: Assignment::Greedy,
        ..cfg
    });
    assert_eq!(subnet, greedy);
}

#[test]
fn assignment_names() {
    assert_eq!("greedy".parse::<Assignment>().unwrap(), Assignment::Greedy);
    assert_eq!(
        "subnet".parse::<Assignment>().unwrap(),
        Assignment::Subnetwork
    );
    let err = "hungarian".parse::<Assignment>().unwrap_err().to_string();
    assert!(err.contains("\"greedy\" or \"subnet\""), "{err}");
    assert_eq!(TrackerConfig::default().assignment, Assignment::Greedy);
}
