"""Propagate (SpMM family): weighted sum / mean over in-edges and GCN normalisation.

``propagate(graph, x, edge_weight, reduce, bias)`` computes, for every destination i,
``out[i] = sum_{(j -> i)} w_ji * x[j]`` (``reduce='sum'``) or that sum divided by the in-degree of i
(``reduce='mean'``; 0 for a node without in-edges), plus ``bias`` when given (fused into the same
pass: a layer's bias costs no extra read and write of the output). Duplicate edges count
separately. Edge weights are given in the graph's augmented edge order and are kept in fp32
(fp64 for fp64 features). Backward: ``grad_x = A^T grad_out`` over the transposed CSR
(deterministic, no atomics), ``grad_w`` by a sampled dense-dense product and
``grad_bias = grad_out.sum(0)``. ``propagate_csr`` is the layers' entry: weights already in CSR
order, only the C++ op's argument checks (binding/propagate_checks.h). ``linear_propagate_csr``
and ``propagate_linear_csr`` are the fused layer ops: a projection and a propagate in one op and
one autograd node (docs/ops.md).
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ._checks import acc_dtype, check_edge_values, check_features, check_graph

_REDUCES = ("sum", "mean")


def propagate(graph, x: Tensor, edge_weight: Optional[Tensor] = None, reduce: str = "sum",
              bias: Optional[Tensor] = None) -> Tensor:
    """Message passing ``out = A x + b`` (sum) or ``D^-1 A x + b`` (mean) over ``graph``.

    Args:
        graph: an :class:`iognn.Graph`.
        x: source features ``[num_src_nodes, F]``.
        edge_weight: optional ``[num_edges]`` weights in augmented edge order.
        reduce: ``'sum'`` or ``'mean'``.
        bias: optional ``[F]`` in the dtype of ``x``, added to every output row (rows without
            in-edges included).
    Returns:
        ``[num_dst_nodes, F]`` in the dtype of ``x``.
    """
    if reduce not in _REDUCES:
        raise ValueError(f"reduce must be one of {_REDUCES}, got {reduce!r}")
    check_graph(graph)
    check_features("x", x, graph, graph.num_src_nodes)
    w = None
    if edge_weight is not None:
        check_edge_values("edge_weight", edge_weight, graph, x)
        if edge_weight.dim() != 1:
            raise ValueError(f"edge_weight must be 1-D, got shape {list(edge_weight.shape)}")
        w = graph.csr_edge_values(edge_weight.to(acc_dtype(x.dtype)))
    return propagate_csr(graph, x, w, reduce, bias)


def propagate_csr(graph, x: Tensor, csr_weight: Optional[Tensor], reduce: str,
                  bias: Optional[Tensor] = None) -> Tensor:
    """``propagate`` with the weights already in the graph's CSR order and the accumulation dtype
    (``graph.csr_edge_values``), checked by the C++ op alone: the layers' hot path. A graph whose
    ``tile_policy`` is not ``"csr"`` may run on the tile path (``ops/propagate_tiles.py``)."""
    if getattr(graph, "tile_policy", "csr") != "csr":
        from . import propagate_tiles
        paths = propagate_tiles.choose(graph, x, csr_weight, reduce)
        if any(paths):
            return propagate_tiles.tile_propagate(graph, x, csr_weight, reduce, bias, *paths)
    return torch.ops.iognn.propagate(graph.rowptr, graph.col, graph.colptr, graph.row,
                                     graph.csc2csr, csr_weight, x, reduce, bias,
                                     *graph.max_degree_hints)


def linear_propagate_csr(graph, x: Tensor, lin_weight: Tensor, csr_weight: Optional[Tensor],
                         reduce: str, bias: Optional[Tensor] = None) -> Tensor:
    """``propagate_csr(graph, x @ lin_weight.T, ...) + bias`` as one op and one autograd node
    (binding/propagate_layers.h): GCNConv's path, on the CSR kernels only."""
    return torch.ops.iognn.linear_propagate(graph.rowptr, graph.col, graph.colptr, graph.row,
                                            graph.csc2csr, csr_weight, x, lin_weight, reduce,
                                            bias, *graph.max_degree_hints)


def propagate_linear_csr(graph, x: Tensor, csr_weight: Optional[Tensor], reduce: str,
                         lin_weight: Tensor, bias: Optional[Tensor] = None,
                         root_weight: Optional[Tensor] = None,
                         x_root: Optional[Tensor] = None) -> Tensor:
    """``propagate_csr(graph, x, ...) @ lin_weight.T + bias + root @ root_weight.T`` as one op and
    one autograd node (binding/propagate_layers.h): SAGEConv's and GraphConv's path, on the CSR
    kernels only.
    ``root`` is ``x_root``, or ``x`` itself when only ``root_weight`` is given (a square graph).
    The op projects before it propagates (``A (x W^T)``, equal up to rounding) where that moves
    fewer elements: a wide input (docs/ops.md)."""
    return torch.ops.iognn.propagate_linear(graph.rowptr, graph.col, graph.colptr, graph.row,
                                            graph.csc2csr, csr_weight, x, reduce, lin_weight,
                                            bias, root_weight, x_root, *graph.max_degree_hints)


def gcn_norm(graph, edge_weight: Optional[Tensor] = None, dtype: torch.dtype = torch.float32) -> Tensor:
    """GCN's symmetric normalisation ``w'_ji = deg(j)^-1/2 * w_ji * deg(i)^-1/2`` per edge.

    ``deg`` is the weighted in-degree (self-loops included, as built into ``graph``); a zero degree
    gives a zero weight. The result is in augmented edge order, differentiable in ``edge_weight``.
    """
    check_graph(graph)
    opts = dict(device=graph.device, dtype=dtype)
    w = torch.ones(graph.num_edges, **opts) if edge_weight is None else edge_weight.to(dtype)
    ones = torch.ones(graph.num_src_nodes, 1, **opts)
    deg = propagate(graph, ones, w, "sum").view(-1)
    dinv = deg.pow(-0.5).masked_fill(deg == 0, 0.0)
    ei = graph.edge_index
    return dinv[ei[0]] * w * dinv[ei[1]]
