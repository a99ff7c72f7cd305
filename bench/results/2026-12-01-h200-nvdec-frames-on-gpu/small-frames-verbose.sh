#!/usr/bin/env bash
# Where eight small sources' frames spend their time.
set -u
# DEVICE (default .device): as for rows-and-rates.sh.
cd "${DEVICE:-.device}"
[ -f ms-new.xz ] && xz -dkf ms-new.xz && chmod +x ms-new
export LD_LIBRARY_PATH="$PWD/fflib" MARKERSCOPE_KERNEL_CACHE=/tmp/kc
S="synthetic:random"; E="$S $S $S $S $S $S $S $S"
F="--size 640x480 --min-area 100000000 --backend cuda --out /dev/null"
echo "== one source, verbose"; ./ms-new analyze $S $F --max-frames 8000 --verbose 2>&1 | tail -25
echo "== eight sources, verbose"; ./ms-new analyze $E $F --max-frames 8000 --verbose 2>&1 | tail -40
echo "== eight sources, graphs off"; MARKERSCOPE_CUDA_GRAPHS=0 ./ms-new analyze $E $F --max-frames 8000 2>&1 | grep -oE "[0-9.]+ frames/s" | head -1
echo "== eight sources, again"; ./ms-new analyze $E $F --max-frames 8000 2>&1 | grep -oE "[0-9.]+ frames/s" | head -1
echo "== eight sources, perf of the process"; (command -v perf >/dev/null && perf stat -e task-clock,context-switches ./ms-new analyze $E $F --max-frames 8000 2>&1 | tail -12) || /usr/bin/time -v ./ms-new analyze $E $F --max-frames 8000 2>&1 | grep -E "frames/s|Elapsed|User time|System time|context switches" 
