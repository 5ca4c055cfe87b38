#!/usr/bin/env bash
# A/B timing of several builds on one GPU: builds the working tree and one or more other trees
# (`git archive` tarballs) side by side, then runs one command with each build on the same card,
# in interleaved rounds (every build once per round, tarballs first, so that clock and temperature
# drift spread over all of them).
#
# Usage: scripts/gpu_ab.sh [--rounds R] [--with FILE]... TAR... [-- COMMAND...]
#   COMMAND runs in the repository root with PYTHONPATH on the build's python/ folder and
#   IOGNN_AB_LABEL set to "<label> (round r)"; the default is scripts/time_reductions.py. Each
#   build is labelled by its tarball's name (the working tree: working-tree).
#   --with FILE copies FILE from the working tree into every tarball's tree, replacing its own (a
#   benchmark module the older tree lacks, e.g. python/iognn/bench/workloads.py and the bench CLI
#   that offers it).
#   e.g. git archive f316023 -o .base/f316023.tar (on the workstation; .base/ is not tracked), carry
#   .base to the GPU machine, then:
#   scripts/gpu_ab.sh .base/f316023.tar -- python3 scripts/time_reductions.py --graphs uniform:1000000:16
# Build logs go to $OUT (or /tmp); the working tree's build stays in build/gpu for the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=2
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --with) extra+=("$2"); shift 2 ;;
    *) break ;;
  esac
done
tars=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do tars+=("$(realpath "$1")"); shift; done
[ "${1:-}" = -- ] && shift
command=("$@")
[ ${#command[@]} -eq 0 ] && command=("${PYTHON:-python3}" scripts/time_reductions.py)
logs=${OUT:-/tmp}
labels=() roots=() pids=()
for tar in "${tars[@]}"; do
  label=$(basename "$tar" .tar)
  root=$(mktemp -d)
  tar -xf "$tar" -C "$root"
  for file in "${extra[@]}"; do
    mkdir -p "$root/$(dirname "$file")"
    cp "$file" "$root/$file"
  done
  (cd "$root" && scripts/gpu_build.sh build/gpu >"$logs/build-$label.log" 2>&1) &
  pids+=($!) labels+=("$label") roots+=("$root")
done
scripts/gpu_build.sh build/gpu >"$logs/build.log" 2>&1
for pid in "${pids[@]}"; do wait "$pid"; done
labels+=(working-tree) roots+=("$PWD")
for ((round = 1; round <= rounds; ++round)); do
  for k in "${!labels[@]}"; do
    IOGNN_AB_LABEL="${labels[$k]} (round $round)" PYTHONPATH="${roots[$k]}/python" "${command[@]}"
  done
done
