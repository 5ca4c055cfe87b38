"""``iognn bench --suite workloads`` on the CPU: every part yields rows for each implementation with
a wall time, the reports are written, a failing step becomes an error row, and the command line
validates its options. (Kernel times and launches exist on CUDA only: gpu runs.)"""
import json

import pytest
import torch

from iognn.bench import workloads
from iognn.bench.cli import main as bench_main
from iognn.bench.workloads import WorkloadsConfig, run_workloads, write

SMALL = WorkloadsConfig(device="cpu", graphs=["random:300:1500"], compile_graphs=(), warmup=1,
                        rounds=1, steps=1)


@pytest.fixture(scope="module")
def rows():
    config = WorkloadsConfig(**{**SMALL.__dict__, "parts": ("steps", "layers")})
    return run_workloads(config, log=lambda line: None)


def test_steps_and_layers_have_every_implementation(rows):
    steps = {(r.workload, r.impl) for r in rows if r.part == "steps"}
    assert steps == {(f"{m} step", i) for m in workloads.MODELS
                     for i in ("pyg", "iognn", "iognn captured")}
    layers = {(r.workload, r.impl) for r in rows if r.part == "layers"}
    assert layers == {(f"{name} fwd+bwd", i) for name in workloads.LAYERS for i in ("pyg", "iognn")}
    for row in rows:
        assert row.status == "ok", row
        assert row.wall_ms > 0 and row.kernel_ms is None and row.launches is None


def test_reports_are_written(rows, tmp_path, monkeypatch):
    monkeypatch.setenv("IOGNN_AB_LABEL", "base (round 1)")
    paths = write(rows, str(tmp_path), SMALL)
    assert paths["json"].endswith("workloads-base__round_1_.json")
    report = json.loads(open(paths["json"]).read())
    assert len(report["rows"]) == len(rows) and report["device"]["type"] == "cpu"
    table = open(paths["markdown"]).read()
    assert "### steps" in table and "### layers" in table and "iognn captured" in table


def test_batches_and_ops_parts(monkeypatch):
    monkeypatch.setattr(workloads, "BLOCK", dict(num_dst=64, fanout=3, num_src=500, feat=8))
    config = WorkloadsConfig(**{**SMALL.__dict__, "parts": ("batches",)})
    got = run_workloads(config, log=lambda line: None)
    assert {(r.workload, r.impl) for r in got} == {
        (f"{layer} build+fwd+bwd", impl) for layer in ("SAGEConv", "GATConv")
        for impl in ("pyg", "iognn")} | {("SAGEConv build+fwd+bwd", "iognn deferred")} | {
        (f"Graph build, {order}", "iognn") for order in workloads.BUILD_ORDERS}
    assert all(r.status == "ok" and r.wall_ms > 0 for r in got)


def test_gin_steps_run_on_the_compile_graphs_only(monkeypatch):
    monkeypatch.setattr(workloads, "MODELS", ())
    config = WorkloadsConfig(**{**SMALL.__dict__, "parts": ("steps",),
                                "graphs": ["random:300:1500", "random:200:900"],
                                "compile_graphs": ("random:200:900",)})
    # The compiled variants cost seconds each on the CPU: keep the eager ones.
    real = workloads.training_steps
    monkeypatch.setattr(workloads, "training_steps",
                        lambda g, m, d, dd, s, compiled: real(g, m, d, dd, s, False))
    got = run_workloads(config, log=lambda line: None)
    assert {(r.graph, r.workload) for r in got} == {("random:200:900", "gin step")}
    assert all(r.status == "ok" and r.wall_ms > 0 for r in got)


def test_gin_model_equals_pyg():
    import torch_geometric.nn as pyg_nn
    import iognn.nn as io_nn
    x = torch.randn(50, 12)
    edge_index = torch.randint(0, 50, (2, 200))
    outs = []
    for lib in (pyg_nn, io_nn):
        torch.manual_seed(0)
        model = workloads.TwoLayer(lib, "gin", 12, 4).eval()
        outs.append(model(x, edge_index))
    torch.testing.assert_close(outs[1], outs[0])


def test_a_failing_step_is_an_error_row(monkeypatch):
    def broken(*args, **kwargs):
        def step():
            raise RuntimeError("boom")
        return {"iognn": step}
    monkeypatch.setattr(workloads, "layer_steps", broken)
    config = WorkloadsConfig(**{**SMALL.__dict__, "parts": ("layers",)})
    got = run_workloads(config, log=lambda line: None)
    assert got and all(r.status.startswith("error: RuntimeError: boom") for r in got)


def test_missing_dataset_is_skipped(tmp_path):
    config = WorkloadsConfig(**{**SMALL.__dict__, "parts": ("ops",), "op_graphs": ["cora"],
                                "data_dir": str(tmp_path)})
    got = run_workloads(config, log=lambda line: None)
    assert len(got) == 1 and got[0].status.startswith("skipped")


def test_command_line(tmp_path):
    with pytest.raises(SystemExit):
        bench_main(["--suite", "workloads", "--parts", "steps,nope", "--out", str(tmp_path)])
    assert bench_main(["--suite", "workloads", "--device", "cpu", "--parts", "layers",
                       "--graphs", "random:200:800", "--repeats", "1", "--warmup", "1",
                       "--out", str(tmp_path), "--no-progress"]) == 0
    assert (tmp_path / "workloads.md").exists()
    assert torch.cuda.is_available() or "GCNConv" in (tmp_path / "workloads.md").read_text()
