//! Flag parsing and validation: everything is checked before any image is made.

use super::peer_setup::{self, PeersSetup};
use super::spec::{invalid, join, BackendChoice, LatencyFrames, Mode, PlotFormat, Scene, Size};
use crate::ccl::{algorithm_info, algorithms, AlgorithmInfo, Backend, Backends, Connectivity};
use crate::error::{Error, Result};
use crate::frame::image::check_size;
use crate::pipeline::{resolve_algorithm, ComponentFilter, PipelineSettings};
use crate::threshold::spec::ThresholdSpec;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatencyPlan {
    pub frames: u32,
    pub warmup: u32,
    /// What the frames show.
    pub source: LatencyFrames,
}

/// Defaults of the flags that `--pipeline` does not use (a different value is an error there).
const DEFAULT_DENSITIES: &str = "0:1:0.1";
const DEFAULT_GRANULARITIES: &str = "1,4,16";
const DEFAULT_MODE: &str = "both";
const DEFAULT_REPEAT: i64 = 10;
const DEFAULT_SEED: i64 = 1;

/// Distinct frames `--pipeline` renders or decodes before timing, at most; the frames fed
/// through the pipeline cycle over them.
pub const PIPELINE_PREPARED_FRAMES: u32 = 240;

/// Command-line flags of `markerscope bench` (flattened into the binary's clap parser).
#[derive(clap::Args, Clone, Debug)]
pub struct BenchArgs {
    /// Image sizes WxH, comma-separated [default: 8192x8192,2048x2048,1920x1080; with --latency:
    /// 1920x1080,3840x2160; with --pipeline: demo 1280x720,1920x1080,3840x2160 and clutter
    /// 1920x1080, and --sizes sets both].
    #[arg(long)]
    pub sizes: Option<String>,
    /// Densities: values and START:END:STEP ranges (END included), comma-separated, all in [0, 1].
    #[arg(long, default_value = DEFAULT_DENSITIES, allow_hyphen_values = true)]
    pub densities: String,
    /// Granularities g (g×g blocks), comma-separated, each ≥ 1.
    #[arg(long, default_value = DEFAULT_GRANULARITIES, allow_hyphen_values = true)]
    pub granularities: String,
    /// Connectivities, comma-separated (4, 8 or 4,8) [default: 4,8; with --pipeline: 8, as the
    /// window and analyze].
    #[arg(long)]
    pub connectivity: Option<String>,
    /// `all` (every available algorithm of the selected backends but the slow oracle `bfs`) or
    /// comma-separated names [default: all; with --pipeline: each backend's default algorithm,
    /// the one the window and analyze use].
    #[arg(long)]
    pub algorithms: Option<String>,
    /// cuda, cpu or all (all = every backend usable here).
    #[arg(long, default_value = "all")]
    pub backend: String,
    /// ccl (labels), cca (statistics) or both.
    #[arg(long, default_value = DEFAULT_MODE)]
    pub mode: String,
    /// Runs per image; the fastest counts.
    #[arg(long, default_value_t = DEFAULT_REPEAT, allow_hyphen_values = true)]
    pub repeat: i64,
    /// Base seed of the random images (see `image_seed`).
    #[arg(long, default_value_t = DEFAULT_SEED, allow_hyphen_values = true)]
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
    /// The whole frame path: frames of a scene, made before timing, through the live pipeline
    /// (threshold, label, statistics, sub-pixel centroids, tracking); frames/s, latency
    /// percentiles from frame ready to tracked result, and the time of each stage.
    #[arg(long)]
    pub pipeline: bool,
    /// Timed frames per (algorithm, connectivity, size) in latency mode; per (scene, size,
    /// algorithm) and per pass with --pipeline.
    #[arg(long, default_value_t = 200, allow_hyphen_values = true)]
    pub frames: i64,
    /// Untimed warm-up frames before them.
    #[arg(long, default_value_t = 20, allow_hyphen_values = true)]
    pub warmup: i64,
    /// With --pipeline: the scenes, comma-separated: demo (the window's demo scene), clutter (the
    /// random images as grey frames, 10⁴–10⁵ components at 1080p), video:PATH [default: demo,
    /// clutter, and the --video file].
    #[arg(long)]
    pub scenes: Option<String>,
    /// With --pipeline: a video file as one more scene (decoded before timing).
    #[arg(long)]
    pub video: Option<PathBuf>,
    /// With --pipeline: a threshold spec as in analyze (background:K, otsu, triangle, fixed:T,
    /// adaptive:W:C) [default: the product default, background:5].
    #[arg(long)]
    pub threshold: Option<String>,
    /// With --pipeline: without the grey-weighted (sub-pixel) centroids (the window and
    /// analyze compute them by default).
    #[arg(long)]
    pub no_subpixel: bool,
    /// With --pipeline: keep components of at least N pixels (the pipeline's filter; GPU
    /// labelers apply the area and aspect limits before the download).
    #[arg(long, value_name = "N")]
    pub min_area: Option<u64>,
    /// With --pipeline: keep components of at most N pixels.
    #[arg(long, value_name = "N")]
    pub max_area: Option<u64>,
    /// With --pipeline: keep components whose bounding box's long side / short side is at
    /// most A (>= 1).
    #[arg(long, value_name = "A")]
    pub max_aspect: Option<f64>,
    /// With --pipeline: also write the results as a Markdown table to this file.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// What the latency frames show: random (the papers' images, every density and granularity:
    /// 10⁴–10⁵ components per 1080p frame) or demo (the synthetic demo scene, 16 moving markers,
    /// the default threshold: a video frame of the tracking use case) [default: random].
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
            densities: DEFAULT_DENSITIES.into(),
            granularities: DEFAULT_GRANULARITIES.into(),
            connectivity: None,
            algorithms: None,
            backend: "all".into(),
            mode: DEFAULT_MODE.into(),
            repeat: DEFAULT_REPEAT,
            seed: DEFAULT_SEED,
            json: None,
            plot: None,
            peers: false,
            latency: false,
            pipeline: false,
            frames: 200,
            warmup: 20,
            scenes: None,
            video: None,
            threshold: None,
            no_subpixel: false,
            min_area: None,
            max_area: None,
            max_aspect: None,
            markdown: None,
            latency_frames: None,
            conflicts: false,
        }
    }
}

