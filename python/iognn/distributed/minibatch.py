"""``iognn train --nproc N --loader neighbor``: data-parallel mini-batch training.

The one-process job of :mod:`iognn.minibatch` run by every rank of an initialised process group,
with its model wrapped in ``torch.nn.parallel.DistributedDataParallel`` (gradients averaged over
the ranks during ``backward``):

- **Graph and sampler**: every rank loads the whole graph onto its device (``--graph-device`` as
  in one process; on CUDA, the GPU of its local rank) and samples its own batches with its own
  iognn sampler, whose draws are seeded by ``(--seed, rank)`` (:func:`rank_seed`).
- **Shards**: each epoch one permutation of the training nodes, the same on every rank (seeded by
  ``--seed`` and the epoch), is cut into ``world_size`` shards of ``floor(n / world_size)`` seeds
  (``DistributedSampler`` with ``drop_last``: the remainder, a different few nodes each epoch, is
  left out), so that every rank runs the same number of batches: a rank with one batch more would
  wait forever in that batch's gradient all-reduce.
- **Evaluation**: each rank predicts its contiguous share of the validation and test nodes; the
  correct counts are summed over the ranks, so the accuracies are those of all the nodes.
- **Report**: rank 0's has the keys of the one-process report, one result row; its epoch times
  are the slowest rank's, its sampled node and edge counts the sum over the ranks, its batch
  digest covers every rank's batches; plus ``world_size``, ``batches_per_rank`` and
  ``epoch_times_s``.
- The captured step (:class:`iognn.minibatch.CapturedEpochs`) is not used: DDP's all-reduce runs
  from autograd hooks outside a captured graph. ``--compare`` trains no second model either.

Ranks that loaded different graphs or would run different numbers of batches stop with the same
error on every rank before the first step.
"""
from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import replace
from typing import List, Tuple

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data.distributed import DistributedSampler

from ..minibatch import (TIME_NOTE, EpochTimes, LoaderConfig, PreparedRun, SamplingRandomness,
                         TrainingLog, correct_predictions, defer_blocks_on_cuda, eval_seeds,
                         make_loader, make_sampler, prepare_run, run_epoch, warm_up)
from ..train import PeakMemory, implementation_layers, pick_device
from .launch import all_reduce_values

__all__ = ["train_minibatch"]

IMPLEMENTATION = "iognn"
DDP_TIME_NOTE = (TIME_NOTE + "; the slowest rank's, each rank running DistributedDataParallel "
                 "eager steps (no captured step)")


