"""``iognn train --task graph``: GIN / GCN / GGNN on synthetic-graphs (always) and MUTAG (when the
data folder has it), ``--compare pyg`` from equal weights on equal batches, the device batcher
against PyG's collation, pooling against PyG's, the split, the reddit10k and TU readers (bond
types as ``edge_type``) on tiny copies of their formats, and clear errors for bad arguments."""
import json

import pytest
import torch

import iognn.nn
from conftest import compared_results, data_dir, train_report
from iognn.cli import build_parser, main
from iognn.graph_batches import EpochOrder, GraphBatcher, pyg_batches
from iognn.graph_datasets import (GraphSet, load_graph_dataset, stratified_split,
                                  synthetic_graphs)
from iognn.graph_task import GRAPH_MODELS, PygPool, SegmentPool, build_graph_model
from iognn.train import build_models, resolve_task

FAST = ["--no-progress", "--hidden", "16", "--num-layers", "2", "--batch-size", "64"]


pytestmark = pytest.mark.usefixtures("iognn_cache")


def run_cli(tmp_path, *args):
    return train_report(tmp_path, "--task", "graph", *FAST, *args)


@pytest.mark.parametrize("model", GRAPH_MODELS)
def test_compare_pyg_same_batches_same_start(tmp_path, capsys, model):
    report = run_cli(tmp_path, "--model", model, "--epochs", "2", "--compare", "pyg")
    results = compared_results(report, capsys.readouterr().out,
                               ("test acc %", "epoch s", "loader s", "compute s", "peak MiB",
                                "loss pyg"))
    assert results["iognn"]["loader"] == "iognn" and results["pyg"]["loader"] == "pyg"
    for r in results.values():
        assert len(r["epochs"]) == 2 and 1 <= r["best_epoch"] <= 2
        assert r["epoch_s"] > 0 and 0 <= r["loader_s"] <= r["epoch_s"]
        assert r["compute_s"] == pytest.approx(r["epoch_s"] - r["loader_s"])
    # equal weights, batches and dropout draws: the first epoch's losses agree to rounding
    first = [results[n]["epochs"][0]["loss"] for n in ("iognn", "pyg")]
    assert first[0] == pytest.approx(first[1], rel=1e-4)
    assert report["dataset"]["name"] == "synthetic-graphs"
    assert report["dataset"]["split"] == [480, 60, 60]
    assert report["config"]["task"] == "graph" and report["config"]["device"] == "cpu"


@pytest.mark.parametrize("model", GRAPH_MODELS)
def test_compare_starts_from_identical_weights(model):
    args = build_parser().parse_args(["train", "--task", "graph", "--model", model,
                                      "--compare", "pyg"])
    resolve_task(args)
    models = build_models(args, 7, 3, build=lambda m, layers, i, h, c, **kw:
                          build_graph_model(m, layers, i, h, c, num_layers=3))
    ours, theirs = models["iognn"].state_dict(), models["pyg"].state_dict()
    assert list(ours) == list(theirs)
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert isinstance(models["iognn"].pool, SegmentPool)
    assert isinstance(models["pyg"].pool, PygPool)


def test_gin_learns_synthetic_graphs(tmp_path):
    report = run_cli(tmp_path, "--epochs", "12", "--hidden", "32")
    (result,) = report["results"]
    assert result["test_acc"] > 0.6  # 3 classes: chance is 1/3
    assert result["epochs"][-1]["loss"] < result["epochs"][0]["loss"]


def test_pyg_loader_for_iognn_gives_the_same_batches(tmp_path):
    report = run_cli(tmp_path, "--epochs", "1", "--graph-loader", "pyg", "--compare", "pyg")
    rows = report["results"]
    assert [r["loader"] for r in rows] == ["pyg", "pyg"]
    assert rows[0]["batch_digest"] == rows[1]["batch_digest"]


def test_mutag_when_present(tmp_path):
    root = data_dir()
    if not (root / "tu_mutag" / "MUTAG_A.txt").is_file():
        pytest.skip(f"real dataset 'tu_mutag' not found under {root} (set IOGNN_DATA)")
    report = run_cli(tmp_path, "--dataset", "tu_mutag", "--data-dir", str(root), "--epochs", "2",
                     "--compare", "pyg")
    assert report["dataset"] == {"name": "tu_mutag", "graphs": 188, "nodes": 3371,
                                 "edges": 7442, "features": 7,
                                 "feature_kind": "one-hot node labels", "classes": 2,
                                 "split": [150, 18, 20]}
    assert {r["implementation"] for r in report["results"]} == {"iognn", "pyg"}


