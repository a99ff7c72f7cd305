//! `markerscope bench`: the papers' throughput protocol over every registered algorithm, the
//! bandwidth ceiling, a host-to-host frame-latency mode, and peers (CuPy, OpenCV) in the same run.
//!
//! Protocol (DESIGN.md, "Performance protocol"):
//! - One random image per (size, granularity g, density d), from the MT19937 generator of
//!   `random_image`, seeded with [`image_seed`]`(--seed, d, g)`. `bench/peers/peers.py` mirrors
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
//!   (`--latency-frames demo`, Otsu-thresholded: the tracking use case); median and p99 after a
//!   warm-up.

pub mod conflicts;
mod measure;
mod peers;
mod plan;
mod plot;
mod progress;
mod report;

pub use measure::{measure_cpu_copy_bandwidth, run_latency, run_throughput};
pub use peers::{find_peers_script, PeersSetup};
pub use plan::{
    parse_densities, parse_granularities, parse_sizes, BackendChoice, BenchPlan, LatencyFrames,
    LatencyPlan, Limits, Mode, PlotFormat, Size,
};
pub use plot::{png_font_available, write_plot};
pub use progress::Progress;
pub use report::{
    BandwidthResult, BenchReport, Comparison, DensityResult, LatencyResult, StepMs,
    ThroughputResult, Unavailable,
};

use crate::ccl::Backends;
use crate::error::Result;
use std::path::PathBuf;

/// The seed of the image for (`--seed`, density d, granularity g):
/// `(seed · 1_000_003 + g · 1_009 + floor(d · 10^6 + 0.5)) mod 2^32`, in exact integer arithmetic.
/// The size does not enter (images of different sizes differ anyway). `peers.py` has the same rule.
pub fn image_seed(seed: u32, density: f64, granularity: u32) -> u32 {
    let micro = (density * 1e6 + 0.5).floor() as u64;
    let s = seed as u64 * 1_000_003 + granularity as u64 * 1_009 + micro;
    (s & 0xffff_ffff) as u32
}

/// The rule above, in words, for the JSON output.
pub const SEED_RULE: &str =
    "image seed = (seed*1000003 + g*1009 + floor(d*1e6 + 0.5)) mod 2^32; image = random_image::generate(w, h, d, g, image seed)";

/// How the summary numbers are averaged, in words, for the JSON output and the table header.
pub const AVERAGING: &str = "per image: best of --repeat runs; Gpx/s = arithmetic mean over densities of \
     per-density throughput (pixels / best time); ms = arithmetic mean over densities of the best times; \
     steps = arithmetic mean over densities (missing step = 0 ms)";

