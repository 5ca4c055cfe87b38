"""The adjacency handling every iognn.nn layer shares: node counts, the Graph of one forward (built
once per adjacency tensor and cached), sparse-matrix inputs and the graph of edge-level messages.

Cache contract (``cached_graph``): the Graphs built from an adjacency object live on that object
(attribute ``_iognn_graphs``), keyed by what the layer derives from it (self-loop mode, ...),
each with the adjacency's version counter at build time; an entry is used while the object has
the node counts asked for and is unmodified (an in-place change bumps ``_version`` and the next forward rebuilds). Entries die
with their adjacency, are neither copied nor pickled with it, and at most ``MAX_ENTRIES`` are kept
process-wide (least recently used first out).

Under ``torch.compile`` the same entries are read: TorchDynamo lifts a cached Graph's tensors as
inputs of the compiled graph, guarded by the presence of the entry (not by the adjacency's
identity), so one compiled graph serves every adjacency that has its Graph and another one builds
and stores the Graph of a new adjacency. A compiled call cannot read the version counter: an
adjacency modified in place between compiled calls keeps its old Graph until an eager call or
``forget_graphs(adj)``.
"""
from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import Callable, NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from ..adjacency import (_edge_index_class, _sparse_tensor_class, plain_edge_index,
                         to_edge_index)
from ..graph import Graph, SelfLoops

_SPARSE_TENSOR = _sparse_tensor_class()  # torch_sparse.SparseTensor, or None when not installed
_EDGE_INDEX = _edge_index_class()  # torch_geometric.EdgeIndex


def message_sizes(adj, x_src: Optional[Tensor], x_dst: Optional[Tensor],
                  size: Optional[Tuple[Optional[int], Optional[int]]], node_dim: int = -2,
                  adj_size: Optional[list] = None) -> Tuple[int, int]:
    """(num_src, num_dst) exactly as PyG's MessagePassing infers them.

    The adjacency's own sizes come first: an EdgeIndex's ``sparse_size()`` (PyG then ignores
    ``size``), a sparse matrix's shape (``[num_dst, num_src]``) or a prebuilt Graph's sizes;
    otherwise ``size``. A side still unknown takes the node count of its feature tensor along
    ``node_dim``; a feature tensor whose count contradicts a known size is a ValueError (PyG's
    ``_set_size``). Finally a missing side equals the other one (``size_i = size[1] or size[0]``).
    Node counts are read from tensors, never from the indices, so torch.compile keeps them
    symbolic. ``adj_size`` replaces the adjacency's own sizes (an EdgeIndex grown by self-loops).
    """
    if adj_size is not None:
        known = list(adj_size)
    elif isinstance(adj, Graph):
        known = [adj.num_src_nodes, adj.num_dst_nodes]
    elif is_edge_index(adj):
        known = [adj.num_rows, adj.num_cols]
    elif is_sparse(adj):
        known = [adj.size(1), adj.size(0)]
    elif size is not None:
        if not isinstance(size, (tuple, list)) or len(size) != 2:
            raise ValueError(f"size must be a pair (num_src, num_dst), got {size!r}")
        known = list(size)
    else:
        known = [None, None]
    for side, x in enumerate((x_src, x_dst)):
        if x is None:
            continue
        count = x.size(node_dim)
        if known[side] is None:
            known[side] = count
        elif known[side] != count:
            raise ValueError(f"Encountered tensor with size {count} in dimension {node_dim}, "
                             f"but expected size {known[side]}.")
    num_src = known[0] if known[0] is not None else known[1]
    num_dst = known[1] if known[1] is not None else known[0]
    return num_src, num_dst


def is_edge_index(adj) -> bool:
    """Whether adj is a torch_geometric.EdgeIndex."""
    return _EDGE_INDEX is not None and isinstance(adj, _EDGE_INDEX)


# ---- the cache ---------------------------------------------------------------------------------
MAX_ENTRIES = 64
_SLOT = "_iognn_graphs"


