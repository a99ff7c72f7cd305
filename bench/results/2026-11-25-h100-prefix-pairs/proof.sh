#!/usr/bin/env bash
# Pixel pairs from foreground ranks: proofs and what the descriptors cost (8192², g = 4).
# .device/ holds the binaries built before (shape_cost_before) and after the change.
set -u
B=./.device/markerscope
export MARKERSCOPE_KERNEL_CACHE=/tmp/kcache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== selftest quick, all"; $B selftest --quick > $OUT/selftest-quick.txt 2>&1; tail -1 $OUT/selftest-quick.txt
for r in 1 2; do
  ./.device/shape_cost_before 8192 5 flsl_cdb > $OUT/shape-cost-before-$r.txt 2>&1
  ./.device/shape_cost 8192 5 flsl_cdb > $OUT/shape-cost-after-$r.txt 2>&1
done
grep "mean over" $OUT/shape-cost-*.txt
echo "== memcheck"; compute-sanitizer --tool memcheck $B selftest --quick --algorithms flsl,flsl_cd,flsl_cdb,ha_cd 2>&1 | tail -2
# Each racecheck run is a call of its own (flsl_cdb takes about 450 s):
#   compute-sanitizer --tool racecheck $B selftest --quick --algorithms flsl_cdb
#   compute-sanitizer --tool racecheck $B selftest --quick --algorithms ha4w
#   ./.device/shape_cost 8192 5 flsl_cdb,ha8,lsl > $OUT/shape-cost-after-all.txt
