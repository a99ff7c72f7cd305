"""trackpy-style particle locating and linking on markerscope's labeling and tracker.

``locate_frames`` gives trackpy's feature table (``x, y, mass, size, ecc, signal, frame``)
from connected components of a thresholded image, and ``link`` adds trackpy's ``particle``
column with markerscope's tracker, so a trackpy notebook switches by changing these two calls
(see the user guide's "trackpy notebooks" section for where the rules differ).
"""

from __future__ import annotations

import numbers
import os
import warnings
from typing import Any, Dict, Iterable, List, Optional, Sequence

import numpy

#: ``link``'s assignment rules: trackpy's subnetwork optimum, or the cheapest pair first.
_LINK_STRATEGIES = ("subnet", "greedy")

#: The columns ``locate_frames`` returns, in trackpy's order.
FEATURE_COLUMNS: List[str] = ["y", "x", "mass", "size", "ecc", "signal", "frame"]

# trackpy keywords that name something markerscope does differently, and why they are refused
# rather than ignored.
_REFUSED_LINK_KEYWORDS: Dict[str, str] = {
    "predictor": "markerscope's tracker has its own motion model; pass predict=True for "
                 "constant-velocity prediction, or leave it out for trackpy's default (none)",
    "adaptive_stop": "markerscope does not shrink the search range in dense regions; a particle "
                     "weighs its nearest candidates (max_candidates) within search_range instead",
    "adaptive_step": "markerscope does not shrink the search range in dense regions (see adaptive_stop)",
    "neighbor_strategy": "markerscope always finds neighbours through its own grid index",
    "dist_func": "markerscope links by Euclidean distance only",
    "to_eucl": "markerscope links by Euclidean distance only",
}


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:
        raise ImportError("markerscope.link and markerscope.locate_frames work on pandas DataFrames: "
                          "install pandas (pip install pandas)") from None
    return pandas


