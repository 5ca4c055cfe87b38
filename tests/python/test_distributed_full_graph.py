"""Full-graph training on 2 and 4 processes (gloo; NCCL on as many GPUs as are visible): the
partitioned GCN / SAGE / GAT / GIN models' outputs and gradients equal the one-process model's;
``iognn train --nproc 2`` trains and reports; a failing rank and mismatching partitions give clear
errors within the timeout."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import iognn.nn
from distributed_ranks import WORLDS_AND_BACKENDS, rank_device, rank_outcomes, run_ranks
from iognn.cli import build_parser
from iognn.distributed import DistributedGraph, distribute, partition
from iognn.distributed.full_graph import check_partitions_agree, exchanged_bytes_per_step
from iognn.train import build_model, resolve_task

MODELS = ("gcn", "sage", "gat", "gin")
METHODS = ("metis", "random")
ROOT = Path(__file__).resolve().parents[2]


def make_graph(num_nodes: int = 40, num_edges: int = 160, features: int = 6):
    """A random graph with duplicate edges, self-loops and an isolated node, its features and a
    fixed output gradient."""
    g = torch.Generator().manual_seed(7)
    edge_index = torch.randint(0, num_nodes - 1, (2, num_edges), generator=g)  # node N-1 isolated
    loops = torch.arange(0, num_nodes - 1, 5).repeat(2, 1)
    edge_index = torch.cat([edge_index, edge_index[:, :12], loops], dim=1)
    return edge_index, torch.randn(num_nodes, features, generator=g)


def make_model(name: str, features: int, hidden: int = 8, classes: int = 3):
    torch.manual_seed(0)
    return build_model(name, iognn.nn, features, hidden, classes, heads=2, dropout=0.0)


def layers_rank(rank, world, edge_index, x, grad_out, backend, models, hidden):
    """Per method and model: this rank's owned ids, output rows and (unreduced) parameter
    gradients of ``(out * grad_out[owned]).sum()``, the bytes its exchanges moved and the
    partition's halo rows."""
    device = rank_device(backend, rank)
    results = {}
    for method in METHODS:
        part = partition(edge_index, world, method, num_nodes=x.size(0), seed=0)
        local = part.local(rank)
        graph = DistributedGraph(local, device)
        for name in models:
            model = distribute(make_model(name, x.size(1), hidden, grad_out.size(1)),
                               graph).to(device)
            with torch.no_grad():  # GCN's first call also exchanges the degrees, once
                model(local.take(x).to(device), graph.edge_index)
            sent = graph.plan.bytes_sent
            out = model(local.take(x).to(device), graph.edge_index)
            (out * local.take(grad_out).to(device)).sum().backward()
            results[method, name] = dict(
                owned=local.owned_nodes, out=out.detach(),
                grads={k: p.grad for k, p in model.named_parameters()},
                sent=graph.plan.bytes_sent - sent, halo_rows=part.halo_rows,
                expected=exchanged_bytes_per_step(model, part.halo_rows))
    return results


def check_layers(world: int, backend: str, models=MODELS, widths=(6, 8, 3)):
    """The partitioned models of ``widths`` (input, hidden, output) against one process; returns
    the ranks' results."""
    features, hidden, classes = widths
    edge_index, x = make_graph(features=features)
    grad_out = torch.randn(x.size(0), classes, generator=torch.Generator().manual_seed(3))
    ranks = run_ranks(layers_rank, world, edge_index, x, grad_out, backend, models, hidden,
                      backend=backend)
    for name in models:
        model = make_model(name, x.size(1), hidden, classes)
        out = model(x, edge_index)
        (out * grad_out).sum().backward()
        for method in METHODS:
            got = [r[method, name] for r in ranks]
            for r in got:
                torch.testing.assert_close(r["out"].cpu(), out[r["owned"]].detach())
            for key, p in model.named_parameters():
                total = sum(r["grads"][key.replace("conv1.", "conv1.conv.")
                                       .replace("conv2.", "conv2.conv.")].cpu() for r in got)
                torch.testing.assert_close(total, p.grad, msg=f"{name} {method} {key}")
            # the bytes measured by the plans are the cut's halo rows times the rows' bytes
            assert sum(r["sent"] for r in got) == got[0]["expected"] > 0
    return ranks


