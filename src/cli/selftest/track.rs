//! The track group: the GPU tracker against the CPU tracker (the reference), frame by frame on
//! sequences that reach every rule: the papers' random images labeled (every density, tracks by
//! the hundred thousand ending), the markers scene (merges, confirmed tracks among noise),
//! particles on an integer lattice (exactly equal costs: the ties), discs that meet and part
//! (riding on a larger component, the merge branch of an observation), gaps in the frame index
//! and a jump back, and trackpy's linking (the subnetwork rule, its clusters solved on the device
//! and, when large, on the host). Each frame's IDs and the IDs of the tracks it ended must be
//! the same. Then the random images labeled on the GPU with the detections left on the device
//! (`Labeler::keep_detections_on_device`), every row and the rows filtered there: the device's
//! rows must equal the host's detections bit for bit, and the GPU tracker reading them must
//! give the CPU tracker's IDs.
// Without CUDA the group only reports that it was skipped: its sequences go unused.
#![cfg_attr(not(feature = "cuda"), allow(dead_code))]

use super::SelftestReport;
use crate::ccl::cpu::lsl::Lsl;
use crate::ccl::{Backends, Connectivity, Labeler, Want};
use crate::error::{Error, Result};
use crate::source::fiducial_scene::{FiducialOptions, FiducialScene};
use crate::source::synthetic::random_frame;
use crate::threshold::apply;
use crate::threshold::spec::ThresholdSpec;
use crate::track::{Detection, TrackerConfig};
use rand_mt::Mt64;

/// A sequence of frames to track: each frame's index and detections.
pub struct TrackScene {
    pub name: String,
    pub config: TrackerConfig,
    pub frames: Vec<(u64, Vec<Detection>)>,
    /// Whether the subnetwork rule must leave clusters to the host here (the GPU tracker's
    /// fallback is then checked too).
    pub host_clusters: bool,
}

