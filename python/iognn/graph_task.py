"""``iognn train --task graph``: graph classification on sets of small graphs.

**Models** (``--model``; ``--hidden`` channels, ``--num-layers`` L, ``--dropout`` in the head):

- ``gin``: L ``GINConv`` layers, each on a two-layer MLP with batch norm
  (``Linear, BatchNorm1d, ReLU, Linear``), ReLU after each; global **sum** pooling; head
  ``Linear, ReLU, Dropout, Linear`` (PyG's GIN example);
- ``gcn``: L ``GCNConv`` layers, ReLU after each; global **mean** pooling; the same head;
- ``ggnn``: a ``Linear`` encoder to ``hidden`` channels, one ``GatedGraphConv`` of L propagation
  steps (a GRU shared over the steps), ReLU; global sum pooling; the same head.

The layers come from ``iognn.nn`` (rows ``iognn``) or ``torch_geometric.nn`` (``--compare pyg``):
the iognn model starts from the PyG model's initial weights (``load_state_dict``; equal
``state_dict`` keys). Pooling: PyG's ``global_add_pool`` / ``global_mean_pool`` (a scatter over
``batch``, given the batch's graph count so it reads none from the device) for the PyG model; for
the iognn model ``torch.segment_reduce`` over each graph's contiguous nodes (no atomics, so its
sum and its gradient are deterministic on the GPU).

**Batches** (:mod:`iognn.graph_batches`): ``--batch-size`` graphs per batch, the training graphs
shuffled each epoch by a generator of their own seeded with ``--seed`` (so every implementation
trains on the same batches and training draws such as dropout never shift them; the report's
``batch_digest`` shows it). The iognn model gets its batches from ``GraphBatcher`` (the dataset
held on the training device, a batch gathered there by a few index kernels; ``--graph-loader
pyg`` gives it PyG's instead), the PyG model from PyG's ``DataLoader`` (collated on the host,
copied to the device), as PyG users run it: equal batches either way.

**The step** cross entropy, backward, Adam (``--lr``, ``--weight-decay``); it reads nothing back
from the device: the epoch's loss is summed on the device and read once the epoch ends. Shapes
change from batch to batch, so no CUDA graph capture.

**Reported** per epoch (JSON ``epochs``): the mean training loss, validation and test accuracy,
the epoch's wall time (host clock, device synchronised at its start and end; loading included,
evaluation not) and the part of it spent getting batches (``loader_s``: the time in the loader's
``next()``, which for PyG's includes the copy to the device). The table: test accuracy at the best
validation epoch (the earliest on ties), means of the epoch times, peak memory, and the loss /
validation accuracy trajectory side by side.
"""
from __future__ import annotations

import hashlib
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Dict, Iterator, List, Sequence

import torch
import torch.nn.functional as F

from .graph_batches import EpochOrder, GraphBatch, GraphBatcher, pyg_batches
from .train import PeakMemory, build_models, pick_device, report_config, text_table

GRAPH_MODELS = ("gin", "gcn", "ggnn")
POOLING = {"gin": "sum", "gcn": "mean", "ggnn": "sum"}
# Models whose iognn layers take the batch's Graph as the batcher builds it (self-loops as given;
# GCN adds its own).
BATCH_GRAPH_MODELS = ("gin", "ggnn")
LOADERS = ("iognn", "pyg")
TIME_NOTE = ("epoch s: wall time of a training epoch (batches, forward, backward, Adam; not "
             "evaluation), mean over the epochs after an untimed warm-up batch; loader s: its "
             "part spent in the loader's next() (PyG's: collation and the copy to the device); "
             "compute s: the rest")


# ---- models -------------------------------------------------------------------------------------
class SegmentPool(torch.nn.Module):
    """Global pooling of a batch's contiguous graphs: ``torch.segment_reduce`` over the graphs'
    node counts (``ptr``'s differences); ``'mean'`` divides by the count (0 for an empty
    graph, as PyG's scatter gives)."""

    def __init__(self, reduce: str):
        super().__init__()
        self.reduce = reduce

    def forward(self, x, batch, ptr, num_graphs: int):
        counts = ptr.diff()
        out = torch.segment_reduce(x, "sum", lengths=counts, axis=0, unsafe=True)
        if self.reduce == "mean":
            out = out / counts.clamp(min=1).unsqueeze(-1).to(out.dtype)
        return out


