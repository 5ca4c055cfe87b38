"""Graph Transformer attention on the tile layout (Tensor Cores on a GPU), and the choice between
it and the CSR path.

The tile path computes what :func:`iognn.ops.transformer_attention` computes without edge
features, dropout or a returned alpha, over the graph's tile layout
(:func:`iognn.graph.tile_layout`: row windows of 16 destinations, 8-wide tiles of their distinct
sources): per window the scores of its 16 query rows against a tile's key rows, an online softmax
per row and the aggregation of the tile's value rows, as block products (TF32 for fp32, fp16 /
bf16; fp32 accumulation). A duplicate edge counts once per copy in the softmax, as in PyG: the
tiles carry the multiplicity of each (destination, source) pair. The backward runs without atomics
(deterministic): the query gradient over the same windows, the key and value gradients over the
windows of the transposed layout (windows of sources, columns of destinations). Contract:
``csrc/kernels/attention_tiles_types.h``.

Which path runs is decided per graph, dtype, heads and channels and direction by :func:`choose`,
under the graph's ``tile_policy`` (as for propagate, ``ops/propagate_tiles.py``):

- ``"csr"`` (the default): never the tiles.
- ``"auto"``: the tiles are tried where they can run (a CUDA graph, fp16 / bf16 features, or fp32
  with ``torch.backends.cuda.matmul.allow_tf32``, at most :data:`MAX_CHANNELS` channels per head)
  and the layout's fill reaches :data:`MIN_FILL`; then both paths are timed once (a few calls
  each, on the caller's features) and the faster one is kept for that (dtype, heads, channels) and
  direction. Inside ``torch.compile`` or a CUDA graph capture nothing is timed: a choice made
  earlier is reused, else the CSR path runs.
- ``"tiles"``: the tiles wherever they can run, without timing. On the CPU this runs the host
  twin of the kernels (a reference for tests: slower than the CSR kernels).

The choices are visible in :func:`plans`.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

POLICIES = ("csr", "auto", "tiles")

# Below this fill (distinct pairs / tile slots) the tiles are not timed: most of each block
# product would be padding.
MIN_FILL = 0.12

# The widest head the CUDA kernels take (kernels/cuda/attention_tiles.h): wider heads stay on the
# CSR path.
MAX_CHANNELS = 128

_TIMED_CALLS = 3
_SLOTS = 128  # (row, column) slots of a 16 x 8 tile


def _layout(graph, transposed: bool):
    from ..graph import tile_layout
    return tile_layout(graph, transposed=transposed)


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def supported(query: Tensor) -> bool:
    """Whether the tile kernels can run on heads like ``query`` (device, precision, width)."""
    if not query.is_cuda or query.size(2) > MAX_CHANNELS:
        return False
    if query.dtype in (torch.float16, torch.bfloat16):
        return True
    return query.dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32


def _counts(graph, layout, transposed: bool, dtype: torch.dtype) -> Tensor:
    """The multiplicity of each slot's (destination, source) pair, kept on the graph."""
    key = (transposed, dtype, graph.device)
    cache = graph.__dict__.setdefault("_attention_tile_counts", {})
    if key not in cache:
        cache[key] = torch.bincount(layout.edge_slot,
                                    minlength=layout.num_tiles * _SLOTS).to(dtype)
    return cache[key]


def _layout_args(graph, transposed: bool, dtype: torch.dtype):
    layout = _layout(graph, transposed)
    return (layout.window_ptr, layout.tile_cols, layout.row_order,
            _counts(graph, layout, transposed, _acc_dtype(dtype)))


def _tiles_forward(graph, query, key, value, scale) -> Tuple[Tensor, Tensor]:
    return torch.ops.iognn.transformer_tiles_forward(
        *_layout_args(graph, False, query.dtype), query, key, value, scale)


def _tiles_backward(graph, query, key, value, out, lse, grad_out, scale):
    return torch.ops.iognn.transformer_tiles_backward(
        *_layout_args(graph, False, query.dtype), *_layout_args(graph, True, query.dtype),
        query, key, value, out, lse, grad_out, scale)


def _graph_tensors(graph):
    return (graph.rowptr, graph.col, graph.eid, graph.colptr, graph.row, graph.csc2csr)


def _csr_forward(graph, query, key, value, scale) -> Tuple[Tensor, Tensor]:
    out, lse, _ = torch.ops.iognn.transformer_attention(
        *_graph_tensors(graph), query, key, value, None, None, scale, 0.0, 0, False)
    return out, lse


def _csr_backward(graph, query, key, value, lse, grad_out, scale):
    grads = torch.ops.iognn.transformer_attention_backward(
        *_graph_tensors(graph), query, key, value, None, None, lse, grad_out, None, scale, 0.0, 0)
    return grads[:3]


