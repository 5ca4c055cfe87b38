"""Differential fuzzing of iognn.nn against PyG 2.8 (issue 8): a seeded generator of random cases
and the comparison of one case.

A case is a pure function of its seed: a random graph (node counts from 0 to a few hundred, degree
skew, an optional super-node, self-loops, duplicate edges, isolated nodes, bipartite sides, int32 /
int64 / strided edge_index or a prebuilt iognn.Graph), a layer with random PyG arguments (GCNConv,
SAGEConv, GINConv, GraphConv, GATConv, GATv2Conv, TransformerConv or an aggregation module), its
inputs and a feature dtype. ``run_case`` builds the PyG layer, loads its state_dict into the iognn
layer (moved to the device and dtype), runs both, backpropagates the same random output gradient
(plus one on the attention weights when they are returned) and compares the output, the attention
weights, every input gradient and every parameter gradient. The reference is PyG on the CPU in
fp64, fed with the iognn inputs and weights as rounded to the case's dtype, so only iognn's own
rounding counts against the tolerance (``tolerance``), widened where the case is ill-conditioned
(``_compare``): by PyG's own error in the dtype and, in fp16 / bf16, by the reference's response to
rounding-sized perturbations of its inputs and weights (a LeakyReLU logit at the kink).

Rerun one case:  python tests/python/fuzz.py --seed 123 [--device cuda]
"""
from __future__ import annotations

import argparse
import copy
import math
import random
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch_geometric.nn as pyg_nn

import iognn
import iognn.nn as io_nn

LAYERS = ["GCNConv", "SAGEConv", "GINConv", "GraphConv", "GATConv", "GATv2Conv",
          "TransformerConv", "Aggregation"]
BIPARTITE = {"SAGEConv", "GINConv", "GraphConv", "GATConv", "GATv2Conv", "TransformerConv"}
# (rtol, atol) per dtype for a result against the fp64 reference; atol is relative to the largest
# reference magnitude of the compared tensor and both grow with the case's size (``tolerance``).
BASE_TOL = {torch.float64: (1e-9, 1e-9), torch.float32: (2e-5, 2e-5),
            torch.float16: (1e-2, 1e-2), torch.bfloat16: (6e-2, 6e-2)}


@dataclass
class Case:
    """Everything one seed decides (see ``make_case``); ``describe()`` is its one-line summary."""
    seed: int
    layer: str
    kwargs: Dict[str, Any]
    num_src: int
    num_dst: int
    bipartite: bool
    edge_index: torch.Tensor          # [2, E] int64, the graph as PyG receives it
    adjacency: str                    # how iognn receives it: int64 | int32 | strided | graph
    dtype: torch.dtype
    in_channels: Tuple[int, int]      # feature widths of sources and destinations
    edge_input: Optional[str] = None  # 'edge_weight' | 'edge_attr' | None
    edge_dim: int = 0
    want_alpha: bool = False
    aggr_mode: str = "index"          # Aggregation only: 'index' | 'ptr' | 'all'
    notes: List[str] = field(default_factory=list)

    def describe(self) -> str:
        dtype = str(self.dtype).replace("torch.", "")
        return (f"seed={self.seed} {self.layer}({self.kwargs}) graph={self.num_src}x{self.num_dst} "
                f"E={self.edge_index.size(1)} [{', '.join(self.notes)}] adjacency={self.adjacency} "
                f"dtype={dtype} in={self.in_channels} edge={self.edge_input}"
                f"{'(' + str(self.edge_dim) + ')' if self.edge_dim else ''}"
                f"{' alpha' if self.want_alpha else ''}"
                f"{' aggr=' + self.aggr_mode if self.layer == 'Aggregation' else ''}")


# ---- the generator -----------------------------------------------------------------------------
def _node_count(rng: random.Random, large: bool) -> int:
    r = rng.random()
    if r < 0.03:
        return 0
    if r < 0.08:
        return 1
    if r < 0.2:
        return rng.randint(2, 6)
    return rng.randint(7, 600 if large else 120)


