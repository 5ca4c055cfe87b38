"""``iognn train --loader neighbor``: mini-batch node classification over sampled neighbourhoods.

The loop is PyG's: :class:`iognn.loader.NeighborLoader` over the training nodes (fan-out per hop
``--num-neighbors``, ``--batch-size`` seeds a batch, shuffled), one convolution per hop, the
output of the batch's first ``batch_size`` nodes (the seeds), cross entropy, Adam. The graph and
its features stay where ``--graph-device`` puts them: the sampler samples there, so batches come
out on that device; from the host they are copied to the model's device (pinned memory and
``--num-workers`` loader processes, as PyG's loader offers).

**Blocks and trimming**: the sampler emits the batch ordered by hop (the nodes first reached by
hop h after those of hop h - 1, the edges of hop h after those of hop h - 1), so layer i only
needs a prefix of it. SAGE and GAT run each layer on its *block* (:mod:`iognn.blocks`): the
bipartite prefix from the nodes it reads to the nodes the next layer needs, so layer 0 computes
outputs for the nodes of hops 0 .. L - 1 only, and the last layer for the seeds only; with
``iognn.nn`` layers the blocks' Graphs are built with the batch, so the forward pass builds none.
GCN's layer takes no bipartite input: it is trimmed as PyG's ``trim_to_layer`` trims (each
later layer drops the last hop's nodes and edges) and normalises by degrees counted in the
trimmed graph, as in PyG. The seeds' outputs are the whole batch's for SAGE and GAT.
``--no-trim`` runs every layer on the whole batch.

**Captured steps** (the ``iognn captured`` row: CUDA, graph on the GPU, SAGE; ``--no-capture``
leaves it out): the training batches come from :class:`iognn.padded_sampler.PaddedNeighborSampler`
(the same sampling rules, fixed-shape buffers, its own draws), and the whole step (sampling,
feature gather, block builds, forward, loss, backward, Adam) is one :class:`iognn.CapturedStep`
replayed per batch with the batch's seeds copied in: no host synchronisation and one graph
launch per batch. The capture (two eager steps and the capture itself) runs on the first batch
before the first epoch, untimed, and its parameter and optimizer updates are undone. Its epochs
have no split (the replay does all parts) and their batches are not those of the other rows.

**Evaluation**: after each epoch, accuracy of the seeds' predictions over a loader of the same
fan-out on the validation nodes and on the test nodes (at most ``--eval-test-nodes`` of them: a
fixed random subset, the same for every implementation); the test accuracy reported is that of
the best validation epoch. Evaluation is not part of the epoch time.

**Same batches**: every implementation gets its own loaders, whose shuffling generator and
sampling draws start from ``--seed``; the sampler's draws come from a generator state kept apart
from the training's (dropout draws nothing from it), so ``--compare pyg`` trains on the very same
batches (the report's ``batch_digest``, a hash of every batch's node and edge counts, shows it).

**Time split** per epoch (the host clock, read around each part of every batch): *sampling*, the
time spent in the loader's ``next()`` (sampling and the feature / label gather, or waiting for a
worker's batch) and, for ``iognn.nn`` layers on blocks, the blocks' Graph builds; *transfer*, the copy of the batch to the model's device (zero when the graph is
there already); *compute*, forward + loss + backward + Adam step. With ``--profile-split`` the
device is synchronised at each split point, so each part holds its own device work; without it
only at the end of the epoch, and compute is the epoch time less the other two (the device work
that overlaps the host's sampling of the next batch then counts as sampling).
"""
from __future__ import annotations

import hashlib
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from .blocks import block_graphs, block_sizes
from .graph import Graph, SelfLoops, raise_deferred_error
from .train import CAPTURED, PeakMemory, build_convs, build_models, pick_device, report_config
from .train import MINIBATCH_MODELS as MODELS
from .train import text_table
SPLIT_SYNCED = ("host clock at the split points, device synchronised at each of them "
                "(--profile-split)")
SPLIT_EPOCH = ("host clock at the split points, device synchronised at the end of the epoch only: "
               "compute = epoch - sampling - transfer")


