//! Square fiducials against OpenCV 5's `cv2.aruco` and `cv2.solvePnP`: the dictionary tables,
//! marker images bit for bit, the IPPE pose within 1e-6, and detection on rendered frames (rate,
//! no false IDs, corner error against the rendered truth).
//!
//! OpenCV runs in python3 (`REFERENCE` below, one mode per check). Without python3, numpy or
//! cv2 a test prints a notice and skips its OpenCV part.

use markerscope::ccl::cpu::lsl::Lsl;
use markerscope::ccl::{Connectivity, Labeler, Want};
use markerscope::fiducial::candidates::QuadFinder;
use markerscope::fiducial::dictionary::{predefined_names, Dictionary};
use markerscope::fiducial::render::{render_scene, RenderedMarker, Scene, SceneSpec};
use markerscope::fiducial::{detect, estimate_pose, generate_marker, Detector, DetectorParams};
use markerscope::frame::image::{BinaryImage, GrayImage};
use markerscope::geometry::calibration::Calibration;
use markerscope::threshold::binarize::{Binarizer, Outputs};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// OpenCV's side of each check: `python3 -c REFERENCE MODE ARGS...` prints one JSON document.
const REFERENCE: &str = r#"
import json, sys, time
import numpy as np
import cv2

A = cv2.aruco
mode = sys.argv[1]

def dictionary(name):
    return A.getPredefinedDictionary(getattr(A, name))

def photographs():
    # scikit-image's sample photographs, grey, as (name, image); none without skimage.
    try:
        from skimage import data
    except ImportError:
        return
    for n in ["astronaut", "camera", "coffee", "chelsea", "rocket", "coins", "page", "text",
              "moon", "brick", "grass", "gravel", "immunohistochemistry", "hubble_deep_field"]:
        try:
            img = getattr(data, n)()
        except Exception:
            continue
        if img.ndim == 3:
            img = cv2.cvtColor(img[..., :3], cv2.COLOR_RGB2GRAY)
        yield n, img

if mode == "dictionaries":
    out = {}
    for name in sys.argv[2:]:
        d = dictionary(name)
        out[name] = {
            "marker_size": int(d.markerSize),
            "max_correction_bits": int(d.maxCorrectionBits),
            "bytes": [d.bytesList[i].tobytes().hex() for i in range(d.bytesList.shape[0])],
        }
    print(json.dumps(out))
elif mode == "markers":
    folder = sys.argv[2]
    out = []
    k = 0
    for name, ident in [("DICT_4X4_50", 0), ("DICT_4X4_50", 49), ("DICT_5X5_100", 7),
                        ("DICT_6X6_250", 123), ("DICT_7X7_1000", 999), ("DICT_ARUCO_ORIGINAL", 1023),
                        ("DICT_APRILTAG_16h5", 29), ("DICT_APRILTAG_36h11", 586),
                        ("DICT_ARUCO_MIP_36h12", 3)]:
        d = dictionary(name)
        for size in [d.markerSize + 2, 37, 50, 61, 100, 157, 200, 333]:
            for border in [1, 2]:
                if size < d.markerSize + 2 * border:
                    continue
                img = A.generateImageMarker(d, ident, size, borderBits=border)
                path = f"{folder}/m{k}.png"
                k += 1
                cv2.imwrite(path, img)
                out.append({"dict": name, "id": ident, "size": size, "border": border, "file": path})
    print(json.dumps(out))
