"""``iognn.TypedGraph``: an adjacency with one type per edge, grouped for typed aggregation.

A TypedGraph is built once per (edge_index, edge_type) and read by ``iognn.ops.typed_propagate``.
It validates the edge types, groups the edges by (destination, type) (the groups, their sizes
``n(i, r)`` and the per-edge mean weights ``1 / n(i, r)``), and builds on first use the
``iognn.Graph`` each evaluation strategy of the op runs on (see ``docs/typed.md``):

- ``aggregate_dense``: edges ``src -> dst * R + type`` (one row per (destination, type));
- ``aggregate_grouped``: edges ``src -> group`` over the U non-empty groups, type-major, and
  ``group -> dst``;
- ``transform_dense``: edges ``src * R + type -> dst``;
- ``transform_grouped``: edges ``pair -> dst`` over the P distinct (type, source) pairs, type-major;
- ``featureless``: edges ``type * F_in + src -> dst`` (one-hot input features over F_in columns).

Building reads a few sizes on the host (a device sync on GPU inputs), once; a forward pass reads
nothing back.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple, Union

import torch
from torch import Tensor

from .graph import Graph, _check_edge_index, _resolve_size, Size

_INDEX_DTYPES = (torch.int32, torch.int64)

STRATEGIES = ("aggregate_dense", "aggregate_grouped", "transform_dense", "transform_grouped")


def _check_edge_type(edge_type, num_edges: int, device: torch.device) -> None:
    if not isinstance(edge_type, Tensor):
        raise TypeError(f"edge_type must be a Tensor, got {type(edge_type).__name__}")
    if edge_type.dtype not in _INDEX_DTYPES:
        raise TypeError(f"edge_type must have dtype int32 or int64, got {edge_type.dtype}")
    if edge_type.dim() != 1 or edge_type.size(0) != num_edges:
        raise ValueError(f"edge_type must have shape [num_edges={num_edges}], got "
                         f"{list(edge_type.shape)}")
    if edge_type.device != device:
        raise ValueError(f"edge_type is on {edge_type.device} but edge_index is on {device}")


def _check_num_types(num_types) -> int:
    if isinstance(num_types, bool) or not (isinstance(num_types, int)
                                           or hasattr(num_types, "__index__")):
        raise TypeError(f"num_types must be an int, got {num_types!r}")
    num_types = int(num_types)
    if num_types < 1:
        raise ValueError(f"num_types must be at least 1, got {num_types}")
    return num_types


def _check_ranges(edge_index: Tensor, edge_type: Tensor, num_types: int, num_src: int,
                  num_dst: int) -> None:
    """IndexError naming the first out-of-range entry of edge_index or edge_type (one host read
    of the six extremes)."""
    if edge_type.numel() == 0:
        return
    lo = torch.stack([edge_index[0].min(), edge_index[1].min(), edge_type.min().to(edge_index)])
    hi = torch.stack([edge_index[0].max(), edge_index[1].max(), edge_type.max().to(edge_index)])
    (lo_src, lo_dst, lo_type), (hi_src, hi_dst, hi_type) = torch.stack([lo, hi]).tolist()
    bounds = (("edge_index[0]", edge_index[0], lo_src, hi_src, num_src),
              ("edge_index[1]", edge_index[1], lo_dst, hi_dst, num_dst),
              ("edge_type", edge_type, lo_type, hi_type, num_types))
    for name, values, lo_v, hi_v, limit in bounds:
        if lo_v < 0 or hi_v >= limit:
            k = int(((values < 0) | (values >= limit)).nonzero()[0])
            raise IndexError(f"{name}[{k}] = {int(values[k])} is out of range [0, {limit})")


def _type_offsets(types: Tensor, num_types: int) -> List[int]:
    """Start of each type's rows in a type-sorted list, and the end (host ints)."""
    counts = torch.bincount(types, minlength=num_types)
    return [0] + torch.cumsum(counts, 0).tolist()


# Dense intermediates up to this many elements (128 MiB in fp32) are always formed: see strategy().
SMALL_DENSE = 1 << 25


