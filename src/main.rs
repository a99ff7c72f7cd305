//! The `markerscope` binary: command-line front end over the library, with the subcommands
//! that are more than a call into one stage (`cli`) and the window (`ui`).

mod cli;
#[cfg(feature = "gui")]
mod ui;

// The library's stages at the binary's root, so that `cli` and `ui` name them as the library's
// own modules do (`crate::frame::…`, `crate::Result`).
#[cfg(feature = "cuda")]
use markerscope::gpu;
#[cfg(feature = "gui")]
use markerscope::Result;
use markerscope::{
    ccl, error, fiducial, frame, geometry, output, pipeline, source, threshold, track, tuning,
    Error,
};

use clap::{Parser, Subcommand};
use cli::selftest::{self, SelftestGroup, SelftestOptions};
use markerscope::analysis::{self, AnalyzeOptions, Output};
use markerscope::ccl::BackendChoice;
use markerscope::ccl::{Backends, Connectivity};
use markerscope::output::columns::ColumnChoice;
use markerscope::output::export::Format;
use markerscope::source::camera_controls::{CameraControls, Exposure};
use markerscope::threshold::spec::ThresholdSpec;
use markerscope::tuning::Tuning;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "markerscope",
    version,
    about = "Real-time GPU marker detection: connected components with live statistics"
)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// With no subcommand: the window's options.
    #[cfg(feature = "gui")]
    #[command(flatten)]
    gui: GuiArgs,
}

/// `markerscope` with no subcommand opens the window (camera 0 if there is one, else the
/// synthetic demo).
#[cfg(feature = "gui")]
#[derive(clap::Args)]
struct GuiArgs {
    /// synthetic, synthetic:random, camera:N, a video file, an image, a folder or a glob;
    /// repeatable: several sources side by side, each with its own settings.
    #[arg(long)]
    source: Vec<String>,
    /// Settings file (default: ./config/default.toml when present, else built-in defaults).
    #[arg(long)]
    config: Option<std::path::PathBuf>,
    /// fixed:T, otsu, triangle, background:K, or adaptive:W:C.
    #[arg(long, value_parser = parse_threshold)]
    threshold: Option<ThresholdSpec>,
    /// Dark markers on a light background.
    #[arg(long)]
    invert: bool,
    /// Algorithm by registry name.
    #[arg(long)]
    algorithm: Option<String>,
    /// 4 or 8.
    #[arg(long, value_parser = parse_connectivity)]
    connectivity: Option<Connectivity>,
    #[arg(long, value_enum)]
    backend: Option<BackendChoice>,
    /// Close the window after N frames were shown.
    #[arg(long, value_name = "N")]
    exit_after_frames: Option<u64>,
    /// Save a PNG of the window after --exit-after-frames frames (default 30), then close it.
    #[arg(long, value_name = "PATH")]
    screenshot: Option<std::path::PathBuf>,
    /// Measure the redraw rate for SECONDS on a fixed 1920×1080 frame with
    /// --bench-components components, print it and close.
    #[arg(long, value_name = "SECONDS")]
    bench_ui: Option<f64>,
    #[arg(long, default_value_t = 5000, value_name = "N")]
    bench_components: u32,
    /// With --bench-ui: show one frame throughout instead of a new frame every redraw.
    #[arg(long)]
    bench_same_frame: bool,
    /// Open on the compare page and compare the algorithms on the first frame.
    #[arg(long)]
    compare: bool,
    /// Window size in points, WxH.
    #[arg(long, default_value = "1600x1000", value_parser = parse_window_size)]
    window_size: [f32; 2],
    /// How the window is drawn: glow (OpenGL; about 4× faster than wgpu under software
    /// rendering) or wgpu (Vulkan, falling back to OpenGL).
    #[arg(long, value_enum, default_value_t = RendererArg::Glow)]
    renderer: RendererArg,
    #[command(flatten)]
    shape: cli::shape_args::ShapeArgs,
    /// Send every frame's results live to URL (repeatable): osc://HOST:PORT (TUIO),
    /// udp://HOST:PORT (JSON) or ws://HOST:PORT (WebSocket server).
    #[arg(long, value_name = "URL")]
    stream: Vec<String>,
    /// Camera exposure: auto, or a time in 100 µs units (50 = 5 ms).
    #[arg(long, value_name = "auto|N", value_parser = parse_exposure)]
    exposure: Option<Exposure>,
    /// Camera gain, in the camera's own units.
    #[arg(long, value_name = "N", value_parser = parse_gain)]
    gain: Option<u32>,
    /// Find square fiducials of these OpenCV dictionaries (comma-separated names such as
    /// DICT_4X4_50, DICT_APRILTAG_36h11, or dictionary files) and outline them with their IDs.
    #[arg(long, value_name = "DICT[,DICT...]")]
    markers: Option<String>,
    /// Side of the printed markers' black square, for their poses (with a --calibration).
    #[arg(long, value_name = "LENGTH", value_parser = parse_marker_length)]
    marker_length: Option<f64>,
}

