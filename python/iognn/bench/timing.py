"""Median step times and peak memory of one implementation.

A *step* is a forward on one of several input sets, taken in rotation so that consecutive steps do
not find their inputs in cache, and (mode 'fwdbwd') a backward with a fixed random output gradient.
Gradients are reset to None before every step (outside the timed region), as an optimizer's
``zero_grad(set_to_none=True)`` would. On CUDA each step is timed with three events (before the
forward, between forward and backward, after the backward) and the events are read once after the
loop, so no host synchronisation falls inside the measured region; on CPU ``time.perf_counter``.
Reported: the median forward, backward and whole-step (forward + backward) times.

Peak memory (CUDA only; None on CPU) is measured on the last warm-up step: the allocator's peak
during that step minus what was allocated before it (graph, inputs, parameters, cached state), so
it counts the activations, outputs and gradients of the step.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import List, Optional, Sequence

import torch
from torch import Tensor

MIB = float(1 << 20)
MIN_REPEATS = 3


@dataclass
class Measurement:
    fwd_ms: Optional[float]
    bwd_ms: Optional[float]
    fwdbwd_ms: Optional[float]
    iterations: int
    peak_mib: Optional[float]


class Step:
    """fn(*inputs) on input set k (rotating), then optionally ``out.backward(grad)``."""

    def __init__(self, fn, input_sets: Sequence[Sequence[Tensor]], grad: Optional[Tensor],
                 params: Sequence[Tensor] = ()):
        self.fn = fn
        self.input_sets = input_sets
        self.grad = grad
        self.leaves = [t for inputs in input_sets for t in inputs if t.requires_grad] + list(params)

    @property
    def backward_enabled(self) -> bool:
        return self.grad is not None

    def reset(self) -> None:
        for t in self.leaves:
            t.grad = None

    def forward(self, k: int) -> Tensor:
        inputs = self.input_sets[k % len(self.input_sets)]
        with torch.set_grad_enabled(self.backward_enabled):
            return self.fn(*inputs)

    def backward(self, out: Tensor) -> None:
        out.backward(self.grad)

    def run(self, k: int) -> None:
        out = self.forward(k)
        if self.backward_enabled:
            self.backward(out)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(step: Step, device: torch.device, warmup: int, repeats: int,
            budget_s: float) -> Measurement:
    """Warm up (``warmup`` >= 1 steps, the last one measuring peak memory and the step's wall
    time), then time up to ``repeats`` steps: as many as fit in ``budget_s`` seconds, at least
    ``min(3, repeats)``."""
    cuda = device.type == "cuda"
    warmup = max(1, warmup)
    for k in range(warmup - 1):
        step.reset()
        step.run(k)
    step.reset()
    synchronize(device)
    if cuda:
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    step.run(warmup - 1)
    synchronize(device)
    wall = time.perf_counter() - start
    peak = (torch.cuda.max_memory_allocated(device) - base) / MIB if cuda else None

    count = min(repeats, max(int(budget_s / max(wall, 1e-9)), MIN_REPEATS))
    fwd, bwd = (_time_cuda if cuda else _time_cpu)(step, count)
    backward = step.backward_enabled
    return Measurement(
        fwd_ms=statistics.median(fwd),
        bwd_ms=statistics.median(bwd) if backward else None,
        fwdbwd_ms=statistics.median([f + b for f, b in zip(fwd, bwd)]) if backward else None,
        iterations=count, peak_mib=peak)


def _time_cuda(step: Step, count: int):
    marks = [[torch.cuda.Event(enable_timing=True) for _ in range(3)] for _ in range(count)]
    for k, (e0, e1, e2) in enumerate(marks):
        step.reset()
        e0.record()
        out = step.forward(k)
        e1.record()
        if step.backward_enabled:
            step.backward(out)
        e2.record()
        del out
    torch.cuda.synchronize()
    fwd = [e0.elapsed_time(e1) for e0, e1, _ in marks]
    bwd = [e1.elapsed_time(e2) for _, e1, e2 in marks]
    return fwd, bwd


def _time_cpu(step: Step, count: int):
    fwd: List[float] = []
    bwd: List[float] = []
    for k in range(count):
        step.reset()
        t0 = time.perf_counter()
        out = step.forward(k)
        t1 = time.perf_counter()
        if step.backward_enabled:
            step.backward(out)
        t2 = time.perf_counter()
        del out
        fwd.append((t1 - t0) * 1e3)
        bwd.append((t2 - t1) * 1e3)
    return fwd, bwd
