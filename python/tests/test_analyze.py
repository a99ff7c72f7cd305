"""analyze: the CLI's analysis from a script, checked against the CLI's own CSV."""

import csv
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import markerscope as ms

ROOT = Path(__file__).resolve().parents[2]


def cli_binary():
    path = Path(os.environ.get("MARKERSCOPE_BIN", ROOT / "target" / "ci" / "markerscope"))
    if not path.exists():
        pytest.fail(f"{path} not found: build it with `cargo build --profile ci` (or set MARKERSCOPE_BIN)")
    return path


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    if shutil.which("ffmpeg") is None:
        pytest.fail("the ffmpeg command is needed to make the test clip: bash .ci/install installs it")
    path = tmp_path_factory.mktemp("clip") / "clip.mkv"
    subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25",
                    "-frames:v", "15", "-c:v", "ffv1", "-pix_fmt", "gray", str(path)], check=True)
    return path


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("options, flags", [
    ({"threshold": "fixed:127"}, ["--threshold", "fixed:127"]),
    ({"threshold": "otsu", "connectivity": 4, "invert": True}, ["--threshold", "otsu", "--connectivity", "4", "--invert"]),
])
def test_rows_equal_the_cli_csv(clip, tmp_path, options, flags):
    out = tmp_path / "cli.csv"
    subprocess.run([str(cli_binary()), "analyze", str(clip), "--backend", "cpu", "--out", str(out), *flags],
                   check=True, capture_output=True)
    expected = read_csv(out)
    with ms.analyze(str(clip), backend="cpu", **options) as frames:
        rows = np.concatenate(list(frames))
    assert len(expected) > 100 and len(rows) == len(expected)
    assert list(rows.dtype.names) == ms.CSV_COLUMNS
    for i, (ours, theirs) in enumerate(zip(rows, expected)):
        for name in ms.CSV_COLUMNS:
            value, text = ours[name], theirs[name]
            if name == "file":
                assert value == text, (i, name)
            elif text == "":
                assert np.isnan(value), (i, name)
            elif isinstance(value, np.bool_):
                assert value == (text == "true"), (i, name, value, text)
            else:
                assert value == type(value)(float(text)) if isinstance(value, float) else value == int(text), (i, name, value, text)


def test_frames_come_in_order_with_track_ids(clip):
    with ms.analyze(str(clip), backend="cpu", max_frames=5, threshold="fixed:127") as frames:
        results, indices = [], []
        for rows in frames:
            results.append(rows)
            indices.append(frames.last[0])
        assert frames.algorithm == "lsl" and "clip.mkv" in frames.source
    assert indices == [0, 1, 2, 3, 4]
    assert all(len(r) > 0 and (r["frame"] == i).all() and (r["track"] >= 1).all() for i, r in zip(indices, results))
    # A frame without components still comes, empty, with its index.
    with ms.analyze(str(clip), backend="cpu", max_frames=2, threshold="fixed:255") as frames:
        assert [(len(rows), frames.last[0]) for rows in frames] == [(0, 0), (0, 1)]


def test_pandas_frames(clip):
    pandas = pytest.importorskip("pandas")
    with ms.analyze(str(clip), backend="cpu", max_frames=1, threshold="fixed:127", pandas=True) as frames:
        df = next(frames)
    assert isinstance(df, pandas.DataFrame) and list(df.columns) == ms.CSV_COLUMNS and len(df) > 0


def test_synthetic_source_and_bad_requests(tmp_path):
    with ms.analyze("synthetic", max_frames=3, size=(320, 180), backend="cpu") as frames:
        assert len(list(frames)) == 3
    with pytest.raises(ValueError, match="never ends: give max_frames=N"):
        ms.analyze("synthetic")
    with pytest.raises(OSError, match="missing.mp4"):
        ms.analyze(str(tmp_path / "missing.mp4"))
    with pytest.raises(ValueError, match="invalid threshold"):
        ms.analyze("synthetic", max_frames=1, threshold="nope")


