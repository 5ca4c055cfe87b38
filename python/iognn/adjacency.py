"""Every adjacency kind PyG accepts, reduced to ``(edge_index [2, E], size, edge values or None)``.

Conventions (PyG's): a ``[2, E]`` tensor or ``EdgeIndex`` stores (source, target) pairs; sparse
matrices (``torch.sparse`` COO/CSR/CSC and ``torch_sparse.SparseTensor``) are transposed adjacencies
``adj_t[target, source]``, so their shape is ``(num_dst, num_src)`` and their values are edge weights.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor


def _edge_index_class():
    try:
        from torch_geometric import EdgeIndex
        return EdgeIndex
    except ImportError:  # pragma: no cover - torch_geometric is a dependency
        return None


def _sparse_tensor_class():
    try:
        from torch_sparse import SparseTensor
        return SparseTensor
    except ImportError:
        return None


def plain_edge_index(edge_index):
    """A torch_geometric.EdgeIndex as a plain tensor; anything else unchanged."""
    cls = _edge_index_class()
    if cls is not None and isinstance(edge_index, cls):
        return edge_index.as_tensor()
    return edge_index


def to_edge_index(adj) -> Tuple[Tensor, Optional[Tuple[int, int]], Optional[Tensor]]:
    """Returns ``(edge_index, (num_src, num_dst) or None, values or None)`` for any adjacency."""
    ei_cls = _edge_index_class()
    if ei_cls is not None and isinstance(adj, ei_cls):
        rows, cols = adj.sparse_size()
        size = None if rows is None or cols is None else (int(rows), int(cols))
        return adj.as_tensor(), size, None
    st_cls = _sparse_tensor_class()
    if st_cls is not None and isinstance(adj, st_cls):
        dst, src, value = adj.coo()
        num_dst, num_src = adj.sparse_sizes()
        return torch.stack([src, dst]), (int(num_src), int(num_dst)), value
    if isinstance(adj, Tensor) and adj.layout != torch.strided:
        return _from_torch_sparse(adj)
    if isinstance(adj, Tensor):
        return adj, None, None
    raise TypeError("adjacency must be a [2, E] Tensor, torch_geometric.EdgeIndex, torch.sparse "
                    f"tensor or torch_sparse.SparseTensor, got {type(adj).__name__}")


def _from_torch_sparse(adj: Tensor):
    if adj.dim() != 2:
        raise ValueError(f"a sparse adjacency must be 2-D, got shape {list(adj.shape)}")
    num_dst, num_src = int(adj.size(0)), int(adj.size(1))
    if adj.layout == torch.sparse_coo:
        idx = adj._indices()
        dst, src, values = idx[0], idx[1], adj._values()
    elif adj.layout == torch.sparse_csr:
        crow, src, values = adj.crow_indices(), adj.col_indices(), adj.values()
        dst = torch.repeat_interleave(torch.arange(num_dst, device=crow.device, dtype=crow.dtype),
                                      crow.diff(), output_size=src.numel())
    elif adj.layout == torch.sparse_csc:
        ccol, dst, values = adj.ccol_indices(), adj.row_indices(), adj.values()
        src = torch.repeat_interleave(torch.arange(num_src, device=ccol.device, dtype=ccol.dtype),
                                      ccol.diff(), output_size=dst.numel())
    else:
        raise TypeError(f"unsupported sparse layout {adj.layout} (expected COO, CSR or CSC)")
    return torch.stack([src, dst]), (num_src, num_dst), values