# ---- model ---------------------------------------------------------------------------------------
STACK_MODES = ("blocks", "trim", "full")
# Models whose layers take bipartite input, so run on blocks, and their layers' self-loop mode.
BLOCK_LOOPS = {"sage": SelfLoops.KEEP, "gat": SelfLoops.REPLACE}
# Models whose padded blocks build without a host synchronisation (self-loops kept as given).
CAPTURED_MODELS = tuple(m for m, loops in BLOCK_LOOPS.items() if loops == SelfLoops.KEEP)

class LayerStack(torch.nn.Module):
    """One convolution per hop: ``conv_L(... relu(conv_1(dropout(x))) ...)``, each hidden layer
    followed by ReLU and dropout. ``mode`` says what each layer is given of a hop-ordered batch:

    - ``'blocks'``: its block (:mod:`iognn.blocks`): bipartite input ``(x, x[:num_dst])`` and the
      prefix of the edges it needs, so it computes outputs for its destinations only (layers
      with bipartite input: SAGE, GAT);
    - ``'trim'``: the prefix of nodes and edges it needs as a square graph (PyG's
      ``trim_to_layer``: GCN, whose layer takes no bipartite input);
    - ``'full'``: the whole batch.

    ``graph_loops``: in ``'blocks'`` mode with ``iognn.nn`` layers, the self-loop mode of the
    blocks' :class:`iognn.Graph` objects, which :meth:`block_graphs` builds with the batch (so the
    forward pass builds none); None for layers that take ``edge_index`` as it is."""

    def __init__(self, convs: Sequence[torch.nn.Module], dropout: float, mode: str = "blocks",
                 graph_loops: Optional[SelfLoops] = None):
        # Blocks that keep self-loops are built deferred (no wait) when deferred_error is set:
        # the error word their builds record into, read once an epoch (check_blocks).
        super().__init__()
        if mode not in STACK_MODES:
            raise ValueError(f"mode must be one of {STACK_MODES}, got {mode!r}")
        self.convs = torch.nn.ModuleList(convs)
        self.dropout = dropout
        self.mode = mode
        self.graph_loops = graph_loops if mode == "blocks" else None
        self.deferred_error: Optional[torch.Tensor] = None
        self.max_in_degree = -1

    def block_graphs(self, batch) -> Optional[List[Graph]]:
        """The blocks' Graphs of ``batch`` when this stack runs on them, else None."""
        if self.graph_loops is None:
            return None
        deferred = self.deferred_error is not None and self.graph_loops == SelfLoops.KEEP
        return block_graphs(batch.edge_index, batch.num_sampled_nodes, batch.num_sampled_edges,
                            len(self.convs), self.graph_loops,
                            self.deferred_error if deferred else None, self.max_in_degree)

    def defer_block_builds(self, device: torch.device, max_in_degree: int = -1) -> None:
        """Builds this stack's blocks deferred from now on (blocks that keep self-loops)."""
        self.deferred_error = torch.full((1,), -1, dtype=torch.int64, device=device)
        self.max_in_degree = max_in_degree

    def check_blocks(self) -> None:
        """Raises what a deferred block build recorded (a synchronisation)."""
        if self.deferred_error is not None:
            raise_deferred_error(self.deferred_error, "a batch's edge_index")

    def forward(self, x, edge_index, num_sampled_nodes: Optional[Sequence[int]] = None,
                num_sampled_edges: Optional[Sequence[int]] = None,
                graphs: Optional[Sequence[Graph]] = None):
        hop_ordered = num_sampled_nodes is not None and num_sampled_edges is not None
        blocks = (block_sizes(num_sampled_nodes, num_sampled_edges, len(self.convs))
                  if hop_ordered and self.mode == "blocks" else None)
        trim = hop_ordered and self.mode == "trim"
        last = len(self.convs) - 1
        for i, conv in enumerate(self.convs):
            x = F.dropout(x, self.dropout, self.training)
            if blocks is not None:
                size = blocks[i]
                adj = graphs[i] if graphs is not None else edge_index.narrow(1, 0, size.num_edges)
                x = conv((x, x.narrow(0, 0, size.num_dst)), adj,
                         size=(size.num_src, size.num_dst))
            else:
                if trim and i > 0:  # drop the hop that layer i - 1 was the last to need
                    x = x.narrow(0, 0, x.size(0) - num_sampled_nodes[-i])
                    edge_index = edge_index.narrow(1, 0,
                                                   edge_index.size(1) - num_sampled_edges[-i])
                x = conv(x, edge_index)
            if i < last:
                x = F.relu(x)
        return x


