"""markerscope: connected components with statistics on the GPU and the CPU.

OpenCV's ``connectedComponentsWithStats`` layout and dtypes, for numpy arrays (CPU, or the GPU
with an upload) and for CuPy arrays and PyTorch CUDA tensors (on the GPU, without a host copy;
the results come back as arrays of the same library on the same device). Also thresholds,
video / folder / camera analysis with track IDs, a tracker for detections made elsewhere, and
square fiducials (ArUco, AprilTag) in OpenCV's ``cv2.aruco`` layout: ``detect_markers``,
``generate_marker``, ``estimate_pose``.

>>> import numpy as np, markerscope as ms
>>> image = np.array([[1, 1, 0, 0],
...                   [0, 0, 0, 1]], dtype=np.uint8)
>>> n, labels, stats, centroids = ms.connected_components_with_stats(image, 8, backend="cpu")
>>> n
3
>>> labels.tolist()
[[1, 1, 0, 0], [0, 0, 0, 2]]
>>> stats.tolist()                     # LEFT, TOP, WIDTH, HEIGHT, AREA; row 0 = background
[[0, 0, 4, 2, 5], [0, 0, 2, 1, 2], [3, 1, 1, 1, 1]]
"""

from __future__ import annotations

import inspect
import os
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy

from . import _markerscope
from ._cuda import CudaArray, cuda_interface, describe_cuda_array, is_cuda_array

__all__ = [
    "connected_components_with_stats",
    "connected_components",
    "component_stats",
    "Components",
    "threshold",
    "algorithms",
    "devices",
    "analyze",
    "analyze_to_file",
    "Tracker",
    "link",
    "locate_frames",
    "FEATURE_COLUMNS",
    "CSV_COLUMNS",
    "TRACK_COLUMNS",
    "CC_STAT_LEFT",
    "CC_STAT_TOP",
    "CC_STAT_WIDTH",
    "CC_STAT_HEIGHT",
    "CC_STAT_AREA",
    "CV_16U",
    "CV_32S",
    "GpuUnavailableError",
    "detect_markers",
    "generate_marker",
    "estimate_pose",
    "DICTIONARIES",
    "__version__",
]

#: The package's version.
__version__: str = _markerscope.VERSION

#: No usable GPU (no driver or device, or the CUDA backend could not start on it), raised by
#: every call that needs one; a RuntimeError and a ValueError.
GpuUnavailableError = _markerscope.GpuUnavailableError

#: Columns of ``stats``, as OpenCV names them (``cv2.CC_STAT_*``).
CC_STAT_LEFT, CC_STAT_TOP, CC_STAT_WIDTH, CC_STAT_HEIGHT, CC_STAT_AREA = range(5)
#: OpenCV's label types for ``ltype`` (``cv2.CV_16U``, ``cv2.CV_32S``).
CV_16U, CV_32S = 2, 4

#: The predefined marker dictionaries, in the order of OpenCV's ``cv2.aruco.DICT_*`` values.
DICTIONARIES: List[str] = list(_markerscope.DICTIONARIES)

#: The columns of ``analyze``'s rows, as in the CSV export of ``markerscope analyze``.
CSV_COLUMNS: List[str] = _markerscope.CSV_COLUMNS.split(",")
#: The columns of ``Tracker.summaries()``, as ``markerscope analyze --tracks`` writes them.
TRACK_COLUMNS: List[str] = _markerscope.TRACK_COLUMNS.split(",")

Tracker = _markerscope.Tracker

_LTYPES = {CV_32S: numpy.int32, CV_16U: numpy.uint16}


class Components(NamedTuple):
    """``component_stats``'s result; unpacks like a tuple.

    ``n`` counts the background row as OpenCV does. ``stats`` (int32, n × 5: LEFT, TOP, WIDTH,
    HEIGHT, AREA), ``centroids`` (float64, n × 2) and ``sums`` (int64, n × 2: the sums of the
    pixels' x and y) have the background as row 0. ``subpixel`` (float64, n × 2) holds the
    grey-weighted centroids when a grey image was given (row 0 NaN), else None.
    """

    n: int
    stats: Any
    centroids: Any
    sums: Any
    subpixel: Any


def _ltype(ltype: Any) -> Any:
    if isinstance(ltype, int) and not isinstance(ltype, bool) and ltype in _LTYPES:
        return _LTYPES[ltype]
    try:
        dtype = numpy.dtype(ltype)
    except TypeError:
        raise TypeError(f"ltype: expected numpy.int32 or numpy.uint16 (cv2.CV_32S or cv2.CV_16U), got {ltype!r}") from None
    if dtype not in (numpy.dtype(numpy.int32), numpy.dtype(numpy.uint16)):
        raise ValueError(f"ltype: expected numpy.int32 or numpy.uint16 (cv2.CV_32S or cv2.CV_16U), got {dtype}")
    return dtype.type


def _connectivity(connectivity: Any) -> int:
    if isinstance(connectivity, bool) or not isinstance(connectivity, (int, numpy.integer)):
        raise TypeError(f"connectivity: expected 4 or 8, got {connectivity!r}")
    if int(connectivity) not in (4, 8):
        raise ValueError(f"connectivity: expected 4 or 8, got {connectivity}")
    return int(connectivity)


def _torch_cpu(image: Any) -> bool:
    return type(image).__module__.startswith("torch") and getattr(image, "is_cuda", True) is False


def _narrow_labels(labels: Any, n: int, ltype: Any) -> Any:
    if ltype is numpy.int32:
        return labels
    if n - 1 > 65535:
        raise ValueError(f"ltype: {n - 1} components do not fit numpy.uint16 labels; use numpy.int32")
    return labels.astype(ltype) if hasattr(labels, "astype") else labels.to(_torch_dtype(labels, ltype))


def _torch_dtype(tensor: Any, ltype: Any) -> Any:
    import torch

    return {numpy.int32: torch.int32, numpy.uint16: torch.uint16}[ltype]


def _describe(obj: Any) -> str:
    shape = getattr(obj, "shape", None)
    if shape is not None:
        return f"{type(obj).__name__} with shape {tuple(shape)}"
    return type(obj).__name__