/// The renderer eframe draws the window with.
#[cfg(feature = "gui")]
#[derive(Clone, Copy, clap::ValueEnum)]
enum RendererArg {
    /// OpenGL through glow. Under software rendering (Mesa's llvmpipe, e.g. Xvfb) it redraws
    /// about 4× faster than wgpu on lavapipe, so it is the default.
    Glow,
    /// wgpu (Vulkan, else OpenGL).
    Wgpu,
}

/// The window's startup options from its flags. The shape and world flags are checked here,
/// where their names are known; the window checks the rest before it opens.
#[cfg(feature = "gui")]
fn startup_options(g: GuiArgs, tuning: Tuning) -> Result<ui::StartupOptions> {
    let shape = &g.shape;
    shape.filter(markerscope::pipeline::ComponentFilter::default())?;
    shape.world()?;
    Ok(ui::StartupOptions {
        shapes: shape.shapes,
        shape_limits: ui::ShapeLimits {
            min_circularity: shape.min_circularity,
            max_circularity: shape.max_circularity,
            min_inertia_ratio: shape.min_inertia_ratio,
            max_inertia_ratio: shape.max_inertia_ratio,
        },
        world: shape.reference()?,
        sources: g.source,
        config: g.config,
        threshold: g.threshold,
        invert: g.invert,
        algorithm: g.algorithm,
        connectivity: g.connectivity,
        backend: g.backend,
        script: ui::ScriptOptions {
            exit_after_frames: g.exit_after_frames,
            screenshot: g.screenshot,
            bench_ui: g.bench_ui,
            bench_components: g.bench_components,
            bench_same_frame: g.bench_same_frame,
        },
        window_size: g.window_size,
        renderer: match g.renderer {
            RendererArg::Glow => ui::RendererChoice::Glow,
            RendererArg::Wgpu => ui::RendererChoice::Wgpu,
        },
        compare: g.compare,
        streams: g.stream,
        exposure: g.exposure,
        gain: g.gain,
        // The same dictionary list as analyze's --markers (names, files); the window takes
        // its poses' calibration from its world mapping.
        markers: match &g.markers {
            Some(names) => {
                analysis::marker_settings(std::slice::from_ref(names), None, None)?.dictionaries
            }
            None => Vec::new(),
        },
        marker_length: g.marker_length,
        tuning,
    })
}

#[cfg(feature = "gui")]
fn parse_marker_length(s: &str) -> std::result::Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(l) if l.is_finite() && l > 0.0 => Ok(l),
        _ => Err(format!("expected a positive length, got '{s}'")),
    }
}

#[cfg(feature = "gui")]
fn parse_window_size(s: &str) -> std::result::Result<[f32; 2], String> {
    let (w, h) = s
        .split_once(['x', 'X'])
        .ok_or_else(|| "expected WxH, e.g. 1600x1000".to_string())?;
    let parse = |v: &str| {
        v.trim()
            .parse::<f32>()
            .ok()
            .filter(|v| (200.0..=10_000.0).contains(v))
            .ok_or_else(|| format!("window size '{s}': each side must be in 200..=10000"))
    };
    Ok([parse(w)?, parse(h)?])
}

