"""connected_components_with_stats and component_stats against OpenCV, bit for bit."""

import threading
import time

import numpy as np
import pytest

import markerscope as ms
from conftest import assert_same, assert_same_up_to_numbering, cv2, opencv, papers_random

SIZES = [(1, 1), (1, 37), (37, 1), (64, 48), (257, 129), (131, 97), (1000, 3)]


def random_cases():
    for (w, h) in SIZES:
        for d in (0.0, 0.3, 0.5, 0.7, 1.0):
            for g in (1, 4):
                yield (w, h, d, g)


@pytest.mark.parametrize("connectivity", [4, 8])
def test_random_images_equal_opencv(connectivity):
    for i, (w, h, d, g) in enumerate(random_cases()):
        image = papers_random(w, h, d, g, seed=100 + i).astype(np.uint8) * 255
        what = f"{w}x{h} d={d} g={g} c={connectivity}"
        ours = ms.connected_components_with_stats(image, connectivity, backend="cpu")
        assert_same(ours, opencv(image, connectivity), what)
        # OpenCV's default algorithm: the same numbering at 4, a block order at 8.
        theirs = opencv(image, connectivity, raster_order=False)
        if connectivity == 4:
            assert_same(ours, theirs, what + " (default algorithm)")
        else:
            assert_same_up_to_numbering(ours, theirs, what + " (default algorithm)")


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("fill", [0, 1])
@pytest.mark.parametrize("shape", [(1, 1), (1, 9), (9, 1), (33, 65)])
def test_empty_and_full_images(connectivity, fill, shape):
    image = np.full(shape, fill, dtype=np.uint8)
    ours = ms.connected_components_with_stats(image, connectivity, backend="cpu")
    assert_same(ours, opencv(image, connectivity), f"{shape} filled with {fill}")


def test_every_cpu_algorithm_gives_the_same_table():
    image = papers_random(203, 111, 0.5, 1, seed=7)
    expected = ms.connected_components_with_stats(image, 8, backend="cpu")
    for info in ms.algorithms():
        if info["backend"] == "cpu" and 8 in info["connectivity"]:
            got = ms.connected_components_with_stats(image, 8, backend="cpu", algorithm=info["name"])
            assert_same(got, expected, info["name"])


def test_photographs_thresholded_equal_opencv():
    data = pytest.importorskip("skimage.data", reason="scikit-image: bash .ci/install installs it")
    photos = {"camera": data.camera(), "coins": data.coins(), "moon": data.moon(), "text": data.text(),
              "page": data.page(), "horse": (data.horse() * 255).astype(np.uint8)}
    assert all(p.ndim == 2 and p.dtype == np.uint8 for p in photos.values())
    for name, grey in photos.items():
        for invert in (False, True):
            level, mask = ms.threshold(grey, "otsu", invert=invert)
            kind = cv2.THRESH_BINARY_INV if invert else cv2.THRESH_BINARY
            cv_level, cv_mask = cv2.threshold(grey, 0, 255, kind | cv2.THRESH_OTSU)
            assert level == cv_level and np.array_equal(mask, cv_mask), name
            for connectivity in (4, 8):
                ours = ms.connected_components_with_stats(mask, connectivity, backend="cpu")
                assert_same(ours, opencv(mask, connectivity), f"{name} invert={invert} c={connectivity}")


def test_bool_and_non_contiguous_inputs():
    base = papers_random(90, 70, 0.5, 1, seed=3)
    expected = opencv(base, 8)
    assert_same(ms.connected_components_with_stats(base, backend="cpu"), expected, "bool")
    # A strided view (every other column of a wider array) and a transposed one.
    wide = np.zeros((70, 180), dtype=np.uint8)
    wide[:, ::2] = base * 7
    view = wide[:, ::2]
    assert not view.flags.c_contiguous
    assert_same(ms.connected_components_with_stats(view, backend="cpu"), expected, "strided")
    transposed = np.ascontiguousarray(base.T).T
    assert not transposed.flags.c_contiguous
    assert_same(ms.connected_components_with_stats(transposed, backend="cpu"), expected, "transposed")
    # Any non-zero byte is foreground.
    assert_same(ms.connected_components_with_stats(base.astype(np.uint8) * 3, backend="cpu"), expected, "values 0/3")