elif mode == "pose":
    rng = np.random.default_rng(7)
    out = []
    for case in range(200):
        f = rng.uniform(400, 1500)
        K = np.array([[f, 0, rng.uniform(300, 700)], [0, f * rng.uniform(0.95, 1.05), rng.uniform(200, 500)], [0, 0, 1]])
        if case % 2:
            dist = np.array([rng.uniform(-0.3, 0.1), rng.uniform(-0.1, 0.1), rng.uniform(-2e-3, 2e-3),
                             rng.uniform(-2e-3, 2e-3), rng.uniform(-0.02, 0.02)])
        else:
            dist = np.zeros(5)
        L = rng.uniform(0.02, 0.3)
        h = L / 2
        obj = np.array([[-h, h, 0], [h, h, 0], [h, -h, 0], [-h, -h, 0]], dtype=np.float64)
        # A marker in front of the camera, facing it within 60 degrees, noisy corners.
        axis = rng.normal(size=3); axis /= np.linalg.norm(axis)
        tilt = cv2.Rodrigues(axis * rng.uniform(0, 1.0))[0]
        flip = cv2.Rodrigues(np.array([np.pi, 0, 0]))[0]
        spin = cv2.Rodrigues(np.array([0, 0, rng.uniform(-np.pi, np.pi)]))[0]
        R = tilt @ flip @ spin
        t = np.array([rng.uniform(-0.3, 0.3), rng.uniform(-0.2, 0.2), rng.uniform(0.5, 3.0)]) * L * 5
        img, _ = cv2.projectPoints(obj, cv2.Rodrigues(R)[0], t, K, dist)
        img = img.reshape(4, 2) + rng.normal(scale=0.3, size=(4, 2))
        ok, rvec, tvec = cv2.solvePnP(obj, img, K, dist, flags=cv2.SOLVEPNP_IPPE_SQUARE)
        if not ok:
            continue
        out.append({"K": K.flatten().tolist(), "dist": dist.tolist(), "length": L,
                    "corners": img.tolist(), "rvec": rvec.flatten().tolist(), "tvec": tvec.flatten().tolist()})
    print(json.dumps(out))
elif mode == "detect":
    # detect DICT FRAME...: OpenCV's detector with sub-pixel corner refinement on each frame.
    params = A.DetectorParameters()
    params.cornerRefinementMethod = A.CORNER_REFINE_SUBPIX
    detector = A.ArucoDetector(dictionary(sys.argv[2]), params)
    out = {"frames": [], "seconds": 0.0}
    for path in sys.argv[3:]:
        grey = cv2.imread(path, cv2.IMREAD_GRAYSCALE)
        start = time.perf_counter()
        corners, ids, rejected = detector.detectMarkers(grey)
        out["seconds"] += time.perf_counter() - start
        ids = [] if ids is None else ids.flatten().tolist()
        out["frames"].append({"ids": ids, "corners": [c.reshape(4, 2).tolist() for c in corners]})
    print(json.dumps(out))
elif mode == "photos":
    # photos FOLDER: scikit-image's sample photographs as grey PNGs (none without skimage).
    names = []
    for n, img in photographs():
        path = f"{sys.argv[2]}/{n}.png"
        cv2.imwrite(path, img)
        names.append(path)
    print(json.dumps(names))
