"""``iognn train --nproc N``: training on N processes (one GPU each, or CPU processes on gloo).

Outside ``torchrun`` (no ``WORLD_SIZE`` in the environment) the command starts itself again
through ``python -m torch.distributed.run --standalone --nproc_per_node N`` (without ``--nproc``,
which torchrun's own parser would take for an abbreviation of its ``--nproc-per-node``: inside
torchrun ``iognn train`` always trains on the ranks torchrun started); inside, each process
joins the process group (NCCL with the GPU of its ``LOCAL_RANK``, or gloo on the CPU; collectives
time out after ``--dist-timeout`` seconds), trains (``--loader full``:
:func:`iognn.distributed.full_graph.train_full_graph`; ``--loader neighbor``:
:func:`iognn.distributed.minibatch.train_minibatch`) and rank 0 prints the report.

A failing rank never leaves the others waiting: torchrun's agent stops every worker when one
exits with an error, the ranks meet at a monitored barrier (gloo: it names the ranks that did not
arrive) once the data is loaded and partitioned, and every collective gives up after the timeout.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from datetime import timedelta
from typing import List, Sequence

import torch
import torch.distributed as dist

# NVLink multicast (NVLS) stays off in every process started here: the GPU machines need it off.
CHILD_ENVIRONMENT = {"NCCL_NVLS_ENABLE": "0"}


def in_torchrun() -> bool:
    """Whether this process was started by torchrun (or another launcher setting WORLD_SIZE)."""
    return "WORLD_SIZE" in os.environ


def command_line(parser: argparse.ArgumentParser, args: argparse.Namespace) -> List[str]:
    """The options of ``args`` as ``iognn train`` arguments (those that differ from the
    parser's defaults, ``--nproc`` left out), for the processes torchrun starts."""
    argv: List[str] = []
    for action in parser._actions:
        if not action.option_strings or action.dest in ("help", "nproc"):
            continue
        value = getattr(args, action.dest, None)
        if value is None or value == action.default:
            continue
        option = action.option_strings[-1]
        if isinstance(action, argparse.BooleanOptionalAction):  # --x / --no-x
            argv.append(action.option_strings[0 if value else 1])
        elif action.nargs == 0:  # a flag
            argv.append(option)
        else:
            argv += [option, ",".join(map(str, value)) if isinstance(value, list) else str(value)]
    return argv


def relaunch(args: argparse.Namespace) -> int:
    """Runs ``iognn train`` with the same options on ``args.nproc`` processes through torchrun;
    returns its exit status."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node", str(args.nproc), "-m", "iognn", "train",
               *command_line(args.argument_parser, args)]
    print("iognn train: starting " + " ".join(command[1:]), file=sys.stderr)
    return subprocess.call(command, env={**os.environ, **CHILD_ENVIRONMENT})


def rank_device(args: argparse.Namespace) -> torch.device:
    """This process's device: the GPU of its LOCAL_RANK, or the CPU (``--device cpu``, or no
    GPU with ``--device auto``)."""
    if args.device == "cpu" or (args.device == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise SystemExit("iognn train: --device cuda requested but no CUDA device is available")
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if local_rank >= torch.cuda.device_count():
        raise SystemExit(f"iognn train: local rank {local_rank} has no GPU (only "
                         f"{torch.cuda.device_count()} visible); use --nproc "
                         f"{torch.cuda.device_count()} or --device cpu")
    return torch.device("cuda", local_rank)


def init_group(args: argparse.Namespace) -> torch.device:
    """Joins the default process group (NCCL for a GPU, gloo for the CPU) with the
    ``--dist-timeout``; returns this rank's device."""
    for name, value in CHILD_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    device = rank_device(args)
    timeout = timedelta(seconds=args.dist_timeout)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", timeout=timeout, device_id=device)
    else:
        dist.init_process_group("gloo", timeout=timeout)
    return device


def all_reduce_values(values: Sequence[float], op, device: torch.device) -> List[float]:
    """``values`` reduced over the ranks with ``op`` in one all-reduce (float64; on ``device``
    under NCCL, on the host under gloo)."""
    on = device if dist.get_backend() == "nccl" else torch.device("cpu")
    tensor = torch.tensor([float(v) for v in values], dtype=torch.float64, device=on)
    dist.all_reduce(tensor, op)
    return tensor.tolist()


def ranks_ready(timeout_s: float, group=None) -> None:
    """Waits until every rank arrives here; raises RuntimeError when a rank has failed (its
    connection closed) or has not arrived within ``timeout_s`` seconds (gloo names it)."""
    try:
        if dist.get_backend(group) == "gloo":
            dist.monitored_barrier(group, timeout=timedelta(seconds=timeout_s),
                                   wait_all_ranks=True)
        else:
            dist.barrier(group)
    except RuntimeError as error:
        raise RuntimeError(f"iognn: rank {dist.get_rank(group)} stopped waiting for the other "
                           f"ranks: another rank failed or did not arrive within {timeout_s} s "
                           f"(its own error says why): {error}") from error


def train_on_ranks(args: argparse.Namespace) -> dict:
    """Inside torchrun: joins the group, trains with ``--loader``'s mode and leaves the group;
    returns the report."""
    world = int(os.environ["WORLD_SIZE"])
    if args.nproc is not None and world != args.nproc:
        raise SystemExit(f"iognn train: --nproc {args.nproc} but torchrun started {world} "
                         f"processes")
    init_group(args)
    try:
        if args.loader == "neighbor":
            from .minibatch import train_minibatch
            return train_minibatch(args)
        from .full_graph import train_full_graph
        return train_full_graph(args)
    finally:
        dist.destroy_process_group()


def launch(args: argparse.Namespace):
    """``iognn train --nproc N`` (or ``iognn train`` inside torchrun): the report on rank 0 (None
    on the other ranks and in the process that started torchrun); raises SystemExit when torchrun
    reports a failure."""
    if not in_torchrun():
        status = relaunch(args)
        if status:
            raise SystemExit(f"iognn train: the {args.nproc} training processes failed "
                             f"(exit status {status}; their errors are above)")
        return None
    report = train_on_ranks(args)
    return report if int(os.environ.get("RANK", 0)) == 0 else None
