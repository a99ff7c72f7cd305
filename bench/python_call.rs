//! The Rust call that the Python package's per-call overhead is measured against
//! (`python/bench/overhead.py`), from a plain Rust program: the `lsl` labeler's `label` on the
//! 1920×1080 random frame (d = 0.5, g = 4, seed 1; the papers' MT19937 blocks, bit-identical
//! to `bench/peers/peers.py`'s), with the label image and statistics (what
//! `connected_components_with_stats` asks for) and with the statistics alone
//! (`component_stats`); each the median of the wall times of the calls, the results freed
//! inside the timing as a discarded Python result is.
//!
//! cargo run --profile ci --example python_call [calls]
//! (default 1000 calls of each)

use markerscope::ccl::cpu::lsl::Lsl;
use markerscope::ccl::{Connectivity, Labeler, Want};
use markerscope::frame::random_image::image_seed;
use markerscope::frame::random_image::{generate, RandomImageSpec};
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let calls: usize = match std::env::args().nth(1) {
        Some(a) => a
            .parse()
            .map_err(|_| anyhow::anyhow!("calls: expected a positive integer, got '{a}'"))?,
        None => 1000,
    };
    let (density, granularity) = (0.5, 4);
    let mask = generate(&RandomImageSpec {
        width: 1920,
        height: 1080,
        density,
        granularity,
        seed: image_seed(1, density, granularity),
    })?;
    let connectivity = Connectivity::Eight;
    let count = Lsl::new().label(&mask, connectivity, Want::Stats)?.count;
    println!(
        "{count} components (n = {} with the background row, as the Python calls count)",
        count + 1
    );
    for (name, want) in [
        ("connected_components_with_stats", Want::Both),
        ("component_stats", Want::Stats),
    ] {
        let mut lsl = Lsl::new();
        for _ in 0..20 {
            lsl.label(&mask, connectivity, want)?;
        }
        let times = (0..calls.max(1))
            .map(|_| {
                let start = Instant::now();
                drop(lsl.label(&mask, connectivity, want)?);
                Ok(start.elapsed().as_secs_f64() * 1e6)
            })
            .collect::<anyhow::Result<Vec<f64>>>()?;
        println!(
            "{name}'s Rust call on a 1920x1080 frame (lsl, 8-connectivity, median of {}): {:.1} µs",
            times.len(),
            median(times)
        );
    }
    Ok(())
}