elif mode == "pasted":
    # pasted FOLDER DICT: scikit-image's photographs (1280x720) with 6 markers of DICT pasted
    # under perspective, all under uneven light, blurred and noisy; the frames and their truth
    # (none without skimage).
    folder, name = sys.argv[2], sys.argv[3]
    d = dictionary(name)
    cells = d.markerSize + 2
    out = []
    w, h = 1280, 720
    ys, xs = np.indices((h, w))
    for k, (n, img) in enumerate(photographs()):
        rng = np.random.default_rng(300 + k)
        frame = cv2.resize(img, (w, h), interpolation=cv2.INTER_CUBIC).astype(np.float64)
        truth = []
        for j in range(6):
            ident = int(rng.integers(0, d.bytesList.shape[0]))
            side = rng.uniform(22, 100)
            cx = (j % 3 + 0.5) * w / 3 + rng.uniform(-60, 60)
            cy = (j // 3 + 0.5) * h / 2 + rng.uniform(-50, 50)
            px = cells * int(np.ceil(side / cells))
            marker = A.generateImageMarker(d, ident, px).astype(np.float64) / 255 * 210 + 25
            q = px // cells
            # One cell of white paper around the marker.
            paper = np.full((px + 2 * q, px + 2 * q), 235.0)
            paper[q:q + px, q:q + px] = marker
            angle = rng.uniform(0, 2 * np.pi)
            rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
            square = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]], np.float64) * side / 2
            corners = square @ rot.T + [cx, cy] + rng.uniform(-0.06, 0.06, (4, 2)) * side
            # Pixel centres at whole coordinates: the marker's outer edges lie half a pixel
            # outside its first and last pixels.
            e0, e1 = q - 0.5, q + px - 0.5
            src = np.array([[e0, e0], [e1, e0], [e1, e1], [e0, e1]], np.float32)
            hom = cv2.getPerspectiveTransform(src, corners.astype(np.float32))
            warped = cv2.warpPerspective(paper, hom, (w, h), flags=cv2.INTER_LINEAR)
            inside = cv2.warpPerspective(np.ones_like(paper), hom, (w, h), flags=cv2.INTER_LINEAR)
            frame = frame * (1 - inside) + warped * inside
            truth.append({"id": ident, "corners": corners.tolist()})
        # Uneven light over photograph and markers alike: a gradient and a bright spot.
        gx, gy = rng.uniform(0.3, 0.6), rng.uniform(-0.3, 0.3)
        sx, sy = rng.uniform(0.2, 0.8) * w, rng.uniform(0.2, 0.8) * h
        light = 0.25 + gx * xs / w + gy * ys / h + 0.4 * np.exp(-((xs - sx) ** 2 + (ys - sy) ** 2) / (2 * (0.25 * w) ** 2))
        frame = frame * np.clip(light, 0.2, 1.2)
        frame = cv2.GaussianBlur(frame, (0, 0), 0.8) + rng.normal(0, 3, frame.shape)
        path = f"{folder}/{n}-{name}.png"
        cv2.imwrite(path, np.clip(frame + 0.5, 0, 255).astype(np.uint8))
        out.append({"file": path, "markers": truth})
    print(json.dumps(out))
"#;