def random_graph(rng: random.Random, gen: torch.Generator, num_src: int, num_dst: int,
                 max_hub: int) -> Tuple[torch.Tensor, List[str]]:
    """A random [2, E] int64 edge_index between num_src sources and num_dst destinations, and the
    list of the features it was drawn with."""
    notes: List[str] = []
    if num_src == 0 or num_dst == 0:
        return torch.empty(2, 0, dtype=torch.long), ["empty"]
    num_edges = rng.choice([0, rng.randint(1, 8), rng.randint(1, 4 * max(num_src, num_dst))])
    # Isolated nodes: every edge among the first `active` nodes of each side.
    active_src, active_dst = num_src, num_dst
    if rng.random() < 0.3:
        active_src = rng.randint(1, num_src)
        active_dst = rng.randint(1, num_dst)
        notes.append("isolated")
    # Degree skew: destination d = floor(active * u^k) puts most edges on the first nodes.
    skew = rng.choice([1.0, 1.0, 2.0, 4.0])
    if skew > 1:
        notes.append(f"skew{skew:g}")
    u = torch.rand(num_edges, generator=gen, dtype=torch.float64)
    dst = (active_dst * u.pow(skew)).long().clamp(max=active_dst - 1)
    src = torch.randint(0, active_src, (num_edges,), generator=gen)
    parts = [torch.stack([src, dst])]
    if max_hub > 0 and rng.random() < 0.15:  # a super-node
        # At most ~50 edges per source: thousands of copies of one value summed in a row are a
        # test of the dtype's rounding, not of iognn.
        top = min(max_hub, 50 * num_src)
        hub_deg = rng.randint(top // 4, top)
        hub_src = torch.randint(0, num_src, (hub_deg,), generator=gen)
        parts.append(torch.stack([hub_src, torch.full_like(hub_src, rng.randrange(num_dst))]))
        notes.append(f"hub{hub_deg}")
    if rng.random() < 0.3:  # self-loops, some nodes with several
        nodes = torch.randint(0, min(num_src, num_dst), (rng.randint(1, 6),), generator=gen)
        parts.append(torch.stack([nodes, nodes]))
        notes.append("loops")
    edge_index = torch.cat(parts, 1)
    if rng.random() < 0.3 and edge_index.size(1) > 0:  # duplicate edges
        picks = torch.randint(0, edge_index.size(1), (rng.randint(1, 10),), generator=gen)
        edge_index = torch.cat([edge_index, edge_index[:, picks]], 1)
        notes.append("duplicates")
    perm = torch.randperm(edge_index.size(1), generator=gen)
    return edge_index[:, perm].contiguous(), notes


def _layer_kwargs(rng: random.Random, layer: str, bipartite: bool, low_precision: bool,
                  hub: bool) -> Tuple[Dict[str, Any], Optional[str], int]:
    """(constructor keyword arguments, per-edge input, edge_dim) of a random layer."""
    # min / max: ties between different sources, likely in fp16 / bf16, route the gradient
    # differently from the fp64 reference; low-precision cases use the other reductions.
    reductions = ["sum", "mean", "var", "std"] if low_precision else \
        ["sum", "mean", "min", "max", "var", "std"]
    if layer == "GCNConv":
        normalize = rng.random() < 0.85
        kwargs = dict(improved=rng.random() < 0.3, normalize=normalize,
                      add_self_loops=normalize and rng.random() < 0.85, bias=rng.random() < 0.8)
        return kwargs, ("edge_weight" if rng.random() < 0.5 else None), 0
    if layer == "SAGEConv":
        aggr: Any = rng.choice(reductions)
        if rng.random() < 0.25:
            aggr = rng.sample(reductions, rng.randint(2, 3))
        return dict(aggr=aggr, normalize=rng.random() < 0.2, root_weight=rng.random() < 0.8,
                    project=rng.random() < 0.2, bias=rng.random() < 0.8), None, 0
    if layer == "GINConv":
        return dict(eps=rng.uniform(-0.5, 0.5), train_eps=rng.random() < 0.5), None, 0
    if layer == "GraphConv":
        aggr = rng.choice(["add", "mean"] if low_precision else ["add", "mean", "max", "min"])
        return (dict(aggr=aggr, bias=rng.random() < 0.8),
                "edge_weight" if rng.random() < 0.5 else None, 0)
    heads = rng.randint(1, 4)
    edge_dim = rng.choice([0, 0, 1, rng.randint(2, 4)])
    kwargs: Dict[str, Any] = dict(heads=heads, concat=rng.random() < 0.7)
    if edge_dim:
        kwargs["edge_dim"] = edge_dim
    if layer in ("GATConv", "GATv2Conv"):
        kwargs.update(negative_slope=rng.choice([0.0, 0.2, 0.5]),
                      add_self_loops=rng.random() < 0.8, bias=rng.random() < 0.8,
                      residual=rng.random() < 0.3)
        if edge_dim:
            # PyG scatters a bipartite graph's edge features into min(num_src, num_dst) rows by
            # destination (an IndexError there): reduction fill values only on square graphs.
            # 'add' / 'mul' over a super-node's thousands of edges give a loop edge feature, and
            # so an attention score, of magnitude ~100: iognn recomputes alpha from an fp32
            # logsumexp (relative error ~|score| * 1e-7), which the softmax backward's
            # cancellation turns into % errors on edge gradients (PyG: ~1e-7). Not on hubs.
            names = ["mean"] + ([] if hub else ["add", "mul"]) + \
                ([] if low_precision else ["max", "min"])
            kwargs["fill_value"] = rng.choice([0.5] if bipartite else names + [0.5])
        if layer == "GATv2Conv" and not bipartite:
            kwargs["share_weights"] = rng.random() < 0.3
    else:
        kwargs.update(beta=rng.random() < 0.3, bias=rng.random() < 0.8,
                      root_weight=rng.random() < 0.8)
    return kwargs, ("edge_attr" if edge_dim else None), edge_dim


def make_case(seed: int, device: str = "cpu") -> Case:
    """The case of `seed` (on CUDA the graphs may be larger and low-precision dtypes appear)."""
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    cuda = torch.device(device).type == "cuda"
    layer = rng.choice(LAYERS)
    r = rng.random()
    if cuda and r < 0.2:
        dtype = rng.choice([torch.float16, torch.bfloat16])
    else:
        dtype = torch.float64 if r > 0.85 else torch.float32
    low = dtype in (torch.float16, torch.bfloat16)
    if layer == "Aggregation":
        return _aggregation_case(seed, rng, gen, dtype, cuda)
    bipartite = layer in BIPARTITE and rng.random() < 0.3
    num_src = _node_count(rng, cuda)
    num_dst = _node_count(rng, cuda) if bipartite else num_src
    edge_index, notes = random_graph(rng, gen, num_src, num_dst, 20000 if cuda else 2000)
    kwargs, edge_input, edge_dim = _layer_kwargs(rng, layer, bipartite, low,
                                                 any(n.startswith("hub") for n in notes))
    f_src = rng.choice([1, 2, 3, 5, 8, 16, 33])
    f_dst = f_src if not bipartite or layer == "GINConv" else rng.choice([1, 4, 7, 16])
    if layer == "GCNConv" and edge_input and kwargs["add_self_loops"]:
        # Several weighted loops on one node: PyG keeps the weight of an arbitrary one (a parallel
        # indexed assignment), iognn the last one's. Keep one loop per node.
        edge_index = _one_loop_per_node(edge_index)
    kwargs["out_channels"] = rng.choice([1, 2, 4, 7, 16])
    adjacency = rng.choice(["int64", "int64", "int32", "strided", "graph"])
    want_alpha = layer in ("GATConv", "GATv2Conv", "TransformerConv") and rng.random() < 0.3
    return Case(seed, layer, kwargs, num_src, num_dst, bipartite, edge_index, adjacency, dtype,
                (f_src, f_dst), edge_input, edge_dim, want_alpha, notes=notes)


def _aggregation_case(seed, rng, gen, dtype, cuda) -> Case:
    low = dtype in (torch.float16, torch.bfloat16)
    names = ["sum", "mean", "var", "std"] + ([] if low else ["min", "max"])
    kind = rng.choice(names + ["multi"])
    kwargs: Dict[str, Any] = {"aggr": kind}
    if kind == "multi":
        kwargs["aggr"] = rng.sample(names, rng.randint(2, 4))
    num_messages = rng.choice([0, rng.randint(1, 10), rng.randint(10, 5000 if cuda else 1000)])
    dim_size = rng.choice([1, rng.randint(1, 20), rng.randint(20, 300)])
    mode = rng.choice(["index", "index", "ptr", "all"])
    groups = torch.randint(0, dim_size, (num_messages,), generator=gen)
    if mode == "ptr":
        groups = groups.sort().values
    # (message id, group) pairs, stored as an edge_index.
    edge_index = torch.stack([torch.arange(num_messages), groups])
    return Case(seed, "Aggregation", kwargs, num_messages, dim_size, False, edge_index, "int64",
                dtype, (rng.choice([1, 3, 8, 17]), 0), aggr_mode=mode)


# ---- building and running ----------------------------------------------------------------------
def _make_layer(case: Case, nn) -> torch.nn.Module:
    kwargs = dict(case.kwargs)
    out = kwargs.pop("out_channels", None)
    if case.layer == "Aggregation":  # nn.aggr: iognn.nn.aggr or torch_geometric.nn.aggr
        aggr = kwargs["aggr"]
        if isinstance(aggr, list):
            return nn.aggr.MultiAggregation(aggr)
        return getattr(nn.aggr, aggr.capitalize() + "Aggregation")()
    f_src, f_dst = case.in_channels
    in_channels = (f_src, f_dst) if case.bipartite and case.layer != "GINConv" else f_src
    if case.layer == "GINConv":
        torch_nn = torch.nn.Sequential(torch.nn.Linear(f_src, 8), torch.nn.ReLU(),
                                       torch.nn.Linear(8, out))
        return nn.GINConv(torch_nn, **kwargs)
    return getattr(nn, case.layer)(in_channels, out, **kwargs)


def build_layers(case: Case, device, dtype):
    """(iognn layer on device in dtype, PyG reference on the CPU in fp64, PyG on the CPU in dtype
    or None for fp64), all three with the same weights (as rounded to dtype)."""
    torch.manual_seed(case.seed)
    theirs = _make_layer(case, pyg_nn)
    torch.manual_seed(case.seed)
    ours = _make_layer(case, io_nn)
    ours.load_state_dict(theirs.state_dict())
    ours.to(device=device, dtype=dtype)
    same_dtype = None
    if dtype != torch.float64:
        same_dtype = copy.deepcopy(theirs).to(dtype)
        same_dtype.load_state_dict(ours.state_dict())
    theirs.double()
    theirs.load_state_dict(ours.state_dict())  # the rounded weights, in fp64
    return ours, theirs, same_dtype


def _inputs(case: Case, dtype) -> Dict[str, Any]:
    """CPU inputs in dtype: features (a tensor or a pair) and the per-edge input."""
    gen = torch.Generator().manual_seed(case.seed + 1)
    f_src, f_dst = case.in_channels
    x_src = torch.randn(case.num_src, f_src, generator=gen).to(dtype)
    inputs: Dict[str, Any] = {"x_src": x_src}
    if case.bipartite:
        inputs["x_dst"] = torch.randn(case.num_dst, f_dst, generator=gen).to(dtype)
    num_edges = case.edge_index.size(1)
    if case.edge_input == "edge_weight":
        inputs["edge_weight"] = (torch.rand(num_edges, generator=gen) + 0.1).to(dtype)
    elif case.edge_input == "edge_attr":
        # A 1-D edge_attr in half the edge_dim = 1 cases (not for TransformerConv: PyG's reads a
        # 1-D edge_attr as a single sample).
        flat = case.edge_dim == 1 and case.seed % 2 and case.layer != "TransformerConv"
        shape = (num_edges,) if flat else (num_edges, case.edge_dim)
        inputs["edge_attr"] = torch.randn(*shape, generator=gen).to(dtype)
    return inputs


def _adjacency(case: Case, device):
    ei = case.edge_index.to(device)
    if case.adjacency == "int32":
        return ei.int()
    if case.adjacency == "strided":
        return torch.stack([ei, ei], 2).view(2, -1)[:, ::2]  # element stride 2
    if case.adjacency == "graph":
        return iognn.Graph(ei, (case.num_src, case.num_dst))
    return ei


def _forward(case: Case, layer, inputs: Dict[str, torch.Tensor], adjacency):
    """(output, attention weights or None) of `layer` on the case's inputs."""
    if case.layer == "Aggregation":
        x, groups = inputs["x_src"], adjacency[1] if isinstance(adjacency, torch.Tensor) else None
        if case.aggr_mode == "ptr":
            ptr = torch.zeros(case.num_dst + 1, dtype=torch.long, device=x.device)
            ptr[1:] = torch.bincount(groups.long(), minlength=case.num_dst).cumsum(0)
            return layer(x, ptr=ptr), None
        if case.aggr_mode == "all":
            return layer(x), None
        return layer(x, groups, dim_size=case.num_dst), None
    x = (inputs["x_src"], inputs["x_dst"]) if case.bipartite else inputs["x_src"]
    args = [x, adjacency]
    if case.edge_input is not None:
        args.append(inputs[case.edge_input])
    if case.want_alpha:
        out, (_, alpha) = layer(*args, return_attention_weights=True)
        return out, alpha
    return layer(*args), None


def _one_loop_per_node(edge_index: torch.Tensor) -> torch.Tensor:
    """edge_index without the self-loops that another loop of the same node follows."""
    keep = torch.ones(edge_index.size(1), dtype=torch.bool)
    seen = set()
    for e in reversed((edge_index[0] == edge_index[1]).nonzero().view(-1).tolist()):
        node = int(edge_index[0, e])
        keep[e] = node not in seen
        seen.add(node)
    return edge_index[:, keep]


def tolerance(case: Case, dtype) -> Tuple[float, float]:
    """(rtol, atol relative to the tensor's largest magnitude): the dtype's base tolerance, grown
    with the square root of the largest reduction of the case (summation-order differences)."""
    rtol, atol = BASE_TOL[dtype]
    ei = case.edge_index
    widest = max([1, case.num_src, case.num_dst, ei.size(1)] +
                 ([int(torch.bincount(ei[1]).max())] if ei.size(1) else []))
    growth = max(1.0, math.sqrt(widest / 64))
    return rtol * growth, atol * growth


class Mismatch(AssertionError):
    pass


def evaluate(case: Case, layer, inputs: Dict[str, torch.Tensor], adjacency,
             grad_seed: int) -> Dict[str, Optional[torch.Tensor]]:
    """Output, attention weights and the gradients of a random loss with respect to every input
    and trainable parameter, by name, as fp64 CPU tensors (a gradient that does not flow: None)."""
    inputs = {k: v.detach().requires_grad_() for k, v in inputs.items()}
    out, alpha = _forward(case, layer, inputs, adjacency)
    results: Dict[str, Optional[torch.Tensor]] = {"output": out}
    outputs = [out]
    if alpha is not None:
        results["attention weights"] = alpha
        outputs.append(alpha)
    params = {n: p for n, p in layer.named_parameters() if p.requires_grad}
    wrt = list(inputs.values()) + list(params.values())
    if sum(o.numel() for o in outputs) and wrt:
        gen = torch.Generator().manual_seed(grad_seed)
        grads = [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.device, o.dtype)
                 for o in outputs]
        got = torch.autograd.grad(outputs, wrt, grads, allow_unused=True)
        for name, g in zip([f"grad {k}" for k in inputs] + [f"grad {n}" for n in params], got):
            results[name] = g
    return {k: None if v is None else v.detach().cpu().double() for k, v in results.items()}


