"""What the attention layers share: their common hyper-parameters and output steps (base classes),
PyG's node counts, the self-loop handling of edge features and the ``return_attention_weights``
result in PyG's form for each adjacency kind."""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from torch import Tensor

from .._amp import like
from .._graph import _EDGE_INDEX, Adjacency, is_edge_index, message_sizes, sparse_like
from ..linear import Linear, register_bias
from ._common import (MessagePassingArgs, MessagePassingModule, check_attention_aggr,
                      check_float_features, store_arguments)


class AttentionModule(MessagePassingModule):
    """Base of GATConv, GATv2Conv and TransformerConv: PyG's ``MessagePassing`` arguments
    (``aggr='add'`` only, ``node_dim`` 0) and the hyper-parameters all three store."""

    FIXED_NODE_DIM = 0

    def __init__(self, layer: str, kwargs: Dict[str, Any], in_channels, out_channels: int,
                 heads: int, concat: bool, dropout: float, edge_dim: Optional[int]):
        super().__init__()
        args = MessagePassingArgs(layer, kwargs, aggr="add", node_dim=0)
        check_attention_aggr(layer, args)
        args.install(self)
        store_arguments(self, in_channels=in_channels, out_channels=out_channels, heads=heads,
                        concat=concat, dropout=dropout, edge_dim=edge_dim)

    def _merge_heads(self, out: Tensor) -> Tensor:
        """``[N, H, C]`` heads concatenated into ``[N, H * C]``, or averaged into ``[N, C]``."""
        return out.reshape(-1, self.heads * self.out_channels) if self.concat else out.mean(dim=1)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"heads={self.heads})")


class GATModule(AttentionModule):
    """Base of GATConv and GATv2Conv: their common hyper-parameters, the residual projection and
    bias, and the output steps after the attention."""

    def __init__(self, layer: str, kwargs: Dict[str, Any], in_channels, out_channels: int,
                 heads: int, concat: bool, negative_slope: float, dropout: float,
                 add_self_loops: bool, edge_dim: Optional[int], fill_value, residual: bool):
        super().__init__(layer, kwargs, in_channels, out_channels, heads, concat, dropout,
                         edge_dim)
        store_arguments(self, negative_slope=negative_slope, add_self_loops=add_self_loops,
                        fill_value=fill_value, residual=residual)

    def _init_residual_and_bias(self, dst_channels: int, bias: bool) -> None:
        """``res`` (with ``residual``) and ``bias``, registered after the attention parameters
        as in PyG (the state_dict order)."""
        total_out = self.out_channels * (self.heads if self.concat else 1)
        if self.residual:
            self.res = Linear(dst_channels, total_out, False, "glorot")
        else:
            self.register_parameter("res", None)
        register_bias(self, total_out, bias)

    def _output(self, out: Tensor, alpha: Optional[Tensor], res: Optional[Tensor],
                adj: Adjacency, edge_index):
        """The heads merged, plus the residual and the bias; with ``alpha`` (attention weights
        were asked for) PyG's ``(out, (edge_index, alpha))``."""
        out = self._merge_heads(out)
        if res is not None:
            out = out + like(res, out)
        if self.bias is not None:
            out = out + like(self.bias, out)
        if alpha is not None:
            return with_attention(out, alpha, adj, edge_index, self.add_self_loops)
        return out


def check_static(layer: str, x: Tensor) -> None:
    """The attention layers' features are ``[N, F]``: a batch ``[B, N, F]`` is refused (PyG:
    "Static graphs not supported")."""
    check_float_features(layer, x)
    if x.dim() != 2:
        raise ValueError(f"{layer}: node features must be 2-D [num_nodes, channels], got shape "
                         f"{list(x.shape)} (static-graph batches are not supported, as in PyG)")


def attention_sizes(edge_index, h_src: Tensor, h_dst: Optional[Tensor], size,
                    add_loops: bool) -> Tuple[int, int]:
    """(num_src, num_dst) of a GAT / GATv2 call, as PyG infers them. With self-loops PyG adds them
    over ``min(size)`` nodes, else over the source rows (the fewer of source and destination rows
    when both are given); an EdgeIndex grows to cover them before its sizes are read."""
    adj_size = None
    if add_loops and is_edge_index(edge_index):
        if size is not None:
            loops = min(size)
        else:
            loops = h_src.size(0) if h_dst is None else min(h_src.size(0), h_dst.size(0))
        adj_size = [None if n is None else max(n, loops) for n in edge_index.sparse_size()]
    return message_sizes(edge_index, h_src, h_dst, size, 0, adj_size)


def loop_edge_attr(adj: Adjacency, edge_attr: Optional[Tensor], fill_value) -> Optional[Tensor]:
    """Edge features in the graph's augmented order (2-D); a sparse input's 2-D values stand in
    for a missing edge_attr (PyG's ``_collect``)."""
    if edge_attr is None:
        edge_attr = adj.values
    if edge_attr is None:
        return None
    if edge_attr.dim() == 1:
        edge_attr = edge_attr.view(-1, 1)
    return adj.graph.augment_edge_values(edge_attr, fill_value)


def with_attention(out: Tensor, alpha: Tensor, adj: Adjacency, edge_index, loops_added: bool,
                   returns_input: bool = False):
    """``(out, (edge_index, alpha))`` as PyG returns it; alpha is in the graph's augmented order.

    Index inputs: the input itself without self-loops, else the augmented int64 edge_index (an
    EdgeIndex for an EdgeIndex input, its known sizes grown to cover the loops). torch.sparse
    inputs: a sparse matrix of alpha on the edges PyG used (its coalesced matrix with loops when
    ``loops_added``, which is the graph's CSR order, alpha following it; else the input's
    entries), or the input matrix itself with ``returns_input`` (TransformerConv). torch_sparse.SparseTensor inputs: ``(out, adj_t)`` with
    alpha as its values."""
    sparse, graph = adj.sparse, adj.graph
    if sparse is None:
        if not loops_added and isinstance(edge_index, Tensor):
            return out, (edge_index, alpha)
        if is_edge_index(edge_index):  # PyG's concatenation with the loops' EdgeIndex
            size = tuple(None if n is None else max(n, graph.num_loops)
                         for n in edge_index.sparse_size())
            return out, (_EDGE_INDEX(graph.edge_index, sparse_size=size), alpha)
        return out, (graph.edge_index, alpha)
    if loops_added:
        alpha = alpha.index_select(0, graph.eid.long())
    if not sparse.is_torch_sparse:
        return out, sparse_like(sparse, graph, alpha, loops_added)
    if returns_input:
        return out, (sparse.matrix, alpha)
    return out, (sparse_like(sparse, graph, alpha, loops_added), alpha)
