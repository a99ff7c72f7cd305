//! Square fiducials through the product: `analyze --markers` (the real binary) on rendered
//! frames against their truth and OpenCV's detector, the marker tracks through occlusion, the
//! pose columns against `cv2.solvePnP(SOLVEPNP_IPPE_SQUARE)`, the JSONL fields and the errors
//! before the run.

use crate::fiducial::{opencv, scratch};
use crate::util::markerscope;
use markerscope::output::markers::MARKER_CSV_HEADER;
use markerscope::source::fiducial_scene::{FiducialOptions, FiducialScene, FiducialTruth};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Rows of a marker CSV, each as column name → text.
fn rows(path: &Path) -> Vec<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(MARKER_CSV_HEADER));
    let names: Vec<&str> = MARKER_CSV_HEADER.split(',').collect();
    lines
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            assert_eq!(cells.len(), names.len(), "{l}");
            names
                .iter()
                .zip(cells)
                .map(|(n, c)| (n.to_string(), c.to_string()))
                .collect()
        })
        .collect()
}

fn num(row: &BTreeMap<String, String>, key: &str) -> f64 {
    row[key]
        .parse()
        .unwrap_or_else(|_| panic!("{key} = '{}'", row[key]))
}

fn corners(row: &BTreeMap<String, String>) -> [[f64; 2]; 4] {
    std::array::from_fn(|k| {
        [
            num(row, &format!("corner{k}_x")),
            num(row, &format!("corner{k}_y")),
        ]
    })
}

/// Frames of the `synthetic:markers` scene saved as PNGs, with their truth.
fn rendered(dir: &Path, options: &str, frames: u64) -> (Vec<String>, Vec<Vec<FiducialTruth>>) {
    let scene = FiducialScene::new(FiducialOptions::parse(options).unwrap(), 960, 540).unwrap();
    let mut paths = Vec::new();
    let mut truth = Vec::new();
    for f in 0..frames {
        let grey = scene.render(f * 13);
        let path = dir.join(format!("f{f:03}.png"));
        image::GrayImage::from_raw(grey.width, grey.height, grey.data)
            .unwrap()
            .save(&path)
            .unwrap();
        paths.push(path.to_string_lossy().into_owned());
        truth.push(scene.truth(f * 13));
    }
    (paths, truth)
}

