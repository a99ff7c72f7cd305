"""The GPU paths against the CPU result: numpy in (upload), CuPy in and PyTorch in (device
memory, results on the device). Skipped where no GPU is usable."""

import numpy as np
import pytest

import markerscope as ms
from conftest import assert_same, opencv, papers_random

GPU = ms.devices()[0]
pytestmark = pytest.mark.skipif(not GPU["usable"], reason=f"no usable GPU: {GPU['why_not']}")

CASES = [(1, 1, 1.0, 1), (1, 37, 0.5, 1), (37, 1, 0.5, 1), (131, 97, 0.5, 1), (256, 64, 0.3, 4),
         (257, 129, 0.7, 4), (64, 48, 0.0, 1), (64, 48, 1.0, 1), (1920, 1080, 0.5, 4), (4097, 301, 0.45, 1)]


def shapes():
    """Masks whose background box is not the whole image: the background row is measured from
    the runs' ends, so rows and columns that are all foreground at the edges must be left out."""
    framed = np.ones((8, 9), np.uint8)
    framed[1:7, 1:8] = 0
    framed[:, 4] = 1
    bands = np.zeros((12, 40), np.uint8)
    bands[:3], bands[10:], bands[:, :5], bands[:, 31:] = 1, 1, 1, 1
    one_hole = np.ones((20, 33), np.uint8)
    one_hole[19, 32] = 0
    corner = np.ones((20, 33), np.uint8)
    corner[0, 0] = 0
    column = np.ones((20, 33), np.uint8)
    column[:, 17] = 0
    row = np.ones((20, 33), np.uint8)
    row[5] = 0
    # A large frame with a full first row and last column.
    large = papers_random(2048, 2048, 0.5, 4, seed=499).astype(np.uint8)
    large[0], large[:, -1] = 1, 1
    return [("framed", framed), ("bands", bands), ("one hole", one_hole), ("corner", corner),
            ("column", column), ("row", row), ("2048x2048 d=0.5 g=4, full edges", large)]


def images():
    for i, (w, h, d, g) in enumerate(CASES):
        yield f"{w}x{h} d={d} g={g}", papers_random(w, h, d, g, seed=500 + i).astype(np.uint8)
    yield from shapes()


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


def test_results_are_ready_for_the_callers_stream():
    """The call returns without the host waiting for the row writing: a non-blocking stream of
    the caller's (which the legacy default stream does not order) reads the results at once,
    and must see them written. A large image keeps the GPU busy after the call returns."""
    image = papers_random(4096, 4096, 0.3, 4, seed=7).astype(np.uint8)
    expected = ms.component_stats(image, 8, backend="cpu")
    tried = 0
    try:
        import cupy

        tried += 1
        side = cupy.cuda.Stream(non_blocking=True)
        with side:
            x = cupy.asarray(image)
            r = ms.component_stats(x, 8)
            stats, sums = r.stats.copy(), r.sums.copy()  # queued on `side` right away
        side.synchronize()
        assert r.n == expected.n
        assert np.array_equal(stats.get(), expected.stats) and np.array_equal(sums.get(), expected.sums)
    except ImportError:
        pass
    try:
        import torch

        if torch.cuda.is_available():
            tried += 1
            side = torch.cuda.Stream()  # PyTorch's streams do not block on the legacy stream
            with torch.cuda.stream(side):
                t = torch.from_numpy(image).cuda()
                r = ms.component_stats(t, 8)
                stats = r.stats.clone()
                n, labels, _, _ = ms.connected_components_with_stats(t, 8)
                area = torch.bincount(labels.flatten().long(), minlength=n)
            side.synchronize()
            assert np.array_equal(stats.cpu().numpy(), expected.stats)
            assert np.array_equal(area.cpu().numpy(), expected.stats[:, 4])
    except ImportError:
        pass
    if not tried:
        pytest.skip("neither CuPy nor PyTorch with a GPU")


DEVICE_ALGORITHMS = ["flsl", "flsl_otf", "flsl_cd", "flsl_cdb"]


def libraries():
    """(name, to_device(array, device), to_host, device_of) of the CUDA libraries here."""
    found = []
    try:
        import cupy

        def cupy_to(a, device=0):
            with cupy.cuda.Device(device):
                return cupy.asarray(a)

        found.append(("cupy", cupy_to, cupy.asnumpy, lambda a: a.device.id, cupy.cuda.runtime.getDeviceCount()))
    except ImportError:
        pass
    try:
        import torch

        if torch.cuda.is_available():
            found.append(("torch", lambda a, device=0: torch.from_numpy(a).to(f"cuda:{device}"),
                          lambda t: t.cpu().numpy(), lambda t: t.device.index, torch.cuda.device_count()))
    except ImportError:
        pass
    if not found:
        pytest.skip("neither CuPy nor PyTorch with a GPU")
    return found


