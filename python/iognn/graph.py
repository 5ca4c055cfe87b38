"""``iognn.Graph``: an adjacency built once into the layouts every iognn op reads.

A Graph holds the destination-major CSR (``rowptr``, ``col``, ``eid``), the source-major transposed
CSR (``colptr``, ``row``) and the permutation between them (``csc2csr``), plus ``edge_map``, the
input edge behind each (possibly self-loop-augmented) edge. ``edge_index[0]`` is the source j and
``edge_index[1]`` the target i, as in PyG; ops aggregate over the in-edges of each target.
See ``docs/graph.md`` for the full contract.
"""
from __future__ import annotations

import enum
import time
from typing import NamedTuple, Optional, Tuple, Union

import torch
from torch import Tensor

from ._graph_compile import build_graph_symint  # also registers iognn::build_graph's fake

Size = Union[None, int, Tuple[int, int]]


class SelfLoops(enum.IntEnum):
    """How a Graph treats self-loops (the augmented edge order is PyG's in every mode).

    KEEP: the input edges as they are. ADD_REMAINING: GCN's ``add_remaining_self_loops`` (non-loop
    edges, then one loop per node; an existing loop keeps its value). REPLACE: GAT's
    ``remove_self_loops`` + ``add_self_loops`` (non-loop edges, then one fresh loop per node).
    """

    KEEP = 0
    ADD_REMAINING = 1
    REPLACE = 2


_INDEX_DTYPES = (torch.int32, torch.int64)

# Rows of a tile's row window and columns of a tile (docs/graph.md, "Tile layout and fill").
TILE_ROWS, TILE_COLS = 16, 8


class TileLayout(NamedTuple):
    """The block-sparse tile layout of a Graph's CSR (docs/graph.md, "Tile layout and fill").

    ``window_ptr`` int64 ``[num_windows + 1]``: window w owns tiles ``window_ptr[w] ..
    window_ptr[w + 1] - 1``; its rows are ``row_order[16w .. 16w + 15]`` (destinations ``16w ..
    16w + 15`` when ``row_order`` is None), row r of a tile being the window's r-th.
    ``tile_cols`` ``[num_tiles, 8]`` in the graph's index dtype: the source of each tile column
    (the window's sorted distinct sources, original ids), -1 padding. ``tile_bitmap`` int32
    ``[num_tiles, 4]``: bit ``8 r + c`` of a tile's 128 (bit ``b % 32`` of word ``b // 32``) is set
    when row r and column c share at least one edge. ``edge_slot`` int64 ``[E]``: for CSR position
    p (CSC position with ``transposed=True``), the slot ``t * 128 + 8 r + c`` of the tile, row and
    column holding its pair (duplicate edges share a slot). ``num_pairs``: the distinct
    (destination, source) pairs (duplicate edges count once). ``row_order``: the permutation the
    windows follow (the graph's ``row_order``), or None for the identity.
    """

    window_ptr: Tensor
    tile_cols: Tensor
    tile_bitmap: Tensor
    edge_slot: Tensor
    num_pairs: int
    row_order: Optional[Tensor] = None

    @property
    def num_tiles(self) -> int:
        return self.tile_cols.size(0)

    @property
    def fill(self) -> float:
        """Distinct pairs / (num_tiles * 128): 1.0 when every tile is dense, 0.0 without tiles."""
        return self.num_pairs / (self.num_tiles * TILE_ROWS * TILE_COLS) if self.num_tiles else 0.0

    def to(self, device: torch.device) -> "TileLayout":
        return TileLayout(self.window_ptr.to(device), self.tile_cols.to(device),
                          self.tile_bitmap.to(device), self.edge_slot.to(device), self.num_pairs,
                          None if self.row_order is None else self.row_order.to(device))


