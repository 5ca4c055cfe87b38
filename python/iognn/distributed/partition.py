"""Graph partitioning for full-graph training on several GPUs (``docs/distributed.md``).

``partition(data_or_edge_index, num_parts, method)`` assigns every node to a part (a rank) and builds
each part's :class:`LocalGraph`: the edges whose destination the part owns, renumbered so that a
rank's rows are ``[interior | boundary | halo]``, plus the plan of the rows it exchanges with the
other ranks. ``ranks=[r]`` builds rank ``r``'s layout only (the statistics still cover every part),
so a training rank holds its own edges, not every part's. The work runs on the CPU (C++,
``core/partition.h``), once per graph.

Definitions (edges are ``src -> dst``, PyG's source_to_target flow):

- rank ``r`` owns the nodes ``v`` with ``parts[v] == r`` and holds every edge whose destination it
  owns, so an owned node's aggregation is complete locally;
- its **halo**: the sources of its edges that it does not own (received from their owners);
- its **boundary**: owned nodes with a cut edge (in either direction); **interior**: the others;
- local ids: ``[0, num_interior)`` interior, ``[num_interior, num_owned)`` boundary,
  ``[num_owned, num_owned + num_halo)`` halo. Interior and boundary in ascending global id; the
  halo grouped by owning rank (ascending), each group in its owner's local order.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Dict, Iterable, List, Optional, Union

import torch
from torch import Tensor

from ..graph import _as_count, _check_edge_index
from .metis import check_backend, metis_parts

METHODS = ("metis", "random", "given")
# The layout op returns this many tensors per built part (binding/partition.cpp), then every
# part's sizes [num_parts, (owned, interior, halo, edges)], then (edge_cut, fingerprint).
_TENSORS_PER_PART = 7
_MAX_SEED = 2 ** 31


@dataclasses.dataclass
class LocalGraph:
    """The graph rank ``rank`` holds, in its local ids (tensors on the CPU until :meth:`to`).

    ``edge_index`` ``[2, E_r]`` int64: every input edge whose destination the rank owns (duplicates
    and self-loops kept), row 0 in ``[0, num_owned + num_halo)``, row 1 in ``[0, num_owned)``,
    sorted by destination, input order within a destination; ``edge_ids`` gives each one's position
    in the input (to slice edge attributes). ``in_degree`` is each local node's *global* in-degree
    (the number of input edges into it), which a halo node's normalisation needs.

    The exchange: ``send_index`` lists the owned rows (boundary local ids) sent per exchange,
    grouped by receiving rank ascending, group ``q`` in ``q``'s halo order; ``send_counts[q]`` rows
    go to rank ``q`` and ``recv_counts[q]`` halo rows come from it (both 0 for the rank itself).
    Rank ``r``'s ``send_counts[q]`` equals rank ``q``'s ``recv_counts[r]``.
    """
    rank: int
    num_parts: int
    num_nodes_global: int
    fingerprint: int
    num_owned: int
    num_interior: int
    num_halo: int
    owned_nodes: Tensor
    halo_nodes: Tensor
    edge_index: Tensor
    edge_ids: Tensor
    in_degree: Tensor
    send_index: Tensor
    send_counts: List[int]
    recv_counts: List[int]

    @property
    def num_local(self) -> int:
        """Rows of a layer's input on this rank: owned then halo."""
        return self.num_owned + self.num_halo

    def take(self, t: Tensor) -> Tensor:
        """The owned rows ``t[owned_nodes]`` of a global per-node tensor, on ``t``'s device."""
        return t[self.owned_nodes.to(t.device)]

    def to(self, device: Union[str, torch.device]) -> "LocalGraph":
        """A copy whose tensors are on ``device``."""
        return dataclasses.replace(self, **{f.name: getattr(self, f.name).to(device)
                                            for f in dataclasses.fields(self)
                                            if isinstance(getattr(self, f.name), Tensor)})


