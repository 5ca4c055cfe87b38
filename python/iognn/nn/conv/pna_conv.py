"""``PNAConv``: PyG 2.8's Principal Neighbourhood Aggregation operator (Corso et al.).

Per tower t: messages ``m_ji = pre_nn_t([x_i, x_j(, enc(e_ji))])`` are formed in the graph's CSR
order (PyG forms the same ``[E, towers, F_in]`` tensor), then every aggregator x scaler
combination runs on the graph's MessageGraph (all of the aggregators in one fused segment pass,
degrees from the CSR offsets); ``out = lin(cat_t post_nn_t([x, aggr]))``.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Union

import torch
from torch import Tensor

from .._amp import autocast_input
from .._graph import message_sizes, messages_graph, structural_adjacency
from ..aggr import DegreeScalerAggregation
from ..linear import Linear
from ._common import (MessagePassingArgs, MessagePassingModule, check_edge_values,
                      check_float_features, reset_module, store_arguments)


def _activation(act, act_kwargs: Optional[Dict[str, Any]]) -> torch.nn.Module:
    from torch_geometric.nn.resolver import activation_resolver  # PyG's names, e.g. 'relu'
    return activation_resolver(act, **(act_kwargs or {}))


class PNAConv(MessagePassingModule):
    r"""Principal Neighbourhood Aggregation, replacing ``torch_geometric.nn.PNAConv`` (Corso et
    al., "Principal Neighbourhood Aggregation for Graph Nets", NeurIPS 2020).

    .. math::
        \mathbf{x}'_i = \mathbf{W} \, \big\Vert_{t=1}^{T} \gamma_t \Big( \mathbf{x}_i,
        \underset{j \in \mathcal{N}(i)}{\bigoplus}
        h_t \big( \mathbf{x}_i, \mathbf{x}_j, \mathbf{e}_{j,i} \big) \Big),
        \qquad
        \bigoplus = \begin{bmatrix} 1 \\ s_{\mathrm{amp}}(d_i) \\ s_{\mathrm{att}}(d_i)
        \\ \vdots \end{bmatrix} \otimes \begin{bmatrix} \mathrm{mean} \\ \mathrm{min} \\
        \mathrm{max} \\ \vdots \end{bmatrix}

    Per tower :math:`t`, :math:`h_t` (``pre_nns[t]``) forms each edge's message from the
    concatenated target, source and encoded edge features, every aggregator is combined with
    every scaler of the in-degree :math:`d_i` (a ``DegreeScalerAggregation``: see it for the
    scalers), :math:`\gamma_t` (``post_nns[t]``) updates the concatenation of
    :math:`\mathbf{x}_i` and the aggregates, and ``lin`` (:math:`\mathbf{W}`, with a bias)
    mixes the towers' outputs.

    Args:
        in_channels (int): Size of each input feature vector (no lazy ``-1``: ``ValueError``,
            as in PyG).
        out_channels (int): Size of each output feature vector; divisible by ``towers``.
        aggregators (list of str): Aggregations, e.g. ``['mean', 'min', 'max', 'std']``
            (sum/mean/min/max/var/std are fused; other names run PyG's module).
        scalers (list of str): Degree scalers among ``'identity'``, ``'amplification'``,
            ``'attenuation'``, ``'linear'``, ``'inverse_linear'``.
        deg (Tensor): In-degree histogram of the training graphs (``deg[d]`` = number of
            nodes with ``d`` in-edges; see :meth:`get_degree_histogram`).
        edge_dim (int, optional): Edge feature size (encoded by ``edge_encoder``).
            (default: ``None``)
        towers (int, optional): Number of towers. (default: ``1``)
        pre_layers (int, optional): Linear layers of each message MLP. (default: ``1``)
        post_layers (int, optional): Linear layers of each update MLP. (default: ``1``)
        divide_input (bool, optional): Split the input features over the towers instead of
            giving each tower all of them. (default: ``False``)
        act (str or Callable, optional): Activation between MLP layers (PyG's resolver).
            (default: ``'relu'``)
        act_kwargs (dict, optional): Arguments of ``act``. (default: ``None``)
        train_norm (bool, optional): Learn the degree normalisers. (default: ``False``)
        **kwargs (optional): PyG's ``MessagePassing`` arguments except ``aggr``
            (``node_dim`` must stay 0; ``decomposed_layers`` has no effect).

    Shapes:
        - **input:** ``x`` ``[N, F_in]`` (no bipartite pair); ``edge_index`` ``[2, E]`` (or any
          adjacency of ``docs/nn.md``); ``edge_attr`` ``[E, D]`` (required with ``edge_dim``,
          refused without).
        - **output:** ``[N, F_out]``

    iognn differences:
        - torch.sparse adjacencies PyG's unfused path cannot read (uncoalesced COO, CSC) are
          computed on the stored entries (PyG fails).
        - ``node_dim`` other than 0 and ``flow='target_to_source'`` raise
          ``NotImplementedError``; not scriptable with ``torch.jit.script``; no
          ``propagate``/``message`` or explain machinery.
    """

    FIXED_NODE_DIM = 0

    def __init__(self, in_channels: int, out_channels: int, aggregators: List[str],
                 scalers: List[str], deg: Tensor, edge_dim: Optional[int] = None,
                 towers: int = 1, pre_layers: int = 1, post_layers: int = 1,
                 divide_input: bool = False, act: Union[str, Callable, None] = "relu",
                 act_kwargs: Optional[Dict[str, Any]] = None, train_norm: bool = False,
                 **kwargs):
        super().__init__()
        args = MessagePassingArgs("PNAConv", kwargs, node_dim=0, fixed_aggr=True)
        args.aggr = DegreeScalerAggregation(aggregators, scalers, deg, train_norm)
        args.install(self)
        if in_channels <= 0:
            raise ValueError("'PNAConv' does not support lazy initialization (in_channels=-1)")
        if divide_input and in_channels % towers != 0:
            raise ValueError(f"in_channels ({in_channels}) must be divisible by towers "
                             f"({towers}) with divide_input=True")
        if out_channels % towers != 0:
            raise ValueError(f"out_channels ({out_channels}) must be divisible by towers "
                             f"({towers})")
        store_arguments(self, in_channels=in_channels, out_channels=out_channels, edge_dim=edge_dim,
                        towers=towers, divide_input=divide_input)
        self.F_in = in_channels // towers if divide_input else in_channels
        self.F_out = self.out_channels // towers
        if self.edge_dim is not None:
            self.edge_encoder = Linear(edge_dim, self.F_in)
        self.pre_nns = torch.nn.ModuleList()
        self.post_nns = torch.nn.ModuleList()
        for _ in range(towers):
            modules = [Linear((3 if edge_dim else 2) * self.F_in, self.F_in)]
            for _ in range(pre_layers - 1):
                modules += [_activation(act, act_kwargs), Linear(self.F_in, self.F_in)]
            self.pre_nns.append(torch.nn.Sequential(*modules))
            post_in = (len(aggregators) * len(scalers) + 1) * self.F_in
            modules = [Linear(post_in, self.F_out)]
            for _ in range(post_layers - 1):
                modules += [_activation(act, act_kwargs), Linear(self.F_out, self.F_out)]
            self.post_nns.append(torch.nn.Sequential(*modules))
        self.lin = Linear(out_channels, out_channels)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.aggr_module.reset_parameters()
        if self.edge_dim is not None:
            self.edge_encoder.reset_parameters()
        for nn in self.pre_nns:
            reset_module(nn)
        for nn in self.post_nns:
            reset_module(nn)
        self.lin.reset_parameters()

    def forward(self, x: Tensor, edge_index, edge_attr: Optional[Tensor] = None) -> Tensor:
        check_float_features("PNAConv", x)
        x = autocast_input(x)
        if self.divide_input:
            x = x.view(-1, self.towers, self.F_in)
        else:
            x = x.view(-1, 1, self.F_in).repeat(1, self.towers, 1)
        num_src, num_dst = message_sizes(edge_index, x, x, None, 0)
        adj = structural_adjacency("PNAConv", edge_index, num_src, num_dst, add_loops=False)
        graph = adj.graph
        if edge_attr is None:
            edge_attr = adj.values
        x_i = x.index_select(0, graph.csr_dst.long())
        x_j = x.index_select(0, graph.col.long())
        if edge_attr is not None:
            if self.edge_dim is None:
                raise ValueError("PNAConv got edge_attr but was built without edge_dim")
            check_edge_values("PNAConv", "edge_attr", edge_attr, graph, self.edge_dim)
            e = self.edge_encoder(graph.csr_edge_values(edge_attr)).to(x_i.dtype)
            h = torch.cat([x_i, x_j, e.view(-1, 1, self.F_in).expand(-1, self.towers, -1)], -1)
        elif self.edge_dim is not None:
            raise ValueError("PNAConv was built with edge_dim but got no edge_attr")
        else:
            h = torch.cat([x_i, x_j], dim=-1)
        messages = torch.stack([nn(h[:, i]) for i, nn in enumerate(self.pre_nns)], dim=1)
        out = self.aggr_module.aggregate(messages_graph(graph), messages)
        out = torch.cat([x.to(out.dtype), out], dim=-1)
        out = torch.cat([nn(out[:, i]) for i, nn in enumerate(self.post_nns)], dim=1)
        return self.lin(out)

    @staticmethod
    def get_degree_histogram(loader: Iterable) -> Tensor:
        """The in-degree histogram ``deg`` (``deg[d]`` = nodes with d in-edges, int64) over every
        graph a loader (or any iterable of PyG ``Data`` objects) yields, on the device of their
        edges: PyG's ``PNAConv.get_degree_histogram``."""
        histogram = torch.zeros(1, dtype=torch.long)
        for data in loader:
            in_degree = torch.bincount(data.edge_index[1].long(), minlength=data.num_nodes)
            counts = torch.bincount(in_degree, minlength=histogram.numel())
            histogram = histogram.to(counts.device)
            if counts.numel() > histogram.numel():
                histogram = torch.cat([histogram, histogram.new_zeros(counts.numel()
                                                                      - histogram.numel())])
            histogram += counts
        return histogram

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"towers={self.towers}, edge_dim={self.edge_dim})")
