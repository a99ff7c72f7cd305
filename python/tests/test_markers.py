"""detect_markers, generate_marker and estimate_pose against cv2.aruco and cv2.solvePnP."""

import numpy as np
import pytest

import markerscope as ms
from conftest import cv2

aruco = cv2.aruco


def render(dictionary, ids, seed, size=(640, 480), side=(50, 75)):
    """A frame with the markers `ids` of `dictionary` (a cv2.aruco dictionary id) pasted under
    perspective, one per cell of a grid, on an unevenly lit background, blurred and noisy."""
    rng = np.random.default_rng(seed)
    w, h = size
    d = aruco.getPredefinedDictionary(dictionary)
    ys, xs = np.indices((h, w))
    frame = (150 + 60 * xs / w + 30 * ys / h).astype(np.float64)
    cells = d.markerSize + 2
    cols = 4 if len(ids) > 2 else 2
    for k, marker_id in enumerate(ids):
        s = rng.uniform(*side)
        cw, ch = w / cols, h / -(-len(ids) // cols)
        cx = (k % cols + 0.5) * cw + rng.uniform(-8, 8)
        cy = (k // cols + 0.5) * ch + rng.uniform(-8, 8)
        image = aruco.generateImageMarker(d, int(marker_id), cells * 20)
        # A white quiet zone of one cell around the marker.
        padded = np.full((image.shape[0] + 40, image.shape[1] + 40), 255, np.uint8)
        padded[20:-20, 20:-20] = image
        n = padded.shape[0]
        angle = rng.uniform(0, 2 * np.pi)
        square = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]], np.float64) * s / 2 * (n / image.shape[0])
        rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
        target = square @ rot.T + [cx, cy] + rng.uniform(-0.06, 0.06, (4, 2)) * s
        src = np.array([[0, 0], [n, 0], [n, n], [0, n]], np.float32)
        hom = cv2.getPerspectiveTransform(src, target.astype(np.float32))
        warped = cv2.warpPerspective(padded.astype(np.float64), hom, (w, h), flags=cv2.INTER_LINEAR)
        inside = cv2.warpPerspective(np.ones((n, n)), hom, (w, h), flags=cv2.INTER_LINEAR)
        shade = frame / 255.0
        frame = frame * (1 - inside) + warped * shade * inside
    frame = cv2.GaussianBlur(frame, (3, 3), 0.8) + rng.normal(0, 3, frame.shape)
    return np.clip(frame + 0.5, 0, 255).astype(np.uint8)


def opencv_detect(frame, dictionary):
    params = aruco.DetectorParameters()
    params.cornerRefinementMethod = aruco.CORNER_REFINE_SUBPIX
    detector = aruco.ArucoDetector(aruco.getPredefinedDictionary(dictionary), params)
    return detector.detectMarkers(frame)


@pytest.mark.parametrize("name", ["DICT_4X4_50", "DICT_APRILTAG_36h11", "DICT_6X6_250"])
def test_rendered_frames_give_opencvs_ids_and_corners(name):
    dictionary = getattr(aruco, name)
    ours_found = theirs_found = 0
    for seed in range(4):
        ids = np.random.default_rng(seed).choice(50, 8, replace=False)
        frame = render(dictionary, ids, seed)
        corners, found_ids, rejected = ms.detect_markers(frame, name, backend="cpu")
        assert isinstance(corners, tuple) and isinstance(rejected, tuple)
        assert found_ids is not None and found_ids.dtype == np.int32 and found_ids.shape == (len(corners), 1)
        assert all(c.shape == (1, 4, 2) and c.dtype == np.float32 for c in corners + rejected)
        assert set(found_ids.ravel()) <= set(ids), f"{name} seed {seed}: a false ID"
        their_corners, their_ids, _ = opencv_detect(frame, dictionary)
        their_ids = [] if their_ids is None else list(np.ravel(their_ids))
        ours_found += len(found_ids)
        theirs_found += len(their_ids)
        for c, i in zip(their_corners, their_ids):
            k = list(found_ids.ravel()).index(i) if i in found_ids else None
            if k is None:
                continue
            # The same corners in the same order, within OpenCV's own sub-pixel spread.
            assert np.abs(corners[k] - c).max() < 1.0, (name, seed, i, corners[k], c)
    assert ours_found >= theirs_found, f"{name}: {ours_found} found, OpenCV {theirs_found}"
    assert ours_found >= 0.9 * 8 * 4


def test_nothing_found_is_none_and_empty_tuples():
    corners, ids, rejected = ms.detect_markers(np.full((64, 80), 200, np.uint8), "DICT_4X4_50", backend="cpu")
    assert corners == () and ids is None and isinstance(rejected, tuple)


