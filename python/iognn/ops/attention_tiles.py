"""Attention on the tile layout (Tensor Cores on a GPU) - the Graph Transformer's, GAT's and
GATv2's - and the choice between it and the CSR path.

The tile path computes what :func:`iognn.ops.transformer_attention`,
:func:`iognn.ops.gat_attention` and :func:`iognn.ops.gatv2_attention` compute without edge
features, dropout or a returned alpha, over the graph's tile layout
(:func:`iognn.graph.tile_layout`: row windows of 16 destinations, 8-wide tiles of their distinct
sources): per window a tile's block of scores (the Transformer: its 16 query rows against the
tile's key rows, a block product; GAT: ``leaky_relu(alpha_src[j] + alpha_dst[i])`` elementwise;
GATv2: ``att . leaky_relu(x_dst[i] + x_src[j])`` per slot on the CUDA cores), an online softmax
per row and the aggregation of the tile's value rows (GAT: ``x``; GATv2: ``x_src``) as a block
product (TF32 for fp32, fp16 / bf16; fp32 accumulation). A duplicate edge counts once per copy in
the softmax, as in PyG: the tiles carry the multiplicity of each (destination, source) pair. The
backward runs without atomics (deterministic): the destination rows' gradients (query; alpha_dst;
x_dst and each window's share of GATv2's att, summed over the windows in a fixed order) over the
same windows, the source rows' (key and value; x and alpha_src; x_src) over the windows of the
transposed layout (windows of sources, columns of destinations). Contract:
``csrc/kernels/attention_tiles_types.h``.

Which path runs is decided per op, graph, dtype, heads, channels and direction under the graph's
``tile_policy`` (``"csr"``, ``"auto"``, ``"tiles"``: ``ops/_tile_choice.py``); heads wider than
:data:`MAX_CHANNELS` stay on the CSR path. The choices are in :func:`plans` and
``Graph.stats["tile_plans"]``.
"""
from __future__ import annotations

from typing import Callable, Dict, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from . import _tile_choice as choice
from ._checks import acc_dtype
from .attention import _graph_tensors

ops = torch.ops.iognn

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


class Variant(NamedTuple):
    """An attention's two paths: ``forward(graph, inputs, param) -> (out, lse)`` and
    ``backward(graph, inputs, out, lse, grad_out, param) -> grads`` (one per input, None for an
    absent one) on the tiles and on CSR, and the graph attribute that keeps its plans."""
    name: str
    store: str
    tiles_forward: Callable
    tiles_backward: Callable
    csr_forward: Callable
    csr_backward: Callable


def _layouts(graph, dtype):
    return (*_layout_args(graph, False, dtype), *_layout_args(graph, True, dtype))


def _variant(name: str, store: str, forward_args: Callable = lambda graph: (),
             grads: Callable = lambda grads, inputs: tuple(grads[:3])) -> Variant:
    """The Variant of the ops ``<name>_tiles_forward`` / ``_backward`` and ``<name>_attention`` /
    ``_backward`` (no edge features, dropout or alpha): ``forward_args(graph)``, what the tile
    forward takes after the inputs and before the parameter; ``grads(grads, inputs)``, the inputs'
    gradients from either backward's outputs."""
    def tiles_forward(graph, inputs, param):
        return getattr(ops, f"{name}_tiles_forward")(
            *_layout_args(graph, False, inputs[0].dtype), *inputs, *forward_args(graph), param)

    def tiles_backward(graph, inputs, out, lse, grad, param):
        return grads(getattr(ops, f"{name}_tiles_backward")(
            *_layouts(graph, inputs[0].dtype), *inputs, out, lse, grad, param), inputs)

    def csr_forward(graph, inputs, param):
        return getattr(ops, f"{name}_attention")(
            *_graph_tensors(graph), *inputs, None, None, param, 0.0, 0, False)[:2]

    def csr_backward(graph, inputs, out, lse, grad, param):
        return grads(getattr(ops, f"{name}_attention_backward")(
            *_graph_tensors(graph), *inputs, None, None, lse, grad, None, param, 0.0, 0), inputs)

    return Variant(name, store, tiles_forward, tiles_backward, csr_forward, csr_backward)


# inputs (query, key, value), param: the scale.
TRANSFORMER = _variant("transformer", "_attention_tile_plans")
# inputs (x, alpha_src, alpha_dst or None), param: the negative slope.
GAT = _variant("gat", "_gat_tile_plans", lambda graph: (graph.num_dst_nodes,),
               lambda grads, xa: (*grads[:2], grads[2] if xa[2] is not None else None))
# inputs (x_src, x_dst, att [H, C]), param: the negative slope.
GATV2 = _variant("gatv2", "_gatv2_tile_plans")

VARIANTS = {v.name: v for v in (TRANSFORMER, GAT, GATV2)}