/// Memory the run may use; `None` = unknown (not checked).
#[derive(Clone, Copy, Debug, Default)]
pub struct Limits {
    pub host_memory: Option<u64>,
    pub device_memory: Option<u64>,
}

impl Limits {
    /// MemAvailable of /proc/meminfo, and the GPU's total memory when one is open.
    pub fn of_this_machine(backends: &Backends) -> Limits {
        #[cfg(feature = "cuda")]
        let device_memory = backends
            .gpu()
            .ok()
            .map(|g| g.total_memory as u64)
            .filter(|&m| m > 0);
        #[cfg(not(feature = "cuda"))]
        let device_memory = {
            let _ = backends;
            None
        };
        Limits {
            host_memory: crate::frame::image::available_memory(),
            device_memory,
        }
    }
}

/// Host bytes per pixel of one CPU labeler at work (input 1 + labels 4 + scratch ≈ 4).
pub const CPU_BYTES_PER_PX: u64 = 9;
/// Device bytes per pixel of one GPU labeler (input, labels, segment/scratch buffers).
pub const CUDA_BYTES_PER_PX: u64 = 12;

/// Which algorithms `--algorithms` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlgorithmChoice {
    /// No `--algorithms`: every available one (but the oracle); with `--pipeline` each
    /// backend's default algorithm.
    Default,
    /// `--algorithms all`: every available one but the oracle.
    All,
    /// Registry names, as the registry spells them.
    Named(Vec<String>),
}

/// `--pipeline`'s flags, parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct PipelineFlags {
    pub scenes: Vec<Scene>,
    /// `--sizes` when given: demo and clutter run at these instead of their default sizes.
    pub sizes: Option<Vec<Size>>,
    pub frames: u32,
    pub warmup: u32,
    pub threshold: ThresholdSpec,
    pub subpixel: bool,
    /// The area and aspect limits (`--min-area`, `--max-area`, `--max-aspect`).
    pub filter: ComponentFilter,
    pub markdown: Option<PathBuf>,
}

/// One scene at one frame size, checked against this machine (a video was opened and its first
/// frame decoded).
#[derive(Clone, Debug, PartialEq)]
pub struct PipelineScene {
    pub scene: Scene,
    pub size: Size,
    /// Distinct frames made (rendered or decoded) before timing; the frames fed cycle over them.
    /// A video shorter than this gives all of its frames.
    pub prepared: u32,
}

/// A validated `--pipeline` run.
#[derive(Clone)]
pub struct PipelinePlan {
    pub scenes: Vec<PipelineScene>,
    /// Timed frames of each pass (see `pipeline`), after `warmup` untimed ones.
    pub frames: u32,
    pub warmup: u32,
    pub threshold: ThresholdSpec,
    pub subpixel: bool,
    pub filter: ComponentFilter,
    pub markdown: Option<PathBuf>,
    /// What runs on every scene, in this order: (connectivity, algorithm).
    pub runs: Vec<(Connectivity, &'static AlgorithmInfo)>,
}

impl PipelinePlan {
    /// The pipeline settings of one run: the window's and analyze's defaults, with the
    /// threshold, sub-pixel choice, connectivity and algorithm of this plan.
    pub fn settings(&self, connectivity: Connectivity, info: &AlgorithmInfo) -> PipelineSettings {
        PipelineSettings {
            threshold: self.threshold,
            connectivity,
            algorithm: Some(info.name.to_string()),
            backend: match info.backend {
                Backend::Cpu => crate::ccl::BackendChoice::Cpu,
                Backend::Cuda => crate::ccl::BackendChoice::Cuda,
            },
            subpixel: self.subpixel,
            filter: self.filter,
            ..PipelineSettings::default()
        }
    }

