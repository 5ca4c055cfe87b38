"""``GINConv`` and ``GINEConv``: PyG 2.8's graph isomorphism operators.

GINConv: ``out_i = nn((1 + eps) * x_i + sum_{j -> i} x_j)`` on iognn's propagate.
GINEConv: ``out_i = nn((1 + eps) * x_i + sum_{j -> i} relu(x_j + lin(e_ji)))``: the per-edge
messages are formed in the graph's CSR order and reduced over its MessageGraph (no scatter).
``eps`` is a parameter when ``train_eps``, else a buffer (both named ``eps``, as in PyG). Bipartite
input ``(x_src, x_dst)`` sums source messages into destinations (no root term when ``x_dst`` is
None). A torch.sparse adjacency weights GINConv's messages by its values (PyG's fused path).
"""
from __future__ import annotations

from typing import Callable, Optional, Tuple, Union

import torch
from torch import Tensor

from .._amp import autocast_input, like
from .._doc import shared_doc
from .._graph import messages_graph, structural_adjacency, weighted_adjacency
from ..aggr.base import aggregate_with
from ..linear import Linear
from ._common import (MessagePassingArgs, MessagePassingModule, aggregate_weighted,
                      check_edge_values, from_node_major, node_major, reset_module)


class _GINBase(MessagePassingModule):
    def _init_eps(self, nn: Callable, eps: float, train_eps: bool) -> None:
        self.nn = nn
        self.initial_eps = eps
        if train_eps:
            self.eps = torch.nn.Parameter(torch.empty(1))
        else:
            self.register_buffer("eps", torch.empty(1))

    def _update(self, out: Tensor, x_dst: Optional[Tensor]) -> Tensor:
        if x_dst is not None:
            x_dst = autocast_input(x_dst)
            out = out + (1 + like(self.eps, x_dst)) * x_dst
        return self.nn(out)

    def reset_parameters(self) -> None:
        self.aggr_module.reset_parameters()
        reset_module(self.nn)
        with torch.no_grad():
            self.eps.fill_(self.initial_eps)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(nn={self.nn})"


@shared_doc
class GINConv(_GINBase):
    r"""Graph isomorphism operator, replacing ``torch_geometric.nn.GINConv`` (Xu et al., "How
    Powerful are Graph Neural Networks?", ICLR 2019).

    .. math::
        \mathbf{x}'_i = h_{\boldsymbol{\Theta}} \left( (1 + \epsilon) \cdot \mathbf{x}_i
        + \sum_{j \in \mathcal{N}(i)} \mathbf{x}_j \right)

    :math:`h_{\boldsymbol{\Theta}}` is the user's module ``nn`` (typically an MLP). A
    torch.sparse adjacency's values weight the messages where PyG takes its fused path.

    Args:
        nn (Callable): Module applied to the aggregated features, mapping ``[*, F_in]`` to
            ``[*, F_out]``; ``reset_parameters()`` resets it.
        eps (float, optional): Initial value of :math:`\epsilon`. (default: ``0.0``)
        train_eps (bool, optional): Make :math:`\epsilon` a trainable parameter (else a buffer;
            both are named ``eps``). (default: ``False``)
        **kwargs (optional): PyG's ``MessagePassing`` arguments (``aggr``, default ``'add'``,
            ``aggr_kwargs``, ``node_dim``, ``decomposed_layers`` (no effect), ``flow``).

    Shapes:
        - **input:** ``x`` ``[N, F_in]``, a static-graph batch ``[*, N, F_in]``, or a pair
          ``(x_src [N_s, F_in], x_dst [N_t, F_in])`` (``x_dst`` may be ``None``: no
          :math:`(1 + \epsilon)\,\mathbf{x}_i` term); ``edge_index`` ``[2, E]`` (or any
          adjacency of ``docs/nn.md``); ``size`` ``(N_s, N_t)`` (optional).
        - **output:** ``[N, F_out]``, or ``[N_t, F_out]`` for a pair (``[*, N, F_out]`` for a
          batch)

    iognn differences:
        {aggr_differences}
    """

    def __init__(self, nn: Callable, eps: float = 0.0, train_eps: bool = False, **kwargs):
        super().__init__()
        MessagePassingArgs("GINConv", kwargs, aggr="add").install(self)
        self._init_eps(nn, eps, train_eps)
        self.reset_parameters()

    def forward(self, x: Union[Tensor, Tuple[Tensor, Optional[Tensor]]], edge_index,
                size: Optional[Tuple[int, int]] = None) -> Tensor:
        x_src, x_dst, num_src, num_dst = self._split_sized(x, edge_index, size)
        adj = weighted_adjacency("GINConv", edge_index, num_src, num_dst, coalesce=self.fuse,
                                 use_values=self.fuse)
        values = adj.values if adj.sparse is not None and adj.sparse.is_torch_sparse else None
        out = aggregate_weighted(self.aggr_module, adj.graph, autocast_input(x_src), values,
                                 node_dim=self.node_dim)
        return self._update(out, x_dst)


