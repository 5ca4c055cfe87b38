"""``iognn train --loader neighbor``: runs for SAGE / GAT / GCN on a tiny synthetic-products and on
the cora-like synthetic graph, learns, reports the epoch time split, trains ``--compare pyg`` on
the very same batches; blocks and trimming (PyG's) leave the seeds' outputs alone; bad arguments are
argparse errors."""
import json

import pytest
import torch

from iognn import minibatch
from iognn.cli import main
from iognn.minibatch import LayerStack, SamplingRandomness, build_stack, pick_graph_device
from iognn.train import MINIBATCH_MODELS

TINY = "synthetic-products:0.002"   # 4,898 nodes, 47 classes, 393 training nodes
FAST = ["--no-progress", "--hidden", "32", "--heads", "2", "--num-neighbors", "10,5",
        "--batch-size", "64", "--eval-test-nodes", "400"]


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("IOGNN_CACHE", str(tmp_path_factory.getbasetemp() / "iognn-cache"))


def run_cli(tmp_path, *args):
    path = tmp_path / "report.json"
    assert main(["train", "--loader", "neighbor", "--json", str(path), *FAST, *args]) == 0
    return json.loads(path.read_text())


@pytest.mark.parametrize("model", MINIBATCH_MODELS)
def test_products_compare_pyg_same_batches_and_learns(tmp_path, capsys, model):
    report = run_cli(tmp_path, "--dataset", TINY, "--model", model, "--epochs", "3",
                     "--compare", "pyg")
    table = capsys.readouterr().out
    for column in ("test acc %", "epoch s", "sampling s", "transfer s", "compute s", "batches"):
        assert column in table
    assert "batches: the same for every implementation" in table
    results = {r["implementation"]: r for r in report["results"]}
    assert set(results) == {"iognn", "pyg"}
    assert results["iognn"]["batch_digest"] == results["pyg"]["batch_digest"]
    for r in results.values():
        assert r["batches"] == 7 and len(r["epochs"]) == 3  # ceil(393 / 64)
        assert r["epoch_s"] > 0 and r["sampling_s"] > 0 and r["compute_s"] > 0
        assert r["transfer_s"] >= 0 and r["sampled_edges"] > 0
        assert r["sampling_s"] + r["transfer_s"] + r["compute_s"] == pytest.approx(r["epoch_s"])
    # 47 classes (the largest holds about 9% of the nodes): twice that after 3 short epochs
    assert results["iognn"]["test_acc"] > 0.18
    assert abs(results["iognn"]["test_acc"] - results["pyg"]["test_acc"]) < 0.1
    config = report["config"]
    assert config["graph_device"] == "cpu" and config["num_neighbors"] == [10, 5]
    assert "end of the epoch" in report["split_metric"]


@pytest.mark.parametrize("model", MINIBATCH_MODELS)
def test_cora_like_synthetic_learns(tmp_path, model):
    report = run_cli(tmp_path, "--dataset", "synthetic", "--model", model, "--epochs", "10",
                     "--dropout", "0", "--batch-size", "32")
    (result,) = report["results"]
    assert result["test_acc"] > 0.25  # 8 classes: chance is 0.125
    assert report["num_nodes"] == 2000


def test_profile_split_and_workers(tmp_path):
    report = run_cli(tmp_path, "--dataset", TINY, "--model", "sage", "--epochs", "1",
                     "--profile-split", "--num-workers", "1", "--num-neighbors", "5,5,5")
    assert "synchronised at each" in report["split_metric"]
    (result,) = report["results"]
    assert result["batches"] == 7 and result["compute_s"] > 0


def tiny_batch(hops=3):
    from iognn.loader import NeighborLoader
    from iognn.synthetic_products import generate
    from torch_geometric.data import Data
    data = Data(**generate(0.002))
    torch.manual_seed(0)
    loader = NeighborLoader(data, num_neighbors=[6, 4, 3][:hops], batch_size=50)
    return data, next(iter(loader))


@pytest.mark.parametrize("library", ["iognn.nn", "torch_geometric.nn"])
@pytest.mark.parametrize("model", ["sage", "gat"])
def test_blocks_and_trimming_keep_the_seeds_outputs(model, library):
    import importlib
    layers = importlib.import_module(library)
    data, batch = tiny_batch()
    torch.manual_seed(0)
    stack = build_stack(model, layers, data.num_features, 16, 47, 3, heads=2).eval()
    assert stack.mode == "blocks"
    assert (stack.graph_loops is not None) == (library == "iognn.nn")
    args = (batch.x, batch.edge_index, batch.num_sampled_nodes, batch.num_sampled_edges)
    n = batch.batch_size
    outputs = {"blocks": stack(*args, stack.block_graphs(batch))}
    assert outputs["blocks"].size(0) == n  # the last block's destinations: the seeds
    if library == "iognn.nn":  # the same blocks given as edge prefixes, built in the layers
        outputs["blocks, edges"] = stack(*args)
    stack.mode = "trim"
    outputs["trim"] = stack(*args)
    assert outputs["trim"].size(0) == n + batch.num_sampled_nodes[1]  # the last layer's nodes
    stack.mode = "full"
    outputs["full"] = stack(*args)
    assert outputs["full"].size(0) == batch.num_nodes
    for name, out in outputs.items():
        torch.testing.assert_close(out[:n], outputs["full"][:n], rtol=1e-5, atol=1e-5,
                                   msg=lambda m: f"{name}: {m}")


