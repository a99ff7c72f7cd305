//! `markerscope bench`: invalid flags exit before any work, JSON schema, plots, peers' images, and
//! `--pipeline` (the whole frame path) against `analyze` on the same frames.

use crate::util::{ffmpeg, markerscope_command, repo, require_ffmpeg};
use markerscope::frame::random_image::image_seed;
use markerscope::frame::random_image::{generate, RandomImageSpec};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn bench_cmd(args: &[&str]) -> Output {
    markerscope_command(&["bench"])
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
    let args = vec![
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
    // A PNG plot needs a TrueType font; without one the binary refuses `--plot x.png` before
    // any work, and the run goes on without it.
    let with_plot = [&args[..], &["--plot", png.to_str().unwrap()]].concat();
    let mut out = bench_cmd(&with_plot);
    let png_possible =
        !String::from_utf8_lossy(&out.stderr).contains("PNG text needs a TrueType font");
    if !png_possible {
        out = bench_cmd(&args);
    }
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

// ---------------------------------------------------------------------------------------------
// --pipeline

#[test]
fn pipeline_bad_flags_exit_2_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("p.json");
    let json = json.to_str().unwrap();
    let not_video = dir.path().join("notes.mp4");
    std::fs::write(&not_video, b"these bytes are no video").unwrap();
    for bad in [
        vec!["--frames", "0"],
        vec!["--sizes", "0x720"],
        vec!["--scenes", "demo,nope"],
        vec!["--latency"],
        vec!["--conflicts"],
        vec!["--video", "/no/such/clip.mp4"],
        vec!["--video", not_video.to_str().unwrap()],
        vec!["--threshold", "fixed:300"],
        vec!["--connectivity", "6"],
    ] {
        // Without the bad flag this would make 4K frames for minutes.
        let mut args = vec!["--pipeline", "--backend", "cpu", "--json", json];
        args.extend(bad.iter().copied());
        let t = std::time::Instant::now();
        let out = bench_cmd(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {stderr}");
        assert!(stderr.contains("error:"), "{bad:?}: {stderr}");
        assert!(!Path::new(json).exists(), "{bad:?} wrote results");
        assert!(
            t.elapsed().as_secs_f64() < 5.0,
            "{bad:?} took {:?}",
            t.elapsed()
        );
    }
}

/// Components per frame of `markerscope analyze` (CSV rows per frame index), frames 0..n.
fn analyze_counts(input: &str, extra: &[&str], n: usize, dir: &Path) -> Vec<u64> {
    let csv = dir.join("analyze.csv");
    let out = markerscope_command(&["analyze", input, "--backend", "cpu", "--out"])
        .arg(&csv)
        .args(extra)
        .output()
        .expect("the markerscope binary runs");
    assert!(
        out.status.success(),
        "analyze {input}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut counts = vec![0u64; n];
    for line in std::fs::read_to_string(&csv).unwrap().lines().skip(1) {
        let frame: usize = line.split(',').next().unwrap().parse().unwrap();
        counts[frame] += 1;
    }
    counts
}

/// The timed frames' component counts of one JSON row.
fn counts_of(row: &Value) -> Vec<u64> {
    row["frame_components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .collect()
}

/// A small CPU run of both synthetic scenes: every frame counted, the components of every timed
/// frame those `analyze` finds on the same frames, steps present, percentiles in order; with
/// OpenCV (when python3 has it) on the same frames, counting the same components.
#[test]
fn pipeline_run_matches_analyze_on_the_same_frames() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("p.json");
    let md = dir.path().join("p.md");
    let (frames, warmup) = (30usize, 5usize);
    let mut args = vec![
        "--pipeline",
        "--backend",
        "cpu",
        "--scenes",
        "demo,clutter",
        "--sizes",
        "320x240",
        "--frames",
        "30",
        "--warmup",
        "5",
        "--json",
        json.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
    ];
    let opencv = Command::new(python_with_numpy())
        .args(["-c", "import cv2"])
        .status()
        .is_ok_and(|s| s.success());
    if opencv {
        args.push("--peers");
    }
    let out = bench_cmd(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("The frame path, end to end"), "{stdout}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let inputs = &v["inputs"]["pipeline"];
    assert_eq!(inputs["frames"], 30);
    assert_eq!(inputs["warmup"], 5);
    assert_eq!(inputs["threshold"], "background:5");
    assert_eq!(inputs["subpixel"], true);
    assert_eq!(inputs["scenes"].as_array().unwrap().len(), 2);
    assert!(
        v["count_mismatches"].as_array().unwrap().is_empty(),
        "{}",
        v["count_mismatches"]
    );
    let rows = v["pipeline"].as_array().unwrap();
    for (scene, input) in [("demo", "synthetic"), ("clutter", "synthetic:random")] {
        let expected = analyze_counts(
            input,
            &["--size", "320x240", "--max-frames", "35"],
            warmup + frames,
            dir.path(),
        );
        let ours: Vec<&Value> = rows
            .iter()
            .filter(|r| r["scene"] == scene && r["source"] == "markerscope")
            .collect();
        assert_eq!(ours.len(), 1, "{scene}: one row (lsl, 8-connectivity)");
        let r = ours[0];
        assert_eq!(r["algorithm"], "lsl");
        assert_eq!(r["backend"], "cpu");
        assert_eq!(r["connectivity"], 8);
        assert_eq!(
            (r["width"].as_u64(), r["height"].as_u64()),
            (Some(320), Some(240))
        );
        assert_eq!(r["frames"], 30);
        assert_eq!(r["prepared_frames"], 35);
        assert_eq!(r["frame_ms"].as_array().unwrap().len(), frames);
        // Each frame's steps take part of its latency; the rest is the hand-overs.
        let sums = r["latency_steps_ms"].as_array().unwrap();
        assert_eq!(sums.len(), frames);
        for (sum, ms) in sums.iter().zip(r["frame_ms"].as_array().unwrap()) {
            let (sum, ms) = (sum.as_f64().unwrap(), ms.as_f64().unwrap());
            assert!(
                0.0 < sum && sum <= ms,
                "{sum} ms of steps in a frame of {ms} ms"
            );
        }
        assert_eq!(
            counts_of(r),
            expected[warmup..],
            "{scene}: components per frame"
        );
        let mean = expected[warmup..].iter().sum::<u64>() as f64 / frames as f64;
        assert!((r["mean_components"].as_f64().unwrap() - mean).abs() < 1e-9);
        assert!(mean > 0.0, "{scene}: the frames have components");
        let lat = &r["latency"];
        let (p50, p90, p99, max) = (
            lat["p50"].as_f64().unwrap(),
            lat["p90"].as_f64().unwrap(),
            lat["p99"].as_f64().unwrap(),
            lat["max"].as_f64().unwrap(),
        );
        assert!(0.0 < p50 && p50 <= p90 && p90 <= p99 && p99 <= max, "{lat}");
        assert!(r["frames_per_s"].as_f64().unwrap() > 0.0);
        assert!(r["source_ms"].as_f64().unwrap() > 0.0);
        for key in ["steps", "steps_at_full_rate"] {
            let steps: Vec<&str> = r[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["step"].as_str().unwrap())
                .collect();
            for want in [
                "capture",
                "threshold",
                "sub-pixel centroids",
                "filter",
                "track",
            ] {
                assert!(
                    steps.contains(&want),
                    "{scene} {key}: no {want} in {steps:?}"
                );
            }
            assert!(steps.len() > 5, "the labeler's steps too: {steps:?}");
        }
        if opencv {
            let peer = rows
                .iter()
                .find(|r| r["scene"] == scene && r["algorithm"] == "opencv")
                .expect("an OpenCV row per scene");
            assert_eq!(peer["source"], "peer");
            assert_eq!(peer["frames"], 30);
            // OpenCV's Otsu level and labeling: the same components on every frame.
            assert_eq!(
                counts_of(peer),
                expected[warmup..],
                "{scene}: OpenCV's components"
            );
            assert!(peer["frames_per_s"].as_f64().unwrap() > 0.0);
        }
    }
    if !opencv {
        eprintln!("no OpenCV in python3: the peers' side of --pipeline is not run");
    }
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.starts_with("| scene | size |"), "{md}");
    assert_eq!(
        md.lines()
            .filter(|l| l.starts_with("| demo") || l.starts_with("| clutter"))
            .count(),
        rows.len()
    );
}

/// A video scene: decoded up front, its own size, the components of every timed frame those
/// `analyze` finds in the file; the frames cycle when more are timed than the file has.
#[test]
fn pipeline_on_a_video_file() {
    require_ffmpeg();
    let dir = tempfile::tempdir().unwrap();
    let clip = dir.path().join("clip.mkv");
    // 12 frames, 160x96: a box moving right (one drawbox per frame), a fixed one, and a third
    // one in frames 4..8 only.
    let mut filter = "format=gray,drawbox=x=100:y=50:w=20:h=20:color=white:t=fill".to_string();
    for n in 0..12 {
        filter += &format!(
            ",drawbox=x={}:y=10:w=12:h=8:color=white:t=fill:enable='eq(n,{n})'",
            4 + 6 * n
        );
    }
    filter += ",drawbox=x=60:y=70:w=6:h=6:color=white:t=fill:enable='between(n,4,7)'";
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "color=c=black:s=160x96:r=12:d=1",
        "-vf",
        &filter,
        "-frames:v",
        "12",
        "-c:v",
        "ffv1",
        clip.to_str().unwrap(),
    ]);
    let json = dir.path().join("v.json");
    let out = bench_cmd(&[
        "--pipeline",
        "--backend",
        "cpu",
        "--scenes",
        "demo",
        "--sizes",
        "64x48",
        "--video",
        clip.to_str().unwrap(),
        "--frames",
        "16",
        "--warmup",
        "2",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let name = format!("video:{}", clip.display());
    let row = v["pipeline"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["scene"] == name.as_str())
        .expect("a row for the video");
    assert_eq!(
        (row["width"].as_u64(), row["height"].as_u64()),
        (Some(160), Some(96))
    );
    assert_eq!(row["prepared_frames"], 12, "every frame of the file");
    let in_file = analyze_counts(clip.to_str().unwrap(), &[], 12, dir.path());
    assert_eq!(in_file[0], 2);
    assert_eq!(in_file[5], 3);
    // Timed frames 2..18 of the run are frames 2..12, 0..6 of the file.
    let expected: Vec<u64> = (2..18).map(|i| in_file[i % 12]).collect();
    assert_eq!(counts_of(row), expected);
    assert!(
        row["source_ms"].as_f64().unwrap() > 0.0,
        "decoding is timed"
    );
}

/// The particles scene: our tracks are scored against the particles' truth, and with
/// `--peers` trackpy's are too, on the same frames (when trackpy is installed).
#[test]
fn pipeline_particles_scene_scores_tracks_against_the_truth() {
    let python = python_with_numpy();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("p.json");
    let out = bench_cmd(&[
        "--pipeline",
        "--backend",
        "cpu",
        "--scenes",
        "particles:200",
        "--sizes",
        "320x240",
        "--frames",
        "12",
        "--warmup",
        "2",
        "--peers",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = v["pipeline"].as_array().unwrap();
    let ours = rows
        .iter()
        .find(|r| r["source"] == "markerscope")
        .expect("our row");
    assert_eq!(ours["scene"], "particles:200");
    let t = &ours["tracking"];
    assert_eq!(t["frames"], 12);
    assert_eq!(t["truth"], 12 * 200);
    // Few merged spots and few switches at this density: most particles tracked throughout.
    let (matches, switches) = (
        t["matches"].as_u64().unwrap(),
        t["id_switches"].as_u64().unwrap(),
    );
    assert!(matches > 12 * 200 * 8 / 10, "{t}");
    assert!(switches < matches / 20, "{t}");
    let trackpy_here = Command::new(&python)
        .args(["-c", "import trackpy"])
        .output()
        .is_ok_and(|o| o.status.success());
    let peer = rows.iter().find(|r| r["algorithm"] == "trackpy");
    if !trackpy_here {
        let u = v["unavailable"].as_array().unwrap();
        assert!(u.iter().any(|u| u["algorithm"] == "trackpy"), "{u:?}");
        eprintln!("trackpy is not installed here: its row is not checked");
        return;
    }
    let peer = peer.expect("trackpy's row");
    assert!(peer["tracking"]["matches"].as_u64().unwrap() > 12 * 200 * 8 / 10);
    assert!(String::from_utf8_lossy(&out.stdout).contains("trackpy*"));
}