class _TileTransformer(torch.autograd.Function):
    """Transformer attention on the chosen path per direction. Both paths keep the same lse (the
    log of each row's softmax denominator), so either backward follows either forward."""

    @staticmethod
    def forward(ctx, query, key, value, graph, scale, tiles_forward, tiles_backward):
        run = _tiles_forward if tiles_forward else _csr_forward
        out, lse = run(graph, query, key, value, scale)
        ctx.graph, ctx.scale, ctx.tiles_backward = graph, scale, tiles_backward
        ctx.save_for_backward(query, key, value, out, lse)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        query, key, value, out, lse = ctx.saved_tensors
        grad_out = grad_out.contiguous()
        if ctx.tiles_backward:
            grads = _tiles_backward(ctx.graph, query, key, value, out, lse, grad_out, ctx.scale)
        else:
            grads = _csr_backward(ctx.graph, query, key, value, lse, grad_out, ctx.scale)
        return (*grads, None, None, None, None)


def _time_ms(fn) -> float:
    fn()  # warm-up (and the lazy layout and counts)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(_TIMED_CALLS):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / _TIMED_CALLS


def _plan(times: Tuple[float, float], fill: float, reason: str) -> dict:
    csr_ms, tiles_ms = times
    return {"path": "tiles" if tiles_ms < csr_ms else "csr", "csr_ms": csr_ms,
            "tiles_ms": tiles_ms, "fill": fill, "reason": reason}


def _fixed(path: str, fill: Optional[float], reason: str) -> Dict[str, dict]:
    plan = {"path": path, "csr_ms": None, "tiles_ms": None, "fill": fill, "reason": reason}
    return {"forward": dict(plan), "backward": dict(plan)}


def _measure(graph, query, key, value, scale) -> Dict[str, dict]:
    """Times both paths once per direction on the callers' shapes; returns the two plans."""
    with torch.no_grad():
        out, lse = _tiles_forward(graph, query, key, value, scale)
        grad = torch.ones_like(out)
        fwd = (_time_ms(lambda: _csr_forward(graph, query, key, value, scale)),
               _time_ms(lambda: _tiles_forward(graph, query, key, value, scale)))
        bwd = (_time_ms(lambda: _csr_backward(graph, query, key, value, lse, grad, scale)),
               _time_ms(lambda: _tiles_backward(graph, query, key, value, out, lse, grad,
                                                scale)))
    return {"forward": _plan(fwd, _layout(graph, False).fill, "timed"),
            "backward": _plan(bwd, _layout(graph, True).fill, "timed")}


def choose(graph, query: Tensor, key: Tensor, value: Tensor, scale: float) -> Tuple[bool, bool]:
    """(tiles for the forward, tiles for the backward) of the attention on ``graph`` for heads
    like ``query`` (key and value only serve the timing)."""
    policy = getattr(graph, "tile_policy", "csr")
    runs = supported(query) or (policy == "tiles" and query.device.type == "cpu")
    if policy == "csr" or not runs or query.size(0) == 0:
        return False, False
    plan_key = (query.dtype, query.size(1), query.size(2))
    known = graph.__dict__.setdefault("_attention_tile_plans", {})
    plan = known.get(plan_key)
    if plan is None:
        if policy == "tiles":
            plan = _fixed("tiles", None, "tile_policy='tiles'")
        elif torch.compiler.is_compiling() or torch.cuda.is_current_stream_capturing():
            return False, False  # nothing can be timed here; a later eager call decides
        else:
            fill = _layout(graph, False).fill
            plan = (_measure(graph, query, key, value, scale) if fill >= MIN_FILL
                    else _fixed("csr", fill, f"fill {fill:.3f} < {MIN_FILL}"))
        known[plan_key] = plan
    return plan["forward"]["path"] == "tiles", plan["backward"]["path"] == "tiles"


def plans(graph) -> Dict[str, dict]:
    """The choices made on ``graph`` so far, keyed ``"<dtype> H=<heads> C=<channels>"``."""
    return {f"{str(dtype).replace('torch.', '')} H={heads} C={channels}": plan
            for (dtype, heads, channels), plan in
            getattr(graph, "_attention_tile_plans", {}).items()}


def tile_transformer(graph, query: Tensor, key: Tensor, value: Tensor, scale: float,
                     tiles_forward: bool, tiles_backward: bool) -> Tensor:
    """``transformer_attention`` (no edge features, dropout or alpha) on the given paths."""
    return _TileTransformer.apply(query, key, value, graph, scale, tiles_forward, tiles_backward)
