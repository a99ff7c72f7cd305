#!/usr/bin/env bash
# Small frames: eight sources against one frame of their pixels (the labeling path alone).
set -u
# DEVICE (default .device): as for rows-and-rates.sh.
cd "${DEVICE:-.device}"
[ -f ms-new.xz ] && xz -dkf ms-new.xz && chmod +x ms-new
export LD_LIBRARY_PATH="$PWD/fflib" MARKERSCOPE_KERNEL_CACHE=/tmp/kc
rate() { grep -oE "[0-9.]+ frames/s" | head -1; }
S="synthetic:random"
run() { local size=$1 n=$2 frames=$3; local srcs=""; for _ in $(seq $n); do srcs="$srcs $S"; done
  ./ms-new analyze $srcs --size $size --max-frames $frames --min-area 100000000 --backend cuda --out /dev/null 2>&1 | rate; }
for r in 1 2; do
  echo "round $r: 640x480 one $(run 640x480 1 8000) | four $(run 640x480 4 8000) | eight $(run 640x480 8 8000) | one 1280x1920 $(run 1280x1920 1 4000)"
  echo "round $r: 320x240 one $(run 320x240 1 8000) | eight $(run 320x240 8 8000) | one 640x960 $(run 640x960 1 8000)"
done
