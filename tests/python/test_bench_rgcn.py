"""``python -m iognn.bench.rgcn`` on the CPU at a tiny size: one row per (R, layer, impl) (RGATConv
up to its largest R), outputs checked against PyG."""
from __future__ import annotations

import json

from iognn.bench import rgcn


def test_tiny_run_and_cli(tmp_path):
    rows = rgcn.run(nodes=60, degree=3, relations=(2, 5, 20), feat=8, device="cpu", warmup=1,
                    rounds=1, check=True, log=lambda line: None)
    assert [(r.relations, r.layer, r.impl) for r in rows] == [
        (R, layer, impl) for R in (2, 5, 20) for layer in rgcn.LAYERS for impl in ("iognn", "pyg")
        if layer != "RGATConv" or R <= rgcn.RGAT_MAX_RELATIONS]
    assert {r.layer for r in rows} == set(rgcn.LAYERS)
    assert all(r.status == "ok" and r.wall_ms > 0 and r.peak_mb is None for r in rows)
    out = tmp_path / "rows.json"
    assert rgcn.main(["--device", "cpu", "--nodes", "40", "--degree", "2", "--relations", "3",
                      "--feat", "4", "--rounds", "1", "--layers", "RGCNConv",
                      "--json", str(out)]) == 0
    assert len(json.loads(out.read_text())) == 2