/// OpenCV's result for `mode`, or None (with a notice) where python3 or cv2 is missing.
pub(crate) fn opencv(mode: &str, args: &[&str]) -> Option<Value> {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let check = Command::new(&python)
        .args(["-c", "import numpy, cv2; cv2.aruco.ArucoDetector"])
        .output();
    if !check.as_ref().is_ok_and(|o| o.status.success()) {
        eprintln!(
            "notice: skipping the comparison with OpenCV ({mode}): {python} cannot import numpy \
             and cv2 with cv2.aruco (install opencv-python-headless)"
        );
        return None;
    }
    let out = Command::new(&python)
        .args(["-c", REFERENCE, mode])
        .args(args)
        .output()
        .expect("running python3");
    assert!(
        out.status.success(),
        "OpenCV reference ({mode}) failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).expect("the reference prints JSON"))
}

pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("fiducial")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    dir
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn embedded_dictionaries_equal_opencvs_tables() {
    let names: Vec<&str> = predefined_names().collect();
    assert_eq!(names.len(), 22);
    let Some(reference) = opencv("dictionaries", &names) else {
        return;
    };
    for name in names {
        let d = Dictionary::predefined(name).unwrap();
        let r = &reference[name];
        assert_eq!(
            d.marker_size() as u64,
            r["marker_size"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            d.max_correction_bits() as u64,
            r["max_correction_bits"].as_u64().unwrap(),
            "{name}"
        );
        let bytes = r["bytes"].as_array().unwrap();
        assert_eq!(d.len(), bytes.len(), "{name}");
        for (id, want) in bytes.iter().enumerate() {
            let got = hex(&d.opencv_bytes(id as u32).unwrap());
            assert_eq!(got, want.as_str().unwrap(), "{name} marker {id}");
        }
    }
}

#[test]
fn marker_images_equal_opencvs_bit_for_bit() {
    let dir = scratch("markers");
    let Some(reference) = opencv("markers", &[dir.to_str().unwrap()]) else {
        return;
    };
    let cases = reference.as_array().unwrap();
    assert!(cases.len() > 100, "{}", cases.len());
    for case in cases {
        let d = Dictionary::predefined(case["dict"].as_str().unwrap()).unwrap();
        let (id, size, border) = (
            case["id"].as_u64().unwrap() as u32,
            case["size"].as_u64().unwrap() as u32,
            case["border"].as_u64().unwrap() as u32,
        );
        let want = GrayImage::load(Path::new(case["file"].as_str().unwrap())).unwrap();
        let got = generate_marker(&d, id, size, border).unwrap();
        assert_eq!(
            got.data,
            want.data,
            "{} id {id} size {size} border {border}",
            d.name()
        );
    }
}

#[test]
fn pose_equals_opencvs_ippe_square() {
    let Some(reference) = opencv("pose", &[]) else {
        return;
    };
    let cases = reference.as_array().unwrap();
    assert!(cases.len() > 150, "{}", cases.len());
    let mut worst = 0.0f64;
    for (k, case) in cases.iter().enumerate() {
        let num = |v: &Value| v.as_f64().unwrap();
        let m: Vec<f64> = case["K"].as_array().unwrap().iter().map(num).collect();
        let d: Vec<f64> = case["dist"].as_array().unwrap().iter().map(num).collect();
        let calibration = Calibration {
            fx: m[0],
            fy: m[4],
            cx: m[2],
            cy: m[5],
            dist: [d[0], d[1], d[2], d[3], d[4]],
        };
        let corners: Vec<[f64; 2]> = case["corners"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| [num(&p[0]), num(&p[1])])
            .collect();
        let corners = [corners[0], corners[1], corners[2], corners[3]];
        let pose = estimate_pose(&corners, num(&case["length"]), &calibration).unwrap();
        for i in 0..3 {
            let dr = (pose.rvec[i] - num(&case["rvec"][i])).abs();
            let dt = (pose.tvec[i] - num(&case["tvec"][i])).abs();
            worst = worst.max(dr).max(dt);
            assert!(
                dr < 1e-6 && dt < 1e-6,
                "case {k}: ours rvec {:?} tvec {:?}, OpenCV {} {}",
                pose.rvec,
                pose.tvec,
                case["rvec"],
                case["tvec"]
            );
        }
    }
    eprintln!(
        "pose: {} cases, largest difference {worst:.2e}",
        cases.len()
    );
}

/// A detection as both detectors report it: the ID and the corners in OpenCV's order.
type Found = (u32, [[f64; 2]; 4]);

/// How a detector did on rendered frames against their truth.
#[derive(Debug, Default)]
struct Score {
    truth: usize,
    found: usize,
    false_ids: usize,
    squared_error: f64,
    corners: usize,
}

impl Score {
    fn add(&mut self, truth: &[RenderedMarker], detected: &[Found]) {
        self.truth += truth.len();
        for (id, corners) in detected {
            let centre = |c: &[[f64; 2]; 4]| {
                [
                    c.iter().map(|p| p[0]).sum::<f64>() / 4.0,
                    c.iter().map(|p| p[1]).sum::<f64>() / 4.0,
                ]
            };
            let here = centre(corners);
            let hit = truth.iter().find(|t| {
                let c = centre(&t.corners);
                let side =
                    (t.corners[0][0] - t.corners[1][0]).hypot(t.corners[0][1] - t.corners[1][1]);
                t.id == *id && (c[0] - here[0]).hypot(c[1] - here[1]) < 0.5 * side
            });
            match hit {
                Some(t) => {
                    self.found += 1;
                    for (c, truth) in corners.iter().zip(&t.corners) {
                        self.squared_error += (c[0] - truth[0]).powi(2) + (c[1] - truth[1]).powi(2);
                        self.corners += 1;
                    }
                }
                None => self.false_ids += 1,
            }
        }
    }

    fn rate(&self) -> f64 {
        self.found as f64 / self.truth.max(1) as f64
    }

    fn rms(&self) -> f64 {
        (self.squared_error / self.corners.max(1) as f64).sqrt()
    }
}

fn ours(image: &GrayImage, dict: &Dictionary) -> Vec<Found> {
    detect(image, &DetectorParams::default(), &[dict])
        .unwrap()
        .markers
        .iter()
        .map(|m| (m.id, [m.corner(0), m.corner(1), m.corner(2), m.corner(3)]))
        .collect()
}

/// Our detector's score on the frames (printed); it may name no wrong ID.
fn our_score(what: &str, frames: &[Scene], dict: &Dictionary) -> Score {
    let mut mine = Score::default();
    for s in frames {
        mine.add(&s.markers, &ours(&s.image, dict));
    }
    eprintln!(
        "{what}: ours {}/{} found ({:.1} %), {} false IDs, corner RMS {:.3} px",
        mine.found,
        mine.truth,
        100.0 * mine.rate(),
        mine.false_ids,
        mine.rms()
    );
    assert_eq!(mine.false_ids, 0, "{what}");
    mine
}

fn opencv_found(frame: &Value) -> Vec<Found> {
    let ids = frame["ids"].as_array().unwrap();
    let corners = frame["corners"].as_array().unwrap();
    ids.iter()
        .zip(corners)
        .map(|(id, c)| {
            let p = |k: usize| [c[k][0].as_f64().unwrap(), c[k][1].as_f64().unwrap()];
            (id.as_u64().unwrap() as u32, [p(0), p(1), p(2), p(3)])
        })
        .collect()
}

/// 1080p frames of 16 markers under varied perspective, blur, noise and light.
fn scenes(dict: &Dictionary, frames: u64) -> Vec<Scene> {
    (0..frames)
        .map(|k| {
            let spec = SceneSpec {
                min_side: 36.0 + 8.0 * k as f64,
                max_side: 200.0,
                perspective: 0.06 + 0.04 * (k % 4) as f64,
                blur_sigma: 0.6 + 0.4 * (k % 4) as f64,
                noise_sigma: 2.0 + (k % 3) as f64 * 2.0,
                light_gradient: 0.3 + 0.15 * (k % 3) as f64,
                seed: 100 + k,
                ..SceneSpec::default()
            };
            render_scene(dict, &spec).unwrap()
        })
        .collect()
}

fn write_frames(dir: &Path, frames: &[Scene]) -> Vec<String> {
    frames
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let path = dir.join(format!("frame{k}.png"));
            image::GrayImage::from_raw(s.image.width, s.image.height, s.image.data.clone())
                .unwrap()
                .save(&path)
                .unwrap();
            path.to_string_lossy().into_owned()
        })
        .collect()
}

