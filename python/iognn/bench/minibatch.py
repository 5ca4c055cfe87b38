"""``iognn bench --suite workloads --parts minibatch``: the mini-batch training path, per graph.

- ``sample``: ``torch.ops.iognn.neighbor_sample`` with fan-out [15, 10, 5] around 1,024 seeds
  (a pool of 8 seed sets of training nodes, fixed draws), on the host with int64 and int32
  indices and, with a GPU whose build samples there, on the device; the rate is sampled edges
  per second;
- ``Graph build, sampled batch``: ``iognn.Graph`` of a whole sampled batch (a pool of 8 batches
  from the loader, on the graph's device): the largest of the blocks' builds a batch pays;
- ``SAGE x3 h256 epoch``: a whole training epoch (3-layer SAGE, hidden 256, fan-out [15, 10, 5],
  batch 1,024, Adam) through ``iognn.loader.NeighborLoader``, iognn's layers and PyG's on the same
  sampler and the same batches, as ``iognn train --loader neighbor`` runs it (graph on the GPU
  when it samples there and fits; SAGE on blocks); the note gives the epoch's split into sampling,
  transfer and compute (device synchronised at the epoch's end only).

Graphs: ``synthetic-products`` at ``minibatch_scale`` (default: 1 on a GPU, 0.01 on the host;
generated once, then cached), whose epoch runs over its training nodes, and real datasets of the
data folder (default: amazon_computers), whose epoch runs over every node (their split trains 20
nodes per class: one batch). Wall times include the host; one warm-up, then the median of
``minibatch_epochs`` epochs (``rounds`` rounds of the sampler and build rows).
"""
from __future__ import annotations

import statistics
from typing import Callable, List, Optional

import torch

FANOUT = [15, 10, 5]
BATCH = 1024
HIDDEN = 256
POOL = 8
GRAPHS = ["synthetic-products", "amazon_computers"]


def _graph(name: str, scale: float, data_dir: Optional[str]):
    """(label, Data, epoch seeds) of a bench graph."""
    from ..datasets import load_dataset
    if name == "synthetic-products":
        name = f"synthetic-products:{scale:g}"
        data = load_dataset(name)
        return name, data, data.train_mask.nonzero().view(-1)
    data = load_dataset(name, data_dir)
    return name, data, torch.arange(data.num_nodes)


