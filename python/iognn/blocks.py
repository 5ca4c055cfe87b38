"""Per-layer blocks of a sampled mini-batch.

A neighbour sampler (:class:`iognn.sampler.NeighborSampler`, PyG's ``NeighborLoader``) returns
its batch in hop order: the seeds, then the nodes first seen at hop 1, 2, ... L
(``num_sampled_nodes``, L + 1 entries), and the edges of hop 0, 1, ... L - 1
(``num_sampled_edges``), each hop's edges pointing into the nodes found one hop earlier. So the
``l``-th of L message-passing layers (``l = 0`` first) only needs a prefix of the batch: messages
flow from the nodes of hops ``0 .. L - l`` (its sources) to those of hops ``0 .. L - l - 1`` (its
destinations, a prefix of the sources) along the edges of hops ``0 .. L - l - 1`` (a prefix of
``edge_index``). That bipartite prefix is the layer's *block*: a layer computes outputs for its
destinations only, the next layer's inputs; the last layer's are the seeds'.

:func:`block_sizes` gives the blocks' ``(num_src, num_dst, num_edges)``; a layer that takes
bipartite input (``SAGEConv``, ``GATConv``, ... of PyG or ``iognn.nn``) runs one as
``conv((x, x[:num_dst]), edge_index[:, :num_edges], size=(num_src, num_dst))``.
:func:`block_graphs` builds the blocks' :class:`iognn.Graph` objects once per batch (a build per
block, each reading the sizes the sampler already knows), so that ``iognn.nn`` layers given them
build nothing in their forward pass: on a GPU the forward then has no host synchronisation.
"""
from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence, Union

import torch
from torch import Tensor

from .graph import Graph, SelfLoops

__all__ = ["BlockSize", "block_sizes", "block_graphs"]

Counts = Union[Sequence[int], Tensor]


class BlockSize(NamedTuple):
    """A block's source and destination node counts (both prefixes of the batch's nodes) and its
    edge count (a prefix of the batch's edges)."""
    num_src: int
    num_dst: int
    num_edges: int


def _counts(name: str, counts: Counts) -> List[int]:
    values = counts.tolist() if isinstance(counts, Tensor) else list(counts)
    if any(not isinstance(v, int) or v < 0 for v in values):
        raise ValueError(f"{name} must hold non-negative integers, got {values}")
    return values


def block_sizes(num_sampled_nodes: Counts, num_sampled_edges: Counts,
                num_layers: Optional[int] = None) -> List[BlockSize]:
    """The blocks of the first ``num_layers`` layers (default: one per hop), first layer first.

    Args:
        num_sampled_nodes: nodes per hop, seeds first (``L + 1`` entries).
        num_sampled_edges: edges per hop (``L`` entries).
        num_layers: at most ``L`` layers; layer ``l`` uses hops ``0 .. num_layers - l - 1``.
    """
    nodes = _counts("num_sampled_nodes", num_sampled_nodes)
    edges = _counts("num_sampled_edges", num_sampled_edges)
    hops = len(edges)
    if len(nodes) != hops + 1:
        raise ValueError(f"num_sampled_nodes must have one entry more than num_sampled_edges "
                         f"(the seeds), got {len(nodes)} and {hops}")
    layers = hops if num_layers is None else num_layers
    if not 0 <= layers <= hops:
        raise ValueError(f"num_layers must be in [0, {hops}] (the batch's hops), got {layers}")
    return [BlockSize(sum(nodes[:layers - l + 1]), sum(nodes[:layers - l]),
                      sum(edges[:layers - l])) for l in range(layers)]


def block_graphs(edge_index: Tensor, num_sampled_nodes: Counts, num_sampled_edges: Counts,
                 num_layers: Optional[int] = None,
                 self_loops: Union[SelfLoops, int, str] = SelfLoops.KEEP,
                 deferred_error: Optional[Tensor] = None,
                 max_in_degree: int = -1) -> List[Graph]:
    """The blocks of :func:`block_sizes` as bipartite :class:`iognn.Graph` objects (with the
    layers' self-loop mode: ``'keep'`` for SAGEConv, ``'replace'`` for GATConv, ...), built on
    ``edge_index``'s device.

    Args:
        edge_index: the batch's ``[2, E]`` edges in hop order (``batch.edge_index``).
        num_sampled_nodes, num_sampled_edges, num_layers: as in :func:`block_sizes`.
        self_loops: the self-loop mode of every block's Graph.
        deferred_error: build the blocks deferred (``self_loops='keep'`` only): no wait for
            their validation, a bad index recorded in this error word (see :class:`iognn.Graph`).
        max_in_degree: with ``deferred_error``, a bound on the blocks' in-degree (the largest
            fan-out), the ops' hint; -1 when unknown.
    """
    sizes = block_sizes(num_sampled_nodes, num_sampled_edges, num_layers)
    if not isinstance(edge_index, Tensor) or edge_index.dim() != 2 or edge_index.size(0) != 2:
        got = tuple(edge_index.shape) if isinstance(edge_index, Tensor) else type(edge_index)
        raise ValueError(f"edge_index must be a [2, E] tensor, got {got}")
    if sizes and sizes[0].num_edges > edge_index.size(1):
        raise ValueError(f"num_sampled_edges sum to {sizes[0].num_edges} edges but edge_index has "
                         f"{edge_index.size(1)}")
    deferred = {} if deferred_error is None else dict(deferred_error=deferred_error,
                                                      degree_bounds=(max_in_degree, -1))
    return [Graph(edge_index.narrow(1, 0, s.num_edges), (s.num_src, s.num_dst), self_loops,
                  **deferred) for s in sizes]