#[test]
fn detection_equals_or_beats_opencv_on_rendered_frames() {
    for name in ["DICT_4X4_50", "DICT_6X6_250", "DICT_APRILTAG_36h11"] {
        let dict = Dictionary::predefined(name).unwrap();
        let frames = scenes(&dict, 4);
        let mine = our_score(name, &frames, &dict);
        let dir = scratch(&format!("detect-{name}"));
        let paths = write_frames(&dir, &frames);
        let mut args = vec![name];
        args.extend(paths.iter().map(String::as_str));
        let Some(reference) = opencv("detect", &args) else {
            assert!(mine.rate() > 0.95, "{name}: {mine:?}");
            continue;
        };
        at_least_opencvs(name, &mine, &frames, &reference);
    }
}

#[test]
fn no_marker_in_clutter_or_photographs() {
    let all: Vec<Dictionary> = predefined_names()
        .map(|n| Dictionary::predefined(n).unwrap())
        .collect();
    let dicts: Vec<&Dictionary> = all.iter().collect();
    let mut images = Vec::new();
    for seed in 0..6 {
        let spec = SceneSpec {
            markers: 0,
            clutter: 300,
            seed: 900 + seed,
            ..SceneSpec::default()
        };
        images.push((
            format!("clutter {seed}"),
            render_scene(&all[0], &spec).unwrap().image,
        ));
    }
    let dir = scratch("photos");
    if let Some(paths) = opencv("photos", &[dir.to_str().unwrap()]) {
        for p in paths.as_array().unwrap() {
            let path = p.as_str().unwrap();
            images.push((path.to_string(), GrayImage::load(Path::new(path)).unwrap()));
        }
    }
    for (what, image) in &images {
        let found = detect(image, &DetectorParams::default(), &dicts).unwrap();
        assert!(found.markers.is_empty(), "{what}: {:?}", found.markers);
    }
    eprintln!(
        "no markers in {} frames of clutter and photographs",
        images.len()
    );
}