def _host_array(image: Any, name: str, kinds: str) -> numpy.ndarray:
    """``image`` as a numpy array for the labeling and marker functions: numpy arrays as they
    are, array-likes (lists, objects with ``__array__`` or the buffer protocol) through
    ``numpy.asarray`` (with values of a dtype kind in ``kinds``), an ``(h, w, 1)`` array as
    ``(h, w)``, int8 read as its bytes; 0-D and empty inputs are refused naming ``name``."""
    if isinstance(image, numpy.ndarray):
        array = image
    elif isinstance(image, (str, bytes, dict)) or image is None:
        raise TypeError(f"{name}: expected a 2-D array, got {type(image).__name__}")
    else:
        try:
            array = numpy.asarray(image)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{name}: expected a 2-D array, got {type(image).__name__} ({e})") from None
        if array.dtype.kind not in kinds:
            raise TypeError(f"{name}: expected an array of {_KIND_NAMES[kinds]}, got {_describe(image)} "
                            f"of dtype {array.dtype}")
        if array.dtype.kind in "iu" and array.dtype.itemsize > 1:
            # Array-likes of Python ints: non-zero is foreground, as in a uint8 image.
            if kinds == _MASK_KINDS:
                array = array != 0
            elif array.size and (array.min() < 0 or array.max() > 255):
                raise ValueError(f"{name}: grey values must be in 0..=255")
            else:
                array = array.astype(numpy.uint8)
    if array.ndim == 0:
        raise ValueError(f"{name}: expected a 2-D array, got a 0-D array (a scalar: {array!r})")
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if array.dtype == numpy.int8 and kinds == _MASK_KINDS:
        # Non-zero bytes are foreground whatever their sign, as in OpenCV.
        array = array.view(numpy.uint8)
    if array.ndim == 2 and 0 in array.shape:
        h, w = array.shape
        raise ValueError(f"{name}: invalid image size {w}x{h}: the image is empty (shape {array.shape})")
    return array


_MASK_KINDS = "biu"
_GREY_KINDS = "iu"
_KIND_NAMES = {_MASK_KINDS: "booleans or integers", _GREY_KINDS: "integers in 0..=255"}


def _stats_dtype(stats_dtype: Any) -> str:
    try:
        dtype = numpy.dtype(stats_dtype)
    except TypeError:
        dtype = None
    if dtype not in (numpy.dtype(numpy.int32), numpy.dtype(numpy.int64)):
        raise ValueError(f"stats_dtype: expected numpy.int32 or numpy.int64, got {stats_dtype!r}")
    return dtype.name


def connected_components_with_stats(
    image: Any,
    connectivity: int = 8,
    ltype: Any = numpy.int32,
    *,
    backend: str = "auto",
    algorithm: Optional[str] = None,
    stats_dtype: Any = numpy.int32,
):
    """Labels the connected components of ``image`` and measures them, as OpenCV does.

    Returns ``(n, labels, stats, centroids)`` exactly as ``cv2.connectedComponentsWithStats``
    (also called as it is: ``connected_components_with_stats(img, 8, cv2.CV_32S)``):
    ``n`` counts the background; ``labels`` has the image's shape (``ltype``: int32 or uint16,
    or ``cv2.CV_32S`` / ``cv2.CV_16U``), 0 = background; ``stats`` is int32 n × 5 (columns
    ``CC_STAT_LEFT``, ``CC_STAT_TOP``, ``CC_STAT_WIDTH``, ``CC_STAT_HEIGHT``, ``CC_STAT_AREA``)
    and ``centroids`` float64 n × 2, both with the background as row 0 (with no background
    pixel, row 0 is what OpenCV writes: ``[-1, 2147483647, 0, 0, 0]`` and NaN centroids). A
    component or row of 2^31 pixels or more does not fit int32: an ``OverflowError``, unless
    ``stats_dtype=numpy.int64`` (numpy input) asks for int64 statistics.

    ``image``: a 2-D uint8, int8 or bool array (or ``(h, w, 1)``), non-zero = foreground. A
    numpy array (any strides; a non-contiguous one is read through its strides), an array-like
    or a PyTorch CPU tensor is labeled on the host, or on the GPU with an upload when
    ``backend`` allows; a CuPy array or a PyTorch CUDA tensor is labeled where it is, and the
    results are arrays of its library on its device. As with that library's own functions,
    such a call returns before the GPU is done: the results are ordered before later work on
    the array's stream (the one its ``__cuda_array_interface__`` names, or PyTorch's current
    one) and on the default streams.

    Numbering: components are numbered 1..n-1 in the raster order of their first pixel. That is
    OpenCV's numbering for 4-connectivity, and for 8-connectivity with ``ccltype=cv2.CCL_WU``;
    OpenCV's default 8-connectivity algorithm (Spaghetti) numbers in the order of its 2×2 blocks
    instead: the same components with the same statistics, under other numbers.

    ``backend``: "auto" (CUDA when a GPU is usable), "cpu" or "cuda" (``GpuUnavailableError``
    without a usable GPU). ``algorithm``: a name from ``algorithms()``; CUDA input runs those
    with ``device_input`` (the FLSL family: ``flsl``, ``flsl_otf``, ``flsl_cd`` and the default
    ``flsl_cdb``) on the array's own device. The GIL is released while labeling; calls from
    several threads are safe.

    >>> import numpy as np, markerscope as ms
    >>> n, labels, stats, centroids = ms.connected_components_with_stats(np.eye(3, dtype=bool), 4)
    >>> n, stats[1:, ms.CC_STAT_AREA].tolist()
    (4, [1, 1, 1])
    """
    connectivity = _connectivity(connectivity)
    ltype = _ltype(ltype)
    stats_dtype = _stats_dtype(stats_dtype)
    cai = cuda_interface(image)
    if cai is not None:
        if stats_dtype != "int32":
            raise ValueError("stats_dtype: CUDA arrays get int32 statistics; numpy.int64 is for host arrays")
        n, labels, stats, centroids, _, _ = _label_cuda(image, cai, connectivity, backend, algorithm, True, False)
        return n, _narrow_labels(labels, n, ltype), stats, centroids
    if _torch_cpu(image):
        n, labels, stats, centroids = connected_components_with_stats(
            image.numpy(), connectivity, ltype, backend=backend, algorithm=algorithm, stats_dtype=stats_dtype)
        import torch

        return n, torch.from_numpy(labels), torch.from_numpy(stats), torch.from_numpy(centroids)
    image = _host_array(image, "image", _MASK_KINDS)
    n, labels, stats, centroids, _, _, _ = _markerscope.label_host(image, connectivity, True, backend, algorithm,
                                                                   stats_dtype=stats_dtype)
    return n, _narrow_labels(labels, n, ltype), stats, centroids


