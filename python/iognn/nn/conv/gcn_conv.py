"""``GCNConv``: PyG 2.8's graph convolution (Kipf & Welling) on iognn's propagate.

``out = D^-1/2 (A + I) D^-1/2 (x W^T) + b`` with PyG's exact conventions, per adjacency kind:

- ``[2, E]`` tensor / EdgeIndex / iognn.Graph: ``add_remaining_self_loops`` (an existing loop keeps
  its weight, every node gets exactly one); as in PyG 2.8, ``improved=True`` only changes the
  weight of added loops when ``edge_weight`` is given (without it every weight is 1).
- torch.sparse COO/CSR: the values are the weights (``edge_weight`` is ignored) and a loop of
  weight 1 (2 if improved) is appended to every node even where one exists (``A + I``).
  A CSC matrix raises NotImplementedError with ``normalize=True``, as in PyG.
- torch_sparse.SparseTensor: ``fill_diag`` (existing loops are replaced by the fill weight);
  missing values count as 1.

Degrees are weighted in-degrees; a zero degree gives a zero weight. The unweighted normalisation
is computed once per Graph and reused (the Graph itself is cached per adjacency tensor).

``cached=True`` keeps the normalised graph of the first call, as PyG does, in two slots read
through PyG's attribute names: ``_cached_edge_index`` (tensor adjacencies: ``[2, E]``, EdgeIndex,
torch.sparse, iognn.Graph) and ``_cached_adj_t`` (torch_sparse.SparseTensor). Assigning None to
either drops it (PyG's idiom for a new graph); assigning a pre-normalised ``(edge_index,
edge_weight)`` pair (or a SparseTensor) makes later calls propagate over it without normalising.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ...graph import Graph, SelfLoops
from ...ops._checks import acc_dtype
from ...ops.propagate import gcn_norm
from .._graph import (_SPARSE_TENSOR, cached_graph, cached_on, edge_graph, is_sparse,
                      sparse_graph, sparse_input, weighted_adjacency)
from ..linear import Linear, register_bias, zeros_
from ._common import (MessagePassingArgs, MessagePassingModule, aggregate_weighted,
                      check_edge_values, check_float_features, fused_linear_propagate,
                      store_arguments)


class GCNConv(MessagePassingModule):
    r"""Graph convolution, replacing ``torch_geometric.nn.GCNConv`` (Kipf & Welling,
    "Semi-Supervised Classification with Graph Convolutional Networks", ICLR 2017).

    .. math::
        \mathbf{x}'_i = \boldsymbol{\Theta}^{\top} \sum_{j \in \mathcal{N}(i) \cup \{ i \}}
        \frac{e_{j,i}}{\sqrt{\hat{d}_j \hat{d}_i}} \, \mathbf{x}_j + \mathbf{b},
        \qquad \hat{d}_i = \sum_{j \in \mathcal{N}(i) \cup \{ i \}} e_{j,i}

    i.e. :math:`\hat{\mathbf{D}}^{-1/2} \hat{\mathbf{A}} \hat{\mathbf{D}}^{-1/2} \mathbf{X}
    \boldsymbol{\Theta}` with :math:`\hat{\mathbf{A}} = \mathbf{A} + \mathbf{I}`. :math:`e_{j,i}`
    is the edge weight (1 without ``edge_weight``), the self-loop weight is 1 (2 with
    ``improved``), and a node of degree 0 gets weight 0. On an ``edge_index`` an existing loop
    keeps its weight and the others are added (``add_remaining_self_loops``).

    Args:
        in_channels (int): Size of each input feature vector; ``-1`` for lazy initialisation.
        out_channels (int): Size of each output feature vector.
        improved (bool, optional): Self-loops of weight 2 (:math:`\mathbf{A} + 2\mathbf{I}`); as
            in PyG 2.8 this changes nothing on an ``edge_index`` given without ``edge_weight``.
            (default: ``False``)
        cached (bool, optional): Normalise the graph of the first call only and reuse it for
            every later call, whatever graph is passed (transductive learning). The cache is
            readable and assignable as ``_cached_edge_index`` / ``_cached_adj_t`` (``None``
            drops it; ``reset_parameters()`` also does). (default: ``False``)
        add_self_loops (bool, optional): Add self-loops before normalising; ``None`` follows
            ``normalize`` (``True`` with ``normalize=False`` raises ``ValueError``).
            (default: ``None``)
        normalize (bool, optional): Apply the symmetric normalisation; ``False`` gives the
            plain weighted sum :math:`\sum_j e_{j,i} \boldsymbol{\Theta}^{\top}\mathbf{x}_j`.
            (default: ``True``)
        bias (bool, optional): Learn the additive bias :math:`\mathbf{b}`. (default: ``True``)
        **kwargs (optional): PyG's ``MessagePassing`` arguments (``aggr='add'``,
            ``aggr_kwargs``, ``node_dim``, ``decomposed_layers`` (no effect), ``flow``).

    Shapes:
        - **input:** ``x`` ``[N, F_in]`` or a static-graph batch ``[*, N, F_in]`` (nodes along
          ``node_dim``); ``edge_index`` ``[2, E]`` (or ``EdgeIndex``, ``iognn.Graph``, a
          torch.sparse matrix or ``SparseTensor`` ``adj_t``, whose values are the weights);
          ``edge_weight`` ``[E]`` (optional). No bipartite form: a pair ``(x_src, x_dst)``
          raises ``ValueError``.
        - **output:** ``[N, F_out]`` (``[*, N, F_out]`` for a batch)

    iognn differences:
        - Several self-loops on one node with ``edge_weight``: the last loop's weight is used
          and only it receives a gradient (PyG gives every copy a gradient).
        - An ``edge_weight`` that is not 1-D ``[E]`` (e.g. ``[E, 1]``) raises ``ValueError``.
        - torch.sparse adjacencies with ``[*, N, F]`` features are computed (PyG fails); a CSC
          matrix with ``normalize=True`` raises ``NotImplementedError``, as in PyG.
        - ``flow='target_to_source'`` raises ``NotImplementedError``; not scriptable with
          ``torch.jit.script``; no ``propagate``/``message``/explain machinery.
    """

    def __init__(self, in_channels: int, out_channels: int, improved: bool = False,
                 cached: bool = False, add_self_loops: Optional[bool] = None,
                 normalize: bool = True, bias: bool = True, **kwargs):
        super().__init__()
        args = MessagePassingArgs("GCNConv", kwargs, aggr="add")
        if add_self_loops is None:
            add_self_loops = normalize
        if add_self_loops and not normalize:
            raise ValueError("'GCNConv' does not support adding self-loops to the graph when no "
                             "on-the-fly normalization is applied")
        args.install(self)
        store_arguments(self, in_channels=in_channels, out_channels=out_channels, improved=improved,
                        cached=cached, add_self_loops=add_self_loops, normalize=normalize)
        self._cache_index = None  # (Graph, weights), or a pair the user assigned
        self._cache_adj_t = None
        self.lin = Linear(in_channels, out_channels, bias=False, weight_initializer="glorot")
        register_bias(self, out_channels, bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.aggr_module.reset_parameters()
        self.lin.reset_parameters()
        zeros_(self.bias)
        self._cache_index = self._cache_adj_t = None

    # PyG's cache attributes (see the module note).
    @property
    def _cached_edge_index(self):
        return self._pyg_cache(self._cache_index, as_sparse_tensor=False)

    @_cached_edge_index.setter
    def _cached_edge_index(self, value) -> None:
        if value is not None and not (isinstance(value, (tuple, list)) and len(value) == 2):
            raise TypeError(f"GCNConv._cached_edge_index must be None or an (edge_index, "
                            f"edge_weight) pair, got {type(value).__name__}")
        self._cache_index = None if value is None else tuple(value)

    @property
    def _cached_adj_t(self):
        return self._pyg_cache(self._cache_adj_t, as_sparse_tensor=True)

    @_cached_adj_t.setter
    def _cached_adj_t(self, value) -> None:
        if value is not None and not is_sparse(value):
            raise TypeError(f"GCNConv._cached_adj_t must be None or a sparse adjacency, got "
                            f"{type(value).__name__}")
        self._cache_adj_t = None if value is None else (value, None)

    @staticmethod
    def _pyg_cache(entry, as_sparse_tensor: bool):
        """A cache entry in PyG's form: ``(edge_index, edge_weight)``, or a SparseTensor."""
        if entry is None or not isinstance(entry[0], Graph):
            return entry if entry is None or not as_sparse_tensor else entry[0]
        graph, weight = entry
        edge_index = graph.edge_index
        if weight is None:
            weight = torch.ones(graph.num_edges, device=graph.device)
        if as_sparse_tensor and _SPARSE_TENSOR is not None:
            return _SPARSE_TENSOR(row=edge_index[1], col=edge_index[0], value=weight,
                                  sparse_sizes=(graph.num_dst_nodes, graph.num_src_nodes))
        return edge_index, weight

    def _normalised_graph(self, x: Tensor, edge_index, edge_weight: Optional[Tensor]):
        """(graph, per-edge weights in the graph's augmented order, or None for all ones)."""
        num_nodes = x.size(self.node_dim)
        if not self.normalize:
            return self._weighted_graph(edge_index, edge_weight, num_nodes)
        slot = ("_cache_adj_t" if _SPARSE_TENSOR is not None
                and isinstance(edge_index, _SPARSE_TENSOR) else "_cache_index")
        cache = getattr(self, slot)
        if cache is not None:
            if isinstance(cache[0], Graph):
                return cache
            return self._weighted_graph(cache[0], cache[1], num_nodes)  # assigned by the user
        graph, weight = self._normalise(edge_index, edge_weight, num_nodes, x.dtype)
        if self.cached and not torch.compiler.is_compiling():  # compiled: rebuilt in the graph
            setattr(self, slot, (graph, weight))
        return graph, weight

    def _weighted_graph(self, edge_index, edge_weight: Optional[Tensor], num_nodes):
        """The plain weighted sum's graph and weights (``normalize=False``, or a cache entry the
        user assigned)."""
        if is_sparse(edge_index):
            adj = weighted_adjacency("GCNConv", edge_index, num_nodes, num_nodes,
                                     coalesce=self.fuse, use_values=True)
            return adj.graph, adj.values
        graph = edge_graph("GCNConv", edge_index, num_nodes, num_nodes)
        if edge_weight is not None:
            check_edge_values("GCNConv", "edge_weight", edge_weight, graph)
        return graph, edge_weight

    def _normalise(self, edge_index, edge_weight: Optional[Tensor], num_nodes,
                   x_dtype: torch.dtype):
        """PyG's gcn_norm: (graph with the self-loops, normalised weights in augmented order)."""
        fill = 2.0 if self.improved else 1.0
        dtype = acc_dtype(x_dtype)
        if is_sparse(edge_index):
            graph, weight = self._sparse_graph(edge_index, fill, dtype)
        else:
            loops = SelfLoops.ADD_REMAINING if self.add_self_loops else SelfLoops.KEEP
            graph = edge_graph("GCNConv", edge_index, num_nodes, num_nodes, loops)
            if edge_weight is not None:
                check_edge_values("GCNConv", "edge_weight", edge_weight, graph)
            weight = graph.augment_edge_values(edge_weight, fill)
        if weight is None:
            return graph, cached_on(graph, ("gcn_norm", dtype),
                                    lambda: gcn_norm(graph, None, dtype))
        return graph, gcn_norm(graph, weight, dtype)

    def _sparse_graph(self, adj, fill: float, dtype: torch.dtype):
        """PyG's gcn_norm inputs for a sparse matrix: (graph, weights before normalisation)."""
        sparse = sparse_input(adj)
        if sparse.is_torch_sparse and adj.layout == torch.sparse_csc:
            raise NotImplementedError("GCNConv: sparse CSC matrices are not supported by "
                                      "gcn_norm (as in PyG); convert to CSR")
        if sparse.num_src != sparse.num_dst:
            raise ValueError(f"GCNConv needs a square adjacency, got shape "
                             f"{[sparse.num_dst, sparse.num_src]}")
        values = sparse.values
        if values is None:  # a SparseTensor without values: every entry weighs 1
            values = torch.ones(sparse.edge_index.size(1), dtype=dtype,
                                device=sparse.edge_index.device)
        if not self.add_self_loops:
            return sparse_graph(sparse), values
        if not sparse.is_torch_sparse:  # SparseTensor: fill_diag replaces existing loops
            graph = sparse_graph(sparse, SelfLoops.REPLACE)
            return graph, graph.augment_edge_values(values, fill)
        num_nodes = sparse.num_dst
        loops = torch.arange(num_nodes, device=sparse.edge_index.device,
                             dtype=sparse.edge_index.dtype).expand(2, -1)
        graph = cached_graph(adj, ("gcn_append_loops",), lambda: Graph(
            torch.cat([sparse.edge_index, loops], dim=1), (num_nodes, num_nodes)))
        return graph, torch.cat([values, values.new_full((num_nodes,), fill)])

    def forward(self, x: Tensor, edge_index, edge_weight: Optional[Tensor] = None) -> Tensor:
        if isinstance(x, (tuple, list)):
            raise ValueError("'GCNConv' received a tuple of node features as input while this "
                             "layer does not support bipartite message passing. Please try other "
                             "layers such as 'SAGEConv' or 'GraphConv' instead")
        check_float_features("GCNConv", x)
        graph, weight = self._normalised_graph(x, edge_index, edge_weight)
        out = fused_linear_propagate(self.aggr_module, self.node_dim, graph, x, weight, self.lin,
                                     self.bias)
        if out is not None:
            return out
        return aggregate_weighted(self.aggr_module, graph, self.lin(x), weight, self.bias,
                                  self.node_dim)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"
