//! Several sources, one world (`analyze A B … --world-file a.toml --world-file b.toml`): the
//! overlapping synthetic views (`synthetic:view=K/N`) merged into one world view whose objects
//! keep their world track across the seams, at the true world positions; a source that ends
//! early; a calibration made at another size, refused before the run.

use crate::sources::{analyze, read_csv, udp_listener};
use crate::util::{ffmpeg, require_ffmpeg};
use markerscope::source::view_scene::{ViewScene, PIXELS_PER_MM};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The size of the frames `analyze` asks for.
const SIZE: (u32, u32) = (320, 240);

/// Two views of one world.
const VIEWS: [&str; 2] = ["synthetic:view=0/2", "synthetic:view=1/2"];

/// The rows of a CSV (no quoted fields), each a map of column name to field.
fn read_rows(path: &Path) -> (Vec<String>, Vec<HashMap<String, String>>) {
    let (header, rows) = read_csv(path);
    let rows = rows
        .into_iter()
        .map(|row| header.iter().cloned().zip(row).collect())
        .collect();
    (header, rows)
}

/// The world file of view `k` of `n`.
fn world_file(dir: &Path, k: u32, n: u32) -> PathBuf {
    let view = ViewScene::new(k, n, SIZE.0, SIZE.1).unwrap();
    let path = dir.join(format!("view-{k}.toml"));
    std::fs::write(&path, view.reference_file().to_toml()).unwrap();
    path
}

fn num(row: &HashMap<String, String>, column: &str) -> f64 {
    row[column].parse().unwrap()
}

/// `analyze` of `sources`, each with its world file (`files`, in order), `frames` frames of
/// each, rows to `out`, and `more` flags.
fn analyze_with_worlds(
    sources: &[&str],
    files: &[PathBuf],
    frames: &str,
    out: &Path,
    more: &[&str],
) -> crate::sources::Run {
    let mut args = sources.to_vec();
    args.extend(["--max-frames", frames, "--out", out.to_str().unwrap()]);
    for f in files {
        args.extend(["--world-file", f.to_str().unwrap()]);
    }
    args.extend_from_slice(more);
    analyze(&args)
}

