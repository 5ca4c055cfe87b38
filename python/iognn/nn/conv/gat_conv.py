"""``GATConv``: PyG 2.8's graph attention operator on iognn's fused ``gat_attention``.

Per head h: ``e_ji = leaky_relu(a_src·x_j + a_dst·x_i [+ a_edge·W_e e_ji])``,
``alpha = softmax_j e``, ``out_i = sum_j alpha_ji x_j`` with ``x = lin(x)``. Self-loops follow PyG
(``remove_self_loops`` + ``add_self_loops`` over ``min(num_src, num_dst)`` nodes, loop edge
features from ``fill_value``; see ``nn/_graph.structural_adjacency`` for sparse inputs).
The edge term never materialises ``W_e e``: ``a_edge·(W_e e) = e·w_edge`` with the ``[edge_dim, H]``
contraction ``w_edge`` of ``lin_edge.weight`` and ``att_edge``.
"""
from __future__ import annotations

from typing import Optional, Tuple, Union

import torch
from torch import Tensor
from torch.nn import Parameter
from torch.nn.parameter import UninitializedParameter

from ...ops.attention import gat_attention
from .._amp import like
from .._doc import shared_doc
from .._graph import structural_adjacency
from ..linear import Linear, glorot_, zeros_
from ._attention import GATModule, attention_sizes, check_static, loop_edge_attr
from ._common import check_edge_values, split_input


