//! `markerscope analyze` on bad input. A bad request (a missing or unreadable single input, bad
//! flags, an output that would overwrite an input) exits with code 2 and one line on stderr
//! that names the input and the problem, and leaves no output file (nor a temporary one)
//! behind. Damaged parts of an input that is otherwise readable (video frames, images of a
//! folder) are skipped and listed, the rest is analysed, and the exit code is 3. Clips are
//! made and damaged here with the `ffmpeg` command line and byte edits.

use crate::util::{ffmpeg, markerscope};
use markerscope::ccl::{algorithms, Backends, Connectivity};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A PNG with only a header (IHDR), an empty image data chunk and IEND: enough for
/// `into_dimensions`, never decodable.
fn png_header_only(width: u32, height: u32) -> Vec<u8> {
    fn chunk(out: &mut Vec<u8>, kind: &[u8], data: &[u8]) {
        out.extend((data.len() as u32).to_be_bytes());
        let start = out.len();
        out.extend(kind);
        out.extend(data);
        out.extend(crc32(&out[start..]).to_be_bytes());
    }
    let mut ihdr = Vec::new();
    ihdr.extend(width.to_be_bytes());
    ihdr.extend(height.to_be_bytes());
    ihdr.extend([8, 0, 0, 0, 0]); // 8-bit grey
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(
        &mut out,
        b"IDAT",
        &[0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01],
    );
    chunk(&mut out, b"IEND", &[]);
    out
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    /// An empty folder the output goes to; must still be empty after a failed run.
    out_dir: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let out_dir = root.join("out");
        std::fs::create_dir(&out_dir).unwrap();
        let grey =
            image::GrayImage::from_fn(40, 30, |x, y| image::Luma([((x * 7 + y * 13) % 256) as u8]));
        grey.save(root.join("good.png")).unwrap();
        std::fs::write(
            root.join("corrupt.png"),
            b"\x89PNG\r\n\x1a\nthis is not an image",
        )
        .unwrap();
        let mut truncated = std::fs::read(root.join("good.png")).unwrap();
        truncated.truncate(truncated.len() / 2);
        std::fs::write(root.join("truncated.png"), truncated).unwrap();
        std::fs::write(root.join("zero.pgm"), b"P5\n0 0\n255\n").unwrap();
        std::fs::write(root.join("zero.png"), png_header_only(0, 16)).unwrap();
        // 70000 × 70000 = 4.9e9 pixels: refused from the header, before any allocation.
        std::fs::write(root.join("huge.png"), png_header_only(70_000, 70_000)).unwrap();
        std::fs::write(root.join("huge.pgm"), b"P5\n70000 70000\n255\n").unwrap();
        std::fs::write(root.join("notes.txt"), b"hello").unwrap();
        std::fs::create_dir(root.join("empty")).unwrap();
        std::fs::create_dir(root.join("no-images")).unwrap();
        std::fs::write(root.join("no-images/readme.txt"), b"x").unwrap();
        std::fs::write(root.join("no-images/data.csv"), b"x").unwrap();
        // A folder whose second image is corrupt: the first one must not reach the output.
        std::fs::create_dir(root.join("mixed")).unwrap();
        std::fs::copy(root.join("good.png"), root.join("mixed/a.png")).unwrap();
        std::fs::write(root.join("mixed/b.png"), b"garbage").unwrap();
        Fixture {
            _dir: dir,
            root,
            out_dir,
        }
    }

    fn path(&self, name: &str) -> String {
        self.root.join(name).to_str().unwrap().to_string()
    }

    fn out(&self) -> String {
        self.out_dir
            .join("result.csv")
            .to_str()
            .unwrap()
            .to_string()
    }

    /// Runs `analyze <args> --out out/result.csv` and checks the failure contract.
    /// Returns the error line.
    fn expect_failure(&self, args: &[&str], must_mention: &[&str]) -> String {
        let out = self.out();
        let mut full = vec!["analyze"];
        full.extend_from_slice(args);
        full.extend_from_slice(&["--out", &out]);
        let started = Instant::now();
        let result = markerscope(&full);
        let stderr = String::from_utf8_lossy(&result.stderr).to_string();
        assert_eq!(
            result.status.code(),
            Some(2),
            "{args:?}: exit code; stderr: {stderr}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{args:?} took {:?}",
            started.elapsed()
        );
        // One error line; the only other line allowed is the notice that CUDA is not used.
        let lines: Vec<&str> = stderr
            .lines()
            .filter(|l| !l.starts_with("CPU backend: "))
            .collect();
        assert_eq!(
            lines.len(),
            1,
            "{args:?}: one line expected, got:\n{stderr}"
        );
        let message = lines[0];
        assert!(message.starts_with("error: "), "{args:?}: {message}");
        assert!(!message.contains("panicked"), "{args:?}: {message}");
        for needle in must_mention {
            assert!(
                message.contains(needle),
                "{args:?}: '{needle}' missing from: {message}"
            );
        }
        let left: Vec<_> = std::fs::read_dir(&self.out_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(
            left.is_empty(),
            "{args:?}: files left in the output folder: {left:?}"
        );
        assert!(result.stdout.is_empty(), "{args:?}: wrote to stdout");
        message.to_string()
    }
}

#[test]
fn unreadable_or_corrupt_images() {
    let f = Fixture::new();
    f.expect_failure(&[&f.path("corrupt.png")], &["corrupt.png"]);
    f.expect_failure(&[&f.path("truncated.png")], &["truncated.png", "decode"]);
    f.expect_failure(&[&f.path("notes.txt")], &["notes.txt"]);
}

#[test]
fn missing_path() {
    let f = Fixture::new();
    f.expect_failure(&[&f.path("nope.png")], &["nope.png", "No such file"]);
}

#[test]
fn empty_folder_and_folder_without_images() {
    let f = Fixture::new();
    f.expect_failure(&[&f.path("empty")], &["empty", "no image files"]);
    f.expect_failure(&[&f.path("no-images")], &["no-images", "no image files"]);
}

#[test]
fn zero_size_images() {
    let f = Fixture::new();
    f.expect_failure(&[&f.path("zero.pgm")], &["zero.pgm", "0x0"]);
    f.expect_failure(&[&f.path("zero.png")], &["zero.png"]);
}

#[test]
fn images_over_the_pixel_limit_are_refused_from_the_header() {
    let f = Fixture::new();
    for name in ["huge.png", "huge.pgm"] {
        f.expect_failure(&[&f.path(name)], &[name, "70000x70000", "pixels"]);
    }
}

#[test]
fn a_folder_of_bad_images_only_leaves_no_output() {
    let f = Fixture::new();
    std::fs::create_dir(f.root.join("all-bad")).unwrap();
    std::fs::write(f.root.join("all-bad/a.png"), b"garbage").unwrap();
    std::fs::copy(f.root.join("truncated.png"), f.root.join("all-bad/b.png")).unwrap();
    f.expect_failure(&[&f.path("all-bad")], &["all-bad", "a.png"]);
}

#[test]
fn bad_threshold_specs() {
    let f = Fixture::new();
    let good = f.path("good.png");
    for spec in [
        "median",
        "fixed:300",
        "fixed",
        "adaptive:4:2",
        "adaptive:11",
        "adaptive:11:x",
        "background",
        "background:-1",
        "background:x",
        "triangle:2",
    ] {
        f.expect_failure(
            &[&good, "--threshold", spec],
            &[spec, "--threshold", "invalid threshold"],
        );
    }
}

