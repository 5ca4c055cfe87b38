"""``python -m iognn.bench.distributed``: full-graph training on 1, 2, 4 processes, and bytes moved.

Per graph, model and process count: the full-graph training step (forward + backward + DDP's
all-reduce + Adam) of a ``--layers``-layer model on the partitioned graph, its speed-up over one
process, the partition's edge cut and halo rows, and the bytes the halo exchanges moved per step
(forward + backward, counted by the exchange plans) next to the halo rows times the bytes of the
rows each layer exchanges (they must agree). ``--overlap both`` times every several-process model
with and without HaloConv's overlap (the interior rows computed while the exchange runs) in the
same job, one row each. Optionally (``--minibatch``) the mini-batch DDP epoch
of ``iognn train --nproc N --loader neighbor`` on the same process counts.

Graphs: ``synthetic-products[:scale]`` (``iognn train``'s dataset, cached under IOGNN_CACHE), and
:mod:`iognn.bench.graphs` specs with random features and labels: an easy-to-cut SBM
(``sbm:N:blocks:deg_in:deg_out``) and a hard-to-cut uniform random graph (``uniform:N:deg``).

Each process count runs as one torchrun job (one GPU per process on CUDA, gloo processes on the
CPU); rank 0 partitions once and hands the assignment to the others. Times are the median over
``--epochs`` steps after ``--warmup`` untimed ones, the slowest rank's.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import List

import torch

DEFAULT_GRAPHS = "synthetic-products,sbm:1000000:16:15:1,uniform:1000000:16"
OVERLAP_MODES = {"off": (False,), "on": (True,), "both": (False, True)}
FEATURES, CLASSES = 128, 16  # the synthetic graphs' random features and labels


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m iognn.bench.distributed",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graphs", default=DEFAULT_GRAPHS,
                        help="comma-separated graphs, '' for none (default: %(default)s)")
    parser.add_argument("--models", default="gcn,sage,gat", help="default: %(default)s")
    parser.add_argument("--nproc", default=None,
                        help="comma-separated process counts (default: 1,2,4 up to the visible "
                             "GPUs; 1,2 on the CPU)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--layers", type=int, default=3, help="default: %(default)s")
    parser.add_argument("--hidden", type=int, default=256, help="default: %(default)s")
    parser.add_argument("--heads", type=int, default=4, help="GAT heads (default: %(default)s)")
    parser.add_argument("--epochs", type=int, default=10, help="timed steps (default: %(default)s)")
    parser.add_argument("--warmup", type=int, default=2, help="default: %(default)s")
    parser.add_argument("--partition", choices=("metis", "random"), default="metis")
    parser.add_argument("--overlap", choices=OVERLAP_MODES, default=None,
                        help="HaloConv's overlap on several processes: off, on, or both (one row "
                             "each, same job) (default: iognn.distributed.full_graph.OVERLAP's)")
    parser.add_argument("--minibatch", action="store_true",
                        help="also time the mini-batch DDP epoch (iognn train --loader neighbor) "
                             "on synthetic-products")
    parser.add_argument("--minibatch-dataset", default="synthetic-products")
    parser.add_argument("--dist-timeout", type=int, default=900)
    parser.add_argument("--json", default=None, metavar="PATH",
                        help="write the rows as JSON; rows already in PATH for another (graph, "
                             "model, process count) are kept, so a bench can run in parts")
    parser.add_argument("--worker-out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.overlap is None:
        from ..distributed.full_graph import OVERLAP
        args.overlap = "on" if OVERLAP else "off"
    return args


# ---- one process of a torchrun job -----------------------------------------------------------
class LayerStack(torch.nn.Module):
    """``convs`` in order with a ReLU between them (no dropout: the steps time the same work)."""

    def __init__(self, convs):
        super().__init__()
        self.convs = torch.nn.ModuleList(convs)

    def forward(self, x, edge_index):
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i < len(self.convs) - 1:
                x = x.relu()
        return x


def load_graph_data(spec: str):
    """(x, y, edge_index) of a graph name: a dataset iognn train loads, or a generator spec with
    seeded random features and labels."""
    from .graphs import generate, is_synthetic
    if not is_synthetic(spec) or spec.lower().startswith("synthetic-products"):
        from ..datasets import load_dataset
        data = load_dataset(spec)
        return data.x, data.y, data.edge_index
    edge_index, num_nodes = generate(spec, seed=0)
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(num_nodes, FEATURES, generator=gen),
            torch.randint(0, CLASSES, (num_nodes,), generator=gen), edge_index)


def shared_partition(spec: str, edge_index, num_nodes: int, method: str):
    """Rank 0's partition, its assignment handed to the other ranks, each of which builds its
    own layout only (one METIS run per job; the assignment is cached beside the datasets, so a
    later job of the same graph, process count and method reuses it)."""
    import torch.distributed as dist

    from ..datasets import cache_dir
    from ..distributed import partition
    world = dist.get_world_size()
    box = [None]
    if dist.get_rank() == 0:
        slug = "".join(c if c.isalnum() else "-" for c in spec)
        path = cache_dir() / f"parts-{slug}-{world}-{method}.pt"
        if path.exists():
            box[0] = torch.load(path, weights_only=True)
        else:
            box[0] = partition(edge_index, world, method, num_nodes=num_nodes, ranks=()).parts
            path.parent.mkdir(parents=True, exist_ok=True)
            torch.save(box[0], path)
    dist.broadcast_object_list(box, src=0)
    return partition(edge_index, world, "given", num_nodes=num_nodes, parts=box[0],
                     ranks=[dist.get_rank()])


def time_model(name: str, args, graph, x, y, num_classes: int, halo_rows: int, device,
               overlap: bool) -> dict:
    """One model's training steps on this rank's part (HaloConv's ``overlap``): the slowest
    rank's median step and the bytes all ranks' exchanges moved per step."""
    import torch.distributed as dist
    import torch.nn.functional as F

    import iognn.nn
    from ..distributed import distribute
    from ..distributed.full_graph import data_parallel, exchanged_bytes_per_step
    from ..train import build_convs
    torch.manual_seed(0)
    convs = build_convs(name, iognn.nn, x.size(1), args.hidden, num_classes, args.layers,
                        heads=args.heads)
    model = distribute(LayerStack(convs), graph, overlap).to(device)
    # One process trains the plain model (the baseline the speed-ups are over), several through
    # DistributedDataParallel.
    trained = model if dist.get_world_size() == 1 else data_parallel(model)
    optimizer = torch.optim.Adam(trained.parameters(), lr=0.01)
    times, sent = [], []
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    for step in range(args.warmup + args.epochs):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        dist.barrier()
        start, before = time.perf_counter(), graph.plan.bytes_sent
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(trained(x, graph.edge_index), y).backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
            sent.append(graph.plan.bytes_sent - before)
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0
    median = torch.tensor([statistics.median(times), float(sent[-1]), float(peak)],
                          dtype=torch.float64, device=device)
    slowest = median.clone()
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    dist.all_reduce(median[1:2])
    return {"model": name, "overlap": overlap, "step_ms": 1e3 * float(slowest[0]),
            "peak_mib_per_rank": float(slowest[2]) / 2**20,
            "bytes_per_step": int(median[1]),
            "bytes_expected": exchanged_bytes_per_step(model, halo_rows)}


def worker(args) -> None:
    """One rank of a torchrun job: every graph and model; rank 0 writes the rows."""
    import torch.distributed as dist

    from ..distributed import DistributedGraph
    from ..distributed.launch import init_group
    device = init_group(args)
    rows = []
    try:
        for spec in graph_specs(args):
            x, y, edge_index = load_graph_data(spec)
            start = time.perf_counter()
            part = shared_partition(spec, edge_index, x.size(0), args.partition)
            local = part.local(dist.get_rank())
            graph = DistributedGraph(local, device, dist.new_group())  # as train_full_graph
            setup_s = time.perf_counter() - start
            xs, ys = local.take(x).to(device), local.take(y).to(device)
            # one process exchanges nothing: its one row is the baseline of both modes
            overlaps = OVERLAP_MODES[args.overlap] if dist.get_world_size() > 1 else (False,)
            for name in args.models.split(","):
                for overlap in overlaps:
                    row = time_model(name, args, graph, xs, ys, int(y.max()) + 1,
                                     part.halo_rows, device, overlap)
                    rows.append({"graph": spec, "processes": dist.get_world_size(),
                                 "num_nodes": x.size(0), "num_edges": edge_index.size(1),
                                 "edge_cut": part.edge_cut, "halo_rows": part.halo_rows,
                                 "partition_s": setup_s, **row})
            del graph, xs, ys
    finally:
        if dist.get_rank() == 0:
            with open(args.worker_out, "w") as f:
                json.dump(rows, f)
        dist.destroy_process_group()


# ---- the driver: one torchrun job per process count ---------------------------------------
def process_counts(args) -> List[int]:
    if args.nproc:
        return [int(n) for n in args.nproc.split(",")]
    if args.device != "cpu" and torch.cuda.is_available():
        return [n for n in (1, 2, 4) if n <= torch.cuda.device_count()]
    return [1, 2]


def torchrun(nproc: int, module_args: List[str], timeout: float) -> None:
    from ..distributed.launch import CHILD_ENVIRONMENT
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node", str(nproc), *module_args]
    subprocess.run(command, check=True, timeout=timeout, env={**os.environ, **CHILD_ENVIRONMENT})


def graph_specs(args) -> List[str]:
    return [spec for spec in args.graphs.split(",") if spec]


def full_graph_rows(args, counts: List[int]) -> List[dict]:
    rows = []
    if not graph_specs(args):
        return rows
    passed = ["--graphs", args.graphs, "--models", args.models, "--device", args.device,
              "--layers", str(args.layers), "--hidden", str(args.hidden), "--heads",
              str(args.heads), "--epochs", str(args.epochs), "--warmup", str(args.warmup),
              "--partition", args.partition, "--overlap", args.overlap,
              "--dist-timeout", str(args.dist_timeout)]
    with tempfile.TemporaryDirectory() as folder:
        for n in counts:
            out = os.path.join(folder, f"rows{n}.json")
            torchrun(n, ["-m", "iognn.bench.distributed", *passed, "--worker-out", out],
                     args.dist_timeout)
            with open(out) as f:
                rows += json.load(f)
    return rows


def _time(row: dict) -> float:
    return row["step_ms"] if "step_ms" in row else row["epoch_s"]


def with_speedups(rows: List[dict]) -> List[dict]:
    """The rows with their speed-up over the one-process row of the same graph and model (None
    without one) and, for full-graph rows, whether the bytes agree."""
    one = {(r["graph"], r["model"]): _time(r) for r in rows if r["processes"] == 1}
    for r in rows:
        base = one.get((r["graph"], r["model"]))
        r["speedup"] = base / _time(r) if base else None
        if "bytes_per_step" in r:
            r["bytes_match"] = r["bytes_per_step"] == r["bytes_expected"]
    return rows


def minibatch_rows(args, counts: List[int]) -> List[dict]:
    """``iognn train --nproc N --loader neighbor``'s epoch per process count."""
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for n in counts:
            out = os.path.join(folder, f"minibatch{n}.json")
            torchrun(n, ["-m", "iognn", "train", "--loader", "neighbor", "--model", "sage",
                         "--dataset", args.minibatch_dataset, "--device", args.device,
                         "--hidden", "256",
                         "--epochs", "2", "--no-progress", "--json", out], args.dist_timeout)
            with open(out) as f:
                result = json.load(f)["results"][0]
            rows.append({"graph": args.minibatch_dataset, "model": "sage minibatch DDP",
                         "processes": n, "epoch_s": result["epoch_s"]})
    return rows


def row_key(row: dict) -> tuple:
    """What a row measured (rows of earlier benches, without an overlap, ran without it)."""
    return row["graph"], row["model"], row["processes"], row.get("overlap", False)


def format_rows(rows: List[dict]) -> str:
    from ..train import text_table
    header = ("graph", "model", "procs", "overlap", "step ms", "speed-up", "edge cut",
              "halo rows", "MiB moved/step", "= halo x row bytes", "peak MiB/rank")
    table = [(r["graph"], r["model"], str(r["processes"]),
              ("on" if r.get("overlap") else "off") if "step_ms" in r and r["processes"] > 1
              else "-",
              f"{r['step_ms']:.2f}" if "step_ms" in r else f"{1e3 * r['epoch_s']:.1f}",
              f"{r['speedup']:.2f}x" if r.get("speedup") else "-",
              f"{r['edge_cut']:,}" if "edge_cut" in r else "-",
              f"{r['halo_rows']:,}" if "halo_rows" in r else "-",
              f"{r['bytes_per_step'] / 2**20:.2f}" if "bytes_per_step" in r else "-",
              ("yes" if r["bytes_match"] else "NO") if "bytes_match" in r else "-",
              f"{r['peak_mib_per_rank']:,.0f}" if r.get("peak_mib_per_rank") else "-")
             for r in rows]
    return text_table(header, table, [
        "step ms: full-graph training step (forward + backward + DDP's all-reduce + Adam; one "
        "process: the plain model), median, slowest rank; minibatch rows: the epoch in ms",
        "overlap: HaloConv computed each layer's interior rows while its exchange ran",
        "peak MiB/rank: CUDA memory high-water mark of the steps, the largest rank's",
        "MiB moved/step: bytes sent by all ranks' halo exchanges per step (forward + backward)"])


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker_out:
        worker(args)
        return 0
    counts = process_counts(args)
    rows = full_graph_rows(args, counts)
    if args.minibatch:
        rows += minibatch_rows(args, counts)
    if args.json and os.path.exists(args.json):  # keep the earlier runs' other rows
        done = {row_key(r) for r in rows}
        with open(args.json) as f:
            rows = [r for r in json.load(f)["rows"] if row_key(r) not in done] + rows
    rows = with_speedups(rows)
    print(format_rows(rows))
    if args.json:
        machine = (torch.cuda.get_device_name(0) if args.device != "cpu"
                   and torch.cuda.is_available() else "cpu")
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "torch": torch.__version__, "config": vars(args),
                       "rows": rows}, f, indent=2)
    return 0 if all(r.get("bytes_match", True) for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
