"""iognn.sampler / iognn.loader: PyG's NeighborLoader and LinkNeighborLoader contracts on iognn's
CPU neighbour sampler.

Full neighbourhoods against torch_geometric.utils.k_hop_subgraph on every square graph case, the
batch's structure (node and link batches, negative sampling), uniformity and weighted sampling
(chi-square against the exact distributions), temporal sampling (node and edge times, seed times,
'uniform' against 'last'), repeats with and without replacement, int32 / int64 graphs, determinism
under torch.manual_seed, the options that raise, and GraphSAGE training loops (node
classification, link prediction).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch_geometric.typing
from torch_geometric.data import Data
from torch_geometric.utils import k_hop_subgraph

from conftest import GRAPH_CASES
from iognn.loader import LinkNeighborLoader, NeighborLoader
from iognn.sampler import NeighborSampler

# Square graphs with a node to seed from (every case but the bipartite ones and "no_nodes").
SQUARE_CASES = [c for c in GRAPH_CASES if not isinstance(c[2], tuple) and c[2] > 0]


def to_csc(edge_index: torch.Tensor, num_nodes: int):
    """(colptr, row, perm): the CSC of edge_index (in-neighbours by destination, stable order)."""
    src, dst = edge_index.long()
    perm = torch.sort(dst, stable=True).indices
    colptr = torch.zeros(num_nodes + 1, dtype=torch.long)
    colptr[1:] = torch.bincount(dst, minlength=num_nodes).cumsum(0)
    dtype = edge_index.dtype
    return colptr.to(dtype), src[perm].to(dtype).contiguous(), perm


def sample(colptr, row, seed, fanouts, replace=False, disjoint=False, rng_seed=0, weight=None):
    return torch.ops.iognn.neighbor_sample(colptr, row, seed.to(colptr.dtype), fanouts, replace,
                                           disjoint, rng_seed, weight)


def star(degree: int, dtype=torch.long):
    """CSC of a graph whose node 0 has in-neighbours 1 .. degree."""
    colptr = torch.full((degree + 2,), degree, dtype=dtype)
    colptr[0] = 0
    return colptr, torch.arange(1, degree + 1, dtype=dtype)


def graph_data(num_nodes=60, num_edges=300, seed=0, features=8):
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, num_nodes, (2, num_edges), generator=g)
    return Data(x=torch.randn(num_nodes, features, generator=g),
                y=torch.randint(0, 3, (num_nodes,), generator=g), edge_index=ei,
                num_nodes=num_nodes)


# ---- full neighbourhoods are the k-hop subgraph -------------------------------------------------

@pytest.mark.parametrize("num_hops", [1, 2, 3])
@pytest.mark.parametrize("case", SQUARE_CASES, ids=[c[0] for c in SQUARE_CASES])
def test_full_neighbourhoods_are_the_k_hop_subgraph(case, num_hops):
    _, edge_index, n = case
    seeds = torch.tensor(sorted({0, n // 3, n - 1}))
    colptr, row, perm = to_csc(edge_index, n)
    out_row, out_col, node, edge, num_nodes, num_edges = sample(colptr, row, seeds, [-1] * num_hops)
    for t in (out_row, out_col, node, edge):
        assert t.dtype == edge_index.dtype
    subset, _, _, edge_mask = k_hop_subgraph(seeds, num_hops, edge_index.long(), num_nodes=n,
                                             flow="source_to_target", directed=True)
    original = perm[edge.long()]
    assert torch.equal(original.sort().values, edge_mask.nonzero().view(-1))
    assert torch.equal(node.long().sort().values, subset)
    assert torch.equal(node[:seeds.numel()].long(), seeds)
    # Local ids index node: (node[row], node[col]) is the original edge (source, destination).
    ei = edge_index.long()[:, original]
    assert torch.equal(node.long()[out_row.long()], ei[0])
    assert torch.equal(node.long()[out_col.long()], ei[1])
    assert sum(num_nodes) == node.numel() and num_nodes[0] == seeds.numel()
    assert sum(num_edges) == edge.numel() and len(num_edges) == num_hops


@pytest.mark.parametrize("case", SQUARE_CASES, ids=[c[0] for c in SQUARE_CASES])
def test_loader_full_neighbourhoods_match_k_hop_subgraph(case):
    _, edge_index, n = case
    data = Data(x=torch.arange(n, dtype=torch.float).view(-1, 1), edge_index=edge_index.long(),
                num_nodes=n)
    seeds = torch.tensor(sorted({0, n // 2, n - 1}))
    batch = next(iter(NeighborLoader(data, [-1, -1], input_nodes=seeds,
                                     batch_size=seeds.numel())))
    _, _, _, edge_mask = k_hop_subgraph(seeds, 2, data.edge_index, num_nodes=n, directed=True)
    assert torch.equal(batch.e_id.sort().values, edge_mask.nonzero().view(-1))
    assert torch.equal(batch.n_id[batch.edge_index], data.edge_index[:, batch.e_id])


# ---- the batch's structure ---------------------------------------------------------------------

def test_batch_has_pygs_structure():
    data = graph_data()
    data.edge_attr = torch.randn(data.num_edges, 3)
    loader = NeighborLoader(data, [4, 3], batch_size=16, shuffle=True)
    batches = list(loader)
    assert len(batches) == 4
    seen = []
    for b in batches:
        assert b.n_id.dtype == torch.long and b.e_id.dtype == torch.long
        assert b.edge_index.dtype == torch.long
        assert b.batch_size == b.input_id.numel() <= 16
        assert torch.equal(b.n_id[:b.batch_size], b.input_id)  # input nodes are all nodes
        assert len(b.num_sampled_nodes) == 3 and len(b.num_sampled_edges) == 2
        assert b.num_sampled_nodes[0] == b.batch_size
        assert sum(b.num_sampled_nodes) == b.num_nodes
        assert sum(b.num_sampled_edges) == b.edge_index.size(1)
        assert torch.equal(b.x, data.x[b.n_id]) and torch.equal(b.y, data.y[b.n_id])
        assert torch.equal(b.edge_attr, data.edge_attr[b.e_id])
        assert int(b.edge_index.max()) < b.num_nodes
        assert torch.equal(b.n_id[b.edge_index], data.edge_index[:, b.e_id])
        assert b.n_id.unique().numel() == b.n_id.numel()
        seen.append(b.input_id)
    assert torch.equal(torch.cat(seen).sort().values, torch.arange(data.num_nodes))


def test_fan_out_bounds_every_nodes_in_edges():
    data = graph_data(num_nodes=40, num_edges=600)
    b = next(iter(NeighborLoader(data, [3, 2], batch_size=10)))
    hop1 = b.edge_index[:, :b.num_sampled_edges[0]]
    assert int(torch.bincount(hop1[1]).max()) <= 3
    hop2 = b.edge_index[:, b.num_sampled_edges[0]:]
    if hop2.numel():
        assert int(torch.bincount(hop2[1]).max()) <= 2


def test_disjoint_batches_carry_one_tree_per_seed():
    data = graph_data()
    b = next(iter(NeighborLoader(data, [3, 3], batch_size=8, disjoint=True)))
    assert torch.equal(b.batch[:8], torch.arange(8))
    assert torch.equal(b.batch[b.edge_index[0]], b.batch[b.edge_index[1]])
    assert torch.equal(b.x, data.x[b.n_id])


def test_bidirectional_and_backward_sampling():
    data = graph_data()
    b = next(iter(NeighborLoader(data, [3, 2], batch_size=8, subgraph_type="bidirectional")))
    pairs = set(map(tuple, b.edge_index.t().tolist()))
    assert all((j, i) in pairs for i, j in pairs)
    sampler = NeighborSampler(data, [-1], sample_direction="backward")
    loader = NeighborLoader(data, [-1], batch_size=5, neighbor_sampler=sampler)
    b = next(iter(loader))
    # Backward with -1: every out-edge of the seeds.
    out_edges = torch.isin(data.edge_index[0], b.input_id).nonzero().view(-1)
    assert torch.equal(b.e_id.sort().values, out_edges)


def test_link_loader_with_the_iognn_sampler():
    from torch_geometric.loader import LinkNeighborLoader
    data = graph_data()
    loader = LinkNeighborLoader(data, [2, 2], batch_size=20,
                                neighbor_sampler=NeighborSampler(data, [2, 2]))
    b = next(iter(loader))
    assert b.edge_label_index.size(1) == 20
    assert torch.equal(b.n_id[b.edge_label_index], data.edge_index[:, b.input_id])


def test_link_batch_with_binary_negatives_has_pygs_structure():
    data = graph_data()
    torch.manual_seed(0)
    loader = LinkNeighborLoader(data, [3, 2], batch_size=20, shuffle=True, neg_sampling_ratio=2.0)
    seen = []
    for b in loader:
        pos = b.input_id.numel()
        assert pos <= 20 and b.edge_label_index.shape == (2, 3 * pos)
        assert b.edge_label.dtype == torch.float
        assert torch.equal(b.edge_label, torch.cat([torch.ones(pos), torch.zeros(2 * pos)]))
        # Positives are the input edges; every endpoint is a seed (local ids of the first hop).
        assert torch.equal(b.n_id[b.edge_label_index[:, :pos]], data.edge_index[:, b.input_id])
        assert b.num_sampled_nodes[0] == b.edge_label_index.unique().numel()
        assert int(b.edge_label_index.max()) < b.num_sampled_nodes[0]
        assert sum(b.num_sampled_nodes) == b.num_nodes and b.n_id.unique().numel() == b.num_nodes
        assert torch.equal(b.n_id[b.edge_index], data.edge_index[:, b.e_id])
        assert torch.equal(b.x, data.x[b.n_id])
        seen.append(b.input_id)
    assert torch.equal(torch.cat(seen).sort().values, torch.arange(data.num_edges))


def test_loaders_take_pygs_signatures():
    import inspect
    from torch_geometric import loader as pyg_loader
    assert inspect.signature(NeighborLoader) == inspect.signature(pyg_loader.NeighborLoader)
    assert inspect.signature(LinkNeighborLoader) == inspect.signature(pyg_loader.LinkNeighborLoader)
    with pytest.raises(TypeError, match="no_such_argument"):
        NeighborLoader(graph_data(), [2], no_such_argument=1)


def test_link_batch_keeps_given_edge_labels_and_label_index():
    data = graph_data()
    label_index = torch.tensor([[0, 5, 9, 33], [1, 5, 40, 2]])
    label = torch.tensor([2, 0, 1, 1])
    b = next(iter(LinkNeighborLoader(data, [-1], edge_label_index=label_index, edge_label=label,
                                     batch_size=4)))
    assert torch.equal(b.n_id[b.edge_label_index], label_index[:, b.input_id])
    assert torch.equal(b.edge_label, label[b.input_id])
    _, _, _, edge_mask = k_hop_subgraph(label_index.unique(), 1, data.edge_index,
                                        num_nodes=data.num_nodes, directed=True)
    assert torch.equal(b.e_id.sort().values, edge_mask.nonzero().view(-1))


def test_link_loader_triplet_negatives():
    data = graph_data()
    b = next(iter(LinkNeighborLoader(data, [2], batch_size=10,
                                     neg_sampling=dict(mode="triplet", amount=3))))
    assert b.src_index.shape == (10,) and b.dst_pos_index.shape == (10,)
    assert b.dst_neg_index.shape == (10, 3)
    assert torch.equal(b.n_id[b.src_index], data.edge_index[0, b.input_id])
    assert torch.equal(b.n_id[b.dst_pos_index], data.edge_index[1, b.input_id])


def test_empty_graph_and_isolated_seeds():
    data = Data(x=torch.randn(5, 2), edge_index=torch.empty(2, 0, dtype=torch.long))
    b = next(iter(NeighborLoader(data, [5, -1], batch_size=5)))
    assert b.edge_index.shape == (2, 0) and b.e_id.numel() == 0
    assert torch.equal(b.n_id, torch.arange(5))
    assert b.num_sampled_nodes == [5, 0, 0] and b.num_sampled_edges == [0, 0]


def test_duplicate_seeds_keep_their_positions():
    colptr, row, _ = to_csc(torch.tensor([[1, 2, 0], [0, 0, 1]]), 3)
    out_row, out_col, node, edge, num_nodes, _ = sample(colptr, row, torch.tensor([0, 1, 0]), [-1])
    assert node.tolist() == [0, 1, 0, 2]  # each seed position keeps its id; 2 is new
    assert out_col.tolist() == [0, 0, 1, 2, 2] and out_row.tolist() == [1, 3, 0, 1, 3]
    assert num_nodes == [3, 1]


# ---- randomness ---------------------------------------------------------------------------------

def test_two_of_ten_is_uniform():
    stats = pytest.importorskip("scipy.stats")
    colptr, row = star(10)
    trials = 9000
    singles = torch.zeros(10, dtype=torch.long)
    pairs = torch.zeros(10, 10, dtype=torch.long)
    for t in range(trials):
        edge = sample(colptr, row, torch.tensor([0]), [2], rng_seed=t)[3]
        singles[edge] += 1
        a, b = sorted(edge.tolist())
        pairs[a, b] += 1
    assert stats.chisquare(singles.numpy()).pvalue > 1e-4
    upper = pairs[torch.triu(torch.ones(10, 10, dtype=torch.bool), 1)]
    assert upper.sum() == trials  # two distinct positions every time
    assert stats.chisquare(upper.numpy()).pvalue > 1e-4


def test_no_repeats_without_replacement_and_repeats_with():
    colptr, row = star(100)
    seeds = torch.zeros(50, dtype=torch.long)
    for k in (5, 70):  # both sides of the kernel's scan limit for taken positions
        _, out_col, _, edge, _, _ = sample(colptr, row, seeds, [k], rng_seed=3)
        assert edge.numel() == 50 * k
        for i in range(50):
            mine = edge[out_col == i]
            assert mine.unique().numel() == k and int(mine.min()) >= 0 and int(mine.max()) < 100
    colptr, row = star(5)
    edge = sample(colptr, row, torch.tensor([0]), [30], replace=True, rng_seed=1)[3]
    assert edge.numel() == 30 and set(edge.tolist()) == set(range(5))  # 30 draws of 5: repeats


# Weights of star(5)'s in-edges: one zero, the rest unequal.
STAR_WEIGHTS = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0], dtype=torch.float64)


def test_weighted_draws_with_replacement_follow_the_weights():
    stats = pytest.importorskip("scipy.stats")
    colptr, row = star(5)
    hits = torch.zeros(5, dtype=torch.long)
    for t in range(300):
        edge = sample(colptr, row, torch.tensor([0]), [20], True, False, t, STAR_WEIGHTS)[3]
        assert edge.numel() == 20
        hits += torch.bincount(edge, minlength=5)
    assert hits[0] == 0  # the zero-weight edge is never drawn
    expected = STAR_WEIGHTS[1:] / STAR_WEIGHTS.sum() * hits.sum()
    assert stats.chisquare(hits[1:].numpy(), expected.numpy()).pvalue > 1e-4


def successive_sampling_pairs(w: torch.Tensor) -> torch.Tensor:
    """P(first draw i, second draw j) [n, n] of two draws without replacement, each with
    probability proportional to its weight among those left: w_i / W * w_j / (W - w_i)."""
    total = float(w.sum())
    expected = torch.zeros(w.numel(), w.numel(), dtype=torch.float64)
    for i in range(w.numel()):
        for j in range(w.numel()):
            if i != j and w[i] > 0:
                expected[i, j] = w[i] / total * w[j] / (total - w[i])
    return expected


def test_weighted_draws_without_replacement_follow_successive_sampling():
    # pyg-lib draws with torch.multinomial: k distinct edges, each drawn in turn with probability
    # proportional to its weight among those left. For k = 2 the ordered pair (i, j) has
    # probability w_i / W * w_j / (W - w_i).
    stats = pytest.importorskip("scipy.stats")
    colptr, row = star(5)
    w = STAR_WEIGHTS
    trials = 6000
    ordered = torch.zeros(5, 5, dtype=torch.long)
    for t in range(trials):
        edge = sample(colptr, row, torch.tensor([0]), [2], False, False, t, w)[3].tolist()
        assert len(edge) == 2 and edge[0] != edge[1] and 0 not in edge  # no repeats, no zeros
        ordered[edge[0], edge[1]] += 1
    expected = successive_sampling_pairs(w)
    mask = expected > 0
    assert int(ordered[~mask].sum()) == 0
    assert stats.chisquare(ordered[mask].numpy(), (expected[mask] * trials).numpy()).pvalue > 1e-4
    # Unordered: the edge set a node receives, whatever the order of the draws.
    unordered = (ordered + ordered.t())[torch.triu(mask, 1)]
    expected_unordered = (expected + expected.t())[torch.triu(mask, 1)] * trials
    assert stats.chisquare(unordered.numpy(), expected_unordered.numpy()).pvalue > 1e-4


def test_weighted_without_replacement_never_repeats_and_takes_every_positive():
    colptr, row = star(100)
    weight = torch.rand(100, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    weight[::3] = 0  # 66 positive weights
    seeds = torch.zeros(40, dtype=torch.long)
    for k in (5, 65):
        _, out_col, _, edge, _, _ = sample(colptr, row, seeds, [k], False, False, 7, weight)
        assert edge.numel() == 40 * k
        for i in range(40):
            mine = edge[out_col == i]
            assert mine.unique().numel() == k and bool((weight[mine] > 0).all())
    for k in (66, 80, -1):  # k at or above the positives: every positive edge, in CSC order
        edge = sample(colptr, row, torch.tensor([0]), [k], False, False, 7, weight)[3]
        assert torch.equal(edge, (weight > 0).nonzero().view(-1))


def test_bad_weights_name_the_argument():
    colptr, row = star(4)
    weight = torch.ones(4, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"weight\[2\] = -1"):
        sample(colptr, row, torch.tensor([0]), [1], weight=torch.tensor([1.0, 1.0, -1.0, 1.0],
                                                                       dtype=torch.float64))
    with pytest.raises(ValueError, match=r"weight\[0\] = nan"):
        sample(colptr, row, torch.tensor([0]), [1], True, weight=torch.tensor(
            [float("nan"), 1.0, 1.0, 1.0], dtype=torch.float64))
    with pytest.raises(TypeError, match=r"weight"):
        sample(colptr, row, torch.tensor([0]), [1], weight=weight.float())
    with pytest.raises(ValueError, match=r"weight has 3 entries"):
        sample(colptr, row, torch.tensor([0]), [1], weight=weight[:3])


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_loader_with_weight_attr_samples_only_positive_weights(replace, direction):
    data = graph_data(num_nodes=50, num_edges=600)
    data.w = torch.rand(data.num_edges)
    data.w[data.edge_index[0] % 3 == 0] = 0  # PyG keeps edge attributes in edge_index order
    sampler = NeighborSampler(data, [4, 3], replace=replace, weight_attr="w",
                              sample_direction=direction)
    assert sampler.edge_weight.dtype == torch.float64
    batches = list(NeighborLoader(data, [4, 3], batch_size=10, neighbor_sampler=sampler))
    assert sum(b.e_id.numel() for b in batches) > 0
    for b in batches:
        assert bool((data.w[b.e_id] > 0).all())
        assert torch.equal(b.w, data.w[b.e_id])
        assert torch.equal(b.n_id[b.edge_index], data.edge_index[:, b.e_id])


def test_loaders_with_weight_attr_run():
    data = graph_data()
    data.w = torch.rand(data.num_edges)
    b = next(iter(NeighborLoader(data, [3, 2], batch_size=16, weight_attr="w")))
    assert b.batch_size == 16 and b.edge_index.size(1) > 0
    b = next(iter(LinkNeighborLoader(data, [3, 2], batch_size=16, weight_attr="w",
                                     neg_sampling_ratio=1.0)))
    assert b.edge_label_index.size(1) == 32


def test_int32_and_int64_graphs_sample_the_same():
    data = graph_data(num_nodes=80, num_edges=700)
    colptr, row, _ = to_csc(data.edge_index, 80)
    seeds = torch.tensor([3, 17, 42, 79])
    for replace in (False, True):
        wide = sample(colptr, row, seeds, [4, 3], replace, False, 11)
        narrow = sample(colptr.int(), row.int(), seeds, [4, 3], replace, False, 11)
        for a, b in zip(wide[:4], narrow[:4]):
            assert b.dtype == torch.int32 and torch.equal(a, b.long())
        assert wide[4:] == narrow[4:]


def test_disjoint_op_returns_pyg_libs_node_pairs():
    colptr, row, _ = to_csc(torch.tensor([[1, 2, 0], [0, 0, 1]]), 3)
    _, _, node, _, _, _ = sample(colptr, row, torch.tensor([0, 1]), [-1], disjoint=True)
    assert node.shape == (5, 2)
    assert node.tolist() == [[0, 0], [1, 1], [0, 1], [0, 2], [1, 0]]


def test_manual_seed_makes_a_run_reproducible():
    data = graph_data()

    def run(seed):
        torch.manual_seed(seed)
        return [(b.n_id, b.e_id) for b in NeighborLoader(data, [3, 2], batch_size=16,
                                                          shuffle=True)]

    first, again, other = run(0), run(0), run(1)
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(first, again))
    assert any(not torch.equal(a[1], b[1]) for a, b in zip(first, other))


# ---- bad inputs and the options that come later -------------------------------------------------

def test_bad_op_inputs_name_the_argument():
    colptr, row = star(4)
    with pytest.raises(ValueError, match=r"num_neighbors\[0\]"):
        sample(colptr, row, torch.tensor([0]), [-2])
    with pytest.raises(IndexError, match=r"seed\[1\] = 9"):
        sample(colptr, row, torch.tensor([0, 9]), [1])
    with pytest.raises(ValueError, match=r"colptr must start at 0 and end at"):
        sample(colptr, row[:3], torch.tensor([0]), [1])
    with pytest.raises(TypeError, match=r"seed"):
        torch.ops.iognn.neighbor_sample(colptr, row, torch.tensor([0], dtype=torch.int32), [1])
    with pytest.raises(TypeError, match=r"colptr"):
        torch.ops.iognn.neighbor_sample(colptr.float(), row, torch.tensor([0]), [1])


def test_bad_fan_out_through_the_loader():
    with pytest.raises(ValueError, match=r"num_neighbors\[1\]"):
        next(iter(NeighborLoader(graph_data(), [2, -3], batch_size=4)))


@pytest.mark.parametrize("kwargs, needle", [
    (dict(time_attr="t", weight_attr="w"), "weight_attr='w' with time_attr='t'"),
    (dict(subgraph_type="induced"), "subgraph_type='induced'"),
    (dict(directed=False), "directed=False"),
])
def test_later_options_raise_naming_the_argument(kwargs, needle):
    data = graph_data()
    data.w = torch.rand(data.num_edges)
    data.t = torch.arange(data.num_nodes)
    with pytest.raises(NotImplementedError, match=re.escape(needle)):
        NeighborLoader(data, [2], batch_size=4, **kwargs)
    with pytest.raises(NotImplementedError, match=re.escape(needle)):
        LinkNeighborLoader(data, [2], batch_size=4, **kwargs)
    with pytest.raises(NotImplementedError, match=re.escape(needle)):
        NeighborSampler(data, [2], **kwargs)


def test_link_loader_samples_nothing_later_than_its_edge_label_time():
    data = graph_data()
    data.t = torch.randint(0, 100, (data.num_nodes,), generator=torch.Generator().manual_seed(1))
    label_time = torch.randint(0, 100, (data.num_edges,),
                               generator=torch.Generator().manual_seed(2))
    loader = LinkNeighborLoader(data, [3, 2], batch_size=8, time_attr="t",
                                edge_label_time=label_time)
    for b in loader:  # PyG maps every tree to its label edge: batch indexes edge_label_time
        seeds = b.num_sampled_nodes[0]  # the label edges' endpoints, whatever their own times
        assert (b.t[seeds:] <= b.edge_label_time[b.batch[seeds:]]).all()


def test_pyg_alone_cannot_sample_here_but_iognn_can():
    # The environment this loader is for: PyG without pyg-lib or torch-sparse.
    if torch_geometric.typing.WITH_PYG_LIB or torch_geometric.typing.WITH_TORCH_SPARSE:
        pytest.skip("pyg-lib or torch-sparse is installed")
    from torch_geometric.loader import NeighborLoader as PyGNeighborLoader
    data = graph_data()
    with pytest.raises(ImportError, match="pyg-lib"):
        next(iter(PyGNeighborLoader(data, [2], batch_size=4)))
    assert next(iter(NeighborLoader(data, [2], batch_size=4))).batch_size == 4


def test_import_iognn_does_not_load_the_sampler():
    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(repo / "python")] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    code = ("import sys, iognn\n"
            "assert 'iognn.sampler' not in sys.modules and 'iognn.loader' not in sys.modules\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                            cwd=repo, timeout=300)
    assert result.returncode == 0, result.stderr


# ---- a PyG training loop ------------------------------------------------------------------------

def class_graph(n: int, classes: int, num_edges: int) -> Data:
    """Nodes with class-revealing features and edges between nodes of one class only."""
    y = torch.randint(0, classes, (n,))
    x = torch.randn(n, 16) * 0.5 + torch.nn.functional.one_hot(y, 16).float()
    same = torch.nonzero(y.unsqueeze(0) == y.unsqueeze(1))
    return Data(x=x, y=y, edge_index=same[torch.randint(0, same.size(0), (num_edges,))].t())


def first_and_last_epoch_loss(loader, model, batch_loss, epochs: int):
    """Trains with Adam; the mean loss per supervised example of the first and the last epoch.
    batch_loss(model, batch) -> (mean loss, number of examples)."""
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(epochs):
        total, count = 0.0, 0
        for b in loader:
            opt.zero_grad()
            loss, size = batch_loss(model, b)
            loss.backward()
            opt.step()
            total += loss.item() * size
            count += size
        losses.append(total / count)
    return losses[0], losses[-1]


def test_graphsage_training_lowers_the_loss():
    from torch_geometric.nn import GraphSAGE
    torch.manual_seed(0)
    data = class_graph(400, 3, 4000)
    model = GraphSAGE(16, 32, num_layers=2, out_channels=3)
    loader = NeighborLoader(data, [10, 5], batch_size=64, shuffle=True, num_workers=0)

    def batch_loss(model, b):
        out = model(b.x, b.edge_index)[:b.batch_size]
        return torch.nn.functional.cross_entropy(out, b.y[:b.batch_size]), b.batch_size

    first, last = first_and_last_epoch_loss(loader, model, batch_loss, epochs=5)
    assert last < 0.5 * first


def test_link_prediction_training_lowers_the_loss():
    from torch_geometric.nn import GraphSAGE
    torch.manual_seed(0)
    # Many classes: few random negatives fall within a class, so dot products can separate them.
    data = class_graph(300, 12, 3000)
    model = GraphSAGE(16, 32, num_layers=2)
    loader = LinkNeighborLoader(data, [10, 5], batch_size=256, shuffle=True, neg_sampling_ratio=1.0)

    def batch_loss(model, b):
        h = model(b.x, b.edge_index)
        src, dst = b.edge_label_index
        logits = (h[src] * h[dst]).sum(-1)
        return (torch.nn.functional.binary_cross_entropy_with_logits(logits, b.edge_label),
                b.edge_label.numel())

    first, last = first_and_last_epoch_loss(loader, model, batch_loss, epochs=6)
    assert last < 0.8 * first


# Temporal sampling ##############################################################################

def timed_data(seed=0):
    """graph_data with int64 node times `t` and edge times `et` in [0, 100)."""
    data = graph_data(seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    data.t = torch.randint(0, 100, (data.num_nodes,), generator=g)
    data.et = torch.randint(0, 100, (data.num_edges,), generator=g)
    return data


@pytest.mark.parametrize("strategy", ["uniform", "last"])
@pytest.mark.parametrize("replace", [False, True])
def test_loader_samples_nothing_later_than_its_seed(strategy, replace):
    data = timed_data()
    input_time = torch.randint(0, 100, (data.num_nodes,),
                               generator=torch.Generator().manual_seed(5))
    seen_edges = 0
    for kwargs in (dict(), dict(input_time=input_time)):  # seed times: the seeds' own, or given
        loader = NeighborLoader(data, [4, 3], batch_size=6, time_attr="t", replace=replace,
                                temporal_strategy=strategy, **kwargs)
        for b in loader:
            # Temporal batches are disjoint: batch.batch names each node's tree (seed position).
            # (The seeds themselves may be later than a given seed time: only neighbours count.)
            seed_time = b.seed_time if "input_time" in kwargs else b.t[:b.batch_size]
            n = b.batch_size
            assert (b.t[n:] <= seed_time[b.batch[n:]]).all()
            assert (b.batch[b.edge_index[0]] == b.batch[b.edge_index[1]]).all()
            seen_edges += b.num_edges
    assert seen_edges > 0
    # Edge-level times: every sampled edge's time, against its tree's seed time.
    loader = NeighborLoader(data, [4, 3], batch_size=6, time_attr="et", input_time=input_time,
                            replace=replace, temporal_strategy=strategy)
    for b in loader:
        assert (data.et[b.e_id] <= b.seed_time[b.batch[b.edge_index[1]]]).all()
        assert (b.et == data.et[b.e_id]).all()


def star_data(times):
    """Node 0 with in-neighbours 1 .. len(times); node u at time times[u - 1], node 0 at time 9."""
    n = len(times)
    edge_index = torch.stack([torch.arange(1, n + 1), torch.zeros(n, dtype=torch.long)])
    return Data(edge_index=edge_index, num_nodes=n + 1, t=torch.tensor([9] + times))


def test_last_takes_the_most_recent_and_uniform_takes_any_eligible():
    data = star_data([5, 9, 1, 9, 3, 7, 12, 0, 8, 2])  # node 7 (time 12) is later than the seed
    last = NeighborLoader(data, [3], input_nodes=torch.zeros(20, dtype=torch.long), batch_size=20,
                          time_attr="t", temporal_strategy="last")
    b = next(iter(last))
    for tree in range(20):  # the three most recent eligible: nodes 2, 4 (time 9) and 9 (time 8)
        assert set(b.n_id[b.batch == tree][1:].tolist()) == {2, 4, 9}
    uniform = NeighborLoader(data, [3], input_nodes=torch.zeros(200, dtype=torch.long),
                             batch_size=200, time_attr="t")
    b = next(iter(uniform))
    assert set(b.n_id[200:].tolist()) == set(range(1, 11)) - {7}


def test_uniform_is_uniform_over_the_eligible_ones():
    stats = pytest.importorskip("scipy.stats")
    colptr, row = star(10)
    edge_time = torch.tensor([5, 9, 1, 9, 3, 7, 12, 0, 8, 2])
    hits = torch.zeros(10, dtype=torch.long)
    for t in range(6000):
        edge = torch.ops.iognn.neighbor_sample(
            colptr, row, torch.tensor([0]), [3], disjoint=True, rng_seed=t,
            edge_time=edge_time, seed_time=torch.tensor([9]))[3]
        hits[edge] += 1
    assert hits[6] == 0  # time 12: never eligible
    eligible = torch.cat([hits[:6], hits[7:]])
    assert eligible.sum() == 6000 * 3
    assert stats.chisquare(eligible.numpy()).pvalue > 1e-4


def test_temporal_sampling_is_reproducible_under_manual_seed():
    data = timed_data()

    def run(seed):
        torch.manual_seed(seed)
        loader = NeighborLoader(data, [4, 3], batch_size=6, time_attr="et", shuffle=True,
                                input_time=torch.full((data.num_nodes,), 60))
        return [b.e_id for b in loader]

    a, b, c = run(3), run(3), run(4)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not all(torch.equal(x, y) for x, y in zip(a, c))


def test_bad_temporal_inputs_name_the_argument():
    colptr, row = star(4)
    seed = torch.tensor([0])
    op = torch.ops.iognn.neighbor_sample
    with pytest.raises(ValueError, match="node_time"):
        op(colptr, row, seed, [1], disjoint=True, node_time=torch.zeros(3, dtype=torch.long))
    with pytest.raises(TypeError, match="edge_time"):
        op(colptr, row, seed, [1], disjoint=True, edge_time=torch.zeros(4),
           seed_time=torch.zeros(1, dtype=torch.long))
    with pytest.raises(ValueError, match="seed_time"):
        op(colptr, row, seed, [1], disjoint=True, node_time=torch.zeros(5, dtype=torch.long),
           seed_time=torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="edge_time needs seed_time"):
        op(colptr, row, seed, [1], disjoint=True, edge_time=torch.zeros(4, dtype=torch.long))
    with pytest.raises(ValueError, match="disjoint=True"):
        op(colptr, row, seed, [1], node_time=torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match="temporal_strategy"):
        op(colptr, row, seed, [1], disjoint=True, node_time=torch.zeros(5, dtype=torch.long),
           temporal_strategy="first")
    with pytest.raises(NotImplementedError, match="weighted temporal sampling"):
        op(colptr, row, seed, [1], disjoint=True, weight=torch.ones(4, dtype=torch.float64),
           node_time=torch.zeros(5, dtype=torch.long))
    data = timed_data()
    data.ft = data.t.float()
    with pytest.raises(ValueError, match=re.escape("time_attr='ft'")):
        NeighborLoader(data, [2], batch_size=4, time_attr="ft")
    with pytest.raises(ValueError, match="temporal_strategy"):
        NeighborLoader(data, [2], batch_size=4, time_attr="t", temporal_strategy="first")
    with pytest.raises(ValueError, match="input_time"):
        next(iter(NeighborLoader(data, [2], batch_size=4, time_attr="t",
                                 input_time=torch.zeros(data.num_nodes))))
    with pytest.raises(NotImplementedError, match=re.escape("sample_direction='backward'")):
        NeighborSampler(data, [2], time_attr="t", sample_direction="backward")


def test_int32_indices_inside_int64_batches_outside():
    """The sampler keeps an int32 CSC where ids fit (half the bytes for the kernel) and gives the
    batches in int64, as PyG's samplers do; the sample is the int64 CSC's."""
    data = graph_data()
    sampler = NeighborSampler(data, [3, 2], disjoint=True)
    assert sampler.colptr.dtype == sampler.row.dtype == torch.int32
    seed = torch.tensor([0, 5, 7, 5])
    torch.manual_seed(5)
    narrow = sampler._sample(seed)
    sampler.colptr, sampler.row = sampler.colptr.long(), sampler.row.long()
    torch.manual_seed(5)
    wide = sampler._sample(seed)
    for key in ("node", "row", "col", "edge", "batch"):
        assert getattr(narrow, key).dtype == torch.int64, key
        assert torch.equal(getattr(narrow, key), getattr(wide, key)), key
    batch = next(iter(NeighborLoader(data, [3, 2], batch_size=8)))
    for key in ("n_id", "e_id", "edge_index"):
        assert batch[key].dtype == torch.int64, key


def test_shared_memory_csc_for_loader_workers():
    """With share_memory (a loader with workers), the kernel's CSC lives in shared memory too."""
    data = graph_data()
    sampler = NeighborSampler(data, [3, 2], share_memory=True)
    assert sampler.colptr.is_shared() and sampler.row.is_shared()
    assert not NeighborSampler(data, [3, 2]).row.is_shared()
    torch.manual_seed(0)
    batches = list(NeighborLoader(data, [3, 2], batch_size=20, num_workers=1))
    assert len(batches) == 3 and all(b.n_id.dtype == torch.int64 for b in batches)


@pytest.mark.parametrize("bad", [2**31 + 5, 2**32 + 5, -1])
def test_seed_ids_an_int32_csc_cannot_hold_are_refused(bad):
    """A cast to the int32 CSC's dtype would wrap 2^32 + 5 onto node 5: it is an IndexError."""
    sampler = NeighborSampler(graph_data(), [3])
    with pytest.raises(IndexError, match=re.escape(f"seed[1] = {bad} is out of range")):
        sampler._sample(torch.tensor([0, bad]))
