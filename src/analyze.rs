//! `markerscope analyze`: image or folder → threshold → components → CSV/JSONL.
//!
//! Everything that can be wrong with the request (output not writable, no inputs, unknown
//! algorithm, CUDA missing) is checked before the first image is decoded. A file output is
//! written to a temporary file beside the target and renamed into place only on success, so a
//! failed run never leaves a partial file behind.

use crate::ccl::{Backend, Backends, Connectivity, Labeler, Want};
use crate::error::{Error, Result};
use crate::export::{Exporter, Format};
use crate::image::{check_size, GrayImage};
use crate::threshold::{self, ThresholdSpec};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// File extensions treated as images when reading a folder (the formats this build decodes).
pub const IMAGE_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "bmp", "tif", "tiff", "pgm", "ppm", "pbm", "pnm", "gif", "webp",
];

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    /// CUDA when a usable GPU is found, else the CPU.
    #[default]
    Auto,
    Cpu,
    Cuda,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    Stdout,
    File(PathBuf),
}

impl Output {
    /// `-` is standard output; anything else a file path.
    pub fn parse(s: &str) -> Output {
        if s == "-" {
            Output::Stdout
        } else {
            Output::File(PathBuf::from(s))
        }
    }
}

#[derive(Clone, Debug)]
pub struct AnalyzeOptions {
    pub input: PathBuf,
    pub connectivity: Connectivity,
    pub threshold: ThresholdSpec,
    pub invert: bool,
    pub backend: BackendChoice,
    /// Registry name; None = the backend's default algorithm.
    pub algorithm: Option<String>,
    /// None = from the output file's extension, else CSV.
    pub format: Option<Format>,
    pub output: Output,
}

/// What a run did, for a closing line on stderr.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnalyzeSummary {
    pub images: usize,
    pub components: u64,
    pub algorithm: String,
}

/// Runs the analysis. `notice` receives one-line messages meant for stderr (the CPU fallback).
pub fn run(opts: &AnalyzeOptions, mut notice: impl FnMut(&str)) -> Result<AnalyzeSummary> {
    let inputs = list_inputs(&opts.input)?;
    let format = opts.format.unwrap_or(match &opts.output {
        Output::File(p) => Format::from_path(p).unwrap_or(Format::Csv),
        Output::Stdout => Format::Csv,
    });
    // Open the output before any work: an unwritable path fails in milliseconds.
    let sink = Sink::open(&opts.output)?;
    // Headers only: empty, huge or unreadable files fail here, before any decoding.
    for path in &inputs {
        check_dimensions(path)?;
    }
    let (mut labeler, algorithm) = make_labeler(opts, &mut notice)?;

    let mut exporter = Exporter::new(sink.writer(), format).map_err(|e| sink.error(e))?;
    let mut components = 0u64;
    for (frame, path) in inputs.iter().enumerate() {
        let stats = analyze_one(path, opts, labeler.as_mut())?;
        components += stats.len() as u64;
        let name = path
            .file_name()
            .map_or_else(|| path.to_string_lossy(), |n| n.to_string_lossy());
        exporter
            .write_frame(frame as u64, &name, &stats)
            .map_err(|e| sink.error(e))?;
    }
    let writer = exporter.finish().map_err(|e| sink.error(e))?;
    drop(writer);
    sink.commit()?;
    Ok(AnalyzeSummary {
        images: inputs.len(),
        components,
        algorithm,
    })
}

/// The images to analyze: the file itself, or every image file of a folder sorted by name.
pub fn list_inputs(input: &Path) -> Result<Vec<PathBuf>> {
    let meta =
        std::fs::metadata(input).map_err(|e| Error::image(input, format!("cannot read: {e}")))?;
    if !meta.is_dir() {
        return Ok(vec![input.to_path_buf()]);
    }
    let entries = std::fs::read_dir(input)
        .map_err(|e| Error::image(input, format!("cannot list folder: {e}")))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::image(input, format!("cannot list folder: {e}")))?;
        let path = entry.path();
        if path.is_file() && has_image_extension(&path) {
            files.push(path);
        }
    }
    if files.is_empty() {
        return Err(Error::image(
            input,
            format!(
                "the folder contains no image files ({})",
                IMAGE_EXTENSIONS.join(", ")
            ),
        ));
    }
    files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    Ok(files)
}

fn has_image_extension(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| IMAGE_EXTENSIONS.iter().any(|x| x.eq_ignore_ascii_case(e)))
}