def build_stack(model: str, layers, in_channels: int, hidden: int, num_classes: int,
                num_layers: int, heads: int = 8, dropout: float = 0.5,
                attn_dropout: float = 0.0, trim: bool = True) -> LayerStack:
    """A :class:`LayerStack` of ``num_layers`` convolutions from ``layers`` (``iognn.nn`` or
    ``torch_geometric.nn``), as :func:`iognn.train.build_convs` makes them."""
    if model not in MODELS:
        raise ValueError(f"mini-batch model must be one of {MODELS}, got {model!r}")
    convs = build_convs(model, layers, in_channels, hidden, num_classes, num_layers, heads=heads,
                        attn_dropout=attn_dropout)
    mode = ("blocks" if model in BLOCK_LOOPS else "trim") if trim else "full"
    iognn_layers = getattr(layers, "__name__", "").startswith("iognn")
    return LayerStack(convs, dropout, mode, BLOCK_LOOPS.get(model) if iognn_layers else None)


# ---- loaders ------------------------------------------------------------------------------------
class SamplingRandomness:
    """A generator state for the sampler's draws (taken from torch's default CPU generator),
    swapped in around each ``next()`` so that the training's random draws never shift the
    batches; and the shuffling generator of the loaders."""

    def __init__(self, seed: int):
        saved = torch.get_rng_state()
        torch.manual_seed(seed)
        self.state = torch.get_rng_state()
        torch.set_rng_state(saved)
        self.shuffle = torch.Generator().manual_seed(seed)

    def next(self, iterator):
        saved = torch.get_rng_state()
        torch.set_rng_state(self.state)
        try:
            return next(iterator)
        finally:
            self.state = torch.get_rng_state()
            torch.set_rng_state(saved)


@dataclass
class LoaderConfig:
    num_neighbors: List[int]
    batch_size: int
    num_workers: int = 0
    pin_memory: bool = False     # pinned host batches (graph on the host, model on CUDA)
    seed: int = 0


def make_sampler(data, num_neighbors: Sequence[int]):
    """One :class:`iognn.sampler.NeighborSampler` (its CSC) shared by every loader of a run;
    a graph stored sorted by destination (synthetic-products) skips the CSC sort."""
    from .sampler import NeighborSampler
    return NeighborSampler(data, list(num_neighbors), is_sorted=is_sorted_by_destination(data))


def is_sorted_by_destination(data) -> bool:
    col = data.edge_index[1]
    return bool((col[1:] >= col[:-1]).all()) if col.numel() > 1 else True


def make_loader(data, sampler, seeds: torch.Tensor, config: LoaderConfig, shuffle: bool,
                randomness: SamplingRandomness, index_sampler=None):
    """A :class:`iognn.loader.NeighborLoader` over ``seeds``; ``index_sampler`` (a
    ``torch.utils.data.Sampler`` over positions in ``seeds``, with ``shuffle`` False) picks the
    seeds each epoch draws instead."""
    from .loader import NeighborLoader
    workers = config.num_workers
    return NeighborLoader(data, num_neighbors=config.num_neighbors, input_nodes=seeds,
                          batch_size=config.batch_size, shuffle=shuffle, neighbor_sampler=sampler,
                          num_workers=workers, persistent_workers=workers > 0,
                          pin_memory=config.pin_memory, generator=randomness.shuffle,
                          sampler=index_sampler)


