"""``GraphConv``: PyG 2.8's higher-order GNN operator (Morris et al.).

``out_i = lin_rel(aggr_{j -> i} e_ji * x_j) + lin_root(x_i)`` with optional edge weights ``e``
(sum and mean run on propagate; other aggregations of weighted messages over the MessageGraph).
A sparse adjacency's values are the weights (torch_sparse.SparseTensor included), as in PyG.
"""
from __future__ import annotations

from typing import Optional, Tuple, Union

from torch import Tensor

from .._amp import autocast_input
from .._doc import shared_doc
from .._graph import weighted_adjacency
from ..linear import Linear
from ._common import (MessagePassingArgs, MessagePassingModule, aggregate_weighted,
                      check_edge_values, fused_propagate_linear)


@shared_doc
class GraphConv(MessagePassingModule):
    r"""Higher-order GNN operator, replacing ``torch_geometric.nn.GraphConv`` (Morris et al.,
    "Weisfeiler and Leman Go Neural: Higher-order Graph Neural Networks", AAAI 2019).

    .. math::
        \mathbf{x}'_i = \mathbf{W}_1 \mathbf{x}_i
        + \mathbf{W}_2 \, \mathrm{aggr}_{j \in \mathcal{N}(i)} \, e_{j,i} \cdot \mathbf{x}_j

    :math:`\mathbf{W}_1` is ``lin_root`` (no bias), :math:`\mathbf{W}_2` is ``lin_rel`` (with
    the bias) and :math:`e_{j,i}` the edge weight (1 without ``edge_weight``; a sparse
    adjacency's values are the weights).

    Args:
        in_channels (int or tuple): Size of each input feature vector (``-1``: lazy), or a
            ``(source, destination)`` pair of sizes for bipartite graphs.
        out_channels (int): Size of each output feature vector.
        aggr (str or list or Aggregation, optional): Neighbourhood aggregation (any of PyG's;
            sum and mean of weighted messages run on ``propagate``). (default: ``'add'``)
        bias (bool, optional): Learn the bias of ``lin_rel``. (default: ``True``)
        {mp_kwargs}

    Shapes:
        {pair_input}
          ``edge_index`` ``[2, E]`` (or any adjacency of ``docs/nn.md``); ``edge_weight``
          ``[E]`` (optional); ``size`` ``(N_s, N_t)`` (optional).
        - **output:** ``[N, F_out]``, or ``[N_t, F_out]`` for a pair (``[*, N, F_out]`` for a
          batch)

    iognn differences:
        - An ``edge_weight`` that is not 1-D ``[E]`` (e.g. ``[E, 1]``) raises ``ValueError``.
        {aggr_differences}
    """

    def __init__(self, in_channels: Union[int, Tuple[int, int]], out_channels: int,
                 aggr: str = "add", bias: bool = True, **kwargs):
        super().__init__()
        MessagePassingArgs("GraphConv", dict(kwargs, aggr=aggr)).install(self)
        self.in_channels = in_channels
        self.out_channels = out_channels
        if isinstance(in_channels, int):
            in_channels = (in_channels, in_channels)
        self.lin_rel = Linear(in_channels[0], out_channels, bias=bias)
        self.lin_root = Linear(in_channels[1], out_channels, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.aggr_module.reset_parameters()
        self.lin_rel.reset_parameters()
        self.lin_root.reset_parameters()

    def forward(self, x: Union[Tensor, Tuple[Tensor, Optional[Tensor]]], edge_index,
                edge_weight: Optional[Tensor] = None,
                size: Optional[Tuple[int, int]] = None) -> Tensor:
        x_src, x_dst, num_src, num_dst = self._split_sized(x, edge_index, size)
        adj = weighted_adjacency("GraphConv", edge_index, num_src, num_dst, coalesce=self.fuse,
                                 use_values=True)
        if adj.sparse is not None and (self.fuse or edge_weight is None):
            edge_weight = adj.values  # PyG's fused path ignores edge_weight for sparse inputs
        elif edge_weight is not None:
            check_edge_values("GraphConv", "edge_weight", edge_weight, adj.graph)
        out = fused_propagate_linear(self.aggr_module, self.node_dim, adj.graph, x_src, x_dst,
                                     edge_weight, self.lin_rel, self.lin_root)
        if out is not None:
            return out
        out = aggregate_weighted(self.aggr_module, adj.graph, autocast_input(x_src), edge_weight,
                                 node_dim=self.node_dim)
        out = self.lin_rel(out)
        if x_dst is not None:
            out = out + self.lin_root(x_dst)
        return out

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"
