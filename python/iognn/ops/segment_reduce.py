"""Segment reductions: PyG's sum / mean / min / max / var / std aggregations, fused.

``segment_reduce(graph, x, reduce)`` aggregates the messages ``x_j = x[src]`` of the in-edges of
every destination i (PyG's ``aggr(x[src], index=dst, dim_size=num_dst)``). Several reductions
given together are computed in one pass over each CSR row (the MultiAggregation / PNA path); the
results are concatenated along the last dimension in request order (``mode='cat'``).

Semantics (PyG 2.8): a node without in-edges gets 0 for every reduction; ``mean = sum / deg``;
``var = E[x^2] - E[x]^2`` (not Welford, may be slightly negative); ``std = sqrt(clamp(var, 1e-5))``
set to 0 where ``<= sqrt(1e-5)``. Statistics accumulate in fp32 (fp64 for fp64).
min / max: a NaN in a row gives NaN for that feature (torch.amax). Their gradient follows PyG's
``scatter_reduce(amin / amax, include_self=False)`` exactly: the gradient of ``out[i, f]`` is split
evenly among the messages equal to it (a duplicate edge is a message of its own), the zero fill
of the output counting as one more tied element when the result is 0 (its share is lost, as in
torch); a NaN result sends NaN to every message of the row.
Backward: a deterministic gather over the transposed CSR (no atomics); the forward keeps, per
destination and feature, a 16-bit tie code saying which message holds the min / max (its
position in the row when it is the only one, else how many messages tie), stored as two byte
planes so that the CUDA gather reads one byte per message and feature, and the mean of var /
std (unless the results hold it: the mean requested too, in fp32 / fp64), so that nothing is
recomputed.

Degree scalers (PNA, ``DegreeScalerAggregation``): ``scale [num_dst, S]`` multiplies the results
in the kernel's epilogue, ``out = cat_s(scale[:, s:s+1] * results)`` (``[num_dst, S * K * F]``),
rounded exactly as that torch expression in x's dtype; no scaled copy is made in between. The
kernel also keeps the unscaled results for the backward, which folds the S gradient blocks into
one before its gather. ``scale`` may require grad (PNA's ``train_norm``): its gradient is
``sum_c grad_out[i, s, c] * results[i, c]``.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import List, Optional, Union

import torch
from torch import Tensor

from ._checks import check_features, check_graph

REDUCES = ("sum", "mean", "min", "max", "var", "std")


def _reduce_list(reduce: Union[str, Sequence[str]]) -> List[str]:
    if isinstance(reduce, str):
        names = [reduce]
    elif isinstance(reduce, Sequence):
        names = list(reduce)
    else:
        raise TypeError(f"reduce must be a str or a sequence of str, got {type(reduce).__name__}")
    if not names:
        raise ValueError("reduce must name at least one reduction")
    for name in names:
        if name not in REDUCES:
            raise ValueError(f"reduce must be one or several of {REDUCES}, got {name!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"reduce names a reduction twice: {names}")
    return names


def segment_reduce(graph, x: Tensor, reduce: Union[str, Sequence[str]],
                   scale: Optional[Tensor] = None) -> Tensor:
    """Aggregates ``x[src]`` over the in-edges of every destination of ``graph``.

    Args:
        graph: an :class:`iognn.Graph`.
        x: source features ``[num_src_nodes, F]`` (any row stride).
        reduce: one of ``'sum'``, ``'mean'``, ``'min'``, ``'max'``, ``'var'``, ``'std'``, or a
            sequence of distinct names computed together.
        scale: optional degree scalers ``[num_dst_nodes, S]`` in the dtype of ``x`` (PNA's
            amplification, attenuation, ...: functions of the in-degree).
    Returns:
        ``[num_dst_nodes, K * F]`` in the dtype of ``x``, the K results concatenated in order;
        with ``scale``, ``[num_dst_nodes, S * K * F]``: S such blocks, block s multiplied by
        ``scale[:, s]``.
    """
    check_graph(graph)
    names = _reduce_list(reduce)
    check_features("x", x, graph, graph.num_src_nodes)
    if scale is not None:
        if not isinstance(scale, Tensor):
            raise TypeError(f"scale must be a Tensor or None, got {type(scale).__name__}")
        if scale.dim() != 2 or scale.size(0) != graph.num_dst_nodes or scale.size(1) < 1:
            raise ValueError(f"scale must have shape [num_dst_nodes={graph.num_dst_nodes}, "
                             f"S >= 1], got {list(scale.shape)}")
        if scale.dtype != x.dtype:
            raise TypeError(f"scale must have the dtype of x ({x.dtype}), got {scale.dtype}")
    return torch.ops.iognn.segment_reduce(graph.rowptr, graph.col, graph.colptr, graph.row,
                                          graph.csc2csr, x, names, scale,
                                          *graph.max_degree_hints)[0]
