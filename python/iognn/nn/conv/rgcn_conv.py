"""``RGCNConv`` and ``FastRGCNConv``: PyG 2.8's relational graph convolution (Schlichtkrull et al.).

``out_i = x_i @ root + bias + sum_r reduce_{j -r-> i} x_j @ W_r`` with ``reduce`` the mean
within each relation (PyG's default) or the sum, computed by ``iognn.ops.typed_propagate`` over a
TypedGraph built once per (edge_index, edge_type) and cached on the edge_index. PyG's RGCNConv
loops over the relations (a masked copy of the edges and a propagate each); its FastRGCNConv
gathers a ``[F_in, F_out]`` weight per edge (an ``E x F_in x F_out`` tensor). Here both classes
run the same op: neither the loop nor the per-edge weights.
"""
from __future__ import annotations

import weakref
from typing import Optional, Tuple, Union

import torch
from torch import Tensor
from torch.nn import Parameter

from ...ops.typed_propagate import typed_propagate
from ...typed import TypedGraph
from .._graph import cached, is_sparse, sparse_input
from ..linear import glorot_, zeros_
from ._common import MessagePassingArgs, MessagePassingModule, store_arguments

_REDUCE = {"add": "sum", "sum": "sum", "mean": "mean"}


def _typed_graph(adj, edge_type: Optional[Tensor], num_types: int, size: Tuple[int, int]
                 ) -> TypedGraph:
    """The TypedGraph of an adjacency and its edge types, cached on the adjacency while it, the
    edge_type tensor and the node counts stay the same. A sparse matrix's values are its edge
    types (PyG's SparseTensor convention); a TypedGraph is used as it is."""
    if isinstance(adj, TypedGraph):
        if adj.num_types != num_types or adj.size != tuple(size):
            raise ValueError(f"the TypedGraph has {adj.num_types} types and sizes {adj.size}, "
                             f"the layer expects {num_types} types and sizes {tuple(size)}")
        return adj
    if is_sparse(adj):
        if edge_type is not None:
            raise ValueError("edge_type must be None when edge_index is a sparse matrix (its "
                             "values are the edge types)")
        sparse = sparse_input(adj)
        return cached(adj, ("typed", num_types),
                      lambda: TypedGraph(sparse.edge_index, sparse.values, num_types, size),
                      fits=lambda tg: tg.size == tuple(size))
    if not isinstance(adj, Tensor):
        raise TypeError(f"edge_index must be a [2, num_edges] Tensor, a sparse matrix or an "
                        f"iognn.TypedGraph, got {type(adj).__name__}")
    if edge_type is None:
        raise ValueError("edge_type is required with an edge_index tensor")
    if not isinstance(edge_type, Tensor):
        raise TypeError(f"edge_type must be a Tensor, got {type(edge_type).__name__}")

    def build():
        return weakref.ref(edge_type), edge_type._version, TypedGraph(adj, edge_type, num_types,
                                                                      size)

    def fits(entry) -> bool:
        owner, version, tg = entry
        return owner() is edge_type and version == edge_type._version and tg.size == tuple(size)

    return cached(adj, ("typed", num_types), build, fits=fits)[2]