def connected_components(
    image: Any,
    connectivity: int = 8,
    ltype: Any = numpy.int32,
    *,
    backend: str = "auto",
    algorithm: Optional[str] = None,
):
    """``(n, labels)`` as ``cv2.connectedComponents``: the label image of
    ``connected_components_with_stats`` (same arguments, same numbering) without the tables.

    >>> import numpy as np, markerscope as ms
    >>> n, labels = ms.connected_components(np.eye(3, dtype=np.uint8), 4, ms.CV_16U, backend="cpu")
    >>> n, labels.dtype.name, labels.diagonal().tolist()
    (4, 'uint16', [1, 2, 3])
    """
    # The statistics are not returned: host arrays get int64 ones, which never overflow.
    wide = numpy.int32 if cuda_interface(image) is not None else numpy.int64
    result = connected_components_with_stats(image, connectivity, ltype, backend=backend, algorithm=algorithm,
                                             stats_dtype=wide)
    return result[0], result[1]


def _level(level: Any) -> int:
    """A threshold level: an integer in 0..=255, or a float with such a value (what
    ``cv2.threshold`` returns)."""
    if isinstance(level, bool) or not isinstance(level, (int, float, numpy.integer, numpy.floating)):
        raise ValueError(f"level: expected an integer in 0..=255 (threshold() returns it), got {level!r}")
    value = float(level)
    if not (value.is_integer() and 0 <= value <= 255):
        raise ValueError(f"level: expected an integer in 0..=255 (threshold() returns it), got {level!r}")
    return int(value)


def component_stats(
    image: Any,
    connectivity: int = 8,
    *,
    grey: Any = None,
    level: Optional[float] = None,
    invert: bool = False,
    backend: str = "auto",
    algorithm: Optional[str] = None,
    stats_dtype: Any = numpy.int32,
) -> Components:
    """The statistics of ``connected_components_with_stats`` without the label image.

    The analysis path: no label image is written or downloaded, so it is faster. Returns
    ``Components(n, stats, centroids, sums, subpixel)`` (a named tuple); ``sums`` holds each
    row's sums of x and y (int64), exact where centroids are rounded. ``stats_dtype``:
    ``numpy.int64`` for components or rows of 2^31 pixels or more (numpy input).

    ``grey`` (uint8, the image's shape) and ``level`` (the threshold the mask was made with, as
    ``threshold`` or ``cv2.threshold`` returns it: 107 or 107.0) give each component's
    grey-weighted (sub-pixel) centroid, the weights being grey − level (level + 1 − grey with
    ``invert``). For a CUDA ``image``, ``grey`` is a CUDA array of the same library on the
    same device, and ``subpixel`` one too.

    >>> import numpy as np, markerscope as ms
    >>> grey = np.array([[0, 200, 100, 0]], dtype=np.uint8)
    >>> level, mask = ms.threshold(grey, "fixed:50")
    >>> r = ms.component_stats(mask, grey=grey, level=level, backend="cpu")
    >>> r.n, r.centroids[1].tolist(), r.subpixel[1].tolist()
    (2, [1.5, 0.0], [1.25, 0.0])
    """
    connectivity = _connectivity(connectivity)
    stats_dtype = _stats_dtype(stats_dtype)
    if (grey is None) != (level is None):
        raise ValueError("grey and level: give both (sub-pixel centroids) or neither")
    if level is not None:
        level = _level(level)
    cai = cuda_interface(image)
    if cai is not None:
        if stats_dtype != "int32":
            raise ValueError("stats_dtype: CUDA arrays get int32 statistics; numpy.int64 is for host arrays")
        n, _, stats, centroids, sums, subpixel = _label_cuda(image, cai, connectivity, backend, algorithm, False,
                                                             True, grey, level, bool(invert))
        return Components(n, stats, centroids, sums, subpixel)
    if _torch_cpu(image):
        image = image.numpy()
    image = _host_array(image, "image", _MASK_KINDS)
    if grey is not None:
        grey = _host_array(grey, "grey", _GREY_KINDS)
    n, _, stats, centroids, sums, subpixel, _ = _markerscope.label_host(
        image, connectivity, False, backend, algorithm, grey, level, bool(invert), stats_dtype)
    return Components(n, stats, centroids, sums, subpixel)


def _label_cuda(image: Any, cai: Any, connectivity: int, backend: str, algorithm: Optional[str], want_labels: bool,
                want_sums: bool, grey: Any = None, level: Optional[int] = None, invert: bool = False):
    if backend not in ("auto", "cuda", "gpu"):
        raise ValueError(f"backend: a CUDA array is labeled on the GPU; use backend='auto' or 'cuda', not {backend!r}")
    if algorithm is not None and not isinstance(algorithm, str):
        raise TypeError(f"algorithm: expected a name from algorithms(), got {algorithm!r}")
    array: CudaArray = describe_cuda_array(image, "image", cai=cai)
    if not array.contiguous_rows:
        image = _contiguous(image)
        array = describe_cuda_array(image, "image")
    device_grey = None
    if grey is not None:
        if not is_cuda_array(grey):
            raise TypeError(f"grey: a CUDA image needs a CUDA grey image of the same library and device, "
                            f"got {type(grey).__name__}")
        grey_array: CudaArray = describe_cuda_array(grey, "grey", grey=True)
        if (grey_array.height, grey_array.width) != (array.height, array.width):
            raise ValueError(f"grey: shape ({grey_array.height}, {grey_array.width}) differs from the image's "
                             f"({array.height}, {array.width})")
        if grey_array.device != array.device:
            raise ValueError(f"grey: on CUDA device {grey_array.device}, the image on device {array.device}; "
                             "put both on one device")
        if not grey_array.contiguous_rows or grey_array.row_pitch != grey_array.width:
            grey = _contiguous(grey)
            grey_array = describe_cuda_array(grey, "grey", grey=True)
        device_grey = (grey_array.ptr, _stream_of(grey, grey_array), level, invert)
    allocate = _allocator(image, array)
    n, labels, stats, centroids, sums, subpixel, _ = _markerscope.label_device(
        array.ptr, array.width, array.height, array.row_pitch, _stream_of(image, array), connectivity, want_labels,
        want_sums, allocate, algorithm, device_grey)
    if array.width * array.height > _INT32_MAX and bool((stats[:, 2:] < 0).any()):
        # The device writes int32 statistics; values of 2^31 and more (all below 2^32) wrap
        # to negative ones.
        raise OverflowError("a component or row of 2^31 pixels or more does not fit the int32 statistics "
                            "(OpenCV refuses such images); label the image as a numpy array with "
                            "stats_dtype=numpy.int64")
    return n, labels, stats, centroids, sums, subpixel