@pytest.mark.parametrize("world, backend", WORLDS_AND_BACKENDS)
def test_layers_match_one_process(world, backend):
    check_layers(world, backend)


def test_the_narrower_rows_are_exchanged():
    """8 -> 16 -> 4: GCN's and SAGE's first layer exchanges x (8 wide, no gradient back, as the
    input needs none), the second its projection (4 wide, gradients back), not the 16-wide
    rows; results still equal one process."""
    ranks = check_layers(2, "gloo", ("gcn", "sage"), widths=(8, 16, 4))
    for method in METHODS:
        for name in ("gcn", "sage"):
            got = ranks[0][method, name]
            assert got["expected"] == got["halo_rows"] * 4 * (8 + 2 * 4)


def test_one_part_is_the_one_process_model():
    """With one part the local graph is the whole graph (renumbered): same rows, no exchange."""
    edge_index, x = make_graph()
    part = partition(edge_index, 1, "random", num_nodes=x.size(0))
    local = part.local(0)
    graph = DistributedGraph(local)
    for name in MODELS:
        want = make_model(name, x.size(1))(x, edge_index)
        got = distribute(make_model(name, x.size(1)), graph)(local.take(x), graph.edge_index)
        torch.testing.assert_close(got, want[local.owned_nodes])


def test_halo_conv_errors():
    edge_index, x = make_graph()
    local = partition(edge_index, 1, "random", num_nodes=x.size(0)).local(0)
    graph = DistributedGraph(local)
    conv = distribute(iognn.nn.GCNConv(6, 4), graph)
    with pytest.raises(ValueError, match="local graph"):
        conv(x, edge_index[:, :5])
    with pytest.raises(ValueError, match="owns"):
        conv(x[:3])
    with pytest.raises(NotImplementedError, match="edge weights"):
        conv(x, graph.edge_index, torch.ones(graph.edge_index.size(1)))
    assert conv(x, graph.edge_index, None).shape == (x.size(0), 4)
    with pytest.raises(NotImplementedError, match="edge_dim"):
        distribute(iognn.nn.GATConv(6, 4, edge_dim=2), graph)(x)
    with pytest.raises(TypeError, match="iognn layers"):
        from iognn.distributed import HaloConv
        HaloConv(torch.nn.Linear(2, 2), graph)


def train_args(*argv):
    args = build_parser().parse_args(["train", *argv])
    resolve_task(args)
    return args


def failing_rank(rank, world, how):
    """Rank 1 fails while loading (raises, or is stuck); rank 0 goes on into training and must
    give up in time with a clear error."""
    if rank == 1:
        if how == "raises":
            raise RuntimeError("rank 1 cannot read its data")
        time.sleep(8)
        return None
    from iognn.distributed.full_graph import train_full_graph
    start = time.perf_counter()
    try:
        train_full_graph(train_args("--nproc", "2", "--device", "cpu", "--epochs", "1",
                                    "--dist-timeout", "5"))
    except RuntimeError as error:
        return str(error), time.perf_counter() - start
    return None, time.perf_counter() - start


@pytest.mark.parametrize("how", ["raises", "stuck"])
def test_failing_rank_stops_the_others(how):
    (ok0, (message, seconds)), (ok1, other) = rank_outcomes(failing_rank, 2, how, timeout=5)
    assert ok0 and ok1 == (how == "stuck")
    assert how == "stuck" or "cannot read its data" in other
    assert message is not None and "stopped waiting for the other ranks" in message, message
    if how == "stuck":  # gloo's monitored barrier names the rank
        assert "Ranks 1 failed" in message, message
    assert seconds < 30


def mismatching_rank(rank, world):
    edge_index, x = make_graph()
    part = partition(edge_index, world, "metis" if rank == 0 else "random",
                     num_nodes=x.size(0), seed=0)
    check_partitions_agree(part)


def test_mismatching_partitions_raise_on_every_rank():
    outcomes = rank_outcomes(mismatching_rank, 2, timeout=20)
    for ok, trace in outcomes:
        assert not ok and "partitions differ" in trace


