"""Train a 2-layer GNN node classifier with iognn layers (optionally side by side with PyG).

With ``--compare pyg`` the same architecture is also built from ``torch_geometric.nn``; the iognn
model starts from the PyG model's initial weights (``load_state_dict``), both train with the same
seed and Adam settings, and a table compares test accuracy (at the best validation epoch), time per
training step and peak memory. On CUDA the iognn model trains twice: eagerly and with its training
step captured in a CUDA graph (``iognn.CapturedStep``; ``--no-capture`` leaves that row out).
``--loader neighbor`` trains on sampled mini-batches instead (:mod:`iognn.minibatch`);
``--task graph`` classifies whole graphs (:mod:`iognn.graph_task`). ``--nproc N`` trains on N
processes through torchrun (:mod:`iognn.distributed.launch`): the partitioned full graph
(``--loader full``) or data-parallel mini-batches (``--loader neighbor``).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import re
import resource
import sys
import time
from dataclasses import asdict, dataclass
from typing import Callable, List, Optional, Sequence

import torch
import torch.nn.functional as F

CONV_CLASSES = {"gcn": "GCNConv", "sage": "SAGEConv", "gin": "GINConv", "gat": "GATConv",
                "gatv2": "GATv2Conv", "transformer": "TransformerConv"}
MODELS = tuple(CONV_CLASSES)
MINIBATCH_MODELS = ("sage", "gat", "gcn")
GRAPH_MODELS = ("gin", "gcn", "ggnn")  # --task graph (iognn.graph_task)
TIME_METRIC = "training step (forward + backward + Adam), mean over all epochs after a warm-up step"
CAPTURED = "iognn captured"


# ---- model ---------------------------------------------------------------------------------------
class NodeClassifier(torch.nn.Module):
    """``conv2(dropout(relu(conv1(dropout(x)))))``."""

    def __init__(self, conv1: torch.nn.Module, conv2: torch.nn.Module, dropout: float):
        super().__init__()
        self.conv1 = conv1
        self.conv2 = conv2
        self.dropout = dropout

    def forward(self, x, edge_index):
        x = F.dropout(x, self.dropout, self.training)
        x = F.relu(self.conv1(x, edge_index))
        x = F.dropout(x, self.dropout, self.training)
        return self.conv2(x, edge_index)


def build_convs(model: str, layers, in_channels: int, hidden: int, num_classes: int,
                num_layers: int = 2, heads: int = 8, attn_dropout: float = 0.0) -> list:
    """``num_layers`` convolutions from ``layers`` (``iognn.nn`` or ``torch_geometric.nn``: both
    name their classes alike), built in order (so seeded draws match across libraries). Attention
    models use ``hidden // heads`` channels per head in the hidden layers and one head in the
    last; GIN wraps two-layer MLPs."""
    if model not in CONV_CLASSES:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    conv = getattr(layers, CONV_CLASSES[model])
    widths = [in_channels] + [hidden] * (num_layers - 1) + [num_classes]
    if model in ("gcn", "sage"):
        return [conv(a, b) for a, b in zip(widths, widths[1:])]
    if model == "gin":
        def mlp(a, b):
            return torch.nn.Sequential(torch.nn.Linear(a, hidden), torch.nn.ReLU(),
                                       torch.nn.Linear(hidden, b))
        return [conv(mlp(a, b)) for a, b in zip(widths, widths[1:])]
    per_head = max(1, hidden // heads)
    widths[1:-1] = [per_head * heads] * (num_layers - 1)
    return [conv(a, per_head, heads=heads, dropout=attn_dropout) if i < num_layers - 1 else
            conv(a, b, heads=1, dropout=attn_dropout)
            for i, (a, b) in enumerate(zip(widths, widths[1:]))]


def build_model(model: str, layers, in_channels: int, hidden: int, num_classes: int,
                heads: int = 8, dropout: float = 0.5, attn_dropout: float = 0.0) -> NodeClassifier:
    """A two-layer :class:`NodeClassifier` of :func:`build_convs`' convolutions."""
    return NodeClassifier(*build_convs(model, layers, in_channels, hidden, num_classes, 2,
                                       heads=heads, attn_dropout=attn_dropout), dropout)


