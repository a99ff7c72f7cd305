#!/usr/bin/env bash
set -u
export MARKERSCOPE_KERNEL_CACHE=/tmp/kcache
export LD_LIBRARY_PATH=$PWD/.device/fflib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=./.device/markerscope; C=.device/clip1080.mp4; C2=.device/clip1080x2.mp4
rate() { grep -oE "[0-9.]+ frames/s" | head -1; }
$B analyze $C --decoder nvdec --out /dev/null >/dev/null 2>&1
for r in 1 2; do
echo "one process, 1 decoder: $(MARKERSCOPE_NVDEC_DECODERS=1 $B analyze $C2 --decoder nvdec --out /dev/null 2>&1 | rate)"
echo "one process, 2 decoders: $(MARKERSCOPE_NVDEC_DECODERS=2 $B analyze $C2 --decoder nvdec --out /dev/null 2>&1 | rate)"
printf "two processes, 1 decoder each: "
for i in 1 2; do ( MARKERSCOPE_NVDEC_DECODERS=1 $B analyze $C2 --decoder nvdec --out /dev/null 2>&1 | rate | tr '\n' ' ' ) & done; wait; echo
printf "two processes, 1 decoder each, CPU backend: "
for i in 1 2; do ( MARKERSCOPE_NVDEC_DECODERS=1 $B analyze $C2 --backend cpu --decoder nvdec --out /dev/null 2>&1 | rate | tr '\n' ' ' ) & done; wait; echo
echo "one process, 2 decoders, CPU backend: $(MARKERSCOPE_NVDEC_DECODERS=2 $B analyze $C2 --backend cpu --decoder nvdec --out /dev/null 2>&1 | rate)"
echo "one process, 1 decoder, CPU backend: $(MARKERSCOPE_NVDEC_DECODERS=1 $B analyze $C2 --backend cpu --decoder nvdec --out /dev/null 2>&1 | rate)"
done