def test_gcn_is_trimmed_not_blocked():
    import iognn.nn
    stack = build_stack("gcn", iognn.nn, 8, 16, 4, 2)
    assert stack.mode == "trim" and stack.graph_loops is None and stack.block_graphs(None) is None
    assert build_stack("sage", iognn.nn, 8, 16, 4, 2, trim=False).mode == "full"


def test_blocks_give_each_layer_its_bipartite_prefix():
    _, batch = tiny_batch()
    seen = []

    class Record(torch.nn.Module):
        def forward(self, x, edge_index, size):
            seen.append((x, edge_index, size))
            return x[1]

    LayerStack([Record(), Record(), Record()], dropout=0.0, mode="blocks")(
        batch.x, batch.edge_index, batch.num_sampled_nodes, batch.num_sampled_edges)
    nodes, edges = batch.num_sampled_nodes, batch.num_sampled_edges
    for layer, ((x_src, x_dst), edge_index, size) in enumerate(seen):
        hops = 3 - layer  # this layer's destinations: the nodes of hops 0 .. hops - 1
        assert size == (sum(nodes[:hops + 1]), sum(nodes[:hops]))
        assert x_src.size(0) == size[0] and x_dst.size(0) == size[1]
        assert torch.equal(x_dst, x_src[:size[1]])
        assert torch.equal(edge_index, batch.edge_index[:, :sum(edges[:hops])])
        assert int(edge_index[0].max()) < size[0] and int(edge_index[1].max()) < size[1]


def test_trimming_is_pyg_trim_to_layer():
    from torch_geometric.utils import trim_to_layer
    _, batch = tiny_batch()
    seen = []

    class Record(torch.nn.Module):
        def forward(self, x, edge_index):
            seen.append((x, edge_index))
            return x

    LayerStack([Record(), Record(), Record()], dropout=0.0, mode="trim")(
        batch.x, batch.edge_index, batch.num_sampled_nodes, batch.num_sampled_edges)
    x, edge_index = batch.x, batch.edge_index
    for layer, (got_x, got_edges) in enumerate(seen):
        if layer:  # the stack's ReLU between layers
            x = torch.relu(seen[layer - 1][0])
        x, edge_index, _ = trim_to_layer(layer, batch.num_sampled_nodes,
                                         batch.num_sampled_edges, x, edge_index)
        assert torch.equal(got_x, x) and torch.equal(got_edges, edge_index)
    assert seen[-1][1].size(1) == batch.num_sampled_edges[0]  # the seeds' own in-edges


def test_sampling_draws_are_apart_from_training_draws():
    data, _ = tiny_batch()
    seeds = data.train_mask.nonzero().view(-1)
    sampler = minibatch.make_sampler(data, [5, 5])
    config = minibatch.LoaderConfig([5, 5], 64)
    sizes = []
    for noise in (0, 1000):
        randomness = SamplingRandomness(7)
        loader = minibatch.make_loader(data, sampler, seeds, config, True, randomness)
        iterator, got = iter(loader), []
        for _ in range(3):
            torch.rand(noise)  # the training's own draws in between
            batch = randomness.next(iterator)
            got.append(batch.n_id)
        sizes.append(got)
    assert all(torch.equal(a, b) for a, b in zip(*sizes))


@pytest.mark.parametrize("args, message", [
    (["--num-neighbors", "a,b"], "comma-separated integers"),
    (["--num-neighbors", "10,-2"], "-1 (every neighbour) or at least 0"),
    (["--batch-size", "0"], "at least 1"),
    (["--num-workers", "-1"], "at least 0"),
    (["--model", "gin"], "--loader neighbor trains sage, gat, gcn"),
    (["--dataset", "synthetic-products:zero"], "scale must be a number"),
    (["--dataset", "mnist"], "unknown dataset"),
])
def test_bad_arguments_are_argparse_errors(capsys, args, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--loader", "neighbor", *args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "usage:" in err and message in err


def test_graph_device_choice_without_cuda(monkeypatch):
    assert pick_graph_device("auto", torch.device("cpu"), None) == torch.device("cpu")
    assert pick_graph_device("cpu", torch.device("cpu"), None) == torch.device("cpu")
    with pytest.raises(SystemExit, match="needs the model on CUDA"):
        pick_graph_device("cuda", torch.device("cpu"), None)


def test_graph_device_falls_back_to_the_host_without_cuda_sampling(monkeypatch, capsys):
    monkeypatch.setattr(minibatch, "cuda_sampling_available", lambda: False)
    assert pick_graph_device("auto", torch.device("cuda"), None) == torch.device("cpu")
    assert "does not sample on CUDA" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="does not sample on CUDA"):
        pick_graph_device("cuda", torch.device("cuda"), None)
