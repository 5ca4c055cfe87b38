"""One forward and one backward of iognn's segment reductions, each bracketed by
torch.cuda.profiler.start() / stop(), for Nsight Compute on the GPU machine:

    ncu --clock-control none --profile-from-start off -k regex:light_rows \\
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \\
        python3 scripts/profile_reductions.py --graph uniform:1000000:16 \\
        --reduces min min+max+mean+std

Usage: python scripts/profile_reductions.py [--graph SPEC] [--reduces R ...] [--dtype fp32]
       [--feat 128] [--phase fwd bwd]
Without ncu it only runs the steps (and prints what it ran).
"""
import argparse

import torch

import iognn
from iognn.bench.graphs import load_graph
from iognn.bench.suites import DTYPES
from iognn.ops.segment_reduce import segment_reduce


def profiled(fn) -> None:
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    fn()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", default="uniform:1000000:16")
    parser.add_argument("--reduces", nargs="+", default=["min", "min+max+mean+std"])
    parser.add_argument("--dtype", default="fp32")
    parser.add_argument("--feat", type=int, default=128)
    parser.add_argument("--phase", nargs="+", default=["bwd"], choices=["fwd", "bwd"])
    args = parser.parse_args()
    edge_index, num_nodes = load_graph(args.graph, device="cuda")
    g = iognn.Graph(edge_index, num_nodes)
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(num_nodes, args.feat, generator=gen, device="cuda").to(DTYPES[args.dtype])
    x.requires_grad_()
    for name in args.reduces:
        reduces = name.split("+")
        segment_reduce(g, x, reduces)  # warm-up: lazily built graph structures, allocator
        if "fwd" in args.phase:
            profiled(lambda: segment_reduce(g, x, reduces))
        out = segment_reduce(g, x, reduces)
        grad = torch.randn(out.shape, generator=gen, device="cuda").to(out.dtype)
        if "bwd" in args.phase:
            profiled(lambda: torch.autograd.grad(out, x, grad))
        print(f"{args.graph} {args.dtype} {name}: ran {' + '.join(args.phase)}")


if __name__ == "__main__":
    main()
