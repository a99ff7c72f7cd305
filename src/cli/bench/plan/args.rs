//! The flags of `markerscope bench`, as clap reads them.

use std::path::PathBuf;

/// Defaults of the flags that `--pipeline` does not use (a different value is an error there).
pub(super) const DEFAULT_DENSITIES: &str = "0:1:0.1";
pub(super) const DEFAULT_GRANULARITIES: &str = "1,4,16";
pub(super) const DEFAULT_MODE: &str = "both";
pub(super) const DEFAULT_REPEAT: i64 = 10;
pub(super) const DEFAULT_SEED: i64 = 1;

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
    /// random images as grey frames, 10⁴–10⁵ components at 1080p), markers (16 moving square
    /// fiducials, found and scored against their truth; OpenCV's ArucoDetector the peer),
    /// markers:N (N of them), video:PATH [default: demo, clutter, and the --video file].
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
    /// With --pipeline: also write every frame's rows as analyze does, in FORMAT (csv, jsonl,
    /// parquet, arrow), to a file in the current folder that is removed after each run, or to
    /// PATH (/dev/null: the formatting without the disk); the writer's stages are timed.
    #[arg(long, value_name = "FORMAT[:PATH]")]
    pub out: Option<String>,
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
            out: None,
            latency_frames: None,
            conflicts: false,
        }
    }
}
