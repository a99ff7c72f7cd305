"""The batch run's record, ``_manifest.json`` in the output folder: one entry per input (its
path, size, modification time and content hash, the rows, frames and skipped frames, the
settings, the markerscope version, the worker and device; or why it failed). It is what a
second run reads to skip the inputs already done, and it is rewritten whole (a temporary file
renamed over it) after every input, so that it is never half written.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional

MANIFEST = "_manifest.json"
MANIFEST_VERSION = 1
ROWS_SUFFIX = ".parquet"
TRACKS_SUFFIX = ".tracks.parquet"
#: A worker's folder of one input's files being written: ``.<output name>.parquet.<pid>-<random>.tmp``,
#: its files moved to their names when both are complete.
TEMP_PATTERN = re.compile(r"^\..+\.\d+-[0-9a-f]+\.tmp$")


@dataclass(frozen=True)
class Input:
    """One input as found before the run: a file, or a folder of images (analysed as one
    source, its size and time those of its files)."""

    path: str
    size: int
    mtime_ns: int


def fingerprint(path: str) -> Input:
    """The input's size and modification time (a folder: its files' total and latest)."""
    st = os.stat(path)
    if not os.path.isdir(path):
        return Input(path, st.st_size, st.st_mtime_ns)
    size, mtime = 0, st.st_mtime_ns
    for entry in os.scandir(path):
        if entry.is_file():
            est = entry.stat()
            size += est.st_size
            mtime = max(mtime, est.st_mtime_ns)
    return Input(path, size, mtime)


def content_hash(path: str) -> str:
    """SHA-256 of the file's bytes (a folder: of its files' names and bytes, by name)."""
    h = hashlib.sha256()
    files = [path] if not os.path.isdir(path) else sorted(
        e.path for e in os.scandir(path) if e.is_file())
    for name in files:
        if name != path:
            h.update(os.path.basename(name).encode() + b"\0")
        with open(name, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return "sha256:" + h.hexdigest()


def check_inputs(paths: Iterable[Any]) -> List[Input]:
    """Every input's fingerprint, in order and without repeats; all the missing or unreadable
    ones listed in one error, before any work."""
    found, problems, seen = [], [], set()
    for p in paths:
        try:
            path = os.path.abspath(os.fspath(p))
        except TypeError:
            raise TypeError(f"paths: expected file paths (str or os.PathLike), got {p!r}") from None
        if path in seen:
            continue
        seen.add(path)
        if not os.path.exists(path):
            problems.append(f"{path}: not found")
        elif not os.access(path, os.R_OK) or (os.path.isdir(path) and not os.access(path, os.X_OK)):
            problems.append(f"{path}: not readable (permission denied)")
        else:
            found.append(fingerprint(path))
    if problems:
        raise FileNotFoundError(f"{len(problems)} of the inputs cannot be read, nothing was analysed:\n  "
                                + "\n  ".join(problems))
    if not found:
        raise ValueError("paths: no input given")
    return found


def _stem(path: str) -> str:
    base = os.path.basename(path.rstrip(os.sep)) or "input"
    stem, ext = os.path.splitext(base)
    return stem if stem and ext else base


def output_names(inputs: List[Input], entries: Dict[str, Dict[str, Any]]) -> Dict[str, str]:
    """Each input's output name (without suffix): the one its manifest entry has; else its
    file stem when no other input of the run or the manifest has that stem; else the stem and
    8 hex digits of its path's hash, so that a/x.mp4 and b/x.mp4 never write one file."""
    names = {i.path: entries[i.path]["output"] for i in inputs if i.path in entries}
    taken: Dict[str, int] = {}
    for name in [e["output"] for e in entries.values()] + [_stem(i.path) for i in inputs if i.path not in names]:
        taken[name] = taken.get(name, 0) + 1
    for i in inputs:
        if i.path in names:
            continue
        stem = _stem(i.path)
        if taken[stem] > 1:
            stem = f"{stem}-{hashlib.sha256(i.path.encode()).hexdigest()[:8]}"
        names[i.path] = stem
    return names


class Manifest:
    """``_manifest.json``: ``{"manifest_version": 1, "files": {input path: entry}}``."""

    def __init__(self, out_dir: str):
        self.path = os.path.join(out_dir, MANIFEST)
        self.entries: Dict[str, Dict[str, Any]] = {}
        if os.path.exists(self.path):
            try:
                with open(self.path, encoding="utf-8") as f:
                    data = json.load(f)
                self.entries = dict(data["files"])
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(f"{self.path} is not a batch manifest ({e}); move it away or choose "
                                 "another output folder") from None

    def other_settings(self, settings: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        """The first input done with other settings than these, or None."""
        for entry in self.entries.values():
            if entry.get("status") == "done" and entry.get("settings") != settings:
                return entry
        return None

    def forget_other_settings(self, settings: Dict[str, Any], out_dir: str) -> None:
        """Removes the entries made with other settings, and their files."""
        for path, e in list(self.entries.items()):
            if e.get("settings") != settings:
                for suffix in (ROWS_SUFFIX, TRACKS_SUFFIX):
                    try:
                        os.remove(os.path.join(out_dir, e["output"] + suffix))
                    except FileNotFoundError:
                        pass
                del self.entries[path]
        self.save()

    def matches(self, i: Input, settings: Dict[str, Any], out_dir: str) -> bool:
        """Is the input done with these settings, unchanged since, and its files there?"""
        e = self.entries.get(i.path)
        return (e is not None and e.get("status") == "done" and e.get("settings") == settings
                and e.get("size") == i.size and e.get("mtime_ns") == i.mtime_ns
                and all(os.path.isfile(os.path.join(out_dir, e["output"] + s)) for s in (ROWS_SUFFIX, TRACKS_SUFFIX)))

    def record(self, entry: Dict[str, Any]) -> None:
        self.entries[entry["input"]] = entry
        self.save()

    def save(self) -> None:
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"manifest_version": MANIFEST_VERSION, "files": self.entries}, f, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(tmp, self.path)
