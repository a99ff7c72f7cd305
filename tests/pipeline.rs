//! The live pipeline and `markerscope analyze` on videos, image folders and the synthetic demo.
//!
//! Video clips are made by the `ffmpeg` command line (lavfi `color` + `drawbox`), with white
//! boxes at positions this file chooses, so the expected components are known without running
//! any labeler. These tests need `ffmpeg` on PATH: `.ci/install` installs it; without it they
//! fail and say so (they are never skipped).

use crate::util::{events_to_the_end, ffmpeg, frames_of, markerscope, require_ffmpeg};
use markerscope::ccl::BackendChoice;
use markerscope::ccl::{Backends, Connectivity};
use markerscope::error::{Error, Result};
use markerscope::frame::grey::FrameGrey;
use markerscope::frame::image::GrayImage;
use markerscope::pipeline::{
    Delivery, FrameResult, Pipeline, PipelineEvent, PipelineSettings, SourceCommand,
};
use markerscope::source::synthetic::{self, MarkerScene, SyntheticSource};
use markerscope::source::{Frame, FrameSource, SyntheticKind};
use markerscope::threshold::spec::ThresholdSpec;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------------
// Helpers

/// A filled box in pixel coordinates.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Rect {
    x: u32,
    y: u32,
    w: u32,
    h: u32,
}

impl Rect {
    fn centroid(&self) -> (f64, f64) {
        (
            self.x as f64 + (self.w as f64 - 1.0) / 2.0,
            self.y as f64 + (self.h as f64 - 1.0) / 2.0,
        )
    }
}

/// Three boxes of different sizes moving on separate tracks; box 1 is absent in frames 4..6
/// and frame 9 has no box at all.
fn scene(frames: u32) -> Vec<Vec<Rect>> {
    (0..frames)
        .map(|n| {
            if n == 9 {
                return vec![];
            }
            let mut boxes = vec![Rect {
                x: 10 + 6 * n,
                y: 12,
                w: 20,
                h: 12,
            }];
            if !(4..7).contains(&n) {
                boxes.push(Rect {
                    x: 200 - 4 * n,
                    y: 60 + 4 * n,
                    w: 8,
                    h: 8,
                });
            }
            boxes.push(Rect {
                x: 30 + 2 * n,
                y: 150,
                w: 40,
                h: 30,
            });
            boxes
        })
        .collect()
}

/// Writes a clip of `boxes` (white on black, 320×240) with ffmpeg; `codec` are the encoder
/// arguments. Every box is drawn by `drawbox` only in its own frame.
fn make_clip(dir: &Path, name: &str, fps: u32, boxes: &[Vec<Rect>], codec: &[&str]) -> PathBuf {
    make_clip_with(dir, name, fps, boxes, "", codec)
}

fn make_clip_with(
    dir: &Path,
    name: &str,
    fps: u32,
    boxes: &[Vec<Rect>],
    extra_filter: &str,
    codec: &[&str],
) -> PathBuf {
    require_ffmpeg();
    let mut filter = format!("format=gray{extra_filter}");
    for (n, frame) in boxes.iter().enumerate() {
        for r in frame {
            filter += &format!(
                ",drawbox=x={}:y={}:w={}:h={}:color=white:t=fill:enable='eq(n,{n})'",
                r.x, r.y, r.w, r.h
            );
        }
    }
    let script = dir.join(format!("{name}.filter"));
    std::fs::write(&script, &filter).unwrap();
    let path = dir.join(name);
    let source = format!(
        "color=c=black:s=320x240:r={fps}:d={}",
        boxes.len() as f64 / fps as f64
    );
    let frames = boxes.len().to_string();
    let input = [
        "-f",
        "lavfi",
        "-i",
        &source,
        "-filter_script:v",
        script.to_str().unwrap(),
        "-frames:v",
        &frames,
    ];
    ffmpeg(&[&input[..], codec, &[path.to_str().unwrap()]].concat());
    path
}

/// One CSV row, by column name.
#[derive(Clone, Debug)]
struct Row {
    frame: u64,
    left: u32,
    top: u32,
    width: u32,
    height: u32,
    area: u64,
    cx: f64,
    cy: f64,
    file: String,
    time_s: f64,
}

fn parse_csv(text: &str) -> Vec<Row> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("a header").split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("no column {name} in {header:?}"))
    };
    let c = [
        col("frame"),
        col("left"),
        col("top"),
        col("width"),
        col("height"),
        col("area"),
        col("centroid_x"),
        col("centroid_y"),
        col("file"),
        col("time_s"),
    ];
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let n = |i: usize| f[c[i]].parse::<f64>().unwrap_or_else(|_| panic!("row {l}"));
            Row {
                frame: n(0) as u64,
                left: n(1) as u32,
                top: n(2) as u32,
                width: n(3) as u32,
                height: n(4) as u32,
                area: n(5) as u64,
                cx: n(6),
                cy: n(7),
                file: f[c[8]].to_string(),
                time_s: n(9),
            }
        })
        .collect()
}

fn by_frame(rows: &[Row]) -> BTreeMap<u64, Vec<Row>> {
    let mut map: BTreeMap<u64, Vec<Row>> = BTreeMap::new();
    for r in rows {
        map.entry(r.frame).or_default().push(r.clone());
    }
    map
}

/// Checks every frame's rows against the boxes. `slack` = 0: exact (lossless codecs, images);
/// otherwise box edges may move by `slack` pixels and centroids by half of it.
fn check_against_boxes(rows: &[Row], boxes: &[Vec<Rect>], frames: usize, slack: u32, what: &str) {
    let got = by_frame(rows);
    for (n, expected) in boxes.iter().enumerate().take(frames) {
        let mut expected = expected.clone();
        expected.sort_by_key(|r| (r.y, r.x));
        let found = got.get(&(n as u64)).cloned().unwrap_or_default();
        assert_eq!(
            found.len(),
            expected.len(),
            "{what} frame {n}: components {found:?} vs boxes {expected:?}"
        );
        for (r, b) in found.iter().zip(&expected) {
            let close = |a: u32, b: u32| a.abs_diff(b) <= slack;
            let (cx, cy) = b.centroid();
            let tol = if slack == 0 { 1e-9 } else { slack as f64 / 2.0 };
            let area_tol = if slack == 0 {
                0
            } else {
                (b.w + b.h) as u64 * slack as u64
            };
            let ok = close(r.left, b.x)
                && close(r.top, b.y)
                && close(r.width, b.w)
                && close(r.height, b.h)
                && r.area.abs_diff((b.w * b.h) as u64) <= area_tol
                && (r.cx - cx).abs() <= tol
                && (r.cy - cy).abs() <= tol;
            assert!(ok, "{what} frame {n}: row {r:?} vs box {b:?}");
        }
    }
    let last = got.keys().next_back().copied();
    assert!(
        last.is_none_or(|l| l < frames as u64),
        "{what}: rows for frames past {frames}: {last:?}"
    );
}

