#!/usr/bin/env python3
"""The Python package on the GPU against CuPy and OpenCV, on the papers' random images, and
the per-call cost of the Python layer on a 1920×1080 numpy frame.

    python3 python/bench/bench_gpu.py                       # 8192², g = 4, d = 0, 0.1 … 1, both connectivities
    python3 python/bench/bench_gpu.py --size 2048x2048 --repeat 3 --json out.json
    python3 python/bench/bench_gpu.py --overhead-only       # no GPU needed

Images are bench/peers/peers.py's (bit-identical to `markerscope bench`'s). Per image the best
of --repeat runs after one untimed warm-up; Gpx/s = pixels / time, averaged over the densities
as the benchmark protocol does (docs/performance.md).

- component_stats, connected_components_with_stats: a CuPy array already on the GPU; CUDA
  events on the null stream around the whole Python call (argument checks, result arrays
  allocated by CuPy, labeling, statistics in OpenCV's layout written on the device, the one
  read of the component count).
- cupyx.scipy.ndimage.label (labels only) and cv2.connectedComponentsWithStats (all cores):
  peers.py's timing of them on the same images.
- Overhead: python/bench/overhead.py's: median wall time of connected_components_with_stats
  (and component_stats) on a 1920×1080 numpy frame against the same labeling called from Rust
  on a prepared mask (`_markerscope.RustCall`), alternating, CPU backend, same algorithm.
"""

import argparse
import importlib.util
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import markerscope as ms

import overhead as overhead_bench

ROOT = Path(__file__).resolve().parents[2]


def load_peers():
    spec = importlib.util.spec_from_file_location("peers", ROOT / "bench" / "peers" / "peers.py")
    peers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peers)
    return peers


def densities(text):
    start, end, step = (float(v) for v in text.split(":"))
    n = int(round((end - start) / step))
    return [round(start + i * step, 6) for i in range(n + 1)]


def time_device_call(cupy, fn, repeat):
    """Best of `repeat` calls in ms, CUDA events on the null stream around each."""
    result = fn()  # warm-up: buffers, kernels
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    best = math.inf
    for _ in range(repeat):
        cupy.cuda.Stream.null.synchronize()
        start.record()
        fn()
        end.record()
        end.synchronize()
        best = min(best, cupy.cuda.get_elapsed_time(start, end))
    return best, result


def gpu_table(args, peers):
    try:
        import cupy
    except ImportError:
        sys.exit("bench_gpu.py: the GPU table needs CuPy (and a GPU); --overhead-only runs without them")

    w, h = args.size
    pixels = w * h
    opencv, cupy_peer = peers.OpenCV(), peers.CuPy()
    rows = []
    for conn in args.connectivity:
        for d in densities(args.densities):
            img = peers.make_image(np, w, h, d, args.granularity, peers.image_seed(args.seed, d, args.granularity))
            x = cupy.asarray(img)
            stats_ms, r = time_device_call(cupy, lambda: ms.component_stats(x, conn), args.repeat)
            ccl_ms, full = time_device_call(cupy, lambda: ms.connected_components_with_stats(x, conn), args.repeat)
            cupy_ms, cupy_n = cupy_peer.time(x, conn, "ccl", args.repeat)
            cv_ms, cv_n = opencv.time(img, conn, "cca", max(1, args.repeat // 3))
            counts = {r.n - 1, full[0] - 1, cupy_n, cv_n}
            if len(counts) != 1:
                sys.exit(f"component counts differ at d={d}, {conn}-connectivity: {counts}")
            row = {"connectivity": conn, "density": d, "components": cv_n, "component_stats_ms": stats_ms,
                   "connected_components_with_stats_ms": ccl_ms, "cupy_label_ms": cupy_ms, "opencv_ms": cv_ms}
            rows.append(row)
            print(f"c={conn} d={d:.1f} n={cv_n:>9}  component_stats {pixels / stats_ms / 1e6:7.1f} Gpx/s"
                  f"  ccws {pixels / ccl_ms / 1e6:7.1f}  cupy label {pixels / cupy_ms / 1e6:6.1f}"
                  f"  opencv {pixels / cv_ms / 1e6:5.2f}", flush=True)
            del x
            cupy_peer.release()
    print(f"\nmean Gpx/s over densities, {w}x{h}, g = {args.granularity}:")
    for conn in args.connectivity:
        sel = [r for r in rows if r["connectivity"] == conn]
        mean = {k: statistics.fmean(pixels / r[k] / 1e6 for r in sel)
                for k in ("component_stats_ms", "connected_components_with_stats_ms", "cupy_label_ms", "opencv_ms")}
        print(f"  {conn}-connectivity: component_stats {mean['component_stats_ms']:.1f}, "
              f"connected_components_with_stats {mean['connected_components_with_stats_ms']:.1f}, "
              f"cupyx.scipy.ndimage.label {mean['cupy_label_ms']:.1f}, OpenCV {mean['opencv_ms']:.2f}")
    return rows


def overhead(args):
    image = overhead_bench.frame(seed=args.seed)
    results = overhead_bench.measure(image, args.calls)
    overhead_bench.report(results, image, 8, "lsl", args.calls)
    return results


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", default="8192x8192", type=lambda s: tuple(int(v) for v in s.lower().split("x")))
    p.add_argument("--granularity", type=int, default=4)
    p.add_argument("--densities", default="0:1:0.1")
    p.add_argument("--connectivity", default="4,8", type=lambda s: [int(v) for v in s.split(",")])
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--calls", type=int, default=1000, help="timed calls of the overhead measurement")
    p.add_argument("--overhead-only", action="store_true")
    p.add_argument("--json", help="write every number here")
    args = p.parse_args()
    peers = load_peers()
    result = {"markerscope": ms.devices()[0], "overhead": overhead(args)}
    if not args.overhead_only:
        result["gpu"] = gpu_table(args, peers)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
