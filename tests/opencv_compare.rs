//! markerscope against OpenCV, bit for bit: threshold masks (fixed, Otsu, adaptive, inverted) and
//! `markerscope analyze --backend cpu` tables against `cv2.connectedComponentsWithStats`.
//!
//! `tests/opencv_reference.py` writes the images and OpenCV's results once per test run. It needs
//! python3 with numpy and opencv-python-headless: `bash .ci/install` installs them. Without them
//! these tests fail (they never skip silently).

use crate::util::{markerscope_command, repo};
use markerscope::frame::image::GrayImage;
use markerscope::frame::random_image::{generate, RandomImageSpec};
use markerscope::threshold;
use markerscope::threshold::spec::ThresholdSpec;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

static REFERENCE: OnceLock<PathBuf> = OnceLock::new();

/// The folder with OpenCV's reference data, generated on first use.
fn reference() -> &'static Path {
    REFERENCE.get_or_init(|| {
        let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
        let check = Command::new(&python)
            .args(["-c", "import numpy, cv2"])
            .output();
        match check {
            Ok(o) if o.status.success() => {}
            Ok(o) => panic!(
                "{python} cannot import numpy and cv2 ({}): run `bash .ci/install` to install \
                 numpy and opencv-python-headless",
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            Err(e) => panic!("cannot run {python} ({e}): run `bash .ci/install` to install python3, numpy and OpenCV"),
        }
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("opencv-reference");
        let _ = std::fs::remove_dir_all(&dir);
        let script = repo().join("tests/opencv_reference.py");
        let out = Command::new(&python)
            .arg(&script)
            .arg(&dir)
            .output()
            .expect("running tests/opencv_reference.py");
        assert!(
            out.status.success(),
            "tests/opencv_reference.py failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        dir
    })
}

fn manifest() -> Value {
    let text = std::fs::read_to_string(reference().join("manifest.json")).expect("manifest.json");
    serde_json::from_str(&text).expect("valid manifest")
}

fn load_mask(path: &Path) -> Vec<u8> {
    let img = GrayImage::load(path).unwrap_or_else(|e| panic!("{e}"));
    img.data.iter().map(|&v| (v != 0) as u8).collect()
}

#[test]
fn threshold_masks_match_opencv_exactly() {
    let root = reference();
    let m = manifest();
    let masks = m["masks"].as_array().expect("masks");
    assert!(masks.len() > 100, "too few masks: {}", masks.len());
    let mut failures = Vec::new();
    let mut kinds = std::collections::BTreeSet::new();
    for entry in masks {
        let image = entry["image"].as_str().unwrap();
        let spec_text = entry["spec"].as_str().unwrap();
        let invert = entry["invert"].as_bool().unwrap();
        let grey = GrayImage::load(&root.join(image)).unwrap();
        let spec: ThresholdSpec = spec_text.parse().unwrap();
        kinds.insert(
            spec_text.split(':').next().unwrap().to_string() + if invert { "+invert" } else { "" },
        );
        let got = threshold::apply(&grey, &spec, invert).unwrap();
        let want = load_mask(&root.join("masks").join(entry["mask"].as_str().unwrap()));
        let differing = got.data.iter().zip(&want).filter(|(a, b)| a != b).count();
        if differing > 0 {
            let first = got
                .data
                .iter()
                .zip(&want)
                .position(|(a, b)| a != b)
                .unwrap();
            failures.push(format!(
                "{image} {spec_text} invert={invert}: {differing} pixels differ, first at x={} y={}",
                first % grey.width as usize,
                first / grey.width as usize
            ));
        }
    }
    for k in [
        "fixed",
        "otsu",
        "adaptive",
        "fixed+invert",
        "otsu+invert",
        "adaptive+invert",
    ] {
        assert!(kinds.contains(k), "no {k} masks in the reference data");
    }
    assert!(
        failures.is_empty(),
        "{} mask(s) differ from OpenCV:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn otsu_threshold_values_match_opencv() {
    // THRESH_OTSU's value shows in the mask: pixels > t are set. Check it directly too, from the
    // images whose mask OpenCV computed: the smallest set grey value must exceed our threshold and
    // the largest unset one must not.
    let root = reference();
    for entry in manifest()["masks"].as_array().unwrap() {
        if entry["spec"] != "otsu" || entry["invert"].as_bool().unwrap() {
            continue;
        }
        let grey = GrayImage::load(&root.join(entry["image"].as_str().unwrap())).unwrap();
        let mask = load_mask(&root.join("masks").join(entry["mask"].as_str().unwrap()));
        let t = threshold::levels::otsu_threshold(&grey);
        for (&g, &m) in grey.data.iter().zip(&mask) {
            assert_eq!(
                m == 1,
                g > t,
                "{}: grey {g} vs Otsu threshold {t}",
                entry["image"]
            );
        }
    }
}

#[test]
fn papers_random_images_match_the_python_generator() {
    let root = reference();
    let m = manifest();
    let specs = m["random"].as_array().unwrap();
    assert!(!specs.is_empty());
    for s in specs {
        let spec = RandomImageSpec {
            width: s["width"].as_u64().unwrap() as u32,
            height: s["height"].as_u64().unwrap() as u32,
            density: s["density"].as_f64().unwrap(),
            granularity: s["granularity"].as_u64().unwrap() as u32,
            seed: s["seed"].as_u64().unwrap() as u32,
        };
        let ours = generate(&spec).unwrap();
        let theirs = load_mask(&root.join("images").join(s["image"].as_str().unwrap()));
        assert_eq!(ours.data, theirs, "{}", s["image"]);
    }
}

/// One component row: integers exactly, then the centroid.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    ints: [u64; 7], // frame, label, left, top, width, height, area
    centroid: [f64; 2],
}

fn parse_csv(text: &str, what: &str) -> Vec<Row> {
    let mut lines = text.lines();
    let header = lines
        .next()
        .unwrap_or_else(|| panic!("{what}: empty output"));
    assert!(
        header.starts_with("frame,label,left,top,width,height,area,centroid_x,centroid_y"),
        "{what}: header {header}"
    );
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let int = |i: usize| {
                f[i].parse::<u64>()
                    .unwrap_or_else(|_| panic!("{what}: bad row {l}"))
            };
            let float = |i: usize| {
                f[i].parse::<f64>()
                    .unwrap_or_else(|_| panic!("{what}: bad row {l}"))
            };
            Row {
                ints: [int(0), int(1), int(2), int(3), int(4), int(5), int(6)],
                centroid: [float(7), float(8)],
            }
        })
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(1.0)
}

