"""``SAGEConv``: PyG 2.8's GraphSAGE operator on iognn's aggregations.

``out_i = lin_l(aggr_{j -> i} x_j) + lin_r(x_i)``; optional ``project`` (``x_j <- relu(lin(x_j))``
first) and L2 ``normalize`` of the output. ``aggr`` is anything PyG accepts: a name, a list (a
MultiAggregation, all of whose iognn reductions run in one fused pass) or an Aggregation; the
aggregation reads the layer's Graph directly. A torch.sparse adjacency weights the messages by its
values when PyG would take its fused path (``aggr`` one of add/sum/mean/min/max).
"""
from __future__ import annotations

from typing import List, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from .._amp import autocast_input
from .._doc import shared_doc
from .._graph import message_sizes, weighted_adjacency
from ..linear import Linear
from ._common import (MessagePassingArgs, MessagePassingModule, aggregate_weighted,
                      fused_propagate_linear, split_input, store_arguments)


@shared_doc
class SAGEConv(MessagePassingModule):
    r"""GraphSAGE operator, replacing ``torch_geometric.nn.SAGEConv`` (Hamilton et al.,
    "Inductive Representation Learning on Large Graphs", NeurIPS 2017).

    .. math::
        \mathbf{x}'_i = \mathbf{W}_1 \mathbf{x}_i
        + \mathbf{W}_2 \cdot \mathrm{aggr}_{j \in \mathcal{N}(i)} \, \mathbf{x}_j

    :math:`\mathbf{W}_2` is ``lin_l`` (with the bias), :math:`\mathbf{W}_1` is ``lin_r`` (no
    bias). With ``project=True`` the source features are first replaced by
    :math:`\mathrm{ReLU}(\mathbf{W}_3 \mathbf{x}_j + \mathbf{b})`; with ``normalize=True`` each
    output row is divided by its L2 norm.

    Args:
        in_channels (int or tuple): Size of each input feature vector (``-1``: lazy), or a
            ``(source, destination)`` pair of sizes for bipartite graphs.
        out_channels (int): Size of each output feature vector.
        aggr (str or list or Aggregation, optional): Neighbourhood aggregation: a name
            (``'mean'``, ``'max'``, ``'lstm'``, ...), a list of names (a ``MultiAggregation``,
            concatenated; iognn's reductions in it run in one pass) or an aggregation module.
            ``'lstm'`` gets ``in_channels``/``out_channels`` filled in. (default: ``'mean'``)
        normalize (bool, optional): L2-normalise each output row. (default: ``False``)
        root_weight (bool, optional): Add the root term :math:`\mathbf{W}_1 \mathbf{x}_i`.
            (default: ``True``)
        project (bool, optional): Project and ReLU the source features before aggregating
            (not with lazy ``in_channels``: ``ValueError``, as in PyG). (default: ``False``)
        bias (bool, optional): Learn the bias of ``lin_l``. (default: ``True``)
        {mp_kwargs}

    Shapes:
        {pair_input}
          ``edge_index`` ``[2, E]`` (or any adjacency of ``docs/nn.md``); ``size``
          ``(N_s, N_t)`` (optional).
        - **output:** ``[N, F_out]``, or ``[N_t, F_out]`` for a pair (``[*, N, F_out]`` for a
          batch)

    iognn differences:
        {aggr_differences}
    """

    def __init__(self, in_channels: Union[int, Tuple[int, int]], out_channels: int,
                 aggr: Optional[Union[str, List[str], torch.nn.Module]] = "mean",
                 normalize: bool = False, root_weight: bool = True, project: bool = False,
                 bias: bool = True, **kwargs):
        super().__init__()
        store_arguments(self, in_channels=in_channels, out_channels=out_channels,
                        normalize=normalize, root_weight=root_weight, project=project)
        if isinstance(in_channels, int):
            in_channels = (in_channels, in_channels)
        args = MessagePassingArgs("SAGEConv", dict(kwargs, aggr=aggr))
        if aggr == "lstm":
            args.aggr_kwargs.setdefault("in_channels", in_channels[0])
            args.aggr_kwargs.setdefault("out_channels", in_channels[0])
        args.install(self)
        if project:
            if in_channels[0] <= 0:
                raise ValueError("'SAGEConv' does not support lazy initialization with "
                                 "`project=True`")
            self.lin = Linear(in_channels[0], in_channels[0], bias=True)
        if hasattr(self.aggr_module, "get_out_channels"):  # a MultiAggregation (iognn's or PyG's)
            aggr_out_channels = self.aggr_module.get_out_channels(in_channels[0])
        else:
            aggr_out_channels = in_channels[0]
        self.lin_l = Linear(aggr_out_channels, out_channels, bias=bias)
        if root_weight:
            self.lin_r = Linear(in_channels[1], out_channels, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.aggr_module.reset_parameters()
        if self.project:
            self.lin.reset_parameters()
        self.lin_l.reset_parameters()
        if self.root_weight:
            self.lin_r.reset_parameters()

    def forward(self, x: Union[Tensor, Tuple[Tensor, Optional[Tensor]]], edge_index,
                size: Optional[Tuple[int, int]] = None) -> Tensor:
        x_src, x_dst = split_input(x)
        if self.project:
            x_src = self.lin(x_src).relu()
        num_src, num_dst = message_sizes(edge_index, x_src, x_dst, size, self.node_dim)
        adj = weighted_adjacency("SAGEConv", edge_index, num_src, num_dst, coalesce=self.fuse,
                                 use_values=self.fuse)
        values = adj.values if adj.sparse is not None and adj.sparse.is_torch_sparse else None
        out = fused_propagate_linear(self.aggr_module, self.node_dim, adj.graph, x_src, x_dst,
                                     values, self.lin_l, self.lin_r if self.root_weight else None)
        if out is None:
            out = self.lin_l(aggregate_weighted(self.aggr_module, adj.graph,
                                                autocast_input(x_src), values,
                                                node_dim=self.node_dim))
            if self.root_weight and x_dst is not None:
                out = out + self.lin_r(x_dst)
        if self.normalize:
            out = F.normalize(out, p=2.0, dim=-1)
        return out

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"aggr={self.aggr})")
