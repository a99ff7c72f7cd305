//! The benchmark's flags checked against a plan on the CPU backend, with no run: every
//! invalid combination is an error that names its flag.

use super::{BenchArgs, BenchPlan, Limits};
use crate::ccl::Backends;

fn plan_err(args: BenchArgs) -> String {
    let limits = Limits {
        host_memory: Some(1 << 30),
        device_memory: None,
    };
    match BenchPlan::new(&args, &Backends::cpu_only(), &limits) {
        Ok(_) => panic!("{args:?} was accepted"),
        Err(e) => e.to_string(),
    }
}

fn small() -> BenchArgs {
    BenchArgs {
        sizes: Some("64x64".into()),
        densities: "0.5".into(),
        granularities: "1".into(),
        backend: "cpu".into(),
        repeat: 1,
        ..BenchArgs::default()
    }
}

#[test]
fn every_invalid_flag_is_an_error() {
    // A valid baseline first, so the failures below are the flag's fault.
    let limits = Limits {
        host_memory: Some(1 << 30),
        device_memory: None,
    };
    BenchPlan::new(&small(), &Backends::cpu_only(), &limits).expect("the baseline is valid");

    let cases: Vec<(BenchArgs, &str)> = vec![
        (
            BenchArgs {
                algorithms: Some("nope".into()),
                ..small()
            },
            "unknown algorithm 'nope'",
        ),
        (
            BenchArgs {
                algorithms: Some("lsl,,bfs".into()),
                ..small()
            },
            "empty name",
        ),
        (
            BenchArgs {
                sizes: Some("0x10".into()),
                ..small()
            },
            "empty",
        ),
        (
            BenchArgs {
                sizes: Some("10x".into()),
                ..small()
            },
            "not a whole number",
        ),
        (
            BenchArgs {
                sizes: Some("ten".into()),
                ..small()
            },
            "not WIDTHxHEIGHT",
        ),
        (
            BenchArgs {
                sizes: Some("8x8x8".into()),
                ..small()
            },
            "not WIDTHxHEIGHT",
        ),
        (
            BenchArgs {
                sizes: Some("70000x70000".into()),
                ..small()
            },
            "32-bit labels",
        ),
        (
            BenchArgs {
                densities: "1.5".into(),
                ..small()
            },
            "outside [0, 1]",
        ),
        (
            BenchArgs {
                densities: "-0.1".into(),
                ..small()
            },
            "outside [0, 1]",
        ),
        (
            BenchArgs {
                densities: "nan".into(),
                ..small()
            },
            "not finite",
        ),
        (
            BenchArgs {
                densities: "0:1:0".into(),
                ..small()
            },
            "STEP must be > 0",
        ),
        (
            BenchArgs {
                densities: "1:0:0.1".into(),
                ..small()
            },
            "START is after END",
        ),
        (
            BenchArgs {
                densities: "0:1".into(),
                ..small()
            },
            "START:END:STEP",
        ),
        (
            BenchArgs {
                densities: "0:1:1e-9".into(),
                ..small()
            },
            "more than 100000",
        ),
        (
            BenchArgs {
                densities: "0:2:0.5".into(),
                ..small()
            },
            "outside [0, 1]",
        ),
        (
            BenchArgs {
                granularities: "0".into(),
                ..small()
            },
            "granularity 0",
        ),
        (
            BenchArgs {
                granularities: "-4".into(),
                ..small()
            },
            "whole number",
        ),
        (
            BenchArgs {
                connectivity: Some("6".into()),
                ..small()
            },
            "not 4 or 8",
        ),
        (
            BenchArgs {
                mode: "labels".into(),
                ..small()
            },
            "not ccl, cca or both",
        ),
        (
            BenchArgs {
                backend: "tpu".into(),
                ..small()
            },
            "not cuda, cpu or all",
        ),
        (
            BenchArgs {
                repeat: 0,
                ..small()
            },
            "--repeat",
        ),
        (
            BenchArgs {
                repeat: -3,
                ..small()
            },
            "--repeat",
        ),
        (
            BenchArgs {
                seed: -1,
                ..small()
            },
            "--seed",
        ),
        (
            BenchArgs {
                seed: 1 << 32,
                ..small()
            },
            "--seed",
        ),
        (
            BenchArgs {
                latency: true,
                frames: 0,
                ..small()
            },
            "--frames",
        ),
        (
            BenchArgs {
                latency: true,
                warmup: -1,
                ..small()
            },
            "--warmup",
        ),
        (
            BenchArgs {
                latency: true,
                latency_frames: Some("video".into()),
                ..small()
            },
            "--latency-frames: 'video': expected random or demo",
        ),
        (
            BenchArgs {
                latency_frames: Some("demo".into()),
                ..small()
            },
            "--latency-frames: goes with --latency",
        ),
        (
            BenchArgs {
                plot: Some("out.pdf".into()),
                ..small()
            },
            ".svg or .png",
        ),
        (
            BenchArgs {
                plot: Some("/no/such/folder/p.svg".into()),
                ..small()
            },
            "does not exist",
        ),
        (
            BenchArgs {
                json: Some("/no/such/folder/b.json".into()),
                ..small()
            },
            "does not exist",
        ),
        (
            BenchArgs {
                json: Some(std::env::temp_dir()),
                ..small()
            },
            "is a directory",
        ),
        // 1 GiB is the limit given above: 16384² needs 9 bytes/px = 2.25 GiB.
        (
            BenchArgs {
                sizes: Some("16384x16384".into()),
                ..small()
            },
            "host memory",
        ),
        // CUDA requested on a CPU-only set of backends.
        (
            BenchArgs {
                backend: "cuda".into(),
                ..small()
            },
            "CUDA",
        ),
    ];
    for (args, want) in cases {
        let err = plan_err(args.clone());
        assert!(
            err.contains(want),
            "{args:?}: error '{err}' does not mention '{want}'"
        );
    }
    // A GPU algorithm on the CPU backend (unknown in a build without CUDA, unavailable with it).
    let err = plan_err(BenchArgs {
        backend: "cpu".into(),
        algorithms: Some("ha4".into()),
        ..small()
    });
    assert!(err.contains("ha4"), "{err}");
}