/// `n` views analysed together for `frames` frames, each with its world file: the rows
/// (written to `dir`/world.csv), and the world files.
fn analyze_views(dir: &Path, n: u32, frames: u64) -> (Vec<HashMap<String, String>>, Vec<PathBuf>) {
    let files: Vec<PathBuf> = (0..n).map(|k| world_file(dir, k, n)).collect();
    let out = dir.join("world.csv");
    let sources: Vec<String> = (0..n).map(|k| format!("synthetic:view={k}/{n}")).collect();
    let sources: Vec<&str> = sources.iter().map(String::as_str).collect();
    let run = analyze_with_worlds(&sources, &files, &frames.to_string(), &out, &[]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    // One world track a disc: none lost, none split at a seam.
    assert!(
        run.stderr
            .contains("merged world view: 6 world track(s), merge radius 1.5 world units"),
        "{}",
        run.stderr
    );
    let (header, rows) = read_rows(&out);
    assert_eq!(
        header[29..].join(","),
        "source,source_name,time_source,frame_set,skew_ms,world_track,merged_x_world,\
         merged_y_world"
    );
    (rows, files)
}

/// Each frame set's objects (world track → merged position; every observation of one object
/// carries the same), matched to the truth's discs: each disc's world track in each frame, and
/// the merged positions' mean distance from the truth in pixels (`PIXELS_PER_MM`).
fn tracks_of_the_truth(
    rows: &[HashMap<String, String>],
    truth: &ViewScene,
    frames: u64,
) -> (Vec<Vec<u64>>, f64) {
    let mut sets: Vec<HashMap<u64, [f64; 2]>> = vec![HashMap::new(); frames as usize];
    for row in rows {
        let set = num(row, "frame_set") as usize;
        assert_eq!(row["frame"], row["frame_set"], "sets are the frames of all");
        let track = num(row, "world_track") as u64;
        let at = [num(row, "merged_x_world"), num(row, "merged_y_world")];
        let before = sets[set].insert(track, at);
        assert!(
            before.is_none_or(|b| b == at),
            "set {set}: {before:?} vs {at:?}"
        );
    }
    let (mut error_sum, mut matched) = (0.0, 0u64);
    let mut track_of: Vec<Vec<u64>> = Vec::new();
    for (frame, objects) in sets.iter().enumerate() {
        let markers = truth.truth(frame as u64);
        assert_eq!(objects.len(), markers.len(), "frame {frame}: {objects:?}");
        let mut tracks = Vec::new();
        for m in &markers {
            let (track, distance) = objects
                .iter()
                .map(|(t, p)| (*t, (p[0] - m.x).hypot(p[1] - m.y)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .unwrap();
            assert!(
                distance < 1.0,
                "frame {frame}: disc {} {distance} mm off",
                m.id
            );
            error_sum += distance * PIXELS_PER_MM;
            matched += 1;
            tracks.push(track);
        }
        track_of.push(tracks);
    }
    (track_of, error_sum / matched as f64)
}

/// The seam crossings over the frames (from the truth), and how many kept their world track.
fn seam_crossings(truth: &ViewScene, track_of: &[Vec<u64>]) -> (u64, u64) {
    let seams = truth.seams();
    let (mut crossings, mut kept) = (0u64, 0u64);
    for frame in 1..track_of.len() {
        let (before, now) = (truth.truth(frame as u64 - 1), truth.truth(frame as u64));
        for (j, (b, a)) in before.iter().zip(&now).enumerate() {
            if seams
                .iter()
                .any(|s| (b.x - s).signum() != (a.x - s).signum())
            {
                crossings += 1;
                kept += u64::from(track_of[frame - 1][j] == track_of[frame][j]);
            }
        }
    }
    (crossings, kept)
}

#[test]
fn seam_crossings_keep_their_world_track_at_the_true_world_positions() {
    for (n, frames) in [(2, 900), (4, 1800)] {
        let dir = tempfile::tempdir().unwrap();
        let (rows, files) = analyze_views(dir.path(), n, frames);
        let truth = ViewScene::new(0, n, SIZE.0, SIZE.1).unwrap();
        let (track_of, mean_error_px) = tracks_of_the_truth(&rows, &truth, frames);
        let (crossings, kept) = seam_crossings(&truth, &track_of);
        eprintln!(
            "{n} views, {frames} frames: {crossings} seam crossings, {kept} kept their world \
             track; mean merged position error {mean_error_px:.4} px"
        );
        assert!(crossings >= 20, "{crossings} crossings");
        assert!(
            kept as f64 >= 0.99 * crossings as f64,
            "{kept} of {crossings}"
        );
        assert!(mean_error_px < 0.1, "{mean_error_px} px");
        if n == 2 {
            rows_are_those_the_source_gives_alone(dir.path(), &files[1], frames);
        }
    }
}

/// View 1 of 2's rows in `dir`/world.csv are those it gives alone (`file`: its world file),
/// but for the merged view's columns, which a run of one source does not write.
fn rows_are_those_the_source_gives_alone(dir: &Path, file: &Path, frames: u64) {
    let alone = dir.join("alone.csv");
    let frames = frames.to_string();
    let run = analyze(&[
        "synthetic:view=1/2",
        "--max-frames",
        &frames,
        "--world-file",
        file.to_str().unwrap(),
        "--out",
        alone.to_str().unwrap(),
    ]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let text = std::fs::read_to_string(&alone).unwrap();
    let alone_rows: Vec<&str> = text.lines().collect();
    assert_eq!(
        alone_rows[0].split(',').count(),
        29,
        "one source: no new columns"
    );
    let multi = std::fs::read_to_string(dir.join("world.csv")).unwrap();
    let mine: Vec<String> = multi
        .lines()
        .skip(1)
        .filter(|l| l.split(',').nth(29) == Some("1"))
        .map(|l| l.split(',').take(29).collect::<Vec<_>>().join(","))
        .collect();
    assert_eq!(mine, alone_rows[1..]);
}

#[test]
fn a_source_that_ends_early_leaves_the_world_merge_going() {
    require_ffmpeg();
    let dir = tempfile::tempdir().unwrap();
    // View 1 as a clip of 30 frames: it ends while view 0 goes on.
    let frames = dir.path().join("view-1");
    std::fs::create_dir(&frames).unwrap();
    let view = ViewScene::new(1, 2, SIZE.0, SIZE.1).unwrap();
    for i in 0..30 {
        let mut image = markerscope::frame::image::GrayImage::empty();
        view.render_into(i, &mut image);
        let png = image::GrayImage::from_raw(SIZE.0, SIZE.1, image.data.clone()).unwrap();
        png.save(frames.join(format!("{i:03}.png"))).unwrap();
    }
    let clip = dir.path().join("view-1.mkv");
    ffmpeg(&[
        "-framerate",
        "60",
        "-i",
        frames.join("%03d.png").to_str().unwrap(),
        "-c:v",
        "ffv1",
        "-pix_fmt",
        "gray",
        clip.to_str().unwrap(),
    ]);
    let files: Vec<PathBuf> = (0..2).map(|k| world_file(dir.path(), k, 2)).collect();
    let out = dir.path().join("rows.csv");
    let sources = ["synthetic:view=0/2", clip.to_str().unwrap()];
    let run = analyze_with_worlds(&sources, &files, "90", &out, &[]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let (_, rows) = read_rows(&out);
    let of = |source: &'static str| rows.iter().filter(move |r| r["source"] == source);
    assert_eq!(of("1").map(|r| num(r, "frame")).fold(0.0, f64::max), 29.0);
    // While both go on, objects in the seam band are seen by both: one world track.
    let shared = of("1")
        .filter(|r| {
            of("0")
                .any(|o| o["frame_set"] == r["frame_set"] && o["world_track"] == r["world_track"])
        })
        .count();
    assert!(shared > 0);
    // After its end, view 0's observations are objects of their own, tracked on.
    let late: Vec<_> = of("0").filter(|r| num(r, "frame") >= 30.0).collect();
    assert!(!late.is_empty());
    for r in &late {
        assert!(num(r, "world_track") > 0.0);
        assert!((num(r, "merged_x_world") - num(r, "x_world")).abs() < 1e-9);
        assert!((num(r, "merged_y_world") - num(r, "y_world")).abs() < 1e-9);
    }
    // A disc view 0 sees throughout keeps its world track across view 1's end.
    let track_at = |frame: &str| -> Vec<String> {
        of("0")
            .filter(|r| r["frame"] == frame)
            .map(|r| r["world_track"].clone())
            .collect()
    };
    let (before, after) = (track_at("29"), track_at("30"));
    assert!(
        before.iter().any(|t| after.contains(t)),
        "{before:?} {after:?}"
    );
}

#[test]
fn a_calibration_of_another_size_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let calibration = dir.path().join("lens.yaml");
    std::fs::write(
        &calibration,
        "%YAML:1.0\n---\nimage_width: 640\nimage_height: 480\ncamera_matrix: !!opencv-matrix\n   \
         rows: 3\n   cols: 3\n   dt: d\n   data: [ 500., 0., 320., 0., 500., 240., 0., 0., 1. ]\n\
         distortion_coefficients: !!opencv-matrix\n   rows: 1\n   cols: 5\n   dt: d\n   \
         data: [ 0., 0., 0., 0., 0. ]\n",
    )
    .unwrap();
    let good = world_file(dir.path(), 0, 2);
    let view = ViewScene::new(1, 2, SIZE.0, SIZE.1).unwrap();
    let mut reference = view.reference_file();
    reference.calibration = Some(calibration);
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, reference.to_toml()).unwrap();
    let out = dir.path().join("rows.csv");
    let run = analyze_with_worlds(&VIEWS, &[good.clone(), bad.clone()], "10", &out, &[]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stderr.contains("source 1 (synthetic:view=1/2)")
            && run.stderr.contains("640×480")
            && run.stderr.contains("320×240"),
        "{}",
        run.stderr
    );
    assert!(!out.exists());
    // As many world files as sources, or one for all.
    let run = analyze(&[
        "synthetic:view=0/2",
        "synthetic:view=1/2",
        "synthetic",
        "--max-frames",
        "10",
        "--world-file",
        good.to_str().unwrap(),
        "--world-file",
        good.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stderr.contains("2 --world-file values for 3 source(s)"),
        "{}",
        run.stderr
    );
    // A run of one source is refused the same way.
    let run = analyze(&[
        "synthetic:view=1/2",
        "--max-frames",
        "10",
        "--world-file",
        bad.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("640×480"), "{}", run.stderr);
    assert!(!out.exists());
}

/// The next bundle of the merged world view's TUIO source (`markerscope:world`) of the profile
/// at `address`, skipping the sources' own: the arguments of each of its messages. None when no
/// more comes.
fn next_world_bundle(
    socket: &std::net::UdpSocket,
    address: &str,
) -> Option<Vec<Vec<rosc::OscType>>> {
    use rosc::{OscPacket, OscType};
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        let n = socket.recv(&mut buffer).ok()?;
        let (_, OscPacket::Bundle(bundle)) = rosc::decoder::decode_udp(&buffer[..n]).unwrap()
        else {
            panic!("TUIO sends bundles")
        };
        let messages: Vec<Vec<OscType>> = bundle
            .content
            .into_iter()
            .filter_map(|p| match p {
                OscPacket::Message(m) if m.addr == address => Some(m.args),
                _ => None,
            })
            .collect();
        if messages.first().map(|m| &m[1]) == Some(&OscType::String("markerscope:world".into())) {
            return Some(messages);
        }
    }
}

/// The merged world view on the streams: JSON components carry their world track and merged
/// position, TUIO gets a `markerscope:world` bundle per frame set with the world tracks.
#[test]
fn streams_carry_the_merged_world_view() {
    use rosc::OscType;
    let (json, tuio) = (udp_listener(), udp_listener());
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = (0..2).map(|k| world_file(dir.path(), k, 2)).collect();
    let out = dir.path().join("rows.csv");
    let (json_url, tuio_url) = (
        format!("udp://{}", json.local_addr().unwrap()),
        format!("osc://{}", tuio.local_addr().unwrap()),
    );
    let streams = ["--stream", &json_url, "--stream", &tuio_url];
    let run = analyze_with_worlds(&VIEWS, &files, "3", &out, &streams);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let (_, rows) = read_rows(&out);
    let mut buffer = vec![0u8; 1 << 16];
    for _ in 0..6 {
        let n = json.recv(&mut buffer).expect("every frame's message");
        let v: serde_json::Value = serde_json::from_slice(&buffer[..n]).unwrap();
        for c in v["components"].as_array().unwrap() {
            let row = rows
                .iter()
                .find(|r| {
                    ["source", "frame"]
                        .iter()
                        .all(|k| Some(num(r, k)) == v[k].as_f64())
                        && Some(num(r, "label")) == c["label"].as_f64()
                })
                .unwrap();
            assert_eq!(row["world_track"], c["world_track"].to_string());
            assert!(
                (num(row, "merged_x_world") - c["merged_x_world"].as_f64().unwrap()).abs() < 1e-9
            );
        }
    }
    // TUIO: each source's bundles and the world's; the world's name the sets' world tracks.
    // A stream that falls behind drops its oldest: the sets that came, in order.
    let mut world_sets = Vec::new();
    while world_sets.len() < 3 {
        let Some(messages) = next_world_bundle(&tuio, "/tuio/2Dblb") else {
            break;
        };
        let alive: Vec<i32> = messages[1][1..]
            .iter()
            .map(|a| a.clone().int().unwrap())
            .collect();
        let Some(OscType::Int(set)) = messages.last().unwrap().get(1).cloned() else {
            panic!("fseq")
        };
        let mut expected: Vec<i32> = rows
            .iter()
            .filter(|r| r["frame_set"] == set.to_string())
            .map(|r| num(r, "world_track") as i32)
            .collect();
        expected.sort();
        expected.dedup();
        let mut alive_sorted = alive.clone();
        alive_sorted.sort();
        assert_eq!(alive_sorted, expected, "set {set}");
        world_sets.push(set);
    }
    assert!(!world_sets.is_empty());
    assert!(world_sets.windows(2).all(|w| w[0] < w[1]), "{world_sets:?}");
}

/// Parquet carries the merged world view's columns as the CSV does: the world tracks as
/// unsigned integers, the merged positions as floats.
#[test]
fn parquet_carries_the_merged_world_view() {
    use arrow_array::{Array, Float64Array, UInt64Array};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = (0..2).map(|k| world_file(dir.path(), k, 2)).collect();
    let (csv, parquet) = (dir.path().join("rows.csv"), dir.path().join("rows.parquet"));
    for out in [&csv, &parquet] {
        let run = analyze_with_worlds(&VIEWS, &files, "5", out, &[]);
        assert_eq!(run.code, Some(0), "{}", run.stderr);
    }
    let (header, rows) = read_rows(&csv);
    let reader =
        ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&parquet).unwrap()).unwrap();
    let names: Vec<String> = reader
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, header);
    let (mut tracks, mut xs) = (Vec::new(), Vec::new());
    for batch in reader.build().unwrap() {
        let batch = batch.unwrap();
        let track = batch
            .column(34)
            .as_any()
            .downcast_ref::<UInt64Array>()
            .unwrap();
        let x = batch
            .column(35)
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap();
        tracks.extend((0..track.len()).map(|i| track.value(i)));
        xs.extend((0..x.len()).map(|i| x.value(i)));
    }
    let expected: Vec<u64> = rows.iter().map(|r| num(r, "world_track") as u64).collect();
    assert_eq!(tracks, expected);
    let expected: Vec<f64> = rows.iter().map(|r| num(r, "merged_x_world")).collect();
    assert_eq!(xs, expected);
}

/// A world file mapping pixel (x, y) to world (`x0` + x·`s`, `y0` + y·`s`): `s` world units a
/// pixel, so 1/`s` pixels a world unit everywhere.
fn scaled_world_file(dir: &Path, name: &str, x0: f64, y0: f64, s: f64) -> PathBuf {
    let points: Vec<String> = [[0.0, 0.0], [100.0, 0.0], [100.0, 100.0], [0.0, 100.0]]
        .iter()
        .map(|[x, y]| format!("\"{x},{y}={},{}\"", x0 + x * s, y0 + y * s))
        .collect();
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!("[world]\npoints = [{}]\n", points.join(", ")),
    )
    .unwrap();
    path
}

