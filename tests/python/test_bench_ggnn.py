"""``iognn bench --suite workloads --parts ggnn`` on the CPU at a tiny size: the rows of both
layers for both implementations (outputs agreeing), the TypedGraph build row, the CLI, and the
typed GGNN's path rows on a TU set with bond types (a tiny copy in the TU format)."""
import pytest
import torch

from iognn.bench import ggnn
from iognn.bench.cli import main as bench_main
from iognn.bench.workloads import WorkloadsConfig, markdown, run_workloads
from test_train_graph import TINY_TU_EDGES, write_tiny_tu

TINY = dict(device="cpu", parts=("ggnn",), warmup=1, rounds=1, steps=1)


@pytest.fixture(autouse=True)
def tiny(monkeypatch):
    monkeypatch.setattr(ggnn, "HIDDEN", 16)
    monkeypatch.setattr(ggnn, "STEPS", 2)
    monkeypatch.setattr(ggnn, "EDGE_KINDS", 4)
    monkeypatch.setitem(ggnn.SIZES, "cpu", (2, 80, 120))


def test_rows_of_the_part():
    rows = run_workloads(WorkloadsConfig(**TINY), log=lambda line: None)
    assert [(r.workload, r.impl) for r in rows] == [
        ("GatedGraphConv L2 h16", "iognn"), ("GatedGraphConv L2 h16", "pyg"),
        ("typed GGNN T2 h16 R8", "iognn"), ("typed GGNN T2 h16 R8", "pyg"),
        ("TypedGraph build R8", "iognn")]
    for row in rows:
        assert row.status == "ok", row
        assert row.part == "ggnn" and row.graph.startswith("programs 2x[80,120]")
        assert row.wall_ms > 0
    for row in rows[:4]:
        diff = float(row.note.split("max |iognn - pyg| ")[1])
        assert diff < 1e-4, row
    assert "### ggnn" in markdown(rows)


def test_cli_runs_the_part(tmp_path, capsys):
    code = bench_main(["--suite", "workloads", "--parts", "ggnn", "--device", "cpu",
                       "--warmup", "1", "--repeats", "1", "--out", str(tmp_path)])
    assert code == 0
    assert "5 rows, 0 errors" in capsys.readouterr().out


def test_tu_batch_types_are_bonds_and_their_reverses(tmp_path, iognn_cache):
    bonds = write_tiny_tu(tmp_path / "tu_mutag", "MUTAG")
    x, edge_index, edge_type, ptr, label, kinds = ggnn.tu_batch(
        "tu_mutag", torch.device("cpu"), 0, tmp_path)
    assert kinds == 3 and label == "tu_mutag 2 graphs P3 N=8 E=12"
    assert x.shape == (8, ggnn.HIDDEN) and ptr.tolist() == [0, 4, 8]
    assert edge_index.size(1) == 2 * sum(len(graph) for graph in TINY_TU_EDGES)
    for (u, v), t in zip(edge_index.t().tolist(), edge_type.tolist()):
        assert t == bonds[(u, v)] + (kinds if u > v else 0)


def test_path_rows_on_tu_sets(tmp_path, iognn_cache, monkeypatch):
    write_tiny_tu(tmp_path / "tu_mutag", "MUTAG")  # no tu_ptc_mr: its row says skipped
    monkeypatch.setattr(ggnn, "DENSE_BATCHES", {"tu_mutag": (None, 16, 8),
                                                "tu_ptc_mr": (None, 16, 8)})
    monkeypatch.setattr(ggnn, "DENSE_PATH_DEVICES", ("cpu",))
    rows = run_workloads(WorkloadsConfig(**TINY, data_dir=str(tmp_path)), log=lambda line: None)
    dense_rows = rows[6:]  # after the calibration row
    workload = "typed GGNN T2 h16 R6 S16 b8"
    assert [(r.workload, r.impl) for r in dense_rows] == [
        (workload, "sparse"), (workload, "dense"), (workload, "auto"),
        ("supergraph packing S16 b8", "iognn"), ("typed GGNN T2 h16 S16 b8", "-")]
    for row in dense_rows[:4]:
        assert row.status == "ok" and row.graph.startswith("tu_mutag 2 graphs P3"), row
    for row in dense_rows[1:3]:
        assert float(row.note.split(f"max |{row.impl} - sparse| ")[1]) < 1e-4
    assert dense_rows[4].graph == "tu_ptc_mr"
    assert dense_rows[4].status.startswith("skipped: dataset 'tu_ptc_mr' not found")