/// Markers pasted under perspective into scikit-image's photographs, under uneven light (a
/// gradient and a bright spot), blurred and noisy: ours finds at least as many as OpenCV, no
/// wrong ID, corners as close to the truth.
#[test]
fn markers_pasted_on_photographs_against_opencv() {
    for name in ["DICT_4X4_50", "DICT_6X6_250", "DICT_APRILTAG_36h11"] {
        let dict = Dictionary::predefined(name).unwrap();
        let dir = scratch(&format!("pasted-{name}"));
        let Some(made) = opencv("pasted", &[dir.to_str().unwrap(), name]) else {
            return;
        };
        let frames: Vec<Scene> = made
            .as_array()
            .unwrap()
            .iter()
            .map(|f| Scene {
                image: GrayImage::load(Path::new(f["file"].as_str().unwrap())).unwrap(),
                markers: f["markers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| RenderedMarker {
                        id: m["id"].as_u64().unwrap() as u32,
                        corners: std::array::from_fn(|k| {
                            let c = &m["corners"][k];
                            [c[0].as_f64().unwrap(), c[1].as_f64().unwrap()]
                        }),
                    })
                    .collect(),
            })
            .collect();
        if frames.is_empty() {
            eprintln!("notice: skipping the markers on photographs: no scikit-image");
            return;
        }
        let mine = our_score(&format!("photographs {name}"), &frames, &dict);
        let paths: Vec<&str> = made
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["file"].as_str().unwrap())
            .collect();
        let mut args = vec![name];
        args.extend(paths);
        let reference = opencv("detect", &args).expect("OpenCV ran the frames just made");
        at_least_opencvs(&format!("photographs {name}"), &mine, &frames, &reference);
    }
}

