#!/usr/bin/env bash
# Builds a small FFmpeg with the decoders markerscope reads and NVDEC (CUVID), as shared
# libraries of the same version and ABI as Debian 12's (5.1.x, libavcodec.so.59): a binary built
# against Debian's FFmpeg runs with them on a machine that has no FFmpeg (the GPU machine), via
# LD_LIBRARY_PATH. About 5 MB of libraries, a few minutes on two cores.
#
#   bash bench/ffmpeg_nvdec.sh OUT_DIR     # OUT_DIR/lib/libav*.so.*
#   LD_LIBRARY_PATH=OUT_DIR/lib markerscope analyze clip.mp4 --decoder nvdec --out rows.csv
#
# Needs the NVIDIA codec headers (Debian: libffmpeg-nvenc-dev), a C compiler and nasm.
set -euo pipefail
out="$(realpath -m "${1:?usage: ffmpeg_nvdec.sh OUT_DIR}")"
version=5.1.9
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
curl -fsSL -o ffmpeg.tar.xz "http://deb.debian.org/debian/pool/main/f/ffmpeg/ffmpeg_${version}.orig.tar.xz"
tar xf ffmpeg.tar.xz
cd "ffmpeg-${version}"
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
