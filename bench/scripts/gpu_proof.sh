#!/usr/bin/env bash
# Proofs and costs of a change on the GPU machine, from the repository root there. DEVICE
# (default .device) holds the binaries built here for it,
#   cargo build --profile ci --no-default-features --features cuda --bin markerscope --example shape_cost
# from the change (markerscope, shape_cost), shape_cost_before built the same way from the code
# before it, and fflib/ (the FFmpeg libraries of bench/ffmpeg_nvdec.sh) when the build reads video.
# Every step writes its whole output under OUT and prints its summary lines.
#
#   OUT=DIR bash bench/scripts/gpu_proof.sh STEP...
#
#   selftest              selftest --quick of every algorithm            selftest-quick.txt
#   selftest-full=ALGOS   the full selftest of ALGOS                     selftest-full-ALGOS.txt
#   shape-cost[=ALGOS]    shape_cost SIZE 5 ALGOS (default flsl_cdb), ROUNDS rounds, each
#                         before (when shape_cost_before is there) and after
#                                                                        shape-cost-{before,after}-R.txt
#   memcheck=ALGOS        compute-sanitizer memcheck of selftest --quick  memcheck.txt
#   racecheck=ALGOS       compute-sanitizer racecheck of selftest --quick racecheck-ALGOS.txt
#   fiducial              selftest --quick --only fiducial (the GPU marker detector against the
#                         CPU's)                                         fiducial-selftest.txt
#   fiducial-memcheck, fiducial-racecheck
#                         the sanitizers on the same               fiducial-{memcheck,racecheck}.txt
#
# Steps joined by `+` run side by side (`memcheck=flsl_cdb,flsl_cd+racecheck=flsl_cdb`: the
# sanitizers take minutes each); every step runs under `timeout LIMIT` (default 570 s, inside a
# 600 s call). Environment: OUT (required), DEVICE, ROUNDS (2), SIZE (8192), LIMIT (570).
set -u
: "${OUT:?set OUT to the folder the outputs go to}"
DEVICE="${DEVICE:-.device}"
ROUNDS="${ROUNDS:-2}"
SIZE="${SIZE:-8192}"
LIMIT="${LIMIT:-570}"
B="$DEVICE/markerscope"
export MARKERSCOPE_KERNEL_CACHE="${MARKERSCOPE_KERNEL_CACHE:-/tmp/kcache}"
if [ -d "$DEVICE/fflib" ]; then
    export LD_LIBRARY_PATH="$PWD/$DEVICE/fflib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
mkdir -p "$OUT"

# Runs a command under the time limit into OUT/FILE, then prints the lines that sum it up.
run_to() {
    local file="$1" rc=0
    shift
    timeout "$LIMIT" "$@" > "$OUT/$file" 2>&1 || rc=$?
    echo "$file: $(grep -hE 'selftest:|ERROR SUMMARY|RACECHECK SUMMARY|mean over' "$OUT/$file" | tr '\n' ' ')"
    return "$rc"
}

step() {
    local name="${1%%=*}" algos="" rc=0
    [ "$name" != "$1" ] && algos="${1#*=}"
    case "$name" in
        selftest) run_to selftest-quick.txt "$B" selftest --quick ;;
        selftest-full) run_to "selftest-full-$algos.txt" "$B" selftest --algorithms "$algos" ;;
        shape-cost)
            for r in $(seq "$ROUNDS"); do
                if [ -x "$DEVICE/shape_cost_before" ]; then
                    run_to "shape-cost-before-$r.txt" "$DEVICE/shape_cost_before" "$SIZE" 5 "${algos:-flsl_cdb}" || rc=$?
                fi
                run_to "shape-cost-after-$r.txt" "$DEVICE/shape_cost" "$SIZE" 5 "${algos:-flsl_cdb}" || rc=$?
            done
            return "$rc" ;;
        memcheck)
            run_to memcheck.txt compute-sanitizer --tool memcheck "$B" selftest --quick --algorithms "$algos" ;;
        racecheck)
            run_to "racecheck-$algos.txt" compute-sanitizer --tool racecheck "$B" selftest --quick --algorithms "$algos" ;;
        fiducial) run_to fiducial-selftest.txt "$B" selftest --quick --only fiducial ;;
        fiducial-memcheck | fiducial-racecheck)
            run_to "$name.txt" compute-sanitizer --tool "${name#fiducial-}" "$B" selftest --quick --only fiducial ;;
        *)
            echo "gpu_proof.sh: unknown step '$1'" >&2
            return 2 ;;
    esac
}

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# The kernels compiled once before any sanitizer runs (they are slow enough as it is).
"$B" selftest --quick --algorithms flsl_cdb > /dev/null 2>&1
status=0
for arg in "$@"; do
    start=$(date +%s)
    IFS=+ read -r -a together <<< "$arg"
    for s in "${together[@]}"; do
        step "$s" &
    done
    for job in $(jobs -p); do
        wait "$job" || status=$?
    done
    echo "($arg: $(( $(date +%s) - start )) s)"
done
exit "$status"
