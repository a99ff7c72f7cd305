"""Tracker: the library's tracker over detections made elsewhere."""

import numpy as np
import pytest

import markerscope as ms


def test_ids_follow_moving_points():
    t = ms.Tracker()
    ids = []
    for f in range(10):
        x = np.array([10.0 + 2 * f, 200.0 - 3 * f])
        y = np.array([50.0, 80.0 + f])
        ids.append(t.update(x, y, np.array([30.0, 30.0])))
    assert ids[0].dtype == np.int64
    assert all(np.array_equal(i, ids[0]) for i in ids), ids
    assert len(set(ids[0].tolist())) == 2 and t.active == 2
    # Given in the other order, each point keeps its ID.
    swapped = t.update(np.array([200.0 - 30, 10.0 + 20]), np.array([90.0, 50.0]), np.array([30.0, 30.0]))
    assert swapped.tolist() == ids[0][::-1].tolist()
    s = t.summaries()
    assert list(s) == ms.TRACK_COLUMNS
    assert sorted(s["track"].tolist()) == sorted(ids[0].tolist())
    assert s["length"].tolist() == [11, 11] and s["first_frame"].tolist() == [0, 0]


def test_a_far_jump_starts_a_new_track():
    t = ms.Tracker(gate=5.0)
    a = t.update(np.array([0.0]), np.array([0.0]))
    b = t.update(np.array([100.0]), np.array([100.0]))
    assert a[0] != b[0]


def test_bad_detections_are_refused():
    t = ms.Tracker()
    with pytest.raises(ValueError, match="same length"):
        t.update(np.array([1.0, 2.0]), np.array([1.0]))
    with pytest.raises(ValueError, match="finite"):
        t.update(np.array([np.nan]), np.array([1.0]))
    with pytest.raises(TypeError, match="x: expected a 1-D array of numbers"):
        t.update("1.0", np.array([1.0]))
    with pytest.raises(TypeError, match="y: expected a 1-D array of numbers"):
        t.update([1.0], [object()])
    with pytest.raises(ValueError, match="x: expected a 1-D array, got 2 dimension"):
        t.update(np.zeros((2, 2)), np.zeros(2))
    with pytest.raises(ValueError, match="tracker settings: the gate must be > 0 px"):
        ms.Tracker(gate=0.0)


def test_any_float_array_like_gives_the_same_ids():
    pandas = pytest.importorskip("pandas")
    xs = [np.array([10.0 + 2 * f, 200.0 - 3 * f]) for f in range(6)]
    ys = [np.array([50.0, 80.0 + f]) for f in range(6)]
    expected = []
    t = ms.Tracker()
    for x, y in zip(xs, ys):
        expected.append(t.update(x, y, np.array([30.0, 30.0])).tolist())
    for convert in (list, lambda a: a.astype(np.float32), lambda a: a.round().astype(np.int64), pandas.Series, tuple):
        t = ms.Tracker()
        got = [t.update(convert(x), convert(y), convert(np.array([30.0, 30.0]))).tolist() for x, y in zip(xs, ys)]
        assert got == expected
