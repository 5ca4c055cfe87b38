"""Batches of small graphs for ``iognn train --task graph``, gathered on the device.

A batch is the concatenation of its graphs, as PyG's ``Batch.from_data_list`` makes it: ``x`` and
``edge_index`` (ids shifted by the nodes of the graphs before), ``batch`` (each node's graph),
``ptr`` (each graph's first node), ``y`` and ``num_graphs``. :class:`GraphBatcher` keeps the whole
:class:`~iognn.graph_datasets.GraphSet` on the training device and gathers a batch with a few
index kernels (no per-graph Python work, no host-to-device copy of features, no device sync: the
batch's node and edge totals come from host copies of the offsets). PyG's ``DataLoader`` over the
same graph order gives equal batches (tested); :class:`EpochOrder` is the shared order.

With ``graphs=True`` a batch also carries its :class:`iognn.Graph`, built *deferred* (no wait for
its validation: the batcher's indices are valid by construction; a failure would be recorded and
raised by :meth:`GraphBatcher.check`) with the dataset's largest in- and out-degree as the ops'
hints, so that iognn's layers (those that keep self-loops as given: GIN, GatedGraphConv) build
nothing and the step never waits for the device.
"""
from __future__ import annotations

from typing import Iterator, NamedTuple, Optional

import torch
from torch import Tensor

from .graph import Graph, raise_deferred_error


class GraphBatch(NamedTuple):
    x: Tensor
    edge_index: Tensor
    batch: Tensor
    ptr: Tensor
    y: Tensor
    num_graphs: int
    graph: Optional[Graph] = None  # the batch's Graph (self-loops kept as given), when built

    @property
    def adjacency(self):
        """What the layers take: the batch's Graph when it was built, else its edge_index."""
        return self.edge_index if self.graph is None else self.graph


class EpochOrder:
    """The graph order of every epoch: a seeded shuffle of ``ids`` (or ``ids`` as they are), drawn
    anew per epoch from a generator of its own, so that every implementation and loader of a run
    sees the same batches and training draws never shift them."""

    def __init__(self, ids: Tensor, shuffle: bool, seed: int):
        self.ids = ids
        self.shuffle = shuffle
        self.generator = torch.Generator().manual_seed(seed)

    def next_epoch(self) -> Tensor:
        if not self.shuffle:
            return self.ids
        return self.ids[torch.randperm(self.ids.numel(), generator=self.generator)]


def _starts(counts: Tensor) -> Tensor:
    """Exclusive prefix sums of ``counts``."""
    return counts.cumsum(0) - counts


class GraphBatcher:
    """Batches of ``graphs`` (a :class:`~iognn.graph_datasets.GraphSet`) on ``device``; with
    ``build_graphs``, each with its deferred :class:`iognn.Graph` (module note)."""

    def __init__(self, graphs, device: torch.device, build_graphs: bool = False):
        self.device = device
        self.build_graphs = build_graphs
        self.error = torch.full((1,), -1, dtype=torch.int64, device=device)
        self.degree_bounds = _degree_bounds(graphs) if build_graphs else (-1, -1)
        self.x = graphs.x.to(device)
        self.edge_index = graphs.edge_index.to(device)
        self.y = graphs.y.to(device)
        self.node_ptr = graphs.node_ptr.to(device)
        self.edge_ptr = graphs.edge_ptr.to(device)
        self.node_counts_host = graphs.node_ptr.diff()
        self.edge_counts_host = graphs.edge_ptr.diff()
        self.node_counts = self.node_counts_host.to(device)
        self.edge_counts = self.edge_counts_host.to(device)

    def gather(self, ids_host: Tensor, ids: Tensor) -> GraphBatch:
        """The batch of graphs ``ids`` (``ids_host`` on the host, ``ids`` the same on the
        device)."""
        num_nodes = int(self.node_counts_host[ids_host].sum())
        num_edges = int(self.edge_counts_host[ids_host].sum())
        node_counts = self.node_counts[ids]
        edge_counts = self.edge_counts[ids]
        node_starts = _starts(node_counts)        # each graph's first node in the batch
        node_index = torch.repeat_interleave(self.node_ptr[ids] - node_starts, node_counts,
                                             output_size=num_nodes)
        node_index += torch.arange(num_nodes, device=self.device)
        edge_index_of = torch.repeat_interleave(self.edge_ptr[ids] - _starts(edge_counts),
                                                edge_counts, output_size=num_edges)
        edge_index_of += torch.arange(num_edges, device=self.device)
        shift = torch.repeat_interleave(node_starts, edge_counts, output_size=num_edges)
        graph_of_node = torch.repeat_interleave(
            torch.arange(ids.numel(), device=self.device), node_counts, output_size=num_nodes)
        ptr = torch.cat([node_starts, node_starts.new_full((1,), num_nodes)])
        edge_index = self.edge_index.index_select(1, edge_index_of) + shift
        graph = (Graph(edge_index, num_nodes, deferred_error=self.error,
                       degree_bounds=self.degree_bounds) if self.build_graphs else None)
        return GraphBatch(self.x.index_select(0, node_index), edge_index, graph_of_node, ptr,
                          self.y[ids], ids.numel(), graph)

    def check(self) -> None:
        """Raises what a deferred build recorded (reads the error word: a synchronisation)."""
        if self.build_graphs:
            raise_deferred_error(self.error, "a batch's edge_index")

    def batches(self, order: Tensor, batch_size: int) -> Iterator[GraphBatch]:
        """The batches of graphs ``order`` (host ids), ``batch_size`` at a time."""
        on_device = order.to(self.device)
        for start in range(0, order.numel(), batch_size):
            yield self.gather(order[start:start + batch_size],
                              on_device[start:start + batch_size])


def _degree_bounds(graphs) -> tuple:
    """The largest in- and out-degree of any node of the dataset (host arithmetic, once)."""
    edges = graphs.edge_index
    if edges.size(1) == 0:
        return (0, 0)
    first = torch.repeat_interleave(graphs.node_ptr[:-1], graphs.edge_ptr.diff())
    num_nodes = int(graphs.node_ptr[-1])
    src, dst = edges[0] + first, edges[1] + first
    return (int(torch.bincount(dst, minlength=num_nodes).max()),
            int(torch.bincount(src, minlength=num_nodes).max()))


def pyg_batches(data_list: list, order: Tensor, batch_size: int, device: torch.device
                ) -> Iterator[GraphBatch]:
    """The same batches through PyG's ``DataLoader`` (collated on the host, then copied). The
    loader gets a generator of its own: it draws a seed from it every epoch, which would
    otherwise come from the global generator and shift the training's dropout draws."""
    from torch_geometric.loader import DataLoader
    loader = DataLoader(data_list, batch_size=batch_size, sampler=order.tolist(),
                        generator=torch.Generator())
    for batch in loader:
        batch = batch.to(device, non_blocking=True)
        yield GraphBatch(batch.x, batch.edge_index, batch.batch, batch.ptr, batch.y,
                         batch.num_graphs)
