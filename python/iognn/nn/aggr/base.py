"""``Aggregation``: the base of iognn's aggregation modules, callable like PyG's.

Two entry points:

- ``aggregate(graph, x)``: reduce ``x[src]`` over the in-edges of every destination of an
  ``iognn.Graph`` (``x [num_src, *feat] -> [num_dst, *feat']``, reducing over dim 0, each trailing
  position independently). Layers (SAGEConv, PNAConv, ...) call this with their own graph.
- ``forward(x, index=None, ptr=None, dim_size=None, dim=-2)``: PyG's call. The elements of ``x``
  along ``dim`` are messages; message e goes to group ``index[e]``. iognn's ops need a CSR, so a
  Graph is built with message e as source e and ``index[e]`` as its destination
  (``Graph(stack([arange(E), index]), (E, dim_size))``: one counting sort by group, O(E + dim_size),
  which also validates ``index``). With ``ptr`` only (sorted messages), ``index`` is recovered by a
  binary search of each position in ``ptr``. The Graph is cached per index/ptr tensor (see
  ``nn/_graph.py``), so a fixed ``batch`` vector is sorted once. ``index=None, ptr=None`` reduces
  everything into one group; ``dim_size`` defaults to ``index.max() + 1`` (a device sync: pass it,
  and under torch.compile it is required).
"""
from __future__ import annotations

from typing import List, Optional

import torch
from torch import Tensor

from ...graph import Graph
from .._amp import autocast_input
from .._graph import cached_graph


class Aggregation(torch.nn.Module):
    r"""Base class of iognn's aggregations, replacing ``torch_geometric.nn.aggr.Aggregation``.

    An aggregation reduces a set of messages into one vector per group:

    .. math::
        \mathbf{r}_g = \mathrm{reduce} \left( \{ \mathbf{x}_e : \mathrm{index}_e = g \} \right),
        \qquad g = 0, \ldots, G - 1

    and a group without messages gets 0. Called as PyG's, ``aggr(x, index=None, ptr=None,
    dim_size=None, dim=-2)``: message ``e`` is the ``e``-th slice of ``x`` along ``dim`` and
    goes to group ``index[e]``; ``ptr`` (CSR offsets of sorted messages) may replace ``index``;
    with neither, everything goes to one group. ``dim_size`` is :math:`G`; without it
    ``index.max() + 1`` is read (a device sync; required under ``torch.compile``). The grouping
    is cached per ``index``/``ptr`` tensor, so a fixed ``batch`` vector is sorted once. Layers
    call :meth:`aggregate` on their own ``iognn.Graph`` instead. Subclasses implement
    :meth:`aggregate`.

    Shapes:
        - **input:** ``x`` ``[*, E, *, F]`` (messages along ``dim``); ``index`` ``[E]`` (int32 or
          int64) or ``ptr`` ``[G + 1]``; ``dim_size`` :math:`G` (optional).
        - **output:** ``x``'s shape with ``E`` replaced by ``G`` along ``dim`` (the last
          dimension may change for multi-aggregations).

    iognn differences:
        - A ``ptr`` that is not non-decreasing with ``ptr[0] = 0`` and ``ptr[-1] = E`` raises
          ``ValueError`` (PyG drops messages or reads out of range).
        - Cannot be compiled with ``torch.jit.script`` (use ``torch.compile``).
    """

    def reset_parameters(self) -> None:
        """Re-initialises learnable parameters (none by default)."""

    def aggregate(self, graph, x: Tensor) -> Tensor:
        raise NotImplementedError

    def fused_reduces(self) -> Optional[List[str]]:
        """The ``segment_reduce`` names whose concatenated results (``[N, K * F]`` for
        ``x [E, F]``) are exactly this aggregation, or None. Wrappers (DegreeScalerAggregation)
        use it to hand the whole reduction to one kernel with their own epilogue."""
        return None

    def forward(self, x: Tensor, index: Optional[Tensor] = None, ptr: Optional[Tensor] = None,
                dim_size: Optional[int] = None, dim: int = -2) -> Tensor:
        if not isinstance(x, Tensor):
            raise TypeError(f"x must be a Tensor, got {type(x).__name__}")
        if dim >= x.dim() or dim < -x.dim():
            raise ValueError(f"Encountered invalid dimension '{dim}' of source tensor with "
                             f"{x.dim()} dimensions")
        dim = dim % x.dim()
        graph = message_index_graph(x.size(dim), index, ptr, dim_size, x.device)
        out = self.aggregate(graph, x.movedim(dim, 0) if dim else x)
        return out.movedim(0, dim) if dim else out

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}()"


