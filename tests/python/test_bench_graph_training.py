"""``iognn bench --suite workloads --parts graph_training`` on the CPU at a tiny size: a GIN epoch
row per implementation with its loader / compute split, a skipped row for a missing dataset, the
markdown table and the option checks."""
import pytest

from iognn.bench import graph_training
from iognn.bench.cli import main as bench_main
from iognn.bench.workloads import WorkloadsConfig, markdown, run_workloads

TINY = dict(device="cpu", parts=("graph_training",), graph_training_datasets=["synthetic-graphs"],
            warmup=1, rounds=1, steps=1)


@pytest.fixture(autouse=True)
def small_model(iognn_cache, monkeypatch):
    monkeypatch.setattr(graph_training, "HIDDEN", 16)
    monkeypatch.setattr(graph_training, "LAYERS", 2)


def test_rows_of_the_part(tmp_path):
    # tu_nci1 is looked for in an empty folder: a skipped row
    config = WorkloadsConfig(**{**TINY, "graph_training_datasets": ["synthetic-graphs", "tu_nci1"],
                                "graph_training_epochs": 2, "data_dir": str(tmp_path)})
    *rows, skipped = run_workloads(config, log=lambda line: None)
    assert skipped.graph == "tu_nci1" and skipped.status.startswith("skipped")
    assert "dataset 'tu_nci1' not found" in skipped.status
    assert [(r.graph, r.workload, r.impl) for r in rows] == [
        ("synthetic-graphs", "GIN x2 h16 epoch", impl)
        for impl in ("iognn", "iognn+PyG loader", "pyg")]
    for row in rows:
        assert row.status == "ok", row
        assert row.part == "graph_training" and row.wall_ms > 0
        assert "loader" in row.note and "compute" in row.note
        assert "4 batches of 128 graphs" in row.note  # 480 training graphs
    assert "### graph_training" in markdown(rows)


def test_cli_runs_the_part(tmp_path, capsys):
    code = bench_main(["--suite", "workloads", "--parts", "graph_training", "--device", "cpu",
                       "--graph-training-datasets", "synthetic-graphs", "--warmup", "1",
                       "--repeats", "1", "--out", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "GIN x2 h16 epoch" in out and "3 rows, 0 errors" in out
    assert (tmp_path / "workloads.md").is_file()


def test_non_positive_epochs_are_rejected(capsys):
    with pytest.raises(SystemExit):
        bench_main(["--suite", "workloads", "--parts", "graph_training",
                    "--graph-training-epochs", "0"])
    assert "must be positive" in capsys.readouterr().err
