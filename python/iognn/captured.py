"""``CapturedStep``: a whole training step captured in a CUDA graph and replayed.

On small and mid-size graphs a training step is a few hundred short kernels, and the host work of
launching them (Python, autograd, the dispatcher) takes longer than the kernels. Replaying a CUDA
graph of the step launches all of them with one call. iognn's ops are capturable: their row
schedules are planned on the device within each call, the Graphs of a step's adjacencies are cached
after a warm-up step, and nothing inside a step synchronises with the host.

Usage (a full-graph training loop; ``loss_fn`` receives the model and the step's arguments)::

    def loss_fn(model, x, edge_index, y, train_idx):
        return F.cross_entropy(model(x, edge_index)[train_idx], y[train_idx])

    train_idx = data.train_mask.nonzero().view(-1)  # once: indexing by a mask synchronises
    step = iognn.CapturedStep(model, optimizer, loss_fn)
    for epoch in range(epochs):
        loss = step(data.x, data.edge_index, data.y, train_idx)

Each call is one training step: ``optimizer.zero_grad(set_to_none=True)``, ``loss_fn(...)``,
``loss.backward()``, ``optimizer.step()``. The first ``warmup`` calls run eagerly (on a side
stream, as CUDA graph capture requires); the next one captures the step and replays it, and every
later call replays it. Outputs, gradients and parameters equal eager training bit for bit.

Rules of the replay, checked where they can be:

- Nothing in ``loss_fn`` may synchronise with the host: no ``.item()``, no indexing by a boolean
  mask (its result size is read back; index by ``mask.nonzero()`` computed once instead). A
  capture that fails raises RuntimeError naming these causes; where CUDA invalidated the capture,
  PyTorch's CUDA random generator stays unusable for captures in that process (restart it).
- The step's arguments are copied into the tensors of the capture when they are other objects
  with the same shape and dtype (new features, a new label vector); integer and boolean tensors
  (graph structure, labels, masks) must be the very objects of the capture or hold the same
  values, since a cached graph is derived from them; anything else is a ValueError. Non-tensor
  arguments must be equal to the captured ones. The positions named in ``volatile`` are copied in
  whatever their dtype: integer arguments that change every step and from which nothing cached
  is derived (the seeds of a sampled mini-batch whose blocks the step itself builds:
  :mod:`iognn.padded_sampler`).
- The returned loss is the capture's own tensor: read it (``float(loss)``) before the next call.
- Everything cached that the capture reads (the Graphs and normalisations of its adjacencies) is
  kept alive and out of the caches' eviction for as long as the step lives.
- Optimizers with a ``capturable`` option (Adam, AdamW, ...) are switched to ``capturable=True``
  before the first step; learning-rate changes after capture need the scheduler's capturable form
  or a new CapturedStep.
- Attention dropout inside a captured step raises (one mask would be replayed); feature dropout
  (``torch.nn.functional.dropout``) is capturable and draws fresh masks on every replay.
- On the CPU, or with ``enabled=False``, every call runs the eager step.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence

import torch
from torch import Tensor

from .nn import _graph as _graph_cache


class CapturedStep:
    """A training step (forward, loss, backward, optimizer step) captured in a CUDA graph.

    Args:
        model: the module being trained (its train / eval mode is the caller's business).
        optimizer: a ``torch.optim`` optimizer over the model's parameters.
        loss_fn: ``loss_fn(model, *args) -> loss`` (a scalar tensor), traceable without host
            synchronisation (no ``.item()``, no data-dependent Python branches).
        warmup: eager steps before the capture (at least 1: they build the graphs and optimizer
            state the capture then reuses).
        enabled: capture at all (default: when the parameters are on a CUDA device).
        volatile: positions of tensor arguments copied into the capture on every call whatever
            their dtype (see the rules above).
    """

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                 loss_fn: Callable[..., Tensor], warmup: int = 2, enabled: Optional[bool] = None,
                 volatile: Sequence[int] = ()):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"CapturedStep: model must be a torch.nn.Module, got "
                            f"{type(model).__name__}")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"CapturedStep: optimizer must be a torch.optim.Optimizer, got "
                            f"{type(optimizer).__name__}")
        if not callable(loss_fn):
            raise TypeError("CapturedStep: loss_fn must be callable as loss_fn(model, *args)")
        if not isinstance(warmup, int) or isinstance(warmup, bool) or warmup < 1:
            raise ValueError(f"CapturedStep: warmup must be an int >= 1, got {warmup!r}")
        self.model, self.optimizer, self.loss_fn, self.warmup = model, optimizer, loss_fn, warmup
        if any(not isinstance(i, int) or isinstance(i, bool) or i < 0 for i in volatile):
            raise ValueError(f"CapturedStep: volatile must list argument positions (ints >= 0), "
                             f"got {list(volatile)!r}")
        self.volatile = frozenset(volatile)
        params = [p for group in optimizer.param_groups for p in group["params"]]
        on_cuda = bool(params) and all(p.is_cuda for p in params)
        self.enabled = on_cuda if enabled is None else bool(enabled)
        if self.enabled and not on_cuda:
            raise ValueError("CapturedStep: capture needs every optimised parameter on a CUDA "
                             "device")
        if self.enabled and "capturable" in optimizer.defaults:
            for group in optimizer.param_groups:
                group["capturable"] = True
        self.steps = 0
        self.graph: Optional[torch.cuda.CUDAGraph] = None
        self._static: List[Any] = []
        self._loss: Optional[Tensor] = None
        self._pinned: List[Any] = []  # the cached graphs the capture reads: alive while it replays

    @property
    def captured(self) -> bool:
        """Whether the step has been captured (the calls from now on replay it)."""
        return self.graph is not None

    def _eager(self, *args) -> Tensor:
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.model, *args)
        _check_loss(loss)
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    def __call__(self, *args) -> Tensor:
        self.steps += 1
        if not self.enabled:
            return self._eager(*args)
        if self.graph is not None:
            self._load(args)
            self.graph.replay()
            return self._loss
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            if self.steps <= self.warmup:
                loss = self._eager(*args)
            else:
                loss = self._capture(args)
        torch.cuda.current_stream().wait_stream(side)
        return loss

    def _capture(self, args) -> Tensor:
        self._static = list(args)
        self.optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        failure: Optional[BaseException] = None
        _graph_cache.capture_pins = pins = []
        try:
            with torch.cuda.graph(graph):
                try:
                    loss = self.loss_fn(self.model, *self._static)
                    _check_loss(loss)
                    loss.backward()
                    self.optimizer.step()
                except Exception as error:  # noqa: BLE001 - reported once the capture has ended
                    failure = error
        except (RuntimeError, torch.AcceleratorError) as error:  # the capture itself broke
            failure = failure or error
        finally:
            _graph_cache.capture_pins = None
        self._pinned = pins
        if failure is not None:
            raise RuntimeError(
                f"CapturedStep: the training step could not be captured in a CUDA graph "
                f"({type(failure).__name__}: {failure}). Usual causes: a host synchronisation "
                f"inside the step (.item(), printing a tensor, indexing by a boolean mask: index "
                f"by mask.nonzero() computed outside instead) or an op that cannot be captured; "
                f"run the step eagerly (enabled=False)") from failure
        self.graph, self._loss = graph, loss.detach()
        graph.replay()  # the capture recorded the step; this call's step runs now
        return self._loss

    def _load(self, args) -> None:
        if len(args) != len(self._static):
            raise ValueError(f"CapturedStep: captured with {len(self._static)} arguments, "
                             f"called with {len(args)}")
        for i, (new, old) in enumerate(zip(args, self._static)):
            if new is old:
                continue
            if not isinstance(old, Tensor):
                if new != old:
                    raise ValueError(f"CapturedStep: argument {i} was {old!r} at capture, got "
                                     f"{new!r}; non-tensor arguments are fixed by the capture")
                continue
            if not isinstance(new, Tensor) or new.shape != old.shape or new.dtype != old.dtype \
                    or new.device != old.device:
                raise ValueError(f"CapturedStep: argument {i} must be a tensor of shape "
                                 f"{list(old.shape)}, {old.dtype} on {old.device} (as at capture)")
            if new.is_floating_point() or new.is_complex() or i in self.volatile:
                old.copy_(new)
            elif not torch.equal(new, old):
                raise ValueError(f"CapturedStep: argument {i} ({old.dtype}) differs from the "
                                 f"captured one; integer and boolean arguments (edge indices, "
                                 f"labels, masks) are fixed by the capture: build a new "
                                 f"CapturedStep for new ones")


def _check_loss(loss) -> None:
    if not isinstance(loss, Tensor):
        raise ValueError(f"CapturedStep: loss_fn must return a scalar tensor, got "
                         f"{type(loss).__name__}")
    if loss.numel() != 1:
        raise ValueError(f"CapturedStep: loss_fn must return a scalar tensor, got shape "
                         f"{list(loss.shape)}")
