"""iognn.sampler / iognn.loader on HeteroData: PyG's NeighborLoader and LinkNeighborLoader contracts
on iognn's heterogeneous CPU neighbour sampler (torch.ops.iognn.hetero_neighbor_sample).

The batch's structure (every node and edge store, n_id, e_id, input_id, batch_size, the
num_sampled_nodes / num_sampled_edges dicts), sampled edges exist in the graph, fan-out bounds per
edge type and hop, full neighbourhoods against a reference traversal written here, determinism
under torch.manual_seed, uniformity, replace / disjoint, temporal node times, weights, link
batches, a HeteroConv model's training step, and the errors.
"""
from __future__ import annotations

import pytest
import torch
from torch_geometric.data import HeteroData

from iognn.loader import LinkNeighborLoader, NeighborLoader
from iognn.sampler import NeighborSampler

WRITES = ("author", "writes", "paper")
REV_WRITES = ("paper", "rev_writes", "author")
AFFILIATED = ("author", "affiliated", "institution")
CITES = ("paper", "cites", "paper")
EMPTY = ("institution", "hosts", "paper")  # an edge type with no edges


def academic(seed=0, num_papers=30, num_authors=20, num_institutions=4):
    """paper / author / institution / venue (a node type with no edges): writes (with duplicate
    edges), rev_writes, affiliated, cites, and an edge type with no edges; some isolated nodes."""
    g = torch.Generator().manual_seed(seed)
    data = HeteroData()
    data["paper"].x = torch.randn(num_papers, 8, generator=g)
    data["paper"].y = torch.randint(0, 3, (num_papers,), generator=g)
    data["author"].x = torch.randn(num_authors, 8, generator=g)
    data["institution"].x = torch.randn(num_institutions, 8, generator=g)
    data["venue"].x = torch.randn(3, 8, generator=g)
    # Authors 0 .. num_authors - 3 write; the last two authors and the last papers are isolated.
    writes = torch.stack([torch.randint(0, num_authors - 2, (80,), generator=g),
                          torch.randint(0, num_papers - 3, (80,), generator=g)])
    writes = torch.cat([writes, writes[:, :5]], 1)  # duplicate edges
    data[WRITES].edge_index = writes
    data[REV_WRITES].edge_index = writes.flip(0)
    data[AFFILIATED].edge_index = torch.stack(
        [torch.arange(num_authors - 2), torch.arange(num_authors - 2) % num_institutions])
    data[CITES].edge_index = torch.randint(0, num_papers - 3, (2, 60), generator=g)
    data[EMPTY].edge_index = torch.empty(2, 0, dtype=torch.long)
    for et in data.edge_types:
        data[et].edge_attr = torch.randn(data[et].num_edges, 2, generator=g)
    return data


def original_edges(data, et):
    return set(map(tuple, data[et].edge_index.t().tolist()))


def check_batch_edges_exist(data, batch):
    """Every sampled edge (through n_id and e_id) is the graph's edge e_id, between those nodes."""
    for et in data.edge_types:
        src, _, dst = et
        row, col = batch[et].edge_index
        e_id = batch[et].e_id
        assert row.numel() == col.numel() == e_id.numel()
        if e_id.numel():
            assert row.max() < batch[src].num_nodes and col.max() < batch[dst].num_nodes
            assert torch.equal(data[et].edge_index[0, e_id], batch[src].n_id[row])
            assert torch.equal(data[et].edge_index[1, e_id], batch[dst].n_id[col])
            assert torch.equal(batch[et].edge_attr, data[et].edge_attr[e_id])


def reference_k_hop(data, seed_type, seeds, num_hops):
    """The nodes and edges (ids per type) of the full directed k-hop traversal as the sampler
    defines it: at hop h, every edge type (s -> d) adds the in-edges of the d-nodes new at h - 1."""
    seen = {t: set() for t in data.node_types}
    seen[seed_type] = set(seeds)
    frontier = {t: set() for t in data.node_types}
    frontier[seed_type] = set(seeds)
    edges = {et: set() for et in data.edge_types}
    for _ in range(num_hops):
        new = {t: set() for t in data.node_types}
        for et in data.edge_types:
            src, _, dst = et
            for e, (u, v) in enumerate(data[et].edge_index.t().tolist()):
                if v in frontier[dst]:
                    edges[et].add(e)
                    if u not in seen[src]:
                        new[src].add(u)
        for t in data.node_types:
            seen[t] |= new[t]
        frontier = new
    return seen, edges


# ---- structure ----------------------------------------------------------------------------------

