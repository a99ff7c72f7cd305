#!/usr/bin/env bash
set -u
# The final build: selftest, sanitizers, the rows of eight files and of frames through the host.
# DEVICE (default .device): as for rows-and-rates.sh.
cd "${DEVICE:-.device}"
for b in ms-new ms-base; do [ -f $b.xz ] && xz -dkf $b.xz && chmod +x $b; done
export LD_LIBRARY_PATH="$PWD/fflib" MARKERSCOPE_KERNEL_CACHE=/tmp/kc
A=clip1080.mp4; B=clip1080x2.mp4; E8="$A $B $A $B $A $B $A $B"
./ms-new selftest --quick 2>&1 | tail -4
timeout 150 compute-sanitizer --tool memcheck ./ms-new selftest --quick --only labeling --algorithms ha8,flsl_cdb 2>&1 | tail -2
timeout 150 compute-sanitizer --tool memcheck ./ms-new analyze $A --threshold otsu --decoder nvdec --backend cuda --max-frames 60 --out /tmp/m.csv 2>&1 | tail -3
timeout 150 compute-sanitizer --tool racecheck ./ms-new analyze $A --threshold otsu --decoder nvdec --backend cuda --max-frames 20 --out /tmp/r.csv 2>&1 | tail -3
./ms-new analyze $E8 --threshold fixed:127 --decoder nvdec --backend cuda --out /tmp/n8.csv 2>&1 | grep -E "analyzed|stayed" | grep -oE "[0-9.]+ frames/s|.*stayed.*"
./ms-base analyze $E8 --threshold fixed:127 --decoder nvdec --backend cuda --out /tmp/b8.csv 2>&1 | grep -oE "[0-9.]+ frames/s" | head -1
./ms-new analyze $E8 --threshold fixed:127 --decoder cpu --backend cuda --out /tmp/c8.csv 2>&1 | grep -oE "[0-9.]+ frames/s" | head -1
echo "eight files rows: new vs base $(cmp /tmp/n8.csv /tmp/b8.csv && echo same); vs the CPU decoder $(cmp /tmp/n8.csv /tmp/c8.csv && echo same); $(wc -l < /tmp/n8.csv) lines"
./ms-new analyze $A --threshold adaptive:31:5 --decoder nvdec --backend cuda --out /tmp/na.csv 2>&1 | grep -cE "stayed"
./ms-new analyze $A --threshold adaptive:31:5 --decoder cpu --backend cuda --out /tmp/ca.csv 2>&1 | tail -0
echo "adaptive (frames through the host): nvdec vs cpu decoder $(cmp /tmp/na.csv /tmp/ca.csv && echo same); $(wc -l < /tmp/na.csv) lines"
