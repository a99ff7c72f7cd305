#!/usr/bin/env bash
set -u
# DEVICE (default .device): as for rows-and-rates.sh.
cd "${DEVICE:-.device}"
for b in ms-new ms-base; do [ -f $b.xz ] && xz -dkf $b.xz && chmod +x $b; done
export LD_LIBRARY_PATH="$PWD/fflib" MARKERSCOPE_KERNEL_CACHE=/tmp/kc
for r in 1 2; do
for b in ms-new ms-base; do
  echo "== $b"
  ./$b bench --pipeline --scenes demo,clutter --sizes 1920x1080 --backend cuda --frames 1000 2>&1 | grep -E "^(demo|clutter) "
done
done
