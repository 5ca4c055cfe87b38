"""Times torch.ops.iognn.neighbor_sample: ms per batch and sampled edges per second, on the CPU
(int32, int64) and on CUDA, over a seeded power-law graph.

    PYTHONPATH=python python scripts/profile_sampler.py                      # 2.4M nodes, 62M edges
    PYTHONPATH=python python scripts/profile_sampler.py --nodes 100000 --edges 2000000 --batches 10

The graph: edge sources uniform, destinations drawn with probability ~ (rank + 1)^-alpha (a few
hubs with very large in-degree, most nodes small), built on the device when there is one. Every
batch samples fan-outs --fanouts from --batch-size seeds drawn uniformly (one seed set per batch,
the same for every backend). CUDA is timed with CUDA events (device time) and with the wall clock
(including the host waits of every hop).
"""
from __future__ import annotations

import argparse
import time

import torch

import iognn  # noqa: F401  (registers torch.ops.iognn)

OP = torch.ops.iognn.neighbor_sample


def power_law_csc(num_nodes: int, num_edges: int, alpha: float, device: torch.device,
                  seed: int):
    """(colptr, row) int64 of a graph whose in-degrees follow a power law."""
    g = torch.Generator(device=device).manual_seed(seed)
    weight = torch.arange(1, num_nodes + 1, device=device, dtype=torch.float64).pow(-alpha)
    cdf = torch.cumsum(weight, 0)
    cdf /= cdf[-1].clone()
    chunks = []
    for begin in range(0, num_edges, 1 << 24):  # bounded memory per chunk
        n = min(1 << 24, num_edges - begin)
        u = torch.rand(n, generator=g, device=device, dtype=torch.float64)
        chunks.append(torch.searchsorted(cdf, u).clamp_(max=num_nodes - 1))
    dst = torch.cat(chunks)
    # Ranks to node ids through a random permutation, so hubs are spread over the id space.
    dst = torch.randperm(num_nodes, generator=g, device=device)[dst]
    src = torch.randint(0, num_nodes, (num_edges,), generator=g, device=device)
    order = torch.argsort(dst, stable=True)
    row = src[order]
    colptr = torch.zeros(num_nodes + 1, dtype=torch.long, device=device)
    colptr[1:] = torch.cumsum(torch.bincount(dst, minlength=num_nodes), 0)
    return colptr, row


def time_backend(colptr, row, seeds, fanouts, cuda: bool, disjoint: bool):
    """(ms per batch by wall clock, ms per batch by CUDA events or None, edges per batch)."""
    edges = 0
    OP(colptr, row, seeds[0], fanouts, disjoint=disjoint, rng_seed=12345)  # warm-up (allocator, caches)
    if cuda:
        torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
    t0 = time.perf_counter()
    for i, s in enumerate(seeds):
        edges += OP(colptr, row, s, fanouts, disjoint=disjoint, rng_seed=i)[3].numel()
    if cuda:
        stop.record()
        torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) * 1e3 / len(seeds)
    events = start.elapsed_time(stop) / len(seeds) if cuda else None
    return wall, events, edges / len(seeds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2_400_000)
    parser.add_argument("--edges", type=int, default=62_000_000)
    parser.add_argument("--alpha", type=float, default=0.8, help="power-law exponent of in-degrees")
    parser.add_argument("--fanouts", type=int, nargs="+", default=[15, 10, 5])
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--cpu-batches", type=int, default=None,
                        help="batches timed on the CPU (default: --batches)")
    parser.add_argument("--no-cpu", action="store_true", help="time CUDA only")
    parser.add_argument("--disjoint", action="store_true")
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    colptr, row = power_law_csc(args.nodes, args.edges, args.alpha, device, seed=0)
    degree = colptr[1:] - colptr[:-1]
    print(f"graph: {args.nodes} nodes, {args.edges} edges, max in-degree {int(degree.max())}, "
          f"fan-outs {args.fanouts}, batch {args.batch_size}, disjoint={args.disjoint}")
    g = torch.Generator().manual_seed(1)
    seeds = [torch.randint(0, args.nodes, (args.batch_size,), generator=g)
             for _ in range(args.batches)]
    fanouts = args.fanouts

    rows = []
    if not args.no_cpu:
        cpu_colptr, cpu_row = colptr.cpu(), row.cpu()
        cpu_seeds = seeds[:args.cpu_batches or args.batches]
        for dtype in (torch.int32, torch.int64):
            wall, _, edges = time_backend(cpu_colptr.to(dtype), cpu_row.to(dtype),
                                          [s.to(dtype) for s in cpu_seeds], fanouts, False,
                                          args.disjoint)
            rows.append((f"cpu {str(dtype)[6:]}", wall, None, edges))
        del cpu_colptr, cpu_row
    if device.type == "cuda":
        for dtype in (torch.int32, torch.int64):
            wall, events, edges = time_backend(colptr.to(dtype), row.to(dtype),
                                               [s.to(device, dtype) for s in seeds], fanouts,
                                               True, args.disjoint)
            rows.append((f"cuda {str(dtype)[6:]}", wall, events, edges))
    print(f"{'backend':<12}{'ms/batch (wall)':>17}{'ms/batch (events)':>19}{'edges/batch':>13}"
          f"{'edges/s (wall)':>16}")
    for name, wall, events, edges in rows:
        ev = f"{events:.3f}" if events is not None else "-"
        print(f"{name:<12}{wall:>17.3f}{ev:>19}{edges:>13.0f}{edges / wall * 1e3:>16.3e}")


if __name__ == "__main__":
    main()
