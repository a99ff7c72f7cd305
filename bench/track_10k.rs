//! Tracker cost per frame at 10,000 markers: 10⁴ markers with damped random accelerations on a
//! 1920×1080 frame (mean spacing ~14 px), detections = truth + 0.1 px noise, 1% of markers
//! occluded for 2-10 frames at any time. Prints the time of `Tracker::update` per frame and the
//! MOT counts against the truth.
//!
//! cargo run --release --no-default-features --example track_10k [markers] [frames]
//! (default 10000 markers, 200 frames; RAYON_NUM_THREADS=1 for the cost on one core)

use markerscope::track::score::{MotScorer, TrackPoint, TruthPoint};
use markerscope::track::{Detection, Tracker, TrackerConfig};
use rand_mt::Mt64;
use std::time::Instant;

#[path = "cpu_time.rs"]
mod cpu_time;
use cpu_time::process_cpu_ms;

fn uniform(rng: &mut Mt64, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

fn gauss(rng: &mut Mt64, sigma: f64) -> f64 {
    let s: f64 = (0..4).map(|_| uniform(rng, -0.5, 0.5)).sum();
    s * sigma * 3f64.sqrt()
}

struct Marker {
    x: f64,
    y: f64,
    vx: f64,
    vy: f64,
    hidden_for: u64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let arg = |i: usize, default: usize| -> Result<usize, Box<dyn std::error::Error>> {
        match std::env::args().nth(i) {
            Some(s) => Ok(s
                .parse()
                .map_err(|_| format!("argument {i} must be a count, got '{s}'"))?),
            None => Ok(default),
        }
    };
    let (n, frames) = (arg(1, 10_000)?, arg(2, 200)?);
    if n == 0 || frames == 0 {
        return Err("markers and frames must be at least 1".into());
    }
    let (w, h) = (1920.0, 1080.0);
    let mut rng = Mt64::new(1);
    let mut markers: Vec<Marker> = (0..n)
        .map(|_| Marker {
            x: uniform(&mut rng, 0.0, w),
            y: uniform(&mut rng, 0.0, h),
            vx: gauss(&mut rng, 1.5),
            vy: gauss(&mut rng, 1.5),
            hidden_for: 0,
        })
        .collect();

    // The sequence first, so that the timed loop runs the tracker alone.
    let mut sequence: Vec<(Vec<TruthPoint>, Vec<Detection>)> = Vec::with_capacity(frames);
    for _ in 0..frames {
        let mut truth = Vec::with_capacity(n);
        let mut dets = Vec::with_capacity(n);
        for (i, m) in markers.iter_mut().enumerate() {
            m.vx = 0.95 * m.vx + gauss(&mut rng, 0.3);
            m.vy = 0.95 * m.vy + gauss(&mut rng, 0.3);
            m.x += m.vx;
            m.y += m.vy;
            if !(0.0..w).contains(&m.x) {
                m.vx = -m.vx;
                m.x = m.x.clamp(0.0, w - 1.0);
            }
            if !(0.0..h).contains(&m.y) {
                m.vy = -m.vy;
                m.y = m.y.clamp(0.0, h - 1.0);
            }
            if m.hidden_for == 0 && uniform(&mut rng, 0.0, 1.0) < 0.002 {
                m.hidden_for = 2 + rng.next_u64() % 9;
            }
            if m.hidden_for > 0 {
                m.hidden_for -= 1;
                continue;
            }
            truth.push(TruthPoint {
                id: i as u64,
                x: m.x,
                y: m.y,
            });
            let (x, y) = (m.x + gauss(&mut rng, 0.1), m.y + gauss(&mut rng, 0.1));
            dets.push(Detection::point(x, y, 50.0));
        }
        sequence.push((truth, dets));
    }

    // Several passes; each frame's best time (other processes on the machine only add time).
    const PASSES: usize = 3;
    let mut best = vec![f64::INFINITY; frames];
    let mut best_cpu = vec![f64::INFINITY; frames];
    let mut scorer = MotScorer::new(3.0);
    for pass in 0..PASSES {
        let mut tracker = Tracker::new(TrackerConfig::default())?;
        for (f, (truth, dets)) in sequence.iter().enumerate() {
            let (start, start_cpu) = (Instant::now(), process_cpu_ms());
            let ids = tracker.update(f as u64, dets);
            best[f] = best[f].min(start.elapsed().as_secs_f64() * 1e3);
            best_cpu[f] = best_cpu[f].min(process_cpu_ms() - start_cpu);
            if pass == 0 {
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
        }
    }
    // The first frames only create tracks; time the steady state.
    let summary = |times: &[f64]| -> String {
        let mut steady: Vec<f64> = times
            .iter()
            .skip(10.min(times.len() - 1))
            .copied()
            .collect();
        steady.sort_by(f64::total_cmp);
        let mean = steady.iter().sum::<f64>() / steady.len() as f64;
        let pct = |p: f64| steady[((steady.len() - 1) as f64 * p).round() as usize];
        format!(
            "mean {mean:.3} ms/frame, median {:.3}, p99 {:.3}, max {:.3}",
            pct(0.5),
            pct(0.99),
            pct(1.0)
        )
    };
    println!(
        "{n} markers, {frames} frames, Tracker::update (frames 10.., best of {PASSES} passes per frame):"
    );
    println!("  wall time:   {}", summary(&best));
    println!("  process CPU: {}", summary(&best_cpu));
    println!("{}", scorer.counts());
    Ok(())
}
