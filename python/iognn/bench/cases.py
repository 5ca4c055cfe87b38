"""What is measured: for every op, its inputs and the implementations compared, at two levels.

* ``op`` level: the functional kernel on precomputed inputs. iognn's op (``iognn.ops.*``, on a
  prebuilt ``iognn.Graph``) against PyG's own computation of the same thing (the gather /
  scatter / aggregation-module / softmax calls its layers make on a plain edge_index) and, for the
  propagate ops, ``torch.sparse.mm`` on a CSR adjacency.
* ``layer`` level: the PyG 2.8 module against ``iognn.nn``'s module of the same name, constructed
  with the same arguments and loaded with the same ``state_dict``, both fed the same plain
  edge_index; for GCN, SAGE and GIN also PyG's fused sparse path (a ``torch.sparse`` CSR
  ``adj_t``, and a ``SparseTensor`` when torch_sparse is installed). PyG's other sorted-index
  paths (a destination-sorted ``EdgeIndex``: segment softmax for attention, ``ptr`` aggregations)
  were measured slower than its plain path on an H200 and are left out.

The first implementation of every workload, ``pyg``, is the reference: speed-ups, memory ratios
and correctness checks are relative to it. Ops:

=========== ================================= ==============================================
op          op level (iognn)                  layer level (PyG module)
=========== ================================= ==============================================
gcn         propagate(+gcn_norm weights, sum) GCNConv(F, F)
sage        propagate(mean)                   SAGEConv(F, F)
gin         propagate(sum)                    GINConv(Linear(F, F))
sum ... std segment_reduce(reduce)            SAGEConv(F, F, aggr=reduce)
multi       segment_reduce([min,max,mean,std]) SAGEConv(F, F, aggr=[min, max, mean, std])
            (+ iognn-separate: the four one by one)
pna         DegreeScalerAggregation(the four, PNAConv(F, F, the four, the three scalers)
            identity / amplification /
            attenuation): scalers in the kernel
            (+ iognn-separate: scaled after)
gat         gat_attention                     GATConv(F, C, heads=H, add_self_loops=False)
gatv2       gatv2_attention                   GATv2Conv(F, C, heads=H, add_self_loops=False)
transformer transformer_attention             TransformerConv(F, C, heads=H)
=========== ================================= ==============================================

Attention op inputs are per head: ``[N, H, C]`` features, ``[N, H]`` GAT logits, a ``[H, C]``
GATv2 attention vector; the iognn attention ops are called as
``gat_attention(graph, x, alpha_src, alpha_dst)``, ``gatv2_attention(graph, x_src, x_dst, att)``
and ``transformer_attention(graph, q, k, v)`` with their defaults (negative slope 0.2, scale
1/sqrt(C)) and must return ``[N, H, C]`` (or a tuple whose first item is that).
"""
from __future__ import annotations

import copy
import importlib
import importlib.util
import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from .prepared import PreparedGraph

Fn = Callable[..., Tensor]
# builder(graph, workload, module) -> fn(*inputs) -> output; module is the PyG layer in the run's
# dtype at layer level, None at op level.
Builder = Callable[[PreparedGraph, "Workload", Optional[torch.nn.Module]], Fn]


@dataclass(frozen=True)
class Workload:
    """One row group of the table: an op at a level, in a dtype, at a width."""
    op: str
    level: str  # 'op' | 'layer'
    dtype: torch.dtype
    feat: int  # F: the op's feature width, or the layer's input (and GCN/SAGE/GIN output) width
    heads: Optional[int] = None  # attention only: H heads of C = head_dim channels
    head_dim: Optional[int] = None

    @property
    def case(self) -> "Case":
        return CASES[self.op]

    @property
    def label(self) -> str:
        return self.op if self.heads is None else f"{self.op}[H{self.heads}xC{self.head_dim}]"


