//! What the synthetic sources cost per frame, and what the thresholds find in the demo scene.
//!
//! For 1280×720, 1920×1080 and 3840×2160: the time to make one frame of `synthetic` (the
//! moving markers), of `synthetic:random` and of `synthetic:markers` (16 square fiducials, and
//! 100; drawn on every core: its CPU column is the calling thread's share only), through
//! `SyntheticSource::next_frame`, as the
//! median over the frames of this thread's CPU time (stays meaningful on a busy machine) and
//! of wall time; then the mean (min..max) number of 8-connected components per demo frame with
//! Otsu, triangle and the default threshold, beside the mean number of visible markers
//! (touching markers make one component).
//!
//! cargo run --profile ci --example synthetic_cost [frames]
//! (default 120 frames per size)

use markerscope::ccl::cpu::lsl::Lsl;
use markerscope::ccl::{Connectivity, Labeler, Want};
use markerscope::source::fiducial_scene::FiducialOptions;
use markerscope::source::synthetic::{
    random_frame, MarkerScene, SyntheticSource, DEFAULT_SEED, RANDOM_FRAMES,
};
use markerscope::source::{FrameSource, SyntheticKind};
use markerscope::threshold;
use markerscope::threshold::spec::ThresholdSpec;
use std::time::Instant;

/// CPU time of this thread (ms).
#[cfg(target_os = "linux")]
fn thread_cpu_ms() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 * 1e-6
}

#[cfg(not(target_os = "linux"))]
fn thread_cpu_ms() -> f64 {
    f64::NAN
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median (CPU ms, wall ms) per frame of `frames` frames from a fresh source, after one
/// frame to warm up (and, for the random source, to prepare its images).
fn cost(
    kind: SyntheticKind,
    w: u32,
    h: u32,
    frames: usize,
) -> Result<(f64, f64), Box<dyn std::error::Error>> {
    let mut source = SyntheticSource::new(kind, w, h, false)?;
    source.next_frame()?;
    let (mut cpu, mut wall) = (Vec::new(), Vec::new());
    for _ in 0..frames {
        let (c0, t0) = (thread_cpu_ms(), Instant::now());
        let frame = source.next_frame()?.ok_or("the source ended")?;
        cpu.push(thread_cpu_ms() - c0);
        wall.push(t0.elapsed().as_secs_f64() * 1e3);
        std::hint::black_box(frame);
    }
    Ok((median(cpu), median(wall)))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let frames: usize = match std::env::args().nth(1) {
        Some(s) => s
            .parse()
            .map_err(|_| format!("frames must be a count, got '{s}'"))?,
        None => 120,
    };
    if frames == 0 {
        return Err("frames must be at least 1".into());
    }
    let default = ThresholdSpec::default();
    let specs = [ThresholdSpec::Otsu, ThresholdSpec::Triangle, default];
    println!("frames per size: {frames}; default threshold: {default}");
    for (w, h) in [(1280, 720), (1920, 1080), (3840, 2160)] {
        let (mc, mw) = cost(SyntheticKind::Markers, w, h, frames)?;
        let (rc, rw) = cost(SyntheticKind::Random, w, h, frames)?;
        // The random source makes its images at its first frame.
        let t0 = Instant::now();
        SyntheticSource::new(SyntheticKind::Random, w, h, false)?.next_frame()?;
        let first = t0.elapsed().as_secs_f64() * 1e3;
        println!(
            "{w}x{h}: synthetic {mc:.3} ms CPU ({mw:.3} ms wall) per frame; synthetic:random \
             {rc:.4} ms CPU ({rw:.4} ms wall), its first frame {first:.1} ms wall"
        );
        let sixteen = FiducialOptions::default();
        let hundred = FiducialOptions {
            dictionary: "DICT_4X4_250",
            count: 100,
            ..FiducialOptions::default()
        };
        let (fc, fw) = cost(SyntheticKind::Fiducials(sixteen), w, h, frames)?;
        let (hc, hw) = cost(SyntheticKind::Fiducials(hundred), w, h, frames)?;
        println!(
            "  synthetic:markers: 16 markers {fw:.3} ms wall ({fc:.3} ms CPU of this thread) per \
             frame, 100 markers {hw:.3} ms wall ({hc:.3} ms)"
        );
        let scene = MarkerScene::new(w, h, DEFAULT_SEED)?;
        let mut lsl = Lsl::new();
        let mut visible = 0u64;
        // Per spec: sum, min, max of the component count per frame, and the sum of the levels.
        let mut counts = [(0u64, u32::MAX, 0u32); 3];
        let mut levels = [0u64; 3];
        for f in 0..frames as u64 {
            let grey = scene.render(f);
            visible += scene.truth(f).iter().filter(|m| m.visible).count() as u64;
            for (i, (spec, (sum, lo, hi))) in specs.iter().zip(counts.iter_mut()).enumerate() {
                levels[i] +=
                    threshold::levels::global_level(&grey, spec, false).unwrap_or(0) as u64;
                let mask = threshold::apply(&grey, spec, false)?;
                let n = lsl.label(&mask, Connectivity::Eight, Want::Stats)?.count;
                *sum += n as u64;
                *lo = (*lo).min(n);
                *hi = (*hi).max(n);
            }
        }
        let mean = |s: u64| s as f64 / frames as f64;
        let found: Vec<String> = specs
            .iter()
            .zip(&counts)
            .zip(&levels)
            .map(|((spec, (sum, lo, hi)), level)| {
                format!(
                    "{spec} {:.1} ({lo}..{hi}, mean level {:.1})",
                    mean(*sum),
                    mean(*level)
                )
            })
            .collect();
        println!(
            "  components per demo frame: {}; visible markers {:.1}",
            found.join(", "),
            mean(visible)
        );
        // The random source's images, labeled once each.
        let (mut sum, mut most) = (0u64, 0u32);
        for k in 0..RANDOM_FRAMES {
            let grey = random_frame(w, h, k)?;
            let mask = threshold::apply(&grey, &ThresholdSpec::Fixed(127), false)?;
            let n = lsl.label(&mask, Connectivity::Eight, Want::Stats)?.count;
            sum += n as u64;
            most = most.max(n);
        }
        println!(
            "  synthetic:random components per image: mean {:.0}, most {most}",
            sum as f64 / RANDOM_FRAMES as f64
        );
    }
    Ok(())
}