fn analyze(args: &[&str]) -> std::process::Output {
    let mut all = vec!["analyze", "--backend", "cpu"];
    all.extend(args);
    let out = markerscope(&all);
    assert!(
        out.status.success(),
        "analyze {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn analyze_finds_every_marker_at_its_corners_as_opencv_does() {
    let dir = scratch("analyze-markers");
    let (paths, truth) = rendered(&dir, "dict=DICT_4X4_50,count=12,size=40-90,seed=5", 6);
    let out_csv = dir.join("markers.csv");
    let out = analyze(&[
        dir.to_str().unwrap(),
        "--markers",
        "DICT_4X4_50",
        "--out",
        out_csv.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let rows = rows(&out_csv);
    let visible: usize = truth.iter().flatten().filter(|t| t.visible).count();
    assert!(
        stderr.contains(&format!("{visible} marker(s) found")),
        "{stderr}"
    );
    assert_eq!(rows.len(), visible);
    for (f, frame_truth) in truth.iter().enumerate() {
        for t in frame_truth.iter().filter(|t| t.visible) {
            let row = rows
                .iter()
                .find(|r| num(r, "frame") as usize == f && num(r, "marker_id") as u32 == t.id)
                .unwrap_or_else(|| panic!("frame {f}: marker {} missing", t.id));
            assert_eq!(row["dictionary"], "DICT_4X4_50");
            for (c, w) in corners(row).iter().zip(&t.corners) {
                let d = (c[0] - w[0]).hypot(c[1] - w[1]);
                assert!(d < 0.5, "frame {f} marker {}: {c:?} vs {w:?}", t.id);
            }
        }
    }
    let mut args = vec!["DICT_4X4_50"];
    args.extend(paths.iter().map(String::as_str));
    let Some(reference) = opencv("detect", &args) else {
        return;
    };
    for (f, frame) in reference["frames"].as_array().unwrap().iter().enumerate() {
        let theirs: BTreeSet<u64> = frame["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        let ours: BTreeSet<u64> = rows
            .iter()
            .filter(|r| num(r, "frame") as usize == f)
            .map(|r| num(r, "marker_id") as u64)
            .collect();
        assert!(
            theirs.is_subset(&ours),
            "frame {f}: OpenCV {theirs:?}, ours {ours:?}"
        );
        for (id, c) in frame["ids"]
            .as_array()
            .unwrap()
            .iter()
            .zip(frame["corners"].as_array().unwrap())
        {
            let row = rows
                .iter()
                .find(|r| {
                    num(r, "frame") as usize == f
                        && num(r, "marker_id") as u64 == id.as_u64().unwrap()
                })
                .unwrap();
            for (k, ours) in corners(row).iter().enumerate() {
                let d = (ours[0] - c[k][0].as_f64().unwrap())
                    .hypot(ours[1] - c[k][1].as_f64().unwrap());
                assert!(
                    d < 1.0,
                    "frame {f} marker {id} corner {k}: {d} px from OpenCV's"
                );
            }
        }
    }
}

#[test]
fn marker_tracks_are_their_identity_through_occlusion() {
    let dir = scratch("marker-tracks");
    let out_csv = dir.join("markers.csv");
    let tracks = dir.join("tracks.csv");
    analyze(&[
        "synthetic:markers:count=8,size=40-60,seed=2",
        "--size",
        "640x360",
        "--max-frames",
        "300",
        "--markers",
        "DICT_4X4_50",
        "--out",
        out_csv.to_str().unwrap(),
        "--tracks",
        tracks.to_str().unwrap(),
    ]);
    let rows = rows(&out_csv);
    let mut track_of: BTreeMap<u64, u64> = BTreeMap::new();
    let mut frames_of: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for r in &rows {
        let (id, track) = (num(r, "marker_id") as u64, num(r, "track") as u64);
        assert_eq!(*track_of.entry(id).or_insert(track), track, "marker {id}");
        frames_of
            .entry(id)
            .or_default()
            .push(num(r, "frame") as u64);
    }
    assert_eq!(track_of.len(), 8, "{track_of:?}");
    let distinct: BTreeSet<u64> = track_of.values().copied().collect();
    assert_eq!(distinct.len(), 8, "one track per marker");
    // Two markers hide for 20 frames of every 240: a gap in their frames, the same track after.
    let hidden = frames_of
        .values()
        .filter(|f| f.windows(2).any(|w| w[1] - w[0] > 10))
        .count();
    assert_eq!(hidden, 2, "{frames_of:?}");
    // The track summary has one row per marker track.
    let summary = std::fs::read_to_string(&tracks).unwrap();
    for track in &distinct {
        let row = summary
            .lines()
            .find(|l| l.starts_with(&format!("{track},")))
            .unwrap_or_else(|| panic!("track {track} not in the summary:\n{summary}"));
        let length: u64 = row.split(',').nth(3).unwrap().parse().unwrap();
        let id = track_of.iter().find(|(_, t)| *t == track).unwrap().0;
        assert_eq!(length, frames_of[id].len() as u64);
    }
}

/// A pinhole camera with distortion for the pose columns.
const CALIBRATION: &str = r#"{"camera_matrix": [[900, 0, 470], [0, 905, 262], [0, 0, 1]],
"distortion_coefficients": [-0.12, 0.05, 0.001, -0.0005, 0.01]}"#;

/// OpenCV's solvePnP (IPPE_SQUARE) on the corners of each row (their 32-bit values, as ours).
const SOLVE_PNP: &str = r#"
import json, sys
import numpy as np
import cv2
rows, length = json.loads(sys.stdin.read()), float(sys.argv[1])
K = np.array([[900, 0, 470], [0, 905, 262], [0, 0, 1]], dtype=np.float64)
dist = np.array([-0.12, 0.05, 0.001, -0.0005, 0.01])
h = length / 2
obj = np.array([[-h, h, 0], [h, h, 0], [h, -h, 0], [-h, -h, 0]], dtype=np.float64)
out = []
for c in rows:
    img = np.array(c, dtype=np.float32).astype(np.float64).reshape(4, 2)
    ok, r, t = cv2.solvePnP(obj, img, K, dist, flags=cv2.SOLVEPNP_IPPE_SQUARE)
    out.append(r.flatten().tolist() + t.flatten().tolist())
print(json.dumps(out))
"#;

#[test]
fn pose_columns_equal_opencvs_solvepnp() {
    let dir = scratch("marker-pose");
    rendered(
        &dir,
        "dict=DICT_APRILTAG_36h11,count=6,size=60-120,seed=8",
        3,
    );
    let calibration = dir.join("cam.json");
    std::fs::write(&calibration, CALIBRATION).unwrap();
    let out_csv = dir.join("pose.csv");
    analyze(&[
        dir.join("*.png").to_str().unwrap(),
        "--markers",
        "DICT_APRILTAG_36h11",
        "--marker-length",
        "0.08",
        "--calibration",
        calibration.to_str().unwrap(),
        "--out",
        out_csv.to_str().unwrap(),
    ]);
    let rows = rows(&out_csv);
    assert!(rows.len() >= 15, "{} rows", rows.len());
    let pose_keys = ["rvec_x", "rvec_y", "rvec_z", "tvec_x", "tvec_y", "tvec_z"];
    for r in &rows {
        assert!(pose_keys.iter().all(|k| !r[*k].is_empty()), "{r:?}");
        assert!(r["x_world"].is_empty(), "no world mapping: {r:?}");
        assert!(num(r, "tvec_z") > 0.0, "in front of the camera: {r:?}");
    }
    let input: Vec<Vec<[f64; 2]>> = rows.iter().map(|r| corners(r).to_vec()).collect();
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    if opencv("dictionaries", &["DICT_4X4_50"]).is_none() {
        return;
    }
    let mut child = std::process::Command::new(&python)
        .args(["-c", SOLVE_PNP, "0.08"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(&input).unwrap().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let reference: Vec<Vec<f64>> = serde_json::from_slice(&out.stdout).unwrap();
    for (r, want) in rows.iter().zip(&reference) {
        for (k, key) in pose_keys.iter().enumerate() {
            let d = (num(r, key) - want[k]).abs();
            assert!(d < 1e-6, "{key}: ours {} OpenCV {}", r[*key], want[k]);
        }
    }
}

#[test]
fn jsonl_rows_carry_the_csv_fields_in_order() {
    let dir = scratch("marker-jsonl");
    let out = dir.join("m.jsonl");
    analyze(&[
        "synthetic:markers:count=4,size=40-60",
        "--size",
        "480x270",
        "--max-frames",
        "3",
        "--markers",
        "DICT_4X4_50",
        "--out",
        out.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 9, "{text}");
    for line in lines {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 27, "{line}");
        let mut at = 0;
        for key in MARKER_CSV_HEADER.split(',') {
            at += line[at..]
                .find(&format!("\"{key}\":"))
                .unwrap_or_else(|| panic!("{key} missing or out of order: {line}"));
        }
        assert!(v["rvec_x"].is_null() && v["y_world"].is_null());
        assert_eq!(v["dictionary"], "DICT_4X4_50");
    }
}

#[test]
fn bad_marker_requests_fail_before_the_run() {
    let dir = scratch("marker-errors");
    let out = dir.join("never.csv");
    let damaged = dir.join("damaged.yml");
    std::fs::write(&damaged, "%YAML:1.0\nmarkersize: 4\nmarker_0: \"0101\"\n").unwrap();
    let calibration = dir.join("cam.json");
    std::fs::write(&calibration, CALIBRATION).unwrap();
    let damaged = damaged.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--markers", "DICT_4X4_51"],
            "unknown marker dictionary 'DICT_4X4_51'",
        ),
        (vec!["--markers", "DICT_4X4_51"], "DICT_APRILTAG_36h11"),
        (
            vec!["--markers", "DICT_4X4_50", "--marker-length", "0.05"],
            "--calibration",
        ),
        (
            vec![
                "--marker-length",
                "0.05",
                "--calibration",
                calibration.to_str().unwrap(),
            ],
            "--marker-length needs --markers",
        ),
        (vec!["--markers", damaged], "marker dictionary file"),
        (
            vec![
                "--markers",
                "DICT_4X4_50",
                "--marker-length",
                "0",
                "--calibration",
                calibration.to_str().unwrap(),
            ],
            "positive length",
        ),
        (vec!["--markers", ","], "give a dictionary"),
    ];
    for (flags, want) in cases {
        let mut args = vec![
            "analyze",
            "synthetic:markers",
            "--max-frames",
            "2",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend(&flags);
        let run = markerscope(&args);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(!run.status.success(), "{flags:?} succeeded");
        assert!(stderr.contains(want), "{flags:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(!out.exists(), "{flags:?} wrote {}", out.display());
    }
    let bad_source = markerscope(&["analyze", "synthetic:markers:count=99", "--max-frames", "1"]);
    let stderr = String::from_utf8_lossy(&bad_source.stderr);
    assert!(stderr.contains("count 99: give 1 to 50"), "{stderr}");
}
