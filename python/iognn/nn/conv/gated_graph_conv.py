"""``GatedGraphConv``: PyG 2.8's gated graph convolution (Li et al., "Gated Graph Sequence Neural
Networks", ICLR 2016) on iognn's propagate.

PyG's step ``l`` is ``m = A (h W_l)`` followed by ``h = GRUCell(m, h)``, whose input gates are
``m W_ih^T + b_ih``. For ``aggr`` sum or mean the aggregation is linear, so the step is computed
as ``(A h) (W_l W_ih^T)``: the neighbourhood aggregation reads ``h`` itself (no ``h W_l`` tensor
is written) and the GRU's input gates come from one GEMM with the combined weight
``W_ih W_l^T`` (``[3H, H]``, all ``L`` of them formed by one batched product per forward), handed
to ``torch.gru_cell`` as its input weight. The reassociation changes the fp32 rounding only, never
the result's meaning. Any other ``aggr`` (max, min, ...) is not linear and runs PyG's order:
``aggr(h W_l)``, then the GRU with ``W_ih``.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor

from .._amp import autocast_input
from .._doc import shared_doc
from .._graph import weighted_adjacency
from ..aggr import MeanAggregation, SumAggregation
from ._common import (MessagePassingArgs, MessagePassingModule, aggregate_weighted,
                      check_edge_values, check_float_features)


def initial_state(layer: str, x: Tensor, channels: int) -> Tensor:
    """``x`` padded with zero columns to ``channels``: a gated layer's first hidden state (PyG's
    check and message for wider input first)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{layer}: x must be a Tensor, got {type(x).__name__}")
    check_float_features(layer, x)
    if x.size(-1) > channels:
        raise ValueError("The number of input channels is not allowed to be larger than the "
                         "number of output channels")
    if x.dim() != 2:
        raise ValueError(f"{layer}: x must be 2-D [num_nodes, channels], got shape "
                         f"{list(x.shape)}")
    if x.size(-1) < channels:
        x = torch.cat([x, x.new_zeros(x.size(0), channels - x.size(-1))], dim=1)
    return x


@shared_doc
class GatedGraphConv(MessagePassingModule):
    r"""The gated graph convolution operator, replacing ``torch_geometric.nn.GatedGraphConv``
    (Li et al., "Gated Graph Sequence Neural Networks", ICLR 2016).

    .. math::
        \mathbf{h}_i^{(0)} &= \mathbf{x}_i \, \Vert \, \mathbf{0}

        \mathbf{m}_i^{(l+1)} &= \sum_{j \in \mathcal{N}(i)} e_{j,i} \cdot
        \mathbf{\Theta}_l \cdot \mathbf{h}_j^{(l)}

        \mathbf{h}_i^{(l+1)} &= \textrm{GRU} (\mathbf{m}_i^{(l+1)}, \mathbf{h}_i^{(l)})

    up to :math:`\mathbf{h}^{(L)}`. :math:`\mathbf{\Theta}_l` is ``weight[l]`` (applied as
    ``h @ weight[l]``), the GRU is ``rnn`` (a ``torch.nn.GRUCell`` shared over the steps) and
    :math:`e_{j,i}` the edge weight (1 without ``edge_weight``; a sparse adjacency's values are
    the weights). For ``aggr`` ``'add'`` / ``'mean'`` each step aggregates ``h`` and applies
    ``weight[l]`` and the GRU's input weight as one combined matrix (see the module docstring):
    equal to PyG's order up to fp32 rounding.

    Args:
        out_channels (int): Size of the hidden state :math:`H` (input features narrower than
            :math:`H` are padded with zeros; wider ones raise ``ValueError``).
        num_layers (int): Number of steps :math:`L`.
        aggr (str, optional): Neighbourhood aggregation (``'add'``, ``'mean'``, ``'max'`` or any
            other of PyG's). (default: ``'add'``)
        bias (bool, optional): Learn the GRU's biases. (default: ``True``)
        {mp_kwargs}

    Shapes:
        - **input:** ``x`` ``[N, F_in]`` with ``F_in <= out_channels``; ``edge_index``
          ``[2, E]`` (or any adjacency of ``docs/nn.md``); ``edge_weight`` ``[E]`` (optional).
        - **output:** ``[N, out_channels]``

    iognn differences:
        - ``x`` that is not a 2-D float tensor raises ``TypeError`` / ``ValueError`` (PyG fails
          inside its padding or the GRU cell); an ``edge_weight`` that is not 1-D ``[E]`` raises
          ``ValueError``.
        - ``flow='target_to_source'`` raises ``NotImplementedError``; not scriptable with
          ``torch.jit.script``; no ``propagate``/``message``/explain machinery.
    """

    def __init__(self, out_channels: int, num_layers: int, aggr: str = "add", bias: bool = True,
                 **kwargs):
        super().__init__()
        MessagePassingArgs("GatedGraphConv", dict(kwargs, aggr=aggr)).install(self)
        self.out_channels = out_channels
        self.num_layers = num_layers
        self.weight = torch.nn.Parameter(torch.empty(num_layers, out_channels, out_channels))
        self.rnn = torch.nn.GRUCell(out_channels, out_channels, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyG's draws: ``weight`` uniform in ``+-1/sqrt(out_channels)``, then the GRU's own."""
        self.aggr_module.reset_parameters()
        bound = 1.0 / math.sqrt(self.out_channels)
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)
        self.rnn.reset_parameters()

    def forward(self, x: Tensor, edge_index, edge_weight: Optional[Tensor] = None) -> Tensor:
        h = initial_state("GatedGraphConv", x, self.out_channels)
        num_src, num_dst = self._split_sized(h, edge_index, None)[2:]
        adj = weighted_adjacency("GatedGraphConv", edge_index, num_src, num_dst,
                                 coalesce=self.fuse, use_values=True)
        if adj.sparse is not None and (self.fuse or edge_weight is None):
            edge_weight = adj.values  # PyG's fused path ignores edge_weight for sparse inputs
        elif edge_weight is not None:
            check_edge_values("GatedGraphConv", "edge_weight", edge_weight, adj.graph)
        rnn = self.rnn
        linear = type(self.aggr_module) in (SumAggregation, MeanAggregation)
        # [L, 3H, H]: W_ih W_l^T, the GRU input weight that takes the aggregated h directly.
        input_weights = torch.matmul(rnn.weight_ih, self.weight.transpose(1, 2)) if linear \
            else None
        for step in range(self.num_layers):
            if linear:
                # Under autocast h stays in its dtype, as PyG's state does; the messages take
                # the autocast dtype, as PyG's (h @ W_l) does.
                m = aggregate_weighted(self.aggr_module, adj.graph, autocast_input(h),
                                       edge_weight, node_dim=self.node_dim)
                w_ih = input_weights[step]
            else:
                m = aggregate_weighted(self.aggr_module, adj.graph,
                                       torch.matmul(h, self.weight[step]), edge_weight,
                                       node_dim=self.node_dim)
                w_ih = rnn.weight_ih
            h = torch.gru_cell(m, h, w_ih, rnn.weight_hh, rnn.bias_ih, rnn.bias_hh)
        return h

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.out_channels}, num_layers={self.num_layers})"