def implementation_layers(name: str):
    if name == "iognn":
        import iognn.nn
        return iognn.nn
    import torch_geometric.nn
    return torch_geometric.nn


# ---- device --------------------------------------------------------------------------------
def iognn_runs_on_cuda(model: str, heads: int) -> bool:
    """Whether iognn's ops behind ``model`` have CUDA kernels (a tiny forward + backward)."""
    import iognn.nn
    net = build_model(model, iognn.nn, 4, heads, 2, heads=heads).cuda()
    x = torch.randn(3, 4, device="cuda")
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 0]], device="cuda")
    try:
        net(x, edge_index).sum().backward()
    except NotImplementedError:
        return False
    return True


def pick_device(requested: str, model: str, heads: int,
                runs_on_cuda: Optional[Callable[[str, int], bool]] = None) -> torch.device:
    """``requested`` (auto / cpu / cuda) as a device; ``runs_on_cuda(model, heads)`` says whether
    iognn has CUDA kernels for the model (default: :func:`iognn_runs_on_cuda`)."""
    if requested == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        if requested == "cuda":
            raise SystemExit("iognn train: --device cuda requested but no CUDA device is available")
        return torch.device("cpu")
    if (runs_on_cuda or iognn_runs_on_cuda)(model, heads):
        return torch.device("cuda")
    if requested == "cuda":
        raise SystemExit(f"iognn train: --device cuda requested but this iognn build has no CUDA "
                         f"kernels for the '{model}' layers")
    print(f"notice: this iognn build has no CUDA kernels for '{model}'; training on the CPU",
          file=sys.stderr)
    return torch.device("cpu")


# ---- peak memory ---------------------------------------------------------------------------------
def _proc_status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return int(re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.M).group(1))