class PygPool(torch.nn.Module):
    """PyG's ``global_add_pool`` / ``global_mean_pool``, given the number of graphs."""

    def __init__(self, reduce: str):
        super().__init__()
        self.reduce = reduce

    def forward(self, x, batch, ptr, num_graphs: int):
        from torch_geometric.nn import global_add_pool, global_mean_pool
        pool = global_add_pool if self.reduce == "sum" else global_mean_pool
        return pool(x, batch, size=num_graphs)


class GraphClassifier(torch.nn.Module):
    """``head(pool(relu(conv_L(... relu(conv_1(encoder(x)))))))``."""

    def __init__(self, encoder, convs: Sequence[torch.nn.Module], pool: torch.nn.Module,
                 head: torch.nn.Module):
        super().__init__()
        self.encoder = encoder
        self.convs = torch.nn.ModuleList(convs)
        self.pool = pool
        self.head = head

    def forward(self, x, edge_index, batch, ptr, num_graphs: int):
        if self.encoder is not None:
            x = self.encoder(x)
        for conv in self.convs:
            x = F.relu(conv(x, edge_index))
        return self.head(self.pool(x, batch, ptr, num_graphs))


def build_graph_model(model: str, layers, in_channels: int, hidden: int, num_classes: int,
                      num_layers: int = 5, dropout: float = 0.5, **unused) -> GraphClassifier:
    """The ``model`` classifier of the module note from ``layers`` (``iognn.nn`` or
    ``torch_geometric.nn``), its parameters created in the same order for both."""
    if model not in GRAPH_MODELS:
        raise ValueError(f"graph model must be one of {GRAPH_MODELS}, got {model!r}")
    if num_layers < 1:
        raise ValueError(f"num_layers must be at least 1, got {num_layers}")
    linear = torch.nn.Linear
    encoder = None
    if model == "gin":
        def mlp(a):
            return torch.nn.Sequential(linear(a, hidden), torch.nn.BatchNorm1d(hidden),
                                       torch.nn.ReLU(), linear(hidden, hidden))
        convs = [layers.GINConv(mlp(a)) for a in [in_channels] + [hidden] * (num_layers - 1)]
    elif model == "gcn":
        convs = [layers.GCNConv(a, hidden) for a in [in_channels] + [hidden] * (num_layers - 1)]
    else:
        gated = getattr(layers, "GatedGraphConv", None)
        if gated is None:
            raise NotImplementedError(f"model 'ggnn' needs {layers.__name__}.GatedGraphConv, "
                                      f"which this installation does not have")
        encoder = linear(in_channels, hidden)
        convs = [gated(hidden, num_layers)]
    head = torch.nn.Sequential(linear(hidden, hidden), torch.nn.ReLU(),
                               torch.nn.Dropout(dropout), linear(hidden, num_classes))
    iognn_layers = getattr(layers, "__name__", "").startswith("iognn")
    pool = (SegmentPool if iognn_layers else PygPool)(POOLING[model])
    return GraphClassifier(encoder, convs, pool, head)


def _probe_batch(device: torch.device, in_channels: int = 4) -> GraphBatch:
    """Two tiny graphs (3 and 2 nodes) as one batch."""
    edge_index = torch.tensor([[0, 1, 2, 3], [1, 2, 0, 4]], device=device)
    return GraphBatch(torch.randn(5, in_channels, device=device), edge_index,
                      torch.tensor([0, 0, 0, 1, 1], device=device),
                      torch.tensor([0, 3, 5], device=device), torch.tensor([0, 1], device=device),
                      2)


def _output(model, batch: GraphBatch):
    return model(batch.x, batch.adjacency, batch.batch, batch.ptr, batch.num_graphs)


def runs_on_cuda(model: str) -> bool:
    """Whether iognn's ops behind graph model ``model`` have CUDA kernels (a tiny forward +
    backward). A model this installation cannot build raises NotImplementedError."""
    import iognn.nn
    net = build_graph_model(model, iognn.nn, 4, 8, 2, num_layers=2).cuda()
    try:
        _output(net, _probe_batch(torch.device("cuda"))).sum().backward()
    except NotImplementedError:
        return False
    return True


# ---- training -----------------------------------------------------------------------------------
@dataclass
class EpochRecord:
    epoch: int
    loss: float           # mean training loss over the epoch's graphs
    val_acc: float
    test_acc: float
    epoch_s: float
    loader_s: float


