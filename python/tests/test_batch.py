"""markerscope.batch: files analysed on a Dask cluster of 2 local workers into Parquet, checked
against the CLI's CSV; resume, a worker killed part way, damaged and bad inputs."""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from test_analyze import cli_binary, read_csv

try:
    import pyarrow.parquet as pq
    from distributed import Client, LocalCluster
except ImportError as e:
    pytest.fail(f"the batch tests need dask, distributed and pyarrow ({e}): bash .ci/install installs them",
                pytrace=False)

from markerscope.batch import analyze_files
from markerscope.batch.__main__ import main, options, parser
from markerscope.batch.cluster import local_cluster, worker_env
from markerscope.batch.task import analyze_file, bind_device

OPTIONS = {"threshold": "fixed:127", "backend": "cpu"}
CLI_FLAGS = ["--threshold", "fixed:127", "--backend", "cpu"]


def make_clip(path, start, frames):
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-ss", str(start),
                    "-frames:v", str(frames), "-c:v", "ffv1", "-pix_fmt", "gray", str(path)], check=True)
    return path


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    """A dozen short clips, two of them sharing a stem (a/x.mkv, b/x.mkv), and a damaged file."""
    if shutil.which("ffmpeg") is None:
        pytest.fail("the ffmpeg command is needed to make the test clips: bash .ci/install installs it")
    root = tmp_path_factory.mktemp("clips")
    paths = [make_clip(root / "a" / "x.mkv", 0, 6), make_clip(root / "b" / "x.mkv", 1, 6)]
    paths += [make_clip(root / f"clip{i:02}.mkv", 0.4 * i, 6) for i in range(10)]
    damaged = root / "damaged.mkv"
    damaged.write_bytes(b"\x1a\x45\xdf\xa3 not a video" * 100)
    return paths, damaged


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as c:
            yield c


def cli_tables(paths, out):
    """``markerscope analyze FILE --tracks`` of each path (all at once): {path: (rows, tracks)}."""
    runs = {}
    for i, path in enumerate(paths):
        rows, tracks = out / f"{i}.csv", out / f"{i}.tracks.csv"
        cmd = [str(cli_binary()), "analyze", str(path), "--out", str(rows), "--tracks", str(tracks), *CLI_FLAGS]
        runs[path] = (subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE), rows, tracks)
    result = {}
    for path, (run, rows, tracks) in runs.items():
        assert run.wait() == 0, run.stderr.read()
        result[path] = (read_csv(rows), sorted(read_csv(tracks), key=lambda r: int(r["track"])))
    return result


def assert_table_equals_csv(parquet, expected):
    table = pq.read_table(parquet)
    rows = table.to_pylist()
    assert len(rows) == len(expected) and len(rows) > 0, parquet
    assert table.column_names == list(expected[0])
    for i, (ours, theirs) in enumerate(zip(rows, expected)):
        for name, value in ours.items():
            text = theirs[name]
            if name == "file":
                assert value == text, (parquet, i, name, value, text)
            elif text == "":
                assert value is None, (parquet, i, name, value)
            elif isinstance(value, bool):
                assert table.schema.field(name).type == "bool" and value == (text == "true"), (parquet, i, name, value, text)
            elif isinstance(value, float):
                assert value == float(text), (parquet, i, name, value, text)
            elif isinstance(value, int):
                assert table.schema.field(name).type == "uint64" and value == int(text), (parquet, i, name, value, text)
            else:
                assert value == text, (parquet, i, name, value, text)


def manifest_of(out):
    return json.loads((out / "_manifest.json").read_text())["files"]