#[test]
fn unknown_algorithm() {
    let f = Fixture::new();
    f.expect_failure(
        &[&f.path("good.png"), "--algorithm", "nope"],
        &["'nope'", "unknown algorithm", "lsl"],
    );
}

#[test]
fn unsupported_connectivity() {
    let f = Fixture::new();
    let good = f.path("good.png");
    f.expect_failure(
        &[&good, "--connectivity", "6"],
        &["'6'", "--connectivity", "4 or 8"],
    );
    // An algorithm that lacks one connectivity (the CUDA ones are 4-only): the registry's error.
    for a in algorithms() {
        for c in [Connectivity::Four, Connectivity::Eight] {
            if !a.supports(c) {
                let n = c.number().to_string();
                f.expect_failure(
                    &[&good, "--algorithm", a.name, "--connectivity", &n],
                    &[a.name, &format!("{n}-connectivity")],
                );
            }
        }
    }
}

/// A synthetic frame size the machine cannot hold is refused at once with what it needs, not
/// killed for memory half way (where the machine has less than the 64 GiB it would take).
#[test]
fn a_frame_size_beyond_the_memory_is_refused_before_work() {
    let available = markerscope::frame::image::available_memory();
    if available.is_none_or(|a| a >= 64 << 30) {
        return;
    }
    let started = std::time::Instant::now();
    let out = markerscope(&[
        "analyze",
        "synthetic",
        "--size",
        "65536x65535",
        "--max-frames",
        "1",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("GiB are available"), "{stderr}");
    assert!(started.elapsed().as_secs() < 20, "{stderr}");
}

/// An unknown algorithm name in `selftest --algorithms` is a bad request (exit 2) with the
/// known names, not a failed check (exit 1).
#[test]
fn selftest_with_an_unknown_algorithm_is_a_bad_request() {
    let out = markerscope(&["selftest", "--quick", "--algorithms", "nope"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("unknown algorithm 'nope'") && stderr.contains("lsl"),
        "{stderr}"
    );
}

/// A GPU algorithm with `--cpu-only` is a bad request that says why, not a failed check.
#[cfg(feature = "cuda")]
#[test]
fn selftest_of_a_gpu_algorithm_on_the_cpu_only_is_a_bad_request() {
    let out = markerscope(&["selftest", "--quick", "--cpu-only", "--algorithms", "ha4w"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("ha4w runs on the GPU") && stderr.contains("--cpu-only"),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("FAIL"));
}

/// A GPU algorithm with `--backend cpu` is named as such, not blamed on the connectivity.
#[cfg(feature = "cuda")]
#[test]
fn gpu_algorithm_with_the_cpu_backend() {
    let f = Fixture::new();
    for conn in ["4", "8"] {
        f.expect_failure(
            &[
                &f.path("good.png"),
                "--algorithm",
                "ha4w",
                "--backend",
                "cpu",
                "--connectivity",
                conn,
            ],
            &["--backend cpu", "'ha4w' runs on cuda", "lsl"],
        );
    }
}

#[test]
fn bad_flag_values() {
    let f = Fixture::new();
    let good = f.path("good.png");
    f.expect_failure(&[&good, "--backend", "gpu"], &["'gpu'", "--backend"]);
    f.expect_failure(&[&good, "--format", "xml"], &["'xml'", "--format"]);
    f.expect_failure(&[&good, "--connectivity", "x"], &["'x'", "--connectivity"]);
    f.expect_failure(&[&good, "--bogus"], &["--bogus"]);
    f.expect_failure(&[], &["<INPUT>"]);
}

#[test]
fn cuda_backend_without_cuda_is_an_error() {
    if Backends::detect().cuda_unavailable_reason().is_none() {
        // A usable GPU: `--backend cuda` is valid here; the error case cannot happen.
        return;
    }
    let f = Fixture::new();
    f.expect_failure(
        &[&f.path("good.png"), "--backend", "cuda"],
        &["CUDA", "--backend cuda"],
    );
}

#[test]
fn unwritable_output_fails_before_any_work() {
    let f = Fixture::new();
    let good = f.path("good.png");
    for (out, needle) in [
        (f.root.join("missing-dir/result.csv"), "does not exist"),
        (f.root.join("good.png/result.csv"), "is not a folder"),
        (f.root.join("empty"), "is a folder"),
    ] {
        let out = out.to_str().unwrap();
        let r = markerscope(&["analyze", &good, "--out", out]);
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{out}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(out) && stderr.contains(needle),
            "{out}: {stderr}"
        );
    }
    // The output is checked before the input is decoded: a bad input with a bad output reports the output.
    let r = markerscope(&[
        "analyze",
        &f.path("huge.png"),
        "--out",
        f.root.join("missing-dir/x.csv").to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&r.stderr).contains("missing-dir"));
    assert!(std::fs::read_dir(f.root.join("empty"))
        .unwrap()
        .next()
        .is_none());
}

#[test]
fn success_writes_the_file_atomically_and_reports_the_cpu_fallback() {
    let f = Fixture::new();
    let out = f.out();
    let r = markerscope(&[
        "analyze",
        &f.path("good.png"),
        "--out",
        &out,
        "--threshold",
        "fixed:100",
    ]);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{stderr}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.starts_with("frame,label,left,top,width,height,area,centroid_x,centroid_y"));
    assert!(text.lines().count() > 1);
    let files: Vec<_> = std::fs::read_dir(&f.out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(files, ["result.csv"], "only the output file");
    if let Some(reason) = Backends::detect().cuda_unavailable_reason() {
        let fallback: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("CPU backend: "))
            .collect();
        assert_eq!(
            fallback,
            [format!("CPU backend: {reason}").as_str()],
            "{stderr}"
        );
    }
    // --backend cpu is a choice, not a fallback: no notice.
    let r = markerscope(&[
        "analyze",
        &f.path("good.png"),
        "--backend",
        "cpu",
        "--out",
        &out,
    ]);
    assert!(r.status.success());
    assert!(!String::from_utf8_lossy(&r.stderr).contains("CPU backend:"));
}

#[test]
fn devices_lists_gpu_and_cameras_without_failing() {
    let r = markerscope(&["devices"]);
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(stdout.contains("GPU"), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("camera")), "{stdout}");
}

// ---------------------------------------------------------------------------------------------
// Damaged input: skipped, listed, and the rest analysed

/// How many frames FFmpeg's own decoder gives for the file's first video stream (one line per
/// frame, no frame rate conversion).
fn ffmpeg_frame_count(path: &std::path::Path) -> u64 {
    let out = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "quiet", "-i"])
        .arg(path)
        .args([
            "-map",
            "0:v:0",
            "-vsync",
            "passthrough",
            "-f",
            "framecrc",
            "-",
        ])
        .output()
        .expect("running ffmpeg");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .count() as u64
}

/// Deterministic noise (no rand dependency in tests).
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

struct Run {
    code: Option<i32>,
    stderr: String,
}

fn analyze(args: &[&str]) -> Run {
    let mut full = vec!["analyze", "--backend", "cpu"];
    full.extend_from_slice(args);
    let out = markerscope(&full);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    Run {
        code: out.status.code(),
        stderr,
    }
}

/// The N of "analyzed N frame(s)" in the summary.
fn analysed_frames(stderr: &str) -> u64 {
    let rest = stderr
        .split("analyzed ")
        .nth(1)
        .unwrap_or_else(|| panic!("no summary in: {stderr}"));
    rest.split(' ').next().unwrap().parse().unwrap()
}

/// A JSONL output: the frames with rows, and the skip records (frame or before_frame, reason).
struct Jsonl {
    row_frames: std::collections::BTreeSet<u64>,
    skipped_frames: Vec<u64>,
    skipped_data: Vec<u64>,
    reasons: Vec<String>,
}