class Case:
    """An op: its inputs and implementations at both levels (subclasses fill the tables)."""
    family: str
    layer_class: str  # class name in torch_geometric.nn and iognn.nn

    def __init__(self, op: str):
        self.op = op

    # ---- op level -----------------------------------------------------------------------------
    def op_inputs(self, w: Workload, g: PreparedGraph, gen: torch.Generator) -> Tuple[Tensor, ...]:
        """fp32 inputs of the op (cast to the run's dtype by the runner)."""
        return (_randn((g.num_nodes, w.feat), gen, g.device),)

    def op_impls(self, w: Workload) -> Dict[str, Builder]:
        raise NotImplementedError

    # ---- layer level ------------------------------------------------------------------------
    def layer_args(self, w: Workload, template: Optional[torch.nn.Module]) -> Tuple[tuple, dict]:
        raise NotImplementedError

    def layer_peers(self) -> Tuple[str, ...]:
        """PyG's sparse inputs measured besides the plain edge_index: 'csr', 'sparse_tensor'."""
        return ()

    def make_layer(self, package: str, w: Workload, template=None) -> torch.nn.Module:
        cls = getattr(importlib.import_module(package), self.layer_class)
        args, kwargs = self.layer_args(w, template)
        return cls(*args, **kwargs)

    def layer_impls(self, w: Workload) -> Dict[str, Builder]:
        impls: Dict[str, Builder] = {"pyg": lambda g, w_, m: _call_layer(m, g.edge_index)}
        adjacency = {
            "csr": ("pyg-csr", lambda g: g.sparse_adj_t("ones", w.dtype)),
            "sparse_tensor": ("pyg-sparsetensor", lambda g: g.sparse_tensor_adj_t()),
        }
        for peer in self.layer_peers():
            if peer == "sparse_tensor" and importlib.util.find_spec("torch_sparse") is None:
                continue  # PyG's SparseTensor path exists only with torch_sparse installed
            name, adj = adjacency[peer]
            impls[name] = lambda g, w_, m, adj=adj: _call_layer(m, adj(g))
        impls["iognn"] = self._iognn_layer
        return impls

    def _iognn_layer(self, g: PreparedGraph, w: Workload, module: torch.nn.Module) -> Fn:
        layer = self.make_layer("iognn.nn", w, template=module)
        layer = layer.to(device=g.device, dtype=w.dtype)
        layer.load_state_dict(module.state_dict())
        return _call_layer(layer, g.edge_index)

    def impls(self, w: Workload) -> Dict[str, Builder]:
        return self.op_impls(w) if w.level == "op" else self.layer_impls(w)


def _call_layer(module: torch.nn.Module, adjacency) -> Fn:
    def fn(x: Tensor) -> Tensor:
        return module(x, adjacency)
    fn.module = module  # the runner clears its parameter gradients between steps
    return fn


def _randn(shape, gen: torch.Generator, device, scale: float = 1.0) -> Tensor:
    return torch.randn(shape, generator=gen, device=device) * scale


def _scatter(src: Tensor, index: Tensor, num_nodes: int, reduce: str) -> Tensor:
    from torch_geometric.utils import scatter
    return scatter(src, index, 0, dim_size=num_nodes, reduce=reduce)


# ---- propagate (SpMM family) ----------------------------------------------------------------
class PropagateCase(Case):
    family = "propagate"
    # op -> (layer class, torch.sparse weighting, iognn self-loop mode, iognn reduce)
    SPEC = {"gcn": ("GCNConv", "gcn", "add_remaining", "sum"),
            "sage": ("SAGEConv", "mean", "keep", "mean"),
            "gin": ("GINConv", "ones", "keep", "sum")}

    def __init__(self, op: str):
        super().__init__(op)
        self.layer_class, self.weighting, self.self_loops, self.reduce = self.SPEC[op]

    def op_impls(self, w: Workload) -> Dict[str, Builder]:
        return {"pyg": self._pyg, "torch-sparse": self._torch_sparse, "iognn": self._iognn}

    def _pyg(self, g: PreparedGraph, w: Workload, _m) -> Fn:
        # PyG's MessagePassing on a plain edge_index: gather, scale, scatter
        if self.weighting == "gcn":
            (src, dst), weight = g.gcn_edges()
            weight = weight.to(w.dtype).unsqueeze(-1)
            return lambda x: _scatter(x.index_select(0, src) * weight, dst, g.num_nodes, "sum")
        reduce = "mean" if self.weighting == "mean" else "sum"
        return lambda x: _scatter(x.index_select(0, g.src), g.dst, g.num_nodes, reduce)

    def _torch_sparse(self, g: PreparedGraph, w: Workload, _m) -> Fn:
        adj = g.sparse_adj_t(self.weighting, w.dtype)
        return lambda x: torch.sparse.mm(adj, x)

    def _iognn(self, g: PreparedGraph, w: Workload, _m) -> Fn:
        from ..ops.propagate import gcn_norm, propagate
        graph = g.iognn_graph(self.self_loops)
        weight = None
        if self.weighting == "gcn":
            weight = gcn_norm(graph)
        return lambda x: propagate(graph, x, weight, self.reduce)

    def layer_args(self, w: Workload, template=None):
        if self.op == "gin":
            mlp = (copy.deepcopy(template.nn) if template is not None
                   else torch.nn.Linear(w.feat, w.feat))
            return (mlp,), {}
        return (w.feat, w.feat), {}

    def layer_peers(self) -> Tuple[str, ...]:
        return ("csr", "sparse_tensor")


