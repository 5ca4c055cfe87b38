"""``to_hetero``: PyG's ``torch_geometric.nn.to_hetero`` for models of iognn layers, with the
``SAGEConv`` relations into one node type fused into one typed propagate.

PyG's transformer copies each message-passing layer once per edge type and, per destination
type, adds the outputs of its relations pairwise (then divides by their number for
``aggr='mean'``). It recognises layers by PyG's ``MessagePassing`` class, which iognn's layers do
not subclass: run on them, it would treat them as plain modules. This transformer is PyG's with
iognn's layers taken for message-passing layers, so the model, its submodules and its
``state_dict`` are the ones PyG builds from PyG's layers.

Then, for ``aggr='sum'`` or ``'mean'``, each layer of ``iognn.nn.SAGEConv`` (no ``normalize``, no
``project``, mean or sum aggregation) has, for every destination type with two or more relations,
its per-relation calls and their reduction replaced by one :class:`FusedRelations` call: the
relations with equal widths and settings run as one typed propagate through
:class:`~iognn.nn.hetero_conv.RelationFusion` (``docs/typed.md``), the others as PyG runs them;
while the layers are still lazy, or an ``edge_index`` is not a ``[2, E]`` tensor, every relation
runs as PyG runs it, reduced in PyG's order. Every other layer is left as PyG's transformer made
it. ``model.fused_layers`` names the fused layers.
"""
from __future__ import annotations

from collections import deque
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor
from torch.fx import GraphModule, Node
from torch.fx.graph_module import _USER_PRESERVED_ATTRIBUTES_KEY
from torch_geometric.nn.fx import get_submodule
from torch_geometric.nn.to_hetero_transformer import ToHeteroTransformer, key2str

from .conv._common import MessagePassingModule
from .hetero_conv import _FUSED_AGGRS, RelationFusion, _grouped, fusable_layer

__all__ = ["to_hetero", "FusedRelations"]

EdgeType = Tuple[str, str, str]
FUSED_MODULES = "iognn_fused"  # the GraphModule's container of FusedRelations modules


def to_hetero(module: torch.nn.Module, metadata, aggr: str = "sum",
              input_map: Optional[Dict[str, str]] = None, debug: bool = False) -> GraphModule:
    r"""Replaces ``torch_geometric.nn.to_hetero`` (same arguments and model): converts a
    homogeneous model into its heterogeneous equivalent over the node and edge types of
    ``metadata``, each message-passing layer copied per edge type and its outputs grouped per
    destination type by ``aggr`` (``'sum'``, ``'mean'``, ``'max'``, ``'min'``, ``'mul'``).

    Args:
        module (torch.nn.Module): The homogeneous model, of iognn or PyG layers.
        metadata (Tuple[List[str], List[Tuple[str, str, str]]]): The node types and edge types
            (``HeteroData.metadata()``).
        aggr (str, optional): How the outputs of the relations into one node type are grouped.
            (default: ``"sum"``)
        input_map (Dict[str, str], optional): ``'node'`` or ``'edge'`` for each argument of
            ``module.forward`` (default: guessed from the names, as PyG does).
        debug (bool, optional): Print the graph before and after the transformation.

    iognn differences:
        iognn's layers are taken for message-passing layers (PyG's transformer takes only
        subclasses of PyG's ``MessagePassing``). With ``aggr`` ``'sum'`` or ``'mean'``, the
        relations of an ``iognn.nn.SAGEConv`` layer into one node type run as one typed
        propagate (module note); their sum adds in another order than PyG's. The returned
        model's ``fused_layers`` lists the fused layers (their module names).
    """
    transformer = _Transformer(module, metadata, aggr, input_map, debug)
    model = transformer.transform()
    model.fused_layers = _fuse(model, transformer.layer_calls, metadata[1], aggr)
    # kept by GraphModule's deepcopy, which rebuilds the module from its graph
    model.meta.setdefault(_USER_PRESERVED_ATTRIBUTES_KEY, {})["fused_layers"] = model.fused_layers
    return model


class _Transformer(ToHeteroTransformer):
    """PyG's transformer, taking iognn's layers for message-passing layers and recording each
    layer call it expands (the FX node's name and the layer's module name)."""

    def __init__(self, *args, **kwargs):
        self.layer_calls: List[Tuple[str, str]] = []
        super().__init__(*args, **kwargs)

    def _is_iognn_layer(self, node: Node) -> bool:
        return (node.op == "call_module"
                and isinstance(get_submodule(self.module, node.target), MessagePassingModule))

    # A message-passing layer's output is node-level, whatever its arguments.
    def has_edge_level_arg(self, node: Node) -> bool:
        return not self._is_iognn_layer(node) and super().has_edge_level_arg(node)

    def has_node_level_arg(self, node: Node) -> bool:
        return self._is_iognn_layer(node) or super().has_node_level_arg(node)

    def call_module(self, node: Node, target, name: str):
        if self._is_iognn_layer(node):
            return self.call_message_passing_module(node, target, name)
        return super().call_module(node, target, name)

    def call_message_passing_module(self, node: Node, target, name: str):
        super().call_message_passing_module(node, target, name)
        self.layer_calls.append((name, target))