/// Time per 1080p frame, ours and OpenCV's, on the same frames and cores:
/// `cargo test --profile ci --test fiducial speed -- --ignored --nocapture --test-threads=1`.
#[test]
#[ignore]
fn speed_on_1080p_frames_against_opencv() {
    for name in ["DICT_4X4_50", "DICT_APRILTAG_36h11"] {
        let dict = Dictionary::predefined(name).unwrap();
        let frames = scenes(&dict, 8);
        let mut detector = Detector::new(DetectorParams::default()).unwrap();
        let mut best = f64::MAX;
        for _ in 0..3 {
            let start = std::time::Instant::now();
            for s in &frames {
                detector.detect(&s.image, &[&dict]).unwrap();
            }
            best = best.min(start.elapsed().as_secs_f64() / frames.len() as f64);
        }
        // Where the time goes, per frame: each window's threshold, labeling and outlines.
        let params = DetectorParams::default();
        let mut finder = QuadFinder::default();
        let mut steps = String::new();
        for window in params.windows().unwrap() {
            let start = std::time::Instant::now();
            for s in &frames {
                finder.find(&s.image, window, &params).unwrap();
            }
            let ms = start.elapsed().as_secs_f64() * 1e3 / frames.len() as f64;
            steps.push_str(&format!(" window {window}: {ms:.1} ms;"));
        }
        eprintln!("{name} quads per window (labeling included):{steps}");
        // Of which, for one window: the threshold alone, the labeling alone.
        let mut binarizer = Binarizer::new();
        let mut mask = BinaryImage::zeros(1, 1).unwrap();
        let mut lsl = Lsl::new();
        let (mut threshold_s, mut label_s) = (0.0, 0.0);
        for s in &frames {
            let start = std::time::Instant::now();
            let out = Outputs {
                bytes: Some(&mut mask),
                ..Outputs::default()
            };
            binarizer
                .adaptive_mean(&s.image, 13, 7.0, true, out)
                .unwrap();
            threshold_s += start.elapsed().as_secs_f64();
            let start = std::time::Instant::now();
            lsl.label(&mask, Connectivity::Eight, Want::Both).unwrap();
            label_s += start.elapsed().as_secs_f64();
        }
        let per_frame = |s: f64| s * 1e3 / frames.len() as f64;
        eprintln!(
            "{name} window 13: threshold {:.1} ms, labeling with label image {:.1} ms",
            per_frame(threshold_s),
            per_frame(label_s)
        );
        let dir = scratch(&format!("speed-{name}"));
        let paths = write_frames(&dir, &frames);
        let mut args = vec![name];
        args.extend(paths.iter().map(String::as_str));
        let theirs =
            opencv("detect", &args).map(|r| r["seconds"].as_f64().unwrap() / frames.len() as f64);
        eprintln!(
            "{name} 1920x1080, 16 markers, {} threads: ours {:.1} ms/frame, OpenCV {}",
            rayon::current_num_threads(),
            best * 1e3,
            theirs.map_or("not run".into(), |t| format!("{:.1} ms/frame", t * 1e3))
        );
    }
}

/// Small, blurred and noisy markers in dim, uneven light: both detectors miss some; neither
/// may name a wrong ID, and ours must find at least as many as OpenCV.
#[test]
fn hard_frames_against_opencv() {
    let name = "DICT_4X4_50";
    let dict = Dictionary::predefined(name).unwrap();
    let frames: Vec<Scene> = (0..4u64)
        .map(|k| {
            let spec = SceneSpec {
                markers: 30,
                min_side: 18.0,
                max_side: 60.0,
                perspective: 0.15,
                blur_sigma: 1.2 + 0.4 * k as f64,
                noise_sigma: 5.0 + k as f64,
                light_gradient: 0.7,
                clutter: 120,
                seed: 500 + k,
                ..SceneSpec::default()
            };
            render_scene(&dict, &spec).unwrap()
        })
        .collect();
    let mine = our_score(&format!("hard {name}"), &frames, &dict);
    let dir = scratch("hard");
    let paths = write_frames(&dir, &frames);
    let mut args = vec![name];
    args.extend(paths.iter().map(String::as_str));
    let Some(reference) = opencv("detect", &args) else {
        return;
    };
    at_least_opencvs(&format!("hard {name}"), &mine, &frames, &reference);
}

/// OpenCV's score on the same frames (printed), and ours at least as good: found as many, corners
/// as close to the truth.
fn at_least_opencvs(name: &str, mine: &Score, frames: &[Scene], reference: &Value) {
    let mut theirs = Score::default();
    for (s, f) in frames.iter().zip(reference["frames"].as_array().unwrap()) {
        theirs.add(&s.markers, &opencv_found(f));
    }
    eprintln!(
        "{name}: OpenCV {}/{} found ({:.1} %), {} false IDs, corner RMS {:.3} px",
        theirs.found,
        theirs.truth,
        100.0 * theirs.rate(),
        theirs.false_ids,
        theirs.rms()
    );
    assert!(
        mine.rate() >= theirs.rate(),
        "{name}: ours {mine:?}, OpenCV {theirs:?}"
    );
    assert!(
        mine.rms() <= theirs.rms(),
        "{name}: ours {mine:?}, OpenCV {theirs:?}"
    );
}