def test_batch_has_pygs_structure():
    data = academic()
    loader = NeighborLoader(data, num_neighbors=[3, 2], input_nodes=("paper", torch.arange(10)),
                            batch_size=4)
    batches = list(loader)
    assert len(batches) == 3
    for i, batch in enumerate(batches):
        assert set(batch.node_types) == set(data.node_types)
        assert set(batch.edge_types) == set(data.edge_types)
        size = min(4, 10 - 4 * i)
        assert batch["paper"].batch_size == size
        assert torch.equal(batch["paper"].input_id, torch.arange(4 * i, 4 * i + size))
        assert torch.equal(batch["paper"].n_id[:size], torch.arange(4 * i, 4 * i + size))
        for t in data.node_types:
            assert batch[t].n_id.dtype == torch.long
            assert batch[t].x.shape == (batch[t].n_id.numel(), 8)
            assert torch.equal(batch[t].x, data[t].x[batch[t].n_id])
            assert len(batch[t].num_sampled_nodes) == 3
            assert sum(batch[t].num_sampled_nodes) == batch[t].num_nodes
        assert batch["paper"].num_sampled_nodes[0] == size
        for et in data.edge_types:
            assert batch[et].e_id.dtype == torch.long
            assert len(batch[et].num_sampled_edges) == 2
            assert sum(batch[et].num_sampled_edges) == batch[et].num_edges
        assert batch["venue"].num_nodes == 0 and batch[EMPTY].num_edges == 0
        check_batch_edges_exist(data, batch)


def test_fan_out_bounds_per_edge_type_and_hop():
    data = academic()
    fanouts = {WRITES: [2, 1], REV_WRITES: [3, 0], AFFILIATED: [1, 1], CITES: [0, 2],
               EMPTY: [5, 5]}
    loader = NeighborLoader(data, num_neighbors=fanouts, input_nodes=("paper", torch.arange(27)),
                            batch_size=9)
    for batch in loader:
        for et, ks in fanouts.items():
            dst = et[-1]
            col = batch[et].edge_index[1]
            start = 0
            for hop, (k, count) in enumerate(zip(ks, batch[et].num_sampled_edges)):
                hop_col = col[start:start + count]
                start += count
                # Hop h's edges end at the dst nodes first seen at hop h - 1.
                first = sum(batch[dst].num_sampled_nodes[:hop])
                last = first + batch[dst].num_sampled_nodes[hop]
                assert ((hop_col >= first) & (hop_col < last)).all()
                if count:
                    assert torch.bincount(hop_col).max() <= k
                if k == 0:
                    assert count == 0


@pytest.mark.parametrize("num_hops", [1, 2, 3])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_full_neighbourhoods_are_the_reference_k_hop(num_hops, dtype):
    data = academic()
    for et in data.edge_types:
        data[et].edge_index = data[et].edge_index.to(dtype)
    seeds = [0, 5, 26, 29]  # 29: an isolated paper
    loader = NeighborLoader(data, num_neighbors=[-1] * num_hops,
                            input_nodes=("paper", torch.tensor(seeds)), batch_size=len(seeds))
    batch = next(iter(loader))
    nodes, edges = reference_k_hop(data, "paper", seeds, num_hops)
    for t in data.node_types:
        assert sorted(batch[t].n_id.tolist()) == sorted(nodes[t])  # each node once
    for et in data.edge_types:
        assert sorted(batch[et].e_id.tolist()) == sorted(edges[et])  # each edge once
    check_batch_edges_exist(data, batch)


# ---- randomness ---------------------------------------------------------------------------------

def test_manual_seed_makes_a_run_reproducible():
    data = academic()

    def run(seed):
        torch.manual_seed(seed)
        loader = NeighborLoader(data, num_neighbors=[2, 2], input_nodes="paper", batch_size=8)
        return [(b["author"].n_id, b[WRITES].e_id, b[REV_WRITES].e_id) for b in loader]

    a, b, c = run(0), run(0), run(1)
    assert all(torch.equal(x, y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))
    assert not all(torch.equal(x, y) for ra, rc in zip(a, c) for x, y in zip(ra, rc))


def star_data(degree=10):
    """Paper 0 written by authors 0 .. degree - 1; a second edge type from the same authors."""
    data = HeteroData()
    data["paper"].num_nodes = 1
    data["author"].num_nodes = degree
    data[WRITES].edge_index = torch.stack([torch.arange(degree), torch.zeros(degree, dtype=torch.long)])
    data["author", "reviews", "paper"].edge_index = data[WRITES].edge_index.clone()
    return data