_INT32_MAX = 2**31 - 1


def _stream_of(obj: Any, array: CudaArray) -> Optional[int]:
    """The stream to wait for before reading ``obj``: its interface's, or for PyTorch (whose
    interface names none) its current one when that is not the legacy default stream (which
    the kernels' stream already follows)."""
    if array.stream is None and type(obj).__module__.startswith("torch"):
        import torch

        current = torch.cuda.current_stream(obj.device).cuda_stream
        return current if current > 2 else None
    return array.stream


def _contiguous(image: Any) -> Any:
    """A C-contiguous device copy (rows of adjacent bytes, back to back), as the kernels read
    them; a padded-row or strided view is not C-contiguous, so it is copied."""
    if hasattr(image, "contiguous"):
        return image.contiguous()
    import cupy

    return cupy.ascontiguousarray(image)


_DTYPES = {"labels": "int32", "stats": "int32", "centroids": "float64", "sums": "int64", "subpixel": "float64"}
_NUMPY_DTYPES = {kind: numpy.dtype(name) for kind, name in _DTYPES.items()}
_COLUMNS = {"stats": 5, "centroids": 2, "sums": 2, "subpixel": 2}


def _allocator(image: Any, array: CudaArray):
    """Allocates result arrays with the input's library, on its device (imported on the first
    allocation, after the GPU was found usable): ``allocate(kinds, rows)`` returns an
    ``(array, device pointer)`` pair per kind, in one call (the labeling waits on it)."""
    labels_shape = (array.height, array.width)
    if type(image).__module__.startswith("torch"):

        def allocate(kinds: tuple, rows: int) -> list:
            import torch

            out = []
            for kind in kinds:
                shape = labels_shape if kind == "labels" else (rows, _COLUMNS[kind])
                t = torch.empty(shape, dtype=getattr(torch, _DTYPES[kind]), device=image.device)
                out.append((t, t.data_ptr()))
            return out

        return allocate

    def allocate(kinds: tuple, rows: int) -> list:
        import cupy

        def made() -> list:
            out = []
            for kind in kinds:
                a = cupy.empty(labels_shape if kind == "labels" else (rows, _COLUMNS[kind]),
                               dtype=_NUMPY_DTYPES[kind])
                out.append((a, a.data.ptr))
            return out

        # Entering a device costs more than asking which one is current (the labeling waits).
        if cupy.cuda.runtime.getDevice() == array.device:
            return made()
        with cupy.cuda.Device(array.device):
            return made()

    return allocate


def threshold(grey: Any, spec: str = "otsu", invert: bool = False):
    """Thresholds a grey image (2-D uint8 numpy array) with one of the CLI's specs.

    Returns ``(level, mask)`` like ``cv2.threshold``: ``mask`` is uint8 0 / 255, foreground =
    grey > level (the complement with ``invert``); ``level`` is None for ``adaptive``, whose
    level differs from pixel to pixel. Specs: ``fixed:T``, ``otsu``, ``triangle``,
    ``background:K``, ``adaptive:W:C`` (see the user guide's Threshold specs).

    >>> import numpy as np, markerscope as ms
    >>> level, mask = ms.threshold(np.array([[10, 200]], dtype=np.uint8), "fixed:100")
    >>> level, mask.tolist()
    (100, [[0, 255]])
    """
    if not isinstance(spec, str):
        raise TypeError(f"spec: expected a threshold spec string such as 'otsu', got {spec!r}")
    return _markerscope.threshold(_host_array(grey, "grey", _GREY_KINDS), spec, bool(invert))


def _dictionary_names(dictionary: Any) -> List[str]:
    """Dictionary names for the Rust side: a name (``"DICT_4X4_50"``, any case, ``DICT_``
    optional), an OpenCV dictionary file (str or ``os.PathLike``), or an index into
    ``DICTIONARIES`` (``cv2.aruco.DICT_*``); or a list of these."""
    items = list(dictionary) if isinstance(dictionary, (list, tuple)) else [dictionary]
    if not items:
        raise ValueError("dictionary: give at least one marker dictionary")
    names = []
    for item in items:
        if isinstance(item, (int, numpy.integer)) and not isinstance(item, bool):
            if not 0 <= int(item) < len(DICTIONARIES):
                raise ValueError(f"dictionary: {item} is not a cv2.aruco.DICT_* value (0 to "
                                 f"{len(DICTIONARIES) - 1}); names: {', '.join(DICTIONARIES)}")
            names.append(DICTIONARIES[int(item)])
        elif isinstance(item, (str, os.PathLike)):
            names.append(os.fspath(item))
        else:
            raise TypeError(f"dictionary: expected a name such as 'DICT_4X4_50', a dictionary file or a "
                            f"cv2.aruco.DICT_* value, got {item!r}")
    return names


def _host_copy(image: Any) -> Any:
    """A CUDA array or a PyTorch tensor as a numpy array (the marker detector reads host
    memory); anything else as it is."""
    if cuda_interface(image) is not None:
        if hasattr(image, "get"):
            return image.get()
        if hasattr(image, "cpu"):
            return image.cpu().numpy()
        raise TypeError(f"image: cannot copy a {type(image).__name__} from the GPU; pass a numpy array")
    if _torch_cpu(image):
        return image.numpy()
    return image


