"""Neighbour sampling for PyG's mini-batch loaders, without pyg-lib or torch-sparse.

:class:`NeighborSampler` is PyG's ``torch_geometric.sampler.NeighborSampler`` with its homogeneous
sampling call served by ``torch.ops.iognn.neighbor_sample`` (``csrc/kernels/cpu``, or
``csrc/kernels/cuda`` for a graph on a CUDA device) instead of ``torch.ops.pyg.neighbor_sample``: the graph's CSC, the seed handling, the outputs
(:class:`~torch_geometric.sampler.SamplerOutput`) and everything the loaders do with them stay
PyG's. Each batch draws its generator key from torch's default generator, so ``torch.manual_seed``
makes a run reproducible (CPU and CUDA give the same sample). ``weight_attr`` samples by edge weight (pyg-lib's distribution);
``time_attr`` (node- or edge-level int64 times) with ``input_time`` samples temporally, as pyg-lib
does (disjoint trees; ``temporal_strategy`` ``'uniform'`` or ``'last'``). ``HeteroData`` samples with
``torch.ops.iognn.hetero_neighbor_sample`` (on the CPU or the graph's CUDA device) and returns PyG's
``HeteroSamplerOutput``. Options not
supported yet (heterogeneous feature/graph stores, edge-level times on a ``HeteroData``, weighted
temporal sampling, induced subgraphs) raise ``NotImplementedError`` naming the argument. See
docs/sampler.md.

This module imports torch_geometric; ``import iognn`` does not import it.
"""
from __future__ import annotations

import warnings
from typing import Any, Optional

import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData
from torch_geometric.sampler import NeighborSampler as PyGNeighborSampler
from torch_geometric.sampler import HeteroSamplerOutput, SamplerOutput
from torch_geometric.sampler.base import DataType, SubgraphType
from torch_geometric.sampler.utils import remap_keys, to_csc

from . import _C  # noqa: F401  (registers torch.ops.iognn.neighbor_sample)

__all__ = ["NeighborSampler"]

_INT32 = torch.iinfo(torch.int32)


def _not_yet(what: str) -> NotImplementedError:
    return NotImplementedError(
        f"iognn.sampler.NeighborSampler: {what} is not supported yet (this release samples "
        f"Data and HeteroData on the CPU or a CUDA device)")


def _reject_unsupported(data: Any, subgraph_type: Any, temporal_strategy: str,
                        time_attr: Optional[str], weight_attr: Optional[str],
                        directed: bool, sample_direction: str) -> None:
    if time_attr is not None and _is_hetero_edge_time(data, time_attr):
        raise _not_yet(f"time_attr={time_attr!r} holding edge-level times of a HeteroData")
    for name, attr in (("weight_attr", weight_attr), ("time_attr", time_attr)):
        if attr is not None and DataType.from_data(data) == DataType.remote:
            raise _not_yet(f"{name}={attr!r} with a feature/graph store")
    if temporal_strategy not in ("uniform", "last"):
        raise ValueError(f"iognn.sampler.NeighborSampler: temporal_strategy must be 'uniform' or "
                         f"'last', got {temporal_strategy!r}")
    if time_attr is not None and weight_attr is not None:
        raise _not_yet(f"weight_attr={weight_attr!r} with time_attr={time_attr!r} (weighted "
                       f"temporal sampling; pyg-lib does not support it either)")
    if time_attr is not None and sample_direction == "backward":
        raise _not_yet(f"time_attr={time_attr!r} with sample_direction='backward'")
    if not directed:
        raise _not_yet("directed=False (an induced subgraph)")
    if SubgraphType(subgraph_type) == SubgraphType.induced:
        raise _not_yet("subgraph_type='induced'")


def _is_hetero_edge_time(data: Any, time_attr: str) -> bool:
    """Whether time_attr is an edge-level (and not a node-level) attribute of a HeteroData."""
    if DataType.from_data(data) != DataType.heterogeneous:
        return False
    return (any(time_attr in store for store in data.edge_stores)
            and not any(time_attr in store for store in data.node_stores))


def _seed_ids(seed: Tensor, like: Tensor, what: str) -> Tensor:
    """Seed ids in the CSC's index dtype, on its device. Ids that an int32 CSC cannot hold are
    refused here (a cast would wrap them onto other nodes), with the kernel's IndexError for any
    other id out of range."""
    if like.dtype == torch.int32 and seed.dtype != torch.int32 and seed.numel():
        bad = (seed > _INT32.max) | (seed < _INT32.min)
        if bool(bad.any()):
            i = int(bad.nonzero()[0, 0])
            raise IndexError(f"neighbor_sample: {what}[{i}] = {int(seed[i])} is out of range for "
                             f"the graph")
    return seed.to(like.device, like.dtype).contiguous()


