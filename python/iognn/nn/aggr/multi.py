"""``MultiAggregation``: several aggregations combined, the fusable ones in one pass.

All iognn reductions among the children (sum, mean, min, max, var, std) are computed by a single
``segment_reduce`` call over each CSR row (one read of the messages, the count shared); a reduction
named twice is computed once. Other children (a PyG aggregation iognn has no kernel for, a nested
MultiAggregation, ...) run on their own. Results are combined as PyG does.

``semi_grad`` follows PyG's FusedAggregation: it is a property of the group, on as soon as one
VarAggregation child has it, and then applies to every var and std child (a StdAggregation's own
``semi_grad`` is not consulted inside a MultiAggregation).
"""
from __future__ import annotations

import copy
from typing import Any, Dict, List, Optional, Union

import torch
from torch import Tensor

from ...ops.segment_reduce import segment_reduce
from ..linear import Linear
from .base import Aggregation, aggregate_with, flat, unflat
from .basic import VarAggregation, _Reduction, semi_grad_var, std_of_var

_DENSE_MODES = ("sum", "mean", "max", "min", "logsumexp", "std", "var")


class MultiAggregation(Aggregation):
    r"""Several aggregations combined, replacing ``torch_geometric.nn.aggr.MultiAggregation``
    (Corso et al., "Principal Neighbourhood Aggregation for Graph Nets", NeurIPS 2020; Tailor et
    al., "Adaptive Filters and Aggregator Fusion for Efficient Graph Convolutions", 2021).

    .. math::
        \mathbf{r}_g = \mathrm{combine} \left( \mathrm{aggr}_1(\mathcal{X}_g), \ldots,
        \mathrm{aggr}_K(\mathcal{X}_g) \right)

    where ``combine`` concatenates (``'cat'``), projects the concatenation with a ``Linear``
    (``'proj'``) or reduces the :math:`K` results element-wise. The children that are iognn
    reductions (sum, mean, min, max, var, std) run in one fused pass over the messages; others
    (a PyG aggregation without an iognn kernel, a nested MultiAggregation) run on their own.

    Args:
        aggrs (list): Aggregations: names (``'mean'``, ``'max'``, ...), iognn or PyG
            aggregation modules.
        aggrs_kwargs (list of dict, optional): Constructor arguments, one dict per entry of
            ``aggrs`` (a length mismatch raises ``ValueError``). (default: ``None``)
        mode (str, optional): How results are combined: ``'cat'``, ``'proj'`` (needs
            ``in_channels`` and ``out_channels`` in ``mode_kwargs`` and at least two
            aggregations), or ``'sum'``, ``'mean'``, ``'max'``, ``'min'``, ``'logsumexp'``,
            ``'std'``, ``'var'``. (default: ``'cat'``)
        mode_kwargs (dict, optional): ``in_channels`` / ``out_channels`` and, for ``'proj'``,
            further ``Linear`` arguments (e.g. ``bias``). (default: ``None``)

    Shapes:
        - **input:** as :class:`Aggregation`: ``x`` ``[*, E, *, F]``, ``index`` ``[E]`` or
          ``ptr`` ``[G + 1]``, ``dim_size`` :math:`G`.
        - **output:** ``[*, G, *, K * F]`` for ``'cat'``, ``[*, G, *, out_channels]`` for
          ``'proj'``, ``[*, G, *, F]`` for the element-wise modes.

    iognn differences:
        - ``MultiAggregation(['mean', 'mean'])`` gives two means (in PyG the first is the raw
          sum, a PyG bug).
        - ``mode='attn'`` raises ``ValueError`` (a PyG instance with ``mode='attn'`` passed as
          a layer's ``aggr`` runs as PyG's module).
    """

    def __init__(self, aggrs: List[Union[Aggregation, str]],
                 aggrs_kwargs: Optional[List[Dict[str, Any]]] = None, mode: Optional[str] = "cat",
                 mode_kwargs: Optional[Dict[str, Any]] = None):
        super().__init__()
        from .resolver import resolve_aggregation
        if not isinstance(aggrs, (list, tuple)):
            raise ValueError(f"'aggrs' of '{self.__class__.__name__}' should be a list or tuple "
                             f"(got '{type(aggrs)}').")
        if len(aggrs) == 0:
            raise ValueError(f"'aggrs' of '{self.__class__.__name__}' should not be empty.")
        if aggrs_kwargs is None:
            aggrs_kwargs = [{}] * len(aggrs)
        elif len(aggrs) != len(aggrs_kwargs):
            raise ValueError(f"'aggrs_kwargs' with invalid length passed to "
                             f"'{self.__class__.__name__}' (got '{len(aggrs_kwargs)}', expected "
                             f"'{len(aggrs)}'). Ensure that both 'aggrs' and 'aggrs_kwargs' are "
                             f"consistent.")
        self.aggrs = torch.nn.ModuleList([resolve_aggregation(a, **kw)
                                          for a, kw in zip(aggrs, aggrs_kwargs)])
        self.mode = mode
        mode_kwargs = copy.copy(mode_kwargs) or {}
        self.in_channels = mode_kwargs.pop("in_channels", None)
        self.out_channels = mode_kwargs.pop("out_channels", None)
        if mode == "attn":
            raise ValueError("MultiAggregation(mode='attn') is not supported by iognn")
        if mode == "proj":
            if len(aggrs) == 1:
                raise ValueError("Multiple aggregations are required for 'proj' or 'attn' "
                                 "combine mode.")
            if (self.in_channels and self.out_channels) is None:
                raise ValueError(f"Combine mode '{mode}' must have `in_channels` and "
                                 f"`out_channels` specified.")
            if isinstance(self.in_channels, int):
                self.in_channels = [self.in_channels] * len(aggrs)
            self.lin = Linear(sum(self.in_channels), self.out_channels, **mode_kwargs)
        elif mode != "cat" and mode not in _DENSE_MODES:
            raise ValueError(f"Combine mode '{mode}' is not supported.")

    def reset_parameters(self) -> None:
        for aggr in self.aggrs:
            aggr.reset_parameters()
        if self.mode == "proj":
            self.lin.reset_parameters()

    def get_out_channels(self, in_channels: int) -> int:
        if self.out_channels is not None:
            return self.out_channels
        if self.mode == "cat":
            return in_channels * len(self.aggrs)
        return in_channels

    def _plan(self) -> List[Optional[str]]:
        """Per child: the segment_reduce name it is fused as, 'semi_var' / 'semi_std' (PyG's
        group-wide semi-gradient), or None (runs on its own)."""
        semi = any(type(a) is VarAggregation and a.semi_grad for a in self.aggrs)
        plan = []
        for a in self.aggrs:
            if not isinstance(a, _Reduction):
                plan.append(None)
            elif semi and a.reduce in ("var", "std"):
                plan.append("semi_" + a.reduce)
            else:
                plan.append(a.reduce)
        return plan

    def fused_reduces(self) -> Optional[List[str]]:
        """The children as one ``segment_reduce`` call, when they all are distinct plain
        reductions combined by 'cat'."""
        plan = self._plan()
        if (self.mode != "cat" and len(plan) > 1) or len(set(plan)) != len(plan) or any(
                n is None or n.startswith("semi") for n in plan):
            return None
        return plan

    def aggregate(self, graph, x: Tensor) -> Tensor:
        plan = self._plan()
        names = list(dict.fromkeys(n for n in plan if n is not None and not n.startswith("semi")))
        x2 = flat(x)
        results = {}
        if names:
            fused = segment_reduce(graph, x2, names)
            width = x2.size(1)
            results = {n: unflat(fused.narrow(1, i * width, width), x)
                       for i, n in enumerate(names)}
        if any(n is not None and n.startswith("semi") for n in plan):
            var = semi_grad_var(graph, x2)
            results["semi_var"] = unflat(var, x)
            results["semi_std"] = unflat(std_of_var(var), x)
        outs = [results[n] if n is not None else aggregate_with(a, graph, x)
                for n, a in zip(plan, self.aggrs)]
        return self.combine(outs)

    def combine(self, inputs: List[Tensor]) -> Tensor:
        if len(inputs) == 1:
            return inputs[0]
        if self.mode == "cat":
            return torch.cat(inputs, dim=-1)
        if self.mode == "proj":
            return self.lin(torch.cat(inputs, dim=-1))
        out = getattr(torch, self.mode)(torch.stack(inputs, dim=0), dim=0)
        return out if isinstance(out, Tensor) else out[0]

    def __repr__(self) -> str:
        aggrs = ",\n".join(f"  {aggr}" for aggr in self.aggrs) + ",\n"
        return f"{self.__class__.__name__}([\n{aggrs}], mode={self.mode})"
