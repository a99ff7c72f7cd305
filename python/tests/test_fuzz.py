"""A seeded fuzz pass over the API's arguments (types, shapes, dtypes, strides, sizes): every
call either succeeds or raises an ordinary exception of the right kind (never a panic, never
a BaseException the caller's `except Exception` misses), and where OpenCV accepts the same
input the numbers are OpenCV's."""

import numpy as np
import pytest

import markerscope as ms
from conftest import cv2

# A complex value silently cast to a real one would be a wrong number.
pytestmark = pytest.mark.filterwarnings("error::numpy.exceptions.ComplexWarning")

ALLOWED = (TypeError, ValueError, OverflowError, MemoryError, OSError)
DTYPES = [np.uint8, np.int8, np.bool_, np.uint16, np.int16, np.int32, np.int64, np.float32, np.float64,
          np.complex64, object]


def random_array(rng, valid=False):
    """An array of a random dtype, shape, layout and content, or another object; `valid`: a
    non-empty uint8 or int8 one of 2 dimensions (or (h, w, 1)), as OpenCV takes them."""
    pick = rng.integers(1 if valid else 0, 20)
    if pick == 0:
        return [None, 3, 2.5, "abc", b"\x00", {}, [[1, 2], [3]], [], [[]], float("nan"), object()][rng.integers(0, 11)]
    h, w = (int(v) for v in rng.integers(1 if valid else 0, 24, 2))
    shapes = [(h, w), (h, w, 1)] if valid else [(), (w,), (h, w), (h, w), (h, w, 1), (h, w, 3), (1, h, w), (h, w, 2)]
    shape = shapes[rng.integers(0, len(shapes))]
    dtype = random_choice(rng, [np.uint8, np.int8] if valid else DTYPES)
    values = rng.integers(-3, 4, shape) * rng.integers(0, 2, shape) if shape else rng.integers(-3, 4)
    a = np.asarray(values).astype(dtype)
    layout = rng.integers(0, 6)
    if layout == 1 and a.ndim >= 2:
        a = a[::2, ::-1]
    elif layout == 2 and a.ndim >= 2:
        a = np.asfortranarray(a)
    elif layout == 3 and a.ndim >= 2:
        a = np.swapaxes(a, 0, 1)
    elif layout == 4 and a.ndim >= 1 and not valid:
        a = a.tolist()
    elif layout == 5 and a.ndim == 2 and a.size:
        a = np.broadcast_to(a[:1], a.shape)
    return a


def random_choice(rng, options):
    return options[rng.integers(0, len(options))]


def call(f, *args, **kwargs):
    """(result, None) or (None, the exception); anything but an ordinary exception of an
    allowed kind fails the test."""
    try:
        return f(*args, **kwargs), None
    except BaseException as e:  # noqa: B902 - a panic is a BaseException: it must not get out
        assert isinstance(e, ALLOWED), f"{type(e).__name__}: {e} from {f.__name__}{args!r:.200}{kwargs!r:.200}"
        assert str(e), f"{type(e).__name__} without a message from {f.__name__}"
        return None, e


def opencv_labels(image, connectivity, ltype):
    """cv2's result for the same input, or None where cv2 refuses it (or would crash: OpenCV
    fails hard on empty images)."""
    if not isinstance(image, np.ndarray) or image.size == 0 or image.ndim not in (2, 3):
        return None
    if image.ndim == 3 and image.shape[2] != 1:
        return None
    try:
        return cv2.connectedComponentsWithStatsWithAlgorithm(image, connectivity, ltype, cv2.CCL_WU)
    except cv2.error:
        return None


def test_labeling_arguments():
    rng = np.random.default_rng(2026)
    compared = 0
    for i in range(600):
        valid = i % 2 == 0
        image = random_array(rng, valid)
        connectivity = random_choice(rng, [4, 8, np.int64(4)] if valid else [4, 8, 6, 0, -8, "8", 8.0, None, True])
        ltype = random_choice(rng, [np.int32, np.uint16, cv2.CV_32S, cv2.CV_16U, "int32"] + ([] if valid else
                                                                                          [np.float64, None, 99]))
        backend = random_choice(rng, ["cpu", "auto"] if valid else ["cpu", "auto", "cuda", "tpu", None])
        result, error = call(ms.connected_components_with_stats, image, connectivity, ltype, backend=backend)
        stats, _ = call(ms.component_stats, image, connectivity, backend=backend)
        call(ms.connected_components, image, connectivity, ltype, backend=backend)
        call(ms.threshold, image, random_choice(rng, ["otsu", "fixed:7", "adaptive:3:1", "triangle", "x", 3]))
        if error is not None or connectivity not in (4, 8) or isinstance(connectivity, bool):
            continue
        cv_ltype = cv2.CV_16U if np.dtype(result[1].dtype) == np.uint16 else cv2.CV_32S
        theirs = opencv_labels(image, int(connectivity), cv_ltype)
        if theirs is None:
            continue
        n, labels, table, centroids = result
        assert n == theirs[0] and np.array_equal(labels, theirs[1].reshape(labels.shape))
        assert np.array_equal(table, theirs[2]) and np.array_equal(centroids, theirs[3], equal_nan=True)
        assert stats.n == n and np.array_equal(stats.stats, table)
        compared += 1
    assert compared >= 100, f"only {compared} calls compared with OpenCV"


def dictionary_index(dictionary):
    if isinstance(dictionary, int):
        return dictionary
    names = [n.upper().removeprefix("DICT_") for n in ms.DICTIONARIES]
    return names.index(dictionary.upper().removeprefix("DICT_"))


