#!/usr/bin/env bash
# Frame sets (several sources labeled together, two sets in flight): selftest, sanitizers,
# each run's rows with sets on and off (MARKERSCOPE_FRAME_SETS=0), and the small-frame rates.
# DEVICE (default .device): a folder with the binary as ms.xz (or ms), the FFmpeg libraries of
# bench/ffmpeg_nvdec.sh in fflib/, and the two clips of the results README.
set -u
cd "${DEVICE:-.device}"
[ -f ms.xz ] && xz -dkf ms.xz && chmod +x ms
export LD_LIBRARY_PATH="$PWD/fflib" MARKERSCOPE_KERNEL_CACHE=/tmp/kc
A=clip1080.mp4; B=clip1080x2.mp4; E8="$A $B $A $B $A $B $A $B"
V4="synthetic:view=0/4 synthetic:view=1/4 synthetic:view=2/4 synthetic:view=3/4"
S="synthetic:random"; E="$S $S $S $S $S $S $S $S"
echo "== selftest quick"; timeout 90 ./ms selftest --quick 2>&1 | tail -1
echo "== memcheck selftest ha8,ha_otf"; timeout 100 compute-sanitizer --tool memcheck ./ms selftest --quick --only labeling --algorithms ha8 2>&1 | tail -2
echo "== memcheck analyze 4 views, filter"; timeout 60 compute-sanitizer --tool memcheck ./ms analyze $V4 --size 640x480 --min-area 3 --backend cuda --max-frames 20 --out /tmp/m.csv 2>&1 | tail -1
echo "== racecheck analyze 4 views"; timeout 60 compute-sanitizer --tool racecheck ./ms analyze $V4 --size 640x480 --backend cuda --max-frames 8 --out /tmp/r.csv 2>&1 | tail -1
echo "== rows, sets on and off"
same() { cmp -s /tmp/on.csv /tmp/off.csv && echo same || echo DIFFERENT; }
fps() { grep -E "^analyzed" | grep -oE "[0-9.]+ frames/s"; }
run() { local what=$1; shift
  local on=$(timeout 25 ./ms analyze "$@" --out /tmp/on.csv 2>&1 | fps); local off=$(MARKERSCOPE_FRAME_SETS=0 timeout 25 ./ms analyze "$@" --out /tmp/off.csv 2>&1 | fps)
  echo "$what: sets $on, alone $off; rows $(same), $(wc -l < /tmp/on.csv) lines"; }
run "views otsu" $V4 --size 640x480 --threshold otsu --backend cuda --max-frames 300
run "views otsu min-area 4" $V4 --size 640x480 --threshold otsu --min-area 4 --backend cuda --max-frames 300
run "views background aspect" $V4 --size 640x480 --max-aspect 2 --min-area 2 --backend cuda --max-frames 300
run "views fixed inverted" $V4 --size 640x480 --threshold fixed:100 --invert --backend cuda --max-frames 300
run "random min-area 30" $E --size 640x480 --min-area 30 --backend cuda --max-frames 200
run "a file and two views (two sizes)" $A synthetic:view=0/2 synthetic:view=1/2 --size 640x480 --backend cuda --max-frames 120
run "particles 3x720p" synthetic:particles:3000 synthetic:particles:3000 synthetic:particles:3000 --size 1280x720 --backend cuda --max-frames 100
run "eight files nvdec" $E8 --threshold fixed:127 --decoder nvdec --backend cuda
run "eight files nvdec background" $E8 --decoder nvdec --backend cuda
run "four files cpu decoder" $A $B $A $B --decoder cpu --backend cuda
echo "== a file and two views"; timeout 60 ./ms analyze $A synthetic:view=0/2 synthetic:view=1/2 --size 640x480 --max-frames 120 --backend cuda --out /tmp/x.csv 2>&1 | grep -E "^source|frame set"
echo "== a live source that stalls"; timeout 60 ./ms analyze "synthetic:view=0/2?live,fps=60" "synthetic:view=1/2?live,fps=60,stall=30-60" --size 640x480 --max-frames 240 --backend cuda --out /tmp/l.csv 2>&1 | grep -E "^source|frame set|stopped"
echo "== small frames"
rate() { grep -oE "[0-9.]+ frames/s" | head -1; }
F="--min-area 100000000 --backend cuda --out /dev/null"
for r in 1 2; do
  echo "round $r 640x480: eight sets $(timeout 30 ./ms analyze $E --size 640x480 --max-frames 8000 $F 2>&1 | rate) | eight alone $(MARKERSCOPE_FRAME_SETS=0 timeout 30 ./ms analyze $E --size 640x480 --max-frames 8000 $F 2>&1 | rate) | one 1280x1920 $(timeout 30 ./ms analyze $S --size 1280x1920 --max-frames 4000 $F 2>&1 | rate)"
  echo "round $r 320x240: eight sets $(timeout 30 ./ms analyze $E --size 320x240 --max-frames 8000 $F 2>&1 | rate) | eight alone $(MARKERSCOPE_FRAME_SETS=0 timeout 30 ./ms analyze $E --size 320x240 --max-frames 8000 $F 2>&1 | rate) | one 640x960 $(timeout 30 ./ms analyze $S --size 640x960 --max-frames 8000 $F 2>&1 | rate)"
done
echo "== time"; /usr/bin/time -v timeout 30 ./ms analyze $E --size 640x480 --max-frames 8000 $F 2>&1 | grep -E "frames/s|Elapsed|User time|System time|context switches" | grep -oE "[0-9.]+ frames/s|(Elapsed|User|System|Voluntary|Involuntary).*"