@shared_doc
class GINEConv(_GINBase):
    r"""GIN with edge features, replacing ``torch_geometric.nn.GINEConv`` (Hu et al.,
    "Strategies for Pre-training Graph Neural Networks", ICLR 2020).

    .. math::
        \mathbf{x}'_i = h_{\boldsymbol{\Theta}} \left( (1 + \epsilon) \cdot \mathbf{x}_i
        + \sum_{j \in \mathcal{N}(i)} \mathrm{ReLU}
        \left( \mathbf{x}_j + \boldsymbol{\Theta}_e \mathbf{e}_{j,i} \right) \right)

    :math:`\boldsymbol{\Theta}_e` (``lin``, with bias) exists only with ``edge_dim``; without it
    the edge features must already have the node features' width. The per-edge messages are
    formed in CSR order and reduced without a scatter.

    Args:
        nn (torch.nn.Module): Module applied to the aggregated features, mapping ``[*, F_in]``
            to ``[*, F_out]``; ``reset_parameters()`` resets it.
        eps (float, optional): Initial value of :math:`\epsilon`. (default: ``0.0``)
        train_eps (bool, optional): Make :math:`\epsilon` a trainable parameter (else a buffer).
            (default: ``False``)
        edge_dim (int, optional): Edge feature size; when set, ``lin`` maps edge features to
            ``nn``'s input size, read from ``in_features`` / ``in_channels`` of ``nn`` (or of its
            first module for a ``Sequential``; ``ValueError`` if neither exists).
            (default: ``None``)
        **kwargs (optional): PyG's ``MessagePassing`` arguments (``aggr``, default ``'add'``,
            ``aggr_kwargs``, ``node_dim``, ``decomposed_layers`` (no effect), ``flow``).

    Shapes:
        - **input:** ``x`` ``[N, F_in]``, a static-graph batch ``[*, N, F_in]``, or a pair
          ``(x_src [N_s, F_in], x_dst [N_t, F_in])`` (``x_dst`` may be ``None``: no root term);
          ``edge_index`` ``[2, E]`` (or any adjacency of ``docs/nn.md``); ``edge_attr``
          ``[E, D]``, required (a sparse adjacency's values stand in for it) and shared by all
          positions of a batch; ``size`` ``(N_s, N_t)`` (optional).
        - **output:** ``[N, F_out]``, or ``[N_t, F_out]`` for a pair (``[*, N, F_out]`` for a
          batch)

    iognn differences:
        {aggr_differences}
    """

    def __init__(self, nn: torch.nn.Module, eps: float = 0.0, train_eps: bool = False,
                 edge_dim: Optional[int] = None, **kwargs):
        super().__init__()
        MessagePassingArgs("GINEConv", kwargs, aggr="add").install(self)
        self._init_eps(nn, eps, train_eps)
        if edge_dim is not None:
            first = nn[0] if isinstance(nn, torch.nn.Sequential) else nn
            if hasattr(first, "in_features"):
                in_channels = first.in_features
            elif hasattr(first, "in_channels"):
                in_channels = first.in_channels
            else:
                raise ValueError("Could not infer input channels from `nn`.")
            self.lin = Linear(edge_dim, in_channels)
        else:
            self.lin = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        super().reset_parameters()
        if self.lin is not None:
            self.lin.reset_parameters()

    def forward(self, x: Union[Tensor, Tuple[Tensor, Optional[Tensor]]], edge_index,
                edge_attr: Optional[Tensor] = None,
                size: Optional[Tuple[int, int]] = None) -> Tensor:
        x_src, x_dst, num_src, num_dst = self._split_sized(x, edge_index, size)
        adj = structural_adjacency("GINEConv", edge_index, num_src, num_dst, add_loops=False)
        if edge_attr is None:
            edge_attr = adj.values
        elif self.lin is not None and self.lin.in_channels > 0:
            check_edge_values("GINEConv", "edge_attr", edge_attr, adj.graph, self.lin.in_channels)
        if edge_attr is None:
            raise ValueError("GINEConv requires edge_attr")
        x_src = autocast_input(x_src)
        if self.lin is None and x_src.size(-1) != edge_attr.size(-1):
            raise ValueError("Node and edge feature dimensionalities do not match. Consider "
                             "setting the 'edge_dim' attribute of 'GINEConv'")
        edge_attr = self.lin(edge_attr) if self.lin is not None else edge_attr
        graph = adj.graph
        messages = node_major(x_src, self.node_dim).index_select(0, graph.col.long())
        edge = like(graph.csr_edge_values(edge_attr), messages)
        if messages.dim() > edge.dim():  # batched features: one edge feature per batch position
            edge = edge.view((edge.size(0),) + (1,) * (messages.dim() - edge.dim())
                             + tuple(edge.shape[1:]))
        messages = (messages + edge).relu()
        out = aggregate_with(self.aggr_module, messages_graph(graph), messages, self.node_dim)
        return self._update(from_node_major(out, x_src, self.node_dim), x_dst)