fn analyze_ok(args: &[&str]) -> String {
    let out = markerscope(&[&["analyze"], args].concat());
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "analyze {args:?} failed: {stderr}");
    stderr
}

// ---------------------------------------------------------------------------------------------
// Video files through `analyze`

#[test]
fn lossless_ffv1_clip_matches_the_boxes_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let boxes = scene(12);
    let clip = make_clip(dir.path(), "boxes.mkv", 25, &boxes, &["-c:v", "ffv1"]);
    let out = dir.path().join("out.csv");
    let stderr = analyze_ok(&[
        clip.to_str().unwrap(),
        "--backend",
        "cpu",
        "--threshold",
        "fixed:128",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(stderr.contains("analyzed 12 frame(s)"), "{stderr}");
    assert!(stderr.contains("0 dropped"), "{stderr}");
    let rows = parse_csv(&std::fs::read_to_string(&out).unwrap());
    check_against_boxes(&rows, &boxes, 12, 0, "ffv1");
    for r in &rows {
        assert!((r.time_s - r.frame as f64 / 25.0).abs() < 1e-3, "{r:?}");
        assert_eq!(r.file, "");
    }
}

#[test]
fn h264_and_mjpeg_clips_match_the_boxes_within_a_margin() {
    let dir = tempfile::tempdir().unwrap();
    let boxes = scene(12);
    for (name, codec) in [
        (
            "boxes.mp4",
            &["-c:v", "libx264", "-pix_fmt", "yuv420p", "-crf", "23"][..],
        ),
        ("boxes.avi", &["-c:v", "mjpeg", "-q:v", "4"][..]),
    ] {
        let clip = make_clip(dir.path(), name, 30, &boxes, codec);
        let out = dir.path().join(format!("{name}.jsonl"));
        analyze_ok(&[
            clip.to_str().unwrap(),
            "--backend",
            "cpu",
            "--threshold",
            "fixed:128",
            "--out",
            out.to_str().unwrap(),
        ]);
        // JSONL this time: the same fields as the CSV columns.
        let rows: Vec<Row> = std::fs::read_to_string(&out)
            .unwrap()
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                let u = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {l}"));
                let f = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k} in {l}"));
                Row {
                    frame: u("frame"),
                    left: u("left") as u32,
                    top: u("top") as u32,
                    width: u("width") as u32,
                    height: u("height") as u32,
                    area: u("area"),
                    cx: f("centroid_x"),
                    cy: f("centroid_y"),
                    file: v["file"].as_str().unwrap().to_string(),
                    time_s: f("time_s"),
                }
            })
            .collect();
        check_against_boxes(&rows, &boxes, 12, 2, name);
        for r in &rows {
            assert!(
                (r.time_s - r.frame as f64 / 30.0).abs() < 2e-3,
                "{name}: {r:?}"
            );
        }
    }
}