def _grey_of(image: Any, name: str = "image") -> numpy.ndarray:
    """A 2-D uint8 grey image from a grey, BGR or BGRA uint8 image, as OpenCV converts it
    (``cv2.cvtColor(..., COLOR_BGR2GRAY)``: fixed-point weights, rounded)."""
    array = _host_array(_host_copy(image), name, _GREY_KINDS)
    if array.dtype != numpy.uint8:
        raise TypeError(f"{name}: expected a uint8 image, got dtype {array.dtype}")
    if array.ndim == 3 and array.shape[2] in (3, 4):
        if 0 in array.shape:
            raise ValueError(f"{name}: the image is empty (shape {array.shape})")
        b, g, r = (array[:, :, k].astype(numpy.uint32) for k in range(3))
        return ((b * 1868 + g * 9617 + r * 4899 + 8192) >> 14).astype(numpy.uint8)
    if array.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D grey image or an (h, w, 3) BGR one, got shape {array.shape}")
    return array


def detect_markers(
    image: Any,
    dictionary: Any = "DICT_APRILTAG_36h11",
    *,
    backend: str = "auto",
    refine: bool = True,
    parameters: Optional[Dict[str, float]] = None,
    return_dictionaries: bool = False,
):
    """Finds square fiducials (ArUco, AprilTag) of ``dictionary``, as
    ``cv2.aruco.ArucoDetector(dictionary).detectMarkers(image)`` does.

    Returns ``(corners, ids, rejected)`` in OpenCV's layout: ``corners`` a tuple with one
    ``(1, 4, 2)`` float32 array per marker (its corners clockwise from the marker's top-left,
    pixel centres at whole coordinates), ``ids`` an ``(N, 1)`` int32 array (None when no
    marker is found), ``rejected`` a tuple of ``(1, 4, 2)`` float32 arrays (candidate squares
    that decoded as no marker). With ``return_dictionaries=True``, a fourth item: an ``(N,)``
    int32 array of each marker's index in the dictionaries given (OpenCV's ``dictIndices``).

    ``image``: a 2-D uint8 grey image, or a BGR / BGRA ``(h, w, 3 | 4)`` one (converted as
    OpenCV converts it); numpy arrays, array-likes, CuPy arrays and PyTorch tensors (copied to
    the host). ``dictionary``: a name from ``DICTIONARIES`` (any case, ``DICT_`` optional), a
    ``cv2.aruco.DICT_*`` value, a dictionary file as ``cv2.aruco``'s ``writeDictionary`` writes
    it, or a list of these (each marker is matched against them in order). ``refine``:
    sub-pixel corners from edge-line fits (like ``CORNER_REFINE_SUBPIX``). ``parameters``: the
    detector's settings by name (``window_min``, ``window_max``, ``window_step``,
    ``threshold_constant``, ``min_perimeter_rate``, ``max_perimeter_rate``,
    ``polygon_accuracy_rate``, ``min_corner_distance_rate``, ``min_distance_to_border``,
    ``cell_margin``, ``min_cell_std_dev``, ``max_border_error_rate``,
    ``error_correction_rate``; OpenCV's defaults where the method is the same). ``backend``:
    "auto", "cpu" or "cuda" (``GpuUnavailableError`` without a usable GPU). The GIL is released
    while detecting.

    >>> import numpy as np, markerscope as ms
    >>> frame = np.full((120, 120), 255, np.uint8)
    >>> frame[20:100, 20:100] = ms.generate_marker("DICT_4X4_50", 7, 80)
    >>> corners, ids, rejected = ms.detect_markers(frame, "DICT_4X4_50", backend="cpu")
    >>> ids.tolist(), corners[0].shape, corners[0].round(2).tolist()
    ([[7]], (1, 4, 2), [[[19.5, 19.5], [99.5, 19.5], [99.5, 99.5], [19.5, 99.5]]])
    """
    names = _dictionary_names(dictionary)
    if parameters is not None and not isinstance(parameters, dict):
        raise TypeError(f"parameters: expected a dict of settings, got {type(parameters).__name__}")
    if not isinstance(backend, str):
        raise TypeError(f"backend: expected 'auto', 'cpu' or 'cuda', got {backend!r}")
    grey = _grey_of(image)
    corners, ids, indices, rejected = _markerscope.detect_markers(grey, names, backend, bool(refine), parameters)
    corners = tuple(numpy.ascontiguousarray(c[None]) for c in corners)
    rejected = tuple(numpy.ascontiguousarray(c[None]) for c in rejected)
    ids = ids.reshape(-1, 1) if len(ids) else None
    if return_dictionaries:
        return corners, ids, rejected, indices
    return corners, ids, rejected


def _whole(value: Any, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, numpy.integer)):
        raise TypeError(f"{name}: expected an integer, got {value!r}")
    if int(value) < low or int(value) > 2**32 - 1:
        raise ValueError(f"{name}: expected an integer from {low}, got {value}")
    return int(value)


def generate_marker(dictionary: Any, id: int, size: int, border_bits: int = 1) -> numpy.ndarray:
    """Marker ``id`` of ``dictionary`` as a ``size`` × ``size`` uint8 image (0 black, 255
    white) with ``border_bits`` cells of black border: equal to
    ``cv2.aruco.generateImageMarker(dictionary, id, size, borderBits=border_bits)``.

    >>> import markerscope as ms
    >>> ms.generate_marker("DICT_4X4_50", 0, 6).tolist()[1]
    [0, 255, 0, 255, 255, 0]
    """
    names = _dictionary_names(dictionary)
    if len(names) != 1:
        raise ValueError(f"dictionary: give one dictionary, got {len(names)}")
    return _markerscope.generate_marker(names[0], _whole(id, "id", 0), _whole(size, "size", 1),
                                        _whole(border_bits, "border_bits", 1))


