"""``iognn bench --suite workloads``: the everyday workloads, measured as users run them.

Where most people train (small graphs, mid-size graphs whose features fit in L2, a new sampled
subgraph every step) a step costs host work, kernel launches and graph construction more than
memory traffic, so every row here is a wall-clock time with the host included, next to the summed
kernel time and the number of launches of the same step (torch.profiler). Parts:

- ``steps``: a whole training step (2-layer GCN / SAGE / GAT 8x8, hidden 64, forward + cross
  entropy + backward + Adam; GIN with two-layer MLPs too on the ``--compile-graphs``) per graph:
  iognn eager and captured (``iognn.CapturedStep``), PyG eager, and both libraries compiled
  (``default`` and ``reduce-overhead``; compiled rows only on the ``--compile-graphs``, since each
  compile costs seconds);
- ``layers``: one layer's forward + backward on 64 hidden features (GCN, SAGE, GAT / GATv2 /
  Transformer 8x8), iognn against PyG;
- ``batches``: a new bipartite edge_index every step in the shape of a sampled block (16,384
  destinations x fan-out 15 from 200,000 sources, F = 128), SAGEConv and GATConv 8x8 forward +
  backward with the graph build included, and ``iognn.Graph`` of such a block alone from input
  sorted by (destination, source), sorted by destination only, and shuffled;
- ``ops``: min fwd + bwd (F = 128) on mid-size real graphs, iognn's segment_reduce against PyG's
  MinAggregation;
- ``minibatch``: the mini-batch path on synthetic-products and a real graph: sampled edges per
  second of the neighbour sampler, ``iognn.Graph`` of a sampled batch, and a whole epoch of a
  3-layer SAGE through the loader, iognn against PyG's layers on the same batches (see
  :mod:`iognn.bench.minibatch`; wall times only).
- ``ggnn``: GatedGraphConv and the typed GGNN (8 steps, hidden 128, 40 edge types) forward +
  backward on a batch of synthetic program graphs, iognn against PyG, with peak memory (see
  :mod:`iognn.bench.ggnn`; wall times only).
- ``graph_training``: a whole GIN graph-classification epoch on tu_nci1 and reddit10k (batches of
  128 small graphs), iognn against PyG on the same batches (see :mod:`iognn.bench.graph_training`;
  wall times only).

Timing: ``warmup`` untimed steps (compilation and captures happen there), then ``rounds`` rounds
of ``steps`` steps between two host clock reads, the device synchronised before each read; the
median round gives the wall time per step. Kernel time and launches: one profiled round per row,
counting every CUDA kernel (summed device time) and every host call that starts device work
(kernel, memcpy, memset and graph launches). All wall times are taken before the first profiled
round: once torch.profiler has attached to the CUDA driver, every later launch costs more host
time in that process. Every step starts from gradients set to None (as ``optimizer.zero_grad()``
leaves them), so that no row pays for accumulating into the previous step's gradients.
"""
from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Callable, Dict, List, Optional

import torch
import torch.nn.functional as F

TRAIN_GRAPHS = ["cora", "citeseer", "amazon_photo", "coauthor_cs", "tolokers",
                "random:10000:200000"]
OP_GRAPHS = ["tolokers", "amazon_computers", "coauthor_physics", "twitch_DE", "road-usroads-48"]
MODELS = ("gcn", "sage", "gat")
COMPILE_MODELS = ("gin",)  # PyG's compile benchmark also trains GIN: on the --compile-graphs only
LAYERS = ("GCNConv", "SAGEConv", "GATConv", "GATv2Conv", "TransformerConv")
PARTS = ("steps", "layers", "batches", "ops", "minibatch", "ggnn", "graph_training")
HIDDEN, HEADS = 64, 8
BLOCK = dict(num_dst=16384, fanout=15, num_src=200000, feat=128)
LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                "cudaLaunchCooperativeKernel", "cudaGraphLaunch", "cudaMemcpyAsync",
                "cudaMemsetAsync")


