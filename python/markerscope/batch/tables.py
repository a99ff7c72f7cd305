"""The Parquet files of a batch run and their key-value metadata. Both are written by the
engine (``markerscope.analyze_to_file``), in the schemas of ``markerscope analyze --out
rows.parquet --tracks tracks.parquet``:

- rows: the CSV's columns (``CSV_COLUMNS``) in order, the integer columns uint64, ``damaged``
  a boolean, the others float64, ``file`` a string (empty for video frames, as in the CSV);
  ``track`` and the sub-pixel, shape and world columns nullable, null where the CSV leaves the
  field empty (not computed); a NaN the CSV writes as ``NaN`` (a shape value that has none) is
  a NaN. A detection the tracker could not follow (a non-finite position) has track 0.
- tracks: the ``--tracks`` CSV's columns (``TRACK_COLUMNS``), track, first_frame, last_frame
  and length uint64, the others float64, none null; one row per track, by ID.

Each file's key-value metadata holds its schema's version and what the batch adds: the
settings as JSON, the markerscope version and the input's path.
"""

from __future__ import annotations

import json
from typing import Any, Dict

#: Raised when a column changes type or meaning: the rows' is the CLI's Parquet schema version
#: (2: ``damaged`` added), the track summary's its own (the CLI's too).
ROWS_SCHEMA_VERSION = 2
TRACKS_SCHEMA_VERSION = 1

#: Key-value metadata keys of the Parquet files a batch run writes: the schema version (the
#: CLI's keys), the settings as JSON, the markerscope version, the input's path.
META_ROWS_SCHEMA_VERSION = "markerscope.rows.schema_version"
META_TRACKS_SCHEMA_VERSION = "markerscope.tracks.schema_version"
META_SETTINGS = "markerscope.settings"
META_VERSION = "markerscope.version"
META_SOURCE = "markerscope.source"


def metadata(settings: Dict[str, Any], version: str, source: str) -> Dict[str, str]:
    """The key-value metadata the batch adds to one input's files (the schema version is the
    engine's)."""
    return {
        META_SETTINGS: json.dumps(settings, sort_keys=True),
        META_VERSION: version,
        META_SOURCE: source,
    }
