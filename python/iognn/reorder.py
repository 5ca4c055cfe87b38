"""Node orderings that make adjacencies banded (the dense path's first step, ``docs/dense.md``).

``rcm(edge_index, num_nodes, ptr=None)`` returns the Reverse Cuthill-McKee permutation
``perm[new position] = old node id`` (scipy's convention: ``A[perm][:, perm]`` is the reordered
adjacency). Edge direction, self-loops and duplicate edges do not change it. With ``ptr`` (a PyG
``Batch.ptr``), every graph of the batch is ordered on its own, within its own node range, in one
call (graphs in parallel); an edge joining two graphs is a ValueError. The order is deterministic:
components by smallest node id, each from a pseudo-peripheral node (George and Liu), neighbours by
increasing (degree, id), each component's order reversed.

``bandwidth`` / ``graph_bandwidths`` measure ``max |pos(u) - pos(v)|`` over the edges under a
permutation (the identity by default). The orderings run on the host (C++, ``core/reorder.h``):
device inputs are copied to the host and the result is returned on their device.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from .graph import _as_count, _check_edge_index


def _host(t: Optional[Tensor]) -> Optional[Tensor]:
    return None if t is None else t.cpu()


def _check_ptr(ptr: Optional[Tensor]) -> None:
    if ptr is None:
        return
    if not isinstance(ptr, Tensor):
        raise TypeError(f"ptr must be a Tensor, got {type(ptr).__name__}")
    if ptr.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"ptr must have dtype int32 or int64, got {ptr.dtype}")


def rcm(edge_index: Tensor, num_nodes: int, ptr: Optional[Tensor] = None) -> Tensor:
    """Reverse Cuthill-McKee permutation of a graph, or of each graph of a batch.

    Args:
        edge_index: ``[2, E]`` int32/int64 (direction is ignored).
        num_nodes: the number of nodes ``N``.
        ptr: optional ``[num_graphs + 1]`` graph offsets (PyG's ``Batch.ptr``; ``ptr[-1] == N``).
    Returns:
        ``perm [N]`` in ``edge_index``'s dtype and device, ``perm[new] = old``; with ``ptr``, the
        positions ``ptr[g]:ptr[g + 1]`` hold a permutation of graph ``g``'s nodes.
    """
    _check_edge_index(edge_index)
    _check_ptr(ptr)
    perm = torch.ops.iognn.rcm(_host(edge_index), _as_count(num_nodes), _host(ptr))
    return perm.to(edge_index.device)


def graph_bandwidths(edge_index: Tensor, num_nodes: int, ptr: Optional[Tensor] = None,
                     perm: Optional[Tensor] = None) -> Tensor:
    """Per-graph bandwidth ``max |pos(u) - pos(v)|`` under ``perm`` (identity if None).

    Returns an int64 tensor ``[num_graphs]`` (``[1]`` without ``ptr``) on ``edge_index``'s device;
    0 for a graph without edges.
    """
    _check_edge_index(edge_index)
    _check_ptr(ptr)
    if perm is not None:
        if not isinstance(perm, Tensor):
            raise TypeError(f"perm must be a Tensor, got {type(perm).__name__}")
        if perm.dtype in (torch.int32, torch.int64):
            perm = perm.to(edge_index.dtype)
    out = torch.ops.iognn.graph_bandwidth(_host(edge_index), _as_count(num_nodes), _host(perm),
                                          _host(ptr))
    return out.to(edge_index.device)


def bandwidth(edge_index: Tensor, num_nodes: int, perm: Optional[Tensor] = None) -> int:
    """Bandwidth ``max |pos(u) - pos(v)|`` of the whole graph under ``perm`` (identity if None)."""
    return int(graph_bandwidths(edge_index, num_nodes, None, perm)[0])


def inverse_permutation(perm: Tensor) -> Tensor:
    """``inv`` with ``inv[perm[i]] = i`` (old node id -> new position)."""
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.numel(), dtype=perm.dtype, device=perm.device)
    return inv


__all__ = ["rcm", "bandwidth", "graph_bandwidths", "inverse_permutation"]
