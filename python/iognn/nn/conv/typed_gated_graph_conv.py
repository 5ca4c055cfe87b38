"""``TypedGatedGraphConv``: the gated graph network with typed edges (Li et al., ICLR 2016, as
used on program graphs by Allamanis et al., ICLR 2018), on ``iognn.ops.typed_propagate``.

Each of the ``num_steps`` steps computes ``m_i = sum_{e = (j -> i)} (h_j W_{type(e)} +
b_{type(e)})`` in one typed_propagate call (per-(destination, type) aggregation and per-type
GEMMs: no ``E x H`` message tensor) and then ``h_i = GRUCell(m_i, h_i)``. The weights, biases and
GRU are shared over the steps. ``docs/ggnn.md`` relates the layout to DGL's ``GatedGraphConv``
and gives the conversion (``from_dgl_state_dict`` / ``to_dgl_state_dict``).

With ``path='dense'`` or ``'auto'`` and a batch of small graphs (``ptr``, or a prebuilt
``iognn.dense`` packing), the steps may run on Balog et al.'s dense supergraph path instead
(``iognn.dense.dense_typed_propagate``, the same sum); the choice of each forward is kept in
``last_path`` / ``last_choice`` (``docs/dense.md``).
"""
from __future__ import annotations

import weakref
from typing import Dict, Optional

import torch
from torch import Tensor

from ...adjacency import plain_edge_index
from ...dense import (DeviceRates, PackedSupergraphs, PathChoice, calibrate, choose_path,
                      dense_typed_propagate, pack_supergraphs)
from ...dense.pack import check_supergraph_shape
from ...ops.typed_propagate import typed_propagate
from ...typed import TypedGraph
from .._amp import autocast_input, like
from .._graph import cached
from ._common import store_arguments
from .gated_graph_conv import initial_state
from .rgcn_conv import _typed_graph

_REDUCES = ("sum", "mean")
PATHS = ("sparse", "dense", "auto")
# 'auto' takes the dense path only when its estimate is this many times below the sparse one's:
# the estimate is a roofline sum, so a close call stays on the sparse path.
AUTO_MARGIN = 2.0
_NO_ESTIMATE = float("nan")