    /// Frames fed per run: the warm-up, then two timed passes (see `pipeline`).
    pub fn frames_per_run(&self) -> u64 {
        self.warmup as u64 + 2 * self.frames as u64
    }
}

/// The flags, parsed but not yet checked against this machine.
#[derive(Clone, Debug)]
pub struct ParsedArgs {
    pub sizes: Vec<Size>,
    pub densities: Vec<f64>,
    pub granularities: Vec<u32>,
    pub connectivities: Vec<Connectivity>,
    pub algorithms: AlgorithmChoice,
    pub backend: BackendChoice,
    pub modes: Vec<Mode>,
    pub repeat: u32,
    pub seed: u32,
    pub json: Option<PathBuf>,
    pub plot: Option<(PathBuf, PlotFormat)>,
    pub peers: bool,
    pub latency: Option<LatencyPlan>,
    pub pipeline: Option<PipelineFlags>,
}

/// A validated benchmark: every combination listed here can run on this machine.
#[derive(Clone)]
pub struct BenchPlan {
    pub sizes: Vec<Size>,
    pub densities: Vec<f64>,
    pub granularities: Vec<u32>,
    pub connectivities: Vec<Connectivity>,
    /// Selected algorithms, all available here.
    pub algorithms: Vec<&'static AlgorithmInfo>,
    pub backend: BackendChoice,
    pub modes: Vec<Mode>,
    pub repeat: u32,
    pub seed: u32,
    pub json: Option<PathBuf>,
    pub plot: Option<(PathBuf, PlotFormat)>,
    pub peers: Option<PeersSetup>,
    pub latency: Option<LatencyPlan>,
    pub pipeline: Option<PipelinePlan>,
    /// Things skipped on purpose (unsupported connectivity, CUDA absent with --backend all).
    pub notes: Vec<String>,
}

fn split_list(s: &str) -> impl Iterator<Item = &str> {
    s.split(',').map(str::trim)
}

/// `WxH[,WxH...]`; `x`, `X` or `×` separate width and height.
pub fn parse_sizes(s: &str) -> Result<Vec<Size>> {
    let mut out = Vec::new();
    for item in split_list(s) {
        let parts: Vec<&str> = item.split(['x', 'X', '×']).collect();
        let [w, h] = parts[..] else {
            return Err(invalid(
                "sizes",
                format!("'{item}' is not WIDTHxHEIGHT (e.g. 1920x1080)"),
            ));
        };
        let parse = |v: &str| {
            v.trim().parse::<u32>().map_err(|_| {
                invalid(
                    "sizes",
                    format!("'{item}': '{v}' is not a whole number of pixels"),
                )
            })
        };
        let size = Size {
            width: parse(w)?,
            height: parse(h)?,
        };
        check_size(size.width, size.height).map_err(|e| invalid("sizes", e))?;
        if !out.contains(&size) {
            out.push(size);
        }
    }
    Ok(out)
}

/// Values and `START:END:STEP` ranges (END included when reached within 1e-9), all in [0, 1].
/// Range points are `START + i·STEP` rounded to 9 decimals, so 0:1:0.1 gives 0.3, not 0.30000000000000004.
pub fn parse_densities(s: &str) -> Result<Vec<f64>> {
    let mut out: Vec<f64> = Vec::new();
    let num = |v: &str, item: &str| -> Result<f64> {
        let x: f64 = v
            .trim()
            .parse()
            .map_err(|_| invalid("densities", format!("'{item}': '{v}' is not a number")))?;
        if !x.is_finite() {
            return Err(invalid(
                "densities",
                format!("'{item}': '{v}' is not finite"),
            ));
        }
        Ok(x)
    };
    for item in split_list(s) {
        let parts: Vec<&str> = item.split(':').collect();
        let values = match parts[..] {
            [v] => vec![num(v, item)?],
            [a, b, c] => {
                let (start, end, step) = (num(a, item)?, num(b, item)?, num(c, item)?);
                if step <= 0.0 {
                    return Err(invalid(
                        "densities",
                        format!("range '{item}': STEP must be > 0"),
                    ));
                }
                if start > end {
                    return Err(invalid(
                        "densities",
                        format!("range '{item}': START is after END"),
                    ));
                }
                let n = ((end - start) / step + 1e-9).floor();
                if n > 100_000.0 {
                    return Err(invalid(
                        "densities",
                        format!("range '{item}' has more than 100000 points"),
                    ));
                }
                (0..=n as u64)
                    .map(|i| ((start + i as f64 * step) * 1e9).round() / 1e9)
                    .collect()
            }
            _ => {
                return Err(invalid(
                    "densities",
                    format!("'{item}' is neither a number nor START:END:STEP (e.g. 0:1:0.1)"),
                ))
            }
        };
        for d in values {
            if !(0.0..=1.0).contains(&d) {
                return Err(invalid(
                    "densities",
                    format!("density {d} (from '{item}') is outside [0, 1]"),
                ));
            }
            if !out.contains(&d) {
                out.push(d);
            }
        }
    }
    Ok(out)
}

pub fn parse_granularities(s: &str) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    for item in split_list(s) {
        let g: u32 = item.parse().map_err(|_| {
            invalid(
                "granularities",
                format!("'{item}' is not a whole number ≥ 1"),
            )
        })?;
        if g == 0 {
            return Err(invalid(
                "granularities",
                "granularity 0 makes no blocks; use 1 for pixel noise",
            ));
        }
        if !out.contains(&g) {
            out.push(g);
        }
    }
    Ok(out)
}

