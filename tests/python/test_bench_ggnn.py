"""``iognn bench --suite workloads --parts ggnn`` on the CPU at a tiny size: the rows of both
layers for both implementations (outputs agreeing), the TypedGraph build row, the CLI."""
import pytest

from iognn.bench import ggnn
from iognn.bench.cli import main as bench_main
from iognn.bench.workloads import WorkloadsConfig, markdown, run_workloads

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