#[test]
fn max_frames_stops_early() {
    let dir = tempfile::tempdir().unwrap();
    let boxes = scene(12);
    let clip = make_clip(dir.path(), "boxes.mkv", 25, &boxes, &["-c:v", "ffv1"]);
    let out = dir.path().join("out.csv");
    let stderr = analyze_ok(&[
        clip.to_str().unwrap(),
        "--backend",
        "cpu",
        "--threshold",
        "fixed:128",
        "--max-frames",
        "5",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(stderr.contains("analyzed 5 frame(s)"), "{stderr}");
    let rows = parse_csv(&std::fs::read_to_string(&out).unwrap());
    check_against_boxes(&rows, &boxes, 5, 0, "first 5 frames");
}

/// Every frame has a box, so the frames in the output are exactly the frames analysed.
fn one_box_per_frame(frames: u32) -> Vec<Vec<Rect>> {
    (0..frames)
        .map(|n| {
            vec![Rect {
                x: 8 + 3 * n,
                y: 20 + n,
                w: 24,
                h: 16,
            }]
        })
        .collect()
}

#[test]
fn truncated_clips_keep_the_frames_before_the_cut_and_say_it_is_cut_short() {
    let dir = tempfile::tempdir().unwrap();
    let boxes = one_box_per_frame(40);
    // Noise makes every frame large, so that cutting the file cuts through frames; faststart
    // puts the MP4 frame table first, so a cut file still opens.
    let clips = [
        make_clip_with(
            dir.path(),
            "noisy.mp4",
            25,
            &boxes,
            ",noise=alls=10:allf=t",
            &[
                "-c:v",
                "libx264",
                "-pix_fmt",
                "yuv420p",
                "-crf",
                "12",
                "-g",
                "10",
                "-movflags",
                "+faststart",
            ],
        ),
        make_clip_with(
            dir.path(),
            "noisy.mkv",
            25,
            &boxes,
            ",noise=alls=10:allf=t",
            &["-c:v", "ffv1"],
        ),
    ];
    for clip in clips {
        let bytes = std::fs::read(&clip).unwrap();
        let cut = dir.path().join(format!(
            "cut-{}",
            clip.file_name().unwrap().to_str().unwrap()
        ));
        std::fs::write(&cut, &bytes[..bytes.len() * 6 / 10]).unwrap();
        let out = dir.path().join("cut.csv");
        let r = markerscope(&[
            "analyze",
            cut.to_str().unwrap(),
            "--backend",
            "cpu",
            "--threshold",
            "fixed:128",
            "--out",
            out.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&r.stderr);
        // Finished, with something skipped: the missing rest of the file.
        assert_eq!(r.status.code(), Some(3), "{}: {stderr}", cut.display());
        assert!(!stderr.contains("panicked"), "{stderr}");
        let rows = parse_csv(&std::fs::read_to_string(&out).unwrap());
        let frames = by_frame(&rows).len();
        assert!(
            frames > 0 && frames < 40,
            "{}: {frames} frames kept",
            cut.display()
        );
        assert!(
            stderr.contains("analyzed") && stderr.contains("the file is cut short"),
            "{stderr}"
        );
        check_against_boxes(&rows, &boxes, frames, 2, "truncated clip");
    }
}

#[test]
fn missing_and_non_video_files_fail_before_any_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.csv");
    let fake = dir.path().join("fake.mp4");
    std::fs::write(&fake, b"not a video at all").unwrap();
    for (input, needle) in [
        (dir.path().join("missing.mp4"), "No such file"),
        (fake, "not a readable video file"),
    ] {
        let r = markerscope(&[
            "analyze",
            input.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(input.to_str().unwrap()) && stderr.contains(needle),
            "{stderr}"
        );
        assert!(!out.exists());
    }
}

// ---------------------------------------------------------------------------------------------
// Images and the synthetic source through `analyze`

#[test]
fn folder_and_glob_of_images() {
    let dir = tempfile::tempdir().unwrap();
    let frames = dir.path().join("frames");
    std::fs::create_dir(&frames).unwrap();
    let boxes = one_box_per_frame(4);
    for (n, frame) in boxes.iter().enumerate() {
        let img = image::GrayImage::from_fn(120, 80, |x, y| {
            let inside = frame
                .iter()
                .any(|r| (r.x..r.x + r.w).contains(&x) && (r.y..r.y + r.h).contains(&y));
            image::Luma([if inside { 220 } else { 30 }])
        });
        img.save(frames.join(format!("f{n:03}.png"))).unwrap();
    }
    std::fs::write(frames.join("notes.txt"), "skipped").unwrap();
    let out = dir.path().join("out.csv");
    analyze_ok(&[
        frames.to_str().unwrap(),
        "--backend",
        "cpu",
        "--out",
        out.to_str().unwrap(),
    ]);
    let rows = parse_csv(&std::fs::read_to_string(&out).unwrap());
    check_against_boxes(&rows, &boxes, 4, 0, "folder");
    for r in &rows {
        assert_eq!(r.file, format!("f{:03}.png", r.frame));
        assert_eq!(r.time_s, 0.0);
    }

    let pattern = format!("{}/f00[12].png", frames.display());
    analyze_ok(&[&pattern, "--backend", "cpu", "--out", out.to_str().unwrap()]);
    let rows = parse_csv(&std::fs::read_to_string(&out).unwrap());
    let files: Vec<(u64, &str)> = rows.iter().map(|r| (r.frame, r.file.as_str())).collect();
    assert_eq!(files, [(0, "f001.png"), (1, "f002.png")]);
}

#[test]
fn synthetic_source_is_deterministic_and_matches_its_ground_truth() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str| {
        let out = dir.path().join(name);
        analyze_ok(&[
            "synthetic",
            "--size",
            "320x240",
            "--max-frames",
            "40",
            "--backend",
            "cpu",
            "--out",
            out.to_str().unwrap(),
        ]);
        std::fs::read_to_string(out).unwrap()
    };
    let a = run("a.csv");
    assert_eq!(a, run("b.csv"), "two runs differ");

    let rows = by_frame(&parse_csv(&a));
    let scene = MarkerScene::new(320, 240, synthetic::DEFAULT_SEED).unwrap();
    let mut matched = 0;
    for f in 0..40u64 {
        let truth = scene.truth(f);
        let found = rows.get(&f).cloned().unwrap_or_default();
        let visible: Vec<_> = truth.iter().filter(|m| m.visible).collect();
        assert!(
            found.len() <= visible.len() && !found.is_empty(),
            "frame {f}: {} components for {} visible markers",
            found.len(),
            visible.len()
        );
        for r in &found {
            assert!((r.time_s - f as f64 / synthetic::DEFAULT_FPS).abs() < 1e-9);
        }
        // Every visible marker clear of the others is one component centred on it.
        for m in &visible {
            let clear = visible
                .iter()
                .all(|o| o.id == m.id || (o.x - m.x).hypot(o.y - m.y) > o.radius + m.radius + 3.0);
            if !clear {
                continue;
            }
            let hit = found
                .iter()
                .filter(|r| (r.cx - m.x).hypot(r.cy - m.y) < m.radius)
                .collect::<Vec<_>>();
            assert_eq!(hit.len(), 1, "frame {f}: marker {m:?} -> {hit:?}");
            let r = hit[0];
            let tol = if m.radius < 8.0 { 0.35 } else { 0.2 };
            assert!(
                (r.cx - m.x).abs() < tol && (r.cy - m.y).abs() < tol,
                "frame {f}: centroid ({}, {}) for marker {m:?}",
                r.cx,
                r.cy
            );
            let disc = std::f64::consts::PI * m.radius * m.radius;
            assert!(
                (r.area as f64 - disc).abs() < 0.1 * disc + 4.0 * m.radius,
                "frame {f}: area {} for marker {m:?}",
                r.area
            );
            matched += 1;
        }
        // A hidden marker leaves no component where it would be.
        for m in truth.iter().filter(|m| !m.visible) {
            let covered = visible
                .iter()
                .any(|o| (o.x - m.x).hypot(o.y - m.y) < o.radius + m.radius);
            if !covered {
                assert!(
                    found
                        .iter()
                        .all(|r| (r.cx - m.x).hypot(r.cy - m.y) > m.radius),
                    "frame {f}: hidden marker {m:?} was found"
                );
            }
        }
    }
    assert!(matched > 40 * 8, "only {matched} isolated markers checked");
}

#[test]
fn endless_sources_need_max_frames() {
    let r = markerscope(&["analyze", "synthetic"]);
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2));
    assert!(stderr.contains("--max-frames"), "{stderr}");
}

// ---------------------------------------------------------------------------------------------
// The pipeline API

/// Frames from a script: images or errors, optionally live.
struct Scripted {
    frames: Vec<std::result::Result<GrayImage, String>>,
    next: usize,
    live: bool,
}

impl Scripted {
    fn new(frames: Vec<std::result::Result<GrayImage, String>>, live: bool) -> Box<Self> {
        Box::new(Self {
            frames,
            next: 0,
            live,
        })
    }
}

impl FrameSource for Scripted {
    fn describe(&self) -> String {
        "scripted".into()
    }
    fn is_live(&self) -> bool {
        self.live
    }
    fn next_frame(&mut self) -> Result<Option<Frame>> {
        let Some(item) = self.frames.get(self.next) else {
            return Ok(None);
        };
        let index = self.next as u64;
        self.next += 1;
        match item {
            Ok(grey) => Ok(Some(Frame {
                index,
                time_s: index as f64,
                grey: grey.clone().into(),
                captured_at: Instant::now(),
                decode_ms: 0.0,
                name: String::new(),
            })),
            Err(why) => Err(Error::Invalid(why.clone())),
        }
    }
}

