//! `markerscope bench`: flag validation (no work done), JSON schema, plots, peers' images.

use markerscope::ccl::Backends;
use markerscope::cli::bench::{image_seed, BenchArgs, BenchPlan, Limits};
use markerscope::frame::random_image::{generate, RandomImageSpec};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn bench_cmd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_markerscope"))
        .arg("bench")
        .args(args)
        .current_dir(repo())
        .env("MARKERSCOPE_QUIET", "1")
        .output()
        .expect("the markerscope binary runs")
}

fn tiny() -> Vec<&'static str> {
    vec![
        "--backend",
        "cpu",
        "--sizes",
        "64x64",
        "--densities",
        "0.5",
        "--granularities",
        "1,4",
        "--repeat",
        "1",
    ]
}

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
                algorithms: "nope".into(),
                ..small()
            },
            "unknown algorithm 'nope'",
        ),
        (
            BenchArgs {
                algorithms: "lsl,,bfs".into(),
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
                connectivity: "6".into(),
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
        algorithms: "ha4".into(),
        ..small()
    });
    assert!(err.contains("ha4"), "{err}");
}

#[test]
fn invalid_flags_exit_2_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("b.json");
    let json = json.to_str().unwrap();
    for bad in [
        vec!["--densities", "0:1:-0.1"],
        vec!["--granularities", "0"],
        vec!["--repeat", "0"],
        vec!["--sizes", "0x0"],
        vec!["--algorithms", "nope"],
    ] {
        let mut args = vec!["--backend", "cpu", "--json", json];
        args.extend(bad.iter().copied());
        let t = std::time::Instant::now();
        let out = bench_cmd(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {stderr}");
        assert!(stderr.contains("error:"), "{bad:?}: {stderr}");
        assert!(!Path::new(json).exists(), "{bad:?} wrote results");
        // The default sizes include 8192²: any work at all would take far longer.
        assert!(
            t.elapsed().as_secs_f64() < 5.0,
            "{bad:?} took {:?}",
            t.elapsed()
        );
    }
}

#[test]
fn json_schema_of_a_tiny_run() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("b.json");
    let svg = dir.path().join("b.svg");
    let mut args = tiny();
    args.extend([
        "--json",
        json.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    let out = bench_cmd(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Throughput") && stdout.contains("Per-step"),
        "{stdout}"
    );

    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["schema"], "markerscope-bench/1");
    assert!(v["date"].as_str().unwrap().ends_with('Z'));
    assert_eq!(v["inputs"]["sizes"][0]["width"], 64);
    assert_eq!(v["inputs"]["densities"][0], 0.5);
    assert_eq!(v["inputs"]["repeat"], 1);
    assert!(!v["machine"]["cpu"].as_str().unwrap().is_empty());
    assert!(v["seed_rule"].as_str().unwrap().contains("1000003"));
    assert!(v["averaging"].as_str().unwrap().contains("mean"));
    let bw = &v["bandwidth"][0];
    assert_eq!(bw["backend"], "cpu");
    assert!(bw["gb_s"].as_f64().unwrap() > 0.0);

    let rows = v["throughput"].as_array().unwrap();
    let algs = v["inputs"]["algorithms"].as_array().unwrap().len();
    // algorithms × 2 connectivities × 2 modes × 2 granularities
    assert_eq!(rows.len(), algs * 2 * 2 * 2, "{rows:?}");
    for r in rows {
        assert_eq!(r["source"], "markerscope");
        assert_eq!(r["backend"], "cpu");
        assert!(["ccl", "cca"].contains(&r["mode"].as_str().unwrap()));
        let pd = r["per_density"].as_array().unwrap();
        assert_eq!(pd.len(), 1);
        let d = &pd[0];
        assert_eq!(d["density"], 0.5);
        let g = r["granularity"].as_u64().unwrap() as u32;
        assert_eq!(d["seed"], image_seed(1, 0.5, g));
        assert!(d["best_ms"].as_f64().unwrap() > 0.0);
        assert!(d["count"].as_u64().unwrap() > 0);
        let gpx = r["mean_gpx_s"].as_f64().unwrap();
        assert!((gpx - d["gpx_s"].as_f64().unwrap()).abs() < 1e-9);
        assert!(
            (gpx - 64.0 * 64.0 / (d["best_ms"].as_f64().unwrap() * 1e6)).abs()
                < 1e-9 * gpx.max(1.0)
        );
        assert!(r["percent_of_ceiling"].as_f64().unwrap() > 0.0);
        assert!(!r["steps"].as_array().unwrap().is_empty());
    }
    assert!(v["count_mismatches"].as_array().unwrap().is_empty());

    let svg_text = std::fs::read_to_string(&svg).unwrap();
    assert!(svg_text.starts_with("<svg") && svg_text.contains("</svg>") && svg_text.len() > 1000);
    assert!(
        svg_text.contains("64x64 4-conn ccl g=1"),
        "the SVG has its captions"
    );
}

