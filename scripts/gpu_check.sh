#!/usr/bin/env bash
# One-shot end-to-end check of a GPU machine: build, CUDA tests, differential fuzzing against PyG,
# scale limits, compute-sanitizer, full benchmark.
#
# Usage: scripts/gpu_check.sh [OUT_DIR]          (default: $IOGNN_GPU_OUT or ./gpu-out)
# Needs only what such a machine already has: PyTorch (CUDA 13 build), PyG 2.8, nvcc, cmake, ninja.
# No network and no pip installs. Real graphs are read from $IOGNN_DATA (default ./.data when present).
# Environment: IOGNN_BENCH_SUITE (default full), IOGNN_BENCH_ARGS (the bench's selection instead of
# --suite, e.g. "--graphs uniform:1000000:16 --ops min,max --level op"), IOGNN_SKIP_BENCH=1,
# IOGNN_SKIP_SANITIZER=1, IOGNN_SKIP_FUZZ=1, IOGNN_SKIP_SLOW=1,
# IOGNN_FUZZ_CASES (default 3000), TORCH_CUDA_ARCH_LIST (default 9.0), PYTHON (default python3),
# IOGNN_PYTEST_SELECT (test files or node ids for the CUDA pytest steps; default tests/python).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${IOGNN_GPU_OUT:-gpu-out}}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
PY=${PYTHON:-python3}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
if [ -z "${IOGNN_DATA:-}" ] && [ -d .data ]; then export IOGNN_DATA=$PWD/.data; fi
declare -A STATUS TIME
t0=$(date +%s)

step() {  # step NAME LOGFILE COMMAND...: runs COMMAND, records status and time, never aborts the script
  local name=$1 log=$2; shift 2
  local s=$(date +%s)
  echo "== ${name}: $*"
  "$@" >"$OUT/$log" 2>&1
  local rc=$?
  STATUS[$name]=$([ $rc -eq 0 ] && echo ok || echo "FAIL(rc=$rc)")
  TIME[$name]=$(( $(date +%s) - s ))
  tail -n 5 "$OUT/$log"
}

{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  $PY -c "import torch, torch_geometric as g; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'pyg', g.__version__)"
  nvcc --version | tail -n 2
  command -v compute-sanitizer
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

step build build.log scripts/gpu_build.sh build/gpu

if [ -f /usr/include/gtest/gtest.h ] || [ -d /usr/lib/cmake/GTest ]; then
  step cpp-tests cpp-tests.log bash -c "cd build/gpu && ctest --output-on-failure"
else
  STATUS[cpp-tests]="not run (no GoogleTest on this machine)"; TIME[cpp-tests]=0
fi

# The slow cases (scale limits) and the fuzzing have steps of their own, below.
step pytest-cuda pytest-cuda.log $PY -m pytest -q -m "cuda and not slow" \
  -p no:cacheprovider --ignore=tests/python/test_fuzz.py ${IOGNN_PYTEST_SELECT:-tests/python} \
  --junitxml="$OUT/pytest-cuda.xml"

# Differential fuzzing against PyG on the GPU (every failure names its seed and a repro line);
# spread over 8 workers when pytest-xdist is installed (the PyG reference runs on the CPU).
if [ "${IOGNN_SKIP_FUZZ:-0}" != 1 ]; then
  workers=$($PY -c "import xdist" 2>/dev/null && echo "-n 8")
  step fuzz-cuda fuzz-cuda.log env IOGNN_FUZZ_CASES="${IOGNN_FUZZ_CASES:-3000}" \
    $PY -m pytest -q -m cuda -p no:cacheprovider $workers tests/python/test_fuzz.py \
    --junitxml="$OUT/fuzz-cuda.xml"
fi

# Slow CUDA cases: scale limits (a 10^7-in-edge super-node, N * F >= 2^31, > 2^31 edges; each
# skipped with the memory it needs when the device has less) and the other slow tests.
[ "${IOGNN_SKIP_SLOW:-0}" != 1 ] && step pytest-slow pytest-slow.log $PY -m pytest -q -rs \
  -m "cuda and slow" -p no:cacheprovider ${IOGNN_PYTEST_SELECT:-tests/python} \
  --junitxml="$OUT/pytest-slow.xml"

if [ "${IOGNN_SKIP_SANITIZER:-0}" != 1 ] && command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck synccheck initcheck; do
    step "sanitizer-$tool" "sanitizer-$tool.log" compute-sanitizer --tool "$tool" \
      --error-exitcode 1 --target-processes all \
      $PY -m pytest -q -m "cuda and sanitizer" -p no:cacheprovider tests/python
  done
fi

if [ "${IOGNN_SKIP_BENCH:-0}" != 1 ]; then
  # shellcheck disable=SC2086 (IOGNN_BENCH_ARGS is a list of arguments)
  step bench bench.log $PY -m iognn.bench ${IOGNN_BENCH_ARGS:---suite ${IOGNN_BENCH_SUITE:-full}} \
    --device cuda \
    --out "$OUT/bench"
fi

echo
echo "== gpu_check summary ($(head -n 1 "$OUT/env.txt"), $(( $(date +%s) - t0 )) s total)"
printf '%-20s %-40s %6s\n' step status seconds
for k in build cpp-tests pytest-cuda fuzz-cuda pytest-slow sanitizer-memcheck \
         sanitizer-racecheck sanitizer-synccheck sanitizer-initcheck bench; do
  [ -n "${STATUS[$k]:-}" ] && printf '%-20s %-40s %6s\n' "$k" "${STATUS[$k]}" "${TIME[$k]}"
done
for log in pytest-cuda fuzz-cuda pytest-slow; do
  [ -f "$OUT/$log.log" ] && echo "$log: $(grep -E "passed|failed" "$OUT/$log.log" | tail -n 1)"
done
[ -f "$OUT/bench/summary.md" ] && cat "$OUT/bench/summary.md"
exit 0
