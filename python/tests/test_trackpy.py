"""link and locate_frames: trackpy's API on markerscope's tracker and labeling, checked against
trackpy itself on Brownian particles of known truth."""

import doctest
import sys

import numpy as np
import pytest

import markerscope as ms
import markerscope.particles

pd = pytest.importorskip("pandas", reason="link and locate_frames work on pandas DataFrames")


def brownian(n, frames, step, size=500, seed=1):
    """Seeded Brownian particles: n per frame, uniform in a size × size field, Gaussian steps of
    ``step`` px per axis; the ``truth`` column is each row's particle."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0, size, (n, 2))
    rows = []
    for f in range(frames):
        rows.append(pd.DataFrame({"x": p[:, 0], "y": p[:, 1], "frame": f, "truth": np.arange(n)}))
        p = p + rng.normal(0, step, p.shape)
    return pd.concat(rows, ignore_index=True)


def partition(linked, key="particle"):
    """The rows (by index label) of each trajectory, as a set of frozensets."""
    return {frozenset(group.index) for _, group in linked.groupby(key)}


def id_switches(linked):
    """Links between consecutive detections of a true particle that change its particle number."""
    d = linked.sort_values(["truth", "frame"], kind="stable")
    same = d["truth"].to_numpy()[1:] == d["truth"].to_numpy()[:-1]
    changed = d["particle"].to_numpy()[1:] != d["particle"].to_numpy()[:-1]
    return int((same & changed).sum())


def test_link_equals_trackpy_and_the_truth_on_well_separated_particles():
    tp = pytest.importorskip("trackpy", reason="bash .ci/install installs trackpy")
    tp.quiet()
    features = brownian(200, 15, 0.5)
    ours = ms.link(features, search_range=5)
    theirs = tp.link(features, search_range=5)
    assert partition(ours) == partition(theirs) == partition(features, "truth")
    assert ours["particle"].dtype == np.int64
    assert sorted(ours["particle"].unique()) == list(range(200))


def test_link_keeps_the_index_and_extra_columns_and_sorts_by_frame_as_trackpy():
    tp = pytest.importorskip("trackpy", reason="bash .ci/install installs trackpy")
    tp.quiet()
    features = brownian(50, 6, 0.5, seed=2)
    features["mass"] = np.arange(len(features), dtype=float)
    features.index = [f"row{i}" for i in range(len(features))]
    shuffled = features.sample(frac=1.0, random_state=3)
    ours = ms.link(shuffled, 4)
    theirs = tp.link(shuffled, 4)
    assert list(ours.columns) == list(theirs.columns) == ["x", "y", "frame", "truth", "mass", "particle"]
    assert sorted(ours.index) == sorted(features.index)
    assert ours["frame"].is_monotonic_increasing
    pd.testing.assert_frame_equal(ours.drop(columns="particle").sort_index(), features.sort_index())
    assert partition(ours) == partition(theirs)
    # The caller's frame is left as it was.
    assert "particle" not in shuffled.columns


def test_memory_links_across_a_gap_as_trackpy():
    tp = pytest.importorskip("trackpy", reason="bash .ci/install installs trackpy")
    tp.quiet()
    features = brownian(30, 8, 0.3, size=300, seed=4)
    # Particle 0 is not seen in frames 3 and 4.
    features = features[~((features["truth"] == 0) & features["frame"].isin([3, 4]))]
    for memory in (0, 1, 2):
        ours = ms.link(features, 5, memory=memory)
        theirs = tp.link(features, 5, memory=memory)
        assert partition(ours) == partition(theirs), memory
    assert ms.link(features, 5, memory=2)["particle"].nunique() == 30
    assert ms.link(features, 5, memory=1)["particle"].nunique() == 31


def test_custom_columns_and_float_frames():
    tp = pytest.importorskip("trackpy", reason="bash .ci/install installs trackpy")
    tp.quiet()
    features = brownian(40, 5, 0.5, seed=5).rename(columns={"x": "col", "y": "row", "frame": "t"})
    features["t"] = features["t"].astype(float) + 10
    ours = ms.link(features, 4, pos_columns=["row", "col"], t_column="t")
    theirs = tp.link(features, 4, pos_columns=["row", "col"], t_column="t")
    assert partition(ours) == partition(theirs)
    assert ours["t"].dtype == np.int64
    assert ms.link(features, (4, 4), pos_columns=["row", "col"], t_column="t")["particle"].tolist() == \
        ours["particle"].tolist()


@pytest.mark.parametrize("n, seed", [(1000, 6), (2000, 7)])
def test_harder_motion_links_as_trackpys_subnetwork_optimum(n, seed):
    """Steps of a quarter of the spacing, where the cheapest-pair-first rule swaps identities:
    the subnetwork rule (the default) minimises each subnetwork's total squared displacement
    as trackpy does, and makes no more ID switches than trackpy against the truth (the same
    trajectories here); the greedy rule makes more, within 2× of trackpy's."""
    tp = pytest.importorskip("trackpy", reason="bash .ci/install installs trackpy")
    tp.quiet()
    features = brownian(n, 10, 1.5, size=500 * (n / 1000) ** 0.5, seed=seed)
    ours = ms.link(features, 6)
    theirs = tp.link(features, 6)
    switches, theirs_switches = id_switches(ours), id_switches(theirs)
    assert theirs_switches > 0
    assert switches <= theirs_switches, (switches, theirs_switches)
    assert partition(ours) == partition(theirs)
    greedy = id_switches(ms.link(features, 6, link_strategy="greedy"))
    assert theirs_switches < greedy <= 2 * theirs_switches, (greedy, theirs_switches)
    # A linked row never joins two true particles in the same frame.
    assert not ours.duplicated(["frame", "particle"]).any()