def _compare(name: str, got: Optional[torch.Tensor], exp: Optional[torch.Tensor],
             spread: Optional[torch.Tensor], tol, dtype) -> None:
    """got within tolerance of exp (fp64). The tolerance of each element also covers `spread`:
    four times the error of PyG's own result in the case's dtype, where the computation is
    ill-conditioned (a variance of nearly equal values, a normalised near-zero vector, a long sum
    that cancels), plus twice that result's largest error anywhere in the tensor (``_widen``):
    iognn must be as accurate as PyG is in that dtype; and, in fp16 / bf16, the
    reference's sensitivity to rounding-sized perturbations (``_perturbed``). A value beyond the
    dtype's range may be +-Inf."""
    if got is None and exp is None:
        return
    got = torch.zeros_like(exp) if got is None else got
    exp = torch.zeros_like(got) if exp is None else exp
    if got.shape != exp.shape:
        raise Mismatch(f"{name}: shape {list(got.shape)}, expected {list(exp.shape)}")
    rtol, atol = tol
    scale = max(1.0, float(exp.abs().max())) if exp.numel() else 1.0
    allowed = atol * scale + rtol * exp.abs()
    if spread is not None:
        allowed = allowed + spread
    error = (got - exp).abs()
    overflow = got.isinf() & (exp.abs() > torch.finfo(dtype).max) & (got.sign() == exp.sign())
    bad = ~((error <= allowed) | (got.isnan() & exp.isnan()) | (got == exp) | overflow)
    if bool(bad.any()):
        k = int(bad.view(-1).nonzero()[0])
        raise Mismatch(f"{name}: {int(bad.sum())} of {bad.numel()} elements differ, e.g. element "
                       f"{k}: {got.view(-1)[k].item():.6g} vs PyG {exp.view(-1)[k].item():.6g} "
                       f"(allowed {allowed.view(-1)[k].item():.3g})")


