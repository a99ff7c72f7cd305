//! Host-to-host latency of one marker frame: upload + label + analyze + download of the
//! statistics, for each GPU algorithm, with byte and bit-packed upload. The frame is what a
//! fiducial tracker sees: 200 bright discs (radius 6) on a dark 1920×1080 background.
//! (`markerscope bench --latency` uses the papers' random images, which hold 10⁴–10⁵ components.)
//!
//! Each algorithm runs at 4-connectivity, or at 8 if it has only that (the discs are apart, so
//! both give 200 components).
//!
//! cargo build --release --no-default-features --features cuda --example marker_latency
//! ./target/release/examples/marker_latency [frames] [algorithm,algorithm,...]

use markerscope::ccl::{algorithms, Backend, Backends, Connectivity, LabelRequest, Mask, Want};
use markerscope::frame::image::BinaryImage;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let frames: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let only: Option<Vec<String>> = std::env::args()
        .nth(2)
        .map(|list| list.split(',').map(str::to_string).collect());
    let backends = Backends::detect_tuned(&markerscope::tuning::Tuning::from_env()?);
    let Some(gpu) = backends.gpu_name() else {
        return Err(format!(
            "no GPU: {}",
            backends.cuda_unavailable_reason().unwrap_or_default()
        )
        .into());
    };
    println!("{gpu}");
    let frame = BinaryImage::from_fn(1920, 1080, |x, y| {
        let (cx, cy) = ((x / 96) * 96 + 48, (y / 108) * 108 + 54);
        let (dx, dy) = (x as i64 - cx as i64, y as i64 - cy as i64);
        dx * dx + dy * dy <= 36
    })?;
    let packed = frame.pack();
    let chosen = algorithms().iter().filter(|a| {
        a.backend == Backend::Cuda
            && only
                .as_ref()
                .is_none_or(|names| names.iter().any(|n| n == a.name))
    });
    for info in chosen {
        let conn = if info.supports(Connectivity::Four) {
            Connectivity::Four
        } else {
            Connectivity::Eight
        };
        let mut labeler = backends.create(info.name, conn)?;
        for use_packed in [false, true] {
            let mut run = || -> Result<_, Box<dyn std::error::Error>> {
                let mask = if use_packed {
                    Mask::Packed(&packed)
                } else {
                    Mask::Bytes(&frame)
                };
                Ok(labeler.label_mask(LabelRequest::new(mask, conn, Want::Stats))?)
            };
            let mut us = Vec::with_capacity(frames);
            // Per-step GPU times (CUDA events), summed over the measured frames.
            let mut steps: Vec<(String, f64)> = Vec::new();
            for i in 0..frames + 50 {
                let t = Instant::now();
                let out = run()?;
                if i >= 50 {
                    us.push(t.elapsed().as_secs_f64() * 1e6);
                    for (k, s) in out.timings.iter().enumerate() {
                        match steps.get_mut(k) {
                            Some(acc) => acc.1 += s.ms,
                            None => steps.push((s.step.clone(), s.ms)),
                        }
                    }
                }
                if out.count != 200 {
                    return Err(
                        format!("{} found {} markers, expected 200", info.name, out.count).into(),
                    );
                }
            }
            us.sort_by(f64::total_cmp);
            println!(
                "{:8} {}-conn {:6} upload: median {:6.1} µs  p99 {:6.1} µs  ({} frames, 200 components)",
                info.name,
                conn.number(),
                if use_packed { "packed" } else { "bytes" },
                us[us.len() / 2],
                us[us.len() * 99 / 100],
                frames
            );
            let mean_steps: Vec<String> = steps
                .iter()
                .map(|(name, ms)| format!("{name} {:.1}", ms * 1e3 / frames as f64))
                .collect();
            println!("        mean step µs: {}", mean_steps.join(", "));
        }
    }
    Ok(())
}
