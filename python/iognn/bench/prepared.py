"""A benchmark graph on the device, with every adjacency form the cases read, each built once.

All forms describe the same simple directed graph (``edge_index[0]`` = source j, ``[1]`` = target
i). They are built lazily and cached, so a graph is loaded and converted once and reused across ops,
levels and dtypes; iognn Graphs are built here too (one per self-loop mode), so their build cost is
never part of an op's timing.
"""
from __future__ import annotations

import warnings
from typing import Callable, Dict, Tuple

import torch
from torch import Tensor

from .graphs import degree_stats


class PreparedGraph:
    def __init__(self, spec: str, edge_index: Tensor, num_nodes: int, device: torch.device):
        self.spec = spec
        self.device = torch.device(device)
        self.edge_index = edge_index.to(self.device)
        self.num_nodes = int(num_nodes)
        self.stats = degree_stats(self.edge_index, self.num_nodes)
        self._cache: Dict[object, object] = {}

    @property
    def num_edges(self) -> int:
        return int(self.edge_index.size(1))

    @property
    def src(self) -> Tensor:
        return self.edge_index[0]

    @property
    def dst(self) -> Tensor:
        return self.edge_index[1]

    def _cached(self, key, build: Callable[[], object]):
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    # ---- iognn ------------------------------------------------------------------------------
    def iognn_graph(self, self_loops: str = "keep"):
        """``iognn.Graph`` with self-loop mode 'keep' or 'add_remaining' (built once)."""
        def build():
            from ..graph import Graph
            return Graph(self.edge_index, self.num_nodes, self_loops=self_loops)
        return self._cached(("iognn", self_loops), build)

    # ---- PyG forms --------------------------------------------------------------------------
    def gcn_edges(self) -> Tuple[Tensor, Tensor]:
        """PyG's ``gcn_norm`` of the graph: edges with the added self-loops and their fp32 weights."""
        def build():
            from torch_geometric.nn.conv.gcn_conv import gcn_norm
            return gcn_norm(self.edge_index, None, self.num_nodes, add_self_loops=True,
                            dtype=torch.float32)
        return self._cached("gcn_edges", build)

    def mean_weights(self) -> Tensor:
        """``1 / in-degree(target)`` per edge (fp32): the row-normalised adjacency of a mean."""
        def build():
            deg = torch.bincount(self.dst, minlength=self.num_nodes).clamp_(min=1)
            return (1.0 / deg.float())[self.dst]
        return self._cached("mean_weights", build)

    def sparse_adj_t(self, weighting: str, dtype: torch.dtype) -> Tensor:
        """``torch.sparse_csr`` transposed adjacency ``adj_t[target, source]`` in ``dtype``.

        weighting: 'ones' (plain adjacency), 'mean' (1 / in-degree) or 'gcn' (gcn_norm, with loops).
        """
        def build():
            if weighting == "gcn":
                (src, dst), values = self.gcn_edges()
            else:
                src, dst = self.src, self.dst
                values = (self.mean_weights() if weighting == "mean"
                          else torch.ones(self.num_edges, device=self.device))
            with warnings.catch_warnings():  # "sparse CSR support is in beta" and the like
                warnings.simplefilter("ignore", UserWarning)
                coo = torch.sparse_coo_tensor(torch.stack([dst, src]), values.to(dtype),
                                              (self.num_nodes, self.num_nodes))
                return coo.coalesce().to_sparse_csr()
        if weighting not in ("ones", "mean", "gcn"):
            raise ValueError(f"weighting must be 'ones', 'mean' or 'gcn', got {weighting!r}")
        return self._cached(("adj_t", weighting, dtype), build)

    def sparse_tensor_adj_t(self):
        """``torch_sparse.SparseTensor`` adj_t (ModuleNotFoundError without torch_sparse)."""
        def build():
            from torch_sparse import SparseTensor
            return SparseTensor(row=self.dst, col=self.src,
                                 sparse_sizes=(self.num_nodes, self.num_nodes))
        return self._cached("sparse_tensor", build)
