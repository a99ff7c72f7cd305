//! `--pipeline`: its flags, its default algorithms and its scenes checked against this machine.

use super::super::spec::{invalid, BackendChoice, Scene, Size};
use super::args::{
    BenchArgs, DEFAULT_DENSITIES, DEFAULT_GRANULARITIES, DEFAULT_MODE, DEFAULT_REPEAT, DEFAULT_SEED,
};
use super::memory::{check_scene_memory, Limits};
use super::parse::{frame_counts, output_path, parse_sizes, split_list};
use super::{
    ParsedArgs, PipelineFlags, PipelinePlan, PipelineScene, RowsOut, PIPELINE_PREPARED_FRAMES,
};
use crate::ccl::{algorithm_info, AlgorithmInfo, Backend, Backends, Connectivity};
use crate::error::{Error, Result};
use crate::pipeline::{resolve_algorithm, ComponentFilter, PipelineSettings};
use crate::threshold::spec::ThresholdSpec;
use std::path::Path;

/// `--pipeline` and the flags that go with it (None without `--pipeline`, after checking that
/// none of its own flags was given).
pub(super) fn parse_pipeline(args: &BenchArgs) -> Result<Option<PipelineFlags>> {
    if !args.pipeline {
        refuse_pipeline_flags(args)?;
        return Ok(None);
    }
    refuse_other_flags(args)?;
    let (frames, warmup) = frame_counts(args)?;
    let threshold = match &args.threshold {
        None => ThresholdSpec::default(),
        Some(t) => t.parse().map_err(|e| invalid("threshold", e))?,
    };
    let video = args.video.as_deref();
    if video.is_some_and(|v| v.as_os_str().is_empty()) {
        return Err(invalid("video", "empty path"));
    }
    let scenes = parse_scenes(args.scenes.as_deref(), video)?;
    let sizes = args.sizes.as_deref().map(parse_sizes).transpose()?;
    if sizes.is_some() && scenes.iter().all(|s| matches!(s, Scene::Video(_))) {
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
        scenes,
        sizes,
        frames,
        warmup,
        threshold,
        subpixel: !args.no_subpixel,
        filter,
        markdown: args.markdown.clone(),
        out: args.out.as_deref().map(parse_rows_out).transpose()?,
    }))
}

/// `--out FORMAT[:PATH]`.
fn parse_rows_out(spec: &str) -> Result<RowsOut> {
    use clap::ValueEnum;
    let (format, path) = match spec.split_once(':') {
        Some((format, path)) => (format, Some(path)),
        None => (spec, None),
    };
    let format = crate::output::export::Format::from_str(format, true).map_err(|_| {
        invalid(
            "out",
            format!(
                "'{format}' is not a format: csv, jsonl, parquet or arrow, then :PATH if wanted"
            ),
        )
    })?;
    let path = match path {
        Some("") => return Err(invalid("out", "the path after : is empty")),
        Some(p) => {
            output_path("out", Path::new(p))?;
            Some(p.into())
        }
        None => None,
    };
    Ok(RowsOut { format, path })
}

/// Without `--pipeline`, its own flags are errors.
fn refuse_pipeline_flags(args: &BenchArgs) -> Result<()> {
    let own = [
        ("scenes", args.scenes.is_some()),
        ("video", args.video.is_some()),
        ("threshold", args.threshold.is_some()),
        ("no-subpixel", args.no_subpixel),
        ("min-area", args.min_area.is_some()),
        ("max-area", args.max_area.is_some()),
        ("max-aspect", args.max_aspect.is_some()),
        ("markdown", args.markdown.is_some()),
        ("out", args.out.is_some()),
    ];
    match own.iter().find(|(_, given)| *given) {
        Some((flag, _)) => Err(invalid(flag, "goes with --pipeline")),
        None => Ok(()),
    }
}

/// With `--pipeline`, the other modes and the random images' flags are errors: they mean
/// nothing to the scenes, so say so rather than ignore them.
fn refuse_other_flags(args: &BenchArgs) -> Result<()> {
    let other_mode = [("latency", args.latency), ("conflicts", args.conflicts)];
    if let Some((flag, _)) = other_mode.iter().find(|(_, given)| *given) {
        return Err(invalid(
            "pipeline",
            format!("cannot be combined with --{flag}: run them one after the other"),
        ));
    }
    let unused = [
        ("densities", args.densities != DEFAULT_DENSITIES),
        ("granularities", args.granularities != DEFAULT_GRANULARITIES),
        ("mode", args.mode != DEFAULT_MODE),
        ("repeat", args.repeat != DEFAULT_REPEAT),
        ("seed", args.seed != DEFAULT_SEED),
        ("plot", args.plot.is_some()),
        ("latency-frames", args.latency_frames.is_some()),
    ];
    match unused.iter().find(|(_, given)| *given) {
        Some((flag, _)) => Err(invalid(
            flag,
            "does not apply to --pipeline (its frames come from --scenes; see bench --help)",
        )),
        None => Ok(()),
    }
}

/// `--scenes` (default: demo and clutter) and the `--video` file, each once, in order.
fn parse_scenes(list: Option<&str>, video: Option<&Path>) -> Result<Vec<Scene>> {
    let mut scenes: Vec<Scene> = match list {
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
    Ok(unique)
}

/// `--pipeline` without `--algorithms`: per connectivity, the algorithm the window and analyze
/// would pick on each backend in use.
pub(super) fn pipeline_default_runs(
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

/// The scenes at their sizes (a video opened and its first frame decoded here, so that a
/// missing or undecodable file fails before any work), and the memory they need.
pub(super) fn resolve_pipeline(
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
            Scene::Demo | Scene::Clutter | Scene::Markers(_) | Scene::Particles(_) => {
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
        check_scene_memory(s, cuda, limits)?;
    }
    Ok(PipelinePlan {
        scenes,
        flags: flags.clone(),
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
}