def test_colour_images_array_likes_and_dictionary_forms():
    frame = render(aruco.DICT_4X4_50, [3, 9, 27], seed=5)
    expected = ms.detect_markers(frame, "DICT_4X4_50", backend="cpu")
    bgr = cv2.cvtColor(frame, cv2.COLOR_GRAY2BGR)
    bgr[..., 0] = np.clip(bgr[..., 0].astype(int) + 7, 0, 255)
    grey = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)
    for image, want in [(bgr, ms.detect_markers(grey, "DICT_4X4_50", backend="cpu")),
                        (frame[:, :, None], expected), (frame.tolist(), expected),
                        (np.asfortranarray(frame), expected)]:
        got = ms.detect_markers(image, "DICT_4X4_50", backend="cpu")
        assert np.array_equal(got[1], want[1])
        assert all(np.array_equal(a, b) for a, b in zip(got[0], want[0]))
    for form in (aruco.DICT_4X4_50, "4x4_50", "dict_4x4_50", ["DICT_4X4_50"]):
        got = ms.detect_markers(frame, form, backend="cpu")
        assert np.array_equal(got[1], expected[1]), form


def test_several_dictionaries_tell_which_one():
    a = render(aruco.DICT_4X4_50, [1, 2], seed=7, size=(320, 240))
    b = render(aruco.DICT_APRILTAG_36h11, [5, 6], seed=8, size=(320, 240))
    frame = np.hstack([a, b])
    corners, ids, rejected, which = ms.detect_markers(frame, ["DICT_4X4_50", "DICT_APRILTAG_36h11"],
                                                      backend="cpu", return_dictionaries=True)
    found = sorted(zip(which.tolist(), ids.ravel().tolist()))
    assert found == [(0, 1), (0, 2), (1, 5), (1, 6)]
    assert which.dtype == np.int32


def test_refine_and_parameters():
    frame = render(aruco.DICT_4X4_50, [4, 8], seed=9)
    coarse = ms.detect_markers(frame, "DICT_4X4_50", backend="cpu", refine=False)
    assert sorted(coarse[1].ravel()) == [4, 8]
    strict = ms.detect_markers(frame, "DICT_4X4_50", backend="cpu", parameters={"min_perimeter_rate": 3.0})
    assert strict[1] is None
    with pytest.raises(TypeError, match="unknown setting 'nope'; known: window_min"):
        ms.detect_markers(frame, "DICT_4X4_50", parameters={"nope": 1})
    with pytest.raises(ValueError, match="parameters: marker threshold windows"):
        ms.detect_markers(frame, "DICT_4X4_50", parameters={"window_min": 4})
    with pytest.raises(TypeError, match="parameters\\['cell_margin'\\]: expected a number"):
        ms.detect_markers(frame, "DICT_4X4_50", parameters={"cell_margin": "wide"})


def test_custom_dictionary_file(tmp_path):
    d = aruco.extendDictionary(12, 4, randomSeed=3)
    path = tmp_path / "custom.yml"
    fs = cv2.FileStorage(str(path), cv2.FILE_STORAGE_WRITE)
    d.writeDictionary(fs)
    fs.release()
    frame = np.full((200, 200), 255, np.uint8)
    frame[40:160, 40:160] = aruco.generateImageMarker(d, 11, 120)
    _, ids, _ = ms.detect_markers(frame, path, backend="cpu")
    assert ids.tolist() == [[11]]
    assert np.array_equal(ms.generate_marker(str(path), 11, 120), aruco.generateImageMarker(d, 11, 120))


@pytest.mark.parametrize("name", ["DICT_4X4_50", "DICT_5X5_1000", "DICT_7X7_250", "DICT_ARUCO_ORIGINAL",
                                  "DICT_APRILTAG_16h5", "DICT_APRILTAG_36h11", "DICT_ARUCO_MIP_36h12"])