#[derive(Subcommand)]
enum Command {
    /// Check every available algorithm against the oracle; exits non-zero on any mismatch.
    Selftest {
        /// A small matrix that runs in seconds (for compute-sanitizer and CI).
        #[arg(long)]
        quick: bool,
        /// Only these algorithms (comma-separated); default: all available. Naming some
        /// leaves the fiducial group out unless --only asks for it.
        #[arg(long, value_delimiter = ',')]
        algorithms: Vec<String>,
        /// Only this group of checks: the labeling algorithms, or the GPU marker detector
        /// against the CPU one; default: both.
        #[arg(long, value_enum)]
        only: Option<SelftestGroup>,
        /// Skip the GPU even if one is present.
        #[arg(long)]
        cpu_only: bool,
        /// Print every case with its time.
        #[arg(long)]
        verbose: bool,
    },
    /// List the cameras and GPUs found on this machine.
    Devices,
    /// Threshold every frame of a video, an image, a folder or glob of images (sorted by name), a
    /// camera or the synthetic demo, find the connected components and write one row per
    /// component (OpenCV's connectedComponentsWithStats layout, plus frame and time).
    Analyze(AnalyzeArgs),
    /// Benchmark every algorithm (and, with --peers, CuPy and OpenCV) on the papers' random images;
    /// --latency: host-to-host frame latency; --pipeline: the whole frame path, end to end.
    Bench(cli::bench::BenchArgs),
    /// Draw a square fiducial (ArUco, AprilTag) to print: PNG equal to OpenCV's
    /// generateImageMarker, or SVG at a size in print units.
    Marker(cli::marker::MarkerArgs),
    /// A printable sheet of markers: rows and columns of IDs, each labelled, with the scale
    /// stated on the sheet (SVG in print units, or PNG with each marker as generateImageMarker).
    MarkerBoard(cli::marker::MarkerBoardArgs),
    /// Pictures of the window for the README, drawn without a display: main-view.png,
    /// compare-view.png and live-controls.png in DIR, or only the NAMEs given.
    #[cfg(feature = "gui")]
    #[command(hide = true)]
    Screenshots {
        dir: std::path::PathBuf,
        names: Vec<String>,
        /// Draw on the CPU instead of with wgpu (a machine without a display or a software
        /// Vulkan/GL driver: a GPU server).
        #[arg(long)]
        software: bool,
    },
}

