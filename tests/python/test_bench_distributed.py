"""``python -m iognn.bench.distributed`` on tiny graphs with gloo CPU processes: every row is
reported, and the bytes the exchange plans counted equal the halo rows times the row bytes."""
from __future__ import annotations

import json

from iognn.bench import distributed


def test_bench_rows_on_one_and_two_processes(tmp_path, capsys, monkeypatch):
    """Run in two parts (one process, then two with and without the overlap) into one JSON
    file, as on a machine whose commands have a time limit; the second part reuses nothing but
    the file."""
    monkeypatch.setenv("IOGNN_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "rows.json"
    for nproc in ("1", "2"):
        status = distributed.main([
            "--graphs", "sbm:300:4:8:1,uniform:300:8", "--models", "gcn,gat", "--device",
            "cpu", "--nproc", nproc, "--epochs", "2", "--warmup", "1", "--hidden", "8",
            "--heads", "2", "--layers", "2", "--overlap", "both", "--json", str(out)])
        assert status == 0
    rows = json.loads(out.read_text())["rows"]
    assert {(r["graph"], r["model"], r["processes"]) for r in rows} == {
        (g, m, p) for g in ("sbm:300:4:8:1", "uniform:300:8") for m in ("gcn", "gat")
        for p in (1, 2)}
    assert sorted((r["processes"], r["overlap"]) for r in rows) == sorted(
        [(1, False)] * 4 + [(2, False), (2, True)] * 4)
    for r in rows:
        assert r["bytes_match"] and r["speedup"] > 0
        assert (r["halo_rows"] > 0) == (r["processes"] > 1)
        assert (r["bytes_per_step"] > 0) == (r["processes"] > 1)
    # the SBM's blocks cut fewer edges than the uniform graph
    cut = {r["graph"]: r["edge_cut"] for r in rows if r["processes"] == 2}
    assert cut["sbm:300:4:8:1"] < cut["uniform:300:8"]
    assert "halo rows" in capsys.readouterr().out
    assert len(list((tmp_path / "cache").glob("parts-*-2-metis.pt"))) == 2


def test_speedups_and_bytes_check():
    rows = distributed.with_speedups([
        {"graph": "g", "model": "gcn", "processes": 1, "step_ms": 10.0, "bytes_per_step": 0,
         "bytes_expected": 0},
        {"graph": "g", "model": "gcn", "processes": 2, "step_ms": 4.0, "bytes_per_step": 8,
         "bytes_expected": 9},
        {"graph": "p", "model": "sage minibatch DDP", "processes": 2, "epoch_s": 1.0}])
    assert [r["speedup"] for r in rows] == [1.0, 2.5, None]
    assert [r.get("bytes_match") for r in rows] == [True, False, None]
    assert "NO" in distributed.format_rows(rows)


def test_graph_data_of_a_spec():
    x, y, edge_index = distributed.load_graph_data("uniform:50:4")
    assert x.shape == (50, distributed.FEATURES) and y.max() < distributed.CLASSES
    assert edge_index.size(0) == 2 and int(edge_index.max()) < 50
