#!/usr/bin/env python3
"""OpenCV reference data for tests/opencv_compare.rs.

Usage: opencv_reference.py OUT_DIR

Writes into OUT_DIR:
  images/*.png            grey test images (random, smooth blobs, low contrast, flat), the papers'
                          random images and hard CCL shapes (0/255)
  threshold-only/*.png    large grey images used for the threshold masks only
  masks/*.png             cv2.threshold / cv2.adaptiveThreshold results (0/255) for the grey images
  expected/C_T.csv        cv2.connectedComponentsWithStats over every image (frame = index in name
                          order), connectivity C in {4, 8}, threshold T in {fixed_127, otsu};
                          numbered in raster order of first pixel (ccltype CCL_WU)
  expected/C_T_default.csv  the same with OpenCV's default algorithm (its own numbering)
  manifest.json           what was written, for the Rust side
"""

import json
import os
import sys

import cv2
import numpy as np

RNG = np.random.default_rng(20240611)


def grey_images():
    """Grey images that stress thresholds: noise, blobs, ties, flat, awkward sizes."""
    imgs = {}
    for (w, h) in [(1, 1), (1, 37), (37, 1), (64, 48), (257, 129), (640, 480)]:
        imgs[f"grey_uniform_{w}x{h}"] = RNG.integers(0, 256, (h, w), dtype=np.uint8)
    # Dark blobs and bright blobs on a gradient with noise: what markers look like.
    h, w = 240, 320
    yy, xx = np.mgrid[0:h, 0:w]
    base = 60 + 0.3 * xx + 0.1 * yy
    for _ in range(25):
        cx, cy, r = RNG.integers(0, w), RNG.integers(0, h), RNG.integers(3, 25)
        amp = RNG.choice([-1, 1]) * RNG.integers(40, 120)
        base = base + amp * np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2.0 * r * r))
    base = base + RNG.normal(0, 6, (h, w))
    imgs["grey_blobs_320x240"] = np.clip(np.rint(base), 0, 255).astype(np.uint8)
    # Few levels, many ties in the histogram (Otsu tie-breaking) and in window means.
    imgs["grey_lowcontrast_99x77"] = RNG.integers(120, 124, (77, 99), dtype=np.uint8)
    imgs["grey_twolevel_50x30"] = np.where(RNG.random((30, 50)) < 0.5, 40, 200).astype(np.uint8)
    imgs["grey_flat_17x9"] = np.full((9, 17), 77, np.uint8)
    # More than 2^23 pixels, so single pixels weigh less than FLT_EPSILON in Otsu's class
    # weights (OpenCV skips such levels) and the histogram is counted in many chunks.
    # (Threshold tests only: labeling it adds nothing but time.)
    big = np.full((2900, 2900), 200, np.uint8)
    big[:1450] = 101
    big[0, 0], big[1, 0], big[2, 0], big[5, :2] = 3, 7, 250, 9
    imgs["big_otsueps_2900x2900"] = big
    # Full HD: exercises the parallel paths (histogram chunks, adaptive bands).
    hd = RNG.integers(0, 256, (1080, 1920), dtype=np.uint8)
    imgs["grey_uniform_1920x1080"] = cv2.GaussianBlur(hd, (0, 0), 3)
    return imgs


