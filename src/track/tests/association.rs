//! The association against references: a brute-force greedy pass, one thread against
//! several, the sorted settling, the IDs of the reference association, and its cost at scale.

use super::scenes::*;
use crate::track::*;
use rand_mt::Mt64;

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
        update_as_expected(&mut tracker, frame, &dets, &expected, "");
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

/// Updates `tracker` with a frame and checks each detection's ID: the track `expected` names
/// (by ID), or a new track where it names none. `context` starts the messages.
pub(super) fn update_as_expected(
    tracker: &mut Tracker,
    frame: u64,
    dets: &[Detection],
    expected: &[Option<u64>],
    context: &str,
) {
    let known: std::collections::HashSet<u64> = tracker.active().iter().map(|t| t.id).collect();
    let ids = tracker.update(frame, dets);
    for (di, &id) in ids.iter().enumerate() {
        match expected[di] {
            Some(e) => assert_eq!(id, e, "{context}frame {frame}, detection {di}"),
            None => assert!(
                !known.contains(&id),
                "{context}frame {frame}: {di} should start a track"
            ),
        }
    }
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
            0xe487_3b65_93a5_0300,
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

/// Missed tracks find the component they merged into among the small components near them and
/// in the index of the large ones: the same component, frame by frame, as the search among all
/// detections within the largest reach. On the markers scene, where noise tracks ride on the
/// large components by the hundred, on one thread and on several.
#[test]
fn merges_found_through_the_large_components_equal_the_full_search() {
    let scene = fiducial_frames(960, 540, 40);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .unwrap();
    // Per frame: the IDs, and each active track's ID, whether it rides and where it is.
    type Frames = Vec<(Vec<u64>, Vec<(u64, bool, u64, u64)>)>;
    let mut indexed = 0;
    let mut run = |full_search: bool| -> Frames {
        let mut tracker = Tracker::new(TrackerConfig::pipeline()).unwrap();
        tracker.large.full_search = full_search;
        pool.install(|| {
            scene
                .iter()
                .enumerate()
                .map(|(f, dets)| {
                    let ids = tracker.update(f as u64, dets);
                    indexed += tracker.large.indexed as usize;
                    let tracks = tracker
                        .active()
                        .iter()
                        .map(|t| (t.id, t.merged, t.est_x.to_bits(), t.est_y.to_bits()))
                        .collect();
                    (ids, tracks)
                })
                .collect()
        })
    };
    let (expected, got) = (run(true), run(false));
    let riders: usize = expected
        .iter()
        .map(|(_, tracks)| tracks.iter().filter(|t| t.1).count())
        .sum();
    assert!(riders > 200, "too few merged tracks to compare: {riders}");
    assert!(
        indexed > 60,
        "the large components were indexed in {indexed} frames of 80"
    );
    for (f, (a, b)) in got.iter().zip(&expected).enumerate() {
        assert!(a == b, "frame {f} differs");
    }
}

/// The extent of a frame's rows, their detections made on the fly (`Extent::of_rows`, what the
/// GPU tracker reads when the detections are on the device), is that of the detections made
/// of them (`Extent::of`), on one thread and on the pool, with sub-pixel centroids or without,
/// a position that is not a number among them.
#[test]
fn the_extent_of_rows_is_that_of_their_detections() {
    use crate::ccl::stats::ComponentStats;
    use crate::ccl::subpixel::SubpixelCentroid;
    let mut rng = Mt64::new(11);
    for n in [0, 5, 3 * EXTENT_BLOCK + 7] {
        let stats: Vec<ComponentStats> = (0..n)
            .map(|k| {
                let (left, top) = (rng.next_u64() % 1900, rng.next_u64() % 1000);
                let (width, height) = (1 + rng.next_u64() % 40, 1 + rng.next_u64() % 40);
                ComponentStats {
                    label: k as u32 + 1,
                    left: left as u32,
                    top: top as u32,
                    width: width as u32,
                    height: height as u32,
                    area: width * height,
                    sum_x: 0,
                    sum_y: 0,
                    centroid_x: left as f64 + uniform(&mut rng, 0.0, width as f64),
                    centroid_y: top as f64 + uniform(&mut rng, 0.0, height as f64),
                }
            })
            .collect();
        let subpixel: Vec<SubpixelCentroid> = stats
            .iter()
            .enumerate()
            .map(|(k, s)| SubpixelCentroid {
                label: s.label,
                weight: 1,
                sum_wx: 0,
                sum_wy: 0,
                x: if k == 3 {
                    f64::NAN
                } else {
                    s.centroid_x + 0.25
                },
                y: s.centroid_y - 0.25,
            })
            .collect();
        for centroids in [&subpixel[..], &[]] {
            let detections = Detection::from_rows(&stats, centroids);
            for parallel in [false, true] {
                let (a, b) = (
                    Extent::of(&detections, parallel),
                    Extent::of_rows(&stats, centroids, parallel),
                );
                let bits = |e: &Extent| {
                    let [x0, y0, x1, y1] = e.bounds.map(f64::to_bits);
                    (e.finite, [x0, y0, x1, y1], e.reach.to_bits(), e.large)
                };
                let what = format!(
                    "{n} rows, {} centroids, parallel {parallel}",
                    centroids.len()
                );
                assert_eq!(bits(&a), bits(&b), "{what}");
            }
        }
    }
}