# ---- one epoch ----------------------------------------------------------------------------------
def unwrap(model) -> LayerStack:
    """The :class:`LayerStack` itself, also when ``DistributedDataParallel`` wraps it."""
    return model.module if isinstance(model, DistributedDataParallel) else model


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class EpochTimes:
    epoch_s: float = 0.0
    sampling_s: float = 0.0
    transfer_s: float = 0.0
    compute_s: float = 0.0
    batches: int = 0
    sampled_nodes: int = 0
    sampled_edges: int = 0
    sizes: List[int] = field(default_factory=list)  # node and edge count of every batch
    loss: float = float("nan")


def seed_output(model, batch, graphs=None):
    """The model's output for the seeds (the batch's first ``batch_size`` nodes)."""
    out = model(batch.x, batch.edge_index, batch.num_sampled_nodes, batch.num_sampled_edges,
                graphs)
    return out[:batch.batch_size]


def seed_loss(model, batch, graphs=None):
    """Cross entropy of the seeds' predictions."""
    return F.cross_entropy(seed_output(model, batch, graphs), batch.y[:batch.batch_size])


def run_epoch(model, optimizer, loader, randomness: SamplingRandomness, device: torch.device,
              profile_split: bool = False, bar=None) -> EpochTimes:
    """One pass over ``loader`` (forward, cross entropy of the seeds, backward, Adam step per
    batch) with the time split of the module note. ``model``: a :class:`LayerStack`, or one
    wrapped in ``DistributedDataParallel`` (whose forward then all-reduces the gradients)."""
    stack = unwrap(model)
    times = EpochTimes()
    split_sync = _sync if profile_split else (lambda device: None)
    iterator = iter(loader)
    _sync(device)
    epoch_start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        try:
            batch = randomness.next(iterator)
        except StopIteration:
            break
        split_sync(device)
        t1 = time.perf_counter()
        batch = batch.to(device, non_blocking=True)
        split_sync(device)
        t2 = time.perf_counter()
        graphs = stack.block_graphs(batch)  # iognn's layers on blocks: their Graphs, once
        split_sync(device)
        t3 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = seed_loss(model, batch, graphs)
        loss.backward()
        optimizer.step()
        split_sync(device)
        t4 = time.perf_counter()
        times.sampling_s += (t1 - t0) + (t3 - t2)
        times.transfer_s += t2 - t1
        times.compute_s += t4 - t3
        times.batches += 1
        times.sampled_nodes += batch.num_nodes
        times.sampled_edges += batch.edge_index.size(1)
        times.sizes += [batch.num_nodes, batch.edge_index.size(1)]
        if bar is not None:
            bar.update()
        last_loss = loss
    _sync(device)
    times.epoch_s = time.perf_counter() - epoch_start
    stack.check_blocks()
    if not profile_split:
        times.compute_s = max(0.0, times.epoch_s - times.sampling_s - times.transfer_s)
    if times.batches:
        times.loss = float(last_loss.detach())
    return times


