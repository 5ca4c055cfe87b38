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

Which path runs is decided per graph, dtype, heads, channels and direction under the graph's
``tile_policy`` (``"csr"``, ``"auto"``, ``"tiles"``: ``ops/_tile_choice.py``); heads wider than
:data:`MAX_CHANNELS` stay on the CSR path. The choices are in :func:`plans` and
``Graph.stats["tile_plans"]``.
"""
from __future__ import annotations

from typing import Dict, Tuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from . import _tile_choice as choice
from ._checks import acc_dtype

# The widest head the CUDA kernels take (kernels/cuda/attention_tiles.h): wider heads stay on the
# CSR path.
MAX_CHANNELS = 128

def _counts(graph, layout, transposed: bool, dtype: torch.dtype) -> Tensor:
    """The multiplicity of each slot's (destination, source) pair: propagate's unweighted sum
    values of the layout, kept on the graph with them."""
    from .propagate_tiles import _values
    return _values(graph, layout, None, "sum", transposed, acc_dtype(dtype))


def _layout_args(graph, transposed: bool, dtype: torch.dtype):
    layout = choice.layout(graph, transposed)
    return (layout.window_ptr, layout.tile_cols, layout.row_order,
            _counts(graph, layout, transposed, dtype))


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


def _measure(graph, query, key, value, scale) -> choice.Plan:
    """Times both paths once per direction on the callers' shapes."""
    t = choice.time_ms
    with torch.no_grad():
        out, lse = _tiles_forward(graph, query, key, value, scale)
        grad = torch.ones_like(out)
        return choice.timed(
            (t(lambda: _csr_forward(graph, query, key, value, scale)),
             t(lambda: _tiles_forward(graph, query, key, value, scale))),
            (t(lambda: _csr_backward(graph, query, key, value, lse, grad, scale)),
             t(lambda: _tiles_backward(graph, query, key, value, out, lse, grad, scale))), graph)


def choose(graph, query: Tensor, key: Tensor, value: Tensor, scale: float) -> Tuple[bool, bool]:
    """(tiles for the forward, tiles for the backward) of the attention on ``graph`` for heads
    like ``query`` (key and value only serve the timing)."""
    takes = choice.tensor_cores_take(query) and query.size(2) <= MAX_CHANNELS
    return choice.choose(graph, query, takes, "_attention_tile_plans",
                         (query.dtype, query.size(1), query.size(2)),
                         lambda: _measure(graph, query, key, value, scale))


def plans(graph) -> Dict[str, dict]:
    """The choices made on ``graph`` so far, keyed ``"<dtype> H=<heads> C=<channels>"``."""
    return {f"{str(dtype).replace('torch.', '')} H={heads} C={channels}": plan
            for (dtype, heads, channels), plan in
            getattr(graph, "_attention_tile_plans", {}).items()}


def tile_transformer(graph, query: Tensor, key: Tensor, value: Tensor, scale: float,
                     tiles_forward: bool, tiles_backward: bool) -> Tensor:
    """``transformer_attention`` (no edge features, dropout or alpha) on the given paths."""
    return _TileTransformer.apply(query, key, value, graph, scale, tiles_forward, tiles_backward)
