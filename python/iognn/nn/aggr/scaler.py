"""``DegreeScalerAggregation``: PNA's aggregators scaled by functions of the in-degree."""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Union

import torch
from torch import Tensor

from ...ops.segment_reduce import segment_reduce
from .._amp import like
from .base import Aggregation, aggregate_with, flat

SCALERS = ("identity", "amplification", "attenuation", "linear", "inverse_linear")


class DegreeScalerAggregation(Aggregation):
    r"""Aggregation scaled by functions of the degree, replacing
    ``torch_geometric.nn.aggr.DegreeScalerAggregation`` (Corso et al., "Principal Neighbourhood
    Aggregation for Graph Nets", NeurIPS 2020).

    .. math::
        \mathbf{r}_g = \big\Vert_{s \in \mathrm{scalers}} \; s(d_g) \cdot
        \mathrm{aggr}(\mathcal{X}_g)

    with :math:`d_g` the number of messages of group :math:`g` (a node's in-degree) and

    .. math::
        s_{\mathrm{identity}} = 1, \quad
        s_{\mathrm{amplification}} = \frac{\log(d + 1)}{\delta_{\log}}, \quad
        s_{\mathrm{attenuation}} = \frac{\delta_{\log}}{\log(\max(d, 1) + 1)}, \quad
        s_{\mathrm{linear}} = \frac{d}{\delta_{\mathrm{lin}}}, \quad
        s_{\mathrm{inverse\_linear}} = \frac{\delta_{\mathrm{lin}}}{\max(d, 1)}

    where :math:`\delta_{\mathrm{lin}}` (``avg_deg_lin``) and :math:`\delta_{\log}`
    (``avg_deg_log``) are the mean of :math:`d` and of :math:`\log(d + 1)` over the histogram
    ``deg``. When ``aggr`` is one fused reduction (a basic aggregation, or a ``'cat'``
    MultiAggregation of distinct sum/mean/min/max/var/std), the scaling runs inside the
    reduction kernel; other aggregations are computed first and scaled after.

    Args:
        aggr (str or list or Aggregation): The aggregation: a name, a list of names (a
            ``MultiAggregation``, concatenated) or a module.
        scaler (str or list of str): One or more of ``'identity'``, ``'amplification'``,
            ``'attenuation'``, ``'linear'``, ``'inverse_linear'`` (others: ``ValueError``).
        deg (Tensor): In-degree histogram of the training graphs (``deg[d]`` = number of nodes
            with ``d`` in-edges).
        train_norm (bool, optional): Make :math:`\delta_{\mathrm{lin}}`, :math:`\delta_{\log}`
            trainable parameters (else buffers). (default: ``False``)
        aggr_kwargs (list of dict or dict, optional): Constructor arguments of the
            aggregation(s): one dict per name for a list, else one dict. (default: ``None``)

    Shapes:
        - **input:** as :class:`Aggregation`: ``x`` ``[*, E, *, F]``, ``index`` ``[E]`` or
          ``ptr`` ``[G + 1]``, ``dim_size`` :math:`G`.
        - **output:** ``[*, G, *, S * F']``, :math:`S` scalers times the width ``F'`` of
          ``aggr``'s result (``K * F`` for a list of :math:`K` names).

    iognn differences:
        - Works when called with ``ptr`` only (PyG raises ``NotImplementedError``).
        - ``DegreeScalerAggregation('mean', [scalers])`` works (PyG fails: it wraps the list of
          scalers in another list).
    """

    def __init__(self, aggr: Union[str, List[str], Aggregation], scaler: Union[str, List[str]],
                 deg: Tensor, train_norm: bool = False,
                 aggr_kwargs: Optional[List[Dict[str, Any]]] = None):
        super().__init__()
        from .multi import MultiAggregation
        from .resolver import resolve_aggregation
        if isinstance(aggr, (tuple, list)):
            self.aggr = MultiAggregation(aggr, aggr_kwargs)
        elif isinstance(aggr, (str, torch.nn.Module)):
            self.aggr = resolve_aggregation(aggr, **(aggr_kwargs or {}))
        else:
            raise ValueError(f"Only strings, list, tuples and instances of `Aggregation` are "
                             f"valid aggregation schemes (got '{type(aggr)}')")
        self.scaler = [scaler] if isinstance(scaler, str) else list(scaler)
        for name in self.scaler:
            if name not in SCALERS:
                raise ValueError(f"Unknown scaler '{name}' (expected one of {SCALERS})")
        deg = deg.to(torch.float)
        num_nodes = float(deg.sum())
        bins = torch.arange(deg.numel(), device=deg.device)
        self.init_avg_deg_lin = float((bins * deg).sum()) / num_nodes
        self.init_avg_deg_log = float(((bins + 1).log() * deg).sum()) / num_nodes
        if train_norm:
            self.avg_deg_lin = torch.nn.Parameter(torch.empty(1))
            self.avg_deg_log = torch.nn.Parameter(torch.empty(1))
        else:
            self.register_buffer("avg_deg_lin", torch.empty(1))
            self.register_buffer("avg_deg_log", torch.empty(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.avg_deg_lin.fill_(self.init_avg_deg_lin)
            self.avg_deg_log.fill_(self.init_avg_deg_log)

    def degree_scales(self, deg: Tensor, ref: Tensor) -> Tensor:
        """``[N, S]`` factors of the in-degrees ``deg`` in ``ref``'s dtype, computed by the same
        torch expressions, in the same dtype, as the scaled outputs of the unfused path."""
        deg = deg.to(ref.dtype)
        avg_lin, avg_log = like(self.avg_deg_lin, ref), like(self.avg_deg_log, ref)
        columns = []
        for name in self.scaler:
            if name == "identity":
                columns.append(torch.ones_like(deg))
            elif name == "amplification":
                columns.append(torch.log(deg + 1) / avg_log)
            elif name == "attenuation":
                columns.append(avg_log / torch.log(deg.clamp(min=1) + 1))
            elif name == "linear":
                columns.append(deg / avg_lin)
            else:  # inverse_linear
                columns.append(avg_lin / deg.clamp(min=1))
        return torch.stack(columns, dim=1)

    def aggregate(self, graph, x: Tensor) -> Tensor:
        names = self.aggr.fused_reduces() if isinstance(self.aggr, Aggregation) else None
        if names is not None and x.dim() >= 2:
            # One kernel: the reductions and the scalers in its epilogue, no unscaled copy.
            x2 = flat(x)
            scale = self.degree_scales(graph.degree("in"), x2)
            out = segment_reduce(graph, x2, names, scale)
            return _scaled_layout(out, x, len(self.scaler), len(names))
        out = aggregate_with(self.aggr, graph, x)
        scale = self.degree_scales(graph.degree("in"), out)
        shape = (-1,) + (1,) * (out.dim() - 1)
        outs = [out if name == "identity" else out * scale[:, s].view(shape)
                for s, name in enumerate(self.scaler)]
        return torch.cat(outs, dim=-1) if len(outs) > 1 else outs[0]


def _scaled_layout(out: Tensor, x: Tensor, num_scales: int, num_reduces: int) -> Tensor:
    """The kernel's ``[N, S * K * F]`` (F = prod(x.shape[1:])) in PyG's layout
    ``[N, *x.shape[1:-1], S * K * x.shape[-1]]``: scaler blocks of concatenated results along the
    last dimension for every leading feature position (one copy unless x is 2-D)."""
    if x.dim() == 2:
        return out
    lead, width = tuple(x.shape[1:-1]), x.size(-1)
    positions = math.prod(lead)
    out = out.view(out.size(0), num_scales, num_reduces, positions, width).permute(0, 3, 1, 2, 4)
    return out.reshape((out.size(0),) + lead + (num_scales * num_reduces * width,))