class CapturedEpochs:
    """Training epochs whose step (padded sampling through Adam) is one replayed CUDA graph (module
    note). The model must be a :class:`LayerStack` on blocks whose layers take self-loops as given
    (SAGE), on the graph's CUDA device."""

    def __init__(self, model: LayerStack, optimizer, data, config: LoaderConfig):
        from .captured import CapturedStep
        from .padded_sampler import PaddedNeighborSampler
        if model.mode != "blocks" or model.graph_loops not in (None, SelfLoops.KEEP):
            raise ValueError("captured mini-batch steps need layers on blocks that keep "
                             "self-loops as given (sage)")
        self.model, self.optimizer, self.x, self.y = model, optimizer, data.x, data.y
        self.batch_size = config.batch_size
        self.sampler = PaddedNeighborSampler(data, config.num_neighbors, config.batch_size,
                                             is_sorted=is_sorted_by_destination(data),
                                             seed=config.seed)
        self.step = CapturedStep(model, optimizer, self._loss, volatile=(0, 1))

    def _loss(self, model, seed, valid):
        sample = self.sampler.sample(seed)
        graphs = sample.block_graphs(len(model.convs)) if model.graph_loops is not None else None
        out = model(sample.gather(self.x), sample.edge_index, sample.node_capacity,
                    sample.edge_capacity, graphs)
        labels = torch.where(valid, self.y.index_select(0, seed), -100)
        return F.cross_entropy(sample.seed_rows(out), labels, ignore_index=-100)

    def _batches(self, seeds: torch.Tensor):
        device, size = self.x.device, self.batch_size
        for start in range(0, seeds.numel(), size):
            seed = seeds[start:start + size].to(device, non_blocking=True)
            valid = torch.ones(size, dtype=torch.bool, device=device)
            if seed.numel() < size:  # the last batch: padded with its first seed, not counted
                valid[seed.numel():] = False
                seed = torch.cat([seed, seed[:1].expand(size - seed.numel())])
            yield seed, valid

    def capture(self, seeds: torch.Tensor) -> None:
        """Warms up and captures the step on the first batch of ``seeds``, then undoes the
        updates those steps made (parameters, optimizer state, the sampler's key)."""
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        saved = [p.detach().clone() for p in params]
        key = self.sampler.key.clone()
        seed, valid = next(self._batches(seeds))
        while not self.step.captured:
            self.step(seed, valid)
        with torch.no_grad():
            for p, value in zip(params, saved):
                p.copy_(value)
            for state in self.optimizer.state.values():  # Adam's state starts at zero
                for value in state.values():
                    if isinstance(value, torch.Tensor):
                        value.zero_()
        self.sampler.key.copy_(key)
        self.sampler.check()

    def epoch(self, seeds: torch.Tensor, bar=None) -> EpochTimes:
        """One epoch over ``seeds`` (shuffled by the caller); the device checks are read once,
        at its end."""
        times = EpochTimes()
        device = self.x.device
        _sync(device)
        start = time.perf_counter()
        for seed, valid in self._batches(seeds):
            loss = self.step(seed, valid)
            times.batches += 1
            if bar is not None:
                bar.update()
        _sync(device)
        times.epoch_s = times.compute_s = time.perf_counter() - start
        self.sampler.check()
        if times.batches:
            times.loss = float(loss)
        return times


@torch.no_grad()
def correct_predictions(model, loader, randomness: SamplingRandomness,
                        device: torch.device) -> Tuple[int, int]:
    """(correct, total): the seeds predicted right over every batch of ``loader``, and the
    seeds."""
    model.eval()
    correct = total = 0
    iterator = iter(loader)
    while True:
        try:
            batch = randomness.next(iterator).to(device, non_blocking=True)
        except StopIteration:
            break
        out = seed_output(model, batch, model.block_graphs(batch))
        correct += int((out.argmax(dim=-1) == batch.y[:batch.batch_size]).sum())
        total += batch.batch_size
    return correct, total


def evaluate(model, loader, randomness: SamplingRandomness, device: torch.device) -> float:
    """Accuracy of the seeds' predictions over every batch of ``loader``."""
    correct, total = correct_predictions(model, loader, randomness, device)
    return correct / total if total else 0.0


# ---- a whole run -------------------------------------------------------------------------------
@dataclass
class MiniBatchResult:
    implementation: str
    test_acc: float            # at the best validation epoch
    val_acc: float             # best validation accuracy
    best_epoch: int
    final_loss: float
    epoch_s: float             # the split below: means over the epochs
    sampling_s: float
    transfer_s: float
    compute_s: float
    batches: int               # per epoch
    sampled_edges: int         # per epoch
    peak_memory_mib: float
    batch_digest: str
    epochs: List[Dict[str, float]] = field(default_factory=list)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def eval_seeds(data, max_test: int, seed: int):
    """(validation nodes, test nodes) as index vectors on the graph's device; at most
    ``max_test`` test nodes (0: all), a random subset fixed by ``seed``."""
    val = data.val_mask.nonzero().view(-1)
    test = data.test_mask.nonzero().view(-1)
    if 0 < max_test < test.numel():
        pick = torch.randperm(test.numel(), generator=torch.Generator().manual_seed(seed))
        test = test[pick[:max_test].sort().values.to(test.device)]
    return val, test