/// A `w`×`h` frame with `n` separate 2×2 squares.
fn squares(w: u32, h: u32, n: u32) -> GrayImage {
    let mut g = GrayImage::filled(w, h, 0).unwrap();
    for k in 0..n {
        for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
            let (x, y) = (1 + 4 * k + dx, 1 + dy);
            g.data[(y * w + x) as usize] = 255;
        }
    }
    g
}

fn cpu_settings() -> PipelineSettings {
    PipelineSettings {
        threshold: ThresholdSpec::Fixed(127),
        backend: BackendChoice::Cpu,
        ..PipelineSettings::default()
    }
}

fn next_event(p: &Pipeline) -> PipelineEvent {
    p.events()
        .recv_timeout(Duration::from_secs(30))
        .expect("an event within 30 s")
}

fn expect_frame(p: &Pipeline) -> Arc<FrameResult> {
    match next_event(p) {
        PipelineEvent::Frame(r) => r,
        other => panic!("expected a frame, got {other:?}"),
    }
}

#[test]
fn frame_size_change_mid_stream_is_reported_and_handled() {
    let mut frames = vec![Ok(squares(64, 48, 1)); 3];
    frames.extend(vec![Ok(squares(80, 60, 2)); 3]);
    let p = Pipeline::start(
        Scripted::new(frames, false),
        cpu_settings(),
        Delivery::Lossless,
        Arc::new(Backends::cpu_only()),
    )
    .unwrap();
    for i in 0..3 {
        let r = expect_frame(&p);
        assert_eq!((r.index, r.grey.width, r.components.len()), (i, 64, 1));
    }
    match next_event(&p) {
        PipelineEvent::Notice(m) => {
            assert_eq!(m, "frame size changed from 64x48 to 80x60 at frame 3")
        }
        other => panic!("expected the size notice, got {other:?}"),
    }
    for i in 3..6 {
        let r = expect_frame(&p);
        assert_eq!((r.index, r.grey.width, r.components.len()), (i, 80, 2));
        let names: Vec<&str> = r.timings.steps.iter().map(|s| s.step.as_str()).collect();
        assert_eq!(names.first(), Some(&"capture"));
        assert_eq!(names.get(1), Some(&"threshold"));
        assert_eq!(names[names.len() - 2..], ["filter", "track"]);
        assert!(r.timings.latency_ms >= 0.0);
    }
    assert!(matches!(
        next_event(&p),
        PipelineEvent::EndOfStream { frames: 6 }
    ));
    let c = p.counters();
    assert_eq!((c.captured, c.processed, c.dropped), (6, 6, 0));
    p.stop();
}

#[test]
fn a_failing_source_is_reported_and_the_pipeline_takes_a_new_one() {
    let frames = vec![
        Ok(squares(32, 8, 1)),
        Ok(squares(32, 8, 2)),
        Err("camera 0: gone".to_string()),
        Ok(squares(32, 8, 3)),
    ];
    let p = Pipeline::start(
        Scripted::new(frames, true),
        cpu_settings(),
        Delivery::Lossless,
        Arc::new(Backends::cpu_only()),
    )
    .unwrap();
    assert_eq!(expect_frame(&p).components.len(), 1);
    assert_eq!(expect_frame(&p).components.len(), 2);
    match next_event(&p) {
        PipelineEvent::SourceError(m) => assert!(m.contains("camera 0: gone"), "{m}"),
        other => panic!("expected the source error, got {other:?}"),
    }
    // Nothing more from the failed source.
    assert!(p.events().recv_timeout(Duration::from_millis(200)).is_err());
    // Still alive: a new source, new settings (inverted: the background is one component).
    p.set_settings(PipelineSettings {
        invert: true,
        ..cpu_settings()
    });
    p.set_source(Scripted::new(vec![Ok(squares(32, 8, 3))], false));
    let r = expect_frame(&p);
    assert_eq!((r.index, r.components.len()), (0, 1));
    assert!(matches!(
        next_event(&p),
        PipelineEvent::EndOfStream { frames: 1 }
    ));
    p.stop();
}

#[test]
fn component_filter_and_cpu_fallback_notice() {
    let mut g = squares(40, 12, 2);
    // A 1×6 line: aspect 6.
    for y in 4..10 {
        g.data[(y * 40 + 20) as usize] = 255;
    }
    let settings = PipelineSettings {
        backend: BackendChoice::Auto,
        filter: markerscope::pipeline::ComponentFilter {
            min_area: Some(4),
            max_area: None,
            max_aspect: Some(3.0),
            ..Default::default()
        },
        want_labels: true,
        want_binary: true,
        ..cpu_settings()
    };
    let p = Pipeline::start(
        Scripted::new(vec![Ok(g.clone()), Ok(g)], false),
        settings,
        Delivery::Lossless,
        Arc::new(Backends::cpu_only()),
    )
    .unwrap();
    match next_event(&p) {
        PipelineEvent::Notice(m) => assert!(m.starts_with("CPU backend: "), "{m}"),
        other => panic!("expected the CPU fallback notice, got {other:?}"),
    }
    for _ in 0..2 {
        let r = expect_frame(&p);
        assert_eq!(r.all_count, 3);
        assert_eq!(r.components.len(), 2, "the line is filtered out");
        assert!(r.components.iter().all(|c| c.area == 4));
        assert_eq!(r.labels.as_ref().unwrap().width, 40);
        assert_eq!(r.binary.as_ref().unwrap().foreground_count(), 14);
        assert_eq!(r.connectivity, Connectivity::Eight);
    }
    // Said once, not per frame.
    assert!(matches!(
        next_event(&p),
        PipelineEvent::EndOfStream { frames: 2 }
    ));
}

