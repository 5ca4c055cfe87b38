"""``TransformerConv``: PyG 2.8's graph transformer operator (Shi et al.) on iognn's
``transformer_attention``.

Per head: ``alpha_ji = softmax_j(q_i · (k_j [+ W_e e_ji]) / sqrt(C))``,
``out_i = sum_j alpha_ji (v_j [+ W_e e_ji])``; then heads are concatenated or averaged and the root
term ``lin_skip(x_dst)`` is added (gated by ``beta`` when set). No self-loops are added.
"""
from __future__ import annotations

from typing import Optional, Tuple, Union

import torch
from torch import Tensor

from ...ops.attention import transformer_attention
from .._amp import like
from .._doc import shared_doc
from .._graph import message_sizes, structural_adjacency
from ..linear import Linear, stacked_linears
from ._attention import AttentionModule, check_static, with_attention
from ._common import check_edge_values, split_input


@shared_doc
class TransformerConv(AttentionModule):
    r"""Graph transformer operator, replacing ``torch_geometric.nn.TransformerConv`` (Shi et al.,
    "Masked Label Prediction: Unified Message Passing Model for Semi-Supervised
    Classification", IJCAI 2021).

    .. math::
        \mathbf{x}'_i = \mathbf{W}_1 \mathbf{x}_i + \sum_{j \in \mathcal{N}(i)}
        \alpha_{i,j} \left( \mathbf{W}_2 \mathbf{x}_j + \mathbf{W}_5 \mathbf{e}_{j,i} \right)
        \qquad
        \alpha_{i,j} = \mathrm{softmax}_j \left( \frac{(\mathbf{W}_3 \mathbf{x}_i)^{\top}
        (\mathbf{W}_4 \mathbf{x}_j + \mathbf{W}_5 \mathbf{e}_{j,i})}{\sqrt{C}} \right)

    per head (:math:`C` = ``out_channels``); heads are concatenated or averaged into
    :math:`\mathbf{m}_i` before the root term. :math:`\mathbf{W}_1..\mathbf{W}_5` are
    ``lin_skip``, ``lin_value``, ``lin_query``, ``lin_key``, ``lin_edge``. With ``beta`` the root
    term is gated: :math:`\mathbf{x}'_i = \beta_i \mathbf{r}_i + (1 - \beta_i) \mathbf{m}_i`,
    :math:`\beta_i = \sigma(\mathbf{w}^{\top} [\mathbf{m}_i, \mathbf{r}_i, \mathbf{m}_i -
    \mathbf{r}_i])`, :math:`\mathbf{r}_i = \mathbf{W}_1 \mathbf{x}_i`. No self-loops are added.

    Args:
        in_channels (int or tuple): Size of each input feature vector (``-1``: lazy), or a
            ``(source, destination)`` pair of sizes for bipartite graphs.
        out_channels (int): Size of each head's output :math:`C`.
        heads (int, optional): Number of attention heads. (default: ``1``)
        concat (bool, optional): Concatenate the heads; ``False`` averages them.
            (default: ``True``)
        beta (bool, optional): Gate the root term as above (only with ``root_weight``).
            (default: ``False``)
        dropout (float, optional): Dropout probability of the attention coefficients (training
            mode only). (default: ``0.0``)
        edge_dim (int, optional): Edge feature size; ``edge_attr`` is then required, and
            refused without it. (default: ``None``)
        bias (bool, optional): Learn the biases of the key, query, value and skip projections.
            (default: ``True``)
        root_weight (bool, optional): Add the root term :math:`\mathbf{W}_1 \mathbf{x}_i`
            (``lin_skip`` exists either way, as in PyG). (default: ``True``)
        **kwargs (optional): PyG's ``MessagePassing`` arguments (``aggr`` must stay ``'add'``;
            ``node_dim`` must stay 0; ``decomposed_layers`` has no effect).

    Shapes:
        - **input:** ``x`` ``[N, F_in]`` or a pair ``(x_src [N_s, F_s], x_dst [N_t, F_t])``
          (both required); ``edge_index`` ``[2, E]`` (or any adjacency of ``docs/nn.md``);
          ``edge_attr`` ``[E, D]`` (with ``edge_dim``). No ``size`` argument, as in PyG.
        - **output:** ``[N, H * C]`` (``[N, C]`` without ``concat``; ``N_t`` rows for a pair).
          When ``return_attention_weights`` is a bool (``False`` included, as in PyG):
          ``(out, (edge_index, alpha [E, H]))``; a ``SparseTensor`` comes back with ``alpha``
          as its values, a torch.sparse input as ``(matrix, alpha)``.

    iognn differences:
        - Attention dropout uses iognn's counter-based mask: PyG's random stream gives other
          masks (same statistics).
        - Forward hooks on the key/query/value/skip ``Linear`` modules do not run when one ``x``
          is projected several ways (one stacked GEMM); they do for a pair or lazy weights.
        - ``edge_attr`` of the wrong width raises ``ValueError``; torch.sparse adjacencies PyG's
          unfused path cannot read (uncoalesced COO, CSC) are computed on the stored entries.
        {attention_unsupported}
    """

    def __init__(self, in_channels: Union[int, Tuple[int, int]], out_channels: int,
                 heads: int = 1, concat: bool = True, beta: bool = False, dropout: float = 0.0,
                 edge_dim: Optional[int] = None, bias: bool = True, root_weight: bool = True,
                 **kwargs):
        super().__init__("TransformerConv", kwargs, in_channels, out_channels, heads, concat,
                         dropout, edge_dim)
        self.beta = beta and root_weight
        self.root_weight = root_weight
        src_channels, dst_channels = ((in_channels, in_channels) if isinstance(in_channels, int)
                                      else in_channels)
        self.lin_key = Linear(src_channels, heads * out_channels, bias=bias)
        self.lin_query = Linear(dst_channels, heads * out_channels, bias=bias)
        self.lin_value = Linear(src_channels, heads * out_channels, bias=bias)
        if edge_dim is not None:
            self.lin_edge = Linear(edge_dim, heads * out_channels, bias=False)
        else:
            self.register_parameter("lin_edge", None)
        # PyG builds lin_skip even without root_weight (it is then unused but part of the state).
        total_out = heads * out_channels if concat else out_channels
        self.lin_skip = Linear(dst_channels, total_out, bias=bias)
        if self.beta:
            self.lin_beta = Linear(3 * total_out, 1, bias=False)
        else:
            self.register_parameter("lin_beta", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for lin in (self.lin_key, self.lin_query, self.lin_value, self.lin_edge, self.lin_skip,
                    self.lin_beta):
            if lin is not None:
                lin.reset_parameters()

    def _project(self, x_src: Tensor, x_dst: Tensor):
        """query, key, value ``[N, H, C]`` and the skip projection: one GEMM for all of them when
        they read the same features (``stacked_linears``); else the skip projection is None, left
        to ``forward``."""
        H, C = self.heads, self.out_channels
        lins = [self.lin_query, self.lin_key, self.lin_value]
        if self.root_weight:
            lins.append(self.lin_skip)
        parts = stacked_linears(x_src, lins) if x_src is x_dst else None
        if parts is None:  # PyG's order: the skip projection after the attention (its dropout)
            parts = [lin(x) for lin, x in zip(lins[:3], (x_dst, x_src, x_src))] + [None]
        query, key, value = (p.view(-1, H, C) for p in parts[:3])
        return query, key, value, parts[3] if self.root_weight else None

    def forward(self, x: Union[Tensor, Tuple[Tensor, Tensor]], edge_index,
                edge_attr: Optional[Tensor] = None,
                return_attention_weights: Optional[bool] = None):
        x_src, x_dst = split_input(x)
        check_static("TransformerConv", x_src)
        query, key, value, x_r = self._project(x_src, x_dst)
        num_src, num_dst = message_sizes(edge_index, key, query, None, 0)
        adj = structural_adjacency("TransformerConv", edge_index, num_src, num_dst,
                                   add_loops=False)
        if edge_attr is None:
            edge_attr = adj.values
        elif self.lin_edge is not None:
            check_edge_values("TransformerConv", "edge_attr", edge_attr, adj.graph, self.edge_dim)
        if edge_attr is not None and self.lin_edge is None:
            raise ValueError("TransformerConv got edge_attr but was built without edge_dim")
        w_edge = None if self.lin_edge is None else like(self.lin_edge.weight, query)
        if w_edge is not None and edge_attr is None:
            raise ValueError("TransformerConv was built with edge_dim but got no edge_attr")
        # PyG returns alpha whenever return_attention_weights is a bool (False included).
        want_alpha = isinstance(return_attention_weights, bool)
        result = transformer_attention(adj.graph, query, like(key, query), like(value, query),
                                       edge_attr=like(edge_attr, query), w_edge=w_edge,
                                       dropout=self.dropout if self.training else 0.0,
                                       return_alpha=want_alpha)
        out, alpha = result if want_alpha else (result, None)

        out = self._merge_heads(out)
        if self.root_weight:
            x_r = like(self.lin_skip(x_dst) if x_r is None else x_r, out)
            if self.lin_beta is not None:
                beta = self.lin_beta(torch.cat([out, x_r, out - x_r], dim=-1)).sigmoid()
                beta = like(beta, out)
                out = beta * x_r + (1 - beta) * out
            else:
                out = out + x_r
        if want_alpha:
            return with_attention(out, alpha, adj, edge_index, loops_added=False,
                                  returns_input=True)
        return out