@pytest.mark.parametrize("connectivity", [4, 8])
def test_background_row_of_cuda_arrays_equals_opencv(connectivity):
    for lib, to_device, to_host, _, _ in libraries():
        for what, image in list(shapes()) + [("all foreground", np.ones((3, 5), np.uint8)),
                                             ("all background", np.zeros((5, 3), np.uint8))]:
            n, labels, stats, centroids = ms.connected_components_with_stats(to_device(image), connectivity)
            assert_same((n, to_host(labels), to_host(stats), to_host(centroids)), opencv(image, connectivity),
                        f"{lib} {what}")
            r = ms.component_stats(to_device(image), connectivity)
            assert np.array_equal(to_host(r.stats), to_host(stats)), f"{lib} {what}"


@pytest.mark.parametrize("algorithm", DEVICE_ALGORITHMS)
@pytest.mark.parametrize("connectivity", [4, 8])
def test_every_device_algorithm_on_cuda_arrays(algorithm, connectivity):
    for lib, to_device, to_host, _, _ in libraries():
        for what, image in images():
            what = f"{lib} {algorithm} {what}"
            expected = cpu(image, connectivity)
            n, labels, stats, centroids = ms.connected_components_with_stats(to_device(image), connectivity,
                                                                             algorithm=algorithm)
            assert_same((n, to_host(labels), to_host(stats), to_host(centroids)), expected, what)
            r = ms.component_stats(to_device(image), connectivity, algorithm=algorithm)
            exp = ms.component_stats(image, connectivity, backend="cpu")
            assert r.n == exp.n and np.array_equal(to_host(r.stats), exp.stats), what
            assert np.array_equal(to_host(r.sums), exp.sums), what


def test_other_algorithms_are_refused_for_cuda_arrays():
    for lib, to_device, _, _, _ in libraries():
        image = to_device(papers_random(64, 48, 0.5, 1, seed=2).astype(np.uint8))
        for info in ms.algorithms():
            if info["device_input"]:
                continue
            with pytest.raises(ValueError, match="cannot label CUDA arrays; use one of flsl, flsl_otf"):
                ms.connected_components_with_stats(image, 4 if 4 in info["connectivity"] else 8,
                                                   algorithm=info["name"])


