#!/usr/bin/env python3
"""Peers for `markerscope bench --peers`: CuPy (GPU) and OpenCV (CPU) on the very same images.

`markerscope bench --peers` runs this script with its own sizes, densities, granularities,
connectivities, modes, repeat and seed, reads the JSON it writes (same schema as bench's rows)
and merges it into its tables. It can also be run by hand:

    python3 bench/peers/peers.py --check
    python3 bench/peers/peers.py --sizes 2048x2048 --densities 0,0.5,1 --json /tmp/peers.json

Images (bit-identical to markerscope's, see src/random_image.rs and src/bench/mod.rs):
    image seed = (seed*1000003 + g*1009 + floor(d*1e6 + 0.5)) mod 2^32
    blocks     = np.random.RandomState(image seed).random_sample((ceil(h/g), ceil(w/g))) < d
    image      = blocks expanded by g in both directions, cropped to h x w, as uint8 0/1
RandomState with an integer seed is MT19937 seeded by init_genrand, and random_sample draws
genrand_res53 doubles, exactly like the Rust generator.

Peers and what is timed (best of --repeat after one untimed warm-up run):
- cupy (cuda): cupyx.scipy.ndimage.label(x, structure) with x already on the device; CUDA events
  on the null stream around the call (which includes CuPy's host-side set-up and the final read
  of the component count, as any caller pays). 4-conn: cross structure; 8-conn: 3x3 ones.
  CCL only: cupyx has no per-component statistics.
- opencv (cpu): ccl = cv2.connectedComponents, cca = cv2.connectedComponentsWithStats,
  ltype CV_32S, cv2.setNumThreads(os.cpu_count()); wall time (time.perf_counter).
Latency mode (--latency): per-frame wall time, frames cycling over the images of a size in
(g, d) order after --warmup frames: opencv = connectedComponentsWithStats on the host array;
cupy = upload + label + download of the labels (no statistics). With --masks FILE and
--mask-frames N, the frames are instead the N masks of each size that FILE holds, sizes in
--sizes order (row-major uint8 0/1; bench writes the demo scene's frames there for
`--latency-frames demo`).
Pipeline mode (--pipeline-frames FILE, --pipeline-count N, --pipeline-scene NAME, one size in
--sizes): FILE holds the N grey frames of one scene of `bench --pipeline` (row-major uint8), or
with --threshold mask markerscope's 0/1 masks of them. Frame i of the run is frame i mod N;
--warmup untimed frames, then --frames timed ones, each one call after the other with its
per-frame wall time:
- opencv: cv2.threshold (--threshold otsu: THRESH_BINARY | THRESH_OTSU, the level markerscope's
  otsu picks; fixed:T: THRESH_BINARY at T; mask: none) + connectedComponentsWithStats;
- cupy: host-to-device copy of the grey frame + threshold on the GPU (otsu: a bincount histogram
  there, the level on the host) + cupyx.scipy.ndimage.label + a bincount of the labels (the
  areas) copied back.
Every timed frame's component count is reported, so bench checks them against its own.
With --markers DICT (the `markers` scenes), OpenCV's peer is instead
cv2.aruco.ArucoDetector(DICT, cornerRefinementMethod CORNER_REFINE_SUBPIX).detectMarkers on each
grey frame, and every timed frame's IDs and corners are reported (bench scores them against the
scene's truth); CuPy has no marker detector and sits the scene out.
With --particles SEARCH_RANGE (the `particles` scenes), the peer is trackpy instead:
trackpy.locate(frame, diameter=--particle-diameter, minmass=--particle-minmass, separation=diameter - 2:
touching spots are told apart as markerscope cannot) on each grey frame (numba's engine when installed),
then trackpy.link(features, SEARCH_RANGE, memory=0, adaptive_stop=0.5) over the timed frames (at
most --particle-frames of them: trackpy takes seconds a frame there); a frame's time is its locate
call plus its share of the link call. Every timed frame's positions and particle numbers are
reported (bench scores them against the scene's truth, as it scores its own tracks). Without
trackpy (pip install trackpy) the peer is listed as unavailable.
"""

