"""Node orderings for locality (the dense path's first step, ``docs/dense.md``; ``docs/reorder.md``).

``order(edge_index, num_nodes, method)`` returns ``perm[new position] = old node id`` for
``method`` in :data:`METHODS`: ``"rcm"`` (below), ``"degree"`` (decreasing in + out degree, ties by
id), ``"bfs"`` (components from their smallest id, neighbours by increasing id) and ``"metis"``
(nodes grouped by METIS part, by id within a part; the assignment of
``iognn.distributed.partition(..., method="metis")``, so libmetis or pymetis as there).
``permute_data(data, method_or_perm)`` applies an order to a PyG ``Data`` once and reports what the
ordering cost; the module itself is callable with the same arguments, ``iognn.reorder(data,
"rcm")`` (the module stays a module: ``iognn.reorder.rcm`` and the rest work as before).

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

import math
import sys
import time
import types
from typing import Any, NamedTuple, Optional, Union

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


METHODS = ("rcm", "degree", "bfs", "metis")
# The METIS order's default part size: parts of about this many nodes.
_NODES_PER_METIS_PART = 1024
_EDGE_ORDER_OPS = {"rcm": "rcm", "degree": "degree_order", "bfs": "bfs_order"}


def _check_method(method: Any) -> None:
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")


def _metis_order(edge_index: Tensor, num_nodes: int, num_parts: Optional[int],
                 seed: int) -> Tensor:
    # Imported here: iognn.distributed imports the Graph machinery this module sits beside.
    from .distributed.metis import metis_parts
    if num_nodes == 0:
        return torch.empty(0, dtype=edge_index.dtype)
    if num_parts is None:
        num_parts = math.ceil(num_nodes / _NODES_PER_METIS_PART)
    if isinstance(num_parts, bool) or not isinstance(num_parts, int):
        raise TypeError(f"num_parts must be an int, got {type(num_parts).__name__}")
    if not 1 <= num_parts <= num_nodes:
        raise ValueError(f"num_parts must be in [1, num_nodes = {num_nodes}], got {num_parts}")
    parts, _ = metis_parts(edge_index.to(torch.int64), num_nodes, num_parts, seed)
    return torch.ops.iognn.part_order(parts, num_parts).to(edge_index.dtype)


def order(edge_index: Tensor, num_nodes: int, method: str = "rcm", ptr: Optional[Tensor] = None,
          *, num_parts: Optional[int] = None, seed: int = 0) -> Tensor:
    """A node order ``perm[new] = old`` by ``method`` (one of :data:`METHODS`).

    Args:
        edge_index: ``[2, E]`` int32/int64.
        num_nodes: the number of nodes ``N``.
        method: ``"rcm"``, ``"degree"``, ``"bfs"`` or ``"metis"``.
        ptr: optional ``[num_graphs + 1]`` graph offsets: each graph ordered within its own range
            (not with ``"metis"``, which orders the whole graph).
        num_parts: ``"metis"`` only: the number of parts (default ``ceil(N / 1024)``).
        seed: ``"metis"`` only: METIS's seed (the same seed gives the same order).
    Returns:
        ``perm [N]`` in ``edge_index``'s dtype and device.
    """
    _check_method(method)
    _check_edge_index(edge_index)
    _check_ptr(ptr)
    num_nodes = _as_count(num_nodes)
    if method == "metis":
        if ptr is not None:
            raise ValueError("ptr is not supported with method='metis' (METIS orders the whole "
                             "graph; use 'rcm', 'degree' or 'bfs' to order each graph of a batch)")
        perm = _metis_order(_host(edge_index), num_nodes, num_parts, seed)
    else:
        if num_parts is not None:
            raise ValueError(f"num_parts is only used by method='metis', got method={method!r}")
        op = getattr(torch.ops.iognn, _EDGE_ORDER_OPS[method])
        perm = op(_host(edge_index), num_nodes, _host(ptr))
    return perm.to(edge_index.device)


class Reordered(NamedTuple):
    """What :func:`permute_data` returns: the permuted Data, ``perm[new] = old`` (int64, on the
    Data's device) and the seconds the ordering took (0.0 for a given permutation)."""
    data: Any
    perm: Tensor
    seconds: float


def _check_perm(perm: Any, num_nodes: int) -> Tensor:
    if not isinstance(perm, Tensor):
        raise TypeError(f"method_or_perm must be a method name or a Tensor, "
                        f"got {type(perm).__name__}")
    if perm.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"method_or_perm must have dtype int32 or int64, got {perm.dtype}")
    if perm.dim() != 1 or perm.numel() != num_nodes:
        raise ValueError(f"method_or_perm must have shape [num_nodes] = [{num_nodes}], "
                         f"got {list(perm.shape)}")
    seen = torch.zeros(num_nodes, dtype=torch.bool, device=perm.device)
    in_range = bool(((perm >= 0) & (perm < num_nodes)).all())
    if in_range:
        seen[perm.long()] = True
    if not in_range or not bool(seen.all()):
        raise ValueError(f"method_or_perm is not a permutation of {num_nodes} nodes")
    return perm.long()


