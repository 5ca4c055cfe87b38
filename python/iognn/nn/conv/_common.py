"""Pieces the message-passing layers share: PyG's MessagePassing keyword arguments, the ``aggr``
attributes, ``reset`` of user modules and weighted neighbourhood aggregation."""
from __future__ import annotations

import math
from typing import Any, Dict, Optional, Tuple

import torch
from torch import Tensor

from ...ops import _checks
from ...ops._tile_choice import may_take_tiles, tensor_cores_take
from ...ops.propagate import linear_propagate_csr, propagate_csr, propagate_linear_csr
from .._amp import autocast_dtype, autocast_input, like
from .._graph import csr_weights, message_sizes, messages_graph
from ..aggr import MeanAggregation, SumAggregation
from ..aggr.resolver import resolve_aggregation
from ..linear import Linear
from ..aggr.base import aggregate_with

# Aggregations PyG runs through message_and_aggregate (its "fused" path) on sparse inputs.
FUSE_AGGRS = ("add", "sum", "mean", "min", "max")


def check_flow(layer: str, flow) -> None:
    """PyG's ``flow`` values; iognn aggregates over in-edges only."""
    if flow not in ("source_to_target", "target_to_source"):
        raise ValueError(f"Expected 'flow' to be either 'source_to_target' or "
                         f"'target_to_source' (got '{flow}')")
    if flow != "source_to_target":
        raise NotImplementedError(f"{layer}: flow='target_to_source' is not supported by "
                                  f"iognn; pass edge_index.flip(0) instead")


class MessagePassingModule(torch.nn.Module):
    """Base of the iognn layers: the ``MessagePassing`` attributes PyG reads on every call.

    ``flow`` is always ``'source_to_target'``: assigning ``'target_to_source'`` (legal in PyG)
    raises NotImplementedError at once instead of being ignored. ``node_dim`` is the dimension of
    the node features that indexes nodes: layers with ``[*, N, F]`` features (GCN, SAGE, GIN,
    GINE, GraphConv; ``FIXED_NODE_DIM = None``) take any value and read it on every call, as PyG
    does; the layers whose features are ``[N, heads, C]`` or ``[N, towers, F]`` (attention, PNA)
    only take their own, 0.
    """

    FIXED_NODE_DIM: Optional[int] = None

    @property
    def flow(self) -> str:
        return "source_to_target"

    @flow.setter
    def flow(self, value) -> None:
        check_flow(type(self).__name__, value)

    @property
    def node_dim(self) -> int:
        return self._node_dim

    @node_dim.setter
    def node_dim(self, value) -> None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{type(self).__name__}: node_dim must be an int, got {value!r}")
        if self.FIXED_NODE_DIM is not None and value != self.FIXED_NODE_DIM:
            raise NotImplementedError(f"{type(self).__name__}: only node_dim="
                                      f"{self.FIXED_NODE_DIM} is supported by iognn")
        self._node_dim = value

    def _split_sized(self, x, edge_index, size) -> Tuple[Tensor, Optional[Tensor], int, int]:
        """``(x_src, x_dst, num_src, num_dst)`` of a layer taking a tensor or a pair: the input
        split (``split_input``) and the node counts PyG infers along ``node_dim``."""
        x_src, x_dst = split_input(x)
        num_src, num_dst = message_sizes(edge_index, x_src, x_dst, size, self.node_dim)
        return x_src, x_dst, num_src, num_dst