import argparse
import json
import math
import os
import platform
import sys
import time

SCHEMA = "markerscope-bench/1"


def image_seed(seed, density, granularity):
    """Mirror of markerscope::frame::random_image::image_seed."""
    micro = math.floor(density * 1e6 + 0.5)
    return (seed * 1000003 + granularity * 1009 + micro) % (1 << 32)


def make_image(np, width, height, density, granularity, seed):
    """Mirror of markerscope::random_image::generate (seed = the image's own seed)."""
    g = granularity
    bh, bw = -(-height // g), -(-width // g)
    u = np.random.RandomState(seed).random_sample((bh, bw))
    blocks = (u < density).astype(np.uint8)
    if g > 1:
        blocks = np.repeat(np.repeat(blocks, g, axis=0), g, axis=1)
    return np.ascontiguousarray(blocks[:height, :width])


def otsu_level(hist):
    """Mirror of markerscope's otsu_from_histogram (OpenCV's getThreshVal_Otsu, step for step)."""
    total = int(sum(hist))
    if total == 0:
        return 0
    scale = 1.0 / total
    mu = sum(i * float(n) for i, n in enumerate(hist)) * scale
    eps = 1.1920928955078125e-07  # FLT_EPSILON
    mu1 = q1 = 0.0
    max_sigma, max_val = 0.0, 0
    for i, n in enumerate(hist):
        p_i = float(n) * scale
        mu1 *= q1
        q1 += p_i
        q2 = 1.0 - q1
        if min(q1, q2) < eps or max(q1, q2) > 1.0 - eps:
            continue
        mu1 = (mu1 + i * p_i) / q1
        mu2 = (mu - q1 * mu1) / q2
        sigma = q1 * q2 * (mu1 - mu2) * (mu1 - mu2)
        if sigma > max_sigma:
            max_sigma, max_val = sigma, i
    return max_val


def fixed_level(threshold):
    """T of 'fixed:T'."""
    return int(threshold.split(":", 1)[1])


def log(msg):
    print(f"peers: {msg}", file=sys.stderr, flush=True)


def check():
    """What this Python can run, as bench's PeerCheck JSON. numpy is required."""
    out = {"python": platform.python_version(), "numpy": None, "opencv": "", "cupy": "", "gpu": None}
    try:
        import numpy

        out["numpy"] = numpy.__version__
    except Exception as e:  # noqa: BLE001
        out["numpy"] = None
        out["numpy_error"] = f"{type(e).__name__}: {e}"
    try:
        import cv2

        out["opencv"] = cv2.__version__
    except Exception as e:  # noqa: BLE001
        out["opencv"] = f"unavailable: {type(e).__name__}: {e}"
    try:
        import cupy
        import cupyx.scipy.ndimage  # noqa: F401

        n = cupy.cuda.runtime.getDeviceCount()
        if n < 1:
            raise RuntimeError("no CUDA device")
        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"]
        out["gpu"] = name.decode() if isinstance(name, bytes) else str(name)
        out["cupy"] = cupy.__version__
    except Exception as e:  # noqa: BLE001
        out["cupy"] = f"unavailable: {type(e).__name__}: {e}".strip()
    return out


def parse_list(s, conv):
    return [conv(x.strip()) for x in s.split(",") if x.strip()]


def parse_size(s):
    w, h = s.lower().replace("×", "x").split("x")
    return int(w), int(h)


class OpenCV:
    name, backend = "opencv", "cpu"

    def __init__(self):
        import cv2

        self.cv2 = cv2
        cv2.setNumThreads(os.cpu_count() or 1)

    def fn(self, img, conn, mode):
        cv2 = self.cv2
        if mode == "ccl":
            return lambda: cv2.connectedComponents(img, connectivity=conn, ltype=cv2.CV_32S)
        return lambda: cv2.connectedComponentsWithStats(img, connectivity=conn, ltype=cv2.CV_32S)

    def step(self, mode):
        return "connectedComponents" if mode == "ccl" else "connectedComponentsWithStats"

    def prepare(self, img):
        return img

    def time(self, prepared, conn, mode, repeat):
        fn = self.fn(prepared, conn, mode)
        count = int(fn()[0]) - 1  # warm-up; OpenCV counts the background
        best = math.inf
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            best = min(best, (time.perf_counter() - t0) * 1e3)
        return best, count

    def frame(self, img, conn):
        t0 = time.perf_counter()
        self.cv2.connectedComponentsWithStats(img, connectivity=conn, ltype=self.cv2.CV_32S)
        return (time.perf_counter() - t0) * 1e3

    what = "connectedComponentsWithStats (host memory)"

    def pipeline_what(self, threshold):
        if threshold == "mask":
            return "connectedComponentsWithStats on markerscope's masks"
        return f"cv2.threshold ({threshold}) + connectedComponentsWithStats"

    def pipeline_frame(self, grey, threshold, conn):
        """One frame of --pipeline-frames: (ms, components, [(step, ms)])."""
        cv2 = self.cv2
        t0 = time.perf_counter()
        if threshold == "otsu":
            _, mask = cv2.threshold(grey, 0, 1, cv2.THRESH_BINARY | cv2.THRESH_OTSU)
        elif threshold.startswith("fixed:"):
            _, mask = cv2.threshold(grey, fixed_level(threshold), 1, cv2.THRESH_BINARY)
        else:
            mask = grey
        t1 = time.perf_counter()
        n = cv2.connectedComponentsWithStats(mask, connectivity=conn, ltype=cv2.CV_32S)[0]
        t2 = time.perf_counter()
        steps = [("label", (t2 - t1) * 1e3)]
        if threshold != "mask":
            steps.insert(0, ("threshold", (t1 - t0) * 1e3))
        return (t2 - t0) * 1e3, int(n) - 1, steps


class CuPy:
    name, backend = "cupy", "cuda"

    def __init__(self):
        import cupy
        import cupyx.scipy.ndimage as ndi
        import numpy as np

        self.cp, self.ndi, self.np = cupy, ndi, np
        self.structures = {
            4: np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]], dtype=np.int32),
            8: np.ones((3, 3), dtype=np.int32),
        }

    def step(self, mode):
        return "label"

    def prepare(self, img):
        x = self.cp.asarray(img)
        self.cp.cuda.Stream.null.synchronize()
        return x

    def label(self, x, conn):
        r = self.ndi.label(x, self.structures[conn])
        return r if isinstance(r, tuple) else (None, r)

    def time(self, x, conn, mode, repeat):
        cp = self.cp
        _, n = self.label(x, conn)  # warm-up (kernel compilation, memory pool)
        count = int(n)
        start, end = cp.cuda.Event(), cp.cuda.Event()
        best = math.inf
        for _ in range(repeat):
            cp.cuda.Stream.null.synchronize()
            start.record()
            self.label(x, conn)
            end.record()
            end.synchronize()
            best = min(best, cp.cuda.get_elapsed_time(start, end))
        return best, count

    def frame(self, img, conn):
        t0 = time.perf_counter()
        x = self.cp.asarray(img)
        labels, _ = self.label(x, conn)
        labels.get()
        return (time.perf_counter() - t0) * 1e3

    what = "upload + label + download labels (no statistics)"

    def pipeline_what(self, threshold):
        level = "markerscope's masks" if threshold == "mask" else f"threshold ({threshold}) on the GPU"
        return f"upload grey + {level} + label + bincount areas + download areas"

    def pipeline_frame(self, grey, threshold, conn):
        """One frame of --pipeline-frames: (ms, components, [])."""
        cp = self.cp
        t0 = time.perf_counter()
        x = cp.asarray(grey)
        if threshold == "otsu":
            mask = x > otsu_level(cp.bincount(x.ravel(), minlength=256).get())
        elif threshold.startswith("fixed:"):
            mask = x > fixed_level(threshold)
        else:
            mask = x != 0
        labels, n = self.label(mask, conn)
        cp.bincount(labels.ravel()).get()
        return (time.perf_counter() - t0) * 1e3, int(n), []

    def release(self):
        self.cp.get_default_memory_pool().free_all_blocks()


