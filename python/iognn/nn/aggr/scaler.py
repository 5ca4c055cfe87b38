"""``DegreeScalerAggregation``: PNA's aggregators scaled by functions of the in-degree."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

import torch
from torch import Tensor

from .._amp import like
from .base import Aggregation, aggregate_with

SCALERS = ("identity", "amplification", "attenuation", "linear", "inverse_linear")


class DegreeScalerAggregation(Aggregation):
    """Drop-in for ``torch_geometric.nn.aggr.DegreeScalerAggregation``.

    ``out = cat_s(scaler_s(deg) * aggr(x))`` over the scalers, with ``deg`` the number of messages
    of each destination (its in-degree) and the normalisers ``avg_deg_lin`` / ``avg_deg_log``
    (buffers, or parameters with ``train_norm``) from the degree histogram ``deg``:
    amplification ``log(d + 1) / avg_deg_log``, attenuation ``avg_deg_log / log(max(d, 1) + 1)``,
    linear ``d / avg_deg_lin``, inverse_linear ``avg_deg_lin / max(d, 1)``.

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

    def aggregate(self, graph, x: Tensor) -> Tensor:
        out = aggregate_with(self.aggr, graph, x)
        deg = graph.degree("in").to(out.dtype).view((-1,) + (1,) * (out.dim() - 1))
        avg_lin, avg_log = like(self.avg_deg_lin, out), like(self.avg_deg_log, out)
        outs = []
        for name in self.scaler:
            if name == "identity":
                outs.append(out)
            elif name == "amplification":
                outs.append(out * (torch.log(deg + 1) / avg_log))
            elif name == "attenuation":
                outs.append(out * (avg_log / torch.log(deg.clamp(min=1) + 1)))
            elif name == "linear":
                outs.append(out * (deg / avg_lin))
            else:  # inverse_linear
                outs.append(out * (avg_lin / deg.clamp(min=1)))
        return torch.cat(outs, dim=-1) if len(outs) > 1 else outs[0]