def test_results_are_new_numpy_arrays_of_their_own():
    # The label image is allocated by numpy and written in place: an int32 array that owns
    # its memory, not a view of a buffer the next call would overwrite.
    first_image = papers_random(120, 80, 0.5, 1, seed=21).astype(np.uint8) * 255
    second_image = papers_random(120, 80, 0.5, 1, seed=22)
    first = ms.connected_components_with_stats(first_image, 8, backend="cpu")
    kept = [a.copy() for a in first[1:]]
    second = ms.connected_components_with_stats(second_image, 8, backend="cpu")
    for before, after in zip(kept, first[1:]):
        assert np.array_equal(before, after, equal_nan=True), "a later call changed an earlier result"
    assert_same(first, opencv(first_image, 8), "first")
    assert_same(second, opencv(second_image, 8), "second")
    for array in first[1:] + ms.component_stats(first_image, backend="cpu")[1:4]:
        assert array.base is None and array.flags.owndata and array.flags.writeable
        assert array.flags.c_contiguous
    assert first[1].dtype == np.int32


def test_rust_call_times_the_library_labeler():
    from markerscope import _markerscope

    image = papers_random(64, 48, 0.5, 1, seed=5).astype(np.uint8)
    times = _markerscope.RustCall(image, 8, True, "lsl").time(3)
    assert len(times) == 3 and all(0 < t < 10 for t in times)
    with pytest.raises(ValueError, match="nope"):
        _markerscope.RustCall(image, 8, True, "nope")
    with pytest.raises(TypeError, match="uint8"):
        _markerscope.RustCall(image.astype(np.float32), 8, True, "lsl")


def test_uint16_labels_and_cv2_ltype():
    image = papers_random(64, 64, 0.4, 1, seed=9).astype(np.uint8)
    n, labels, stats, centroids = ms.connected_components_with_stats(image, 4, ltype=np.uint16, backend="cpu")
    tn, tlabels, tstats, _ = cv2.connectedComponentsWithStats(image, connectivity=4, ltype=cv2.CV_16U)
    assert labels.dtype == np.uint16 and np.array_equal(labels, tlabels) and np.array_equal(stats, tstats)
    assert ms.connected_components_with_stats(image, 4, ltype=cv2.CV_32S, backend="cpu")[1].dtype == np.int32
    checker = (np.indices((600, 600)).sum(axis=0) % 2).astype(np.uint8)
    with pytest.raises(ValueError, match="uint16"):
        ms.connected_components_with_stats(checker, 4, ltype=np.uint16, backend="cpu")


def test_component_stats_is_the_table_without_labels():
    image = papers_random(301, 203, 0.5, 4, seed=11)
    for connectivity in (4, 8):
        n, labels, stats, centroids = ms.connected_components_with_stats(image, connectivity, backend="cpu")
        r = ms.component_stats(image, connectivity, backend="cpu")
        assert r.n == n and np.array_equal(r.stats, stats) and np.array_equal(r.centroids, centroids)
        assert r.subpixel is None and r.sums.dtype == np.int64 and r.sums.shape == (n, 2)
        ys, xs = np.indices(labels.shape)
        assert np.array_equal(r.sums[:, 0], np.bincount(labels.ravel(), weights=xs.ravel(), minlength=n).astype(np.int64))
        assert np.array_equal(r.sums[:, 1], np.bincount(labels.ravel(), weights=ys.ravel(), minlength=n).astype(np.int64))


def test_subpixel_centroids_weigh_grey_above_the_level():
    rng = np.random.default_rng(5)
    grey = rng.integers(0, 256, (60, 80), dtype=np.uint8)
    level, mask = ms.threshold(grey, "fixed:180")
    assert level == 180
    r = ms.component_stats(mask, 8, grey=grey, level=level, backend="cpu")
    _, labels, _, _ = ms.connected_components_with_stats(mask, 8, backend="cpu")
    w = np.where(labels > 0, grey.astype(np.int64) - level, 0).ravel()
    ys, xs = np.indices(grey.shape)
    total = np.bincount(labels.ravel(), weights=w, minlength=r.n)
    sx = np.bincount(labels.ravel(), weights=w * xs.ravel(), minlength=r.n)
    sy = np.bincount(labels.ravel(), weights=w * ys.ravel(), minlength=r.n)
    assert np.isnan(r.subpixel[0]).all()
    np.testing.assert_allclose(r.subpixel[1:, 0], sx[1:] / total[1:], rtol=1e-12)
    np.testing.assert_allclose(r.subpixel[1:, 1], sy[1:] / total[1:], rtol=1e-12)
    with pytest.raises(ValueError, match="level"):
        ms.component_stats(mask, grey=grey, backend="cpu")
    with pytest.raises(ValueError, match="grey: shape"):
        ms.component_stats(mask, grey=grey[:10], level=level, backend="cpu")