fn read_jsonl(path: &std::path::Path) -> Jsonl {
    let mut j = Jsonl {
        row_frames: Default::default(),
        skipped_frames: vec![],
        skipped_data: vec![],
        reasons: vec![],
    };
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if let Some(s) = v.get("skipped") {
            if let Some(f) = s["frame"].as_u64() {
                j.skipped_frames.push(f);
            } else {
                j.skipped_data.push(s["before_frame"].as_u64().expect(line));
            }
            j.reasons.push(s["reason"].as_str().unwrap().to_string());
        } else {
            j.row_frames.insert(v["frame"].as_u64().unwrap());
        }
    }
    j
}

#[test]
fn damaged_and_joined_videos_keep_every_frame_ffmpeg_decodes() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name);
    let s = |name: &str| p(name).to_str().unwrap().to_string();
    // Two transport streams of different sizes, joined byte for byte: the joint's packet is
    // flagged corrupt by the demuxer, the size changes at frame 30.
    for (name, size) in [("a.ts", "192x144"), ("b.ts", "96x72")] {
        ffmpeg(&[
            "-f",
            "lavfi",
            "-i",
            &format!("testsrc2=size={size}:rate=30:duration=1"),
            "-c:v",
            "libx264",
            "-bsf:v",
            "h264_mp4toannexb",
            "-f",
            "mpegts",
            &s(name),
        ]);
    }
    let mut joined = std::fs::read(p("a.ts")).unwrap();
    joined.extend(std::fs::read(p("b.ts")).unwrap());
    std::fs::write(p("joined.ts"), joined).unwrap();
    // An H.264 MP4 (GOP 10) with 2 KB of noise in its middle.
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=320x240:rate=30:duration=3",
        "-c:v",
        "libx264",
        "-pix_fmt",
        "yuv420p",
        "-g",
        "10",
        &s("clean.mp4"),
    ]);
    let mut bytes = std::fs::read(p("clean.mp4")).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid..mid + 2048].copy_from_slice(&noise(7, 2048));
    std::fs::write(p("noisy.mp4"), bytes).unwrap();

    for (clip, damaged) in [("joined.ts", false), ("noisy.mp4", true)] {
        let expected = ffmpeg_frame_count(&p(clip));
        assert!(expected >= 60, "{clip}: ffmpeg decodes {expected}");
        let mut outputs = Vec::new();
        for run in 0..2 {
            let out = s(&format!("{clip}.{run}.jsonl"));
            let r = analyze(&[
                &s(clip),
                "--threshold",
                "fixed:128",
                "--skip-damaged",
                "--out",
                &out,
            ]);
            let j = read_jsonl(Path::new(&out));
            let kept = analysed_frames(&r.stderr);
            // Every frame FFmpeg decodes is either analysed or listed as skipped, in order.
            assert_eq!(
                kept + j.skipped_frames.len() as u64,
                expected,
                "{clip}: {}",
                r.stderr
            );
            let mut all: Vec<u64> = j.row_frames.iter().copied().collect();
            all.extend(&j.skipped_frames);
            all.sort();
            assert_eq!(all, (0..expected).collect::<Vec<_>>(), "{clip}");
            if damaged {
                assert_eq!(r.code, Some(3), "{clip}: {}", r.stderr);
                assert!(!j.skipped_frames.is_empty() || !j.skipped_data.is_empty());
                // The damage costs about a group of pictures, not the rest of the file.
                assert!(kept + 20 >= expected, "{clip}: {kept} of {expected}");
                assert!(r.stderr.contains("skipped "), "{}", r.stderr);
            } else {
                assert_eq!(r.code, Some(0), "{clip}: {}", r.stderr);
                assert!(
                    r.stderr
                        .contains("frame size changed from 192x144 to 96x72 at frame 30"),
                    "{}",
                    r.stderr
                );
            }
            outputs.push(std::fs::read(&out).unwrap());
        }
        assert_eq!(
            outputs[0], outputs[1],
            "{clip}: the same output on every run"
        );
    }
}

/// A file that gives no frame (a Matroska file cut before its first frame), a --learn-mask
/// that takes every frame, and a --save-mask that cannot be written are errors that leave no
/// output, not a header-only CSV and exit 0.
#[test]
fn nothing_analysed_or_a_mask_not_saved_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name);
    let s = |name: &str| p(name).to_str().unwrap().to_string();
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=640x480:rate=30:duration=1",
        "-c:v",
        "libx264",
        &s("clip.mkv"),
    ]);
    let bytes = std::fs::read(p("clip.mkv")).unwrap();
    std::fs::write(p("cut.mkv"), &bytes[..4000]).unwrap();
    let out = s("o.csv");
    let r = analyze(&[&s("cut.mkv"), "--out", &out]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("no frame"), "{}", r.stderr);
    let r = analyze(&[&s("clip.mkv"), "--learn-mask", "30", "--out", &out]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains("--learn-mask 30 took every frame"),
        "{}",
        r.stderr
    );
    let r = analyze(&[&s("clip.mkv"), "--save-mask", "/dev/full", "--out", &out]);
    assert_ne!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stderr.contains("/dev/full"), "{}", r.stderr);
    assert!(!p("o.csv").exists());
    // Learning from fewer frames than there are still analyses the rest.
    let r = analyze(&[&s("clip.mkv"), "--learn-mask", "10", "--out", &out]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(analysed_frames(&r.stderr), 20, "{}", r.stderr);
}

/// A mask or calibration file is an input like the source: an output onto it is refused and
/// the file stays as it was.
#[test]
fn an_output_onto_a_mask_or_calibration_file_is_refused() {
    let f = Fixture::new();
    let good = f.path("good.png");
    let mask = f.path("mask.png");
    std::fs::copy(&good, &mask).unwrap();
    let before = std::fs::read(&mask).unwrap();
    let r = analyze(&[&good, "--mask", &mask, "--out", &mask]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("would destroy it"), "{}", r.stderr);
    assert_eq!(std::fs::read(&mask).unwrap(), before);
    let calib = f.path("calib.yaml");
    let text = r#"{"camera_matrix": [[100, 0, 50], [0, 100, 50], [0, 0, 1]], "distortion_coefficients": [0, 0, 0, 0]}"#;
    std::fs::write(&calib, text).unwrap();
    let mut args = vec![good.as_str(), "--calibration", calib.as_str()];
    for p in ["0,0=0,0", "10,0=1,0", "10,10=1,1", "0,10=0,1"] {
        args.extend(["--world-point", p]);
    }
    args.extend(["--tracks", calib.as_str()]);
    let r = analyze(&args);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("would destroy it"), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(&calib).unwrap(), text);
}

/// `source` (a lavfi source) encoded with `codec` (`-c:v` and its options) into `names[0]` in
/// `dir`, and a copy `names[1]` with `hole` = (where, as a fraction of the file; how many bytes;
/// set to what) overwritten: FFmpeg's frame count of the copy.
fn damaged_clip(
    dir: &Path,
    source: &str,
    codec: &[&str],
    names: [&str; 2],
    hole: (f64, usize, u8),
) -> u64 {
    let [clean, damaged] = names.map(|n| dir.join(n));
    let mut args = vec!["-f", "lavfi", "-i", source, "-c:v"];
    args.extend(codec);
    args.push(clean.to_str().unwrap());
    ffmpeg(&args);
    let mut bytes = std::fs::read(&clean).unwrap();
    let at = (bytes.len() as f64 * hole.0) as usize;
    bytes[at..at + hole.1].fill(hole.2);
    std::fs::write(&damaged, bytes).unwrap();
    ffmpeg_frame_count(&damaged)
}

