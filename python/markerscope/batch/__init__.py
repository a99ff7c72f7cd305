"""Batch analysis of many files on a Dask cluster, one Parquet file per input.

``analyze_files(paths, out_dir)`` analyses each file as one Dask task, as ``markerscope
analyze FILE`` does, and writes ``out_dir/<stem>.parquet`` (the CSV export's rows and
columns), ``<stem>.tracks.parquet`` (the ``--tracks`` summary, one row per track) and
``_manifest.json`` (per input: its size, time and content hash, rows, frames, skipped frames,
the settings, the version, the worker and the device). A second run skips the inputs whose
entry still matches; a worker lost part way loses nothing (its input is redone elsewhere and
written once); a damaged input is reported in the manifest and the others go on.

The workers must see the inputs and the output folder under the same paths (one machine, or
a shared file system). From the shell: ``markerscope-batch FILES… --out DIR`` (or ``python -m
markerscope.batch``).
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import time
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional

from .manifest import MANIFEST, ROWS_SUFFIX, TEMP_PATTERN, TRACKS_SUFFIX, Manifest, check_inputs, output_names
from .task import GPU_RESOURCE, analyze_file

__all__ = ["analyze_files", "BatchReport", "Progress"]

#: Times a task is run again after an error in writing its output (a lost worker is redone
#: by the scheduler, up to its ``distributed.scheduler.allowed-failures``).
RETRIES = 2
_BACKENDS = ("auto", "cpu", "cuda", "gpu")
#: Options not tried on the synthetic source before the run: the backend and algorithm are the
#: workers' (checked above), the others depend on the inputs' frames.
_CHECKED_PER_INPUT = {"backend", "algorithm", "max_frames", "masks", "world_points", "calibration", "world_units"}
#: ``analyze`` parameters that make no sense for a batch of files.
_NOT_BATCH_OPTIONS = {"source": "the inputs are the paths", "pandas": "the rows go to Parquet",
                      "size": "it sets the size of synthetic frames"}


class BatchReport(NamedTuple):
    """What a run did: the inputs analysed now, those skipped (done by an earlier run with
    these settings and unchanged), those that failed (input → reason), the frames analysed
    now, the seconds taken and the manifest's path."""

    analysed: List[str]
    skipped: List[str]
    failed: Dict[str, str]
    frames: int
    seconds: float
    manifest: str


class Progress(NamedTuple):
    """Handed to ``progress`` after each input: inputs finished of ``total`` (skipped ones
    included), failed ones, frames analysed and seconds since the work began."""

    finished: int
    total: int
    failed: int
    frames: int
    seconds: float

    @property
    def frames_per_second(self) -> float:
        return self.frames / self.seconds if self.seconds > 0 else 0.0


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("markerscope")
    except Exception:  # noqa: BLE001 — a source tree without installed metadata
        return "unknown"


def _settings(options: Dict[str, Any]) -> Dict[str, Any]:
    """The options, checked (names, backend, algorithm, threshold…: before any work) and as
    JSON values (what the manifest and the Parquet metadata record)."""
    from .. import algorithms, analyze

    known = set(inspect.signature(analyze).parameters) - set(_NOT_BATCH_OPTIONS)
    for name in options:
        if name in _NOT_BATCH_OPTIONS:
            raise TypeError(f"{name}: not an option of a batch ({_NOT_BATCH_OPTIONS[name]})")
        if name not in known:
            raise TypeError(f"{name}: not an option of analyze; expected one of {', '.join(sorted(known))}")
    backend = options.get("backend", "auto")
    if not isinstance(backend, str) or backend.lower() not in _BACKENDS:
        raise ValueError(f"backend: unknown backend {backend!r}; expected 'auto', 'cpu' or 'cuda'")
    algorithm = options.get("algorithm")
    if algorithm is not None and algorithm not in {a["name"] for a in algorithms()}:
        raise ValueError(f"algorithm: unknown algorithm {algorithm!r}; expected one of "
                         f"{', '.join(a['name'] for a in algorithms())}")
    # The other options are checked by opening the synthetic source with them on the CPU; those
    # that depend on the inputs' frames (masks, world mapping) are checked by each input's task.
    trial = {k: v for k, v in options.items() if k not in _CHECKED_PER_INPUT}
    with analyze("synthetic", max_frames=1, size=(64, 48), backend="cpu", **trial):
        pass
    try:
        return json.loads(json.dumps(options, sort_keys=True, default=_json_value))
    except (TypeError, ValueError) as e:
        raise TypeError(f"options: every value must be recordable in the manifest (JSON): {e}") from None


def _json_value(value: Any) -> Any:
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{value!r} ({type(value).__name__}) is not a JSON value")


def _prepare_out_dir(out_dir: Any) -> str:
    try:
        out = os.path.abspath(os.fspath(out_dir))
    except TypeError:
        raise TypeError(f"out_dir: expected a folder path (str or os.PathLike), got {out_dir!r}") from None
    if os.path.exists(out) and not os.path.isdir(out):
        raise NotADirectoryError(f"out_dir: {out} exists and is not a folder")
    os.makedirs(out, exist_ok=True)
    if not os.access(out, os.W_OK | os.X_OK):
        raise PermissionError(f"out_dir: {out} is not writable")
    return out


