#!/usr/bin/env bash
# On a GPU machine without Rust: installs a wheel built elsewhere and runs the GPU tests and the
# GPU benchmark of the Python package.
#
#   (where Rust is) python3 -m maturin build --release --manifest-path python/Cargo.toml \
#                       --no-default-features --auditwheel skip --out .whl
#                   python3 -m pip download pytest --python-version 3.12 --only-binary=:all: -d .whl
#   (on the GPU)    bash python/gpu_check.sh [OUT_DIR]
#
# The wheel is built without video files and cameras (--no-default-features), so that it does
# not need the build machine's FFmpeg libraries. NVRTC is taken from the nvidia-cuda-nvrtc pip
# package when there is one. Writes bench.json (and the logs) into OUT_DIR (default: .).
set -u
cd "$(dirname "$0")/.."
out="${1:-.}"
mkdir -p "$out"
wheel=$(ls .whl/markerscope-*.whl 2>/dev/null | head -1)
if [ -z "$wheel" ]; then
    echo "gpu_check.sh: no wheel in .whl/; build one first (see the top of this script)" >&2
    exit 2
fi
nvrtc=$(python3 -c 'import nvidia.cuda_nvrtc as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null)
if [ -n "$nvrtc" ]; then
    export LD_LIBRARY_PATH="$nvrtc${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
target=$(mktemp -d)
export PIP_BREAK_SYSTEM_PACKAGES=1 PIP_DISABLE_PIP_VERSION_CHECK=1
python3 -m pip install -q --no-deps --target "$target" "$wheel" || exit 2
# A machine without network gets pytest from wheels carried in .whl/ beside ours
# (python3 -m pip download pytest --python-version 3.12 --only-binary=:all: -d .whl).
if ! python3 -c "import pytest" 2>/dev/null; then
    python3 -m pip install -q --no-index --find-links .whl --target "$target" pytest || exit 2
fi
export PYTHONPATH="$target${PYTHONPATH:+:$PYTHONPATH}"
python3 -c "import markerscope as ms; print(ms.devices()[0])"
status=0
# test_analyze.py needs the markerscope binary, which a machine without Rust does not have.
python3 -m pytest python/tests --ignore=python/tests/test_analyze.py -q -p no:cacheprovider -rs 2>&1 |
    tee "$out/pytest.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
python3 python/bench/bench_gpu.py --json "$out/bench.json" 2>&1 | tee "$out/bench.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
exit "$status"
