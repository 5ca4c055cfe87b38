"""``HeteroConv``: PyG's heterogeneous wrapper, with the relations of one destination type that
run ``iognn.nn.SAGEConv`` fused into one typed propagate.

A heterogeneous model with many relations calls one convolution per edge type and sums their
outputs per destination type: R aggregations, 2R GEMMs, R graph caches and the launches of all of
them. With ``iognn.nn.SAGEConv`` layers (mean or sum aggregation, without ``normalize`` or
``project``) and ``aggr='sum'`` or ``'mean'``, the relations into a destination type compute

    out_dst = sum_r [ W_r agg_r(x_src(r)) + b_r + R_r x_dst ]
            = typed_propagate(x_src_all, W) + sum_r b_r + x_dst (sum_r R_r)

(``docs/typed.md``): one typed propagate over every relation's edges (the sources of all source
types stacked, each relation its own edge type), one GEMM for the root weights, one bias.
``aggr='mean'`` divides by the number of relations, as PyG's mean over their outputs does. Other
relations (other layers, other settings, lazily initialised layers, extra forward arguments) run
their own convolution exactly as PyG's ``HeteroConv`` runs them. The modules, their parameters
and the ``state_dict`` are PyG's; results equal PyG's up to the order of the floating-point sums.
The fusion itself (:class:`RelationFusion`) also serves ``iognn.nn.to_hetero``.
"""
from __future__ import annotations

import weakref
from typing import Dict, List, Mapping, Optional, Tuple

import torch
from torch import Tensor
from torch.nn.parameter import is_lazy
from torch_geometric.nn.conv import HeteroConv as PyGHeteroConv
from torch_geometric.nn.conv.hetero_conv import group

from ..ops.typed_propagate import typed_propagate
from ..typed import TypedGraph
from .conv.sage_conv import SAGEConv

__all__ = ["HeteroConv", "RelationFusion"]

EdgeType = Tuple[str, str, str]
_FUSED_AGGRS = ("sum", "mean")
_SAGE_REDUCE = {"mean": "mean", "sum": "sum", "add": "sum"}


def fusable_layer(conv) -> bool:
    """Whether the layer's settings let it be fused (its widths may still be lazy)."""
    return (type(conv) is SAGEConv and not conv.normalize and not conv.project
            and isinstance(conv.aggr, str) and conv.aggr in _SAGE_REDUCE)


def _fusable(conv) -> Optional[tuple]:
    """The key that fusable SAGEConv layers share (widths and rules), or None."""
    if not fusable_layer(conv):
        return None
    if is_lazy(conv.lin_l.weight) or (conv.root_weight and is_lazy(conv.lin_r.weight)):
        return None
    return (_SAGE_REDUCE[conv.aggr], conv.lin_l.weight.shape, conv.root_weight,
            conv.lin_l.bias is not None)


_MISSING = object()


def _relation_arg(value_dict: dict, edge_type: EdgeType):
    """What PyG's HeteroConv passes a relation's layer from one argument dictionary."""
    src, _, dst = edge_type
    if edge_type in value_dict:
        return value_dict[edge_type]
    if src == dst and src in value_dict:
        return value_dict[src]
    if src in value_dict or dst in value_dict:
        return (value_dict.get(src), value_dict.get(dst))
    return _MISSING


def _grouped(outs: List[Tensor], aggr: str, relations: int) -> Tensor:
    """PyG's sum or mean over a destination's relations, where a fused output stands for the
    sum of its relations' outputs (``relations`` counts them all)."""
    if len(outs) == 1 and relations == 1:
        return outs[0]
    total = group(outs, "sum") if len(outs) > 1 else outs[0]
    return total if aggr == "sum" else total / relations


