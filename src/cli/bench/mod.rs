//! `markerscope bench`: the papers' throughput protocol over every registered algorithm, the
//! bandwidth ceiling, a host-to-host frame-latency mode, and peers (CuPy, OpenCV) in the same run.
//!
//! Protocol (DESIGN.md, "Performance protocol"):
//! - One random image per (size, granularity g, density d), from the MT19937 generator of
//!   `random_image`, seeded with [`image_seed`](crate::frame::random_image::image_seed)`(--seed, d, g)`. `bench/peers/peers.py` mirrors
//!   that rule and the generator, so the peers label bit-identical images (checked by a test, and
//!   at run time by comparing component counts).
//! - Per image, per (algorithm, connectivity, mode): the best of `--repeat` runs of
//!   `Labeler::time_resident` (GPU: CUDA events around the kernels, input already on the device;
//!   CPU: wall time of `label`). CCL = `Want::Labels`, CCA = `Want::Stats`. Before the first
//!   timing on an image, the GPU is kept busy for 50 ms (it idles, and clocks down, while the
//!   CPU makes the image).
//! - Throughput of one image: pixels / best time. The reported Gpx/s of a (size, g) is the
//!   **arithmetic mean over densities of the per-density throughputs** (as Cabaret/Hennequin/
//!   Lemaitre report it); the reported ms is the arithmetic mean of the per-density best times;
//!   per-step times are the arithmetic mean over densities (a step missing in a run counts 0 ms),
//!   so the steps of a row add up to its ms.
//! - Bandwidth ceiling: a copy measured in the same run (CUDA: device to device; CPU: a parallel
//!   memcpy over every core), in GB/s counting read + write. % of ceiling =
//!   bytes/px × Gpx/s / copy GB/s, with CCL moving ≥ 5 bytes/px (1 in, 4 out) and CCA ≥ 1.
//! - Latency mode (`--latency`): host-to-host `label(image, conn, Want::Stats)` wall time (upload,
//!   label + analyze, download of the statistics) per frame, frames cycling over the random
//!   images of a size (`--latency-frames random`) or over the demo scene's first frames
//!   (`--latency-frames demo`, the default threshold: the tracking use case); median and p99 after a
//!   warm-up.
//! - Pipeline mode (`--pipeline`): the whole frame path through the live pipeline, on frames of
//!   a scene made before timing; frames/s, latency percentiles from frame ready to tracked
//!   result, the time of each stage (see `pipeline` for the passes); OpenCV's and CuPy's
//!   threshold + labeling on the same frames (`peers.py --pipeline-frames`).

pub mod conflicts;
mod font;
mod measure;
mod peer_setup;
mod peers;
mod pipeline;
mod plan;
mod plot;
mod progress;
mod report;
mod spec;
#[cfg(test)]
mod tests;

pub use measure::{run_latency, run_throughput};
pub use plan::{BenchArgs, BenchPlan, Limits, PipelinePlan};
pub use plot::write_plot;
pub use progress::Progress;
pub use report::BenchReport;
pub use spec::{BackendChoice, PlotFormat, Scene};

use crate::ccl::Backends;
use crate::error::{Error, Result};
use crate::tuning::Tuning;
use std::sync::Arc;