class FusedRelations(RelationFusion, torch.nn.Module):
    """The relations of one ``to_hetero`` layer into one destination type and their grouping
    (PyG's sum, or mean over ``len(edge_types)`` relations). It has no parameters: the layers
    are the model's own, passed in on every call."""

    def __init__(self, edge_types: Sequence[EdgeType], aggr: str):
        torch.nn.Module.__init__(self)
        RelationFusion.__init__(self)
        self.edge_types = list(edge_types)
        self.aggr = aggr

    def forward(self, layers: torch.nn.ModuleDict, calls: tuple) -> Tensor:
        """``calls``: per edge type, the ``(x, edge_index)`` arguments PyG passes its layer."""
        convs = {edge_type: layers[key2str(edge_type)] for edge_type in self.edge_types}
        x_dict, edge_index_dict = {}, {}
        for (src, rel, dst), (x, edge_index) in zip(self.edge_types, calls):
            x_src, x_dst = x if isinstance(x, tuple) else (x, x)
            x_dict.update({t: v for t, v in ((src, x_src), (dst, x_dst)) if v is not None})
            edge_index_dict[(src, rel, dst)] = edge_index
        groups = self.fusable_groups(convs, x_dict, edge_index_dict)
        fused = {edge_type for members in groups.values() for edge_type in members}
        outs = [self.fused_output(members, convs, x_dict, edge_index_dict)
                for members in groups.values()]
        outs += [convs[edge_type](*call) for edge_type, call in zip(self.edge_types, calls)
                 if edge_type not in fused]
        if not groups:
            return _pyg_grouping(outs, self.aggr)
        return _grouped(outs, self.aggr, len(self.edge_types))

    def extra_repr(self) -> str:
        return f"{self.edge_types}, aggr={self.aggr!r}"


def _pyg_grouping(outs: List[Tensor], aggr: str) -> Tensor:
    """PyG's to_hetero grouping: outputs added pairwise through a queue, then divided by their
    number for the mean."""
    queue = deque(outs)
    while len(queue) >= 2:
        queue.append(torch.add(queue.popleft(), queue.popleft()))
    return queue[0] if aggr == "sum" else torch.div(queue[0], len(outs))


def _fuse(model: GraphModule, layer_calls: List[Tuple[str, str]], edge_types: List[EdgeType],
          aggr: str) -> List[str]:
    """Replaces, in ``model``'s graph, the relation calls and grouping of each fusable layer
    (module note) by FusedRelations calls; returns the module names of the fused layers."""
    if aggr not in _FUSED_AGGRS:
        return []
    per_dst: Dict[str, List[EdgeType]] = {}
    for edge_type in edge_types:
        per_dst.setdefault(edge_type[-1], []).append(edge_type)
    fused: List[str] = []
    for name, target in layer_calls:
        layers = model.get_submodule(target)
        if not isinstance(layers, torch.nn.ModuleDict) or not all(
                fusable_layer(layer) for layer in layers.values()):
            continue
        replaced = [_replace_grouping(model, name, target, dst, keys, aggr)
                    for dst, keys in per_dst.items() if len(keys) > 1]
        if any(replaced) and target not in fused:
            fused.append(target)
    model.graph.lint()
    model.recompile()
    return fused


def _replace_grouping(model: GraphModule, name: str, target: str, dst: str,
                      keys: List[EdgeType], aggr: str) -> bool:
    """Replaces the calls of layer ``target`` (FX node ``name``) for the relations ``keys`` into
    ``dst`` and PyG's grouping of them by one FusedRelations call; False where the graph is not
    the one PyG's transformer builds for them (nothing is changed then)."""
    nodes = {node.name: node for node in model.graph.nodes}
    calls = [nodes.get(f"{name}__{dst}{i + 1}") for i in range(len(keys))]
    grouping = [nodes.get(f"{name}__{dst}_{i + 1}") for i in range(len(keys))]
    result = nodes.get(f"{name}__{dst}")
    if result is None or result.op != "call_function" or not all(
            call is not None and call.op == "call_module" and call.kwargs == {}
            and call.target == f"{target}.{key2str(key)}" and len(call.args) == 2
            for call, key in zip(calls, keys)):
        return False
    container = getattr(model, FUSED_MODULES, None)
    if container is None:
        container = torch.nn.ModuleDict()
        model.add_module(FUSED_MODULES, container)
    module_name = f"{name}__{key2str(dst)}"
    container[module_name] = FusedRelations(keys, aggr)
    with model.graph.inserting_before(result):
        layers = model.graph.get_attr(target)
        out = model.graph.call_module(f"{FUSED_MODULES}.{module_name}",
                                      (layers, tuple(call.args for call in calls)))
    result.replace_all_uses_with(out)
    removable = {result, *calls, *(node for node in grouping if node is not None)}
    for node in reversed(list(model.graph.nodes)):
        if node in removable and not node.users:
            model.graph.erase_node(node)
    return True
