"""Typed propagate: per-(destination, type) sums or means, transformed by a weight per type.

``typed_propagate(tg, x, weight, reduce, bias)`` computes, for every destination i,

    out[i] = sum_r  reduce_{e : dst(e) = i, type(e) = r}  (x[src(e)] @ weight[r] + bias[r])

with ``reduce`` the sum or the mean within each (destination, type) group (an empty group gives
0): PyG RGCNConv's per-relation mean, summed over relations. It runs on iognn's propagate (a
deterministic CSR pass, no float atomics, a gather for the backward) and torch GEMMs, in one of
four strategies (``TypedGraph.strategy`` picks one; ``docs/typed.md`` gives the arithmetic):

- aggregate_dense: ``H = reduce over (dst, type) rows`` ``[N_dst * R, F_in]``, then one GEMM
  ``H.view(N_dst, R * F_in) @ weight.view(R * F_in, F_out)``;
- aggregate_grouped: H over the U non-empty groups only, a GEMM per type on its groups' rows,
  then a sum of the groups into their destinations;
- transform_dense: ``Y = x @ [weight_0 | ... | weight_R-1]`` ``[N_src * R, F_out]``, then a
  (mean-weighted) propagate of the rows ``src * R + type``;
- transform_grouped: Y over the P distinct (type, source) pairs only, a GEMM per type, then a
  (mean-weighted) propagate of the pairs.

The message bias folds into each: added to Y's rows (transform), or ``n(i, r) * bias[r]``
(sum) / ``bias[r]`` per non-empty group (mean) added after the GEMM (aggregate). Never formed:
an ``E x F`` message tensor, per-edge weights ``E x F_in x F_out``. Row gathers (the pairs'
sources, the groups' and pairs' biases, one-hot rows) run as a propagate over a graph of one edge
per gathered row, so that their backward sums over the transposed CSR: ``index_select``'s
backward would scatter with float atomics, whose order (and so whose result) changes run to run.
"""
from __future__ import annotations

from typing import List, Optional

import torch
from torch import Tensor

from ..graph import Graph
from ..typed import STRATEGIES, TypedGraph
from ._checks import FLOAT_DTYPES, acc_dtype
from .propagate import propagate_csr

_REDUCES = ("sum", "mean")


def typed_propagate(tg: TypedGraph, x: Optional[Tensor], weight: Tensor, reduce: str = "sum",
                    bias: Optional[Tensor] = None, strategy: str = "auto") -> Tensor:
    """Typed message passing ``out[i] = sum_r reduce_{j -r-> i} (x[j] @ weight[r] + bias[r])``.

    Args:
        tg: an :class:`iognn.TypedGraph`.
        x: source features ``[num_src, F_in]`` (fp32 / fp64 / fp16 / bf16, any strides), or
            one-hot features given by their positions: None (``x[j] = e_j``, ``num_src <=
            F_in``) or a 1-D integer tensor ``[num_src]`` of positions in ``[0, F_in)``.
        weight: ``[R, F_in, F_out]`` in the dtype of the features.
        reduce: ``'sum'`` or ``'mean'`` (within each (destination, type) group).
        bias: optional per-type message bias ``[R, F_out]``.
        strategy: ``'auto'`` (``tg.strategy(F_in, F_out)``) or one of ``aggregate_dense``,
            ``aggregate_grouped``, ``transform_dense``, ``transform_grouped`` (same results up to
            rounding). One-hot features always take the featureless path (a row gather).
    Returns:
        ``[num_dst, F_out]`` in the dtype of ``weight``. Differentiable in x, weight and bias.
    """
    _check_args(tg, x, weight, reduce, bias, strategy)
    if x is None or not x.is_floating_point():
        return _featureless(tg, x, weight, reduce, bias)
    if strategy == "auto":
        strategy = tg.strategy(weight.size(1), weight.size(2))
    return _STRATEGY_FUNCTIONS[strategy](tg, x, weight, reduce, bias)


