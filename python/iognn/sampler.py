"""Neighbour sampling for PyG's mini-batch loaders, without pyg-lib or torch-sparse.

:class:`NeighborSampler` is PyG's ``torch_geometric.sampler.NeighborSampler`` with its homogeneous
sampling call served by ``torch.ops.iognn.neighbor_sample`` (``csrc/kernels/cpu``, or
``csrc/kernels/cuda`` for a graph on a CUDA device) instead of ``torch.ops.pyg.neighbor_sample``: the graph's CSC, the seed handling, the outputs
(:class:`~torch_geometric.sampler.SamplerOutput`) and everything the loaders do with them stay
PyG's. Each batch draws its generator key from torch's default generator, so ``torch.manual_seed``
makes a run reproducible (CPU and CUDA give the same sample). ``weight_attr`` samples by edge weight (pyg-lib's distribution);
``time_attr`` (node- or edge-level int64 times) with ``input_time`` samples temporally, as pyg-lib
does (disjoint trees; ``temporal_strategy`` ``'uniform'`` or ``'last'``). Options not supported yet
(heterogeneous graphs, weighted temporal sampling, induced subgraphs) raise ``NotImplementedError``
naming the argument. See docs/sampler.md.

This module imports torch_geometric; ``import iognn`` does not import it.
"""
from __future__ import annotations

import warnings
from typing import Any, Optional

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.sampler import NeighborSampler as PyGNeighborSampler
from torch_geometric.sampler import SamplerOutput
from torch_geometric.sampler.base import DataType, SubgraphType
from torch_geometric.sampler.utils import to_csc

from . import _C  # noqa: F401  (registers torch.ops.iognn.neighbor_sample)

__all__ = ["NeighborSampler"]


def _not_yet(what: str) -> NotImplementedError:
    return NotImplementedError(
        f"iognn.sampler.NeighborSampler: {what} is not supported yet (this release samples "
        f"homogeneous graphs)")


def _reject_unsupported(data: Any, subgraph_type: Any, temporal_strategy: str,
                        time_attr: Optional[str], weight_attr: Optional[str],
                        directed: bool, sample_direction: str) -> None:
    if DataType.from_data(data) == DataType.heterogeneous:
        raise _not_yet("a heterogeneous graph (HeteroData)")
    for name, attr in (("weight_attr", weight_attr), ("time_attr", time_attr)):
        if attr is not None and DataType.from_data(data) != DataType.homogeneous:
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


def _int64_times(time: Tensor, what: str) -> Tensor:
    """Times as the kernel takes them: int64, contiguous (integer times only, as in pyg-lib)."""
    if time.is_floating_point() or time.is_complex() or time.dtype == torch.bool:
        raise ValueError(f"iognn.sampler.NeighborSampler: {what} must hold integer times, got "
                         f"{time.dtype}")
    return time.to(torch.int64).contiguous()


def _graph_device(data: Any) -> torch.device:
    """Where a homogeneous ``Data``'s graph lives (its edge_index); the CPU for anything else."""
    edge_index = getattr(data, "edge_index", None) if isinstance(data, Data) else None
    return edge_index.device if isinstance(edge_index, Tensor) else torch.device("cpu")


class NeighborSampler(PyGNeighborSampler):
    """PyG's in-memory ``NeighborSampler`` (same arguments) sampling with iognn's kernels.

    A graph whose ``edge_index`` is on a CUDA device is sampled there: its CSC (and the weights
    and times) stay on that device, and so do the batches.

    Supported: homogeneous ``Data`` (or a homogeneous feature/graph store), per-hop fan-outs
    (``-1``: every neighbour), ``replace``, ``disjoint``, ``weight_attr`` (with ``Data``: an edge
    attribute of finite, non-negative weights), ``time_attr`` (with ``Data``: integer node or edge
    times, as PyG tells them apart; seed times from ``input_time``, else the seeds' node times),
    ``temporal_strategy`` ``'uniform'`` / ``'last'``, ``subgraph_type`` ``'directional'`` and
    ``'bidirectional'``, ``sample_direction``, node and edge (link) seeds. Raising
    ``NotImplementedError``: ``HeteroData``, ``weight_attr`` or ``time_attr`` with a feature/graph
    store, ``weight_attr`` with ``time_attr``, ``time_attr`` with ``sample_direction='backward'``,
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
        edge_time_attr = time_attr if (time_attr is not None and not data.is_node_attr(time_attr)
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
        if self.is_hetero:  # a heterogeneous feature/graph store
            raise _not_yet("a heterogeneous feature/graph store")
        if edge_time_attr is not None:  # PyG's CSC for edge-level times: sorted by them
            self.edge_time = data[edge_time_attr]
            self.colptr, self.row, self.perm = to_csc(
                data, device="cpu", share_memory=share_memory, is_sorted=is_sorted,
                edge_time=self.edge_time)
            if self.perm is not None:
                self.edge_time = self.edge_time[self.perm]
        # The kernel takes one index dtype for the whole graph, fp64 weights and int64 times, all
        # on the graph's device (PyG builds the CSC on the CPU).
        device = _graph_device(data)
        self.colptr, self.row = self.colptr.to(device), self.row.to(device, self.colptr.dtype)
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
            raise _not_yet("heterogeneous seeds")
        if seed_time is not None:
            seed_time = _int64_times(seed_time, "input_time (seed times)").to(self.colptr.device)
        rng_seed = int(torch.empty((), dtype=torch.int64).random_())
        row, col, node, edge, num_sampled_nodes, num_sampled_edges = \
            torch.ops.iognn.neighbor_sample(
                self.colptr, self.row, seed.to(self.colptr.device, self.colptr.dtype).contiguous(),
                self.num_neighbors.get_mapped_values(), self.replace, self.disjoint, rng_seed,
                self.edge_weight, self.node_time, self.edge_time, seed_time,
                self.temporal_strategy)
        batch = None
        if self.disjoint:  # node is [num_nodes, 2]: (seed position, global id), as in pyg-lib
            batch, node = node.t().contiguous()
        if self.sample_direction == "backward":
            row, col = col, row
        return SamplerOutput(node=node, row=row, col=col, edge=edge, batch=batch,
                             num_sampled_nodes=num_sampled_nodes,
                             num_sampled_edges=num_sampled_edges)