class MessagePassingArgs:
    """PyG's ``MessagePassing(aggr, *, aggr_kwargs, flow, node_dim, decomposed_layers)`` keyword
    arguments as the iognn layers take them through ``**kwargs``.

    ``flow='target_to_source'`` raises NotImplementedError, and so does a ``node_dim`` other than
    0 on a layer with ``FIXED_NODE_DIM`` (see MessagePassingModule); ``decomposed_layers`` is
    accepted and has no effect (it chunks PyG's edge-sized intermediates, which iognn's fused ops
    do not form).
    """

    def __init__(self, layer: str, kwargs: Dict[str, Any], aggr: Any = "add", node_dim: int = -2,
                 fixed_aggr: bool = False):
        kwargs = dict(kwargs)
        if fixed_aggr and "aggr" in kwargs:
            raise TypeError(f"{layer}.__init__() got an unexpected keyword argument 'aggr'")
        self.aggr = kwargs.pop("aggr", aggr)
        self.aggr_kwargs = dict(kwargs.pop("aggr_kwargs", None) or {})
        self.flow = kwargs.pop("flow", "source_to_target")
        check_flow(layer, self.flow)
        self.node_dim = kwargs.pop("node_dim", node_dim)
        self.decomposed_layers = kwargs.pop("decomposed_layers", 1)
        if kwargs:
            raise TypeError(f"{layer}.__init__() got an unexpected keyword argument "
                            f"'{next(iter(kwargs))}'")

    def install(self, layer: MessagePassingModule) -> None:
        """Sets PyG's ``aggr`` (its string form), ``aggr_module``, ``node_dim`` (checked by the
        layer), ``decomposed_layers`` and ``fuse`` (whether PyG would take its fused path on
        sparse inputs: a plain name among FUSE_AGGRS)."""
        aggr = self.aggr
        if isinstance(aggr, (tuple, list)):
            layer.aggr = [str(a) for a in aggr]
        else:
            layer.aggr = str(aggr)
        layer.aggr_module = resolve_aggregation(aggr, **self.aggr_kwargs)
        layer.node_dim = self.node_dim
        layer.decomposed_layers = self.decomposed_layers
        layer.fuse = isinstance(aggr, str) and aggr in FUSE_AGGRS


def check_attention_aggr(layer: str, args: MessagePassingArgs) -> None:
    if args.aggr not in ("add", "sum"):
        raise NotImplementedError(f"{layer}: iognn's fused attention sums the weighted messages; "
                                  f"aggr={args.aggr!r} is not supported")


def store_arguments(module: torch.nn.Module, **arguments) -> None:
    """Each constructor argument as the module attribute of its name: the hyper-parameters PyG's
    layers expose (read by ``__repr__``, ``reset_parameters`` and user code)."""
    for name, value in arguments.items():
        setattr(module, name, value)


def reset_module(module) -> None:
    """PyG's ``reset``: ``reset_parameters`` of ``module``, else of each child, recursively."""
    if hasattr(module, "reset_parameters"):
        module.reset_parameters()
    elif isinstance(module, torch.nn.Module):
        for child in module.children():
            reset_module(child)


def node_major(x: Tensor, node_dim: int) -> Tensor:
    """x with its node dimension (``node_dim``, PyG's) moved to the front: ``[N, *rest]``, the
    layout iognn's ops read. A view; ``x`` itself for 2-D ``[N, F]`` features."""
    if x.dim() < 2:
        return x
    dim = node_dim % x.dim() if -x.dim() <= node_dim < x.dim() else None
    if dim is None or dim == x.dim() - 1:
        raise ValueError(f"node_dim={node_dim} does not name a node dimension of features of "
                         f"shape {list(x.shape)} (the last dimension holds the features)")
    return x if dim == 0 else x.movedim(dim, 0)


def from_node_major(out: Tensor, like_x: Tensor, node_dim: int) -> Tensor:
    """``node_major``'s inverse: the aggregated ``[M, *rest]`` back in ``like_x``'s layout."""
    if like_x.dim() < 2:
        return out
    dim = node_dim % like_x.dim()
    return out if dim == 0 else out.movedim(0, dim)


def edge_weights_csr(graph, weight: Optional[Tensor], x: Tensor) -> Optional[Tensor]:
    """Checked per-edge weights (augmented order) in the graph's CSR order and the accumulation
    dtype of x: what propagate reads."""
    if weight is not None:
        _checks.check_edge_values("edge_weight", weight, graph, x)
    return csr_weights(graph, weight, _checks.acc_dtype(x.dtype))