/// Row-by-row comparison; on mismatch names the frame's image.
fn compare_rows(expected: &[Row], got: &[Row], images: &[Value], what: &str) {
    let image = |r: &Row| images[r.ints[0] as usize].as_str().unwrap().to_string();
    for (e, g) in expected.iter().zip(got) {
        let same = e.ints == g.ints
            && close(e.centroid[0], g.centroid[0])
            && close(e.centroid[1], g.centroid[1]);
        assert!(
            same,
            "{what}, image {}:\n  OpenCV      {e:?}\n  markerscope {g:?}",
            image(e)
        );
    }
    assert_eq!(
        expected.len(),
        got.len(),
        "{what}: row count (OpenCV vs markerscope)"
    );
}

fn analyze(args: &[&str]) -> String {
    let out = markerscope_command(&["analyze"])
        .args(args)
        .output()
        .expect("running markerscope");
    assert!(
        out.status.success(),
        "markerscope analyze {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

#[test]
fn analyze_matches_opencv_connected_components() {
    let root = reference();
    let m = manifest();
    let images = m["images"].as_array().unwrap();
    let folder = root.join("images");
    let expected = m["expected"].as_array().unwrap();
    assert_eq!(expected.len(), 8);
    for e in expected {
        let conn = e["connectivity"].as_u64().unwrap().to_string();
        let thresh = e["threshold"].as_str().unwrap();
        let what = format!("--connectivity {conn} --threshold {thresh}");
        let text = analyze(&[
            folder.to_str().unwrap(),
            "--backend",
            "cpu",
            "--connectivity",
            &conn,
            "--threshold",
            thresh,
        ]);
        let got = parse_csv(&text, &what);
        let want_text = std::fs::read_to_string(root.join(e["csv"].as_str().unwrap())).unwrap();
        let want = parse_csv(&want_text, "OpenCV reference");
        assert!(
            want.len() > 1000,
            "{what}: the reference has only {} rows",
            want.len()
        );
        if e["opencv_numbering"].as_bool().unwrap() {
            // OpenCV's default 8-connectivity algorithm (Spaghetti) numbers components in 2×2
            // block order, not by first pixel: same components, other numbers. Compare the
            // tables with the label column dropped, sorted.
            let key = |r: &Row| {
                let mut k = r.clone();
                k.ints[1] = 0;
                k
            };
            let sort = |rows: &[Row]| {
                let mut v: Vec<Row> = rows.iter().map(key).collect();
                v.sort_by(|a, b| {
                    a.ints
                        .cmp(&b.ints)
                        .then(a.centroid[0].total_cmp(&b.centroid[0]))
                });
                v
            };
            compare_rows(
                &sort(&want),
                &sort(&got),
                images,
                &format!("{what} (OpenCV default numbering)"),
            );
        } else {
            compare_rows(&want, &got, images, &what);
        }
    }
}

#[test]
fn jsonl_output_has_the_same_rows_as_csv() {
    let root = reference();
    let folder = root.join("images");
    let common = [
        folder.to_str().unwrap(),
        "--backend",
        "cpu",
        "--threshold",
        "fixed:127",
    ];
    let csv = parse_csv(&analyze(&common), "csv");
    let jsonl = analyze(&[&common[..], &["--format", "jsonl"]].concat());
    let rows: Vec<Row> = jsonl
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("one JSON object per line");
            let i = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("field {k} in {l}"));
            let f = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("field {k} in {l}"));
            Row {
                ints: [
                    i("frame"),
                    i("label"),
                    i("left"),
                    i("top"),
                    i("width"),
                    i("height"),
                    i("area"),
                ],
                centroid: [f("centroid_x"), f("centroid_y")],
            }
        })
        .collect();
    assert_eq!(rows, csv, "JSONL and CSV differ");
}