# ---- pieces ---------------------------------------------------------------------------------------
def test_batcher_equals_pyg_collation():
    graphs = synthetic_graphs(num_graphs=50, seed=3)
    order = EpochOrder(torch.arange(50), shuffle=True, seed=1).next_epoch()
    ours = list(GraphBatcher(graphs, torch.device("cpu")).batches(order, 16))
    theirs = list(pyg_batches(graphs.data_list(), order, 16, torch.device("cpu")))
    assert len(ours) == len(theirs) == 4
    for a, b in zip(ours, theirs):
        for key in ("x", "edge_index", "batch", "ptr", "y"):
            assert torch.equal(getattr(a, key), getattr(b, key)), key
        assert a.num_graphs == b.num_graphs


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_batcher_graphs_equal_built_graphs_and_gin_outputs(device):
    """A batch's deferred Graph is the Graph of its edge_index, its degree hints bound the
    batch's degrees, and a GIN model gives the same output with either."""
    import iognn.nn
    from iognn.graph_task import _output, build_graph_model
    device = torch.device(device)
    graphs = synthetic_graphs(num_graphs=30, seed=4)
    order = torch.arange(30)
    batcher = GraphBatcher(graphs, device, build_graphs=True)
    model = build_graph_model("gin", iognn.nn, graphs.num_features, 16, graphs.num_classes,
                              num_layers=2).to(device).eval()
    for batch in batcher.batches(order, 8):
        built = iognn.Graph(batch.edge_index, batch.x.size(0))
        for name in ("rowptr", "col", "colptr", "row", "csc2csr"):
            assert torch.equal(getattr(batch.graph, name), getattr(built, name)), name
        assert all(b >= m for b, m in zip(batch.graph.max_degree_hints, built.max_degree_hints))
        plain = model(batch.x, batch.edge_index, batch.batch, batch.ptr, batch.num_graphs)
        torch.testing.assert_close(_output(model, batch), plain)
    batcher.check()


def test_epoch_order_is_seeded_and_fresh_each_epoch():
    ids = torch.arange(40)
    a, b = EpochOrder(ids, True, 5), EpochOrder(ids, True, 5)
    first = a.next_epoch()
    assert torch.equal(first, b.next_epoch())
    assert not torch.equal(first, a.next_epoch())
    assert torch.equal(first.sort().values, ids)
    assert torch.equal(EpochOrder(ids, False, 5).next_epoch(), ids)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_segment_pool_matches_pyg(reduce):
    counts = torch.tensor([3, 0, 5, 1])  # graph 1 has no nodes
    ptr = torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)])
    batch = torch.repeat_interleave(torch.arange(4), counts)
    x = torch.randn(9, 6, dtype=torch.float64, requires_grad=True)
    ours = SegmentPool(reduce)(x, batch, ptr, 4)
    theirs = PygPool(reduce)(x, batch, ptr, 4)
    torch.testing.assert_close(ours, theirs)
    assert torch.equal(ours[1], torch.zeros(6, dtype=torch.float64))
    grad = torch.randn(4, 6, dtype=torch.float64)
    (ga,) = torch.autograd.grad(ours, x, grad)
    (gb,) = torch.autograd.grad(theirs, x, grad)
    torch.testing.assert_close(ga, gb)


def test_stratified_split():
    y = torch.tensor([0] * 50 + [1] * 30 + [2] * 9)
    train, val, test = stratified_split(y, seed=0)
    assert torch.equal(torch.cat([train, val, test]).sort().values, torch.arange(y.numel()))
    assert [int((y[train] == c).sum()) for c in range(3)] == [40, 24, 7]
    assert [int((y[val] == c).sum()) for c in range(3)] == [5, 3, 0]
    again = stratified_split(y, seed=0)
    assert all(torch.equal(a, b) for a, b in zip((train, val, test), again))
    assert not torch.equal(train, stratified_split(y, seed=1)[0])


def test_graph_set_round_trips_its_data_list():
    graphs = synthetic_graphs(num_graphs=12)
    again = GraphSet.from_data_list("copy", graphs.data_list(), graphs.features)
    for key in ("x", "edge_index", "node_ptr", "edge_ptr", "y"):
        assert torch.equal(getattr(graphs, key), getattr(again, key))


# A tiny TU-format set: two graphs (the second with an isolated node), each undirected edge on
# two lines of <NAME>_A.txt (1-based global node ids, written out of order) with its bond type.
TINY_TU_EDGES = [[((1, 2), 0), ((2, 3), 1), ((3, 4), 2), ((1, 3), 0)], [((5, 6), 1), ((6, 7), 0)]]
TINY_TU_NODES = [[0, 1, 0, 2], [1, 1, 0, 0]]  # node labels per graph


def write_tiny_tu(folder, name: str, edge_labels: bool = True) -> dict:
    """Writes the tiny set as ``folder/<NAME>_*.txt``; returns {(global u, v) 0-based: bond}."""
    folder.mkdir(parents=True)
    bonds = {}
    for graph in TINY_TU_EDGES:
        for (u, v), bond in graph:
            bonds[(u - 1, v - 1)] = bonds[(v - 1, u - 1)] = bond
    lines = sorted(bonds.items(), reverse=True)
    (folder / f"{name}_A.txt").write_text("".join(f"{u + 1}, {v + 1}\n" for (u, v), _ in lines))
    if edge_labels:
        (folder / f"{name}_edge_labels.txt").write_text("".join(f"{b}\n" for _, b in lines))
    (folder / f"{name}_graph_indicator.txt").write_text(
        "".join(f"{g + 1}\n" for g, nodes in enumerate(TINY_TU_NODES) for _ in nodes))
    (folder / f"{name}_node_labels.txt").write_text(
        "".join(f"{label}\n" for nodes in TINY_TU_NODES for label in nodes))
    (folder / f"{name}_graph_labels.txt").write_text("1\n-1\n")
    return bonds


