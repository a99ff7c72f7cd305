#!/usr/bin/env bash
set -u
export MARKERSCOPE_KERNEL_CACHE=/tmp/kcache
export LD_LIBRARY_PATH=$PWD/.device/fflib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=./.device/markerscope; C=.device/clip1080.mp4
rate() { tee -a /tmp/all.log | grep -oE "[0-9.]+ frames/s" | head -1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== selftest quick"; $B selftest --quick 2>&1 | tail -1
echo "== start-up, warm cache"; for i in 1 2 3; do /usr/bin/time -f "%e s" $B analyze synthetic --max-frames 1 --backend cuda --out /dev/null 2>&1 | tail -1; done
echo "== NVDEC"; for r in 1 2 3; do printf "round $r: nvdec %s | cpu %s\n" "$($B analyze $C --decoder nvdec --out /dev/null 2>&1 | rate)" "$($B analyze $C --decoder cpu --out /dev/null 2>&1 | rate)"; done
echo "hand-overs: $(grep -c 'stopped at' /tmp/all.log)"
for d in cpu nvdec; do $B analyze $C --threshold fixed:127 --decoder $d --out /tmp/f.$d.csv 2>&1 | rate; done
cmp /tmp/f.cpu.csv /tmp/f.nvdec.csv && echo "clip fixed:127: identical CSV ($(wc -l < /tmp/f.cpu.csv) lines)"
for f in clean.mp4 noisy.mp4 joined.ts; do for d in cpu nvdec; do
  $B analyze .device/$f --threshold fixed:128 --decoder $d --out /tmp/$f.$d.jsonl > /tmp/log.$d 2>&1; grep -E "NVDEC" /tmp/log.$d | head -2
done; cmp -s /tmp/$f.cpu.jsonl /tmp/$f.nvdec.jsonl && echo "$f: identical output" || echo "$f: outputs differ"; done
echo "== engine latency"; $B bench --latency --latency-frames demo --backend cuda --algorithms flsl_cdb,ha8 --sizes 1920x1080 2>&1 | grep -E "flsl_cdb|ha8" | head -6
echo "== pipeline"; $B bench --pipeline --backend cuda --scenes demo --sizes 1920x1080,3840x2160 --frames 1000 2>&1 | grep -E "^demo " | head -4
echo "== memcheck"; timeout 300 compute-sanitizer --tool memcheck $B selftest --quick --algorithms flsl_cdb,ha8 2>&1 | grep -E "ERROR SUMMARY|selftest:" | tail -2
