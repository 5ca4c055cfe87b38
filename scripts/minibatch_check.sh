#!/usr/bin/env bash
# Mini-batch training check on a GPU machine (run after scripts/gpu_build.sh has built iognn._C):
# synthetic-products at full scale (generated once into $IOGNN_CACHE, then loaded), the epoch
# target (3-layer SAGE, hidden 256, fan-out 15,10,5, batch 1024, graph on the GPU) against PyG's
# layers on the same batches, GAT and GCN for an epoch, and the bench's minibatch part.
#
# Usage: scripts/minibatch_check.sh              (everything on stdout; each step under a timeout,
#                                                 470 s in all at most)
# Environment: IOGNN_DATA (real graphs, for the bench's amazon_computers rows), IOGNN_CACHE (where
# synthetic-products is cached: about 2 GB at full scale), PYTHON (default python3),
# IOGNN_PRODUCTS_SCALE (default 1), IOGNN_GRAPH_DEVICE (default auto: the GPU when this build samples
# there, else the host with a notice; 'cuda' insists, 'cpu' times the host path).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
SCALE=${IOGNN_PRODUCTS_SCALE:-1}
DATASET="synthetic-products:$SCALE"
GRAPH_DEVICE=${IOGNN_GRAPH_DEVICE:-auto}
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
t0=$(date +%s)
failed=()

step() {  # step NAME SECONDS COMMAND...: runs COMMAND under timeout, never aborts the script
  local name=$1 limit=$2; shift 2
  local s=$(date +%s)
  echo
  echo "== $name (limit ${limit} s): $*"
  timeout "$limit" "$@" 2>&1
  local rc=$?
  echo "== $name: rc=$rc, $(( $(date +%s) - s )) s"
  [ $rc -eq 0 ] || failed+=("$name(rc=$rc)")
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "no nvidia-smi"
$PY -c "import torch, torch_geometric as g; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'pyg', g.__version__, 'threads', torch.get_num_threads())"
echo "IOGNN_DATA=${IOGNN_DATA:-} IOGNN_CACHE=${IOGNN_CACHE:-}"

step generate 60 $PY -c "
import time, sys
from iognn.synthetic_products import load_synthetic_products, statistics, cache_path
scale = float('$SCALE')
start = time.perf_counter()
data, seconds = load_synthetic_products(scale)
print('generated in %.1f s' % seconds if seconds is not None else 'loaded from the cache',
      '(%.1f s in all), %s' % (time.perf_counter() - start, cache_path(scale, 0)))
print(statistics(data))
"

TRAIN=(-m iognn train --loader neighbor --dataset "$DATASET" --num-neighbors 15,10,5
       --batch-size 1024 --graph-device "$GRAPH_DEVICE" --eval-test-nodes 20000)
step sage-compare-pyg 120 $PY "${TRAIN[@]}" --model sage --hidden 256 --epochs 1 --compare pyg
step sage-profile-split 55 $PY "${TRAIN[@]}" --model sage --hidden 256 --epochs 1 --profile-split
step gat 60 $PY "${TRAIN[@]}" --model gat --hidden 256 --heads 8 --epochs 1
step gcn 55 $PY "${TRAIN[@]}" --model gcn --hidden 256 --epochs 1

step bench-minibatch 120 $PY -m iognn bench --suite workloads --parts minibatch \
  --minibatch-scale "$SCALE" --warmup 2 --repeats 10 --out "${TMPDIR:-/tmp}/iognn-minibatch-bench"
cat "${TMPDIR:-/tmp}/iognn-minibatch-bench/workloads.md" 2>/dev/null

echo
echo "== minibatch_check: $(( $(date +%s) - t0 )) s; ${#failed[@]} failed${failed:+: ${failed[*]}}"
[ ${#failed[@]} -eq 0 ]
