"""``GATv2Conv``: PyG 2.8's dynamic graph attention (Brody et al.) on iognn's ``gatv2_attention``.

Per head: ``e_ji = att · leaky_relu(x_l[j] + x_r[i] [+ W_e e_ji])``, ``alpha = softmax_j e``,
``out_i = sum_j alpha_ji x_l[j]`` with ``x_l = lin_l(x_src)``, ``x_r = lin_r(x_dst)``. Self-loops as
GATConv (PyG's ``remove_self_loops`` + ``add_self_loops`` over ``min(num_src, num_dst)`` nodes).
"""
from __future__ import annotations

from typing import Optional, Tuple, Union

import torch
from torch import Tensor
from torch.nn import Parameter

from ...ops.attention import gatv2_attention
from .._amp import like
from .._doc import shared_doc
from .._graph import structural_adjacency
from ..linear import Linear, glorot_, stacked_linears, zeros_
from ._attention import GATModule, attention_sizes, check_static, loop_edge_attr
from ._common import check_edge_values, split_input


@shared_doc
class GATv2Conv(GATModule):
    r"""Dynamic graph attention, replacing ``torch_geometric.nn.GATv2Conv`` (Brody et al., "How
    Attentive are Graph Attention Networks?", ICLR 2022).

    .. math::
        \mathbf{x}'_i = \big\Vert_{h=1}^{H} \sum_{j \in \mathcal{N}(i) \cup \{ i \}}
        \alpha^{h}_{i,j} \boldsymbol{\Theta}^{h}_{s} \mathbf{x}_j
        \qquad
        \alpha^{h}_{i,j} = \mathrm{softmax}_j \Big( \mathbf{a}^{h\top} \mathrm{LeakyReLU} \big(
        \boldsymbol{\Theta}^{h}_{s} \mathbf{x}_j + \boldsymbol{\Theta}^{h}_{t} \mathbf{x}_i
        + \boldsymbol{\Theta}^{h}_{e} \mathbf{e}_{j,i} \big) \Big)

    The nonlinearity sits inside the score, so the ranking of neighbours can depend on the
    query node. :math:`\boldsymbol{\Theta}_s` is ``lin_l``, :math:`\boldsymbol{\Theta}_t` is
    ``lin_r``; heads are concatenated or averaged, then ``res(x_dst)`` and the bias are added.

    Args:
        {gat_args}
        edge_dim (int, optional): Edge feature size; passing ``edge_attr`` without it raises
            ``ValueError``. (default: ``None``)
        fill_value (float or Tensor or str, optional): Edge features of the added loops: a
            value, or a reduction of each node's incoming edge features (``'add'``, ``'mean'``,
            ``'min'``, ``'max'``, ``'mul'``). (default: ``'mean'``)
        bias (bool, optional): Learn the output bias and the biases of ``lin_l``/``lin_r``.
            (default: ``True``)
        share_weights (bool, optional): Use one matrix for both sides (``lin_r`` is
            ``lin_l``). (default: ``False``)
        residual (bool, optional): Add a projection of the destination features.
            (default: ``False``)
        **kwargs (optional): PyG's ``MessagePassing`` arguments (``aggr`` must stay ``'add'``;
            ``node_dim`` must stay 0; ``decomposed_layers`` has no effect).

    Shapes:
        - **input:** ``x`` ``[N, F_in]`` or a pair ``(x_src [N_s, F_s], x_dst [N_t, F_t])``
          (``x_dst`` required); ``edge_index`` ``[2, E]`` (or any adjacency of ``docs/nn.md``);
          ``edge_attr`` ``[E, D]`` (optional). No ``size`` argument, as in PyG.
        - **output:** ``[N, H * F_out]`` (``[N, F_out]`` without ``concat``; ``N_t`` rows for a
          pair). With ``return_attention_weights=True``: ``(out, (edge_index, alpha))``, the
          edge index including the added loops and ``alpha`` ``[E', H]`` in its order (sparse
          inputs: a matrix of ``alpha``, see ``docs/nn.md``).

    iognn differences:
        - Attention dropout uses iognn's counter-based mask: PyG's random stream gives other
          masks (same statistics).
        - Forward hooks on ``lin_l``/``lin_r``/``res`` do not run when one ``x`` is projected
          several ways (one stacked GEMM); they do for a pair or lazy weights.
        {gat_errors}
    """

    def __init__(self, in_channels: Union[int, Tuple[int, int]], out_channels: int,
                 heads: int = 1, concat: bool = True, negative_slope: float = 0.2,
                 dropout: float = 0.0, add_self_loops: bool = True, edge_dim: Optional[int] = None,
                 fill_value: Union[float, Tensor, str] = "mean", bias: bool = True,
                 share_weights: bool = False, residual: bool = False, **kwargs):
        super().__init__("GATv2Conv", kwargs, in_channels, out_channels, heads, concat,
                         negative_slope, dropout, add_self_loops, edge_dim, fill_value, residual)
        self.share_weights = share_weights
        src_channels, dst_channels = ((in_channels, in_channels) if isinstance(in_channels, int)
                                      else in_channels)
        self.lin_l = Linear(src_channels, heads * out_channels, bias, "glorot")
        if share_weights:
            self.lin_r = self.lin_l
        else:
            self.lin_r = Linear(dst_channels, heads * out_channels, bias, "glorot")
        self.att = Parameter(torch.empty(1, heads, out_channels))
        if edge_dim is not None:
            self.lin_edge = Linear(edge_dim, heads * out_channels, False, "glorot")
        else:
            self.lin_edge = None
        self._init_residual_and_bias(dst_channels, bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # lin_r is reset even when it is lin_l, as PyG does (same random draws).
        for lin in (self.lin_l, self.lin_r, self.lin_edge, self.res):
            if lin is not None:
                lin.reset_parameters()
        glorot_(self.att)
        zeros_(self.bias)

    def _project(self, x_src: Tensor, x_dst: Tensor):
        """The residual projection (or None) and the ``[N, H, C]`` source and destination
        projections: one GEMM for all of them when they read the same features
        (``stacked_linears``)."""
        H, C = self.heads, self.out_channels
        lins = [self.lin_l] + ([] if self.share_weights else [self.lin_r])
        lins += [] if self.res is None else [self.res]
        parts = stacked_linears(x_src, lins) if x_dst is x_src and len(lins) > 1 else None
        if parts is not None:
            h_src = parts[0]
            h_dst = h_src if self.share_weights else parts[1]
            res = parts[-1] if self.res is not None else None
        else:  # PyG's order, which a lazy weight's initialisation draws in
            res = self.res(x_dst) if self.res is not None else None
            h_src = self.lin_l(x_src)
            h_dst = h_src if self.share_weights and x_dst is x_src else self.lin_r(x_dst)
        return res, h_src.view(-1, H, C), h_dst.view(-1, H, C)

    def forward(self, x: Union[Tensor, Tuple[Tensor, Tensor]], edge_index,
                edge_attr: Optional[Tensor] = None,
                return_attention_weights: Optional[bool] = None):
        x_src, x_dst = split_input(x)
        if x_dst is None:
            raise ValueError("GATv2Conv needs destination features: got x = (x_src, None)")
        check_static("GATv2Conv", x_src)
        res, h_src, h_dst = self._project(x_src, x_dst)

        num_src, num_dst = attention_sizes(edge_index, h_src, h_dst, None, self.add_self_loops)
        adj = structural_adjacency("GATv2Conv", edge_index, num_src, num_dst, self.add_self_loops,
                                   edge_attr)
        w_edge = None
        if edge_attr is not None or adj.values is not None:
            if self.lin_edge is None:
                raise ValueError("GATv2Conv got edge_attr but was built without edge_dim")
            if edge_attr is not None:
                check_edge_values("GATv2Conv", "edge_attr", edge_attr, adj.graph, self.edge_dim)
            edge_attr = like(loop_edge_attr(adj, edge_attr, self.fill_value), h_src)
            w_edge = like(self.lin_edge.weight, h_src)
        want_alpha = bool(return_attention_weights)
        result = gatv2_attention(adj.graph, h_src, h_dst, like(self.att, h_src),
                                 edge_attr=edge_attr, w_edge=w_edge,
                                 negative_slope=self.negative_slope,
                                 dropout=self.dropout if self.training else 0.0,
                                 return_alpha=want_alpha)
        out, alpha = result if want_alpha else (result, None)
        return self._output(out, alpha, res, adj, edge_index)
