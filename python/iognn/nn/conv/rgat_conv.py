"""``RGATConv``: PyG 2.8's relational graph attention (Busbridge et al., "Relational Graph
Attention Networks", 2019), with the cardinality-preserving options of Zhang and Xie (2019).

For an edge ``j -r-> i`` PyG gathers a weight ``W_r [F_in, H*C]`` per edge (an
``E x F_in x H*C`` tensor, kept for the backward) and forms ``x_i W_r`` and ``x_j W_r`` per edge.
Here the transform is computed once per (node, relation) - one GEMM ``x @ [W_0 | ... | W_R-1]``
over ``N * R`` rows (``dense``), or per distinct (relation, source) pair and (relation,
destination) group only (``grouped``, large R) - and read per edge only through
``[E, H*D]`` gathers of the query / key projections. The softmax runs over the edges of each
destination (across-relation) or of each (destination, relation) group (within-relation) with
iognn's deterministic segment reductions, and the ``H * D`` attention-weighted sums are iognn
propagates of the transformed rows with the attention as edge weights: no ``E x H*C`` message
tensor, no float atomics. ``docs/typed.md`` gives the arithmetic.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter

from ...graph import Graph
from ...ops._checks import acc_dtype
from ...ops.propagate import propagate_csr
from ...ops.segment_reduce import segment_reduce
from ...ops.typed_propagate import _gather, _per_type_gemm
from ...typed import TypedGraph
from .._graph import is_sparse, message_sizes, sparse_input, sparse_like
from ..linear import Linear, glorot_, zeros_
from ._common import MessagePassingArgs, MessagePassingModule, check_float_features, split_input
from .rgcn_conv import _typed_graph

_MECHANISMS = ("within-relation", "across-relation")
_MODES = ("additive-self-attention", "multiplicative-self-attention")
_MODS = ("additive", "scaled", "f-additive", "f-scaled")
_REDUCE = {"add": "sum", "sum": "sum", "mean": "mean"}
STRATEGIES = ("dense", "grouped")


class RGATConv(MessagePassingModule):
    r"""Relational graph attention, replacing ``torch_geometric.nn.RGATConv``.

    For an edge ``j -r-> i``, with ``W_r`` the relation's ``[F_in, H*C]`` transform (or its
    basis / block-diagonal decomposition): ``q = x_i W_r Q``, ``k = x_j W_r K``
    (``[H*D]``); the logits are ``leaky_relu(q + k [+ e])`` (additive self-attention, D = 1) or
    ``q * k [* e]`` (multiplicative), ``e = lin_edge(edge_attr) E``; the attention ``alpha`` is
    their softmax over the in-edges of ``i`` (across-relation) or over those of type ``r``
    (within-relation), and

    .. math::
        \mathbf{x}'_{i,h,d} = \sum_{j -r-> i} \alpha_{e,h,d}\, (\mathbf{x}_j W_r)_h

    with ``mod``: ``'additive'`` adds ``w * sum_{j -r-> i} (x_j W_r)_h``; ``'scaled'``
    multiplies by ``psi(deg(i)) = relu(deg(i) l1 + b1) l2 + b2``; ``'f-additive'`` uses
    ``alpha + 1`` where ``alpha > 0``; ``'f-scaled'`` uses ``deg(i) * alpha`` (``deg``: all
    in-edges of i). Heads (and D) are concatenated, or averaged with ``concat=False``; then the
    bias.

    Args: as PyG's (``in_channels, out_channels, num_relations, num_bases, num_blocks, mod,
        attention_mechanism, attention_mode, heads, dim, concat, negative_slope, dropout,
        edge_dim, bias``, and ``MessagePassing``'s ``aggr`` (``'add'``, ``'sum'``, ``'mean'``),
        ``aggr_kwargs``, ``flow``, ``decomposed_layers`` (no effect)).

    Shapes:
        - **input:** ``x [N, F_in]`` (or a pair ``(x_src, x_dst)``); ``edge_index [2, E]``
          (int32 / int64, ``EdgeIndex``), a torch.sparse matrix whose values are the edge types,
          or an ``iognn.TypedGraph``; ``edge_type [E]`` (int32 / int64 in ``[0, R)``);
          ``edge_attr [E, edge_dim]`` or ``[E]``.
        - **output:** ``[N, H*C]`` / ``[N, H*D*C]`` (concat, additive / multiplicative), else
          ``[N, C]`` / ``[N, D*C]``; with ``return_attention_weights`` (a bool), also
          ``(edge_index, alpha [E, H*D])`` as PyG returns them (alpha before mod and dropout).

    Attribute ``strategy``: ``'auto'`` (default), ``'dense'`` or ``'grouped'`` (same results up
    to rounding; ``docs/typed.md``).

    iognn differences:
        - ``l2`` is initialised to ``1 / out_channels`` (PyG's ``reset_parameters`` computes that
          value and discards it, leaving ``l2`` uninitialised memory).
        - A bad ``edge_type`` (float, wrong length, out of range) raises ``TypeError`` /
          ``ValueError`` / ``IndexError`` naming ``edge_type``; integer node features raise a
          ``TypeError`` naming ``x``; ``aggr`` other than add / sum / mean and
          ``flow='target_to_source'`` raise ``NotImplementedError``.
        - Attention dropout draws the same mask as PyG's (``F.dropout`` on ``[E, H*D]`` in the
          input edge order).
        - Not scriptable with ``torch.jit.script``; no ``propagate``/``message`` machinery.
    """

    FIXED_NODE_DIM = 0
    strategy = "auto"

    def __init__(self, in_channels: int, out_channels: int, num_relations: int,
                 num_bases: Optional[int] = None, num_blocks: Optional[int] = None,
                 mod: Optional[str] = None, attention_mechanism: str = "across-relation",
                 attention_mode: str = "additive-self-attention", heads: int = 1, dim: int = 1,
                 concat: bool = True, negative_slope: float = 0.2, dropout: float = 0.0,
                 edge_dim: Optional[int] = None, bias: bool = True, **kwargs):
        super().__init__()
        name = type(self).__name__
        if "node_dim" in kwargs:
            raise TypeError(f"{name}.__init__() got multiple values for keyword argument "
                            f"'node_dim'")
        args = MessagePassingArgs(name, dict(kwargs, aggr=kwargs.get("aggr", "add")), node_dim=0)
        if args.aggr not in _REDUCE:
            raise NotImplementedError(f"{name}: iognn sums or averages the attention-weighted "
                                      f"messages; aggr={args.aggr!r} is not supported")
        args.install(self)
        # PyG's attributes, set from one table (PyG stores each constructor argument).
        hyper = dict(heads=heads, negative_slope=negative_slope, dropout=dropout, mod=mod,
                     concat=concat, attention_mode=attention_mode,
                     attention_mechanism=attention_mechanism, dim=dim, edge_dim=edge_dim,
                     in_channels=in_channels, out_channels=out_channels,
                     num_relations=num_relations, num_bases=num_bases, num_blocks=num_blocks)
        for key, value in hyper.items():
            setattr(self, key, value)
        self.activation = torch.nn.ReLU()
        _check_options(self)

        hc, hd = heads * out_channels, heads * dim
        self.q = Parameter(torch.empty(hc, hd))
        self.k = Parameter(torch.empty(hc, hd))
        if bias:
            self.bias = Parameter(torch.empty((heads if concat else 1) * dim * out_channels))
        else:
            self.register_parameter("bias", None)
        if edge_dim is not None:
            self.lin_edge = Linear(edge_dim, hc, bias=False, weight_initializer="glorot")
            self.e = Parameter(torch.empty(hc, hd))
        else:
            self.lin_edge = None
            self.register_parameter("e", None)
        if num_bases is not None:
            self.att = Parameter(torch.empty(num_relations, num_bases))
            self.basis = Parameter(torch.empty(num_bases, in_channels, hc))
        elif num_blocks is not None:
            if in_channels % num_blocks or hc % num_blocks:
                raise AssertionError("both 'in_channels' and 'heads * out_channels' must be "
                                     "multiple of 'num_blocks' used")
            self.weight = Parameter(torch.empty(num_relations, num_blocks,
                                                in_channels // num_blocks, hc // num_blocks))
        else:
            self.weight = Parameter(torch.empty(num_relations, in_channels, hc))
        self.w = Parameter(torch.ones(out_channels))
        self.l1 = Parameter(torch.empty(1, out_channels))
        self.b1 = Parameter(torch.empty(1, out_channels))
        self.l2 = Parameter(torch.empty(out_channels, out_channels))
        self.b2 = Parameter(torch.empty(1, out_channels))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyG's draws, in PyG's order (the same parameters after the same seed; l2 aside)."""
        self.aggr_module.reset_parameters()
        if self.num_bases is not None:
            glorot_(self.basis)
            glorot_(self.att)
        else:
            glorot_(self.weight)
        glorot_(self.q)
        glorot_(self.k)
        zeros_(self.bias)
        with torch.no_grad():
            self.l1.fill_(1.0)
            self.l2.fill_(1.0 / self.out_channels)
        zeros_(self.b1)
        zeros_(self.b2)
        if self.lin_edge is not None:
            glorot_(self.lin_edge.weight)
            glorot_(self.e)

    def relation_weight(self) -> Tensor:
        """``[R, F_in, H*C]``: the per-relation transforms the decomposition stands for."""
        hc = self.heads * self.out_channels
        if self.num_bases is not None:
            return (self.att @ self.basis.reshape(self.num_bases, -1)).view(
                self.num_relations, self.in_channels, hc)
        weight = self.weight
        if self.num_blocks is not None:
            # Block b of relation r on the diagonal: [R, B, F_in/B, B, H*C/B] -> [R, F_in, H*C].
            eye = torch.eye(self.num_blocks, dtype=weight.dtype, device=weight.device)
            return torch.einsum("rbio,bc->rbico", weight, eye).reshape(
                self.num_relations, self.in_channels, hc)
        return weight

    def forward(self, x, edge_index, edge_type: Optional[Tensor] = None,
                edge_attr: Optional[Tensor] = None, size=None, return_attention_weights=None):
        if self.num_blocks is not None and any(
                isinstance(t, Tensor) and not t.is_floating_point()
                for t in (x if isinstance(x, (tuple, list)) else (x,))):
            raise ValueError("Block-diagonal decomposition not supported for non-continuous "
                             "input features.")
        x_src, x_dst = split_input(x)
        num_src, num_dst = message_sizes(edge_index, x_src, x_dst, size, 0)
        tg = _typed_graph_of(edge_index, edge_type, self.num_relations, (num_src, num_dst))
        weight = self.relation_weight()
        strategy = _choose_strategy(self.strategy, tg, weight.size(1), weight.size(2))
        if strategy == "dense":
            rows, qi, kj = _dense_projections(tg, x_src, x_dst, weight, self.q, self.k)
        else:
            rows, qi, kj = _grouped_projections(tg, x_src, x_dst, weight, self.q, self.k)
        logits = self._logits(qi, kj, edge_attr, tg.num_edges)
        within = self.attention_mechanism == "within-relation"
        alpha = _segment_softmax(tg, logits, within)
        out = self._aggregate(tg, strategy, rows, alpha)
        if isinstance(return_attention_weights, bool):
            if is_sparse(edge_index):
                sparse = sparse_input(edge_index)
                return out, (sparse_like(sparse, None, alpha, False), alpha)
            if isinstance(edge_index, TypedGraph):
                return out, (torch.stack([tg.src, tg.dst]), alpha)
            return out, (edge_index, alpha)
        return out

    def _logits(self, qi: Tensor, kj: Tensor, edge_attr: Optional[Tensor],
                num_edges: int) -> Tensor:
        """``[E, H*D]`` attention logits (PyG's ``message`` before the softmax)."""
        alpha_edge = None
        if edge_attr is not None:
            if edge_attr.dim() == 1:
                edge_attr = edge_attr.view(-1, 1)
            if self.lin_edge is None:
                raise AssertionError("Please set 'edge_dim = edge_attr.size(-1)' while calling "
                                     "the RGATConv layer")
            if edge_attr.dim() != 2 or edge_attr.size(0) != num_edges:
                raise ValueError(f"RGATConv: edge_attr must have shape [num_edges={num_edges}, "
                                 f"edge_dim], got {list(edge_attr.shape)}")
            # lin_edge(edge_attr) @ e with the two weights contracted first: [E, H*D], not the
            # [E, H*C] edge projection.
            alpha_edge = edge_attr @ (self.lin_edge.weight.t() @ self.e)
        if self.attention_mode == "additive-self-attention":
            logits = qi + kj if alpha_edge is None else qi + kj + alpha_edge
            return F.leaky_relu(logits, self.negative_slope)
        logits = qi * kj
        return logits if alpha_edge is None else logits * alpha_edge

    def _aggregate(self, tg: TypedGraph, strategy: str, rows: Tensor, alpha: Tensor) -> Tensor:
        """The messages' mod, their weighted sums per destination and PyG's ``update``."""
        heads, dim, channels = self.heads, self.dim, self.out_channels
        reduce = _REDUCE[self.aggr]
        if self.mod == "f-additive":
            alpha = torch.where(alpha > 0, alpha + 1, alpha)
        elif self.mod == "f-scaled":
            alpha = alpha * _in_degree(tg, alpha.dtype).index_select(0, tg.dst).unsqueeze(-1)
        elif self.mod not in _MODS and self.training and self.dropout > 0:
            alpha = F.dropout(alpha, p=self.dropout, training=True)
        graph = tg._graph(_VALUE_GRAPHS[strategy])
        weights = graph.csr_edge_values(alpha.to(acc_dtype(rows.dtype))).t()
        parts = [propagate_csr(graph, rows[:, h * channels:(h + 1) * channels],
                               weights[h * dim + d].contiguous(), reduce)
                 for h in range(heads) for d in range(dim)]
        out = torch.stack(parts, 1).view(-1, heads, dim, channels)
        if self.mod == "additive":
            plain = propagate_csr(graph, rows, None, reduce).view(-1, heads, 1, channels)
            out = out + self.w * plain
        elif self.mod == "scaled":
            degree = _in_degree(tg, out.dtype).unsqueeze(-1)
            psi = self.activation(degree @ self.l1 + self.b1) @ self.l2 + self.b2
            out = out * psi.view(-1, 1, 1, channels)
        out = out.reshape(-1, heads * dim * channels) if self.concat else \
            out.mean(dim=1).reshape(-1, dim * channels)
        return out if self.bias is None else out + self.bias

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"heads={self.heads})")


