//! Tracker cost per frame in clutter: many blobs that move a little, appear and disappear, as
//! a bad threshold or a noisy scene gives. Prints the time of `Tracker::update` per frame, the
//! detections and the active tracks.
//!
//! cargo run --profile ci --example track_clutter [blobs] [frames]
//!     blobs: detections per frame on a 1920×1080 frame (default 15000), frames (default 60).
//!     Each blob drifts ~0.5 px per frame; 10% of them vanish every frame and as many new ones
//!     appear elsewhere; areas 2-60 px.
//! cargo run --profile ci --example track_clutter random WxH [frames]
//!     The clutter scene `synthetic:random` (the papers' random images, a new image every
//!     frame) labeled by the CPU labeler, as the pipeline tracks it (default 1920x1080, 33
//!     frames: every density and granularity once), thresholded at 127, or by
//!     `--threshold=SPEC` as the bench's clutter scene is (`--threshold=background:5`).
//! cargo run --profile ci --example track_clutter markers[:OPTIONS] WxH [frames]
//!     The `markers` scene (`synthetic:markers`: 16 moving square markers over clutter, blur
//!     and noise) thresholded with the default threshold and labeled by the CPU labeler, as
//!     `bench --pipeline --scenes markers` tracks it (default 1920x1080, 60 frames); options
//!     as the source takes them (`markers:DICT_4X4_250,count=100`: the bench's `markers:100`).
//! cargo run --profile ci --example track_clutter particles[:N] [frames]
//!     The `particles` scene (N Brownian particles, default 10000, on 1920×1080), thresholded
//!     by `background:5` and labeled by the CPU labeler, tracked by the rule the bench's
//!     particle scenes link with: the subnetwork rule within the search range of the last
//!     position (default 30 frames).
//!
//! Also prints a digest of every track ID the tracker gave (FNV-1a over the frames' ID lists):
//! two builds or thread counts that associate alike print the same digest.
//! With `--phases` (anywhere among the arguments) it prints the mean time of each phase of
//! `Tracker::update` as well (`Tracker::time_phases`); with `--per-frame`, each frame's
//! detections, active tracks and time (where the slow frames are), and with both, each
//! frame's phases in its fastest pass. With `--gpu` the same frames are tracked by the GPU
//! tracker as well (`track::gpu::GpuTracker`, built with the `cuda` feature), timed alike, with
//! its own digest: the CPU's when the two give the same IDs (and its frames with
//! `--per-frame`).

use markerscope::ccl::cpu::lsl::Lsl;
use markerscope::ccl::{Connectivity, Labeler, Want};
use markerscope::source::fiducial_scene::{FiducialOptions, FiducialScene};
use markerscope::source::particle_scene::{ParticleOptions, ParticleScene};
use markerscope::source::synthetic::random_frame;
use markerscope::threshold::apply;
use markerscope::threshold::spec::ThresholdSpec;
use markerscope::track::{Detection, Tracker, TrackerConfig};
use rand_mt::Mt64;
use std::time::Instant;

#[path = "cpu_time.rs"]
mod cpu_time;
use cpu_time::process_cpu_ms;

type AnyResult<T> = Result<T, Box<dyn std::error::Error>>;

