#!/usr/bin/env bash
# Scaling of the batch analysis over GPUs, on a machine with several: markerscope.batch with 1,
# 2 … N local workers (one per GPU) over the same H.264 files, against one `markerscope analyze`
# process on one of them (the per-GPU rate a worker should keep). From the repository root.
#
#   bash bench/scripts/batch_scaling.sh [FILE...]
#
#   FILE...   1080p H.264 files, all alike; at least 4 per GPU, so that the last ones do not
#             leave GPUs idle (default: $DEVICE/batch/*.mp4)
#   DEVICE    folder with the markerscope binary (default .device)
#   PYTHON    the interpreter with the markerscope wheel and dask, distributed, pyarrow
#             (default python3)
#   GPUS      the worker counts to run (default: 1 to the number of GPUs nvidia-smi lists)
#   ROUNDS    runs per count, the fastest kept (default 2)
#   ARGS      options for both the batch and the analyze process, e.g. "--threshold otsu"
#   MAKE=K    with no FILE and no $DEVICE/batch/*.mp4: make K clips of CLIP_SECONDS (default 60)
#             seconds of 1920x1080 at 30 frames/s with ffmpeg's test pattern and libx264
#
# Prints, per worker count: files, frames, seconds (from the cluster being up to the last
# file), files/s, frames/s, frames/s per GPU and the efficiency (frames/s over N times the rate
# with one worker); then one `markerscope analyze` process per file, one after the other on
# GPU 0, writing what a worker writes (the rows and the track summary as Parquet): its rate
# over the same files (wall time, each process's start included, and the engine's own), and the
# share of it one worker keeps.
set -euo pipefail
DEVICE="${DEVICE:-.device}"
PYTHON="${PYTHON:-python3}"
ROUNDS="${ROUNDS:-2}"
export MARKERSCOPE_KERNEL_CACHE="${MARKERSCOPE_KERNEL_CACHE:-/tmp/kcache}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

files=("$@")
if [ ${#files[@]} -eq 0 ]; then
    shopt -s nullglob
    files=("$DEVICE"/batch/*.mp4)
    shopt -u nullglob
fi
if [ ${#files[@]} -eq 0 ] && [ -n "${MAKE:-}" ]; then
    mkdir -p "$DEVICE/batch"
    for i in $(seq 1 "$MAKE"); do
        ffmpeg -v error -f lavfi -i "testsrc2=size=1920x1080:rate=30" -ss "$i" -t "${CLIP_SECONDS:-60}" \
            -c:v libx264 -preset veryfast -pix_fmt yuv420p "$DEVICE/batch/clip$i.mp4"
    done
    files=("$DEVICE"/batch/*.mp4)
fi
if [ ${#files[@]} -eq 0 ]; then
    echo "batch_scaling.sh: no input files: give FILE..., put them in $DEVICE/batch/, or set MAKE=K" >&2
    exit 2
fi
if [ -z "${GPUS:-}" ]; then
    n=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
    GPUS="$(seq -s ' ' 1 "$n")"
fi

# One run with N workers: "frames seconds files" from the closing line of markerscope-batch
# ("K analysed, 0 already done, 0 failed; F frames in S s; manifest: …").
run() {
    local n="$1" out="$WORK/out-$1-$2" line status=0
    # shellcheck disable=SC2086 # ARGS is a list of options
    line="$("$PYTHON" -m markerscope.batch "${files[@]}" --out "$out" --workers "$n" ${ARGS:-} 2>/dev/null | tail -1)" || status=$?
    rm -rf "$out"
    [ "$status" -eq 0 ] || return "$status"
    echo "$line" | sed -E 's/^([0-9]+) analysed.* ([0-9]+) frames in ([0-9.]+) s.*/\2 \3 \1/'
}

echo "files: ${#files[@]} (${files[0]} …); worker counts: $GPUS; best of $ROUNDS"
printf "%7s %6s %10s %9s %8s %10s %14s %10s\n" workers files frames seconds files/s frames/s "frames/s/GPU" efficiency
base=""
for n in $GPUS; do
    best=""
    for r in $(seq 1 "$ROUNDS"); do
        line="$(run "$n" "$r")" || { echo "batch_scaling.sh: the run with $n worker(s) failed" >&2; exit 1; }
        secs="$(echo "$line" | cut -d' ' -f2)"
        if [ -z "$best" ] || awk -v a="$secs" -v b="$(echo "$best" | cut -d' ' -f2)" 'BEGIN { exit !(a < b) }'; then
            best="$line"
        fi
    done
    read -r frames secs count <<<"$best"
    rate="$(awk -v f="$frames" -v s="$secs" 'BEGIN { printf "%.1f", f / s }')"
    [ -z "$base" ] && base="$(awk -v r="$rate" -v n="$n" 'BEGIN { print r / n }')"
    awk -v n="$n" -v c="$count" -v f="$frames" -v s="$secs" -v r="$rate" -v b="$base" 'BEGIN {
        printf "%7d %6d %10d %9.1f %8.2f %10.1f %14.1f %9.1f%%\n", n, c, f, s, c / s, r, r / n, 100 * r / (n * b) }'
done

# One analyze process per file, in turn: "frames wall_seconds engine_seconds" summed.
frames=0 wall=0 engine=0
for f in "${files[@]}"; do
    start="$(date +%s.%N)"
    # shellcheck disable=SC2086
    summary="$(CUDA_VISIBLE_DEVICES=0 "$DEVICE/markerscope" analyze "$f" ${ARGS:-} --out "$WORK/rows.parquet" \
        --tracks "$WORK/rows.tracks.parquet" 2>&1 | grep -E "^analyzed [0-9]+ frame" | head -1)" ||
        { echo "batch_scaling.sh: markerscope analyze $f failed" >&2; exit 1; }
    end="$(date +%s.%N)"
    read -r n fps <<<"$(echo "$summary" | sed -E 's/^analyzed ([0-9]+) frame.* ([0-9.]+) frames\/s.*/\1 \2/')"
    frames=$((frames + n))
    wall="$(awk -v w="$wall" -v a="$start" -v b="$end" 'BEGIN { print w + b - a }')"
    engine="$(awk -v e="$engine" -v n="$n" -v r="$fps" 'BEGIN { print e + (r > 0 ? n / r : 0) }')"
done
rm -f "$WORK/rows.parquet" "$WORK/rows.tracks.parquet"
awk -v f="$frames" -v w="$wall" -v e="$engine" -v b="$base" -v c="${#files[@]}" 'BEGIN {
    printf "one analyze process per file, in turn on GPU 0 (%d files, %d frames, Parquet rows and tracks):\n", c, f
    printf "  %.1f frames/s over %.1f s wall (process starts included), %.1f frames/s in the engine\n", f / w, w, f / e
    printf "  one worker keeps %.1f%% of the wall rate, %.1f%% of the engine rate\n", 100 * b / (f / w), 100 * b / (f / e) }'