def _check_args(tg, x, weight, reduce, bias, strategy) -> None:
    if not isinstance(tg, TypedGraph):
        raise TypeError(f"tg must be an iognn.TypedGraph, got {type(tg).__name__}")
    if reduce not in _REDUCES:
        raise ValueError(f"reduce must be one of {_REDUCES}, got {reduce!r}")
    if strategy != "auto" and strategy not in STRATEGIES:
        raise ValueError(f"strategy must be 'auto' or one of {STRATEGIES}, got {strategy!r}")
    if not isinstance(weight, Tensor):
        raise TypeError(f"weight must be a Tensor, got {type(weight).__name__}")
    if weight.dtype not in FLOAT_DTYPES:
        raise TypeError(f"weight must be float32, float64, float16 or bfloat16, got "
                        f"{weight.dtype}")
    if weight.dim() != 3 or weight.size(0) != tg.num_types:
        raise ValueError(f"weight must have shape [num_types={tg.num_types}, F_in, F_out], got "
                         f"{list(weight.shape)}")
    if weight.device != tg.device:
        raise ValueError(f"weight is on {weight.device} but the typed graph is on {tg.device}")
    _check_x(tg, x, weight)
    if bias is not None:
        if not isinstance(bias, Tensor):
            raise TypeError(f"bias must be a Tensor or None, got {type(bias).__name__}")
        if bias.shape != (tg.num_types, weight.size(2)):
            raise ValueError(f"bias must have shape [num_types={tg.num_types}, F_out="
                             f"{weight.size(2)}], got {list(bias.shape)}")
        if bias.dtype != weight.dtype or bias.device != weight.device:
            raise TypeError(f"bias must have the dtype and device of weight ({weight.dtype}, "
                            f"{weight.device}), got ({bias.dtype}, {bias.device})")


def _check_x(tg, x, weight) -> None:
    if x is None:
        if weight.size(1) < tg.num_src_nodes:
            raise ValueError(f"x=None means one-hot features x[j] = e_j of the "
                             f"{tg.num_src_nodes} sources, but weight has only F_in="
                             f"{weight.size(1)}")
        return
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a Tensor or None, got {type(x).__name__}")
    if x.device != tg.device:
        raise ValueError(f"x is on {x.device} but the typed graph is on {tg.device}")
    if x.is_floating_point():
        if x.dim() != 2 or x.size(0) != tg.num_src_nodes or x.size(1) != weight.size(1):
            raise ValueError(f"x must have shape [num_src={tg.num_src_nodes}, F_in="
                             f"{weight.size(1)}], got {list(x.shape)}")
        if x.dtype != weight.dtype:
            raise TypeError(f"x and weight must have the same dtype, got {x.dtype} and "
                            f"{weight.dtype}")
        return
    if x.dtype not in (torch.int32, torch.int64) or x.dim() != 1 or x.size(0) != tg.num_src_nodes:
        raise TypeError(f"x must be float features [num_src, F_in] or int32/int64 one-hot "
                        f"positions [num_src={tg.num_src_nodes}], got {x.dtype} of shape "
                        f"{list(x.shape)}")


def _gather(tg: TypedGraph, name: Optional[str], index: Tensor, rows: Tensor) -> Tensor:
    """``rows[index]`` with a deterministic backward (module note); the graph of ``index`` is
    built once per typed graph under ``name`` (None: an index of the caller's, built per call).
    """
    def build():
        positions = torch.arange(index.numel(), device=index.device)
        return Graph(torch.stack([index, positions]), (rows.size(0), index.numel()))
    graph = build() if name is None else tg._memo(("gather", name, rows.size(0)), build)
    return propagate_csr(graph, rows, None, "sum")


def _aggregate_dense(tg: TypedGraph, x: Tensor, weight: Tensor, reduce: str,
                     bias: Optional[Tensor]) -> Tensor:
    R, f_in, f_out = weight.shape
    h = propagate_csr(tg._graph("aggregate_dense"), x, None, reduce)
    out = h.view(tg.num_dst_nodes, R * f_in) @ weight.reshape(R * f_in, f_out)
    if bias is None:
        return out
    factor = tg._dense_factor(reduce, acc_dtype(weight.dtype))
    return (out + factor @ bias.to(factor.dtype)).to(weight.dtype)


