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
    """Drop-in for ``torch_geometric.nn.aggr.DegreeScalerAggregation``.

    ``out = cat_s(scaler_s(deg) * aggr(x))`` over the scalers, with ``deg`` the number of messages
    of each destination (its in-degree) and the normalisers ``avg_deg_lin`` / ``avg_deg_log``
    (buffers, or parameters with ``train_norm``) from the degree histogram ``deg``:
    amplification ``log(d + 1) / avg_deg_log``, attenuation ``avg_deg_log / log(max(d, 1) + 1)``,
    linear ``d / avg_deg_lin``, inverse_linear ``avg_deg_lin / max(d, 1)``.

    When the aggregation is one fused reduction (a basic aggregation, or a ``'cat'``
    MultiAggregation of distinct sum / mean / min / max / var / std), the scalers run in the
    reduction kernel's epilogue: the ``[N, S]`` factors are computed once, and the kernel writes
    the scaled blocks directly (equal to PyG's ``out * scaler`` in every dtype). Other
    aggregations are computed first and scaled after.

    Args:
        aggr: a name, a list of names (a MultiAggregation) or an Aggregation.
        scaler: a scaler name or a list of them.
        deg: histogram of in-degrees of the training graphs (``deg[d]`` = nodes of degree d).
        train_norm: learn the normalisers.
        aggr_kwargs: constructor arguments of the aggregation(s).
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