class Aruco:
    """OpenCV's marker detector with sub-pixel corners, for the `markers` scenes."""

    name, backend = "opencv-aruco", "cpu"

    def __init__(self, dictionary):
        import cv2

        aruco = cv2.aruco
        params = aruco.DetectorParameters()
        params.cornerRefinementMethod = aruco.CORNER_REFINE_SUBPIX
        self.dictionary = dictionary
        self.detector = aruco.ArucoDetector(aruco.getPredefinedDictionary(getattr(aruco, dictionary)), params)

    def pipeline_what(self, threshold):
        return f"ArucoDetector.detectMarkers ({self.dictionary}, CORNER_REFINE_SUBPIX)"

    def markers_frame(self, grey):
        """One frame: (ms, {"ids": [...], "corners": [[[x, y]] * 4, ...]})."""
        t0 = time.perf_counter()
        corners, ids, _ = self.detector.detectMarkers(grey)
        ms = (time.perf_counter() - t0) * 1e3
        ids = [] if ids is None else [int(i) for i in ids.flatten()]
        return ms, {"ids": ids, "corners": [c.reshape(4, 2).tolist() for c in corners]}


class Trackpy:
    """trackpy's locate and link, for the `particles` scenes."""

    name = "trackpy"
    backend = "cpu"

    def __init__(self, search_range, diameter, minmass):
        import pandas
        import trackpy

        trackpy.quiet()
        self.tp, self.pandas = trackpy, pandas
        self.search_range, self.diameter, self.minmass = search_range, diameter, minmass
        # trackpy's default (diameter + 1) drops one of every two spots closer than that.
        self.separation = max(1, diameter - 2)
        try:
            import numba  # noqa: F401

            self.engine = "numba"
        except ImportError:
            self.engine = "python"

    def pipeline_what(self):
        return (f"trackpy.locate (diameter {self.diameter}, separation {self.separation}, minmass {self.minmass}, "
                f"{self.engine} engine) + trackpy.link (search range {self.search_range:.2f} px, memory 0, "
                f"adaptive_stop 0.5)")

    def locate(self, grey):
        return self.tp.locate(grey, self.diameter, minmass=self.minmass, separation=self.separation,
                              engine=self.engine)

    def run(self, images, first, count):
        """Locates frames first .. first + count (cycling over images) and links them: the
        per-frame ms and, per frame, the positions and particle numbers."""
        located, locate_ms = [], []
        for k in range(count):
            t0 = time.perf_counter()
            f = self.locate(images[(first + k) % len(images)])
            locate_ms.append((time.perf_counter() - t0) * 1e3)
            f["frame"] = first + k
            located.append(f)
        features = self.pandas.concat(located, ignore_index=True)
        t0 = time.perf_counter()
        linked = self.tp.link(features, self.search_range, memory=0, adaptive_stop=0.5)
        link_ms = (time.perf_counter() - t0) * 1e3
        frame_ms = [ms + link_ms / count for ms in locate_ms]
        tracks = []
        by_frame = {frame: rows for frame, rows in linked.groupby("frame")}
        for k in range(count):
            rows = by_frame.get(first + k)
            if rows is None:
                tracks.append({"x": [], "y": [], "particle": []})
                continue
            tracks.append({
                "x": [round(v, 4) for v in rows["x"].tolist()],
                "y": [round(v, 4) for v in rows["y"].tolist()],
                "particle": [int(v) for v in rows["particle"].tolist()],
            })
        steps = [{"step": "locate", "ms": sum(locate_ms) / count}, {"step": "link", "ms": link_ms / count}]
        return frame_ms, tracks, steps