def test_a_subnetwork_too_large_to_solve_is_linked_greedily_with_a_warning():
    # 2,100 particles 1 px apart on a line, a search range of 1.5 px: one subnetwork.
    x = np.arange(2100, dtype=float)
    frames = [pd.DataFrame({"x": x + shift, "y": 0.3 * (x % 3), "frame": f}) for f, shift in enumerate([0, 0.4])]
    features = pd.concat(frames, ignore_index=True)
    with pytest.warns(RuntimeWarning, match="1 subnetwork.*greedy rule"):
        linked = ms.link(features, 1.5)
    assert linked["particle"].tolist() == ms.link(features, 1.5, link_strategy="greedy")["particle"].tolist()


def test_the_tracker_takes_the_link_strategy():
    # A is the nearer of the middle detection, but taking it leaves B unlinked: the subnetwork
    # rule gives A the far one and B the middle one; the greedy rule A the middle one.
    def second_frame(strategy):
        t = ms.Tracker(gate=2.0, gate_growth=0.0, size_weight=0.0, predict=False, link_strategy=strategy)
        first = t.update([0.0, 3.0], [0.0, 0.0])
        return first.tolist(), t.update([1.4, -1.5], [0.0, 0.0]).tolist(), t.greedy_clusters

    (a, b), subnet, greedy_clusters = second_frame("subnet")
    assert subnet == [b, a] and greedy_clusters == 0
    assert second_frame("greedy")[1][0] == a
    with pytest.raises(ValueError, match='"greedy" or "subnet"'):
        ms.Tracker(link_strategy="hungarian")


def test_predict_follows_drifting_particles():
    # Particles drifting 6 px a frame, 20 px apart: without prediction a search range of 4 px
    # loses them every frame; with it they are followed.
    frames = [pd.DataFrame({"x": 20.0 * np.arange(10) + 6.0 * f, "y": 50.0, "frame": f}) for f in range(8)]
    features = pd.concat(frames, ignore_index=True)
    assert ms.link(features, 7)["particle"].nunique() == 10
    assert ms.link(features, 4, predict=True)["particle"].nunique() > 10
    features["y"] = 50.0 + 0.3 * (features.index % 2)
    ok = ms.link(features, 7, predict=True)
    assert ok["particle"].nunique() == 10