/// World files of two sources: source 0 in pixels, source 1 half a unit a pixel (2 pixels a
/// unit), shifted.
fn two_world_files(dir: &Path) -> [PathBuf; 2] {
    [
        scaled_world_file(dir, "a.toml", 0.0, 0.0, 1.0),
        scaled_world_file(dir, "b.toml", 10.0, 5.0, 0.5),
    ]
}

/// Marker rows of several sources mapped into one world, and each source's rows alone: the
/// rows of the run of both, and of each source alone (with its world file), as text.
fn marker_runs(dir: &Path, sources: [&str; 2], files: &[PathBuf]) -> (String, [String; 2]) {
    let out = dir.join("markers.csv");
    let markers = ["--markers", "DICT_4X4_50"];
    let run = analyze_with_worlds(&sources, files, "6", &out, &markers);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    // The summary counts the markers the merged view placed.
    assert!(
        run.stderr.contains(" marker(s), merge radius"),
        "{}",
        run.stderr
    );
    let alone = [0, 1].map(|k| {
        let own = dir.join(format!("alone-{k}.csv"));
        let run = analyze_with_worlds(&sources[k..=k], &files[k..=k], "6", &own, &markers);
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        std::fs::read_to_string(own).unwrap()
    });
    (std::fs::read_to_string(out).unwrap(), alone)
}

