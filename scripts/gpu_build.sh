#!/usr/bin/env bash
# Builds iognn._C in place (python/iognn) against the machine's torch, with CUDA, for a GPU machine.
# Usage: scripts/gpu_build.sh [BUILD_DIR]   (default build/gpu; TORCH_CUDA_ARCH_LIST default 9.0)
set -euo pipefail
cd "$(dirname "$0")/.."
archs=${TORCH_CUDA_ARCH_LIST:-9.0}
# Prefer the distribution's g++ over a custom toolchain: the /opt/gcc build found on the GPU machines
# links shared objects with -Bsymbolic (in its specs), which gives the extension private copies of
# libstdc++'s template statics (locale facet ids) and crashes the first ostream use.
compiler=()
if [ -z "${CXX:-}" ] && [ -x /usr/bin/g++ ]; then
  compiler=(-DCMAKE_CXX_COMPILER=/usr/bin/g++ -DCMAKE_CUDA_HOST_COMPILER=/usr/bin/g++)
fi
cmake -S . -B "${1:-build/gpu}" -G Ninja -DIOGNN_BUILD_PYTHON=ON "${compiler[@]}" \
  -DPython_EXECUTABLE="$(command -v "${PYTHON:-python3}")" \
  -DIOGNN_PYTHON_OUTPUT_DIR="$PWD/python/iognn" -DIOGNN_WITH_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="${archs//./}" >/dev/null
cmake --build "${1:-build/gpu}" -j "$(nproc)"
