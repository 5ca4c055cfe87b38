"""Runs a test function on several local processes joined in a torch.distributed group.

``run_ranks(fn, world_size, *args)`` spawns ``world_size`` processes; each initialises the group
(gloo on the CPU, or NCCL with one visible GPU per rank), calls ``fn(rank, world_size, *args)``
and sends back its result (anything picklable; tensors are moved to the CPU). A rank that raises
fails the test with its traceback; a rank that does not answer within ``timeout`` seconds too.
"""
from __future__ import annotations

import io
import os
import queue
import tempfile
import traceback
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

def _world_and_backend(world_size: int, backend: str):
    if backend == "gloo":
        return pytest.param(world_size, backend)
    return pytest.param(world_size, backend, marks=[pytest.mark.cuda, pytest.mark.skipif(
        torch.cuda.device_count() < world_size,
        reason=f"needs {world_size} GPUs, {torch.cuda.device_count()} visible")])


# (world size, backend) cases: gloo on the CPU (CI) and NCCL on as many GPUs (marked cuda)
WORLDS_AND_BACKENDS = [_world_and_backend(w, b) for b in ("gloo", "nccl") for w in (2, 4)]


def rank_device(backend: str, rank: int) -> torch.device:
    """The device a rank's tensors live on for ``backend``."""
    return torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")


def _pack(value) -> bytes:
    """Results travel as bytes: a tensor put on the queue as such would be shared through the
    sending process's memory, which is gone once that rank exits."""
    buffer = io.BytesIO()
    torch.save(_to_cpu(value), buffer)
    return buffer.getvalue()


def _to_cpu(value):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_cpu(v) for v in value)
    return value


def _rank_main(rank, world_size, backend, store, fn, args, results, timeout):
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    try:
        if backend == "nccl":
            torch.cuda.set_device(rank)
        dist.init_process_group(backend, init_method=f"file://{store}", rank=rank,
                                world_size=world_size, timeout=timedelta(seconds=timeout))
        try:
            results.put((rank, True, _pack(fn(rank, world_size, *args))))
        finally:
            dist.destroy_process_group()
    except BaseException:  # noqa: BLE001  (every failure goes back to the test)
        results.put((rank, False, traceback.format_exc()))


def run_ranks(fn, world_size: int, *args, backend: str = "gloo", timeout: float = 60.0) -> list:
    """``[fn(0, world_size, *args), ..., fn(world_size - 1, ...)]`` run on one process each."""
    outcomes = rank_outcomes(fn, world_size, *args, backend=backend, timeout=timeout)
    failed = {r: v for r, (ok, v) in enumerate(outcomes) if not ok}
    if failed:
        raise AssertionError("\n".join(f"rank {r} raised:\n{v}" for r, v in sorted(failed.items())))
    return [value for _, value in outcomes]


def rank_outcomes(fn, world_size: int, *args, backend: str = "gloo",
                  timeout: float = 60.0) -> list:
    """``(True, result)`` or ``(False, traceback text)`` of every rank of ``run_ranks``."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as folder:
        store = os.path.join(folder, "store")
        procs = [ctx.Process(target=_rank_main, args=(rank, world_size, backend, store, fn, args,
                                                      results, timeout))
                 for rank in range(world_size)]
        for p in procs:
            p.start()
        answers = {}
        try:
            for _ in range(world_size):
                rank, ok, value = results.get(timeout=timeout + 60)
                answers[rank] = (ok, value)
        except queue.Empty:
            raise AssertionError(f"ranks {sorted(set(range(world_size)) - set(answers))} did not "
                                 f"answer within {timeout + 60:.0f} s") from None
        finally:
            for p in procs:
                p.join(timeout=30)
                if p.is_alive():
                    p.kill()
    return [(ok, torch.load(io.BytesIO(value), weights_only=False) if ok else value)
            for ok, value in (answers[r] for r in range(world_size))]
