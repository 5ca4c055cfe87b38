"""The single-head attention target's benchmark: the ``indegree:N:low:high`` graph spec (every
node's in-degree uniform in [low, high]) and the one command that times its op rows."""
from __future__ import annotations

import json

import pytest
import torch

import iognn.bench
from iognn.bench.cli import build_parser, config_from_args
from iognn.bench.graphs import check_spec, generate

# The command of the case (forward and forward + backward, both storage types, the single
# heads against the 4 x 32 and 8 x 16 shapes), less its device and output folder.
TARGET = ["--graphs", "indegree:200000:1:31", "--ops", "transformer,gat", "--level", "op",
          "--heads", "1,1,4,8", "--head-dim", "64,128,32,16", "--dtype", "fp32,bf16",
          "--mode", "fwdbwd"]


@pytest.mark.parametrize("low,high", [(1, 31), (0, 3), (5, 5)])
def test_indegree_spec(low, high):
    n = 2000
    edge_index, num_nodes = generate(f"indegree:{n}:{low}:{high}", seed=4)
    assert num_nodes == n and edge_index.dtype == torch.int64
    assert not bool((edge_index[0] == edge_index[1]).any()), "self-loops"
    keys = edge_index[0] * n + edge_index[1]
    assert bool((keys[1:] > keys[:-1]).all()), "edges must be unique and sorted by (source, target)"
    degree = torch.bincount(edge_index[1], minlength=n)
    # a repeated source costs a node one edge now and then (about high^2 / 2N of them)
    assert int(degree.max()) <= high and int(degree.min()) >= max(low - 1, 0)
    assert abs(float(degree.float().mean()) - (low + high) / 2) < 0.05 * high + 0.1
    again, _ = generate(f"indegree:{n}:{low}:{high}", seed=4)
    assert torch.equal(edge_index, again)


@pytest.mark.parametrize("spec", ["indegree:100:1", "indegree:100:1:2:3", "indegree:0:1:2",
                                  "indegree:100:-1:2"])
def test_indegree_spec_errors(spec):
    with pytest.raises(ValueError):
        check_spec(spec)


@pytest.mark.parametrize("spec", ["indegree:100:5:2", "indegree:100:1:100"])
def test_indegree_range_errors(spec):
    with pytest.raises(ValueError, match="indegree"):
        generate(spec)


def test_target_command_configuration():
    cfg = config_from_args(build_parser().parse_args(TARGET))
    assert cfg.graphs == ["indegree:200000:1:31"] and cfg.levels == ["op"]
    assert cfg.mode == "fwdbwd" and cfg.dtypes == ["fp32", "bf16"]
    labels = [w.label for w in cfg.workloads()]
    for op in ("transformer", "gat"):
        for shape in ("H1xC64", "H1xC128", "H4xC32", "H8xC16"):
            assert labels.count(f"{op}[{shape}]") == 2  # fp32 and bf16


def test_target_command_runs_on_a_small_graph(tmp_path):
    argv = [a.replace("indegree:200000:1:31", "indegree:300:1:31") for a in TARGET]
    argv = [a if a != "fp32,bf16" else "fp32" for a in argv]
    code = iognn.bench.main(argv + ["--device", "cpu", "--repeats", "1", "--no-progress",
                                    "--out", str(tmp_path)])
    assert code == 0
    rows = json.loads((tmp_path / "results.json").read_text())["results"]
    ours = [r for r in rows if r["impl"] == "iognn"]
    assert len(ours) == 8 and all(r["status"] == "ok" and r["check"] == "ok" for r in ours)
    assert all(r["fwd_ms"] > 0 and r["fwdbwd_ms"] > 0 for r in ours)
