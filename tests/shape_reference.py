#!/usr/bin/env python3
"""Shape-descriptor reference data for tests/opencv_compare.rs.

Usage: shape_reference.py OUT_DIR

Writes into OUT_DIR:
  shapes/*.png     binary test images (0/255): discs, ellipses and bars at several angles,
                   rectangles, rings, the papers' random images
  calibration.yaml a camera matrix and distortion coefficients written by cv2.FileStorage
  world.json       image points, their cv2.undistortPoints (P = camera matrix), world points, and
                   cv2.findHomography (method 0: least squares over all points) from the
                   undistorted points to the world points
  shapes.json      per image and connectivity (4, 8), one row per component in raster order of
                   its first pixel (skimage.measure.label): bbox, area, cv2.moments of its mask
                   (mu20, mu02, mu11), and regionprops' orientation, axis_major_length,
                   axis_minor_length, eccentricity, perimeter_crofton
"""

import json
import math
import os
import sys

import cv2
import numpy as np
from skimage.measure import label, regionprops

RNG = np.random.default_rng(20261124)


def ellipse(h, w, cx, cy, a, b, angle_deg):
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    t = math.radians(angle_deg)
    u = (xx - cx) * math.cos(t) + (yy - cy) * math.sin(t)
    v = -(xx - cx) * math.sin(t) + (yy - cy) * math.cos(t)
    return (u / a) ** 2 + (v / b) ** 2 <= 1.0


def images():
    out = {}
    h, w = 120, 160
    for i, angle in enumerate((0, 17, 45, 71, 90, 123, 160)):
        img = ellipse(h, w, 40.3, 60.7, 30, 9, angle)
        img |= ellipse(h, w, 118.6, 58.2, 25, 25, 0)  # a disc beside it
        img |= ellipse(h, w, 110.0, 20.0, 14, 2.5, -angle)  # a thin bar
        out[f"ellipses_{i}"] = img
    rect = np.zeros((40, 50), bool)
    rect[5:14, 3:40] = True
    rect[20:36, 10:12] = True
    rect[30, 30] = True
    out["rectangles"] = rect
    ring = ellipse(90, 90, 45, 45, 35, 35, 0) & ~ellipse(90, 90, 45, 45, 20, 20, 0)
    out["ring"] = ring
    for g, d in ((1, 0.4), (4, 0.5), (8, 0.6)):
        hh, ww = 97 // g + 1, 131 // g + 1
        blocks = RNG.random((hh, ww)) < d
        out[f"random_g{g}"] = np.kron(blocks, np.ones((g, g), bool))[:97, :131]
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    os.makedirs(os.path.join(root, "shapes"), exist_ok=True)
    result = []
    for name, img in images().items():
        path = os.path.join("shapes", name + ".png")
        cv2.imwrite(os.path.join(root, path), img.astype(np.uint8) * 255)
        for connectivity in (4, 8):
            labels = label(img, connectivity=1 if connectivity == 4 else 2)
            rows = []
            for p in regionprops(labels):
                mask = (labels == p.label).astype(np.uint8)
                m = cv2.moments(mask, binaryImage=True)
                top, left, bottom, right = p.bbox
                rows.append({
                    "left": int(left), "top": int(top),
                    "width": int(right - left), "height": int(bottom - top),
                    "area": int(p.area),
                    "mu20": m["mu20"], "mu02": m["mu02"], "mu11": m["mu11"],
                    "orientation": float(p.orientation),
                    "major": float(p.axis_major_length),
                    "minor": float(p.axis_minor_length),
                    "eccentricity": float(p.eccentricity),
                    "perimeter": float(p.perimeter_crofton),
                })
            result.append({"image": path, "connectivity": connectivity, "rows": rows})
    with open(os.path.join(root, "shapes.json"), "w") as f:
        json.dump(result, f)
    world(root)


def world(root):
    k = np.array([[812.5, 0.0, 641.2], [0.0, 805.0, 355.7], [0.0, 0.0, 1.0]])
    dist = np.array([[-0.27, 0.09, 0.0012, -0.0007, -0.011]])
    fs = cv2.FileStorage(os.path.join(root, "calibration.yaml"), cv2.FILE_STORAGE_WRITE)
    fs.write("camera_matrix", k)
    fs.write("distortion_coefficients", dist)
    fs.release()
    image = RNG.uniform([40, 30], [1240, 690], (30, 2))
    criteria = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 200, 1e-14)
    undistorted = cv2.undistortPoints(image.reshape(-1, 1, 2), k, dist, R=None, P=k, criteria=criteria)
    undistorted = undistorted.reshape(-1, 2)
    h_true = np.array([[0.21, 0.012, -30.0], [-0.008, 0.2, 12.0], [1.1e-4, -6e-5, 1.0]])
    proj = np.c_[undistorted, np.ones(len(undistorted))] @ h_true.T
    world_pts = proj[:, :2] / proj[:, 2:]
    world_pts = world_pts + RNG.normal(0, 0.01, world_pts.shape)  # measured, not exact
    h, _ = cv2.findHomography(undistorted, world_pts, 0)
    with open(os.path.join(root, "world.json"), "w") as f:
        json.dump({
            "image": image.tolist(),
            "undistorted": undistorted.tolist(),
            "world": world_pts.tolist(),
            "homography": h.tolist(),
        }, f)


if __name__ == "__main__":
    main()