def train_through_torchrun(tmp_path, nproc: int, device: str, model: str,
                           overlap: bool) -> tuple:
    """``iognn train --nproc`` (``--overlap`` or ``--no-overlap``) in a subprocess: (the report,
    its standard output)."""
    report_path = tmp_path / "report.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), IOGNN_CACHE=str(tmp_path / "cache"))
    run = subprocess.run([sys.executable, "-m", "iognn", "train", "--nproc", str(nproc),
                          "--device", device, "--epochs", "3", "--model", model, "--no-progress",
                          "--partition", "random", "--json", str(report_path),
                          "--overlap" if overlap else "--no-overlap"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    report = json.loads(report_path.read_text())
    assert report["world_size"] == nproc and len(report["epoch_times_ms"]) == 3
    assert report["bytes_exchanged_per_epoch"] == report["bytes_expected_per_epoch"] > 0
    assert report["partition"]["method"] == "random" and report["overlap"] == overlap
    return report, run.stdout


def test_train_nproc_2_through_torchrun(tmp_path):
    report, stdout = train_through_torchrun(tmp_path, 2, "cpu", "sage", overlap=True)
    assert "iognn x2" in stdout and "halo rows" in stdout and "overlapped" in stdout


@pytest.mark.cuda
@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("model", ["gcn", "sage", "gat"])
def test_train_nproc_on_the_visible_gpus(tmp_path, model, overlap):
    nproc = min(torch.cuda.device_count(), 4)
    if nproc < 2:
        pytest.skip(f"needs 2 GPUs, {nproc} visible")
    report, _ = train_through_torchrun(tmp_path, nproc, "cuda", model, overlap)
    assert report["config"]["device"] == "cuda" and 0 <= report["results"][0]["test_acc"] <= 1


@pytest.mark.parametrize("argv", [["--task", "graph"], ["--compare", "pyg"]])
def test_train_nproc_rejects(argv, capsys):
    args = build_parser().parse_args(["train", "--nproc", "2", *argv])
    with pytest.raises(SystemExit):
        args.run(args)
    assert "--nproc" in capsys.readouterr().err


def test_command_line_for_torchrun():
    from iognn.distributed.launch import command_line
    for overlap in ("--overlap", "--no-overlap"):  # either value passes on, whatever the default
        chosen = train_args(overlap)
        assert overlap in command_line(chosen.argument_parser, chosen)
    default = train_args()
    assert not any("overlap" in a for a in command_line(default.argument_parser, default))
    args = train_args("--nproc", "2", "--model", "gat", "--num-neighbors", "5,5",
                      "--no-progress", "--json", "out.json")
    argv = command_line(args.argument_parser, args)
    assert "--nproc" not in argv
    for option in (["--model", "gat"], ["--num-neighbors", "5,5"], ["--json", "out.json"]):
        assert argv[argv.index(option[0]) + 1] == option[1]
    assert "--no-progress" in argv
    again = train_args(*argv)
    assert {k: v for k, v in vars(again).items() if k not in ("nproc", "argument_parser",
                                                               "usage_error", "run")} == \
        {k: v for k, v in vars(args).items() if k not in ("nproc", "argument_parser",
                                                          "usage_error", "run")}


class _TakesEdges(torch.nn.Module):
    """A model called like a full-graph one: it keeps the edge_index it was given."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)
        self.seen = None

    def forward(self, x, edge_index):
        self.seen = edge_index
        return self.lin(x)


def test_data_parallel_leaves_the_inputs_where_they_are(tmp_path):
    """Full-graph DDP has no device_ids: with them DDP copies every call's tensor arguments (the
    host-side graph.edge_index among them) to the device each step."""
    import torch.distributed as dist
    from iognn.distributed import data_parallel
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0,
                            world_size=1)
    try:
        model = data_parallel(_TakesEdges())
        assert model.device_ids is None
        edge_index = torch.zeros(2, 5, dtype=torch.long)
        assert model(torch.ones(4, 3), edge_index).shape == (4, 2)
        assert model.module.seen is edge_index
    finally:
        dist.destroy_process_group()
