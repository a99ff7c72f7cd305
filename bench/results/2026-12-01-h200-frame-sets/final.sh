#!/usr/bin/env bash
# The final build's proof: selftest, memcheck and racecheck on the frame-set path, rows with
# sets on and off, the small-frame rates once more.
set -u
cd "${DEVICE:-.device}"
[ -f ms.xz ] && xz -dkf ms.xz && chmod +x ms
export LD_LIBRARY_PATH="$PWD/fflib" MARKERSCOPE_KERNEL_CACHE=/tmp/kc
A=clip1080.mp4; B=clip1080x2.mp4; E8="$A $B $A $B $A $B $A $B"
V4="synthetic:view=0/4 synthetic:view=1/4 synthetic:view=2/4 synthetic:view=3/4"
S="synthetic:random"; E="$S $S $S $S $S $S $S $S"
echo "== selftest quick"; timeout 90 ./ms selftest --quick 2>&1 | tail -1
echo "== memcheck selftest ha8"; timeout 100 compute-sanitizer --tool memcheck ./ms selftest --quick --only labeling --algorithms ha8 2>&1 | tail -2
echo "== memcheck analyze 4 views, filter, sub-pixel"; timeout 60 compute-sanitizer --tool memcheck ./ms analyze $V4 --size 640x480 --min-area 3 --backend cuda --max-frames 30 --out /tmp/m.csv 2>&1 | tail -1
echo "== memcheck analyze 8 random, more rows than the early sums' room"; timeout 90 compute-sanitizer --tool memcheck ./ms analyze $E --size 640x480 --backend cuda --max-frames 6 --out /tmp/m2.csv 2>&1 | tail -1
echo "== memcheck analyze one NVDEC file (frames copied on the device)"; timeout 90 compute-sanitizer --tool memcheck ./ms analyze $A --decoder nvdec --backend cuda --max-frames 30 --out /tmp/m3.csv 2>&1 | grep -E "stayed|ERROR SUMMARY"
echo "== memcheck analyze one 1080p source (a large frame staged)"; timeout 90 compute-sanitizer --tool memcheck ./ms analyze $S --size 1920x1080 --backend cuda --max-frames 5 --out /tmp/m4.csv 2>&1 | tail -1
echo "== racecheck analyze 4 views"; timeout 60 compute-sanitizer --tool racecheck ./ms analyze $V4 --size 640x480 --backend cuda --max-frames 8 --out /tmp/r.csv 2>&1 | tail -1
same() { cmp -s /tmp/on.csv /tmp/off.csv && echo same || echo DIFFERENT; }
fps() { grep -E "^analyzed" | grep -oE "[0-9.]+ frames/s"; }
run() { local what=$1; shift
  local on=$(timeout 25 ./ms analyze "$@" --out /tmp/on.csv 2>&1 | fps); local off=$(MARKERSCOPE_FRAME_SETS=0 timeout 25 ./ms analyze "$@" --out /tmp/off.csv 2>&1 | fps)
  echo "$what: sets $on, alone $off; rows $(same), $(wc -l < /tmp/on.csv) lines"; }
run "views otsu" $V4 --size 640x480 --threshold otsu --backend cuda --max-frames 300
run "random min-area 30" $E --size 640x480 --min-area 30 --backend cuda --max-frames 200
run "random, every row" $E --size 640x480 --backend cuda --max-frames 40
run "eight files nvdec" $E8 --threshold fixed:127 --decoder nvdec --backend cuda
rate() { grep -oE "[0-9.]+ frames/s" | head -1; }
F="--min-area 100000000 --backend cuda --out /dev/null"
echo "640x480: eight sets $(timeout 30 ./ms analyze $E --size 640x480 --max-frames 8000 $F 2>&1 | rate) | eight alone $(MARKERSCOPE_FRAME_SETS=0 timeout 30 ./ms analyze $E --size 640x480 --max-frames 8000 $F 2>&1 | rate) | one 1280x1920 $(timeout 30 ./ms analyze $S --size 1280x1920 --max-frames 4000 $F 2>&1 | rate)"
echo "320x240: eight sets $(timeout 30 ./ms analyze $E --size 320x240 --max-frames 8000 $F 2>&1 | rate) | eight alone $(MARKERSCOPE_FRAME_SETS=0 timeout 30 ./ms analyze $E --size 320x240 --max-frames 8000 $F 2>&1 | rate) | one 640x960 $(timeout 30 ./ms analyze $S --size 640x960 --max-frames 8000 $F 2>&1 | rate)"
