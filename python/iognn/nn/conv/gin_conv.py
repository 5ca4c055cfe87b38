"""``GINConv``: PyG 2.8's graph isomorphism operator on iognn's propagate.

``out_i = nn((1 + eps) * x_i + sum_{j -> i} x_j)``; ``eps`` is a parameter when ``train_eps``, else
a buffer (both named ``eps``, as in PyG). Bipartite input ``(x_src, x_dst)`` sums source features
into destinations (no root term when ``x_dst`` is None).
"""
from __future__ import annotations

from typing import Callable, Optional, Tuple, Union

import torch
from torch import Tensor

from ...ops.propagate import propagate
from .._graph import layer_graph, node_counts


def reset_module(module) -> None:
    """PyG's ``reset``: ``reset_parameters`` of ``module``, else of each child, recursively."""
    if hasattr(module, "reset_parameters"):
        module.reset_parameters()
    elif isinstance(module, torch.nn.Module):
        for child in module.children():
            reset_module(child)


class GINConv(torch.nn.Module):
    """Drop-in for ``torch_geometric.nn.GINConv``.

    Args:
        nn: the module applied after aggregation (e.g. an MLP), reset by ``reset_parameters``.
        eps: initial epsilon.
        train_eps: learn epsilon.
    """

    def __init__(self, nn: Callable, eps: float = 0.0, train_eps: bool = False):
        super().__init__()
        self.nn = nn
        self.initial_eps = eps
        if train_eps:
            self.eps = torch.nn.Parameter(torch.empty(1))
        else:
            self.register_buffer("eps", torch.empty(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        reset_module(self.nn)
        with torch.no_grad():
            self.eps.fill_(self.initial_eps)

    def forward(self, x: Union[Tensor, Tuple[Tensor, Optional[Tensor]]], edge_index,
                size: Optional[Tuple[int, int]] = None) -> Tensor:
        x_src, x_dst = (x, x) if isinstance(x, Tensor) else x
        graph = layer_graph("GINConv", edge_index, node_counts(x_src, x_dst, size))
        out = propagate(graph, x_src, None, "sum")
        if x_dst is not None:
            out = out + (1 + self.eps) * x_dst
        return self.nn(out)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(nn={self.nn})"