/// Everything `markerscope bench` does: validate, measure, print, write. Errors (all of them
/// validation errors found before any image is made, or failures while measuring) go to the caller.
pub fn run_cli(args: &BenchArgs, tuning: &Tuning) -> Result<()> {
    let syntax = plan::ParsedArgs::parse(args)?;
    if let Some((_, PlotFormat::Png)) = &syntax.plot {
        font::png_font(tuning.bench.font.as_deref()).map_err(|e| spec::invalid("plot", e))?;
    }
    if args.conflicts {
        let sizes: Vec<(u32, u32)> = syntax.sizes.iter().map(|s| (s.width, s.height)).collect();
        let text = conflicts::run(
            &sizes,
            &syntax.granularities,
            &syntax.connectivities,
            &syntax.densities,
            syntax.seed,
            |what| eprint!("\r{what:<40}"),
        )?;
        eprintln!();
        println!("{text}");
        return Ok(());
    }
    let backends = Arc::new(match syntax.backend {
        BackendChoice::Cpu => Backends::cpu_only_tuned(tuning),
        BackendChoice::Cuda | BackendChoice::All => Backends::detect_tuned(tuning),
    });
    let plan = BenchPlan::resolve(syntax, &backends, &Limits::of_this_machine(&backends))?;
    for note in &plan.notes {
        eprintln!("note: {note}");
    }
    let mut progress = Progress::new(plan.work_units(), tuning.bench.quiet);
    let report = run(&plan, &backends, &mut progress)?;
    println!("{}", report.render_tables());
    if let Some(path) = &plan.json {
        report.write_json(path)?;
        eprintln!("wrote {}", path.display());
    }
    if let Some((path, format)) = &plan.plot {
        write_plot(&report, path, *format, tuning.bench.font.as_deref())?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = plan
        .pipeline
        .as_ref()
        .and_then(|p| p.flags.markdown.as_ref())
    {
        std::fs::write(path, report.render_pipeline_markdown()).map_err(|e| Error::io(path, e))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// Runs a validated plan: bandwidth, markerscope's algorithms, then the peers (so that they do not
/// compete for the machine), and merges everything into one report.
pub fn run(
    plan: &BenchPlan,
    backends: &Arc<Backends>,
    progress: &mut Progress,
) -> Result<BenchReport> {
    let mut report = BenchReport::new(plan, backends);
    if let Some(pipeline) = &plan.pipeline {
        run_pipeline(plan, pipeline, backends, progress, &mut report)?;
        progress.finish();
        report.finalize();
        return Ok(report);
    }
    report.bandwidth = measure::measure_bandwidths(plan, backends)?;
    if plan.latency.is_some() {
        report.latency = run_latency(plan, backends, progress)?;
    } else {
        report.throughput = run_throughput(plan, backends, progress)?;
    }
    progress.finish();
    if let Some(setup) = &plan.peers {
        let peer = peers::run_peers(plan, setup)?;
        report.merge_peers(peer);
    }
    report.finalize();
    Ok(report)
}

/// `--pipeline`: per scene, the frames are made, every run of the plan goes through the
/// pipeline, then the peers get the same frames (after ours, so that they do not compete).
fn run_pipeline(
    plan: &BenchPlan,
    pipeline: &PipelinePlan,
    backends: &Arc<Backends>,
    progress: &mut Progress,
    report: &mut BenchReport,
) -> Result<()> {
    let mut notices = Vec::new();
    for scene in &pipeline.scenes {
        progress.message(&format!(
            "making {} frames of {} at {}",
            scene.prepared,
            scene.scene.name(),
            scene.size
        ));
        let frames = pipeline::prepare(scene, backends.page_locker())?;
        let rows = pipeline::run_scene(pipeline, scene, &frames, backends, progress, &mut notices)?;
        // The demo scene has a known number of markers: many more components means the
        // threshold cuts through the background noise (Otsu does on 4K frames, where the
        // markers are too small a share of the pixels), and the row times that, not markers.
        let markers = crate::source::synthetic::MARKERS as f64;
        if let Some(r) = rows
            .iter()
            .find(|r| scene.scene == Scene::Demo && r.mean_components > 2.0 * markers)
        {
            notices.push(format!(
                "demo at {}: {:.0} components per frame for {markers} markers: threshold {} \
                 splits the background noise there (the markers alone: --threshold fixed:128)",
                scene.size, r.mean_components, pipeline.flags.threshold
            ));
        }
        report.pipeline.extend(rows);
        if let Some(setup) = &plan.peers {
            let peer = peers::run_pipeline_peers(pipeline, setup, scene, &frames)?;
            report.merge_peers(peer);
        }
    }
    report.notes.extend(notices);
    Ok(())
}
