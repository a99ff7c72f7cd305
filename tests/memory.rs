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
