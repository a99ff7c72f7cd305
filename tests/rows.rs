//! The rows' files from the command line: the columns chosen, Parquet and Arrow read back by
//! pyarrow (code that is not ours) against the CSV (the `--tracks` summary's too), and the
//! writer's failures (a full device, a closed pipe) stopping the run with the reason and no
//! file under the final name.

use crate::util::{markerscope, markerscope_command};
use std::path::Path;
use std::process::{Command, Stdio};

/// A dense synthetic scene: hundreds of rows a frame, over several formatting chunks.
const SCENE: [&str; 7] = [
    "analyze",
    "synthetic:random",
    "--size",
    "640x360",
    "--max-frames",
    "7",
    "--backend",
];

fn analyze(extra: &[&str]) -> std::process::Output {
    let run = markerscope(&[&SCENE[..], &["cpu"], extra].concat());
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    run
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

/// `--columns used` leaves out the groups not filled; a list writes those columns in its
/// order, with the values the full CSV has; JSONL has the same keys.
#[test]
fn columns_used_and_listed_are_the_full_rows_columns() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full.csv");
    let used = dir.path().join("used.csv");
    let listed = dir.path().join("listed.jsonl");
    analyze(&["--out", full.to_str().unwrap()]);
    analyze(&["--out", used.to_str().unwrap(), "--columns", "used"]);
    analyze(&[
        "--out",
        listed.to_str().unwrap(),
        "--columns",
        "track,frame,subpixel_x",
    ]);
    let full = lines(&full);
    let used = lines(&used);
    assert_eq!(full[0], markerscope::output::export::CSV_HEADER);
    assert_eq!(
        used[0],
        "frame,label,left,top,width,height,area,centroid_x,centroid_y,sum_x,sum_y,file,time_s,\
         track,subpixel_x,subpixel_y,damaged"
    );
    assert_eq!(full.len(), used.len());
    assert!(full.len() > 7 * 100, "{} rows", full.len());
    for (f, u) in full.iter().zip(&used).skip(1) {
        // The same first 16 fields and the last (damaged); the full row's others are empty.
        let f: Vec<&str> = f.split(',').collect();
        assert_eq!(f.len(), 29);
        assert_eq!(format!("{},{}", f[..16].join(","), f[28]), *u);
        assert_eq!(f[28], "false");
        assert!(f[16..28].iter().all(|v| v.is_empty()));
    }
    let listed = lines(&listed);
    assert_eq!(listed.len(), full.len() - 1);
    for (row, f) in listed.iter().zip(&full[1..]) {
        let f: Vec<&str> = f.split(',').collect();
        let json: serde_json::Value = serde_json::from_str(row).unwrap();
        // The keys (serde_json's map sorts them; the text's order is checked below).
        let mut keys: Vec<&String> = json.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["frame", "subpixel_x", "track"]);
        assert!(row.starts_with(&format!("{{\"track\":{},\"frame\":{},", f[13], f[0])));
        assert_eq!(
            json["subpixel_x"].as_f64().unwrap(),
            f[14].parse::<f64>().unwrap()
        );
    }
}

/// Marker rows (`--markers`) are CSV or JSONL with all their columns: Parquet, Arrow and a
/// column choice are refused before the run, and nothing is written.
#[test]
fn marker_rows_refuse_the_columnar_formats_and_a_column_choice() {
    let dir = tempfile::tempdir().unwrap();
    for (name, extra, why) in [
        (
            "m.parquet",
            &[][..],
            "--markers writes its rows as CSV or JSONL",
        ),
        (
            "m.arrow",
            &[][..],
            "--markers writes its rows as CSV or JSONL",
        ),
        (
            "m.csv",
            &["--columns", "used"][..],
            "--columns chooses among the component rows' columns",
        ),
    ] {
        let out = dir.path().join(name);
        let run = markerscope(
            &[
                &SCENE[..],
                &[
                    "cpu",
                    "--markers",
                    "DICT_4X4_50",
                    "--out",
                    out.to_str().unwrap(),
                ],
                extra,
            ]
            .concat(),
        );
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(why), "{name}: {stderr}");
        assert!(!out.exists(), "{name} written");
    }
}