def train_minibatch(name: str, model: torch.nn.Module, data, sampler, config: LoaderConfig,
                    epochs: int, lr: float, weight_decay: float, device: torch.device,
                    max_test: int, profile_split: bool = False, progress: bool = True,
                    captured: bool = False):
    """Trains ``model`` for ``epochs`` epochs (``captured``: with :class:`CapturedEpochs`);
    returns ``(MiniBatchResult, memory method)``."""
    from ._progress import progress_bar
    train_seeds = data.train_mask.nonzero().view(-1)
    val_seeds, test_seeds = eval_seeds(data, max_test, config.seed)
    randomness = SamplingRandomness(config.seed)
    train_loader = make_loader(data, sampler, train_seeds, config, True, randomness)
    eval_loaders = [make_loader(data, sampler, s, config, False, randomness)
                    for s in (val_seeds, test_seeds)]
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    warm_up(model, train_loader, train_seeds, device)
    if captured:
        model.train()
        runner = CapturedEpochs(model, optimizer, data, config)
        runner.capture(train_seeds)
    else:
        defer_blocks_on_cuda(model, device, config.num_neighbors)
    torch.manual_seed(config.seed)
    log = TrainingLog()
    with PeakMemory(device) as memory:
        for epoch in range(1, epochs + 1):
            model.train()
            bar = progress_bar(total=len(train_loader), desc=f"{name:>5} epoch {epoch}",
                               unit="batch", enabled=progress)
            if captured:
                order = torch.randperm(train_seeds.numel(), generator=randomness.shuffle)
                times = runner.epoch(train_seeds[order.to(train_seeds.device)], bar)
            else:
                times = run_epoch(model, optimizer, train_loader, randomness, device,
                                  profile_split, bar)
            val, test = (evaluate(model, loader, randomness, device) for loader in eval_loaders)
            log.add(epoch, times, val, test)
            bar.set_postfix(loss=f"{times.loss:.3f}", val=f"{val:.3f}", test=f"{test:.3f}")
            bar.close()
    return log.result(name, memory.mib), memory.method


class TrainingLog:
    """The epochs of a run as the report gives them: each epoch's times, the best validation
    epoch (the earliest on ties) and a digest of every batch's node and edge counts."""

    def __init__(self):
        self.best_val, self.best_test, self.best_epoch = -1.0, 0.0, 0
        self.digest = hashlib.sha1()
        self.epochs: List[EpochTimes] = []

    def add(self, epoch: int, times: EpochTimes, val: float, test: float) -> None:
        if val > self.best_val:
            self.best_val, self.best_test, self.best_epoch = val, test, epoch
        self.digest.update(repr(times.sizes).encode())
        self.epochs.append(times)

    def result(self, name: str, peak_memory_mib: float) -> MiniBatchResult:
        last = self.epochs[-1]
        epochs_json = [{k: v for k, v in asdict(t).items() if k != "sizes"} for t in self.epochs]
        return MiniBatchResult(
            name, self.best_test, self.best_val, self.best_epoch, last.loss,
            *(_mean([getattr(t, k) for t in self.epochs])
              for k in ("epoch_s", "sampling_s", "transfer_s", "compute_s")),
            last.batches, last.sampled_edges, peak_memory_mib, self.digest.hexdigest()[:16],
            epochs_json)


def defer_blocks_on_cuda(model: LayerStack, device: torch.device,
                         fan_outs: Sequence[int]) -> None:
    """On CUDA, builds the blocks that keep self-loops without a host wait (their in-degree
    bounded by the largest fan-out when no hop takes every neighbour)."""
    if device.type == "cuda" and model.graph_loops == SelfLoops.KEEP:
        model.defer_block_builds(device, max(fan_outs) if min(fan_outs, default=0) >= 0 else -1)


def warm_up(model, loader, seeds, device) -> None:
    """An untimed forward + backward on one batch sampled outside the loaders' streams (the
    parameters untouched), so that one-time costs stay out of the first epoch."""
    from torch_geometric.data import Data
    with torch.random.fork_rng(devices=[]):
        out = loader.collate_fn(torch.arange(min(loader.batch_size, seeds.numel())))
        batch = out if isinstance(out, Data) else loader.filter_fn(out)
    model.train()
    seed_loss(model, batch.to(device)).backward()
    model.zero_grad(set_to_none=True)


