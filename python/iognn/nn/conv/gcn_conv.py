"""``GCNConv``: PyG 2.8's graph convolution (Kipf & Welling) on iognn's propagate.

``out = D^-1/2 (A + I) D^-1/2 (x W^T) + b`` with PyG's exact conventions: self-loops are added by
``add_remaining_self_loops`` (an existing loop keeps its weight, and every node gets exactly one),
degrees are weighted in-degrees, a zero degree gives a zero weight. As in PyG 2.8, ``improved=True``
only changes the weight of added loops when ``edge_weight`` is given (without it every weight is 1).
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor
from torch.nn import Parameter

from ...graph import Graph, SelfLoops
from ...ops._checks import acc_dtype
from ...ops.propagate import gcn_norm, propagate
from .._graph import layer_graph
from ..linear import Linear


class GCNConv(torch.nn.Module):
    """Drop-in for ``torch_geometric.nn.GCNConv`` (same arguments, parameters and outputs).

    Args:
        in_channels, out_channels: feature sizes.
        improved: self-loop weight 2 instead of 1 (see the module note).
        cached: keep the normalised graph of the first call (transductive training only).
        add_self_loops: add self-loops (default: same as ``normalize``).
        normalize: apply the symmetric normalisation (else plain weighted sum).
        bias: learn an additive bias.
    """

    def __init__(self, in_channels: int, out_channels: int, improved: bool = False,
                 cached: bool = False, add_self_loops: Optional[bool] = None,
                 normalize: bool = True, bias: bool = True):
        super().__init__()
        if add_self_loops is None:
            add_self_loops = normalize
        if add_self_loops and not normalize:
            raise ValueError("GCNConv does not support adding self-loops to the graph when no "
                             "on-the-fly normalization is applied")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.improved = improved
        self.cached = cached
        self.add_self_loops = add_self_loops
        self.normalize = normalize
        self._cached: Optional[Tuple[Graph, Optional[Tensor]]] = None
        self.lin = Linear(in_channels, out_channels, bias=False, weight_initializer="glorot")
        if bias:
            self.bias = Parameter(torch.empty(out_channels))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lin.reset_parameters()
        if self.bias is not None:
            with torch.no_grad():
                self.bias.zero_()
        self._cached = None

    def _normalised_graph(self, x: Tensor, edge_index, edge_weight: Optional[Tensor]):
        """(graph, per-edge weights in augmented order or None)."""
        if self._cached is not None:
            return self._cached
        loops = SelfLoops.ADD_REMAINING if self.add_self_loops else SelfLoops.KEEP
        graph = layer_graph("GCNConv", edge_index, x.size(0), loops)
        weight = graph.augment_edge_values(edge_weight, 2.0 if self.improved else 1.0)
        if self.normalize:
            weight = gcn_norm(graph, weight, dtype=acc_dtype(x.dtype))
        if self.cached:
            self._cached = (graph, weight)
        return graph, weight

    def forward(self, x: Tensor, edge_index, edge_weight: Optional[Tensor] = None) -> Tensor:
        if isinstance(x, (tuple, list)):
            raise ValueError("GCNConv received a tuple of node features as input while this layer "
                             "does not support bipartite message passing")
        graph, weight = self._normalised_graph(x, edge_index, edge_weight)
        out = propagate(graph, self.lin(x), weight, "sum")
        if self.bias is not None:
            out = out + self.bias
        return out

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"
