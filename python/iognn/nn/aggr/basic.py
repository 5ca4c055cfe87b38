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
from .._doc import shared_doc
from .base import Aggregation, flat, unflat


class _Reduction(Aggregation):
    """An aggregation computed by one ``segment_reduce`` name (``reduce``)."""

    reduce: str

    def aggregate(self, graph, x: Tensor) -> Tensor:
        return unflat(segment_reduce(graph, flat(x), self.reduce), x)

    def fused_reduces(self) -> Optional[List[str]]:
        return None if getattr(self, "semi_grad", False) else [self.reduce]


class _VarianceReduction(_Reduction):
    """var and std: with ``semi_grad`` the variance is taken as two means, ``E[x^2]`` outside
    autograd, and ``_from_var`` turns it into the result."""

    def __init__(self, semi_grad: bool = False):
        super().__init__()
        self.semi_grad = semi_grad

    def aggregate(self, graph, x: Tensor) -> Tensor:
        if not self.semi_grad:
            return super().aggregate(graph, x)
        return unflat(self._from_var(semi_grad_var(graph, flat(x))), x)


@shared_doc
class SumAggregation(_Reduction):
    r"""Sum of each group's messages, replacing ``torch_geometric.nn.aggr.SumAggregation``.

    .. math::
        \mathrm{sum}(\mathcal{X}) = \sum_{\mathbf{x}_i \in \mathcal{X}} \mathbf{x}_i

    {no_arguments}
    """
    reduce = "sum"


@shared_doc
class MeanAggregation(_Reduction):
    r"""Mean of each group's messages, replacing ``torch_geometric.nn.aggr.MeanAggregation``.

    .. math::
        \mathrm{mean}(\mathcal{X}) = \frac{1}{|\mathcal{X}|}
        \sum_{\mathbf{x}_i \in \mathcal{X}} \mathbf{x}_i

    {no_arguments}
    """
    reduce = "mean"


@shared_doc
class MinAggregation(_Reduction):
    r"""Feature-wise minimum of each group's messages, replacing
    ``torch_geometric.nn.aggr.MinAggregation``.

    .. math::
        \mathrm{min}(\mathcal{X}) = \min_{\mathbf{x}_i \in \mathcal{X}} \mathbf{x}_i

    The gradient of a tie is split evenly among the tied messages, as PyG's scatter does.

    {no_arguments}
    """
    reduce = "min"


@shared_doc
class MaxAggregation(_Reduction):
    r"""Feature-wise maximum of each group's messages, replacing
    ``torch_geometric.nn.aggr.MaxAggregation``.

    .. math::
        \mathrm{max}(\mathcal{X}) = \max_{\mathbf{x}_i \in \mathcal{X}} \mathbf{x}_i

    The gradient of a tie is split evenly among the tied messages, as PyG's scatter does.

    {no_arguments}
    """
    reduce = "max"


class VarAggregation(_VarianceReduction):
    r"""Feature-wise variance of each group's messages, replacing
    ``torch_geometric.nn.aggr.VarAggregation``.

    .. math::
        \mathrm{var}(\mathcal{X}) = \mathrm{mean}(\{ \mathbf{x}_i^2 : \mathbf{x}_i \in
        \mathcal{X} \}) - \mathrm{mean}(\mathcal{X})^2

    The population variance by PyG's formula (not Welford's), computed in one fused pass.

    Args:
        semi_grad (bool, optional): Let no gradient flow through the
            :math:`\mathrm{mean}(\mathbf{x}^2)` term (PyG's memory-saving option; computed as
            two means instead of the fused reduction). Inside a ``MultiAggregation`` it applies
            to every var/std child once one ``VarAggregation`` child sets it, as in PyG.
            (default: ``False``)

    Called, with the shapes of every aggregation (an empty group gives 0), as :class:`Aggregation`.
    """
    reduce = "var"

    @staticmethod
    def _from_var(var: Tensor) -> Tensor:
        return var


class StdAggregation(_VarianceReduction):
    r"""Feature-wise standard deviation of each group's messages, replacing
    ``torch_geometric.nn.aggr.StdAggregation``.

    .. math::
        \mathrm{std}(\mathcal{X}) = \sqrt{\max(\mathrm{var}(\mathcal{X}), 10^{-5})}

    with :math:`\mathrm{var}` as in :class:`VarAggregation`; results at or below
    :math:`\sqrt{10^{-5}}` are set to 0, as in PyG.

    Args:
        semi_grad (bool, optional): Let no gradient flow through the
            :math:`\mathrm{mean}(\mathbf{x}^2)` term of the variance (see
            :class:`VarAggregation`; inside a ``MultiAggregation`` the group's var setting
            applies instead). (default: ``False``)

    Called, with the shapes of every aggregation (an empty group gives 0), as :class:`Aggregation`.
    """
    reduce = "std"

    @staticmethod
    def _from_var(var: Tensor) -> Tensor:
        return std_of_var(var)


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
