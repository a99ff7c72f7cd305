"""Where a batch runs: a scheduler's address, or a cluster on this machine with one worker
per GPU (each bound to its GPU through ``CUDA_VISIBLE_DEVICES`` and carrying the ``GPU``
resource) or, without a GPU, CPU workers.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from typing import Any, Dict, List, Optional

from .task import GPU_RESOURCE

#: How long a scheduler address may take to answer.
CONNECT_TIMEOUT_S = 5


def visible_gpus() -> List[str]:
    """The GPUs this process may use: ``CUDA_VISIBLE_DEVICES`` when set, else those
    ``nvidia-smi`` lists (none without the driver)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def worker_env(workers: int) -> Dict[str, str]:
    """What each of ``workers`` analysis processes on this machine is given: its share of the
    cores for the engine's thread pool (``RAYON_NUM_THREADS``), unless this process sets it. Each
    engine would otherwise start a thread per core, and N workers would run N threads a core."""
    if os.environ.get("RAYON_NUM_THREADS"):
        return {}
    return {"RAYON_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // workers))}


def local_cluster(workers: Optional[int] = None) -> Any:
    """A cluster of this machine: one single-threaded worker process per GPU (``workers`` of
    them: at most one per GPU), or ``workers`` CPU workers (default: one per two cores, as the
    CPU analysis itself runs on several threads); each worker's engine uses its share of the
    cores (``worker_env``)."""
    from distributed import LocalCluster, Nanny, Scheduler, SpecCluster

    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers: expected a number of workers ≥ 1, got {workers!r}")
    gpus = visible_gpus()
    quiet = {"silence_logs": logging.ERROR}
    if not gpus:
        n = workers or max(1, (os.cpu_count() or 2) // 2)
        return LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                            env=worker_env(n), **quiet)
    if workers is not None and workers > len(gpus):
        raise ValueError(f"workers: {workers} asked for, but this machine has {len(gpus)} GPU(s) and a worker "
                         "takes one GPU")
    chosen = gpus[:workers or len(gpus)]
    specs = {
        f"gpu-{gpu}": {"cls": Nanny, "options": {
            "nthreads": 1, "resources": {GPU_RESOURCE: 1}, "env": {"CUDA_VISIBLE_DEVICES": gpu, **worker_env(len(chosen))}}}
        for gpu in chosen
    }
    # The HTTP server on a free port: 8787 may be taken by another cluster.
    scheduler = {"cls": Scheduler, "options": {"host": "127.0.0.1", "dashboard": False, "dashboard_address": ":0"}}
    return SpecCluster(workers=specs, scheduler=scheduler, **quiet)


def connect(address: str) -> Any:
    """A client of the scheduler at ``address``; a clear error within seconds when none answers."""
    from distributed import Client

    try:
        return Client(address, timeout=f"{CONNECT_TIMEOUT_S}s")
    except Exception as e:  # noqa: BLE001 — refused, silent, or something else answering (any error)
        raise ConnectionError(f"no Dask scheduler answers at {address} (waited {CONNECT_TIMEOUT_S} s): "
                              f"{type(e).__name__}: {e}") from None