# ---- reductions ---------------------------------------------------------------------------------
MULTI = ("min", "max", "mean", "std")


class ReduceCase(Case):
    family = "reduce"
    layer_class = "SAGEConv"

    @property
    def reduce(self):
        return list(MULTI) if self.op == "multi" else self.op

    def _aggregation(self):
        from torch_geometric.nn.resolver import aggregation_resolver
        if self.op == "multi":
            from torch_geometric.nn.aggr import MultiAggregation
            return MultiAggregation(list(MULTI))
        return aggregation_resolver(self.op)

    def op_impls(self, w: Workload) -> Dict[str, Builder]:
        if self.op == "multi":  # the fused pass against the same reductions called one by one
            return {"pyg": self._pyg, "iognn-separate": self._iognn_separate,
                    "iognn": self._iognn}
        return {"pyg": self._pyg, "iognn": self._iognn}

    def _pyg(self, g: PreparedGraph, w: Workload, _m) -> Fn:
        aggr = self._aggregation().to(g.device)  # buffers (DegreeScalerAggregation's norms)
        return lambda x: aggr(x.index_select(0, g.src), index=g.dst, dim_size=g.num_nodes)

    def _iognn(self, g: PreparedGraph, w: Workload, _m) -> Fn:
        from ..ops.segment_reduce import segment_reduce
        graph = g.iognn_graph("keep")
        return lambda x: segment_reduce(graph, x, self.reduce)

    def _iognn_separate(self, g: PreparedGraph, w: Workload, _m) -> Fn:
        from ..ops.segment_reduce import segment_reduce
        graph = g.iognn_graph("keep")
        return lambda x: torch.cat([segment_reduce(graph, x, r) for r in self.reduce], dim=-1)

    def layer_args(self, w: Workload, template=None):
        return (w.feat, w.feat), {"aggr": self.reduce}


PNA_SCALERS = ("identity", "amplification", "attenuation")
PNA_DEGREE_HISTOGRAM = (0,) * 16 + (1,)  # the normalisers only: every node of degree 16


class DegreeScalerCase(ReduceCase):
    """PNA's aggregation: the MULTI reductions times the degree scalers. iognn runs the scalers
    in the reduction kernel's epilogue; iognn-separate is the same reduction scaled afterwards by
    torch (what the module does for aggregations it cannot fuse)."""
    layer_class = "PNAConv"

    @property
    def reduce(self):
        return list(MULTI)

    def _aggregation(self, package: str = "torch_geometric.nn.aggr"):
        cls = importlib.import_module(package).DegreeScalerAggregation
        return cls(list(MULTI), list(PNA_SCALERS), deg=torch.tensor(PNA_DEGREE_HISTOGRAM))

    def op_impls(self, w: Workload) -> Dict[str, Builder]:
        return {"pyg": self._pyg, "iognn-separate": self._iognn_separate, "iognn": self._iognn}

    def _iognn(self, g: PreparedGraph, w: Workload, _m) -> Fn:
        module = self._aggregation("iognn.nn.aggr").to(g.device)
        graph = g.iognn_graph("keep")
        return lambda x: module.aggregate(graph, x)

    def _iognn_separate(self, g: PreparedGraph, w: Workload, _m) -> Fn:
        from ..ops.segment_reduce import segment_reduce
        module = self._aggregation("iognn.nn.aggr").to(g.device)
        graph = g.iognn_graph("keep")

        def fn(x: Tensor) -> Tensor:
            out = segment_reduce(graph, x, self.reduce)
            scale = module.degree_scales(graph.degree("in"), x)
            return torch.cat([out * scale[:, s:s + 1] for s in range(scale.size(1))], dim=1)
        return fn

    def layer_args(self, w: Workload, template=None):
        return (w.feat, w.feat), {"aggregators": list(MULTI), "scalers": list(PNA_SCALERS),
                                  "deg": torch.tensor(PNA_DEGREE_HISTOGRAM)}