class TypedGraph:
    """Edges with types, grouped by (destination, type) for ``iognn.ops.typed_propagate``.

    Args:
        edge_index: ``[2, E]`` int32/int64 (source row first), on the CPU or a GPU.
        edge_type: ``[E]`` int32/int64 in ``[0, num_types)``, on the device of ``edge_index``.
        num_types: the number of edge types R (>= 1).
        num_nodes: ``N``, ``(num_src, num_dst)``, or None to infer ``N`` from the largest index.

    Attributes:
        num_types, num_src_nodes, num_dst_nodes, num_edges, device.
        num_groups: U, the number of non-empty (destination, type) groups.
    """

    def __init__(self, edge_index: Tensor, edge_type: Tensor, num_types: int,
                 num_nodes: Size = None):
        from .adjacency import plain_edge_index
        edge_index = plain_edge_index(edge_index)
        _check_edge_index(edge_index)
        _check_edge_type(edge_type, edge_index.size(1), edge_index.device)
        self.num_types = _check_num_types(num_types)
        self.num_src_nodes, self.num_dst_nodes = _resolve_size(edge_index, num_nodes)
        _check_ranges(edge_index, edge_type, self.num_types, self.num_src_nodes,
                      self.num_dst_nodes)
        self.num_edges = edge_index.size(1)
        self.src = edge_index[0].long()
        self.dst = edge_index[1].long()
        self.type = edge_type.long()
        # Groups, type-major: group key type * num_dst + dst; group_of_edge maps edges to them.
        keys, self.group_of_edge, sizes = torch.unique(
            self.type * self.num_dst_nodes + self.dst, return_inverse=True, return_counts=True)
        self.group_type = keys // max(self.num_dst_nodes, 1)
        self.group_dst = keys - self.group_type * self.num_dst_nodes
        self.group_size = sizes
        self.group_offsets = _type_offsets(self.group_type, self.num_types)
        self.num_groups = keys.numel()
        self._pairs: Optional[Tuple[Tensor, Tensor, Tensor, List[int]]] = None
        self._cache: Dict[tuple, object] = {}

    # ---- sizes ------------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return self.src.device

    @property
    def size(self) -> Tuple[int, int]:
        return (self.num_src_nodes, self.num_dst_nodes)

    def counts(self) -> Tensor:
        """``[num_dst, num_types]`` int64: the number of edges of each type entering each node."""
        out = torch.zeros(self.num_dst_nodes * self.num_types, dtype=torch.int64,
                          device=self.device)
        out[self.group_dst * self.num_types + self.group_type] = self.group_size
        return out.view(self.num_dst_nodes, self.num_types)

    @property
    def num_pairs(self) -> int:
        """P, the number of distinct (type, source) pairs among the edges."""
        return self._pair_structure()[0].numel()

    def _pair_structure(self) -> Tuple[Tensor, Tensor, Tensor, List[int]]:
        """(pair_src, pair_type, pair_of_edge, type offsets) of the distinct (type, source)
        pairs, type-major."""
        if self._pairs is None:
            keys, pair_of_edge = torch.unique(self.type * self.num_src_nodes + self.src,
                                              return_inverse=True)
            pair_type = keys // max(self.num_src_nodes, 1)
            self._pairs = (keys - pair_type * self.num_src_nodes, pair_type, pair_of_edge,
                           _type_offsets(pair_type, self.num_types))
        return self._pairs

    # ---- what the strategies run on --------------------------------------------------------
    def _memo(self, key: tuple, build):
        value = self._cache.get(key)
        if value is None:
            value = self._cache[key] = build()
        return value

    def _graph(self, name: str) -> Graph:
        """The iognn.Graph of one strategy (built on first use)."""
        return self._memo(("graph", name), lambda: self._build_graph(name))

    def _build_graph(self, name: str) -> Graph:
        R, n_src, n_dst = self.num_types, self.num_src_nodes, self.num_dst_nodes
        if name == "aggregate_dense":
            return Graph(torch.stack([self.src, self.dst * R + self.type]), (n_src, n_dst * R))
        if name == "aggregate_grouped":
            return Graph(torch.stack([self.src, self.group_of_edge]), (n_src, self.num_groups))
        if name == "groups_to_dst":
            groups = torch.arange(self.num_groups, device=self.device)
            return Graph(torch.stack([groups, self.group_dst]), (self.num_groups, n_dst))
        if name == "transform_dense":
            return Graph(torch.stack([self.src * R + self.type, self.dst]), (n_src * R, n_dst))
        if name == "transform_grouped":
            pair_src, _, pair_of_edge, _ = self._pair_structure()
            return Graph(torch.stack([pair_of_edge, self.dst]), (pair_src.numel(), n_dst))
        if name.startswith("featureless"):  # featureless:F_in, one-hot rows of F_in columns
            width = int(name.split(":")[1])
            return Graph(torch.stack([self.type * width + self.src, self.dst]), (R * width, n_dst))
        raise ValueError(f"unknown graph {name!r}")

    def _mean_weights(self, graph_name: str, dtype: torch.dtype) -> Tensor:
        """``1 / n(dst(e), type(e))`` per edge in the CSR order of a transform-side graph."""
        def build():
            w = 1.0 / self.group_size.index_select(0, self.group_of_edge).to(dtype)
            return self._graph(graph_name).csr_edge_values(w)
        return self._memo(("mean", graph_name, dtype), build)

    def _group_factor(self, reduce: str, dtype: torch.dtype) -> Tensor:
        """Per group, what multiplies the message bias: n(i, r) for sum, 1 for mean."""
        def build():
            if reduce == "mean":
                return torch.ones(self.num_groups, 1, dtype=dtype, device=self.device)
            return self.group_size.to(dtype).unsqueeze(1)
        return self._memo(("factor", reduce, dtype), build)

    def _dense_factor(self, reduce: str, dtype: torch.dtype) -> Tensor:
        """``[num_dst, R]``: n(i, r) for sum, [n(i, r) > 0] for mean."""
        def build():
            counts = self.counts()
            return (counts > 0 if reduce == "mean" else counts).to(dtype)
        return self._memo(("dense_factor", reduce, dtype), build)

    # ---- strategy choice ---------------------------------------------------------------------
    def strategy(self, in_features: int, out_features: int) -> str:
        """The strategy ``typed_propagate`` takes for features of these widths.

        Aggregate first when ``in_features < out_features`` (the edge pass moves the narrower
        rows), else transform first: at equal widths both do the same arithmetic, and the
        transform-first intermediate is not kept for the backward (the aggregate-first one is:
        the weight's gradient reads it). Then dense (one GEMM over ``N * R`` rows) unless its
        intermediate is larger than the grouped strategy's (U or P rows of both widths): at
        large R the ``N * R * F`` tensor is never formed when the E-sized one is smaller, unless it
        is small (``SMALL_DENSE`` elements): the grouped forms issue a GEMM per type (R launches
        forward, 2R backward), which on a small batch cost more than one GEMM over ``N * R`` rows.
        """
        width = in_features + out_features
        if in_features < out_features:
            dense = self.num_dst_nodes * self.num_types * in_features
            return ("aggregate_dense" if dense <= max(self.num_groups * width, SMALL_DENSE)
                    else "aggregate_grouped")
        dense = self.num_src_nodes * self.num_types * out_features
        if dense <= max(self.num_edges * width, SMALL_DENSE):  # P <= E: no need to count pairs
            return "transform_dense"
        return "transform_dense" if dense <= self.num_pairs * width else "transform_grouped"

    # ---- device movement ---------------------------------------------------------------------
    def to(self, device: Union[str, torch.device]) -> "TypedGraph":
        """This typed graph on ``device`` (self when it is already there)."""
        device = torch.device(device)
        if device == self.device:
            return self
        return TypedGraph(torch.stack([self.src, self.dst]).to(device), self.type.to(device),
                          self.num_types, self.size)

    def __repr__(self) -> str:
        return (f"TypedGraph(num_src_nodes={self.num_src_nodes}, num_dst_nodes="
                f"{self.num_dst_nodes}, num_edges={self.num_edges}, num_types={self.num_types}, "
                f"num_groups={self.num_groups}, device={self.device})")
