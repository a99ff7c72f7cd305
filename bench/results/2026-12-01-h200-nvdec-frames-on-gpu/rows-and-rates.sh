#!/usr/bin/env bash
# NVDEC frames kept on the GPU: same rows as the CPU decoder and as the build before, rates.
# DEVICE (default .device) holds ms-new and ms-base (`--features cuda,video` builds, xz'd), fflib/
# (the libraries of bench/ffmpeg_nvdec.sh) and the clips (README).
set -u
cd "${DEVICE:-.device}"
for b in ms-new ms-base; do [ -f $b.xz ] && xz -dkf $b.xz && chmod +x $b; done
export LD_LIBRARY_PATH="$PWD/fflib" MARKERSCOPE_KERNEL_CACHE=/tmp/kc
A=clip1080.mp4; B=clip1080x2.mp4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== same rows"
for t in "fixed:127" "otsu"; do
  for sp in "" "--no-subpixel"; do
    ./ms-new analyze $A --threshold $t $sp --decoder nvdec --backend cuda --out /tmp/n.csv 2>&1 | grep -E "analyzed|GPU|NVDEC|warn|error"
    ./ms-new analyze $A --threshold $t $sp --decoder cpu --backend cuda --out /tmp/c.csv 2>&1 | grep -E "analyzed" | cut -c1-60
    ./ms-base analyze $A --threshold $t $sp --decoder nvdec --backend cuda --out /tmp/b.csv 2>&1 | grep -E "analyzed" | cut -c1-60
    echo "threshold $t $sp: new-nvdec vs cpu: $(cmp /tmp/n.csv /tmp/c.csv && echo same) ; vs base: $(cmp /tmp/n.csv /tmp/b.csv && echo same); $(md5sum < /tmp/n.csv | cut -c1-12) $(wc -l < /tmp/n.csv) lines"
  done
done
E8="$A $B $A $B $A $B $A $B"
./ms-new analyze $E8 --threshold fixed:127 --decoder nvdec --backend cuda --out /tmp/n8.csv 2>&1 | grep -E "analyzed|GPU"
./ms-base analyze $E8 --threshold fixed:127 --decoder nvdec --backend cuda --out /tmp/b8.csv 2>&1 | grep -E "analyzed" | cut -c1-80
./ms-new analyze $E8 --threshold fixed:127 --decoder cpu --backend cuda --out /tmp/c8.csv 2>&1 | grep -E "analyzed" | cut -c1-80
echo "eight files: new vs base $(cmp /tmp/n8.csv /tmp/b8.csv && echo same); new vs cpu decoder $(cmp /tmp/n8.csv /tmp/c8.csv && echo same); $(wc -l < /tmp/n8.csv) lines"
echo "== rates (fixed:127, --out /dev/null), alternating"
for r in 1 2 3; do
  for b in ms-new ms-base; do
    e=$(./$b analyze $E8 --threshold fixed:127 --decoder nvdec --backend cuda --out /dev/null 2>&1 | grep -oE "[0-9.]+ frames/s" | head -1)
    z=$(./$b analyze $E8 --threshold fixed:127 --min-area 100000000 --decoder nvdec --backend cuda --out /dev/null 2>&1 | grep -oE "[0-9.]+ frames/s" | head -1)
    o=$(./$b analyze $B --threshold fixed:127 --decoder nvdec --backend cuda --out /dev/null 2>&1 | grep -oE "[0-9.]+ frames/s" | head -1)
    echo "round $r $b: eight files $e | eight, no rows $z | one file $o"
  done
done
echo "== memcheck"
timeout 200 compute-sanitizer --tool memcheck ./ms-new analyze $A --threshold otsu --decoder nvdec --backend cuda --max-frames 60 --out /tmp/m.csv 2>&1 | tail -4
