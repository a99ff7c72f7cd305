"""The package as a drop-in for cv2 call sites, and errors of the right kind."""

import importlib.metadata
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import markerscope as ms
from conftest import assert_same, cv2, opencv, papers_random


def test_cv2_call_sites_work_unchanged():
    image = papers_random(97, 61, 0.5, 1, seed=31).astype(np.uint8) * 255
    for connectivity in (4, 8):
        ours = ms.connected_components_with_stats(image, connectivity, cv2.CV_32S, backend="cpu")
        assert_same(ours, opencv(image, connectivity), f"positional ltype, c={connectivity}")
    n, labels = ms.connected_components(image, 4, cv2.CV_16U, backend="cpu")
    tn, tlabels = cv2.connectedComponents(image, connectivity=4, ltype=cv2.CV_16U)
    assert n == tn and labels.dtype == np.uint16 and np.array_equal(labels, tlabels)
    n, labels = ms.connected_components(image, backend="cpu")
    tn, tlabels = cv2.connectedComponentsWithAlgorithm(image, 8, cv2.CV_32S, cv2.CCL_WU)
    assert n == tn and np.array_equal(labels, tlabels)
    for name in ("CC_STAT_LEFT", "CC_STAT_TOP", "CC_STAT_WIDTH", "CC_STAT_HEIGHT", "CC_STAT_AREA", "CV_32S", "CV_16U"):
        assert getattr(ms, name) == getattr(cv2, name), name


def test_inputs_cv2_accepts_give_cv2s_results():
    base = papers_random(53, 41, 0.45, 2, seed=32)
    signed = np.where(base, np.int8(-7), np.int8(0))
    assert_same(ms.connected_components_with_stats(signed, 8, backend="cpu"), opencv(signed.view(np.uint8), 8), "int8")
    theirs = cv2.connectedComponentsWithStats(signed, connectivity=4)
    assert_same(ms.connected_components_with_stats(signed, 4, backend="cpu"), theirs, "int8 as cv2 reads it")
    column = base.astype(np.uint8)[:, :, None]
    assert_same(ms.connected_components_with_stats(column, 4, backend="cpu"),
                cv2.connectedComponentsWithStats(column, connectivity=4), "(h, w, 1)")
    expected = opencv(base, 8)
    assert_same(ms.connected_components_with_stats(base.astype(int).tolist(), 8, backend="cpu"), expected, "list")
    assert_same(ms.connected_components_with_stats(memoryview(base.astype(np.uint8)), 8, backend="cpu"),
                expected, "buffer")
    r = ms.component_stats(column, 4, backend="cpu")
    assert np.array_equal(r.stats, theirs[2]) or r.n == cv2.connectedComponentsWithStats(column, connectivity=4)[0]


def test_float_levels_as_cv2_threshold_returns_them():
    grey = np.random.default_rng(3).integers(0, 256, (40, 50), dtype=np.uint8)
    level, mask = cv2.threshold(grey, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU)
    assert isinstance(level, float)
    by_float = ms.component_stats(mask, grey=grey, level=level, backend="cpu")
    by_int = ms.component_stats(mask, grey=grey, level=int(level), backend="cpu")
    assert np.array_equal(by_float.subpixel, by_int.subpixel, equal_nan=True)
    for bad in (107.5, -1, 256.0, float("nan"), "107"):
        with pytest.raises(ValueError, match="level: expected an integer in 0..=255"):
            ms.component_stats(mask, grey=grey, level=bad, backend="cpu")


def test_algorithms_version_and_gpu_error_class():
    for info in ms.algorithms():
        assert isinstance(info["connectivity"], list) and set(info["connectivity"]) <= {4, 8}
        assert all(type(c) is int for c in info["connectivity"])
    assert [4, 8] in [a["connectivity"] for a in ms.algorithms()]
    assert ms.__version__ == importlib.metadata.version("markerscope")
    assert issubclass(ms.GpuUnavailableError, RuntimeError) and issubclass(ms.GpuUnavailableError, ValueError)
    assert ms.GpuUnavailableError.__module__ == "markerscope"


