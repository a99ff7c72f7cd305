//! Memory on dense frames: what `analyze` holds per component stays bounded when its output
//! is slower than the labeling (results wait for the writer within a byte budget, not sixteen
//! frames deep). Linux: the peak is the child's VmHWM in /proc.

use crate::util::{markerscope_command, write_checkerboard};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The peak resident memory of a running process, in kB.
fn peak_rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Sixteen 1000×1000 checkerboards (500,000 components each, a result of about 60 MB) to a
/// writer that takes nothing: the worker must stop after a frame or two instead of queueing
/// every result. Before the budget this peaked near 1.2 GB; with it at about 0.5 GB.
#[test]
fn results_waiting_for_a_slow_writer_stay_within_a_budget() {
    let dir = tempfile::tempdir().unwrap();
    let frames = dir.path().join("frames");
    std::fs::create_dir(&frames).unwrap();
    write_checkerboard(&frames.join("00.pgm"), 1000);
    for i in 1..16 {
        std::fs::copy(frames.join("00.pgm"), frames.join(format!("{i:02}.pgm"))).unwrap();
    }
    // stdout is a pipe nobody reads: the exporter blocks after the first 64 KiB.
    let mut child = markerscope_command(&[])
        .args(["analyze", frames.to_str().unwrap(), "--connectivity", "4"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let (mut peak, mut since_change) = (0u64, Instant::now());
    // Until the peak has not moved for 3 s (the worker waits), or 60 s.
    while since_change.elapsed() < Duration::from_secs(3)
        && started.elapsed() < Duration::from_secs(60)
    {
        std::thread::sleep(Duration::from_millis(100));
        let Some(now) = peak_rss_kb(child.id()) else {
            break;
        };
        if now > peak {
            (peak, since_change) = (now, Instant::now());
        }
    }
    let exited = child.try_wait().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        exited.is_none(),
        "the run ended although its output was never read"
    );
    let mb = peak / 1000;
    eprintln!("peak resident memory: {mb} MB");
    assert!(mb > 100, "the first frame was not labeled: peak {mb} MB");
    assert!(
        mb < 800,
        "peak resident memory {mb} MB: results piled up for the blocked writer"
    );
}

/// `analyze ARGS --out OUT` under a memory cap (`MARKERSCOPE_MEMORY_LIMIT`, as a container's
/// limit would be).
fn analyze_capped(args: &[&str], out: &std::path::Path, cap: &str) -> std::process::Output {
    markerscope_command(&["analyze"])
        .args(args)
        .arg("--out")
        .arg(out)
        .env("MARKERSCOPE_MEMORY_LIMIT", cap)
        .output()
        .unwrap()
}

/// A 1000×1000 PGM of white pixels scattered at density 1/5 over columns `columns` (about
/// 36,000 components in one half).
fn write_scattered(path: &std::path::Path, columns: std::ops::Range<usize>, seed: u64) {
    let mut state = seed;
    let mut pixels = vec![0u8; 1000 * 1000];
    for (i, p) in pixels.iter_mut().enumerate() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        if columns.contains(&(i % 1000)) && state % 5 == 0 {
            *p = 255;
        }
    }
    let mut file = b"P5 1000 1000 255\n".to_vec();
    file.extend(pixels);
    std::fs::write(path, file).unwrap();
}

/// Two frames dense from the start whose components are all new in the second (the scatter
/// moves to the other half): about 0.4 GB once tracked, refused under a 300 MB cap before any
/// row is written (exit 2, no output left); a sparse scene of the same size runs to its end.
#[test]
fn a_run_too_dense_from_its_start_stops_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let frames = dir.path().join("frames");
    std::fs::create_dir(&frames).unwrap();
    write_scattered(&frames.join("0.pgm"), 0..500, 0x9e37_79b9_7f4a_7c15);
    write_scattered(&frames.join("1.pgm"), 500..1000, 0x2545_f491_4f6c_dd1d);
    let outputs = dir.path().join("out");
    std::fs::create_dir(&outputs).unwrap();
    let out = analyze_capped(
        &[frames.to_str().unwrap()],
        &outputs.join("dense.csv"),
        "300M",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("frame 1: frames of 1000x1000 with ")
            && stderr.contains("new tracks, need about")
            && stderr.contains("GiB are available"),
        "{stderr}"
    );
    let left: Vec<_> = std::fs::read_dir(&outputs).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");

    let sparse = outputs.join("sparse.csv");
    let sized = ["synthetic", "--size", "1000x1000", "--max-frames", "3"];
    let out = analyze_capped(&sized, &sparse, "300M");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = std::fs::read_to_string(&sparse).unwrap();
    assert!(rows.lines().count() > 3, "{rows}");
}

/// A scene that turns dense part way (`synthetic:random`: no component in its first frame,
/// about 36,000 new ones in its second at 3000×3000, 0.5 GB once tracked) stops there under a
/// 400 MB cap, with the figures and the first frame's rows kept (exit 1), instead of growing
/// past the cap; the sparse scene of the same size runs to its end.
#[test]
fn a_run_that_turns_too_dense_stops_with_its_rows_kept() {
    let dir = tempfile::tempdir().unwrap();
    let run = |scene: &str, out: &std::path::Path| {
        let sized = [scene, "--size", "3000x3000", "--max-frames", "4"];
        analyze_capped(&sized, out, "400M")
    };
    let dense = dir.path().join("dense.csv");
    let out = run("synthetic:random", &dense);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("frame 1: frames of 3000x3000 with ")
            && stderr.contains("keeps the 1 frame(s) analysed before it"),
        "{stderr}"
    );
    let rows = std::fs::read_to_string(&dense).unwrap();
    assert_eq!(
        rows.lines().count(),
        1,
        "the empty first frame's header only: {rows}"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "{left:?}");

    let sparse = dir.path().join("sparse.csv");
    let out = run("synthetic", &sparse);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A memory cap that is not a size is a bad request that names the variable.
#[test]
fn a_memory_limit_that_is_not_a_size_is_refused() {
    let out = markerscope_command(&["analyze", "synthetic", "--max-frames", "1"])
        .args(["--out", "-"])
        .env("MARKERSCOPE_MEMORY_LIMIT", "lots")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("MARKERSCOPE_MEMORY_LIMIT=\"lots\""),
        "{stderr}"
    );
}
