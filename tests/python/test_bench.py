"""The benchmark suite end to end on the CPU: report schema, checks, failure recording, CLI."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import iognn.bench
from iognn.bench import cases as bench_cases
from iognn.bench.cli import build_parser, config_from_args
from iognn.bench.floor import floor_bytes
from iognn.bench.prepared import PreparedGraph
from iognn.bench.graphs import generate

RESULT_FIELDS = {
    "graph", "op", "label", "family", "level", "dtype", "impl", "feat", "heads", "head_dim",
    "status", "message", "fwd_ms", "bwd_ms", "fwdbwd_ms", "iterations", "peak_mib",
    "floor_fwd_bytes", "floor_bwd_bytes", "floor_ms", "floor_fraction", "speedup", "speedup_fwd",
    "speedup_bwd", "speedup_fwdbwd", "memory_ratio", "check", "rel_error", "tolerance"}
# the quick suite trimmed to two small graphs (a skewed and a regular one) to stay fast in CI
QUICK = ["--suite", "quick", "--device", "cpu", "--graphs", "powerlaw:1500:6,grid:400",
         "--repeats", "3", "--threads", "1", "--no-progress"]


def run_bench(tmp_path: Path, *args: str):
    out = tmp_path / "out"
    code = iognn.bench.main([*args, "--out", str(out)])
    with open(out / "results.json") as f:
        return code, json.load(f), out


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    return run_bench(tmp_path_factory.mktemp("quick"), *QUICK)


def test_quick_suite_report_schema(quick):
    code, report, _ = quick
    assert code == 0
    assert report["schema_version"] == 1 and report["suite"] == "quick"
    assert report["command"].startswith("iognn bench --suite quick")
    assert report["device"]["type"] == "cpu" and report["device"]["bandwidth_gb_s"] > 0
    assert report["device"]["threads"] == 1
    for package in ("python", "torch", "torch_geometric", "iognn", "cuda", "numpy"):
        assert package in report["versions"]
    assert [g["spec"] for g in report["graphs"]] == ["powerlaw:1500:6", "grid:400"]
    for g in report["graphs"]:
        for key in ("num_nodes", "num_edges", "in_degree_max", "in_degree_mean", "in_degree_p99",
                    "out_degree_max", "isolated_nodes"):
            assert key in g
    assert report["graphs"][1]["num_nodes"] == 400 and report["graphs"][1]["in_degree_max"] == 4
    rows = report["results"]
    assert rows and all(set(r) == RESULT_FIELDS for r in rows)
    # every op of the suite, at both levels, on both graphs, with PyG as the first implementation
    groups = {(r["graph"], r["label"], r["level"], r["dtype"]) for r in rows}
    assert len(groups) == 2 * len(bench_cases.CASES) * 2
    for group in groups:
        impls = [r["impl"] for r in rows if (r["graph"], r["label"], r["level"], r["dtype"]) == group]
        assert impls[0] == "pyg" and impls[-1] == "iognn" and len(set(impls)) == len(impls)


def test_quick_suite_measures_and_checks(quick):
    _, report, _ = quick
    rows = report["results"]
    # on the CPU nothing may fail: an op is measured or (not merged yet) unavailable
    assert {r["status"] for r in rows} <= {"ok", "unavailable", "not_implemented"}, \
        [(r["label"], r["level"], r["impl"], r["message"]) for r in rows if r["status"] == "error"]
    for r in rows:
        if r["status"] != "ok":
            assert r["message"] and r["fwd_ms"] is None
            continue
        assert r["fwd_ms"] > 0 and r["bwd_ms"] > 0 and r["fwdbwd_ms"] > 0 and r["iterations"] >= 3
        assert r["peak_mib"] is None  # no peak memory on the CPU
        assert r["floor_fwd_bytes"] > 0 and r["floor_bwd_bytes"] > 0 and r["floor_fraction"] > 0
        assert r["speedup"] > 0
        if r["impl"] == "pyg":
            assert r["check"] == "ref" and r["speedup"] == pytest.approx(1.0)
            # checked against PyG's fp64 run: PyG's own fp32 rounding, for information
            assert 0 <= r["rel_error"] < 1e-3
        else:
            assert r["check"] == "ok", (r["label"], r["level"], r["impl"], r["rel_error"])
            assert r["rel_error"] <= r["tolerance"]
    # iognn's propagate op exists on every branch: it must have been measured and checked
    propagate = [r for r in rows if r["impl"] == "iognn" and r["family"] == "propagate"
                 and r["level"] == "op"]
    assert len(propagate) == 6 and all(r["check"] == "ok" for r in propagate)


@pytest.mark.parametrize("op", ["multi", "pna"])
def test_fused_reductions_have_the_separate_path_beside_them(quick, op):
    """multi: the four reductions one by one; pna: the fused reduction scaled afterwards."""
    _, report, out = quick
    rows = [r for r in report["results"] if r["op"] == op and r["level"] == "op"]
    assert rows
    for graph in {r["graph"] for r in rows}:
        impls = [r for r in rows if r["graph"] == graph]
        assert [r["impl"] for r in impls] == ["pyg", "iognn-separate", "iognn"]
        for r in impls[1:]:  # both iognn rows run and match PyG (outputs and gradients)
            assert r["status"] == "ok" and r["check"] == "ok", (r["impl"], r["message"])
            assert r["fwd_ms"] > 0 and r["bwd_ms"] > 0
    layer = [r for r in report["results"] if r["op"] == op and r["level"] == "layer"]
    assert [r["impl"] for r in layer if r["graph"] == rows[0]["graph"]] == ["pyg", "iognn"]
    assert all(r["check"] in ("ok", "ref") for r in layer), [r["message"] for r in layer]
    assert f"| {op} | op | fp32 | iognn-separate |" in (out / "results.md").read_text()


def test_quick_suite_writes_markdown_and_plots(quick):
    _, report, out = quick
    markdown = (out / "results.md").read_text()
    assert "| graph | op | level | dtype | impl | fwd ms |" in markdown
    assert markdown.count("\n| powerlaw:1500:6 | ") >= len(report["results"]) // 2
    for name in ("speedup.png", "memory.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _fake_impls(monkeypatch, op: str, extra: dict):
    """Replaces the op-level implementations of `op`: PyG's reference plus `extra`."""
    case = bench_cases.CASES[op]
    original = case.op_impls

    def impls(w):
        return {"pyg": original(w)["pyg"], **extra}
    monkeypatch.setattr(case, "op_impls", impls)