def fusable_weight(lin) -> Optional[Tensor]:
    """The weight of ``lin`` when a fused layer op (``linear_propagate_csr`` /
    ``propagate_linear_csr``) may stand in for its call: an initialised iognn ``Linear`` that no
    hook watches (a lazy one materialises in its pre-hook), else None."""
    if (type(lin) is not Linear or lin._forward_hooks or lin._forward_pre_hooks
            or torch.nn.modules.module._global_forward_hooks
            or torch.nn.modules.module._global_forward_pre_hooks):
        return None
    return lin.weight


def fused_propagate_applies(aggr_module, graph, node_dim: int, *features: Tensor) -> bool:
    """Whether a fused layer op can run this call: a sum or mean over 2-D features (nodes first)
    on the graph's device, where the tile path cannot be taken (``tile_policy="csr"``, or features
    the tile kernels do not take). Anything else takes the general path, which also raises the
    errors of bad input."""
    def tiles_possible(f: Tensor) -> bool:  # in the dtype autocast_input gives f
        if getattr(graph, "tile_policy", "csr") == "csr":  # the default: nothing more to ask
            return False
        cast = autocast_dtype(f) if f.is_floating_point() and f.dtype != torch.float64 else None
        return may_take_tiles(graph, f, tensor_cores_take(f, cast))

    return (type(aggr_module) in (SumAggregation, MeanAggregation) and node_dim in (0, -2)
            and all(f.dim() == 2 and f.device == graph.device and not tiles_possible(f)
                    for f in features))


def fused_linear_propagate(aggr_module, node_dim: int, graph, x: Tensor,
                           weight: Optional[Tensor], lin, bias: Optional[Tensor]
                           ) -> Optional[Tensor]:
    """``aggr_{j -> i} w_ji lin(x)_j + bias`` as one op and one autograd node
    (``linear_propagate_csr``) where that applies, else None: GCNConv's path."""
    lin_weight = fusable_weight(lin)
    if lin_weight is None or not fused_propagate_applies(aggr_module, graph, node_dim, x):
        return None
    x = autocast_input(x)
    return linear_propagate_csr(graph, x, autocast_input(lin_weight),
                                edge_weights_csr(graph, weight, x), aggr_module.reduce,
                                like(bias, x))


def fused_propagate_linear(aggr_module, node_dim: int, graph, x_src: Tensor,
                           x_dst: Optional[Tensor], weight: Optional[Tensor], lin,
                           root_lin=None) -> Optional[Tensor]:
    """``lin(aggr_{j -> i} w_ji x_j) + root_lin(x_dst)`` (the root term when ``root_lin`` and
    ``x_dst`` are given) as one op and one autograd node (``propagate_linear_csr``) where that
    applies, else None: SAGEConv's and GraphConv's path."""
    root = root_lin is not None and x_dst is not None
    lin_weight = fusable_weight(lin)
    root_weight = fusable_weight(root_lin) if root else None
    features = (x_src, x_dst) if root else (x_src,)
    if lin_weight is None or (root and root_weight is None) or not fused_propagate_applies(
            aggr_module, graph, node_dim, *features):
        return None
    x = autocast_input(x_src)
    x_root = None if not root or x_dst is x_src else autocast_input(x_dst)
    return propagate_linear_csr(graph, x, edge_weights_csr(graph, weight, x), aggr_module.reduce,
                                autocast_input(lin_weight), like(lin.bias, x),
                                autocast_input(root_weight) if root else None, x_root)


