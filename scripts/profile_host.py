"""Where the host time of one layer's forward + backward goes (iognn or PyG), on a real graph.

Usage: python scripts/profile_host.py [--layer GCNConv] [--graph cora] [--impl iognn] [--top 25]
Prints the step's wall time, kernel time and launches (as ``iognn bench --suite workloads``
measures them), then the operators with the most self CPU time (torch.profiler, CPU only) and the
Python functions with the most own time (cProfile) over --steps steps.
"""
import argparse
import cProfile
import pstats

import torch

from iognn.bench.workloads import layer_steps, measure


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layer", default="GCNConv")
    p.add_argument("--graph", default="cora")
    p.add_argument("--impl", default="iognn", choices=("iognn", "pyg"))
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    step = layer_steps(args.graph, args.layer, device, None, 0)[args.impl]
    print(f"{args.impl} {args.layer} on {args.graph}:", measure(step, device, 20, 3, args.steps))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(args.steps):
            step()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.top))
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(args.steps):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