def _check_options(layer: RGATConv) -> None:
    """PyG's constructor errors, in PyG's order and words."""
    if layer.attention_mechanism not in _MECHANISMS:
        raise ValueError('attention mechanism must either be "within-relation" or '
                         '"across-relation"')
    if layer.attention_mode not in _MODES:
        raise ValueError('attention mode must either be "additive-self-attention" or '
                         '"multiplicative-self-attention"')
    if layer.attention_mode == "additive-self-attention" and layer.dim > 1:
        raise ValueError('"additive-self-attention" mode cannot be applied when value of d is '
                         'greater than 1. Use "multiplicative-self-attention" instead.')
    if layer.dropout > 0.0 and layer.mod in _MODS:
        raise ValueError("mod must be None with dropout value greater than 0 in order to "
                         "sample attention coefficients stochastically")
    if layer.num_bases is not None and layer.num_blocks is not None:
        raise ValueError("Can not apply both basis-decomposition and "
                         "block-diagonal-decomposition at the same time.")


def _typed_graph_of(adj, edge_type: Optional[Tensor], num_types: int,
                    size: Tuple[int, int]) -> TypedGraph:
    """RGCNConv's cached TypedGraph; a sparse matrix with an explicit edge_type takes those types
    for its entries (PyG reads the matrix's values only when edge_type is None)."""
    if is_sparse(adj) and edge_type is not None:
        adj = sparse_input(adj).edge_index
    return _typed_graph(adj, edge_type, num_types, size)