class Partition:
    """An assignment of nodes to ``num_parts`` ranks and the :class:`LocalGraph` of every rank (or
    of the ranks ``partition(..., ranks=...)`` named: ``built_ranks``).

    ``parts`` ``[num_nodes]`` int64 (CPU) gives each node's rank; ``edge_cut`` counts the input
    edges joining two ranks; ``halo_rows`` the rows one exchange moves (the sum of the halos);
    ``fingerprint`` identifies ``(num_nodes, num_parts, parts, edge set)`` so that ranks can check
    that they partitioned the same graph the same way.
    """

    def __init__(self, parts: Tensor, num_parts: int, method: str, backend: Optional[str],
                 layout: List[Tensor], built_ranks: List[int], num_edges: int,
                 seconds: Dict[str, float]):
        self.parts = parts
        self.num_parts = num_parts
        self.num_nodes = parts.numel()
        self.num_edges = num_edges
        self.method = method
        self.backend = backend
        self.built_ranks = tuple(built_ranks)
        self.edge_cut = int(layout[-1][0])
        self.fingerprint = int(layout[-1][1])
        self._parts = {r: layout[i * _TENSORS_PER_PART:(i + 1) * _TENSORS_PER_PART]
                       for i, r in enumerate(built_ranks)}
        self._sizes = layout[-2]  # [num_parts, (owned, interior, halo, edges)]
        self._seconds = seconds
        self.halo_rows = int(self._sizes[:, 2].sum())

    def local(self, rank: int) -> LocalGraph:
        """Rank ``rank``'s local graph (CPU tensors); ``rank`` must be one of ``built_ranks``."""
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < self.num_parts:
            raise ValueError(f"rank must be an int in [0, num_parts = {self.num_parts}), "
                             f"got {rank!r}")
        if rank not in self._parts:
            raise ValueError(f"rank {rank}'s layout was not built (this partition holds ranks "
                             f"{list(self.built_ranks)}: pass it in partition(..., ranks=...))")
        owned, halo, edge_index, edge_ids, in_degree, send_index, counts = self._parts[rank]
        return LocalGraph(rank=rank, num_parts=self.num_parts, num_nodes_global=self.num_nodes,
                          fingerprint=self.fingerprint, num_owned=owned.numel(),
                          num_interior=int(counts[2, 0]), num_halo=halo.numel(),
                          owned_nodes=owned, halo_nodes=halo, edge_index=edge_index,
                          edge_ids=edge_ids, in_degree=in_degree, send_index=send_index,
                          send_counts=counts[0].tolist(), recv_counts=counts[1].tolist())

    def stats(self) -> Dict[str, Any]:
        """Sizes per part, the cut, the halo rows, the METIS backend and the time taken."""
        owned, interior, halo, edges = self._sizes.t().tolist()
        return {
            "method": self.method,
            "backend": self.backend,
            "num_parts": self.num_parts,
            "num_nodes": self.num_nodes,
            "num_edges": self.num_edges,
            "edge_cut": self.edge_cut,
            "edge_cut_fraction": self.edge_cut / self.num_edges if self.num_edges else 0.0,
            "halo_rows": self.halo_rows,
            "owned": owned,
            "interior": interior,
            "boundary": [o - i for o, i in zip(owned, interior)],
            "halo": halo,
            "edges": edges,
            "fingerprint": self.fingerprint,
            **self._seconds,
        }

    def __repr__(self) -> str:
        return (f"Partition(num_parts={self.num_parts}, num_nodes={self.num_nodes}, "
                f"method={self.method!r}, edge_cut={self.edge_cut}, halo_rows={self.halo_rows})")


def _graph_input(data_or_edge_index: Any, num_nodes: Optional[int], parts: Optional[Tensor]):
    """(host edge_index, num_nodes) from a PyG Data or an edge_index."""
    if isinstance(data_or_edge_index, Tensor):
        edge_index, data_nodes = data_or_edge_index, None
    elif hasattr(data_or_edge_index, "edge_index"):
        edge_index, data_nodes = data_or_edge_index.edge_index, data_or_edge_index.num_nodes
    else:
        raise TypeError("data_or_edge_index must be a PyG Data (with edge_index) or an edge_index "
                        f"tensor, got {type(data_or_edge_index).__name__}")
    _check_edge_index(edge_index)
    edge_index = edge_index.cpu()
    if num_nodes is not None:
        num_nodes = _as_count(num_nodes)
    elif data_nodes is not None:
        num_nodes = int(data_nodes)
    elif parts is not None and isinstance(parts, Tensor):
        num_nodes = parts.numel()
    else:
        num_nodes = int(edge_index.max()) + 1 if edge_index.numel() else 0
    if num_nodes < 0:
        raise ValueError(f"num_nodes must be >= 0, got {num_nodes}")
    return edge_index, num_nodes