fn pipeline_small() -> BenchArgs {
    BenchArgs {
        pipeline: true,
        backend: "cpu".into(),
        scenes: Some("demo".into()),
        sizes: Some("64x48".into()),
        frames: 3,
        warmup: 1,
        ..BenchArgs::default()
    }
}

#[test]
fn pipeline_flags_that_make_no_sense_are_errors() {
    let limits = Limits {
        host_memory: Some(1 << 30),
        device_memory: None,
    };
    let plan = BenchPlan::new(&pipeline_small(), &Backends::cpu_only(), &limits)
        .expect("the baseline is valid");
    let p = plan.pipeline.as_ref().unwrap();
    // The window's defaults: 8-connectivity, the CPU backend's default algorithm.
    assert_eq!(p.runs.len(), 1);
    assert_eq!(p.runs[0].0.number(), 8);
    assert_eq!(p.runs[0].1.name, "lsl");
    assert_eq!(p.scenes.len(), 1);
    assert_eq!(p.scenes[0].prepared, 4, "warm-up + timed frames");
    // Without --scenes and --sizes: demo at three sizes and clutter at 1080p.
    let all = BenchPlan::new(
        &BenchArgs {
            scenes: None,
            sizes: None,
            ..pipeline_small()
        },
        &Backends::cpu_only(),
        &Limits::default(),
    )
    .unwrap();
    let scenes: Vec<String> = all
        .pipeline
        .unwrap()
        .scenes
        .iter()
        .map(|s| format!("{} {}", s.scene.name(), s.size))
        .collect();
    assert_eq!(
        scenes,
        [
            "demo 1280x720",
            "demo 1920x1080",
            "demo 3840x2160",
            "clutter 1920x1080"
        ]
    );

    let cases: Vec<(BenchArgs, &str)> = vec![
        (
            BenchArgs {
                frames: 0,
                ..pipeline_small()
            },
            "--frames: 0 frames",
        ),
        (
            BenchArgs {
                warmup: -2,
                ..pipeline_small()
            },
            "--warmup",
        ),
        (
            BenchArgs {
                sizes: Some("0x48".into()),
                ..pipeline_small()
            },
            "--sizes",
        ),
        (
            BenchArgs {
                scenes: Some("demo,forest".into()),
                ..pipeline_small()
            },
            "--scenes: unknown scene 'forest'",
        ),
        (
            BenchArgs {
                scenes: Some("demo,,clutter".into()),
                ..pipeline_small()
            },
            "--scenes: empty name",
        ),
        (
            BenchArgs {
                scenes: Some("video".into()),
                ..pipeline_small()
            },
            "--video PATH",
        ),
        (
            BenchArgs {
                video: Some("/no/such/clip.mp4".into()),
                ..pipeline_small()
            },
            "/no/such/clip.mp4: no such file",
        ),
        (
            BenchArgs {
                scenes: Some("demo,video:/no/such/clip.mkv".into()),
                ..pipeline_small()
            },
            "/no/such/clip.mkv: no such file",
        ),
        (
            BenchArgs {
                video: Some(std::env::temp_dir()),
                ..pipeline_small()
            },
            "not a file",
        ),
        (
            BenchArgs {
                latency: true,
                ..pipeline_small()
            },
            "--pipeline: cannot be combined with --latency",
        ),
        (
            BenchArgs {
                conflicts: true,
                ..pipeline_small()
            },
            "--pipeline: cannot be combined with --conflicts",
        ),
        (
            BenchArgs {
                threshold: Some("median".into()),
                ..pipeline_small()
            },
            "--threshold: invalid threshold 'median'",
        ),
        (
            BenchArgs {
                densities: "0.5".into(),
                ..pipeline_small()
            },
            "--densities: does not apply to --pipeline",
        ),
        (
            BenchArgs {
                repeat: 3,
                ..pipeline_small()
            },
            "--repeat: does not apply to --pipeline",
        ),
        (
            BenchArgs {
                plot: Some("p.svg".into()),
                ..pipeline_small()
            },
            "--plot: does not apply to --pipeline",
        ),
        (
            BenchArgs {
                markdown: Some("/no/such/folder/t.md".into()),
                ..pipeline_small()
            },
            "--markdown: folder /no/such/folder does not exist",
        ),
        (
            BenchArgs {
                algorithms: Some("ha4w".into()),
                ..pipeline_small()
            },
            "ha4w",
        ),
        (
            BenchArgs {
                backend: "cuda".into(),
                ..pipeline_small()
            },
            "CUDA",
        ),
        // 4096x4096 frames, 221 of them held: 3.5 GiB against the 1 GiB given.
        (
            BenchArgs {
                sizes: Some("4096x4096".into()),
                frames: 200,
                warmup: 21,
                ..pipeline_small()
            },
            "host memory",
        ),
        (
            BenchArgs {
                scenes: Some("video:clip.mp4".into()),
                ..pipeline_small()
            },
            "--sizes: sets the size of the demo and clutter scenes",
        ),
        // The pipeline's own flags without --pipeline.
        (
            BenchArgs {
                scenes: Some("demo".into()),
                ..small()
            },
            "--scenes: goes with --pipeline",
        ),
        (
            BenchArgs {
                video: Some("clip.mp4".into()),
                ..small()
            },
            "--video: goes with --pipeline",
        ),
        (
            BenchArgs {
                threshold: Some("otsu".into()),
                ..small()
            },
            "--threshold: goes with --pipeline",
        ),
        (
            BenchArgs {
                no_subpixel: true,
                ..small()
            },
            "--no-subpixel: goes with --pipeline",
        ),
    ];
    for (args, want) in cases {
        let err = match BenchPlan::new(&args, &Backends::cpu_only(), &limits) {
            Ok(_) => panic!("{args:?} was accepted"),
            Err(e) => e.to_string(),
        };
        assert!(
            err.contains(want),
            "{args:?}: error '{err}' does not mention '{want}'"
        );
    }
}