fn uniform(rng: &mut Mt64, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// Labeled frames (8-connectivity, every component kept) of `grey(frame)` thresholded.
fn labeled(
    frames: u64,
    threshold: ThresholdSpec,
    mut grey: impl FnMut(u64) -> Result<crate::frame::image::GrayImage>,
) -> Result<Vec<(u64, Vec<Detection>)>> {
    let mut lsl = Lsl::new();
    (0..frames)
        .map(|f| {
            let mask = apply(&grey(f)?, &threshold, false)?;
            let labeling = lsl.label(&mask, Connectivity::Eight, Want::Stats)?;
            let stats = labeling
                .stats
                .ok_or_else(|| Error::Invalid("the labeler returned no statistics".into()))?;
            Ok((f, stats.iter().map(Detection::from_stats).collect()))
        })
        .collect()
}

/// `n` particles placed by `place` (x, y, area), stepping by `step` along each axis every
/// frame, 2 % placed anew: each frame's index and detections.
fn wandering(
    n: usize,
    frames: u64,
    seed: u64,
    place: impl Fn(&mut Mt64) -> (f64, f64, f64),
    step: impl Fn(&mut Mt64) -> f64,
) -> Vec<(u64, Vec<Detection>)> {
    let mut rng = Mt64::new(seed);
    let mut state: Vec<(f64, f64, f64)> = (0..n).map(|_| place(&mut rng)).collect();
    (0..frames)
        .map(|f| {
            for s in state.iter_mut() {
                if rng.next_u64() % 50 == 0 {
                    *s = place(&mut rng);
                } else {
                    s.0 += step(&mut rng);
                    s.1 += step(&mut rng);
                }
            }
            let dets = state.iter().map(|&(x, y, a)| Detection::point(x, y, a));
            (f, dets.collect())
        })
        .collect()
}

/// Particles on an integer lattice in a 400 × 300 field, stepping -1, 0 or 1 px along each
/// axis: integer positions and areas, so many pairs cost exactly the same.
fn lattice(n: usize, frames: u64, seed: u64) -> Vec<(u64, Vec<Detection>)> {
    let place = |rng: &mut Mt64| {
        let (x, y) = ((rng.next_u64() % 400) as f64, (rng.next_u64() % 300) as f64);
        (x, y, (1 + rng.next_u64() % 4) as f64)
    };
    wandering(n, frames, seed, place, |rng| {
        (rng.next_u64() % 3) as f64 - 1.0
    })
}

/// Particles at real-valued positions in a 400 × 300 field, stepping up to 2.5 px along each
/// axis, with areas of 1 to 20 px.
fn brownian_particles(n: usize, frames: u64, seed: u64) -> Vec<(u64, Vec<Detection>)> {
    let place = |rng: &mut Mt64| {
        let (x, y) = (uniform(rng, 0.0, 400.0), uniform(rng, 0.0, 300.0));
        (x, y, (1 + rng.next_u64() % 20) as f64)
    };
    wandering(n, frames, seed, place, |rng| uniform(rng, -2.5, 2.5))
}

/// Pairs of discs that move towards each other, touch (one component: the area of both, the
/// box around both) and part again, among a few drifting specks.
fn meeting_discs(pairs: usize, frames: u64, seed: u64) -> Vec<(u64, Vec<Detection>)> {
    let mut rng = Mt64::new(seed);
    let disc = |x: f64, y: f64, r: f64| Detection {
        x,
        y,
        area: (std::f64::consts::PI * r * r).round(),
        bbox: [
            (x - r).floor(),
            (y - r).floor(),
            (x + r).ceil(),
            (y + r).ceil(),
        ],
    };
    let setup: Vec<(f64, f64, f64, f64, f64)> = (0..pairs)
        .map(|_| {
            let (cx, cy) = (
                uniform(&mut rng, 60.0, 900.0),
                uniform(&mut rng, 60.0, 500.0),
            );
            let (r, speed) = (uniform(&mut rng, 5.0, 12.0), uniform(&mut rng, 0.8, 2.5));
            let phase = uniform(&mut rng, 0.0, 40.0);
            (cx, cy, r, speed, phase)
        })
        .collect();
    (0..frames)
        .map(|f| {
            let mut dets = Vec::new();
            for &(cx, cy, r, speed, phase) in &setup {
                // Apart, together for a while, apart on the other side.
                let half = (f as f64 + phase) * speed - 60.0;
                let (a, b) = (disc(cx - half, cy, r), disc(cx + half, cy + 0.5, r));
                if half.abs() < r {
                    let area = a.area + b.area;
                    let x = (a.x * a.area + b.x * b.area) / area;
                    let y = (a.y * a.area + b.y * b.area) / area;
                    let [al, at, ar, ab] = a.bbox;
                    let [bl, bt, br, bb] = b.bbox;
                    let bbox = [al.min(bl), at.min(bt), ar.max(br), ab.max(bb)];
                    dets.push(Detection { x, y, area, bbox });
                } else {
                    dets.extend([a, b]);
                }
            }
            for _ in 0..20 {
                let (x, y) = (uniform(&mut rng, 0.0, 960.0), uniform(&mut rng, 0.0, 560.0));
                dets.push(Detection::point(x, y, 1.0));
            }
            (f, dets)
        })
        .collect()
}

/// `frames` with every `every`-th one emptied (nothing detected: every track is missed).
fn with_empty_frames(
    mut frames: Vec<(u64, Vec<Detection>)>,
    every: usize,
) -> Vec<(u64, Vec<Detection>)> {
    for (_, detections) in frames.iter_mut().skip(every - 1).step_by(every) {
        detections.clear();
    }
    frames
}

/// The group's sequences: small ones for `--quick`, more and larger otherwise.
pub fn scenes(quick: bool) -> Result<Vec<TrackScene>> {
    let pipeline = TrackerConfig::pipeline();
    let scene = |name: String, config, frames| TrackScene {
        name,
        config,
        frames,
        host_clusters: false,
    };
    let (rw, rh, rframes) = if quick {
        (640, 360, 22)
    } else {
        (1920, 1080, 33)
    };
    let (mw, mh, mframes) = if quick {
        (960, 540, 40)
    } else {
        (1920, 1080, 120)
    };
    let markers = FiducialScene::new(FiducialOptions::default(), mw, mh)?;
    let lattice_n = if quick { 600 } else { 3000 };
    let mut list = vec![
        scene(
            format!("random images {rw}x{rh}, {rframes} frames"),
            pipeline,
            labeled(rframes, ThresholdSpec::Fixed(127), |f| {
                random_frame(rw, rh, f)
            })?,
        ),
        scene(
            format!("markers {mw}x{mh}, {mframes} frames"),
            pipeline,
            labeled(mframes, ThresholdSpec::default(), |f| Ok(markers.render(f)))?,
        ),
        scene(
            format!("{lattice_n} lattice particles, 60 frames"),
            pipeline,
            lattice(lattice_n, 60, 1),
        ),
        scene(
            "12 pairs of meeting discs, 160 frames".into(),
            pipeline,
            meeting_discs(12, 160, 2),
        ),
        // Frames without detections among confirmed, riding and tentative tracks.
        scene(
            "12 pairs of meeting discs, every 7th frame empty".into(),
            pipeline,
            with_empty_frames(meeting_discs(12, 160, 9), 7),
        ),
    ];
    // The lattice without prediction or size term, few candidates (the cut), and with gaps in
    // the frame index and a jump back to 0 (every track ends).
    let mut gaps = lattice(lattice_n / 2, 50, 3);
    for (k, (f, _)) in gaps.iter_mut().enumerate() {
        *f = match k {
            0..=19 => k as u64,
            20..=34 => k as u64 + 3,
            _ => (k - 35) as u64,
        };
    }
    let brownian = TrackerConfig {
        predict_velocity: false,
        size_weight: 0.0,
        max_candidates: 4,
        gate_px: 3.0,
        ..pipeline
    };
    list.push(scene(
        format!(
            "{} lattice particles, Brownian settings, gaps and a jump back",
            lattice_n / 2
        ),
        brownian,
        gaps,
    ));
    // trackpy's linking (the subnetwork rule): particles on the lattice (ties), the lattice
    // five times as dense with a wider search (clusters past the device's 16 tracks, solved
    // on the host, some past the exact solver's 2,000), and particles at real-valued positions.
    list.push(scene(
        format!("{lattice_n} lattice particles, trackpy's linking"),
        TrackerConfig::linking(3.0),
        lattice(lattice_n, 60, 5),
    ));
    list.push(TrackScene {
        host_clusters: true,
        ..scene(
            "3000 lattice particles, trackpy's linking, large clusters".into(),
            TrackerConfig::linking(6.0),
            lattice(3000, 20, 6),
        )
    });
    list.push(scene(
        format!("{lattice_n} lattice particles, trackpy's linking, every 5th frame empty"),
        TrackerConfig::linking(3.0),
        with_empty_frames(lattice(lattice_n, 40, 10), 5),
    ));
    list.push(scene(
        format!("{} Brownian particles, trackpy's linking", 2 * lattice_n),
        TrackerConfig::linking(5.0),
        brownian_particles(2 * lattice_n, 40, 7),
    ));
    if !quick {
        // One cluster of all 15,000 tracks: past the exact solver, paired greedily.
        list.push(TrackScene {
            host_clusters: true,
            ..scene(
                "15000 lattice particles, trackpy's linking, one huge cluster".into(),
                TrackerConfig::linking(6.0),
                lattice(15000, 8, 8),
            )
        });
        list.push(scene(
            "12 pairs of meeting discs, 32 candidates".into(),
            TrackerConfig {
                max_candidates: 32,
                ..pipeline
            },
            meeting_discs(12, 160, 4),
        ));
    }
    Ok(list)
}

/// Runs the group; without a GPU it is skipped, and the report says why.
pub fn check_tracking(
    backends: &Backends,
    quick: bool,
    report: &mut SelftestReport,
    progress: &mut dyn FnMut(&str),
) {
    #[cfg(feature = "cuda")]
    match backends.gpu() {
        Ok(gpu) => run_group(gpu.clone(), quick, report, progress),
        Err(e) => super::skipped(report, "track", "the GPU tracker", e),
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (quick, progress);
        let why = backends.cuda_unavailable_reason().unwrap_or_default();
        super::skipped(report, "track", "the GPU tracker", why);
    }
}

#[cfg(feature = "cuda")]
fn run_group(
    gpu: std::sync::Arc<crate::gpu::Gpu>,
    quick: bool,
    report: &mut SelftestReport,
    progress: &mut dyn FnMut(&str),
) {
    let list = match scenes(quick) {
        Ok(list) => list,
        Err(e) => {
            report
                .failures
                .push(format!("track: cannot make the sequences: {e}"));
            return;
        }
    };
    let (checks_before, failures_before) = (report.checks, report.failures.len());
    for (i, scene) in list.iter().enumerate() {
        progress(&format!("[track {}/{}] {}", i + 1, list.len(), scene.name));
        let (checks, failures) = compare(gpu.clone(), scene);
        report.checks += checks;
        report.failures.extend(failures);
        let (checks, failures) = compare_adopted(gpu.clone(), scene);
        report.checks += checks;
        report.failures.extend(failures);
    }
    let rw = if quick { 640 } else { 1920 };
    let (rh, frames) = if quick { (360, 22) } else { (1080, 33) };
    for (k, filter) in [
        None,
        Some(crate::ccl::RowFilter {
            min_area: Some(3),
            ..crate::ccl::RowFilter::default()
        }),
    ]
    .into_iter()
    .enumerate()
    {
        let name = match filter {
            None => format!("random images {rw}x{rh} labeled by ha8, detections on the device"),
            Some(_) => format!("random images {rw}x{rh}, rows of area 3+ filtered on the device"),
        };
        progress(&format!("[track device {}/2] {name}", k + 1));
        let (checks, failures) = compare_on_device(gpu.clone(), &name, (rw, rh, frames), filter);
        report.checks += checks;
        report.failures.extend(failures);
    }
    report.notes.push(format!(
        "track: {} sequences (and the GPU taking over halfway), {} checks, {} failures",
        list.len() + 2,
        report.checks - checks_before,
        report.failures.len() - failures_before
    ));
}

/// Labels the random images (`w × h`, `frames` of them) on the GPU with sub-pixel centroids
/// (`ha8`, the pipeline's GPU labeler), the detections left on the device
/// (`Labeler::keep_detections_on_device`), with `filter` applied on the device when given.
/// Checks per frame: the device rows equal the host's detections bit for bit, and the GPU
/// tracker reading them gives the CPU tracker's IDs (and reads them where they are).
#[cfg(feature = "cuda")]
fn compare_on_device(
    gpu: std::sync::Arc<crate::gpu::Gpu>,
    what: &str,
    (w, h, frames): (u32, u32, u64),
    filter: Option<crate::ccl::RowFilter>,
) -> (usize, Vec<String>) {
    use crate::ccl::cuda::ha4::{Ha4, Variant};
    use crate::ccl::subpixel::GreyWeights;
    use crate::ccl::{CentroidRows, LabelRequest, Mask};
    use crate::threshold::levels::ThresholdLevels;
    use crate::track::gpu::{detection_row, GpuTracker};
    use crate::track::Tracker;
    let config = TrackerConfig::pipeline();
    let made = Ha4::new(gpu.clone(), Variant::Words8).and_then(|labeler| {
        Ok((
            labeler,
            Tracker::new(config)?,
            GpuTracker::new(gpu.clone(), config)?,
        ))
    });
    let (mut labeler, mut cpu, mut on_gpu) = match made {
        Ok(m) => m,
        Err(e) => {
            return (
                1,
                vec![format!("{what}: cannot make the labeler and trackers: {e}")],
            )
        }
    };
    let filter = filter.unwrap_or_default();
    let (mut checks, mut failures) = (1, Vec::new());
    labeler.set_row_filter(filter);
    if !labeler.keep_detections_on_device(true) {
        return (
            1,
            vec![format!(
                "{what}: ha8 does not leave detections on the device"
            )],
        );
    }
    let levels = ThresholdLevels::Global(127);
    let accepts = |c: &crate::ccl::stats::ComponentStats| filter.accepts(c);
    for frame in 0..frames {
        checks += 1;
        let mut step = || -> Result<Option<String>> {
            let grey = random_frame(w, h, frame)?;
            let mask = levels.mask(&grey, false)?;
            let weights = GreyWeights {
                grey: &grey,
                levels: &levels,
                invert: false,
            };
            let request = LabelRequest::new(Mask::Bytes(&mask), Connectivity::Eight, Want::Stats);
            let rows = CentroidRows {
                weights: &weights,
                keep: &accepts,
            };
            let (labeling, centroids) = labeler.label_weighted(request, rows)?;
            let stats = labeling.stats.unwrap_or_default();
            if !stats.iter().all(|c| filter.accepts(c)) || centroids.len() != stats.len() {
                return Ok(Some(format!(
                    "{} rows (some the filter refuses, or not one centroid each: {})",
                    stats.len(),
                    centroids.len()
                )));
            }
            let dets = Detection::from_rows(&stats, &centroids);
            let Some(on_device) = labeling.device_detections else {
                return Ok(Some("no detections were left on the device".into()));
            };
            let rows = on_device.download(&gpu)?;
            let host: Vec<u64> = dets
                .iter()
                .flat_map(detection_row)
                .map(f64::to_bits)
                .collect();
            let device: Vec<u64> = rows.iter().map(|v| v.to_bits()).collect();
            if host != device {
                let differ = host.iter().zip(&device).position(|(a, b)| a != b);
                return Ok(Some(format!(
                    "the device's {} detection values differ from the host's {} (first: value \
                     {differ:?})",
                    device.len(),
                    host.len()
                )));
            }
            let before = on_gpu.resident_frames();
            let ids = cpu.update(frame, &dets);
            let got = on_gpu.update_from_rows(frame, (&stats, &centroids), &on_device)?;
            if on_gpu.resident_frames() != before + 1 {
                return Ok(Some("the GPU tracker did not read the device rows".into()));
            }
            let ended: Vec<u64> = cpu.drain_finished().map(|s| s.id).collect();
            let got_ended: Vec<u64> = on_gpu.drain_ended().collect();
            Ok(differences((&ids, &ended), (&got, &got_ended)))
        };
        match step() {
            Ok(None) => {}
            Ok(Some(why)) => failures.push(format!("{what}: frame {frame}: {why}")),
            Err(e) => failures.push(format!("{what}: frame {frame}: {e}")),
        }
        if failures.len() >= 3 {
            break;
        }
    }
    (checks, failures)
}

/// What differs between the CPU tracker's frame (its IDs and the tracks it ended) and the
/// GPU tracker's, if anything.
fn differences(cpu: (&[u64], &[u64]), gpu: (&[u64], &[u64])) -> Option<String> {
    let ((ids, ended), (got, got_ended)) = (cpu, gpu);
    if got != ids {
        let differ = ids.iter().zip(got).filter(|(a, b)| a != b).count();
        let first = ids.iter().zip(got).position(|(a, b)| a != b);
        return Some(format!(
            "{differ} of {} IDs differ (first: detection {first:?})",
            ids.len()
        ));
    }
    (got_ended != ended).then(|| {
        format!(
            "{} tracks ended, the CPU's {}",
            got_ended.len(),
            ended.len()
        )
    })
}

/// The GPU tracker taking over a CPU tracker's tracks halfway through `scene`
/// (`GpuTracker::adopt`, as the pipeline's tracking stage does at its first heavy frame): from
/// there, each frame's IDs and ended tracks must be those of a CPU tracker that tracked every
/// frame.
#[cfg(feature = "cuda")]
fn compare_adopted(
    gpu: std::sync::Arc<crate::gpu::Gpu>,
    scene: &TrackScene,
) -> (usize, Vec<String>) {
    use crate::track::gpu::GpuTracker;
    use crate::track::Tracker;
    let what = format!("track {}, taken over by the GPU halfway", scene.name);
    let made = Tracker::new(scene.config).and_then(|reference| {
        Ok((
            reference,
            Tracker::new(scene.config)?,
            GpuTracker::new(gpu, scene.config)?,
        ))
    });
    let (mut reference, mut lead, mut on_gpu) = match made {
        Ok(t) => t,
        Err(e) => return (1, vec![format!("{what}: cannot make the trackers: {e}")]),
    };
    let half = scene.frames.len() / 2;
    for (frame, dets) in &scene.frames[..half] {
        reference.update(*frame, dets);
        lead.update(*frame, dets);
        reference.drain_finished().for_each(drop);
        lead.drain_finished().for_each(drop);
    }
    if let Err(e) = on_gpu.adopt(&lead) {
        return (1, vec![format!("{what}: {e}")]);
    }
    let (checks, failures) =
        compare_frames(&what, &scene.frames[half..], &mut reference, &mut on_gpu);
    (checks + 1, failures)
}

/// Tracks `frames` on both trackers; a check per frame and what differs in its IDs and ended
/// tracks (the first few).
#[cfg(feature = "cuda")]
fn compare_frames(
    what: &str,
    frames: &[(u64, Vec<Detection>)],
    cpu: &mut crate::track::Tracker,
    on_gpu: &mut crate::track::gpu::GpuTracker,
) -> (usize, Vec<String>) {
    let (mut checks, mut failures) = (0, Vec::new());
    for (frame, dets) in frames {
        checks += 1;
        let ids = cpu.update(*frame, dets);
        let ended: Vec<u64> = cpu.drain_finished().map(|s| s.id).collect();
        let got = match on_gpu.update(*frame, dets) {
            Ok(ids) => ids,
            Err(e) => {
                failures.push(format!("{what}: frame {frame}: {e}"));
                break;
            }
        };
        let got_ended: Vec<u64> = on_gpu.drain_ended().collect();
        if let Some(why) = differences((&ids, &ended), (&got, &got_ended)) {
            failures.push(format!("{what}: frame {frame}: {why}"));
        }
        if failures.len() >= 3 {
            break;
        }
    }
    (checks, failures)
}

/// Tracks `scene` on both trackers; a check per frame and what differs (the first few).
#[cfg(feature = "cuda")]
fn compare(gpu: std::sync::Arc<crate::gpu::Gpu>, scene: &TrackScene) -> (usize, Vec<String>) {
    use crate::track::gpu::GpuTracker;
    use crate::track::Tracker;
    let what = format!("track {}", scene.name);
    let trackers =
        Tracker::new(scene.config).and_then(|cpu| Ok((cpu, GpuTracker::new(gpu, scene.config)?)));
    let (mut cpu, mut on_gpu) = match trackers {
        Ok(t) => t,
        Err(e) => return (1, vec![format!("{what}: cannot make the trackers: {e}")]),
    };
    let (mut checks, mut failures) = compare_frames(&what, &scene.frames, &mut cpu, &mut on_gpu);
    if scene.host_clusters {
        checks += 1;
        if on_gpu.host_clusters() == 0 {
            failures.push(format!("{what}: no cluster was left to the host"));
        }
    }
    checks += 1;
    if on_gpu.greedy_clusters() != cpu.greedy_clusters() {
        failures.push(format!(
            "{what}: {} clusters paired greedily, the CPU's {}",
            on_gpu.greedy_clusters(),
            cpu.greedy_clusters()
        ));
    }
    (checks, failures)
}
