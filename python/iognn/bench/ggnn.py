"""``iognn bench --suite workloads --parts ggnn``: gated graph networks on program graphs.

One batch of synthetic typed program graphs (:mod:`iognn.program_graphs`, ``EDGE_KINDS = 20``
forward kinds and their reverses: 40 edge types; ``SIZES`` graphs per device), node features a
fixed random embedding of the tokens (``HIDDEN`` wide). Rows, each a forward + backward with
gradients set to None before every step, iognn against PyG on the same weights:

- ``GatedGraphConv``: ``STEPS`` layers over the untyped edges, iognn's drop-in against
  ``torch_geometric.nn.GatedGraphConv``;
- ``typed GGNN``: ``iognn.nn.TypedGatedGraphConv`` (``STEPS`` steps, per-type weights and
  message biases, sum) against the typed GGNN one writes with PyG (:class:`PyGTypedGGNN`: a
  ``MessagePassing`` whose message is PyG's ``HeteroLinear`` of ``x_j`` by edge type, a
  ``GRUCell``);
- ``TypedGraph build``: iognn's grouping of the batch by (destination, type), which the layer
  caches on ``edge_type`` (paid once per batch);
- on the devices of ``DENSE_PATH_DEVICES`` (:func:`dense_path_rows`): the typed GGNN on its
  sparse path, on the dense supergraph path (:mod:`iognn.dense`) and on ``path='auto'``, on the
  program graphs, on TU-like batches of small graphs and on batches of the TU sets with bond
  types, ``tu_mutag`` and ``tu_ptc_mr`` (``DENSE_BATCHES``; :func:`tu_batch`, from the data
  folder: a row ``skipped`` where it is missing), the path each took with the estimate behind
  it, the packing's host time, and the calibrated device rates.

Wall times as the workloads suite takes them (host included, median of ``rounds`` rounds); the
note gives the peak memory of one step above what was allocated before it (CUDA) and the largest
difference between the two implementations' outputs.
"""
from __future__ import annotations

from typing import Callable, Dict, List

import torch

EDGE_KINDS = 20
STEPS = 8
HIDDEN = 128
SIZES = {"cuda": (64, 200, 2000), "cpu": (4, 100, 300)}  # graphs, min and max nodes per graph


def _pyg_typed_ggnn_class():
    from torch_geometric.nn import HeteroLinear, MessagePassing

    class PyGTypedGGNN(MessagePassing):
        """A typed GGNN written with PyG: per step, ``m_i = sum_j HeteroLinear(h_j, type)``
        (per-type weight ``[R, H, H]`` and bias ``[R, H]``, iognn's layout), ``h = GRU(m, h)``."""

        def __init__(self, channels: int, num_steps: int, num_types: int):
            super().__init__(aggr="add")
            self.num_steps = num_steps
            self.lin = HeteroLinear(channels, channels, num_types, bias=True)
            self.rnn = torch.nn.GRUCell(channels, channels)

        def forward(self, x, edge_index, edge_type):
            h = x
            for _ in range(self.num_steps):
                h = self.rnn(self.propagate(edge_index, x=h, edge_type=edge_type), h)
            return h

        def message(self, x_j, edge_type):
            return self.lin(x_j, edge_type)

    return PyGTypedGGNN


def program_batch(device: torch.device, seed: int):
    """(x [N, HIDDEN], edge_index, edge_type, label) of the bench's batch on ``device``."""
    x, edge_index, edge_type, _, label = typed_program_batch(device, seed)
    return x, edge_index, edge_type, label


def typed_program_batch(device: torch.device, seed: int):
    """``program_batch`` with the batch's ``ptr``: (x, edge_index, edge_type, ptr, label)."""
    from torch_geometric.data import Batch
    from ..program_graphs import VOCAB_SIZE, program_graphs
    count, low, high = SIZES["cuda" if device.type == "cuda" else "cpu"]
    batch = Batch.from_data_list(program_graphs(count, EDGE_KINDS, low, high, seed))
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(VOCAB_SIZE, HIDDEN, generator=gen)[batch.x]
    label = f"programs {count}x[{low},{high}] N={batch.num_nodes} E={batch.edge_index.size(1)}"
    return (x.to(device), batch.edge_index.to(device), batch.edge_type.to(device),
            batch.ptr.to(device), label)