class RGCNConv(MessagePassingModule):
    r"""Relational graph convolution, replacing ``torch_geometric.nn.RGCNConv`` (Schlichtkrull et
    al., "Modeling Relational Data with Graph Convolutional Networks", ESWC 2018).

    .. math::
        \mathbf{x}'_i = \mathbf{\Theta}_{\mathrm{root}} \mathbf{x}_i + \mathbf{b}
        + \sum_{r \in \mathcal{R}} \frac{1}{|\mathcal{N}_r(i)|}
          \sum_{j \in \mathcal{N}_r(i)} \mathbf{\Theta}_r \mathbf{x}_j

    (``aggr='add'``/``'sum'``: without the ``1 / |N_r(i)|``). An empty ``N_r(i)`` contributes 0.

    Args:
        in_channels (int or tuple): Size of each input feature vector, or a ``(source,
            destination)`` pair; without input features, the number of nodes.
        out_channels (int): Size of each output feature vector.
        num_relations (int): Number of relations R.
        num_bases (int, optional): Basis decomposition ``Theta_r = sum_b comp[r, b] weight[b]``
            (computed once per forward). (default: ``None``)
        num_blocks (int, optional): Block-diagonal decomposition (``weight [R, B, F_in / B,
            F_out / B]``). (default: ``None``)
        aggr (str, optional): ``'mean'`` (per relation), ``'add'`` or ``'sum'``.
            (default: ``'mean'``)
        root_weight (bool, optional): Add ``x_i @ root``. (default: ``True``)
        is_sorted (bool, optional): Accepted, no effect (nothing is sorted per call).
        bias (bool, optional): Learn an additive bias. (default: ``True``)
        **kwargs (optional): PyG's ``MessagePassing`` arguments (``aggr_kwargs``,
            ``decomposed_layers`` (no effect), ``flow``).

    Shapes:
        - **input:** ``x`` ``[N, F_in]``, a node index tensor ``[N]`` or ``None`` (one-hot
          features: the weight rows are node embeddings), or a pair ``(x_src, x_dst)`` of
          those; ``edge_index`` ``[2, E]`` (int32 / int64, ``EdgeIndex``), a sparse matrix whose
          values are the edge types, or an ``iognn.TypedGraph``; ``edge_type`` ``[E]``
          (int32 / int64, in ``[0, R)``).
        - **output:** ``[N_dst, F_out]``

    iognn differences:
        - ``aggr`` other than mean / add / sum (PyG computes e.g. ``'max'`` relation by relation)
          and ``flow='target_to_source'`` raise ``NotImplementedError``.
        - A bad ``edge_type`` (float, wrong length, out of range) raises ``TypeError`` /
          ``ValueError`` / ``IndexError`` naming ``edge_type``; a torch.sparse adjacency (PyG
          fails on it) is read as PyG reads a SparseTensor: its values are the edge types.
        - Not scriptable with ``torch.jit.script``; no ``propagate``/``message`` machinery.
    """

    FIXED_NODE_DIM = 0

    def __init__(self, in_channels: Union[int, Tuple[int, int]], out_channels: int,
                 num_relations: int, num_bases: Optional[int] = None,
                 num_blocks: Optional[int] = None, aggr: str = "mean", root_weight: bool = True,
                 is_sorted: bool = False, bias: bool = True, **kwargs):
        super().__init__()
        name = type(self).__name__
        if "node_dim" in kwargs:
            raise TypeError(f"{name}.__init__() got multiple values for keyword argument "
                            f"'node_dim'")
        MessagePassingArgs(name, dict(kwargs, aggr=aggr), node_dim=0).install(self)
        if num_bases is not None and num_blocks is not None:
            raise ValueError("Can not apply both basis-decomposition and "
                             "block-diagonal-decomposition at the same time.")
        store_arguments(self, in_channels=in_channels, out_channels=out_channels,
                        num_relations=num_relations, num_bases=num_bases, num_blocks=num_blocks,
                        is_sorted=is_sorted)
        if isinstance(in_channels, int):
            in_channels = (in_channels, in_channels)
        self.in_channels_l = in_channels[0]
        if num_bases is not None:
            self.weight = Parameter(torch.empty(num_bases, in_channels[0], out_channels))
            self.comp = Parameter(torch.empty(num_relations, num_bases))
        elif num_blocks is not None:
            if in_channels[0] % num_blocks or out_channels % num_blocks:
                raise AssertionError(f"num_blocks={num_blocks} must divide in_channels="
                                     f"{in_channels[0]} and out_channels={out_channels}")
            self.weight = Parameter(torch.empty(num_relations, num_blocks,
                                                in_channels[0] // num_blocks,
                                                out_channels // num_blocks))
            self.register_parameter("comp", None)
        else:
            self.weight = Parameter(torch.empty(num_relations, in_channels[0], out_channels))
            self.register_parameter("comp", None)
        if root_weight:
            self.root = Parameter(torch.empty(in_channels[1], out_channels))
        else:
            self.register_parameter("root", None)
        if bias:
            self.bias = Parameter(torch.empty(out_channels))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.aggr_module.reset_parameters()
        glorot_(self.weight)
        glorot_(self.comp)
        glorot_(self.root)
        zeros_(self.bias)

    def relation_weight(self) -> Tensor:
        """``[R, F_in, F_out]``: the per-relation weights the decomposition stands for (the
        weight itself without one)."""
        weight = self.weight
        if self.num_bases is not None:
            return (self.comp @ weight.reshape(self.num_bases, -1)).view(
                self.num_relations, self.in_channels_l, self.out_channels)
        if self.num_blocks is not None:
            # Block b of relation r on the diagonal: [R, B, F_in/B, B, F_out/B] -> [R, F_in, F_out].
            eye = torch.eye(self.num_blocks, dtype=weight.dtype, device=weight.device)
            return torch.einsum("rbio,bc->rbico", weight, eye).reshape(
                self.num_relations, self.in_channels_l, self.out_channels)
        return weight

    # What an aggr other than mean / add / sum raises at the forward (PyG computes RGCNConv's
    # relation by relation; its FastRGCNConv asserts).
    _aggr_error = NotImplementedError

    def _reduce(self) -> str:
        if self.aggr not in _REDUCE:
            raise self._aggr_error(f"{type(self).__name__}: iognn computes aggr 'mean', 'add' or "
                                   f"'sum'; aggr={self.aggr!r} is not supported")
        return _REDUCE[self.aggr]

    def _source_input(self, x_l: Optional[Tensor]) -> Optional[Tensor]:
        """What typed_propagate reads for the sources: features, node positions (one-hot rows
        of the weight) or None (the source index itself)."""
        return x_l

    def forward(self, x: Union[Optional[Tensor], Tuple[Optional[Tensor], Tensor]], edge_index,
                edge_type: Optional[Tensor] = None) -> Tensor:
        reduce = self._reduce()
        x_l = x[0] if isinstance(x, tuple) else x
        x_r = x[1] if isinstance(x, tuple) else x_l
        num_src = self.in_channels_l if x_l is None else x_l.size(0)
        num_dst = num_src if x_r is None else x_r.size(0)
        featureless = x_r is None or not torch.is_floating_point(x_r)
        if self.num_blocks is not None and featureless:
            raise ValueError("Block-diagonal decomposition not supported for non-continuous "
                             "input features.")
        tg = _typed_graph(edge_index, edge_type, self.num_relations, (num_src, num_dst))
        out = typed_propagate(tg, self._source_input(x_l), self.relation_weight(), reduce)
        # PyG accumulates into an fp32 zero tensor: half-precision inputs give fp32 outputs.
        out = out.to(torch.promote_types(out.dtype, torch.float32))
        if self.root is not None:
            if featureless:
                out = out + (self.root[:num_dst] if x_r is None else self.root[x_r])
            else:
                out = out + x_r @ self.root
        if self.bias is not None:
            out = out + self.bias
        return out

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"num_relations={self.num_relations})")


class FastRGCNConv(RGCNConv):
    r"""Relational graph convolution, replacing ``torch_geometric.nn.FastRGCNConv``: RGCNConv's
    parameters and results (see :class:`RGCNConv`) without PyG's per-edge weight tensor
    ``[E, F_in, F_out]``; the same computation as iognn's RGCNConv.

    iognn differences: as :class:`RGCNConv`; an ``aggr`` other than mean / add / sum raises
    ``AssertionError`` at the forward, as in PyG.
    """

    _aggr_error = AssertionError

    def _source_input(self, x_l: Optional[Tensor]) -> Optional[Tensor]:
        # PyG's FastRGCNConv reads one-hot rows at the edge's source index, whatever the
        # values of a node index tensor.
        return x_l if x_l is None or torch.is_floating_point(x_l) else None