fn parse_connectivities(s: &str) -> Result<Vec<Connectivity>> {
    let mut out = Vec::new();
    for item in split_list(s) {
        let c = item
            .parse::<u8>()
            .ok()
            .and_then(Connectivity::from_number)
            .ok_or_else(|| invalid("connectivity", format!("'{item}' is not 4 or 8")))?;
        if !out.contains(&c) {
            out.push(c);
        }
    }
    Ok(out)
}

fn parse_modes(s: &str) -> Result<Vec<Mode>> {
    match s.trim().to_ascii_lowercase().as_str() {
        "ccl" => Ok(vec![Mode::Ccl]),
        "cca" => Ok(vec![Mode::Cca]),
        "both" | "ccl,cca" | "cca,ccl" => Ok(vec![Mode::Ccl, Mode::Cca]),
        other => Err(invalid(
            "mode",
            format!("'{other}' is not ccl, cca or both"),
        )),
    }
}

fn parse_backend(s: &str) -> Result<BackendChoice> {
    match s.trim().to_ascii_lowercase().as_str() {
        "cpu" => Ok(BackendChoice::Cpu),
        "cuda" | "gpu" => Ok(BackendChoice::Cuda),
        "all" => Ok(BackendChoice::All),
        other => Err(invalid(
            "backend",
            format!("'{other}' is not cuda, cpu or all"),
        )),
    }
}

fn output_path(flag: &str, path: &Path) -> Result<()> {
    if path.as_os_str().is_empty() {
        return Err(invalid(flag, "empty path"));
    }
    if path.is_dir() {
        return Err(invalid(
            flag,
            format!("{} is a directory; give a file name", path.display()),
        ));
    }
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(invalid(
            flag,
            format!(
                "folder {} does not exist; create it first",
                parent.display()
            ),
        ));
    }
    Ok(())
}

impl ParsedArgs {
    /// Checks every flag on its own (no machine knowledge needed).
    pub fn parse(args: &BenchArgs) -> Result<ParsedArgs> {
        let pipeline = parse_pipeline(args)?;
        let latency = if args.latency {
            let (frames, warmup) = frame_counts(args)?;
            Some(LatencyPlan {
                frames,
                warmup,
                source: match &args.latency_frames {
                    Some(s) => LatencyFrames::parse(s)?,
                    None => LatencyFrames::Random,
                },
            })
        } else {
            if args.latency_frames.is_some() {
                return Err(invalid("latency-frames", "goes with --latency"));
            }
            None
        };
        let default_sizes = if latency.is_some() {
            "1920x1080,3840x2160"
        } else {
            "8192x8192,2048x2048,1920x1080"
        };
        // --pipeline: the sizes belong to the scenes (the random-image flags are not used).
        let (sizes, densities, granularities, modes) = if pipeline.is_some() {
            (Vec::new(), Vec::new(), Vec::new(), Vec::new())
        } else {
            (
                parse_sizes(args.sizes.as_deref().unwrap_or(default_sizes))?,
                parse_densities(&args.densities)?,
                parse_granularities(&args.granularities)?,
                parse_modes(&args.mode)?,
            )
        };
        let default_connectivity = if pipeline.is_some() { "8" } else { "4,8" };
        let connectivities =
            parse_connectivities(args.connectivity.as_deref().unwrap_or(default_connectivity))?;
        let backend = parse_backend(&args.backend)?;
        if args.repeat < 1 {
            return Err(invalid(
                "repeat",
                format!("{}: at least one run per image is needed", args.repeat),
            ));
        }
        if args.repeat > 100_000 {
            return Err(invalid(
                "repeat",
                format!("{} is more than 100000 runs per image", args.repeat),
            ));
        }
        if !(0..=u32::MAX as i64).contains(&args.seed) {
            return Err(invalid(
                "seed",
                format!(
                    "{} is not in 0..=4294967295 (MT19937 takes a 32-bit seed)",
                    args.seed
                ),
            ));
        }
        let algorithms = match args.algorithms.as_deref().map(str::trim) {
            None => AlgorithmChoice::Default,
            Some(a) if a.eq_ignore_ascii_case("all") => AlgorithmChoice::All,
            Some(a) => {
                let mut names = Vec::new();
                for n in split_list(a) {
                    if n.is_empty() {
                        return Err(invalid("algorithms", format!("empty name in '{a}'")));
                    }
                    let info = algorithm_info(n).map_err(|e| invalid("algorithms", e))?;
                    if !names.iter().any(|x: &String| x == info.name) {
                        names.push(info.name.to_string());
                    }
                }
                AlgorithmChoice::Named(names)
            }
        };
        if let Some(p) = &args.json {
            output_path("json", p)?;
        }
        let plot = match &args.plot {
            None => None,
            Some(p) => {
                output_path("plot", p)?;
                let ext = p
                    .extension()
                    .and_then(|e| e.to_str())
                    .unwrap_or("")
                    .to_ascii_lowercase();
                let format = match ext.as_str() {
                    "svg" => PlotFormat::Svg,
                    // The font is looked for before any work (`run_cli`).
                    "png" => PlotFormat::Png,
                    _ => {
                        return Err(invalid(
                            "plot",
                            format!("{}: the file name must end in .svg or .png", p.display()),
                        ))
                    }
                };
                Some((p.clone(), format))
            }
        };
        Ok(ParsedArgs {
            sizes,
            densities,
            granularities,
            connectivities,
            algorithms,
            backend,
            modes,
            repeat: args.repeat as u32,
            seed: args.seed as u32,
            json: args.json.clone(),
            plot,
            peers: args.peers,
            latency,
            pipeline,
        })
    }
}

