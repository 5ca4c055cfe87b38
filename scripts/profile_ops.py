"""Per-kernel CUDA time of iognn ops and layers, forward + backward, on one benchmark graph.

Usage: python scripts/profile_ops.py [--graph uniform:1000000:16] [--ops gat gatv2 transformer]
       [--level op|layer] [--heads 4 --head-dim 32] [--feat 128] [--dtype fp32] [--steps 5]
Prints torch.profiler's table of CUDA kernels (total time over --steps steps) per op: where a
forward + backward spends its time, to compare with the bytes floor of `iognn bench`.
"""
import argparse

import torch
from torch.profiler import ProfilerActivity, profile

from iognn.bench.cases import CASES, Workload
from iognn.bench.graphs import load_graph
from iognn.bench.prepared import PreparedGraph
from iognn.bench.suites import DTYPES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", default="uniform:1000000:16")
    parser.add_argument("--ops", nargs="+", default=["gat", "gatv2", "transformer"])
    parser.add_argument("--level", default="op", choices=["op", "layer"])
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=32)
    parser.add_argument("--feat", type=int, default=128)
    parser.add_argument("--dtype", default="fp32", choices=sorted(DTYPES))
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rows", type=int, default=12)
    args = parser.parse_args()

    edge_index, num_nodes = load_graph(args.graph, device="cuda")
    graph = PreparedGraph(args.graph, edge_index, num_nodes, "cuda")
    gen = torch.Generator(device="cuda").manual_seed(0)
    for op in args.ops:
        case = CASES[op]
        heads = args.heads if case.family == "attention" else None
        head_dim = args.head_dim if case.family == "attention" else None
        w = Workload(op, args.level, DTYPES[args.dtype], args.feat, heads, head_dim)
        if args.level == "layer":
            module = case.make_layer("torch_geometric.nn", w).to("cuda")
            fp32 = (torch.randn((graph.num_nodes, w.feat), generator=gen, device="cuda"),)
        else:
            module, fp32 = None, case.op_inputs(w, graph, gen)
        step = case.impls(w)["iognn"](graph, w, module)
        inputs = [t.to(w.dtype).requires_grad_() for t in fp32]

        def run():
            out = step(*inputs)
            out.backward(torch.ones_like(out))

        for _ in range(2):
            run()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(args.steps):
                run()
            torch.cuda.synchronize()
        print(f"== {op} ({args.level}, {args.graph}, {args.dtype}, H={heads}, C={head_dim}, "
              f"{args.steps} steps)")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=args.rows,
                                        max_name_column_width=90))


if __name__ == "__main__":
    main()