def message_index_graph(num_messages, index: Optional[Tensor], ptr: Optional[Tensor],
                        dim_size: Optional[int], device: torch.device) -> Graph:
    """The Graph of PyG's (index, ptr, dim_size) grouping of ``num_messages`` messages."""
    if ptr is not None:
        _check_index("ptr", ptr)
        if dim_size is None:
            dim_size = ptr.numel() - 1
        elif dim_size != ptr.numel() - 1:
            raise ValueError(f"Encountered invalid 'dim_size' (got '{dim_size}' but expected "
                             f"'{ptr.numel() - 1}')")
    if index is not None:
        _check_index("index", index)
        if index.numel() != num_messages:
            raise ValueError(f"index has {index.numel()} entries but x has {num_messages} "
                             f"elements along the aggregated dimension")
        key = index
    elif ptr is not None:
        key = ptr
    else:  # PyG: everything into one group
        index = torch.zeros(num_messages, dtype=torch.long, device=device)
        key = None
    if dim_size is None:
        dim_size = int(index.max()) + 1 if index.numel() > 0 else 0

    def build() -> Graph:
        groups = index
        if groups is None:  # sorted messages: position p is in the last group d with ptr[d] <= p
            _check_ptr(ptr, num_messages)
            positions = torch.arange(num_messages, dtype=ptr.dtype, device=ptr.device)
            groups = torch.searchsorted(ptr, positions, right=True) - 1
        sources = torch.arange(num_messages, dtype=groups.dtype, device=groups.device)
        try:
            return Graph(torch.stack([sources, groups]), (num_messages, dim_size))
        except IndexError as error:
            if index is not None and int(index.min()) >= 0:  # PyG's error for a short dim_size
                raise ValueError(f"Encountered invalid 'dim_size' (got '{dim_size}' but "
                                 f"expected >= '{int(index.max()) + 1}')") from None
            raise IndexError(f"{'index' if index is not None else 'ptr'} assigns a message to "
                             f"a group outside [0, dim_size={dim_size}) ({error})") from None

    if key is None:
        return build()
    return cached_graph(key, ("groups",), build, size=(num_messages, dim_size))


def _check_index(name: str, t) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a Tensor, got {type(t).__name__}")
    if t.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"{name} must have dtype int32 or int64, got {t.dtype}")
    if t.dim() != 1:
        raise ValueError(f"{name} must be 1-D, got shape {list(t.shape)}")


def _check_ptr(ptr: Tensor, num_messages) -> None:
    """PyG's ptr contract: non-decreasing, ``ptr[0] = 0`` and ``ptr[-1]`` = the number of messages
    (anything else would assign messages to groups silently). One host sync, on a cache miss only;
    skipped under torch.compile, where it would break the graph."""
    if torch.compiler.is_compiling():
        return
    bounds = (int(ptr[0]), int(ptr[-1])) if ptr.numel() > 0 else None
    decreasing = ptr.numel() > 1 and bool((ptr.diff() < 0).any())
    if bounds != (0, num_messages) or decreasing:
        got = "no entries" if bounds is None else f"ptr[0] = {bounds[0]}, ptr[-1] = {bounds[1]}"
        raise ValueError(f"ptr must be non-decreasing with ptr[0] = 0 and ptr[-1] = "
                         f"{num_messages} (the number of messages), got {got}"
                         f"{' and a decrease' if decreasing else ''}")


def flat(x: Tensor) -> Tensor:
    """x ``[N, *feat]`` as ``[N, prod(feat)]`` (the 2-D layout the segment ops read), in the
    autocast dtype when autocast is on."""
    x = autocast_input(x)
    return x.unsqueeze(1) if x.dim() == 1 else x.flatten(1)


def unflat(out: Tensor, x: Tensor) -> Tensor:
    """A ``[N, prod(feat)]`` result back to ``[N, *feat]`` for x ``[E, *feat]``."""
    if x.dim() == 2:
        return out
    return out.reshape((out.size(0),) + tuple(x.shape[1:]))


def aggregate_with(module, graph, x: Tensor, node_dim: int = 0) -> Tensor:
    """``module.aggregate(graph, x)`` for an iognn Aggregation (x node-major, ``[N, *feat]``).

    Any other aggregation module (a PyG one iognn has no kernel for, e.g. 'lstm' or 'softmax') is
    called the PyG way on the gathered messages in the graph's CSR order (sorted by destination),
    laid out as the layer's features are (messages along ``node_dim``), and its result is
    returned node-major."""
    if isinstance(module, Aggregation):
        return module.aggregate(graph, x)
    messages = x.index_select(0, graph.col.long())
    dim = node_dim % x.dim() if x.dim() > 1 else 0
    out = module(messages.movedim(0, dim) if dim else messages, index=graph.csr_dst.long(),
                 ptr=graph.rowptr.long(), dim_size=graph.num_dst_nodes, dim=dim)
    return out.movedim(dim, 0) if dim else out
