"""Forward and backward CUDA time of iognn's segment reductions alone (no PyG), for A/B runs of two
builds on the same card: run it once per build (PYTHONPATH picks the iognn package) and compare.

Usage: python scripts/time_reductions.py [--graphs uniform:1000000:16,...] [--reduces min max+min
       min+max+mean+std ...] [--dtype fp32 bf16] [--feat 128] [--repeats 30] [--label NAME]
Prints one line per (graph, dtype, reductions): median forward and backward milliseconds over
--repeats steps (CUDA events; 3 warm-up steps; 2 input sets in rotation), and the peak memory of a
step above the inputs.
"""
import argparse
import os
import statistics

import torch

import iognn
from iognn.bench.graphs import load_graph
from iognn.bench.suites import DTYPES
from iognn.ops.segment_reduce import segment_reduce


def median_ms(fn, repeats):
    times = []
    for k in range(repeats + 3):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(k % 2)
        stop.record()
        stop.synchronize()
        if k >= 3:
            times.append(start.elapsed_time(stop))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", default="powerlaw:1000000:16,uniform:1000000:16,grid:1000000")
    parser.add_argument("--reduces", nargs="+",
                        default=["min", "max+min", "sum", "mean", "std", "min+max+mean+std"])
    parser.add_argument("--dtype", nargs="+", default=["fp32", "bf16"])
    parser.add_argument("--feat", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--label", default=os.environ.get("IOGNN_AB_LABEL", iognn.__file__))
    args = parser.parse_args()
    print(f"# {args.label} on {torch.cuda.get_device_name()}")
    print(f"{'graph':22} {'dtype':5} {'reduces':18} {'fwd ms':>8} {'bwd ms':>8} {'peak MiB':>9}")
    for spec in args.graphs.split(","):
        edge_index, num_nodes = load_graph(spec, device="cuda")
        g = iognn.Graph(edge_index, num_nodes)
        gen = torch.Generator(device="cuda").manual_seed(0)
        for dtype_name in args.dtype:
            dtype = DTYPES[dtype_name]
            xs = [torch.randn(num_nodes, args.feat, generator=gen, device="cuda").to(dtype)
                  .requires_grad_() for _ in range(2)]
            for name in args.reduces:
                reduces = name.split("+")
                grads = [torch.randn(num_nodes, len(reduces) * args.feat, generator=gen,
                                     device="cuda").to(dtype) for _ in range(2)]
                outs = [segment_reduce(g, x, reduces) for x in xs]
                fwd = median_ms(lambda k: segment_reduce(g, xs[k], reduces), args.repeats)

                def backward(k):
                    torch.autograd.grad(outs[k], xs[k], grads[k], retain_graph=True)

                bwd = median_ms(backward, args.repeats)
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                out = segment_reduce(g, xs[0], reduces)
                torch.autograd.grad(out, xs[0], grads[0])
                del out
                peak = (torch.cuda.max_memory_allocated() - base) / 2**20
                print(f"{spec:22} {dtype_name:5} {name:18} {fwd:8.3f} {bwd:8.3f} {peak:9.0f}",
                      flush=True)
                del outs, grads


if __name__ == "__main__":
    main()