def _build_tile_layout(offsets: Tensor, indices: Tensor, num_src: int,
                       row_order: Optional[Tensor]) -> TileLayout:
    """The op on the tensors' device (a CUDA graph builds on the GPU: no host copy)."""
    return TileLayout(*torch.ops.iognn.tile_layout(offsets, indices, num_src, row_order),
                      row_order)


def tile_layout(graph: "Graph", transposed: bool = False) -> TileLayout:
    """The graph's tile layout, built on its device on the first call and kept on the graph (one
    for each direction; a moved graph takes its built layouts along).

    ``transposed=False``: the destination-major CSR (``rowptr``, ``col``): windows of
    destinations, columns of sources, ``edge_slot`` indexed by CSR position (what propagate's
    forward reads). ``transposed=True``: the source-major CSR (``colptr``, ``row``): windows of
    sources, columns of destinations, ``edge_slot`` indexed by CSC position (its backward). Both
    follow ``graph.row_order`` for their windows (None: the identity)."""
    transposed = bool(transposed)
    layout = graph._tiles.get(transposed)
    if layout is None:
        if transposed:
            layout = _build_tile_layout(graph.colptr, graph.row, graph.num_dst_nodes,
                                        graph.row_order)
        else:
            layout = _build_tile_layout(graph.rowptr, graph.col, graph.num_src_nodes,
                                        graph.row_order)
        graph._tiles[transposed] = layout
    return layout


# Graph(reorder=...): the orderings of iognn.reorder, or "auto" (the best tile fill among them).
REORDER_METHODS = ("rcm", "degree", "bfs", "metis", "auto")
# "auto" keeps the identity unless an ordering's fill beats the identity's by more than this factor.
_AUTO_MIN_FILL_GAIN = 1.02


def _check_reorder(reorder, deferred: bool, bipartite: bool) -> None:
    if reorder is None:
        return
    if not isinstance(reorder, str) or reorder not in REORDER_METHODS:
        raise ValueError(f"Graph: reorder must be None or one of {REORDER_METHODS}, "
                         f"got {reorder!r}")
    if deferred:
        raise ValueError("Graph: a deferred build cannot reorder (the ordering reads the edges "
                         "on the host)")
    if bipartite:
        raise ValueError("Graph: a bipartite graph cannot be reordered (its sources and "
                         "destinations are different node sets)")
    if torch.compiler.is_compiling():
        raise RuntimeError("Graph: reorder is not supported inside torch.compile (the ordering "
                           "runs on the host); build the reordered Graph outside the compiled "
                           "region and pass it in")


def _auto_methods() -> Tuple[str, ...]:
    """The orderings "auto" tries: the cheap ones, and METIS when libmetis or pymetis is there."""
    import importlib.util
    from .distributed.metis import has_libmetis
    metis = has_libmetis() or importlib.util.find_spec("pymetis") is not None
    return ("rcm", "degree", "bfs") + (("metis",) if metis else ())


