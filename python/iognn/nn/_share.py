"""Building an iognn module that holds another module's parameter objects (shared, not copied):
used by ``iognn.accelerate`` and when a PyG aggregation instance is handed to an iognn layer."""
from __future__ import annotations

from typing import Callable

import torch

_CONTAINERS = (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ModuleDict)


def is_iognn_module(module) -> bool:
    return type(module).__module__.startswith("iognn.")


def build_shared(factory: Callable[[], torch.nn.Module], source: torch.nn.Module):
    """``factory()`` built on the meta device (no memory, no random draws: the global RNG is left
    as it was) and then given ``source``'s parameters, buffers and non-iognn submodules."""
    with torch.device("meta"):
        module = factory()
    share_state(module, source)
    return module


def share_state(ours: torch.nn.Module, theirs: torch.nn.Module) -> None:
    """Point ``ours``' parameters and buffers at ``theirs``' (same names). Submodules that are iognn
    classes or torch containers (ModuleList, Sequential, ModuleDict) are shared recursively, so an
    iognn submodule keeps its class; any other submodule (a user's MLP, a PyG module iognn runs as
    it is) is taken over as the very same object."""
    for kind in ("_parameters", "_buffers"):
        mine, other = getattr(ours, kind), getattr(theirs, kind)
        for name in mine:
            if name not in other:
                raise ValueError(f"{type(theirs).__name__} has no {kind[1:-1]} '{name}' to share")
            mine[name] = other[name]
    for name, child in ours._modules.items():
        source = theirs._modules.get(name)
        if child is None or source is None:
            if (child is None) != (source is None):
                raise ValueError(f"{type(theirs).__name__}.{name}: submodule present in only one "
                                 f"of the two modules")
            continue
        if (is_iognn_module(child) or type(child) in _CONTAINERS) and not is_iognn_module(source):
            share_state(child, source)
        else:
            ours._modules[name] = source
