"""Packing a batch of small typed graphs into fixed-size supergraphs of block-tridiagonal tiles.

``pack_supergraphs`` orders every graph by Reverse Cuthill-McKee, then places whole graphs one
after the other into supergraphs of ``size`` (S) nodes (next fit, in batch order; a graph is never
split). A graph goes to the sparse remainder instead when it has more than S nodes or when its
bandwidth after RCM exceeds the block size ``block`` (b): every edge of a packed graph then joins
nodes at most b positions apart, so at most one block apart, and lands in one of three tiles of its
destination's block (sub-diagonal: sources in the block before, diagonal, super-diagonal: sources
in the block after). No edge is ever dropped: each is counted in a tile or kept in the remainder.
See ``docs/dense.md`` for the shapes and the arithmetic.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

from .. import reorder
from ..graph import Graph, _as_count, _check_edge_index

# Tile diagonals, in the order of the tiles' dimension 2.
DIAGONALS = ("sub", "diag", "super")


@dataclass
class PackedSupergraphs:
    """A packed batch (all tensors on one device; build with :func:`pack_supergraphs`).

    Sizes: N batch nodes, E edges, G graphs, P edge types, S nodes per supergraph, b nodes per
    block, K = S / b blocks per supergraph, Q supergraphs (``num_super``), R remainder nodes.

    Attributes:
        tiles: ``[Q, K, 3, b, b, P]`` edge counts in ``dtype`` (duplicates counted):
            ``tiles[q, k, d, r, c, t]`` counts the edges of type t into position ``k*b + r`` of
            supergraph q from position ``(k + d - 1)*b + c`` (d = 0 sub, 1 diagonal, 2 super).
            ``(dst, src, type)`` order makes a tile row ``[b * P]`` match the rows of the
            transformed features ``[slot, type]`` without a transpose; ``tiles_by_type`` is the
            ``[Q, K, 3, P, b, b]`` view.
        node_slot: int64 ``[N]``: ``q * S + position`` of each batch node, -1 for remainder nodes.
        slot_node: int64 ``[Q * S]``: the batch node in each slot, -1 for padding (its inverse).
        output_row: int64 ``[N]``: each node's row in the concatenation of the dense output
            ``[Q * S]`` and the remainder output ``[R]``.
        remainder_nodes: int64 ``[R]``: the batch nodes of the remainder graphs, ascending.
        remainder_graph: an :class:`iognn.Graph` with sources ``local * P + type`` (``R * P``)
            and destinations ``local`` (``R``): the remainder edges.
        in_type_counts: ``[N, P]`` in-edges of each node by type, in ``dtype`` (the bias term).
        dense_edge_ids / remainder_edge_ids: int64: which batch edges went where.
        graph_super: int64 ``[G]``: each graph's supergraph, -1 for a remainder graph (and for
            a graph without nodes).
        graph_bandwidth: int64 ``[G]``: each graph's bandwidth after RCM.
        num_tile_nonzeros: nonzero entries of ``tiles`` (distinct (dst, src, type) triples).
    """

    size: int
    block: int
    num_edge_types: int
    num_nodes: int
    tiles: Tensor
    node_slot: Tensor
    slot_node: Tensor
    output_row: Tensor
    remainder_nodes: Tensor
    remainder_graph: Graph
    in_type_counts: Tensor
    dense_edge_ids: Tensor
    remainder_edge_ids: Tensor
    graph_super: Tensor
    graph_bandwidth: Tensor
    num_tile_nonzeros: int

    @property
    def num_super(self) -> int:
        return self.tiles.size(0)

    @property
    def num_blocks(self) -> int:
        """K = S / b blocks per supergraph."""
        return self.size // self.block

    @property
    def num_slots(self) -> int:
        return self.num_super * self.size

    @property
    def num_graphs(self) -> int:
        return self.graph_super.numel()

    @property
    def num_dense_nodes(self) -> int:
        return self.num_nodes - self.remainder_nodes.numel()

    @property
    def device(self) -> torch.device:
        return self.tiles.device

    @property
    def node_super(self) -> Tensor:
        """``[N]`` supergraph of each node, -1 for remainder nodes."""
        return torch.where(self.node_slot >= 0, self.node_slot // self.size, -1)

    @property
    def node_position(self) -> Tensor:
        """``[N]`` position of each node in its supergraph, -1 for remainder nodes."""
        return torch.where(self.node_slot >= 0, self.node_slot % self.size, -1)

    @property
    def tiles_by_type(self) -> Tensor:
        """``[Q, K, 3, P, b, b]`` view of ``tiles``: one ``b x b`` (dst, src) tile per type."""
        return self.tiles.permute(0, 1, 2, 5, 3, 4)

    def to(self, device) -> "PackedSupergraphs":
        moved = {name: getattr(self, name).to(device) for name in _TENSOR_FIELDS}
        return PackedSupergraphs(self.size, self.block, self.num_edge_types, self.num_nodes,
                                 remainder_graph=self.remainder_graph.to(device),
                                 num_tile_nonzeros=self.num_tile_nonzeros, **moved)

    def __repr__(self) -> str:
        return (f"PackedSupergraphs(graphs={self.num_graphs}, nodes={self.num_nodes}, "
                f"types={self.num_edge_types}, size={self.size}, block={self.block}, "
                f"supergraphs={self.num_super}, dense_nodes={self.num_dense_nodes}, "
                f"dense_edges={self.dense_edge_ids.numel()}, "
                f"remainder_nodes={self.remainder_nodes.numel()}, "
                f"remainder_edges={self.remainder_edge_ids.numel()}, device={self.device})")


_TENSOR_FIELDS = ("tiles", "node_slot", "slot_node", "output_row", "remainder_nodes",
                  "in_type_counts", "dense_edge_ids", "remainder_edge_ids", "graph_super",
                  "graph_bandwidth")


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not (isinstance(value, int) or hasattr(value, "__index__")):
        raise TypeError(f"{name} must be an int, got {value!r}")
    value = int(value)
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return value


def check_supergraph_shape(size, block) -> tuple:
    """(S, b) checked: positive ints, S a multiple of b."""
    size, block = _positive_int("size", size), _positive_int("block", block)
    if size % block:
        raise ValueError(f"size (S = {size}) must be a multiple of block (b = {block})")
    return size, block


def _check_edge_type(edge_type, num_edges: int, num_edge_types: int) -> None:
    if not isinstance(edge_type, Tensor):
        raise TypeError(f"edge_type must be a Tensor, got {type(edge_type).__name__}")
    if edge_type.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"edge_type must have dtype int32 or int64, got {edge_type.dtype}")
    if edge_type.dim() != 1 or edge_type.size(0) != num_edges:
        raise ValueError(f"edge_type must have shape [num_edges={num_edges}], got "
                         f"{list(edge_type.shape)}")
    bad = (edge_type < 0) | (edge_type >= num_edge_types)
    if bool(bad.any()):
        k = int(bad.nonzero()[0])
        raise IndexError(f"edge_type[{k}] = {int(edge_type[k])} is out of range "
                         f"[0, num_edge_types={num_edge_types})")


def _batch_parts(batch, num_edge_types: int):
    """(edge_index, edge_type, ptr) of a PyG Batch / Data or an (edge_index, edge_type, ptr)
    tuple; edge_type may be absent (None) only with one edge type."""
    if isinstance(batch, (tuple, list)):
        if len(batch) != 3:
            raise ValueError("batch must be a PyG Batch or a tuple (edge_index, edge_type, ptr), "
                             f"got a sequence of {len(batch)}")
        edge_index, edge_type, ptr = batch
    else:
        edge_index = getattr(batch, "edge_index", None)
        if edge_index is None:
            raise TypeError("batch must be a PyG Batch with an edge_index or a tuple (edge_index, "
                            f"edge_type, ptr), got {type(batch).__name__}")
        edge_type = getattr(batch, "edge_type", None)
        ptr = getattr(batch, "ptr", None)
        if ptr is None:  # a single Data
            ptr = torch.tensor([0, _as_count(batch.num_nodes)])
    _check_edge_index(edge_index)
    if edge_type is None:
        if num_edge_types != 1:
            raise ValueError(f"edge_type is missing but num_edge_types = {num_edge_types}; give "
                             "the batch an edge_type (or use num_edge_types=1)")
        edge_type = torch.zeros(edge_index.size(1), dtype=torch.int64, device=edge_index.device)
    if not isinstance(ptr, Tensor) or ptr.dtype not in (torch.int32, torch.int64) or ptr.dim() != 1:
        raise TypeError(f"ptr must be a 1-D int32/int64 Tensor, got {ptr!r}")
    if ptr.numel() == 0:
        raise ValueError("ptr must have num_graphs + 1 >= 1 entries, got none")
    _check_edge_type(edge_type, edge_index.size(1), num_edge_types)
    return edge_index, edge_type, ptr


def _next_fit(sizes: list, size: int):
    """(supergraph, offset) of each graph placed one after the other into supergraphs of `size`
    nodes, a new one opened when the next graph does not fit, and the number opened. A graph
    without nodes takes no place (supergraph -1)."""
    supers, offsets = [], []
    current, fill = -1, size
    for n in sizes:
        if n == 0:
            supers.append(-1)
            offsets.append(0)
            continue
        if fill + n > size:
            current, fill = current + 1, 0
        supers.append(current)
        offsets.append(fill)
        fill += n
    return supers, offsets, current + 1


def pack_supergraphs(batch, num_edge_types: int, size: int, block: int, *,
                     num_super: Optional[int] = None,
                     dtype: torch.dtype = torch.float32) -> PackedSupergraphs:
    """Packs a batch of typed graphs into supergraphs of block-tridiagonal tiles (see module doc).

    Args:
        batch: a PyG ``Batch`` (``edge_index``, ``edge_type``, ``ptr``), a single ``Data``, or a
            tuple ``(edge_index [2, E], edge_type [E], ptr [G + 1])``. Edges must stay inside
            their graph. ``edge_type`` may be missing only when ``num_edge_types == 1``.
        num_edge_types: P; every ``edge_type`` is in ``[0, P)``.
        size: S, nodes per supergraph (a multiple of ``block``).
        block: b, nodes per tile; graphs whose bandwidth after RCM exceeds b go to the remainder.
        num_super: pad the supergraph count to this many (fixed shapes across batches, e.g. for
            CUDA graph capture); a batch that needs more raises ValueError. Default: as needed.
        dtype: dtype of ``tiles`` and ``in_type_counts`` (counts are exact integers up to 2**24
            in fp32, 2048 in fp16, 256 in bf16).
    Returns:
        A :class:`PackedSupergraphs` on the device of ``edge_index`` (the packing itself runs on
        the host).
    """
    num_edge_types = _positive_int("num_edge_types", num_edge_types)
    size, block = check_supergraph_shape(size, block)
    if not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point dtype, got {dtype}")
    edge_index, edge_type, ptr = _batch_parts(batch, num_edge_types)
    device = edge_index.device
    ei, types, ptr = edge_index.cpu().long(), edge_type.cpu().long(), ptr.cpu().long()
    num_nodes = int(ptr[-1])

    perm = reorder.rcm(ei, num_nodes, ptr)  # also checks ptr and that edges stay in their graph
    bandwidth = reorder.graph_bandwidths(ei, num_nodes, ptr, perm)
    graph_sizes = ptr.diff()
    dense_graph = (graph_sizes <= size) & (bandwidth <= block)
    graph_super, node_slot, num_super = _place(perm, ptr, dense_graph, size, num_super)

    dense_node = node_slot >= 0
    slot_node = torch.full((num_super * size,), -1, dtype=torch.int64)
    slot_node[node_slot[dense_node]] = torch.arange(num_nodes)[dense_node]
    remainder_nodes = (~dense_node).nonzero().view(-1)
    remainder_local = torch.full((num_nodes,), -1, dtype=torch.int64)
    remainder_local[remainder_nodes] = torch.arange(remainder_nodes.numel())

    dense_edge = dense_node[ei[1]]  # both endpoints are in one graph, so on one path
    tiles, num_tile_nonzeros = _tiles(node_slot, ei[:, dense_edge], types[dense_edge], num_super,
                                      size, block, num_edge_types, dtype)
    in_type_counts = torch.zeros(num_nodes * num_edge_types, dtype=dtype)
    in_type_counts.index_put_((ei[1] * num_edge_types + types,),
                              torch.ones(ei.size(1), dtype=dtype), accumulate=True)
    remainder_edge_ids = (~dense_edge).nonzero().view(-1)
    remainder = remainder_local[ei[:, remainder_edge_ids]]
    remainder_graph = Graph(torch.stack([remainder[0] * num_edge_types + types[remainder_edge_ids],
                                         remainder[1]]),
                            (remainder_nodes.numel() * num_edge_types, remainder_nodes.numel()))

    packed = PackedSupergraphs(
        size=size, block=block, num_edge_types=num_edge_types, num_nodes=num_nodes, tiles=tiles,
        node_slot=node_slot, slot_node=slot_node,
        output_row=torch.where(dense_node, node_slot, num_super * size + remainder_local),
        remainder_nodes=remainder_nodes, remainder_graph=remainder_graph,
        in_type_counts=in_type_counts.view(num_nodes, num_edge_types),
        dense_edge_ids=dense_edge.nonzero().view(-1), remainder_edge_ids=remainder_edge_ids,
        graph_super=graph_super, graph_bandwidth=bandwidth, num_tile_nonzeros=num_tile_nonzeros)
    return packed if device.type == "cpu" else packed.to(device)


def _place(perm: Tensor, ptr: Tensor, dense_graph: Tensor, size: int, num_super):
    """(graph_super [G], node_slot [N], num_super): the packed graphs placed by next fit, each
    graph's nodes in RCM order from its first slot; remainder nodes get slot -1."""
    num_graphs, graph_sizes = ptr.numel() - 1, ptr.diff()
    supers, offsets, used = _next_fit(graph_sizes[dense_graph].tolist(), size)
    num_super = used if num_super is None else _as_count(num_super)
    if num_super < used:
        raise ValueError(f"num_super = {num_super} supergraphs are too few: this batch needs "
                         f"{used} of size {size}")
    graph_super = torch.full((num_graphs,), -1, dtype=torch.int64)
    graph_super[dense_graph] = torch.tensor(supers, dtype=torch.int64)
    graph_start = torch.zeros(num_graphs, dtype=torch.int64)
    graph_start[dense_graph] = torch.tensor(offsets, dtype=torch.int64)
    graph_start += graph_super.clamp(min=0) * size
    node_graph = torch.repeat_interleave(torch.arange(num_graphs), graph_sizes)
    rank_in_graph = reorder.inverse_permutation(perm) - ptr[node_graph]
    node_slot = torch.where(dense_graph[node_graph], graph_start[node_graph] + rank_in_graph, -1)
    return graph_super, node_slot, num_super


def _tiles(node_slot: Tensor, edge_index: Tensor, types: Tensor, num_super: int, size: int,
           block: int, num_types: int, dtype: torch.dtype):
    """(tiles [Q, K, 3, b, b, P], distinct nonzeros) of the packed edges. A supergraph is K
    consecutive blocks of the slot range, so an edge's diagonal is the difference of the global
    blocks of its endpoints."""
    src_slot, dst_slot = node_slot[edge_index[0]], node_slot[edge_index[1]]
    diagonal = src_slot // block - dst_slot // block + 1
    if diagonal.numel() and not bool(((diagonal >= 0) & (diagonal <= 2)).all()):
        raise RuntimeError("pack_supergraphs: an edge of a packed graph spans more than one block")
    flat = (((dst_slot // block * 3 + diagonal) * block + dst_slot % block) * block
            + src_slot % block) * num_types + types
    shape = (num_super, size // block, 3, block, block, num_types)
    tiles = torch.zeros(shape, dtype=dtype)
    tiles.view(-1).index_put_((flat,), torch.ones(flat.numel(), dtype=dtype), accumulate=True)
    nonzeros = int((flat.sort().values.diff() != 0).sum()) + 1 if flat.numel() else 0
    return tiles, nonzeros