def _int64_times(time: Tensor, what: str) -> Tensor:
    """Times as the kernel takes them: int64, contiguous (integer times only, as in pyg-lib)."""
    if time.is_floating_point() or time.is_complex() or time.dtype == torch.bool:
        raise ValueError(f"iognn.sampler.NeighborSampler: {what} must hold integer times, got "
                         f"{time.dtype}")
    return time.to(torch.int64).contiguous()


def _graph_device(data: Any) -> torch.device:
    """Where a ``Data``'s graph lives (its edge_index), or a ``HeteroData``'s (the first edge
    type's edge_index); the CPU for anything else."""
    stores = data.edge_stores if isinstance(data, (Data, HeteroData)) else []
    for store in stores:
        edge_index = getattr(store, "edge_index", None)
        if isinstance(edge_index, Tensor):
            return edge_index.device
    return torch.device("cpu")


class NeighborSampler(PyGNeighborSampler):
    """PyG's in-memory ``NeighborSampler`` (same arguments) sampling with iognn's kernels.

    A graph whose ``edge_index`` (a ``HeteroData``'s: its edge types') is on a CUDA device is
    sampled there: its CSC (and the weights and times) stay on that device, and so do the
    batches.

    Supported: homogeneous ``Data`` (or a homogeneous feature/graph store) and ``HeteroData``
    (fan-outs per edge type, node-level times, weights; docs/sampler.md), per-hop fan-outs
    (``-1``: every neighbour), ``replace``, ``disjoint``, ``weight_attr`` (with ``Data``: an edge
    attribute of finite, non-negative weights), ``time_attr`` (with ``Data``: integer node or edge
    times, as PyG tells them apart; seed times from ``input_time``, else the seeds' node times),
    ``temporal_strategy`` ``'uniform'`` / ``'last'``, ``subgraph_type`` ``'directional'`` and
    ``'bidirectional'``, ``sample_direction``, node and edge (link) seeds. Raising
    ``NotImplementedError``: a heterogeneous feature/graph store, edge-level ``time_attr`` on a
    ``HeteroData``, ``weight_attr`` or ``time_attr`` with a feature/graph store, ``weight_attr``
    with ``time_attr``, ``time_attr`` with ``sample_direction='backward'``,
    ``subgraph_type='induced'`` / ``directed=False``.
    """

    def __init__(self, data, num_neighbors, subgraph_type="directional", replace: bool = False,
                 disjoint: bool = False, temporal_strategy: str = "uniform",
                 time_attr: Optional[str] = None, weight_attr: Optional[str] = None,
                 is_sorted: bool = False, share_memory: bool = False, directed: bool = True,
                 sample_direction: str = "forward"):
        _reject_unsupported(data, subgraph_type, temporal_strategy, time_attr, weight_attr,
                            directed, sample_direction)
        # PyG refuses edge-level times without pyg-lib, so they are set below, as PyG sets them
        # (node-level times go through PyG, which sorts the CSC by them and forces disjoint).
        edge_time_attr = time_attr if (time_attr is not None and not isinstance(data, HeteroData)
                                       and not data.is_node_attr(time_attr)
                                       and data.is_edge_attr(time_attr)) else None
        with warnings.catch_warnings():
            # PyG warns that sampling without pyg-lib is deprecated: this sampler needs neither.
            warnings.filterwarnings("ignore", message=r".*without a 'pyg-lib' installation")
            # PyG refuses weight_attr without pyg-lib, so the weights are set below, as PyG
            # sets them: the edge attribute in CSC order (through PyG's edge permutation).
            super().__init__(data, num_neighbors, subgraph_type=subgraph_type, replace=replace,
                             disjoint=disjoint, temporal_strategy=temporal_strategy,
                             time_attr=None if edge_time_attr else time_attr, weight_attr=None,
                             is_sorted=is_sorted, share_memory=share_memory, directed=directed,
                             sample_direction=sample_direction)
        if self.is_hetero:
            if not isinstance(data, HeteroData):
                raise _not_yet("a heterogeneous feature/graph store")
            self._init_hetero(data, weight_attr, share_memory)
            return
        if edge_time_attr is not None:  # PyG's CSC for edge-level times: sorted by them
            self.edge_time = data[edge_time_attr]
            self.colptr, self.row, self.perm = to_csc(
                data, device="cpu", share_memory=share_memory, is_sorted=is_sorted,
                edge_time=self.edge_time)
            if self.perm is not None:
                self.edge_time = self.edge_time[self.perm]
        # The kernel takes one index dtype for the whole graph, fp64 weights and int64 times, all
        # on the graph's device (PyG builds the CSC on the CPU). The index dtype is int32 where
        # every node id and CSC position fits: the host kernel then reads and writes half the
        # bytes (about 1.6x the sampled edges a second on two cores); the batches still come out
        # in int64, as PyG's samplers give them.
        device = _graph_device(data)
        fits = self.row.numel() <= _INT32.max and self.colptr.numel() - 1 <= _INT32.max
        index_dtype = torch.int32 if fits else self.colptr.dtype
        self.colptr, self.row = self.colptr.to(device, index_dtype), self.row.to(device, index_dtype)
        if share_memory and device.type == "cpu":  # the converted CSC, for the loader's workers
            self.colptr.share_memory_()
            self.row.share_memory_()
        if self.perm is not None:
            self.perm = self.perm.to(device)
        if self.node_time is not None:
            self.node_time = _int64_times(self.node_time, f"time_attr={time_attr!r}").to(device)
        if self.edge_time is not None:
            self.edge_time = _int64_times(self.edge_time, f"time_attr={time_attr!r}").to(device)
        if weight_attr is not None:
            weight = data[weight_attr]
            if self.perm is not None:
                weight = weight[self.perm]
            self.edge_weight = weight.to(device, torch.float64).contiguous()
            if share_memory:
                self.edge_weight.share_memory_()

    def _sample(self, seed: Tensor, seed_time: Optional[Tensor] = None,
                **kwargs) -> SamplerOutput:
        if isinstance(seed, dict):
            return self._sample_hetero(seed, seed_time)
        if seed_time is not None:
            seed_time = _int64_times(seed_time, "input_time (seed times)").to(self.colptr.device)
        rng_seed = int(torch.empty((), dtype=torch.int64).random_())
        row, col, node, edge, num_sampled_nodes, num_sampled_edges = \
            torch.ops.iognn.neighbor_sample(
                self.colptr, self.row, _seed_ids(seed, self.colptr, "seed"),
                self.num_neighbors.get_mapped_values(), self.replace, self.disjoint, rng_seed,
                self.edge_weight, self.node_time, self.edge_time, seed_time,
                self.temporal_strategy)
        row, col, node, edge = (t.long() for t in (row, col, node, edge))
        batch = None
        if self.disjoint:  # node is [num_nodes, 2]: (seed position, global id), as in pyg-lib
            batch, node = node.t().contiguous()
        if self.sample_direction == "backward":
            row, col = col, row
        return SamplerOutput(node=node, row=row, col=col, edge=edge, batch=batch,
                             num_sampled_nodes=num_sampled_nodes,
                             num_sampled_edges=num_sampled_edges)

    # Heterogeneous graphs ########################################################################

    def _init_hetero(self, data: HeteroData, weight_attr: Optional[str],
                     share_memory: bool) -> None:
        """The flat inputs of ``torch.ops.iognn.hetero_neighbor_sample`` from PyG's CSC dicts:
        node types and edge types in PyG's order (edge types reversed with
        ``sample_direction='backward'``), one index dtype (int32 where ids fit), fp64 weights and
        int64 node times where the graph has them, all on the graph's device (as for ``Data``;
        PyG builds the CSC on the CPU)."""
        self._node_index = {t: i for i, t in enumerate(self.node_types)}
        self._device = device = _graph_device(data)
        share_memory = share_memory and device.type == "cpu"
        colptrs = [self.colptr_dict[self.to_rel_type[et]] for et in self.edge_types]
        rows = [self.row_dict[self.to_rel_type[et]] for et in self.edge_types]
        # int32 where every node id and CSC position fits, as for homogeneous graphs
        fits = (all(r.numel() <= _INT32.max for r in rows)
                and all(n <= _INT32.max for n in self.num_nodes.values()))
        self._index_dtype = torch.int32 if fits else torch.int64
        self._colptrs = [c.to(device, self._index_dtype).contiguous() for c in colptrs]
        self._rows = [r.to(device, self._index_dtype).contiguous() for r in rows]
        if share_memory:
            for t in self._colptrs + self._rows:
                t.share_memory_()
        self.perm = {et: None if p is None else p.to(device) for et, p in self.perm.items()}
        self._edge_type_nodes = [self._node_index[t] for et in self.edge_types
                                 for t in (et[0], et[-1])]
        self._weights = []
        if weight_attr is not None:  # PyG refuses weights without pyg-lib: set as PyG sets them
            weights = data.collect(weight_attr)
            for et in self.edge_types:
                w = weights.get(et)
                if w is not None and self.perm.get(et) is not None:
                    w = w[self.perm[et]]
                w = None if w is None else w.to(device, torch.float64).contiguous()
                if w is not None and share_memory:
                    w.share_memory_()
                self._weights.append(w)
        self._node_times = []
        if self.node_time is not None:
            self._node_times = [None if t not in self.node_time else
                                _int64_times(self.node_time[t], "time_attr (node times)").to(device)
                                for t in self.node_types]

    def _hetero_fanouts(self) -> tuple[list[int], int]:
        """num_neighbors as PyG maps it onto the edge types, flat; and the number of hops."""
        fanouts = self.num_neighbors.get_mapped_values(self.edge_types)
        flat, num_hops = [], self.num_neighbors.num_hops
        for et in self.edge_types:
            for h, k in enumerate(fanouts[self.to_rel_type[et]]):
                if k < -1:
                    raise ValueError(f"iognn.sampler.NeighborSampler: num_neighbors[{et}][{h}] "
                                     f"must be >= 0, or -1 for every neighbour, got {k}")
                flat.append(k)
        return flat, num_hops

    def _sample_hetero(self, seed: dict, seed_time: Optional[dict]) -> HeteroSamplerOutput:
        seed_types, seeds, seed_times = [], [], []
        for node_type, ids in seed.items():
            if node_type not in self._node_index:
                raise ValueError(f"iognn.sampler.NeighborSampler: the seeds' node type "
                                 f"{node_type!r} (input_nodes) is not a node type of the graph "
                                 f"({self.node_types})")
            seed_types.append(self._node_index[node_type])
            like = self._colptrs[0] if self._colptrs else ids.to(self._device)
            seeds.append(_seed_ids(ids, like, "seeds"))
            time = None if seed_time is None else seed_time.get(node_type)
            seed_times.append(None if time is None else
                              _int64_times(time, "input_time (seed times)").to(self._device))
        if all(t is None for t in seed_times):
            seed_times = []
        fanouts, num_hops = self._hetero_fanouts()
        rng_seed = int(torch.empty((), dtype=torch.int64).random_())
        node, row, col, edge, num_sampled_nodes, num_sampled_edges = \
            torch.ops.iognn.hetero_neighbor_sample(
                [self.num_nodes[t] for t in self.node_types], self._edge_type_nodes,
                self._colptrs, self._rows, seed_types, seeds, fanouts, num_hops, self.replace,
                self.disjoint, rng_seed, self._weights, self._node_times, [], seed_times,
                self.temporal_strategy)
        node, row, col, edge = ([t.long() for t in x] for x in (node, row, col, edge))
        hops = num_hops + 1
        num_sampled_nodes = {t: num_sampled_nodes[i * hops:(i + 1) * hops]
                             for i, t in enumerate(self.node_types)}
        num_sampled_edges = {et: num_sampled_edges[i * num_hops:(i + 1) * num_hops]
                             for i, et in enumerate(self.edge_types)}
        batch = None
        if self.disjoint:  # node[i] is [num, 2]: (seed position, global id), as in pyg-lib
            pairs = [n.t().contiguous() for n in node]
            batch = {t: p[0] for t, p in zip(self.node_types, pairs)}
            node = [p[1] for p in pairs]
        node = dict(zip(self.node_types, node))
        row, col, edge = (dict(zip(self.edge_types, x)) for x in (row, col, edge))
        if self.sample_direction == "backward":  # edge types back to the graph's, as PyG does
            row, col = col, row
            row, col, edge, num_sampled_edges = (
                remap_keys(x, self.to_restored_edge_type)
                for x in (row, col, edge, num_sampled_edges))
        return HeteroSamplerOutput(node=node, row=row, col=col, edge=edge, batch=batch,
                                   num_sampled_nodes=num_sampled_nodes,
                                   num_sampled_edges=num_sampled_edges)
