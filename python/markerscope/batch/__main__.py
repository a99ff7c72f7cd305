"""``markerscope-batch FILES… --out DIR`` (also ``python -m markerscope.batch``): the batch
analysis for people who do not write Python. Exit status 0 when every input is done, 1 when
some failed (the manifest says why), 2 when the request is refused before any work.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, List, Optional, Tuple

from . import Progress, analyze_files


def _option(text: str) -> Tuple[str, Any]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        return name.replace("-", "_"), json.loads(value)
    except ValueError:
        return name.replace("-", "_"), value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="markerscope-batch",
        description="Analyse many video files (or images, folders of images) on a Dask cluster, each as "
                    "`markerscope analyze FILE` does, into one Parquet file per input plus _manifest.json. "
                    "A second run skips the inputs already done.")
    p.add_argument("files", nargs="+", metavar="FILE", help="inputs: videos, images or folders of images")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--scheduler", metavar="ADDRESS", help="a running Dask scheduler, e.g. tcp://host:8786")
    where.add_argument("--workers", type=int, metavar="N",
                       help="workers of the local cluster (default: one per GPU, or one per two cores)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the results of a run with other settings in the output folder")
    p.add_argument("--threshold", help="threshold spec (default background:5), as for `markerscope analyze`")
    p.add_argument("--connectivity", type=int, choices=(4, 8))
    p.add_argument("--invert", action="store_true", help="dark markers on a light background")
    p.add_argument("--backend", choices=("auto", "cpu", "cuda"),
                   help="default: the GPU on a worker that has one, else the CPU")
    p.add_argument("--algorithm", help="labeling algorithm (see `markerscope algorithms`)")
    p.add_argument("--max-frames", type=int, metavar="N", help="analyse at most N frames of each input")
    p.add_argument("--no-subpixel", action="store_true", help="no grey-weighted centroids")
    p.add_argument("--decoder", choices=("auto", "cpu", "nvdec"),
                   help="where video files are decoded, as for `markerscope analyze` (default auto)")
    p.add_argument("--option", type=_option, action="append", default=[], metavar="NAME=VALUE",
                   help="any other option of markerscope.analyze (VALUE as JSON, else text); repeatable")
    return p


def options(args: argparse.Namespace) -> Dict[str, Any]:
    chosen: Dict[str, Any] = {}
    for name in ("threshold", "connectivity", "backend", "algorithm", "max_frames", "decoder"):
        if getattr(args, name) is not None:
            chosen[name] = getattr(args, name)
    if args.invert:
        chosen["invert"] = True
    if args.no_subpixel:
        chosen["subpixel"] = False
    chosen.update(dict(args.option))
    return chosen


class ProgressLine:
    """One line on stderr, redrawn in place on a terminal (one line per input elsewhere)."""

    def __init__(self, stream: Any = None):
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()

    def __call__(self, p: Progress) -> None:
        line = (f"{p.finished}/{p.total} files, {p.failed} failed, {p.frames} frames, "
                f"{p.frames_per_second:.0f} frames/s, {p.seconds:.0f} s")
        self.stream.write(f"\r{line}\x1b[K" if self.tty else line + "\n")
        self.stream.flush()

    def done(self) -> None:
        if self.tty:
            self.stream.write("\n")


def main(argv: Optional[List[str]] = None) -> int:
    args = parser().parse_args(argv)
    line = ProgressLine()
    try:
        report = analyze_files(args.files, args.out, args.scheduler, overwrite=args.overwrite, workers=args.workers,
                               progress=line, **options(args))
    except (OSError, ValueError, TypeError) as e:
        line.done()
        print(f"markerscope-batch: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        line.done()
        print("markerscope-batch: interrupted; what was done is in the manifest, a new run goes on from there",
              file=sys.stderr)
        return 130
    line.done()
    print(f"{len(report.analysed)} analysed, {len(report.skipped)} already done, {len(report.failed)} failed; "
          f"{report.frames} frames in {report.seconds:.1f} s; manifest: {report.manifest}")
    for path, why in report.failed.items():
        print(f"failed: {path}: {why}", file=sys.stderr)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