#[test]
fn unknown_duplicate_or_empty_columns_are_usage_errors() {
    for (columns, why) in [
        ("frame,colour", "unknown column 'colour'"),
        ("frame,frame", "'frame' is named twice"),
        ("frame,", "an empty column name"),
    ] {
        let run = markerscope(&[&SCENE[..], &["cpu", "--columns", columns]].concat());
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{columns}: {stderr}");
        assert!(stderr.contains(why), "{columns}: {stderr}");
    }
    let run = markerscope(&[&SCENE[..], &["cpu", "--row-group-frames", "0"]].concat());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    assert!(
        stderr.contains("--row-group-frames must be at least 1"),
        "{stderr}"
    );
}

/// pyarrow reads the Parquet file (each compression) and the Arrow file back: the schema's
/// version, the row groups, and every row equal to the CSV's (the CSV fields parsed: floats
/// exactly, empty fields as null).
#[test]
fn parquet_and_arrow_read_by_pyarrow_equal_the_csv_row_for_row() {
    let python = python_with_pyarrow();
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("rows.csv");
    analyze(&["--out", csv.to_str().unwrap(), "--shapes"]);
    let mut files = Vec::new();
    for compression in ["snappy", "lz4", "none"] {
        let out = dir.path().join(format!("rows-{compression}.parquet"));
        analyze(&[
            "--out",
            out.to_str().unwrap(),
            "--shapes",
            "--compression",
            compression,
            "--row-group-frames",
            "3",
        ]);
        files.push(out);
    }
    let arrow = dir.path().join("rows.arrow");
    analyze(&[
        "--out",
        arrow.to_str().unwrap(),
        "--shapes",
        "--row-group-frames",
        "3",
    ]);
    files.push(arrow);
    let script = r#"
import csv, math, sys
import pyarrow.parquet as pq, pyarrow.feather as feather, pyarrow.ipc as ipc
def parse(kind, text):
    if kind == "string":
        return text
    if kind == "bool":
        return {"true": True, "false": False}[text]
    if text == "":
        return None
    return int(text) if kind.startswith("uint") else float(text)
def same(a, b):
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
with open(sys.argv[1], newline="") as f:
    rows = list(csv.reader(f))
header, rows = rows[0], rows[1:]
for path in sys.argv[2:]:
    if path.endswith(".parquet"):
        table = pq.read_table(path)
        meta = pq.ParquetFile(path).metadata
        groups = meta.num_row_groups
        kv = meta.metadata[b"markerscope.rows.schema_version"]
    else:
        table = feather.read_table(path)
        groups = ipc.open_file(path).num_record_batches
        kv = table.schema.metadata[b"markerscope.rows.schema_version"]
    assert kv == b"2", kv
    assert table.schema.metadata[b"markerscope.rows.schema_version"] == b"2"
    assert table.column_names == header, (table.column_names, header)
    # A row group per 3 frames, those without a row (this scene's first and last) making none.
    assert groups == len({int(r[0]) // 3 for r in rows}), (path, groups)
    kinds = [str(t) for t in table.schema.types]
    assert kinds[0] == "uint64" and kinds[7] == "double" and kinds[11] == "string", kinds
    assert header[-1] == "damaged" and kinds[-1] == "bool", kinds
    got = table.to_pylist()
    assert len(got) == len(rows), (path, len(got), len(rows))
    for i, (g, r) in enumerate(zip(got, rows)):
        for name, kind, text in zip(header, kinds, r):
            want = parse(kind, text)
            assert same(g[name], want), (path, i, name, g[name], text)
print("ok", len(rows))
"#;
    let mut command = Command::new(&python);
    command.args(["-c", script, csv.to_str().unwrap()]);
    command.args(files.iter().map(|f| f.to_str().unwrap()));
    let run = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && stdout.starts_with("ok "),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
}

/// The Python that reads the columnar files (`$PYTHON`, else python3); fails (never skips)
/// without pyarrow.
fn python_with_pyarrow() -> String {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let has_pyarrow = Command::new(&python)
        .args(["-c", "import pyarrow.parquet"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_pyarrow,
        "this test needs pyarrow in python3: run `bash .ci/install` (CI installs it)"
    );
    python
}

/// `--tracks` to a Parquet or an Arrow file: read by pyarrow, the summary CSV's columns and
/// every row equal to the CSV's, in its order (floats exactly), the integer columns uint64,
/// the schema version in the metadata.
#[test]
fn tracks_parquet_and_arrow_equal_the_tracks_csv_row_for_row() {
    let python = python_with_pyarrow();
    let dir = tempfile::tempdir().unwrap();
    let run = |tracks: &Path| {
        let run = markerscope(&[
            "analyze",
            "synthetic",
            "--size",
            "640x360",
            "--max-frames",
            "60",
            "--backend",
            "cpu",
            "--out",
            dir.path().join("rows.csv").to_str().unwrap(),
            "--tracks",
            tracks.to_str().unwrap(),
        ]);
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
    };
    let files = ["tracks.csv", "tracks.parquet", "tracks.arrow"].map(|f| dir.path().join(f));
    for file in &files {
        run(file);
    }
    let script = r#"
import csv, sys
import pyarrow.parquet as pq, pyarrow.feather as feather
with open(sys.argv[1], newline="") as f:
    rows = list(csv.reader(f))
header, rows = rows[0], rows[1:]
assert len(rows) > 5, len(rows)
for path in sys.argv[2:]:
    table = pq.read_table(path) if path.endswith(".parquet") else feather.read_table(path)
    assert table.schema.metadata[b"markerscope.tracks.schema_version"] == b"1", table.schema.metadata
    if path.endswith(".parquet"):
        assert pq.ParquetFile(path).metadata.metadata[b"markerscope.tracks.schema_version"] == b"1"
    assert table.column_names == header, (table.column_names, header)
    kinds = [str(t) for t in table.schema.types]
    assert kinds == ["uint64"] * 4 + ["double"] * 4, kinds
    got = table.to_pylist()
    assert len(got) == len(rows), (path, len(got), len(rows))
    for i, (g, r) in enumerate(zip(got, rows)):
        for k, (name, text) in enumerate(zip(header, r)):
            want = int(text) if k < 4 else float(text)
            assert g[name] == want, (path, i, name, g[name], text)
print("ok", len(rows))
"#;
    let run = Command::new(&python)
        .args(["-c", script])
        .args(files.iter().map(|f| f.to_str().unwrap()))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && stdout.starts_with("ok "),
        "{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
}

/// A full device in every format: the run stops with the device's name and the reason.
#[cfg(target_os = "linux")]
#[test]
fn a_full_device_stops_every_format_with_the_reason() {
    for format in ["csv", "jsonl", "parquet", "arrow"] {
        let run = markerscope(
            &[
                &SCENE[..],
                &["cpu", "--out", "/dev/full", "--format", format],
            ]
            .concat(),
        );
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{format}: {stderr}");
        assert!(
            stderr.contains("/dev/full") && stderr.contains("No space left on device"),
            "{format}: {stderr}"
        );
    }
}

/// Standard output into a pipe whose reader goes away: the run stops with the reason
/// instead of analysing on for nobody, and says how many rows the pipe took.
#[cfg(unix)]
#[test]
fn a_closed_pipe_stops_the_run_with_the_reason() {
    let mut child = markerscope_command(&[
        "analyze",
        "synthetic:random",
        "--size",
        "640x360",
        "--max-frames",
        "100000",
        "--backend",
        "cpu",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Read a little, then close the pipe.
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 4096];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    drop(stdout);
    let run = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("<stdout>")
            && stderr.contains("Broken pipe")
            && stderr.contains("rows were written before it"),
        "{stderr}"
    );
}

/// A file output that fails part way keeps nothing under the final name, in the columnar
/// formats too (the CSV's case is in `faults`).
#[cfg(target_os = "linux")]
#[test]
fn a_failed_parquet_file_leaves_nothing_behind() {
    use crate::util::fails_past_a_file_size_limit;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rows.parquet");
    let command = markerscope_command(&[
        "analyze",
        "synthetic:random",
        "--size",
        "640x360",
        "--max-frames",
        "40",
        "--backend",
        "cpu",
        "--row-group-frames",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    fails_past_a_file_size_limit(command, &out, dir.path());
}
