#!/usr/bin/env bash
# The decoders in the engine's context only where the frames stay on the GPU: both paths against
# the build before.
set -u
# DEVICE (default .device): as for rows-and-rates.sh.
cd "${DEVICE:-.device}"
for b in ms-new ms-base; do [ -f $b.xz ] && xz -dkf $b.xz && chmod +x $b; done
export LD_LIBRARY_PATH="$PWD/fflib" MARKERSCOPE_KERNEL_CACHE=/tmp/kc
rate() { grep -oE "[0-9.]+ frames/s" | head -1; }
A=clip1080.mp4; B=clip1080x2.mp4; E8="$A $B $A $B $A $B $A $B"
for r in 1 2 3; do
  for b in ms-new ms-base; do
    m=$(./$b analyze $B --decoder nvdec --backend cuda --markers DICT_4X4_50 --out /dev/null 2>&1 | rate)
    a=$(./$b analyze $B --decoder nvdec --backend cuda --threshold adaptive:31:5 --out /dev/null 2>&1 | rate)
    f=$(./$b analyze $B $B $B $B --decoder nvdec --backend cuda --threshold adaptive:31:5 --out /dev/null 2>&1 | rate)
    e=$(./$b analyze $E8 --threshold fixed:127 --decoder nvdec --backend cuda --out /dev/null 2>&1 | rate)
    z=$(./$b analyze $E8 --threshold fixed:127 --min-area 100000000 --decoder nvdec --backend cuda --out /dev/null 2>&1 | rate)
    echo "round $r $b: markers $m | adaptive $a | four files adaptive $f | eight fixed:127 $e | eight no rows $z"
  done
done
./ms-new analyze $E8 --threshold fixed:127 --decoder nvdec --backend cuda --out /tmp/n8.csv 2>&1 | grep -E "stayed"
./ms-base analyze $E8 --threshold fixed:127 --decoder nvdec --backend cuda --out /tmp/b8.csv 2>&1 | tail -0
echo "eight files rows: $(cmp /tmp/n8.csv /tmp/b8.csv && echo same) $(wc -l < /tmp/n8.csv)"
./ms-new analyze $B --decoder nvdec --backend cuda --threshold fixed:127 --markers DICT_4X4_50 --out /tmp/n.csv 2>&1 | grep -cE "stayed"
./ms-base analyze $B --decoder nvdec --backend cuda --threshold fixed:127 --markers DICT_4X4_50 --out /tmp/b.csv 2>&1 | tail -0
echo "markers rows: $(cmp /tmp/n.csv /tmp/b.csv && echo same) $(wc -l < /tmp/n.csv)"
./ms-new analyze $A --threshold otsu --decoder nvdec --backend cuda --out /tmp/n1.csv 2>&1 | grep -E "stayed"
./ms-new analyze $A --threshold otsu --decoder cpu --backend cuda --out /tmp/c1.csv 2>&1 | tail -0
echo "one file otsu, nvdec vs cpu: $(cmp /tmp/n1.csv /tmp/c1.csv && echo same) $(wc -l < /tmp/n1.csv)"