def layer_pairs(device: torch.device, seed: int) -> Dict[str, Dict[str, torch.nn.Module]]:
    """{workload: {impl: module}}, each pair holding the same weights."""
    import torch_geometric.nn as pyg_nn
    from .. import nn as io_nn
    torch.manual_seed(seed)
    ours = io_nn.GatedGraphConv(HIDDEN, STEPS)
    theirs = pyg_nn.GatedGraphConv(HIDDEN, STEPS)
    theirs.load_state_dict(ours.state_dict())
    typed = io_nn.TypedGatedGraphConv(HIDDEN, STEPS, 2 * EDGE_KINDS)
    with torch.no_grad():
        typed.bias.normal_(0.0, 0.1)
    reference = _pyg_typed_ggnn_class()(HIDDEN, STEPS, 2 * EDGE_KINDS)
    reference.load_state_dict({"lin.weight": typed.weight, "lin.bias": typed.bias,
                               **{f"rnn.{k}": v for k, v in typed.rnn.state_dict().items()}})
    return {f"GatedGraphConv L{STEPS} h{HIDDEN}": {"iognn": ours.to(device),
                                                   "pyg": theirs.to(device)},
            f"typed GGNN T{STEPS} h{HIDDEN} R{2 * EDGE_KINDS}": {"iognn": typed.to(device),
                                                                "pyg": reference.to(device)}}


def fwd_bwd_step(module: torch.nn.Module, args: tuple, grad: torch.Tensor) -> Callable:
    def step():
        for p in module.parameters():
            p.grad = None
        out = module(*args)
        out.backward(grad)
        return out
    return step


def ggnn_rows(cfg, device: torch.device, log: Callable[[str], None]) -> list:
    """The rows of the part (see the module note)."""
    from ..typed import TypedGraph
    from .workloads import Row, format_row, peak_mib, wall_time
    rows: List = []
    try:
        x, edge_index, edge_type, label = program_batch(device, cfg.seed)
        pairs = layer_pairs(device, cfg.seed)
    except Exception as error:  # noqa: BLE001 - a part that cannot be set up is a row
        rows.append(Row("ggnn", "programs", "-", "-", status=f"error: {error}"))
        log(format_row(rows[-1]))
        return rows
    grad = torch.randn(x.shape, generator=torch.Generator().manual_seed(cfg.seed)).to(device)
    for workload, impls in pairs.items():
        typed = workload.startswith("typed")
        args = (x, edge_index, edge_type) if typed else (x, edge_index)
        outputs = {}
        for impl, module in impls.items():
            row = Row("ggnn", label, workload, impl)
            try:
                step = fwd_bwd_step(module, args, grad)
                row.wall_ms = wall_time(step, device, cfg.warmup, cfg.rounds, cfg.steps)
                peak = peak_mib(step, device)
                with torch.no_grad():
                    outputs[impl] = module(*args)
                row.note = "" if peak is None else f"peak {peak:.1f} MiB"
            except Exception as error:  # noqa: BLE001 - one failing row must not end the part
                row.status = f"error: {type(error).__name__}: {str(error)[:200]}"
            rows.append(row)
        if len(outputs) == 2:
            diff = float((outputs["iognn"] - outputs["pyg"]).abs().max())
            for row in rows[-2:]:
                row.note = "; ".join(filter(None, [row.note, f"max |iognn - pyg| {diff:.2e}"]))
        for row in rows[-len(impls):]:
            log(format_row(row))
    row = Row("ggnn", label, f"TypedGraph build R{2 * EDGE_KINDS}", "iognn")
    try:
        row.wall_ms = wall_time(lambda: TypedGraph(edge_index, edge_type, 2 * EDGE_KINDS,
                                                   x.size(0)),
                                device, cfg.warmup, cfg.rounds, cfg.steps)
    except Exception as error:  # noqa: BLE001
        row.status = f"error: {type(error).__name__}: {str(error)[:200]}"
    rows.append(row)
    log(format_row(row))
    if device.type in DENSE_PATH_DEVICES:
        rows += dense_path_rows(cfg, device, log)
    return rows


# ---- the typed GGNN's sparse and dense paths -----------------------------------------------------
# The literal dense path at 40 edge types does hundreds of times the sparse path's aggregation
# work: seconds per step on a CPU, so its rows run on these devices (tests open the CPU).
DENSE_PATH_DEVICES = ("cuda",)
TU_LIKE = {"cuda": (128, 20, 40), "cpu": (8, 20, 40)}  # graphs, min and max nodes per graph
TU_GRAPHS = {"cuda": 128, "cpu": 8}  # graphs of a TU set's batch (its first ones)
# batch -> (forward edge kinds, or None: EDGE_KINDS, or a TU set's bond types; supergraph size
# S, block b). Program graphs keep long data-flow edges (bandwidth about a third of their size
# after RCM): b = 256 packs the smaller ones, the rest run on the remainder. TU-like graphs and
# the molecules of MUTAG (up to 28 atoms) and PTC_MR (up to 64) have bandwidths under 8 after
# RCM; with one kind they show the regime where the dense path can win.
DENSE_BATCHES = {"programs": (None, 2048, 256), "tu-like": (None, 256, 16),
                 "tu-like P1": (1, 256, 8), "tu_mutag": (None, 256, 16),
                 "tu_ptc_mr": (None, 256, 16)}