def test_rows_equal_the_cli_and_a_second_run_redoes_nothing(clips, client, tmp_path):
    paths, damaged = clips
    out = tmp_path / "out"
    report = analyze_files(paths + [damaged], out, client, **OPTIONS)
    assert sorted(report.analysed) == sorted(map(str, paths)) and report.skipped == []
    assert list(report.failed) == [str(damaged)] and "damaged.mkv" in report.failed[str(damaged)]

    manifest = manifest_of(out)
    assert manifest[str(damaged)]["status"] == "failed" and manifest[str(damaged)]["error"]
    # One output name per input: the two x.mkv get the stem and a hash of their path each.
    names = [manifest[str(p)]["output"] for p in paths]
    assert len(set(names)) == len(paths) and all(n.startswith("x-") for n in names[:2]) and names[2] == "clip00"
    expected = cli_tables(paths, tmp_path)
    for path in paths:
        entry = manifest[str(path)]
        rows, tracks = expected[path]
        assert_table_equals_csv(out / f"{entry['output']}.parquet", rows)
        assert_table_equals_csv(out / f"{entry['output']}.tracks.parquet", tracks)
        assert entry["status"] == "done" and entry["rows"] == len(rows) and entry["frames"] == 6
        assert entry["skipped_frames"] == 0 and entry["settings"] == OPTIONS and entry["device"].startswith("cpu")
        assert entry["size"] == path.stat().st_size and entry["content_hash"].startswith("sha256:")
        assert entry["worker"] and entry["markerscope_version"]
        meta = pq.read_schema(out / f"{entry['output']}.parquet").metadata
        assert json.loads(meta[b"markerscope.settings"]) == OPTIONS and meta[b"markerscope.rows.schema_version"] == b"2"
        assert pq.read_schema(out / f"{entry['output']}.tracks.parquet").metadata[b"markerscope.tracks.schema_version"] == b"1"
    assert sorted(os.listdir(out)) == sorted(["_manifest.json"] + [f"{n}{s}" for n in names
                                                                    for s in (".parquet", ".tracks.parquet")])

    # Again: the done inputs are skipped (their files untouched), the damaged one is tried again.
    written = {n: (out / f"{n}.parquet").stat().st_mtime_ns for n in names}
    again = analyze_files(paths + [damaged], out, client, **OPTIONS)
    assert again.analysed == [] and sorted(again.skipped) == sorted(map(str, paths))
    assert list(again.failed) == [str(damaged)] and again.frames == 0
    assert {n: (out / f"{n}.parquet").stat().st_mtime_ns for n in names} == written

    # A changed input is redone; other settings are refused unless asked to overwrite.
    os.utime(paths[3], ns=(time.time_ns(), time.time_ns()))
    changed = analyze_files(paths, out, client, **OPTIONS)
    assert changed.analysed == [str(paths[3])] and len(changed.skipped) == len(paths) - 1
    with pytest.raises(FileExistsError, match="other settings.*overwrite"):
        analyze_files(paths[:1], out, client, threshold="fixed:100", backend="cpu")
    replaced = analyze_files(paths[:1], out, client, threshold="fixed:100", backend="cpu", overwrite=True)
    assert replaced.analysed == [str(paths[0])] and list(manifest_of(out)) == [str(paths[0])]
    assert not (out / "clip00.parquet").exists()