def _reset_rss_peak() -> bool:
    """Return freed heap to the OS and reset the RSS high-water mark (Linux); False if unable."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class PeakMemory:
    """Peak memory of a block above its start, in MiB (``mib``; ``method`` says how it was taken).

    CUDA: ``torch.cuda.max_memory_allocated`` (peak reset at the start). CPU: the process's resident
    set high-water mark (``VmHWM``, reset through ``/proc/self/clear_refs``); where that is not
    possible, the growth of ``ru_maxrss``, which only shows memory beyond any earlier peak.
    """

    _METHODS = {
        "cuda": "CUDA max_memory_allocated above the start of training",
        "hwm": "CPU resident-set high-water mark (VmHWM) above the start of training",
        "maxrss": "CPU ru_maxrss growth during training (0 when below an earlier peak)",
    }

    def __init__(self, device: torch.device):
        self.device = device
        self.mode = "cuda" if device.type == "cuda" else "hwm" if _reset_rss_peak() else "maxrss"
        self.method = self._METHODS[self.mode]
        self.mib: Optional[float] = None

    def _bytes(self, peak: bool) -> int:
        if self.mode == "cuda":
            torch.cuda.synchronize(self.device)
            if peak:
                return torch.cuda.max_memory_allocated(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            return torch.cuda.memory_allocated(self.device)
        if self.mode == "hwm":
            if peak:
                return _proc_status_kib("VmHWM") * 1024
            _reset_rss_peak()
            return _proc_status_kib("VmRSS") * 1024
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def __enter__(self):
        self._start = self._bytes(peak=False)
        return self

    def __exit__(self, *exc):
        self.mib = max(self._bytes(peak=True) - self._start, 0) / 2**20
        return False


# ---- training ------------------------------------------------------------------------------
@dataclass
class RunResult:
    implementation: str
    test_acc: float          # at the best validation epoch
    val_acc: float           # best validation accuracy
    best_epoch: int
    final_loss: float
    time_per_epoch_ms: float
    peak_memory_mib: float


def _accuracy(logits, y, mask) -> float:
    return float((logits[mask].argmax(dim=-1) == y[mask]).float().mean()) if mask.any() else 0.0


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _node_loss(model, x, edge_index, y, train_idx):
    return F.cross_entropy(model(x, edge_index)[train_idx], y[train_idx])


def train_model(name: str, model: torch.nn.Module, data, epochs: int, lr: float,
                weight_decay: float, seed: int, device: torch.device,
                progress: bool = True, captured: bool = False):
    """Full-batch training with Adam; the test accuracy is taken at the best validation epoch
    (the earliest on ties). Returns ``(RunResult, how peak memory was measured)``.

    An untimed forward + backward first (parameters untouched, the seed set after it) keeps one-time
    costs such as thread pools and first allocations out of the time and memory figures.
    ``captured``: the training step runs as an ``iognn.CapturedStep`` (its first steps, eager
    warm-up and the capture, are timed like the others).
    """
    from ._progress import progress_bar
    from .captured import CapturedStep
    x, edge_index, y = data.x, data.edge_index, data.y
    model.train()
    model(x, edge_index).sum().backward()
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    step = CapturedStep(model, optimizer, _node_loss, enabled=captured)
    train_idx = data.train_mask.nonzero().view(-1)  # indexing by a mask would synchronise
    best_val, best_test, best_epoch, loss_value = -1.0, 0.0, 0, float("nan")
    step_times = []
    with PeakMemory(device) as memory:
        bar = progress_bar(range(1, epochs + 1), desc=f"{name:>5}", unit="epoch", enabled=progress)
        for epoch in bar:
            model.train()
            _sync(device)
            start = time.perf_counter()
            loss = step(x, edge_index, y, train_idx)
            _sync(device)
            step_times.append(time.perf_counter() - start)

            model.eval()
            with torch.no_grad():
                logits = model(x, edge_index)
            val, test = _accuracy(logits, y, data.val_mask), _accuracy(logits, y, data.test_mask)
            loss_value = float(loss.detach())
            if val > best_val:
                best_val, best_test, best_epoch = val, test, epoch
            bar.set_postfix(loss=f"{loss_value:.3f}", val=f"{val:.3f}", test=f"{test:.3f}")
        bar.close()
    result = RunResult(name, best_test, best_val, best_epoch, loss_value,
                       1e3 * sum(step_times) / len(step_times), memory.mib)
    return result, memory.method


def build_models(args, in_channels: int, num_classes: int, captured: bool = False,
                 build: Callable = build_model) -> dict:
    """``{implementation: model}``; with ``--compare`` the iognn models copy the PyG model's
    initial weights so all start identical. ``captured`` adds the iognn model trained with a
    captured step. ``build(model, layers, in_channels, hidden, num_classes, heads=, dropout=,
    attn_dropout=)`` makes each model (:func:`build_model`: the two-layer classifier)."""
    names = ["iognn"] + ([CAPTURED] if captured else []) + ([args.compare] if args.compare else [])
    models = {}
    for name in reversed(names):  # the reference first: its weights are the ones copied
        torch.manual_seed(args.seed)
        layers = implementation_layers("iognn" if name == CAPTURED else name)
        models[name] = build(args.model, layers, in_channels, args.hidden, num_classes,
                             heads=args.heads, dropout=args.dropout,
                             attn_dropout=args.attn_dropout)
    for name in names:
        if name != names[-1]:
            models[name].load_state_dict(models[names[-1]].state_dict())
    return {name: models[name] for name in names}


def run_training(args) -> dict:
    """Loads the data, trains every implementation and returns the report (the ``--json`` file)."""
    from .datasets import load_dataset
    data = load_dataset(args.dataset, args.data_dir)
    num_classes = int(data.y.max()) + 1
    device = pick_device(args.device, args.model, args.heads)
    captured = device.type == "cuda" and not args.no_capture
    if captured and args.attn_dropout > 0 and args.model in ("gat", "gatv2", "transformer"):
        print("notice: attention dropout cannot be captured in a CUDA graph; no captured row",
              file=sys.stderr)
        captured = False
    models = build_models(args, data.num_features, num_classes, captured)
    data = data.to(device)
    print(f"{args.model} on {args.dataset}: {data.num_nodes} nodes, {data.num_edges} edges, "
          f"{data.num_features} features, {num_classes} classes; device {device}; "
          f"{args.epochs} epochs", file=sys.stderr)
    results, memory_metric = [], None
    for name, model in models.items():
        model = model.to(device)
        result, memory_metric = train_model(name, model, data, args.epochs, args.lr,
                                            args.weight_decay, args.seed, device,
                                            progress=not args.no_progress,
                                            captured=name == CAPTURED)
        results.append(result)
    config = report_config(args)
    config["device"] = str(device)
    return {"config": config, "time_metric": TIME_METRIC + " (ms)",
            "memory_metric": memory_metric + " (MiB)", "num_nodes": data.num_nodes,
            "num_edges": data.num_edges, "results": [asdict(r) for r in results]}


def report_config(args) -> dict:
    """The run's options as the report records them."""
    return {k: v for k, v in vars(args).items()
            if k not in ("run", "command", "json", "usage_error", "argument_parser")}