def _positive(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: expected a number, got {value!r}")
    value = float(value)
    if not (numpy.isfinite(value) and value > 0):
        raise ValueError(f"{name}: expected a positive finite number, got {value}")
    return value


def _search_range(search_range: Any) -> float:
    """A scalar, or trackpy's per-dimension tuple when every dimension has the same range."""
    if isinstance(search_range, (tuple, list, numpy.ndarray)):
        ranges = [_positive(r, "search_range") for r in search_range]
        if len(ranges) != 2:
            raise ValueError(f"search_range: expected a number or one per dimension (2), got {len(ranges)} values")
        if ranges[0] != ranges[1]:
            raise ValueError(f"search_range: an anisotropic range {tuple(ranges)} is not supported; "
                             "scale the position columns so that one range fits both")
        return ranges[0]
    return _positive(search_range, "search_range")


def _memory(memory: Any) -> int:
    if isinstance(memory, bool) or not isinstance(memory, numbers.Integral):
        raise TypeError(f"memory: expected an integer number of frames, got {memory!r}")
    if not 0 <= int(memory) <= 2**32 - 1:
        raise ValueError(f"memory: expected an integer >= 0, got {memory}")
    return int(memory)


def _link_strategy(link_strategy: Any) -> str:
    if not isinstance(link_strategy, str):
        raise TypeError(f"link_strategy: expected 'subnet' or 'greedy', got {link_strategy!r}")
    if link_strategy not in _LINK_STRATEGIES:
        raise ValueError(f"link_strategy: expected 'subnet' (trackpy's rule: each subnetwork solved for the "
                         f"least total squared displacement, whichever of trackpy's strategies solves it) or "
                         f"'greedy' (the cheapest pair first), got {link_strategy!r}")
    return link_strategy


def _backend(backend: Any) -> str:
    if not isinstance(backend, str):
        raise TypeError(f"backend: expected 'auto', 'cpu' or 'cuda', got {backend!r}")
    return backend


def _pos_columns(features: Any, pos_columns: Any) -> List[str]:
    if pos_columns is None:
        if "z" in features.columns:
            raise ValueError("features has a 'z' column: markerscope links in 2-D only; pass "
                             "pos_columns=['y', 'x'] to link by those two")
        return ["y", "x"]
    if isinstance(pos_columns, str) or not isinstance(pos_columns, Sequence):
        raise TypeError(f"pos_columns: expected a list of two column names, got {pos_columns!r}")
    columns = list(pos_columns)
    if len(columns) != 2:
        raise ValueError(f"pos_columns: markerscope links in 2-D: expected two columns, got {columns}")
    return columns


def _column(features: Any, name: Any, what: str) -> numpy.ndarray:
    if name not in features.columns:
        raise ValueError(f"features: no {what} column {name!r} (columns: {list(features.columns)})")
    values = features[name].to_numpy()
    if values.dtype.kind not in "biuf":
        raise TypeError(f"features[{name!r}]: expected numbers, got dtype {values.dtype}")
    return values


def _frame_numbers(features: Any, t_column: Any) -> numpy.ndarray:
    frames = _column(features, t_column, "frame")
    if frames.dtype.kind == "f":
        if not numpy.isfinite(frames).all() or (frames != numpy.round(frames)).any():
            raise ValueError(f"features[{t_column!r}]: frame numbers must be whole numbers")
    return frames.astype(numpy.int64)


def link(features: Any, search_range: Any, memory: int = 0, *, pos_columns: Optional[Sequence[str]] = None,
         t_column: str = "frame", predict: bool = False, max_candidates: int = 16, link_strategy: str = "subnet",
         backend: str = "auto", **kwargs: Any) -> Any:
    """Links a trackpy-style feature table into trajectories, like ``trackpy.link``.

    ``features``: a pandas DataFrame with position columns (``x``, ``y``; ``pos_columns``
    names others, as in trackpy: ``["y", "x"]`` by default) and a frame column
    (``t_column``, ``frame`` by default); other columns and the index are kept. Returns a
    copy sorted by frame (as trackpy sorts it, stable within a frame) with an int64
    ``particle`` column numbering the trajectories from 0 in order of first appearance.

    ``search_range``: the farthest (px) a particle moves between frames (a number, or
    trackpy's per-dimension pair when both are equal). ``memory``: frames a particle may
    vanish and still be linked when it reappears within ``search_range`` of where it was
    last seen. markerscope's own: ``predict`` (search around a constant-velocity prediction
    instead of the last position) and ``max_candidates`` (the nearest detections a particle
    weighs).

    ``link_strategy``: ``"subnet"`` (the default) is trackpy's rule: each subnetwork (the
    particles of two frames joined through candidate pairs) is linked for the least total
    squared displacement, a particle left unlinked costing ``search_range²``, exactly (equal
    totals by a fixed order: the particles in order of first appearance, each's candidates
    nearest first); trackpy's own strategies (``"numba"``, ``"recursive"``, ...) all solve
    that, and are refused with a ValueError that says so. A subnetwork of more than 2,000
    particles (trackpy refuses more than 30) is linked by the greedy rule, with a
    RuntimeWarning. ``"greedy"`` takes the nearest pair first (faster; on well-separated
    particles the same links). trackpy's other keywords (``predictor``, ``adaptive_stop``,
    ...) are refused with a TypeError that says why: they name rules markerscope does not
    follow.

    ``backend``: ``"auto"`` (the GPU when one is usable, else the CPU), ``"cpu"`` or ``"cuda"``
    (``GpuUnavailableError`` without a GPU): where the frames are linked. Both give the same
    trajectories (the GPU tracker's IDs are the CPU tracker's); the GPU keeps up to 32
    candidates a particle (``max_candidates``; above, ``"auto"`` links on the CPU).

    >>> import pandas as pd, markerscope as ms
    >>> f = pd.DataFrame({"x": [1.0, 9.0, 1.5, 9.2], "y": [1.0, 1.0, 1.2, 1.1], "frame": [0, 0, 1, 1]})
    >>> ms.link(f, search_range=2)["particle"].tolist()
    [0, 1, 0, 1]
    """
    for name in kwargs:
        why = _REFUSED_LINK_KEYWORDS.get(name)
        if why is None:
            raise TypeError(f"link() got an unexpected keyword argument {name!r}")
        raise TypeError(f"link: trackpy's {name!r} is not supported: {why}")
    pandas = _pandas()
    if not isinstance(features, pandas.DataFrame):
        raise TypeError(f"features: expected a pandas DataFrame, got {type(features).__name__}")
    gate = _search_range(search_range)
    memory = _memory(memory)
    link_strategy = _link_strategy(link_strategy)
    if isinstance(max_candidates, bool) or not isinstance(max_candidates, numbers.Integral):
        raise TypeError(f"max_candidates: expected an integer, got {max_candidates!r}")
    if not 1 <= max_candidates <= 2**32 - 1:
        raise ValueError(f"max_candidates: expected an integer >= 1, got {max_candidates}")
    columns = _pos_columns(features, pos_columns)
    frames = _frame_numbers(features, t_column)
    order = numpy.argsort(frames, kind="stable")
    out = features.iloc[order].copy()
    out[t_column] = frames[order]
    y, x = (_column(out, name, "position").astype(numpy.float64) for name in columns)
    if not (numpy.isfinite(x).all() and numpy.isfinite(y).all()):
        raise ValueError(f"features: positions ({', '.join(map(repr, columns))}) must be finite")
    backend = _backend(backend)
    ids = _link_sorted(x, y, frames[order], gate, memory, bool(predict), int(max_candidates), link_strategy, backend)
    out["particle"] = ids
    return out


def _link_sorted(x: numpy.ndarray, y: numpy.ndarray, frames: numpy.ndarray, gate: float, memory: int,
                 predict: bool, max_candidates: int, link_strategy: str, backend: str) -> numpy.ndarray:
    """Particle numbers for rows sorted by frame: the tracker's IDs renumbered from 0."""
    from . import _markerscope

    if len(x) == 0:
        return numpy.empty(0, dtype=numpy.int64)
    first = int(frames[0])
    starts = numpy.flatnonzero(numpy.diff(frames)) + 1
    bounds = numpy.concatenate(([0], starts, [len(x)])).astype(numpy.int64)
    ids, greedy_clusters, _ = _markerscope.link_frames(
        numpy.ascontiguousarray(x, dtype=numpy.float64), numpy.ascontiguousarray(y, dtype=numpy.float64),
        bounds, (frames[bounds[:-1]] - first).astype(numpy.int64), float(gate), memory, predict, max_candidates,
        link_strategy, backend)
    if greedy_clusters:
        warnings.warn(f"link: {greedy_clusters} subnetwork(s) of more than 2,000 particles were linked by "
                      "the greedy rule (nearest pair first); a smaller search_range splits them",
                      RuntimeWarning, stacklevel=3)
    # From 0 in order of first appearance, as trackpy numbers. The tracker numbers new tracks
    # from 1 in the order their first rows come, so that is ID − 1 (checked: each row's ID at
    # most one above every ID before it); the general ranking otherwise.
    seen = numpy.maximum.accumulate(ids)
    if ids[0] == 1 and ids.min() >= 1 and (ids[1:] <= seen[:-1] + 1).all():
        return ids - 1
    _, first_rows, inverse = numpy.unique(ids, return_index=True, return_inverse=True)
    rank = numpy.empty(len(first_rows), dtype=numpy.int64)
    rank[numpy.argsort(first_rows, kind="stable")] = numpy.arange(len(first_rows))
    return rank[inverse.reshape(-1)]


def locate_frames(frames: Any, threshold: Optional[str] = None, *, invert: bool = False, connectivity: int = 8,
                  minmass: Optional[float] = None, max_frames: Optional[int] = None,
                  backend: str = "auto") -> Any:
    """Features of every frame in trackpy's columns (``y, x, mass, size, ecc, signal,
    frame``), one row per bright spot: a pandas DataFrame like ``trackpy.batch``'s.

    ``frames``: a video, an image folder or glob, or ``synthetic:KIND`` (a str or an
    ``os.PathLike``; an endless one needs ``max_frames``), a 2-D array (one frame), an
    ``(n, h, w)`` array, or any iterable of 2-D uint8 grey (or BGR) frames. A spot is a
    connected component (``connectivity`` 4 or 8) of the thresholded frame (``threshold``: a
    threshold spec as in ``threshold()``, by default ``background:5`` as ``analyze`` uses;
    ``invert`` for dark spots on a bright background). Each pixel of a spot weighs its grey
    value above the threshold level, w = grey − level (level + 1 − grey with ``invert``; the
    grey value itself for ``adaptive``, which has no single level); then:

    - ``x``, ``y``: the w-weighted centroid (the sub-pixel centroid of ``component_stats``);
    - ``mass``: Σ w over the spot (trackpy: the brightness summed within a disc of its
      ``diameter`` after its band-pass filter);
    - ``size``: the radius of gyration √(Σ w r² / Σ w) about the centroid (trackpy's too, but
      over its disc rather than the spot's own pixels);
    - ``ecc``: √((μ20 − μ02)² + 4 μ11²) / (μ20 + μ02) from the w-weighted central moments: 0
      for a round spot, towards 1 for an elongated one (trackpy weighs each pixel's
      direction by its brightness without the r² factor); 0 for a one-pixel spot;
    - ``signal``: the largest w in the spot (trackpy: the peak of the filtered image);
    - ``frame``: the frame's index from 0.

    ``minmass`` drops spots of smaller mass, as trackpy's. The frames are labeled on
    ``backend`` ("auto", "cpu" or "cuda"); the measures are numpy's.

    >>> import numpy as np, markerscope as ms
    >>> frame = np.zeros((8, 8), np.uint8); frame[2:4, 2:5] = 100
    >>> f = ms.locate_frames([frame], threshold="fixed:50")
    >>> f[["x", "y", "mass", "signal", "frame"]].values.tolist()
    [[3.0, 2.5, 300.0, 50.0, 0.0]]
    """
    pandas = _pandas()
    from . import _connectivity, _frames, _optional_number, threshold as threshold_of

    if threshold is None:
        threshold = "background:5"
    if not isinstance(threshold, str):
        raise TypeError(f"threshold: expected a threshold spec string such as 'otsu', got {threshold!r}")
    connectivity = _connectivity(connectivity)
    if minmass is not None:
        minmass = _optional_number(minmass, "minmass")
    max_frames = _optional_number(max_frames, "max_frames", whole=True)
    tables = [_spot_table(_empty_spots())]
    for index, grey in enumerate(_grey_frames(frames, max_frames, _frames)):
        if max_frames is not None and index >= max_frames:
            break
        level, mask = threshold_of(grey, threshold, invert)
        spots = _measure(grey, mask, level, bool(invert), connectivity, backend)
        if minmass is not None:
            keep = spots["mass"] >= minmass
            spots = {name: values[keep] for name, values in spots.items()}
        spots["frame"] = numpy.full(len(spots["x"]), index, dtype=numpy.int64)
        tables.append(_spot_table(spots))
    return pandas.DataFrame(
        {name: numpy.concatenate([t[name] for t in tables]) for name in FEATURE_COLUMNS},
        columns=FEATURE_COLUMNS)


def _grey_frames(frames: Any, max_frames: Optional[int], frames_of: Any) -> Iterable[numpy.ndarray]:
    if isinstance(frames, (str, os.PathLike)):
        from . import _markerscope

        spec = os.fspath(frames)
        if not isinstance(spec, str):
            raise TypeError("frames: expected a str path, got bytes")
        return _markerscope.SourceFrames(spec, max_frames)
    return frames_of(frames)


def _empty_spots() -> Dict[str, numpy.ndarray]:
    spots = {name: numpy.zeros(0) for name in FEATURE_COLUMNS}
    spots["frame"] = numpy.zeros(0, dtype=numpy.int64)
    return spots


def _spot_table(spots: Dict[str, numpy.ndarray]) -> Dict[str, numpy.ndarray]:
    return {name: spots[name] for name in FEATURE_COLUMNS}


def _measure(grey: numpy.ndarray, mask: numpy.ndarray, level: Optional[int], invert: bool, connectivity: int,
             backend: str) -> Dict[str, numpy.ndarray]:
    """The trackpy columns of every component of ``mask`` (all but ``frame``)."""
    from . import connected_components

    n, labels = connected_components(mask, connectivity, backend=backend)
    count = n - 1
    flat = labels.ravel()
    pixels = numpy.flatnonzero(flat)
    label = flat[pixels].astype(numpy.int64) - 1
    value = grey.ravel()[pixels].astype(numpy.float64)
    if level is None:
        weight = 255.0 - value if invert else value
    else:
        weight = level + 1.0 - value if invert else value - level
    ys, xs = numpy.divmod(pixels, grey.shape[1])
    xs, ys = xs.astype(numpy.float64), ys.astype(numpy.float64)

    def total(values: numpy.ndarray) -> numpy.ndarray:
        return numpy.bincount(label, values, minlength=count)

    mass = total(weight)
    # Moments about each pixel's own component start (its first pixel in raster order)
    # keep the sums small, so the variances lose no precision far from the origin.
    first = numpy.full(count, len(pixels), dtype=numpy.int64)
    numpy.minimum.at(first, label, numpy.arange(len(pixels)))
    dx, dy = xs - xs[first][label], ys - ys[first][label]
    mx, my = total(weight * dx) / mass, total(weight * dy) / mass
    mu20 = total(weight * dx * dx) / mass - mx * mx
    mu02 = total(weight * dy * dy) / mass - my * my
    mu11 = total(weight * dx * dy) / mass - mx * my
    spread = numpy.maximum(mu20 + mu02, 0.0)
    with numpy.errstate(invalid="ignore", divide="ignore"):
        ecc = numpy.where(spread > 0, numpy.sqrt((mu20 - mu02) ** 2 + 4 * mu11 ** 2) / spread, 0.0)
    signal = numpy.zeros(count)
    numpy.maximum.at(signal, label, weight)
    return {
        "x": xs[first] + mx,
        "y": ys[first] + my,
        "mass": mass,
        "size": numpy.sqrt(spread),
        "ecc": numpy.minimum(ecc, 1.0),
        "signal": signal,
    }