def test_failures_are_recorded_not_raised(tmp_path, monkeypatch):
    def oom(g, w, m):
        def fn(x):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")
        return fn

    def no_kernel(g, w, m):
        raise NotImplementedError("Could not run 'iognn::fake' with arguments from the 'CUDA' "
                                  "backend")

    def broken(g, w, m):
        return lambda x: x.sum(0) / 0 + torch.ones(3, 3) @ torch.ones(2, 2)

    def missing(g, w, m):  # an optional implementation that is not installed
        import iognn.ops.not_a_module  # noqa: F401

    _fake_impls(monkeypatch, "gin", {"oom": oom, "nie": no_kernel, "broken": broken,
                                     "missing": missing})
    code, report, _ = run_bench(tmp_path, "--device", "cpu", "--graphs", "uniform:200:4",
                                "--ops", "gin", "--level", "op", "--repeats", "3", "--no-progress")
    assert code == 0
    status = {r["impl"]: r for r in report["results"]}
    assert status["pyg"]["status"] == "ok" and status["pyg"]["fwd_ms"] > 0
    assert status["oom"]["status"] == "oom" and "out of memory" in status["oom"]["message"]
    assert status["nie"]["status"] == "not_implemented" and "CUDA" in status["nie"]["message"]
    assert status["broken"]["status"] == "error"
    assert status["broken"]["message"].startswith("RuntimeError")
    assert status["missing"]["status"] == "unavailable"
    for name in ("oom", "nie", "broken", "missing"):
        assert status[name]["fwd_ms"] is None and status[name]["speedup"] is None


def test_wrong_iognn_result_fails_the_check_and_the_exit_code(tmp_path, monkeypatch):
    _fake_impls(monkeypatch, "sum", {"iognn": lambda g, w, m: (
        lambda x: 1.01 * bench_cases._scatter(x.index_select(0, g.src), g.dst, g.num_nodes, "sum"))})
    code, report, out = run_bench(tmp_path, "--device", "cpu", "--graphs", "uniform:200:4",
                                  "--ops", "sum", "--level", "op", "--repeats", "3", "--no-progress")
    assert code == 1
    row = next(r for r in report["results"] if r["impl"] == "iognn")
    assert row["check"] == "FAIL" and row["rel_error"] == pytest.approx(0.01, rel=1e-3)
    assert "| FAIL |" in (out / "results.md").read_text()


