#!/usr/bin/env python3
"""The latency of each kind of frame in a `markerscope bench --pipeline --json` file.

    python3 bench/scripts/frame_kinds.py RESULTS.json

A scene of mixed frames (the clutter scene: empty frames, then frames of 8,335, 617, 98,871,
2,104 and 64 components) has a p99 latency that is its heaviest frame's and a median that is
its lightest's. Here the latency pass's frames (`frame_ms`, with `latency_components`) are
grouped by their kind: their components and those of the frame before (the frame that follows
a dense one inherits its tracks). Per run, all frames, then each kind of at least 10 frames:
frames, the median, p90 and p99 latency (nearest rank), and p99 over the median (within a
kind: how much of the tail is not the frame's own load); where the JSON has each frame's sum of
steps (`latency_steps_ms`), also the median and p99 of the rest of the latency, the hand-overs
between the pipeline's threads (`rest`).
"""
import json
import sys


def nearest_rank(sorted_ms, q):
    return sorted_ms[min(len(sorted_ms) - 1, max(0, int(q * len(sorted_ms) + 0.999999) - 1))]


def main(path):
    with open(path) as f:
        results = json.load(f)
    for run in results.get("pipeline", []):
        ms, comps = run.get("frame_ms", []), run.get("latency_components", [])
        if not ms or len(comps) != len(ms):
            continue
        steps = run.get("latency_steps_ms", [])
        rests = [t - s for t, s in zip(ms, steps)] if len(steps) == len(ms) else None
        kinds = {}
        for i, (t, c) in enumerate(zip(ms, comps)):
            before = comps[i - 1] if i > 0 else None
            rest = rests[i] if rests else None
            kinds.setdefault((c, before), []).append((t, rest))
        print(f"{run['scene']} {run['width']}x{run['height']} {run['algorithm']} ({run['backend']})")
        print("  components  after  frames  p50 ms  p90 ms  p99 ms  p99/p50"
              + ("  rest p50  rest p99" if rests else ""))

        def line(what, after, frames):
            times = sorted(t for t, _ in frames)
            p50, p90, p99 = (nearest_rank(times, q) for q in (0.5, 0.9, 0.99))
            text = (f"  {what:>10}  {after:>5}  {len(times):6}  {p50:6.3f}  {p90:6.3f}"
                    f"  {p99:6.3f}  {p99 / p50:7.2f}")
            if rests:
                rest = sorted(r for _, r in frames)
                text += f"  {nearest_rank(rest, 0.5):8.3f}  {nearest_rank(rest, 0.99):8.3f}"
            print(text)

        line("all", "", list(zip(ms, rests or [None] * len(ms))))
        # Kinds of at least 10 frames (a scene whose frames all differ has none).
        for (c, before), frames in sorted(kinds.items(), key=lambda k: (k[0][0], k[0][1] or 0)):
            if len(frames) >= 10:
                line(c, "-" if before is None else before, frames)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