def format_table(report: dict) -> str:
    if report["config"].get("task") == "graph":
        from .graph_task import format_table as graph_table
        return graph_table(report)
    if report["config"].get("loader") == "neighbor":
        from .minibatch import format_table as minibatch_table
        return minibatch_table(report)
    header = ("implementation", "test acc %", "val acc %", "best epoch", "ms/epoch", "peak MiB")
    rows = [(r["implementation"], f"{100 * r['test_acc']:.2f}", f"{100 * r['val_acc']:.2f}",
             str(r["best_epoch"]), f"{r['time_per_epoch_ms']:.2f}", f"{r['peak_memory_mib']:.1f}")
            for r in report["results"]]
    notes = [f"ms/epoch: {report['time_metric']}", f"peak MiB: {report['memory_metric']}"]
    if "world_size" in report:
        from .distributed.full_graph import partition_note
        notes.append(partition_note(report))
    return text_table(header, rows, notes)


def text_table(header: Sequence[str], rows: List[Sequence[str]], notes: List[str]) -> str:
    """Columns padded to their widest cell, then a rule and the ``notes`` lines."""
    widths = [max(len(row[i]) for row in [header] + rows) for i in range(len(header))]

    def line(row):  # first column left-aligned, numbers right-aligned
        return "  ".join(c.rjust(w) if i else c.ljust(w)
                         for i, (c, w) in enumerate(zip(row, widths)))

    rule = "-" * len(line(header))
    return "\n".join([line(header), rule] + [line(r) for r in rows] + [rule] + notes)