def test_generated_markers_equal_opencvs(name):
    d = aruco.getPredefinedDictionary(getattr(aruco, name))
    count = d.bytesList.shape[0]
    for marker_id in sorted({0, 1, count // 2, count - 1}):
        for size in (d.markerSize + 2, 50, 97, 200):
            for border in (1, 2):
                if size < d.markerSize + 2 * border:
                    continue
                ours = ms.generate_marker(name, marker_id, size, border)
                theirs = aruco.generateImageMarker(d, marker_id, size, borderBits=border)
                assert ours.dtype == np.uint8 and np.array_equal(ours, theirs), (name, marker_id, size, border)


def test_poses_equal_solvepnp_ippe_square():
    rng = np.random.default_rng(4)
    K = np.array([[800.0, 0, 320], [0, 780, 240], [0, 0, 1]])
    dist = np.array([-0.12, 0.05, 0.001, -0.002, 0.01])
    frame = render(aruco.DICT_4X4_50, [0, 1, 2, 3, 4, 5], seed=11)
    corners, ids, _ = ms.detect_markers(frame, "DICT_4X4_50", backend="cpu")
    length = 0.05
    h = length / 2
    obj = np.array([[-h, h, 0], [h, h, 0], [h, -h, 0], [-h, -h, 0]])
    for d in (None, dist):
        rvecs, tvecs = ms.estimate_pose(corners, length, K, d)
        assert rvecs.shape == tvecs.shape == (len(corners), 1, 3) and rvecs.dtype == np.float64
        for c, r, t in zip(corners, rvecs, tvecs):
            ok, rvec, tvec = cv2.solvePnP(obj, c.reshape(4, 2).astype(np.float64), K, d,
                                          flags=cv2.SOLVEPNP_IPPE_SQUARE)
            assert ok
            np.testing.assert_allclose(r.reshape(3, 1), rvec, atol=1e-6)
            np.testing.assert_allclose(t.reshape(3, 1), tvec, atol=1e-6)
    # Random squares under perspective, one (N, 4, 2) array, distortion given as 4, 5 or 8 values.
    quads = np.stack([np.array([[300, 200], [380, 205], [378, 290], [296, 280]]) + rng.uniform(-20, 20, (4, 2))
                      for _ in range(5)])
    for d in (dist[:4], dist, np.concatenate([dist, [0, 0, 0]])):
        rvecs, tvecs = ms.estimate_pose(quads, 2.0, K, d)
        for q, r, t in zip(quads, rvecs, tvecs):
            _, rvec, tvec = cv2.solvePnP(obj * 40, q, K, d, flags=cv2.SOLVEPNP_IPPE_SQUARE)
            np.testing.assert_allclose(r.reshape(3, 1), rvec, atol=1e-6)
            np.testing.assert_allclose(t.reshape(3, 1), tvec, atol=1e-6)
    empty = ms.estimate_pose((), 1.0, K)
    assert empty[0].shape == (0, 1, 3)


def test_bad_marker_requests_say_what_is_wrong():
    frame = np.zeros((32, 32), np.uint8)
    with pytest.raises(ValueError, match="unknown marker dictionary 'DICT_9X9'; available: DICT_4X4_50.*DICT_APRILTAG_36h11"):
        ms.detect_markers(frame, "DICT_9X9")
    with pytest.raises(ValueError, match="not a cv2.aruco.DICT_"):
        ms.detect_markers(frame, 99)
    with pytest.raises(ValueError, match="at least one"):
        ms.detect_markers(frame, [])
    with pytest.raises(TypeError, match="uint8"):
        ms.detect_markers(frame.astype(np.float32), "DICT_4X4_50")
    with pytest.raises(ValueError, match="image: the image is empty|image: invalid image size"):
        ms.detect_markers(np.zeros((0, 4), np.uint8), "DICT_4X4_50")
    with pytest.raises(ValueError, match="0-D"):
        ms.detect_markers(np.uint8(3), "DICT_4X4_50")
    with pytest.raises(ValueError, match="marker 50 is not in DICT_4X4_50"):
        ms.generate_marker("DICT_4X4_50", 50, 100)
    with pytest.raises(ValueError, match="id: expected an integer from 0"):
        ms.generate_marker("DICT_4X4_50", -1, 100)
    with pytest.raises(ValueError, match="marker size 3 px"):
        ms.generate_marker("DICT_4X4_50", 1, 3)
    with pytest.raises(TypeError, match="size"):
        ms.generate_marker("DICT_4X4_50", 1, 10.5)
    K = np.eye(3)
    square = np.array([[[0, 0], [1, 0], [1, 1], [0, 1]]], float)
    with pytest.raises(ValueError, match="marker_length: expected a positive length"):
        ms.estimate_pose(square, 0, K)
    with pytest.raises(ValueError, match=r"camera_matrix: expected shape \(3, 3\)"):
        ms.estimate_pose(square, 1, np.eye(2))
    with pytest.raises(ValueError, match="dist_coeffs: only k1"):
        ms.estimate_pose(square, 1, K, [0, 0, 0, 0, 0, 0.1, 0, 0])
    with pytest.raises(ValueError, match="dist_coeffs: expected 4, 5"):
        ms.estimate_pose(square, 1, K, [0, 0])
    with pytest.raises(ValueError, match="corners: expected"):
        ms.estimate_pose(np.zeros((2, 3)), 1, K)
    with pytest.raises(ValueError, match="corners: values must be finite"):
        ms.estimate_pose(square * np.nan, 1, K)


def test_no_gpu_is_one_exception_for_markers_too():
    if ms.devices()[0]["usable"]:
        pytest.skip("a GPU is usable here")
    with pytest.raises(ms.GpuUnavailableError, match="CUDA backend unavailable: "):
        ms.detect_markers(np.zeros((32, 32), np.uint8), "DICT_4X4_50", backend="cuda")


def test_dictionaries_are_opencvs_in_order():
    assert len(ms.DICTIONARIES) == 22
    for i, name in enumerate(ms.DICTIONARIES):
        assert getattr(aruco, name) == i, name
    assert all(isinstance(n, str) for n in ms.DICTIONARIES)
