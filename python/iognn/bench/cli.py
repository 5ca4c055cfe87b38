"""``iognn bench`` / ``python -m iognn.bench``: command-line entry point (``main(argv)``)."""
from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections import Counter
from typing import List, Optional, Sequence

from .cases import resolve_ops
from .graphs import check_spec
from .report import write_json, write_report
from .runner import Runner
from .suites import DTYPES, MODES, SUITES, suite_config


def _csv(text: str) -> List[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _ints(text: str) -> List[int]:
    return [int(t) for t in _csv(text)]


DESCRIPTION = ("Benchmark iognn ops and layers against PyTorch Geometric: time, peak memory, "
               "bytes floor and a correctness check per op, graph, dtype and implementation.")


# The workloads suite's options of one part: (WorkloadsConfig field, type, help).
PART_OPTIONS = (
    ("minibatch_graphs", _csv,
     "minibatch part: graphs (default: synthetic-products,amazon_computers)"),
    ("minibatch_scale", float,
     "minibatch part: scale of synthetic-products (default: 1 on a GPU, 0.01 on the host)"),
    ("minibatch_epochs", int,
     "minibatch part: timed epochs per implementation, the median reported (default: 1)"),
    ("graph_training_datasets", _csv,
     "graph_training part: graph datasets (default: tu_nci1,reddit10k)"),
    ("graph_training_epochs", int,
     "graph_training part: timed epochs per implementation, the median reported (default: 1)"),
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="iognn bench", description=DESCRIPTION)
    add_arguments(p)
    return p


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``iognn bench`` (also used by the ``iognn`` console command)."""
    p.add_argument("--suite", choices=sorted(SUITES) + ["workloads"], default="quick",
                   help="preset to start from; the options below override it (default: quick). "
                   "'workloads': whole training steps, layers, per-batch graphs and op rows on "
                   "small and mid-size graphs, wall time with the host included")
    p.add_argument("--parts", type=_csv, help="workloads suite: parts to run out of "
                   "steps,layers,batches,ops,minibatch,ggnn,graph_training (default: all)")
    for name, kind, text in PART_OPTIONS:
        p.add_argument("--" + name.replace("_", "-"), type=kind, help=f"workloads suite, {text}")
    p.add_argument("--compile-graphs", type=_csv, help="workloads suite: graphs that get the "
                   "torch.compile rows (default: cora,random:10000:200000; 'none' for none)")
    p.add_argument("--op-graphs", type=_csv, help="workloads suite: graphs of the op rows")
    p.add_argument("--graphs", type=_csv,
                   help="comma-separated graph specs: powerlaw:N:avgdeg[:exp], uniform:N:avgdeg, "
                   "grid:N[:shuffle], mesh3d:N[:shuffle], sbm:N:blocks:deg_in:deg_out, "
                   "rmat:scale:edgefactor, "
                   "batch:G:nodes:deg, or a dataset name (cora, amazon_photo, ...)")
    p.add_argument("--ops", type=_csv,
                   help="comma-separated ops (gcn, sage, gin, sum, mean, min, max, std, multi, gat, "
                   "gatv2, transformer), families (propagate, reduce, attention) or all")
    p.add_argument("--level", choices=("op", "layer", "both"), help="op level, layer level or both")
    p.add_argument("--feat", type=int, help="feature width F")
    p.add_argument("--heads", type=_ints,
                   help="attention heads H (comma list, paired with --head-dim)")
    p.add_argument("--head-dim", type=_ints, help="attention head width C (comma list)")
    p.add_argument("--dtype", type=_csv, help=f"comma-separated dtypes out of {sorted(DTYPES)}")
    p.add_argument("--mode", choices=MODES, help="fwd (inference) or fwdbwd (training step)")
    p.add_argument("--device", default="auto", help="auto (cuda when available), cpu, cuda or cuda:N")
    p.add_argument("--repeats", type=int, help="timed steps per measurement, at most")
    p.add_argument("--warmup", type=int, help="untimed steps first (at least 2 are run)")
    p.add_argument("--budget", type=float, dest="budget_s",
                   help="seconds one measurement may take (fewer repeats on slow steps)")
    p.add_argument("--threads", type=int, help="CPU threads for torch (default: torch's own choice)")
    p.add_argument("--seed", type=int, help="seed of graphs, inputs and parameters (default 0)")
    p.add_argument("--data", dest="data_dir", help="data folder of the real graphs "
                   "(default: $IOGNN_DATA, else ../shared/data beside the checkout)")
    p.add_argument("--out", default="bench-out", help="output folder (default: bench-out)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _attention_shapes(suite: str, heads: Optional[List[int]], head_dims: Optional[List[int]]):
    """(H, C) pairs: the lists are paired element-wise, a single value applies to every pair, and
    a missing one comes from the suite's first pair."""
    if heads is None and head_dims is None:
        return None
    if heads is None or head_dims is None:
        default_h, default_c = zip(*SUITES[suite]["attention"])
        heads = heads or [default_h[0]]
        head_dims = head_dims or [default_c[0]]
    if len(heads) != len(head_dims) and 1 not in (len(heads), len(head_dims)):
        raise ValueError("--heads and --head-dim must have the same length (or one value)")
    n = max(len(heads), len(head_dims))
    heads = heads * n if len(heads) == 1 else heads
    head_dims = head_dims * n if len(head_dims) == 1 else head_dims
    if min(heads + head_dims) <= 0:
        raise ValueError("--heads and --head-dim must be positive")
    return list(zip(heads, head_dims))


def config_from_args(args: argparse.Namespace):
    for spec in args.graphs or []:
        check_spec(spec)
    unknown = [v for v in args.dtype or [] if v not in DTYPES]
    if unknown:
        raise ValueError(f"--dtype: unknown dtype(s) {unknown}; expected {sorted(DTYPES)}")
    for name in ("feat", "repeats", "threads"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise ValueError(f"--{name} must be positive, got {value}")
    levels = {None: None, "both": ["op", "layer"]}.get(args.level, [args.level])
    return suite_config(
        args.suite, graphs=args.graphs, ops=None if args.ops is None else resolve_ops(args.ops),
        levels=levels, feat=args.feat,
        attention=_attention_shapes(args.suite, args.heads, args.head_dim),
        dtypes=args.dtype, mode=args.mode, device=args.device, repeats=args.repeats,
        warmup=args.warmup, budget_s=args.budget_s, seed=args.seed, data_dir=args.data_dir,
        threads=args.threads)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the benchmark; returns 0, or 1 when an iognn correctness check failed."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return run(args, argv)
    except ValueError as exc:
        parser.error(str(exc))


def run_workloads_suite(args: argparse.Namespace) -> int:
    from .workloads import PARTS, WorkloadsConfig, run_workloads, write
    parts = tuple(args.parts or PARTS)
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        raise ValueError(f"--parts: unknown part(s) {unknown}; expected {list(PARTS)}")
    config = WorkloadsConfig(device=args.device, parts=parts, graphs=args.graphs,
                             op_graphs=args.op_graphs, seed=args.seed or 0,
                             data_dir=args.data_dir)
    if args.compile_graphs is not None:
        config.compile_graphs = tuple(g for g in args.compile_graphs if g != "none")
    if args.warmup is not None:
        config.warmup = args.warmup
    if args.repeats is not None:
        config.steps = args.repeats
    for name, _, _ in PART_OPTIONS:
        value = getattr(args, name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value <= 0:
            raise ValueError(f"--{name.replace('_', '-')} must be positive, got {value}")
        if value is not None:
            setattr(config, name, value)
    rows = run_workloads(config, log=lambda line: print(line, flush=True))
    paths = write(rows, args.out, config)
    failed = [r for r in rows if r.status.startswith("error")]
    print(f"iognn bench --suite workloads: {len(rows)} rows, {len(failed)} errors")
    for kind, path in paths.items():
        print(f"  {kind}: {path}")
    return 1 if failed else 0


def run(args: argparse.Namespace, argv: Optional[Sequence[str]] = None) -> int:
    """Runs the benchmark described by parsed arguments (see :func:`main`)."""
    from .._tools import require_for_command
    require_for_command("iognn bench")  # the progress bar, the plots, the datasets' scipy pickles
    if args.suite == "workloads":
        return run_workloads_suite(args)
    argv = list(sys.argv[2:] if argv is None else argv)  # `iognn bench ...`: after the command
    runner = Runner(config_from_args(args), progress=not args.no_progress)
    os.makedirs(args.out, exist_ok=True)
    partial = os.path.join(args.out, "results.json")  # rewritten after each graph, then final
    report = runner.run(
        command=" ".join(["iognn bench"] + [shlex.quote(a) for a in argv]),
        checkpoint=lambda r: write_json(r, partial))
    paths = write_report(report, args.out)
    results = report["results"]
    statuses = Counter(r["status"] for r in results)
    failed = [r for r in results if r["check"] == "FAIL"]
    ours = [r for r in failed if r["impl"] == "iognn"]
    print(f"iognn bench: {len(results)} results on {report['device']['type']} "
          f"({', '.join(f'{k} {v}' for k, v in sorted(statuses.items()))}); failed checks: "
          f"{len(ours)} of iognn, {len(failed) - len(ours)} of other implementations; "
          f"{report['elapsed_s']} s")
    for r in ours:
        print(f"  FAIL {r['graph']} {r['label']} {r['level']} {r['dtype']}: "
              f"relative error {r['rel_error']:.3g} > {r['tolerance']:g}")
    for kind, path in paths.items():
        print(f"  {kind}: {path}")
    return 1 if ours else 0
