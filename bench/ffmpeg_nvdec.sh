#!/usr/bin/env bash
# Builds a small FFmpeg with the decoders markerscope reads and NVDEC (CUVID), as shared
# libraries of the same version and ABI as the distribution's (Debian 12: 5.1.x,
# libavcodec.so.59): a binary built against the distribution's FFmpeg runs with them on a
# machine that has no FFmpeg (the GPU machine), via LD_LIBRARY_PATH. About 5 MB of libraries, a
# few minutes on two cores.
#
#   bash bench/ffmpeg_nvdec.sh OUT_DIR     # OUT_DIR/lib/libav*.so.*
#   LD_LIBRARY_PATH=OUT_DIR/lib markerscope analyze clip.mp4 --decoder nvdec --out rows.csv
#
# The source is the distribution's own (`apt-get source`, its upstream tarball): the script
# enables the deb-src entries beside the deb ones when apt has none (root or sudo). Needs the
# NVIDIA codec headers (Debian: libffmpeg-nvenc-dev), a C compiler and nasm.
set -euo pipefail
out="$(realpath -m "${1:?usage: ffmpeg_nvdec.sh OUT_DIR}")"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

# Source entries: Debian 12 lists its archives in deb822 files (Types: deb); a deb-src copy of
# each lets apt fetch sources from the same archives.
if ! apt-get source --print-uris -qq ffmpeg >/dev/null 2>&1; then
    for list in /etc/apt/sources.list.d/*.sources; do
        [ -e "$list" ] || continue
        sed 's/^Types: deb$/Types: deb-src/' "$list" |
            $SUDO tee "/etc/apt/sources.list.d/deb-src-$(basename "$list")" >/dev/null
    done
    if [ -f /etc/apt/sources.list ]; then
        sed -n 's/^deb /deb-src /p' /etc/apt/sources.list |
            $SUDO tee /etc/apt/sources.list.d/deb-src.list >/dev/null
    fi
    $SUDO apt-get update -qq
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
# The upstream tarball only (ffmpeg_VERSION.orig.tar.xz), as FFmpeg releases it.
apt-get source --download-only -qq ffmpeg
tar xf ffmpeg_*.orig.tar.xz
cd ffmpeg-*/
./configure --prefix="$out" --enable-shared --disable-static --disable-programs --disable-doc \
    --disable-avdevice --disable-avfilter --disable-postproc --disable-autodetect --disable-everything \
    --enable-decoder=h264,hevc,h264_cuvid,hevc_cuvid,mpeg4,rawvideo,ffv1,mjpeg \
    --enable-parser=h264,hevc,mpeg4video,mjpeg \
    --enable-demuxer=mov,matroska,mpegts,h264,hevc,avi,rawvideo,yuv4mpegpipe --enable-protocol=file \
    --enable-bsf=h264_mp4toannexb,hevc_mp4toannexb \
    --enable-cuvid --enable-nvdec --enable-ffnvcodec --enable-hwaccel=h264_nvdec,hevc_nvdec --enable-zlib
make -j"$(nproc)"
make install
ls "$out/lib"/lib*.so.*
