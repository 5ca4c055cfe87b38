"""Fixed-shape neighbour samples: a mini-batch step with no host synchronisation.

:class:`iognn.sampler.NeighborSampler` returns batches of the size the sample happens to have, so
the host waits for each hop's sizes. :class:`PaddedNeighborSampler` draws the same sample into
buffers whose sizes depend only on the batch size and the fan-outs (every fan-out must be
``>= 0``): hop ``h`` may sample at most ``cap[h] = cap[h - 1] * k_h`` edges, ``cap[-1] =
batch_size``. Unused entries hold ``-1``. Nothing in a padded sample, nor in the blocks built from
it (:meth:`PaddedSample.block_graphs`, deferred :class:`iognn.Graph` builds), waits for the host, so
a whole training step (sampling, feature gather, forward, backward, optimizer) can be captured in
a CUDA graph and replayed per batch (``iognn train --loader neighbor --capture``;
:class:`iognn.CapturedStep` with ``volatile`` seeds).

The layout the layers see: local ids ``0 .. S - 1`` are *sink* nodes and the sample's local ids
move up by ``S`` (the seeds are ``S .. S + batch_size - 1``). Padded edge slot ``e`` is the loop
``e % S -> e % S`` and every padded node reads the features of global node 0, so padding changes
no real node's output: it only feeds the sinks, whose outputs are never used. ``S = ceil(sum(cap)
/ 1024)`` sinks of at most 1024 edges each: one sink taking every padded edge would be a row of
hundreds of thousands of edges, which the block builds sort in extra passes and the layers split;
many more sinks would add rows to every layer's dense products (each sink is a destination of
every block). Block ``l`` (of ``L`` layers) then spans, as :func:`iognn.blocks.block_sizes`
computes it from ``num_sampled_nodes = [S + batch_size, cap[0], ...]`` and ``num_sampled_edges =
cap``, the capacities' prefixes: its shapes never change.

Costs of the fixed shapes: the buffers are sized for the worst case (no repeated neighbour), so
the feature gather and the layers touch ``sum(cap)`` rows where the sample has fewer (on a
products-sized graph with fan-out [15, 10, 5] about 1.3x as many); the graph's device checks are
not raised per batch but folded into an error word, read by :meth:`PaddedNeighborSampler.check`
(call it where the host waits anyway, e.g. once per epoch).
"""
from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from .blocks import block_sizes
from .graph import Graph, raise_deferred_error

__all__ = ["PaddedNeighborSampler", "PaddedSample"]

_SINK_DEGREE = 1024  # padded edges per sink node at most
_ERRORS = {1: "a seed is out of range", 2: "a node's CSC entries are invalid",
           3: "a sampled neighbour id is out of range"}


class PaddedSample(NamedTuple):
    """One padded sample (module note), local ids shifted by ``num_sinks``.

    Attributes:
        node: ``[S + batch_size + sum(cap)]`` global ids (the sinks and padding: -1).
        edge_index: ``[2, sum(cap)]`` (neighbour, frontier node), hop by hop, padding slot ``e``:
            ``e % S -> e % S``.
        edge_id: ``[sum(cap)]`` the edges' positions in the sampler's CSC (-1: padding).
        num_sampled_nodes, num_sampled_edges: the sample's true counts per hop (device tensors).
        node_capacity, edge_capacity: ``[S + batch_size, cap[0], ...]`` and ``cap``: the
            fixed counts that size the blocks.
        num_sinks: ``S``.
        max_in_degree: a bound on every block's in-degree (the largest fan-out, or a sink's 1024).
        build_error: the blocks' builds' error word (see :meth:`PaddedNeighborSampler.check`).
    """
    node: Tensor
    edge_index: Tensor
    edge_id: Tensor
    num_sampled_nodes: Tensor
    num_sampled_edges: Tensor
    node_capacity: List[int]
    edge_capacity: List[int]
    num_sinks: int
    max_in_degree: int
    build_error: Tensor

    def seed_rows(self, out: Tensor) -> Tensor:
        """The seeds' rows of a layer stack's output (its first ``S + batch_size`` rows)."""
        return out.narrow(0, self.num_sinks, self.node_capacity[0] - self.num_sinks)

    def gather(self, x: Tensor) -> Tensor:
        """``x`` of the sample's nodes, in local-id order (the sinks' and padding rows: node 0's)."""
        return x.index_select(0, self.node.clamp(min=0).to(torch.int64))

    def block_graphs(self, num_layers: Optional[int] = None) -> List[Graph]:
        """The blocks of the first ``num_layers`` layers as deferred :class:`iognn.Graph` objects
        (self-loops kept: SAGE-style layers), built without a host synchronisation; their
        in-degree bound is the ops' hint, so aggregations need no heavy-row plan."""
        blocks = block_sizes(self.node_capacity, self.edge_capacity, num_layers)
        return [Graph(self.edge_index.narrow(1, 0, b.num_edges), (b.num_src, b.num_dst),
                      deferred_error=self.build_error, degree_bounds=(self.max_in_degree, -1))
                for b in blocks]


