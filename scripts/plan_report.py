"""What the propagate planner (IOGNN_PROPAGATE_BACKEND=auto) picks on benchmark graphs, and why.

Usage: python scripts/plan_report.py [--graphs uniform:1000000:16 grid:1000000 ...]
       [--feat 128] [--dtype fp32]
For each graph: one unweighted sum propagate forward + backward on the GPU under `auto` (which
times the own kernels against cuSPARSE on first use, where cuSPARSE may serve the graph), then
each direction's plan_info line: the choice and its reason (timings, or why cuSPARSE was not
considered). Prints one Markdown table.
"""
import argparse
import os

import torch

import iognn
from iognn.bench.graphs import load_graph
from iognn.bench.suites import DTYPES
from iognn.ops import propagate
from iognn.ops.propagate_plan import plan_info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", nargs="+",
                        default=["uniform:1000000:16", "powerlaw:1000000:16", "grid:1000000"])
    parser.add_argument("--feat", type=int, default=128)
    parser.add_argument("--dtype", default="fp32", choices=sorted(DTYPES))
    args = parser.parse_args()
    os.environ["IOGNN_PROPAGATE_BACKEND"] = "auto"
    dtype = DTYPES[args.dtype]
    print(f"propagate planner on {torch.cuda.get_device_name()}, F={args.feat}, {args.dtype}\n")
    print("| graph | direction | choice (reason) |\n|---|---|---|")
    for spec in args.graphs:
        edge_index, num_nodes = load_graph(spec, device="cuda")
        graph = iognn.Graph(edge_index, num_nodes)
        x = torch.randn(num_nodes, args.feat, device="cuda", dtype=dtype, requires_grad=True)
        propagate(graph, x).backward(torch.ones(num_nodes, args.feat, device="cuda", dtype=dtype))
        torch.cuda.synchronize()
        for direction in ("forward", "backward_x"):
            print(f"| {spec} | {direction} | {plan_info(graph, args.feat, dtype, direction)} |")


if __name__ == "__main__":
    main()