# ---- evaluation strategies ---------------------------------------------------------------------
# The graph whose sources are the transformed rows, per strategy (built by the TypedGraph).
_VALUE_GRAPHS = {"dense": "transform_dense", "grouped": "transform_grouped"}


def _choose_strategy(strategy: str, tg: TypedGraph, f_in: int, f_out: int) -> str:
    """Dense (one GEMM over all ``N_src * R`` rows) unless those rows outweigh the grouped
    form's gathered inputs and outputs of the distinct (relation, source) pairs."""
    if strategy != "auto":
        if strategy not in STRATEGIES:
            raise ValueError(f"RGATConv.strategy must be 'auto' or one of {STRATEGIES}, got "
                             f"{strategy!r}")
        return strategy
    dense = tg.num_src_nodes * tg.num_types * f_out
    if dense <= tg.num_edges * (f_in + f_out):
        return "dense"
    return "dense" if dense <= tg.num_pairs * (f_in + f_out) else "grouped"


def _dense_projections(tg: TypedGraph, x_src: Tensor, x_dst: Tensor, weight: Tensor, q: Tensor,
                       k: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """``rows = x_src @ [W_0 | ... | W_R-1]`` as ``[N_src * R, H*C]`` (row ``src * R + r``) and
    the per-edge ``q = x_dst W_r Q``, ``k = x_src W_r K`` gathered from per-(node, relation)
    rows."""
    R, f_in, hc = weight.shape
    w_cat = weight.permute(1, 0, 2).reshape(f_in, R * hc)
    rows = (x_src @ w_cat).view(-1, hc)
    if x_dst is x_src:
        qk = rows @ torch.cat([q, k], 1)
        q_rows, k_rows = qk[:, :q.size(1)], qk[:, q.size(1):]
    else:
        q_rows, k_rows = (x_dst @ w_cat).view(-1, hc) @ q, rows @ k
    qi = _gather(tg, "rgat_dst_type", tg.dst * R + tg.type, q_rows)
    kj = _gather(tg, "rgat_src_type", tg.src * R + tg.type, k_rows)
    return rows, qi, kj


def _grouped_projections(tg: TypedGraph, x_src: Tensor, x_dst: Tensor, weight: Tensor,
                         q: Tensor, k: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """As ``_dense_projections`` over the relations present only: rows of the P distinct
    (relation, source) pairs (type-major, one GEMM per relation), queries of the U non-empty
    (destination, relation) groups (``x_dst W_r Q`` with ``W_r Q`` contracted first)."""
    pair_src, _, pair_of_edge, pair_offsets = tg._pair_structure()
    rows = _per_type_gemm(_gather(tg, "pair_src", pair_src, x_src), pair_offsets, weight, None)
    kj = _gather(tg, "rgat_pair_of_edge", pair_of_edge, rows @ k)
    x_groups = _gather(tg, "rgat_group_dst", tg.group_dst, x_dst)
    q_groups = _per_type_gemm(x_groups, tg.group_offsets, weight @ q, None)
    qi = _gather(tg, "rgat_group_of_edge", tg.group_of_edge, q_groups)
    return rows, qi, kj


# ---- softmax over segments of edges -----------------------------------------------------------
def _segment_graphs(tg: TypedGraph, within: bool) -> Tuple[Graph, Tensor]:
    """The graph ``edge -> segment`` (destination, or (destination, relation) group) and each
    edge's segment."""
    segment = tg.group_of_edge if within else tg.dst
    count = tg.num_groups if within else tg.num_dst_nodes

    def build():
        edges = torch.arange(tg.num_edges, device=tg.device)
        return Graph(torch.stack([edges, segment]), (tg.num_edges, count))
    return tg._memo(("rgat_segments", within), build), segment


def _segment_softmax(tg: TypedGraph, logits: Tensor, within: bool) -> Tensor:
    """PyG's ``softmax(logits, segment)``: ``exp(s - max) / (sum exp(s - max) + 1e-16)`` per
    segment and column, the maximum taken without gradient. Sums by propagate and their
    gathers back to the edges by ``_gather``: deterministic forward and backward."""
    graph, segment = _segment_graphs(tg, within)
    peak = segment_reduce(graph, logits.detach(), "max").index_select(0, segment)
    scores = (logits - peak).exp()
    total = propagate_csr(graph, scores, None, "sum") + 1e-16
    name = "rgat_group_of_edge" if within else "rgat_dst"
    return scores / _gather(tg, name, segment, total)


def _in_degree(tg: TypedGraph, dtype: torch.dtype) -> Tensor:
    """``[N_dst]``: the number of in-edges of every destination, all relations together."""
    return tg._memo(("rgat_degree", dtype),
                    lambda: torch.bincount(tg.dst, minlength=tg.num_dst_nodes).to(dtype))