def peak_mib(step, device: torch.device):
    """Peak memory of one step above what is allocated before it (CUDA), or None."""
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    step()
    torch.cuda.synchronize(device)
    return (torch.cuda.max_memory_allocated(device) - base) / 2**20


@dataclass
class Row:
    part: str
    graph: str
    workload: str
    impl: str
    wall_ms: Optional[float] = None
    kernel_ms: Optional[float] = None
    launches: Optional[float] = None
    kernels: Optional[float] = None
    status: str = "ok"
    rate: Optional[float] = None   # items per second where a row counts some (sampled edges)
    note: str = ""

    @property
    def host_share(self) -> Optional[float]:
        if self.wall_ms is None or self.kernel_ms is None or self.wall_ms <= 0:
            return None
        return max(0.0, 1.0 - self.kernel_ms / self.wall_ms)


# ---- measuring one step ------------------------------------------------------------------------
def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def wall_time(step: Callable[[], object], device: torch.device, warmup: int, rounds: int,
              steps: int) -> float:
    """Milliseconds per step: the median of ``rounds`` rounds of ``steps`` steps."""
    for _ in range(warmup):
        step()
    _sync(device)
    walls = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        _sync(device)
        walls.append((time.perf_counter() - start) * 1e3 / steps)
    return statistics.median(walls)


def kernel_time(step: Callable[[], object], device: torch.device, steps: int
                ) -> Dict[str, Optional[float]]:
    """Per step on CUDA, over one profiled round: summed kernel time (ms), kernels and launch
    calls. Run after every wall time of the process: once the profiler has attached to the
    CUDA driver, later launches cost more host time."""
    if device.type != "cuda":
        return {"kernel_ms": None, "launches": None, "kernels": None}
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        _sync(device)
    kernel_us, kernels, launches = 0.0, 0, 0
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            kernel_us += event.time_range.elapsed_us()
            kernels += 1
        elif event.name in LAUNCH_CALLS:
            launches += 1
    return {"kernel_ms": kernel_us / 1e3 / steps, "kernels": kernels / steps,
            "launches": launches / steps}


def measure(step: Callable[[], object], device: torch.device, warmup: int, rounds: int,
            steps: int) -> Dict[str, Optional[float]]:
    """wall_time and kernel_time of one step (for a single row; a suite times every row first)."""
    out = {"wall_ms": wall_time(step, device, warmup, rounds, steps)}
    out.update(kernel_time(step, device, steps))
    return out


