"""``iognn bench --suite workloads --parts graph_training``: graph-level training epochs.

One row per implementation and dataset: a whole training epoch of a GIN graph classifier (5
``GINConv`` layers on two-layer MLPs with batch norm, hidden 64, global sum pooling, a two-layer
head; batches of 128 graphs of the stratified 80% training split, shuffled; cross entropy, Adam)
as ``iognn train --task graph`` runs it (:mod:`iognn.graph_task`):

- ``iognn``: iognn's layers, batches gathered on the device by ``GraphBatcher``;
- ``iognn+PyG loader``: iognn's layers on batches from PyG's ``DataLoader`` (what the layers
  gain alone);
- ``pyg``: PyG's layers and PyG's ``DataLoader``.

All three see the same batches. Datasets: ``graph_training_datasets`` (default tu_nci1 and
reddit10k; any name of ``iognn.graph_datasets.GRAPH_DATASETS``, synthetic-graphs needs no files).
Wall times include the host and the loader; one untimed warm-up batch, then the median of
``graph_training_epochs`` epochs; the note gives that epoch's loader / compute split.
"""
from __future__ import annotations

from typing import Callable

import torch

DATASETS = ["tu_nci1", "reddit10k"]
HIDDEN = 64
LAYERS = 5
BATCH = 128
IMPLEMENTATIONS = (("iognn", "iognn"), ("iognn+PyG loader", "pyg"), ("pyg", "pyg"))


def graph_training_rows(cfg, device: torch.device, log: Callable[[str], None]) -> list:
    """The rows of the part (see the module note) for ``cfg.graph_training_datasets``."""
    from ..graph_datasets import load_graph_dataset, stratified_split
    from .minibatch import _measure
    from .workloads import Row, format_row
    rows = []

    def add(row):
        rows.append(row)
        log(format_row(row))

    for name in cfg.graph_training_datasets or DATASETS:
        workload = f"GIN x{LAYERS} h{HIDDEN} epoch"
        try:
            graphs = load_graph_dataset(name, cfg.data_dir)
        except (FileNotFoundError, OSError) as error:
            add(Row("graph_training", name, workload, "-", status=f"skipped: {error}"))
            continue
        train_ids = stratified_split(graphs.y)[0]
        for impl, loader in IMPLEMENTATIONS:
            row = Row("graph_training", name, workload, impl)
            _measure(row, lambda: epoch_runner(impl, loader, graphs, train_ids, device, cfg.seed),
                     lambda run: run(cfg.graph_training_epochs))
            add(row)
    return rows


def epoch_runner(impl: str, loader: str, graphs, train_ids, device: torch.device, seed: int):
    """``run(epochs) -> (median epoch ms, split note)`` for one implementation's GIN."""
    from .. import graph_task as gt
    from ..graph_batches import EpochOrder
    from ..train import implementation_layers
    torch.manual_seed(seed)
    layers = implementation_layers("pyg" if impl == "pyg" else "iognn")
    model = gt.build_graph_model("gin", layers, graphs.num_features, HIDDEN, graphs.num_classes,
                                 num_layers=LAYERS).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    batches = gt.Batches(loader, graphs, BATCH, device, build_graphs=impl != "pyg")
    order = EpochOrder(train_ids, shuffle=True, seed=seed)

    def run(epochs: int):
        gt.warm_up(model, batches, train_ids)
        times = [gt.train_epoch(model, optimizer, batches.epoch(order.next_epoch()), device)
                 for _ in range(max(1, epochs))]
        _, epoch_s, loader_s = sorted(times, key=lambda t: t[1])[len(times) // 2]
        note = (f"loader {loader_s:.3g} s, compute {epoch_s - loader_s:.3g} s; "
                f"{-(-train_ids.numel() // BATCH)} batches of {BATCH} graphs")
        return epoch_s * 1e3, note
    return run