/// `--frames` and `--warmup` of the latency and pipeline modes.
fn frame_counts(args: &BenchArgs) -> Result<(u32, u32)> {
    if args.frames < 1 {
        return Err(invalid(
            "frames",
            format!("{} frames: at least 1 is needed", args.frames),
        ));
    }
    if args.warmup < 0 {
        return Err(invalid(
            "warmup",
            format!("{} warm-up frames: must be ≥ 0", args.warmup),
        ));
    }
    if args.frames > 1_000_000 || args.warmup > 1_000_000 {
        return Err(invalid(
            "frames",
            "at most 1000000 frames and warm-up frames",
        ));
    }
    Ok((args.frames as u32, args.warmup as u32))
}

/// `--pipeline` and the flags that go with it (None without `--pipeline`, after checking that
/// none of its own flags was given).
fn parse_pipeline(args: &BenchArgs) -> Result<Option<PipelineFlags>> {
    if !args.pipeline {
        let own = [
            ("scenes", args.scenes.is_some()),
            ("video", args.video.is_some()),
            ("threshold", args.threshold.is_some()),
            ("no-subpixel", args.no_subpixel),
            ("min-area", args.min_area.is_some()),
            ("max-area", args.max_area.is_some()),
            ("max-aspect", args.max_aspect.is_some()),
            ("markdown", args.markdown.is_some()),
        ];
        if let Some((flag, _)) = own.iter().find(|(_, given)| *given) {
            return Err(invalid(flag, "goes with --pipeline"));
        }
        return Ok(None);
    }
    let other_mode = [("latency", args.latency), ("conflicts", args.conflicts)];
    if let Some((flag, _)) = other_mode.iter().find(|(_, given)| *given) {
        return Err(invalid(
            "pipeline",
            format!("cannot be combined with --{flag}: run them one after the other"),
        ));
    }
    // The random images' flags mean nothing to the scenes: say so rather than ignore them.
    let unused = [
        ("densities", args.densities != DEFAULT_DENSITIES),
        ("granularities", args.granularities != DEFAULT_GRANULARITIES),
        ("mode", args.mode != DEFAULT_MODE),
        ("repeat", args.repeat != DEFAULT_REPEAT),
        ("seed", args.seed != DEFAULT_SEED),
        ("plot", args.plot.is_some()),
        ("latency-frames", args.latency_frames.is_some()),
    ];
    if let Some((flag, _)) = unused.iter().find(|(_, given)| *given) {
        return Err(invalid(
            flag,
            "does not apply to --pipeline (its frames come from --scenes; see bench --help)",
        ));
    }
    let (frames, warmup) = frame_counts(args)?;
    let threshold = match &args.threshold {
        None => ThresholdSpec::default(),
        Some(t) => t.parse().map_err(|e| invalid("threshold", e))?,
    };
    let video = args.video.as_deref();
    if video.is_some_and(|v| v.as_os_str().is_empty()) {
        return Err(invalid("video", "empty path"));
    }
    let mut scenes: Vec<Scene> = match &args.scenes {
        None => Scene::DEFAULT.to_vec(),
        Some(list) => {
            let mut scenes = Vec::new();
            for item in split_list(list) {
                if item.is_empty() {
                    return Err(invalid("scenes", format!("empty name in '{list}'")));
                }
                scenes.push(Scene::parse(item, video)?);
            }
            scenes
        }
    };
    if let Some(v) = video {
        scenes.push(Scene::Video(v.to_path_buf()));
    }
    let mut unique: Vec<Scene> = Vec::new();
    for s in scenes {
        if !unique.contains(&s) {
            unique.push(s);
        }
    }
    let sizes = args.sizes.as_deref().map(parse_sizes).transpose()?;
    if sizes.is_some() && unique.iter().all(|s| matches!(s, Scene::Video(_))) {
        return Err(invalid(
            "sizes",
            "sets the size of the demo and clutter scenes, and --scenes has neither (a video has its own size)",
        ));
    }
    if let Some(p) = &args.markdown {
        output_path("markdown", p)?;
    }
    let filter = ComponentFilter {
        min_area: args.min_area,
        max_area: args.max_area,
        max_aspect: args.max_aspect,
        ..ComponentFilter::default()
    };
    filter.validate()?;
    Ok(Some(PipelineFlags {
        scenes: unique,
        sizes,
        frames,
        warmup,
        threshold,
        subpixel: !args.no_subpixel,
        filter,
        markdown: args.markdown.clone(),
    }))
}

