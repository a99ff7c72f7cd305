//! What several test modules need: the repository, the `markerscope` binary, the `ffmpeg`
//! command line, test images written to disk and a pipeline's events.

use markerscope::pipeline::{FrameResult, Pipeline, PipelineEvent};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

/// The repository root (where Cargo.toml is).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `markerscope` binary this test run built, with `args`; not run yet.
pub fn markerscope_command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_markerscope"));
    command.args(args);
    command
}

/// Files `command` writes may grow to `bytes` at most: past it a write fails with EFBIG (a
/// full disk's error at the same place) instead of raising SIGXFSZ.
#[cfg(target_os = "linux")]
pub fn limit_file_size(command: &mut Command, bytes: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Runs `command` (writing `out` in `dir`) with files limited to 64 KiB: it must fail with
/// the output's name and "File too large", and leave nothing in `dir`.
#[cfg(target_os = "linux")]
pub fn fails_past_a_file_size_limit(mut command: Command, out: &Path, dir: &Path) {
    limit_file_size(&mut command, 64 << 10);
    let run = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "{stderr}");
    assert!(
        stderr.contains(out.to_str().unwrap()) && stderr.contains("File too large"),
        "{stderr}"
    );
    let left: Vec<_> = std::fs::read_dir(dir).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Runs the `markerscope` binary with `args` and waits for it.
pub fn markerscope(args: &[&str]) -> Output {
    markerscope_command(args)
        .output()
        .expect("running markerscope")
}

/// Fails (never skips) when the ffmpeg command is missing.
pub fn require_ffmpeg() {
    let ok = Command::new("ffmpeg")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "these tests need the `ffmpeg` command to make video clips: run `bash .ci/install` (CI installs it)"
    );
}

/// Runs ffmpeg quietly (`-y -hide_banner -loglevel error` first); fails the test when it fails.
pub fn ffmpeg(args: &[&str]) {
    let out = Command::new("ffmpeg")
        .args(["-y", "-hide_banner", "-loglevel", "error"])
        .args(args)
        .output()
        .expect("these tests need the `ffmpeg` command: run `bash .ci/install`");
    assert!(
        out.status.success(),
        "ffmpeg {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A `size`×`size` checkerboard as a PGM: size²/2 components at 4-connectivity. (Its tests
/// read memory and limits through Linux interfaces.)
#[cfg(target_os = "linux")]
pub fn write_checkerboard(path: &Path, size: usize) {
    let mut pgm = format!("P5\n{size} {size}\n255\n").into_bytes();
    pgm.extend((0..size * size).map(|i| {
        if (i / size + i % size) % 2 == 1 {
            255
        } else {
            0
        }
    }));
    std::fs::write(path, pgm).unwrap();
}

/// Every event of `p` up to its end of stream or source error (included), each within 30 s.
pub fn events_to_the_end(p: &Pipeline) -> Vec<PipelineEvent> {
    let mut all = Vec::new();
    loop {
        let e = p
            .events()
            .recv_timeout(Duration::from_secs(30))
            .expect("an event within 30 s");
        let end = matches!(
            e,
            PipelineEvent::EndOfStream { .. } | PipelineEvent::SourceError(_)
        );
        all.push(e);
        if end {
            return all;
        }
    }
}

/// The frame results among `events`, in order.
pub fn frames_of(events: &[PipelineEvent]) -> Vec<Arc<FrameResult>> {
    events
        .iter()
        .filter_map(|e| match e {
            PipelineEvent::Frame(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}
