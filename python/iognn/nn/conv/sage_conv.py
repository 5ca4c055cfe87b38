"""``SAGEConv``: PyG 2.8's GraphSAGE operator on iognn's propagate.

``out_i = lin_l(aggr_{j -> i} x_j) + lin_r(x_i)`` with ``aggr`` mean (0 for a node without
in-edges) or sum; optional ``project`` (``x_j <- relu(lin(x_j))`` first) and L2 ``normalize`` of
the output. Bipartite input ``(x_src, x_dst)`` aggregates source features into destinations.
"""
from __future__ import annotations

from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from ...ops.propagate import propagate
from .._graph import layer_graph, node_counts
from ..linear import Linear

_AGGRS = {"mean": "mean", "sum": "sum", "add": "sum"}


class SAGEConv(torch.nn.Module):
    """Drop-in for ``torch_geometric.nn.SAGEConv`` with ``aggr`` in ``'mean' | 'sum' | 'add'``.

    Args:
        in_channels: an int, or ``(source, destination)`` sizes for bipartite graphs.
        out_channels: output size.
        aggr: neighbourhood reduction.
        normalize: L2-normalise each output row.
        root_weight: add ``lin_r(x_dst)``.
        project: apply ``relu(lin(x_src))`` to the source features before aggregating.
        bias: bias of ``lin_l``.
    """

    def __init__(self, in_channels: Union[int, Tuple[int, int]], out_channels: int,
                 aggr: str = "mean", normalize: bool = False, root_weight: bool = True,
                 project: bool = False, bias: bool = True):
        super().__init__()
        if not isinstance(aggr, str) or aggr not in _AGGRS:
            # PyG accepts more (min/max/var/std, lists, Aggregation modules): not in this layer yet.
            raise NotImplementedError(f"SAGEConv: aggr={aggr!r} is not supported by iognn yet "
                                      f"(supported: {sorted(_AGGRS)})")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.aggr = aggr
        self.normalize = normalize
        self.root_weight = root_weight
        self.project = project
        src_channels, dst_channels = ((in_channels, in_channels) if isinstance(in_channels, int)
                                      else in_channels)
        if project:
            self.lin = Linear(src_channels, src_channels, bias=True)
        self.lin_l = Linear(src_channels, out_channels, bias=bias)
        if root_weight:
            self.lin_r = Linear(dst_channels, out_channels, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.project:
            self.lin.reset_parameters()
        self.lin_l.reset_parameters()
        if self.root_weight:
            self.lin_r.reset_parameters()

    def forward(self, x: Union[Tensor, Tuple[Tensor, Optional[Tensor]]], edge_index,
                size: Optional[Tuple[int, int]] = None) -> Tensor:
        x_src, x_dst = (x, x) if isinstance(x, Tensor) else x
        graph = layer_graph("SAGEConv", edge_index, node_counts(x_src, x_dst, size))
        if self.project:
            x_src = self.lin(x_src).relu()
        out = self.lin_l(propagate(graph, x_src, None, _AGGRS[self.aggr]))
        if self.root_weight and x_dst is not None:
            out = out + self.lin_r(x_dst)
        if self.normalize:
            out = F.normalize(out, p=2.0, dim=-1)
        return out

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"aggr={self.aggr})")