impl BenchPlan {
    /// Parses and resolves in one go (tests, library users).
    pub fn new(args: &BenchArgs, backends: &Backends, limits: &Limits) -> Result<BenchPlan> {
        BenchPlan::resolve(ParsedArgs::parse(args)?, backends, limits)
    }

    /// Checks the parsed flags against this machine: algorithms available, connectivities
    /// supported, memory enough, peers runnable.
    pub fn resolve(p: ParsedArgs, backends: &Backends, limits: &Limits) -> Result<BenchPlan> {
        let mut notes = Vec::new();
        if p.backend == BackendChoice::Cuda {
            if let Some(reason) = backends.cuda_unavailable_reason() {
                return Err(Error::CudaUnavailable(format!("--backend cuda: {reason}")));
            }
        }
        // --pipeline without --algorithms: each backend's default, per connectivity.
        let default_runs = match (&p.pipeline, &p.algorithms) {
            (Some(_), AlgorithmChoice::Default) => {
                Some(pipeline_default_runs(&p, backends, &mut notes)?)
            }
            _ => None,
        };
        let selected: Vec<&'static AlgorithmInfo> = match &p.algorithms {
            _ if default_runs.is_some() => {
                let mut v: Vec<&'static AlgorithmInfo> = Vec::new();
                for (_, info) in default_runs.iter().flatten() {
                    if !v.iter().any(|a| a.name == info.name) {
                        v.push(info);
                    }
                }
                v
            }
            AlgorithmChoice::Default | AlgorithmChoice::All => {
                let v: Vec<_> = algorithms()
                    .iter()
                    .filter(|a| {
                        !a.is_oracle && p.backend.includes(a.backend) && backends.is_available(a)
                    })
                    .collect();
                if p.backend == BackendChoice::All {
                    if let Some(reason) = backends.cuda_unavailable_reason() {
                        notes.push(format!("CUDA algorithms skipped: {reason}"));
                    }
                }
                v
            }
            AlgorithmChoice::Named(names) => {
                let mut v = Vec::new();
                for n in names {
                    let info = algorithm_info(n)?;
                    if !p.backend.includes(info.backend) {
                        return Err(invalid(
                            "algorithms",
                            format!(
                                "'{}' runs on the {} backend but --backend is {}",
                                info.name,
                                info.backend,
                                p.backend.as_str()
                            ),
                        ));
                    }
                    if !backends.is_available(info) {
                        return Err(Error::CudaUnavailable(format!(
                            "algorithm '{}' is not available on this machine: {}",
                            info.name,
                            backends.cuda_unavailable_reason().unwrap_or_default()
                        )));
                    }
                    if !p.connectivities.iter().any(|c| info.supports(*c)) {
                        return Err(invalid(
                            "algorithms",
                            format!(
                                "'{}' supports {}-connectivity only, and --connectivity asks for {}",
                                info.name,
                                join(info.connectivities.iter().map(|c| c.to_string()), "/"),
                                join(p.connectivities.iter().map(|c| c.to_string()), ",")
                            ),
                        ));
                    }
                    v.push(info);
                }
                v
            }
        };
        if selected.is_empty() {
            return Err(invalid(
                "algorithms",
                format!(
                    "no algorithm to run with --backend {} (available here: {})",
                    p.backend.as_str(),
                    join(backends.available().map(|a| a.name.to_string()), ", ")
                ),
            ));
        }
        for a in selected.iter().filter(|_| default_runs.is_none()) {
            for c in &p.connectivities {
                if !a.supports(*c) {
                    notes.push(format!(
                        "{} skipped for {c}-connectivity (it does not support it)",
                        a.name
                    ));
                }
            }
        }

        // Memory per size. Throughput: one image, and one labeler per (connectivity, algorithm)
        // alive. Latency: every image of the size, one labeler at a time.
        let count = |backend: Backend| -> u64 {
            let algs = selected.iter().filter(|a| a.backend == backend);
            match p.latency {
                Some(_) => algs.count().min(1) as u64,
                None => algs
                    .map(|a| p.connectivities.iter().filter(|c| a.supports(**c)).count() as u64)
                    .sum(),
            }
        };
        let (n_cpu, n_cuda) = (count(Backend::Cpu), count(Backend::Cuda));
        let images_alive = match p.latency {
            Some(l) => l.source.distinct(p.densities.len(), p.granularities.len()),
            None => 1,
        };
        for size in &p.sizes {
            let px = size.pixels();
            let host = px * (images_alive + n_cpu * (CPU_BYTES_PER_PX - 1));
            if let Some(avail) = limits.host_memory {
                if host > avail {
                    return Err(Error::Invalid(format!(
                        "--sizes: {size} needs about {} of host memory (the image, and ~{} bytes/px × {n_cpu} CPU labeler(s){}) \
                         but {} is available; choose a smaller size",
                        gib(host),
                        CPU_BYTES_PER_PX - 1,
                        if images_alive > 1 {
                            format!(", plus {images_alive} frames held for the latency run")
                        } else {
                            String::new()
                        },
                        gib(avail)
                    )));
                }
            }
            if n_cuda > 0 {
                let dev = px * CUDA_BYTES_PER_PX * n_cuda;
                if let Some(total) = limits.device_memory {
                    if dev > total {
                        return Err(Error::Invalid(format!(
                            "--sizes: {size} needs about {} of GPU memory ({} bytes/px × {n_cuda} CUDA \
                             labeler(s)) but the GPU has {}; choose a smaller size, fewer algorithms or \
                             one connectivity",
                            gib(dev),
                            CUDA_BYTES_PER_PX,
                            gib(total)
                        )));
                    }
                }
            }
        }

