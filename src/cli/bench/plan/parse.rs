//! Each flag checked on its own: no machine knowledge needed.

use super::super::spec::{invalid, BackendChoice, LatencyFrames, Mode, PlotFormat, Size};
use super::args::BenchArgs;
use super::{AlgorithmChoice, LatencyPlan, ParsedArgs, PipelineFlags};
use crate::ccl::{algorithm_info, Connectivity};
use crate::error::Result;
use crate::frame::image::check_size;
use std::path::{Path, PathBuf};

pub(super) fn split_list(s: &str) -> impl Iterator<Item = &str> {
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

pub(super) fn output_path(flag: &str, path: &Path) -> Result<()> {
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

/// Checks every other flag on its own (no machine knowledge needed), `--pipeline`'s already
/// parsed: the defaults of some depend on it.
pub(super) fn parsed_args(args: &BenchArgs, pipeline: Option<PipelineFlags>) -> Result<ParsedArgs> {
    let latency = parse_latency(args)?;
    let images = ImageFlags::parse(args, pipeline.is_some(), latency.is_some())?;
    let default_connectivity = if pipeline.is_some() { "8" } else { "4,8" };
    let connectivities =
        parse_connectivities(args.connectivity.as_deref().unwrap_or(default_connectivity))?;
    let backend = parse_backend(&args.backend)?;
    let (repeat, seed) = parse_repeat_and_seed(args)?;
    let algorithms = parse_algorithms(args.algorithms.as_deref())?;
    if let Some(p) = &args.json {
        output_path("json", p)?;
    }
    let plot = args.plot.as_deref().map(parse_plot).transpose()?;
    Ok(ParsedArgs {
        sizes: images.sizes,
        densities: images.densities,
        granularities: images.granularities,
        connectivities,
        algorithms,
        backend,
        modes: images.modes,
        repeat,
        seed,
        json: args.json.clone(),
        plot,
        peers: args.peers,
        latency,
        pipeline,
    })
}

/// `--latency` with its frame counts and `--latency-frames` (which goes with it only).
fn parse_latency(args: &BenchArgs) -> Result<Option<LatencyPlan>> {
    if !args.latency {
        if args.latency_frames.is_some() {
            return Err(invalid("latency-frames", "goes with --latency"));
        }
        return Ok(None);
    }
    let (frames, warmup) = frame_counts(args)?;
    Ok(Some(LatencyPlan {
        frames,
        warmup,
        source: match &args.latency_frames {
            Some(s) => LatencyFrames::parse(s)?,
            None => LatencyFrames::Random,
        },
    }))
}

/// The random images' sizes, densities and granularities, and the modes timed on them.
#[derive(Default)]
struct ImageFlags {
    sizes: Vec<Size>,
    densities: Vec<f64>,
    granularities: Vec<u32>,
    modes: Vec<Mode>,
}

impl ImageFlags {
    /// None of them with `--pipeline`, whose sizes belong to the scenes.
    fn parse(args: &BenchArgs, pipeline: bool, latency: bool) -> Result<ImageFlags> {
        if pipeline {
            return Ok(ImageFlags::default());
        }
        let default_sizes = if latency {
            "1920x1080,3840x2160"
        } else {
            "8192x8192,2048x2048,1920x1080"
        };
        Ok(ImageFlags {
            sizes: parse_sizes(args.sizes.as_deref().unwrap_or(default_sizes))?,
            densities: parse_densities(&args.densities)?,
            granularities: parse_granularities(&args.granularities)?,
            modes: parse_modes(&args.mode)?,
        })
    }
}

/// `--repeat` (1 to 100000 runs per image) and `--seed` (MT19937's 32 bits).
fn parse_repeat_and_seed(args: &BenchArgs) -> Result<(u32, u32)> {
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
    Ok((args.repeat as u32, args.seed as u32))
}

/// `--algorithms`: absent, `all`, or registry names (each known, said once).
fn parse_algorithms(flag: Option<&str>) -> Result<AlgorithmChoice> {
    let a = match flag.map(str::trim) {
        None => return Ok(AlgorithmChoice::Default),
        Some(a) if a.eq_ignore_ascii_case("all") => return Ok(AlgorithmChoice::All),
        Some(a) => a,
    };
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
    Ok(AlgorithmChoice::Named(names))
}

/// `--plot`: a writable path ending in .svg, or .png when a font to draw text with is found.
fn parse_plot(p: &Path) -> Result<(PathBuf, PlotFormat)> {
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
    Ok((p.to_path_buf(), format))
}

/// `--frames` and `--warmup` of the latency and pipeline modes.
pub(super) fn frame_counts(args: &BenchArgs) -> Result<(u32, u32)> {
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
