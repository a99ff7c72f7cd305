#!/usr/bin/env bash
# Proof of the GPU marker detector on the GPU machine, from the repository root there: the
# selftest's fiducial group (the GPU detector against the CPU one on rendered scenes: same IDs,
# corners within 1e-3 px, same rejected count), then compute-sanitizer memcheck and racecheck on
# it, side by side. DEVICE (default .device) holds the binary built here for it:
#   cargo build --profile ci --no-default-features --features cuda --bin markerscope
#   mkdir -p .device && cp "$CARGO_TARGET_DIR/ci/markerscope" .device/
# Every step writes its whole output under OUT and prints one summary line.
#
#   OUT=DIR bash bench/scripts/fiducial_gpu_proof.sh
#
#   selftest --quick --only fiducial                 fiducial-selftest.txt
#   compute-sanitizer --tool memcheck  on the same   fiducial-memcheck.txt
#   compute-sanitizer --tool racecheck on the same   fiducial-racecheck.txt
#
# Environment: OUT (required), DEVICE, LIMIT (seconds per step, default 170).
set -u
: "${OUT:?set OUT to the folder the outputs go to}"
DEVICE="${DEVICE:-.device}"
LIMIT="${LIMIT:-170}"
B="$DEVICE/markerscope"
export MARKERSCOPE_KERNEL_CACHE="${MARKERSCOPE_KERNEL_CACHE:-/tmp/kcache}"
mkdir -p "$OUT"

# Runs a command under the time limit into OUT/FILE, then prints the lines that sum it up.
run_to() {
    local file="$1" rc=0
    shift
    timeout "$LIMIT" "$@" > "$OUT/$file" 2>&1 || rc=$?
    echo "$file (exit $rc): $(grep -hE '^selftest:|^fiducial:|^FAIL|ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$file" | head -5 | tr '\n' ' ')"
    return "$rc"
}

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
start=$(date +%s)
status=0
# The selftest alone first: it compiles the kernels into the cache the sanitizer runs read.
run_to fiducial-selftest.txt "$B" selftest --quick --only fiducial || status=$?
run_to fiducial-memcheck.txt compute-sanitizer --tool memcheck "$B" selftest --quick --only fiducial &
memcheck=$!
run_to fiducial-racecheck.txt compute-sanitizer --tool racecheck "$B" selftest --quick --only fiducial &
racecheck=$!
wait "$memcheck" || status=$?
wait "$racecheck" || status=$?
echo "(fiducial proof: $(( $(date +%s) - start )) s)"
exit "$status"