/// The marker columns of one source (`--markers` alone).
const MARKER_COLUMNS: usize = 27;

/// `analyze A B --markers` with a world file per source: each source's rows are those it
/// writes alone, then the source columns; a marker seen by both is one object (its
/// world_track its track in both) at the mean of the two world positions of its centre, each
/// weighted by its area × (pixels per world unit)²; a marker seen by one keeps its position.
#[test]
fn markers_of_several_sources_are_one_object_in_the_world() {
    let dir = tempfile::tempdir().unwrap();
    let files = two_world_files(dir.path());
    let scales = [1.0, 2.0];
    let scenes = [
        ["synthetic:markers:seed=3", "synthetic:markers:seed=3"],
        // Some IDs in both, some in one only.
        ["synthetic:markers:seed=3", "synthetic:markers:seed=5"],
    ];
    let (mut both, mut one) = (0, 0);
    for sources in scenes {
        let (text, alone) = marker_runs(dir.path(), sources, &files);
        let header = text.lines().next().unwrap();
        assert!(
            header.ends_with(
                ",damaged,source,source_name,time_source,frame_set,skew_ms,world_track,\
                 merged_x_world,merged_y_world"
            ),
            "{header}"
        );
        for (k, alone) in alone.iter().enumerate() {
            assert_eq!(
                alone.lines().next().unwrap().split(',').count(),
                MARKER_COLUMNS
            );
            let mine: Vec<String> = text
                .lines()
                .skip(1)
                .filter(|l| l.split(',').nth(MARKER_COLUMNS) == Some(&k.to_string()))
                .map(|l| {
                    l.split(',')
                        .take(MARKER_COLUMNS)
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .collect();
            let alone_rows: Vec<&str> = alone.lines().skip(1).collect();
            assert!(!alone_rows.is_empty());
            assert_eq!(mine, alone_rows, "source {k}");
        }
        let out = dir.path().join("markers.csv");
        let (_, rows) = read_rows(&out);
        // Per frame set and marker track: each source's observation.
        let mut objects: HashMap<(String, String), Vec<&HashMap<String, String>>> = HashMap::new();
        for row in &rows {
            assert_eq!(row["world_track"], row["track"]);
            assert_eq!(row["source_name"], sources[num(row, "source") as usize]);
            let key = (row["frame_set"].clone(), row["track"].clone());
            objects.entry(key).or_default().push(row);
        }
        for seen in objects.values() {
            let merged = [
                num(seen[0], "merged_x_world"),
                num(seen[0], "merged_y_world"),
            ];
            if seen.len() == 1 {
                one += 1;
                assert_eq!(merged, [num(seen[0], "x_world"), num(seen[0], "y_world")]);
                continue;
            }
            both += 1;
            let (mut sum, mut weights) = ([0.0; 2], 0.0);
            for row in seen {
                let corners = (0..4).map(|c| {
                    let at = |a: &str| num(row, &format!("corner{c}_{a}"));
                    [at("x"), at("y")]
                });
                let corners: Vec<[f64; 2]> = corners.collect();
                // The shoelace area of the corners.
                let area = (0..4)
                    .map(|i| {
                        let (p, q) = (corners[i], corners[(i + 1) % 4]);
                        p[0] * q[1] - q[0] * p[1]
                    })
                    .sum::<f64>()
                    .abs()
                    / 2.0;
                let s: f64 = scales[num(row, "source") as usize];
                let w = area * s * s;
                sum = [
                    sum[0] + w * num(row, "x_world"),
                    sum[1] + w * num(row, "y_world"),
                ];
                weights += w;
                assert_eq!(row["merged_x_world"], seen[0]["merged_x_world"]);
                assert_eq!(row["merged_y_world"], seen[0]["merged_y_world"]);
            }
            // The mappings' scales are 1 and 2 up to the homography's rounding.
            for a in 0..2 {
                let expected = sum[a] / weights;
                assert!((merged[a] - expected).abs() < 1e-3, "{merged:?} {expected}");
            }
        }
    }
    assert!(
        both > 0 && one > 0,
        "{both} merged, {one} seen by one source"
    );
}

/// JSONL marker rows of several sources carry the source and merged columns too; Parquet is
/// still refused for marker rows.
#[test]
fn marker_rows_of_several_sources_are_csv_or_jsonl() {
    let dir = tempfile::tempdir().unwrap();
    let files = two_world_files(dir.path());
    let sources = ["synthetic:markers:seed=3", "synthetic:markers:seed=3"];
    let markers = ["--markers", "DICT_4X4_50"];
    let out = dir.path().join("markers.jsonl");
    let run = analyze_with_worlds(&sources, &files, "2", &out, &markers);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let text = std::fs::read_to_string(&out).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first.as_object().unwrap().len(), MARKER_COLUMNS + 8);
    assert_eq!(first["source"], 0);
    assert_eq!(first["source_name"], sources[0]);
    assert_eq!(first["world_track"], first["track"]);
    assert!(first["merged_x_world"].is_f64());
    let parquet = dir.path().join("markers.parquet");
    let run = analyze_with_worlds(&sources, &files, "2", &parquet, &markers);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(run.stderr.contains("CSV or JSONL"), "{}", run.stderr);
    assert!(!parquet.exists());
}

/// A marker row's track as a TUIO `s` ID (an int32: the track modulo 2³¹).
fn session_id(row: &HashMap<String, String>) -> i32 {
    (row["track"].parse::<u64>().unwrap() % (1 << 31)) as i32
}

/// With `--markers`, the merged world view on the streams carries the merged markers: the JSON
/// markers end with their world track and merged position, as their rows do, and TUIO's
/// `markerscope:world` source gets a `2Dobj` bundle per frame set, each merged marker with its
/// world track as `s`, its marker ID as `i`, its merged position and the direction of its top
/// edge normalised to the world's bounds.
#[test]
fn streams_carry_the_merged_markers() {
    use rosc::OscType;
    let (json, tuio) = (udp_listener(), udp_listener());
    let dir = tempfile::tempdir().unwrap();
    let files = two_world_files(dir.path());
    let sources = ["synthetic:markers:seed=3", "synthetic:markers:seed=3"];
    let out = dir.path().join("markers.csv");
    let (json_url, tuio_url) = (
        format!("udp://{}", json.local_addr().unwrap()),
        format!("osc://{}", tuio.local_addr().unwrap()),
    );
    let more = [
        "--markers",
        "DICT_4X4_50",
        "--stream",
        &json_url,
        "--stream",
        &tuio_url,
    ];
    let run = analyze_with_worlds(&sources, &files, "3", &out, &more);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let (_, rows) = read_rows(&out);
    let row_of = |source: f64, frame: f64, track: f64| {
        rows.iter()
            .find(|r| {
                num(r, "source") == source && num(r, "frame") == frame && num(r, "track") == track
            })
            .unwrap()
    };
    let mut buffer = vec![0u8; 1 << 16];
    let mut markers = 0;
    for _ in 0..6 {
        let n = json.recv(&mut buffer).expect("every frame's message");
        let v: serde_json::Value = serde_json::from_slice(&buffer[..n]).unwrap();
        for m in v["markers"].as_array().unwrap() {
            let (source, frame) = (v["source"].as_f64().unwrap(), v["frame"].as_f64().unwrap());
            let row = row_of(source, frame, m["track"].as_f64().unwrap());
            assert_eq!(m["world_track"].to_string(), row["world_track"]);
            for column in ["merged_x_world", "merged_y_world"] {
                assert!((m[column].as_f64().unwrap() - num(row, column)).abs() < 1e-9);
            }
            markers += 1;
        }
    }
    assert!(markers > 0);
    // The world's bounds: source 0's frame, one world unit a pixel, holds source 1's.
    let (x0, y0, width, height) = (-0.5, -0.5, f64::from(SIZE.0), f64::from(SIZE.1));
    let mut world_sets = Vec::new();
    while world_sets.len() < 3 {
        let Some(messages) = next_world_bundle(&tuio, "/tuio/2Dobj") else {
            break;
        };
        let Some(OscType::Int(set)) = messages.last().unwrap().get(1).cloned() else {
            panic!("fseq")
        };
        let in_set: Vec<&HashMap<String, String>> = rows
            .iter()
            .filter(|r| r["frame_set"] == set.to_string())
            .collect();
        let mut alive: Vec<i32> = messages[1][1..]
            .iter()
            .map(|a| a.clone().int().unwrap())
            .collect();
        let mut expected: Vec<i32> = in_set.iter().map(|r| session_id(r)).collect();
        alive.sort();
        expected.sort();
        expected.dedup();
        assert_eq!(alive, expected, "set {set}");
        let sets = &messages[2..messages.len() - 1];
        assert_eq!(sets.len(), expected.len());
        for m in sets {
            let float = |k: usize| f64::from(m[k].clone().float().unwrap());
            let track = m[1].clone().int().unwrap();
            let row = in_set.iter().find(|r| session_id(r) == track).unwrap();
            assert_eq!(m[2], OscType::Int(num(row, "marker_id") as i32));
            let x = (num(row, "merged_x_world") - x0) / width;
            let y = (num(row, "merged_y_world") - y0) / height;
            assert!(
                (float(3) - x).abs() < 1e-5 && (float(4) - y).abs() < 1e-5,
                "{m:?}"
            );
            // Both mappings keep the image's directions: the top edge's, normalised.
            let a = num(row, "angle_deg").to_radians();
            let angle = (a.sin() / height)
                .atan2(a.cos() / width)
                .rem_euclid(std::f64::consts::TAU);
            let turn = (float(5) - angle).abs();
            assert!(
                turn.min(std::f64::consts::TAU - turn) < 1e-3,
                "{m:?}: {angle}"
            );
        }
        world_sets.push(set);
    }
    assert!(!world_sets.is_empty());
    assert!(world_sets.windows(2).all(|w| w[0] < w[1]), "{world_sets:?}");
}
