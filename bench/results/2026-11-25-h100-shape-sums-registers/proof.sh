#!/usr/bin/env bash
# Shape sums without register spills, cheaper per run, stored a word per lane: proofs and costs.
# .device/ holds markerscope and shape_cost built with
#   cargo build --profile ci --no-default-features --features cuda --bin markerscope --example shape_cost
# and shape_cost_before built the same way from the code before the change (9ccfbf7). Two calls:
#   bash bench/results/2026-11-25-h100-shape-sums-registers/proof.sh costs
#   bash bench/results/2026-11-25-h100-shape-sums-registers/proof.sh sanitizers
set -u
export MARKERSCOPE_KERNEL_CACHE=/tmp/kcache
B=./.device/markerscope
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [ "${1:-}" = costs ]; then
  $B selftest --quick > $OUT/selftest-quick.txt 2>&1; tail -1 $OUT/selftest-quick.txt
  for r in 1 2; do
    ./.device/shape_cost_before 8192 5 flsl_cdb > $OUT/shape-cost-before-$r.txt 2>&1
    ./.device/shape_cost 8192 5 flsl_cdb > $OUT/shape-cost-after-$r.txt 2>&1
  done
  grep "mean over" $OUT/shape-cost-*.txt
else
  $B selftest --quick --algorithms flsl_cdb > /dev/null 2>&1
  s=$(date +%s)
  timeout 580 compute-sanitizer --tool memcheck $B selftest --quick --algorithms flsl_cdb,flsl_cd,flsl > $OUT/memcheck.txt 2>&1 &
  timeout 580 compute-sanitizer --tool racecheck $B selftest --quick --algorithms flsl_cdb > $OUT/racecheck-flsl_cdb.txt 2>&1 &
  wait
  echo "sanitizers $(( $(date +%s) - s )) s"
  for f in memcheck racecheck-flsl_cdb; do echo "$f: $(grep -E 'selftest:|ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$f.txt | tr '\n' ' ')"; done
fi