fn uniform(rng: &mut Mt64, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// A round blob at (x, y), its centroid with sub-pixel noise as a labeler's centroids have.
fn blob(rng: &mut Mt64, x: f64, y: f64, area: f64) -> Detection {
    let r = (area / std::f64::consts::PI).sqrt();
    Detection {
        x: x + uniform(rng, -0.1, 0.1),
        y: y + uniform(rng, -0.1, 0.1),
        area,
        bbox: [x - r, y - r, x + r, y + r],
    }
}

/// `n` drifting blobs per frame, 10% replaced every frame.
fn blobs(n: usize, frames: usize) -> Vec<Vec<Detection>> {
    let (w, h) = (1920.0, 1080.0);
    let mut rng = Mt64::new(5);
    let mut state: Vec<(f64, f64, f64)> = Vec::new();
    let mut out = Vec::with_capacity(frames);
    for _ in 0..frames {
        for s in state.iter_mut() {
            if uniform(&mut rng, 0.0, 1.0) < 0.1 {
                *s = (uniform(&mut rng, 0.0, w), uniform(&mut rng, 0.0, h), s.2);
            } else {
                s.0 = (s.0 + uniform(&mut rng, -0.5, 0.5)).clamp(0.0, w - 1.0);
                s.1 = (s.1 + uniform(&mut rng, -0.5, 0.5)).clamp(0.0, h - 1.0);
            }
        }
        while state.len() < n {
            let area = uniform(&mut rng, 2.0, 60.0).round();
            state.push((uniform(&mut rng, 0.0, w), uniform(&mut rng, 0.0, h), area));
        }
        let mut dets: Vec<Detection> = state
            .iter()
            .map(|&(x, y, area)| blob(&mut rng, x, y, area))
            .collect();
        // In the order a labeler gives them: by the top, then the left of their boxes.
        dets.sort_by(|a, b| {
            (a.bbox[1].floor(), a.bbox[0].floor())
                .partial_cmp(&(b.bbox[1].floor(), b.bbox[0].floor()))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        out.push(dets);
    }
    out
}

/// The `synthetic:random` frames, labeled (8-connectivity, every component kept).
fn random(
    w: u32,
    h: u32,
    frames: usize,
    threshold: &ThresholdSpec,
) -> AnyResult<Vec<Vec<Detection>>> {
    let mut lsl = Lsl::new();
    let mut out = Vec::with_capacity(frames);
    for f in 0..frames as u64 {
        let grey = random_frame(w, h, f)?;
        let mask = apply(&grey, threshold, false)?;
        let labeling = lsl.label(&mask, Connectivity::Eight, Want::Stats)?;
        let stats = labeling.stats.ok_or("the labeler returned no statistics")?;
        out.push(stats.iter().map(Detection::from_stats).collect());
    }
    Ok(out)
}

/// The `synthetic:markers` frames, thresholded by the default threshold and labeled
/// (8-connectivity, every component kept).
fn markers(
    options: FiducialOptions,
    w: u32,
    h: u32,
    frames: usize,
) -> AnyResult<Vec<Vec<Detection>>> {
    let scene = FiducialScene::new(options, w, h)?;
    let mut lsl = Lsl::new();
    let mut out = Vec::with_capacity(frames);
    for f in 0..frames as u64 {
        let mask = apply(&scene.render(f), &ThresholdSpec::default(), false)?;
        let labeling = lsl.label(&mask, Connectivity::Eight, Want::Stats)?;
        let stats = labeling.stats.ok_or("the labeler returned no statistics")?;
        out.push(stats.iter().map(Detection::from_stats).collect());
    }
    Ok(out)
}

/// The `particles` scene's frames, thresholded by `background:5` and labeled (8-connectivity,
/// every component kept), and the tracker settings its particles are linked with in the bench.
fn particles(count: u32, frames: usize) -> AnyResult<(Vec<Vec<Detection>>, TrackerConfig)> {
    let options = ParticleOptions {
        count,
        ..ParticleOptions::default()
    };
    let mut scene = ParticleScene::new(options, 1920, 1080)?;
    let threshold: ThresholdSpec = "background:5".parse()?;
    let mut lsl = Lsl::new();
    let mut out = Vec::with_capacity(frames);
    for _ in 0..frames {
        let mask = apply(&scene.render()?, &threshold, false)?;
        let labeling = lsl.label(&mask, Connectivity::Eight, Want::Stats)?;
        let stats = labeling.stats.ok_or("the labeler returned no statistics")?;
        out.push(stats.iter().map(Detection::from_stats).collect());
        scene.step();
    }
    Ok((out, TrackerConfig::linking(options.search_range_px())))
}

/// The options of a `markers[:OPTIONS]` argument (empty: the defaults), if it is one.
fn marker_options(arg: &str) -> Option<&str> {
    match arg.strip_prefix("markers")? {
        "" => Some(""),
        rest => rest.strip_prefix(':'),
    }
}

/// A frame size WxH.
fn size_of(arg: Option<&String>) -> AnyResult<(u32, u32)> {
    let size = arg.map_or("1920x1080", |s| s.as_str());
    Ok(size
        .split_once('x')
        .and_then(|(w, h)| Some((w.parse().ok()?, h.parse().ok()?)))
        .ok_or_else(|| format!("expected a size WxH, got '{size}'"))?)
}

fn main() -> AnyResult<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let time_phases = args.iter().any(|a| a == "--phases");
    let per_frame = args.iter().any(|a| a == "--per-frame");
    let on_gpu = args.iter().any(|a| a == "--gpu");
    let threshold = match args.iter().find_map(|a| a.strip_prefix("--threshold=")) {
        Some(spec) => spec.parse::<ThresholdSpec>()?,
        None => ThresholdSpec::Fixed(127),
    };
    args.retain(|a| {
        a != "--phases" && a != "--per-frame" && a != "--gpu" && !a.starts_with("--threshold=")
    });
    let count = |s: Option<&String>, default: usize| -> AnyResult<usize> {
        match s {
            Some(s) => Ok(s
                .parse()
                .map_err(|_| format!("expected a count, got '{s}'"))?),
            None => Ok(default),
        }
    };
    let mut config = TrackerConfig::pipeline();
    let (what, sequence) = if args.first().is_some_and(|a| a == "random") {
        let (w, h) = size_of(args.get(1))?;
        let frames = count(args.get(2), 33)?;
        (
            format!("synthetic:random {w}x{h}, threshold {threshold}"),
            random(w, h, frames, &threshold)?,
        )
    } else if let Some(n) = args.first().and_then(|a| a.strip_prefix("particles")) {
        let n = match n.strip_prefix(':') {
            Some(n) => n
                .parse()
                .map_err(|_| format!("expected a count, got '{n}'"))?,
            None if n.is_empty() => 10_000,
            None => return Err(format!("expected particles[:N], got '{}'", args[0]).into()),
        };
        let frames = count(args.get(1), 30)?;
        let (sequence, particle_config) = particles(n, frames)?;
        config = particle_config;
        (format!("synthetic:particles:{n} 1920x1080"), sequence)
    } else if let Some(options) = args.first().and_then(|a| marker_options(a)) {
        let options = FiducialOptions::parse(options)?;
        let (w, h) = size_of(args.get(1))?;
        let frames = count(args.get(2), 60)?;
        (
            format!("synthetic:{} {w}x{h}", args[0]),
            markers(options, w, h, frames)?,
        )
    } else {
        let (n, frames) = (count(args.first(), 15_000)?, count(args.get(1), 60)?);
        (format!("{n} drifting blobs"), blobs(n, frames))
    };
    if sequence.is_empty() {
        return Err("frames must be at least 1".into());
    }

    // Several passes; each frame's best time (other processes on the machine only add time).
    const PASSES: usize = 3;
    let frames = sequence.len();
    // The first frames only create tracks; time from the third on.
    let skip = 2.min(frames - 1);
    let mut best = vec![f64::INFINITY; frames];
    let mut best_cpu = vec![f64::INFINITY; frames];
    let mut active = vec![0usize; frames];
    // Of the active tracks: confirmed ones, and merged ones (riding on a larger component).
    let (mut confirmed, mut merged) = (vec![0usize; frames], vec![0usize; frames]);
    let mut digest = Fnv1a::new();
    // Per phase, in order: name and the sum over the timed frames of every pass.
    let mut phases: Vec<(&'static str, f64)> = Vec::new();
    // Per frame: the phases of its best pass (`--phases --per-frame`).
    let mut best_phases: Vec<Vec<(&'static str, f64)>> = vec![Vec::new(); frames];
    for pass in 0..PASSES {
        let mut tracker = Tracker::new(config)?;
        tracker.time_phases(time_phases);
        for (f, dets) in sequence.iter().enumerate() {
            let (start, start_cpu) = (Instant::now(), process_cpu_ms());
            let ids = tracker.update(f as u64, dets);
            tracker.drain_finished();
            let wall = start.elapsed().as_secs_f64() * 1e3;
            if wall < best[f] {
                best_phases[f] = tracker.phase_times().to_vec();
            }
            best[f] = best[f].min(wall);
            best_cpu[f] = best_cpu[f].min(process_cpu_ms() - start_cpu);
            active[f] = tracker.active().len();
            confirmed[f] = tracker.active().iter().filter(|t| t.confirmed).count();
            merged[f] = tracker.active().iter().filter(|t| t.merged).count();
            if pass == 0 {
                digest.add(&ids);
            }
            if f >= skip {
                add_phases(&mut phases, tracker.phase_times());
            }
            std::hint::black_box(ids);
        }
    }
    // Mean, median, 99th percentile (nearest rank) and maximum.
    let steady = |v: &[f64]| -> (f64, f64, f64, f64) {
        let mut sorted = v[skip..].to_vec();
        sorted.sort_by(f64::total_cmp);
        let (n, mean) = (
            sorted.len(),
            sorted.iter().sum::<f64>() / sorted.len() as f64,
        );
        let p99 = sorted[(n * 99).div_ceil(100).max(1) - 1];
        (mean, sorted[n / 2], p99, sorted[n - 1])
    };
    let mean_of = |v: &[usize]| v[skip..].iter().sum::<usize>() as f64 / (frames - skip) as f64;
    let dets: Vec<usize> = sequence.iter().map(Vec::len).collect();
    let n = mean_of(&dets);
    println!(
        "{what}, {frames} frames, {} rayon threads: {n:.0} detections and {:.0} active tracks \
         ({:.0} confirmed, {:.0} merged) per frame",
        rayon::current_num_threads(),
        mean_of(&active),
        mean_of(&confirmed),
        mean_of(&merged)
    );
    println!("  Tracker::update, frames {skip}.., best of {PASSES} passes per frame:");
    for (name, times) in [("wall time", &best), ("process CPU", &best_cpu)] {
        let (mean, median, p99, max) = steady(times);
        println!(
            "    {name:12} mean {mean:.3} ms/frame, median {median:.3}, p99 {p99:.3}, max {max:.3}; \
             {:.1} ns per detection",
            mean * 1e6 / n
        );
    }
    if time_phases {
        let timed = (PASSES * (frames - skip)) as f64;
        let total: f64 = phases.iter().map(|p| p.1).sum::<f64>() / timed;
        println!(
            "  phases (wall time, mean over the timed frames of every pass; {total:.3} ms in all):"
        );
        for (name, ms) in &phases {
            let ms = ms / timed;
            println!("    {name:20} {ms:7.3} ms  {:4.1} %", 100.0 * ms / total);
        }
    }
    if per_frame {
        println!("  per frame: frame, detections, active tracks, best wall time (ms)");
        for f in 0..frames {
            println!("    {f:4} {:7} {:7} {:8.3}", dets[f], active[f], best[f]);
            print_phases(&best_phases[f]);
        }
    }
    println!("  IDs digest {:016x}", digest.0);
    if on_gpu {
        gpu_passes(&sequence, config, skip, PASSES, time_phases, per_frame)?;
    }
    Ok(())
}

/// The GPU tracker over the same frames: each frame's best time of `passes`, and the digest.
#[cfg(feature = "cuda")]
fn gpu_passes(
    sequence: &[Vec<Detection>],
    config: TrackerConfig,
    skip: usize,
    passes: usize,
    time_phases: bool,
    per_frame: bool,
) -> AnyResult<()> {
    use markerscope::gpu::Gpu;
    use markerscope::track::gpu::GpuTracker;
    use markerscope::tuning::GpuTuning;
    use std::sync::Arc;
    let gpu = Arc::new(Gpu::open(0, &GpuTuning::default())?);
    let mut best = vec![f64::INFINITY; sequence.len()];
    let mut digest = Fnv1a::new();
    // Per phase, in order: name and the sum over the timed frames of every pass.
    let mut phases: Vec<(&'static str, f64)> = Vec::new();
    // Per frame: the phases of its best pass (`--phases --per-frame`).
    let mut best_phases: Vec<Vec<(&'static str, f64)>> = vec![Vec::new(); sequence.len()];
    for pass in 0..passes {
        let mut tracker = GpuTracker::new(gpu.clone(), config)?;
        tracker.time_phases(time_phases);
        for (f, dets) in sequence.iter().enumerate() {
            let start = Instant::now();
            let ids = tracker.update(f as u64, dets)?;
            tracker.drain_ended().for_each(drop);
            let wall = start.elapsed().as_secs_f64() * 1e3;
            if wall < best[f] {
                best_phases[f] = tracker.phase_times().to_vec();
            }
            best[f] = best[f].min(wall);
            if pass == 0 {
                digest.add(&ids);
            }
            if f >= skip {
                add_phases(&mut phases, tracker.phase_times());
            }
        }
    }
    let mut sorted = best[skip..].to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let mean = sorted.iter().sum::<f64>() / n as f64;
    let p99 = sorted[(n * 99).div_ceil(100).max(1) - 1];
    println!(
        "  GpuTracker::update on {}, best of {passes} passes per frame:",
        gpu.description()
    );
    println!(
        "    wall time    mean {mean:.3} ms/frame, median {:.3}, p99 {p99:.3}, max {:.3}",
        sorted[n / 2],
        sorted[n - 1]
    );
    if time_phases {
        let timed = (passes * (sequence.len() - skip)) as f64;
        println!(
            "  phases (mean over the timed frames; the kernels' by events, beside the host's):"
        );
        for (name, ms) in &phases {
            println!("    {name:30} {:7.3} ms", ms / timed);
        }
    }
    if per_frame {
        println!("  per frame: frame, detections, best wall time (ms)");
        for (f, dets) in sequence.iter().enumerate() {
            println!("    {f:4} {:7} {:8.3}", dets.len(), best[f]);
            print_phases(&best_phases[f]);
        }
    }
    println!("  GPU IDs digest {:016x}", digest.0);
    Ok(())
}

#[cfg(not(feature = "cuda"))]
fn gpu_passes(
    _: &[Vec<Detection>],
    _: TrackerConfig,
    _: usize,
    _: usize,
    _: bool,
    _: bool,
) -> AnyResult<()> {
    Err("--gpu needs a build with the cuda feature".into())
}

/// A frame's phases on a line of their own (`--phases --per-frame`), if it has them.
fn print_phases(phases: &[(&'static str, f64)]) {
    if !phases.is_empty() {
        let each: Vec<String> = phases
            .iter()
            .map(|(name, ms)| format!("{name} {ms:.3}"))
            .collect();
        println!("           {}", each.join(", "));
    }
}

/// Adds a frame's phase times to the sums per phase (in order; a phase not seen yet is inserted
/// at its place).
fn add_phases(sums: &mut Vec<(&'static str, f64)>, frame: &[(&'static str, f64)]) {
    // By name: frames take different phases (one without detections takes fewer); a phase
    // not seen before goes after the one before it.
    let mut at = 0;
    for &(name, ms) in frame {
        match sums.iter().position(|p| p.0 == name) {
            Some(k) => {
                sums[k].1 += ms;
                at = k + 1;
            }
            None => {
                sums.insert(at, (name, ms));
                at += 1;
            }
        }
    }
}

/// FNV-1a, 64 bits.
struct Fnv1a(u64);

impl Fnv1a {
    fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    fn add(&mut self, ids: &[u64]) {
        for b in ids
            .iter()
            .chain([&u64::MAX])
            .flat_map(|id| id.to_le_bytes())
        {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
}
