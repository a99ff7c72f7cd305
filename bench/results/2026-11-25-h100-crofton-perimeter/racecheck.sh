#!/usr/bin/env bash
set -u
export MARKERSCOPE_KERNEL_CACHE=/tmp/kcache
export LD_LIBRARY_PATH=$PWD/.device/fflib
echo "== racecheck flsl_cdb"; compute-sanitizer --tool racecheck ./.device/markerscope selftest --quick --algorithms flsl_cdb 2>&1 | tail -2