def _per_type_gemm(rows: Tensor, offsets: List[int], weight: Tensor,
                   bias_terms: Optional[Tensor]) -> Tensor:
    """``rows[a:b] @ weight[r]`` (+ ``bias_terms[a:b]``) for each type's row range, in one
    output. A type without rows launches nothing. The ranges and weights are taken with one
    ``split`` / ``unbind`` each, whose backward is one concatenation: slicing per type would give
    every slice's backward a zero-filled gradient of the whole input (R x rows x F of writes).
    With no rows at all, one empty product keeps ``weight`` and the bias in the autograd graph
    (their gradients are then zeros, as for any unused type)."""
    sizes = [offsets[r + 1] - offsets[r] for r in range(weight.size(0))]
    if not any(sizes):
        part = rows[:0] @ weight[0]
        return part if bias_terms is None else (part + bias_terms[:0]).to(part.dtype)
    weights = weight.unbind(0)
    row_parts = rows.split(sizes)
    bias_parts = (None,) * len(sizes) if bias_terms is None else bias_terms.split(sizes)
    parts = []
    for size, r_rows, w, b in zip(sizes, row_parts, weights, bias_parts):
        if size:
            part = r_rows @ w
            parts.append(part if b is None else (part + b).to(part.dtype))
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def _aggregate_grouped(tg: TypedGraph, x: Tensor, weight: Tensor, reduce: str,
                       bias: Optional[Tensor]) -> Tensor:
    h = propagate_csr(tg._graph("aggregate_grouped"), x, None, reduce)
    bias_terms = None
    if bias is not None:
        factor = tg._group_factor(reduce, acc_dtype(weight.dtype))
        bias_terms = factor * _gather(tg, "group_type", tg.group_type, bias.to(factor.dtype))
    messages = _per_type_gemm(h, tg.group_offsets, weight, bias_terms)
    return propagate_csr(tg._graph("groups_to_dst"), messages, None, "sum")


def _transform_dense(tg: TypedGraph, x: Tensor, weight: Tensor, reduce: str,
                     bias: Optional[Tensor]) -> Tensor:
    R, f_in, f_out = weight.shape
    w_cat = weight.permute(1, 0, 2).reshape(f_in, R * f_out)
    if bias is None:
        y = x @ w_cat
    else:
        y = torch.addmm(bias.reshape(R * f_out), x, w_cat)
    return _transform_propagate(tg, "transform_dense", y.view(tg.num_src_nodes * R, f_out),
                                reduce)


def _transform_grouped(tg: TypedGraph, x: Tensor, weight: Tensor, reduce: str,
                       bias: Optional[Tensor]) -> Tensor:
    pair_src, pair_type, _, offsets = tg._pair_structure()
    bias_terms = None if bias is None else _gather(tg, "pair_type", pair_type, bias)
    y = _per_type_gemm(_gather(tg, "pair_src", pair_src, x), offsets, weight, bias_terms)
    return _transform_propagate(tg, "transform_grouped", y, reduce)


def _transform_propagate(tg: TypedGraph, graph_name: str, rows: Tensor, reduce: str) -> Tensor:
    """Sums the transformed rows into their destinations, each edge weighted ``1 / n(i, r)``
    for the mean."""
    graph = tg._graph(graph_name)
    w = None if reduce == "sum" else tg._mean_weights(graph_name, acc_dtype(rows.dtype))
    return propagate_csr(graph, rows, w, "sum")


def _featureless(tg: TypedGraph, ids: Optional[Tensor], weight: Tensor, reduce: str,
                 bias: Optional[Tensor]) -> Tensor:
    """One-hot features: the message of edge j -r-> i is the row ``weight[r, j]`` (ids None) or
    ``weight[r, ids[j]]``, read in place from the weight's rows (ids: a gathered copy)."""
    if ids is not None:  # rows ids of [F_in, R * F_out]: [num_src, R, F_out] -> [R, num_src, F_out]
        R, _, f_out = weight.shape
        rows = weight.transpose(0, 1).reshape(weight.size(1), R * f_out)
        table = _gather(tg, None, ids.long(), rows).view(-1, R, f_out).transpose(0, 1)
    else:
        table = weight
    if bias is not None:
        table = table + bias.unsqueeze(1)
    R, f_in, f_out = table.shape
    return _transform_propagate(tg, f"featureless:{f_in}", table.reshape(R * f_in, f_out),
                                reduce)


_STRATEGY_FUNCTIONS = {
    "aggregate_dense": _aggregate_dense,
    "aggregate_grouped": _aggregate_grouped,
    "transform_dense": _transform_dense,
    "transform_grouped": _transform_grouped,
}
