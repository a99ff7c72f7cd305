#!/usr/bin/env python3
"""The Python package's per-call cost above the Rust call it makes, on a numpy frame.

    python3 python/bench/overhead.py                  # 1920×1080, d = 0.5, g = 4, 8-connectivity
    python3 python/bench/overhead.py --calls 2000 --json overhead.json

For connected_components_with_stats and component_stats (CPU backend, algorithm lsl): the
wall time of the package call on a numpy uint8 frame, and the time of the library's labeler
(`Labeler::label`, the same algorithm and connectivity) on a mask prepared once from the same
frame, timed in Rust (`_markerscope.RustCall`; its results freed inside the timing, as a
discarded Python result is). The calls alternate, Rust then Python, so that both see the same
machine load; each figure is the median of --calls. Overhead = Python − Rust.

The frame is bench/peers/peers.py's random image (the papers' MT19937 blocks; bit-identical to
`markerscope bench`'s and to `cargo run --example python_call`'s, which times the same Rust
call from a plain Rust program).
"""

import argparse
import importlib.util
import json
import statistics
import time
from pathlib import Path

import numpy as np

import markerscope as ms
from markerscope import _markerscope

ROOT = Path(__file__).resolve().parents[2]
CALLS = ("connected_components_with_stats", "component_stats")


def load_peers():
    spec = importlib.util.spec_from_file_location("peers", ROOT / "bench" / "peers" / "peers.py")
    peers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peers)
    return peers


def frame(width=1920, height=1080, density=0.5, granularity=4, seed=1):
    peers = load_peers()
    return peers.make_image(np, width, height, density, granularity, peers.image_seed(seed, density, granularity))


def python_call(name, image, connectivity, algorithm):
    if name == "connected_components_with_stats":
        return lambda: ms.connected_components_with_stats(image, connectivity, backend="cpu", algorithm=algorithm)
    return lambda: ms.component_stats(image, connectivity, backend="cpu", algorithm=algorithm)


def measure(image, calls=1000, connectivity=8, algorithm="lsl", warmup=20):
    """{call name: {rust_median_us, python_median_us, overhead_us}} for both calls."""
    out = {}
    for name in CALLS:
        rust_call = _markerscope.RustCall(image, connectivity, name == CALLS[0], algorithm)
        call = python_call(name, image, connectivity, algorithm)
        for _ in range(warmup):
            rust_call.time(1)
            call()
        rust, py = [], []
        for _ in range(calls):
            rust.append(rust_call.time(1)[0])
            t0 = time.perf_counter()
            call()
            py.append(time.perf_counter() - t0)
        rust_us, py_us = statistics.median(rust) * 1e6, statistics.median(py) * 1e6
        out[name] = {"rust_median_us": rust_us, "python_median_us": py_us, "overhead_us": py_us - rust_us}
    return out


def report(results, image, connectivity, algorithm, calls):
    h, w = image.shape
    for name, r in results.items():
        print(f"{name} on a {w}x{h} numpy frame ({algorithm}, {connectivity}-connectivity, median of {calls}): "
              f"Rust {r['rust_median_us']:.1f} µs, Python {r['python_median_us']:.1f} µs, "
              f"overhead {r['overhead_us']:.1f} µs", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", default="1920x1080", type=lambda s: tuple(int(v) for v in s.lower().split("x")))
    p.add_argument("--density", type=float, default=0.5)
    p.add_argument("--granularity", type=int, default=4)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--connectivity", type=int, default=8, choices=(4, 8))
    p.add_argument("--algorithm", default="lsl")
    p.add_argument("--calls", type=int, default=1000, help="timed calls of each")
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args()
    image = frame(args.size[0], args.size[1], args.density, args.granularity, args.seed)
    results = measure(image, args.calls, args.connectivity, args.algorithm)
    report(results, image, args.connectivity, args.algorithm, args.calls)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