def test_no_gpu_is_one_exception_with_one_wording():
    if ms.devices()[0]["usable"]:
        pytest.skip("a GPU is usable here")
    image = np.zeros((8, 8), np.uint8)
    calls = [
        lambda: ms.connected_components_with_stats(image, backend="cuda"),
        lambda: ms.component_stats(image, backend="cuda"),
        lambda: ms.analyze("synthetic", max_frames=1, backend="cuda"),
        lambda: ms.detect_markers(image, "DICT_4X4_50", backend="cuda"),
    ]
    messages = []
    for call in calls:
        with pytest.raises(ms.GpuUnavailableError) as caught:
            call()
        messages.append(str(caught.value))
    assert all(m.startswith("CUDA backend unavailable: ") for m in messages), messages
    assert "--" not in "".join(messages)


def test_messages_name_arguments_not_command_line_flags():
    image = np.zeros((4, 4), np.uint8)
    with pytest.raises(ValueError, match="backend='cpu': algorithm 'ha4w' runs on") as caught:
        ms.connected_components_with_stats(image, backend="cpu", algorithm="ha4w")
    assert "--" not in str(caught.value)
    with pytest.raises(ValueError, match="never ends: give max_frames=N"):
        ms.analyze("synthetic")


def test_empty_and_0d_inputs_name_the_argument_and_shape():
    for call, name in [(lambda a: ms.connected_components_with_stats(a, backend="cpu"), "image"),
                       (lambda a: ms.component_stats(a, backend="cpu"), "image"),
                       (lambda a: ms.threshold(a, "otsu"), "grey"),
                       (lambda a: ms.detect_markers(a, "DICT_4X4_50"), "image")]:
        with pytest.raises(ValueError, match=f"^{name}: .*0-D"):
            call(np.uint8(1))
        with pytest.raises(ValueError, match=rf"^{name}: .*empty \(shape \(0, 3\)\)"):
            call(np.zeros((0, 3), np.uint8))


def test_int32_overflow_is_refused_and_int64_statistics_are_exact():
    # A row of 2^31 pixels: its width and the background's area do not fit int32. Zero pages
    # cost no memory, and a C-ordered mask is read where it is.
    row = np.zeros((1, 2**31), np.uint8)
    with pytest.raises(OverflowError, match="label 0: its width is 2147483648 px.*stats_dtype=numpy.int64"):
        ms.component_stats(row, backend="cpu")
    r = ms.component_stats(row, backend="cpu", stats_dtype=np.int64)
    assert r.stats.dtype == np.int64 and r.stats.tolist() == [[0, 0, 2**31, 1, 2**31]]