def test_analyze_to_file_writes_what_the_cli_writes(clip, tmp_path):
    """The engine's writers from Python: without metadata the rows' and the summary's Parquet
    files are the CLI's byte for byte; with metadata the same tables (pyarrow), the keys added."""
    pq = pytest.importorskip("pyarrow.parquet")

    flags = ["--backend", "cpu", "--threshold", "fixed:127"]
    cli_rows, cli_tracks = tmp_path / "cli.parquet", tmp_path / "cli.tracks.parquet"
    subprocess.run([str(cli_binary()), "analyze", str(clip), *flags, "--out", str(cli_rows), "--tracks", str(cli_tracks)],
                   check=True, capture_output=True)
    rows, tracks = tmp_path / "rows.parquet", tmp_path / "tracks.parquet"
    done = ms.analyze_to_file(clip, rows, tracks=tracks, backend="cpu", threshold="fixed:127")
    assert rows.read_bytes() == cli_rows.read_bytes() and tracks.read_bytes() == cli_tracks.read_bytes()
    assert done["frames"] == 15 and done["rows"] == pq.read_metadata(rows).num_rows > 100
    assert done["stopped_by"] is None and done["skipped_frames"] == done["damaged_frames"] == 0 and done["skipped"] == []
    assert done["tracks"] >= pq.read_metadata(tracks).num_rows > 0 and done["algorithm"] and "clip.mkv" in done["source"]

    meta = {"markerscope.source": str(clip), "lab": "é,x"}
    again = ms.analyze_to_file(str(clip), rows, tracks=tracks, metadata=meta, backend="cpu", threshold="fixed:127")
    assert again["rows"] == done["rows"]
    for ours, theirs, version in [(rows, cli_rows, b"markerscope.rows.schema_version"),
                                  (tracks, cli_tracks, b"markerscope.tracks.schema_version")]:
        assert pq.read_table(ours).equals(pq.read_table(theirs))
        kv = pq.read_metadata(ours).metadata
        assert kv[b"lab"] == "é,x".encode() and kv[b"markerscope.source"] == str(clip).encode() and version in kv
        assert pq.read_schema(ours).metadata[b"lab"] == "é,x".encode()
        assert b"lab" not in pq.read_metadata(theirs).metadata
    assert sorted(os.listdir(tmp_path)) == ["cli.parquet", "cli.tracks.parquet", "rows.parquet", "tracks.parquet"]


def test_the_decoder_is_chosen_per_call(clip, tmp_path):
    """``decoder`` as ``--decoder``: the same rows whichever decodes; NVDEC, which cannot decode
    this FFV1 clip (or is not there), falls back to the CPU and says so."""
    flags = {"backend": "cpu", "threshold": "fixed:127"}
    ms.analyze_to_file(clip, tmp_path / "auto.csv", **flags)
    for decoder in ("cpu", "nvdec", "NVDEC"):
        done = ms.analyze_to_file(clip, tmp_path / f"{decoder}.csv", decoder=decoder, **flags)
        assert (tmp_path / f"{decoder}.csv").read_bytes() == (tmp_path / "auto.csv").read_bytes()
        assert done["frames"] == 15
        assert any("NVDEC" in n for n in done["notices"]) == (decoder != "cpu")
    with ms.analyze(str(clip), decoder="cpu", **flags) as frames:
        assert len(list(frames)) == 15
    with pytest.raises(ValueError, match="decoder: unknown decoder 'vaapi' \\(auto, cpu, nvdec\\)"):
        ms.analyze_to_file(clip, tmp_path / "x.csv", decoder="vaapi", **flags)
    with pytest.raises(TypeError, match="decoder: expected 'auto', 'cpu' or 'nvdec', got 1"):
        ms.analyze(str(clip), decoder=1, **flags)


def test_analyze_to_file_refuses_bad_requests(tmp_path):
    out = tmp_path / "rows.parquet"
    with pytest.raises(OSError, match="missing.mp4"):
        ms.analyze_to_file(tmp_path / "missing.mp4", out)
    with pytest.raises(TypeError, match="thresh: not an option of analyze_to_file"):
        ms.analyze_to_file("synthetic", out, max_frames=1, thresh="otsu")
    with pytest.raises(TypeError, match="pandas: not an option of analyze_to_file"):
        ms.analyze_to_file("synthetic", out, max_frames=1, pandas=True)
    with pytest.raises(ValueError, match="invalid threshold"):
        ms.analyze_to_file("synthetic", out, max_frames=1, threshold="nope")
    with pytest.raises(ValueError, match="never ends: give max_frames=N"):
        ms.analyze_to_file("synthetic", out)
    with pytest.raises(TypeError, match="metadata: keys and values must be str"):
        ms.analyze_to_file("synthetic", out, max_frames=1, metadata={"lab": 1})
    with pytest.raises(TypeError, match="out: expected a file path"):
        ms.analyze_to_file("synthetic", 3, max_frames=1)
    with pytest.raises(TypeError, match="source: expected a str path"):
        ms.analyze_to_file(np.zeros((4, 4), np.uint8), out, max_frames=1)
    with pytest.raises(OSError, match="does not exist"):
        ms.analyze_to_file("synthetic", tmp_path / "nowhere" / "rows.parquet", max_frames=1, backend="cpu")
    assert os.listdir(tmp_path) == []