#[test]
fn png_plot_and_latency_mode() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("l.json");
    let png = dir.path().join("l.png");
    let png_possible = markerscope::cli::bench::png_font_available();
    let mut args = vec![
        "--backend",
        "cpu",
        "--latency",
        "--sizes",
        "48x32",
        "--densities",
        "0.2,0.8",
        "--granularities",
        "1",
        "--connectivity",
        "8",
        "--frames",
        "7",
        "--warmup",
        "1",
        "--json",
        json.to_str().unwrap(),
    ];
    if png_possible {
        args.extend(["--plot", png.to_str().unwrap()]);
    }
    let out = bench_cmd(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let lat = v["latency"].as_array().unwrap();
    assert!(!lat.is_empty());
    for r in lat {
        assert_eq!(r["frames"], 7);
        assert_eq!(r["images"], 2);
        assert_eq!(r["frame_ms"].as_array().unwrap().len(), 7);
        assert!(r["p99_ms"].as_f64().unwrap() >= r["median_ms"].as_f64().unwrap());
    }
    assert!(v["throughput"].as_array().unwrap().is_empty());
    if png_possible {
        let bytes = std::fs::read(&png).unwrap();
        assert!(
            bytes.len() > 1000 && bytes.starts_with(b"\x89PNG"),
            "PNG written"
        );
    } else {
        eprintln!("no TrueType font on this machine: PNG not tested");
    }
}

/// `--latency-frames demo`: the frames are the demo scene's (60 of them, a few components
/// each), the JSON says so, and the peers get the very same masks.
#[test]
fn latency_on_demo_frames_with_peers() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("d.json");
    let mut args = vec![
        "--backend",
        "cpu",
        "--latency",
        "--latency-frames",
        "demo",
        "--sizes",
        "320x240,160x120",
        "--connectivity",
        "8",
        "--frames",
        "5",
        "--warmup",
        "1",
        "--json",
        json.to_str().unwrap(),
    ];
    let peers = Command::new(python_with_numpy())
        .args(["-c", "import cv2"])
        .status()
        .is_ok_and(|s| s.success());
    if peers {
        args.push("--peers");
    }
    let out = bench_cmd(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("frames of the demo scene"));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["inputs"]["latency"]["source"], "demo");
    let lat = v["latency"].as_array().unwrap();
    let ours: Vec<_> = lat
        .iter()
        .filter(|r| r["source"] == "markerscope")
        .collect();
    assert_eq!(ours.len(), 2, "one per size");
    for r in &ours {
        assert_eq!(r["images"], 60);
        let comps = r["mean_components"].as_f64().unwrap();
        assert!(
            (1.0..100.0).contains(&comps),
            "{comps} components per frame"
        );
    }
    if peers {
        let theirs: Vec<_> = lat.iter().filter(|r| r["source"] == "peer").collect();
        assert_eq!(theirs.len(), 2, "{lat:?}");
        assert!(theirs.iter().all(|r| r["images"] == 60));
    } else {
        eprintln!("no OpenCV in python3: the peers' side of --latency-frames demo is not run");
    }
}