def test_memory_over_the_limit_is_a_memory_error():
    # Under an address-space limit, labeling a 40000² mask asks more than there is.
    script = textwrap.dedent("""
        import resource, numpy as np, markerscope as ms
        image = np.zeros((40000, 40000), np.uint8)
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, hard))
        for call in (lambda: ms.connected_components_with_stats(image, backend="cpu"),
                     lambda: ms.connected_components_with_stats(image[:, ::2], backend="cpu"),
                     lambda: ms.component_stats(image, backend="cpu", algorithm="bfs")):
            try:
                call()
                print("no error")
            except MemoryError as e:
                print("MemoryError:", e)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 3 and all(line.startswith("MemoryError:") for line in lines), out.stdout
    assert "40000x40000" in lines[0] and "GiB" in lines[0], lines[0]


def test_analyze_takes_paths_and_the_clis_options(tmp_path):
    pytest.importorskip("PIL")
    from PIL import Image

    image = np.zeros((60, 80), np.uint8)
    image[10:20, 10:20] = 255  # a square
    image[35:37, 5:75] = 255   # a long bar
    image[40:50, 60:64] = 255  # a small block
    path = tmp_path / "frame.png"
    Image.fromarray(image).save(path)
    with ms.analyze(pathlib.Path(path), threshold="fixed:127", backend="cpu") as frames:
        rows = np.concatenate(list(frames))
    assert len(rows) == 3
    with ms.analyze(path, threshold="fixed:127", backend="cpu", min_area=50, max_aspect=3.0) as frames:
        rows = np.concatenate(list(frames))
    assert rows["area"].tolist() == [100]
    with ms.analyze(path, threshold="fixed:127", backend="cpu", shapes=True,
                    world_points=["0,0=0,0", "80,0=8,0", ((80, 60), (8, 6)), ((0, 60), (0, 6))],
                    world_units="cm") as frames:
        rows = np.concatenate(list(frames))
    assert not np.isnan(rows["circularity"]).any()
    np.testing.assert_allclose(rows["x_world"], rows["centroid_x"] / 10, atol=1e-9)
    mask = np.zeros((60, 80), np.uint8)
    mask[:, :40] = 255
    Image.fromarray(mask).save(tmp_path / "mask.png")
    with ms.analyze(path, threshold="fixed:127", backend="cpu", masks=tmp_path / "mask.png") as frames:
        rows = np.concatenate(list(frames))
    assert rows["left"].max() < 40
    with pytest.raises(ValueError, match="size: only synthetic frames are made at a size"):
        ms.analyze(path, size=(10, 10))
    with pytest.raises(ValueError, match="max_frames: must be at least 1"):
        ms.analyze(path, max_frames=0)
    with pytest.raises(ValueError, match="min area 9 is above max area 3"):
        ms.analyze(path, min_area=9, max_area=3)
    with pytest.raises(ValueError, match="min_area: expected an integer >= 0"):
        ms.analyze(path, min_area=-1)
    with pytest.raises(ValueError, match="world_points: .*at least 4"):
        ms.analyze(path, world_points=["0,0=0,0"])
    with pytest.raises(ValueError, match="calibration: needs four or more world_points"):
        ms.analyze(path, calibration=tmp_path / "cam.yaml")
    with pytest.raises(OSError, match="nothere.png"):
        ms.analyze(path, masks=[tmp_path / "nothere.png"])


def test_analyze_takes_arrays_and_iterables_of_frames(tmp_path):
    pytest.importorskip("PIL")
    from PIL import Image

    rng = np.random.default_rng(8)
    frames = [(rng.random((48, 64)) < 0.3).astype(np.uint8) * 200 for _ in range(4)]
    for i, frame in enumerate(frames):
        Image.fromarray(frame).save(tmp_path / f"f{i}.png")
    options = dict(threshold="fixed:100", backend="cpu", shapes=True)
    with ms.analyze(tmp_path, **options) as analysis:
        expected = np.concatenate(list(analysis))
    columns = [c for c in ms.CSV_COLUMNS if c != "file"]

    def same(rows):
        assert len(rows) == len(expected)
        for name in columns:
            assert np.array_equal(rows[name], expected[name], equal_nan=True), name

    for source in (frames, np.stack(frames), iter(frames), (f for f in frames),
                   [np.stack([f] * 3, axis=2) for f in frames]):
        with ms.analyze(source, **options) as analysis:
            same(np.concatenate(list(analysis)))
    with ms.analyze(frames[0], **options) as analysis:
        assert len(list(analysis)) == 1

    def endless():
        while True:
            yield frames[0]

    with ms.analyze(endless(), max_frames=3, **options) as analysis:
        assert len(list(analysis)) == 3
    # Leaving early stops the pulling at once.
    analysis = ms.analyze(endless(), **options)
    next(analysis)
    analysis.close()

    def failing():
        yield frames[0]
        raise KeyError("camera unplugged")

    with pytest.raises(KeyError, match="camera unplugged"):
        list(ms.analyze(failing(), **options))
    with pytest.raises(TypeError, match="frame 1: expected a uint8 image, got dtype float64"):
        list(ms.analyze([frames[0], frames[0] / 2.0], **options))
    with pytest.raises(ValueError, match="frame 0: .*empty"):
        list(ms.analyze([np.zeros((0, 4), np.uint8)], **options))
    with pytest.raises(TypeError, match="source: expected a path, a source spec, frames"):
        ms.analyze(42)
    with pytest.raises(ValueError, match="size: only synthetic frames"):
        ms.analyze(frames, size=(8, 8))