# ---- models and data ---------------------------------------------------------------------------
class TwoLayer(torch.nn.Module):
    def __init__(self, lib, model: str, in_channels: int, num_classes: int):
        super().__init__()
        if model == "gat":
            self.conv1 = lib.GATConv(in_channels, HIDDEN // HEADS, heads=HEADS)
            self.conv2 = lib.GATConv(HIDDEN, num_classes, heads=1)
        elif model == "gin":
            def mlp(a, b):
                return torch.nn.Sequential(torch.nn.Linear(a, HIDDEN), torch.nn.ReLU(),
                                           torch.nn.Linear(HIDDEN, b))
            self.conv1 = lib.GINConv(mlp(in_channels, HIDDEN))
            self.conv2 = lib.GINConv(mlp(HIDDEN, num_classes))
        else:
            conv = lib.GCNConv if model == "gcn" else lib.SAGEConv
            self.conv1, self.conv2 = conv(in_channels, HIDDEN), conv(HIDDEN, num_classes)

    def forward(self, x, edge_index):
        x = F.dropout(x, 0.5, self.training)
        x = F.relu(self.conv1(x, edge_index))
        x = F.dropout(x, 0.5, self.training)
        return self.conv2(x, edge_index)


def node_data(name: str, device: torch.device, data_dir: Optional[str], seed: int):
    """(x, edge_index, y, train_idx, num_classes) of a real dataset, or random ones for
    ``random:N:E`` (64 features, 10 classes, PyG's compile benchmark shape). The training nodes are
    an index vector: indexing by a boolean mask synchronises, which no captured step may do."""
    if name.startswith("random:"):
        _, n, e = name.split(":")
        gen = torch.Generator().manual_seed(seed)
        n, e = int(n), int(e)
        x = torch.randn(n, 64, generator=gen)
        edge_index = torch.randint(0, n, (2, e), generator=gen)
        y = torch.randint(0, 10, (n,), generator=gen)
        mask = torch.rand(n, generator=gen) < 0.1
        tensors, classes = (x, edge_index, y, mask.nonzero().view(-1)), 10
    else:
        from ..datasets import load_dataset
        data = load_dataset(name, data_dir)
        tensors = (data.x, data.edge_index, data.y, data.train_mask.nonzero().view(-1))
        classes = int(data.y.max()) + 1
    return tuple(t.to(device) for t in tensors) + (classes,)


def _node_loss(model, x, edge_index, y, train_idx):
    return F.cross_entropy(model(x, edge_index)[train_idx], y[train_idx])


def training_steps(graph: str, model_name: str, device, data_dir, seed, compiled: bool):
    """{impl: step()} for one graph and model."""
    import torch_geometric.nn as pyg_nn

    import iognn
    import iognn.nn as io_nn
    x, edge_index, y, train_idx, classes = node_data(graph, device, data_dir, seed)
    impls = {"pyg": pyg_nn, "iognn": io_nn}
    variants = ["pyg", "iognn"] + (["iognn captured"] if hasattr(iognn, "CapturedStep") else [])
    if compiled:
        variants += ["pyg compile", "pyg compile-ro", "iognn compile", "iognn compile-ro"]
    out = {}
    for variant in variants:
        torch.manual_seed(seed)
        model = TwoLayer(impls[variant.split()[0]], model_name, x.size(1), classes).to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        if variant == "iognn captured":
            out[variant] = (lambda s: lambda: s(x, edge_index, y, train_idx))(
                iognn.CapturedStep(model, optimizer, _node_loss, enabled=device.type == "cuda"))
            continue
        forward = model
        if variant.endswith("compile"):
            forward = torch.compile(model)
        elif variant.endswith("compile-ro"):
            forward = torch.compile(model, mode="reduce-overhead")

        def step(forward=forward, optimizer=optimizer):
            optimizer.zero_grad(set_to_none=True)
            loss = _node_loss(forward, x, edge_index, y, train_idx)
            loss.backward()
            optimizer.step()
        out[variant] = step
    return out


def _layer(lib, name: str):
    if name in ("GATConv", "GATv2Conv", "TransformerConv"):
        return getattr(lib, name)(HIDDEN, HIDDEN // HEADS, heads=HEADS)
    return getattr(lib, name)(HIDDEN, HIDDEN)


def clear_grads(module, leaves) -> None:
    """Gradients set to None, as ``optimizer.zero_grad()`` does in a training loop: a step that
    accumulated into the previous step's gradients would pay a launch per parameter."""
    if isinstance(module, torch.nn.Module):
        module.zero_grad(set_to_none=True)
    for leaf in leaves:
        leaf.grad = None


def fwd_bwd(module, inputs, grad_of, leaves=()):
    def step():
        clear_grads(module, leaves)
        out = module(*inputs)
        out.backward(grad_of(out))
    return step


def layer_steps(graph: str, layer: str, device, data_dir, seed):
    import torch_geometric.nn as pyg_nn

    import iognn.nn as io_nn
    _, edge_index, _, _, _ = node_data(graph, device, data_dir, seed)
    num_nodes = int(edge_index.max()) + 1
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(num_nodes, HIDDEN, generator=gen).to(device).requires_grad_()
    out = {}
    for impl, lib in (("pyg", pyg_nn), ("iognn", io_nn)):
        torch.manual_seed(seed)
        module = _layer(lib, layer).to(device)
        grad = {}

        def grad_of(out, grad=grad):
            if "g" not in grad:
                grad["g"] = torch.randn_like(out)
            return grad["g"]
        out[impl] = fwd_bwd(module, (x, edge_index), grad_of, leaves=(x,))
    return out


BUILD_ORDERS = ("sorted by (dst, src)", "sorted by dst", "shuffled")


def block_pool(gen: torch.Generator, device, order: str = "sorted by dst", size: int = 8):
    """``size`` edge indices in the shape of a sampled block (BLOCK): every destination draws
    ``fanout`` random sources. A sampler emits them sorted by destination; BUILD_ORDERS names the
    others."""
    b = BLOCK
    num_edges = b["num_dst"] * b["fanout"]
    pool = []
    for _ in range(size):
        src = torch.randint(0, b["num_src"], (num_edges,), generator=gen)
        dst = torch.arange(b["num_dst"]).repeat_interleave(b["fanout"])
        if order == "sorted by (dst, src)":
            src = src.view(-1, b["fanout"]).sort(dim=1).values.view(-1)
        elif order == "shuffled":
            perm = torch.randperm(num_edges, generator=gen)
            src, dst = src[perm], dst[perm]
        pool.append(torch.stack([src, dst]).to(device))
    return pool


def batch_steps(layer: str, device, seed):
    """A sampled block per step: a new edge_index object (a clone from a pool of 8), so neither
    library can reuse a graph built in an earlier step. SAGEConv also runs on a block built the way
    iognn's loaders build theirs ("iognn deferred"): ``iognn.Graph`` without waiting for its
    validation (a bad index goes to an error word, checked after the first step) and with the
    fan-out as the in-degree bound. GATConv adds self-loops, whose count only the data tells, so
    its blocks cannot be built deferred."""
    import torch_geometric.nn as pyg_nn

    import iognn
    import iognn.nn as io_nn
    gen = torch.Generator().manual_seed(seed)
    b = BLOCK
    pool = block_pool(gen, device)
    x_src = torch.randn(b["num_src"], b["feat"], generator=gen).to(device).requires_grad_()
    x_dst = x_src[: b["num_dst"]]
    error = torch.full((1,), -1, dtype=torch.long, device=device)

    def deferred(edge_index):
        return iognn.Graph(edge_index, (b["num_src"], b["num_dst"]), deferred_error=error,
                           degree_bounds=(b["fanout"], -1))

    variants = [("pyg", pyg_nn, None), ("iognn", io_nn, None)]
    if layer == "SAGEConv":
        variants.append(("iognn deferred", io_nn, deferred))
    out = {}
    for impl, lib, adjacency in variants:
        torch.manual_seed(seed)
        if layer == "GATConv":
            module = lib.GATConv((b["feat"], b["feat"]), HIDDEN // HEADS,
                                 heads=HEADS).to(device)
        else:
            module = lib.SAGEConv((b["feat"], b["feat"]), HIDDEN).to(device)
        counter = {"k": 0}

        def step(module=module, counter=counter, adjacency=adjacency):
            clear_grads(module, (x_src,))
            counter["k"] += 1
            edge_index = pool[counter["k"] % len(pool)].clone()
            out = module((x_src, x_dst), edge_index if adjacency is None else adjacency(edge_index))
            out.backward(torch.ones_like(out))
        out[impl] = step
    if layer == "SAGEConv":
        out["iognn deferred"]()
        iognn.graph.raise_deferred_error(error, "the sampled blocks")
    return out


def build_steps(order: str, device, seed):
    """``iognn.Graph`` of a sampled block (the shape of ``batch_steps``), from a pool of 8 edge
    indices in the given order; iognn only (PyG builds nothing: it scatters over edge_index)."""
    import iognn
    b = BLOCK
    pool = block_pool(torch.Generator().manual_seed(seed), device, order)
    size = (b["num_src"], b["num_dst"])
    counter = {"k": 0}

    def step():
        counter["k"] += 1
        return iognn.Graph(pool[counter["k"] % len(pool)], size)
    return {"iognn": step}


def op_steps(graph: str, device, data_dir, seed):
    import torch_geometric.nn.aggr as pyg_aggr

    import iognn
    from ..ops.segment_reduce import segment_reduce
    from .datasets import load_edges
    edge_index, num_nodes = load_edges(graph, data_dir)
    edge_index = edge_index.to(device)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(num_nodes, 128, generator=gen).to(device).requires_grad_()
    g = iognn.Graph(edge_index, num_nodes)
    src, dst = edge_index
    order = torch.argsort(dst, stable=True)
    src, dst = src[order], dst[order]  # PyG's fast path: messages sorted by destination
    aggr = pyg_aggr.MinAggregation()
    grad = torch.randn(num_nodes, 128, generator=gen).to(device)
    return {
        "pyg": fwd_bwd(lambda: aggr(x[src], dst, dim_size=num_nodes), (), lambda out: grad,
                       leaves=(x,)),
        "iognn": fwd_bwd(lambda: segment_reduce(g, x, "min"), (), lambda out: grad, leaves=(x,)),
    }


# ---- the suite ---------------------------------------------------------------------------------
@dataclass
class WorkloadsConfig:
    device: str = "auto"
    parts: tuple = PARTS
    graphs: Optional[List[str]] = None        # training / layer graphs (default TRAIN_GRAPHS)
    op_graphs: Optional[List[str]] = None     # op rows' graphs (default OP_GRAPHS)
    compile_graphs: tuple = ("cora", "random:10000:200000")
    warmup: int = 5
    rounds: int = 5
    steps: int = 20
    seed: int = 0
    data_dir: Optional[str] = None
    minibatch_graphs: Optional[List[str]] = None   # default: iognn.bench.minibatch.GRAPHS
    minibatch_scale: Optional[float] = None        # synthetic-products; default 1 (GPU), 0.01
    minibatch_epochs: int = 1
    graph_training_datasets: Optional[List[str]] = None  # default: bench.graph_training.DATASETS
    graph_training_epochs: int = 1


def run_workloads(cfg: WorkloadsConfig, log=print) -> List[Row]:
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu")
                          if cfg.device == "auto" else cfg.device)
    # Every compiled model of the suite shares TwoLayer.forward's code object and stays alive until
    # its kernels are profiled: lift TorchDynamo's per-code limit, past which it would silently
    # run the rest eagerly.
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 1024)
    torch._dynamo.config.accumulated_recompile_limit = max(
        torch._dynamo.config.accumulated_recompile_limit, 4096)
    jobs = []  # (part, graph, workload, factory)
    graphs = cfg.graphs or TRAIN_GRAPHS
    if "steps" in cfg.parts:
        for graph in graphs:
            extra = COMPILE_MODELS if graph in cfg.compile_graphs else ()
            for model in MODELS + extra:
                jobs.append(("steps", graph, f"{model} step",
                             lambda g=graph, m=model: training_steps(
                                 g, m, device, cfg.data_dir, cfg.seed, g in cfg.compile_graphs)))
    if "layers" in cfg.parts:
        for graph in graphs:
            for layer in LAYERS:
                jobs.append(("layers", graph, f"{layer} fwd+bwd", lambda g=graph, l=layer:
                             layer_steps(g, l, device, cfg.data_dir, cfg.seed)))
    if "batches" in cfg.parts:
        for layer in ("SAGEConv", "GATConv"):
            jobs.append(("batches", "block 16384x15 of 200k", f"{layer} build+fwd+bwd",
                         lambda l=layer: batch_steps(l, device, cfg.seed)))
        for order in BUILD_ORDERS:
            jobs.append(("batches", "block 16384x15 of 200k", f"Graph build, {order}",
                         lambda o=order: build_steps(o, device, cfg.seed)))
    if "ops" in cfg.parts:
        for graph in cfg.op_graphs or OP_GRAPHS:
            jobs.append(("ops", graph, "min fwd+bwd",
                         lambda g=graph: op_steps(g, device, cfg.data_dir, cfg.seed)))
    rows, steps = [], []
    for part, graph, workload, factory in jobs:  # 1. wall times
        try:
            impls = factory()
        except (FileNotFoundError, OSError) as error:
            rows.append(Row(part, graph, workload, "-", status=f"skipped: {error}"))
            log(f"skip {graph} {workload}: {error}")
            continue
        except Exception as error:  # noqa: BLE001 - a workload that cannot be set up is a row
            rows.append(Row(part, graph, workload, "-", status=f"error: {error}"))
            log(format_row(rows[-1]))
            continue
        for impl, step in impls.items():
            row = Row(part, graph, workload, impl)
            try:
                row.wall_ms = wall_time(step, device, cfg.warmup, cfg.rounds, cfg.steps)
                steps.append((row, step))
            except Exception as error:  # noqa: BLE001 - one failing row must not end the suite
                row.status = f"error: {type(error).__name__}: {str(error)[:200]}"
            log(format_row(row))
            rows.append(row)
    if "minibatch" in cfg.parts:  # wall times only, taken before any profiling
        from .minibatch import minibatch_rows
        rows += minibatch_rows(cfg, device, log)
    if "ggnn" in cfg.parts:
        from .ggnn import ggnn_rows
        rows += ggnn_rows(cfg, device, log)
    if "graph_training" in cfg.parts:
        from .graph_training import graph_training_rows
        rows += graph_training_rows(cfg, device, log)
    for row, step in steps:  # 2. kernel times and launches, once no wall time is left to take
        try:
            row.__dict__.update(kernel_time(step, device, cfg.steps))
        except Exception as error:  # noqa: BLE001
            row.status = f"error: {type(error).__name__}: {str(error)[:200]}"
        log(format_row(row))
    return rows


