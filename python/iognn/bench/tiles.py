"""``python -m iognn.bench.tiles``: the tile (Tensor Core) path of propagate against the CSR path.

Sweep (``--sweep``): for every graph and ordering, the tile layout's fill, the ordering's cost, and
the forward / backward times on both paths of propagate (sum; the backward is grad_x), of the
Transformer attention, GAT's and GATv2's (H heads of F / H channels; the backward gives q, k, v;
x, alpha_src, alpha_dst; or x_src, x_dst, att) at width F in bf16 and TF32, with the automatic
choice (``tile_policy='auto'``) and its time against the faster path. Synthetic graphs
are shuffled first (random node ids, as graphs come from files), so an ordering has locality to
recover; real graphs keep the order of their files. Orderings: ``native`` (a synthetic graph in its
generator's order: communities, molecules and mesh rows contiguous, the best case an ordering can
aim at), ``none`` (as given, shuffled), ``rcm``, ``metis`` (``iognn.Graph(reorder=...)``).

Training (``--train``): 2-layer GCN and GAT node classification on real datasets, whole epochs
(forward, backward, Adam step) under bf16 autocast, on the graph as given against the graph
built with ``reorder=`` and ``tile_policy='auto'``; the ordering's cost and the timing of the choice
are counted over ``--epochs`` epochs.
"""
from __future__ import annotations

import argparse
import json
import time
from typing import List, Optional, Sequence

import torch

SWEEP_GRAPHS = ("sbm:65536:4096:12:0.25", "sbm:262144:8192:24:1", "batch:16384:16:12",
                "grid:262144", "mesh3d:262144", "road-usroads-48", "batch:8192:24:4",
                "coauthor_physics", "amazon_computers", "tolokers", "rmat:17:16")
ORDERS = ("native", "none", "rcm", "metis")
DTYPES = {"bf16": torch.bfloat16, "tf32": torch.float32}
TRAIN_DATASETS = ("coauthor_physics", "amazon_computers")


def _shuffled(edge_index, num_nodes: int, seed: int):
    perm = torch.randperm(num_nodes, generator=torch.Generator().manual_seed(seed))
    return perm.to(edge_index.device)[edge_index]