class RelationFusion:
    """Mixin running the fusable ``SAGEConv`` relations into one destination type as one typed
    propagate (module note), with the TypedGraph of each fused set of relations cached in
    ``self._typed``. ``HeteroConv`` and the fused layers of ``iognn.nn.to_hetero`` both compute
    their fused relations here."""

    def __init__(self):
        self._typed: Dict[tuple, tuple] = {}

    def __getstate__(self):
        # The cache holds weak references (not picklable); a copy rebuilds it on its first call.
        return dict(super().__getstate__(), _typed={})

    def fusable_groups(self, convs: Mapping[EdgeType, torch.nn.Module], x_dict,
               edge_index_dict) -> Dict[tuple, List[EdgeType]]:
        """Per (destination type, layer key), the edge types fused together (two or more)."""
        groups: Dict[tuple, List[EdgeType]] = {}
        for edge_type, conv in convs.items():
            src, _, dst = edge_type
            edge_index = edge_index_dict.get(edge_type)
            if (not isinstance(edge_index, Tensor) or edge_index.dim() != 2
                    or src not in x_dict or dst not in x_dict):
                continue
            key = _fusable(conv)
            if key is not None:
                groups.setdefault((dst, key), []).append(edge_type)
        return {k: v for k, v in groups.items() if len(v) > 1}

    def fused_output(self, members: List[EdgeType], convs: Mapping[EdgeType, torch.nn.Module],
                     x_dict, edge_index_dict) -> Tensor:
        """The sum of the ``members`` relations' outputs, as one typed propagate."""
        convs = [convs[edge_type] for edge_type in members]
        dst = members[0][2]
        sources = list(dict.fromkeys(edge_type[0] for edge_type in members))
        x_src = torch.cat([x_dict[s] for s in sources]) if len(sources) > 1 else x_dict[sources[0]]
        x_dst = x_dict[dst]
        tg = self._typed_graph(members, sources, x_dict, edge_index_dict)
        weight = torch.stack([conv.lin_l.weight.t() for conv in convs])
        out = typed_propagate(tg, x_src, weight, _SAGE_REDUCE[convs[0].aggr])
        if convs[0].lin_l.bias is not None:
            out = out + torch.stack([conv.lin_l.bias for conv in convs]).sum(0)
        if convs[0].root_weight:
            root = torch.stack([conv.lin_r.weight for conv in convs]).sum(0)
            out = out + x_dst @ root.t()
        return out

    def _typed_graph(self, members: List[EdgeType], sources: List[str], x_dict,
                     edge_index_dict) -> TypedGraph:
        """The TypedGraph of the members' edges (sources stacked in ``sources`` order), cached
        while the same edge_index tensors, unmodified, and the same node counts come back."""
        edge_indices = [edge_index_dict[edge_type] for edge_type in members]
        sizes = tuple(x_dict[s].size(0) for s in sources) + (x_dict[members[0][2]].size(0),)
        key = tuple(members)
        entry = self._typed.get(key)
        if entry is not None:
            refs, versions, cached_sizes, tg = entry
            if (cached_sizes == sizes and all(r() is e for r, e in zip(refs, edge_indices))
                    and versions == tuple(e._version for e in edge_indices)):
                return tg
        offsets = dict(zip(sources, [sum(sizes[:i]) for i in range(len(sources))]))
        parts, types = [], []
        for r, (edge_type, edge_index) in enumerate(zip(members, edge_indices)):
            shift = torch.tensor([[offsets[edge_type[0]]], [0]], device=edge_index.device)
            parts.append(edge_index.long() + shift)
            types.append(torch.full((edge_index.size(1),), r, device=edge_index.device))
        tg = TypedGraph(torch.cat(parts, 1), torch.cat(types), len(members),
                        (sum(sizes[:-1]), sizes[-1]))
        self._typed[key] = (tuple(weakref.ref(e) for e in edge_indices),
                            tuple(e._version for e in edge_indices), sizes, tg)
        return tg


class HeteroConv(RelationFusion, PyGHeteroConv):
    r"""Replaces ``torch_geometric.nn.HeteroConv`` (same arguments, modules and ``state_dict``):
    a bipartite convolution per edge type, their outputs grouped per destination type by ``aggr``
    (``'sum'``, ``'mean'``, ``'min'``, ``'max'``, ``'cat'`` or None).

    Args:
        convs (Dict[Tuple[str, str, str], torch.nn.Module]): a layer per edge type.
        aggr (str, optional): how the outputs of the relations into one node type are grouped.
            (default: ``"sum"``)

    iognn differences:
        With ``aggr`` ``'sum'`` or ``'mean'``, the relations into one destination type whose
        layers are ``iognn.nn.SAGEConv`` with the same widths, aggregation (mean / sum),
        ``root_weight`` and bias setting (no ``normalize``, no ``project``) run as one typed
        propagate (module note), when the forward is called as ``forward(x_dict,
        edge_index_dict)``. Their sum then adds in another order than PyG's stack-and-sum.
    """

    def __init__(self, convs: Dict[EdgeType, torch.nn.Module], aggr: Optional[str] = "sum"):
        PyGHeteroConv.__init__(self, convs, aggr)
        RelationFusion.__init__(self)

    def forward(self, *args_dict, **kwargs_dict) -> Dict[str, Tensor]:
        if (self.aggr not in _FUSED_AGGRS or len(args_dict) != 2 or kwargs_dict
                or not all(isinstance(d, dict) for d in args_dict)):
            return super().forward(*args_dict, **kwargs_dict)
        x_dict, edge_index_dict = args_dict
        groups = self._fused_groups(x_dict, edge_index_dict)
        group_of = {edge_type: key for key, members in groups.items() for edge_type in members}
        out_dict: Dict[str, List[Tensor]] = {}
        relations: Dict[str, int] = {}
        for edge_type, conv in self.convs.items():  # PyG's order and arguments
            src, _, dst = edge_type
            if edge_type in group_of:
                key = group_of[edge_type]
                if edge_type == groups[key][0]:  # the group's output, at its first member
                    out = self.fused_output(groups[key], self.convs, x_dict, edge_index_dict)
                    out_dict.setdefault(dst, []).append(out)
                relations[dst] = relations.get(dst, 0) + 1
                continue
            if edge_type not in x_dict and edge_type not in edge_index_dict:
                continue  # no edge-level argument: PyG skips the relation
            args = [_relation_arg(d, edge_type) for d in args_dict]
            out_dict.setdefault(dst, []).append(conv(*[a for a in args if a is not _MISSING]))
            relations[dst] = relations.get(dst, 0) + 1
        return {dst: _grouped(outs, self.aggr, relations[dst]) for dst, outs in out_dict.items()}

    def _fused_groups(self, x_dict, edge_index_dict) -> Dict[tuple, List[EdgeType]]:
        return self.fusable_groups(self.convs, x_dict, edge_index_dict)
