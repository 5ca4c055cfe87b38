#!/usr/bin/env bash
# Builds iognn._C in place (python/iognn) against the machine's torch, with CUDA, for a GPU machine.
# Usage: scripts/gpu_build.sh [BUILD_DIR]   (default build/gpu; TORCH_CUDA_ARCH_LIST default 9.0)
set -euo pipefail
cd "$(dirname "$0")/.."
archs=${TORCH_CUDA_ARCH_LIST:-9.0}
# Use the distribution's g++ (IOGNN_CXX overrides), whatever CXX says: the /opt/gcc toolchain found on
# the GPU machines (exported as CXX there) links shared objects with -Bsymbolic and pulls pieces of
# its own libstdc++ into the extension, whose ostream then crashes on first use (seen: a segfault in
# std::ostream::_M_insert<long> inside _C.so on any TORCH_CHECK message with a number).
cxx=${IOGNN_CXX:-/usr/bin/g++}
compiler=()
if [ -x "$cxx" ]; then
  compiler=(-DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CUDA_HOST_COMPILER="$cxx")
  unset CXX CC CUDAHOSTCXX
fi
# The C++ tests join the same build (one compile of the CUDA core) when GoogleTest is installed.
tests=OFF
if [ -f /usr/include/gtest/gtest.h ] || [ -d /usr/lib/cmake/GTest ]; then tests=ON; fi
cmake -S . -B "${1:-build/gpu}" -G Ninja -DIOGNN_BUILD_PYTHON=ON -DIOGNN_BUILD_TESTS=$tests "${compiler[@]}" \
  -DPython_EXECUTABLE="$(command -v "${PYTHON:-python3}")" \
  -DIOGNN_PYTHON_OUTPUT_DIR="$PWD/python/iognn" -DIOGNN_WITH_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="${archs//./}" >/dev/null
cmake --build "${1:-build/gpu}" -j "$(nproc)"
