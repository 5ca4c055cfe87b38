#!/usr/bin/env bash
# A/B timing of the segment reductions on one GPU: builds the working tree and one or more other
# trees (`git archive` tarballs) side by side, then runs scripts/time_reductions.py with each build
# on the same card, in interleaved rounds (every build once per round, tarballs first, so that clock
# and temperature drift spread over all of them).
#
# Usage: scripts/gpu_ab.sh [--rounds R] TAR... [-- time_reductions.py arguments...]
#   e.g. git archive main -o .base/main.tar (on the workstation; .base/ is not tracked), carry
#   .base to the GPU machine, then: scripts/gpu_ab.sh .base/main.tar -- --graphs uniform:1000000:16
# Each build is labelled by its tarball's name (the working tree: working-tree). Build logs go to
# $OUT (or /tmp); the working tree's build stays in build/gpu for the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=2
if [ "${1:-}" = --rounds ]; then rounds=$2; shift 2; fi
tars=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do tars+=("$(realpath "$1")"); shift; done
[ "${1:-}" = -- ] && shift
logs=${OUT:-/tmp}
labels=() roots=() pids=()
for tar in "${tars[@]}"; do
  label=$(basename "$tar" .tar)
  root=$(mktemp -d)
  tar -xf "$tar" -C "$root"
  (cd "$root" && scripts/gpu_build.sh build/gpu >"$logs/build-$label.log" 2>&1) &
  pids+=($!) labels+=("$label") roots+=("$root")
done
scripts/gpu_build.sh build/gpu >"$logs/build.log" 2>&1
for pid in "${pids[@]}"; do wait "$pid"; done
labels+=(working-tree) roots+=("$PWD")
for ((round = 1; round <= rounds; ++round)); do
  for k in "${!labels[@]}"; do
    PYTHONPATH="${roots[$k]}/python" "${PYTHON:-python3}" scripts/time_reductions.py \
      --label "${labels[$k]} (round $round)" "$@"
  done
done
