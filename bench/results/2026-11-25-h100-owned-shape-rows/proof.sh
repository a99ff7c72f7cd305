#!/usr/bin/env bash
# Shape rows stored by their root's block; one-key warps reduced by redux: proofs and what the
# descriptors cost (8192², g = 4). .device/ holds the binaries built with
#   cargo build --profile ci --no-default-features --features cuda --bin markerscope --example shape_cost
# after the change, and shape_cost_before built the same way from the code before it.
set -u
B=./.device/markerscope
export MARKERSCOPE_KERNEL_CACHE=/tmp/kcache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# One call: every algorithm, before and after twice, then the sanitizer with the ha4w race check
# and the full flsl_cdb matrix side by side.
$B selftest --quick > $OUT/selftest-quick.txt 2>&1
for r in 1 2; do
  ./.device/shape_cost_before 8192 5 flsl_cdb > $OUT/shape-cost-before-$r.txt 2>&1
  ./.device/shape_cost 8192 5 flsl_cdb > $OUT/shape-cost-after-$r.txt 2>&1
done
timeout 470 compute-sanitizer --tool racecheck $B selftest --quick --algorithms ha4w > $OUT/racecheck-ha4w.txt 2>&1 &
timeout 470 $B selftest --algorithms flsl_cdb > $OUT/selftest-full-flsl_cdb.txt 2>&1 &
wait
# Next call: memcheck and the flsl_cdb race check side by side (about 495 s).
timeout 570 compute-sanitizer --tool memcheck $B selftest --quick --algorithms flsl_cdb,flsl_cd,ha_cd > $OUT/memcheck.txt 2>&1 &
timeout 570 compute-sanitizer --tool racecheck $B selftest --quick --algorithms flsl_cdb > $OUT/racecheck-flsl_cdb.txt 2>&1 &
wait