DENSE_PATHS = ("sparse", "dense", "auto")


def tu_like_batch(device: torch.device, seed: int, kinds: int):
    """(x [N, HIDDEN], edge_index, edge_type, ptr, label): molecule-like graphs (a random tree
    whose nodes join one of the few nodes before them, plus ring closures of 3 to 6 nodes) with
    ``kinds`` random edge kinds, each edge with its reverse of kind ``k + kinds``."""
    count, low, high = TU_LIKE["cuda" if device.type == "cuda" else "cpu"]
    gen = torch.Generator().manual_seed(seed)
    edges, ptr = [], [0]
    for _ in range(count):
        n = int(torch.randint(low, high + 1, (1,), generator=gen))
        child = torch.arange(1, n)
        tree = torch.stack([child - 1 - (torch.rand(n - 1, generator=gen) * child.clamp(max=3))
                            .long(), child])
        ring_end = torch.randint(6, n, (n // 6,), generator=gen)
        rings = torch.stack([ring_end - torch.randint(3, 7, (n // 6,), generator=gen), ring_end])
        edges.append(torch.cat([tree, rings], 1) + ptr[-1])
        ptr.append(ptr[-1] + n)
    forward = torch.cat(edges, 1)
    kind = torch.randint(0, kinds, (forward.size(1),), generator=gen)
    edge_index = torch.cat([forward, forward.flip(0)], 1)
    edge_type = torch.cat([kind, kind + kinds])
    x = torch.randn(ptr[-1], HIDDEN, generator=gen)
    label = f"tu-like {count}x[{low},{high}] P{kinds} N={ptr[-1]} E={edge_index.size(1)}"
    return (x.to(device), edge_index.to(device), edge_type.to(device),
            torch.tensor(ptr).to(device), label)


def tu_batch(name: str, device: torch.device, seed: int, data_dir=None):
    """(x [N, HIDDEN], edge_index, edge_type, ptr, label, kinds): the first ``TU_GRAPHS``
    graphs of TU set ``name`` (:func:`iognn.graph_datasets.load_graph_dataset`) as one batch.
    Its ``kinds`` bond types are the edge types of the edges from the lower node id to the
    higher one, ``k + kinds`` those of their reverses (TU graphs store both directions); a
    node's feature is a fixed random embedding of its label."""
    from torch_geometric.data import Batch
    from ..graph_datasets import load_graph_dataset
    graphs = load_graph_dataset(name, data_dir)
    if graphs.edge_type is None:
        raise ValueError(f"{name} has no edge labels")
    kinds = int(graphs.edge_type.max()) + 1
    count = min(TU_GRAPHS["cuda" if device.type == "cuda" else "cpu"], graphs.num_graphs)
    batch = Batch.from_data_list(graphs.data_list()[:count])
    src, dst = batch.edge_index
    edge_type = torch.where(src < dst, batch.edge_type, batch.edge_type + kinds)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(graphs.num_features, HIDDEN, generator=gen)[batch.x.argmax(1)]
    label = f"{name} {count} graphs P{kinds} N={batch.num_nodes} E={src.numel()}"
    return (x.to(device), batch.edge_index.to(device), edge_type.to(device),
            batch.ptr.to(device), label, kinds)


def dense_batch(name: str, kinds, device: torch.device, cfg):
    """(x, edge_index, edge_type, ptr, label, kinds) of ``DENSE_BATCHES[name]``."""
    from ..graph_datasets import TU_DATASETS
    if name in TU_DATASETS:
        return tu_batch(name, device, cfg.seed, cfg.data_dir)
    kinds = kinds or EDGE_KINDS
    batch = (typed_program_batch(device, cfg.seed) if name == "programs"
             else tu_like_batch(device, cfg.seed, kinds))
    return batch + (kinds,)


def path_layers(num_types: int, size: int, block: int, device: torch.device, seed: int,
                rates=None) -> Dict[str, torch.nn.Module]:
    """{path: TypedGatedGraphConv on that path}, all holding the same weights and estimating
    with ``rates`` (default: the device's calibrated ones)."""
    from .. import nn as io_nn
    torch.manual_seed(seed)
    layers = {path: io_nn.TypedGatedGraphConv(HIDDEN, STEPS, num_types, path=path,
                                              supergraph_size=size, block_size=block,
                                              rates=rates)
              for path in DENSE_PATHS}
    with torch.no_grad():
        layers["sparse"].bias.normal_(0.0, 0.1)
    for layer in layers.values():
        layer.load_state_dict(layers["sparse"].state_dict())
    return {path: layer.to(device) for path, layer in layers.items()}


def choice_note(choice) -> str:
    """The path a layer took and the estimate and packing measures behind it."""
    if choice is None or choice.dense_seconds != choice.dense_seconds:  # no estimate (NaN)
        return "" if choice is None else choice.reason
    m = choice.measures
    return (f"took {choice.path}: est. dense {choice.dense_seconds * 1e3:.3g} ms vs sparse "
            f"{choice.sparse_seconds * 1e3:.3g} ms per step, fill {m['tile_fill']:.2%}, "
            f"inflation {m['inflation']:.3g}, padding {m['padding']:.0%}, remainder "
            f"{m['remainder_edge_fraction']:.0%} of edges")


def dense_path_rows(cfg, device: torch.device, log: Callable[[str], None]) -> list:
    """The typed GGNN on each path for each of ``DENSE_BATCHES`` (module note), forward +
    backward; a packing row per batch; one row for the device's calibration."""
    import time
    from ..dense import calibrate, pack_supergraphs
    from .workloads import Row, format_row, peak_mib, wall_time
    start = time.perf_counter()
    rates = calibrate(device, torch.float32, refresh=True)
    rows = [Row("ggnn", str(device), "dense path calibrate fp32", "iognn",
                wall_ms=(time.perf_counter() - start) * 1e3,
                note=(f"bmm {rates.gemm_flops_per_s / 1e12:.3g} TFLOP/s, copy "
                      f"{rates.bytes_per_s / 1e9:.3g} GB/s, gather "
                      f"{rates.gather_bytes_per_s / 1e9:.3g} GB/s, launch "
                      f"{rates.launch_seconds * 1e6:.3g} us"))]
    log(format_row(rows[-1]))
    for name, (kinds, size, block) in DENSE_BATCHES.items():
        try:
            x, edge_index, edge_type, ptr, label, kinds = dense_batch(name, kinds, device, cfg)
            layers = path_layers(2 * kinds, size, block, device, cfg.seed, rates)
        except Exception as error:  # noqa: BLE001 - a batch that cannot be set up is a row
            status = "skipped" if isinstance(error, FileNotFoundError) else "error"
            rows.append(Row("ggnn", name, f"typed GGNN T{STEPS} h{HIDDEN} S{size} b{block}",
                            "-", status=f"{status}: {error}"))
            log(format_row(rows[-1]))
            continue
        workload = f"typed GGNN T{STEPS} h{HIDDEN} R{2 * kinds} S{size} b{block}"
        grad = torch.randn(x.shape, generator=torch.Generator().manual_seed(cfg.seed)).to(device)
        outputs = {}
        for path, layer in layers.items():
            row = Row("ggnn", label, workload, path)
            try:
                step = fwd_bwd_step(layer, (x, edge_index, edge_type, ptr), grad)
                row.wall_ms = wall_time(step, device, cfg.warmup, cfg.rounds, cfg.steps)
                peak = peak_mib(step, device)
                with torch.no_grad():
                    outputs[path] = layer(x, edge_index, edge_type, ptr)
                row.note = "; ".join(filter(None, [
                    choice_note(layer.last_choice),
                    None if peak is None else f"peak {peak:.1f} MiB"]))
            except Exception as error:  # noqa: BLE001 - one failing row must not end the part
                row.status = f"error: {type(error).__name__}: {str(error)[:200]}"
            rows.append(row)
        for row in rows[-len(layers):]:
            if row.impl in outputs and "sparse" in outputs and row.impl != "sparse":
                diff = float((outputs[row.impl] - outputs["sparse"]).abs().max())
                row.note = "; ".join(filter(None, [row.note, f"max |{row.impl} - sparse| "
                                                   f"{diff:.2e}"]))
            log(format_row(row))
        row = Row("ggnn", label, f"supergraph packing S{size} b{block}", "iognn")
        try:
            row.wall_ms = wall_time(lambda: pack_supergraphs(
                (edge_index, edge_type, ptr), 2 * kinds, size, block), device, 1,
                cfg.rounds, 1)
            packed = layers["dense"].packing(edge_index, edge_type, ptr, x.size(0))
            tile_mib = packed.tiles.numel() * packed.tiles.element_size() / 2**20
            row.note = (f"host RCM and packing, once per batch: {packed.num_super} supergraphs, "
                        f"{packed.remainder_nodes.numel()} of {packed.num_nodes} nodes in the "
                        f"remainder, tiles {tile_mib:.4g} MiB")
        except Exception as error:  # noqa: BLE001
            row.status = f"error: {type(error).__name__}: {str(error)[:200]}"
        rows.append(row)
        log(format_row(row))
    return rows
