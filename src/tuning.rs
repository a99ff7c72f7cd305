//! Tuning: the knobs that change how the engine and `bench` run, never what they compute, set
//! by the `MARKERSCOPE_*` environment variables (docs/guide.md lists them).
//!
//! `Tuning::from_env` is the only code that reads them. The binary and the Python package call
//! it once at start and hand the values down: the GPU gets `GpuTuning` when it is opened
//! (`ccl::Backends::detect_tuned`), video files their NVDEC decoders through the source's open
//! options, `bench` its own part. A library user who never calls it gets `Tuning::default()`.

use crate::error::{Error, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Frames a GPU labeler keeps in flight when `MARKERSCOPE_FRAMES_IN_FLIGHT` is not set.
pub const DEFAULT_FRAMES_IN_FLIGHT: usize = 2;
/// The most frames in flight the setting may ask for.
pub const MAX_FRAMES_IN_FLIGHT: usize = 8;

/// Decoders NVDEC decoding runs at once: one decoder keeps one NVDEC engine busy, and a
/// data-centre GPU has several (H100: 7). Two decoders on an H100, a 1080p H.264 clip decoded
/// by separate processes: 502–512 frames/s each, where one alone made 547–596.
pub const NVDEC_DECODERS: usize = 2;
/// The most NVDEC decoders `MARKERSCOPE_NVDEC_DECODERS` may ask for.
pub const MAX_NVDEC_DECODERS: usize = 8;

/// The environment variable that turns frame graphs off (`0`) or on (`1`, the default).
pub const GRAPHS_ENV: &str = "MARKERSCOPE_CUDA_GRAPHS";

/// Everything the `MARKERSCOPE_*` variables set.
#[derive(Clone, Debug, PartialEq)]
pub struct Tuning {
    /// How the CUDA labelers run.
    pub gpu: GpuTuning,
    /// `MARKERSCOPE_NVDEC_DECODERS`: NVDEC decoders that decode an H.264 or HEVC file read once
    /// through at the same time, each its own segment; 1 to `MAX_NVDEC_DECODERS` (8). `None`
    /// when unset (anything else counts as unset): `nvdec_decoders_for` picks.
    pub nvdec_decoders: Option<usize>,
    /// What `bench` uses.
    pub bench: BenchTuning,
    /// Values that could not be used, each with the default taken instead; the pipeline reports
    /// them as notices.
    pub notices: Vec<String>,
}

/// How the CUDA labelers run.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuTuning {
    /// `MARKERSCOPE_FRAMES_IN_FLIGHT`: frames a CUDA labeler keeps on the GPU at once (the
    /// next one uploads while the last one is labeled); 1 to `MAX_FRAMES_IN_FLIGHT` (8), default
    /// `DEFAULT_FRAMES_IN_FLIGHT` (2). 1: each frame is done before the next is submitted.
    pub frames_in_flight: usize,
    /// `MARKERSCOPE_CUDA_GRAPHS`: one CUDA graph per frame (`1`, `on`, `true`: the default), or
    /// plain kernel launches with a time per step (`0`, `off`, `false`).
    pub cuda_graphs: bool,
    /// `MARKERSCOPE_KERNEL_CACHE`: the folder of the compiled-kernel cache, None for no cache
    /// (`off`). `from_env` takes `$XDG_CACHE_HOME/markerscope/kernels`, else
    /// `$HOME/.cache/markerscope/kernels`, when the variable is unset; `default()` has none.
    pub kernel_cache: Option<PathBuf>,
    /// `MARKERSCOPE_GPU_TRACKER`: frames labeled on the GPU are tracked on the GPU from the
    /// first heavy frame (any value but `0`, `off`, `false`: the default), or by the CPU
    /// tracker (the same IDs).
    pub gpu_tracker: bool,
    /// `MARKERSCOPE_FRAME_SETS`: the frames of several sources are labeled together, as frame
    /// sets, where they can (any value but `0`, `off`, `false`: the default), or each by its
    /// source's own worker (`pipeline::Pipeline::start_set`).
    pub frame_sets: bool,
}

impl Default for GpuTuning {
    fn default() -> Self {
        GpuTuning {
            frames_in_flight: DEFAULT_FRAMES_IN_FLIGHT,
            cuda_graphs: true,
            kernel_cache: None,
            gpu_tracker: true,
            frame_sets: true,
        }
    }
}

