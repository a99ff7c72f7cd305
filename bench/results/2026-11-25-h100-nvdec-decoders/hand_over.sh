#!/usr/bin/env bash
export MARKERSCOPE_KERNEL_CACHE=/tmp/kcache LD_LIBRARY_PATH=$PWD/.device/fflib
B=./.device/markerscope
for f in longnoisy.mp4 longjoined.ts; do for d in cpu nvdec; do
  $B analyze .device/$f --threshold fixed:128 --decoder $d --out /tmp/$f.$d.jsonl > /tmp/log.$d 2>&1; grep -E "NVDEC|skipped|analyzed" /tmp/log.$d | head -4
done; cmp -s /tmp/$f.cpu.jsonl /tmp/$f.nvdec.jsonl && echo "$f: identical output" || echo "$f: outputs differ"; done
for r in 1 2 3; do $B analyze .device/clip1080.mp4 --decoder nvdec --out /dev/null 2>&1 | grep -oE "[0-9.]+ frames/s"; done