class TypedGatedGraphConv(torch.nn.Module):
    r"""Gated graph network over typed edges (iognn's own layer; PyG has no typed GGNN).

    .. math::
        \mathbf{h}_i^{(0)} &= \mathbf{x}_i \, \Vert \, \mathbf{0}

        \mathbf{m}_i^{(t+1)} &= \sum_{r} \; \mathrm{reduce}_{e = (j \to i),\, \mathrm{type}(e) = r}
        \left( \mathbf{h}_j^{(t)} \mathbf{W}_r + \mathbf{b}_r \right)

        \mathbf{h}_i^{(t+1)} &= \mathrm{GRU}(\mathbf{m}_i^{(t+1)}, \mathbf{h}_i^{(t)})

    for ``t < num_steps``; ``reduce`` is the sum (Li et al., DGL) or the mean within each
    (destination, type) group. :math:`\mathbf{W}_r` is ``weight[r]`` (``[H, H]``, applied as
    ``h @ weight[r]``), :math:`\mathbf{b}_r` is ``bias[r]`` (added once per edge: with the sum, a
    node gets :math:`n_{i,r} \mathbf{b}_r`), the GRU is ``rnn`` (``torch.nn.GRUCell(H, H)``),
    all shared over the steps.

    Args:
        channels (int): Hidden size :math:`H`; narrower input features are padded with zeros,
            wider ones raise ``ValueError``.
        num_steps (int): Number of propagation steps :math:`T`.
        num_edge_types (int): Number of edge types :math:`R`; ``edge_type`` lies in
            ``[0, R)`` (a graph with reverse edges counts them as types of their own).
        bias (bool, optional): Learn the per-type message biases ``bias [R, H]``.
            (default: ``True``)
        gru_bias (bool, optional): Learn the GRU's biases. (default: ``True``)
        reduce (str, optional): ``'sum'`` or ``'mean'`` per (destination, type) group.
            (default: ``'sum'``)
        path (str, optional): where the steps run: ``'sparse'`` (``typed_propagate``),
            ``'dense'`` (the dense supergraph path of ``iognn.dense``; ``reduce='sum'`` only;
            graphs that do not fit a supergraph run on its sparse remainder) or ``'auto'``
            (dense only when ``iognn.dense.choose_path`` estimates it at least
            ``AUTO_MARGIN`` times faster for the batch, with ``rates`` or the device's measured
            ``iognn.dense.calibrate`` rates). (default: ``'sparse'``)
        supergraph_size (int, optional): nodes per supergraph, S, when this layer packs a
            batch. (default: ``256``)
        block_size (int, optional): nodes per tile, b (S a multiple of it); graphs with a
            bandwidth above b after RCM go to the remainder. (default: ``32``)
        rates (iognn.dense.DeviceRates, optional): the rates ``'auto'`` estimates with
            (default: measured once per device and dtype by ``iognn.dense.calibrate``).

    Shapes:
        - **input:** ``x`` ``[N, F_in]`` with ``F_in <= channels``; ``edge_index`` ``[2, E]``
          (int32/int64, or an ``EdgeIndex``) with ``edge_type`` ``[E]`` (int32/int64), or a
          prebuilt ``iognn.TypedGraph`` (``edge_type`` then omitted).
        - **output:** ``[N, channels]``

    The TypedGraph of an ``(edge_index, edge_type)`` pair is built once and cached, as RGCNConv
    caches it (rebuilt when either tensor is modified in place); the packing of the dense and auto
    paths is cached on ``edge_type`` (keyed on ``ptr`` too).

    After each forward, ``last_path`` is the path its steps took (``'sparse'`` or ``'dense'``)
    and ``last_choice`` an ``iognn.dense.PathChoice``: the reason, the estimates and the
    packing's measures (tile fill, edges per slot, inflation, padding, remainder share).
    """

    def __init__(self, channels: int, num_steps: int, num_edge_types: int, bias: bool = True,
                 gru_bias: bool = True, reduce: str = "sum", path: str = "sparse",
                 supergraph_size: int = 256, block_size: int = 32,
                 rates: Optional[DeviceRates] = None):
        super().__init__()
        if reduce not in _REDUCES:
            raise ValueError(f"reduce must be one of {_REDUCES}, got {reduce!r}")
        if num_edge_types < 1:
            raise ValueError(f"num_edge_types must be at least 1, got {num_edge_types}")
        if not isinstance(path, str) or path not in PATHS:
            raise ValueError(f"path must be one of {PATHS}, got {path!r}")
        if path == "dense" and reduce != "sum":
            raise ValueError("path='dense' computes reduce='sum' only; use path='sparse' or "
                             f"'auto' with reduce={reduce!r}")
        self.supergraph_size, self.block_size = check_supergraph_shape(supergraph_size,
                                                                       block_size)
        if rates is not None and not isinstance(rates, DeviceRates):
            raise TypeError("rates must be an iognn.dense.DeviceRates, got "
                            f"{type(rates).__name__}")
        store_arguments(self, channels=channels, num_steps=num_steps, num_edge_types=num_edge_types,
                        reduce=reduce, path=path, rates=rates)
        self.last_path: Optional[str] = None
        self.last_choice: Optional[PathChoice] = None
        self.weight = torch.nn.Parameter(torch.empty(num_edge_types, channels, channels))
        if bias:
            self.bias = torch.nn.Parameter(torch.empty(num_edge_types, channels))
        else:
            self.register_parameter("bias", None)
        self.rnn = torch.nn.GRUCell(channels, channels, bias=gru_bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """DGL's initialisation: the GRU's own, then each ``weight[r]`` Xavier-normal with the
        ReLU gain and zero biases."""
        self.rnn.reset_parameters()
        gain = torch.nn.init.calculate_gain("relu")
        with torch.no_grad():
            for r in range(self.num_edge_types):
                torch.nn.init.xavier_normal_(self.weight[r], gain=gain)
            if self.bias is not None:
                self.bias.zero_()

    def forward(self, x: Tensor, edge_index, edge_type: Optional[Tensor] = None,
                ptr: Optional[Tensor] = None,
                packed: Optional[PackedSupergraphs] = None) -> Tensor:
        """``ptr`` (PyG's ``batch.ptr``: graph g owns nodes ``ptr[g] .. ptr[g + 1] - 1``) or
        ``packed`` (``iognn.dense.pack_supergraphs`` of this batch, e.g. built in the data
        loader) give the dense and auto paths the batch's graphs; without either the input is
        one graph. The sparse path ignores them."""
        h = initial_state("TypedGatedGraphConv", x, self.channels)
        if self.path == "sparse":
            self.last_path, self.last_choice = "sparse", _SPARSE_SETTING
            tg = self.typed_graph(edge_index, edge_type, h.size(0))
            return self._steps(h, lambda hm: typed_propagate(
                tg, hm, like(self.weight, hm), self.reduce, bias=like(self.bias, hm)))
        choice, packed = self._choose(h, edge_index, edge_type, ptr, packed)
        self.last_path, self.last_choice = choice.path, choice
        if choice.path == "dense":
            return self._steps(h, lambda hm: dense_typed_propagate(
                packed, hm, like(self.weight, hm), like(self.bias, hm)))
        tg = self.typed_graph(edge_index, edge_type, h.size(0))
        return self._steps(h, lambda hm: typed_propagate(
            tg, hm, like(self.weight, hm), self.reduce, bias=like(self.bias, hm)))

    def _steps(self, h: Tensor, propagate) -> Tensor:
        """``num_steps`` of ``h = GRU(propagate(h), h)``."""
        rnn = self.rnn
        for _ in range(self.num_steps):
            hm = autocast_input(h)  # messages in the autocast dtype, the state in x's
            m = propagate(hm)
            h = torch.gru_cell(m, h, rnn.weight_ih, rnn.weight_hh, rnn.bias_ih, rnn.bias_hh)
        return h

    # ---- the dense path --------------------------------------------------------------------
    def _choose(self, h: Tensor, edge_index, edge_type, ptr, packed):
        """(PathChoice, packing or None) of this forward for ``path`` 'dense' or 'auto'."""
        dtype = autocast_input(h).dtype
        if self.path == "auto" and self.reduce != "sum":
            return PathChoice("sparse", f"sparse: reduce={self.reduce!r} (the dense path sums)",
                              _NO_ESTIMATE, _NO_ESTIMATE), None
        if packed is None:
            if self.path == "auto" and ptr is None and h.size(0) > self.supergraph_size:
                return PathChoice("sparse", f"sparse: one graph of {h.size(0)} nodes (no ptr) "
                                  f"does not fit a supergraph of {self.supergraph_size}",
                                  _NO_ESTIMATE, _NO_ESTIMATE), None
            packed = self.packing(edge_index, edge_type, ptr, h.size(0), dtype)
        else:
            self._check_packing(packed, h.size(0))
        if self.path == "dense":
            estimate = choose_path(packed, self.channels, self.channels, dtype, self.rates)
            return PathChoice("dense", f"dense: forced by path='dense' (the estimate at "
                              f"{'the given' if self.rates else 'uncalibrated'} rates says "
                              f"{estimate.reason})", estimate.dense_seconds,
                              estimate.sparse_seconds, estimate.measures), packed
        rates = self.rates or calibrate(h.device, dtype)
        return choose_path(packed, self.channels, self.channels, dtype, rates,
                           margin=AUTO_MARGIN), packed

    def packing(self, edge_index, edge_type: Optional[Tensor], ptr: Optional[Tensor],
                num_nodes: int, dtype: torch.dtype = torch.float32) -> PackedSupergraphs:
        """The (cached) supergraph packing of the batch, tiles in ``dtype``: built once per
        ``(edge_index, edge_type, ptr)`` and stored on ``edge_type`` (on a TypedGraph input,
        on it)."""
        if isinstance(edge_index, TypedGraph):
            if edge_type is not None:
                raise ValueError("TypedGatedGraphConv: edge_type must be None when edge_index "
                                 "is an iognn.TypedGraph (it holds the types)")
            tg = edge_index
            owner, plain, types = tg, None, None
        else:
            self._check_edge_tensors(edge_index, edge_type)
            owner, plain, types = edge_type, plain_edge_index(edge_index), edge_type
        if ptr is not None and not isinstance(ptr, Tensor):
            raise TypeError(f"TypedGatedGraphConv: ptr must be a Tensor, got {type(ptr).__name__}")
        if ptr is None:
            ptr = torch.tensor([0, num_nodes])
            ptr_ref, ptr_version = None, None
        else:
            ptr_ref, ptr_version = weakref.ref(ptr), ptr._version

        def build():
            if plain is None:
                edges, kinds = torch.stack([tg.src, tg.dst]), tg.type
            else:
                edges, kinds = plain, types
            packed = pack_supergraphs((edges, kinds, ptr), self.num_edge_types,
                                      self.supergraph_size, self.block_size, dtype=dtype)
            self._check_packing(packed, num_nodes)
            return (None if plain is None else weakref.ref(plain),
                    None if plain is None else plain._version, ptr_ref, ptr_version, packed)

        def fits(entry) -> bool:
            return ((plain is None or (entry[0]() is plain and entry[1] == plain._version))
                    and (entry[2] is None if ptr_ref is None
                         else entry[2] is not None and entry[2]() is ptr and entry[3] == ptr_version)
                    and entry[4].num_nodes == num_nodes)

        key = ("packed", self.num_edge_types, self.supergraph_size, self.block_size, dtype)
        return cached(owner, key, build, versioned=plain is not None, fits=fits)[4]

    def _check_packing(self, packed, num_nodes: int) -> None:
        if not isinstance(packed, PackedSupergraphs):
            raise TypeError("TypedGatedGraphConv: packed must be an iognn.dense."
                            f"PackedSupergraphs, got {type(packed).__name__}")
        if packed.num_edge_types != self.num_edge_types or packed.num_nodes != num_nodes:
            raise ValueError(f"TypedGatedGraphConv: the packing has {packed.num_edge_types} edge "
                             f"types and {packed.num_nodes} nodes, the layer "
                             f"{self.num_edge_types} types and x {num_nodes} nodes")

    def typed_graph(self, edge_index, edge_type: Optional[Tensor], num_nodes: int) -> TypedGraph:
        """The (cached) TypedGraph of the adjacency, checked against the layer and ``x``."""
        if isinstance(edge_index, TypedGraph):
            if edge_type is not None:
                raise ValueError("TypedGatedGraphConv: edge_type must be None when edge_index "
                                 "is an iognn.TypedGraph (it holds the types)")
            tg = edge_index
        else:
            self._check_edge_tensors(edge_index, edge_type)
            tg = _typed_graph(edge_index, edge_type, self.num_edge_types,
                              (num_nodes, num_nodes))
        if tg.num_types != self.num_edge_types or tg.size != (num_nodes, num_nodes):
            raise ValueError(f"TypedGatedGraphConv: the typed graph has {tg.num_types} types and "
                             f"sizes {tg.size}, the layer {self.num_edge_types} types and x "
                             f"{num_nodes} nodes")
        return tg

    @staticmethod
    def _check_edge_tensors(edge_index, edge_type) -> None:
        if edge_type is None:
            raise ValueError("TypedGatedGraphConv: edge_type is required with an "
                             "edge_index tensor")
        if not isinstance(edge_index, Tensor) or not isinstance(edge_type, Tensor):
            raise TypeError("TypedGatedGraphConv: edge_index and edge_type must be "
                            "Tensors (or edge_index an iognn.TypedGraph)")

    # ---- DGL's layout ----------------------------------------------------------------------
    @classmethod
    def from_dgl_state_dict(cls, state_dict: Dict[str, Tensor], num_steps: int,
                            reduce: str = "sum") -> "TypedGatedGraphConv":
        """A layer holding the weights of DGL's ``GatedGraphConv(in_feats, out_feats, n_steps,
        n_etypes, bias)`` ``state_dict`` (``linears.{r}.weight [H, H]`` applied as ``h @ W.T``,
        ``linears.{r}.bias [H]``, ``gru.*``). ``num_steps`` is DGL's ``n_steps`` (not stored in
        its state)."""
        state = dgl_to_iognn_state_dict(state_dict)
        num_types, channels = state["weight"].shape[:2]
        layer = cls(channels, num_steps, num_types, bias="bias" in state,
                    gru_bias="rnn.bias_ih" in state, reduce=reduce)
        layer.load_state_dict(state)
        return layer

    def to_dgl_state_dict(self) -> Dict[str, Tensor]:
        """This layer's weights as DGL's ``GatedGraphConv`` ``state_dict`` (message biases are
        required: DGL's per-type ``nn.Linear`` always has one)."""
        return iognn_to_dgl_state_dict(self.state_dict())

    def __repr__(self) -> str:
        dense = ("" if self.path == "sparse" else f", path={self.path!r}, supergraph_size="
                 f"{self.supergraph_size}, block_size={self.block_size}")
        return (f"{self.__class__.__name__}({self.channels}, num_steps={self.num_steps}, "
                f"num_edge_types={self.num_edge_types}, reduce={self.reduce!r}{dense})")


_SPARSE_SETTING = PathChoice("sparse", "sparse: path='sparse' (the layer's setting)",
                             _NO_ESTIMATE, _NO_ESTIMATE)


def dgl_to_iognn_state_dict(state_dict: Dict[str, Tensor]) -> Dict[str, Tensor]:
    """DGL ``GatedGraphConv``'s ``state_dict`` in TypedGatedGraphConv's names and layout:
    ``weight[r] = linears.{r}.weight.T``, ``bias[r] = linears.{r}.bias``, ``rnn.* = gru.*``."""
    num_types = sum(1 for k in state_dict if k.startswith("linears.") and k.endswith(".weight"))
    if num_types == 0 or any(f"linears.{r}.weight" not in state_dict for r in range(num_types)):
        raise ValueError("not a DGL GatedGraphConv state_dict: expected linears.0.weight, ..., "
                         "linears.{n_etypes-1}.weight")
    state = {"weight": torch.stack([state_dict[f"linears.{r}.weight"].t()
                                    for r in range(num_types)])}
    if "linears.0.bias" in state_dict:
        state["bias"] = torch.stack([state_dict[f"linears.{r}.bias"] for r in range(num_types)])
    for key, value in state_dict.items():
        if key.startswith("gru."):
            state["rnn." + key[len("gru."):]] = value
    return state


def iognn_to_dgl_state_dict(state_dict: Dict[str, Tensor]) -> Dict[str, Tensor]:
    """``dgl_to_iognn_state_dict``'s inverse."""
    if "bias" not in state_dict:
        raise ValueError("DGL's GatedGraphConv has per-type message biases: build the layer "
                         "with bias=True to export it")
    state = {}
    for r, (w, b) in enumerate(zip(state_dict["weight"], state_dict["bias"])):
        state[f"linears.{r}.weight"] = w.t().contiguous()
        state[f"linears.{r}.bias"] = b.clone()
    for key, value in state_dict.items():
        if key.startswith("rnn."):
            state["gru." + key[len("rnn."):]] = value
    return state
