"""iognn.datasets: the synthetic community graph, the real-data loaders (skipped without the data
folder) and the missing-dataset error."""
import os

import pytest
import torch

from iognn import datasets
from iognn.datasets import TRAIN_PER_CLASS, VAL_PER_CLASS, load_dataset, per_class_split

from conftest import data_dir


def assert_standard_layout(data, num_nodes, num_features, num_classes):
    assert data.x.shape == (num_nodes, num_features) and data.x.dtype == torch.float32
    assert data.y.shape == (num_nodes,) and data.y.dtype == torch.int64
    assert int(data.y.max()) + 1 == num_classes and int(data.y.min()) == 0
    assert data.edge_index.dtype == torch.int64 and data.edge_index.size(0) == 2
    assert int(data.edge_index.min()) >= 0 and int(data.edge_index.max()) < num_nodes
    masks = [data.train_mask, data.val_mask, data.test_mask]
    for mask in masks:
        assert mask.shape == (num_nodes,) and mask.dtype == torch.bool and mask.any()
    assert not (masks[0] & masks[1]).any() and not (masks[0] & masks[2]).any()
    assert not (masks[1] & masks[2]).any()


def assert_undirected(edge_index):
    forward = set(map(tuple, edge_index.t().tolist()))
    assert forward == {(j, i) for i, j in forward}


def assert_per_class_split(data):
    """20 training and 30 validation nodes per class, every other node for testing."""
    for c in range(int(data.y.max()) + 1):
        in_class = data.y == c
        assert int((data.train_mask & in_class).sum()) == min(TRAIN_PER_CLASS, int(in_class.sum()))
        expected_val = min(VAL_PER_CLASS, max(int(in_class.sum()) - TRAIN_PER_CLASS, 0))
        assert int((data.val_mask & in_class).sum()) == expected_val
    assert bool((data.train_mask | data.val_mask | data.test_mask).all())


# ---- synthetic -------------------------------------------------------------------------------
def test_synthetic_shape_and_masks():
    data = load_dataset("synthetic")
    assert_standard_layout(data, 2000, 32, 8)
    assert_per_class_split(data)
    assert torch.equal(torch.bincount(data.y), torch.full((8,), 250))


def test_synthetic_is_a_simple_undirected_community_graph():
    data = load_dataset("synthetic")
    ei = data.edge_index
    assert not bool((ei[0] == ei[1]).any())
    assert torch.unique(ei[0] * data.num_nodes + ei[1]).numel() == ei.size(1)  # no duplicates
    assert_undirected(ei)
    assert 15 <= ei.size(1) / data.num_nodes <= 25  # ~20 average degree
    intra = float((data.y[ei[0]] == data.y[ei[1]]).float().mean())
    assert intra > 0.5  # mostly intra-community (a random graph would give 1/8)