def run_case(case: Case, device="cpu") -> None:
    """Runs `case` on `device`; raises Mismatch (message: what differs) on any difference."""
    device = torch.device(device)
    dtype = case.dtype
    ours, theirs, same_dtype = build_layers(case, device, dtype)
    inputs = _inputs(case, dtype)
    got = evaluate(case, ours, {k: v.to(device) for k, v in inputs.items()},
                   _adjacency(case, device), case.seed + 2)
    exp = evaluate(case, theirs, {k: v.double() for k, v in inputs.items()}, case.edge_index,
                   case.seed + 2)
    spread: Dict[str, torch.Tensor] = {}
    if same_dtype is not None:
        try:
            same = evaluate(case, same_dtype, inputs, case.edge_index, case.seed + 2)
            _widen(spread, same, exp, 4.0)
            _widen(spread, same, exp, 2.0, uniform=True)
        except (RuntimeError, NotImplementedError):  # a CPU kernel missing in this dtype
            pass
    if dtype in (torch.float16, torch.bfloat16):
        for sign in (1.0, -1.0):
            _widen(spread, _perturbed(case, theirs, inputs, dtype, sign), exp, 1.0)
    if set(got) != set(exp):
        raise Mismatch(f"different results: {sorted(got)} vs PyG {sorted(exp)}")
    tol = tolerance(case, dtype)
    for name in exp:
        _compare(name, got[name], exp[name], spread.get(name), tol, dtype)