def test_thresholds_equal_opencv():
    rng = np.random.default_rng(1)
    grey = rng.integers(0, 256, (97, 131), dtype=np.uint8)
    level, mask = ms.threshold(grey, "fixed:127")
    assert np.array_equal(mask, cv2.threshold(grey, 127, 255, cv2.THRESH_BINARY)[1])
    level, mask = ms.threshold(grey, "adaptive:11:2")
    assert level is None
    assert np.array_equal(mask, cv2.adaptiveThreshold(grey, 255, cv2.ADAPTIVE_THRESH_MEAN_C, cv2.THRESH_BINARY, 11, 2))
    with pytest.raises(ValueError, match="invalid threshold 'median'"):
        ms.threshold(grey, "median")


@pytest.mark.parametrize("bad, error, match", [
    (np.zeros((4, 4), dtype=np.float32), TypeError, "image: expected a uint8 or bool array, got dtype float32"),
    (np.zeros((4, 4, 3), dtype=np.uint8), ValueError, "image: expected a 2-D array"),
    (np.zeros(5, dtype=np.uint8), ValueError, "image: expected a 2-D array"),
    ("01\n10", TypeError, "image: expected a 2-D array, got str"),
    ([[0.5, 1.0]], TypeError, "image: expected an array of booleans or integers, got list"),
    (np.uint8(1), ValueError, "image: expected a 2-D array, got a 0-D array"),
    (np.zeros((0, 5), dtype=np.uint8), ValueError, "invalid image size 5x0: the image is empty"),
])
def test_bad_images_name_the_argument(bad, error, match):
    with pytest.raises(error, match=match):
        ms.connected_components_with_stats(bad, backend="cpu")


def test_bad_options_name_the_argument():
    image = np.zeros((3, 3), np.uint8)
    with pytest.raises(ValueError, match="connectivity: expected 4 or 8, got 6"):
        ms.connected_components_with_stats(image, 6)
    with pytest.raises(TypeError, match="connectivity"):
        ms.connected_components_with_stats(image, "8")
    with pytest.raises(ValueError, match="ltype"):
        ms.connected_components_with_stats(image, ltype=np.float64)
    with pytest.raises(ValueError, match="backend: unknown backend 'tpu'"):
        ms.connected_components_with_stats(image, backend="tpu")
    with pytest.raises(ValueError, match="unknown algorithm 'nope'; available: bfs"):
        ms.connected_components_with_stats(image, algorithm="nope")
    with pytest.raises(ValueError, match="does not support 8-connectivity"):
        ms.connected_components_with_stats(image, 8, algorithm="ha4")


def test_cuda_backend_without_a_gpu_says_why():
    if ms.devices()[0]["usable"]:
        pytest.skip("a GPU is usable here")
    with pytest.raises(ValueError, match="CUDA backend unavailable: "):
        ms.connected_components_with_stats(np.zeros((3, 3), np.uint8), backend="cuda")
    cuda = [a for a in ms.algorithms() if a["backend"] == "cuda"]
    assert cuda and all(not a["usable"] and "CUDA backend unavailable" in a["why_not"] for a in cuda)
    assert all(a["usable"] for a in ms.algorithms() if a["backend"] == "cpu")


def test_threads_get_the_same_results():
    images = [papers_random(257, 193, d, 1, seed=20 + i) for i, d in enumerate((0.2, 0.4, 0.5, 0.6, 0.8))]
    expected = [ms.connected_components_with_stats(im, 8, backend="cpu") for im in images]
    failures = []

    def work(k):
        for _ in range(5):
            for im, exp in zip(images[k:] + images[:k], expected[k:] + expected[:k]):
                got = ms.connected_components_with_stats(im, 8, backend="cpu")
                if got[0] != exp[0] or not np.array_equal(got[1], exp[1]) or not np.array_equal(got[2], exp[2]):
                    failures.append(k)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def test_the_gil_is_released_while_labeling():
    # The oracle on a large image takes a good fraction of a second; a Python thread counting
    # meanwhile can only run if the call lets go of the GIL.
    image = papers_random(2048, 2048, 0.6, 1, seed=2)
    ticks = []
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    time.sleep(0.02)
    start = time.perf_counter()
    ms.connected_components_with_stats(image, 8, backend="cpu", algorithm="bfs")
    end = time.perf_counter()
    stop.set()
    t.join()
    during = [x for x in ticks if start < x < end]
    assert end - start > 0.05, "the call was too short to tell"
    assert len(during) >= 5, f"{len(during)} ticks in {end - start:.3f} s: the GIL was held"
