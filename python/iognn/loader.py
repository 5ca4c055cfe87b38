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

import inspect

from torch_geometric.loader import LinkNeighborLoader as PyGLinkNeighborLoader
from torch_geometric.loader import NeighborLoader as PyGNeighborLoader

from .sampler import NeighborSampler

__all__ = ["LinkNeighborLoader", "NeighborLoader"]


class _SamplesWithIognn:
    """Mixin for a PyG neighbour loader: takes that loader's arguments (its signature, bound as it
    binds them) and, unless ``neighbor_sampler`` is given, builds an iognn
    :class:`~iognn.sampler.NeighborSampler` from them as PyG's loaders build theirs (shared memory
    when the loader has workers). The options that sampler does not support yet raise
    ``NotImplementedError`` naming the argument."""

    def __init__(self, *args, **kwargs):
        pyg_init = super().__init__
        bound = inspect.signature(pyg_init).bind(*args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        if a["neighbor_sampler"] is None:
            a["neighbor_sampler"] = NeighborSampler(
                a["data"], num_neighbors=a["num_neighbors"], replace=a["replace"],
                subgraph_type=a["subgraph_type"], disjoint=a["disjoint"],
                temporal_strategy=a["temporal_strategy"], time_attr=a["time_attr"],
                weight_attr=a["weight_attr"], is_sorted=a["is_sorted"],
                share_memory=a["kwargs"].get("num_workers", 0) > 0, directed=a["directed"])
        pyg_init(*bound.args, **bound.kwargs)


class NeighborLoader(_SamplesWithIognn, PyGNeighborLoader):
    """``torch_geometric.loader.NeighborLoader`` (same arguments) whose sampler is
    :class:`iognn.sampler.NeighborSampler` unless ``neighbor_sampler`` is given."""

    __signature__ = inspect.signature(PyGNeighborLoader)


class LinkNeighborLoader(_SamplesWithIognn, PyGLinkNeighborLoader):
    """``torch_geometric.loader.LinkNeighborLoader`` (same arguments) whose sampler is
    :class:`iognn.sampler.NeighborSampler` unless ``neighbor_sampler`` is given. Negative sampling
    (``neg_sampling`` / ``neg_sampling_ratio``) is PyG's."""

    __signature__ = inspect.signature(PyGLinkNeighborLoader)
