"""markerscope.link against trackpy.link on seeded Brownian particles of known truth: ID switches,
correct and false links, and the time of each call (best of several), for each particle count.

    python3 bench/scripts/link_vs_trackpy.py [N ...]      # default 2000 10000

The scene is the Python tests' (`python/tests/test_trackpy.py`): N particles uniform over a
field of 500·√(N/1000) px, Gaussian steps of 1.5 px per axis, 20 frames, search range 6 px.
markerscope links on the CPU and, where a GPU is usable, on the GPU too. Needs markerscope,
pandas and trackpy.
"""

import sys
import time

import numpy as np
import pandas as pd
import trackpy as tp

import markerscope as ms

FRAMES, STEP, SEARCH = 20, 1.5, 6.0


def brownian(n, seed=6):
    rng = np.random.default_rng(seed)
    size = 500 * (n / 1000) ** 0.5
    p = rng.uniform(0, size, (n, 2))
    rows = []
    for f in range(FRAMES):
        rows.append(pd.DataFrame({"x": p[:, 0], "y": p[:, 1], "frame": f, "truth": np.arange(n)}))
        p = p + rng.normal(0, STEP, p.shape)
    return pd.concat(rows, ignore_index=True)


def score(linked):
    """ID switches (a true particle's consecutive detections in different trajectories),
    correct links (consecutive detections of one particle in one trajectory) and false links
    (consecutive detections of one trajectory that are different particles)."""
    d = linked.sort_values(["truth", "frame"], kind="stable")
    truth, particle = d["truth"].to_numpy(), d["particle"].to_numpy()
    same = truth[1:] == truth[:-1]
    switches = int((same & (particle[1:] != particle[:-1])).sum())
    correct = int((same & (particle[1:] == particle[:-1])).sum())
    t = linked.sort_values(["particle", "frame"], kind="stable")
    along = t["particle"].to_numpy()
    false = int(((along[1:] == along[:-1]) & (t["truth"].to_numpy()[1:] != t["truth"].to_numpy()[:-1])).sum())
    return switches, correct, false


def timed(link, features, repeats):
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = link(features)
        best = min(best, time.perf_counter() - t)
    return out, best


def main():
    tp.quiet()
    counts = [int(a) for a in sys.argv[1:]] or [2000, 10000]
    gpu = ms.devices()[0]["usable"]
    if gpu:
        # The first call compiles the tracker's kernels (or loads them from the cache).
        ms.link(brownian(100), SEARCH, backend="cuda")
    print("particles  linker                   ID switches  correct  false  time (20 frames)")
    for n in counts:
        features = brownian(n)
        linkers = [
            ("markerscope subnet", lambda f: ms.link(f, SEARCH, backend="cpu"), 5),
            ("markerscope greedy", lambda f: ms.link(f, SEARCH, link_strategy="greedy", backend="cpu"), 5),
        ]
        if gpu:
            linkers += [
                ("markerscope subnet, GPU", lambda f: ms.link(f, SEARCH, backend="cuda"), 5),
                ("markerscope greedy, GPU",
                 lambda f: ms.link(f, SEARCH, link_strategy="greedy", backend="cuda"), 5),
            ]
        linkers.append(("trackpy", lambda f: tp.link(f, SEARCH), 2))
        for name, link, repeats in linkers:
            linked, seconds = timed(link, features, repeats)
            switches, correct, false = score(linked)
            print(f"{n:9}  {name:23}  {switches:11}  {correct:7}  {false:5}  {seconds * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