# ---- attention --------------------------------------------------------------------------------
NEGATIVE_SLOPE = 0.2  # PyG's default for GAT and GATv2


class AttentionCase(Case):
    family = "attention"
    SPEC = {"gat": ("GATConv", "gat_attention"),
            "gatv2": ("GATv2Conv", "gatv2_attention"),
            "transformer": ("TransformerConv", "transformer_attention")}

    def __init__(self, op: str):
        super().__init__(op)
        self.layer_class, self.function = self.SPEC[op]

    def op_inputs(self, w: Workload, g: PreparedGraph, gen: torch.Generator) -> Tuple[Tensor, ...]:
        n, h, c = g.num_nodes, w.heads, w.head_dim
        if self.op == "gat":  # x, alpha_src, alpha_dst
            return (_randn((n, h, c), gen, g.device), _randn((n, h), gen, g.device),
                    _randn((n, h), gen, g.device))
        if self.op == "gatv2":  # x_src, x_dst, att (scaled so that logits are O(1))
            return (_randn((n, h, c), gen, g.device), _randn((n, h, c), gen, g.device),
                    _randn((h, c), gen, g.device, 1.0 / math.sqrt(c)))
        return tuple(_randn((n, h, c), gen, g.device) for _ in range(3))  # q, k, v

    def op_impls(self, w: Workload) -> Dict[str, Builder]:
        return {"pyg": self._pyg, "iognn": self._iognn}

    def _pyg(self, g: PreparedGraph, w: Workload, _m) -> Fn:
        """The computation PyG's layer performs after its linear maps, on a plain edge_index:
        gathers, scores, softmax over the in-edges of each target, weighted scatter-sum."""
        from torch_geometric.utils import softmax
        src, dst, n = g.src, g.dst, g.num_nodes

        def aggregate(logits: Tensor, values: Tensor) -> Tensor:
            alpha = softmax(logits, dst, num_nodes=n)
            return _scatter(values.index_select(0, src) * alpha.unsqueeze(-1), dst, n, "sum")

        if self.op == "gat":
            def gat(x, a_src, a_dst):
                logits = a_src.index_select(0, src) + a_dst.index_select(0, dst)
                return aggregate(torch.nn.functional.leaky_relu(logits, NEGATIVE_SLOPE), x)
            return gat
        if self.op == "gatv2":
            def gatv2(x_src, x_dst, att):
                e = x_src.index_select(0, src) + x_dst.index_select(0, dst)
                e = torch.nn.functional.leaky_relu(e, NEGATIVE_SLOPE)
                return aggregate((e * att).sum(-1), x_src)
            return gatv2

        def transformer(q, k, v):
            logits = (q.index_select(0, dst) * k.index_select(0, src)).sum(-1) / math.sqrt(q.size(-1))
            return aggregate(logits, v)
        return transformer

    def _iognn(self, g: PreparedGraph, w: Workload, _m) -> Fn:
        from ..ops import attention
        function = getattr(attention, self.function)
        graph = g.iognn_graph("keep")

        def fn(*inputs):
            out = function(graph, *inputs)
            return out[0] if isinstance(out, tuple) else out
        return fn

    def layer_args(self, w: Workload, template=None):
        kwargs = {"heads": w.heads}
        if self.op != "transformer":
            kwargs["add_self_loops"] = False
        return (w.feat, w.head_dim), kwargs


CASES: Dict[str, Case] = {
    **{op: PropagateCase(op) for op in PropagateCase.SPEC},
    **{op: ReduceCase(op) for op in ("sum", "mean", "min", "max", "std", "multi")},
    "pna": DegreeScalerCase("pna"),
    **{op: AttentionCase(op) for op in AttentionCase.SPEC},
}
FAMILIES: Dict[str, List[str]] = {}
for _op, _case in CASES.items():
    FAMILIES.setdefault(_case.family, []).append(_op)


def resolve_ops(names: Sequence[str]) -> List[str]:
    """Op names from a selection of ops, families ('propagate', 'reduce', 'attention') or 'all'."""
    ops: List[str] = []
    for name in names:
        if name == "all":
            chosen = list(CASES)
        elif name in FAMILIES:
            chosen = FAMILIES[name]
        elif name in CASES:
            chosen = [name]
        else:
            raise ValueError(f"unknown op {name!r}: expected one of {list(CASES)}, a family "
                             f"{list(FAMILIES)} or 'all'")
        ops.extend(op for op in chosen if op not in ops)
    return ops
