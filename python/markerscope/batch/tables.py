"""The Parquet tables of a batch run: one file's rows (the CSV export's columns) and its
per-track summary (the ``--tracks`` CSV's columns), with the schema version and the settings
in each file's key-value metadata.

The rows' schema is the one ``markerscope analyze --out rows.parquet`` writes (version 2 under
``markerscope.rows.schema_version``): the integer columns uint64, ``damaged`` a boolean, the
others float64, ``file`` a string (empty for video frames, as in the CSV); ``track`` and the sub-pixel, shape and world
columns are nullable, null where the CSV leaves the field empty (not computed). A detection
the tracker could not follow (a non-finite position) has track 0, as in the CSV.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

import numpy

from .. import CSV_COLUMNS, TRACK_COLUMNS

#: Raised when a column changes type or meaning: the rows' is the CLI's Parquet schema version
#: (2: ``damaged`` added), the track summary's its own.
ROWS_SCHEMA_VERSION = 2
TRACKS_SCHEMA_VERSION = 1

#: Key-value metadata keys of the Parquet files a batch run writes: the schema version (the
#: CLI's key for the rows), the settings as JSON, the markerscope version, the input's path.
META_ROWS_SCHEMA_VERSION = "markerscope.rows.schema_version"
META_TRACKS_SCHEMA_VERSION = "markerscope.tracks.schema_version"
META_SETTINGS = "markerscope.settings"
META_VERSION = "markerscope.version"
META_SOURCE = "markerscope.source"

_INTEGER_COLUMNS = {"frame", "label", "left", "top", "width", "height", "area", "sum_x", "sum_y", "track"}
_TRACK_INTEGER_COLUMNS = {"track", "first_frame", "last_frame", "length"}
#: Columns the CSV leaves empty where nothing was computed (NaN in the rows ``analyze`` yields;
#: ``track`` is always there from ``analyze``).
_OPTIONAL_COLUMNS = {"track", "subpixel_x", "subpixel_y", "mu20", "mu02", "mu11", "orientation_deg",
                     "major_axis", "minor_axis", "eccentricity", "inertia_ratio", "perimeter", "circularity",
                     "x_world", "y_world"}
#: Rows gathered before a row group is written (bounds what a worker holds for a long file).
ROW_GROUP_ROWS = 1 << 18


def _pa():
    import pyarrow

    return pyarrow


def _type(name: str, integers: set):
    pa = _pa()
    if name == "file":
        return pa.string()
    if name == "damaged":
        return pa.bool_()
    return pa.uint64() if name in integers else pa.float64()


def metadata(settings: Dict[str, Any], version: str, source: str) -> Dict[str, str]:
    """The key-value metadata of one input's files (the schema version is the schema's)."""
    return {
        META_SETTINGS: json.dumps(settings, sort_keys=True),
        META_VERSION: version,
        META_SOURCE: source,
    }


def rows_schema(meta: Dict[str, str]):
    """The rows file's schema: ``CSV_COLUMNS`` in order."""
    pa = _pa()
    fields = [pa.field(n, _type(n, _INTEGER_COLUMNS), nullable=n in _OPTIONAL_COLUMNS) for n in CSV_COLUMNS]
    return pa.schema(fields, metadata={**meta, META_ROWS_SCHEMA_VERSION: str(ROWS_SCHEMA_VERSION)})


def tracks_schema(meta: Dict[str, str]):
    """The track summary file's schema: ``TRACK_COLUMNS`` in order."""
    pa = _pa()
    return pa.schema([pa.field(n, _type(n, _TRACK_INTEGER_COLUMNS), nullable=False) for n in TRACK_COLUMNS],
                     metadata={**meta, META_TRACKS_SCHEMA_VERSION: str(TRACKS_SCHEMA_VERSION)})


def rows_table(rows: numpy.ndarray, schema):
    """One table from ``analyze``'s structured rows (several frames concatenated)."""
    pa = _pa()
    arrays = []
    for field in schema:
        values = rows[field.name]
        mask = None
        if field.name == "file":
            values = values.tolist()
        elif field.type == pa.uint64():
            values = values.astype(numpy.uint64)
        elif field.name in _OPTIONAL_COLUMNS:
            mask = numpy.isnan(values)
        arrays.append(pa.array(values, type=field.type, mask=mask if mask is not None and mask.any() else None))
    return pa.Table.from_arrays(arrays, schema=schema)


class TrackSummaries:
    """The ``--tracks`` CSV's numbers, rebuilt from the rows as the CLI's summary builder does
    (``markerscope::track::SummaryBuilder``): per track its first and last frame, the frames
    with a detection, the running mean of the area and the sum of the distances between
    consecutive positions (the sub-pixel centroid where computed, else the centroid), in the
    same floating-point order, so the values are the CLI's to the bit. One row per track, by ID.
    """

    def __init__(self) -> None:
        self._parts: List[tuple] = []

    def add(self, rows: numpy.ndarray) -> None:
        tracked = rows[rows["track"] != 0]
        if len(tracked) == 0:
            return
        x = numpy.where(numpy.isnan(tracked["subpixel_x"]), tracked["centroid_x"], tracked["subpixel_x"])
        y = numpy.where(numpy.isnan(tracked["subpixel_y"]), tracked["centroid_y"], tracked["subpixel_y"])
        self._parts.append((tracked["track"], tracked["frame"], tracked["area"].astype(numpy.float64), x, y))

    def columns(self) -> Dict[str, numpy.ndarray]:
        if not self._parts:
            empty_i, empty_f = numpy.empty(0, numpy.uint64), numpy.empty(0, numpy.float64)
            return {n: (empty_i if n in _TRACK_INTEGER_COLUMNS else empty_f) for n in TRACK_COLUMNS}
        track, frame, area, x, y = (numpy.concatenate(p) for p in zip(*self._parts))
        order = numpy.lexsort((frame, track))
        track, frame, area, x, y = track[order], frame[order], area[order], x[order], y[order]
        starts = numpy.flatnonzero(numpy.r_[True, track[1:] != track[:-1]])
        lengths = numpy.diff(numpy.r_[starts, len(track)])
        # Step k updates every track with more than k detections at once: longest first, so
        # those are a prefix, and each track's sums are taken in its frames' order.
        by_length = numpy.argsort(-lengths, kind="stable")
        first, length = starts[by_length], lengths[by_length]
        mean_area = area[first].copy()
        path = numpy.zeros(len(first))
        last_x, last_y = x[first].copy(), y[first].copy()
        descending = -length
        for k in range(1, int(length[0])):
            n = int(numpy.searchsorted(descending, -k, side="left"))
            at = first[:n] + k
            dx, dy = x[at] - last_x[:n], y[at] - last_y[:n]
            path[:n] += numpy.sqrt(dx * dx + dy * dy)
            mean_area[:n] += (area[at] - mean_area[:n]) / (k + 1)
            last_x[:n], last_y[:n] = x[at], y[at]
        last = first + length - 1
        by_id = numpy.argsort(track[first], kind="stable")
        values = {"track": track[first], "first_frame": frame[first], "last_frame": frame[last], "length": length,
                  "mean_area": mean_area, "path_length": path, "last_x": last_x, "last_y": last_y}
        return {n: numpy.asarray(values[n])[by_id].astype(numpy.uint64 if n in _TRACK_INTEGER_COLUMNS else numpy.float64)
                for n in TRACK_COLUMNS}

    def table(self, schema):
        pa = _pa()
        columns = self.columns()
        return pa.Table.from_arrays([pa.array(columns[f.name], type=f.type) for f in schema], schema=schema)

