"""``python -m iognn.bench.rgcn``: RGCNConv / FastRGCNConv forward + backward, iognn against PyG.

One uniform random graph (``--nodes``, ``--degree``) with uniformly drawn edge types, for each R of
``--relations``: the layer (F_in = F_out = ``--feat``, ``aggr='mean'``, root weight and bias) is
run forward and backward on the same inputs and weights by iognn and by PyG. Each row gives the
median wall time of a step and, on CUDA, the step's peak memory above what was allocated before
it (graph, features and parameters excluded; the TypedGraph is built, and cached, in the warm-up).
``HeteroConv``: R ``SAGEConv`` relations into one node type (PyG's loop against iognn's fused
typed propagate). ``RGATConv``: ``RGAT_HEADS`` heads of ``F / RGAT_HEADS`` channels, concatenated
(output width F), across-relation additive attention (PyG's defaults), at the R of
``--relations`` up to ``RGAT_MAX_RELATIONS`` (PyG's layer gathers an ``F x F`` weight per edge).
A step that runs out of memory is a row with status ``oom``. ``--check`` compares the outputs.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from typing import List, Optional, Sequence

import torch

from .workloads import fwd_bwd, peak_mib, wall_time

LAYERS = ("RGCNConv", "FastRGCNConv", "HeteroConv", "RGATConv")
RGAT_HEADS = 4
RGAT_MAX_RELATIONS = 16


@dataclass
class RgcnRow:
    layer: str
    impl: str
    relations: int
    nodes: int
    edges: int
    feat: int
    wall_ms: Optional[float] = None
    peak_mb: Optional[float] = None
    status: str = "ok"


def typed_graph(nodes: int, degree: float, relations: int, device, seed: int):
    gen = torch.Generator().manual_seed(seed)
    edges = int(nodes * degree)
    edge_index = torch.randint(nodes, (2, edges), generator=gen)
    edge_type = torch.randint(relations, (edges,), generator=gen)
    return edge_index.to(device), edge_type.to(device)


class _RelationsAsHeteroConv(torch.nn.Module):
    """A HeteroConv of one SAGEConv per relation on one node type, called like an RGCN layer:
    each relation's edges are split off once (outside the timed steps)."""

    def __init__(self, conv, edge_index: torch.Tensor, edge_type: torch.Tensor, relations: int):
        super().__init__()
        self.conv = conv
        self.edges = {("n", f"r{r}", "n"): edge_index[:, edge_type == r] for r in range(relations)}

    def forward(self, x, edge_index=None, edge_type=None):
        return self.conv({"n": x}, self.edges)["n"]


def _layer_pair(name: str, feat: int, relations: int, device, edge_index, edge_type):
    import torch_geometric.nn as pyg_nn
    import iognn.nn as inn
    if name == "HeteroConv":  # R SAGEConv relations into one node type, summed
        pair = {impl: _RelationsAsHeteroConv(
            lib.HeteroConv({("n", f"r{r}", "n"): lib.SAGEConv(feat, feat)
                            for r in range(relations)}), edge_index, edge_type, relations)
            for impl, lib in (("pyg", pyg_nn), ("iognn", inn))}
    elif name == "RGATConv":
        pair = {impl: lib.RGATConv(feat, feat // RGAT_HEADS, relations, heads=RGAT_HEADS)
                for impl, lib in (("pyg", pyg_nn), ("iognn", inn))}
    else:
        pair = {impl: getattr(lib, name)(feat, feat, relations)
                for impl, lib in (("pyg", pyg_nn), ("iognn", inn))}
    pair["iognn"].load_state_dict(pair["pyg"].state_dict())
    return {impl: module.to(device) for impl, module in pair.items()}


def run(nodes: int = 50_000, degree: float = 10.0, relations: Sequence[int] = (4, 16, 128),
        feat: int = 128, layers: Sequence[str] = LAYERS, impls: Sequence[str] = ("iognn", "pyg"),
        device: str = "cuda", warmup: int = 2, rounds: int = 5, seed: int = 0,
        check: bool = False, log=print) -> List[RgcnRow]:
    dev = torch.device(device)
    rows: List[RgcnRow] = []
    for r in relations:
        edge_index, edge_type = typed_graph(nodes, degree, r, dev, seed)
        x = torch.randn(nodes, feat, generator=torch.Generator().manual_seed(seed)).to(dev)
        grad = torch.randn(nodes, feat, generator=torch.Generator().manual_seed(seed + 1)).to(dev)
        for name in layers:
            if name == "RGATConv" and r > RGAT_MAX_RELATIONS:
                continue
            torch.manual_seed(seed)
            modules = _layer_pair(name, feat, r, dev, edge_index, edge_type)
            outs = {}
            for impl in impls:
                row = RgcnRow(name, impl, r, nodes, edge_index.size(1), feat)
                step = fwd_bwd(modules[impl], (x, edge_index, edge_type), lambda out: grad)
                try:
                    step()  # builds the cached TypedGraph (iognn) before anything is measured
                    row.peak_mb = peak_mib(step, dev)
                    row.wall_ms = wall_time(step, dev, warmup, rounds, 1)
                    if check:
                        with torch.no_grad():
                            outs[impl] = modules[impl](x, edge_index, edge_type)
                except torch.OutOfMemoryError:
                    row.status = "oom"
                modules[impl].zero_grad(set_to_none=True)
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
                rows.append(row)
                log(format_row(row))
            if check and len(outs) == 2:
                torch.testing.assert_close(outs["iognn"], outs["pyg"], rtol=1e-3, atol=1e-3)
    return rows


def format_row(row: RgcnRow) -> str:
    wall = "-" if row.wall_ms is None else f"{row.wall_ms:.3f} ms"
    peak = "-" if row.peak_mb is None else f"{row.peak_mb:.1f} MiB"
    return (f"{row.layer:13s} R={row.relations:<4d} {row.impl:6s} {wall:>12s} {peak:>14s} "
            f"{row.status}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m iognn.bench.rgcn", description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--nodes", type=int, default=50_000)
    p.add_argument("--degree", type=float, default=10.0)
    p.add_argument("--relations", default="4,16,128")
    p.add_argument("--feat", type=int, default=128)
    p.add_argument("--layers", default=",".join(LAYERS))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--check", action="store_true", help="compare iognn's outputs with PyG's")
    p.add_argument("--json", help="write the rows to this file")
    args = p.parse_args(argv)
    rows = run(args.nodes, args.degree, [int(v) for v in args.relations.split(",")], args.feat,
               args.layers.split(","), device=args.device, rounds=args.rounds, check=args.check)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(row) for row in rows], f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