#[derive(clap::Args)]
struct AnalyzeArgs {
    /// A video file, an image, a folder of images (name order), a quoted glob ('frames/*.png'),
    /// camera:N[:WxH[@FPS]], synthetic (moving markers), synthetic:random or
    /// synthetic:markers[:OPTIONS] (square fiducials; dict=NAME,count=N,size=MIN-MAX,seed=N).
    /// Several sources are analysed together in one run, on one clock: their rows carry the
    /// source, time_source, frame_set and skew_ms columns.
    #[arg(required = true)]
    input: Vec<String>,
    /// Seconds added to a source's frame times on the run's clock (repeatable: one per source,
    /// in the order of the sources), e.g. a camera's known delay or a file started later.
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    offset: Vec<f64>,
    /// Several sources with world mappings: observations of different sources closer than
    /// this (world units) are one object of the merged world view (default: 3 pixels' width
    /// in the world, of the coarsest source).
    #[arg(long, value_name = "WORLD_UNITS")]
    merge_radius: Option<f64>,
    /// Pixel connectivity: 4 or 8.
    #[arg(long, default_value = "8", value_parser = parse_connectivity)]
    connectivity: Connectivity,
    /// fixed:T (grey > T), otsu, triangle, background:K (grey > background level + K robust
    /// deviations of the background), or adaptive:W:C (grey > mean of the W×W window - C).
    #[arg(long, default_value_t = ThresholdSpec::default(), value_parser = parse_threshold)]
    threshold: ThresholdSpec,
    /// Dark markers on a light background: use the complement of the thresholded image.
    #[arg(long)]
    invert: bool,
    /// auto uses CUDA when a usable GPU is found and falls back to the CPU otherwise.
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    backend: BackendChoice,
    /// Algorithm by registry name (see `markerscope selftest`); default: the backend's fastest.
    #[arg(long)]
    algorithm: Option<String>,
    /// Output format; default: from the --out extension (.csv, .jsonl, .parquet, .arrow), else
    /// csv.
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// Output file, or - for standard output.
    #[arg(long, default_value = "-")]
    out: String,
    /// The columns written: all (the default: every column, at the same position in every
    /// run), used (without the sub-pixel, shape and world columns the run does not fill), or
    /// column names separated by commas, in the order wanted (frame,track,centroid_x,centroid_y).
    #[arg(long, value_name = "all|used|NAMES", default_value = "all", value_parser = parse_columns)]
    columns: ColumnChoice,
    /// Parquet and Arrow: frames per row group (per record batch).
    #[arg(long, value_name = "N", default_value_t = markerscope::output::columnar::DEFAULT_FRAMES_PER_GROUP)]
    row_group_frames: u64,
    /// Parquet: how the columns are compressed.
    #[arg(long, value_enum, default_value_t = markerscope::output::columnar::Compression::default())]
    compression: markerscope::output::columnar::Compression,
    /// Stop after N frames of each source (required for camera and synthetic sources, which
    /// never end).
    #[arg(long, value_name = "N")]
    max_frames: Option<u64>,
    /// Frame size of the synthetic sources.
    #[arg(long, value_name = "WxH", value_parser = parse_size)]
    size: Option<(u32, u32)>,
    /// Also print the mean time of each step per frame, the memory use (VmRSS) at the
    /// start, after warm-up and at the end, and FFmpeg's own warnings and errors.
    #[arg(long)]
    verbose: bool,
    /// Also write one row per track (ID, first/last frame, length, mean area, path length) to
    /// this file: CSV, or Parquet or Arrow by its extension (.parquet, .arrow).
    #[arg(long, value_name = "PATH")]
    tracks: Option<std::path::PathBuf>,
    /// Also write one row per skipped frame, image or undecodable part of the input (frame,
    /// before_frame, file, reason) to this CSV file, and one per video frame analysed but
    /// flagged damaged (its reason begins "analysed, flagged damaged:"). Damaged images and
    /// data are always skipped, and everything skipped or flagged is listed in the summary;
    /// the exit code is then 3.
    #[arg(long, value_name = "PATH")]
    skipped: Option<std::path::PathBuf>,
    /// Leave out the video frames decoded from damaged data (they decode only with errors, or
    /// are predicted from such data with no keyframe since) instead of analysing them with
    /// damaged=true in their rows.
    #[arg(long)]
    skip_damaged: bool,
    /// Skip the grey-weighted (sub-pixel) centroids: the subpixel_x/subpixel_y columns stay
    /// empty and the tracker follows the binary centroids (saves the grey upload on the GPU).
    #[arg(long)]
    no_subpixel: bool,
    /// Keep components of at least N pixels.
    #[arg(long, value_name = "N")]
    min_area: Option<u64>,
    /// Keep components of at most N pixels (0: no limit, as in the config file).
    #[arg(long, value_name = "N")]
    max_area: Option<u64>,
    /// Keep components whose bounding box's long side / short side is at most A (>= 1).
    #[arg(long, value_name = "A")]
    max_aspect: Option<f64>,
    #[command(flatten)]
    shape: cli::shape_args::ShapeArgs,
    #[command(flatten)]
    fiducial: cli::fiducial_args::FiducialArgs,
    /// Also send every frame's results live to URL (repeatable): osc://HOST:PORT (TUIO 1.1
    /// over OSC/UDP), udp://HOST:PORT (one JSON object per frame) or ws://HOST:PORT (a
    /// WebSocket server markerscope runs on that address).
    #[arg(long, value_name = "URL")]
    stream: Vec<String>,
    /// Also save the grey frames analysed to FILE.mkv, losslessly (FFV1 in Matroska), to
    /// analyse them again later with other settings.
    #[arg(long, value_name = "FILE.mkv")]
    record: Option<std::path::PathBuf>,
    /// Analyse only the pixels this mask keeps (repeatable: all must keep a pixel): a PNG
    /// (white = analysed, black = masked) or a .toml region of interest ([roi] rect = [left,
    /// top, width, height] or polygon = [[x, y], ...]).
    #[arg(long, value_name = "FILE")]
    mask: Vec<std::path::PathBuf>,
    /// Learn a static mask from the first N frames (the scene without markers: everything
    /// bright in them is masked from then on); these frames are not analysed.
    #[arg(long, value_name = "N")]
    learn_mask: Option<u64>,
    /// Save the mask used (files and learned, together) as a PNG at the frame size.
    #[arg(long, value_name = "FILE.png")]
    save_mask: Option<std::path::PathBuf>,
    /// Camera exposure: auto, or a time in 100 µs units (50 = 5 ms). A camera that refuses it
    /// keeps its own setting, with a notice.
    #[arg(long, value_name = "auto|N", value_parser = parse_exposure)]
    exposure: Option<Exposure>,
    /// Camera gain, in the camera's own units.
    #[arg(long, value_name = "N", value_parser = parse_gain)]
    gain: Option<u32>,
    /// Where a video file is decoded: auto (the GPU's NVDEC engine for the codecs it decodes,
    /// on hosts with fewer than 12 hardware threads, where it is the faster; not with
    /// --backend cpu), cpu, or nvdec (the CPU, with a notice, when NVDEC cannot).
    #[arg(long, value_name = "auto|cpu|nvdec", default_value = "auto")]
    decoder: markerscope::source::video::VideoDecoding,
}

