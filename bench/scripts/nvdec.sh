#!/usr/bin/env bash
# Video decoding on the GPU machine: NVDEC against FFmpeg's CPU decoders, from the repository
# root there. DEVICE (default .device) holds markerscope built with `--features cuda,video`,
# fflib/ (the libraries of bench/ffmpeg_nvdec.sh) and the clips: clip1080.mp4, clip1080x2.mp4 (the
# same clip twice as long) and the damaged ones of the CLI tests (clean.mp4, noisy.mp4,
# joined.ts; longnoisy.mp4, longjoined.ts for hand-overs in later segments).
#
#   bash bench/scripts/nvdec.sh STEP...
#
#   startup            start-up time of a one-frame CUDA run, warm kernel cache, three times
#   rates              frames/s of nvdec and cpu decoding of clip1080.mp4, three rounds
#   decoders           frames/s with 1, 2 and 3 NVDEC decoders (MARKERSCOPE_NVDEC_DECODERS), the
#                      CPU backend behind NVDEC, and CPU decoding, on both long clips, three rounds
#   processes          two processes of one decoder each against one process of two
#   wall               wall time of whole runs, 1 or 2 decoders and CPU decoding
#   same-output[=CLIPS] nvdec and cpu decoding give the same rows: clip1080.mp4 (CSV), then each
#                      of CLIPS (default clean.mp4,noisy.mp4,joined.ts; JSONL with skip records)
#   latency            bench --latency on demo frames, flsl_cdb and ha8 at 1920x1080
#   pipeline           bench --pipeline on the demo scene at 1920x1080 and 3840x2160
#
# Every line with frames/s also goes to /tmp/all.log: the NVDEC hand-overs to the CPU decoder
# ("stopped at") are counted there at the end.
set -u
DEVICE="${DEVICE:-.device}"
B="$DEVICE/markerscope"
C="$DEVICE/clip1080.mp4"
C2="$DEVICE/clip1080x2.mp4"
export MARKERSCOPE_KERNEL_CACHE="${MARKERSCOPE_KERNEL_CACHE:-/tmp/kcache}"
export LD_LIBRARY_PATH="$PWD/$DEVICE/fflib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# The frames/s of the closing line of a run read from stdin.
rate() { tee -a /tmp/all.log | grep -oE "[0-9.]+ frames/s" | head -1; }
# Milliseconds a command takes.
ms() { local s; s=$(date +%s%N); "$@" >/dev/null 2>&1; echo $(( ($(date +%s%N) - s) / 1000000 ))ms; }
# frames/s of `analyze CLIP --out /dev/null` with the remaining flags, N decoders when N is set.
analyze_rate() {
    local clip="$1"
    shift
    if [ -n "${N:-}" ]; then
        MARKERSCOPE_NVDEC_DECODERS="$N" "$B" analyze "$clip" "$@" --out /dev/null 2>&1 | rate
    else
        "$B" analyze "$clip" "$@" --out /dev/null 2>&1 | rate
    fi
}

step() {
    local name="${1%%=*}" arg=""
    [ "$name" != "$1" ] && arg="${1#*=}"
    case "$name" in
    startup)
        for _ in 1 2 3; do
            /usr/bin/time -f "%e s" "$B" analyze synthetic --max-frames 1 --backend cuda --out /dev/null 2>&1 | tail -1
        done ;;
    rates)
        for r in 1 2 3; do
            printf "round %s: nvdec %s | cpu %s\n" "$r" "$(analyze_rate "$C" --decoder nvdec)" \
                "$(analyze_rate "$C" --decoder cpu)"
        done ;;
    decoders)
        for r in 1 2 3; do
            for clip in "$C" "$C2"; do
                printf "round %s %s: " "$r" "$(basename "$clip")"
                for n in 1 2 3; do
                    printf "nvdec(%s) %s | " "$n" "$(N=$n analyze_rate "$clip" --decoder nvdec)"
                done
                printf "nvdec(2),cpu-backend %s | " "$(analyze_rate "$clip" --backend cpu --decoder nvdec)"
                printf "cpu %s\n" "$(analyze_rate "$clip" --decoder cpu)"
            done
        done ;;
    processes)
        for _ in 1 2; do
            echo "one process, 1 decoder: $(N=1 analyze_rate "$C2" --decoder nvdec)"
            echo "one process, 2 decoders: $(N=2 analyze_rate "$C2" --decoder nvdec)"
            printf "two processes, 1 decoder each: "
            for _ in 1 2; do (N=1 analyze_rate "$C2" --decoder nvdec | tr '\n' ' ') & done
            wait
            echo
            printf "two processes, 1 decoder each, CPU backend: "
            for _ in 1 2; do (N=1 analyze_rate "$C2" --backend cpu --decoder nvdec | tr '\n' ' ') & done
            wait
            echo
            echo "one process, 2 decoders, CPU backend: $(N=2 analyze_rate "$C2" --backend cpu --decoder nvdec)"
            echo "one process, 1 decoder, CPU backend: $(N=1 analyze_rate "$C2" --backend cpu --decoder nvdec)"
        done ;;
    wall)
        for _ in 1 2 3; do
            for clip in "$C" "$C2"; do
                echo "wall $(basename "$clip"): 1 decoder $(MARKERSCOPE_NVDEC_DECODERS=1 ms "$B" analyze "$clip" --decoder nvdec --out /dev/null)" \
                    "| 2 decoders $(ms "$B" analyze "$clip" --decoder nvdec --out /dev/null)" \
                    "| cpu $(ms "$B" analyze "$clip" --decoder cpu --out /dev/null)"
            done
        done ;;
    same-output)
        for d in cpu nvdec; do
            "$B" analyze "$C" --threshold fixed:127 --decoder "$d" --out "/tmp/f.$d.csv" 2>&1 | rate
        done
        cmp /tmp/f.cpu.csv /tmp/f.nvdec.csv && echo "clip fixed:127: identical CSV ($(wc -l < /tmp/f.cpu.csv) lines)"
        local clips
        IFS=, read -r -a clips <<< "${arg:-clean.mp4,noisy.mp4,joined.ts}"
        for f in "${clips[@]}"; do
            for d in cpu nvdec; do
                "$B" analyze "$DEVICE/$f" --threshold fixed:128 --decoder "$d" --out "/tmp/$f.$d.jsonl" > "/tmp/log.$d" 2>&1
                grep -E "NVDEC|skipped|analyzed" "/tmp/log.$d" | head -4
            done
            if cmp -s "/tmp/$f.cpu.jsonl" "/tmp/$f.nvdec.jsonl"; then
                echo "$f: identical output"
            else
                echo "$f: outputs differ"
            fi
        done ;;
    latency)
        "$B" bench --latency --latency-frames demo --backend cuda --algorithms flsl_cdb,ha8 --sizes 1920x1080 2>&1 |
            grep -E "flsl_cdb|ha8" | head -6 ;;
    pipeline)
        "$B" bench --pipeline --backend cuda --scenes demo --sizes 1920x1080,3840x2160 --frames 1000 2>&1 |
            grep -E "^demo " | head -4 ;;
    *)
        echo "nvdec.sh: unknown step '$1'" >&2
        return 2 ;;
    esac
}

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# The decoder opened once, so that no step pays for the first start.
"$B" analyze "$C" --decoder nvdec --max-frames 3 --out /dev/null > /dev/null 2>&1
: > /tmp/all.log
status=0
for arg in "$@"; do
    echo "== $arg"
    step "$arg" || status=$?
done
echo "NVDEC hand-overs in all runs: $(grep -c 'stopped at' /tmp/all.log)"
exit "$status"