/// The frames (and how many of their rows are flagged damaged) of a CSV output.
fn csv_frames(path: &std::path::Path) -> (std::collections::BTreeSet<u64>, Vec<u64>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut frames = std::collections::BTreeSet::new();
    let mut flagged = std::collections::BTreeSet::new();
    for line in text.lines().skip(1) {
        let frame: u64 = line.split(',').next().unwrap().parse().unwrap();
        frames.insert(frame);
        match line.rsplit(',').next().unwrap() {
            "true" => flagged.insert(frame),
            "false" => false,
            other => panic!("damaged column: {other}"),
        };
    }
    (frames, flagged.into_iter().collect())
}

/// An H.264 clip with one keyframe and 4,000 bytes overwritten a third of the way in: every
/// frame FFmpeg decodes is analysed, those from the damage to the end are flagged (rows,
/// summary, --skipped), the exit code is 3, the same on every run; --skip-damaged leaves
/// them out as before.
#[test]
fn a_damaged_clip_keeps_every_frame_and_flags_those_after_the_damage() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name);
    let s = |name: &str| p(name).to_str().unwrap().to_string();
    let codec = [
        "libx264",
        "-pix_fmt",
        "yuv420p",
        "-x264-params",
        "keyint=1000:scenecut=0",
    ];
    let source = "testsrc2=size=640x480:rate=30:duration=3";
    let hole = (1.0 / 3.0, 4000, 0xaa);
    let expected = damaged_clip(
        dir.path(),
        source,
        &codec,
        ["clean.mp4", "damaged.mp4"],
        hole,
    );
    assert_eq!(expected, 89);

    let mut outputs = Vec::new();
    for run in 0..3 {
        let (out, list) = (s(&format!("{run}.csv")), s(&format!("{run}.skipped.csv")));
        let r = analyze(&[
            &s("damaged.mp4"),
            "--threshold",
            "fixed:128",
            "--out",
            &out,
            "--skipped",
            &list,
        ]);
        assert_eq!(r.code, Some(3), "{}", r.stderr);
        assert_eq!(analysed_frames(&r.stderr), expected, "{}", r.stderr);
        let (frames, flagged) = csv_frames(Path::new(&out));
        assert_eq!(frames, (0..expected).collect(), "every frame has rows");
        // The damaged frame and every frame predicted from it, up to the end (no keyframe).
        assert_eq!(flagged, (28..expected).collect::<Vec<_>>());
        assert!(
            r.stderr
                .contains("analysed 61 frame(s) decoded from damaged data"),
            "{}",
            r.stderr
        );
        let listed = std::fs::read_to_string(&list).unwrap();
        let flags = listed
            .lines()
            .filter(|l| l.contains("analysed, flagged damaged:"))
            .count();
        assert_eq!(flags, 61, "{listed}");
        outputs.push((std::fs::read(&out).unwrap(), listed));
    }
    assert!(
        outputs.windows(2).all(|w| w[0] == w[1]),
        "the same on every run"
    );

    // Today's skipping, asked for.
    let out = s("skipping.csv");
    let r = analyze(&[
        &s("damaged.mp4"),
        "--threshold",
        "fixed:128",
        "--skip-damaged",
        "--out",
        &out,
    ]);
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    assert_eq!(analysed_frames(&r.stderr), 28, "{}", r.stderr);
    assert!(
        r.stderr.contains("skipped 61 damaged frame(s)"),
        "{}",
        r.stderr
    );
    let (frames, flagged) = csv_frames(Path::new(&out));
    assert_eq!((frames.len(), flagged.len()), (28, 0));
}

/// An MJPEG AVI with a hole in one frame: FFmpeg conceals it (and logs errors) without marking
/// the frame; it is analysed and flagged, the others not, and FFmpeg's lines stay off stderr.
#[test]
fn an_mjpeg_frame_with_a_hole_is_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name);
    let s = |name: &str| p(name).to_str().unwrap().to_string();
    let source = "testsrc2=size=320x240:rate=30:duration=1";
    let names = ["clean.avi", "hole.avi"];
    let expected = damaged_clip(
        dir.path(),
        source,
        &["mjpeg", "-q:v", "3"],
        names,
        (0.5, 400, 0),
    );
    for run in 0..2 {
        let out = s(&format!("{run}.csv"));
        let r = analyze(&[&s("hole.avi"), "--threshold", "fixed:128", "--out", &out]);
        assert_eq!(r.code, Some(3), "{}", r.stderr);
        assert!(!r.stderr.contains("[mjpeg @"), "{}", r.stderr);
        let (frames, flagged) = csv_frames(Path::new(&out));
        assert_eq!(frames.len() as u64, expected);
        assert_eq!(flagged.len(), 1, "{}", r.stderr);
    }
    let clean = s("clean.csv");
    let r = analyze(&[&s("clean.avi"), "--threshold", "fixed:128", "--out", &clean]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(csv_frames(Path::new(&clean)).1.is_empty());
}

#[test]
fn nvdec_decoding_gives_the_cpu_decoders_rows_or_falls_back_with_a_notice() {
    let dir = tempfile::tempdir().unwrap();
    let s = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=320x240:rate=30:duration=1",
        "-c:v",
        "libx264",
        "-pix_fmt",
        "yuv420p",
        &s("clip.mp4"),
    ]);
    let run = |decoder: &str| {
        let out = s(&format!("{decoder}.csv"));
        let r = analyze(&[
            &s("clip.mp4"),
            "--threshold",
            "fixed:127",
            "--decoder",
            decoder,
            "--out",
            &out,
        ]);
        assert_eq!(r.code, Some(0), "--decoder {decoder}: {}", r.stderr);
        assert_eq!(analysed_frames(&r.stderr), 30, "{}", r.stderr);
        (std::fs::read(&out).unwrap(), r.stderr)
    };
    let (cpu, cpu_err) = run("cpu");
    assert!(!cpu_err.contains("NVDEC"), "{cpu_err}");
    // With NVDEC (a GPU machine) the same bytes, decoded there; without it, the CPU's, and a
    // one-line notice says so.
    let (nvdec, nvdec_err) = run("nvdec");
    assert_eq!(cpu, nvdec, "{nvdec_err}");
    let fell_back = nvdec_err.contains("decoding on the CPU");
    let on_gpu = nvdec_err.contains("h264_cuvid 320×240");
    assert!(fell_back != on_gpu, "{nvdec_err}");
    // Auto under the CPU backend never tries the GPU.
    let (auto, auto_err) = run("auto");
    assert_eq!(cpu, auto);
    assert!(!auto_err.contains("NVDEC"), "{auto_err}");
    let bad = markerscope(&["analyze", &s("clip.mp4"), "--decoder", "quicksync"]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        !bad.status.success() && err.contains("unknown decoder 'quicksync'"),
        "{err}"
    );
}

