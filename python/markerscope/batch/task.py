"""One input's analysis on a worker: the engine's own ``analyze_to_file`` (the path of
``markerscope analyze FILE --out rows.parquet --tracks tracks.parquet``: the columns filled and
encoded on all cores, without the GIL) writing its rows and track summary into a work folder
of its own, both moved into place when complete, and the manifest entry handed back. A worker
killed part way leaves only its work folder (the run removes it), so the input is redone
elsewhere and its files are written once.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import threading
import time
from typing import Any, Dict, Tuple

from . import tables
from .manifest import ROWS_SUFFIX, TRACKS_SUFFIX, content_hash, fingerprint

#: The Dask worker resource that marks a worker holding one GPU (its own, through
#: ``CUDA_VISIBLE_DEVICES``).
GPU_RESOURCE = "GPU"


def _worker() -> Any:
    try:
        from distributed import get_worker

        return get_worker()
    except (ImportError, ValueError):
        return None


def bind_device(options: Dict[str, Any]) -> Tuple[Dict[str, Any], str, str]:
    """The options with this worker's backend (the CUDA backend on a worker with a GPU
    resource, the CPU elsewhere, unless the settings name one), the worker and the device."""
    worker = _worker()
    name = f"{worker.name} {worker.address}" if worker is not None else f"{socket.gethostname()} pid {os.getpid()}"
    has_gpu = worker is not None and worker.state.total_resources.get(GPU_RESOURCE, 0) >= 1
    if "backend" not in options and worker is not None:
        options = {**options, "backend": "cuda" if has_gpu else "cpu"}
    backend = str(options.get("backend", "auto")).lower()
    if backend == "cpu" or (backend == "auto" and not has_gpu):
        device = f"cpu ({socket.gethostname()})"
    else:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"
        device = f"cuda:{visible} ({socket.gethostname()})"
    return options, name, device


class _Hash(threading.Thread):
    """The input's content hash, read beside the analysis."""

    def __init__(self, path: str):
        super().__init__(daemon=True)
        self.path, self.value, self.error = path, None, None

    def run(self) -> None:
        try:
            self.value = content_hash(self.path)
        except OSError as e:
            self.error = e


def _work_folder(out_dir: str, name: str) -> str:
    """A folder of this worker's own for one input's files: ``.<name>.parquet.<pid>-<hex>.tmp``
    (``manifest.TEMP_PATTERN``)."""
    folder = os.path.join(out_dir, f".{name}{ROWS_SUFFIX}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    os.mkdir(folder)
    return folder


def _sort_tracks(path: str) -> None:
    """The summary's rows by track ID (the engine writes a track when it ends), its metadata
    kept."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    pq.write_table(table.sort_by("track"), path)


def analyze_file(job: Dict[str, Any]) -> Dict[str, Any]:
    """Analyses ``job["input"]`` into ``job["out_dir"]``/``job["output"]``.parquet and
    .tracks.parquet; returns its manifest entry (``status`` "done", or "failed" with
    ``error`` when the input cannot be analysed: a damaged or unreadable file). Errors in
    writing the output are raised (the run retries the input, then reports it)."""
    from .. import analyze_to_file

    started = time.time()
    path, out_dir, name = job["input"], job["out_dir"], job["output"]
    options, worker, device = bind_device(job["options"])
    found = fingerprint(path)
    entry = {"input": path, "output": name, "size": found.size, "mtime_ns": found.mtime_ns,
             "settings": job["settings"], "markerscope_version": job["version"], "worker": worker,
             "device": device}
    hasher = _Hash(path)
    hasher.start()
    work = _work_folder(out_dir, name)
    rows_tmp, tracks_tmp = os.path.join(work, "rows" + ROWS_SUFFIX), os.path.join(work, "rows" + TRACKS_SUFFIX)
    meta = tables.metadata(job["settings"], job["version"], path)
    try:
        try:
            done = analyze_to_file(path, rows_tmp, tracks=tracks_tmp, metadata=meta, **options)
            failure = None if done["stopped_by"] is None else \
                f"stopped after {done['frames']} frames: {done['stopped_by']}"
        except (OSError, RuntimeError, ValueError) as e:
            # An error that names the work folder is the output's: raised, to be retried.
            if work in str(e):
                raise
            done, failure = {"frames": 0}, f"{type(e).__name__}: {e}"
        hasher.join()
        if failure is None and hasher.error is not None:
            failure = f"{type(hasher.error).__name__}: {hasher.error}"
        if failure is None:
            _sort_tracks(tracks_tmp)
            os.replace(tracks_tmp, os.path.join(out_dir, name + TRACKS_SUFFIX))
            os.replace(rows_tmp, os.path.join(out_dir, name + ROWS_SUFFIX))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    seconds = round(time.time() - started, 3)
    if failure is not None:
        return {**entry, "status": "failed", "error": failure, "frames": done["frames"], "seconds": seconds}
    skipped = done["skipped_frames"] + done["skipped_data"] + done["damaged_frames"]
    notices = done["notices"] + [f"skipped: {s}" for s in done["skipped"]]
    return {**entry, "status": "done", "content_hash": hasher.value, "rows": done["rows"], "frames": done["frames"],
            "skipped_frames": skipped, "notices": notices, "algorithm": done["algorithm"], "seconds": seconds}
