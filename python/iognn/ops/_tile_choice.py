"""The choice between an op's tile path (Tensor Cores) and its CSR path, shared by propagate
(``propagate_tiles.py``) and the Transformer, GAT and GATv2 attention (``attention_tiles.py``).

Under the graph's ``tile_policy``: ``"csr"`` never takes the tiles; ``"tiles"`` takes them wherever
the kernels run (on a CPU graph: the host twin, a reference for tests); ``"auto"`` takes them where
they run and the layout's fill reaches the op's threshold (:data:`MIN_FILL`,
:data:`ATTENTION_MIN_FILL`), after timing both paths once per op key
and direction on the caller's tensors (inside ``torch.compile`` or a CUDA graph capture nothing is
timed: a choice made before is reused, else the CSR path runs). The plans (path, both times, fill,
reason) are kept on the graph, per device, and listed by ``Graph.stats["tile_plans"]``.
"""
from __future__ import annotations

import statistics
from typing import Callable, Dict, Optional, Tuple

import torch
from torch import Tensor

POLICIES = ("csr", "auto", "tiles")

# Below this fill (distinct pairs / tile slots) "auto" does not time propagate's tiles: each tile
# column then carries fewer than two edges, and the CSR kernels were faster on every such graph
# measured. The attention variants time at any fill (ATTENTION_MIN_FILL): their tile backward beat
# the CSR one on a real graph of fill 0.062 (coauthor_physics in its file order, bf16), where a
# gate would have kept the slower path.
MIN_FILL = 0.12
ATTENTION_MIN_FILL = 0.0

# The timing: a warm-up call, then the median of a few rounds of a few calls each (a single round
# of three calls misjudged paths within 10% of each other).
_ROUNDS, _CALLS = 3, 5

Plan = Dict[str, dict]  # {"forward": {...}, "backward": {...}}


def layout(graph, transposed: bool):
    from ..graph import tile_layout
    return tile_layout(graph, transposed=transposed)


def tensor_cores_take(x: Tensor, dtype: Optional[torch.dtype] = None) -> bool:
    """Whether the CUDA tile kernels take features like ``x`` (device and precision; ``dtype``:
    the one x will be cast to, default its own)."""
    dtype = dtype or x.dtype
    if not x.is_cuda:
        return False
    if dtype in (torch.float16, torch.bfloat16):
        return True
    return dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32


def time_ms(fn: Callable[[], object]) -> float:
    fn()  # warm-up (and any lazy build)
    times = []
    for _ in range(_ROUNDS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(_CALLS):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / _CALLS)
    return statistics.median(times)


def timed(forward: Tuple[float, float], backward: Tuple[float, float], graph) -> Plan:
    """The plan of two timed directions, ``(csr_ms, tiles_ms)`` each."""
    def one(times, fill):
        csr_ms, tiles_ms = times
        return {"path": "tiles" if tiles_ms < csr_ms else "csr", "csr_ms": csr_ms,
                "tiles_ms": tiles_ms, "fill": fill, "reason": "timed"}
    return {"forward": one(forward, layout(graph, False).fill),
            "backward": one(backward, layout(graph, True).fill)}


def fixed(path: str, fill: Optional[float], reason: str) -> Plan:
    plan = {"path": path, "csr_ms": None, "tiles_ms": None, "fill": fill, "reason": reason}
    return {"forward": dict(plan), "backward": dict(plan)}


def may_take_tiles(graph, x: Tensor, kernels_take: bool) -> bool:
    """Whether an op on ``graph`` could run its tile path for ``x`` at all (the policy, and
    ``kernels_take`` or the host twin), before any fill check or timing."""
    policy = getattr(graph, "tile_policy", "csr")
    runs = kernels_take if x.is_cuda else policy == "tiles"
    return policy != "csr" and runs and x.numel() > 0


def choose(graph, x: Tensor, kernels_take: bool, store: str, key: tuple,
           measure: Callable[[], Plan], min_fill: float = MIN_FILL) -> Tuple[bool, bool]:
    """(tiles for the forward, tiles for the backward) of the op whose plans live in
    ``graph.<store>`` under ``key``; ``kernels_take``: whether the CUDA kernels take the call's
    tensors (``x``'s device decides between them and the host twin); ``min_fill``: the fill from
    which "auto" times the two paths."""
    if not may_take_tiles(graph, x, kernels_take):
        return False, False
    policy = graph.tile_policy
    known = graph.__dict__.setdefault(store, {})
    plan = known.get(key)
    if plan is None:
        if policy == "tiles":
            plan = fixed("tiles", None, "tile_policy='tiles'")
        elif torch.compiler.is_compiling() or torch.cuda.is_current_stream_capturing():
            return False, False  # nothing can be timed here; a later eager call decides
        else:
            fill = layout(graph, False).fill
            plan = (measure() if fill >= min_fill
                    else fixed("csr", fill, f"fill {fill:.3f} < {min_fill}"))
        known[key] = plan
    return plan["forward"]["path"] == "tiles", plan["backward"]["path"] == "tiles"


# The graph attributes the tile paths keep per device (Graph.to drops them).
STORES = ("_tile_plans", "_attention_tile_plans", "_gat_tile_plans", "_gatv2_tile_plans",
          "_tile_values")


def all_plans(graph) -> Dict[str, Plan]:
    """Every op's plans on ``graph``, named ``"<op> <dtype> <shape>"``."""
    from . import attention_tiles, propagate_tiles
    attention = {f"{op} {k}": v for op in attention_tiles.VARIANTS
                 for k, v in attention_tiles.plans(graph, op).items()}
    return {**{f"propagate {k}": v for k, v in propagate_tiles.plans(graph).items()}, **attention}