#[test]
fn valid_videos_with_fewer_frames_than_announced_are_not_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let s = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let src = "testsrc2=size=160x120:rate=30:duration=2";
    let gap = "select='not(between(n,10,29))'";
    // Audio longer than the video; a variable frame rate; a stream copy that starts at 1 s
    // (an edit list); an MJPEG AVI with a hole in its timestamps.
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        src,
        "-f",
        "lavfi",
        "-i",
        "sine=duration=3",
        "-c:v",
        "libx264",
        "-c:a",
        "aac",
        &s("audio.mkv"),
    ]);
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        src,
        "-vf",
        gap,
        "-vsync",
        "vfr",
        "-c:v",
        "libx264",
        &s("vfr.mkv"),
    ]);
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=160x120:rate=30:duration=3",
        "-c:v",
        "libx264",
        &s("long.mp4"),
    ]);
    ffmpeg(&[
        "-ss",
        "1",
        "-i",
        &s("long.mp4"),
        "-c",
        "copy",
        &s("trim.mp4"),
    ]);
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        src,
        "-vf",
        gap,
        "-vsync",
        "vfr",
        "-c:v",
        "mjpeg",
        &s("hole.avi"),
    ]);
    for clip in ["audio.mkv", "vfr.mkv", "trim.mp4", "hole.avi"] {
        let out = s(&format!("{clip}.csv"));
        let r = analyze(&[&s(clip), "--out", &out]);
        assert_eq!(r.code, Some(0), "{clip}: {}", r.stderr);
        assert!(!r.stderr.contains("skipped"), "{clip}: {}", r.stderr);
        assert_eq!(
            analysed_frames(&r.stderr),
            ffmpeg_frame_count(Path::new(&s(clip))),
            "{clip}: {}",
            r.stderr
        );
    }
}

/// A JPEG of a scene with markers, written by ffmpeg (baseline, 4:2:0).
fn make_jpeg(path: &std::path::Path) {
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=160x120",
        "-frames:v",
        "1",
        "-q:v",
        "3",
        path.to_str().unwrap(),
    ]);
}

#[test]
fn truncated_or_damaged_jpegs_are_reported_not_analysed() {
    let f = Fixture::new();
    let good = f.root.join("photo.jpg");
    make_jpeg(&good);
    let bytes = std::fs::read(&good).unwrap();
    let folder = f.root.join("photos");
    std::fs::create_dir(&folder).unwrap();
    std::fs::copy(&good, folder.join("a-good.jpg")).unwrap();
    let mut damaged = Vec::new();
    for pct in [25, 50, 75, 90] {
        let name = format!("cut{pct}.jpg");
        std::fs::write(f.root.join(&name), &bytes[..bytes.len() * pct / 100]).unwrap();
        damaged.push(name);
    }
    // 64 bytes flipped in the entropy-coded data, at positions the seed picks.
    for seed in 0..4u64 {
        let mut flipped = bytes.clone();
        let n = flipped.len();
        for (i, r) in noise(seed + 100, 64 * 4).chunks(4).enumerate() {
            let at = n / 4 + (u32::from_le_bytes(r.try_into().unwrap()) as usize + i) % (n / 2);
            flipped[at] ^= 0xFF;
        }
        let name = format!("flipped{seed}.jpg");
        std::fs::write(f.root.join(&name), flipped).unwrap();
        damaged.push(name);
    }
    for name in &damaged {
        f.expect_failure(&[&f.path(name)], &[name, "damaged JPEG"]);
        std::fs::copy(f.root.join(name), folder.join(name)).unwrap();
    }
    // In a folder: the good photo is analysed, every damaged one is listed by name.
    let out = f.out_dir.join("photos.csv");
    let r = analyze(&[folder.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    assert_eq!(analysed_frames(&r.stderr), 1, "{}", r.stderr);
    let listed: Vec<&str> = r.stderr.lines().filter(|l| l.starts_with("  ")).collect();
    for name in damaged.iter().take(8) {
        assert!(
            listed
                .iter()
                .any(|l| l.contains(name.as_str()) && l.contains("damaged JPEG")),
            "{name} not listed: {}",
            r.stderr
        );
    }
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(
        text.lines().skip(1).all(|l| l.contains("a-good.jpg")),
        "{text}"
    );
}

#[test]
fn an_output_that_is_an_input_is_refused_before_any_work() {
    let f = Fixture::new();
    let photo = f.root.join("photo.png");
    std::fs::copy(f.root.join("good.png"), &photo).unwrap();
    let original = std::fs::read(&photo).unwrap();
    std::os::unix::fs::symlink(&photo, f.root.join("link.csv")).unwrap();
    std::fs::hard_link(&photo, f.root.join("hard.png")).unwrap();
    let folder = f.root.join("frames");
    std::fs::create_dir(&folder).unwrap();
    std::fs::copy(f.root.join("good.png"), folder.join("a.png")).unwrap();
    std::fs::copy(f.root.join("good.png"), folder.join("b.png")).unwrap();
    let folder_b = std::fs::read(folder.join("b.png")).unwrap();
    let p = |path: PathBuf| path.to_str().unwrap().to_string();
    let glob = format!("{}/*.png", folder.display());
    for args in [
        vec![p(photo.clone()), "--out".into(), p(photo.clone())],
        vec![p(photo.clone()), "--out".into(), p(f.root.join("link.csv"))],
        vec![p(photo.clone()), "--out".into(), p(f.root.join("hard.png"))],
        vec![
            p(photo.clone()),
            "--out".into(),
            f.out(),
            "--tracks".into(),
            p(photo.clone()),
        ],
        vec![
            p(photo.clone()),
            "--out".into(),
            f.out(),
            "--skipped".into(),
            p(f.root.join("link.csv")),
        ],
        vec![p(folder.clone()), "--out".into(), p(folder.join("b.png"))],
        vec![glob.clone(), "--out".into(), p(folder.join("b.png"))],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = analyze(&args);
        assert_eq!(r.code, Some(2), "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("would destroy it") && !r.stderr.contains("analyzed"),
            "{args:?}: {}",
            r.stderr
        );
        assert_eq!(std::fs::read(&photo).unwrap(), original, "{args:?}");
        assert_eq!(std::fs::read(folder.join("b.png")).unwrap(), folder_b);
        assert!(std::fs::symlink_metadata(f.root.join("link.csv"))
            .unwrap()
            .file_type()
            .is_symlink());
    }
    // Two outputs naming one file (through a symlink) are refused too.
    std::os::unix::fs::symlink(f.out(), f.root.join("out-link.csv")).unwrap();
    let r = analyze(&[
        &p(photo.clone()),
        "--out",
        &f.out(),
        "--tracks",
        &p(f.root.join("out-link.csv")),
    ]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("also the --out file"), "{}", r.stderr);
}

#[test]
fn a_folder_with_damaged_images_analyses_the_rest_and_lists_them() {
    let f = Fixture::new();
    let folder = f.root.join("shots");
    std::fs::create_dir(&folder).unwrap();
    std::fs::copy(f.root.join("good.png"), folder.join("a.png")).unwrap();
    std::fs::write(folder.join("b.png"), b"garbage").unwrap(); // unreadable header
    std::fs::copy(f.root.join("truncated.png"), folder.join("c.png")).unwrap(); // fails decoding
    std::fs::copy(f.root.join("good.png"), folder.join("d.png")).unwrap();
    // Hidden files (AppleDouble companions, editor backups) are not read.
    std::fs::write(folder.join("._a.png"), b"\x00\x05\x16\x07 resource fork").unwrap();
    std::fs::write(folder.join(".d.png.swp"), b"x").unwrap();
    for i in 0..11 {
        std::fs::write(folder.join(format!("z{i:02}.png")), b"not a png").unwrap();
    }
    let out = f.out_dir.join("shots.jsonl");
    let skipped = f.out_dir.join("skipped.csv");
    let r = analyze(&[
        folder.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--skipped",
        skipped.to_str().unwrap(),
        // The fixture is a grey ramp, not markers: Otsu gives it components to write.
        "--threshold",
        "otsu",
    ]);
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    assert_eq!(analysed_frames(&r.stderr), 2, "{}", r.stderr);
    // The summary: what was skipped (the first ten, then a count), by name and reason.
    assert!(
        r.stderr.contains("skipped 13 damaged frame(s) or image(s)"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("  frame 1 (b.png): ") && r.stderr.contains("  frame 2 (c.png): "),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("  ... and 3 more"), "{}", r.stderr);
    assert!(!r.stderr.contains("._a.png"), "{}", r.stderr);
    // JSONL: rows of a.png and d.png, a side record per skipped image, in order.
    let j = read_jsonl(&out);
    assert_eq!(j.row_frames.iter().copied().collect::<Vec<_>>(), [0, 3]);
    assert_eq!(
        j.skipped_frames,
        [1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
    );
    assert!(j.reasons[1].contains("decode"), "{:?}", j.reasons);
    // --skipped: all of them, as CSV.
    let text = std::fs::read_to_string(&skipped).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "frame,before_frame,file,reason");
    assert_eq!(lines.len(), 14, "{text}");
    assert!(lines[1].starts_with("1,,b.png,"), "{text}");
    assert!(lines[13].starts_with("14,,z10.png,"), "{text}");
    // Only the outputs, no temporary files.
    let mut left: Vec<_> = std::fs::read_dir(&f.out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["shots.jsonl", "skipped.csv"]);
}

/// Sends `signal` to a running `analyze` once its temporary file exists; returns the exit
/// code and what is left in its output folder.
#[cfg(target_os = "linux")]
fn interrupt_analysis(signal: i32) -> (Option<i32>, Vec<String>, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.csv");
    let out = out.to_str().unwrap();
    let args = [
        "synthetic",
        "--max-frames",
        "100000",
        "--size",
        "320x240",
        "--out",
        out,
    ];
    // Some frames in: the analysis loop is running.
    interrupt_run(dir.path(), &args, Duration::from_millis(300), signal)
}

/// `markerscope analyze --backend cpu ARGS`, sent `signal` `after` its first temporary file
/// appeared in `dir`: its exit code, what is left in `dir`, its stderr.
#[cfg(target_os = "linux")]
fn interrupt_run(
    dir: &Path,
    args: &[&str],
    after: Duration,
    signal: i32,
) -> (Option<i32>, Vec<String>, String) {
    use crate::util::markerscope_command;
    use std::os::unix::process::CommandExt;
    let mut command = markerscope_command(&[]);
    command
        .args(["analyze", "--backend", "cpu"])
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    // A test runner started in the background may ignore SIGINT; the child must not.
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(move || {
            libc::signal(signal, libc::SIG_DFL);
            Ok(())
        });
    }
    let child = command.spawn().unwrap();
    let started = Instant::now();
    let listing = || -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| !n.starts_with("fifo"))
            .collect()
    };
    while !listing().iter().any(|n| n.ends_with(".tmp")) {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no temporary file"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(after);
    unsafe {
        libc::kill(child.id() as i32, signal);
    }
    let result = child.wait_with_output().unwrap();
    (
        result.status.code(),
        listing(),
        String::from_utf8_lossy(&result.stderr).to_string(),
    )
}

/// One signal ends a run that is blocked opening its input (a FIFO nobody writes to, as an
/// image and as a video), with no temporary file left.
#[cfg(target_os = "linux")]
#[test]
fn a_signal_ends_a_run_whose_input_never_opens() {
    for name in ["fifo.png", "fifo.mp4"] {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join(name);
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let out = dir.path().join("o.csv");
        let args = [fifo.to_str().unwrap(), "--out", out.to_str().unwrap()];
        let start = Instant::now();
        let (code, left, stderr) =
            interrupt_run(dir.path(), &args, Duration::from_millis(300), libc::SIGINT);
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{name}: {stderr}"
        );
        assert_eq!(code, Some(128 + libc::SIGINT), "{name}: {stderr}");
        assert!(left.is_empty(), "{name}: left behind: {left:?}");
        assert!(stderr.contains("SIGINT"), "{name}: {stderr}");
    }
}

