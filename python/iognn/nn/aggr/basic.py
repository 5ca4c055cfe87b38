"""PyG's basic aggregations on iognn's fused segment reductions.

A destination without messages gets 0 (every reduction). ``var = E[x^2] - E[x]^2`` (PyG's formula,
not Welford); ``std = sqrt(clamp(var, 1e-5))``, set to 0 where ``<= sqrt(1e-5)``. With
``semi_grad=True`` no gradient flows through ``E[x^2]`` (PyG's memory-saving option); those two
modules then run as a mean of ``x`` plus a mean of ``x^2`` instead of the fused reduction.
min / max ties: the gradient is split evenly among tied messages, exactly as PyG's scatter does
(see ``iognn.ops.segment_reduce``).
"""
from __future__ import annotations

import math
from typing import List, Optional

import torch
from torch import Tensor

from ...ops.segment_reduce import segment_reduce
from .base import Aggregation, flat, unflat


class _Reduction(Aggregation):
    """An aggregation computed by one ``segment_reduce`` name (``reduce``)."""

    reduce: str

    def aggregate(self, graph, x: Tensor) -> Tensor:
        return unflat(segment_reduce(graph, flat(x), self.reduce), x)

    def fused_reduces(self) -> Optional[List[str]]:
        return None if getattr(self, "semi_grad", False) else [self.reduce]


class SumAggregation(_Reduction):
    """Drop-in for ``torch_geometric.nn.aggr.SumAggregation``."""
    reduce = "sum"


class MeanAggregation(_Reduction):
    """Drop-in for ``torch_geometric.nn.aggr.MeanAggregation``."""
    reduce = "mean"


class MinAggregation(_Reduction):
    """Drop-in for ``torch_geometric.nn.aggr.MinAggregation``."""
    reduce = "min"


class MaxAggregation(_Reduction):
    """Drop-in for ``torch_geometric.nn.aggr.MaxAggregation``."""
    reduce = "max"


class VarAggregation(_Reduction):
    """Drop-in for ``torch_geometric.nn.aggr.VarAggregation(semi_grad=False)``."""
    reduce = "var"

    def __init__(self, semi_grad: bool = False):
        super().__init__()
        self.semi_grad = semi_grad

    def aggregate(self, graph, x: Tensor) -> Tensor:
        if not self.semi_grad:
            return super().aggregate(graph, x)
        return unflat(semi_grad_var(graph, flat(x)), x)


class StdAggregation(_Reduction):
    """Drop-in for ``torch_geometric.nn.aggr.StdAggregation(semi_grad=False)``."""
    reduce = "std"

    def __init__(self, semi_grad: bool = False):
        super().__init__()
        self.semi_grad = semi_grad

    def aggregate(self, graph, x: Tensor) -> Tensor:
        if not self.semi_grad:
            return super().aggregate(graph, x)
        return unflat(std_of_var(semi_grad_var(graph, flat(x))), x)


def std_of_var(var: Tensor) -> Tensor:
    """PyG's std from a variance: ``sqrt(clamp(var, 1e-5))``, 0 where ``<= sqrt(1e-5)``."""
    out = var.clamp(min=1e-5).sqrt()
    return out.masked_fill(out <= math.sqrt(1e-5), 0.0)


def semi_grad_var(graph, x: Tensor) -> Tensor:
    """``E[x^2] - E[x]^2`` with ``E[x^2]`` outside autograd."""
    mean = segment_reduce(graph, x, "mean")
    with torch.no_grad():
        mean_sq = segment_reduce(graph, x * x, "mean")
    return mean_sq - mean * mean