def _check_parts(parts: Any, num_nodes: int) -> Tensor:
    if not isinstance(parts, Tensor):
        raise TypeError(f"parts must be a Tensor, got {type(parts).__name__}")
    if parts.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"parts must have dtype int32 or int64, got {parts.dtype}")
    if parts.dim() != 1 or parts.numel() != num_nodes:
        raise ValueError(f"parts must have shape [num_nodes] = [{num_nodes}], "
                         f"got {list(parts.shape)}")
    return parts.to("cpu", torch.int64).contiguous()


def _check_ranks(ranks: Optional[Iterable[int]], num_parts: int) -> List[int]:
    """The ranks to build, ascending and distinct (None: all)."""
    if ranks is None:
        return list(range(num_parts))
    if isinstance(ranks, (int, Tensor)):
        raise TypeError(f"ranks must be an iterable of ints (e.g. [rank]), got "
                        f"{type(ranks).__name__}")
    ranks = list(ranks)
    for r in ranks:
        if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < num_parts:
            raise ValueError(f"ranks must be ints in [0, num_parts = {num_parts}), got {r!r}")
    return sorted(set(ranks))


def partition(data_or_edge_index: Any, num_parts: int, method: Optional[str] = "metis", *,
              num_nodes: Optional[int] = None, seed: int = 0, parts: Optional[Tensor] = None,
              backend: str = "auto", ranks: Optional[Iterable[int]] = None) -> Partition:
    """Partitions a graph over ``num_parts`` ranks.

    Args:
        data_or_edge_index: a PyG ``Data`` (its ``edge_index`` and ``num_nodes``) or an
            ``edge_index`` ``[2, E]`` (int32/int64, any device: the work runs on the CPU).
        num_parts: the number of ranks, ``1 <= num_parts <= num_nodes``.
        method: ``"metis"`` (edge-cut minimising, libmetis or pymetis) or ``"random"`` (seeded,
            part sizes differing by at most one). Ignored when ``parts`` is given (it may then be
            None, ``"given"`` or the default).
        num_nodes: the number of nodes (default: the Data's, else ``len(parts)``, else the largest
            index + 1).
        seed: ``0 <= seed < 2**31``; the same seed gives the same parts.
        parts: an explicit assignment ``[num_nodes]`` with values in ``[0, num_parts)``; a part may
            be left empty.
        backend: METIS backend, ``"auto"`` (libmetis when the build has it, else pymetis),
            ``"libmetis"`` or ``"pymetis"``.
        ranks: the ranks whose :class:`LocalGraph` to build (default: all); a training rank
            passes ``[rank]`` to hold its own edges only. The statistics cover every part either
            way.
    """
    start = time.perf_counter()
    edge_index, num_nodes = _graph_input(data_or_edge_index, num_nodes, parts)
    if isinstance(num_parts, bool) or not isinstance(num_parts, int):
        raise TypeError(f"num_parts must be an int, got {type(num_parts).__name__}")
    if not 1 <= num_parts <= num_nodes:
        raise ValueError(f"num_parts must be in [1, num_nodes = {num_nodes}], got {num_parts}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < _MAX_SEED:
        raise ValueError(f"seed must be an int in [0, 2**31), got {seed!r}")
    check_backend(backend)
    built = _check_ranks(ranks, num_parts)
    backend_ran = None
    if parts is not None:
        if method not in (None, "given", "metis"):
            raise ValueError(f"method={method!r} conflicts with parts= (which gives the "
                             "assignment): pass method=None or 'given'")
        method = "given"
        parts = _check_parts(parts, num_nodes)
    elif method == "random":
        parts = torch.ops.iognn.random_partition(num_nodes, num_parts, seed)
    elif method == "metis":
        parts, backend_ran = metis_parts(edge_index, num_nodes, num_parts, seed, backend)
    else:
        raise ValueError(f"method must be one of 'metis', 'random' (or parts= for a given "
                         f"assignment), got {method!r}")
    assigned = time.perf_counter()
    layout = torch.ops.iognn.partition_layout(edge_index, parts, num_parts, built)
    done = time.perf_counter()
    seconds = {"assign_seconds": assigned - start, "layout_seconds": done - assigned,
               "seconds": done - start}
    return Partition(parts, num_parts, method, backend_ran, layout, built, edge_index.size(1),
                     seconds)