def test_bad_arguments_are_refused():
    features = brownian(5, 2, 0.5)
    with pytest.raises(TypeError, match="'adaptive_stop' is not supported"):
        ms.link(features, 5, adaptive_stop=0.5)
    with pytest.raises(TypeError, match="'predictor' is not supported"):
        ms.link(features, 5, predictor=lambda t, p: p)
    with pytest.raises(ValueError, match="link_strategy: expected 'subnet'.*whichever of trackpy's strategies"):
        ms.link(features, 5, link_strategy="recursive")
    with pytest.raises(TypeError, match="link_strategy"):
        ms.link(features, 5, link_strategy=None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'serch_range'"):
        ms.link(features, 5, serch_range=3)
    with pytest.raises(TypeError, match="expected a pandas DataFrame"):
        ms.link(features.to_numpy(), 5)
    with pytest.raises(ValueError, match="positive finite"):
        ms.link(features, 0)
    with pytest.raises(TypeError, match="search_range: expected a number"):
        ms.link(features, "5")
    with pytest.raises(ValueError, match="anisotropic"):
        ms.link(features, (5, 3))
    with pytest.raises(ValueError, match="memory"):
        ms.link(features, 5, memory=-1)
    with pytest.raises(TypeError, match="memory"):
        ms.link(features, 5, memory=1.5)
    with pytest.raises(ValueError, match="max_candidates"):
        ms.link(features, 5, max_candidates=0)
    with pytest.raises(TypeError, match="max_candidates"):
        ms.link(features, 5, max_candidates=2.5)
    with pytest.raises(ValueError, match="no frame column 'time'"):
        ms.link(features, 5, t_column="time")
    with pytest.raises(ValueError, match="no position column 'row'"):
        ms.link(features, 5, pos_columns=["row", "x"])
    with pytest.raises(ValueError, match="2-D"):
        ms.link(features, 5, pos_columns=["z", "y", "x"])
    with pytest.raises(ValueError, match="'z' column"):
        ms.link(features.assign(z=0.0), 5)
    with pytest.raises(ValueError, match="whole numbers"):
        ms.link(features.assign(frame=features["frame"] + 0.5), 5)
    with pytest.raises(ValueError, match="finite"):
        ms.link(features.assign(x=np.nan), 5)
    with pytest.raises(TypeError, match="expected numbers"):
        ms.link(features.assign(x="a"), 5)


def test_the_backend_is_chosen_and_refused_clearly():
    features = brownian(300, 4, 1.0)
    on_cpu = ms.link(features, 5, backend="cpu")
    assert on_cpu["particle"].tolist() == ms.link(features, 5)["particle"].tolist()
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        ms.link(features, 5, backend="tpu")
    with pytest.raises(TypeError, match="backend: expected"):
        ms.link(features, 5, backend=1)
    if not ms.devices()[0]["usable"]:
        with pytest.raises(ms.GpuUnavailableError):
            ms.link(features, 5, backend="cuda")


def test_a_clear_import_error_without_pandas(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="install pandas"):
        ms.link(object(), 5)
    with pytest.raises(ImportError, match="install pandas"):
        ms.locate_frames([np.zeros((4, 4), np.uint8)])


def spots(positions, shape=(120, 160), sigma=1.5, peak=200, background=10):
    """Gaussian spots drawn at sub-pixel positions (x, y), rounded to uint8."""
    yy, xx = np.mgrid[0:shape[0], 0:shape[1]]
    image = np.full(shape, float(background))
    for x, y in positions:
        image += peak * np.exp(-((xx - x) ** 2 + (yy - y) ** 2) / (2 * sigma ** 2))
    return np.clip(np.round(image), 0, 255).astype(np.uint8)


def test_locate_frames_finds_spots_at_their_positions():
    rng = np.random.default_rng(7)
    truth = [np.column_stack([20 + 30 * np.arange(5) + rng.uniform(-1, 1, 5), 20 + 20 * np.arange(5)])
             for _ in range(3)]
    frames = [spots(t) for t in truth]
    f = ms.locate_frames(frames, threshold="fixed:40")
    assert list(f.columns) == ms.FEATURE_COLUMNS == ["y", "x", "mass", "size", "ecc", "signal", "frame"]
    assert f["frame"].tolist() == [0] * 5 + [1] * 5 + [2] * 5
    for i, t in enumerate(truth):
        got = f[f["frame"] == i].sort_values("x")[["x", "y"]].to_numpy()
        assert np.abs(got - t).max() < 0.05
    # Round spots: small eccentricity; the signal is the peak above the level.
    assert (f["ecc"] < 0.05).all()
    assert ((f["signal"] >= 200 + 10 - 40 - 60) & (f["signal"] <= 210 - 40)).all()
    # The same frames as a stack, and as files read through a path.
    pd.testing.assert_frame_equal(ms.locate_frames(np.stack(frames), threshold="fixed:40"), f)


def test_locate_frames_measures_follow_their_definitions():
    grey = np.zeros((10, 12), np.uint8)
    grey[2, 2:9] = [60, 80, 100, 120, 100, 80, 60]   # a horizontal line: ecc 1
    grey[6:8, 1:3] = 90                              # a square: ecc 0
    f = ms.locate_frames([grey], threshold="fixed:50").sort_values("y")
    line, square = f.iloc[0], f.iloc[1]
    w = np.array([10, 30, 50, 70, 50, 30, 10], float)
    xs = np.arange(2, 9)
    assert line["mass"] == w.sum() and line["signal"] == 70
    assert line["x"] == pytest.approx((w * xs).sum() / w.sum()) and line["y"] == 2
    assert line["size"] == pytest.approx(np.sqrt((w * (xs - 5) ** 2).sum() / w.sum()))
    assert line["ecc"] == pytest.approx(1.0)
    assert square["mass"] == 4 * 40 and square["ecc"] == pytest.approx(0.0)
    assert square["size"] == pytest.approx(np.sqrt(0.5))
    # Dark spots on a bright background with invert; minmass drops the light ones.
    dark = ms.locate_frames([255 - grey], threshold="fixed:205", invert=True).sort_values("y")
    # (weights level + 1 − grey: one more per pixel than grey − level on the inverted frame)
    assert dark["mass"].tolist() == [w.sum() + 7, 4 * 41.0]
    assert len(ms.locate_frames([grey], threshold="fixed:50", minmass=200)) == 1


def test_locate_frames_reads_a_folder_of_frames(tmp_path):
    cv2 = pytest.importorskip("cv2")
    frames = [spots([(30 + 5 * i, 40)], shape=(64, 96)) for i in range(3)]
    for i, frame in enumerate(frames):
        cv2.imwrite(str(tmp_path / f"frame{i:03}.png"), frame)
    from_files = ms.locate_frames(tmp_path, threshold="fixed:40")
    pd.testing.assert_frame_equal(from_files, ms.locate_frames(frames, threshold="fixed:40"))
    assert len(ms.locate_frames("synthetic", max_frames=2)["frame"].unique()) == 2
    with pytest.raises(ValueError, match="never ends"):
        ms.locate_frames("synthetic")


def test_locate_then_link_follows_drawn_brownian_particles_as_trackpy():
    tp = pytest.importorskip("trackpy", reason="bash .ci/install installs trackpy")
    tp.quiet()
    # Brownian steps from a 5 × 5 grid 40 px apart: the spots never touch.
    truth = brownian(25, 8, 0.6, size=1, seed=8)
    start = np.tile(40.0 * np.stack(np.divmod(np.arange(25), 5), axis=1), (8, 1))
    truth[["x", "y"]] += start
    frames = [spots(g[["x", "y"]].to_numpy() + 20, shape=(240, 240)) for _, g in truth.groupby("frame")]
    features = ms.locate_frames(frames, threshold="fixed:60")
    assert len(features) == len(truth)
    ours, theirs = ms.link(features, 5), tp.link(features, 5)
    assert partition(ours) == partition(theirs)
    # Every trajectory stays on one true particle.
    t = truth.sort_values(["frame"]).reset_index(drop=True)
    for _, track in ours.groupby("particle"):
        nearest = set()
        for _, row in track.iterrows():
            at = t[t["frame"] == row["frame"]]
            d2 = (at["x"] + 20 - row["x"]) ** 2 + (at["y"] + 20 - row["y"]) ** 2
            nearest.add(int(at.iloc[np.argmin(d2)]["truth"]))
        assert len(nearest) == 1


def test_locate_and_link_the_synthetic_particles():
    # 200 Brownian particles (0.5 px steps) on 1280×720 frames: nearly every one a feature,
    # and most followed through all 5 frames.
    features = ms.locate_frames("synthetic:particles:200", max_frames=5)
    per_frame = features.groupby("frame").size()
    assert per_frame.index.tolist() == [0, 1, 2, 3, 4]
    assert (per_frame >= 190).all() and (per_frame <= 200).all()
    lengths = ms.link(features, 3.5).groupby("particle").size()
    assert (lengths == 5).sum() >= 180


def test_locate_frames_refuses_bad_arguments():
    frame = np.zeros((4, 4), np.uint8)
    with pytest.raises(TypeError, match="threshold"):
        ms.locate_frames([frame], threshold=5)
    with pytest.raises(ValueError, match="connectivity"):
        ms.locate_frames([frame], connectivity=6)
    with pytest.raises(TypeError, match="minmass"):
        ms.locate_frames([frame], minmass="big")
    with pytest.raises(TypeError, match="frame 0"):
        ms.locate_frames([np.zeros((4, 4), np.float32)])
    with pytest.raises(ValueError):
        ms.locate_frames([frame], threshold="nonsense")


def test_docstring_examples():
    result = doctest.testmod(markerscope.particles, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 2 and result.failed == 0