def aggregate_weighted(aggr_module, graph, x: Tensor, weight: Optional[Tensor] = None,
                       bias: Optional[Tensor] = None, node_dim: int = -2) -> Tensor:
    """``aggr_{j -> i} (w_ji * x_j) + bias`` over the in-edges of every destination.

    ``x`` is ``[*, N, F]`` with nodes along ``node_dim`` (PyG's static-graph batches), the result
    has the same layout. ``weight`` (or None: all ones) is per edge in the graph's augmented
    order. Sum and mean run on ``propagate`` (SpMM, weights in fp32; batch positions become
    feature columns; the bias is fused into its pass for 2-D features); any other aggregation of
    weighted messages forms the ``[E, *, F]`` messages and reduces them over the graph's
    MessageGraph, then adds the bias.
    """
    bias = like(bias, x)
    xn = node_major(x, node_dim)
    if type(aggr_module) in (SumAggregation, MeanAggregation) and xn.dim() >= 2:
        if x.device != graph.device:  # before the op, whose message names its CSR arrays
            raise ValueError(f"x is on {x.device} but the graph is on {graph.device}")
        w = edge_weights_csr(graph, weight, x)
        if xn.dim() == 2:
            return propagate_csr(graph, xn, w, aggr_module.reduce, bias)
        width = math.prod(xn.shape[1:])
        out = propagate_csr(graph, xn.reshape(xn.size(0), width), w, aggr_module.reduce)
        out = out.view((out.size(0),) + tuple(xn.shape[1:]))
    elif weight is None:
        out = aggregate_with(aggr_module, graph, xn, node_dim)
    else:
        messages = xn.index_select(0, graph.col.long())
        w = graph.csr_edge_values(weight).to(x.dtype)
        messages = messages * w.view((-1,) + (1,) * (xn.dim() - 1))
        out = aggregate_with(aggr_module, messages_graph(graph), messages, node_dim)
    out = from_node_major(out, x, node_dim)
    return out if bias is None else out + bias


def check_edge_values(layer: str, name: str, values, graph, edge_dim: Optional[int] = None
                      ) -> None:
    """A layer's per-edge input against its adjacency: ``edge_weight [E]`` or (with ``edge_dim``)
    ``edge_attr [E]`` / ``[E, edge_dim]``, E being the edges as given (before any self-loop is
    added). Raises a TypeError / ValueError naming the argument, where a mismatch would otherwise
    surface inside the graph's edge bookkeeping under an internal name."""
    if not isinstance(values, Tensor):
        raise TypeError(f"{layer}: {name} must be a Tensor, got {type(values).__name__}")
    if edge_dim is None:
        if values.dim() != 1:
            raise ValueError(f"{layer}: {name} must be 1-D [num_edges], got shape "
                             f"{list(values.shape)}")
    elif values.dim() not in (1, 2) or (1 if values.dim() == 1 else values.size(1)) != edge_dim:
        raise ValueError(f"{layer}: {name} must have shape [num_edges, edge_dim={edge_dim}] (or "
                         f"[num_edges] when edge_dim=1), got {list(values.shape)}")
    if values.device != graph.device:
        raise ValueError(f"{layer}: {name} is on {values.device} but edge_index is on "
                         f"{graph.device}")
    if values.size(0) != graph.num_input_edges:
        raise ValueError(f"{layer}: {name} has {values.size(0)} rows but edge_index has "
                         f"{graph.num_input_edges} edges")


def check_float_features(layer: Optional[str], *features: Optional[Tensor]) -> None:
    """A TypeError naming ``x`` (and the layer, when given) for integer or boolean node features,
    which a projection or an op would otherwise reject under a name of its own."""
    for t in features:
        if isinstance(t, Tensor) and not t.is_floating_point():
            prefix = f"{layer}: " if layer else ""
            raise TypeError(f"{prefix}x must be float32, float64, float16 or bfloat16, got "
                            f"{t.dtype}")


def split_input(x) -> Tuple[Tensor, Optional[Tensor]]:
    """``(x_src, x_dst)`` of a tensor or a pair (x_dst may be None), floating point."""
    if isinstance(x, Tensor):
        check_float_features(None, x)
        return x, x
    if isinstance(x, (tuple, list)) and len(x) == 2:
        check_float_features(None, *x)
        return x[0], x[1]
    raise TypeError(f"x must be a Tensor or a pair (x_src, x_dst), got {type(x).__name__}")
