"""What the attention layers share: the self-loop handling of edge features and the
``return_attention_weights`` result in PyG's form for each adjacency kind."""
from __future__ import annotations

from typing import Optional

from torch import Tensor

from .._graph import Adjacency, sparse_like


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


def with_attention(out: Tensor, alpha: Tensor, adj: Adjacency, loops_added: bool,
                   returns_input: bool = False):
    """``(out, (edge_index, alpha))`` as PyG returns it; alpha is in the graph's augmented order.

    Index inputs: the augmented edge_index. torch.sparse inputs: a sparse matrix of alpha on the
    edges PyG used (its coalesced matrix with loops when ``loops_added``, which is the graph's CSR
    order, alpha following it; else the input's entries), or the input matrix itself with
    ``returns_input`` (TransformerConv). torch_sparse.SparseTensor inputs: ``(out, adj_t)`` with
    alpha as its values."""
    sparse, graph = adj.sparse, adj.graph
    if sparse is None:
        return out, (graph.edge_index, alpha)
    if loops_added:
        alpha = alpha.index_select(0, graph.eid.long())
    if not sparse.is_torch_sparse:
        return out, sparse_like(sparse, graph, alpha, loops_added)
    if returns_input:
        return out, (sparse.matrix, alpha)
    return out, (sparse_like(sparse, graph, alpha, loops_added), alpha)