@pytest.mark.parametrize("connectivity", [4, 8])
def test_subpixel_centroids_of_cuda_grey_images_equal_numpy(connectivity):
    rng = np.random.default_rng(3)
    for lib, to_device, to_host, _, _ in libraries():
        for (w, h) in [(1, 1), (37, 1), (131, 97), (1920, 1080)]:
            grey = (rng.random((h, w)) * 255).astype(np.uint8)
            # Blobs: smoothed noise, so components have many pixels of differing weight.
            grey = np.clip(grey.astype(np.int32) // 2 + np.roll(grey, 1, axis=1) // 2, 0, 255).astype(np.uint8)
            for invert in (False, True):
                level, mask = ms.threshold(grey, "otsu", invert=invert)
                exp = ms.component_stats(mask, connectivity, grey=grey, level=level, invert=invert, backend="cpu")
                for algorithm in DEVICE_ALGORITHMS:
                    what = f"{lib} {algorithm} {w}x{h} invert={invert}"
                    r = ms.component_stats(to_device(mask), connectivity, grey=to_device(grey), level=level,
                                           invert=invert, algorithm=algorithm)
                    assert r.n == exp.n, what
                    assert np.array_equal(to_host(r.subpixel), exp.subpixel, equal_nan=True), what
        # A grey view with padded rows is copied, and gives the same centroids.
        grey = (rng.random((60, 90)) * 255).astype(np.uint8)
        level, mask = ms.threshold(grey, "fixed:128")
        exp = ms.component_stats(mask, connectivity, grey=grey, level=level, backend="cpu")
        wide = np.zeros((60, 128), np.uint8)
        wide[:, 3:93] = grey
        padded = to_device(wide)[:, 3:93]
        r = ms.component_stats(to_device(mask), connectivity, grey=padded, level=level)
        assert np.array_equal(to_host(r.subpixel), exp.subpixel, equal_nan=True), f"{lib} padded grey"


def current_device(lib):
    if lib == "cupy":
        import cupy

        return cupy.cuda.runtime.getDevice()
    import torch

    return torch.cuda.current_device()


def test_cuda_arrays_are_labeled_on_their_own_device():
    for lib, to_device, to_host, device_of, count in libraries():
        if count < 2:
            pytest.skip(f"{lib} sees {count} GPU; the test needs two")
        image = papers_random(257, 129, 0.5, 1, seed=9).astype(np.uint8)
        expected = cpu(image, 8)
        for device in range(count):
            on_device = to_device(image, device)
            before = current_device(lib)
            n, labels, stats, centroids = ms.connected_components_with_stats(on_device, 8)
            assert current_device(lib) == before, f"{lib}: the caller's current device changed"
            assert {device_of(labels), device_of(stats), device_of(centroids)} == {device}, lib
            assert_same((n, to_host(labels), to_host(stats), to_host(centroids)), expected, f"{lib} device {device}")
            grey = (image * 200).astype(np.uint8)
            r = ms.component_stats(to_device(image, device), 8, grey=to_device(grey, device), level=100)
            assert device_of(r.subpixel) == device, lib
        grey = (image * 200).astype(np.uint8)
        with pytest.raises(ValueError, match="device"):
            ms.component_stats(to_device(image, 1), 8, grey=to_device(grey, 0), level=100)


def test_markers_in_cuda_arrays_equal_numpy():
    frame = np.full((240, 320), 230, np.uint8)
    frame[40:160, 60:180] = ms.generate_marker("DICT_4X4_50", 9, 120)
    frame[100:200, 200:300] = ms.generate_marker("DICT_4X4_50", 21, 100)
    expected = ms.detect_markers(frame, "DICT_4X4_50")
    assert sorted(expected[1].ravel()) == [9, 21]
    import importlib
    import importlib.util

    makers = [(module, make) for module, make in (("cupy", lambda m: m.asarray(frame)),
                                                  ("torch", lambda m: m.from_numpy(frame).cuda()))
              if importlib.util.find_spec(module)]
    if not makers:
        pytest.skip("neither CuPy nor PyTorch is installed")
    for module, make in makers:
        lib = importlib.import_module(module)
        for backend in ("auto", "cuda"):
            got = ms.detect_markers(make(lib), "DICT_4X4_50", backend=backend)
            assert np.array_equal(got[1], expected[1]), module
            assert all(np.array_equal(a, b) for a, b in zip(got[0], expected[0])), module


def test_link_on_the_gpu_gives_the_cpus_trajectories():
    pd = pytest.importorskip("pandas", reason="link works on pandas DataFrames")
    rng = np.random.default_rng(3)
    p = rng.uniform(0, 1000, (4000, 2))
    rows = []
    for f in range(12):
        keep = rng.uniform(size=len(p)) < 0.97
        rows.append(pd.DataFrame({"x": p[keep, 0], "y": p[keep, 1], "frame": f}))
        p = p + rng.normal(0, 1.5, p.shape)
    features = pd.concat(rows, ignore_index=True)
    for kw in [{}, {"memory": 2}, {"link_strategy": "greedy"}, {"predict": True}, {"max_candidates": 4}]:
        on_gpu = ms.link(features, 6, backend="cuda", **kw)["particle"].tolist()
        assert on_gpu == ms.link(features, 6, backend="cpu", **kw)["particle"].tolist(), kw
    # One subnetwork past the exact solver: paired greedily on both, with the warning.
    x = np.arange(2100, dtype=float)
    line = pd.concat([pd.DataFrame({"x": x + s, "y": 0.3 * (x % 3), "frame": f}) for f, s in enumerate([0, 0.4])],
                     ignore_index=True)
    with pytest.warns(RuntimeWarning, match="1 subnetwork.*greedy rule"):
        on_gpu = ms.link(line, 1.5, backend="cuda")
    with pytest.warns(RuntimeWarning, match="1 subnetwork.*greedy rule"):
        on_cpu = ms.link(line, 1.5, backend="cpu")
    assert on_gpu["particle"].tolist() == on_cpu["particle"].tolist()
    with pytest.raises(ValueError, match="at most 32 candidates"):
        ms.link(features, 6, backend="cuda", max_candidates=40)
    assert ms.link(features, 6, max_candidates=40)["particle"].nunique() > 0
