"""Writes the marker tables of OpenCV's predefined ArUco/AprilTag dictionaries as text.

Usage: python3 export.py [FOLDER]   (default: the folder of this script)

One file per family of markers. OpenCV's DICT_NxN_50/100/250/1000 are the first 50/100/250/1000
markers of one table, so each family is written once, with its largest count; the catalogue in
src/fiducial/dictionary.rs says how many markers and correction bits each dictionary takes.

File format: '#' comment lines, then `markersize N`, then one marker per line as a hexadecimal
number of N*N bits: the marker's cells row by row from the top-left, 1 = white, the first
cell the most significant bit (OpenCV's rotation-0 bit order).
"""

import os
import sys

import cv2
import numpy as np

FAMILIES = {
    "aruco_4x4": ["DICT_4X4_50", "DICT_4X4_100", "DICT_4X4_250", "DICT_4X4_1000"],
    "aruco_5x5": ["DICT_5X5_50", "DICT_5X5_100", "DICT_5X5_250", "DICT_5X5_1000"],
    "aruco_6x6": ["DICT_6X6_50", "DICT_6X6_100", "DICT_6X6_250", "DICT_6X6_1000"],
    "aruco_7x7": ["DICT_7X7_50", "DICT_7X7_100", "DICT_7X7_250", "DICT_7X7_1000"],
    "aruco_original": ["DICT_ARUCO_ORIGINAL"],
    "apriltag_16h5": ["DICT_APRILTAG_16h5"],
    "apriltag_25h9": ["DICT_APRILTAG_25h9"],
    "apriltag_36h10": ["DICT_APRILTAG_36h10"],
    "apriltag_36h11": ["DICT_APRILTAG_36h11"],
    "aruco_mip_36h12": ["DICT_ARUCO_MIP_36h12"],
}


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for family, names in FAMILIES.items():
        dicts = [cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, n)) for n in names]
        largest = dicts[-1]
        for name, d in zip(names, dicts):
            n = d.bytesList.shape[0]
            assert d.markerSize == largest.markerSize, name
            assert np.array_equal(d.bytesList, largest.bytesList[:n]), f"{name} is not a prefix"
        size = largest.markerSize
        digits = (size * size + 3) // 4
        lines = [
            f"# {family}: {', '.join(names)} (OpenCV {cv2.__version__}, cv2.aruco), written by export.py",
            f"markersize {size}",
        ]
        for i in range(largest.bytesList.shape[0]):
            bits = cv2.aruco.Dictionary.getBitsFromByteList(largest.bytesList[i : i + 1], size)
            code = 0
            for b in bits.flatten():
                code = (code << 1) | int(b)
            lines.append(f"{code:0{digits}x}")
        with open(os.path.join(folder, family + ".txt"), "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