@dataclass
class GraphRunResult:
    implementation: str
    loader: str
    test_acc: float       # at the best validation epoch
    val_acc: float        # best validation accuracy
    best_epoch: int
    final_loss: float
    epoch_s: float        # means over the epochs
    loader_s: float
    compute_s: float
    peak_memory_mib: float
    batch_digest: str
    epochs: List[Dict[str, float]] = field(default_factory=list)


class Batches:
    """One implementation's loader: ``epoch(order)`` yields the batches of graph ids ``order``."""

    def __init__(self, kind: str, graphs, batch_size: int, device: torch.device,
                 build_graphs: bool = False):
        self.kind = kind
        self.batch_size = batch_size
        self.device = device
        if kind == "iognn":
            self.batcher = GraphBatcher(graphs, device, build_graphs)
        else:
            self.data_list = graphs.data_list()

    def epoch(self, order: torch.Tensor) -> Iterator[GraphBatch]:
        if self.kind == "iognn":
            yield from self.batcher.batches(order, self.batch_size)
            self.batcher.check()
        else:
            yield from pyg_batches(self.data_list, order, self.batch_size, self.device)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_epoch(model, optimizer, batches: Iterator[GraphBatch], device: torch.device,
                digest=None):
    """One pass (forward, cross entropy, backward, Adam per batch); returns ``(mean loss,
    epoch s, loader s)``. ``digest`` takes every batch's graph, node and edge counts."""
    model.train()
    loss_sum = torch.zeros((), device=device)
    graphs, loader_s = 0, 0.0
    _sync(device)
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        batch = next(batches, None)
        loader_s += time.perf_counter() - t0
        if batch is None:
            break
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(_output(model, batch), batch.y)
        loss.backward()
        optimizer.step()
        loss_sum += loss.detach() * batch.num_graphs
        graphs += batch.num_graphs
        if digest is not None:
            digest.update(repr((batch.num_graphs, batch.x.size(0),
                                batch.edge_index.size(1))).encode())
    _sync(device)
    epoch_s = time.perf_counter() - start
    return float(loss_sum) / max(graphs, 1), epoch_s, loader_s


@torch.no_grad()
def accuracy(model, batches: Iterator[GraphBatch]) -> float:
    """The share of graphs whose class the model predicts (counted on the device)."""
    model.eval()
    correct, total = None, 0
    for batch in batches:
        hits = (_output(model, batch).argmax(dim=-1) == batch.y).sum()
        correct = hits if correct is None else correct + hits
        total += batch.num_graphs
    return float(correct) / total if total else 0.0


def warm_up(model, batches: Batches, ids: torch.Tensor) -> None:
    """An untimed forward + backward on one batch (parameters untouched), so that one-time
    costs stay out of the first epoch."""
    model.train()
    batch = next(batches.epoch(ids[:batches.batch_size]))
    F.cross_entropy(_output(model, batch), batch.y).backward()
    model.zero_grad(set_to_none=True)


