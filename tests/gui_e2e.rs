//! End to end: the real `markerscope` binary opens its window on an X display (Xvfb with Mesa's
//! software rendering), runs the synthetic demo through the pipeline for a number of frames,
//! saves a screenshot and exits; the PNG must show the frame and the overlay boxes.
//!
//! Uses $DISPLAY when set (`.ci/test` runs the suite under xvfb-run), else starts its own Xvfb.

use crate::util::markerscope_command;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// An Xvfb this test started; killed on drop.
struct OwnXvfb {
    child: Child,
    display: String,
}

impl Drop for OwnXvfb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The display to use, and the Xvfb process when this test had to start one.
fn display() -> (String, Option<OwnXvfb>) {
    if let Ok(d) = std::env::var("DISPLAY") {
        if !d.is_empty() {
            return (d, None);
        }
    }
    // -displayfd: Xvfb picks a free display number and writes it to our pipe when ready.
    let mut child = Command::new("Xvfb")
        .args([
            "-displayfd",
            "1",
            "-screen",
            "0",
            "1920x1080x24",
            "-nolisten",
            "tcp",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("no DISPLAY and Xvfb cannot be started: install it (bash .ci/install)");
    let mut out = child.stdout.take().expect("piped stdout");
    let mut number = String::new();
    let mut byte = [0u8; 1];
    use std::io::Read;
    while out.read(&mut byte).map(|n| n == 1).unwrap_or(false) && byte[0] != b'\n' {
        number.push(byte[0] as char);
    }
    assert!(!number.is_empty(), "Xvfb did not report a display number");
    let display = format!(":{}", number.trim());
    (display.clone(), Some(OwnXvfb { child, display }))
}

fn run_window(display: &str, home: &Path, args: &[&str]) -> std::process::Output {
    let mut child = markerscope_command(args)
        .env("DISPLAY", display)
        // Fresh settings storage, so earlier runs cannot change what is shown.
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env_remove("WAYLAND_DISPLAY")
        .current_dir(home)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("markerscope starts");
    // A hang must fail the test, not the CI job: give it two minutes.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        match child.try_wait().expect("wait") {
            Some(_) => break,
            None if std::time::Instant::now() > deadline => {
                let _ = child.kill();
                let out = child.wait_with_output().expect("output");
                panic!(
                    "markerscope did not exit within 120 s; stderr:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            None => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    child.wait_with_output().expect("output")
}

/// The window on the synthetic source (CPU backend) with `args`, its screenshot saved to `shot`.
fn synthetic_window(
    display: &str,
    home: &Path,
    shot: &Path,
    args: &[&str],
) -> std::process::Output {
    let mut all = vec!["--source", "synthetic", "--backend", "cpu"];
    all.extend(args);
    all.extend(["--screenshot", shot.to_str().unwrap()]);
    run_window(display, home, &all)
}

#[test]
fn window_shows_the_synthetic_frame_with_overlay_boxes() {
    let (display, own) = display();
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("window.png");
    let out = synthetic_window(
        &display,
        dir.path(),
        &png,
        &["--exit-after-frames", "20", "--window-size", "1280x800"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "markerscope failed ({:?}) on display {display} (own Xvfb: {}):\n{stderr}",
        out.status,
        own.as_ref().map_or("no".to_string(), |x| x.display.clone())
    );
    let image = image::open(&png)
        .unwrap_or_else(|e| panic!("screenshot {}: {e}\n{stderr}", png.display()))
        .to_rgb8();
    assert_eq!(image.dimensions(), (1280, 800));

    // Overlay boxes: the box colour, which no grey frame contains.
    // The window's `BOX_COLOUR`.
    let [br, bg, bb] = [0, 230, 64];
    let near = |p: &image::Rgb<u8>, r: u8, g: u8, b: u8| {
        p.0[0].abs_diff(r) <= 12 && p.0[1].abs_diff(g) <= 12 && p.0[2].abs_diff(b) <= 12
    };
    let box_pixels = image.pixels().filter(|p| near(p, br, bg, bb)).count();
    assert!(box_pixels >= 200, "only {box_pixels} overlay box pixels");

    // The frame: the demo's noisy background (grey 40 ± 16) covers a large area with every
    // level of that range, which no panel of the window does; and bright markers (grey 230).
    let mut levels = [0usize; 256];
    for p in image.pixels() {
        if p.0[0] == p.0[1] && p.0[1] == p.0[2] {
            levels[p.0[0] as usize] += 1;
        }
    }
    let noise_levels = (26..=54).filter(|&v| levels[v] >= 300).count();
    assert!(
        noise_levels >= 25,
        "the frame's background noise is missing: {:?}",
        &levels[24..=56]
    );
    let bright: usize = levels[215..=245].iter().sum();
    assert!(bright >= 500, "markers missing: {bright} bright pixels");
    assert!(stderr.contains("screenshot saved"), "{stderr}");
}

#[test]
fn bad_config_values_are_reported_and_the_window_still_opens() {
    let (display, _own) = display();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.toml");
    std::fs::write(
        &config,
        "[threshold]\nspec = \"fixed:999\"\n[labeling]\nconnectivity = 5\n",
    )
    .unwrap();
    let out = run_window(
        &display,
        dir.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "--source",
            "synthetic",
            "--backend",
            "cpu",
            "--exit-after-frames",
            "3",
            "--window-size",
            "800x600",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}\n{stderr}", out.status);
    assert!(stderr.contains("threshold.spec"), "{stderr}");
    assert!(stderr.contains("labeling.connectivity"), "{stderr}");
}

#[test]
fn unknown_source_is_a_clear_error() {
    let (display, _own) = display();
    let dir = tempfile::tempdir().unwrap();
    let out = run_window(
        &display,
        dir.path(),
        &["--source", "camera:x", "--exit-after-frames", "1"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("camera:x"), "{stderr}");
}

/// A source with fewer frames than the script asks for (one still image here) ends the script:
/// the screenshot is taken and the window closes, instead of waiting forever.
#[test]
fn a_source_shorter_than_the_script_ends_it() {
    let (display, _own) = display();
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("discs.png");
    let grey = markerscope::frame::disc_grid::disc_grid(160, 120, 4, 3, 6.0).unwrap();
    image::GrayImage::from_raw(grey.width, grey.height, grey.data)
        .unwrap()
        .save(&image)
        .unwrap();
    let shot = dir.path().join("shot.png");
    let out = run_window(
        &display,
        dir.path(),
        &[
            "--source",
            image.to_str().unwrap(),
            "--exit-after-frames",
            "10",
            "--screenshot",
            shot.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("the source ended after 1 frame(s), before the 10 asked for"),
        "{stderr}"
    );
    assert!(shot.is_file(), "{stderr}");
}

/// `--screenshot` alone: the window closes once the screenshot is saved.
#[test]
fn a_screenshot_alone_closes_the_window_once_saved() {
    let (display, _own) = display();
    let dir = tempfile::tempdir().unwrap();
    let shot = dir.path().join("shot.png");
    let out = synthetic_window(&display, dir.path(), &shot, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("screenshot saved"), "{stderr}");
    assert!(shot.is_file(), "{stderr}");
}

/// A screenshot that cannot be taken or written fails the script: a missing folder before the
/// window opens, a file that cannot be written (a full device) when it is saved; either way
/// a non-zero exit with the path and the reason.
#[test]
fn a_screenshot_that_cannot_be_saved_fails_the_run() {
    let (display, _own) = display();
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-folder").join("shot.png");
    let full = std::path::PathBuf::from("/dev/full");
    for (shot, reason) in [
        (&missing, "does not exist"),
        (&full, "No space left on device"),
    ] {
        let out = synthetic_window(&display, dir.path(), shot, &["--exit-after-frames", "3"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{}: {stderr}", shot.display());
        assert!(
            stderr.contains(shot.to_str().unwrap()) && stderr.contains(reason),
            "{stderr}"
        );
        assert!(!stderr.contains("screenshot saved"), "{stderr}");
    }
    assert!(!missing.parent().unwrap().exists());
}

/// An algorithm the chosen backend cannot run is refused before a window opens.
#[cfg(feature = "cuda")]
#[test]
fn an_algorithm_the_backend_cannot_run_is_refused() {
    let (display, _own) = display();
    let dir = tempfile::tempdir().unwrap();
    let out = run_window(
        &display,
        dir.path(),
        &[
            "--algorithm",
            "ha4w",
            "--backend",
            "cpu",
            "--exit-after-frames",
            "1",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--backend cpu: algorithm 'ha4w' runs on cuda"),
        "{stderr}"
    );
}

/// More benchmark components than the benchmark frame holds is a clear error before a window
/// opens (the app-creation error used to be taken for a renderer failure, and the fallback
/// renderer then panicked).
#[test]
fn too_many_benchmark_components_is_a_clear_error() {
    let (display, _own) = display();
    let dir = tempfile::tempdir().unwrap();
    let out = run_window(
        &display,
        dir.path(),
        &["--bench-ui", "1", "--bench-components", "20000"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--bench-components 20000"), "{stderr}");
    assert!(stderr.contains("do not fit apart"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn pictures_without_a_graphics_adapter_are_a_clear_error() {
    // WGPU_BACKEND=metal leaves wgpu no adapter on Linux: what a machine without a display or
    // a software renderer gives.
    let dir = tempfile::tempdir().unwrap();
    let out = markerscope_command(&["screenshots", dir.path().to_str().unwrap(), "main-view"])
        .env("WGPU_BACKEND", "metal")
        .env("MARKERSCOPE_QUIET", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot draw the window here"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