def papers_random(w, h, d, g, seed):
    """Cabaret/Hennequin/Lemaitre random image: g×g blocks, foreground with probability d."""
    bh, bw = -(-h // g), -(-w // g)
    blocks = np.random.RandomState(seed).random_sample((bh, bw)) < d
    return np.kron(blocks, np.ones((g, g), dtype=bool))[:h, :w]


def spiral(n):
    img = np.zeros((n, n), bool)
    lo, hi = 0, n - 1
    while lo <= hi:
        img[lo, lo:hi + 1] = True
        img[lo:hi + 1, hi] = True
        img[hi, lo:hi + 1] = True
        img[lo + 2:hi + 1, lo] = True
        if lo + 2 <= hi:
            img[lo + 2, lo + 1] = True
        lo += 2
        hi -= 2
    return img


def shapes():
    out = {}
    for (w, h) in [(64, 64), (65, 33), (1, 17), (17, 1)]:
        yy, xx = np.mgrid[0:h, 0:w]
        out[f"shape_checker_{w}x{h}"] = (xx + yy) % 2 == 0
        out[f"shape_hlines_{w}x{h}"] = yy % 2 == 0
        out[f"shape_stairs_{w}x{h}"] = (xx + yy) % 3 == 0
        out[f"shape_combs_{w}x{h}"] = (yy == h - 1) | (xx % 3 == 0)
        out[f"shape_frame_{w}x{h}"] = (xx == 0) | (yy == 0) | (xx == w - 1) | (yy == h - 1)
        out[f"shape_zigzag_{w}x{h}"] = (xx % 2 == 0) | ((xx % 4 == 1) & (yy == h - 1)) | ((xx % 4 == 3) & (yy == 0))
    out["shape_spiral_63x63"] = spiral(63)
    out["shape_spiral_64x64"] = spiral(64)
    out["shape_allzero_13x7"] = np.zeros((7, 13), bool)
    out["shape_allone_13x7"] = np.ones((7, 13), bool)
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    for sub in ("images", "masks", "expected"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)

    images = {}
    images.update(grey_images())
    random_specs = []
    for g in (1, 4, 16):
        for i, d in enumerate((0.1, 0.3, 0.5, 0.7, 0.9)):
            w, h, seed = 131, 97, 1000 + 10 * g + i
            name = f"rand_{w}x{h}_d{d}_g{g}"
            images[name] = papers_random(w, h, d, g, seed).astype(np.uint8) * 255
            random_specs.append({"image": name + ".png", "width": w, "height": h,
                                 "density": d, "granularity": g, "seed": seed})
    for name, mask in shapes().items():
        images[name] = mask.astype(np.uint8) * 255
    def image_path(name):
        folder = "threshold-only" if name.startswith("big_") else "images"
        return os.path.join(folder, name + ".png")

    os.makedirs(os.path.join(root, "threshold-only"), exist_ok=True)
    for name, img in images.items():
        cv2.imwrite(os.path.join(root, image_path(name)), img)

    # Threshold masks on the grey images.
    masks = []

    def add_mask(image, spec, invert, out):
        fname = f"{image}__{spec.replace(':', '_')}{'__inv' if invert else ''}.png"
        cv2.imwrite(os.path.join(root, "masks", fname), out)
        masks.append({"image": image_path(image), "spec": spec, "invert": invert, "mask": fname})

    adaptive = [(3, 0), (3, 2), (5, -3), (7, 5.5), (11, 2), (15, 0), (17, 2), (31, -1.5), (51, 7),
                (101, 3), (163, 2)]
    for name, img in images.items():
        if not name.startswith(("grey_", "big_")):
            continue
        big = img.size > 1_000_000
        for invert in (False, True):
            kind = cv2.THRESH_BINARY_INV if invert else cv2.THRESH_BINARY
            _, m = cv2.threshold(img, 127, 255, kind)
            add_mask(name, "fixed:127", invert, m)
            _, m = cv2.threshold(img, 0, 255, kind | cv2.THRESH_OTSU)
            add_mask(name, "otsu", invert, m)
            for (win, c) in (adaptive[::4] if big else adaptive):
                # Our invert is the exact complement; OpenCV's BINARY_INV equals it for integer C.
                if invert and c != int(c):
                    continue
                m = cv2.adaptiveThreshold(img, 255, cv2.ADAPTIVE_THRESH_MEAN_C, kind, win, c)
                add_mask(name, f"adaptive:{win}:{c:g}", invert, m)
        for t in (0, 254, 255):
            _, m = cv2.threshold(img, t, 255, cv2.THRESH_BINARY)
            add_mask(name, f"fixed:{t}", False, m)

    # Connected components over the whole folder, frames in name order.
    names = sorted(n + ".png" for n in images if not n.startswith("big_"))
    expected = []
    for conn in (4, 8):
        for tname, spec in (("fixed_127", "fixed:127"), ("otsu", "otsu")):
            for variant, cc in (("", cv2.CCL_WU), ("_default", cv2.CCL_DEFAULT)):
                path = os.path.join(root, "expected", f"{conn}_{tname}{variant}.csv")
                with open(path, "w") as f:
                    f.write("frame,label,left,top,width,height,area,centroid_x,centroid_y\n")
                    for frame, fname in enumerate(names):
                        img = cv2.imread(os.path.join(root, "images", fname), cv2.IMREAD_GRAYSCALE)
                        if spec == "otsu":
                            _, b = cv2.threshold(img, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU)
                        else:
                            _, b = cv2.threshold(img, 127, 255, cv2.THRESH_BINARY)
                        n, _, stats, cents = cv2.connectedComponentsWithStatsWithAlgorithm(
                            b, conn, cv2.CV_32S, cc)
                        for lab in range(1, n):
                            l, t, w, h, a = (int(v) for v in stats[lab])
                            cx, cy = (repr(float(v)) for v in cents[lab])
                            f.write(f"{frame},{lab},{l},{t},{w},{h},{a},{cx},{cy}\n")
                expected.append({"connectivity": conn, "threshold": spec,
                                 "opencv_numbering": variant == "_default",
                                 "csv": os.path.relpath(path, root)})

    manifest = {"opencv": cv2.__version__, "images": names, "random": random_specs,
                "masks": masks, "expected": expected}
    with open(os.path.join(root, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