def _seed_pool(seeds: torch.Tensor, seed: int) -> List[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    order = seeds[torch.randperm(seeds.numel(), generator=gen)]
    return [order[(i * BATCH) % max(1, order.numel() - BATCH):][:BATCH] for i in range(POOL)]


def sampler_steps(sampler, pool: List[torch.Tensor], device: torch.device, index_dtype):
    """(step, mean sampled edges per step): the op on the sampler's CSC in ``index_dtype`` on
    ``device``, cycling through ``pool`` with a fixed draw key per seed set."""
    colptr = sampler.colptr.to(device, index_dtype)
    row = sampler.row.to(device, index_dtype)
    seeds = [s.to(device, index_dtype) for s in pool]

    def call(k: int):
        return torch.ops.iognn.neighbor_sample(colptr, row, seeds[k % POOL], FANOUT, False,
                                               False, k % POOL, None, None, None, None,
                                               "uniform")
    edges = statistics.mean(int(call(k)[0].numel()) for k in range(POOL))
    counter = {"k": 0}

    def step():
        counter["k"] += 1
        return call(counter["k"])
    return step, edges


def minibatch_rows(cfg, device: torch.device, log: Callable[[str], None]) -> list:
    """The rows of the part (see the module note) for ``cfg.minibatch_graphs``."""
    from .. import minibatch as mb
    from .workloads import Row, format_row, wall_time
    scale = cfg.minibatch_scale or (1.0 if device.type == "cuda" else 0.01)
    rows = []

    def add(row):
        rows.append(row)
        log(format_row(row))

    for name in cfg.minibatch_graphs or GRAPHS:
        try:
            label, data, seeds = _graph(name, scale, cfg.data_dir)
        except (FileNotFoundError, OSError) as error:
            add(Row("minibatch", name, "-", "-", status=f"skipped: {error}"))
            continue
        graph_device = mb.pick_graph_device("auto", device, data)
        sampler = mb.make_sampler(data, FANOUT)
        pool = _seed_pool(seeds, cfg.seed)
        targets = [("cpu", torch.int64), ("cpu", torch.int32)]
        if device.type == "cuda" and mb.cuda_sampling_available():
            targets += [(device.type, torch.int64), (device.type, torch.int32)]
        for where, dtype in targets:
            row = Row("minibatch", label,
                      f"sample {FANOUT} x{BATCH}, {where} {str(dtype).replace('torch.', '')}",
                      "iognn")
            _measure(row, lambda: sampler_steps(sampler, pool, torch.device(where), dtype),
                     lambda step: wall_time(step, torch.device(where), cfg.warmup, cfg.rounds,
                                            cfg.steps))
            add(row)
        if graph_device.type != "cpu":  # the loaders sample where the graph lives
            data = data.to(graph_device)
            sampler = mb.make_sampler(data, FANOUT)
        row = Row("minibatch", label, "Graph build, sampled batch", "iognn")
        _measure(row, lambda: build_step(data, sampler, pool, graph_device, cfg.seed),
                 lambda step: wall_time(step, graph_device, cfg.warmup, cfg.rounds, cfg.steps))
        add(row)
        seeds = seeds.to(graph_device)
        for impl in ("iognn", "pyg"):
            row = Row("minibatch", label, f"SAGE x3 h{HIDDEN} epoch", impl)
            _measure(row, lambda: epoch_runner(impl, data, sampler, seeds, device, graph_device,
                                               cfg.seed), lambda run: run(cfg.minibatch_epochs))
            add(row)
    return rows


def _measure(row, setup, time_it) -> None:
    """Fills ``row`` from ``time_it(setup())``: wall ms, or (wall ms, note) with an epoch, and a
    rate where setup gives (step, items per step); a failure becomes the row's status."""
    try:
        made = setup()
        step, items = made if isinstance(made, tuple) else (made, None)
        timed = time_it(step)
        row.wall_ms, row.note = timed if isinstance(timed, tuple) else (timed, "")
        if items is not None and row.wall_ms > 0:
            row.rate = items / (row.wall_ms / 1e3)
    except Exception as error:  # noqa: BLE001 - one failing row must not end the suite
        row.status = f"error: {type(error).__name__}: {str(error)[:200]}"


def build_step(data, sampler, pool, device: torch.device, seed: int):
    """``iognn.Graph`` of one of ``POOL`` sampled batches per call."""
    import iognn
    from .. import minibatch as mb
    randomness = mb.SamplingRandomness(seed)
    seeds = torch.cat(pool).to(device)
    loader = mb.make_loader(data, sampler, seeds, mb.LoaderConfig(FANOUT, BATCH), False,
                            randomness)
    iterator = iter(loader)
    batches = [randomness.next(iterator) for _ in range(min(POOL, len(loader)))]
    counter = {"k": 0}

    def step():
        counter["k"] += 1
        batch = batches[counter["k"] % len(batches)]
        return iognn.Graph(batch.edge_index, batch.num_nodes)
    return step


def epoch_runner(impl: str, data, sampler, seeds, device, graph_device, seed: int):
    """``run(epochs) -> (median epoch ms, split note)`` for one implementation's 3-layer SAGE."""
    from .. import minibatch as mb
    from ..train import implementation_layers
    torch.manual_seed(seed)
    model = mb.build_stack("sage", implementation_layers(impl), data.num_features, HIDDEN,
                           int(data.y.max()) + 1, len(FANOUT)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    config = mb.LoaderConfig(FANOUT, BATCH, pin_memory=graph_device != device, seed=seed)
    randomness = mb.SamplingRandomness(seed)
    loader = mb.make_loader(data, sampler, seeds, config, True, randomness)

    def run(epochs: int):
        mb.warm_up(model, loader, seeds, device)
        model.train()
        times = [mb.run_epoch(model, optimizer, loader, randomness, device)
                 for _ in range(max(1, epochs))]
        median = sorted(times, key=lambda t: t.epoch_s)[len(times) // 2]
        note = (f"sampling {median.sampling_s:.3g} s, transfer {median.transfer_s:.3g} s, "
                f"compute {median.compute_s:.3g} s; {median.batches} batches, "
                f"{median.sampled_edges / 1e6:.3g}M edges")
        return median.epoch_s * 1e3, note
    return run
