#!/usr/bin/env bash
# Final build: selftest, sanitizers, the NVDEC rates at the default settings, start-up, eight
# sources against one larger frame, the demo unchanged.
# DEVICE (default .device): as for rows-and-rates.sh.
set -u
cd "${DEVICE:-.device}"
for b in ms-new ms-base; do [ -f $b.xz ] && xz -dkf $b.xz && chmod +x $b; done
export LD_LIBRARY_PATH="$PWD/fflib" MARKERSCOPE_KERNEL_CACHE=/tmp/kc
A=clip1080.mp4; B=clip1080x2.mp4; E8="$A $B $A $B $A $B $A $B"
rate() { grep -oE "[0-9.]+ frames/s" | head -1; }
echo "== selftest"
./ms-new selftest --quick 2>&1 | tail -4
timeout 150 compute-sanitizer --tool memcheck ./ms-new selftest --quick --only labeling --algorithms ha8,flsl_cdb 2>&1 | tail -2
timeout 150 compute-sanitizer --tool racecheck ./ms-new analyze $A --threshold otsu --decoder nvdec --backend cuda --max-frames 20 --out /tmp/r.csv 2>&1 | tail -3
echo "== same rows, default settings (background:5, sub-pixel centroids)"
./ms-new analyze $E8 --decoder nvdec --backend cuda --out /tmp/n8.csv 2>&1 | grep -E "analyzed|GPU" | cut -c1-100
./ms-base analyze $E8 --decoder nvdec --backend cuda --out /tmp/b8.csv 2>&1 | grep -E "analyzed" | cut -c1-100
echo "eight files, default: new vs base $(cmp /tmp/n8.csv /tmp/b8.csv && echo same); $(wc -l < /tmp/n8.csv) lines"
./ms-new analyze $A --decoder nvdec --backend cuda --threshold fixed:127 --markers DICT_4X4_50 --out /tmp/m.csv 2>&1 | grep -E "GPU|analyzed" | cut -c1-100
echo "== rates, alternating"
for r in 1 2 3; do
  for b in ms-new ms-base; do
    d=$(./$b analyze $E8 --decoder nvdec --backend cuda --out /dev/null 2>&1 | rate)
    f=$(./$b analyze $E8 --threshold fixed:127 --decoder nvdec --backend cuda --out /dev/null 2>&1 | rate)
    four=$(./$b analyze $A $B $A $B --threshold fixed:127 --decoder nvdec --backend cuda --out /dev/null 2>&1 | rate)
    s=$( { /usr/bin/time -f "%e s" ./$b analyze $A --decoder nvdec --backend cuda --max-frames 1 --out /dev/null; } 2>&1 | tail -1)
    echo "round $r $b: eight files default $d | eight fixed:127 $f | four fixed:127 $four | one frame's run $s"
  done
done
echo "== labeling path alone: eight 1080p sources against one 3840x4320"
S="synthetic:random"
for r in 1 2; do
  e=$(./ms-new analyze $S $S $S $S $S $S $S $S --size 1920x1080 --max-frames 3000 --min-area 100000000 --backend cuda --out /dev/null 2>&1 | rate)
  o=$(./ms-new analyze $S --size 3840x4320 --max-frames 1000 --min-area 100000000 --backend cuda --out /dev/null 2>&1 | rate)
  echo "round $r: eight 1080p $e | one 3840x4320 $o"
done
echo "== demo, host frames (bench --pipeline), alternating"
for b in ms-new ms-base; do
  ./$b bench --pipeline --scenes demo,clutter --sizes 1920x1080 --backend cuda --frames 1000 2>&1 | grep -E "^(demo|clutter) "
done