class _TileAttention(torch.autograd.Function):
    """A variant's attention on the chosen path per direction. Both paths keep the same lse (the
    log of each row's softmax denominator), so either backward follows either forward."""

    @staticmethod
    def forward(ctx, variant, graph, param, tiles_forward, tiles_backward, *inputs):
        run = variant.tiles_forward if tiles_forward else variant.csr_forward
        out, lse = run(graph, inputs, param)
        ctx.variant, ctx.graph, ctx.param, ctx.tiles_backward = variant, graph, param, tiles_backward
        ctx.save_for_backward(*inputs, out, lse)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        *inputs, out, lse = ctx.saved_tensors
        v = ctx.variant
        run = v.tiles_backward if ctx.tiles_backward else v.csr_backward
        grads = run(ctx.graph, inputs, out, lse, grad_out.contiguous(), ctx.param)
        return (None, None, None, None, None, *grads)


def _measure(v: Variant, graph, inputs, param) -> choice.Plan:
    """Times both paths once per direction on the callers' shapes."""
    t = choice.time_ms
    with torch.no_grad():
        out, lse = v.tiles_forward(graph, inputs, param)
        grad = torch.ones_like(out)
        return choice.timed(
            (t(lambda: v.csr_forward(graph, inputs, param)),
             t(lambda: v.tiles_forward(graph, inputs, param))),
            (t(lambda: v.csr_backward(graph, inputs, out, lse, grad, param)),
             t(lambda: v.tiles_backward(graph, inputs, out, lse, grad, param))), graph)


def choose_variant(v: Variant, graph, inputs: Sequence[Optional[Tensor]],
                   param: float) -> Tuple[bool, bool]:
    """(tiles for the forward, tiles for the backward) of ``v`` on ``graph`` for heads like
    ``inputs[0]`` (``[N, H, C]``; the other inputs only serve the timing)."""
    ref = inputs[0]
    takes = choice.tensor_cores_take(ref) and ref.size(2) <= MAX_CHANNELS
    return choice.choose(graph, ref, takes, v.store, (ref.dtype, ref.size(1), ref.size(2)),
                         lambda: _measure(v, graph, tuple(inputs), param),
                         choice.ATTENTION_MIN_FILL)


def choose(graph, query: Tensor, key: Tensor, value: Tensor, scale: float) -> Tuple[bool, bool]:
    """The Transformer's paths (:func:`choose_variant`)."""
    return choose_variant(TRANSFORMER, graph, (query, key, value), scale)


def choose_gat(graph, x: Tensor, alpha_src: Tensor, alpha_dst: Optional[Tensor],
               negative_slope: float) -> Tuple[bool, bool]:
    """GAT's paths (:func:`choose_variant`)."""
    return choose_variant(GAT, graph, (x, alpha_src, alpha_dst), negative_slope)


def choose_gatv2(graph, x_src: Tensor, x_dst: Tensor, att: Tensor,
                 negative_slope: float) -> Tuple[bool, bool]:
    """GATv2's paths (:func:`choose_variant`)."""
    return choose_variant(GATV2, graph, (x_src, x_dst, att), negative_slope)


def plans(graph, op: str = "transformer") -> Dict[str, dict]:
    """The choices made for ``op`` (``"transformer"``, ``"gat"``, ``"gatv2"``) on ``graph`` so far,
    keyed ``"<dtype> H=<heads> C=<channels>"``."""
    return {f"{str(dtype).replace('torch.', '')} H={heads} C={channels}": plan
            for (dtype, heads, channels), plan in
            getattr(graph, VARIANTS[op].store, {}).items()}


def tile_transformer(graph, query: Tensor, key: Tensor, value: Tensor, scale: float,
                     tiles_forward: bool, tiles_backward: bool) -> Tensor:
    """``transformer_attention`` (no edge features, dropout or alpha) on the given paths."""
    return _TileAttention.apply(TRANSFORMER, graph, scale, tiles_forward, tiles_backward, query,
                                key, value)


def tile_gat(graph, x: Tensor, alpha_src: Tensor, alpha_dst: Optional[Tensor],
             negative_slope: float, tiles_forward: bool, tiles_backward: bool) -> Tensor:
    """``gat_attention`` (no edge features, dropout or alpha) on the given paths."""
    return _TileAttention.apply(GAT, graph, negative_slope, tiles_forward, tiles_backward, x,
                                alpha_src, alpha_dst)


def tile_gatv2(graph, x_src: Tensor, x_dst: Tensor, att: Tensor, negative_slope: float,
               tiles_forward: bool, tiles_backward: bool) -> Tensor:
    """``gatv2_attention`` (no edge features, dropout or alpha; ``att`` ``[H, C]``) on the given
    paths."""
    return _TileAttention.apply(GATV2, graph, negative_slope, tiles_forward, tiles_backward, x_src,
                                x_dst, att)