def test_tu_reader_carries_the_bond_types(tmp_path):
    bonds = write_tiny_tu(tmp_path / "tu_mutag", "MUTAG")
    graphs = load_graph_dataset("tu_mutag", tmp_path)
    assert graphs.node_ptr.tolist() == [0, 4, 8] and graphs.edge_ptr.tolist() == [0, 8, 12]
    assert graphs.edge_type.dtype == torch.long
    offsets = graphs.node_ptr[:-1].repeat_interleave(graphs.edge_ptr.diff())
    expected = [bonds[(u, v)] for u, v in (graphs.edge_index + offsets).t().tolist()]
    assert graphs.edge_type.tolist() == expected
    data = graphs.data_list()
    assert torch.equal(torch.cat([d.edge_type for d in data]), graphs.edge_type)
    again = GraphSet.from_data_list("copy", data, graphs.features)
    assert torch.equal(again.edge_type, graphs.edge_type)


def test_tu_reader_without_edge_labels_has_no_edge_type(tmp_path):
    write_tiny_tu(tmp_path / "tu_nci1", "NCI1", edge_labels=False)
    graphs = load_graph_dataset("tu_nci1", tmp_path)
    assert graphs.edge_type is None and graphs.num_graphs == 2
    assert all("edge_type" not in d for d in graphs.data_list())
    assert synthetic_graphs(num_graphs=3).edge_type is None


def test_reddit10k_reader_on_a_tiny_copy(tmp_path):
    folder = tmp_path / "reddit10k"
    folder.mkdir()
    # graph 0: a path 0-1-2 stored one way, with a duplicate and a self-loop; graph 1: a star
    (folder / "graphs.json").write_text(json.dumps(
        {"1": [[0, 1], [0, 2], [0, 3]], "0": [[0, 1], [1, 2], [1, 0], [2, 2]]}))
    (folder / "target.csv").write_text("id,target\n0,1\n1,0\n")
    graphs = load_graph_dataset("reddit10k", tmp_path)
    assert graphs.y.tolist() == [1, 0]
    assert graphs.node_ptr.tolist() == [0, 3, 7] and graphs.edge_ptr.tolist() == [0, 4, 10]
    assert graphs.edge_index[:, :4].tolist() == [[0, 1, 1, 2], [1, 0, 2, 1]]
    degrees = [1, 2, 1, 3, 1, 1, 1]
    assert graphs.num_features == 4  # one-hot degree up to the largest, 3
    assert graphs.x.argmax(1).tolist() == degrees and graphs.x.sum(1).eq(1).all()


# ---- errors -------------------------------------------------------------------------------------
def test_missing_dataset_is_a_clean_error(tmp_path):
    with pytest.raises(SystemExit, match="dataset 'tu_nci1' not found"):
        main(["train", "--task", "graph", "--dataset", "tu_nci1", "--data-dir", str(tmp_path),
              "--epochs", "1", "--no-progress"])


@pytest.mark.parametrize("argv, message", [
    (["--task", "graph", "--model", "sage"], "--task graph trains gin, gcn, ggnn"),
    (["--task", "graph", "--dataset", "cora"], "--task graph needs a graph dataset"),
    (["--task", "graph", "--loader", "neighbor"], "--loader neighbor is for --task node"),
    (["--model", "ggnn"], "--model ggnn is for --task graph"),
    (["--dataset", "tu_mutag"], "is a graph dataset: use --task graph"),
    (["--task", "graph", "--num-layers", "0"], "must be at least 1"),
    (["--task", "graph", "--dataset", "tu_nope"], "unknown dataset 'tu_nope'"),
    (["--task", "edge"], "invalid choice"),
])
def test_bad_arguments_are_usage_errors(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", *argv])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_node_task_defaults_are_unchanged():
    args = build_parser().parse_args(["train"])
    resolve_task(args)
    assert (args.task, args.model, args.dataset, args.batch_size) == ("node", "gcn", "synthetic",
                                                                      1024)
    graph = build_parser().parse_args(["train", "--task", "graph"])
    resolve_task(graph)
    assert (graph.model, graph.dataset, graph.batch_size) == ("gin", "synthetic-graphs", 128)


@pytest.mark.parametrize("cuda", [False, True])  # with a GPU, the device probe builds first
def test_ggnn_without_gated_graph_conv_is_a_clear_error(monkeypatch, cuda):
    monkeypatch.delattr(iognn.nn, "GatedGraphConv", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    with pytest.raises(SystemExit, match="iognn.nn.GatedGraphConv"):
        main(["train", "--task", "graph", "--model", "ggnn", "--epochs", "1", "--no-progress"])