def _reals(value: Any, name: str) -> numpy.ndarray:
    """``value`` as a float64 array: real numbers only (no complex, no strings, no objects)."""
    try:
        array = numpy.asarray(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected numbers, got {_describe(value)}") from None
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{name}: expected real numbers, got {_describe(value)} of dtype {array.dtype}")
    return array.astype(numpy.float64)


def _matrix(value: Any, name: str, shape: Tuple[int, ...]) -> numpy.ndarray:
    array = _reals(value, name)
    if array.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {array.shape}")
    if not numpy.isfinite(array).all():
        raise ValueError(f"{name}: values must be finite")
    return array


def estimate_pose(corners: Any, marker_length: float, camera_matrix: Any, dist_coeffs: Any = None):
    """Each marker's pose from its corners: ``cv2.solvePnP`` with ``SOLVEPNP_IPPE_SQUARE``
    (the marker's frame centred on it, x right, y up, z out of its face; corners at
    (−L/2, L/2), (L/2, L/2), (L/2, −L/2), (−L/2, −L/2)).

    ``corners``: as ``detect_markers`` returns them (a sequence of ``(1, 4, 2)`` arrays), or an
    ``(N, 4, 2)`` array. ``marker_length``: the side of the black square, in the unit the
    translations are wanted in. ``camera_matrix``: 3 × 3 (no skew); ``dist_coeffs``: None or
    OpenCV's k1, k2, p1, p2[, k3] (longer vectors only with zeros beyond k3). Returns ``(rvecs,
    tvecs)``, each ``(N, 1, 3)`` float64 (as ``cv2.aruco.estimatePoseSingleMarkers`` gave them;
    ``rvecs[i].reshape(3, 1)`` is ``solvePnP``'s ``rvec``).

    >>> import numpy as np, markerscope as ms
    >>> K = [[500, 0, 320], [0, 500, 240], [0, 0, 1]]
    >>> square = [[[270, 190], [370, 190], [370, 290], [270, 290]]]
    >>> rvecs, tvecs = ms.estimate_pose(square, 0.1, K)
    >>> rvecs.shape, (tvecs.round(6) + 0.0).tolist()
    ((1, 1, 3), [[[0.0, 0.0, 0.5]]])
    """
    if isinstance(corners, (list, tuple)) and len(corners) == 0:
        quads = numpy.zeros((0, 4, 2))
    else:
        quads = _reals(corners, "corners")
    if quads.ndim < 2 or quads.shape[-2:] != (4, 2):
        raise ValueError(f"corners: expected (1, 4, 2) arrays or an (N, 4, 2) array, got shape {quads.shape}")
    quads = numpy.ascontiguousarray(quads.reshape(-1, 4, 2))
    if not numpy.isfinite(quads).all():
        raise ValueError("corners: values must be finite")
    if isinstance(marker_length, bool) or not isinstance(marker_length, (int, float, numpy.integer, numpy.floating)):
        raise TypeError(f"marker_length: expected a number, got {marker_length!r}")
    length = float(marker_length)
    if not (numpy.isfinite(length) and length > 0):
        raise ValueError(f"marker_length: expected a positive length, got {marker_length}")
    k = _matrix(camera_matrix, "camera_matrix", (3, 3))
    if k[0, 1] != 0 or k[1, 0] != 0 or k[2, 0] != 0 or k[2, 1] != 0 or k[2, 2] != 1:
        raise ValueError(f"camera_matrix: expected [[fx, 0, cx], [0, fy, cy], [0, 0, 1]], got {k.tolist()}")
    if k[0, 0] == 0 or k[1, 1] == 0:
        raise ValueError("camera_matrix: the focal lengths fx, fy must not be 0")
    dist = numpy.zeros(5)
    if dist_coeffs is not None:
        given = _reals(dist_coeffs, "dist_coeffs").ravel()
        if given.size not in (0, 4, 5, 8, 12, 14):
            raise ValueError(f"dist_coeffs: expected 4, 5, 8, 12 or 14 values (OpenCV's), got {given.size}")
        if not numpy.isfinite(given).all():
            raise ValueError("dist_coeffs: values must be finite")
        if given.size > 5 and given[5:].any():
            raise ValueError("dist_coeffs: only k1, k2, p1, p2, k3 are supported; the rational, thin-prism "
                             "and tilt terms must be 0")
        dist[:min(5, given.size)] = given[:5]
    camera = (k[0, 0], k[1, 1], k[0, 2], k[1, 2])
    rvecs, tvecs = _markerscope.estimate_pose(quads, length, camera, tuple(dist))
    return rvecs.reshape(-1, 1, 3), tvecs.reshape(-1, 1, 3)


def algorithms() -> List[Dict[str, Any]]:
    """Every labeling algorithm: name, backend, connectivity, summary, whether it labels CUDA
    arrays where they are (``device_input``), and whether it is usable here (``usable``;
    ``why_not`` says why not)."""
    return _markerscope.algorithms()


def devices() -> List[Dict[str, Any]]:
    """The GPU and the cameras found, each with ``usable`` and ``why_not``."""
    return _markerscope.devices()


_ROW_DTYPE = numpy.dtype([
    ("frame", numpy.int64), ("label", numpy.int64), ("left", numpy.int64), ("top", numpy.int64),
    ("width", numpy.int64), ("height", numpy.int64), ("area", numpy.int64), ("centroid_x", numpy.float64),
    ("centroid_y", numpy.float64), ("sum_x", numpy.int64), ("sum_y", numpy.int64), ("file", object),
    ("time_s", numpy.float64), ("track", numpy.int64), ("subpixel_x", numpy.float64),
    ("subpixel_y", numpy.float64),
] + [(name, numpy.float64) for name in (
    "mu20", "mu02", "mu11", "orientation_deg", "major_axis", "minor_axis", "eccentricity",
    "inertia_ratio", "perimeter", "circularity", "x_world", "y_world",
)] + [("damaged", numpy.bool_)])


def _rows(columns: Dict[str, Any]) -> numpy.ndarray:
    n = len(columns["label"])
    rows = numpy.empty(n, dtype=_ROW_DTYPE)
    for name in CSV_COLUMNS:
        rows[name] = columns[name]
    return rows


class Analysis:
    """An analysis under way (``analyze``): iterate for one result per frame; ``close()`` (or
    leaving a ``with`` block) stops it. ``source``: the source as opened; ``algorithm``: the
    algorithm in use; ``notices``: messages the CLI prints on stderr (CPU fallback, skipped
    frames); ``last``: (frame, time_s, file) of the frame just yielded, which a frame without
    components has too."""

    def __init__(self, native: Any, as_pandas: bool):
        self._native = native
        self._pandas = as_pandas
        #: (frame, time_s, file) of the frame just yielded: also there when it has no rows.
        self.last: Optional[tuple] = None

    def __iter__(self) -> "Analysis":
        return self

    def __next__(self) -> Any:
        columns = next(self._native)
        self.last = (columns["frame"], columns["time_s"], columns["file"])
        rows = _rows(columns)
        if not self._pandas:
            return rows
        import pandas

        return pandas.DataFrame.from_records(rows, columns=CSV_COLUMNS)

    def close(self) -> None:
        self._native.close()

    def __enter__(self) -> "Analysis":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def source(self) -> str:
        return self._native.source

    @property
    def algorithm(self) -> str:
        return self._native.algorithm

    @property
    def notices(self) -> List[str]:
        return list(self._native.notices)


def _optional_number(value: Any, name: str, whole: bool = False) -> Any:
    if value is None:
        return None
    kinds = (int, numpy.integer) if whole else (int, float, numpy.integer, numpy.floating)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise TypeError(f"{name}: expected {'an integer' if whole else 'a number'} or None, got {value!r}")
    if whole:
        if not 0 <= int(value) <= 2**64 - 1:
            raise ValueError(f"{name}: expected an integer >= 0, got {value}")
        return int(value)
    return float(value)


def _paths(value: Any, name: str) -> List[str]:
    items = [value] if isinstance(value, (str, os.PathLike)) else list(value)
    for item in items:
        if not isinstance(item, (str, os.PathLike)):
            raise TypeError(f"{name}: expected file paths (str or os.PathLike), got {item!r}")
    return [os.fspath(item) for item in items]


def _path(value: Any, name: str) -> str:
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name}: expected a file path (str or os.PathLike), got {value!r}")
    return os.fspath(value)


