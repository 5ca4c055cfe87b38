"""``synthetic-products``: deterministic by seed, the documented sizes, a simple symmetric graph in
CSC order, power-law degrees, class homophily far above 1/47, the cache and the name spec."""
import pytest
import torch
from torch_geometric.data import Data

from iognn import synthetic_products as sp
from iognn.datasets import load_dataset

SCALE = 0.002


@pytest.fixture(scope="module")
def graph():
    return sp.generate(SCALE, seed=0)


def test_same_seed_same_graph_other_seed_other_graph(graph):
    again = sp.generate(SCALE, seed=0)
    assert all(torch.equal(graph[k], again[k]) for k in graph)
    other = sp.generate(SCALE, seed=1)
    assert not torch.equal(graph["edge_index"], other["edge_index"])
    assert not torch.equal(graph["y"], other["y"])


def test_sizes_and_dtypes(graph):
    n = sp.sizes(SCALE)
    assert n["num_nodes"] == round(sp.NUM_NODES * SCALE)
    x, y, edge_index = graph["x"], graph["y"], graph["edge_index"]
    assert x.shape == (n["num_nodes"], sp.NUM_FEATURES) and x.dtype == torch.float32
    assert y.dtype == torch.int64 and int(y.max()) + 1 == sp.NUM_CLASSES and int(y.min()) == 0
    assert edge_index.dtype == torch.int64
    # both directions of (nearly) the target number of distinct pairs
    assert 0.998 * 2 * n["num_pairs"] <= edge_index.size(1) <= 2 * n["num_pairs"]
    train, val, test = graph["train_mask"], graph["val_mask"], graph["test_mask"]
    assert int(train.sum()) == n["num_train"] and int(val.sum()) == n["num_val"]
    assert int(test.sum()) == n["num_nodes"] - n["num_train"] - n["num_val"]
    assert not (train & val).any() and not (train & test).any() and not (val & test).any()


def test_full_scale_sizes_are_ogbn_products():
    n = sp.sizes(1.0)
    assert (n["num_nodes"], n["num_pairs"], n["num_train"], n["num_val"]) == (
        2_449_029, 30_929_570, 196_615, 39_323)


def test_simple_symmetric_graph_sorted_by_destination(graph):
    src, dst = graph["edge_index"]
    n = graph["y"].numel()
    assert not (src == dst).any()
    key = dst * n + src
    assert bool((key[1:] > key[:-1]).all())  # sorted by (dst, src), no duplicates
    reverse = torch.sort(src * n + dst).values
    assert torch.equal(reverse, key)  # every edge's reverse is there


def test_power_law_degrees_and_homophily(graph):
    stats = sp.statistics(Data(**graph))
    assert 20 < stats["mean_degree"] < 30                       # ogbn-products: 25.3
    assert stats["median_degree"] < stats["mean_degree"]
    assert stats["max_degree"] > 20 * stats["mean_degree"]      # hubs
    assert stats["top1pct_edge_share"] > 0.05
    degree = torch.bincount(graph["edge_index"][1]).double()
    tail = degree.sort(descending=True).values[:200]
    hill = 1 + tail.numel() / float(torch.log(tail / tail[-1]).sum())
    assert 2.0 < hill < 4.0                                     # power-law tail exponent
    assert stats["homophily"] > 0.6                             # chance: about 1/47
    assert stats["num_classes"] == 47


def test_cache_second_load_reads_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("IOGNN_CACHE", str(tmp_path))
    first, seconds = sp.load_synthetic_products(SCALE, seed=3)
    assert seconds is not None and sp.cache_path(SCALE, 3).is_file()
    second, seconds = sp.load_synthetic_products(SCALE, seed=3)
    assert seconds is None
    for key in ("x", "y", "edge_index", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(first[key], second[key])
    data = load_dataset(f"synthetic-products:{SCALE}", seed=3)
    assert torch.equal(data.edge_index, first.edge_index)


@pytest.mark.parametrize("name, scale", [("synthetic-products", 1.0),
                                         ("Synthetic_Products:0.5", 0.5),
                                         ("synthetic-products:1e-3", 0.001), ("cora", None),
                                         ("synthetic", None)])
def test_spec(name, scale):
    assert sp.parse_spec(name) == scale


@pytest.mark.parametrize("name", ["synthetic-products:x", "synthetic-products:0",
                                  "synthetic-products:-1"])
def test_bad_spec(name):
    with pytest.raises(ValueError, match="scale"):
        sp.parse_spec(name)