fn parse_exposure(s: &str) -> std::result::Result<Exposure, String> {
    s.parse().map_err(|e: Error| e.to_string())
}

fn parse_columns(s: &str) -> std::result::Result<ColumnChoice, String> {
    ColumnChoice::parse(s).map_err(|e| e.to_string())
}

fn parse_gain(s: &str) -> std::result::Result<u32, String> {
    markerscope::source::camera_controls::parse_gain(s).map_err(|e| e.to_string())
}

fn parse_size(s: &str) -> std::result::Result<(u32, u32), String> {
    let bad = || format!("expected WxH like 640x480, got '{s}'");
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let w: u32 = w.trim().parse().map_err(|_| bad())?;
    let h: u32 = h.trim().parse().map_err(|_| bad())?;
    markerscope::frame::image::check_size(w, h).map_err(|e| e.to_string())?;
    Ok((w, h))
}

fn parse_connectivity(s: &str) -> std::result::Result<Connectivity, String> {
    s.trim()
        .parse::<u8>()
        .ok()
        .and_then(Connectivity::from_number)
        .ok_or_else(|| "connectivity must be 4 or 8".to_string())
}

fn parse_threshold(s: &str) -> std::result::Result<ThresholdSpec, String> {
    s.parse().map_err(|e: Error| e.to_string())
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if e.use_stderr() => {
            // One line, like our own errors: clap's message up to its first blank line
            // (what is wrong, with which argument), without the usage block.
            let text = e.render().to_string();
            let head = text.split("\n\n").next().unwrap_or_default();
            let line = head.lines().map(str::trim).collect::<Vec<_>>().join(" ");
            eprintln!("{line} (see --help)");
            return ExitCode::from(2);
        }
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // The one read of the MARKERSCOPE_* variables; everything below gets its part.
    let tuning = Tuning::from_env()?;
    match cli.command {
        #[cfg(feature = "gui")]
        None => {
            ui::run(startup_options(cli.gui, tuning)?)?;
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(not(feature = "gui"))]
        None => {
            use clap::CommandFactory;
            Cli::command().print_help()?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Selftest {
            quick,
            algorithms,
            only,
            cpu_only,
            verbose,
        }) => run_selftest(quick, algorithms, only, cpu_only, verbose, &tuning),
        Some(Command::Bench(args)) => {
            cli::bench::run_cli(&args, &tuning)?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Devices) => {
            let backends = Backends::detect_tuned(&tuning);
            match backends.gpu_name() {
                Some(name) => {
                    println!("GPU 0: {name}");
                    if let Some(kernels) = backends.gpu_kernels() {
                        println!("  {kernels}");
                    }
                }
                None => println!(
                    "GPU: none usable ({})",
                    backends.cuda_unavailable_reason().unwrap_or_default()
                ),
            }
            for line in markerscope::source::devices::camera_report() {
                println!("{line}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Analyze(args)) => run_analyze(args, tuning),
        Some(Command::Marker(args)) => {
            cli::marker::run(&args)?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::MarkerBoard(args)) => {
            cli::marker::run_board(&args)?;
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(feature = "gui")]
        Some(Command::Screenshots {
            dir,
            names,
            software,
        }) => {
            let out = ui::screenshots::Pictures {
                dir: &dir,
                software,
            };
            ui::screenshots::run(&out, &names, &tuning).map_err(anyhow::Error::msg)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn run_analyze(args: AnalyzeArgs, tuning: Tuning) -> anyhow::Result<ExitCode> {
    let verbose = args.verbose;
    markerscope::source::video::set_verbose(verbose);
    let opts = analyze_options(args, tuning)?;
    // SIGINT, SIGTERM, SIGHUP: stop and remove the temporary output files.
    markerscope::analysis::interrupt::install();
    let summary = match analysis::run(&opts, |msg| eprintln!("{msg}")) {
        Ok(summary) => summary,
        Err(e @ Error::Interrupted { signal, .. }) => {
            eprintln!("error: {e}");
            // The shell's convention for a process ended by a signal.
            return Ok(ExitCode::from((128 + signal.clamp(1, 127)) as u8));
        }
        Err(e) => return Err(e.into()),
    };
    print_summary(&summary, &opts);
    if verbose {
        print_steps_and_memory(&summary);
    }
    if summary.skipped_count() > 0 {
        print_skipped(&summary, opts.skipped.as_deref());
    }
    let kept = match &opts.output {
        Output::File(p) => format!("{} keeps", p.display()),
        Output::Stdout => "the output has".to_string(),
    };
    if let (Some(why), true) = (&summary.stopped_by, summary.sources.len() > 1) {
        eprintln!(
            "error: {why}; the other sources went on: {kept} the rows of the {} frame(s) analysed",
            summary.frames
        );
        return Ok(ExitCode::from(1));
    }
    if let Some(why) = &summary.stopped_by {
        eprintln!(
            "error: {why}; {kept} the {} frame(s) analysed before it",
            summary.frames
        );
        return Ok(ExitCode::from(1));
    }
    if let Some(why) = &summary.recording_failed {
        eprintln!(
            "error: {why}; the recording is lost, {kept} the rows of all {} frame(s)",
            summary.frames
        );
        return Ok(ExitCode::from(1));
    }
    if summary.skipped_count() > 0 {
        return Ok(ExitCode::from(3));
    }
    Ok(ExitCode::SUCCESS)
}

/// The analysis `analyze`'s flags ask for.
fn analyze_options(args: AnalyzeArgs, tuning: Tuning) -> anyhow::Result<AnalyzeOptions> {
    let mut inputs = args.input.into_iter();
    let filter = args.shape.filter(markerscope::pipeline::ComponentFilter {
        // 0 is no limit, as in the config file.
        min_area: args.min_area.filter(|&a| a > 0),
        max_area: args.max_area.filter(|&a| a > 0),
        max_aspect: args.max_aspect.filter(|&a| a != 0.0),
        ..Default::default()
    })?;
    // The marker flags first: a calibration given for poses is checked as theirs.
    let markers = args.fiducial.settings(args.shape.calibration.as_deref())?;
    // One mapping applies to every source; several (--world-file repeated) are one a source.
    let worlds = args.shape.worlds_for(args.fiducial.uses_calibration())?;
    let (world, source_worlds) = match worlds.as_slice() {
        [one] => (Some(one.clone()), Vec::new()),
        _ => (None, worlds),
    };
    Ok(AnalyzeOptions {
        output: Output::parse(&args.out),
        input: inputs.next().unwrap_or_default(),
        more_inputs: inputs.collect(),
        offsets: args.offset,
        connectivity: args.connectivity,
        threshold: args.threshold,
        invert: args.invert,
        backend: args.backend,
        algorithm: args.algorithm,
        format: args.format,
        columns: args.columns,
        batches: markerscope::output::writer::BatchOptions {
            frames_per_group: args.row_group_frames,
            compression: args.compression,
            ..Default::default()
        },
        max_frames: args.max_frames,
        synthetic_size: args.size,
        progress: true,
        tracks: args.tracks,
        skipped: args.skipped,
        skip_damaged: args.skip_damaged,
        subpixel: !args.no_subpixel,
        filter,
        shapes: args.shape.shapes,
        markers,
        world,
        source_worlds,
        merge_radius: args.merge_radius,
        input_files: args
            .shape
            .calibration
            .iter()
            .chain(&args.shape.world_files)
            .cloned()
            .collect(),
        streams: args.stream,
        record: args.record,
        masks: args.mask,
        learn_mask: args.learn_mask,
        save_mask: args.save_mask,
        camera: CameraControls {
            exposure: args.exposure,
            gain: args.gain,
            ..CameraControls::default()
        },
        decoding: args.decoder,
        tuning,
    })
}

/// What was analysed, and what went to the tracks file, the recording and each stream.
fn print_summary(summary: &analysis::AnalyzeSummary, opts: &AnalyzeOptions) {
    eprintln!(
        "analyzed {} frame(s) of {} with {}: {} component(s), {:.2} per frame; {:.1} frames/s; {} dropped",
        summary.frames,
        summary.source,
        summary.algorithm,
        summary.components,
        summary.components_per_frame(),
        summary.frames_per_second(),
        summary.dropped
    );
    if summary.sources.len() > 1 {
        print_sources(summary);
    }
    if let Some(why) = summary.output_bottleneck() {
        eprintln!("{why}");
    }
    if let Some(m) = &summary.markers {
        eprintln!(
            "{} marker(s) found, {:.2} per frame, {} distinct (one track each)",
            m.seen,
            m.seen as f64 / summary.frames.max(1) as f64,
            m.tracks
        );
    }
    if let Some(path) = &opts.tracks {
        let markers = summary.markers.map_or(0, |m| m.tracks);
        eprintln!(
            "{} track(s) written to {}",
            summary.tracks + markers,
            path.display()
        );
    }
    if let Some(r) = &summary.recording {
        eprintln!("{} frame(s) recorded to {}", r.frames, r.path.display());
    }
    let (on_gpu, copied) = markerscope::frame::grey::device_frames();
    if on_gpu > 0 {
        eprintln!(
            "{on_gpu} frame(s) decoded on the GPU stayed there for the labeling; {copied} of them copied to the host"
        );
    }
    for s in &summary.streams {
        let error = s
            .error
            .as_ref()
            .map_or(String::new(), |e| format!("; last error: {e}"));
        eprintln!(
            "stream {}: {} frame(s) sent, {} dropped, {} failed{error}",
            s.url, s.sent, s.dropped, s.failed
        );
    }
}

/// Several sources: what each gave, and the frame sets.
fn print_sources(summary: &analysis::AnalyzeSummary) {
    for (k, s) in summary.sources.iter().enumerate() {
        let stopped = s
            .stopped_by
            .as_ref()
            .map_or(String::new(), |why| format!("; stopped: {why}"));
        eprintln!(
            "source {k} ({}): {} frame(s), {} component(s), {} skipped, {} dropped; in {} of \
             the {} frame sets; times: {}{stopped}",
            s.name,
            s.frames,
            s.components,
            s.skipped,
            s.dropped,
            s.frames,
            summary.frame_sets,
            s.time_source
        );
    }
    eprintln!(
        "{} frame set(s) of {} source(s)",
        summary.frame_sets,
        summary.sources.len()
    );
    if let Some(world) = &summary.world {
        let markers = match world.markers {
            0 => String::new(),
            n => format!(", {n} marker(s)"),
        };
        eprintln!(
            "merged world view: {} world track(s){markers}, merge radius {} world units",
            world.tracks, world.merge_radius
        );
    }
}

/// `--verbose`: the mean time of each step, and the resident memory over the run.
fn print_steps_and_memory(summary: &analysis::AnalyzeSummary) {
    let steps: Vec<String> = summary
        .mean_steps
        .iter()
        .map(|s| format!("{} {:.2}", s.step, s.ms))
        .collect();
    eprintln!(
        "mean per frame (ms): {}; latency {:.2}",
        steps.join(", "),
        summary.mean_latency_ms
    );
    let mb =
        |kb: Option<u64>| kb.map_or("?".to_string(), |k| format!("{:.1} MB", k as f64 / 1024.0));
    eprintln!(
        "memory (VmRSS): {} at start, {} after {} frames, {} at the end",
        mb(summary.rss_kb[0]),
        mb(summary.rss_kb[1]),
        analysis::WARM_FRAMES,
        mb(summary.rss_kb[2])
    );
}

/// What was skipped or flagged: the counts, the first ones listed, and where the full list is.
fn print_skipped(summary: &analysis::AnalyzeSummary, list: Option<&std::path::Path>) {
    let mut skipped = Vec::new();
    if summary.skipped_frames > 0 {
        skipped.push(format!(
            "{} damaged frame(s) or image(s)",
            summary.skipped_frames
        ));
    }
    if summary.skipped_data > 0 {
        skipped.push(format!(
            "{} unreadable part(s) of the input",
            summary.skipped_data
        ));
    }
    let mut what = Vec::new();
    if !skipped.is_empty() {
        what.push(format!("skipped {}", skipped.join(" and ")));
    }
    if summary.damaged_frames > 0 {
        what.push(format!(
            "analysed {} frame(s) decoded from damaged data, flagged damaged in their rows",
            summary.damaged_frames
        ));
    }
    eprintln!("{}:", what.join("; "));
    for s in &summary.skipped {
        eprintln!("  {s}");
    }
    let unlisted = summary.skipped_count() - summary.skipped.len() as u64;
    if unlisted > 0 {
        eprintln!("  ... and {unlisted} more");
    }
    if let Some(path) = list {
        eprintln!("the full list is in {}", path.display());
    }
}

fn run_selftest(
    quick: bool,
    algorithms: Vec<String>,
    only: Option<SelftestGroup>,
    cpu_only: bool,
    verbose: bool,
    tuning: &Tuning,
) -> anyhow::Result<ExitCode> {
    let backends = if cpu_only {
        Backends::cpu_only_tuned(tuning)
    } else {
        Backends::detect_tuned(tuning)
    };
    // An unknown name, or a GPU algorithm without the GPU, is a bad request (exit 2), not a
    // failed check.
    for name in &algorithms {
        let info = markerscope::ccl::algorithm_info(name)?;
        if info.backend == markerscope::ccl::Backend::Cuda && backends.gpu_name().is_none() {
            let why = if cpu_only {
                "--cpu-only leaves the GPU out".to_string()
            } else {
                backends
                    .cuda_unavailable_reason()
                    .unwrap_or_else(|| "no usable GPU".into())
            };
            return Err(Error::Invalid(format!(
                "selftest --algorithms {name}: {} runs on the GPU, and {why}; check it on a \
                 machine with a GPU, or name CPU algorithms only",
                info.name
            ))
            .into());
        }
    }
    match backends.gpu_name() {
        Some(name) => eprintln!("GPU: {name}"),
        None => eprintln!(
            "CPU backend only: {}",
            backends.cuda_unavailable_reason().unwrap_or_default()
        ),
    }
    let opts = SelftestOptions {
        quick,
        algorithms,
        only,
        verbose,
    };
    let start = std::time::Instant::now();
    // Progress overwrites one line on a terminal; logs (CI, the GPU machine) get none of it.
    let interactive = std::io::stderr().is_terminal();
    let report = selftest::run(&backends, &opts, |msg| {
        if interactive {
            eprint!("\r\x1b[K{msg}");
            let _ = std::io::stderr().flush();
        }
    });
    if interactive {
        eprintln!("\r\x1b[K");
    }
    for f in report.failures.iter().take(50) {
        println!("FAIL {f}");
    }
    if report.failures.len() > 50 {
        println!("... and {} more failures", report.failures.len() - 50);
    }
    for note in &report.notes {
        println!("{note}");
    }
    println!(
        "selftest: {} algorithm(s) [{}], {} checks, {} failures, {:.1} s",
        report.algorithms.len(),
        report.algorithms.join(", "),
        report.checks,
        report.failures.len(),
        start.elapsed().as_secs_f64()
    );
    Ok(if report.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