        let pipeline = match &p.pipeline {
            None => None,
            Some(flags) => {
                let runs = match default_runs {
                    Some(runs) => runs,
                    None => p
                        .connectivities
                        .iter()
                        .flat_map(|&c| {
                            selected
                                .iter()
                                .filter(move |a| a.supports(c))
                                .map(move |&a| (c, a))
                        })
                        .collect(),
                };
                Some(resolve_pipeline(flags, runs, limits)?)
            }
        };
        // The sizes in the report's inputs: the scenes' with --pipeline.
        let mut sizes = p.sizes;
        for s in pipeline.iter().flat_map(|pl| &pl.scenes) {
            if !sizes.contains(&s.size) {
                sizes.push(s.size);
            }
        }

        let peers = if p.peers {
            Some(peer_setup::setup(p.backend, backends)?)
        } else {
            None
        };

        Ok(BenchPlan {
            sizes,
            densities: p.densities,
            granularities: p.granularities,
            connectivities: p.connectivities,
            algorithms: selected,
            backend: p.backend,
            modes: p.modes,
            repeat: p.repeat,
            seed: p.seed,
            json: p.json,
            plot: p.plot,
            peers,
            latency: p.latency,
            pipeline,
            notes,
        })
    }

    /// The algorithms that run for one connectivity, in registry order.
    pub fn algorithms_for(
        &self,
        c: Connectivity,
    ) -> impl Iterator<Item = &'static AlgorithmInfo> + '_ {
        self.algorithms
            .iter()
            .copied()
            .filter(move |a| a.supports(c))
    }

    /// Progress units: one per timed image run (throughput) or per frame (latency, pipeline).
    pub fn work_units(&self) -> u64 {
        if let Some(p) = &self.pipeline {
            return p.scenes.len() as u64 * p.runs.len() as u64 * p.frames_per_run();
        }
        let pairs: u64 = self
            .connectivities
            .iter()
            .map(|c| self.algorithms_for(*c).count() as u64)
            .sum();
        // Latency: a GPU algorithm runs once per upload (bytes, packed, packed page-locked)
        // and launch mode (plain, graph); one without graphs or without a GPU page-locker
        // runs fewer, and the bar ends early.
        let latency_runs: u64 = self
            .connectivities
            .iter()
            .flat_map(|c| self.algorithms_for(*c))
            .map(|a| if a.backend == Backend::Cuda { 6 } else { 1 })
            .sum();
        match self.latency {
            Some(l) => self.sizes.len() as u64 * latency_runs * (l.frames + l.warmup) as u64,
            None => {
                self.sizes.len() as u64
                    * self.densities.len() as u64
                    * self.granularities.len() as u64
                    * pairs
                    * self.modes.len() as u64
            }
        }
    }
}

/// `--pipeline` without `--algorithms`: per connectivity, the algorithm the window and analyze
/// would pick on each backend in use.
fn pipeline_default_runs(
    p: &ParsedArgs,
    backends: &Backends,
    notes: &mut Vec<String>,
) -> Result<Vec<(Connectivity, &'static AlgorithmInfo)>> {
    let mut in_use = Vec::new();
    if p.backend.includes(Backend::Cpu) {
        in_use.push(Backend::Cpu);
    }
    if p.backend.includes(Backend::Cuda) {
        // --backend cuda without CUDA was refused before; this is --backend all.
        match backends.cuda_unavailable_reason() {
            None => in_use.push(Backend::Cuda),
            Some(reason) => notes.push(format!("CUDA backend skipped: {reason}")),
        }
    }
    let mut runs = Vec::new();
    for &connectivity in &p.connectivities {
        for &backend in &in_use {
            let settings = PipelineSettings {
                connectivity,
                backend: match backend {
                    Backend::Cpu => crate::ccl::BackendChoice::Cpu,
                    Backend::Cuda => crate::ccl::BackendChoice::Cuda,
                },
                algorithm: None,
                ..PipelineSettings::default()
            };
            match resolve_algorithm(&settings, backends) {
                Ok(r) => runs.push((connectivity, algorithm_info(r.name)?)),
                Err(e) if p.backend == BackendChoice::All => notes.push(format!(
                    "{backend} backend skipped for {connectivity}-connectivity: {e}"
                )),
                Err(e) => return Err(e),
            }
        }
    }
    Ok(runs)
}

/// Host bytes per pixel the pipeline holds besides the prepared frames: masks and levels in
/// the frame queue, one CPU labeler at work, a frame being thresholded.
pub const PIPELINE_BYTES_PER_PX: u64 = 16;