#[cfg(target_os = "linux")]
#[test]
fn interrupted_runs_leave_no_temporary_file() {
    for (signal, name) in [
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGHUP, "SIGHUP"),
    ] {
        let (code, left, stderr) = interrupt_analysis(signal);
        assert_eq!(code, Some(128 + signal), "{name}: {stderr}");
        assert!(left.is_empty(), "{name}: left behind: {left:?}");
        assert!(
            stderr.contains(&format!("interrupted by {name}")),
            "{stderr}"
        );
    }
}

#[cfg(unix)]
#[test]
fn output_files_keep_their_mode_links_and_long_names() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new();
    let good = f.path("good.png");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    // A new file gets the mode any new file gets here (0666 less the umask), not 0600.
    let probe = f.out_dir.join("probe");
    std::fs::write(&probe, b"").unwrap();
    let usual = mode(&probe);
    std::fs::remove_file(&probe).unwrap();
    let new = f.out_dir.join("new.csv");
    assert_eq!(
        analyze(&[&good, "--out", new.to_str().unwrap()]).code,
        Some(0)
    );
    assert_eq!(mode(&new), usual);
    // An existing file keeps its mode.
    let shared = f.out_dir.join("shared.csv");
    std::fs::write(&shared, b"old").unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(
        analyze(&[&good, "--out", shared.to_str().unwrap()]).code,
        Some(0)
    );
    assert_eq!(mode(&shared), 0o640);
    assert!(std::fs::read_to_string(&shared)
        .unwrap()
        .starts_with("frame,"));
    // A symlink is written through: the link stays, its target gets the rows.
    let link = f.out_dir.join("link.csv");
    std::os::unix::fs::symlink("shared.csv", &link).unwrap();
    std::fs::write(&shared, b"old").unwrap();
    assert_eq!(
        analyze(&[&good, "--out", link.to_str().unwrap()]).code,
        Some(0)
    );
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::read_to_string(&shared)
        .unwrap()
        .starts_with("frame,"));
    // A file name of 254 bytes (the temporary name must stay within 255).
    let long = f.out_dir.join(format!("{}.csv", "n".repeat(250)));
    let r = analyze(&[&good, "--out", long.to_str().unwrap()]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(long.is_file());
}

#[test]
fn bad_output_paths_are_found_before_the_analysis() {
    let f = Fixture::new();
    // An endless source: only a check before the first frame can answer quickly.
    for (out, needle) in [
        (format!("{}/newdir/", f.root.display()), "names a folder"),
        (String::new(), "--out is empty"),
    ] {
        let started = Instant::now();
        let r = analyze(&["synthetic", "--max-frames", "1000000", "--out", &out]);
        assert_eq!(r.code, Some(2), "{out:?}: {}", r.stderr);
        assert!(r.stderr.contains(needle), "{out:?}: {}", r.stderr);
        assert!(started.elapsed() < Duration::from_secs(10));
    }
    let r = analyze(&[&f.path("good.png"), "--out", &f.out(), "--skipped", ""]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("--skipped"), "{}", r.stderr);
    assert!(!f.out_dir.join("result.csv").exists());
}

#[test]
fn an_animated_gif_says_that_only_its_first_frame_is_analysed() {
    let dir = tempfile::tempdir().unwrap();
    let gif = dir.path().join("anim.gif");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=64x48:rate=5:duration=1",
        gif.to_str().unwrap(),
    ]);
    let out = dir.path().join("o.csv");
    let r = analyze(&[gif.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("an animated GIF: only the first of its 5 frames is analysed"),
        "{}",
        r.stderr
    );
}