/// `--out FORMAT[:PATH]`: a format and an optional path, with `--pipeline` only.
#[test]
fn rows_out_takes_a_format_and_a_path_with_pipeline_only() {
    use crate::output::export::Format;
    let limits = Limits {
        host_memory: Some(1 << 30),
        device_memory: None,
    };
    let plan = |out: &str| {
        BenchPlan::new(
            &BenchArgs {
                out: Some(out.into()),
                ..pipeline_small()
            },
            &Backends::cpu_only(),
            &limits,
        )
    };
    let out = |spec: &str| plan(spec).unwrap().pipeline.unwrap().flags.out.unwrap();
    assert_eq!(out("csv").format, Format::Csv);
    assert_eq!(out("csv").path, None);
    let to_null = out("Parquet:/dev/null");
    assert_eq!(to_null.format, Format::Parquet);
    assert_eq!(
        to_null.path.as_deref(),
        Some(std::path::Path::new("/dev/null"))
    );
    for (spec, why) in [
        ("xml", "--out: 'xml' is not a format"),
        ("csv:", "--out: the path after : is empty"),
        (
            "arrow:/no/such/folder/r.arrow",
            "--out: folder /no/such/folder does not exist",
        ),
    ] {
        let err = match plan(spec) {
            Ok(_) => panic!("{spec} was accepted"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(why), "{spec}: {err}");
    }
    let err = plan_err(BenchArgs {
        out: Some("csv".into()),
        ..small()
    });
    assert!(err.contains("--out: goes with --pipeline"), "{err}");
}
