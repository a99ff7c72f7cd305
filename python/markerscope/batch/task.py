"""One input's analysis on a worker: ``analyze`` over the file, its rows and track summary
streamed to Parquet under temporary names, renamed into place when both are complete, and
the manifest entry handed back. A worker killed part way leaves only temporary files (the
run removes them), so the input is redone elsewhere and its files are written once.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import numpy

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


def _temp(out_dir: str, name: str) -> str:
    return os.path.join(out_dir, f".{name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")


def _remove(paths: List[str]) -> None:
    for p in paths:
        try:
            os.remove(p)
        except FileNotFoundError:
            pass


def analyze_file(job: Dict[str, Any]) -> Dict[str, Any]:
    """Analyses ``job["input"]`` into ``job["out_dir"]``/``job["output"]``.parquet and
    .tracks.parquet; returns its manifest entry (``status`` "done", or "failed" with
    ``error`` when the input cannot be analysed: a damaged or unreadable file). Errors in
    writing the output are raised (the run retries the input, then reports it)."""
    import pyarrow.parquet as pq

    from .. import analyze

    started = time.time()
    path, out_dir, name = job["input"], job["out_dir"], job["output"]
    options, worker, device = bind_device(job["options"])
    found = fingerprint(path)
    entry = {"input": path, "output": name, "size": found.size, "mtime_ns": found.mtime_ns,
             "settings": job["settings"], "markerscope_version": job["version"], "worker": worker,
             "device": device}
    hasher = _Hash(path)
    hasher.start()
    meta = tables.metadata(job["settings"], job["version"], path)
    rows_schema, tracks_schema = tables.rows_schema(meta), tables.tracks_schema(meta)
    rows_tmp, tracks_tmp = _temp(out_dir, name + ROWS_SUFFIX), _temp(out_dir, name + TRACKS_SUFFIX)
    summaries = tables.TrackSummaries()
    rows_total = frames = 0
    failure: Optional[str] = None
    try:
        with pq.ParquetWriter(rows_tmp, rows_schema) as writer:
            pending: List[numpy.ndarray] = []
            pending_rows = 0
            try:
                with analyze(path, **options) as analysis:
                    for rows in analysis:
                        frames += 1
                        summaries.add(rows)
                        pending.append(rows)
                        pending_rows += len(rows)
                        if pending_rows >= tables.ROW_GROUP_ROWS:
                            writer.write_table(tables.rows_table(numpy.concatenate(pending), rows_schema))
                            rows_total += pending_rows
                            pending, pending_rows = [], 0
                    notices = analysis.notices
            except (OSError, RuntimeError, ValueError) as e:
                failure = f"{type(e).__name__}: {e}"
            if failure is None and pending:
                writer.write_table(tables.rows_table(numpy.concatenate(pending), rows_schema))
                rows_total += pending_rows
        hasher.join()
        if failure is None and hasher.error is not None:
            failure = f"{type(hasher.error).__name__}: {hasher.error}"
        if failure is not None:
            _remove([rows_tmp, tracks_tmp])
            return {**entry, "status": "failed", "error": failure, "frames": frames,
                    "seconds": round(time.time() - started, 3)}
        pq.write_table(summaries.table(tracks_schema), tracks_tmp)
        os.replace(tracks_tmp, os.path.join(out_dir, name + TRACKS_SUFFIX))
        os.replace(rows_tmp, os.path.join(out_dir, name + ROWS_SUFFIX))
    except BaseException:
        _remove([rows_tmp, tracks_tmp])
        raise
    skipped = sum(1 for n in notices if n.startswith("skipped: "))
    return {**entry, "status": "done", "content_hash": hasher.value, "rows": rows_total, "frames": frames,
            "skipped_frames": skipped, "notices": list(notices), "seconds": round(time.time() - started, 3)}