/// Fast live source, slow labeler: the oldest frames are dropped and counted, the newest kept.
#[test]
fn live_delivery_drops_the_oldest_frames_and_counts_them() {
    let n = 150;
    let frame = GrayImage::new(
        256,
        256,
        (0..256 * 256)
            .map(|i| if (i / 7) % 3 == 0 { 255 } else { 0 })
            .collect(),
    )
    .unwrap();
    let slow = PipelineSettings {
        algorithm: Some("bfs".into()),
        ..cpu_settings()
    };
    let p = Pipeline::start(
        Scripted::new(vec![Ok(frame.clone()); n], true),
        slow.clone(),
        Delivery::Live,
        Arc::new(Backends::cpu_only()),
    )
    .unwrap();
    let mut seen = Vec::new();
    loop {
        match next_event(&p) {
            PipelineEvent::Frame(r) => seen.push(r.index),
            PipelineEvent::EndOfStream { frames } => {
                assert_eq!(frames, n as u64);
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    let c = p.counters();
    assert_eq!(c.captured, n as u64);
    assert!(
        c.dropped > 0,
        "the worker kept up with an instant source: {c:?}"
    );
    assert_eq!(c.processed + c.dropped, c.captured, "{c:?}");
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "out of order: {seen:?}"
    );
    assert_eq!(
        seen.last(),
        Some(&(n as u64 - 1)),
        "the newest frame is kept"
    );
    p.stop();

    // The same with lossless delivery: every frame, in order, none dropped.
    let p = Pipeline::start(
        Scripted::new(vec![Ok(frame); 20], true),
        slow,
        Delivery::Lossless,
        Arc::new(Backends::cpu_only()),
    )
    .unwrap();
    let seen: Vec<u64> = (0..20).map(|_| expect_frame(&p).index).collect();
    assert_eq!(seen, (0..20).collect::<Vec<_>>());
    assert!(matches!(
        next_event(&p),
        PipelineEvent::EndOfStream { frames: 20 }
    ));
    assert_eq!(p.counters().dropped, 0);
}

#[test]
fn playback_commands_pause_seek_step_and_play() {
    let source = SyntheticSource::new(SyntheticKind::Markers, 160, 120, false).unwrap();
    // Live delivery plays a file-like source at its frame rate (60 fps here).
    let p = Pipeline::start(
        Box::new(source),
        cpu_settings(),
        Delivery::Live,
        Arc::new(Backends::cpu_only()),
    )
    .unwrap();
    let start = Instant::now();
    let first: Vec<u64> = (0..12).map(|_| expect_frame(&p).index).collect();
    assert_eq!(first, (0..12).collect::<Vec<_>>());
    assert!(
        start.elapsed() >= Duration::from_millis(150),
        "12 frames at 60 fps took {:?}",
        start.elapsed()
    );
    p.command(SourceCommand::Pause);
    std::thread::sleep(Duration::from_millis(100));
    while p.events().try_recv().is_ok() {}
    let paused_at = p.counters().captured;
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        p.counters().captured,
        paused_at,
        "paused but still capturing"
    );
    p.command(SourceCommand::Seek(100));
    assert_eq!(
        expect_frame(&p).index,
        100,
        "a seek while paused shows that frame"
    );
    p.command(SourceCommand::Step);
    assert_eq!(expect_frame(&p).index, 101);
    p.command(SourceCommand::Speed(0.0));
    p.command(SourceCommand::Play);
    // As fast as possible into a live queue: frames may be dropped, never reordered.
    let a = expect_frame(&p).index;
    let b = expect_frame(&p).index;
    assert!(a >= 102 && b > a, "{a}, {b}");
    p.stop();
}

#[test]
fn realtime_synthetic_source_is_paced_and_live() {
    let mut s = SyntheticSource::new(SyntheticKind::Random, 64, 48, true).unwrap();
    assert!(s.is_live());
    let start = Instant::now();
    for i in 0..7 {
        assert_eq!(s.next_frame().unwrap().unwrap().index, i);
    }
    // Frame 0 at once, then one every 1/60 s.
    assert!(start.elapsed() >= Duration::from_secs_f64(5.5 / synthetic::DEFAULT_FPS));
}

/// What the pipeline computed for a frame before the one-pass threshold and the kept-only
/// centroids: a fresh byte mask from `threshold::apply` (from `ThresholdLevels` in sub-pixel
/// mode), every component's centroid, then the filter over the rows and centroids together.
fn two_step_result(
    grey: &GrayImage,
    settings: &PipelineSettings,
    algorithm: &str,
) -> (
    markerscope::frame::image::BinaryImage,
    Vec<markerscope::ccl::stats::ComponentStats>,
    Vec<markerscope::ccl::subpixel::SubpixelCentroid>,
    u32,
) {
    use markerscope::ccl::subpixel::weighted_centroids;
    use markerscope::ccl::Want;
    use markerscope::threshold::levels::ThresholdLevels;
    let (spec, invert) = (&settings.threshold, settings.invert);
    let (binary, levels) = if settings.subpixel {
        let levels = ThresholdLevels::compute(grey, spec, invert).unwrap();
        (levels.mask(grey, invert).unwrap(), Some(levels))
    } else {
        let binary = markerscope::threshold::apply(grey, spec, invert).unwrap();
        (binary, None)
    };
    let mut labeler = Backends::cpu_only()
        .create(algorithm, settings.connectivity)
        .unwrap();
    let out = labeler
        .label(&binary, settings.connectivity, Want::Both)
        .unwrap();
    let (labels, all) = (out.labels.unwrap(), out.stats.unwrap());
    let (components, subpixel) = match levels {
        Some(levels) => {
            let centroids = weighted_centroids(grey, &labels, &all, &levels, invert).unwrap();
            all.into_iter()
                .zip(centroids)
                .filter(|(c, _)| settings.filter.accepts(c))
                .unzip()
        }
        None => (
            all.into_iter()
                .filter(|c| settings.filter.accepts(c))
                .collect(),
            Vec::new(),
        ),
    };
    (binary, components, subpixel, out.count)
}

/// The one-pass threshold into reused buffers and the centroids of the kept components only
/// give the very results of the two-step path, frame for frame: the demo scene and the
/// papers' random images (cluttered), every threshold kind, both polarities, with and without
/// sub-pixel centroids and a filter.
#[test]
fn results_equal_the_two_step_path_on_demo_and_random_frames() {
    let (w, h) = (331, 197);
    let scene = MarkerScene::new(w, h, 3).unwrap();
    let mut frames: Vec<GrayImage> = (0..4).map(|i| scene.render(i * 7)).collect();
    // Densities 0.3, 0.5, 0.7 at granularity 1, 4 and 16.
    for f in [3u64, 16, 29, 7, 18] {
        frames.push(synthetic::random_frame(w, h, f).unwrap());
    }
    let filters = [
        markerscope::pipeline::ComponentFilter::default(),
        markerscope::pipeline::ComponentFilter {
            min_area: Some(12),
            max_area: Some(4000),
            max_aspect: Some(3.0),
            ..Default::default()
        },
    ];
    let specs = [
        ThresholdSpec::Otsu,
        ThresholdSpec::Fixed(100),
        ThresholdSpec::Adaptive {
            window: 15,
            c: -2.5,
        },
    ];
    for spec in specs {
        for invert in [false, true] {
            for filter in filters {
                for subpixel in [true, false] {
                    let settings = PipelineSettings {
                        threshold: spec,
                        invert,
                        filter,
                        subpixel,
                        want_binary: true,
                        ..cpu_settings()
                    };
                    let p = Pipeline::start(
                        Scripted::new(frames.iter().cloned().map(Ok).collect(), false),
                        settings.clone(),
                        Delivery::Lossless,
                        Arc::new(Backends::cpu_only()),
                    )
                    .unwrap();
                    for (i, grey) in frames.iter().enumerate() {
                        let r = expect_frame(&p);
                        let what = format!(
                            "frame {i} {spec} invert {invert} {filter:?} subpixel {subpixel}"
                        );
                        let (binary, components, centroids, count) =
                            two_step_result(grey, &settings, r.algorithm);
                        assert!(r.binary.as_deref() == Some(&binary), "{what}: mask");
                        assert_eq!(r.all_count, count, "{what}");
                        assert_eq!(r.components, components, "{what}");
                        assert_eq!(r.subpixel, centroids, "{what}");
                        if filter.min_area.is_some() && i >= 4 {
                            assert!(
                                components.len() < count as usize,
                                "{what}: the filter bites"
                            );
                        }
                        let names: Vec<&str> =
                            r.timings.steps.iter().map(|s| s.step.as_str()).collect();
                        assert_eq!(names[..2], ["capture", "threshold"], "{what}");
                        assert_eq!(
                            names.contains(&"sub-pixel centroids"),
                            subpixel,
                            "{what}: {names:?}"
                        );
                    }
                    assert!(matches!(next_event(&p), PipelineEvent::EndOfStream { .. }));
                    p.stop();
                }
            }
        }
    }
}

/// A camera stand-in: endless live frames; it takes exposure and refuses gain, as a notice.
struct ControlledCamera {
    next: u64,
    notices: Vec<String>,
    exposure: Arc<std::sync::Mutex<Option<markerscope::source::camera_controls::Exposure>>>,
    /// Set when the source is dropped (its device free).
    closed: Arc<std::sync::atomic::AtomicBool>,
}

impl Drop for ControlledCamera {
    fn drop(&mut self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

impl FrameSource for ControlledCamera {
    fn describe(&self) -> String {
        "camera stand-in".into()
    }
    fn is_live(&self) -> bool {
        true
    }
    fn next_frame(&mut self) -> Result<Option<Frame>> {
        std::thread::sleep(Duration::from_millis(2));
        let index = self.next;
        self.next += 1;
        Ok(Some(Frame {
            index,
            time_s: index as f64,
            grey: squares(32, 8, 2).into(),
            captured_at: Instant::now(),
            decode_ms: 0.0,
            name: String::new(),
        }))
    }
    fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }
    fn set_camera_controls(
        &mut self,
        controls: &markerscope::source::camera_controls::CameraControls,
    ) {
        *self.exposure.lock().unwrap() = controls.exposure;
        if let Some(g) = controls.gain {
            self.notices
                .push(format!("camera 0: it did not take gain {g}"));
        }
    }
}

/// Exposure and gain given to a running pipeline reach its camera while it streams; what the
/// camera refuses comes back as a notice. Closing the source drops it before returning (a
/// camera is then free to open again in another mode).
#[test]
fn camera_controls_reach_a_streaming_camera() {
    use markerscope::source::camera_controls::{CameraControls, Exposure};
    let exposure = Arc::new(std::sync::Mutex::new(None));
    let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let source = ControlledCamera {
        next: 0,
        notices: Vec::new(),
        exposure: exposure.clone(),
        closed: closed.clone(),
    };
    let p = Pipeline::start(
        Box::new(source),
        cpu_settings(),
        Delivery::Live,
        Arc::new(Backends::cpu_only()),
    )
    .unwrap();
    expect_frame(&p);
    p.command(SourceCommand::CameraControls(CameraControls {
        exposure: Some(Exposure::Manual(80)),
        gain: Some(9),
        ..CameraControls::default()
    }));
    let start = Instant::now();
    let notice = loop {
        assert!(start.elapsed() < Duration::from_secs(30), "no notice");
        if let PipelineEvent::Notice(m) = next_event(&p) {
            break m;
        }
    };
    assert_eq!(notice, "camera 0: it did not take gain 9");
    assert_eq!(*exposure.lock().unwrap(), Some(Exposure::Manual(80)));
    assert!(!closed.load(std::sync::atomic::Ordering::SeqCst));
    assert!(p.close_source(Duration::from_secs(10)));
    assert!(closed.load(std::sync::atomic::Ordering::SeqCst));
    p.stop();
}

/// The CPU labeler that drops the rows of its row filter itself on statistics-only runs, as the
/// GPU labelers do before their download; counts the runs it filtered.
struct RowFilteringLsl {
    inner: markerscope::ccl::cpu::lsl::Lsl,
    filter: markerscope::ccl::RowFilter,
    filtered_runs: Arc<std::sync::atomic::AtomicUsize>,
}

impl RowFilteringLsl {
    fn drop_rows(&self, out: &mut markerscope::ccl::Labeling, want: markerscope::ccl::Want) {
        if want != markerscope::ccl::Want::Stats || self.filter.is_unlimited() {
            return;
        }
        if let Some(rows) = out.stats.as_mut() {
            rows.retain(|s| self.filter.accepts(s));
            out.filtered = Some(self.filter);
            self.filtered_runs
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

impl markerscope::ccl::Labeler for RowFilteringLsl {
    fn name(&self) -> &'static str {
        "lsl"
    }
    fn set_row_filter(&mut self, filter: markerscope::ccl::RowFilter) -> bool {
        self.filter = filter;
        true
    }
    fn label_mask(
        &mut self,
        request: markerscope::ccl::LabelRequest<markerscope::ccl::Mask<'_>>,
    ) -> Result<markerscope::ccl::Labeling> {
        let mut out = self.inner.label_mask(request)?;
        self.drop_rows(&mut out, request.want);
        Ok(out)
    }
    fn label_weighted(
        &mut self,
        request: markerscope::ccl::LabelRequest<markerscope::ccl::Mask<'_>>,
        rows: markerscope::ccl::CentroidRows<'_>,
    ) -> Result<(
        markerscope::ccl::Labeling,
        Vec<markerscope::ccl::subpixel::SubpixelCentroid>,
    )> {
        let (mut out, centroids) = self.inner.label_weighted(request, rows)?;
        self.drop_rows(&mut out, request.want);
        Ok((out, centroids))
    }
}

/// Every frame result of `frames` through the CPU pipeline with `first` as the labeler.
fn run_frames(
    frames: &[GrayImage],
    settings: &PipelineSettings,
    first: Option<Box<dyn markerscope::ccl::Labeler>>,
) -> Vec<Arc<FrameResult>> {
    let p = Pipeline::start_with_labeler(
        Scripted::new(frames.iter().cloned().map(Ok).collect(), false),
        settings.clone(),
        Delivery::Lossless,
        Arc::new(Backends::cpu_only()),
        markerscope::pipeline::EventPolicy::Lossless,
        first,
    )
    .unwrap();
    let results: Vec<_> = frames.iter().map(|_| expect_frame(&p)).collect();
    assert!(matches!(next_event(&p), PipelineEvent::EndOfStream { .. }));
    results
}

/// A labeler that filters its rows itself gives the pipeline the same results as the worker's
/// own filter: components with their labels, tracks, sub-pixel centroids, counts; the worker's
/// filter step then says it only did the rest.
#[test]
fn rows_filtered_by_the_labeler_give_the_same_results_as_the_worker_filter() {
    let scene = MarkerScene::new(320, 240, 5).unwrap();
    let mut frames: Vec<GrayImage> = (0..4).map(|i| scene.render(i)).collect();
    // Lines and specks besides the markers: rows at and past the aspect and area limits.
    for (k, f) in frames.iter_mut().enumerate() {
        for y in 0..12 {
            f.data[((200 + y) * 320 + 10 + k as u32 * 3) as usize] = 255;
        }
        for x in 0..6 {
            f.data[(230 * 320 + 100 + x) as usize] = 255;
            f.data[(232 * 320 + 100 + x) as usize] = 255;
        }
        f.data[(5 * 320 + 300) as usize] = 255;
    }
    for subpixel in [false, true] {
        let settings = PipelineSettings {
            algorithm: Some("lsl".into()),
            threshold: ThresholdSpec::Fixed(127),
            subpixel,
            filter: markerscope::pipeline::ComponentFilter {
                min_area: Some(2),
                max_area: Some(2000),
                max_aspect: Some(6.0),
                ..Default::default()
            },
            ..cpu_settings()
        };
        let plain = run_frames(&frames, &settings, None);
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let labeler = RowFilteringLsl {
            inner: markerscope::ccl::cpu::lsl::Lsl::new(),
            filter: Default::default(),
            filtered_runs: runs.clone(),
        };
        let filtered = run_frames(&frames, &settings, Some(Box::new(labeler)));
        assert_eq!(
            runs.load(std::sync::atomic::Ordering::Relaxed),
            frames.len(),
            "subpixel {subpixel}: every frame filtered by the labeler"
        );
        for (a, b) in plain.iter().zip(&filtered) {
            assert!(
                a.all_count > a.components.len() as u32,
                "the filter drops rows"
            );
            assert!(a
                .components
                .iter()
                .any(|c| c.label as usize > a.components.len()));
            assert_eq!(a.all_count, b.all_count);
            assert_eq!(a.components, b.components, "subpixel {subpixel}");
            assert_eq!(a.track_ids, b.track_ids);
            assert_eq!(a.subpixel, b.subpixel);
            assert_eq!(a.subpixel.is_empty(), !subpixel);
            let step = |r: &FrameResult| r.timings.steps[r.timings.steps.len() - 2].step.clone();
            assert_eq!(step(a), "filter");
            assert_eq!(step(b), markerscope::pipeline::FILTER_REST_STEP);
        }
    }
}

/// A frame's pixels "on the device" (host memory here), counting the copies made of them.
struct HeldPlane(Vec<u8>, Arc<std::sync::atomic::AtomicUsize>);

impl markerscope::frame::grey::DevicePlane for HeldPlane {
    fn download(&self, out: &mut [u8], _w: u32, _h: u32) -> std::result::Result<(), String> {
        self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        out.copy_from_slice(&self.0);
        Ok(())
    }
    unsafe fn queue_copy_to(
        &self,
        _: u64,
        _: u32,
        _: u32,
        _: *mut std::ffi::c_void,
    ) -> std::result::Result<(), String> {
        Err("not on a GPU".into())
    }
}

/// A source whose frames are on the device, as NVDEC's are, and what it was told of keeping them
/// there.
struct OnDevice {
    frames: Vec<GrayImage>,
    next: usize,
    copies: Arc<std::sync::atomic::AtomicUsize>,
    told: Arc<std::sync::Mutex<Vec<bool>>>,
}

impl FrameSource for OnDevice {
    fn describe(&self) -> String {
        "frames on the device".into()
    }
    fn is_live(&self) -> bool {
        false
    }
    fn next_frame(&mut self) -> Result<Option<Frame>> {
        let Some(grey) = self.frames.get(self.next) else {
            return Ok(None);
        };
        let index = self.next as u64;
        self.next += 1;
        let plane = HeldPlane(grey.data.clone(), Arc::clone(&self.copies));
        Ok(Some(Frame {
            index,
            time_s: index as f64,
            grey: FrameGrey::on_gpu(grey.width, grey.height, Box::new(plane)),
            captured_at: Instant::now(),
            decode_ms: 0.0,
            name: String::new(),
        }))
    }
    fn keep_frames_on_gpu(&mut self, keep: bool) {
        self.told.lock().unwrap().push(keep);
    }
}

/// Frames a hardware decoder leaves on the GPU, analysed where no GPU labeler reads them there
/// (the CPU backend): told not to stay on the device, each frame is copied to the host once, and
/// the results are those of the same frames on the host.
#[test]
fn frames_on_the_device_give_the_results_of_the_same_frames_on_the_host() {
    let frames = vec![squares(64, 48, 1), squares(64, 48, 3), squares(64, 48, 2)];
    let run = |source: Box<dyn FrameSource>| {
        let p = Pipeline::start(
            source,
            cpu_settings(),
            Delivery::Lossless,
            Arc::new(Backends::cpu_only()),
        )
        .unwrap();
        let results: Vec<_> = (0..3).map(|_| expect_frame(&p)).collect();
        p.stop();
        results
    };
    let copies = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let told = Arc::new(std::sync::Mutex::new(Vec::new()));
    let on_device = run(Box::new(OnDevice {
        frames: frames.clone(),
        next: 0,
        copies: Arc::clone(&copies),
        told: Arc::clone(&told),
    }));
    let on_host = run(Scripted::new(frames.into_iter().map(Ok).collect(), false));
    for (d, h) in on_device.iter().zip(&on_host) {
        assert_eq!(d.index, h.index);
        assert_eq!(d.components, h.components);
        assert_eq!(d.subpixel, h.subpixel);
        assert_eq!(*d.grey, *h.grey);
    }
    assert_eq!(copies.load(std::sync::atomic::Ordering::Relaxed), 3);
    assert_eq!(told.lock().unwrap().first(), Some(&false));
}

/// A source of `frames` that waits for `release` before its frame `stall_at` (a camera that
/// stops answering for a while).
struct Stalling {
    frames: Vec<GrayImage>,
    next: usize,
    stall_at: usize,
    release: crossbeam_channel::Receiver<()>,
}

impl FrameSource for Stalling {
    fn describe(&self) -> String {
        "stalling".into()
    }
    fn is_live(&self) -> bool {
        false
    }
    fn next_frame(&mut self) -> Result<Option<Frame>> {
        if self.next == self.stall_at {
            let _ = self.release.recv_timeout(Duration::from_secs(60));
        }
        let Some(grey) = self.frames.get(self.next) else {
            return Ok(None);
        };
        let index = self.next as u64;
        self.next += 1;
        Ok(Some(Frame {
            index,
            time_s: index as f64,
            grey: grey.clone().into(),
            captured_at: Instant::now(),
            decode_ms: 0.0,
            name: String::new(),
        }))
    }
}

/// Several sources on one worker (`Pipeline::start_set`): each gets the results, track IDs and
/// messages its own pipeline gives it, a source that stalls holds none of the others back (they
/// end while it waits), and one that fails part way stops alone.
#[test]
fn sources_sharing_one_worker_each_get_their_own_results_and_none_waits_for_another() {
    let a: Vec<GrayImage> = (1..=12).map(|n| squares(64, 48, n % 5 + 1)).collect();
    let b: Vec<GrayImage> = (1..=12).map(|n| squares(64, 48, 6 - n % 4)).collect();
    let c: Vec<GrayImage> = (1..=6).map(|n| squares(40, 30, n)).collect();
    let failing: Vec<std::result::Result<GrayImage, String>> = vec![
        Ok(squares(64, 48, 2)),
        Ok(squares(64, 48, 3)),
        Err("the camera is gone".into()),
    ];
    let alone = |source: Box<dyn FrameSource>| {
        let p = Pipeline::start(
            source,
            cpu_settings(),
            Delivery::Lossless,
            Arc::new(Backends::cpu_only()),
        )
        .unwrap();
        let events = events_to_the_end(&p);
        p.stop();
        events
    };
    let (release, released) = crossbeam_channel::bounded(1);
    let member = |source: Box<dyn FrameSource>| markerscope::pipeline::SetMember {
        source,
        settings: cpu_settings(),
        delivery: Delivery::Lossless,
        backends: Arc::new(Backends::cpu_only()),
    };
    let stalling = Box::new(Stalling {
        frames: c.clone(),
        next: 0,
        stall_at: 2,
        release: released,
    });
    let pipelines = Pipeline::start_set(
        vec![
            member(Scripted::new(a.iter().cloned().map(Ok).collect(), false)),
            member(Scripted::new(b.iter().cloned().map(Ok).collect(), false)),
            member(stalling),
            member(Scripted::new(failing.clone(), false)),
        ],
        markerscope::pipeline::EventPolicy::Lossless,
        Arc::new(Backends::cpu_only()),
    )
    .unwrap();
    // The others end while the third source waits.
    let together: Vec<Vec<PipelineEvent>> = [0, 1, 3]
        .iter()
        .map(|&k| events_to_the_end(&pipelines[k]))
        .collect();
    let mut early = Vec::new();
    while early.len() < 2 {
        if let PipelineEvent::Frame(r) = next_event(&pipelines[2]) {
            early.push(r);
        }
    }
    release.send(()).unwrap();
    let mut stalled = events_to_the_end(&pipelines[2]);
    stalled.splice(0..0, early.iter().cloned().map(PipelineEvent::Frame));
    let expected = [
        alone(Scripted::new(a.into_iter().map(Ok).collect(), false)),
        alone(Scripted::new(b.into_iter().map(Ok).collect(), false)),
        alone(Scripted::new(failing, false)),
    ];
    for (got, want) in together.iter().zip(&expected) {
        let (got_frames, want_frames) = (frames_of(got), frames_of(want));
        assert_eq!(got_frames.len(), want_frames.len());
        for (g, w) in got_frames.iter().zip(&want_frames) {
            assert_eq!(g.index, w.index);
            assert_eq!(g.components, w.components);
            assert_eq!(g.subpixel, w.subpixel);
            assert_eq!(g.track_ids, w.track_ids);
        }
        assert_eq!(
            format!("{:?}", got.last().unwrap()),
            format!("{:?}", want.last().unwrap())
        );
    }
    assert!(matches!(
        together[2].last(),
        Some(PipelineEvent::SourceError(why)) if why.contains("the camera is gone")
    ));
    let stalled_frames = frames_of(&stalled);
    let stalled_alone = frames_of(&alone(Box::new(Stalling {
        frames: c,
        next: 0,
        stall_at: usize::MAX,
        release: crossbeam_channel::never(),
    })));
    assert_eq!(stalled_frames.len(), 6);
    for (g, w) in stalled_frames.iter().zip(&stalled_alone) {
        assert_eq!(
            (g.index, &g.components, &g.track_ids),
            (w.index, &w.components, &w.track_ids)
        );
    }
    let mut pipelines = pipelines.into_iter();
    let first = pipelines.next().unwrap();
    for p in pipelines {
        p.begin_stop();
    }
    first.stop();
}
