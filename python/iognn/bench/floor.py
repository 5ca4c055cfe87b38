"""The bytes floor: what an op must move through memory, and the bandwidth that sets its time.

The model (DESIGN.md section 3: features read once per gather, outputs written once) counts, for
N nodes, E edges (E + N for GCN, whose loops are added), width F, head count H, head width C
(D = H*C), feature size s bytes (the dtype's), index size i (4 bytes while N and E fit in int32):

* CSR indices: E*i + (N+1)*i per pass (a backward pass walks the transposed CSR).
* propagate   fwd: E*F*s gathered + N*F*s written (+ E*4 fp32 weights for GCN);
              bwd: the same over the transposed CSR (+ E*i weight permutation for GCN).
* reductions  fwd: E*F*s gathered + N*K*F*s written (K = 4 for multi) + N*F*i arg indices per
              min/max; bwd: N*F*s grad_x written, plus per reduction: sum/mean E*F*s (grad rows
              gathered), min/max N*F*(s+i) (grad and arg index read once), std 3*E*F*s (grad, mean
              and std rows gathered) + N*F*s (x re-read).
              pna: multi with S = 3 degree scalers: N*S*K*F*s written forward, and the same
              read once backward (the scaled gradient, folded into one block).
* attention   (fp32 softmax statistics: max and sum per destination and head, 8*N*H bytes written)
              gat         fwd: E*D*s + E*H*s gathered (x_j, alpha_src_j), N*H*s read, N*D*s written;
                          bwd: 2*E*D*s (x_j, grad_out_i) + E*H*(2s+12) (logits, statistics,
                          delta) gathered, 3*N*D*s + 2*N*H*s read/written.
              gatv2       fwd: E*D*s gathered, 2*N*D*s (x_dst read, out written);
                          bwd: 3*E*D*s (x_j, x_i, grad_out_i) + 12*E*H gathered, 4*N*D*s.
              transformer fwd: 2*E*D*s (k_j, v_j) gathered, 2*N*D*s (q read, out written);
                          bwd: 4*E*D*s (k_j, v_j, q_i, grad_out_i) + 12*E*H gathered, 7*N*D*s.
* layers add their dense maps: each Linear(in, out) reads N*in*s and writes N*out*s forward, and
  reads N*(2*out + in)*s and writes N*in*s backward (grad_input and grad_weight); PNAConv's
  pre-map Linear(2F, F) runs on the E messages instead (E in place of N).

It is the traffic of an implementation that fetches every gathered row from memory: an IO-aware
kernel without cache reuse reaches about 100% of it, and a fraction above 100% means that gathers
hit in cache (small graphs, or neighbourhoods with locality such as grids). Floor time = bytes /
bandwidth, with the bandwidth measured once per run by a large device-to-device copy (bytes read +
written over time); on a CPU the same with a host memcpy.
"""
from __future__ import annotations

import statistics
import time
from typing import List, Tuple

import torch

from .cases import MULTI, PNA_SCALERS, Workload
from .prepared import PreparedGraph

INT32_MAX = 2**31 - 1


def floor_bytes(w: Workload, g: PreparedGraph) -> Tuple[int, int]:
    """(forward bytes, backward bytes) of a workload on a graph."""
    n, e, f = g.num_nodes, g.num_edges, w.feat
    s = torch.empty((), dtype=w.dtype).element_size()
    i = 4 if max(n, e + n) <= INT32_MAX else 8
    family = w.case.family
    if family == "propagate":
        fwd, bwd = _propagate(w.op, n, e + n if w.op == "gcn" else e, f, s, i)
    elif family == "reduce":
        fwd, bwd = _reduce(w.op, n, e, f, s, i)
    else:
        fwd, bwd = _attention(w.op, n, e, w.heads, w.head_dim, s, i)
    if w.level == "layer":
        for rows, fan_in, fan_out in _linears(w, n, e):
            fwd += rows * (fan_in + fan_out) * s
            bwd += rows * (2 * fan_out + 2 * fan_in) * s
    return fwd, bwd


def _csr(n: int, e: int, i: int) -> int:
    return e * i + (n + 1) * i


def _propagate(op: str, n: int, e: int, f: int, s: int, i: int) -> Tuple[int, int]:
    base = e * f * s + n * f * s + _csr(n, e, i)
    weights = e * 4 if op == "gcn" else 0
    return base + weights, base + weights + (e * i if op == "gcn" else 0)


def _reduce(op: str, n: int, e: int, f: int, s: int, i: int) -> Tuple[int, int]:
    reductions = list(MULTI) if op in ("multi", "pna") else [op]
    scalers = len(PNA_SCALERS) if op == "pna" else 1
    written = n * scalers * len(reductions) * f * s
    args = sum(r in ("min", "max") for r in reductions)
    fwd = e * f * s + written + args * n * f * i + _csr(n, e, i)
    bwd = (written if scalers > 1 else 0) + n * f * s + _csr(n, e, i)
    for r in reductions:
        if r in ("sum", "mean"):
            bwd += e * f * s
        elif r in ("min", "max"):
            bwd += n * f * (s + i)
        else:  # std
            bwd += 3 * e * f * s + n * f * s
    return fwd, bwd


def _attention(op: str, n: int, e: int, h: int, c: int, s: int, i: int) -> Tuple[int, int]:
    d = h * c
    stats = 8 * n * h
    csr = _csr(n, e, i)
    if op == "gat":
        fwd = e * d * s + e * h * s + n * h * s + n * d * s + stats + csr
        bwd = 2 * e * d * s + e * h * (2 * s + 12) + 3 * n * d * s + 2 * n * h * s + 2 * csr
    elif op == "gatv2":
        fwd = e * d * s + 2 * n * d * s + stats + csr
        bwd = 3 * e * d * s + 12 * e * h + 4 * n * d * s + 2 * csr
    else:
        fwd = 2 * e * d * s + 2 * n * d * s + stats + csr
        bwd = 4 * e * d * s + 12 * e * h + 7 * n * d * s + 2 * csr
    return fwd, bwd


def _linears(w: Workload, n: int, e: int) -> List[Tuple[int, int, int]]:
    """(rows, in, out) of the dense maps of the layer (see cases.py for the layer of each op)."""
    f = w.feat
    if w.op in ("gcn", "gin"):
        return [(n, f, f)]
    if w.op == "sage":
        return [(n, f, f), (n, f, f)]
    if w.op == "pna":  # pre-map on the E messages, post-map on [x, scaled aggregations], lin
        return [(e, 2 * f, f), (n, (len(PNA_SCALERS) * len(MULTI) + 1) * f, f), (n, f, f)]
    if w.case.family == "reduce":
        k = len(MULTI) if w.op == "multi" else 1
        return [(n, k * f, f), (n, f, f)]
    d = w.heads * w.head_dim
    return [(n, f, d)] * {"gat": 1, "gatv2": 2, "transformer": 4}[w.op]


def measure_bandwidth(device: torch.device, nbytes: int = 1 << 30, repeats: int = 10) -> float:
    """Memory bandwidth in bytes/s: bytes read + written by a large copy over its median time."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        nbytes = min(nbytes, free // 4)
    else:  # larger than the last-level cache, small enough to be quick
        nbytes = min(nbytes, 128 << 20)
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dst.copy_(src)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            dst.copy_(src)
            times.append(time.perf_counter() - t0)
    del src, dst
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return 2 * (nbytes // 4) * 4 / statistics.median(times)