/// What `bench` uses.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchTuning {
    /// `MARKERSCOPE_QUIET`: no progress output (any value but `0`); default off.
    pub quiet: bool,
    /// `MARKERSCOPE_FONT`: the TrueType font for PNG plots; default none (the first common
    /// system font found).
    pub font: Option<PathBuf>,
    /// `MARKERSCOPE_PEERS`: the peers script of `--peers`; default none (looked for beside the
    /// current folder and the binary).
    pub peers: Option<PathBuf>,
    /// `MARKERSCOPE_PYTHON`: the Python that runs the peers script; default `python3`.
    pub python: String,
}

impl Default for BenchTuning {
    fn default() -> Self {
        BenchTuning {
            quiet: false,
            font: None,
            peers: None,
            python: "python3".into(),
        }
    }
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            gpu: GpuTuning::default(),
            nvdec_decoders: None,
            bench: BenchTuning::default(),
            notices: Vec::new(),
        }
    }
}

impl Tuning {
    /// NVDEC decoders on each of `sources` files read together: as many as asked for, else
    /// `NVDEC_DECODERS` on one file and one on each of several. Files of their own keep the
    /// engines busy, and more decoders only take turns on them: 1080p H.264 files on an H200
    /// (7 engines), two decoders a file against one, 1,194–1,368 against 1,772–1,812 frames/s
    /// in all for four files, 1,377–1,447 against 2,608–2,653 for eight.
    pub fn nvdec_decoders_for(&self, sources: usize) -> usize {
        match (self.nvdec_decoders, sources) {
            (Some(asked), _) => asked,
            (None, 0 | 1) => NVDEC_DECODERS,
            (None, _) => 1,
        }
    }

    /// The tuning the process environment asks for. An invalid `MARKERSCOPE_CUDA_GRAPHS` is an
    /// error; other invalid values give their default (with a notice where one is said).
    pub fn from_env() -> Result<Tuning> {
        Tuning::from_vars(|name| std::env::var_os(name))
    }

    /// The tuning `var` (a variable's value by name) asks for: `from_env` without the process.
    pub fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> Result<Tuning> {
        // Text values; one that is not Unicode counts as unset.
        let text = |name: &str| var(name).and_then(|v| v.into_string().ok());
        let mut notices = Vec::new();
        let frames_in_flight = frames_in_flight_from(
            text("MARKERSCOPE_FRAMES_IN_FLIGHT").as_deref(),
        )
        .unwrap_or_else(|why| {
            notices.push(why);
            DEFAULT_FRAMES_IN_FLIGHT
        });
        Ok(Tuning {
            gpu: GpuTuning {
                frames_in_flight,
                cuda_graphs: graphs_enabled(text(GRAPHS_ENV).as_deref())?,
                kernel_cache: kernel_cache_from(&var),
                gpu_tracker: switched_on(text("MARKERSCOPE_GPU_TRACKER").as_deref()),
                frame_sets: switched_on(text("MARKERSCOPE_FRAME_SETS").as_deref()),
            },
            nvdec_decoders: nvdec_decoders_from(text("MARKERSCOPE_NVDEC_DECODERS").as_deref()),
            bench: BenchTuning {
                quiet: var("MARKERSCOPE_QUIET").is_some_and(|v| v != "0"),
                font: var("MARKERSCOPE_FONT").map(PathBuf::from),
                peers: var("MARKERSCOPE_PEERS").map(PathBuf::from),
                python: text("MARKERSCOPE_PYTHON").unwrap_or_else(|| "python3".into()),
            },
            notices,
        })
    }
}

/// A switch that is on unless its value is `0`, `off` or `false`.
fn switched_on(value: Option<&str>) -> bool {
    !matches!(value.map(str::trim), Some("0" | "off" | "false"))
}