/// Command-line flags of `markerscope bench` (flattened into the binary's clap parser).
#[derive(clap::Args, Clone, Debug)]
pub struct BenchArgs {
    /// Image sizes WxH, comma-separated [default: 8192x8192,2048x2048,1920x1080; with --latency:
    /// 1920x1080,3840x2160].
    #[arg(long)]
    pub sizes: Option<String>,
    /// Densities: values and START:END:STEP ranges (END included), comma-separated, all in [0, 1].
    #[arg(long, default_value = "0:1:0.1", allow_hyphen_values = true)]
    pub densities: String,
    /// Granularities g (g×g blocks), comma-separated, each ≥ 1.
    #[arg(long, default_value = "1,4,16", allow_hyphen_values = true)]
    pub granularities: String,
    /// Connectivities, comma-separated (4, 8 or 4,8).
    #[arg(long, default_value = "4,8")]
    pub connectivity: String,
    /// `all` (every available algorithm of the selected backends but the slow oracle `bfs`) or
    /// comma-separated names.
    #[arg(long, default_value = "all")]
    pub algorithms: String,
    /// cuda, cpu or all (all = every backend usable here).
    #[arg(long, default_value = "all")]
    pub backend: String,
    /// ccl (labels), cca (statistics) or both.
    #[arg(long, default_value = "both")]
    pub mode: String,
    /// Runs per image; the fastest counts.
    #[arg(long, default_value_t = 10, allow_hyphen_values = true)]
    pub repeat: i64,
    /// Base seed of the random images (see `image_seed`).
    #[arg(long, default_value_t = 1, allow_hyphen_values = true)]
    pub seed: i64,
    /// Write every number (inputs, machine, bandwidth, per-density results, steps) as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Draw throughput vs density and per-step bars (.svg, or .png when a TrueType font is found).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Also run CuPy and OpenCV on the same images (python3 bench/peers/peers.py) and compare.
    #[arg(long)]
    pub peers: bool,
    /// Frame-latency mode: host-to-host label + analyze of one frame, median and p99.
    #[arg(long)]
    pub latency: bool,
    /// Timed frames per (algorithm, connectivity, size) in latency mode.
    #[arg(long, default_value_t = 200, allow_hyphen_values = true)]
    pub frames: i64,
    /// Untimed warm-up frames before them.
    #[arg(long, default_value_t = 20, allow_hyphen_values = true)]
    pub warmup: i64,
    /// What the latency frames show: random (the papers' images, every density and granularity:
    /// 10⁴–10⁵ components per 1080p frame) or demo (the synthetic demo scene, 16 moving markers,
    /// Otsu threshold: a video frame of the tracking use case) [default: random].
    #[arg(long)]
    pub latency_frames: Option<String>,
    /// Instead of timing: count each CCA scheme's feature updates on the images and estimate
    /// the conflicting ones, (Σ U²)/(Σ U) (CPU only; see `bench::conflicts`).
    #[arg(long)]
    pub conflicts: bool,
}

impl Default for BenchArgs {
    fn default() -> Self {
        Self {
            sizes: None,
            densities: "0:1:0.1".into(),
            granularities: "1,4,16".into(),
            connectivity: "4,8".into(),
            algorithms: "all".into(),
            backend: "all".into(),
            mode: "both".into(),
            repeat: 10,
            seed: 1,
            json: None,
            plot: None,
            peers: false,
            latency: false,
            frames: 200,
            warmup: 20,
            latency_frames: None,
            conflicts: false,
        }
    }
}

/// Everything `markerscope bench` does: validate, measure, print, write. Errors (all of them
/// validation errors found before any image is made, or failures while measuring) go to the caller.
pub fn run_cli(args: &BenchArgs) -> Result<()> {
    let syntax = plan::ParsedArgs::parse(args)?;
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
    let backends = match syntax.backend {
        BackendChoice::Cpu => Backends::cpu_only(),
        BackendChoice::Cuda | BackendChoice::All => Backends::detect(),
    };
    let plan = BenchPlan::resolve(syntax, &backends, &Limits::of_this_machine(&backends))?;
    for note in &plan.notes {
        eprintln!("note: {note}");
    }
    let mut progress = Progress::new(plan.work_units());
    let report = run(&plan, &backends, &mut progress)?;
    println!("{}", report.render_tables());
    if let Some(path) = &plan.json {
        report.write_json(path)?;
        eprintln!("wrote {}", path.display());
    }
    if let Some((path, format)) = &plan.plot {
        write_plot(&report, path, *format)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// Runs a validated plan: bandwidth, markerscope's algorithms, then the peers (so that they do not
/// compete for the machine), and merges everything into one report.
pub fn run(plan: &BenchPlan, backends: &Backends, progress: &mut Progress) -> Result<BenchReport> {
    let mut report = BenchReport::new(plan, backends);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_seed_rule() {
        assert_eq!(image_seed(0, 0.0, 0), 0);
        assert_eq!(
            image_seed(1, 0.5, 4),
            (1_000_003 + 4 * 1_009 + 500_000) as u32
        );
        // 0.3 is 0.29999999999999998890 in binary; the +0.5 makes it 300000, not 299999.
        assert_eq!(image_seed(0, 0.3, 0), 300_000);
        // Wraps modulo 2^32.
        let s = u32::MAX;
        assert_eq!(
            image_seed(s, 1.0, 16),
            ((s as u64 * 1_000_003 + 16 * 1_009 + 1_000_000) % (1u64 << 32)) as u32
        );
    }
}
