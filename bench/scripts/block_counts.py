# Components per 16-row block on the papers' random images (8192², granularity 4: one cell per
# 4×4 pixels, so a block is 4 cell rows): how many are rooted in the block (they take direct table
# entries) and how many rooted above reach it (hashed entries). numpy only; another generator than
# the benchmark's, the same statistics. python3 block_counts.py
import numpy as np

rng = np.random.default_rng(1)
N = 2048  # cells per side
for conn in (4, 8):
    for d in (0.1, 0.3, 0.5, 0.7, 0.9):
        fg = rng.random((N, N)) < d
        idx = np.arange(N * N).reshape(N, N)
        # Cell adjacencies (cells of one component are pixels of one component at any g).
        pairs = [(fg[:, 1:] & fg[:, :-1], idx[:, 1:], idx[:, :-1]), (fg[1:, :] & fg[:-1, :], idx[1:, :], idx[:-1, :])]
        if conn == 8:
            pairs.append((fg[1:, 1:] & fg[:-1, :-1], idx[1:, 1:], idx[:-1, :-1]))
            pairs.append((fg[1:, :-1] & fg[:-1, 1:], idx[1:, :-1], idx[:-1, 1:]))
        a = np.concatenate([p[1][p[0]] for p in pairs])
        b = np.concatenate([p[2][p[0]] for p in pairs])
        # Smallest index per component (its root in raster order): propagate minima to a fixpoint.
        lab = np.where(fg.ravel(), np.arange(N * N), -1)
        on = fg.ravel()
        while True:
            old = lab.copy()
            m = np.minimum(lab[a], lab[b])
            np.minimum.at(lab, a, m)
            np.minimum.at(lab, b, m)
            lab[on] = lab[lab[on]]
            if np.array_equal(old, lab):
                break
        L = lab.reshape(N, N)
        rooted, above = [], []
        for k in range(N // 4):
            roots = L[4 * k : 4 * k + 4][fg[4 * k : 4 * k + 4]]
            block_of_root = roots // N // 4
            rooted.append(len(np.unique(roots[block_of_root == k])))
            above.append(len(np.unique(roots[block_of_root < k])))
        rooted, above = np.array(rooted), np.array(above)
        print(
            f"conn {conn} d {d}: comps {len(np.unique(L[L >= 0]))}, roots/block mean {rooted.mean():.0f} "
            f"max {rooted.max()} p90 {np.percentile(rooted, 90):.0f}; from-above/block mean {above.mean():.0f} "
            f"max {above.max()}",
            flush=True,
        )