def _widen(spread: Dict[str, torch.Tensor], other: Dict[str, Optional[torch.Tensor]],
           exp: Dict[str, Optional[torch.Tensor]], weight: float, uniform: bool = False) -> None:
    """spread[name] += weight * |other - exp|, elementwise (non-finite differences count 0), or
    with ``uniform`` its largest element over the whole tensor. The uniform term is for rounding
    noise without a per-element pattern: the gradient of a normalised 1-wide output is 0 exactly and
    O(eps |g| / |out|) in fp16 wherever |out| is small, in PyG and in iognn, at positions that
    depend on the order of each library's roundings (iognn may project before it aggregates)."""
    for name, value in other.items():
        ref = exp.get(name)
        if value is None or ref is None or value.shape != ref.shape:
            continue
        delta = weight * (value - ref).abs().nan_to_num(0.0, posinf=0.0)
        if uniform:
            delta = torch.full_like(delta, float(delta.max()) if delta.numel() else 0.0)
        spread[name] = spread[name] + delta if name in spread else delta


def _perturbed(case: Case, theirs, inputs: Dict[str, torch.Tensor], dtype, sign: float):
    """The fp64 reference's results with every input and weight scaled by (1 + sign * 4 eps * r),
    r a fixed random +-1 pattern and eps the dtype's machine epsilon. Its distance to the
    unperturbed reference measures how far rounding at the dtype's scale can move each result:
    a LeakyReLU logit of GAT/GATv2 within that distance of 0 may fall on either side of the kink
    in iognn (logits x @ (W^T att)) and in PyG ((x W^T) . att), and changes the gradients by
    (1 - negative_slope) times that edge's share."""
    gen = torch.Generator().manual_seed(case.seed + 3)
    scale = 4 * torch.finfo(dtype).eps

    def perturb(t: torch.Tensor) -> torch.Tensor:
        r = torch.randint(0, 2, t.shape, generator=gen, dtype=torch.float64) * 2 - 1
        return t.double() * (1 + sign * scale * r)

    layer = copy.deepcopy(theirs)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(perturb(p))
    return evaluate(case, layer, {k: perturb(v) for k, v in inputs.items()}, case.edge_index,
                    case.seed + 2)


def repro(case: Case, device) -> str:
    return f"python tests/python/fuzz.py --seed {case.seed} --device {device}"


def check_seed(seed: int, device="cpu") -> None:
    """run_case(make_case(seed)), any failure re-raised with the seed, the case and a repro."""
    case = make_case(seed, str(device))
    try:
        run_case(case, device)
    except Exception as error:  # a crash inside iognn is a finding too: report it with the seed
        raise AssertionError(f"fuzz case failed: {case.describe()}\n  {type(error).__name__}: "
                             f"{error}\n  repro: {repro(case, device)}") from error


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, required=True, help="first seed")
    parser.add_argument("--count", type=int, default=1, help="number of consecutive seeds")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    failures = 0
    for seed in range(args.seed, args.seed + args.count):
        case = make_case(seed, args.device)
        try:
            run_case(case, args.device)
            print(f"ok    {case.describe()}")
        except Exception as error:
            failures += 1
            print(f"FAIL  {case.describe()}\n      {type(error).__name__}: {error}")
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()