def _frames(source: Any) -> Iterable[numpy.ndarray]:
    """The grey frames of an array or an iterable, converted as they are pulled: a 2-D array is
    one frame, an (n, h, w) or (n, h, w, 3) array n frames, an iterable yields frames."""
    if isinstance(source, numpy.ndarray):
        if source.ndim == 2:
            source = [source]
        elif source.ndim not in (3, 4):
            raise ValueError(f"source: expected a 2-D frame, an (n, h, w) stack of frames or an iterable of "
                             f"frames, got shape {source.shape}")
    elif _torch_cpu(source) or cuda_interface(source) is not None:
        return _frames(_host_copy(source))
    elif not hasattr(source, "__iter__"):
        raise TypeError(f"source: expected a path, a source spec, frames (a numpy array) or an iterable of "
                        f"frames, got {_describe(source)}")
    return (_grey_of(frame, f"frame {i}") for i, frame in enumerate(source))


def analyze(
    source: Any,
    *,
    connectivity: int = 8,
    threshold: Optional[str] = None,
    invert: bool = False,
    backend: str = "auto",
    algorithm: Optional[str] = None,
    max_frames: Optional[int] = None,
    size: Optional[tuple] = None,
    subpixel: bool = True,
    pandas: bool = False,
    shapes: bool = False,
    min_area: Optional[int] = None,
    max_area: Optional[int] = None,
    max_aspect: Optional[float] = None,
    min_circularity: Optional[float] = None,
    max_circularity: Optional[float] = None,
    min_inertia_ratio: Optional[float] = None,
    max_inertia_ratio: Optional[float] = None,
    masks: Union[str, "os.PathLike[str]", Sequence[Any]] = (),
    world_points: Sequence[Any] = (),
    calibration: Optional[Union[str, "os.PathLike[str]"]] = None,
    world_units: str = "",
    decoder: str = "auto",
) -> Analysis:
    """Analyses a video, an image, a folder, a glob, ``camera:N`` or ``synthetic`` (a str or an
    ``os.PathLike``), or frames given as numpy arrays, as ``markerscope analyze`` does: the
    same threshold (default ``background:5``), labeling, sub-pixel centroids and tracking.
    Frames: a 2-D array is one frame, an ``(n, h, w)`` array n frames, and any other iterable
    (a list, a generator, a video reader) yields frames, each a 2-D uint8 grey image or a BGR
    one (converted as OpenCV converts it); they are pulled as the analysis goes, and what the
    iterable raises comes out of the iteration as it was.

    Yields one result per frame: a numpy structured array with the CSV export's columns
    (``CSV_COLUMNS``: frame, label, left, top, width, height, area, centroid_x, centroid_y,
    sum_x, sum_y, file, time_s, track, subpixel_x, subpixel_y, the shape columns, x_world,
    y_world and damaged (the frame was decoded from damaged video data); NaN sub-pixel
    centroids with ``subpixel=False``, NaN shape and world columns unless asked for), or a pandas DataFrame with ``pandas=True``. ``camera:N`` and
    ``synthetic`` never end: give ``max_frames``. ``size``: (width, height) of synthetic frames
    (an error for other sources, which have their own size).

    The options of ``markerscope analyze``, by the same names: ``shapes`` (the shape
    descriptor columns), the filters ``min_area``, ``max_area``, ``max_aspect``,
    ``min_circularity``, ``max_circularity``, ``min_inertia_ratio``, ``max_inertia_ratio``
    (components outside are left out), ``masks`` (mask files: a PNG, or a ``.toml`` region of
    interest; only the pixels every one keeps are analysed), ``world_points`` (four or more
    reference points, ``"x,y=X,Y"`` or ``((x, y), (X, Y))``: the x_world, y_world columns),
    ``calibration`` (a lens calibration file applied before the world mapping),
    ``world_units`` and ``decoder`` (where a video file is decoded: ``"auto"``, ``"cpu"`` or
    ``"nvdec"``, as ``markerscope analyze --decoder``: ``"nvdec"`` falls back to the CPU, with
    a notice, where NVDEC cannot decode the file).

    >>> import markerscope as ms
    >>> with ms.analyze("synthetic", max_frames=2, backend="cpu") as frames:
    ...     [len(rows) > 0 for rows in frames]
    [True, True]
    """
    options = {name: value for name, value in locals().items() if name in _ANALYSIS_DEFAULTS}
    if isinstance(source, (str, os.PathLike)):
        source = _source_path(source)
    else:
        source = _frames(source)
    return Analysis(_markerscope.Analysis(source, _analysis_settings(options)), pandas)