/// The frames in flight that `MARKERSCOPE_FRAMES_IN_FLIGHT` asks of a GPU labeler (`value` is
/// the variable's value): 1 to `MAX_FRAMES_IN_FLIGHT`, else the default, with the reason why.
pub fn frames_in_flight_from(value: Option<&str>) -> std::result::Result<usize, String> {
    let Some(value) = value else {
        return Ok(DEFAULT_FRAMES_IN_FLIGHT);
    };
    match value.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_FRAMES_IN_FLIGHT).contains(&n) => Ok(n),
        _ => Err(format!(
            "MARKERSCOPE_FRAMES_IN_FLIGHT={value:?} is not a number from 1 to {MAX_FRAMES_IN_FLIGHT}; \
             using {DEFAULT_FRAMES_IN_FLIGHT}"
        )),
    }
}

/// Whether frame graphs are on, from the value of `MARKERSCOPE_CUDA_GRAPHS` (unset: on).
pub fn graphs_enabled(value: Option<&str>) -> Result<bool> {
    match value.map(str::trim) {
        None | Some("") | Some("1") | Some("on") | Some("true") => Ok(true),
        Some("0") | Some("off") | Some("false") => Ok(false),
        Some(other) => Err(Error::Invalid(format!(
            "{GRAPHS_ENV}={other}: expected 0 (plain launches, per-step timings) or 1 (one CUDA graph per frame)"
        ))),
    }
}

/// The NVDEC decoders that `MARKERSCOPE_NVDEC_DECODERS` (`value`) asks for: 1 to
/// `MAX_NVDEC_DECODERS`; `None` when unset or anything else.
pub fn nvdec_decoders_from(value: Option<&str>) -> Option<usize> {
    value
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| (1..=MAX_NVDEC_DECODERS).contains(n))
}

