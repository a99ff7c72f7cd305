#!/usr/bin/env bash
# Crofton pixel pairs: proofs and what the descriptors cost (8192², g = 4).
set -u
B=./.device/markerscope
export MARKERSCOPE_KERNEL_CACHE=/tmp/kcache
export LD_LIBRARY_PATH=$PWD/.device/fflib
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== selftest quick, all"; $B selftest --quick 2>&1 | tail -1
echo "== shape_cost"; ./.device/shape_cost 8192 5 flsl_cdb,ha8,lsl > $OUT/shape-cost.txt 2>&1; grep "mean over" $OUT/shape-cost.txt
echo "== memcheck"; compute-sanitizer --tool memcheck $B selftest --quick --algorithms flsl,flsl_cd,flsl_cdb,ha8 2>&1 | tail -2
echo "== racecheck ha8"; compute-sanitizer --tool racecheck $B selftest --quick --algorithms ha8 2>&1 | tail -2