/// Picks the backend and makes the algorithm instance; returns it with its name.
fn make_labeler(
    opts: &AnalyzeOptions,
    notice: &mut impl FnMut(&str),
) -> Result<(Box<dyn Labeler>, String)> {
    let backends = match opts.backend {
        BackendChoice::Cpu => Backends::cpu_only(),
        BackendChoice::Auto | BackendChoice::Cuda => Backends::detect(),
    };
    let cuda_missing = backends.cuda_unavailable_reason();
    if let (BackendChoice::Cuda, Some(reason)) = (opts.backend, &cuda_missing) {
        return Err(Error::Invalid(format!("--backend cuda: {reason}")));
    }
    let name = match &opts.algorithm {
        Some(name) => name.clone(),
        None => {
            let backend = match (opts.backend, &cuda_missing) {
                (BackendChoice::Cpu, _) => Backend::Cpu,
                (BackendChoice::Auto, Some(reason)) => {
                    notice(&format!("CPU backend: {reason}"));
                    Backend::Cpu
                }
                _ => Backend::Cuda,
            };
            let name = backends.default_algorithm(backend, opts.connectivity);
            let on_cpu = crate::ccl::algorithm_info(name).is_ok_and(|a| a.backend == Backend::Cpu);
            if backend == Backend::Cuda && on_cpu {
                // default_algorithm falls back to the CPU when no CUDA algorithm fits.
                let why = format!(
                    "no CUDA algorithm supports {}-connectivity",
                    opts.connectivity
                );
                if opts.backend == BackendChoice::Cuda {
                    return Err(Error::Invalid(format!(
                        "--backend cuda: {why}; use --connectivity 4 or --backend cpu"
                    )));
                }
                notice(&format!("CPU backend: {why}"));
            }
            name.to_string()
        }
    };
    if opts.backend == BackendChoice::Cuda {
        let info = crate::ccl::algorithm_info(&name)?;
        if info.backend != Backend::Cuda {
            return Err(Error::Invalid(format!(
                "--backend cuda: algorithm '{}' runs on the {}, not on CUDA",
                info.name, info.backend
            )));
        }
    }
    let labeler = backends.create(&name, opts.connectivity)?;
    Ok((labeler, labeler_name(&name)))
}

fn labeler_name(name: &str) -> String {
    crate::ccl::algorithm_info(name).map_or_else(|_| name.to_string(), |a| a.name.to_string())
}

/// Loads, thresholds and analyzes one image.
fn analyze_one(
    path: &Path,
    opts: &AnalyzeOptions,
    labeler: &mut dyn Labeler,
) -> Result<Vec<crate::stats::ComponentStats>> {
    check_dimensions(path)?;
    let grey = GrayImage::load(path)?;
    let binary = threshold::apply(&grey, &opts.threshold, opts.invert)?;
    let out = labeler
        .label(&binary, opts.connectivity, Want::Stats)
        .map_err(|e| Error::image(path, format!("labeling failed: {e}")))?;
    out.stats.ok_or_else(|| {
        Error::image(
            path,
            format!("algorithm '{}' returned no statistics", labeler.name()),
        )
    })
}

/// Reads only the header and checks the size, so a huge or empty image is refused before any
/// pixel buffer is allocated.
pub fn check_dimensions(path: &Path) -> Result<(u32, u32)> {
    let (w, h) = image::ImageReader::open(path)
        .map_err(|e| Error::image(path, format!("cannot open: {e}")))?
        .with_guessed_format()
        .map_err(|e| Error::image(path, format!("cannot read: {e}")))?
        .into_dimensions()
        .map_err(|e| Error::image(path, format!("not a readable image: {e}")))?;
    check_size(w, h).map_err(|e| Error::image(path, e.to_string()))?;
    Ok((w, h))
}

/// Where the rows go: stdout, or a temporary file renamed onto the target on success
/// (dropped, and so deleted, on failure).
enum Sink {
    Stdout,
    File {
        target: PathBuf,
        temp: tempfile::NamedTempFile,
    },
}