# ---- what each rank draws ------------------------------------------------------------------------
def rank_seed(seed: int, rank: int) -> int:
    """The seed of rank ``rank``'s sampling draws: a hash of both, so that no two ranks share a
    stream (for any two seeds)."""
    digest = hashlib.sha256(f"iognn minibatch rank {seed} {rank}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def shard_sampler(num_seeds: int, rank: int, world_size: int, seed: int) -> DistributedSampler:
    """Positions in the training nodes that rank ``rank`` trains on each epoch (call its
    ``set_epoch`` before the epoch): equal shards of one shared permutation, remainder dropped."""
    if num_seeds < world_size:
        raise ValueError(f"iognn train --nproc: {num_seeds} training nodes cannot be shared out "
                         f"over {world_size} processes (each needs at least one)")
    return DistributedSampler(range(num_seeds), num_replicas=world_size, rank=rank, shuffle=True,
                              seed=seed, drop_last=True)


def rank_loaders(data, sampler, config: LoaderConfig, rank: int, world_size: int,
                 max_test: int):
    """``(randomness, train loader, [validation loader, test loader])`` of rank ``rank``: its
    shards of the training nodes (:func:`shard_sampler`) and of the evaluation nodes, sampled
    with draws seeded by :func:`rank_seed`."""
    randomness = SamplingRandomness(rank_seed(config.seed, rank))
    train_seeds = data.train_mask.nonzero().view(-1)
    shards = shard_sampler(train_seeds.numel(), rank, world_size, config.seed)
    train = make_loader(data, sampler, train_seeds, config, False, randomness, shards)
    evaluation = [make_loader(data, sampler, seeds.tensor_split(world_size)[rank], config, False,
                              randomness)
                  for seeds in eval_seeds(data, max_test, config.seed)]
    return randomness, train, evaluation


def require_agreement(quantities: dict, device: torch.device) -> None:
    """Raises the same error on every rank when the ranks' ``quantities`` (numbers) differ."""
    values = list(quantities.values())
    low = all_reduce_values(values, dist.ReduceOp.MIN, device)
    high = all_reduce_values(values, dist.ReduceOp.MAX, device)
    differ = [f"{name} ({int(a)} to {int(b)})"
              for name, a, b in zip(quantities, low, high) if a != b]
    if differ:
        raise RuntimeError("iognn train --nproc: the processes disagree on " + ", ".join(differ)
                           + "; every rank must load the same graph with the same options")


def global_accuracy(model, loaders, randomness: SamplingRandomness,
                    device: torch.device) -> List[float]:
    """Accuracy over every rank's share of each loader's nodes."""
    counts = [n for loader in loaders
              for n in correct_predictions(model, loader, randomness, device)]
    totals = all_reduce_values(counts, dist.ReduceOp.SUM, device)
    return [c / t if t else 0.0 for c, t in zip(totals[0::2], totals[1::2])]


def combine_ranks(times: EpochTimes) -> Tuple[EpochTimes, List[int]]:
    """One epoch as the report gives it (module note) and every rank's batch count."""
    every: List[EpochTimes] = [None] * dist.get_world_size()
    dist.all_gather_object(every, times)
    slowest = {k: max(getattr(t, k) for t in every)
               for k in ("epoch_s", "sampling_s", "transfer_s", "compute_s")}
    losses = [t.loss for t in every]
    return replace(times, **slowest,
                   sampled_nodes=sum(t.sampled_nodes for t in every),
                   sampled_edges=sum(t.sampled_edges for t in every),
                   sizes=[n for t in every for n in t.sizes],
                   loss=sum(losses) / len(losses)), [t.batches for t in every]


# ---- a whole run -------------------------------------------------------------------------------
def rank_device(args) -> torch.device:
    """The model's device on this rank: ``--device`` as in one process, and on CUDA the GPU of
    the local rank (``LOCAL_RANK``, else the current device)."""
    if args.device != "cpu" and torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", torch.cuda.current_device())))
    device = pick_device(args.device, args.model, args.heads)
    if device.type == "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    if dist.get_backend() == "nccl":
        raise RuntimeError("iognn train --nproc: the process group uses NCCL but the model is on "
                           "the CPU; use --device cuda or a gloo process group")
    return device


def train_minibatch(args) -> dict:
    """Data-parallel ``iognn train --loader neighbor`` on the initialised process group (module
    note); returns the report, the same on every rank."""
    return train_minibatch_model(args)[0]


def train_minibatch_model(args) -> Tuple[dict, torch.nn.Module]:
    """:func:`train_minibatch`'s report and the trained model (a ``LayerStack``)."""
    from .._progress import progress_bar
    from ..datasets import load_dataset
    rank, world_size = dist.get_rank(), dist.get_world_size()
    data = load_dataset(args.dataset, args.data_dir)
    device = rank_device(args)
    run = prepare_run(args, data, device)
    if rank == 0:
        if args.compare:
            print(f"notice: --compare {args.compare} is not trained with several processes",
                  file=sys.stderr)
        print(f"{run.describe()}; {world_size} processes", file=sys.stderr)
    stack = _build(run)
    sampler = make_sampler(run.data, args.num_neighbors)
    randomness, train_loader, eval_loaders = rank_loaders(
        run.data, sampler, run.config, rank, world_size, args.eval_test_nodes)
    require_agreement({"nodes": run.data.num_nodes, "edges": run.data.num_edges,
                       "training nodes": len(train_loader.dataset),
                       "batches per epoch": len(train_loader)}, device)
    warm_up(stack, train_loader, run.data.train_mask.nonzero().view(-1), device)
    defer_blocks_on_cuda(stack, device, run.config.num_neighbors)
    model = DistributedDataParallel(stack, device_ids=[device.index] if device.index is not None
                                    else None)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    torch.manual_seed(rank_seed(args.seed, rank))  # dropout: each rank its own masks
    log, batches_per_rank = TrainingLog(), []
    with PeakMemory(device) as memory:
        for epoch in range(1, args.epochs + 1):
            train_loader.sampler.set_epoch(epoch)
            model.train()
            bar = progress_bar(total=len(train_loader), desc=f"ddp x{world_size} epoch {epoch}",
                               unit="batch", enabled=rank == 0 and not args.no_progress)
            times, batches_per_rank = combine_ranks(
                run_epoch(model, optimizer, train_loader, randomness, device, args.profile_split,
                          bar))
            val, test = global_accuracy(stack, eval_loaders, randomness, device)
            log.add(epoch, times, val, test)
            bar.set_postfix(loss=f"{times.loss:.3f}", val=f"{val:.3f}", test=f"{test:.3f}")
            bar.close()
    (peak_mib,) = all_reduce_values([memory.mib], dist.ReduceOp.MAX, device)
    report = run.report([log.result(IMPLEMENTATION, peak_mib)],
                        memory.method + ", the largest over the ranks", DDP_TIME_NOTE)
    # Each rank has its own GPU (cuda:<local rank>): the report, the same on every rank, names
    # the device type.
    report["config"].update(device=device.type, graph_device=run.graph_device.type)
    report.update(world_size=world_size, batches_per_rank=batches_per_rank,
                  epoch_times_s=[t.epoch_s for t in log.epochs])
    return report, stack


def _build(run: PreparedRun) -> torch.nn.Module:
    """The iognn model, from ``--seed`` (the same initial weights on every rank)."""
    args = run.args
    torch.manual_seed(args.seed)
    return run.build_stack(args.model, implementation_layers(IMPLEMENTATION),
                           run.data.num_features, args.hidden, run.num_classes, heads=args.heads,
                           dropout=args.dropout, attn_dropout=args.attn_dropout).to(run.device)