def test_a_workers_files_are_the_clis_tables(clips, tmp_path):
    """A worker writes through the engine's writer: its rows are the table of ``markerscope
    analyze FILE --out F.parquet`` (compared table for table by pyarrow: the metadata differs,
    the batch adds its keys), its summary that of ``--tracks F.parquet`` ordered by track ID;
    both carry the batch's metadata. A damaged input leaves nothing behind."""
    paths, damaged = clips
    path = paths[2]
    cli_rows, cli_tracks = tmp_path / "cli.parquet", tmp_path / "cli.tracks.parquet"
    subprocess.run([str(cli_binary()), "analyze", str(path), *CLI_FLAGS, "--out", str(cli_rows),
                    "--tracks", str(cli_tracks)], check=True, capture_output=True)
    out = tmp_path / "out"
    out.mkdir()
    job = {"input": str(path), "out_dir": str(out), "output": "clip", "options": OPTIONS, "settings": OPTIONS,
           "version": "9.9"}
    entry = analyze_file(job)
    assert entry["status"] == "done" and entry["rows"] == pq.read_metadata(cli_rows).num_rows > 0
    assert entry["frames"] == 6 and entry["skipped_frames"] == 0 and entry["algorithm"]
    assert pq.read_table(out / "clip.parquet").equals(pq.read_table(cli_rows))
    tracks = pq.read_table(cli_tracks)
    assert tracks.num_rows > 0 and pq.read_table(out / "clip.tracks.parquet").equals(tracks.sort_by("track"))
    for name, version in [("clip.parquet", b"markerscope.rows.schema_version"),
                          ("clip.tracks.parquet", b"markerscope.tracks.schema_version")]:
        meta = pq.read_metadata(out / name).metadata
        assert json.loads(meta[b"markerscope.settings"]) == OPTIONS and meta[b"markerscope.version"] == b"9.9"
        assert meta[b"markerscope.source"] == str(path).encode() and version in meta
    assert sorted(os.listdir(out)) == ["clip.parquet", "clip.tracks.parquet"]

    failed = analyze_file({**job, "input": str(damaged), "output": "damaged"})
    assert failed["status"] == "failed" and "damaged.mkv" in failed["error"] and failed["frames"] == 0
    assert sorted(os.listdir(out)) == ["clip.parquet", "clip.tracks.parquet"]


def test_bad_requests_are_refused_before_any_work(clips, tmp_path):
    paths, _ = clips
    out = tmp_path / "out"
    with pytest.raises(FileNotFoundError, match=r"2 of the inputs cannot be read(.|\n)*nope1.mp4(.|\n)*nope2.mp4"):
        analyze_files([paths[0], tmp_path / "nope1.mp4", tmp_path / "nope2.mp4"], out)
    with pytest.raises(TypeError, match="thresh: not an option of analyze"):
        analyze_files(paths[:1], out, thresh="otsu")
    with pytest.raises(TypeError, match="pandas: not an option of a batch"):
        analyze_files(paths[:1], out, pandas=True)
    with pytest.raises(ValueError, match="invalid threshold"):
        analyze_files(paths[:1], out, threshold="nope")
    with pytest.raises(ValueError, match="backend: unknown backend"):
        analyze_files(paths[:1], out, backend="tpu")
    with pytest.raises(ValueError, match="workers: only for the local cluster"):
        analyze_files(paths[:1], out, "tcp://127.0.0.1:9", workers=2)
    assert not out.exists()
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError, match="not a folder"):
        analyze_files(paths[:1], tmp_path / "file")
    # A file of another run (not in the manifest) is not overwritten.
    out.mkdir()
    (out / "clip00.parquet").write_bytes(b"someone else's")
    with pytest.raises(FileExistsError, match="clip00.parquet exists and is not in _manifest.json"):
        analyze_files([paths[2]], out)
    started = time.time()
    with pytest.raises(ConnectionError, match="no Dask scheduler answers at tcp://127.0.0.1:9"):
        analyze_files([paths[2]], tmp_path / "elsewhere", "tcp://127.0.0.1:9")
    assert time.time() - started < 15