def _num(value, digits=3) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def format_row(row: Row) -> str:
    share = row.host_share
    label = os.environ.get("IOGNN_AB_LABEL")
    return (f"{'[' + label + '] ' if label else ''}"
            f"{row.part:8} {row.graph:22} {row.workload:26} {row.impl:16} "
            f"wall {_num(row.wall_ms)} ms  kernels {_num(row.kernel_ms)} ms  "
            f"launches {_num(row.launches)}  host {'-' if share is None else f'{share:.0%}'}"
            f"{_extra(row)}{'' if row.status == 'ok' else '  ' + row.status}")


def _extra(row: Row) -> str:
    """The rate and the note of a row that has them."""
    rate = "" if row.rate is None else f"  {_num(row.rate / 1e6)}M/s"
    return rate + (f"  ({row.note})" if row.note else "")


def markdown(rows: List[Row]) -> str:
    """One table per part: a row per (graph, workload), a column group per implementation."""
    lines = []
    for part in PARTS:
        mine = [r for r in rows if r.part == part and r.status == "ok"]
        if not mine:
            continue
        impls = list(dict.fromkeys(r.impl for r in mine))
        lines += [f"### {part}", "", "| graph | workload | " + " | ".join(
            f"{i} wall ms (kernels ms, launches)" for i in impls) + " |",
            "|---|---|" + "---|" * len(impls)]
        for key in dict.fromkeys((r.graph, r.workload) for r in mine):
            cells = []
            for impl in impls:
                r = next((r for r in mine if (r.graph, r.workload, r.impl) == key + (impl,)), None)
                cells.append("-" if r is None else f"{_num(r.wall_ms)} ({_num(r.kernel_ms)}, "
                                                   f"{_num(r.launches)}){_extra(r)}")
            lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def write(rows: List[Row], out_dir: str, config: WorkloadsConfig) -> Dict[str, str]:
    """workloads.json and workloads.md in out_dir (named after $IOGNN_AB_LABEL when set, so
    that the builds of an A/B run keep their own files)."""
    os.makedirs(out_dir, exist_ok=True)
    device = {"type": "cpu"}
    if torch.cuda.is_available():
        device = {"type": "cuda", "name": torch.cuda.get_device_name()}
    label = os.environ.get("IOGNN_AB_LABEL", "")
    stem = "workloads" + ("-" + "".join(c if c.isalnum() else "_" for c in label) if label else "")
    paths = {"json": os.path.join(out_dir, stem + ".json"),
             "markdown": os.path.join(out_dir, stem + ".md")}
    with open(paths["json"], "w") as f:
        json.dump({"device": device, "torch": torch.__version__, "config": asdict(config),
                   "rows": [dict(asdict(r), host_share=r.host_share) for r in rows]}, f, indent=1)
    with open(paths["markdown"], "w") as f:
        f.write(markdown(rows))
    return paths