/// The kernel cache folder: `MARKERSCOPE_KERNEL_CACHE` (a folder, or `off` for none), else
/// `$XDG_CACHE_HOME/markerscope/kernels`, else `$HOME/.cache/markerscope/kernels`; None when
/// no folder can be named. Empty values count as unset.
fn kernel_cache_from(var: &impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let set = |name| var(name).filter(|v| !v.is_empty());
    if let Some(dir) = set("MARKERSCOPE_KERNEL_CACHE") {
        return (dir != "off").then(|| PathBuf::from(dir));
    }
    let base = set("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| set("HOME").map(|home| Path::new(&home).join(".cache")))?;
    Some(base.join("markerscope").join("kernels"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn from(vars: &[(&str, &str)]) -> Result<Tuning> {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        Tuning::from_vars(|name| vars.get(name).cloned())
    }

    #[test]
    fn frames_in_flight_come_from_the_setting_or_the_default() {
        assert_eq!(frames_in_flight_from(None), Ok(DEFAULT_FRAMES_IN_FLIGHT));
        assert_eq!(frames_in_flight_from(Some("1")), Ok(1));
        assert_eq!(frames_in_flight_from(Some(" 3 ")), Ok(3));
        assert_eq!(frames_in_flight_from(Some("8")), Ok(MAX_FRAMES_IN_FLIGHT));
        for bad in ["0", "9", "two", "-1", ""] {
            let why = frames_in_flight_from(Some(bad)).unwrap_err();
            assert!(
                why.contains("MARKERSCOPE_FRAMES_IN_FLIGHT") && why.contains("1 to 8"),
                "{why}"
            );
        }
    }

    #[test]
    fn the_switch_reads_on_and_off_and_rejects_anything_else() {
        assert!(graphs_enabled(None).unwrap());
        assert!(graphs_enabled(Some("1")).unwrap());
        assert!(graphs_enabled(Some(" on ")).unwrap());
        assert!(!graphs_enabled(Some("0")).unwrap());
        assert!(!graphs_enabled(Some("off")).unwrap());
        let err = graphs_enabled(Some("maybe")).unwrap_err().to_string();
        assert!(err.contains("MARKERSCOPE_CUDA_GRAPHS=maybe"), "{err}");
    }

    #[test]
    fn nvdec_decoders_setting() {
        assert_eq!(nvdec_decoders_from(None), None);
        assert_eq!(nvdec_decoders_from(Some("3")), Some(3));
        assert_eq!(nvdec_decoders_from(Some(" 1 ")), Some(1));
        for bad in ["0", "9", "two", ""] {
            assert_eq!(nvdec_decoders_from(Some(bad)), None, "{bad}");
        }
    }

    /// Unset, two decoders on one file and one on each of several; a number asked for holds
    /// whatever the files.
    #[test]
    fn several_files_read_together_take_one_nvdec_decoder_each() {
        let unset = Tuning::default();
        let per_file: Vec<usize> = [1, 2, 4, 8]
            .iter()
            .map(|&n| unset.nvdec_decoders_for(n))
            .collect();
        assert_eq!(per_file, [2, 1, 1, 1]);
        let asked = Tuning {
            nvdec_decoders: Some(3),
            ..Tuning::default()
        };
        assert_eq!(asked.nvdec_decoders_for(1), 3);
        assert_eq!(asked.nvdec_decoders_for(8), 3);
    }

    #[test]
    fn nothing_set_gives_the_defaults_and_the_users_cache_folder() {
        let tuning = from(&[("HOME", "/home/a")]).unwrap();
        assert_eq!(
            tuning.gpu.kernel_cache,
            Some(PathBuf::from("/home/a/.cache/markerscope/kernels"))
        );
        let without_cache = Tuning {
            gpu: GpuTuning {
                kernel_cache: None,
                ..tuning.gpu.clone()
            },
            ..tuning
        };
        assert_eq!(without_cache, Tuning::default());
        let xdg = from(&[("HOME", "/home/a"), ("XDG_CACHE_HOME", "/c")]).unwrap();
        assert_eq!(
            xdg.gpu.kernel_cache,
            Some(PathBuf::from("/c/markerscope/kernels"))
        );
        assert_eq!(from(&[]).unwrap().gpu.kernel_cache, None);
    }

    #[test]
    fn every_variable_reaches_its_field() {
        let tuning = from(&[
            ("MARKERSCOPE_FRAMES_IN_FLIGHT", "3"),
            ("MARKERSCOPE_CUDA_GRAPHS", "0"),
            ("MARKERSCOPE_KERNEL_CACHE", "/k"),
            ("MARKERSCOPE_GPU_TRACKER", "off"),
            ("MARKERSCOPE_FRAME_SETS", "0"),
            ("MARKERSCOPE_NVDEC_DECODERS", "4"),
            ("MARKERSCOPE_QUIET", "1"),
            ("MARKERSCOPE_FONT", "/f.ttf"),
            ("MARKERSCOPE_PEERS", "/p.py"),
            ("MARKERSCOPE_PYTHON", "python3.12"),
        ])
        .unwrap();
        assert_eq!(
            tuning.gpu,
            GpuTuning {
                frames_in_flight: 3,
                cuda_graphs: false,
                kernel_cache: Some(PathBuf::from("/k")),
                gpu_tracker: false,
                frame_sets: false,
            }
        );
        assert_eq!(tuning.nvdec_decoders, Some(4));
        assert_eq!(tuning.nvdec_decoders_for(8), 4);
        assert_eq!(
            tuning.bench,
            BenchTuning {
                quiet: true,
                font: Some(PathBuf::from("/f.ttf")),
                peers: Some(PathBuf::from("/p.py")),
                python: "python3.12".into(),
            }
        );
        assert!(tuning.notices.is_empty());
    }

    #[test]
    fn bad_values_give_the_default_with_a_notice_or_an_error() {
        let tuning = from(&[
            ("MARKERSCOPE_FRAMES_IN_FLIGHT", "9"),
            ("MARKERSCOPE_NVDEC_DECODERS", "many"),
            ("MARKERSCOPE_KERNEL_CACHE", "off"),
            ("MARKERSCOPE_QUIET", "0"),
        ])
        .unwrap();
        assert_eq!(tuning.gpu.frames_in_flight, DEFAULT_FRAMES_IN_FLIGHT);
        assert_eq!(tuning.nvdec_decoders, None);
        assert_eq!(tuning.gpu.kernel_cache, None);
        assert!(!tuning.bench.quiet);
        assert_eq!(tuning.notices.len(), 1);
        assert!(tuning.notices[0].contains("MARKERSCOPE_FRAMES_IN_FLIGHT=\"9\""));
        let err = from(&[("MARKERSCOPE_CUDA_GRAPHS", "maybe")]).unwrap_err();
        assert!(err.to_string().contains("MARKERSCOPE_CUDA_GRAPHS=maybe"));
    }
}
