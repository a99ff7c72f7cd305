"""Skew of live sources against their true offsets, from the rows of

    markerscope analyze 'synthetic?live,delay=0' 'synthetic?live,delay=0.003' \
        'synthetic?live,delay=0.007' 'synthetic?live,delay=0.011' --max-frames 600 --out skew.csv

Frame i of source k is captured at i/60 + its delay; the truth of a frame's skew_ms is that time
minus the earliest capture time in its frame set. Prints how many sets hold every source and
the distribution of |skew_ms - truth|.

    python3 bench/scripts/live_skew.py skew.csv
"""
import csv, sys, collections
delays = [0.0, 0.003, 0.007, 0.011]
frames = {}
for r in csv.DictReader(open(sys.argv[1])):
    frames[(int(r["source"]), int(r["frame"]))] = (int(r["frame_set"]), float(r["skew_ms"]))
sets = collections.defaultdict(list)
for (k, i), (s, skew) in frames.items():
    sets[s].append((k, i, skew))
errors, complete = [], 0
for s, members in sets.items():
    complete += len(members) == len(delays)
    ref = min(i / 60 + delays[k] for k, i, _ in members)
    for k, i, skew in members:
        errors.append(abs(skew - 1000 * (i / 60 + delays[k] - ref)))
errors.sort()
q = lambda p: errors[min(len(errors) - 1, int(p * len(errors)))]
print(f"{len(frames)} frames in {len(sets)} sets, {complete} with every source; |skew - truth| ms: "
      f"median {q(0.5):.3f}, p99 {q(0.99):.3f}, max {errors[-1]:.3f}, beyond 1 ms {sum(e > 1 for e in errors)}")