def _capacities(batch_size: int, num_neighbors: Sequence[int]) -> List[int]:
    caps, frontier = [], batch_size
    for h, k in enumerate(num_neighbors):
        if not isinstance(k, int) or isinstance(k, bool) or k < 0:
            raise ValueError(f"PaddedNeighborSampler: num_neighbors[{h}] must be an int >= 0 "
                             f"(padded buffers are sized by the fan-outs), got {k!r}")
        frontier *= k
        caps.append(frontier)
    return caps


class PaddedNeighborSampler:
    """Samples fixed-shape batches of ``batch_size`` seeds from a homogeneous graph, on its
    device, with no host synchronisation per batch (module note).

    Args:
        data: a homogeneous PyG ``Data`` (its ``edge_index`` device is where sampling runs).
        num_neighbors: fan-out per hop, every entry ``>= 0``.
        batch_size: seeds per batch (a shorter last batch is padded by the caller: see
            ``valid`` in :meth:`sample`).
        replace, weight_attr, is_sorted: as in :class:`iognn.sampler.NeighborSampler`.
        seed: the first key of the sampler's random draws; every :meth:`sample` call advances
            the key on the device, so a replayed capture draws a new sample each time.

    The CSC is checked once here (its offsets and neighbour ids; one synchronisation); seeds are
    the caller's (out-of-range seeds are reported by :meth:`check`).
    """

    def __init__(self, data, num_neighbors: Sequence[int], batch_size: int,
                 replace: bool = False, weight_attr: Optional[str] = None,
                 is_sorted: bool = False, seed: int = 0):
        from .sampler import NeighborSampler
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"PaddedNeighborSampler: batch_size must be an int >= 1, got "
                             f"{batch_size!r}")
        self.num_neighbors = list(num_neighbors)
        self.edge_capacity = _capacities(batch_size, self.num_neighbors)
        self.batch_size = batch_size
        self.num_sinks = max(1, -(-sum(self.edge_capacity) // _SINK_DEGREE))
        self.node_capacity = [self.num_sinks + batch_size] + self.edge_capacity
        self._csc = NeighborSampler(data, self.num_neighbors, replace=replace,
                                    weight_attr=weight_attr, is_sorted=is_sorted)
        if self._csc.is_hetero:
            raise NotImplementedError("PaddedNeighborSampler: homogeneous graphs only")
        self.replace = replace
        device = self._csc.colptr.device
        self._check_csc()
        self.key = torch.tensor([seed], dtype=torch.int64, device=device)
        self.error = torch.full((1,), -1, dtype=torch.int64, device=device)
        self.build_error = torch.full((1,), -1, dtype=torch.int64, device=device)
        slots = torch.arange(sum(self.edge_capacity), device=device)
        self._sink_of_slot = (slots % self.num_sinks).to(self._csc.colptr.dtype).expand(2, -1)

    @property
    def device(self) -> torch.device:
        return self._csc.colptr.device

    def _check_csc(self) -> None:
        colptr, row = self._csc.colptr, self._csc.row
        num_nodes = colptr.numel() - 1
        bad = colptr[0] != 0
        bad |= colptr[-1] != row.numel()
        if num_nodes:
            bad |= (colptr[1:] < colptr[:-1]).any()
        if row.numel():
            bad |= (row.min() < 0) | (row.max() >= num_nodes)
        if bool(bad):
            raise ValueError("PaddedNeighborSampler: the graph's CSC is invalid (offsets not "
                             "monotone from 0 to E, or a neighbour id out of range)")

    def sample(self, seed: Tensor) -> PaddedSample:
        """The padded sample of ``seed`` (``[batch_size]`` global ids on the sampler's device;
        pad a short last batch with any valid id and mask its loss). Advances the key."""
        if seed.dim() != 1 or seed.numel() != self.batch_size:
            raise ValueError(f"PaddedNeighborSampler.sample: seed must have shape "
                             f"[{self.batch_size}], got {list(seed.shape)}")
        csc = self._csc
        self.key.add_(1)
        row, col, node, edge, nodes, edges = torch.ops.iognn.neighbor_sample_padded(
            csc.colptr, csc.row, seed.to(csc.colptr.dtype), self.num_neighbors, self.key,
            self.error, self.replace, False, csc.edge_weight)
        node = F.pad(node, (self.num_sinks, 0), value=-1)
        edge_index = torch.stack([row, col])
        edge_index = torch.where(edge_index < 0, self._sink_of_slot, edge_index + self.num_sinks)
        return PaddedSample(node, edge_index, edge, nodes, edges, self.node_capacity,
                            self.edge_capacity, self.num_sinks,
                            max([_SINK_DEGREE, *self.num_neighbors]), self.build_error)

    def check(self) -> None:
        """Raises what the device recorded since the last check (a host synchronisation): a
        sampling error (ValueError / IndexError) or a bad index of a block build."""
        code = int(self.error.item())
        build_error = self.build_error.clone()
        self.error.fill_(-1)
        self.build_error.fill_(-1)
        if code >= 0:
            raise IndexError(f"PaddedNeighborSampler: {_ERRORS.get(code, f'error {code}')}")
        raise_deferred_error(build_error, "a padded block's edge_index")