def analyze_to_file(
    source: Union[str, "os.PathLike[str]"],
    out: Union[str, "os.PathLike[str]"],
    *,
    tracks: Optional[Union[str, "os.PathLike[str]"]] = None,
    metadata: Optional[Dict[str, str]] = None,
    **options: Any,
) -> Dict[str, Any]:
    """Analyses a video, an image, a folder or a glob into files, as ``markerscope analyze
    SOURCE --out OUT --tracks TRACKS`` does, by the engine's own writers and without the GIL:
    the rows (one per component, ``CSV_COLUMNS``) to ``out`` and, with ``tracks``, the per-track
    summary (``TRACK_COLUMNS``) to ``tracks``, each in the format its extension names (``.csv``,
    ``.jsonl``, ``.parquet``, ``.arrow``; the summary is CSV, Parquet or Arrow), written under a
    temporary name and renamed into place when complete. ``metadata`` (str keys and values) is
    added to the Parquet and Arrow files' key-value metadata, beside the schema version.
    ``options`` are ``analyze``'s (not ``pandas``). The call returns when the source is
    analysed whole: a Ctrl-C meanwhile is raised then (the files complete).

    Returns what the run did: ``rows``, ``frames``, ``components``, ``tracks``,
    ``skipped_frames``, ``skipped_data`` and ``damaged_frames`` (left out, undecodable, flagged
    damaged), ``skipped`` (the first of them, described), ``stopped_by`` (None, or why the
    source stopped part way: the files then hold the frames before it), ``source``,
    ``algorithm``, ``seconds`` and ``notices`` (what the command prints on stderr). A request
    that is wrong is a ``ValueError`` or ``TypeError``, a source or output that cannot be read
    or written an ``OSError``.

    >>> import markerscope as ms, os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> done = ms.analyze_to_file("synthetic", os.path.join(folder, "rows.parquet"), max_frames=3, backend="cpu")
    >>> done["frames"], done["rows"] > 0
    (3, True)
    """
    source = _source_path(source)
    unknown = sorted(set(options) - set(_ANALYSIS_DEFAULTS))
    if unknown:
        raise TypeError(f"{unknown[0]}: not an option of analyze_to_file; expected one of "
                        f"{', '.join(sorted(_ANALYSIS_DEFAULTS))}")
    out_path = _path(out, "out")
    tracks_path = None if tracks is None else _path(tracks, "tracks")
    pairs = []
    for key, value in (metadata or {}).items():
        if not (isinstance(key, str) and isinstance(value, str)):
            raise TypeError(f"metadata: keys and values must be str, got {key!r}: {value!r}")
        pairs.append((key, value))
    return _markerscope.analyze_to_file(source, out_path, _analysis_settings(options), tracks_path, pairs)


def _source_path(source: Any) -> str:
    try:
        path = os.fspath(source)
    except TypeError:
        raise TypeError(f"source: expected a str path, got {type(source).__name__}") from None
    if not isinstance(path, str):
        raise TypeError("source: expected a str path, got bytes")
    return path


def _analysis_settings(options: Dict[str, Any]) -> Dict[str, Any]:
    """``analyze``'s options (its defaults for those not given), checked and converted: the
    settings of the native analysis."""
    o = {**_ANALYSIS_DEFAULTS, **options}
    max_frames, size = o["max_frames"], o["size"]
    if max_frames is not None:
        max_frames = _optional_number(max_frames, "max_frames", whole=True)
    if size is not None:
        if not (isinstance(size, (tuple, list)) and len(size) == 2):
            raise TypeError(f"size: expected (width, height), got {size!r}")
        size = tuple(_whole(v, "size", 1) for v in size)
    points = []
    for point in o["world_points"]:
        if not isinstance(point, str):
            try:
                image_xy, world_xy = point
                point = (_matrix(image_xy, "world_points", (2,)).tolist(), _matrix(world_xy, "world_points", (2,)).tolist())
            except (TypeError, ValueError) as e:
                raise ValueError(f"world_points: expected 'x,y=X,Y' or ((x, y), (X, Y)) with finite numbers, "
                                 f"got {point!r}") from e
        points.append(point)
    extras = {
        "shapes": bool(o["shapes"]),
        "min_area": _optional_number(o["min_area"], "min_area", whole=True),
        "max_area": _optional_number(o["max_area"], "max_area", whole=True),
        "max_aspect": _optional_number(o["max_aspect"], "max_aspect"),
        "min_circularity": _optional_number(o["min_circularity"], "min_circularity"),
        "max_circularity": _optional_number(o["max_circularity"], "max_circularity"),
        "min_inertia_ratio": _optional_number(o["min_inertia_ratio"], "min_inertia_ratio"),
        "max_inertia_ratio": _optional_number(o["max_inertia_ratio"], "max_inertia_ratio"),
        "masks": _paths(o["masks"], "masks"),
        "world_points": points,
        "calibration": None if o["calibration"] is None else _paths(o["calibration"], "calibration")[0],
        "world_units": str(o["world_units"]),
    }
    return {"connectivity": _connectivity(o["connectivity"]), "threshold": o["threshold"], "invert": bool(o["invert"]),
            "backend": o["backend"], "algorithm": o["algorithm"], "max_frames": max_frames, "size": size,
            "subpixel": bool(o["subpixel"]), "decoder": _decoder(o["decoder"]), "extras": extras}


def _decoder(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"decoder: expected 'auto', 'cpu' or 'nvdec', got {value!r}")
    return value


#: ``analyze``'s options (those ``analyze_to_file`` takes too) and their defaults.
_ANALYSIS_DEFAULTS = {name: p.default for name, p in inspect.signature(analyze).parameters.items()
                      if name not in ("source", "pandas")}


from .particles import FEATURE_COLUMNS, link, locate_frames  # noqa: E402  (they use the functions above)
