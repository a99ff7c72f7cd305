"""markerscope: connected components with statistics on the GPU and the CPU.

OpenCV's ``connectedComponentsWithStats`` layout and dtypes, for numpy arrays (CPU, or the GPU
with an upload) and for CuPy arrays and PyTorch CUDA tensors (on the GPU, without a host copy;
the results come back as arrays of the same library on the same device). Also thresholds,
video / folder / camera analysis with track IDs, and a tracker for detections made elsewhere.

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

from typing import Any, Dict, List, NamedTuple, Optional

import numpy

from . import _markerscope
from ._cuda import CudaArray, cuda_interface, describe_cuda_array, is_cuda_array

__all__ = [
    "connected_components_with_stats",
    "component_stats",
    "Components",
    "threshold",
    "algorithms",
    "devices",
    "analyze",
    "Tracker",
    "CSV_COLUMNS",
    "TRACK_COLUMNS",
]

#: The columns of ``analyze``'s rows, as in the CSV export of ``markerscope analyze``.
CSV_COLUMNS: List[str] = _markerscope.CSV_COLUMNS.split(",")
#: The columns of ``Tracker.summaries()``, as ``markerscope analyze --tracks`` writes them.
TRACK_COLUMNS: List[str] = _markerscope.TRACK_COLUMNS.split(",")

Tracker = _markerscope.Tracker

# OpenCV's label types: CV_32S = 4, CV_16U = 2.
_LTYPES = {4: numpy.int32, 2: numpy.uint16}


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


def connected_components_with_stats(
    image: Any,
    connectivity: int = 8,
    *,
    ltype: Any = numpy.int32,
    backend: str = "auto",
    algorithm: Optional[str] = None,
):
    """Labels the connected components of ``image`` and measures them, as OpenCV does.

    Returns ``(n, labels, stats, centroids)`` exactly as ``cv2.connectedComponentsWithStats``:
    ``n`` counts the background; ``labels`` has the image's shape (``ltype``: int32 or uint16),
    0 = background; ``stats`` is int32 n × 5 (LEFT, TOP, WIDTH, HEIGHT, AREA) and ``centroids``
    float64 n × 2, both with the background as row 0 (with no background pixel, row 0 is what
    OpenCV writes: ``[-1, 2147483647, 0, 0, 0]`` and NaN centroids).

    ``image``: a 2-D uint8 or bool array, non-zero = foreground. A numpy array (any strides; a
    non-contiguous one is read through its strides) or a PyTorch CPU tensor is labeled on the
    host, or on the GPU with an upload when ``backend`` allows; a CuPy array or a PyTorch CUDA
    tensor is labeled where it is, and the results are arrays of its library on its device.
    As with that library's own functions, such a call returns before the GPU is done: the
    results are ordered before later work on the array's stream (the one its
    ``__cuda_array_interface__`` names, or PyTorch's current one) and on the default streams.

    Numbering: components are numbered 1..n-1 in the raster order of their first pixel. That is
    OpenCV's numbering for 4-connectivity, and for 8-connectivity with ``ccltype=cv2.CCL_WU``;
    OpenCV's default 8-connectivity algorithm (Spaghetti) numbers in the order of its 2×2 blocks
    instead: the same components with the same statistics, under other numbers.

    ``backend``: "auto" (CUDA when a GPU is usable), "cpu" or "cuda". ``algorithm``: a name from
    ``algorithms()``; CUDA input runs those with ``device_input`` (the FLSL family: ``flsl``,
    ``flsl_otf``, ``flsl_cd`` and the default ``flsl_cdb``) on the array's own device.
    The GIL is released while labeling; calls from several threads are safe.

    >>> import numpy as np, markerscope as ms
    >>> n, labels, stats, centroids = ms.connected_components_with_stats(np.eye(3, dtype=bool), 4)
    >>> n, stats[1:, 4].tolist()
    (4, [1, 1, 1])
    """
    connectivity = _connectivity(connectivity)
    ltype = _ltype(ltype)
    cai = cuda_interface(image)
    if cai is not None:
        n, labels, stats, centroids, _, _ = _label_cuda(image, cai, connectivity, backend, algorithm, True, False)
        return n, _narrow_labels(labels, n, ltype), stats, centroids
    if _torch_cpu(image):
        n, labels, stats, centroids = connected_components_with_stats(
            image.numpy(), connectivity, ltype=ltype, backend=backend, algorithm=algorithm)
        import torch

        return n, torch.from_numpy(labels), torch.from_numpy(stats), torch.from_numpy(centroids)
    n, labels, stats, centroids, _, _, _ = _markerscope.label_host(image, connectivity, True, backend, algorithm)
    return n, _narrow_labels(labels, n, ltype), stats, centroids


def component_stats(
    image: Any,
    connectivity: int = 8,
    *,
    grey: Any = None,
    level: Optional[int] = None,
    invert: bool = False,
    backend: str = "auto",
    algorithm: Optional[str] = None,
) -> Components:
    """The statistics of ``connected_components_with_stats`` without the label image.

    The analysis path: no label image is written or downloaded, so it is faster. Returns
    ``Components(n, stats, centroids, sums, subpixel)`` (a named tuple); ``sums`` holds each
    row's sums of x and y (int64), exact where centroids are rounded.

    ``grey`` (uint8, the image's shape) and ``level`` (the threshold the mask was made with, as
    ``threshold`` returns it) give each component's grey-weighted (sub-pixel) centroid, the
    weights being grey − level (level + 1 − grey with ``invert``). For a CUDA ``image``, ``grey``
    is a CUDA array of the same library on the same device, and ``subpixel`` one too.

    >>> import numpy as np, markerscope as ms
    >>> grey = np.array([[0, 200, 100, 0]], dtype=np.uint8)
    >>> level, mask = ms.threshold(grey, "fixed:50")
    >>> r = ms.component_stats(mask, grey=grey, level=level, backend="cpu")
    >>> r.n, r.centroids[1].tolist(), r.subpixel[1].tolist()
    (2, [1.5, 0.0], [1.25, 0.0])
    """
    connectivity = _connectivity(connectivity)
    if (grey is None) != (level is None):
        raise ValueError("grey and level: give both (sub-pixel centroids) or neither")
    if level is not None:
        if isinstance(level, bool) or not isinstance(level, (int, numpy.integer)) or not 0 <= int(level) <= 255:
            raise ValueError(f"level: expected an integer in 0..=255 (threshold() returns it), got {level!r}")
        level = int(level)
    cai = cuda_interface(image)
    if cai is not None:
        n, _, stats, centroids, sums, subpixel = _label_cuda(image, cai, connectivity, backend, algorithm, False,
                                                             True, grey, level, bool(invert))
        return Components(n, stats, centroids, sums, subpixel)
    if _torch_cpu(image):
        image = image.numpy()
    n, _, stats, centroids, sums, subpixel, _ = _markerscope.label_host(
        image, connectivity, False, backend, algorithm, grey, level, invert)
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
    return n, labels, stats, centroids, sums, subpixel


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
    return _markerscope.threshold(grey, spec, bool(invert))


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
)])


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


def analyze(
    source: str,
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
) -> Analysis:
    """Analyses a video, an image, a folder, a glob, ``camera:N`` or ``synthetic``, as
    ``markerscope analyze`` does: the same threshold (default ``background:5``), labeling,
    sub-pixel centroids and tracking.

    Yields one result per frame: a numpy structured array with the CSV export's columns
    (``CSV_COLUMNS``: frame, label, left, top, width, height, area, centroid_x, centroid_y,
    sum_x, sum_y, file, time_s, track, subpixel_x, subpixel_y; NaN sub-pixel centroids with
    ``subpixel=False``), or a pandas DataFrame with ``pandas=True``. ``camera:N`` and
    ``synthetic`` never end: give ``max_frames``. ``size``: (width, height) of synthetic frames.

    >>> import markerscope as ms
    >>> with ms.analyze("synthetic", max_frames=2, backend="cpu") as frames:
    ...     [len(rows) > 0 for rows in frames]
    [True, True]
    """
    native = _markerscope.Analysis(source, _connectivity(connectivity), threshold, bool(invert), backend,
                                   algorithm, max_frames, size, bool(subpixel))
    return Analysis(native, pandas)