/// A synthetic scene: discs at known world positions (mm) seen through a known homography,
/// and a thin bar. With four reference points, --min-inertia-ratio drops the bar and every
/// disc's x_world, y_world lies within 0.1 mm of where it was put.
#[test]
fn world_coordinates_and_shape_filters_on_a_known_homography() {
    use markerscope::frame::image::GrayImage;
    use markerscope::frame::render::{draw, Shape};
    // World (mm) → image (px), with some perspective.
    let to_image = |x: f64, y: f64| {
        let w = 1.0 + 0.002 * x + 0.001 * y;
        [
            (4.0 * x + 0.4 * y + 40.0) / w,
            (-0.3 * x + 3.8 * y + 30.0) / w,
        ]
    };
    let mut grey = GrayImage::filled(400, 300, 20).unwrap();
    let mut placed = Vec::new();
    for gx in [10.0, 30.0, 50.0, 70.0] {
        for gy in [10.0, 30.0, 50.0] {
            let [cx, cy] = to_image(gx, gy);
            draw(
                &mut grey,
                &Shape::Disc {
                    cx,
                    cy,
                    radius: 4.0,
                },
                220,
            );
            placed.push([gx, gy]);
        }
    }
    for y in 280..283 {
        for x in 20..80 {
            grey.data[y * 400 + x] = 220;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("scene.png");
    image::GrayImage::from_raw(400, 300, grey.data.clone())
        .unwrap()
        .save(&input)
        .unwrap();
    let corners: Vec<String> = [[0.0, 0.0], [80.0, 0.0], [80.0, 60.0], [0.0, 60.0]]
        .iter()
        .map(|w| {
            let p = to_image(w[0], w[1]);
            format!("{},{}={},{}", p[0], p[1], w[0], w[1])
        })
        .collect();
    let mut args = vec![
        "analyze",
        input.to_str().unwrap(),
        "--backend",
        "cpu",
        "--threshold",
        "fixed:120",
        "--format",
        "jsonl",
        "--shapes",
    ];
    for c in &corners {
        args.extend(["--world-point", c.as_str()]);
    }
    let rows = |extra: &[&str]| -> Vec<serde_json::Value> {
        let out = markerscope(&[&args[..], extra].concat());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let all = rows(&[]);
    assert_eq!(all.len(), 13, "12 discs and the bar");
    let bar = all
        .iter()
        .find(|r| r["width"] == 60)
        .expect("the bar is a component");
    assert!(bar["inertia_ratio"].as_f64().unwrap() < 0.01, "{bar}");
    let kept = rows(&["--min-inertia-ratio", "0.5", "--min-circularity", "0.8"]);
    assert_eq!(kept.len(), 12, "the bar is filtered out");
    for r in &kept {
        let (x, y) = (
            r["x_world"].as_f64().unwrap(),
            r["y_world"].as_f64().unwrap(),
        );
        let nearest = placed
            .iter()
            .map(|p| (p[0] - x).hypot(p[1] - y))
            .fold(f64::MAX, f64::min);
        assert!(nearest < 0.1, "({x}, {y}) is {nearest} mm from every disc");
        assert!(r["circularity"].as_f64().unwrap() > 0.8, "{r}");
    }
    // The same points from a file (as the window saves them) give the same rows.
    let file = dir.path().join("points.toml");
    let quoted: Vec<String> = corners.iter().map(|c| format!("\"{c}\"")).collect();
    std::fs::write(
        &file,
        format!(
            "[world]\npoints = [{}]\nunits = \"mm\"\n",
            quoted.join(", ")
        ),
    )
    .unwrap();
    let from_file = markerscope(&[&args[..9], &["--world-file", file.to_str().unwrap()]].concat());
    assert!(
        from_file.status.success(),
        "{}",
        String::from_utf8_lossy(&from_file.stderr)
    );
    let from_file: Vec<serde_json::Value> = String::from_utf8(from_file.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(from_file, all);
    // CSV: the new columns come last, filled.
    let csv = markerscope(&[&args[..6], &["--shapes"]].concat());
    let text = String::from_utf8(csv.stdout).unwrap();
    let header = text.lines().next().unwrap();
    assert!(header.ends_with(
        "subpixel_x,subpixel_y,mu20,mu02,mu11,orientation_deg,major_axis,minor_axis,\
         eccentricity,inertia_ratio,perimeter,circularity,x_world,y_world,damaged"
    ));
    let first: Vec<&str> = text.lines().nth(1).unwrap().split(',').collect();
    assert_eq!(first.len(), 29);
    assert!(
        first[16..26].iter().all(|v| !v.is_empty())
            && first[26..28].iter().all(|v| v.is_empty())
            && first[28] == "false"
    );
}

#[test]
fn bad_shape_limits_points_and_calibration_files_are_clear_errors() {
    let f = Fixture::new();
    let good = f.path("good.png");
    f.expect_failure(
        &[
            &good,
            "--min-circularity",
            "0.9",
            "--max-circularity",
            "0.5",
        ],
        &["min circularity 0.9 is above max circularity 0.5"],
    );
    f.expect_failure(&[&good, "--world-point", "1,2=3"], &["expected x,y=X,Y"]);
    let missing = f.path("points.toml");
    f.expect_failure(
        &[&good, "--world-file", &missing],
        &["--world-file: ", "points.toml"],
    );
    f.expect_failure(
        &[
            &good,
            "--world-point",
            "0,0=0,0",
            "--world-point",
            "1,1=1,1",
            "--world-point",
            "2,2=2,2",
            "--world-point",
            "5,5=4,7",
        ],
        &["image points lie on one line"],
    );
    let calib = f.path("calib.yaml");
    std::fs::write(&calib, "camera_matrix: !!opencv-matrix\n  data: [1, 2,\n").unwrap();
    let mut args = vec![good.as_str(), "--calibration", calib.as_str()];
    for p in ["0,0=0,0", "10,0=1,0", "10,10=1,1", "0,10=0,1"] {
        args.extend(["--world-point", p]);
    }
    f.expect_failure(&args, &["calib.yaml", "no closing ]"]);
}

/// Live streams, recordings, masks and camera controls: a bad address, file or value is a bad
/// request (exit 2, one line naming it and what to do), refused before any frame, leaving no
/// output; a stream's summary line says what it sent.
#[test]
fn bad_streams_recordings_masks_and_camera_values_are_refused_before_the_analysis() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.csv");
    let out_s = out.to_str().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let in_use = format!("ws://127.0.0.1:{}", taken.local_addr().unwrap().port());
    let missing_mask = dir.path().join("none.png");
    let bad_roi = dir.path().join("roi.toml");
    std::fs::write(&bad_roi, "[roi]\nrect = [1, 2]\n").unwrap();
    let base = ["synthetic", "--max-frames", "1000000", "--out", out_s];
    for (extra, needle) in [
        (
            vec!["--stream", "foo://h:1"],
            "stream 'foo://h:1': unknown scheme 'foo'",
        ),
        (vec!["--stream", "osc://h"], "no port"),
        (vec!["--stream", &in_use], "in use by another program"),
        (vec!["--record", "x.avi"], "ending in .mkv"),
        (vec!["--mask", missing_mask.to_str().unwrap()], "none.png"),
        (
            vec!["--mask", bad_roi.to_str().unwrap()],
            "left, top, width, height",
        ),
        (vec!["--learn-mask", "0"], "--learn-mask must be at least 1"),
        (vec!["--exposure", "0"], "exposure '0'"),
        (vec!["--gain=-2"], "gain '-2'"),
    ] {
        let mut args = base.to_vec();
        args.extend(extra.iter().copied());
        let started = Instant::now();
        let r = analyze(&args);
        assert_eq!(r.code, Some(2), "{extra:?}: {}", r.stderr);
        assert!(r.stderr.contains(needle), "{extra:?}: {}", r.stderr);
        assert_eq!(
            r.stderr.trim().lines().count(),
            1,
            "{extra:?}: {}",
            r.stderr
        );
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(!out.exists());
    }

    // A stream with nobody listening: the analysis goes on, the summary counts the frames.
    // The port is freed just before the run, and another test's socket (they run at once) may
    // take it meanwhile and receive the datagrams: a run without a failed send is tried again
    // on another port, twice at most.
    let (nobody, r) = (0..3)
        .map(|_| {
            let closed = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let nobody = format!("osc://127.0.0.1:{}", closed.local_addr().unwrap().port());
            drop(closed);
            let r = analyze(&[
                "synthetic",
                "--max-frames",
                "20",
                "--out",
                out_s,
                "--stream",
                &nobody,
            ]);
            (nobody, r)
        })
        .find(|(_, r)| r.stderr.contains("cannot send") || r.code != Some(0))
        .unwrap_or_else(|| panic!("no send failed in three runs to a closed port"));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("stream {nobody}: ")),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("cannot send"), "{}", r.stderr);
    assert!(out.exists());
}

/// A closed standard output (`>&-`) would swallow every row (the runtime puts /dev/null in its
/// place): it is a bad request before any work. A shell's `>/dev/null` still discards them.
#[cfg(target_os = "linux")]
#[test]
fn a_closed_stdout_is_refused_rather_than_losing_the_rows() {
    let f = Fixture::new();
    let run = |redirect: &str| {
        Command::new("sh")
            .arg("-c")
            .arg(format!("exec \"$0\" analyze \"$1\" {redirect}"))
            .arg(env!("CARGO_BIN_EXE_markerscope"))
            .arg(f.path("good.png"))
            .output()
            .unwrap()
    };
    let closed = run(">&-");
    let stderr = String::from_utf8_lossy(&closed.stderr);
    assert_eq!(closed.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("<stdout>") && stderr.contains("standard output is closed"),
        "{stderr}"
    );
    let discarded = run(">/dev/null");
    assert!(
        discarded.status.success(),
        "{}",
        String::from_utf8_lossy(&discarded.stderr)
    );
}

/// `markerscope marker`: the PNG is the library's marker image (equal to OpenCV's
/// `generateImageMarker`, see `fiducial`), the SVG has the side asked for, and every bad
/// argument is refused with exit code 2, a line that names it, and no file.
#[test]
fn marker_prints_opencvs_marker_and_refuses_bad_arguments() {
    use markerscope::fiducial::{generate_marker, Dictionary};
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("m7.png");
    let out = markerscope(&[
        "marker",
        "DICT_4X4_50",
        "7",
        "--size",
        "203",
        "--out",
        png.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = image::open(&png).unwrap().into_luma8();
    let dict = Dictionary::predefined("DICT_4X4_50").unwrap();
    let expected = generate_marker(&dict, 7, 203, 1).unwrap();
    assert_eq!((written.width(), written.height()), (203, 203));
    assert!(
        written.as_raw() == &expected.data,
        "the PNG differs from the marker image"
    );

    let svg = dir.path().join("m3.svg");
    let out = markerscope(&[
        "marker",
        "DICT_APRILTAG_36h11",
        "3",
        "--size",
        "50",
        "--unit",
        "mm",
        "--out",
        svg.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.starts_with("<svg") && text.contains("width=\"50mm\""),
        "{text}"
    );

    let bad = dir.path().join("bad.png");
    let bad_svg = dir.path().join("bad.svg");
    let (bad, bad_svg) = (bad.to_str().unwrap(), bad_svg.to_str().unwrap());
    for (args, says) in [
        (vec!["DICT_NOPE", "1", "--out", bad], "DICT_APRILTAG_36h11"),
        (vec!["DICT_4X4_50", "50", "--out", bad], "IDs 0 to 49"),
        (vec!["DICT_4X4_50", "1", "--out", "x.jpg"], ".png or .svg"),
        (
            vec!["DICT_4X4_50", "1", "--size", "20.5", "--out", bad],
            "whole number",
        ),
        (
            vec!["DICT_4X4_50", "1", "--size", "3", "--out", bad],
            "at least 6",
        ),
        (
            vec!["DICT_4X4_50", "1", "--unit", "furlong", "--out", bad_svg],
            "mm",
        ),
        (
            vec!["DICT_4X4_50", "1", "--out", "/nonexistent-folder/m.png"],
            "does not exist",
        ),
    ] {
        let mut all = vec!["marker"];
        all.extend(&args);
        let out = markerscope(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(says) && err.lines().count() == 1,
            "{args:?}: {err}"
        );
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        2,
        "only the two markers"
    );
}

/// `marker-board`: a PNG sheet whose markers are OpenCV's images at the scale asked (here
/// 60 mm at 127 dpi = 300 px), an SVG in millimetres, and bad sheets refused before writing.
#[test]
fn marker_board_prints_a_sheet_of_opencvs_markers_with_its_scale() {
    use markerscope::fiducial::{generate_marker, Dictionary};
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("sheet.png");
    let args = [
        "marker-board",
        "DICT_4X4_50",
        "--ids",
        "0-5",
        "--cols",
        "3",
        "--size",
        "60",
        "--unit",
        "mm",
        "--gap",
        "10",
        "--dpi",
        "127",
    ];
    let mut all = args.to_vec();
    all.extend(["--out", png.to_str().unwrap()]);
    let out = markerscope(&all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sheet = image::open(&png).unwrap().into_luma8();
    let dict = Dictionary::predefined("DICT_4X4_50").unwrap();
    // 60 mm = 300 px, 10 mm = 50 px at 127 dpi; label band 60 px, margin 60 px.
    let w = sheet.width() as usize;
    for id in 0..6u32 {
        let (col, row) = (id as usize % 3, id as usize / 3);
        let (x, y) = (60 + 350 * col, 60 + 410 * row);
        let want = generate_marker(&dict, id, 300, 1).unwrap();
        for r in 0..300 {
            let got = &sheet.as_raw()[(y + r) * w + x..(y + r) * w + x + 300];
            assert!(
                got == &want.data[r * 300..(r + 1) * 300],
                "marker {id} row {r}"
            );
        }
    }

    let svg = dir.path().join("sheet.svg");
    let mut all = args[..args.len() - 2].to_vec();
    all.extend(["--out", svg.to_str().unwrap()]);
    let out = markerscope(&all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.contains("mm\" height=") && text.contains("marker side 60 mm"),
        "{text}"
    );
    assert_eq!(text.matches("<g transform").count(), 6);

    for (extra, says) in [
        (vec!["--ids", "0-50"], "not in DICT_4X4_50"),
        (vec!["--ids", "3-1"], "smaller ID"),
        (vec!["--ids", "1,1"], "twice"),
        (vec!["--ids", "0-3", "--unit", "furlong"], "--unit furlong"),
        (vec!["--ids", "0-3", "--cols", "0"], "0 columns"),
        (vec!["--ids", "0-3", "--dpi", "0"], "--dpi 0"),
    ] {
        let bad = dir.path().join("bad.png");
        let mut all = vec!["marker-board", "DICT_4X4_50"];
        all.extend(&extra);
        all.extend(["--out", bad.to_str().unwrap()]);
        let out = markerscope(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(
            err.contains(says) && err.lines().count() == 1,
            "{extra:?}: {err}"
        );
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        2,
        "only the two sheets"
    );
}