def _refuse_other_runs(out: str, manifest: Manifest, names: Dict[str, str], settings: Dict[str, Any]) -> None:
    other = manifest.other_settings(settings)
    if other is not None:
        raise FileExistsError(
            f"{out} holds another run's results with other settings ({other['input']} with "
            f"{json.dumps(other['settings'], sort_keys=True)}; now {json.dumps(settings, sort_keys=True)}): "
            "choose another folder, or overwrite them (overwrite=True, --overwrite)")
    recorded = {e["output"] for e in manifest.entries.values()}
    for name in names.values():
        for suffix in (ROWS_SUFFIX, TRACKS_SUFFIX):
            if name not in recorded and os.path.exists(os.path.join(out, name + suffix)):
                raise FileExistsError(
                    f"{os.path.join(out, name + suffix)} exists and is not in {MANIFEST}: another run's file; "
                    "choose another folder, or overwrite it (overwrite=True, --overwrite)")


def _remove_temporaries(out: str) -> None:
    """What a lost worker left half written (``TEMP_PATTERN``: its work folders); no task of the
    run is running."""
    for entry in os.scandir(out):
        if TEMP_PATTERN.match(entry.name):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                try:
                    os.remove(entry.path)
                except FileNotFoundError:
                    pass


def _client(client: Any, workers: Optional[int]):
    """(client, what to close after the run)."""
    from .cluster import connect, local_cluster

    if client is None:
        cluster = local_cluster(workers)
        from distributed import Client

        c = Client(cluster)
        return c, [c, cluster]
    if isinstance(client, str):
        c = connect(client)
        return c, [c]
    return client, []


def _uses_gpus(client: Any) -> bool:
    workers = client.scheduler_info().get("workers", {})
    return any(w.get("resources", {}).get(GPU_RESOURCE, 0) >= 1 for w in workers.values())


def analyze_files(
    paths: Iterable[Any],
    out_dir: Any,
    client: Any = None,
    *,
    overwrite: bool = False,
    workers: Optional[int] = None,
    progress: Optional[Callable[[Progress], None]] = None,
    **options: Any,
) -> BatchReport:
    """Analyses every file of ``paths`` (videos, images or folders of images), each as one
    Dask task, into ``out_dir``; returns a ``BatchReport``.

    ``options`` are ``analyze``'s (threshold, connectivity, invert, backend, algorithm,
    max_frames, subpixel, and the others it takes) and apply to every file; they are checked
    before any work. Without ``backend``, a worker with a ``GPU`` resource analyses on its
    GPU and the others on the CPU; when any worker has a GPU, the inputs go to GPU workers only.

    ``client``: a ``distributed.Client``, a scheduler address (``"tcp://host:8786"``; one that
    does not answer within seconds is a ``ConnectionError``), or None for a cluster on this
    machine (``workers`` workers: one per GPU, or CPU workers; it is closed at the end).

    Outputs: ``<stem>.parquet`` and ``<stem>.tracks.parquet`` per input (stems that two inputs
    share get 8 hex digits of the path's hash) and ``_manifest.json``. Inputs whose manifest
    entry matches (same settings, size and modification time, files there) are skipped; an
    output folder holding another run's files or entries with other settings is refused
    (``FileExistsError``) unless ``overwrite``. Missing or unreadable paths are listed in one
    ``FileNotFoundError`` before any work. An input that cannot be analysed is recorded as
    failed in the manifest (and in the report) and the run goes on; it is tried again by the
    next run. ``progress(Progress)`` is called after each input.
    """
    if client is not None and workers is not None:
        raise ValueError("workers: only for the local cluster (client=None); the scheduler's cluster has its own")
    inputs = check_inputs(paths)
    settings = _settings(options)
    out = _prepare_out_dir(out_dir)
    manifest = Manifest(out)
    names = output_names(inputs, manifest.entries)
    if not overwrite:
        _refuse_other_runs(out, manifest, names, settings)
    todo: List[str] = []
    skipped: List[str] = []
    for i in inputs:
        (skipped if manifest.matches(i, settings, out) else todo).append(i.path)
    report = BatchReport([], skipped, {}, 0, 0.0, manifest.path)
    started = time.time()

    def tell() -> None:
        if progress is not None:
            progress(Progress(len(skipped) + len(report.analysed) + len(report.failed), len(inputs),
                              len(report.failed), report.frames, time.time() - started))

    tell()
    if not todo:
        if overwrite:
            manifest.forget_other_settings(settings, out)
        return report._replace(seconds=time.time() - started)
    from distributed import as_completed

    # Connected (or the local cluster up) before anything in the folder changes.
    c, to_close = _client(client, workers)
    if overwrite:
        manifest.forget_other_settings(settings, out)
    _remove_temporaries(out)
    started = time.time()
    try:
        resources = {GPU_RESOURCE: 1} if _uses_gpus(c) else None
        version = _version()
        futures = {}
        for path in todo:
            job = {"input": path, "out_dir": out, "output": names[path], "options": options,
                   "settings": settings, "version": version}
            future = c.submit(analyze_file, job, resources=resources, retries=RETRIES, pure=False,
                              key=f"markerscope-batch-{names[path]}-{os.urandom(4).hex()}")
            futures[future] = path
        frames = 0
        for future in as_completed(futures):
            path = futures[future]
            try:
                entry = future.result()
            except Exception as e:  # noqa: BLE001 — a lost worker too often, or output not writable
                entry = {"input": path, "output": names[path], "status": "failed", "settings": settings,
                         "error": f"{type(e).__name__}: {e}"}
            manifest.record(entry)
            if entry["status"] == "done":
                report.analysed.append(path)
                frames += entry["frames"]
            else:
                report.failed[path] = entry["error"]
            report = report._replace(frames=frames)
            tell()
    finally:
        for thing in to_close:
            thing.close()
    _remove_temporaries(out)
    return report._replace(seconds=time.time() - started)
