"""The GPU paths against the CPU result: numpy in (upload), CuPy in and PyTorch in (device
memory, results on the device). Skipped where no GPU is usable."""

import numpy as np
import pytest

import markerscope as ms
from conftest import assert_same, papers_random

GPU = ms.devices()[0]
pytestmark = pytest.mark.skipif(not GPU["usable"], reason=f"no usable GPU: {GPU['why_not']}")

CASES = [(1, 1, 1.0, 1), (1, 37, 0.5, 1), (37, 1, 0.5, 1), (131, 97, 0.5, 1), (256, 64, 0.3, 4),
         (257, 129, 0.7, 4), (64, 48, 0.0, 1), (64, 48, 1.0, 1), (1920, 1080, 0.5, 4), (4097, 301, 0.45, 1)]


def images():
    for i, (w, h, d, g) in enumerate(CASES):
        yield f"{w}x{h} d={d} g={g}", papers_random(w, h, d, g, seed=500 + i).astype(np.uint8)


def cpu(image, connectivity):
    return ms.connected_components_with_stats(image, connectivity, backend="cpu")


@pytest.mark.parametrize("connectivity", [4, 8])
def test_numpy_in(connectivity):
    for what, image in images():
        ours = ms.connected_components_with_stats(image, connectivity, backend="cuda")
        assert_same(ours, cpu(image, connectivity), what)
        r = ms.component_stats(image, connectivity, backend="cuda")
        exp = ms.component_stats(image, connectivity, backend="cpu")
        assert r.n == exp.n and np.array_equal(r.stats, exp.stats) and np.array_equal(r.sums, exp.sums), what


def check_device_results(to_device, to_host, connectivity):
    for what, image in images():
        expected = cpu(image, connectivity)
        n, labels, stats, centroids = ms.connected_components_with_stats(to_device(image), connectivity)
        assert_same((n, to_host(labels), to_host(stats), to_host(centroids)), expected, what)
        r = ms.component_stats(to_device(image), connectivity)
        exp = ms.component_stats(image, connectivity, backend="cpu")
        assert r.n == exp.n, what
        assert np.array_equal(to_host(r.stats), exp.stats), what
        assert np.array_equal(to_host(r.centroids), exp.centroids, equal_nan=True), what
        assert np.array_equal(to_host(r.sums), exp.sums), what


@pytest.mark.parametrize("connectivity", [4, 8])
def test_cupy_in(connectivity):
    cupy = pytest.importorskip("cupy")
    check_device_results(cupy.asarray, cupy.asnumpy, connectivity)
    image = papers_random(300, 200, 0.5, 1, seed=1).astype(np.uint8)
    n, labels, stats, _ = ms.connected_components_with_stats(cupy.asarray(image), connectivity)
    assert isinstance(labels, cupy.ndarray) and isinstance(stats, cupy.ndarray)
    assert labels.dtype == np.int32 and stats.dtype == np.int32
    # Bool, a strided view, a padded-row view and a view at an odd offset.
    expected = cpu(image, connectivity)
    wide = cupy.zeros((200, 600), dtype=cupy.uint8)
    wide[:, ::2] = cupy.asarray(image)
    padded = cupy.zeros((200, 333), dtype=cupy.uint8)
    padded[:, 1:301] = cupy.asarray(image)
    for what, arr in [("bool", cupy.asarray(image.astype(bool))), ("strided", wide[:, ::2]),
                      ("padded", padded[:, 1:301])]:
        n, labels, stats, centroids = ms.connected_components_with_stats(arr, connectivity)
        assert_same((n, labels.get(), stats.get(), centroids.get()), expected, what)


@pytest.mark.parametrize("connectivity", [4, 8])
def test_torch_in(connectivity):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no GPU")
    check_device_results(lambda a: torch.from_numpy(a).cuda(), lambda t: t.cpu().numpy(), connectivity)
    image = papers_random(300, 200, 0.5, 1, seed=1).astype(np.uint8)
    n, labels, stats, centroids = ms.connected_components_with_stats(torch.from_numpy(image).cuda(), connectivity)
    assert labels.is_cuda and labels.dtype == torch.int32 and centroids.dtype == torch.float64
    # Work queued on a side stream is waited for.
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        t = torch.zeros((200, 300), dtype=torch.uint8, device="cuda")
        t += torch.from_numpy(image).cuda()
        r = ms.component_stats(t, connectivity)
    assert r.n == cpu(image, connectivity)[0]
