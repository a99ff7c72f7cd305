"""Shared helpers: the papers' random images, OpenCV's results, comparisons."""

import numpy as np
import pytest

cv2 = pytest.importorskip("cv2", reason="the comparison tests need OpenCV: bash .ci/install installs it")


def papers_random(width, height, density, granularity, seed):
    """The papers' random image (MT19937 through numpy's RandomState, g×g blocks), as
    tests/opencv_reference.py makes it."""
    bh, bw = -(-height // granularity), -(-width // granularity)
    blocks = np.random.RandomState(seed).random_sample((bh, bw)) < density
    return np.kron(blocks, np.ones((granularity, granularity), dtype=bool))[:height, :width]


def opencv(image, connectivity, raster_order=True):
    """cv2.connectedComponentsWithStats; with ``raster_order`` through CCL_WU (numbered in
    raster order of first pixel, as markerscope numbers)."""
    img = np.ascontiguousarray(image, dtype=np.uint8)
    if raster_order:
        return cv2.connectedComponentsWithStatsWithAlgorithm(img, connectivity, cv2.CV_32S, cv2.CCL_WU)
    return cv2.connectedComponentsWithStats(img, connectivity=connectivity)


def assert_same(ours, theirs, what=""):
    n, labels, stats, centroids = ours
    tn, tlabels, tstats, tcentroids = theirs
    assert n == tn, f"{what}: component count {n} != OpenCV's {tn}"
    assert labels.dtype == tlabels.dtype and labels.shape == tlabels.shape, what
    assert np.array_equal(labels, tlabels), f"{what}: label images differ"
    assert stats.dtype == np.int32 and np.array_equal(stats, tstats), f"{what}: stats differ"
    assert centroids.dtype == np.float64, what
    assert np.array_equal(centroids, tcentroids, equal_nan=True), f"{what}: centroids differ"


def assert_same_up_to_numbering(ours, theirs, what=""):
    """Equal partitions and per-component statistics under a renumbering (OpenCV's default
    8-connectivity numbering)."""
    n, labels, stats, centroids = ours
    tn, tlabels, tstats, tcentroids = theirs
    assert n == tn, what
    pairs = np.unique(np.stack([labels.ravel(), tlabels.ravel()]), axis=1)
    # One OpenCV label for each of ours and back (the background, 0, may be absent).
    assert len(np.unique(pairs[0])) == len(np.unique(pairs[1])) == pairs.shape[1], f"{what}: the partitions differ"
    assert pairs.shape[1] == n - (0 not in pairs[0]), f"{what}: the partitions differ"
    mapping = np.zeros(n, dtype=np.int64)
    mapping[pairs[0]] = pairs[1]
    assert np.array_equal(np.sort(mapping), np.arange(n)), what
    assert np.array_equal(stats, tstats[mapping]), f"{what}: stats differ"
    assert np.array_equal(centroids, tcentroids[mapping], equal_nan=True), f"{what}: centroids differ"