def test_the_command(clips, client, tmp_path, capsys):
    paths, _ = clips
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    run = subprocess.run([sys.executable, "-m", "markerscope.batch", *map(str, paths[2:4]), "--out", str(out),
                          "--scheduler", client.scheduler.address, "--threshold", "fixed:127", "--backend", "cpu"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "2/2 files, 0 failed, 12 frames" in run.stderr and "2 analysed, 0 already done, 0 failed" in run.stdout
    assert manifest_of(out)[str(paths[2])]["settings"] == OPTIONS
    assert main([str(tmp_path / "nope.mp4"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "markerscope-batch: error: 1 of the inputs cannot be read" in err and "nope.mp4: not found" in err
    assert main([str(paths[2]), "--out", str(out), "--option", "thresh=1"]) == 2
    assert "thresh: not an option of analyze" in capsys.readouterr().err
    assert options(parser().parse_args(["a.mp4", "--out", "o", "--decoder", "cpu"])) == {"decoder": "cpu"}
    with pytest.raises(SystemExit):
        parser().parse_args(["a.mp4", "--out", "o", "--decoder", "vaapi"])


def test_a_local_cluster_gives_each_worker_one_gpu(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    monkeypatch.delenv("RAYON_NUM_THREADS", raising=False)
    with pytest.raises(ValueError, match="3 asked for, but this machine has 2 GPU"):
        local_cluster(3)
    with pytest.raises(ValueError, match="workers: expected a number of workers"):
        local_cluster(0)
    with local_cluster() as cluster, Client(cluster) as c:
        # (A lambda: a bound method would carry this process's os.environ along.)
        assert sorted(c.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES")).values()) == ["3", "5"]
        # Each engine's thread pool gets its worker's share of the cores, not a thread per core.
        share = str(max(1, (os.cpu_count() or 1) // 2))
        assert list(c.run(lambda: os.environ.get("RAYON_NUM_THREADS")).values()) == [share, share]
        assert all(w["resources"] == {"GPU": 1} and w["nthreads"] == 1 for w in c.scheduler_info()["workers"].values())
        bound = c.gather([c.submit(bind_device, {}, pure=False, resources={"GPU": 1}) for _ in range(4)])
    assert {options["backend"] for options, _, _ in bound} == {"cuda"}
    assert {device.split()[0] for _, _, device in bound} <= {"cuda:3", "cuda:5"}
    # A thread count the caller sets is the workers' own.
    monkeypatch.setenv("RAYON_NUM_THREADS", "3")
    assert worker_env(4) == {}
    monkeypatch.delenv("RAYON_NUM_THREADS")
    assert worker_env(10**6) == {"RAYON_NUM_THREADS": "1"}
    # Settings that name a backend keep it.
    assert bind_device({"backend": "cpu"})[0] == {"backend": "cpu"}


def test_a_worker_killed_mid_file_loses_nothing(clips, client, tmp_path):
    """Last: the killed worker is restarted by its nanny, which may take a while on 2 cores."""
    paths, _ = clips
    long = make_clip(tmp_path / "long.mkv", 0, 250)
    out = tmp_path / "out"
    pids = client.run(os.getpid)
    result, seen = {}, {}

    def run():
        result["report"] = analyze_files([long] + paths, out, client, **OPTIONS)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.time() + 30
    while not seen and time.time() < deadline:
        if out.exists():
            seen.update({f: f.split(".")[-2].split("-")[0] for f in os.listdir(out) if f.startswith(".long.parquet.")})
        time.sleep(0.002)
    assert seen, "the long clip's analysis was not seen under way"
    killed_pid = int(next(iter(seen.values())))
    killed = next(address for address, pid in pids.items() if pid == killed_pid)
    os.kill(killed_pid, signal.SIGKILL)
    thread.join(60)
    assert not thread.is_alive()
    report = result["report"]
    assert report.failed == {} and sorted(report.analysed) == sorted(map(str, [long] + paths))
    manifest = manifest_of(out)
    assert killed not in manifest[str(long)]["worker"], "the long clip was not redone on another worker"
    # Every input once: one rows and one tracks file each, no temporary file left.
    names = [manifest[str(p)]["output"] for p in [long] + paths]
    assert sorted(os.listdir(out)) == sorted(["_manifest.json"] + [f"{n}{s}" for n in names
                                                                    for s in (".parquet", ".tracks.parquet")])
    rows, tracks = cli_tables([long], tmp_path)[long]
    assert_table_equals_csv(out / "long.parquet", rows)
    assert_table_equals_csv(out / "long.tracks.parquet", tracks)