def test_low_precision_runs_are_checked_against_fp32(tmp_path):
    code, report, _ = run_bench(tmp_path, "--device", "cpu", "--graphs", "uniform:300:4",
                                "--ops", "gin,max", "--dtype", "bf16", "--repeats", "3",
                                "--threads", "1", "--no-progress")
    assert code == 0
    measured = [r for r in report["results"] if r["status"] == "ok"]
    assert measured and all(r["dtype"] == "bf16" for r in measured)
    for r in measured:  # no row is its own reference: all compare with the fp32 PyG run
        assert r["check"] == "ok" and 0 <= r["rel_error"] <= r["tolerance"] == 3e-2


def test_forward_mode_has_no_backward(tmp_path):
    code, report, _ = run_bench(tmp_path, "--device", "cpu", "--graphs", "grid:100", "--ops", "gcn",
                                "--mode", "fwd", "--repeats", "3", "--no-progress")
    assert code == 0
    measured = [r for r in report["results"] if r["status"] == "ok"]
    assert measured
    for r in measured:
        assert r["fwd_ms"] > 0 and r["bwd_ms"] is None and r["fwdbwd_ms"] is None
        assert r["floor_bwd_bytes"] is None and r["speedup"] == r["speedup_fwd"]


def test_missing_real_graph_is_skipped(tmp_path):
    code, report, _ = run_bench(tmp_path, "--device", "cpu", "--graphs", "cora,grid:64",
                                "--data", str(tmp_path / "nowhere"), "--ops", "gin", "--level", "op",
                                "--repeats", "3", "--no-progress")
    assert code == 0
    assert [s["spec"] for s in report["skipped_graphs"]] == ["cora"]
    assert {r["graph"] for r in report["results"]} == {"grid:64"}


@pytest.mark.parametrize("args", [["--dtype", "fp8"], ["--ops", "gcn,conv"], ["--suite", "huge"],
                                  ["--feat", "0"], ["--heads", "1,2,3", "--head-dim", "4,5"],
                                  ["--level", "kernel"], ["--graphs", "uniform:10"],
                                  ["--device", "tpu"]])
def test_cli_rejects_bad_arguments(args, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        iognn.bench.main(["--device", "cpu", *args, "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "error" in capsys.readouterr().err


def test_cli_configuration():
    parse = lambda *a: config_from_args(build_parser().parse_args(list(a)))  # noqa: E731
    full = parse("--suite", "full")
    assert full.feat == 128 and full.dtypes == ["fp32", "bf16"] and full.mode == "fwdbwd"
    assert full.attention == [(4, 32), (8, 16)]
    assert {"powerlaw:1000000:16", "uniform:1000000:16", "grid:1000000",
            "tolokers"} <= set(full.graphs)
    cfg = parse("--ops", "attention,gcn", "--heads", "4,8", "--head-dim", "16", "--level", "layer")
    assert cfg.ops == ["gat", "gatv2", "transformer", "gcn"] and cfg.levels == ["layer"]
    assert cfg.attention == [(4, 16), (8, 16)]
    labels = {w.label for w in cfg.workloads()}
    assert labels == {"gat[H4xC16]", "gat[H8xC16]", "gatv2[H4xC16]", "gatv2[H8xC16]",
                      "transformer[H4xC16]", "transformer[H8xC16]", "gcn"}


def test_floor_bytes_of_propagate():
    edge_index, n = generate("grid:100", seed=0)
    g = PreparedGraph("grid:100", edge_index, n, torch.device("cpu"))
    e, f = g.num_edges, 16
    w = bench_cases.Workload("gin", "op", torch.float32, f)
    csr = 4 * e + 4 * (n + 1)
    assert floor_bytes(w, g) == (e * f * 4 + n * f * 4 + csr,) * 2
    gcn = bench_cases.Workload("gcn", "op", torch.bfloat16, f)
    e_loops = e + n  # GCN adds a loop per node
    fwd = e_loops * f * 2 + n * f * 2 + 4 * e_loops + 4 * (n + 1) + 4 * e_loops
    assert floor_bytes(gcn, g) == (fwd, fwd + 4 * e_loops)
    layer = bench_cases.Workload("gcn", "layer", torch.bfloat16, f)
    assert floor_bytes(layer, g) == (fwd + n * 2 * f * 2, fwd + 4 * e_loops + n * 4 * f * 2)