def test_two_of_ten_is_uniform_and_edge_types_draw_independently():
    stats = pytest.importorskip("scipy.stats")
    sampler = NeighborSampler(star_data(), num_neighbors=[2])
    trials = 6000
    singles = torch.zeros(10, dtype=torch.long)
    same = 0
    torch.manual_seed(0)
    for _ in range(trials):
        out = sampler._sample({"paper": torch.tensor([0])})
        writes, reviews = out.edge[WRITES], out.edge[("author", "reviews", "paper")]
        singles[writes] += 1
        same += sorted(writes.tolist()) == sorted(reviews.tolist())
    assert stats.chisquare(singles.numpy()).pvalue > 1e-4
    # Independent draws pick the same pair with probability 1/45.
    assert abs(same - trials / 45) < 5 * (trials / 45) ** 0.5


def test_replace_repeats_and_without_never_repeats():
    sampler = NeighborSampler(star_data(4), num_neighbors=[6], replace=True)
    out = sampler._sample({"paper": torch.tensor([0])})
    assert out.edge[WRITES].numel() == 6
    assert out.node["author"].numel() == len(set(out.edge[WRITES].tolist()))
    sampler = NeighborSampler(star_data(10), num_neighbors=[6])
    out = sampler._sample({"paper": torch.tensor([0])})
    assert len(set(out.edge[WRITES].tolist())) == 6


def test_disjoint_grows_one_tree_per_seed():
    data = academic()
    loader = NeighborLoader(data, num_neighbors=[-1, -1], input_nodes=("paper", torch.tensor([0, 0, 5])),
                            batch_size=3, disjoint=True)
    batch = next(iter(loader))
    assert torch.equal(batch["paper"].batch[:3], torch.arange(3))
    for i in range(3):
        nodes, _ = reference_k_hop(data, "paper", [batch["paper"].n_id[i].item()], 2)
        for t in data.node_types:
            mine = batch[t].n_id[batch[t].batch == i]
            assert sorted(mine.tolist()) == sorted(nodes[t])
    for et in data.edge_types:  # edges stay within their tree
        row, col = batch[et].edge_index
        assert torch.equal(batch[et[0]].batch[row], batch[et[-1]].batch[col])


def test_temporal_node_times_sample_nothing_later_than_the_seed():
    data = academic()
    g = torch.Generator().manual_seed(3)
    for t in ("paper", "author"):
        data[t].time = torch.randint(0, 50, (data[t].num_nodes,), generator=g)
    loader = NeighborLoader(data, num_neighbors=[-1, -1], input_nodes=("paper", torch.arange(20)),
                            batch_size=5, time_attr="time", temporal_strategy="last")
    for batch in loader:
        seed_time = batch["paper"].time[:batch["paper"].batch_size]
        for t in ("paper", "author"):
            limit = seed_time[batch[t].batch]
            assert (batch[t].time <= limit).all()
        check_batch_edges_exist(data, batch)


def test_weight_attr_never_samples_zero_weights():
    data = academic()
    for et in data.edge_types:
        data[et].w = (torch.arange(data[et].num_edges) % 2).double()
    loader = NeighborLoader(data, num_neighbors=[3, 3], input_nodes="paper", batch_size=10,
                            weight_attr="w")
    for batch in loader:
        for et in data.edge_types:
            assert (data[et].w[batch[et].e_id] > 0).all()


# ---- link batches and training ------------------------------------------------------------------

@pytest.mark.parametrize("disjoint", [False, True])
def test_link_loader_on_an_edge_type(disjoint):
    data = academic()
    loader = LinkNeighborLoader(data, num_neighbors=[2, 2], edge_label_index=(WRITES, None),
                                batch_size=16, neg_sampling_ratio=1.0, disjoint=disjoint)
    batch = next(iter(loader))
    label_index = batch[WRITES].edge_label_index
    assert label_index.shape == (2, 32) and batch[WRITES].edge_label.numel() == 32
    assert label_index[0].max() < batch["author"].num_nodes
    assert label_index[1].max() < batch["paper"].num_nodes
    positives = original_edges(data, WRITES)
    src = batch["author"].n_id[label_index[0, :16]]
    dst = batch["paper"].n_id[label_index[1, :16]]
    assert all((u, v) in positives for u, v in zip(src.tolist(), dst.tolist()))
    check_batch_edges_exist(data, batch)