def scene_row(peer, scene, conn, w, h, prepared):
    """The fields of a --pipeline row that say which peer ran on which frames."""
    return {"scene": scene, "algorithm": peer.name, "backend": peer.backend, "source": "peer", "connectivity": conn,
            "width": w, "height": h, "prepared_frames": prepared}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="print what can run, as JSON, and exit")
    ap.add_argument(
        "--dump-image",
        nargs=6,
        action="append",
        metavar=("W", "H", "D", "G", "SEED", "OUT"),
        help="write the raw bytes (row-major uint8 0/1) of bench's image for --seed SEED (repeatable)",
    )
    ap.add_argument("--sizes", default="2048x2048")
    ap.add_argument("--densities", default="0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1")
    ap.add_argument("--granularities", default="1,4,16")
    ap.add_argument("--connectivity", default="4,8")
    ap.add_argument("--modes", default="ccl,cca")
    ap.add_argument("--backends", default="cpu,cuda")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", required=False)
    ap.add_argument("--latency", action="store_true")
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--masks", help="latency frames: raw uint8 0/1 masks, --mask-frames per size")
    ap.add_argument("--mask-frames", type=int, default=0)
    ap.add_argument("--pipeline-frames", help="bench --pipeline: raw frames of one scene (see above)")
    ap.add_argument("--pipeline-count", type=int, default=0, help="frames in --pipeline-frames")
    ap.add_argument("--pipeline-scene", default="", help="the scene's name, for the rows")
    ap.add_argument("--threshold", default="otsu", help="otsu, fixed:T or mask (--pipeline-frames)")
    ap.add_argument("--markers", help="--pipeline-frames: find the markers of this OpenCV dictionary")
    ap.add_argument("--particles", type=float, help="--pipeline-frames: locate and link particles with trackpy, "
                    "at this search range (px)")
    ap.add_argument("--particle-diameter", type=int, default=5, help="--particles: trackpy.locate's diameter (odd)")
    ap.add_argument("--particle-minmass", type=float, default=60.0, help="--particles: trackpy.locate's minmass")
    ap.add_argument("--particle-frames", type=int, default=20, help="--particles: the most frames trackpy times")
    a = ap.parse_args(argv)
    if a.masks and a.mask_frames < 1:
        ap.error("--masks needs --mask-frames N (N >= 1)")
    if a.pipeline_frames:
        if a.pipeline_count < 1:
            ap.error("--pipeline-frames needs --pipeline-count N (N >= 1)")
        if a.threshold not in ("otsu", "mask") and not a.threshold.startswith("fixed:"):
            ap.error(f"--threshold {a.threshold}: expected otsu, fixed:T or mask")
        if a.threshold.startswith("fixed:"):
            try:
                if not 0 <= fixed_level(a.threshold) <= 255:
                    raise ValueError
            except ValueError:
                ap.error(f"--threshold {a.threshold}: T must be an integer in 0..=255")

    if a.check:
        c = check()
        print(json.dumps(c))
        if c["numpy"] is None:
            print(f"peers.py needs numpy: {c.get('numpy_error')}; install it (pip install numpy)", file=sys.stderr)
            return 3
        return 0

    try:
        import numpy as np
    except ImportError as e:
        print(f"peers.py needs numpy ({e}); install it (pip install numpy)", file=sys.stderr)
        return 3

    if a.dump_image:
        for w, h, d, g, seed, out in a.dump_image:
            img = make_image(np, int(w), int(h), float(d), int(g), image_seed(int(seed), float(d), int(g)))
            with open(out, "wb") as f:
                f.write(img.tobytes())
        return 0

    if not a.json:
        ap.error("--json is required")
    sizes = parse_list(a.sizes, parse_size)
    densities = parse_list(a.densities, float)
    grans = parse_list(a.granularities, int)
    conns = parse_list(a.connectivity, int)
    modes = parse_list(a.modes, str)
    backends = parse_list(a.backends, str)
    c = check()
    unavailable, peers = [], []
    for cls, key, backend in ((OpenCV, "opencv", "cpu"), (CuPy, "cupy", "cuda")):
        if backend not in backends:
            continue
        if c[key].startswith("unavailable"):
            unavailable.append({"algorithm": key, "backend": backend, "mode": None, "reason": c[key]})
            continue
        try:
            peers.append(cls())
        except Exception as e:  # noqa: BLE001
            unavailable.append(
                {"algorithm": key, "backend": backend, "mode": None, "reason": f"unavailable: {type(e).__name__}: {e}"}
            )
    if a.markers:
        if not a.pipeline_frames:
            ap.error("--markers goes with --pipeline-frames")
        for p in peers:
            if p.name == "cupy":
                unavailable.append(
                    {"algorithm": "cupy", "backend": "cuda", "mode": None, "reason": "not run: CuPy has no marker detector"}
                )
        peers = []
        if "cpu" in backends and not c["opencv"].startswith("unavailable"):
            try:
                peers.append(Aruco(a.markers))
            except Exception as e:  # noqa: BLE001
                unavailable.append(
                    {"algorithm": "opencv-aruco", "backend": "cpu", "mode": None, "reason": f"unavailable: {type(e).__name__}: {e}"}
                )
    if a.particles is not None:
        if not a.pipeline_frames:
            ap.error("--particles goes with --pipeline-frames")
        if not (a.particles > 0 and a.particle_diameter > 0 and a.particle_diameter % 2 == 1 and a.particle_frames > 0):
            ap.error("--particles: a positive search range, an odd --particle-diameter and --particle-frames >= 1")
        for p in peers:
            unavailable.append({"algorithm": p.name, "backend": p.backend, "mode": None,
                                "reason": "not run: it locates and links no particles"})
        peers = []
        if "cpu" in backends:
            try:
                peers.append(Trackpy(a.particles, a.particle_diameter, a.particle_minmass))
            except Exception as e:  # noqa: BLE001
                unavailable.append({"algorithm": "trackpy", "backend": "cpu", "mode": None,
                                    "reason": f"unavailable: {type(e).__name__}: {e} (pip install trackpy)"})
    if any(p.name == "cupy" for p in peers) and "cca" in modes and not (a.latency or a.pipeline_frames):
        unavailable.append(
            {
                "algorithm": "cupy",
                "backend": "cuda",
                "mode": "cca",
                "reason": "not measured: cupyx.scipy.ndimage.label gives labels only, no per-component statistics",
            }
        )

    throughput, latency, pipeline = [], [], []
    if a.pipeline_frames:
        if len(sizes) != 1:
            ap.error("--pipeline-frames takes one size in --sizes")
        w, h = sizes[0]
        images = []
        with open(a.pipeline_frames, "rb") as f:
            for _ in range(a.pipeline_count):
                raw = f.read(w * h)
                if len(raw) != w * h:
                    sys.exit(f"peers.py: {a.pipeline_frames} ends before {a.pipeline_count} {w}x{h} frames")
                images.append(np.frombuffer(raw, dtype=np.uint8).reshape(h, w).copy())
        for p in peers if a.markers else []:
            log(f"{p.name} pipeline {a.pipeline_scene} {w}x{h}")
            for i in range(a.warmup):
                p.markers_frame(images[i % len(images)])
            frame_ms, found = [], []
            for i in range(a.warmup, a.warmup + a.frames):
                ms, markers = p.markers_frame(images[i % len(images)])
                frame_ms.append(ms)
                found.append(markers)
            pipeline.append(dict(
                scene_row(p, a.pipeline_scene, conns[0], w, h, len(images)),
                threshold="ArucoDetector's own",
                what=p.pipeline_what(a.threshold),
                warmup=a.warmup,
                frame_ms=frame_ms,
                frame_markers=found,
                steps=[{"step": "markers", "ms": sum(frame_ms) / max(1, a.frames)}],
            ))
        for p in peers if a.particles is not None else []:
            count = min(a.frames, a.particle_frames)
            log(f"{p.name} pipeline {a.pipeline_scene} {w}x{h}: {count} frames")
            for i in range(min(a.warmup, 1)):
                p.locate(images[i % len(images)])
            frame_ms, tracks, steps = p.run(images, a.warmup, count)
            pipeline.append(dict(
                scene_row(p, a.pipeline_scene, conns[0], w, h, len(images)),
                threshold="trackpy's own",
                what=p.pipeline_what(),
                warmup=min(a.warmup, 1),
                frame_ms=frame_ms,
                frame_tracks=tracks,
                steps=steps,
            ))
        for conn in conns if not (a.markers or a.particles is not None) else []:
            for p in peers:
                log(f"{p.name} pipeline {a.pipeline_scene} {w}x{h} {conn}-conn")
                for i in range(a.warmup):
                    p.pipeline_frame(images[i % len(images)], a.threshold, conn)
                frame_ms, counts, step_sums = [], [], {}
                for i in range(a.warmup, a.warmup + a.frames):
                    ms, n, steps = p.pipeline_frame(images[i % len(images)], a.threshold, conn)
                    frame_ms.append(ms)
                    counts.append(n)
                    for name, t in steps:
                        step_sums[name] = step_sums.get(name, 0.0) + t
                pipeline.append(
                    {
                        "scene": a.pipeline_scene,
                        "algorithm": p.name,
                        "backend": p.backend,
                        "source": "peer",
                        "connectivity": conn,
                        "width": w,
                        "height": h,
                        "threshold": a.threshold,
                        "what": p.pipeline_what(a.threshold),
                        "warmup": a.warmup,
                        "prepared_frames": len(images),
                        "frame_ms": frame_ms,
                        "frame_components": counts,
                        "steps": [{"step": k, "ms": v / max(1, a.frames)} for k, v in step_sums.items()],
                    }
                )
        for p in peers:
            if hasattr(p, "release"):
                p.release()
    elif a.latency:
        masks = open(a.masks, "rb") if a.masks else None
        for w, h in sizes:
            if masks:
                images = []
                for _ in range(a.mask_frames):
                    raw = masks.read(w * h)
                    if len(raw) != w * h:
                        sys.exit(f"peers.py: {a.masks} ends before the {w}x{h} masks")
                    images.append(np.frombuffer(raw, dtype=np.uint8).reshape(h, w).copy())
            else:
                images = [
                    make_image(np, w, h, d, g, image_seed(a.seed, d, g)) for g in grans for d in densities
                ]
            for conn in conns:
                for p in peers:
                    log(f"{p.name} latency {w}x{h} {conn}-conn")
                    for i in range(a.warmup):
                        p.frame(images[i % len(images)], conn)
                    frame_ms = [p.frame(images[i % len(images)], conn) for i in range(a.frames)]
                    latency.append(
                        {
                            "algorithm": p.name,
                            "backend": p.backend,
                            "source": "peer",
                            "connectivity": conn,
                            "width": w,
                            "height": h,
                            "what": p.what,
                            "warmup": a.warmup,
                            "images": len(images),
                            "frame_ms": frame_ms,
                        }
                    )
            for p in peers:
                if hasattr(p, "release"):
                    p.release()
    else:
        rows = {}
        for w, h in sizes:
            for g in grans:
                log(f"{w}x{h} g={g}")
                for d in densities:
                    seed = image_seed(a.seed, d, g)
                    img = make_image(np, w, h, d, g, seed)
                    for p in peers:
                        x = p.prepare(img)
                        for conn in conns:
                            for mode in modes:
                                if p.name == "cupy" and mode != "ccl":
                                    continue
                                best, count = p.time(x, conn, mode, a.repeat)
                                key = (p.name, conn, mode, w, h, g)
                                row = rows.setdefault(
                                    key,
                                    {
                                        "algorithm": p.name,
                                        "backend": p.backend,
                                        "source": "peer",
                                        "connectivity": conn,
                                        "mode": mode,
                                        "width": w,
                                        "height": h,
                                        "granularity": g,
                                        "repeat": a.repeat,
                                        "per_density": [],
                                    },
                                )
                                row["per_density"].append(
                                    {
                                        "density": d,
                                        "seed": seed,
                                        "best_ms": best,
                                        "count": count,
                                        "steps": [{"step": p.step(mode), "ms": best}],
                                    }
                                )
                        del x
                for p in peers:
                    if hasattr(p, "release"):
                        p.release()
        throughput = list(rows.values())

    c["opencv_threads"] = os.cpu_count()
    with open(a.json, "w") as f:
        json.dump(
            {
                "schema": SCHEMA,
                "check": c,
                "throughput": throughput,
                "latency": latency,
                "pipeline": pipeline,
                "unavailable": unavailable,
            },
            f,
            indent=1,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
