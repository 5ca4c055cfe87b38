"""``iognn bench --suite workloads --parts minibatch`` on the CPU at a tiny scale: sampler rows
with a rate, the sampled-batch Graph build, an epoch per implementation with its split, a skipped
row for a missing real graph, the markdown table and the option checks."""
import pytest

from iognn.bench import minibatch
from iognn.bench.cli import main as bench_main
from iognn.bench.workloads import WorkloadsConfig, markdown, run_workloads

TINY = dict(device="cpu", parts=("minibatch",), minibatch_graphs=["synthetic-products"],
            minibatch_scale=0.002, warmup=1, rounds=1, steps=1)


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("IOGNN_CACHE", str(tmp_path_factory.getbasetemp() / "iognn-cache"))
    monkeypatch.setattr(minibatch, "HIDDEN", 16)


def test_rows_of_the_part():
    rows = run_workloads(WorkloadsConfig(**TINY), log=lambda line: None)
    got = {(r.workload, r.impl) for r in rows}
    assert got == {("sample [15, 10, 5] x1024, cpu int64", "iognn"),
                   ("sample [15, 10, 5] x1024, cpu int32", "iognn"),
                   ("Graph build, sampled batch", "iognn"),
                   ("SAGE x3 h16 epoch", "iognn"), ("SAGE x3 h16 epoch", "pyg")}
    for row in rows:
        assert row.status == "ok", row
        assert row.graph == "synthetic-products:0.002" and row.part == "minibatch"
        assert row.wall_ms > 0
        if row.workload.startswith("sample"):
            assert row.rate > 0
        if row.workload.endswith("epoch"):
            assert "sampling" in row.note and "compute" in row.note and "1 batches" in row.note
    epochs = [r for r in rows if r.workload.endswith("epoch")]
    assert epochs[0].note.split("; ")[1] == epochs[1].note.split("; ")[1]  # the same batches
    table = markdown(rows)
    assert "### minibatch" in table and "M/s" in table


def test_missing_real_graph_is_a_skipped_row(tmp_path):
    config = WorkloadsConfig(**{**TINY, "minibatch_graphs": ["amazon_computers"],
                                "data_dir": str(tmp_path)})
    (row,) = run_workloads(config, log=lambda line: None)
    assert row.status.startswith("skipped") and "amazon_computers" in row.status


def test_cli_runs_the_part(tmp_path, capsys):
    code = bench_main(["--suite", "workloads", "--parts", "minibatch", "--device", "cpu",
                       "--minibatch-graphs", "synthetic-products", "--minibatch-scale", "0.002",
                       "--warmup", "1", "--repeats", "1", "--out", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "SAGE x3 h16 epoch" in out and "5 rows, 0 errors" in out
    assert (tmp_path / "workloads.md").is_file()


@pytest.mark.parametrize("option", ["--minibatch-scale", "--minibatch-epochs"])
def test_non_positive_options_are_rejected(capsys, option):
    with pytest.raises(SystemExit):
        bench_main(["--suite", "workloads", "--parts", "minibatch", option, "0"])
    assert "must be positive" in capsys.readouterr().err
