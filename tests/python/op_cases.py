"""The functional ops as uniform test cases: named inputs, one call, and an fp64 reference that
gathers per edge and scatters per destination (PyG's formulas), for the reliability tests
(test_bad_inputs, test_scale_limits, test_streams_graphs_cuda).

Conventions: ``run_op`` computes propagate as a weighted mean, segment_reduce with all six
reductions, and the attention ops with their defaults (no edge features, slope 0.2, scale
1 / sqrt(C)); ``reference`` computes the same on an edge_index in the graph's edge order.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional

import torch
from torch import Tensor
from torch_geometric.utils import scatter, softmax

from iognn.ops import (gat_attention, gatv2_attention, gcn_norm, propagate, segment_reduce,
                       transformer_attention)

OPS = ["propagate", "gcn_norm", "segment_reduce", "gat", "gatv2", "transformer"]
FEATURE_OPS = [op for op in OPS if op != "gcn_norm"]
REDUCES = ["sum", "mean", "min", "max", "var", "std"]
# Inputs indexed by source node, by destination node and by edge; the rest (att) by none.
SOURCE_SIDE = {"x", "x_src", "alpha_src", "key", "value"}
DEST_SIDE = {"alpha_dst", "x_dst", "query"}
EDGE_SIDE = {"edge_weight"}
# The [N, F] / [N, H, C] feature tensors of the source side (those that can be large).
SOURCE_FEATURES = {"x", "x_src", "key", "value"}


def op_inputs(op: str, graph, gen: torch.Generator, F: int = 8, H: int = 2,
              dtype=torch.float32, src_rows: Optional[Callable[..., Tensor]] = None
              ) -> Dict[str, Tensor]:
    """Named inputs of `op` on `graph`, in argument order: [N, F] features, or [N, H, F // H] for
    attention. Drawn with `gen` on its device, then moved to the graph's; `src_rows(*shape)`,
    when given, builds the source-side feature tensors instead."""
    n_src, n_dst, C = graph.num_src_nodes, graph.num_dst_nodes, F // H

    def rand(*shape, name=None):
        if src_rows is not None and name in SOURCE_FEATURES:
            return src_rows(*shape)
        return torch.randn(*shape, generator=gen, dtype=dtype, device=gen.device).to(graph.device)

    def weights():
        w = torch.rand(graph.num_edges, generator=gen, device=gen.device) + 0.5
        return w.to(graph.device, torch.float64 if dtype == torch.float64 else torch.float32)

    if op == "propagate":
        return dict(x=rand(n_src, F, name="x"), edge_weight=weights())
    if op == "gcn_norm":
        return dict(edge_weight=weights())
    if op == "segment_reduce":
        return dict(x=rand(n_src, F, name="x"))
    if op == "gat":
        return dict(x=rand(n_src, H, C, name="x"), alpha_src=rand(n_src, H),
                    alpha_dst=rand(n_dst, H))
    if op == "gatv2":
        return dict(x_src=rand(n_src, H, C, name="x_src"), x_dst=rand(n_dst, H, C),
                    att=rand(H, C) / C ** 0.5)
    return dict(query=rand(n_dst, H, C), key=rand(n_src, H, C, name="key"),
                value=rand(n_src, H, C, name="value"))


def run_op(op: str, graph, inputs: Dict[str, Tensor]) -> Tensor:
    """The op on `graph` with `inputs` (see the module conventions)."""
    inputs = dict(inputs)
    if op == "propagate":
        return propagate(graph, inputs.pop("x"), inputs.pop("edge_weight", None), "mean",
                         **inputs)
    if op == "gcn_norm":
        return gcn_norm(graph, **inputs)
    if op == "segment_reduce":
        return segment_reduce(graph, inputs.pop("x"), REDUCES, **inputs)
    if op == "gat":
        return gat_attention(graph, **inputs)
    if op == "gatv2":
        return gatv2_attention(graph, **inputs)
    return transformer_attention(graph, **inputs)


def reference(op: str, edge_index: Tensor, num_dst: int, inputs: Dict[str, Tensor]) -> Tensor:
    """fp64 reference of run_op (differentiable, on the inputs' device): ``edge_index`` indexes the
    source-side inputs by its first row and the destination-side ones by its second; an edge-side
    input has one entry per column."""
    src, dst = edge_index.long()
    x = {k: v.double() for k, v in inputs.items()}
    if op == "propagate":
        messages = x["x"][src] * x["edge_weight"].view(-1, 1)
        return scatter(messages, dst, 0, num_dst, reduce="mean")
    if op == "gcn_norm":
        w = x["edge_weight"]
        deg = scatter(w, dst, 0, num_dst, reduce="sum")
        dinv = deg.pow(-0.5).masked_fill(deg == 0, 0)
        return dinv[src] * w * dinv[dst]
    if op == "segment_reduce":
        msg = x["x"][src]
        parts = [scatter(msg, dst, 0, num_dst, reduce=r) for r in ("sum", "mean", "min", "max")]
        var = scatter(msg * msg, dst, 0, num_dst, reduce="mean") - parts[1] ** 2
        std = var.clamp(min=1e-5).sqrt()
        return torch.cat(parts + [var, std.masked_fill(std <= 1e-5 ** 0.5, 0)], 1)
    lrelu = torch.nn.functional.leaky_relu
    if op == "gat":
        score, value = lrelu(x["alpha_src"][src] + x["alpha_dst"][dst], 0.2), x["x"]
    elif op == "gatv2":
        score = (lrelu(x["x_src"][src] + x["x_dst"][dst], 0.2) * x["att"]).sum(-1)
        value = x["x_src"]
    else:
        score = (x["query"][dst] * x["key"][src]).sum(-1) / x["query"].size(-1) ** 0.5
        value = x["value"]
    alpha = softmax(score, dst, num_nodes=num_dst)
    return scatter(value[src] * alpha.unsqueeze(-1), dst, 0, num_dst, reduce="sum")