class GraphSlot:
    """The Graphs (and Graph-derived values) cached on one object, by key: ``{key: (version,
    value)}``. A copy of the object starts empty; a pickled one carries an empty OrderedDict in
    its place (a type ``torch.load(weights_only=True)`` accepts, with or without iognn)."""

    def __init__(self):
        self.entries = {}

    def __reduce__(self):
        return (OrderedDict, ())

    def __deepcopy__(self, memo):
        return GraphSlot()


# Process-wide recency of the eager entries: (id(slot), key) -> weak reference to the slot.
_RECENT: "OrderedDict[tuple, weakref.ref]" = OrderedDict()
# While iognn.CapturedStep captures a CUDA graph: every cached value the capture reads, so that the
# step can keep it alive for as long as it replays (an eviction would leave the graph pointing at
# freed memory).
capture_pins: Optional[list] = None


def _version(adj) -> int:
    """Version counter(s) of the tensors that define adj's structure."""
    if isinstance(adj, Graph):
        return 0  # a Graph is immutable
    if isinstance(adj, Tensor):  # an EdgeIndex's wrapper and data have counters of their own
        data = plain_edge_index(adj)
        return adj._version + (data._version if data is not adj else 0)
    storage = adj.storage  # torch_sparse.SparseTensor
    return sum(t._version for t in (storage._row, storage._rowptr, storage._col) if t is not None)


def _touch(slot: GraphSlot, key: tuple) -> None:
    """Marks an entry as the most recent; evicts the least recent ones beyond MAX_ENTRIES."""
    handle = (id(slot), key)
    _RECENT[handle] = weakref.ref(slot)
    _RECENT.move_to_end(handle)
    while len(_RECENT) > MAX_ENTRIES:
        (_, old_key), ref = _RECENT.popitem(last=False)
        owner = ref()
        if owner is not None:
            owner.entries.pop(old_key, None)


def cached(owner, key: tuple, compute: Callable[[], object], versioned: bool = True,
           fits: Optional[Callable[[object], bool]] = None):
    """``compute()``'s value for ``owner`` and ``key``, stored on ``owner`` and reused while
    ``owner`` is unmodified (``versioned``: its version counter is checked in eager calls) and
    ``fits(value)`` holds. Node counts belong in ``fits``, not in ``key``: under torch.compile they
    are symbolic, and a key that holds them would specialise every compiled graph to them."""
    compiling = torch.compiler.is_compiling()
    slot = getattr(owner, _SLOT, None)
    if not isinstance(slot, GraphSlot):
        slot = GraphSlot()
        setattr(owner, _SLOT, slot)
    version = -1 if compiling or not versioned else _version(owner)
    entry = slot.entries.get(key)
    if entry is not None and (compiling or entry[0] == version) and (
            fits is None or fits(entry[1])):
        value = entry[1]
    else:
        value = compute()
        slot.entries[key] = (version, value)
    if not compiling:
        _touch(slot, key)
        if capture_pins is not None:
            capture_pins.append(value)
    return value


def cached_graph(adj, key: tuple, build: Callable[[], Graph], size=None) -> Graph:
    """``build()``'s Graph for ``adj``, reused while ``adj`` is the same, unmodified object (and,
    with ``size``, while the Graph has those ``(num_src, num_dst)``)."""
    fits = None if size is None else (lambda graph: graph.size == tuple(size))
    return cached(adj, key, build, fits=fits)


def cached_on(graph: Graph, key: tuple, compute: Callable[[], object]):
    """Something derived from ``graph`` alone (GCN's unweighted normalisation, the MessageGraph),
    computed once per Graph object."""
    return cached(graph, key, compute, versioned=False)