impl Sink {
    fn open(output: &Output) -> Result<Sink> {
        match output {
            Output::Stdout => Ok(Sink::Stdout),
            Output::File(target) => {
                if target.is_dir() {
                    return Err(output_error(target, "it is a folder"));
                }
                let dir = match target.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                    _ => PathBuf::from("."),
                };
                let prefix = format!(
                    ".{}.",
                    target
                        .file_name()
                        .map_or("markerscope".into(), |n| n.to_string_lossy())
                );
                if !dir.is_dir() {
                    let why = if dir.exists() {
                        "is not a folder"
                    } else {
                        "does not exist"
                    };
                    return Err(output_error(target, &format!("{} {why}", dir.display())));
                }
                // Report the bare reason: tempfile's message names the random temp file.
                let temp = tempfile::Builder::new()
                    .prefix(&prefix)
                    .suffix(".tmp")
                    .tempfile_in(&dir)
                    .map_err(|e| {
                        let why = std::io::Error::from(e.kind());
                        output_error(
                            target,
                            &format!("cannot create a file in {}: {why}", dir.display()),
                        )
                    })?;
                Ok(Sink::File {
                    target: target.clone(),
                    temp,
                })
            }
        }
    }

    fn writer(&self) -> Box<dyn Write + '_> {
        match self {
            Sink::Stdout => Box::new(BufWriter::new(std::io::stdout().lock())),
            Sink::File { temp, .. } => Box::new(BufWriter::with_capacity(1 << 16, temp.as_file())),
        }
    }

    fn error(&self, e: std::io::Error) -> Error {
        match self {
            Sink::Stdout => output_error(Path::new("<stdout>"), &e.to_string()),
            Sink::File { target, .. } => output_error(target, &e.to_string()),
        }
    }

    fn commit(self) -> Result<()> {
        match self {
            Sink::Stdout => Ok(()),
            Sink::File { target, temp } => {
                temp.as_file()
                    .sync_all()
                    .map_err(|e| output_error(&target, &e.to_string()))?;
                temp.persist(&target)
                    .map_err(|e| output_error(&target, &e.error.to_string()))?;
                Ok(())
            }
        }
    }
}

fn output_error(path: &Path, why: &str) -> Error {
    Error::Output {
        path: path.to_path_buf(),
        why: why.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_png(path: &Path, w: u32, h: u32, f: impl Fn(u32, u32) -> u8) {
        let img = image::GrayImage::from_fn(w, h, |x, y| image::Luma([f(x, y)]));
        img.save(path).unwrap();
    }

    fn opts(input: &Path, output: Output) -> AnalyzeOptions {
        AnalyzeOptions {
            input: input.to_path_buf(),
            connectivity: Connectivity::Eight,
            threshold: ThresholdSpec::Fixed(127),
            invert: false,
            backend: BackendChoice::Cpu,
            algorithm: None,
            format: None,
            output,
        }
    }

    #[test]
    fn folder_is_sorted_by_name_and_skips_other_files() {
        let dir = tempfile::tempdir().unwrap();
        write_png(&dir.path().join("b.png"), 4, 4, |x, _| {
            if x == 0 {
                255
            } else {
                0
            }
        });
        write_png(&dir.path().join("a.PNG"), 4, 4, |x, y| {
            if x == y {
                255
            } else {
                0
            }
        });
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        std::fs::create_dir(dir.path().join("sub.png")).unwrap();
        let files = list_inputs(dir.path()).unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap())
            .collect();
        assert_eq!(names, ["a.PNG", "b.png"]);

        let out = dir.path().join("out.jsonl");
        let summary = run(&opts(dir.path(), Output::File(out.clone())), |_| {}).unwrap();
        assert_eq!(summary.images, 2);
        assert_eq!(summary.components, 2);
        assert_eq!(summary.algorithm, "lsl");
        let text = std::fs::read_to_string(&out).unwrap();
        let rows: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(rows[0]["frame"], 0);
        assert_eq!(rows[0]["file"], "a.PNG");
        assert_eq!(rows[0]["area"], 4);
        assert_eq!(rows[1]["frame"], 1);
        assert_eq!(rows[1]["height"], 4);
        // No temporary file left beside the output.
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn empty_folder_and_missing_path_are_errors_naming_the_input() {
        let dir = tempfile::tempdir().unwrap();
        let err = list_inputs(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains(&dir.path().display().to_string()) && err.contains("no image files"),
            "{err}"
        );
        let missing = dir.path().join("nope.png");
        let err = list_inputs(&missing).unwrap_err().to_string();
        assert!(err.contains("nope.png"), "{err}");
    }

    #[test]
    fn failure_leaves_no_output_file() {
        let dir = tempfile::tempdir().unwrap();
        write_png(&dir.path().join("a.png"), 4, 4, |_, _| 255);
        std::fs::write(dir.path().join("b.png"), b"not a png").unwrap();
        let out = dir.path().join("out.csv");
        let err = run(&opts(dir.path(), Output::File(out.clone())), |_| {})
            .unwrap_err()
            .to_string();
        assert!(err.contains("b.png"), "{err}");
        assert!(!out.exists());
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            2,
            "temp file removed"
        );
    }

    #[test]
    fn unknown_algorithm_fails_before_work() {
        let dir = tempfile::tempdir().unwrap();
        write_png(&dir.path().join("a.png"), 4, 4, |_, _| 255);
        let mut o = opts(dir.path(), Output::File(dir.path().join("o.csv")));
        o.algorithm = Some("nope".into());
        let err = run(&o, |_| {}).unwrap_err();
        assert!(matches!(err, Error::UnknownAlgorithm { .. }), "{err}");
        assert!(!dir.path().join("o.csv").exists());
    }
}
