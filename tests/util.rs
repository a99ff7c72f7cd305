//! What several test modules need: the repository, the `markerscope` binary, the `ffmpeg`
//! command line and test images written to disk.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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