def csr_weights(graph: Graph, weight: Optional[Tensor], dtype: torch.dtype) -> Optional[Tensor]:
    """Edge weights in the graph's augmented order -> its CSR order in ``dtype`` (what propagate
    reads), computed once per weight tensor when it needs no gradient (GCN's cached
    normalisation, a fixed ``edge_weight``): a cached normalisation then costs no kernel."""
    if weight is None:
        return None
    if weight.requires_grad or torch.compiler.is_compiling():
        return graph.csr_edge_values(weight.to(dtype))
    owner = weakref.ref(graph)
    entry = cached(weight, ("csr", dtype),
                   lambda: (owner, graph.csr_edge_values(weight.to(dtype))),
                   fits=lambda value: value[0]() is graph)
    return entry[1]


def forget_graphs(adj) -> None:
    """Drops the Graphs cached on ``adj`` (needed only after modifying it in place between
    compiled calls; eager calls notice such changes themselves)."""
    slot = getattr(adj, _SLOT, None)
    if isinstance(slot, GraphSlot):
        slot.entries.clear()


# ---- adjacency kinds ---------------------------------------------------------------------------
class SparseInput(NamedTuple):
    """A sparse adjacency matrix (transposed, ``adj_t[target, source]``) taken apart."""
    matrix: object                   # the input: torch.sparse tensor or torch_sparse.SparseTensor
    edge_index: Tensor               # [2, nnz] (source, target) in the matrix's storage order
    num_src: int
    num_dst: int
    values: Optional[Tensor]         # [nnz] or [nnz, ...] in storage order, or None
    is_torch_sparse: bool            # torch.sparse (else torch_sparse.SparseTensor)
    coalesced: bool                  # the parts are those of matrix.coalesce()


def is_sparse(adj) -> bool:
    return (isinstance(adj, Tensor) and adj.layout != torch.strided) or (
        _SPARSE_TENSOR is not None and isinstance(adj, _SPARSE_TENSOR))


def sparse_input(adj, coalesce: bool = False) -> SparseInput:
    """Parts of a sparse adjacency. ``coalesce``: sum duplicate entries of an uncoalesced COO
    matrix first (what PyG's fused path does by converting it to CSR)."""
    parts = adj
    if coalesce and isinstance(adj, Tensor) and adj.layout == torch.sparse_coo \
            and not adj.is_coalesced():
        parts = adj.coalesce()
    edge_index, (num_src, num_dst), values = to_edge_index(parts)
    return SparseInput(adj, edge_index, num_src, num_dst, values, isinstance(adj, Tensor),
                       parts is not adj)


def check_adjacency(layer: str, adj) -> None:
    if isinstance(adj, (Graph, Tensor)) or is_sparse(adj):
        return
    raise TypeError(f"{layer}: edge_index must be a [2, num_edges] index tensor, a "
                    f"torch_geometric.EdgeIndex, a sparse adjacency matrix (torch.sparse or "
                    f"torch_sparse.SparseTensor) or an iognn.Graph, got {type(adj).__name__}")


def edge_graph(layer: str, adj, num_src, num_dst, loops: SelfLoops = SelfLoops.KEEP) -> Graph:
    """The Graph of an index adjacency (``[2, E]`` tensor or ``EdgeIndex``) or of a prebuilt
    ``iognn.Graph``, with the layer's self-loop rule.

    A prebuilt Graph is used as it is when it was built with the layer's self-loop mode; one built
    with ``'keep'`` gets the layer's loops added (cached on it; edge values stay in its input edge
    order); any other mode is refused.
    """
    check_adjacency(layer, adj)
    if isinstance(adj, Graph):
        if adj.self_loops == loops:
            return adj
        if adj.self_loops != SelfLoops.KEEP:
            raise ValueError(f"{layer} adds self-loops as '{loops.name.lower()}' but the given "
                             f"iognn.Graph was built with self_loops="
                             f"'{adj.self_loops.name.lower()}'; build it with 'keep' or "
                             f"'{loops.name.lower()}'")
        return cached_graph(adj, ("loops", int(loops)), lambda: _with_loops(adj, loops))
    if is_sparse(adj):
        raise TypeError(f"{layer}: expected an index adjacency, got a sparse matrix")
    return cached_graph(adj, ("edges", int(loops)), lambda: Graph(adj, (num_src, num_dst), loops),
                        size=(num_src, num_dst))


