"""PyG's ``NeighborLoader`` and ``LinkNeighborLoader`` sampling with
:class:`iognn.sampler.NeighborSampler`.

A training script switches ``from torch_geometric.loader import NeighborLoader`` (or
``LinkNeighborLoader``) to ``from iognn.loader import ...`` and runs without pyg-lib or
torch-sparse: the arguments, the batches (``n_id``, ``e_id``, ``batch_size``, ``input_id``,
``edge_label_index``, ``edge_label``, ``num_sampled_nodes``, ``num_sampled_edges``, the gathered
features) and the iteration are PyG's. See docs/sampler.md.

This module imports torch_geometric; ``import iognn`` does not import it.
"""
from __future__ import annotations

from typing import Callable, Optional

from torch_geometric.loader import LinkNeighborLoader as PyGLinkNeighborLoader
from torch_geometric.loader import NeighborLoader as PyGNeighborLoader

from .sampler import NeighborSampler

__all__ = ["LinkNeighborLoader", "NeighborLoader"]


def _sampler_for(data, num_neighbors, neighbor_sampler, *, replace, subgraph_type, disjoint,
                 temporal_strategy, time_attr, weight_attr, is_sorted, directed, loader_kwargs):
    """The loader's ``neighbor_sampler`` if given, else an iognn sampler built from the loader's
    arguments as PyG's loaders build theirs (shared memory when the loader has workers)."""
    if neighbor_sampler is not None:
        return neighbor_sampler
    return NeighborSampler(
        data, num_neighbors=num_neighbors, replace=replace, subgraph_type=subgraph_type,
        disjoint=disjoint, temporal_strategy=temporal_strategy, time_attr=time_attr,
        weight_attr=weight_attr, is_sorted=is_sorted,
        share_memory=loader_kwargs.get("num_workers", 0) > 0, directed=directed)


class NeighborLoader(PyGNeighborLoader):
    """``torch_geometric.loader.NeighborLoader`` (same arguments) whose sampler is
    :class:`iognn.sampler.NeighborSampler` unless ``neighbor_sampler`` is given. The options that
    sampler does not support yet raise ``NotImplementedError`` naming the argument."""

    def __init__(self, data, num_neighbors, input_nodes=None, input_time=None,
                 replace: bool = False, subgraph_type="directional", disjoint: bool = False,
                 temporal_strategy: str = "uniform", time_attr: Optional[str] = None,
                 weight_attr: Optional[str] = None, transform: Optional[Callable] = None,
                 transform_sampler_output: Optional[Callable] = None, is_sorted: bool = False,
                 filter_per_worker: Optional[bool] = None, neighbor_sampler=None,
                 directed: bool = True, **kwargs):
        neighbor_sampler = _sampler_for(
            data, num_neighbors, neighbor_sampler, replace=replace, subgraph_type=subgraph_type,
            disjoint=disjoint, temporal_strategy=temporal_strategy, time_attr=time_attr,
            weight_attr=weight_attr, is_sorted=is_sorted, directed=directed, loader_kwargs=kwargs)
        super().__init__(data, num_neighbors, input_nodes=input_nodes, input_time=input_time,
                         replace=replace, subgraph_type=subgraph_type, disjoint=disjoint,
                         temporal_strategy=temporal_strategy, time_attr=time_attr,
                         weight_attr=weight_attr, transform=transform,
                         transform_sampler_output=transform_sampler_output, is_sorted=is_sorted,
                         filter_per_worker=filter_per_worker, neighbor_sampler=neighbor_sampler,
                         directed=directed, **kwargs)


class LinkNeighborLoader(PyGLinkNeighborLoader):
    """``torch_geometric.loader.LinkNeighborLoader`` (same arguments) whose sampler is
    :class:`iognn.sampler.NeighborSampler` unless ``neighbor_sampler`` is given. Negative sampling
    (``neg_sampling`` / ``neg_sampling_ratio``) is PyG's; the options the sampler does not support
    yet raise ``NotImplementedError`` naming the argument."""

    def __init__(self, data, num_neighbors, edge_label_index=None, edge_label=None,
                 edge_label_time=None, replace: bool = False, subgraph_type="directional",
                 disjoint: bool = False, temporal_strategy: str = "uniform", neg_sampling=None,
                 neg_sampling_ratio=None, time_attr: Optional[str] = None,
                 weight_attr: Optional[str] = None, transform: Optional[Callable] = None,
                 transform_sampler_output: Optional[Callable] = None, is_sorted: bool = False,
                 filter_per_worker: Optional[bool] = None, neighbor_sampler=None,
                 directed: bool = True, **kwargs):
        neighbor_sampler = _sampler_for(
            data, num_neighbors, neighbor_sampler, replace=replace, subgraph_type=subgraph_type,
            disjoint=disjoint, temporal_strategy=temporal_strategy, time_attr=time_attr,
            weight_attr=weight_attr, is_sorted=is_sorted, directed=directed, loader_kwargs=kwargs)
        super().__init__(data, num_neighbors, edge_label_index=edge_label_index,
                         edge_label=edge_label, edge_label_time=edge_label_time, replace=replace,
                         subgraph_type=subgraph_type, disjoint=disjoint,
                         temporal_strategy=temporal_strategy, neg_sampling=neg_sampling,
                         neg_sampling_ratio=neg_sampling_ratio, time_attr=time_attr,
                         weight_attr=weight_attr, transform=transform,
                         transform_sampler_output=transform_sampler_output, is_sorted=is_sorted,
                         filter_per_worker=filter_per_worker, neighbor_sampler=neighbor_sampler,
                         directed=directed, **kwargs)
