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
  caches on ``edge_type`` (paid once per batch).

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
    from torch_geometric.data import Batch
    from ..program_graphs import VOCAB_SIZE, program_graphs
    count, low, high = SIZES["cuda" if device.type == "cuda" else "cpu"]
    batch = Batch.from_data_list(program_graphs(count, EDGE_KINDS, low, high, seed))
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(VOCAB_SIZE, HIDDEN, generator=gen)[batch.x]
    label = f"programs {count}x[{low},{high}] N={batch.num_nodes} E={batch.edge_index.size(1)}"
    return (x.to(device), batch.edge_index.to(device), batch.edge_type.to(device), label)


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
    return rows
