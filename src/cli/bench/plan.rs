//! Flag parsing and validation: everything is checked before any image is made.

use super::font::png_font;
use super::peer_setup::{self, PeersSetup};
use super::spec::{invalid, join, BackendChoice, LatencyFrames, Mode, PlotFormat, Size};
use crate::ccl::{algorithm_info, algorithms, AlgorithmInfo, Backend, Backends, Connectivity};
use crate::error::{Error, Result};
use crate::frame::image::check_size;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LatencyPlan {
    pub frames: u32,
    pub warmup: u32,
    /// What the frames show.
    pub source: LatencyFrames,
}

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
            host_memory: host_available_memory(),
            device_memory,
        }
    }
}

fn host_available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Host bytes per pixel of one CPU labeler at work (input 1 + labels 4 + scratch ≈ 4).
pub const CPU_BYTES_PER_PX: u64 = 9;
/// Device bytes per pixel of one GPU labeler (input, labels, segment/scratch buffers).
pub const CUDA_BYTES_PER_PX: u64 = 12;

/// The flags, parsed but not yet checked against this machine.
#[derive(Clone, Debug)]
pub struct ParsedArgs {
    pub sizes: Vec<Size>,
    pub densities: Vec<f64>,
    pub granularities: Vec<u32>,
    pub connectivities: Vec<Connectivity>,
    /// None = all.
    pub algorithms: Option<Vec<String>>,
    pub backend: BackendChoice,
    pub modes: Vec<Mode>,
    pub repeat: u32,
    pub seed: u32,
    pub json: Option<PathBuf>,
    pub plot: Option<(PathBuf, PlotFormat)>,
    pub peers: bool,
    pub latency: Option<LatencyPlan>,
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
        let latency = if args.latency {
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
            Some(LatencyPlan {
                frames: args.frames as u32,
                warmup: args.warmup as u32,
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
        let sizes = parse_sizes(args.sizes.as_deref().unwrap_or(default_sizes))?;
        let densities = parse_densities(&args.densities)?;
        let granularities = parse_granularities(&args.granularities)?;
        let connectivities = parse_connectivities(&args.connectivity)?;
        let backend = parse_backend(&args.backend)?;
        let modes = parse_modes(&args.mode)?;
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
        let algorithms = {
            let a = args.algorithms.trim();
            if a.eq_ignore_ascii_case("all") {
                None
            } else {
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
                Some(names)
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
                    "png" => {
                        png_font().map_err(|e| invalid("plot", e))?;
                        PlotFormat::Png
                    }
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
        })
    }
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
        let selected: Vec<&'static AlgorithmInfo> = match &p.algorithms {
            None => {
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
            Some(names) => {
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
        for a in &selected {
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

        let peers = if p.peers {
            Some(peer_setup::setup(p.backend, backends)?)
        } else {
            None
        };

        Ok(BenchPlan {
            sizes: p.sizes,
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

    /// Progress units: one per timed image run (throughput) or per frame (latency).
    pub fn work_units(&self) -> u64 {
        let pairs: u64 = self
            .connectivities
            .iter()
            .map(|c| self.algorithms_for(*c).count() as u64)
            .sum();
        match self.latency {
            Some(l) => self.sizes.len() as u64 * pairs * (l.frames + l.warmup) as u64,
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

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

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