/// The scenes at their sizes (a video opened and its first frame decoded here, so that a
/// missing or undecodable file fails before any work), and the memory they need.
fn resolve_pipeline(
    flags: &PipelineFlags,
    runs: Vec<(Connectivity, &'static AlgorithmInfo)>,
    limits: &Limits,
) -> Result<PipelinePlan> {
    let prepared = (flags.warmup + flags.frames).min(PIPELINE_PREPARED_FRAMES);
    let mut scenes = Vec::new();
    for scene in &flags.scenes {
        match scene {
            Scene::Video(path) => {
                let (size, count) = probe_video(path)?;
                let prepared = count.map_or(prepared, |n| n.clamp(1, prepared as u64) as u32);
                scenes.push(PipelineScene {
                    scene: scene.clone(),
                    size,
                    prepared,
                });
            }
            Scene::Demo | Scene::Clutter => {
                let sizes = flags.sizes.clone().unwrap_or_else(|| scene.default_sizes());
                for size in sizes {
                    scenes.push(PipelineScene {
                        scene: scene.clone(),
                        size,
                        prepared,
                    });
                }
            }
        }
    }
    let cuda = runs.iter().any(|(_, a)| a.backend == Backend::Cuda);
    // One scene's frames are held at a time.
    for s in &scenes {
        let px = s.size.pixels();
        let host = px * (s.prepared as u64 + PIPELINE_BYTES_PER_PX);
        if let Some(avail) = limits.host_memory.filter(|&a| host > a) {
            return Err(Error::Invalid(format!(
                "--pipeline: {} at {} needs about {} of host memory ({} frames made before timing, \
                 and ~{PIPELINE_BYTES_PER_PX} bytes/px for the pipeline) but {} is available; \
                 choose smaller --sizes or fewer --frames",
                s.scene.name(),
                s.size,
                gib(host),
                s.prepared,
                gib(avail)
            )));
        }
        let dev = px * CUDA_BYTES_PER_PX;
        if let Some(total) = limits.device_memory.filter(|&t| cuda && dev > t) {
            return Err(Error::Invalid(format!(
                "--pipeline: {} at {} needs about {} of GPU memory but the GPU has {}; choose \
                 smaller --sizes",
                s.scene.name(),
                s.size,
                gib(dev),
                gib(total)
            )));
        }
    }
    Ok(PipelinePlan {
        scenes,
        frames: flags.frames,
        warmup: flags.warmup,
        threshold: flags.threshold,
        subpixel: flags.subpixel,
        filter: flags.filter,
        markdown: flags.markdown.clone(),
        runs,
    })
}

/// Opens a video scene and decodes its first frame: its size, and its frame count when the
/// file says.
fn probe_video(path: &Path) -> Result<(Size, Option<u64>)> {
    let bad = |why: String| Error::Invalid(format!("--pipeline video {}: {why}", path.display()));
    if !path.exists() {
        return Err(bad("no such file".into()));
    }
    if !path.is_file() {
        return Err(bad("not a file".into()));
    }
    let mut source = crate::source::video::open(path, false)
        .map_err(|e| bad(format!("cannot be read as a video: {e}")))?;
    let first = source
        .next_frame()
        .map_err(|e| bad(format!("its first frame cannot be decoded: {e}")))?
        .ok_or_else(|| bad("it has no frames".into()))?;
    let size = Size {
        width: first.grey.width,
        height: first.grey.height,
    };
    Ok((size, source.frame_count()))
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipeline_filter_flags_reach_the_settings_and_are_checked() {
        let args = BenchArgs {
            pipeline: true,
            min_area: Some(4),
            max_aspect: Some(3.0),
            ..BenchArgs::default()
        };
        let flags = parse_pipeline(&args).unwrap().unwrap();
        assert_eq!(
            (
                flags.filter.min_area,
                flags.filter.max_area,
                flags.filter.max_aspect
            ),
            (Some(4), None, Some(3.0))
        );
        let bad = BenchArgs {
            max_aspect: Some(0.5),
            ..args.clone()
        };
        let e = parse_pipeline(&bad).unwrap_err().to_string();
        assert!(e.contains("max aspect 0.5"), "{e}");
        let alone = BenchArgs {
            pipeline: false,
            ..args
        };
        let e = parse_pipeline(&alone).unwrap_err().to_string();
        assert!(e.contains("min-area") && e.contains("--pipeline"), "{e}");
    }

    #[test]
    fn density_ranges() {
        let d = parse_densities("0:1:0.1").unwrap();
        assert_eq!(d.len(), 11);
        assert_eq!(d[3], 0.3);
        assert_eq!(d[10], 1.0);
        assert_eq!(
            parse_densities("0.5, 0:0.2:0.1").unwrap(),
            vec![0.5, 0.0, 0.1, 0.2]
        );
        assert_eq!(parse_densities("0.25:0.3:0.1").unwrap(), vec![0.25]);
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(
            parse_sizes("1920x1080, 64X32").unwrap(),
            vec![
                Size {
                    width: 1920,
                    height: 1080
                },
                Size {
                    width: 64,
                    height: 32
                }
            ]
        );
    }
}
