"""Backend plans of the CUDA propagate gathers: inspect them, override them, persist them.

On CUDA each gather of :func:`iognn.ops.propagate` - ``'forward'`` over the CSR, ``'backward_x'``
over the transposed CSR - runs on iognn's own kernels or on cuSPARSE, as
``IOGNN_PROPAGATE_BACKEND`` says: ``own`` (default), ``cusparse`` (every call cuSPARSE can serve
exactly) or ``auto``: per (graph, direction, dtype, stream, feature width F) the backend recorded
in the graph's plan, which the first call decides by timing both (never while capturing a CUDA
graph) unless :func:`set_backend` or the on-disk plan cache (``iognn.ops.plan_store``) already set
it. :func:`plan_info` reports the recorded choice and why.

With ``IOGNN_PLAN_CACHE`` set, the functional wrapper seeds undecided plans from the cache before a
call (:func:`seed_plans`) and writes the choices it timed after the call (:func:`record_plans`);
the backward_x choice, timed during backward, is written by the next forward call on that graph.
Calls made directly through ``torch.ops.iognn`` and calls under ``torch.compile`` or CUDA-graph
capture do not touch the cache.
"""
from __future__ import annotations

import weakref
from typing import Dict, List, Set, Tuple

import torch
from torch import Tensor

from . import plan_store

DIRECTIONS = ("forward", "backward_x")
_CACHE_SOURCE = "plan cache"


def plan_info(graph, F: int, dtype: torch.dtype, direction: str = "forward") -> str:
    """The backend the current stream's plan gives `graph`'s gather for F features of `dtype`:
    ``'own (...)'``, ``'cusparse (...)'`` or ``'none (...)'`` (undecided), ``'cpu'`` on the host."""
    return torch.ops.iognn.propagate_plan_info(graph.rowptr, graph.col, graph.colptr, graph.row,
                                               F, dtype, direction)


def set_backend(graph, F: int, dtype: torch.dtype, backend: str, direction: str = "forward",
                source: str = "by the user") -> None:
    """Records `backend` ('own' or 'cusparse') as the auto choice of a CUDA gather on the current
    stream, or forgets the recorded choice with 'auto'. ``IOGNN_PROPAGATE_BACKEND=own|cusparse``
    still overrides it. A no-op for a graph on the CPU."""
    torch.ops.iognn.propagate_plan_set(graph.rowptr, graph.col, graph.colptr, graph.row, F, dtype,
                                       direction, backend, source)


# ((F, dtype, stream), direction) of each graph whose plan needs no more cache work in this process.
_settled: "weakref.WeakKeyDictionary[object, Set[Tuple[Tuple[int, torch.dtype, int], str]]]" = \
    weakref.WeakKeyDictionary()
_device_names: Dict[int, str] = {}


def _cache_applies(x: Tensor) -> bool:
    """The plan cache is on and this call may touch it (CUDA features, eager, not capturing)."""
    if torch.compiler.is_compiling() or not x.is_cuda or plan_store.cache_dir() is None:
        return False
    return not torch.cuda.is_current_stream_capturing()


def _pending(graph, x: Tensor) -> List[str]:
    """The gather directions of a call with features `x` whose plans still need cache work: none
    when the cache does not apply; backward_x only when x requires a gradient."""
    if not _cache_applies(x):
        return []
    done = _settled.get(graph, ())
    call = _call_id(x)
    directions = DIRECTIONS if x.requires_grad else DIRECTIONS[:1]
    return [d for d in directions if (call, d) not in done]


def _call_id(x: Tensor) -> Tuple[int, torch.dtype, int]:
    return (x.size(1), x.dtype, torch.cuda.current_stream(x.device).cuda_stream)


def _key(graph, x: Tensor, direction: str) -> str:
    index = x.device.index if x.device.index is not None else torch.cuda.current_device()
    name = _device_names.get(index)
    if name is None:
        name = _device_names[index] = torch.cuda.get_device_name(index)
    return plan_store.plan_key(graph, x.size(1), x.dtype, direction, name)


def seed_plans(graph, x: Tensor) -> None:
    """Before a propagate call with features `x`: gives each undecided gather plan of the call the
    choice the plan cache holds for it (when IOGNN_PLAN_CACHE is set)."""
    pending = _pending(graph, x)
    if not pending:
        return
    store = plan_store.store_for(plan_store.cache_dir())
    for direction in pending:
        if plan_info(graph, x.size(1), x.dtype, direction).startswith("none"):
            backend = store.get(_key(graph, x, direction))
            if backend is not None:
                set_backend(graph, x.size(1), x.dtype, backend, direction,
                            f"{_CACHE_SOURCE} {store.path}")


def record_plans(graph, x: Tensor) -> None:
    """After a propagate call with features `x`: writes the choices of the call's gathers that were
    timed to the plan cache (when IOGNN_PLAN_CACHE is set). A direction whose plan has a choice
    (timed, untimed, or set) is settled: later calls with the same F, dtype and stream skip it."""
    pending = _pending(graph, x)
    if not pending:
        return
    store = plan_store.store_for(plan_store.cache_dir())
    for direction in pending:
        backend, _, why = plan_info(graph, x.size(1), x.dtype, direction).partition(" ")
        if backend == "none" or "forced by IOGNN_PROPAGATE_BACKEND" in why:
            continue
        if why.startswith("(timed:"):
            key = _key(graph, x, direction)
            if store.get(key) != backend:
                store.put(key, backend, why[1:-1])
        _settled.setdefault(graph, set()).add((_call_id(x), direction))
