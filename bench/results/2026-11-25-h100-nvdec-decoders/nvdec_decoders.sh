#!/usr/bin/env bash
set -u
export MARKERSCOPE_KERNEL_CACHE=/tmp/kcache
export LD_LIBRARY_PATH=$PWD/.device/fflib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=./.device/markerscope; C=.device/clip1080.mp4; C2=.device/clip1080x2.mp4
rate() { tee -a /tmp/all.log | grep -oE "[0-9.]+ frames/s" | head -1; }
$B analyze $C --decoder nvdec --out /dev/null 2>&1 | tail -2
for r in 1 2 3; do
  for clip in $C $C2; do
  printf "round $r $(basename $clip): "
  for s in 1 2 3; do printf "nvdec(%s) %s | " $s "$(MARKERSCOPE_NVDEC_DECODERS=$s $B analyze $clip --decoder nvdec --out /dev/null 2>&1 | rate)"; done
  printf "nvdec(2),cpu-backend %s | " "$($B analyze $clip --backend cpu --decoder nvdec --out /dev/null 2>&1 | rate)"
  printf "cpu %s\n" "$($B analyze $clip --decoder cpu --out /dev/null 2>&1 | rate)"
  done
done
echo "NVDEC hand-overs in all runs: $(grep -c 'stopped at' /tmp/all.log)"
for d in cpu nvdec; do $B analyze $C --threshold fixed:127 --decoder $d --out /tmp/f.$d.csv 2>&1 | rate; done
cmp /tmp/f.cpu.csv /tmp/f.nvdec.csv && echo "clip fixed:127: identical CSV ($(wc -l < /tmp/f.cpu.csv) lines)"
for f in clean.mp4 noisy.mp4 joined.ts; do for d in cpu nvdec; do
  $B analyze .device/$f --threshold fixed:128 --decoder $d --out /tmp/$f.$d.jsonl > /tmp/log.$d 2>&1; grep -E "NVDEC|skipped" /tmp/log.$d | head -3
done; cmp -s /tmp/$f.cpu.jsonl /tmp/$f.nvdec.jsonl && echo "$f: identical output" || echo "$f: outputs differ"; done