# ---- devices ------------------------------------------------------------------------------------
def cuda_sampling_available() -> bool:
    """Whether ``torch.ops.iognn.neighbor_sample`` samples a CUDA graph (a 3-node probe)."""
    from . import _C  # noqa: F401
    colptr = torch.tensor([0, 1, 2, 3], device="cuda")
    row = torch.tensor([1, 2, 0], device="cuda")
    try:
        torch.ops.iognn.neighbor_sample(colptr, row, torch.tensor([0], device="cuda"), [1],
                                        False, False, 0, None, None, None, None, "uniform")
    except (NotImplementedError, RuntimeError):
        return False
    return True


def graph_bytes(data) -> int:
    """Bytes of the graph's tensors, plus the sampler's CSC copy of the sources."""
    tensors = [v for v in data.to_dict().values() if isinstance(v, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors) + data.edge_index[0].numel() * 8


def pick_graph_device(requested: str, model_device: torch.device, data) -> torch.device:
    """Where the graph lives: ``cpu``, ``cuda`` (the model's device), or ``auto``: the model's
    CUDA device when the sampler samples there and the graph takes at most half its free
    memory, else the host."""
    if requested == "cpu" or (requested == "auto" and model_device.type != "cuda"):
        return torch.device("cpu")
    if model_device.type != "cuda":
        raise SystemExit("iognn train: --graph-device cuda needs the model on CUDA "
                         "(--device cuda or auto with a GPU)")
    if not cuda_sampling_available():
        if requested == "cuda":
            raise SystemExit("iognn train: --graph-device cuda requested but this iognn build "
                             "does not sample on CUDA")
        print("notice: this iognn build does not sample on CUDA; the graph stays on the host",
              file=sys.stderr)
        return torch.device("cpu")
    free, _ = torch.cuda.mem_get_info(model_device)
    if requested == "auto" and graph_bytes(data) > free // 2:
        print(f"notice: the graph ({graph_bytes(data) / 2**30:.1f} GiB) takes more than half of "
              f"the free GPU memory; it stays on the host", file=sys.stderr)
        return torch.device("cpu")
    return model_device


# ---- the command -------------------------------------------------------------------------------
TIME_NOTE = ("epoch s: wall time of a training epoch (sampling, transfer, forward, backward, "
             "Adam; not evaluation), mean over the epochs after an untimed warm-up batch")


@dataclass
class PreparedRun:
    """What every mini-batch run of ``iognn train`` starts from: the graph where the sampler
    samples it, the loaders' settings, and the model's shape."""
    args: object
    data: object
    device: torch.device         # the model's
    graph_device: torch.device
    config: LoaderConfig
    num_classes: int

    def build_stack(self, model, layers, in_channels, hidden, classes, **kwargs) -> LayerStack:
        """:func:`build_stack` with one layer per hop (``build`` of :func:`build_models`)."""
        return build_stack(model, layers, in_channels, hidden, classes,
                           len(self.args.num_neighbors), trim=not self.args.no_trim, **kwargs)

    def describe(self) -> str:
        args, data = self.args, self.data
        return (f"{args.model} x{len(args.num_neighbors)} on {args.dataset}: {data.num_nodes} "
                f"nodes, {data.num_edges} edges, {data.num_features} features, "
                f"{self.num_classes} classes; graph on {self.graph_device}, model on "
                f"{self.device}; fan-out {args.num_neighbors}, batch {args.batch_size}, "
                f"{args.epochs} epochs")

    def report(self, results: Sequence[MiniBatchResult], memory_metric: str,
               time_metric: str = TIME_NOTE) -> dict:
        """The report (the ``--json`` file) of ``results``."""
        config = report_config(self.args)
        config.update(device=str(self.device), graph_device=str(self.graph_device))
        return {"config": config, "time_metric": time_metric,
                "split_metric": SPLIT_SYNCED if self.args.profile_split else SPLIT_EPOCH,
                "memory_metric": memory_metric + " (MiB)", "num_nodes": self.data.num_nodes,
                "num_edges": self.data.num_edges, "results": [asdict(r) for r in results]}


def prepare_run(args, data, device: torch.device) -> PreparedRun:
    """Places ``data`` (``--graph-device``) and settles the loaders' options for a model on
    ``device``."""
    num_classes = int(data.y.max()) + 1
    graph_device = pick_graph_device(args.graph_device, device, data)
    data = data.to(graph_device)
    workers = args.num_workers
    if workers and graph_device.type == "cuda":
        print("notice: --num-workers is for a graph on the host; the loader samples the GPU's "
              "graph in the main process", file=sys.stderr)
        workers = 0
    config = LoaderConfig(args.num_neighbors, args.batch_size, workers,
                          pin_memory=graph_device.type == "cpu" and device.type == "cuda",
                          seed=args.seed)
    return PreparedRun(args, data, device, graph_device, config, num_classes)


def run_minibatch_training(args) -> dict:
    """``iognn train --loader neighbor``: loads the data, trains every implementation on the
    same batches and returns the report (the ``--json`` file)."""
    from .datasets import load_dataset
    data = load_dataset(args.dataset, args.data_dir)
    device = pick_device(args.device, args.model, args.heads)
    run = prepare_run(args, data, device)
    data, graph_device, config = run.data, run.graph_device, run.config
    captured = (device.type == "cuda" and graph_device == device and not args.no_capture
                and args.model in CAPTURED_MODELS and not args.no_trim
                and min(args.num_neighbors, default=0) >= 0)
    if device.type == "cuda" and not args.no_capture and not captured:
        print(f"notice: no captured row (it needs the graph on the model's GPU, fan-outs >= 0 "
              f"and --model {' or '.join(CAPTURED_MODELS)} on blocks)", file=sys.stderr)
    models = build_models(args, data.num_features, run.num_classes, captured,
                          build=run.build_stack)
    sampler = make_sampler(data, args.num_neighbors)
    print(run.describe(), file=sys.stderr)
    results, memory_metric = [], None
    for name, model in models.items():
        result, memory_metric = train_minibatch(
            name, model.to(device), data, sampler, config, args.epochs, args.lr,
            args.weight_decay, device, args.eval_test_nodes, args.profile_split,
            progress=not args.no_progress, captured=name == CAPTURED)
        results.append(result)
    return run.report(results, memory_metric)


def format_table(report: dict) -> str:
    header = ("implementation", "test acc %", "val acc %", "best epoch", "epoch s", "sampling s",
              "transfer s", "compute s", "batches", "peak MiB")
    rows = [(r["implementation"], f"{100 * r['test_acc']:.2f}", f"{100 * r['val_acc']:.2f}",
             str(r["best_epoch"]), f"{r['epoch_s']:.3f}", f"{r['sampling_s']:.3f}",
             f"{r['transfer_s']:.3f}", f"{r['compute_s']:.3f}", str(r["batches"]),
             f"{r['peak_memory_mib']:.1f}") for r in report["results"]]
    loaded = [r for r in report["results"] if r["implementation"] != CAPTURED]
    same = len({r["batch_digest"] for r in loaded}) == 1
    notes = [report["time_metric"], f"split: {report['split_metric']}",
             f"peak MiB: {report['memory_metric']}",
             "accuracy: seeds' predictions over sampled neighbourhoods of the same fan-out "
             "(validation nodes; test nodes at the best validation epoch)"]
    if len(loaded) > 1:
        notes.append("batches: " + ("the same for every implementation" if same else
                                    "DIFFERENT between implementations"))
    if len(loaded) < len(report["results"]):
        notes.append(f"{CAPTURED}: padded batches of its own sampler, one replayed CUDA graph per "
                     f"step (no split: sampling, gather and compute in one replay)")
    if "world_size" in report:
        notes.append(f"processes: {report['world_size']} (DistributedDataParallel), "
                     f"{report['batches_per_rank'][0]} batches each per epoch")
    return text_table(header, rows, notes)
