#!/usr/bin/env bash
# NVDEC frames that come to the host (markers, an adaptive threshold): the build before against
# the new one, whose decoders share the engine's context.
set -u
# DEVICE (default .device): as for rows-and-rates.sh.
cd "${DEVICE:-.device}"
for b in ms-new ms-base; do [ -f $b.xz ] && xz -dkf $b.xz && chmod +x $b; done
export LD_LIBRARY_PATH="$PWD/fflib" MARKERSCOPE_KERNEL_CACHE=/tmp/kc
rate() { grep -oE "[0-9.]+ frames/s" | head -1; }
B=clip1080x2.mp4
for r in 1 2 3; do
  for b in ms-new ms-base; do
    m=$(./$b analyze $B --decoder nvdec --backend cuda --markers DICT_4X4_50 --out /dev/null 2>&1 | rate)
    a=$(./$b analyze $B --decoder nvdec --backend cuda --threshold adaptive:31:5 --out /dev/null 2>&1 | rate)
    f=$(./$b analyze $B $B $B $B --decoder nvdec --backend cuda --threshold adaptive:31:5 --out /dev/null 2>&1 | rate)
    echo "round $r $b: markers $m | adaptive $a | four files adaptive $f"
  done
done
./ms-new analyze $B --decoder nvdec --backend cuda --markers DICT_4X4_50 --out /tmp/n.csv 2>&1 | grep -cE "stayed"
./ms-base analyze $B --decoder nvdec --backend cuda --markers DICT_4X4_50 --out /tmp/b.csv 2>&1 | tail -0
echo "markers rows: $(cmp /tmp/n.csv /tmp/b.csv && echo same) $(wc -l < /tmp/n.csv)"
