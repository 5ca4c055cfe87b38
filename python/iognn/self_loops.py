"""Edge values of the self-loops a Graph appends (PyG's fill rules); see Graph.augment_edge_values."""
from __future__ import annotations

import torch
from torch import Tensor

_REDUCTIONS = {"add": "sum", "sum": "sum", "mean": "mean", "min": "amin", "max": "amax",
               "mul": "prod"}


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
        dst = graph.edge_index[1, :num_kept]
        size = (graph.num_dst_nodes,) + tuple(values.shape[1:])
        out = values.new_ones(size) if reduce == "prod" else values.new_zeros(size)
        index = dst.view(-1, *([1] * (values.dim() - 1))).expand_as(kept)
        out = out.scatter_reduce(0, index, kept, reduce, include_self=reduce == "prod")
        return out[: graph.num_loops]
    if isinstance(fill_value, Tensor):
        return fill_value.to(values.device, values.dtype).expand(shape).clone()
    return values.new_full(shape, float(fill_value))