def test_marker_arguments():
    rng = np.random.default_rng(45)
    dictionaries = ["DICT_4X4_50", "DICT_APRILTAG_36h11", "4x4_50", 0, 21, 22, -1, "nope", None, ["DICT_5X5_50", 3], [],
                    2.0, b"DICT_4X4_50"]
    compared = 0
    for _ in range(300):
        dictionary = random_choice(rng, dictionaries)
        image = random_array(rng)
        call(ms.detect_markers, image, dictionary, backend=random_choice(rng, ["cpu", "auto", "cuda", "x"]),
             refine=bool(rng.integers(0, 2)),
             parameters=random_choice(rng, [None, {}, {"window_min": int(rng.integers(-2, 9))},
                                            {"cell_margin": float(rng.uniform(-1, 1))}, {"x": 1}, []]))
        if rng.integers(0, 2):
            dictionary = random_choice(rng, ["DICT_4X4_50", "DICT_APRILTAG_36h11", "4x4_50", 0, 21])
            marker_id, size, border = int(rng.integers(0, 50)), int(rng.integers(10, 120)), int(rng.integers(1, 3))
        else:
            marker_id = random_choice(rng, [0, 1, 49, 50, 586, 587, -1, 2**40, 1.5, None, np.int64(7)])
            size = random_choice(rng, [1, 5, 6, 8, 50, 97, 0, -3, 40000, 2.0, None])
            border = random_choice(rng, [1, 2, 0, -1, 65, 1.0])
        ours, _ = call(ms.generate_marker, dictionary, marker_id, size, border)
        if ours is not None and isinstance(dictionary, (str, int)):
            d = cv2.aruco.getPredefinedDictionary(dictionary_index(dictionary))
            theirs = cv2.aruco.generateImageMarker(d, int(marker_id), int(size), borderBits=int(border))
            assert np.array_equal(ours, theirs), (dictionary, marker_id, size, border)
            compared += 1
    assert compared >= 100


def test_pose_and_tracker_arguments():
    rng = np.random.default_rng(7)
    h = 0.5
    obj = np.array([[-h, h, 0], [h, h, 0], [h, -h, 0], [-h, -h, 0]])
    compared = 0
    for _ in range(400):
        k = np.array([[rng.uniform(300, 900), 0, rng.uniform(200, 400)], [0, rng.uniform(300, 900), rng.uniform(150, 300)],
                      [0, 0, 1]])
        dist = rng.uniform(-0.05, 0.05, 5)
        centre = rng.uniform(100, 400, 2)
        side = rng.uniform(30, 120)
        quad = centre + np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * side / 2 + rng.uniform(-4, 4, (4, 2))
        good = rng.integers(0, 3) > 0
        corners = quad[None] if good else random_array(rng)
        length = 1.0 if good else random_choice(rng, [1.0, 0, -1, float("inf"), "1", None, np.float32(2)])
        camera = k if good else random_choice(rng, [k, np.eye(3), np.eye(2), None, "K", k * np.nan])
        coeffs = dist if good else random_choice(rng, [None, dist[:4], np.zeros(8), np.ones(8), [], "d", dist[:2]])
        result, _ = call(ms.estimate_pose, corners, length, camera, coeffs)
        if good and result is not None:
            ok, rvec, tvec = cv2.solvePnP(obj, quad, k, dist, flags=cv2.SOLVEPNP_IPPE_SQUARE)
            assert ok
            np.testing.assert_allclose(result[0].reshape(3, 1), rvec, atol=1e-6)
            np.testing.assert_allclose(result[1].reshape(3, 1), tvec, atol=1e-6)
            compared += 1
        tracker = ms.Tracker()
        for _ in range(3):
            n = int(rng.integers(0, 4))
            x = random_choice(rng, [rng.uniform(0, 100, n), list(rng.uniform(0, 100, n)), random_array(rng)])
            y = random_choice(rng, [rng.uniform(0, 100, n), random_array(rng)])
            area = random_choice(rng, [None, np.full(n, 5.0), random_array(rng)])
            call(tracker.update, x, y, area, random_choice(rng, [None, 0, 5, -1, 2.5]))
    assert compared >= 100


@pytest.mark.parametrize("source", ["synthetic", "", "camera:-1", "nothere.mp4", "*.nothing", 3, None,
                                    np.zeros((2, 8, 8), np.uint8), np.zeros((8, 8, 3), np.uint8),
                                    [np.zeros((4, 4), np.float32)], [np.zeros((0, 4), np.uint8)], [[1, 2], "x"]],
                         ids=range(12))
def test_analyze_arguments(source):
    rng = np.random.default_rng(7)
    for _ in range(20):
        kwargs = {
            "max_frames": random_choice(rng, [1, 2, 0, -1, None, 1.5]),
            "size": random_choice(rng, [None, (32, 24), (0, 5), (5,), "x", (2**33, 1)]),
            "connectivity": random_choice(rng, [4, 8, 5]),
            "threshold": random_choice(rng, [None, "otsu", "fixed:300", "x"]),
            "backend": random_choice(rng, ["cpu", "cuda", "x"]),
            "min_area": random_choice(rng, [None, 3, -1, 1.5]),
            "max_aspect": random_choice(rng, [None, 2.0, 0.5, "x"]),
            "world_points": random_choice(rng, [(), ["1,2=3,4"] * 4, [((0, 0), (1, 1))], ["x"]]),
        }
        analysis, _ = call(ms.analyze, source, **kwargs)
        if analysis is not None:
            with analysis:
                rows, _ = call(list, analysis)
                for r in rows or []:
                    assert r.dtype.names == tuple(ms.CSV_COLUMNS)
