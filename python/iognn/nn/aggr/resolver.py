"""Turning PyG's ``aggr`` arguments into aggregation modules.

A name or class of a reduction iognn implements gives the iognn module; a list gives an iognn
MultiAggregation; a PyG instance of a supported class is converted (sharing its parameters); any
other aggregation (e.g. ``'lstm'``, ``'softmax'``, ``'mul'``, PyG's
``MultiAggregation(mode='attn')``) is resolved by PyG and run as PyG runs it, on gathered messages
(see ``base.aggregate_with``).
"""
from __future__ import annotations

import torch

from .._share import build_shared
from .base import Aggregation
from .basic import (MaxAggregation, MeanAggregation, MinAggregation, StdAggregation,
                    SumAggregation, VarAggregation)
from .multi import MultiAggregation
from .scaler import DegreeScalerAggregation

_BY_NAME = {"sum": SumAggregation, "add": SumAggregation, "mean": MeanAggregation,
            "min": MinAggregation, "max": MaxAggregation, "var": VarAggregation,
            "std": StdAggregation}


def _normalize(name: str) -> str:
    name = name.lower().replace("-", "").replace("_", "").replace(" ", "")
    return name[: -len("aggregation")] if name.endswith("aggregation") else name


def resolve_aggregation(query, **kwargs):
    """The aggregation module for a PyG ``aggr`` argument (see the module docstring)."""
    if isinstance(query, Aggregation):
        return query
    if isinstance(query, (list, tuple)):
        return MultiAggregation(query, **kwargs)
    if isinstance(query, str) and _normalize(query) in _BY_NAME:
        return _BY_NAME[_normalize(query)](**kwargs)
    if isinstance(query, torch.nn.Module):
        return from_pyg_aggregation(query)
    from torch_geometric.nn.resolver import aggregation_resolver
    return aggregation_resolver(query, **kwargs)


def from_pyg_aggregation(module: torch.nn.Module) -> torch.nn.Module:
    """The iognn equivalent of a PyG aggregation instance, holding the same parameter objects; the
    instance itself when iognn has no equivalent."""
    import torch_geometric.nn.aggr as pyg_aggr
    kind = type(module)
    basic = {pyg_aggr.SumAggregation: SumAggregation, pyg_aggr.MeanAggregation: MeanAggregation,
             pyg_aggr.MinAggregation: MinAggregation, pyg_aggr.MaxAggregation: MaxAggregation}
    if kind in basic:
        return basic[kind]()
    if kind is pyg_aggr.VarAggregation:
        return VarAggregation(module.semi_grad)
    if kind is pyg_aggr.StdAggregation:
        return StdAggregation(module.var_aggr.semi_grad)
    if kind is pyg_aggr.MultiAggregation and module.mode != "attn":
        children = [from_pyg_aggregation(a) for a in module.aggrs]
        mode_kwargs = {}
        if module.mode == "proj":
            mode_kwargs = dict(in_channels=module.in_channels, out_channels=module.out_channels,
                               bias=module.lin.bias is not None)
        elif module.out_channels is not None:
            mode_kwargs = dict(in_channels=module.in_channels, out_channels=module.out_channels)
        ours = build_shared(lambda: MultiAggregation(children, mode=module.mode,
                                                     mode_kwargs=mode_kwargs), module)
        ours.aggrs = torch.nn.ModuleList(children)  # converted children, not PyG's
        return ours
    if kind is pyg_aggr.DegreeScalerAggregation:
        inner = from_pyg_aggregation(module.aggr)
        train_norm = isinstance(module.avg_deg_lin, torch.nn.Parameter)
        # Built around a placeholder: sharing must not reach into the converted inner module.
        ours = build_shared(lambda: DegreeScalerAggregation(
            "sum", module.scaler, torch.ones(1, device="cpu"), train_norm), module)
        ours.aggr = inner
        ours.init_avg_deg_lin = module.init_avg_deg_lin
        ours.init_avg_deg_log = module.init_avg_deg_log
        return ours
    return module