def _with_loops(graph: Graph, loops: SelfLoops) -> Graph:
    """``graph`` with a layer's self-loops added, keeping its row windows and tile policy (the
    loops do not change which nodes a good window ordering groups)."""
    out = Graph(graph.edge_index, graph.size, loops)
    out.row_order, out.tile_policy = graph.row_order, graph.tile_policy
    return out


def sparse_graph(sparse: SparseInput, loops: SelfLoops = SelfLoops.KEEP) -> Graph:
    """The Graph of a sparse matrix's entries (in storage order, after coalescing when
    ``sparse_input`` did) with a self-loop mode."""
    return cached_graph(sparse.matrix, ("sparse", int(loops), sparse.coalesced),
                        lambda: Graph(sparse.edge_index, (sparse.num_src, sparse.num_dst), loops))


class Adjacency(NamedTuple):
    """What a layer's forward reads: the Graph, the edge values a sparse input carries (in the
    graph's input edge order, or None) and the sparse input itself (or None)."""
    graph: Graph
    values: Optional[Tensor]
    sparse: Optional[SparseInput]


def weighted_adjacency(layer: str, adj, num_src, num_dst, coalesce: bool, use_values: bool
                       ) -> Adjacency:
    """The adjacency of a neighbourhood-aggregating layer (SAGEConv, GINConv, GraphConv,
    un-normalised GCNConv) with PyG's sparse-input semantics, which the layer selects:
    ``coalesce`` sums duplicate entries of an uncoalesced COO matrix first (PyG's fused path
    converts it to CSR); ``use_values`` makes a sparse matrix's values the edge weights (else they
    are dropped). Index inputs carry no values."""
    check_adjacency(layer, adj)
    if not is_sparse(adj):
        return Adjacency(edge_graph(layer, adj, num_src, num_dst), None, None)
    sparse = sparse_input(adj, coalesce=coalesce)
    values = sparse.values if use_values else None
    if values is not None and values.dim() != 1:
        raise ValueError(f"{layer}: a sparse adjacency must have one value per entry, got values "
                         f"of shape {list(values.shape)}")
    return Adjacency(sparse_graph(sparse), values, sparse)


def structural_adjacency(layer: str, adj, num_src, num_dst, add_loops: bool,
                         edge_attr: Optional[Tensor] = None) -> Adjacency:
    """PyG's message-level semantics (GATConv, GATv2Conv, TransformerConv, GINEConv, PNAConv): a
    sparse matrix gives its entries (values only as edge features, when they are 2-D).

    With ``add_loops`` (GAT's ``remove_self_loops`` + ``add_self_loops``): an index input uses
    SelfLoops.REPLACE; a torch.sparse matrix is coalesced by PyG when the loops are added, so its
    unique non-loop entries are taken in (target, source) order - the graph's CSR order - before
    the loops; a SparseTensor gets ``set_diag`` (REPLACE over its entries). Edge features (stored
    as the matrix's values or passed as ``edge_attr``) cannot follow that coalescing: a sparse
    matrix with edge features and loops raises NotImplementedError (PyG fails there too).
    """
    check_adjacency(layer, adj)
    loops = SelfLoops.REPLACE if add_loops else SelfLoops.KEEP
    if not is_sparse(adj):
        return Adjacency(edge_graph(layer, adj, num_src, num_dst, loops), None, None)
    sparse = sparse_input(adj)
    values = sparse.values if sparse.values is not None and sparse.values.dim() > 1 else None
    if not add_loops:
        return Adjacency(sparse_graph(sparse), values, sparse)
    if values is not None or edge_attr is not None:
        raise NotImplementedError(f"{layer}: edge features together with a sparse adjacency and "
                                  f"add_self_loops=True are not supported; pass them as "
                                  f"edge_attr with a [2, E] edge_index")
    if not sparse.is_torch_sparse:
        return Adjacency(sparse_graph(sparse, loops), None, sparse)
    return Adjacency(cached_graph(adj, ("coalesced", int(loops)),
                                  lambda: _coalesced_graph(sparse, loops)), None, sparse)