def _op_timings(op: str, g, n: int, dtype: torch.dtype, F: int, ms, device="cuda"):
    """The four times (csr / tiles, forward / backward) of ``op`` on ``g`` at width F, and the
    choice "auto" makes (timed afresh). ``op``: "propagate" (sum), "transformer:H", "gat:H" or
    "gatv2:H" (H heads of F / H channels; the backward gives every input's gradient)."""
    from iognn.ops import propagate_tiles as pt
    g.tile_policy = "auto"
    gen = torch.Generator(device=device).manual_seed(0)
    if op == "propagate":
        x = torch.randn(n, F, device=device, generator=gen).to(dtype)
        grad = torch.randn(n, F, device=device, generator=gen).to(dtype)
        times = {"csr_fwd": ms(lambda: pt._csr_forward(g, x, None, "sum", None)),
                 "csr_bwd": ms(lambda: pt._csr_backward_x(g, grad, None, "sum")),
                 "tiles_fwd": ms(lambda: pt._spmm(g, x, None, "sum", None, False)),
                 "tiles_bwd": ms(lambda: pt._spmm(g, grad, None, "sum", None, True))}
        g.__dict__.pop("_tile_plans", None)
        return times, lambda: pt.choose(g, x, None, "sum")
    from iognn.ops import attention_tiles as at
    name, heads = op.split(":")
    heads = int(heads)
    v = at.VARIANTS[name]
    C = F // heads
    rows = {"transformer": [(n, heads, C)] * 3,  # query, key, value
            "gat": [(n, heads, C), (n, heads), (n, heads)],  # x, alpha_src, alpha_dst
            "gatv2": [(n, heads, C), (n, heads, C), (heads, C)]}[name]  # x_src, x_dst, att
    inputs = tuple(torch.randn(s, device=device, generator=gen).to(dtype) for s in rows)
    param = (F // heads) ** -0.5 if name == "transformer" else 0.2  # scale, negative_slope
    out, lse = v.csr_forward(g, inputs, param)
    grad = torch.randn_like(out)
    times = {"csr_fwd": ms(lambda: v.csr_forward(g, inputs, param)),
             "csr_bwd": ms(lambda: v.csr_backward(g, inputs, out, lse, grad, param)),
             "tiles_fwd": ms(lambda: v.tiles_forward(g, inputs, param)),
             "tiles_bwd": ms(lambda: v.tiles_backward(g, inputs, out, lse, grad, param))}
    g.__dict__.pop(v.store, None)
    return times, lambda: at.choose_variant(v, g, inputs, param)


def sweep_rows(graphs: Sequence[str], orders: Sequence[str], ops: Sequence[str],
               dtypes: Sequence[str], F: int, seed: int, data_dir: Optional[str],
               log=print) -> List[dict]:
    import iognn
    from iognn.graph import tile_layout
    from iognn.ops._tile_choice import time_ms as _ms
    from .graphs import is_synthetic, load_graph

    torch.backends.cuda.matmul.allow_tf32 = True
    rows = []
    for spec in graphs:
        try:
            edge_index, n = load_graph(spec, seed=seed, data_dir=data_dir)
        except (FileNotFoundError, ValueError) as error:
            log(f"{spec}: skipped ({error})")
            continue
        native = edge_index.cuda()
        shuffled = _shuffled(native, n, seed) if is_synthetic(spec) else native
        for order in orders:
            if order == "native" and not is_synthetic(spec):
                continue  # a real graph's native order is its given one
            try:
                g = iognn.Graph(native if order == "native" else shuffled, n,
                                reorder=None if order in ("none", "native") else order)
            except (ImportError, RuntimeError) as error:
                log(f"{spec} {order}: skipped ({error})")
                continue
            stats = g.stats
            fill = tile_layout(g).fill
            for op in ops:
                for name in dtypes:
                    t, choose = _op_timings(op, g, n, DTYPES[name], F, _ms)
                    fwd_tiles, bwd_tiles = choose()
                    csr = t["csr_fwd"] + t["csr_bwd"]
                    tiles = t["tiles_fwd"] + t["tiles_bwd"]
                    auto = ((t["tiles_fwd"] if fwd_tiles else t["csr_fwd"])
                            + (t["tiles_bwd"] if bwd_tiles else t["csr_bwd"]))
                    row = {"graph": spec, "order": order, "op": op, "nodes": n,
                           "edges": g.num_edges, "fill": fill,
                           "reorder_s": stats.get("reorder_seconds", 0.0), "dtype": name, "F": F,
                           **t, "speedup": csr / tiles,
                           "auto": f"{'tiles' if fwd_tiles else 'csr'}/"
                                   f"{'tiles' if bwd_tiles else 'csr'}",
                           "auto_vs_best": auto / min(csr, tiles)}
                    rows.append(row)
                    log(format_sweep_row(row))
    return rows


def format_sweep_row(r: dict) -> str:
    return (f"{r['graph']:22s} {r['order']:6s} {r['op']:13s} {r['dtype']:4s} fill {r['fill']:.3f} "
            f"reorder {r['reorder_s']:.2f} s | csr {r['csr_fwd']:.3f}+{r['csr_bwd']:.3f} ms "
            f"tiles {r['tiles_fwd']:.3f}+{r['tiles_bwd']:.3f} ms x{r['speedup']:.2f} | "
            f"auto {r['auto']} {r['auto_vs_best']:.3f} of best")


def train_rows(datasets: Sequence[str], models: Sequence[str], order: str, epochs: int,
               seed: int, data_dir: Optional[str], log=print) -> List[dict]:
    import iognn
    from .workloads import TwoLayer, node_data
    import iognn.nn as io_nn
    import torch.nn.functional as F

    rows = []
    for name in datasets:
        x, edge_index, y, train_idx, classes = node_data(name, torch.device("cuda"), data_dir,
                                                         seed)
        n = x.size(0)
        for model_name in models:
            loops = "replace" if model_name == "gat" else "add_remaining"
            times = {}
            for variant in ("warm-up", "as given", f"reorder={order}"):
                torch.manual_seed(seed)
                model = TwoLayer(io_nn, model_name, x.size(1), classes).cuda()
                opt = torch.optim.Adam(model.parameters(), lr=0.01)
                torch.cuda.synchronize()
                start = time.perf_counter()
                if variant == f"reorder={order}":
                    adj = iognn.Graph(edge_index, n, self_loops=loops, reorder=order)
                else:  # the warm-up pays the process's one-time costs (kernel loading, cuBLAS)
                    adj = iognn.Graph(edge_index, n, self_loops=loops)
                for _ in range(2 if variant == "warm-up" else epochs):
                    opt.zero_grad(set_to_none=True)
                    with torch.autocast("cuda", dtype=torch.bfloat16):
                        out = model(x, adj)
                    F.cross_entropy(out[train_idx].float(), y[train_idx]).backward()
                    opt.step()
                torch.cuda.synchronize()
                times[variant] = (time.perf_counter() - start) * 1e3 / epochs
            del times["warm-up"]
            given, reordered = times.values()
            row = {"dataset": name, "model": model_name, "order": order, "epochs": epochs,
                   "given_ms": given, "reordered_ms": reordered, "speedup": given / reordered,
                   "plans": {k: v["forward"]["path"] + "/" + v["backward"]["path"]
                             for k, v in _plans(adj).items()}}
            rows.append(row)
            log(f"{name:18s} {model_name:4s} epoch {given:.3f} ms as given, {reordered:.3f} ms "
                f"with reorder={order} (cost included over {epochs} epochs): x{row['speedup']:.2f}"
                f" plans {row['plans']}")
    return rows


def _plans(graph) -> dict:
    from iognn.ops._tile_choice import all_plans
    return all_plans(graph)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m iognn.bench.tiles",
                                description=__doc__.split("\n")[0])
    p.add_argument("--sweep", action="store_true")
    p.add_argument("--train", action="store_true")
    p.add_argument("--graphs", default=",".join(SWEEP_GRAPHS))
    p.add_argument("--orders", default=",".join(ORDERS))
    p.add_argument("--ops", default="propagate,transformer:4,gat:4",
                   help="propagate, transformer:H, gat:H and/or gatv2:H (H heads of feat / H "
                        "channels)")
    p.add_argument("--dtypes", default=",".join(DTYPES))
    p.add_argument("--feat", type=int, default=128)
    p.add_argument("--datasets", default=",".join(TRAIN_DATASETS))
    p.add_argument("--models", default="gcn,gat")
    p.add_argument("--train-order", default="metis")
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir")
    p.add_argument("--json", help="write the rows to this file")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        p.error("the tile kernels run on a CUDA device; none is available")
    if not (args.sweep or args.train):
        args.sweep = args.train = True
    out = {}
    if args.sweep:
        out["sweep"] = sweep_rows(args.graphs.split(","), args.orders.split(","),
                                  args.ops.split(","), args.dtypes.split(","), args.feat,
                                  args.seed, args.data_dir)
    if args.train:
        out["train"] = train_rows(args.datasets.split(","), args.models.split(","),
                                  args.train_order, args.epochs, args.seed, args.data_dir)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