def train_graph_model(name: str, model, batches: Batches, split, args, device: torch.device,
                      progress: bool = True):
    """Trains ``model`` for ``args.epochs`` epochs; returns ``(GraphRunResult, memory method)``."""
    from ._progress import progress_bar
    train_ids, val_ids, test_ids = split
    warm_up(model, batches, train_ids)
    torch.manual_seed(args.seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    order = EpochOrder(train_ids, shuffle=True, seed=args.seed)
    digest, records = hashlib.sha1(), []
    best_val, best_test, best_epoch = -1.0, 0.0, 0
    with PeakMemory(device) as memory:
        bar = progress_bar(range(1, args.epochs + 1), desc=f"{name:>5}", unit="epoch",
                           enabled=progress)
        for epoch in bar:
            loss, epoch_s, loader_s = train_epoch(model, optimizer,
                                                  batches.epoch(order.next_epoch()), device,
                                                  digest)
            val, test = (accuracy(model, batches.epoch(ids)) for ids in (val_ids, test_ids))
            if val > best_val:
                best_val, best_test, best_epoch = val, test, epoch
            records.append(EpochRecord(epoch, loss, val, test, epoch_s, loader_s))
            bar.set_postfix(loss=f"{loss:.3f}", val=f"{val:.3f}", test=f"{test:.3f}")
        bar.close()
    epoch_s = _mean([r.epoch_s for r in records])
    loader_s = _mean([r.loader_s for r in records])
    result = GraphRunResult(name, batches.kind, best_test, best_val, best_epoch, records[-1].loss,
                            epoch_s, loader_s, max(0.0, epoch_s - loader_s), memory.mib,
                            digest.hexdigest()[:16], [asdict(r) for r in records])
    return result, memory.method


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


# ---- the command --------------------------------------------------------------------------------
def run_graph_training(args) -> dict:
    """``iognn train --task graph``: loads the graphs, trains every implementation on the same
    batches and returns the report (the ``--json`` file)."""
    from .graph_datasets import load_graph_dataset, stratified_split
    graphs = load_graph_dataset(args.dataset, args.data_dir)
    split = stratified_split(graphs.y, seed=0)
    def build(model, layers, in_channels, hidden, classes, dropout=0.5, **unused):
        return build_graph_model(model, layers, in_channels, hidden, classes, args.num_layers,
                                 dropout)

    try:
        device = pick_device(args.device, args.model, args.heads,
                             runs_on_cuda=lambda model, heads: runs_on_cuda(model))
        models = build_models(args, graphs.num_features, graphs.num_classes, build=build)
    except NotImplementedError as error:  # ggnn without iognn.nn.GatedGraphConv
        raise SystemExit(f"iognn train: {error}") from None
    num_nodes, num_edges = int(graphs.node_ptr[-1]), int(graphs.edge_ptr[-1])
    print(f"{args.model} x{args.num_layers} on {graphs.name}: {graphs.num_graphs} graphs "
          f"({num_nodes / graphs.num_graphs:.1f} nodes, {num_edges / graphs.num_graphs:.1f} "
          f"edges on average), {graphs.num_features} features ({graphs.features}), "
          f"{graphs.num_classes} classes; split {'/'.join(str(s.numel()) for s in split)}; "
          f"device {device}; batch {args.batch_size}, {args.epochs} epochs", file=sys.stderr)
    results, memory_metric = [], None
    for name, model in models.items():
        kind = args.graph_loader if name == "iognn" else "pyg"
        batches = Batches(kind, graphs, args.batch_size, device,
                          build_graphs=name == "iognn" and args.model in BATCH_GRAPH_MODELS)
        result, memory_metric = train_graph_model(name, model.to(device), batches, split, args,
                                                  device, progress=not args.no_progress)
        results.append(result)
    config = report_config(args)
    config["device"] = str(device)
    return {"config": config, "time_metric": TIME_NOTE, "memory_metric": memory_metric + " (MiB)",
            "dataset": {"name": graphs.name, "graphs": graphs.num_graphs, "nodes": num_nodes,
                        "edges": num_edges, "features": graphs.num_features,
                        "feature_kind": graphs.features, "classes": graphs.num_classes,
                        "split": [s.numel() for s in split]},
            "results": [asdict(r) for r in results]}


def format_table(report: dict) -> str:
    results = report["results"]
    header = ("implementation", "loader", "test acc %", "val acc %", "best epoch", "final loss",
              "epoch s", "loader s", "compute s", "peak MiB")
    rows = [(r["implementation"], r["loader"], f"{100 * r['test_acc']:.2f}",
             f"{100 * r['val_acc']:.2f}", str(r["best_epoch"]), f"{r['final_loss']:.4f}",
             f"{r['epoch_s']:.3f}", f"{r['loader_s']:.3f}", f"{r['compute_s']:.3f}",
             f"{r['peak_memory_mib']:.1f}") for r in results]
    notes = [TIME_NOTE, f"peak MiB: {report['memory_metric']}",
             "accuracy: graphs classified correctly (test graphs at the best validation epoch)"]
    if len(results) > 1:
        same = len({r["batch_digest"] for r in results}) == 1
        notes.append("batches: " + ("the same for every implementation" if same else
                                    "DIFFERENT between implementations"))
    return text_table(header, rows, notes) + "\n\n" + trajectory_table(results)


def trajectory_table(results: List[dict], lines: int = 10) -> str:
    """Training loss and validation accuracy per implementation at up to ``lines`` epochs spread
    over the run (the last included)."""
    count = len(results[0]["epochs"])
    picked = sorted({round(i * (count - 1) / max(lines - 1, 1)) for i in range(lines)})
    names = [r["implementation"] for r in results]
    header = ("epoch",) + tuple(f"loss {n}" for n in names) + tuple(f"val % {n}" for n in names)
    rows = [(str(results[0]["epochs"][i]["epoch"]),)
            + tuple(f"{r['epochs'][i]['loss']:.4f}" for r in results)
            + tuple(f"{100 * r['epochs'][i]['val_acc']:.2f}" for r in results) for i in picked]
    return text_table(header, rows, ["trajectory: mean training loss and validation accuracy "
                                     "after each epoch shown"])