def _coalesced_graph(sparse: SparseInput, loops: SelfLoops) -> Graph:
    src, dst = sparse.edge_index.long()
    key = dst * sparse.num_src + src
    key = torch.unique(key[src != dst])  # sorted: (target, source) order
    edge_index = torch.stack([key % max(sparse.num_src, 1), key // max(sparse.num_src, 1)])
    return Graph(edge_index, (sparse.num_src, sparse.num_dst), loops)


def sparse_like(sparse: SparseInput, graph: Graph, values: Tensor, in_csr_order: bool):
    """The sparse matrix PyG returns with attention weights: ``values`` on the input matrix's
    entries (``in_csr_order=False``, values in storage order) or on the graph's CSR entries
    (loops added: PyG's coalesced matrix), in the input's layout."""
    size = (sparse.num_dst, sparse.num_src) + tuple(values.shape[1:])
    if not sparse.is_torch_sparse:
        if not in_csr_order:
            return sparse.matrix.set_value(values, layout="coo")
        return _SPARSE_TENSOR(row=graph.csr_dst.long(), col=graph.col.long(), value=values,
                  sparse_sizes=(sparse.num_dst, sparse.num_src))
    m = sparse.matrix
    if not in_csr_order:
        if m.layout == torch.sparse_coo:
            return torch.sparse_coo_tensor(m._indices(), values, size).coalesce()
        if m.layout == torch.sparse_csr:
            return torch.sparse_csr_tensor(m.crow_indices(), m.col_indices(), values, size)
        return torch.sparse_csc_tensor(m.ccol_indices(), m.row_indices(), values, size)
    if m.layout == torch.sparse_csr:
        return torch.sparse_csr_tensor(graph.rowptr.long(), graph.col.long(), values, size)
    indices = torch.stack([graph.csr_dst.long(), graph.col.long()])
    return torch.sparse_coo_tensor(indices, values, size, is_coalesced=True)


# ---- edge-level messages ---------------------------------------------------------------------
class MessageGraph:
    """The graph whose sources are the edge-level messages of ``graph``, in its CSR order.

    Destination i receives messages ``rowptr[i] .. rowptr[i+1] - 1`` (message p belongs to the edge
    at CSR position p): ``col`` is the identity and every message has exactly one out-edge, so
    nothing is sorted. Reductions of per-edge messages (GINEConv, PNAConv, weighted min/max) run on
    it with the same segment ops as node-level aggregation.
    """

    def __init__(self, graph: Graph):
        num_edges = graph.num_edges
        opts = dict(dtype=graph.index_dtype, device=graph.device)
        positions = torch.arange(num_edges, **opts)
        self.rowptr = graph.rowptr
        self.col = self.eid = self.csc2csr = positions
        self.colptr = torch.arange(num_edges + 1, **opts)
        self.row = self.csr_dst = graph.csr_dst
        self.num_src_nodes = num_edges
        self.num_dst_nodes = graph.num_dst_nodes
        self.num_edges = num_edges
        self.device = graph.device
        self.index_dtype = graph.index_dtype
        # Destinations keep their rows; every message has one out-edge.
        self.max_degree_hints = (graph.max_degree_hints[0], min(num_edges, 1))

    def degree(self, direction: str = "in") -> Tensor:
        if direction != "in":
            raise ValueError("a MessageGraph only has in-degrees")
        return self.rowptr.diff()


def messages_graph(graph: Graph) -> MessageGraph:
    """The MessageGraph of ``graph`` (built once per Graph outside torch.compile)."""
    return cached_on(graph, ("messages",), lambda: MessageGraph(graph))