def permute_data(data: Any, method_or_perm: Union[str, Tensor] = "rcm", **order_kwargs) -> Reordered:
    """Applies a node order to a PyG ``Data`` once: the cheap way to reorder for a training loop.

    Every node-level attribute (``data.is_node_attr``: x, y, masks, pos, batch, any tensor whose
    node dimension has ``num_nodes`` entries) is permuted, node ``perm[i]`` becoming node ``i``;
    ``edge_index`` is relabelled, its edges kept in their order, so edge attributes stay aligned.
    Other attributes are kept as they are (tensors holding node ids other than ``edge_index`` are
    not relabelled). A layer run on the result gives the rows of the run on ``data`` in the new
    order. A PyG ``Batch`` (with ``ptr``) is ordered graph by graph, except with ``"metis"``.

    Args:
        data: a PyG ``Data`` (or ``Batch``) with ``edge_index``.
        method_or_perm: a method of :data:`METHODS` or a permutation ``perm[new] = old``.
        order_kwargs: passed to :func:`order` (``num_parts``, ``seed`` for ``"metis"``).
    Returns:
        :class:`Reordered` ``(data, perm, seconds)``; the input Data is not modified.
    """
    edge_index = getattr(data, "edge_index", None)
    if not isinstance(edge_index, Tensor):
        raise TypeError(f"data must be a PyG Data with an edge_index Tensor, "
                        f"got {type(data).__name__}")
    num_nodes = _as_count(data.num_nodes)
    seconds = 0.0
    if isinstance(method_or_perm, str):
        _check_method(method_or_perm)
        graph_ptr = getattr(data, "ptr", None)
        if method_or_perm == "metis" or not isinstance(graph_ptr, Tensor):
            graph_ptr = None
        start = time.perf_counter()
        perm = order(edge_index, num_nodes, method_or_perm, graph_ptr, **order_kwargs).long()
        seconds = time.perf_counter() - start
    else:
        if order_kwargs:
            raise TypeError(f"order_kwargs {sorted(order_kwargs)} need a method name, "
                            f"not a permutation")
        perm = _check_perm(method_or_perm, num_nodes)
    perm = perm.to(edge_index.device)
    out = data.clone()
    for key in data.keys():
        if key == "edge_index" or not data.is_node_attr(key):
            continue
        value = data[key]
        if isinstance(value, Tensor):
            dim = data.__cat_dim__(key, value)
            out[key] = value.index_select(dim, perm.to(value.device))
        else:  # a list or tuple with one entry per node
            out[key] = type(value)(value[i] for i in perm.tolist())
    position = inverse_permutation(perm)
    out.edge_index = position[edge_index.long()].to(edge_index.dtype)
    return Reordered(out, perm, seconds)


class _CallableModule(types.ModuleType):
    """Makes ``iognn.reorder(data, method)`` (the module called) mean :func:`permute_data`."""

    def __call__(self, data: Any, method_or_perm: Union[str, Tensor] = "rcm",
                 **order_kwargs) -> Reordered:
        return permute_data(data, method_or_perm, **order_kwargs)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["METHODS", "Reordered", "order", "permute_data", "rcm", "bandwidth",
           "graph_bandwidths", "inverse_permutation"]