def test_a_hetero_conv_model_trains_one_step():
    from torch_geometric.nn import HeteroConv, SAGEConv, to_hetero
    data = academic()
    loader = NeighborLoader(data, num_neighbors=[4, 4], input_nodes="paper", batch_size=8)
    batch = next(iter(loader))
    conv = HeteroConv({et: SAGEConv((-1, -1), 16) for et in data.edge_types}, aggr="sum")
    head = torch.nn.Linear(16, 3)
    with torch.no_grad():
        conv(batch.x_dict, batch.edge_index_dict)  # initialises the lazy layers
    params = list(conv.parameters()) + list(head.parameters())
    opt = torch.optim.SGD(params, lr=0.1)
    before = [p.detach().clone() for p in params]
    out = head(conv(batch.x_dict, batch.edge_index_dict)["paper"][:batch["paper"].batch_size])
    loss = torch.nn.functional.cross_entropy(out, batch["paper"].y[:batch["paper"].batch_size])
    loss.backward()
    opt.step()
    assert torch.isfinite(loss)
    assert any(not torch.equal(a, b) for a, b in zip(before, params))

    class Sage(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = SAGEConv((-1, -1), 3)

        def forward(self, x, edge_index):
            return self.conv(x, edge_index)

    model = to_hetero(Sage(), batch.metadata(), aggr="sum")
    out = model(batch.x_dict, batch.edge_index_dict)["paper"]
    out[:batch["paper"].batch_size].sum().backward()


# ---- errors -------------------------------------------------------------------------------------

def test_bad_inputs_name_the_argument():
    data = academic()
    with pytest.raises(ValueError, match=r"num_neighbors\[\('author', 'writes', 'paper'\)\]\[1\]"):
        next(iter(NeighborLoader(data, num_neighbors={et: [2, -3] if et == WRITES else [1, 1]
                                                      for et in data.edge_types},
                                 input_nodes="paper", batch_size=4)))
    sampler = NeighborSampler(data, num_neighbors=[2])
    with pytest.raises(ValueError, match="'journal' \\(input_nodes\\)"):
        sampler._sample({"journal": torch.tensor([0])})
    with pytest.raises(IndexError, match=r"seeds\[0\]\[1\] = 30 is out of range"):
        sampler._sample({"paper": torch.tensor([0, 30])})
    with pytest.raises(IndexError, match=r"seeds\[0\]\[1\] = 30 is out of range"):
        next(iter(NeighborLoader(data, [2], input_nodes=("paper", torch.tensor([0, 30])),
                                 batch_size=2)))


def test_options_not_supported_raise():
    data = academic()
    data[WRITES].time = torch.arange(data[WRITES].num_edges)
    with pytest.raises(NotImplementedError, match="edge-level times of a HeteroData"):
        NeighborLoader(data, [2], input_nodes="paper", batch_size=2, time_attr="time")
    with pytest.raises(NotImplementedError, match="subgraph_type='induced'"):
        NeighborLoader(academic(), [2], input_nodes="paper", batch_size=2,
                       subgraph_type="induced")


def test_op_errors_name_the_argument():
    colptr, row = torch.tensor([0, 1]), torch.tensor([0])
    op = torch.ops.iognn.hetero_neighbor_sample
    with pytest.raises(ValueError, match=r"colptrs\[0\] must have 3 entries"):
        op([1, 2], [0, 1], [torch.tensor([0, 1])], [row], [0], [torch.tensor([0])], [1], 1,
           False, False, 0, [], [], [], [])
    with pytest.raises(ValueError, match=r"edge_types\[0\] = \(0, 5\)"):
        op([1, 1], [0, 5], [colptr], [row], [0], [torch.tensor([0])], [1], 1, False, False, 0,
           [], [], [], [])
    with pytest.raises(IndexError, match=r"rows\[0\]\[0\] = 3"):
        op([1, 1], [0, 1], [colptr], [torch.tensor([3])], [1], [torch.tensor([0])], [1], 1,
           False, False, 0, [], [], [], [])
    with pytest.raises(ValueError, match=r"num_neighbors\[0\]\[0\] must be >= 0"):
        op([1, 1], [0, 1], [colptr], [row], [1], [torch.tensor([0])], [-2], 1, False, False, 0,
           [], [], [], [])
    with pytest.raises(ValueError, match=r"seed_types\[0\] = 2"):
        op([1, 1], [0, 1], [colptr], [row], [2], [torch.tensor([0])], [1], 1, False, False, 0,
           [], [], [], [])
    with pytest.raises(TypeError, match=r"rows\[0\] has dtype Int"):
        op([1, 1], [0, 1], [colptr], [row.int()], [1], [torch.tensor([0])], [1], 1, False,
           False, 0, [], [], [], [])
