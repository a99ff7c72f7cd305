#!/usr/bin/env bash
# The block table's pool of entries, the pairs from bits, the 56 KB shape table: proofs and what
# the descriptors cost (8192², g = 4). .device/ holds the binaries built with
#   cargo build --profile ci --no-default-features --features cuda --bin markerscope --example shape_cost
# after the change, and shape_cost_before built the same way from the code before it.
set -u
B=./.device/markerscope
export MARKERSCOPE_KERNEL_CACHE=/tmp/kcache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# One call: the sanitizers side by side (about 510 s together).
timeout 560 compute-sanitizer --tool memcheck $B selftest --quick --algorithms flsl,flsl_cd,flsl_cdb,ha4w,ha8 > $OUT/memcheck.txt 2>&1 &
timeout 560 compute-sanitizer --tool racecheck $B selftest --quick --algorithms flsl_cdb > $OUT/racecheck-flsl_cdb.txt 2>&1 &
timeout 560 compute-sanitizer --tool racecheck $B selftest --quick --algorithms ha4w > $OUT/racecheck-ha4w.txt 2>&1 &
wait
# Next call: every algorithm, then before and after, two rounds.
#   $B selftest --quick > $OUT/selftest-quick.txt 2>&1
#   for r in 1 2; do
#     ./.device/shape_cost_before 8192 5 flsl_cdb > $OUT/shape-cost-before-$r.txt 2>&1
#     ./.device/shape_cost 8192 5 flsl_cdb > $OUT/shape-cost-after-$r.txt 2>&1
#   done