def _window_order(edge_index: Tensor, num_nodes: int, method: str) -> Tensor:
    """``iognn.reorder.order`` for the tile windows: METIS cuts the graph into parts of one window
    (16 nodes), so that each window's rows share their neighbours (parts of a thousand nodes, the
    default for cache locality, leave a window's 16 rows as unrelated as a random order would)."""
    from . import reorder
    parts = {"num_parts": max(1, -(-num_nodes // TILE_ROWS))} if method == "metis" else {}
    return reorder.order(edge_index, num_nodes, method, **parts)


def _reorder_graph(graph: "Graph", method: str) -> dict:
    """Sets ``graph.row_order`` by ``method`` (on the host, once) and returns the stats entries:
    the method ("auto" resolved, None when it kept the identity), its seconds and, for "auto", the
    fill of each order tried. "auto" keeps the winner's layout (built on the host)."""
    start = time.perf_counter()
    edge_index = torch.stack([graph.col, graph.csr_dst]).cpu()
    n = graph.num_dst_nodes
    if method != "auto":
        perm, layout, fills = _window_order(edge_index, n, method), None, None
    else:
        rowptr, col = graph.rowptr.cpu(), graph.col.cpu()
        layouts = {"identity": (None, _build_tile_layout(rowptr, col, n, None))}
        for name in _auto_methods():
            perm = _window_order(edge_index, n, name).to(graph.index_dtype)
            layouts[name] = (perm, _build_tile_layout(rowptr, col, n, perm))
        fills = {name: layout.fill for name, (_, layout) in layouts.items()}
        best = max(fills, key=fills.get)  # the first of the best on ties
        if fills[best] <= fills["identity"] * _AUTO_MIN_FILL_GAIN:
            best = "identity"
        perm, layout = layouts[best]
        method = None if best == "identity" else best
    graph.row_order = None if perm is None else perm.to(graph.device, graph.index_dtype)
    if layout is not None:
        graph._tiles[False] = layout.to(graph.device)._replace(row_order=graph.row_order)
    stats = {"reorder": method, "reorder_seconds": time.perf_counter() - start}
    return stats if fills is None else {**stats, "reorder_fills": fills}


def _check_edge_index(edge_index: Tensor) -> None:
    if not isinstance(edge_index, Tensor):
        raise TypeError(f"edge_index must be a Tensor, got {type(edge_index).__name__}")
    if edge_index.dtype not in _INDEX_DTYPES:
        raise TypeError(f"edge_index must have dtype int32 or int64, got {edge_index.dtype}")
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"edge_index must have shape [2, num_edges], got {list(edge_index.shape)}")


def _raise_negative_index(edge_index: Tensor) -> None:
    """IndexError naming the first edge with a negative index (source checked first)."""
    negative = edge_index < 0
    k = int(negative.any(0).nonzero()[0])
    row = 0 if bool(negative[0, k]) else 1
    raise IndexError(f"edge_index[{row}][{k}] = {int(edge_index[row, k])} is negative")


def _parse_self_loops(value) -> SelfLoops:
    """A SelfLoops from the enum, its name (any case) or its value 0/1/2."""
    if isinstance(value, SelfLoops):
        return value
    if isinstance(value, str) and value.upper() in SelfLoops.__members__:
        return SelfLoops[value.upper()]
    if isinstance(value, int) and not isinstance(value, bool) and value in set(SelfLoops):
        return SelfLoops(value)
    names = ", ".join(f"'{m.name.lower()}'" for m in SelfLoops)
    raise ValueError(f"self_loops must be a SelfLoops, one of {names} or 0/1/2, got {value!r}")


def _as_count(n):
    """An int from an integer count (int, numpy integer, 0-d integer tensor); a symbolic size
    (torch.compile) stays symbolic, since int() would specialise the compiled graph to its current
    value. Anything else (a float, a str, None, a bool) is a TypeError: truncating 5.5 or reading
    True as 1 would build a different graph than the one asked for."""
    if isinstance(n, torch.SymInt):
        return n
    integral = (isinstance(n, int) or hasattr(n, "__index__")) and not isinstance(n, bool)
    if not integral or (isinstance(n, Tensor) and (n.is_floating_point() or n.dtype == torch.bool)):
        raise TypeError(f"num_nodes must hold integer node counts, got {n!r} "
                        f"({type(n).__name__})")
    return int(n)


def _resolve_size(edge_index: Tensor, size: Size) -> Tuple[int, int]:
    """(num_src, num_dst): given, or for a square graph one more than the largest index."""
    if isinstance(size, (tuple, list)):
        if len(size) != 2:
            raise ValueError(f"num_nodes must be an int or a pair (num_src, num_dst), got {size}")
        num_src, num_dst = (_as_count(s) for s in size)
    elif size is not None:
        num_src = num_dst = _as_count(size)
    elif edge_index.numel() == 0:
        num_src = num_dst = 0
    else:
        if int(edge_index.min()) < 0:
            _raise_negative_index(edge_index)
        num_src = num_dst = int(edge_index.max()) + 1
    if num_src < 0 or num_dst < 0:
        raise ValueError(f"num_nodes must be non-negative, got ({num_src}, {num_dst})")
    return num_src, num_dst


def raise_deferred_error(error: Tensor, what: str = "edge_index") -> None:
    """Raises the IndexError that deferred builds (``Graph(..., deferred_error=error)``) recorded in
    ``error``, if any (reads it: a host synchronisation), naming the edge and the row of ``what``."""
    code = int(error.item())
    if code >= 0:
        raise IndexError(f"{what}[{code & 1}] at edge {code >> 1} is out of range (found by a "
                         f"deferred graph build)")


class Graph:
    """An adjacency prepared for iognn's kernels.

    Args:
        edge_index: ``[2, E]`` int32/int64 tensor (source row first), on the CPU or a GPU.
        num_nodes: ``N`` for a square graph, ``(num_src, num_dst)`` for a bipartite one, or None
            to infer ``N`` from the largest index (a device sync on GPU inputs).
        self_loops: a :class:`SelfLoops` mode (default KEEP).
        index_dtype: force ``torch.int64`` indices; by default int32 is used whenever every count
            fits, int64 otherwise.
        deferred_error: build without waiting for the validation (no host synchronisation, so the
            build can run inside a captured CUDA graph): an int64 tensor of one entry on
            ``edge_index``'s device, holding -1. A bad index is not raised; on a GPU its code
            (``2 * edge + row``, the smallest of all such builds) is stored there, and the graph is
            left empty. Check the word with :func:`raise_deferred_error` where the host waits
            anyway. Needs explicit ``num_nodes`` and ``self_loops='keep'`` (the sizes must not
            depend on the data); ``max_degree_hints`` are then ``degree_bounds``. On the CPU the
            build raises at once, as without it.
        degree_bounds: with ``deferred_error``, upper bounds the caller knows on the longest in- and
            out-row (``-1``: unknown, the default), which become the ops' hints (a sampled block's
            in-degree is at most its fan-out: its ops then run without a heavy-row plan).
        reorder: None, or a node ordering for the tile layout's row windows (``docs/reorder.md``):
            ``"rcm"``, ``"degree"``, ``"bfs"``, ``"metis"`` (``iognn.reorder.order`` on the host,
            once, at the build) or ``"auto"`` (the order among the identity and those whose tile
            fill is highest; the identity unless one beats its fill by more than 2%). Only the
            windows change: the CSR arrays, ``eid`` and every op's results stay as without it.
            Not for bipartite graphs, deferred builds or inside ``torch.compile``.
        tile_policy: whether propagate may run on the tile layout (``ops/propagate_tiles.py``):
            ``"csr"`` never, ``"auto"`` where it can and a one-time timing finds it faster,
            ``"tiles"`` wherever it can. Default: ``"auto"`` with ``reorder``, else ``"csr"``
            (a graph built for one step would pay the layout and the timing every step). Can be
            set on a built graph; the choices made are in ``stats["tile_plans"]``.

    Attributes:
        max_degree_hints: ``(max in-degree, max out-degree)`` as the build measured them (no extra
            pass, no sync), or ``(-1, -1)`` for a Graph built inside ``torch.compile``, or a
            deferred build's ``degree_bounds``. The CUDA
            ops take them as hints: on a graph without heavy rows each op is one kernel launch.
        row_order: the ``reorder`` permutation ``perm[new] = old`` in the graph's index dtype and
            on its device (row ``16 w + r`` of the new order is row r of tile window w), or None
            (identity). ``stats`` then also holds ``"reorder"`` (the method, ``"auto"`` resolved,
            None when it kept the identity), ``"reorder_seconds"`` and, for ``"auto"``,
            ``"reorder_fills"`` (the fill of each order tried).
    """

    def __init__(self, edge_index: Tensor, num_nodes: Size = None,
                 self_loops: Union[SelfLoops, int, str] = SelfLoops.KEEP,
                 index_dtype: Optional[torch.dtype] = None, *,
                 deferred_error: Optional[Tensor] = None,
                 degree_bounds: Tuple[int, int] = (-1, -1),
                 reorder: Optional[str] = None, tile_policy: Optional[str] = None):
        from .adjacency import plain_edge_index  # EdgeIndex subclasses become plain tensors
        edge_index = plain_edge_index(edge_index)
        _check_edge_index(edge_index)
        self.self_loops = _parse_self_loops(self_loops)
        if index_dtype not in (None, torch.int32, torch.int64):
            raise TypeError(f"index_dtype must be None, torch.int32 or torch.int64, got {index_dtype}")
        if deferred_error is not None:
            if num_nodes is None:
                raise ValueError("Graph: a deferred build needs num_nodes (inferring them from "
                                 "the indices waits for the device)")
            if self.self_loops != SelfLoops.KEEP:
                raise ValueError(f"Graph: a deferred build keeps self-loops as given "
                                 f"(self_loops='keep'), got {self.self_loops.name.lower()!r}")
        elif degree_bounds != (-1, -1):
            raise ValueError("Graph: degree_bounds are for deferred builds (a build that waits "
                             "measures the longest rows itself)")
        if (not isinstance(degree_bounds, tuple) or len(degree_bounds) != 2
                or any(not isinstance(b, int) or b < -1 for b in degree_bounds)):
            raise ValueError(f"Graph: degree_bounds must be two ints >= -1, got {degree_bounds!r}")
        num_src, num_dst = _resolve_size(edge_index, num_nodes)
        _check_reorder(reorder, deferred_error is not None, num_src != num_dst)
        compiling = torch.compiler.is_compiling()
        force_int64 = index_dtype == torch.int64
        if deferred_error is not None:
            built = torch.ops.iognn.build_graph_deferred(edge_index, num_src, num_dst,
                                                         deferred_error, force_int64)
        else:
            built = (build_graph_symint if compiling else torch.ops.iognn.build_graph)(
                edge_index, num_src, num_dst, int(self.self_loops), force_int64)
        (self.rowptr, self.col, self.eid, self.colptr, self.row, self.csc2csr, self.edge_map,
         max_degrees) = built
        # The longest in / out rows, measured by the build (a host tensor: reading it costs no
        # sync). The CUDA ops take them as hints: a graph without heavy rows runs one launch per
        # op. A graph built while compiling or deferred does not know them (-1: the ops then plan
        # for any row).
        self.max_degree_hints: Tuple[int, int] = (
            degree_bounds if deferred_error is not None
            else (-1, -1) if compiling else tuple(max_degrees.tolist()))
        self._hints_exact = deferred_error is None
        self.num_src_nodes = num_src
        self.num_dst_nodes = num_dst
        self.num_input_edges = edge_index.size(1)
        self.num_loops = (0 if self.self_loops == SelfLoops.KEEP else min(num_src, num_dst))
        self._stats: Optional[dict] = None
        self._tiles: dict = {}  # transposed -> TileLayout, built on request (tile_layout)
        self._csr_dst: Optional[Tensor] = None
        self._edge_index: Optional[Tensor] = None
        self.row_order: Optional[Tensor] = None
        self._reorder_stats = {} if reorder is None else _reorder_graph(self, reorder)
        self.tile_policy = tile_policy or ("csr" if reorder is None else "auto")

    @classmethod
    def from_adjacency(cls, adj, num_nodes: Size = None,
                       self_loops: Union[SelfLoops, int, str] = SelfLoops.KEEP,
                       index_dtype: Optional[torch.dtype] = None) -> Tuple["Graph", Optional[Tensor]]:
        """Builds a Graph from any adjacency PyG accepts (see ``iognn.adjacency``).

        Returns ``(graph, values)``: ``values`` are the edge values a sparse adjacency carries (in
        input edge order), or None.
        """
        from .adjacency import to_edge_index
        edge_index, size, values = to_edge_index(adj)
        if num_nodes is None:
            num_nodes = size
        return cls(edge_index, num_nodes, self_loops, index_dtype), values

    # ---- sizes and layout -------------------------------------------------------------------
    @property
    def num_edges(self) -> int:
        """Number of (augmented) edges E'."""
        return self.col.size(0)

    @property
    def num_nodes(self) -> int:
        """Number of nodes of a square graph (for a bipartite graph: the number of destinations)."""
        return self.num_dst_nodes

    @property
    def size(self) -> Tuple[int, int]:
        return (self.num_src_nodes, self.num_dst_nodes)

    @property
    def is_bipartite(self) -> bool:
        return self.num_src_nodes != self.num_dst_nodes

    @property
    def device(self) -> torch.device:
        return self.rowptr.device

    @property
    def index_dtype(self) -> torch.dtype:
        return self.rowptr.dtype

    def degree(self, direction: str = "in") -> Tensor:
        """In-degree of every destination (``"in"``) or out-degree of every source (``"out"``)."""
        if direction == "in":
            return self.rowptr.diff()
        if direction == "out":
            return self.colptr.diff()
        raise ValueError(f"direction must be 'in' or 'out', got {direction!r}")

    @property
    def csr_dst(self) -> Tensor:
        """Destination of every CSR position (``[E']``), built on first use."""
        if self._csr_dst is None:
            self._csr_dst = torch.repeat_interleave(
                torch.arange(self.num_dst_nodes, device=self.device, dtype=self.index_dtype),
                self.degree("in"), output_size=self.num_edges)
        return self._csr_dst

    @property
    def edge_index(self) -> Tensor:
        """The augmented ``[2, E']`` int64 edge_index in PyG's order (what PyG returns with α)."""
        if self._edge_index is None:
            ei = torch.empty(2, self.num_edges, dtype=torch.int64, device=self.device)
            eid = self.eid.long()
            ei[0, eid] = self.col.long()
            ei[1, eid] = self.csr_dst.long()
            self._edge_index = ei
        return self._edge_index

    # ---- degree statistics ------------------------------------------------------------------
    @property
    def stats(self) -> dict:
        """Degree statistics (computed once, from host copies of the two offset vectors), the
        tile layout's size and fill (``"tiles"``, ``"tile_fill"``: :func:`tile_layout`, built on
        the first call of ``stats``) and, for a ``reorder`` graph, the reordering's entries."""
        from .ops._tile_choice import all_plans
        tiles = tile_layout(self)
        return {**self._degree_stats(), "tiles": tiles.num_tiles, "tile_fill": tiles.fill,
                **self._reorder_stats, "tile_plans": all_plans(self)}

    @property
    def tile_policy(self) -> str:
        """``"csr"``, ``"auto"`` or ``"tiles"`` (see the class arguments)."""
        return self._tile_policy

    @tile_policy.setter
    def tile_policy(self, value: str) -> None:
        from .ops._tile_choice import POLICIES
        if value not in POLICIES:
            raise ValueError(f"tile_policy must be one of {POLICIES}, got {value!r}")
        self._tile_policy = value

    def _degree_stats(self) -> dict:
        """The degree part of :attr:`stats` (what the ops' fallbacks read: no tile build)."""
        if self._stats is None:
            v = torch.ops.iognn.graph_stats(self.rowptr.cpu(), self.colptr.cpu()).tolist()
            self._stats = {
                "max_in_degree": int(v[0]), "max_out_degree": int(v[1]),
                "mean_in_degree": v[2], "p50_in_degree": int(v[3]), "p90_in_degree": int(v[4]),
                "p99_in_degree": int(v[5]), "isolated_dst": int(v[6]),
                "in_degree_log2_buckets": [int(b) for b in v[7:]],
                "symmetric": self._is_symmetric(),
            }
        return self._stats

    def _is_symmetric(self) -> bool:
        return (not self.is_bipartite and torch.equal(self.rowptr, self.colptr)
                and torch.equal(self.col, self.row))

    @property
    def is_symmetric(self) -> bool:
        """True when the edge multiset equals its transpose (undirected graphs)."""
        return self._degree_stats()["symmetric"]

    @property
    def max_in_degree(self) -> int:
        known = self.max_degree_hints[0]
        return known if known >= 0 and self._hints_exact else self._degree_stats()["max_in_degree"]

    # ---- edge values ------------------------------------------------------------------------
    def augment_edge_values(self, values: Optional[Tensor], fill_value=1.0) -> Optional[Tensor]:
        """Input-ordered edge values ``[E, ...]`` -> augmented-order values ``[E', ...]``.

        Kept edges carry their own value. Added self-loops get ``fill_value``: a number or tensor, or
        (GAT's rule) one of ``'add' | 'sum' | 'mean' | 'min' | 'max' | 'mul'``, the reduction of the
        values of the node's incoming non-loop edges (for a node without any: 0, or 1 for
        ``'mul'``, as PyG's scatter gives). With
        ``SelfLoops.ADD_REMAINING`` a node's existing loop keeps its value.
        """
        if values is None or self.self_loops == SelfLoops.KEEP:
            return values
        if values.size(0) != self.num_input_edges:
            raise ValueError(f"edge values have {values.size(0)} rows but the graph was built from "
                             f"{self.num_input_edges} edges")
        from .self_loops import augment_edge_values
        return augment_edge_values(self, values, fill_value)

    def csr_edge_values(self, values: Optional[Tensor]) -> Optional[Tensor]:
        """Augmented-order edge values -> CSR order (what the ops read)."""
        if values is None:
            return None
        if values.size(0) != self.num_edges:
            raise ValueError(f"edge values have {values.size(0)} rows, expected {self.num_edges}")
        return values.index_select(0, self.eid)

    # ---- device movement --------------------------------------------------------------------
    def to(self, device: Union[str, torch.device]) -> "Graph":
        """A copy of this graph on `device` (self when it is already there)."""
        device = torch.device(device)
        if device == self.device:
            return self
        g = object.__new__(Graph)
        g.__dict__.update(self.__dict__)
        for name in ("rowptr", "col", "eid", "colptr", "row", "csc2csr", "edge_map"):
            setattr(g, name, getattr(self, name).to(device))
        g._csr_dst = None if self._csr_dst is None else self._csr_dst.to(device)
        g._edge_index = None if self._edge_index is None else self._edge_index.to(device)
        g.row_order = None if self.row_order is None else self.row_order.to(device)
        # Built layouts travel with the graph (a copy costs less than a build).
        g._tiles = {transposed: layout.to(device) for transposed, layout in self._tiles.items()}
        # The tile path's timed choices and cached values belong to the device they ran on.
        from .ops._tile_choice import STORES
        for name in STORES:
            g.__dict__.pop(name, None)
        return g

    def cpu(self) -> "Graph":
        return self.to("cpu")

    def cuda(self, device=None) -> "Graph":
        return self.to(torch.device("cuda", device) if isinstance(device, int) else device or "cuda")

    def __repr__(self) -> str:
        size = (f"num_nodes={self.num_dst_nodes}" if not self.is_bipartite else
                f"num_src_nodes={self.num_src_nodes}, num_dst_nodes={self.num_dst_nodes}")
        loops = "" if self.self_loops == SelfLoops.KEEP else f", self_loops={self.self_loops.name}"
        return (f"Graph({size}, num_edges={self.num_edges}{loops}, "
                f"index_dtype={str(self.index_dtype).replace('torch.', '')}, device={self.device})")