# ---- command line --------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .datasets import DATASETS
    from .graph_datasets import GRAPH_DATASETS
    parser.add_argument("--task", choices=("node", "graph"), default="node",
                        help="node: node classification on one graph; graph: classification of "
                             "whole graphs (models " + ", ".join(GRAPH_MODELS) + ")")
    parser.add_argument("--model", choices=tuple(dict.fromkeys(MODELS + GRAPH_MODELS)),
                        default=None, help="layer type (default: gcn; gin with --task graph)")
    parser.add_argument("--dataset", type=dataset_name, default=None,
                        metavar="{" + ",".join(DATASETS + ("synthetic-products[:scale]",)
                                               + GRAPH_DATASETS) + "}",
                        help="default: synthetic (synthetic-graphs with --task graph); "
                             "'synthetic', 'synthetic-products[:scale]' (ogbn-products' size "
                             "times scale, generated once and cached) and 'synthetic-graphs' "
                             "need no files; tu_* and reddit10k are graph datasets")
    parser.add_argument("--data-dir", default=None,
                        help="folder of the real datasets (when not given: $IOGNN_DATA, else "
                             "../shared/data beside the checkout)")
    parser.add_argument("--epochs", type=int, default=None,
                        help="training epochs (default: 100 full-batch and with --task graph, 3 with "
                             "--loader neighbor)")
    parser.add_argument("--hidden", type=int, default=64,
                        help="hidden width (attention models: split over the heads)")
    parser.add_argument("--heads", type=int, default=8, help="attention heads of the first layer")
    parser.add_argument("--lr", type=float, default=0.01, help="Adam learning rate")
    parser.add_argument("--weight-decay", type=float, default=5e-4, help="Adam weight decay")
    parser.add_argument("--dropout", type=float, default=0.5, help="feature dropout")
    parser.add_argument("--attn-dropout", type=float, default=0.0,
                        help="attention dropout of gat/gatv2/transformer (its random masks differ "
                             "between implementations)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the initial weights and dropout (dataset splits use seed 0)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="auto: CUDA when available and iognn has CUDA kernels for the model")
    parser.add_argument("--compare", choices=("pyg",), default=None,
                        help="also train the same model built from torch_geometric.nn layers")
    parser.add_argument("--json", default=None, metavar="PATH", help="write the report as JSON")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    parser.add_argument("--no-capture", action="store_true",
                        help="on CUDA, leave out the run whose training step is captured in a "
                             "CUDA graph (iognn.CapturedStep)")
    batches = parser.add_argument_group(
        "mini-batch training (--loader neighbor; models " + ", ".join(MINIBATCH_MODELS) + ")")
    batches.add_argument("--loader", choices=("full", "neighbor"), default="full",
                         help="full: full-batch, 2 layers; neighbor: iognn.loader.NeighborLoader "
                              "over the training nodes, one layer per hop")
    batches.add_argument("--num-neighbors", type=fanouts, default=[15, 10, 5], metavar="K1,K2,..",
                         help="fan-out per hop (-1: every neighbour); the number of hops is the "
                              "number of layers")
    batches.add_argument("--batch-size", type=positive_int, default=None,
                         help="seed nodes per batch (default: 1024); with --task graph, graphs "
                              "per batch (default: 128)")
    batches.add_argument("--graph-device", choices=("auto", "cpu", "cuda"), default="auto",
                         help="where the graph and features live and are sampled; auto: the "
                              "model's GPU when it samples there and the graph fits, else the host")
    batches.add_argument("--num-workers", type=non_negative_int, default=0,
                         help="loader worker processes (graph on the host; persistent workers, "
                              "batches in pinned memory when the model is on CUDA)")
    batches.add_argument("--profile-split", action="store_true",
                         help="synchronise the device at every split point of the epoch time "
                              "(sampling / transfer / compute)")
    batches.add_argument("--no-trim", action="store_true",
                         help="run every layer on the whole batch (no trim_to_layer)")
    batches.add_argument("--eval-test-nodes", type=non_negative_int, default=100_000,
                         help="test nodes evaluated after each epoch, a fixed random subset "
                              "(0: all)")
    graph = parser.add_argument_group("graph-level training (--task graph; --batch-size graphs "
                                      "per batch)")
    graph.add_argument("--num-layers", type=positive_int, default=5,
                       help="GIN / GCN layers; GGNN propagation steps")
    graph.add_argument("--graph-loader", choices=("iognn", "pyg"), default="iognn",
                       help="batches of the iognn model: iognn's GraphBatcher (gathered on the "
                            "device) or PyG's DataLoader (the PyG model always uses PyG's)")
    several = parser.add_argument_group(
        "several processes (--nproc; through torchrun: see docs/distributed.md)")
    several.add_argument("--nproc", type=positive_int, default=None,
                         help="train on this many processes, one GPU each (gloo CPU processes "
                              "with --device cpu): --loader full partitions the graph, --loader "
                              "neighbor trains data-parallel mini-batches")
    several.add_argument("--partition", choices=("metis", "random"), default="metis",
                         help="how --loader full splits the graph over the processes")
    several.add_argument("--overlap", action=argparse.BooleanOptionalAction, default=None,
                         help="--loader full: compute each layer's interior rows while its halo "
                              "exchange runs (default: iognn.distributed.full_graph.OVERLAP; "
                              "docs/distributed.md)")
    several.add_argument("--dist-timeout", type=positive_int, default=300,
                         help="seconds after which a process waiting for the others fails")
    parser.set_defaults(usage_error=parser.error, argument_parser=parser)


def dataset_name(text: str) -> str:
    """An argparse type: a name of :data:`iognn.datasets.DATASETS`, of
    :data:`iognn.graph_datasets.GRAPH_DATASETS` or ``synthetic-products:<scale>``."""
    from .datasets import DATASETS
    from .graph_datasets import GRAPH_DATASETS, is_graph_dataset
    from .synthetic_products import parse_spec
    try:
        if parse_spec(text) is not None:
            return text
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if text.lower().replace("-", "_") not in DATASETS and not is_graph_dataset(text):
        raise argparse.ArgumentTypeError(f"unknown dataset {text!r}; choose one of "
                                         f"{', '.join(DATASETS)}, synthetic-products:<scale> or "
                                         f"(--task graph) {', '.join(GRAPH_DATASETS)}")
    return text


def fanouts(text: str) -> List[int]:
    """An argparse type: comma-separated fan-outs, each -1 (every neighbour) or >= 0."""
    try:
        values = [int(t) for t in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers such as 15,10,5, got {text!r}") from None
    if any(v < -1 for v in values):
        raise argparse.ArgumentTypeError(
            f"a fan-out is -1 (every neighbour) or at least 0, got {text!r}")
    return values


def _int_at_least(minimum: int, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {what}, got {value}")
        return value
    parse.__name__ = f"integer {what}"
    return parse


positive_int = _int_at_least(1, "at least 1")
non_negative_int = _int_at_least(0, "at least 0")


def resolve_task(args) -> None:
    """Fills the options whose default depends on ``--task`` / ``--loader`` and rejects the
    combinations that do not fit (argparse errors)."""
    from .graph_datasets import GRAPH_DATASETS, is_graph_dataset
    graph = args.task == "graph"
    if args.model is None:
        args.model = "gin" if graph else "gcn"
    if args.dataset is None:
        args.dataset = "synthetic-graphs" if graph else "synthetic"
    if args.batch_size is None:
        args.batch_size = 128 if graph else 1024
    if graph:
        if args.model not in GRAPH_MODELS:
            args.usage_error(f"--task graph trains {', '.join(GRAPH_MODELS)}; "
                             f"got --model {args.model}")
        if not is_graph_dataset(args.dataset):
            args.usage_error(f"--task graph needs a graph dataset ({', '.join(GRAPH_DATASETS)}); "
                             f"got --dataset {args.dataset}")
        if args.loader != "full":
            args.usage_error("--loader neighbor is for --task node")
        return
    if args.model not in MODELS:
        args.usage_error(f"--model {args.model} is for --task graph")
    if is_graph_dataset(args.dataset):
        args.usage_error(f"--dataset {args.dataset} is a graph dataset: use --task graph")


def run(args) -> int:
    from ._tools import require_for_command
    resolve_task(args)
    if args.epochs is None:
        args.epochs = 3 if args.loader == "neighbor" else 100
    if args.epochs < 1:
        raise SystemExit("iognn train: --epochs must be at least 1")
    if args.loader == "neighbor" and args.model not in MINIBATCH_MODELS:
        args.usage_error(f"--loader neighbor trains {', '.join(MINIBATCH_MODELS)}; "
                         f"got --model {args.model}")
    # the progress bars; the real datasets are stored as pickled scipy matrices
    synthetic = args.dataset.lower().startswith("synthetic")
    graph = args.task == "graph"
    require_for_command("iognn train", ("tqdm",) if synthetic or graph else ("tqdm", "scipy"))
    from .distributed.launch import in_torchrun
    several = args.nproc is not None or in_torchrun()
    if several and graph:
        args.usage_error("--nproc and torchrun train node classifiers (--task node)")
    if several and args.compare:
        args.usage_error("--compare runs in one process: leave out --nproc")
    try:
        if several:
            from .distributed.launch import launch
            report = launch(args)
            if report is None:  # another rank, or the process that started torchrun
                return 0
        elif graph:
            from .graph_task import run_graph_training
            report = run_graph_training(args)
        elif args.loader == "neighbor":
            from .minibatch import run_minibatch_training
            report = run_minibatch_training(args)
        else:
            report = run_training(args)
    except FileNotFoundError as error:
        raise SystemExit(f"iognn train: {error}") from None
    print(format_table(report))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    return 0