def test_synthetic_is_deterministic_per_seed():
    a, b = load_dataset("synthetic"), load_dataset("synthetic")
    c = load_dataset("synthetic", seed=1)
    for key in ("x", "y", "edge_index", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(a[key], b[key]), key
    assert not torch.equal(a.x, c.x)
    assert a.edge_index.shape != c.edge_index.shape or not torch.equal(a.edge_index, c.edge_index)


def test_synthetic_features_are_weak_alone_and_strong_averaged():
    """Nearest class mean on a node's own features vs on its neighbourhood mean: the graph helps."""
    data = load_dataset("synthetic")
    train = data.train_mask
    ei = data.edge_index
    deg = torch.bincount(ei[1], minlength=data.num_nodes).clamp(min=1).unsqueeze(1)
    smoothed = torch.zeros_like(data.x).index_add_(0, ei[1], data.x[ei[0]]) / deg

    def nearest_mean_accuracy(feats):
        means = torch.stack([feats[train & (data.y == c)].mean(0) for c in range(8)])
        pred = torch.cdist(feats, means).argmin(1)
        return float((pred[data.test_mask] == data.y[data.test_mask]).float().mean())

    own, averaged = nearest_mean_accuracy(data.x), nearest_mean_accuracy(smoothed)
    assert own < 0.4 and averaged > own + 0.3


def test_per_class_split_small_classes_and_seed():
    y = torch.tensor([0] * 60 + [1] * 25 + [2] * 10)
    train, val, test = per_class_split(y, seed=3)
    assert [int((train & (y == c)).sum()) for c in range(3)] == [20, 20, 10]
    assert [int((val & (y == c)).sum()) for c in range(3)] == [30, 5, 0]
    assert int(test.sum()) == 10 and not bool((train & val).any())
    again = per_class_split(y, seed=3)
    other = per_class_split(y, seed=4)
    assert torch.equal(train, again[0]) and not torch.equal(train, other[0])


# ---- real datasets ---------------------------------------------------------------------------
def real(name):
    root = data_dir()
    if not (root / name).is_dir():
        pytest.skip(f"real dataset '{name}' not found under {root} "
                    f"(set IOGNN_DATA to the shared data folder)")
    return load_dataset(name, root)


def test_cora_public_split():
    data = real("cora")
    assert_standard_layout(data, 2708, 1433, 7)
    assert data.edge_index.size(1) == 10556
    assert_undirected(data.edge_index)
    assert [int(m.sum()) for m in (data.train_mask, data.val_mask, data.test_mask)] == \
        [140, 500, 1000]


def test_pubmed_topology_with_partial_features():
    data = real("pubmed")
    assert_standard_layout(data, 19717, 500, 3)
    assert data.edge_index.size(1) == 88648
    # allx is absent: only the 60 training rows and the 1,000 test rows carry features.
    assert int((data.x.abs().sum(1) > 0).sum()) == 1060


def test_amazon_photo_seeded_random_split():
    data = real("amazon_photo")
    assert_standard_layout(data, 7650, 745, 8)
    assert data.edge_index.size(1) == 238162  # symmetrised, self-loops removed (as PyG)
    assert_undirected(data.edge_index)
    assert set(data.x.unique().tolist()) <= {0.0, 1.0}  # binarised bag of words, as PyG
    assert_per_class_split(data)
    assert torch.equal(data.train_mask, load_dataset("amazon_photo", data_dir()).train_mask)
    assert not torch.equal(data.train_mask,
                           load_dataset("amazon_photo", data_dir(), seed=1).train_mask)


def test_coauthor_cs():
    data = real("coauthor_cs")
    assert_standard_layout(data, 18333, 6805, 15)
    assert data.edge_index.size(1) == 163788
    assert_per_class_split(data)


def test_tolokers_first_public_split():
    data = real("tolokers")
    assert_standard_layout(data, 11758, 10, 2)
    assert data.edge_index.size(1) == 1038000
    sizes = [int(m.sum()) for m in (data.train_mask, data.val_mask, data.test_mask)]
    assert sizes == [5879, 2939, 2940]


def test_cache_layout_links_the_data_and_leaves_the_root_alone(tmp_path, monkeypatch):
    root = data_dir()
    if not (root / "cora").is_dir():
        pytest.skip(f"real dataset 'cora' not found under {root} (set IOGNN_DATA)")
    monkeypatch.setenv("IOGNN_CACHE", str(tmp_path))
    before = sorted(os.listdir(root / "cora"))
    load_dataset("cora", root)
    raw = next(tmp_path.glob("cora-*/Cora/raw"))
    link = raw / "ind.cora.x"
    assert link.is_symlink() and link.resolve() == (root / "cora" / "ind.cora.x").resolve()
    assert sorted(os.listdir(root / "cora")) == before


# ---- errors ----------------------------------------------------------------------------------
def test_missing_dataset_names_the_folder_tried(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        load_dataset("cora", tmp_path)
    message = str(info.value)
    assert str(tmp_path / "cora") in message and "ind.cora.x" in message
    assert "--data-dir" in message and "IOGNN_DATA" in message


def test_missing_dataset_tries_env_then_default(tmp_path, monkeypatch):
    monkeypatch.setenv("IOGNN_DATA", str(tmp_path / "env"))
    monkeypatch.setattr(datasets, "default_data_dir", lambda: tmp_path / "default")
    with pytest.raises(FileNotFoundError) as info:
        load_dataset("tolokers")
    message = str(info.value)
    assert str(tmp_path / "env" / "tolokers") in message
    assert str(tmp_path / "default" / "tolokers") in message


def test_unknown_dataset():
    with pytest.raises(ValueError, match="unknown dataset 'karate'"):
        load_dataset("karate")
