"""``python -m iognn.bench.distributed`` on tiny graphs with gloo CPU processes: every row is
reported, and the bytes the exchange plans counted equal the halo rows times the row bytes."""
from __future__ import annotations

import json

from iognn.bench import distributed


def test_bench_rows_on_one_and_two_processes(tmp_path, capsys):
    out = tmp_path / "rows.json"
    status = distributed.main(["--graphs", "sbm:300:4:8:1,uniform:300:8", "--models", "gcn,gat",
                               "--device", "cpu", "--nproc", "1,2", "--epochs", "2",
                               "--warmup", "1", "--hidden", "8", "--heads", "2", "--layers", "2",
                               "--json", str(out)])
    assert status == 0
    rows = json.loads(out.read_text())["rows"]
    assert {(r["graph"], r["model"], r["processes"]) for r in rows} == {
        (g, m, p) for g in ("sbm:300:4:8:1", "uniform:300:8") for m in ("gcn", "gat")
        for p in (1, 2)}
    for r in rows:
        assert r["bytes_match"] and r["speedup"] > 0
        assert (r["halo_rows"] > 0) == (r["processes"] > 1)
        assert (r["bytes_per_step"] > 0) == (r["processes"] > 1)
    # the SBM's blocks cut fewer edges than the uniform graph
    cut = {r["graph"]: r["edge_cut"] for r in rows if r["processes"] == 2}
    assert cut["sbm:300:4:8:1"] < cut["uniform:300:8"]
    assert "halo rows" in capsys.readouterr().out


def test_graph_data_of_a_spec():
    x, y, edge_index = distributed.load_graph_data("uniform:50:4")
    assert x.shape == (50, distributed.FEATURES) and y.max() < distributed.CLASSES
    assert edge_index.size(0) == 2 and int(edge_index.max()) < 50
