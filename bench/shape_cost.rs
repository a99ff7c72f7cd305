//! What the shape descriptors cost beside the labeling (CCA) they come with, per algorithm and
//! connectivity.
//!
//! On the papers' random images (granularity 4, densities 0.1 … 0.9, seed 1) of SIZE² pixels,
//! each algorithm runs host to host, best of REPEAT runs per image:
//! - `stats`: `label_packed` with `Want::Stats` (what a frame costs without descriptors);
//! - `shapes`: `label_shapes` with `Want::Stats` for every component (descriptors asked for);
//!
//! and the least, over the runs, of the step times they report (CUDA events on the GPU). The CCA time is the sum of the
//! steps that are not transfers; the descriptors' true extra cost is the CCA time of `shapes`
//! (its descriptor step, the label image it needs, or its fused accumulation) minus that of
//! `stats`. Printed per density: ms of each, the extra as a percentage of the CCA, and the steps
//! of both runs.
//!
//! cargo run --profile ci --example shape_cost [SIZE] [REPEAT] [ALGORITHMS]
//! (default 8192, 5 runs, lsl plus flsl_cdb and ha8 when a GPU is usable; ALGORITHMS
//! comma-separated)

use markerscope::ccl::{
    keep_all, Backends, Connectivity, LabelRequest, Labeler, Labeling, Mask, ShapeRows, StepTime,
    Want,
};
use markerscope::frame::random_image::{generate, RandomImageSpec};
use std::time::Instant;

/// Milliseconds of the steps that are not transfers.
fn cca_ms(steps: &[StepTime]) -> f64 {
    steps
        .iter()
        .filter(|s| !s.step.starts_with("upload") && !s.step.starts_with("download"))
        .map(|s| s.ms)
        .sum()
}

/// Over `repeat` runs of `run`: the least wall ms, the least CCA ms (`cca_ms`, each taken
/// apart: the two minima may come from different runs), the component count and the steps of
/// the run with the least CCA ms.
fn best(
    repeat: u32,
    mut run: impl FnMut() -> markerscope::Result<Labeling>,
) -> markerscope::Result<(f64, f64, u32, Vec<StepTime>)> {
    let (mut wall, mut cca, mut count, mut steps) = (f64::INFINITY, f64::INFINITY, 0, Vec::new());
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        let labeling = run()?;
        wall = wall.min(t.elapsed().as_secs_f64() * 1e3);
        let ms = cca_ms(&labeling.timings);
        if ms < cca {
            cca = ms;
            steps = labeling.timings;
        }
        count = labeling.count;
    }
    Ok((wall, cca, count, steps))
}

/// "name ms, …" of the steps that are not transfers.
fn step_list(steps: &[StepTime]) -> String {
    steps
        .iter()
        .filter(|s| !s.step.starts_with("upload") && !s.step.starts_with("download"))
        .map(|s| format!("{} {:.3}", s.step, s.ms))
        .collect::<Vec<_>>()
        .join(", ")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let size: u32 = args.first().map(|s| s.parse()).transpose()?.unwrap_or(8192);
    let repeat: u32 = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(5);
    let backends = Backends::detect_tuned(&markerscope::tuning::Tuning::from_env()?);
    let names: Vec<String> = match args.get(2) {
        Some(list) => list.split(',').map(str::to_string).collect(),
        None if backends.cuda_unavailable_reason().is_none() => {
            vec!["lsl".into(), "flsl_cdb".into(), "ha8".into()]
        }
        None => {
            println!(
                "no GPU: {}; CPU only",
                backends.cuda_unavailable_reason().unwrap_or_default()
            );
            vec!["lsl".into()]
        }
    };
    println!("{size}x{size}, g = 4, best of {repeat} runs");
    println!(
        "{:<9} {:>4} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9}",
        "algo",
        "conn",
        "density",
        "components",
        "stats ms",
        "shapes ms",
        "CCA ms",
        "CCA+sh ms",
        "extra ms",
        "extra/CCA",
        "total +"
    );
    for c in [Connectivity::Four, Connectivity::Eight] {
        for name in &names {
            let info = markerscope::ccl::algorithm_info(name)?;
            if !info.supports(c) {
                continue;
            }
            let mut labeler: Box<dyn Labeler> = backends.create(name, c)?;
            // Per-step times: a CUDA graph frame reports its steps as one.
            labeler.set_cuda_graphs(false);
            let (mut sum_cca, mut sum_extra, mut sum_stats, mut sum_shapes) = (0.0, 0.0, 0.0, 0.0);
            for d in [0.1, 0.3, 0.5, 0.7, 0.9] {
                let image = generate(&RandomImageSpec {
                    width: size,
                    height: size,
                    density: d,
                    granularity: 4,
                    seed: 1,
                })?;
                let packed = image.pack();
                let request = LabelRequest::new(Mask::Packed(&packed), c, Want::Stats);
                let (stats_ms, cca, count, stats_steps) =
                    best(repeat, || labeler.label_mask(request))?;
                let rows = ShapeRows {
                    keep: &keep_all,
                    weights: None,
                };
                let (shapes_ms, with_shapes, _, shape_steps) = best(repeat, || {
                    labeler
                        .label_shapes(request, rows)
                        .map(|(labeling, _, sums)| {
                            std::hint::black_box(sums);
                            labeling
                        })
                })?;
                let extra = with_shapes - cca;
                println!(
                    "{:<9} {:>4} {:>7.1} {:>10} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>8.1}% {:>8.1}%",
                    name,
                    c.to_string(),
                    d,
                    count,
                    stats_ms,
                    shapes_ms,
                    cca,
                    with_shapes,
                    extra,
                    100.0 * extra / cca,
                    100.0 * (shapes_ms - stats_ms) / stats_ms
                );
                println!("    steps, statistics: {}", step_list(&stats_steps));
                println!("    steps, with shapes: {}", step_list(&shape_steps));
                sum_cca += cca;
                sum_extra += extra;
                sum_stats += stats_ms;
                sum_shapes += shapes_ms;
            }
            println!(
                "{name} {c}-conn: mean over densities: descriptors add {:.1}% to the CCA steps; \
                 host to host {:.1}% more than statistics alone",
                100.0 * sum_extra / sum_cca,
                100.0 * (sum_shapes - sum_stats) / sum_stats
            );
        }
    }
    Ok(())
}
