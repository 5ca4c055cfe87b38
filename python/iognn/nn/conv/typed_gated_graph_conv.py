"""``TypedGatedGraphConv``: the gated graph network with typed edges (Li et al., ICLR 2016, as
used on program graphs by Allamanis et al., ICLR 2018), on ``iognn.ops.typed_propagate``.

Each of the ``num_steps`` steps computes ``m_i = sum_{e = (j -> i)} (h_j W_{type(e)} +
b_{type(e)})`` in one typed_propagate call (per-(destination, type) aggregation and per-type
GEMMs: no ``E x H`` message tensor) and then ``h_i = GRUCell(m_i, h_i)``. The weights, biases and
GRU are shared over the steps. ``docs/ggnn.md`` relates the layout to DGL's ``GatedGraphConv``
and gives the conversion (``from_dgl_state_dict`` / ``to_dgl_state_dict``).
"""
from __future__ import annotations

import weakref
from typing import Dict, Optional

import torch
from torch import Tensor

from ...adjacency import plain_edge_index
from ...ops.typed_propagate import typed_propagate
from ...typed import TypedGraph
from .._amp import autocast_input, like
from .._graph import cached
from .gated_graph_conv import initial_state

_REDUCES = ("sum", "mean")


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

    Shapes:
        - **input:** ``x`` ``[N, F_in]`` with ``F_in <= channels``; ``edge_index`` ``[2, E]``
          (int32/int64, or an ``EdgeIndex``) with ``edge_type`` ``[E]`` (int32/int64), or a
          prebuilt ``iognn.TypedGraph`` (``edge_type`` then omitted).
        - **output:** ``[N, channels]``

    The TypedGraph of an ``(edge_index, edge_type)`` pair is built once and cached on the
    ``edge_type`` tensor (rebuilt when either tensor is modified in place).
    """

    def __init__(self, channels: int, num_steps: int, num_edge_types: int, bias: bool = True,
                 gru_bias: bool = True, reduce: str = "sum"):
        super().__init__()
        if reduce not in _REDUCES:
            raise ValueError(f"reduce must be one of {_REDUCES}, got {reduce!r}")
        if num_edge_types < 1:
            raise ValueError(f"num_edge_types must be at least 1, got {num_edge_types}")
        self.channels = channels
        self.num_steps = num_steps
        self.num_edge_types = num_edge_types
        self.reduce = reduce
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

    def forward(self, x: Tensor, edge_index, edge_type: Optional[Tensor] = None) -> Tensor:
        h = initial_state("TypedGatedGraphConv", x, self.channels)
        tg = self.typed_graph(edge_index, edge_type, h.size(0))
        rnn = self.rnn
        for _ in range(self.num_steps):
            hm = autocast_input(h)  # messages in the autocast dtype, the state in x's
            m = typed_propagate(tg, hm, like(self.weight, hm), self.reduce,
                                bias=like(self.bias, hm))
            h = torch.gru_cell(m, h, rnn.weight_ih, rnn.weight_hh, rnn.bias_ih, rnn.bias_hh)
        return h

    def typed_graph(self, edge_index, edge_type: Optional[Tensor], num_nodes: int) -> TypedGraph:
        """The (cached) TypedGraph of the adjacency, checked against the layer and ``x``."""
        if isinstance(edge_index, TypedGraph):
            if edge_type is not None:
                raise ValueError("TypedGatedGraphConv: edge_type must be None when edge_index "
                                 "is an iognn.TypedGraph (it holds the types)")
            tg = edge_index
        else:
            if edge_type is None:
                raise ValueError("TypedGatedGraphConv: edge_type is required with an "
                                 "edge_index tensor")
            if not isinstance(edge_index, Tensor) or not isinstance(edge_type, Tensor):
                raise TypeError("TypedGatedGraphConv: edge_index and edge_type must be "
                                "Tensors (or edge_index an iognn.TypedGraph)")
            tg = cached_typed_graph(edge_index, edge_type, self.num_edge_types, num_nodes)
        if tg.num_types != self.num_edge_types or tg.size != (num_nodes, num_nodes):
            raise ValueError(f"TypedGatedGraphConv: the typed graph has {tg.num_types} types and "
                             f"sizes {tg.size}, the layer {self.num_edge_types} types and x "
                             f"{num_nodes} nodes")
        return tg

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
        return (f"{self.__class__.__name__}({self.channels}, num_steps={self.num_steps}, "
                f"num_edge_types={self.num_edge_types}, reduce={self.reduce!r})")


def cached_typed_graph(edge_index: Tensor, edge_type: Tensor, num_types: int,
                       num_nodes: int) -> TypedGraph:
    """The TypedGraph of ``(edge_index, edge_type)``, stored on ``edge_type`` with a weak
    reference to ``edge_index`` and its version: reused while both tensors are the same,
    unmodified objects and the sizes match."""
    plain = plain_edge_index(edge_index)

    def build():
        return (weakref.ref(plain), plain._version,
                TypedGraph(plain, edge_type, num_types, (num_nodes, num_nodes)))

    def fits(entry) -> bool:
        return (entry[0]() is plain and entry[1] == plain._version
                and entry[2].size == (num_nodes, num_nodes))

    return cached(edge_type, ("typed_graph", num_types), build, fits=fits)[2]


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
