"""Which path a packed batch should take: FLOP / byte estimates and a visible choice.

Both paths transform then aggregate, so they share the transform GEMM (the dense one also
transforms its padding slots). They differ in the aggregation: the sparse path gathers one
``F_out`` row per edge (``2 * E * F_out`` FLOPs, ``E`` row reads), the dense path multiplies every
tile entry, zero or not (``3 * 2 * slots * b * P * F_out`` FLOPs), so its aggregation does
``3 * b * P / d`` times the sparse work, d the packed edges per slot (the brief's ``3 * S * P / d``
with Balog's block S, our b). Dense wins only when the tiles are well filled or when gathers are
much dearer than Tensor Core FLOPs. ``DeviceRates.for_device`` gives uncalibrated placeholders;
``iognn.dense.calibrate`` measures the rates on the device (``docs/dense.md``, "Choosing").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

from .pack import PackedSupergraphs

_INDEX_BYTES = 4  # int32 graph indices (iognn's default whenever they fit)
# Ops issued per forward: dense_typed_propagate's torch ops (slot gather, transform, three
# products, output gather, bias) and the remainder's four more; the sparse path's fewest
# (typed_propagate's transform-first form: the stacked weight, the GEMM, the propagate pass,
# the bias). The sparse count is a floor, so launches never tip a batch towards dense.
_DENSE_LAUNCHES, _REMAINDER_LAUNCHES, _SPARSE_LAUNCHES = 20, 4, 5


@dataclass(frozen=True)
class DeviceRates:
    """Throughputs the estimate divides by (uncalibrated defaults; measure and pass your own).

    gemm_flops_per_s: dense GEMM / batched-matmul rate for the feature dtype.
    bytes_per_s: streaming memory bandwidth.
    gather_bytes_per_s: bandwidth of row gathers (the sparse aggregation's reads).
    launch_seconds: host time of issuing one op (each path pays it per op it runs); 0 leaves
        launches out of the estimate.
    """

    gemm_flops_per_s: float
    bytes_per_s: float
    gather_bytes_per_s: float
    launch_seconds: float = 0.0

    @staticmethod
    def for_device(device: torch.device, dtype: torch.dtype) -> "DeviceRates":
        if torch.device(device).type == "cuda":
            # H100-class guesses: Tensor Core rate for 16-bit, TF32-off fp32 and fp64 rates.
            gemm = {torch.float16: 6e14, torch.bfloat16: 6e14, torch.float64: 5e13}.get(dtype, 5e13)
            return DeviceRates(gemm, 3e12, 1.5e12)
        return DeviceRates(5e10, 2e10, 5e9)


def estimate_cost(packed: PackedSupergraphs, f_in: int, f_out: int,
                  dtype: torch.dtype = torch.float32) -> dict:
    """FLOPs and bytes of one propagate step on each path (forward only).

    Returns ``{"dense": {...}, "sparse": {...}}``, each with ``transform_flops``,
    ``aggregate_flops``, ``bytes``, ``gather_bytes`` and ``launches`` (ops issued); the dense
    entry covers its remainder too. The sparse entry's ``transform_bytes`` (part of its
    ``bytes``) is, with its ``transform_flops``, the transform of the batch's nodes that both
    paths run.
    """
    elt = torch.empty(0, dtype=dtype).element_size()
    P, b = packed.num_edge_types, packed.block
    slots, n = packed.num_slots, packed.num_nodes
    rem_nodes = packed.remainder_nodes.numel()
    dense_edges, rem_edges = packed.dense_edge_ids.numel(), packed.remainder_edge_ids.numel()
    edges = dense_edges + rem_edges
    tile_bytes = packed.tiles.numel() * elt

    def transform_bytes(rows: int) -> int:  # read h rows, write h @ W
        return rows * (f_in + P * f_out) * elt

    # Three products read hw once each, read-modify-write the output, then one gather to batch
    # order (every node's row read and written).
    dense_bytes = (transform_bytes(slots) + tile_bytes + 3 * slots * P * f_out * elt
                   + 3 * 2 * slots * f_out * elt + transform_bytes(rem_nodes)
                   + rem_edges * _INDEX_BYTES + 2 * n * f_out * elt)
    sparse_bytes = transform_bytes(n) + edges * _INDEX_BYTES + n * f_out * elt
    return {
        "dense": {
            "transform_flops": 2 * (slots + rem_nodes) * f_in * P * f_out,
            "aggregate_flops": 6 * slots * b * P * f_out + 2 * rem_edges * f_out,
            "bytes": dense_bytes,
            "gather_bytes": rem_edges * f_out * elt,
            "launches": _DENSE_LAUNCHES + (_REMAINDER_LAUNCHES if rem_nodes else 0),
        },
        "sparse": {
            "transform_flops": 2 * n * f_in * P * f_out,
            "transform_bytes": transform_bytes(n),  # part of "bytes"
            "aggregate_flops": 2 * edges * f_out,
            "bytes": sparse_bytes,
            "gather_bytes": edges * f_out * elt,
            "launches": _SPARSE_LAUNCHES,
        },
    }


@dataclass
class PathChoice:
    """The path expected to be faster for a batch, why, and the measures behind it."""

    path: str
    reason: str
    dense_seconds: float
    sparse_seconds: float
    measures: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"path": self.path, "reason": self.reason, "dense_seconds": self.dense_seconds,
                "sparse_seconds": self.sparse_seconds, **self.measures}

    def __repr__(self) -> str:
        return f"PathChoice(path={self.path!r}, reason={self.reason!r})"


def _seconds(cost: dict, rates: DeviceRates) -> float:
    flops = cost["transform_flops"] + cost["aggregate_flops"]
    return (flops / rates.gemm_flops_per_s + cost["bytes"] / rates.bytes_per_s
            + cost["gather_bytes"] / rates.gather_bytes_per_s
            + cost["launches"] * rates.launch_seconds)


def choose_path(packed: PackedSupergraphs, f_in: int, f_out: int,
                dtype: torch.dtype = torch.float32,
                rates: Optional[DeviceRates] = None, margin: float = 1.0) -> PathChoice:
    """``'dense'`` or ``'sparse'`` for one typed propagate step of this batch, with the reason.

    Dense when ``margin`` (>= 1) times its estimated time beyond the transform both paths run
    (``h @ W`` of the batch's nodes) is below the sparse path's: a margin above 1 keeps batches
    whose estimates are close (within the estimate's error) on the sparse path; 1 compares the
    totals.

    The measures: ``tile_fill`` (nonzero tile entries / tile entries), ``edges_per_slot`` (d),
    ``inflation`` (dense / sparse aggregation FLOPs of the packed edges, ``3 * b * P / d``),
    ``padding`` (empty slots / slots), ``remainder_edge_fraction``, and the estimate's FLOPs and
    bytes per path. ``rates`` defaults to uncalibrated guesses for the batch's device.
    """
    if not margin >= 1.0:
        raise ValueError(f"margin must be at least 1, got {margin!r}")
    rates = rates or DeviceRates.for_device(packed.device, dtype)
    cost = estimate_cost(packed, f_in, f_out, dtype)
    dense_s, sparse_s = _seconds(cost["dense"], rates), _seconds(cost["sparse"], rates)
    slots, dense_edges = packed.num_slots, packed.dense_edge_ids.numel()
    edges = dense_edges + packed.remainder_edge_ids.numel()
    d = dense_edges / slots if slots else 0.0
    measures = {
        "tile_fill": packed.num_tile_nonzeros / packed.tiles.numel() if packed.tiles.numel() else 0.0,
        "edges_per_slot": d,
        "inflation": 3 * packed.block * packed.num_edge_types / d if d else float("inf"),
        "padding": 1 - packed.num_dense_nodes / slots if slots else 0.0,
        "remainder_edge_fraction": 1 - dense_edges / edges if edges else 0.0,
        "cost": cost,
    }
    if dense_edges == 0:
        return PathChoice("sparse", "no edge is in a supergraph tile (every graph went to the "
                          "remainder or has no edges)", dense_s, sparse_s, measures)
    sparse_cost = cost["sparse"]
    shared_s = (sparse_cost["transform_flops"] / rates.gemm_flops_per_s
                + sparse_cost["transform_bytes"] / rates.bytes_per_s)
    path = "dense" if margin * (dense_s - shared_s) < sparse_s - shared_s else "sparse"
    against = ("" if margin == 1.0 else
               f" (dense needs {margin:.3g}x less beyond the shared transform, "
               f"{shared_s * 1e3:.3g} ms)")
    reason = (f"{path}: estimated dense {dense_s * 1e3:.3g} ms vs sparse {sparse_s * 1e3:.3g} ms"
              f"{against}; "
              f"tile fill {measures['tile_fill']:.2%}, dense aggregation does "
              f"{measures['inflation']:.3g}x the sparse FLOPs (3*b*P/d, d = {d:.3g} edges per "
              f"slot), padding {measures['padding']:.0%}, "
              f"{measures['remainder_edge_fraction']:.0%} of edges in the remainder")
    return PathChoice(path, reason, dense_s, sparse_s, measures)
