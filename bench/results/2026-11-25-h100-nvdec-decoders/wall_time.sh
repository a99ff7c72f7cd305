#!/usr/bin/env bash
export MARKERSCOPE_KERNEL_CACHE=/tmp/kcache LD_LIBRARY_PATH=$PWD/.device/fflib
B=./.device/markerscope; C=.device/clip1080.mp4; C2=.device/clip1080x2.mp4
$B analyze $C --decoder nvdec --max-frames 3 --out /dev/null >/dev/null 2>&1
ms() { local s=$(date +%s%N); "$@" >/dev/null 2>&1; echo $(( ($(date +%s%N) - s) / 1000000 ))ms; }
for k in 1 2 3; do for c in $C $C2; do
echo "wall $(basename $c): 1 decoder $(MARKERSCOPE_NVDEC_DECODERS=1 ms $B analyze $c --decoder nvdec --out /dev/null) | 2 decoders $(ms $B analyze $c --decoder nvdec --out /dev/null) | cpu $(ms $B analyze $c --decoder cpu --out /dev/null)"
done; done
for k in 1 2 3; do printf "rate clip: 1 %s | 2 %s\n" "$(MARKERSCOPE_NVDEC_DECODERS=1 $B analyze $C --decoder nvdec --out /dev/null 2>&1 | grep -oE '[0-9.]+ frames/s')" "$($B analyze $C --decoder nvdec --out /dev/null 2>&1 | grep -oE '[0-9.]+ frames/s')"; done
