"""Propagate on the tile layout (Tensor Cores on a GPU), and the choice between it and the CSR path.

The tile path computes what :func:`iognn.ops.propagate` computes, over the graph's tile layout
(:func:`iognn.graph.tile_layout`: row windows of 16 destinations, 8-wide tiles of their distinct
sources). A window's 16 rows share every gathered source row, so a well-filled layout reads the
source features once per tile column instead of once per edge, and the products run on Tensor
Cores (TF32 for fp32, fp16 / bf16; fp32 accumulation). The row scale of ``mean`` and the edge
weights are folded into the tiles' values; the backward of ``x`` is the same product over the
transposed layout (no atomics: deterministic); the weights' gradient stays on the CSR kernels.

Which path runs is decided per graph, feature width, dtype, weighting, reduce and direction
under the graph's ``tile_policy`` (``"csr"``, ``"auto"``, ``"tiles"``: ``ops/_tile_choice.py``);
the choices are in :func:`plans` and ``Graph.stats["tile_plans"]``.
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import torch
from torch import Tensor

from . import _tile_choice as choice
from ._checks import acc_dtype


def _values(graph, layout, weight: Optional[Tensor], reduce: str, transposed: bool,
            dtype: torch.dtype) -> Tensor:
    """The tiles' values: the (CSR-order) weights, 1 / deg(destination) folded in for mean.
    Unweighted values depend on the graph alone and are kept on it."""
    key = (transposed, reduce, dtype, graph.device)
    cache = graph.__dict__.setdefault("_tile_values", {})
    if weight is None and key in cache:
        return cache[key]
    mean = graph.rowptr if reduce == "mean" else None
    if transposed:
        vals = torch.ops.iognn.propagate_tile_values(
            graph.colptr, layout.edge_slot, layout.num_tiles, weight,
            graph.csc2csr if weight is not None else None, graph.row if mean is not None else None,
            mean, dtype)
    else:
        vals = torch.ops.iognn.propagate_tile_values(
            graph.rowptr, layout.edge_slot, layout.num_tiles, weight, None, None, mean, dtype)
    if weight is None:
        cache[key] = vals
    return vals


def _spmm(graph, x: Tensor, weight: Optional[Tensor], reduce: str, bias: Optional[Tensor],
          transposed: bool) -> Tensor:
    layout = choice.layout(graph, transposed)
    vals = _values(graph, layout, weight, reduce, transposed, acc_dtype(x.dtype))
    rows = graph.num_src_nodes if transposed else graph.num_dst_nodes
    return torch.ops.iognn.propagate_tiles(layout.window_ptr, layout.tile_cols, layout.row_order,
                                           vals, x, bias, rows)


def _csr_forward(graph, x, weight, reduce, bias):
    return torch.ops.iognn.propagate(graph.rowptr, graph.col, graph.colptr, graph.row,
                                     graph.csc2csr, weight, x, reduce, bias,
                                     *graph.max_degree_hints)


def _csr_backward_x(graph, grad_out, weight, reduce):
    return torch.ops.iognn.propagate_backward_x(graph.colptr, graph.row, graph.csc2csr,
                                                graph.rowptr, weight, grad_out, reduce,
                                                graph.max_degree_hints[1])


class _TilePropagate(torch.autograd.Function):
    """out = A x + b on the chosen path per direction; grad_w on the CSR kernels."""

    @staticmethod
    def forward(ctx, x, weight, bias, graph, reduce, tiles_forward, tiles_backward):
        ctx.graph, ctx.reduce, ctx.tiles_backward = graph, reduce, tiles_backward
        ctx.has_bias = bias is not None
        ctx.save_for_backward(weight, x if weight is not None and weight.requires_grad else None)
        if tiles_forward:
            return _spmm(graph, x, weight, reduce, bias, transposed=False)
        return _csr_forward(graph, x, weight, reduce, bias)

    @staticmethod
    def backward(ctx, grad_out):
        weight, x = ctx.saved_tensors
        graph, reduce = ctx.graph, ctx.reduce
        grad_out = grad_out.contiguous()
        grad_x = grad_w = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_x = (_spmm(graph, grad_out, weight, reduce, None, transposed=True)
                      if ctx.tiles_backward else _csr_backward_x(graph, grad_out, weight, reduce))
        if weight is not None and ctx.needs_input_grad[1]:
            grad_w = torch.ops.iognn.propagate_backward_weight(
                graph.rowptr, graph.col, grad_out, x, reduce, graph.max_degree_hints[0])
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_bias = grad_out.sum(0)
        return grad_x, grad_w, grad_bias, None, None, None, None


def _measure(graph, x: Tensor, weight: Optional[Tensor], reduce: str) -> choice.Plan:
    """Times both paths once per direction on x's shape."""
    grad = torch.ones(graph.num_dst_nodes, x.size(1), dtype=x.dtype, device=x.device)
    t = choice.time_ms
    with torch.no_grad():
        return choice.timed(
            (t(lambda: _csr_forward(graph, x, weight, reduce, None)),
             t(lambda: _spmm(graph, x, weight, reduce, None, False))),
            (t(lambda: _csr_backward_x(graph, grad, weight, reduce)),
             t(lambda: _spmm(graph, grad, weight, reduce, None, True))), graph)


def choose(graph, x: Tensor, weight: Optional[Tensor], reduce: str) -> Tuple[bool, bool]:
    """(tiles for the forward, tiles for the backward of x) on ``graph`` for features like ``x``."""
    if x.dim() != 2 or x.size(1) == 0:
        return False, False
    return choice.choose(graph, x, choice.tensor_cores_take(x), "_tile_plans",
                         (x.dtype, x.size(1), weight is not None, reduce),
                         lambda: _measure(graph, x, weight, reduce))


def plans(graph) -> Dict[str, dict]:
    """The choices made on ``graph`` so far, keyed ``"<dtype> F=<width> <reduce>[ weighted]"``."""
    out = {}
    for (dtype, width, weighted, reduce), plan in getattr(graph, "_tile_plans", {}).items():
        name = f"{str(dtype).replace('torch.', '')} F={width} {reduce}{' weighted' if weighted else ''}"
        out[name] = plan
    return out


def tile_propagate(graph, x: Tensor, weight: Optional[Tensor], reduce: str,
                   bias: Optional[Tensor], tiles_forward: bool, tiles_backward: bool) -> Tensor:
    """``propagate_csr`` on the given paths (``weight`` in CSR order, the accumulation dtype)."""
    return _TilePropagate.apply(x, weight, bias, graph, reduce, tiles_forward, tiles_backward)
