"""``iognn.accelerate(model)``: swap the PyG layers of any model for iognn's, in place.

Every module whose class is exactly one of PyG's supported layers or aggregations is replaced by
the iognn class of the same name, holding the very same parameter and buffer objects (shared, not
copied: an optimizer built before the call keeps working, and ``state_dict()`` is unchanged) and
the same user submodules (a GINConv's ``nn``). The replacement is built on the meta device, so it
neither allocates memory nor draws random numbers: training after the call follows the same random
stream as before. Other PyG modules (unsupported layers, subclasses of supported ones, layers with
hooks or options iognn does not implement) are left alone, internals included, and listed with the
reason.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import torch

from . import nn as io_nn
from .nn._share import build_shared
from .nn.aggr.resolver import from_pyg_aggregation

_LAYERS = ("GCNConv", "SAGEConv", "GINConv", "GINEConv", "GraphConv", "GATConv", "GATv2Conv",
           "TransformerConv", "AGNNConv", "PNAConv")
_ATTENTION = ("GATConv", "GATv2Conv", "TransformerConv")
_SUM_ONLY = _ATTENTION + ("AGNNConv",)  # layers on the attention ops, which sum the messages
_PROPAGATE_HOOKS = ("_propagate_forward_pre_hooks", "_propagate_forward_hooks",
                    "_message_forward_pre_hooks", "_message_forward_hooks",
                    "_aggregate_forward_pre_hooks", "_aggregate_forward_hooks",
                    "_message_and_aggregate_forward_pre_hooks",
                    "_message_and_aggregate_forward_hooks", "_edge_update_forward_pre_hooks",
                    "_edge_update_forward_hooks")
_MODULE_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                 "_backward_pre_hooks")


@dataclass
class AccelerateReport:
    """What :func:`accelerate` did.

    ``replaced``: ``(qualified name, PyG class name)`` of every swapped module ("" is the root).
    ``skipped``: ``(qualified name, class name, reason)`` of every PyG layer or aggregation left
    as it was. ``model``: the accelerated model - the same object that was passed, unless the root
    itself was a supported layer (a module cannot replace itself in place).
    """
    replaced: List[Tuple[str, str]] = field(default_factory=list)
    skipped: List[Tuple[str, str, str]] = field(default_factory=list)
    model: Optional[torch.nn.Module] = None


def accelerate(model: torch.nn.Module) -> AccelerateReport:
    """Replaces the supported PyG layers of ``model`` by iognn layers sharing their parameters.

    Supported: GCNConv, SAGEConv, GINConv, GINEConv, GraphConv, GATConv, GATv2Conv,
    TransformerConv, AGNNConv, PNAConv and the Sum/Mean/Min/Max/Var/Std/Multi/DegreeScaler
    aggregations.
    Returns an :class:`AccelerateReport`.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    report = AccelerateReport()
    root = _convert(model, "", report)
    report.model = root if root is not None else model
    if root is None:
        _walk(model, "", report)
    return report


def _walk(module: torch.nn.Module, prefix: str, report: AccelerateReport) -> None:
    for name, child in list(module._modules.items()):
        if child is None:
            continue
        qualified = f"{prefix}.{name}" if prefix else name
        skipped = len(report.skipped)
        replacement = _convert(child, qualified, report)
        if replacement is not None:
            module._modules[name] = replacement
        elif len(report.skipped) == skipped:  # not a PyG layer: look inside
            _walk(child, qualified, report)


def _convert(module: torch.nn.Module, name: str, report: AccelerateReport):
    """The iognn replacement of ``module`` (recorded in the report), or None."""
    from torch_geometric.nn.aggr import Aggregation as PyGAggregation
    from torch_geometric.nn.conv import MessagePassing
    import torch_geometric.nn as pyg_nn
    kind = type(module)
    if not isinstance(module, (MessagePassing, PyGAggregation)):
        return None
    if isinstance(module, PyGAggregation):
        converted = from_pyg_aggregation(module)
        if converted is module:
            report.skipped.append((name, kind.__name__, "no iognn equivalent"))
            return None
        report.replaced.append((name, kind.__name__))
        return converted
    supported = kind.__name__ in _LAYERS and kind is getattr(pyg_nn, kind.__name__)
    reason = _unsupported_reason(module) if supported else (
        "a subclass of a PyG layer (it may override message passing)"
        if any(issubclass(kind, getattr(pyg_nn, n)) for n in _LAYERS)
        else "no iognn equivalent")
    if reason is not None:
        report.skipped.append((name, kind.__name__, reason))
        return None
    layer = _from_pyg(module)
    report.replaced.append((name, kind.__name__))
    return layer