@shared_doc
class GATConv(GATModule):
    r"""Graph attention operator, replacing ``torch_geometric.nn.GATConv`` (Veličković et al.,
    "Graph Attention Networks", ICLR 2018).

    .. math::
        \mathbf{x}'_i = \big\Vert_{h=1}^{H} \sum_{j \in \mathcal{N}(i) \cup \{ i \}}
        \alpha^{h}_{i,j} \boldsymbol{\Theta}^{h}_{s} \mathbf{x}_j
        \qquad
        \alpha^{h}_{i,j} = \mathrm{softmax}_j \Big( \mathrm{LeakyReLU} \big(
        \mathbf{a}^{h\top}_{s} \boldsymbol{\Theta}^{h}_{s} \mathbf{x}_j
        + \mathbf{a}^{h\top}_{t} \boldsymbol{\Theta}^{h}_{t} \mathbf{x}_i
        + \mathbf{a}^{h\top}_{e} \boldsymbol{\Theta}^{h}_{e} \mathbf{e}_{j,i} \big) \Big)

    :math:`\Vert` concatenates the heads (``concat=True``) or is replaced by their mean; then
    the residual ``res(x_dst)`` and the bias are added. :math:`\boldsymbol{\Theta}_s =
    \boldsymbol{\Theta}_t` (``lin``) unless ``in_channels`` is a pair (``lin_src``,
    ``lin_dst``); the edge term exists only with ``edge_dim``.

    Args:
        {gat_args}
        edge_dim (int, optional): Edge feature size; ``None`` ignores ``edge_attr``.
            (default: ``None``)
        fill_value (float or Tensor or str, optional): Edge features of the added loops: a
            value, or how to reduce each node's incoming edge features (``'add'``, ``'mean'``,
            ``'min'``, ``'max'``, ``'mul'``). (default: ``'mean'``)
        bias (bool, optional): Learn an additive output bias. (default: ``True``)
        residual (bool, optional): Add a projection of the destination features.
            (default: ``False``)
        **kwargs (optional): PyG's ``MessagePassing`` arguments (``aggr`` must stay ``'add'``;
            ``node_dim`` must stay 0; ``decomposed_layers`` has no effect).

    Shapes:
        - **input:** ``x`` ``[N, F_in]`` or a pair ``(x_src [N_s, F_s], x_dst [N_t, F_t])``
          (``x_dst`` may be ``None``); ``edge_index`` ``[2, E]`` (or any adjacency of
          ``docs/nn.md``); ``edge_attr`` ``[E, D]`` (optional); ``size`` ``(N_s, N_t)``
          (optional).
        - **output:** ``[N, H * F_out]`` (``[N, F_out]`` without ``concat``; ``N_t`` rows for a
          pair). With ``return_attention_weights=True``: ``(out, (edge_index, alpha))``, the
          edge index including the added loops and ``alpha`` ``[E', H]`` in its order (sparse
          inputs: a matrix of ``alpha`` in the input's layout, see ``docs/nn.md``).

    iognn differences:
        - Attention dropout uses iognn's counter-based mask: PyG's random stream gives other
          masks (same statistics).
        - Forward hooks on ``lin`` do not run when one ``x`` is projected several ways (one
          stacked GEMM); they do for a pair ``(x_src, x_dst)`` or lazy weights.
        {gat_errors}
    """

    def __init__(self, in_channels: Union[int, Tuple[int, int]], out_channels: int,
                 heads: int = 1, concat: bool = True, negative_slope: float = 0.2,
                 dropout: float = 0.0, add_self_loops: bool = True, edge_dim: Optional[int] = None,
                 fill_value: Union[float, Tensor, str] = "mean", bias: bool = True,
                 residual: bool = False, **kwargs):
        super().__init__("GATConv", kwargs, in_channels, out_channels, heads, concat,
                         negative_slope, dropout, add_self_loops, edge_dim, fill_value, residual)
        self.lin = self.lin_src = self.lin_dst = None
        if isinstance(in_channels, int):
            self.lin = Linear(in_channels, heads * out_channels, False, "glorot")
        else:
            self.lin_src = Linear(in_channels[0], heads * out_channels, False, "glorot")
            self.lin_dst = Linear(in_channels[1], heads * out_channels, False, "glorot")
        self.att_src = Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = Parameter(torch.empty(1, heads, out_channels))
        if edge_dim is not None:
            self.lin_edge = Linear(edge_dim, heads * out_channels, False, "glorot")
            self.att_edge = Parameter(torch.empty(1, heads, out_channels))
        else:
            self.lin_edge = None
            self.register_parameter("att_edge", None)
        self._init_residual_and_bias(
            in_channels if isinstance(in_channels, int) else in_channels[1], bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.lin, self.lin_src, self.lin_dst, self.lin_edge, self.res):
            if lin is not None:
                lin.reset_parameters()
        for att in (self.att_src, self.att_dst, self.att_edge):
            glorot_(att)
        zeros_(self.bias)

    def _project(self, x_src: Tensor, x_dst: Optional[Tensor]):
        """Projected ``[N, H, C]`` source and destination features and their logits
        ``(h * att).sum(-1)`` ``[N, H]`` (dst ones None when x_dst is).

        The logits are computed from the layer input as ``x @ (W^T att)``: a thin GEMM instead
        of a broadcast product and a reduction over the ``[N, H, C]`` rows (and their backward).
        When one projection serves both sides (a plain ``x``), the features and both logits come
        from a single GEMM against ``[W; W^T att_src; W^T att_dst]``: three GEMMs fewer per
        forward + backward, which on small graphs cost more host time than device time."""
        H, C = self.heads, self.out_channels
        lin_src = self.lin if self.lin is not None else self.lin_src
        lin_dst = self.lin if self.lin is not None else self.lin_dst
        rows = self._projected_rows(x_src, x_dst)
        if rows is not None:
            h, alpha_src, alpha_dst = rows.split([H * C, H, H], dim=1)
            h = h.view(-1, H, C)
            return h, h, alpha_src, alpha_dst
        h_src = lin_src(x_src).view(-1, H, C)  # first: initialises a lazy weight
        if x_dst is None:
            return h_src, None, self._logits(x_src, lin_src, self.att_src), None
        if x_dst is x_src and lin_dst is lin_src:
            both = self._logits(x_src, lin_src, torch.cat([self.att_src, self.att_dst], dim=1))
            # split, not two slices: its backward is one cat, theirs two zero-filled copies and an add
            alpha_src, alpha_dst = both.split(H, dim=1)
            return h_src, h_src, alpha_src, alpha_dst
        h_dst = lin_dst(x_dst).view(-1, H, C)
        return (h_src, h_dst, self._logits(x_src, lin_src, self.att_src),
                self._logits(x_dst, lin_dst, self.att_dst))

    def _projected_rows(self, x_src: Tensor, x_dst: Optional[Tensor]) -> Optional[Tensor]:
        """``[h | alpha_src | alpha_dst]`` ``[N, H * C + 2 H]`` from one GEMM against
        ``[W; W^T att_src; W^T att_dst]`` when one projection without bias serves both sides (a
        plain ``x``, a materialised weight), else None."""
        lin_src = self.lin if self.lin is not None else self.lin_src
        lin_dst = self.lin if self.lin is not None else self.lin_dst
        if (x_dst is not x_src or lin_dst is not lin_src or lin_src.bias is not None
                or isinstance(lin_src.weight, UninitializedParameter)):
            return None
        w = lin_src.weight
        w_att = self._att_weights(w, torch.cat([self.att_src, self.att_dst], dim=1))
        return torch.nn.functional.linear(x_src, torch.cat([w, w_att]))

    def _att_weights(self, weight: Tensor, att: Tensor) -> Tensor:
        """``W^T a`` for each ``[1, H, C]`` vector a stacked along dim 1 of att (``[1, k * H, C]``):
        ``[k * H, F]``, so that ``x @ (W^T a)^T = (lin(x).view(N, H, C) * a).sum(-1)``."""
        H, C = self.heads, self.out_channels
        # A broadcast product and a sum over C ([k, H, C, F], a few thousand elements): cheaper on
        # the host than einsum's batched GEMM with its permutes and copies, forward and backward.
        w = weight.view(1, H, C, -1)
        return (w * att.view(-1, H, C, 1)).sum(2).view(att.size(1), w.size(-1))

    def _logits(self, x: Tensor, lin: Linear, att: Tensor) -> Tensor:
        """``(lin(x).view(N, H, C) * a).sum(-1)`` for each a of att: ``[N, k * H]``."""
        return torch.nn.functional.linear(x, like(self._att_weights(lin.weight, att), x))

    def _edge_weights(self, ref: Tensor) -> Tensor:
        """``w_edge [De, H]``: ``(lin_edge(e).view(H, C) * att_edge).sum(-1) = e @ w_edge``."""
        H, C = self.heads, self.out_channels
        w = self.lin_edge.weight.view(H, C, -1)
        return like(torch.einsum("hcd,hc->dh", w, self.att_edge.view(H, C)), ref)

    def forward(self, x: Union[Tensor, Tuple[Tensor, Optional[Tensor]]], edge_index,
                edge_attr: Optional[Tensor] = None, size: Optional[Tuple[int, int]] = None,
                return_attention_weights: Optional[bool] = None):
        x_src, x_dst = split_input(x)
        check_static("GATConv", x_src)
        res = self.res(x_dst) if self.res is not None and x_dst is not None else None
        h_src, h_dst, alpha_src, alpha_dst = self._project(x_src, x_dst)
        num_src, num_dst = attention_sizes(edge_index, h_src, h_dst, size, self.add_self_loops)

        adj = structural_adjacency("GATConv", edge_index, num_src, num_dst, self.add_self_loops,
                                   edge_attr)
        w_edge = None
        if self.lin_edge is not None:
            if edge_attr is not None:
                check_edge_values("GATConv", "edge_attr", edge_attr, adj.graph, self.edge_dim)
            edge_attr = loop_edge_attr(adj, edge_attr, self.fill_value)
            if edge_attr is not None:
                edge_attr, w_edge = like(edge_attr, h_src), self._edge_weights(h_src)
        else:
            edge_attr = None  # PyG ignores edge features without edge_dim
        want_alpha = bool(return_attention_weights)
        result = gat_attention(adj.graph, h_src, alpha_src, alpha_dst, edge_attr=edge_attr,
                               w_edge=w_edge, negative_slope=self.negative_slope,
                               dropout=self.dropout if self.training else 0.0,
                               return_alpha=want_alpha)
        out, alpha = result if want_alpha else (result, None)
        return self._output(out, alpha, res, adj, edge_index)