fn python_with_numpy() -> String {
    let python = std::env::var("MARKERSCOPE_PYTHON").unwrap_or_else(|_| "python3".into());
    match Command::new(&python).args(["-c", "import numpy"]).output() {
        Err(e) => panic!(
            "this test needs '{python}' (with numpy) to check that bench/peers/peers.py makes the same images: {e}"
        ),
        Ok(o) if !o.status.success() => panic!(
            "this test needs numpy in '{python}' (pip install numpy): {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Ok(_) => python,
    }
}

#[test]
fn peers_script_makes_bit_identical_images() {
    let python = python_with_numpy();
    let dir = tempfile::tempdir().unwrap();
    let script = repo().join("bench/peers/peers.py");
    // Odd sizes (blocks clipped at the right and bottom), every g, densities whose seed rounding
    // matters, a seed that wraps modulo 2^32.
    let cases: &[(u32, u32, f64, u32, u32)] = &[
        (97, 61, 0.3, 1, 1),
        (97, 61, 0.55, 4, 1),
        (130, 70, 0.7, 16, 12345),
        (64, 64, 0.0, 1, 7),
        (64, 64, 1.0, 4, 7),
        (33, 200, 0.1234565, 3, u32::MAX),
        (512, 384, 0.5, 1, 2024),
    ];
    let mut cmd = Command::new(&python);
    cmd.arg(&script);
    for (i, &(w, h, d, g, seed)) in cases.iter().enumerate() {
        cmd.arg("--dump-image")
            .args([
                w.to_string(),
                h.to_string(),
                format!("{d:?}"),
                g.to_string(),
                seed.to_string(),
            ])
            .arg(dir.path().join(format!("{i}.raw")));
    }
    let status = cmd.status().unwrap();
    assert!(status.success(), "peers.py --dump-image failed");
    for (i, &(w, h, d, g, seed)) in cases.iter().enumerate() {
        let out = dir.path().join(format!("{i}.raw"));
        let py = std::fs::read(&out).unwrap();
        let rust = generate(&RandomImageSpec {
            width: w,
            height: h,
            density: d,
            granularity: g,
            seed: image_seed(seed, d, g),
        })
        .unwrap();
        assert_eq!(py.len(), rust.data.len(), "case {i}: size");
        let diff = py.iter().zip(&rust.data).position(|(a, b)| a != b);
        assert!(
            diff.is_none(),
            "case {i} ({w}x{h} d={d} g={g} seed={seed}): first difference at byte {diff:?}"
        );
    }
}

#[test]
fn peers_run_beside_markerscope_on_the_same_images() {
    python_with_numpy();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("p.json");
    let mut args = tiny();
    args.extend(["--peers", "--json", json.to_str().unwrap()]);
    let out = bench_cmd(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let opencv = v["peers"]["check"]["opencv"].as_str().unwrap().to_string();
    let peer_rows: Vec<&Value> = v["throughput"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["source"] == "peer")
        .collect();
    if opencv.starts_with("unavailable") {
        let u = v["unavailable"].as_array().unwrap();
        assert!(u.iter().any(|u| u["algorithm"] == "opencv"), "{u:?}");
        eprintln!("OpenCV is not installed here: {opencv}");
        return;
    }
    // OpenCV: 2 connectivities × 2 modes × 2 granularities, on the same images: same counts.
    assert_eq!(peer_rows.len(), 8);
    assert!(peer_rows
        .iter()
        .all(|r| r["algorithm"] == "opencv" && r["mean_gpx_s"].as_f64().unwrap() > 0.0));
    assert!(
        v["count_mismatches"].as_array().unwrap().is_empty(),
        "{}",
        v["count_mismatches"]
    );
    assert_eq!(v["comparisons"].as_array().unwrap().len(), 8);
    assert!(String::from_utf8_lossy(&out.stdout).contains("opencv*"));
}