def _unsupported_reason(module) -> Optional[str]:
    if module.flow != "source_to_target":
        return "flow='target_to_source'"
    if getattr(module, "explain", None):
        return "explain mode"
    if any(getattr(module, h, None) for h in _PROPAGATE_HOOKS + _MODULE_HOOKS):
        return "has registered hooks"
    name = type(module).__name__
    if name in _SUM_ONLY and module.aggr not in ("add", "sum"):
        return f"aggr={module.aggr!r} (iognn's attention sums)"
    if name in _ATTENTION + ("PNAConv",) and module.node_dim != 0:
        return f"node_dim={module.node_dim}"
    return None


# ---- per-layer constructor arguments read back from a PyG instance -------------------------------
def _gin_nn(module) -> torch.nn.Module:
    """A placeholder for GIN's ``nn`` (the user's module is shared afterwards, never reset)."""
    lin = getattr(module, "lin", None)
    return torch.nn.Identity() if lin is None else torch.nn.Linear(1, lin.out_channels)


def _pna_args(module) -> Dict:
    """Placeholders where PyG keeps no constructor argument: the aggregation and the activation
    modules are PyG's own objects after sharing."""
    scaler = module.aggr_module
    inner = scaler.aggr
    count = len(inner.aggrs) if hasattr(inner, "aggrs") else 1
    return dict(aggregators=["sum"] * count, scalers=list(scaler.scaler),
                deg=torch.ones(1, device="cpu"), pre_layers=(len(module.pre_nns[0]) + 1) // 2,
                post_layers=(len(module.post_nns[0]) + 1) // 2, act="relu", act_kwargs=None,
                train_norm=isinstance(scaler.avg_deg_lin, torch.nn.Parameter))


_OVERRIDES: Dict[str, Callable[[torch.nn.Module], Dict]] = {
    "GCNConv": lambda m: dict(bias=m.bias is not None, aggr=m.aggr_module),
    "SAGEConv": lambda m: dict(bias=m.lin_l.bias is not None, aggr=m.aggr_module),
    "GraphConv": lambda m: dict(bias=m.lin_rel.bias is not None, aggr=m.aggr_module),
    "GINConv": lambda m: dict(nn=_gin_nn(m), eps=m.initial_eps,
                              train_eps=isinstance(m.eps, torch.nn.Parameter),
                              aggr=m.aggr_module),
    "GINEConv": lambda m: dict(nn=_gin_nn(m), eps=m.initial_eps,
                               train_eps=isinstance(m.eps, torch.nn.Parameter),
                               edge_dim=None if m.lin is None else m.lin.in_channels,
                               aggr=m.aggr_module),
    "GATConv": lambda m: dict(bias=m.bias is not None),
    "GATv2Conv": lambda m: dict(bias=m.bias is not None),
    "TransformerConv": lambda m: dict(bias=m.lin_key.bias is not None),
    "AGNNConv": lambda m: {},  # requires_grad and add_self_loops are PyG attributes
    "PNAConv": _pna_args,
}


def _from_pyg(module: torch.nn.Module) -> torch.nn.Module:
    name = type(module).__name__
    cls = getattr(io_nn, name)

    def build() -> torch.nn.Module:  # runs on the meta device: placeholders draw nothing
        overrides = _OVERRIDES[name](module)
        kwargs = {}
        for param, spec in inspect.signature(cls.__init__).parameters.items():
            if param == "self" or spec.kind in (spec.VAR_KEYWORD, spec.VAR_POSITIONAL):
                continue
            kwargs[param] = overrides[param] if param in overrides else getattr(module, param)
        if "aggr" in overrides and "aggr" not in kwargs:
            kwargs["aggr"] = overrides["aggr"]  # a MessagePassing keyword argument of the layer
        return cls(**kwargs)

    layer = build_shared(build, module)
    # PyG's own view of its aggregation (string form, fused path) and the converted module.
    layer.aggr_module = from_pyg_aggregation(module.aggr_module)
    layer.aggr = module.aggr
    layer.fuse = module.fuse
    layer.decomposed_layers = module.decomposed_layers
    layer.node_dim = module.node_dim
    layer.train(module.training)
    return layer
