"""Edge values of the self-loops a Graph appends (PyG's fill rules); see Graph.augment_edge_values.

A reduction fill value ('add', 'sum', 'mean', 'min', 'max') of float values reduces each node's
incoming non-loop edge values with iognn's segment_reduce over the rows of the graph's CSR, so the
loop values are bitwise reproducible on a GPU too (torch's scatter_reduce sums with atomics there).
'mul' and integer values go through torch's scatter_reduce.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

_REDUCTIONS = {"add": "sum", "sum": "sum", "mean": "mean", "min": "amin", "max": "amax",
               "mul": "prod"}
_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
# Per reduction: the segment_reduce that computes it and the value a loop's slot holds meanwhile
# (it leaves the reduction of the row unchanged).
_ROW_REDUCES = {"sum": ("sum", 0.0), "mean": ("sum", 0.0), "amin": ("min", math.inf),
                "amax": ("max", -math.inf)}


def augment_edge_values(graph, values: Tensor, fill_value) -> Tensor:
    from .graph import SelfLoops
    num_kept = graph.num_edges - graph.num_loops
    edge_map = graph.edge_map.long()
    kept = values.index_select(0, edge_map[:num_kept])
    loops = _loop_values(graph, values, kept, num_kept, fill_value)
    if graph.self_loops == SelfLoops.ADD_REMAINING and values.size(0) > 0:
        own = edge_map[num_kept:]
        has_own = (own >= 0).view(-1, *([1] * (values.dim() - 1)))
        loops = torch.where(has_own, values.index_select(0, own.clamp(min=0)), loops)
    return torch.cat([kept, loops], dim=0)


def _loop_values(graph, values: Tensor, kept: Tensor, num_kept: int, fill_value) -> Tensor:
    shape = (graph.num_loops,) + tuple(values.shape[1:])
    if isinstance(fill_value, str):
        if fill_value not in _REDUCTIONS:
            raise ValueError(f"fill_value must be a number, a tensor or one of "
                             f"{sorted(_REDUCTIONS)}, got {fill_value!r}")
        # Reduce the values of each node's incoming non-loop edges, as PyG's scatter does: a node
        # with none gets 0, except for 'mul', whose product starts from 1.
        reduce = _REDUCTIONS[fill_value]
        if reduce in _ROW_REDUCES and values.dtype in _FLOATS:
            return _reduce_kept_rows(graph, values, kept, reduce)[: graph.num_loops]
        dst = graph.edge_index[1, :num_kept]
        size = (graph.num_dst_nodes,) + tuple(values.shape[1:])
        out = values.new_ones(size) if reduce == "prod" else values.new_zeros(size)
        index = dst.view(-1, *([1] * (values.dim() - 1))).expand_as(kept)
        out = out.scatter_reduce(0, index, kept, reduce, include_self=reduce == "prod")
        return out[: graph.num_loops]
    if isinstance(fill_value, Tensor):
        return fill_value.to(values.device, values.dtype).expand(shape).clone()
    return values.new_full(shape, float(fill_value))


def _reduce_kept_rows(graph, values: Tensor, kept: Tensor, reduce: str) -> Tensor:
    """``[num_dst, ...]``: each node's reduction of its incoming kept (non-loop) edges' values, 0
    for a node without any (PyG's scatter). The augmented values, with a neutral value in each
    loop's slot, are reduced over the CSR rows of the graph itself (no other graph is built, so
    this also runs inside torch.compile)."""
    from .nn._graph import messages_graph
    from .ops.segment_reduce import segment_reduce
    width = math.prod(values.shape[1:])
    name, neutral = _ROW_REDUCES[reduce]
    flat = kept.reshape(kept.size(0), width)
    slots = torch.cat([flat, flat.new_full((graph.num_loops, width), neutral)])
    out = segment_reduce(messages_graph(graph), slots.index_select(0, graph.eid.long()), name)
    nodes = torch.arange(graph.num_dst_nodes, device=graph.device)
    count = (graph.degree("in") - (nodes < graph.num_loops).to(graph.index_dtype)).view(-1, 1)
    if reduce == "mean":
        out = out / count.clamp(min=1).to(out.dtype)
    elif reduce != "sum":  # min / max of no edge: 0, not the neutral value
        out = torch.where(count > 0, out, out.new_zeros(()))
    return out.view((graph.num_dst_nodes,) + tuple(values.shape[1:]))