static SHAPE_REFERENCE: OnceLock<PathBuf> = OnceLock::new();

/// `tests/shape_reference.py`'s output folder: binary images and, per component, OpenCV's
/// `cv2.moments` and scikit-image's `regionprops` (generated once per run: the tests that read
/// it run in parallel).
fn shape_reference() -> PathBuf {
    SHAPE_REFERENCE.get_or_init(make_shape_reference).clone()
}

fn make_shape_reference() -> PathBuf {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("shape-reference");
    let _ = std::fs::remove_dir_all(&dir);
    let script = repo().join("tests/shape_reference.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(&dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python} ({e}): run `bash .ci/install`"));
    assert!(
        out.status.success(),
        "tests/shape_reference.py failed (it needs numpy, opencv-python-headless and \
         scikit-image: run `bash .ci/install`):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

/// Moments equal OpenCV's (1e-9 relative), the ellipse and the perimeter equal scikit-image's
/// regionprops (`perimeter_crofton`; 1e-9; orientation converted from its row-axis angle: ours =
/// 90° − theirs).
#[test]
fn shape_descriptors_match_opencv_moments_and_skimage_regionprops() {
    use markerscope::ccl::cpu::lsl::Lsl;
    use markerscope::ccl::descriptors::describe_of;
    use markerscope::ccl::{keep_all, Connectivity, Labeler, Want};
    let root = shape_reference();
    let text = std::fs::read_to_string(root.join("shapes.json")).expect("shapes.json");
    let cases: Value = serde_json::from_str(&text).expect("valid shapes.json");
    let cases = cases.as_array().expect("a list");
    assert!(cases.len() >= 20, "too few cases: {}", cases.len());
    let mut compared = 0;
    for case in cases {
        let image = case["image"].as_str().unwrap();
        let conn = case["connectivity"].as_u64().unwrap();
        let connectivity = Connectivity::from_number(conn as u8).unwrap();
        let grey = GrayImage::load(&root.join(image)).unwrap();
        let mask = threshold::apply(&grey, &ThresholdSpec::Fixed(127), false).unwrap();
        let out = Lsl::new().label(&mask, connectivity, Want::Both).unwrap();
        let (labels, stats) = (out.labels.unwrap(), out.stats.unwrap());
        let got = describe_of(&labels, &stats, &keep_all).unwrap();
        let rows = case["rows"].as_array().unwrap();
        assert_eq!(rows.len(), stats.len(), "{image} {conn}: component count");
        for ((r, s), d) in rows.iter().zip(&stats).zip(&got) {
            let what = format!("{image}, {conn}-connectivity, component {}", s.label);
            let i = |k: &str| r[k].as_u64().unwrap();
            assert_eq!(
                (i("left"), i("top"), i("width"), i("height"), i("area")),
                (
                    s.left as u64,
                    s.top as u64,
                    s.width as u64,
                    s.height as u64,
                    s.area
                ),
                "{what}: box"
            );
            let f = |k: &str| r[k].as_f64().unwrap();
            let near = |a: f64, b: f64, scale: f64| (a - b).abs() <= 1e-9 * scale.max(1.0);
            let size = f("mu20").abs() + f("mu02").abs();
            for (k, v) in [("mu20", d.mu20), ("mu02", d.mu02), ("mu11", d.mu11)] {
                assert!(near(v, f(k), size), "{what}: {k} {v} vs OpenCV {}", f(k));
            }
            // √ of a near-zero eigenvalue (a line's minor axis) magnifies rounding: 1e-6 there.
            for (k, v, tolerance) in [
                ("major", d.major_axis, 1e-9),
                ("minor", d.minor_axis, 1e-6),
                ("eccentricity", d.eccentricity, 1e-9),
                ("perimeter", d.perimeter, 1e-9),
            ] {
                assert!(
                    (v - f(k)).abs() <= tolerance * f(k).abs().max(1.0),
                    "{what}: {k} {v} vs regionprops {}",
                    f(k)
                );
            }
            // Orientations are defined modulo 180°; undefined for round shapes.
            if d.eccentricity > 0.01 {
                let theirs = 90.0 - f("orientation").to_degrees();
                let diff = (d.orientation_deg - theirs).rem_euclid(180.0);
                assert!(
                    diff.min(180.0 - diff) < 1e-6,
                    "{what}: orientation {} vs regionprops {theirs}",
                    d.orientation_deg
                );
            }
            compared += 1;
        }
    }
    assert!(compared > 500, "only {compared} components compared");
}

/// The calibration file cv2.FileStorage wrote reads back; undistorted points equal
/// cv2.undistortPoints (to 1e-6 px), and the least-squares homography maps like
/// cv2.findHomography (method 0) on 30 points with 0.01 units of noise to 1e-3 world units:
/// OpenCV refines the normalised DLT by Levenberg–Marquardt on the distances, this minimises
/// the DLT's algebraic error, and with noise the two optima differ a little (exact points:
/// the same homography, `geometry::homography` tests).
#[test]
fn world_mapping_matches_opencv_undistort_points_and_find_homography() {
    use markerscope::geometry::calibration::Calibration;
    use markerscope::geometry::homography::Homography;
    use markerscope::geometry::{ReferencePoint, WorldMapping};
    let root = shape_reference();
    let calibration = Calibration::load(&root.join("calibration.yaml")).unwrap();
    assert_eq!((calibration.fx, calibration.fy), (812.5, 805.0));
    let text = std::fs::read_to_string(root.join("world.json")).expect("world.json");
    let v: Value = serde_json::from_str(&text).unwrap();
    let points = |k: &str| -> Vec<[f64; 2]> {
        v[k].as_array()
            .unwrap()
            .iter()
            .map(|p| [p[0].as_f64().unwrap(), p[1].as_f64().unwrap()])
            .collect()
    };
    let (image, undistorted, world) = (points("image"), points("undistorted"), points("world"));
    for (p, want) in image.iter().zip(&undistorted) {
        let got = calibration.undistort(p[0], p[1]);
        assert!(
            (got[0] - want[0]).abs() < 1e-6 && (got[1] - want[1]).abs() < 1e-6,
            "undistort {p:?}: {got:?} vs OpenCV {want:?}"
        );
    }
    let h = Homography::fit(&undistorted, &world).unwrap();
    let cv: Vec<Vec<f64>> = v["homography"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect()
        })
        .collect();
    let cv_apply = |x: f64, y: f64| {
        let w = cv[2][0] * x + cv[2][1] * y + cv[2][2];
        [
            (cv[0][0] * x + cv[0][1] * y + cv[0][2]) / w,
            (cv[1][0] * x + cv[1][1] * y + cv[1][2]) / w,
        ]
    };
    for p in &undistorted {
        let (ours, theirs) = (h.apply(p[0], p[1]).unwrap(), cv_apply(p[0], p[1]));
        assert!(
            (ours[0] - theirs[0]).abs() < 1e-3 && (ours[1] - theirs[1]).abs() < 1e-3,
            "{p:?}: {ours:?} vs cv2.findHomography {theirs:?}"
        );
    }
    // The whole mapping from the observed (distorted) pixels.
    let refs: Vec<ReferencePoint> = image
        .iter()
        .zip(&world)
        .map(|(i, w)| ReferencePoint {
            image: *i,
            world: *w,
        })
        .collect();
    let mapping = WorldMapping::new(refs, Some(calibration), "mm").unwrap();
    for (i, u) in image.iter().zip(&undistorted) {
        let (ours, theirs) = (mapping.to_world(i[0], i[1]), cv_apply(u[0], u[1]));
        assert!(
            (ours[0] - theirs[0]).abs() < 1e-3 && (ours[1] - theirs[1]).abs() < 1e-3,
            "{i:?}: {ours:?} vs OpenCV {theirs:?}"
        );
    }
}
