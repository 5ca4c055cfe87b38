"""Adjacency inputs of the iognn.nn layers: torch.sparse COO/CSR/CSC matrices and EdgeIndex
against PyG given the same input (its per-layer sparse semantics, attention weights returned as
PyG returns them), and the per-adjacency Graph cache (reuse, in-place modification, lifetime)."""
import copy
import gc
import weakref

import pytest
import torch
import torch_geometric
import torch_geometric.nn as pyg_nn

import iognn
import iognn.nn as io_nn
from iognn.nn import _graph

from conftest import GRAPH_CASES
from test_nn_basic import assert_parity, features, mlp

# torch's beta warnings about sparse CSR/CSC support and PyG's COO-to-CSR conversion notices
pytestmark = pytest.mark.filterwarnings("ignore:.*[Ss]parse")
N = 30


def random_adjacency(seed=0, loops=True, duplicates=True):
    """A [2, E] edge_index over N nodes with self-loops and duplicate edges, and positive values."""
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, N, (2, 150), generator=gen)
    if loops:
        edge_index = torch.cat([edge_index, torch.arange(0, N, 4).repeat(2, 1)], dim=1)
    if duplicates:
        edge_index = torch.cat([edge_index, edge_index[:, :20]], dim=1)
    values = torch.rand(edge_index.size(1), generator=gen) + 0.5
    return edge_index, values


def sparse(kind, edge_index, values):
    """adj_t[target, source] = value: 'coo' keeps duplicates (uncoalesced), 'csr'/'csc' sum them."""
    coo = torch.sparse_coo_tensor(edge_index.flip(0), values, (N, N))
    if kind == "coo":
        return coo
    return coo.coalesce().to_sparse_csr() if kind == "csr" else coo.coalesce().to_sparse_csc()


# PyG renders one ``propagate`` per class from its first instance's ``fuse`` flag: after e.g.
# ``SAGEConv(aggr=[...])`` anywhere in the process, a fusable SAGEConv raises on sparse inputs.
# Fusable references therefore get classes of their own (PyG needs their source: no type()).
class FusedGCNConv(pyg_nn.GCNConv):
    pass


class FusedSAGEConv(pyg_nn.SAGEConv):
    pass


class FusedGINConv(pyg_nn.GINConv):
    pass


class FusedGraphConv(pyg_nn.GraphConv):
    pass


FUSED = {"GCNConv": FusedGCNConv, "SAGEConv": FusedSAGEConv, "GINConv": FusedGINConv,
         "GraphConv": FusedGraphConv}


def pyg_class(name, aggr="add"):
    fusable = isinstance(aggr, str) and aggr in ("add", "sum", "mean", "min", "max")
    return FUSED[name] if fusable and name in FUSED else getattr(pyg_nn, name)


def make_pair(name, *args, **kwargs):
    torch.manual_seed(7)
    ours = getattr(io_nn, name)(*args, **kwargs)
    torch.manual_seed(7)
    default = "mean" if name == "SAGEConv" else "add"
    theirs = pyg_class(name, kwargs.get("aggr", default))(*args, **kwargs)
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def stored_entries(adj):
    """The [2, E] edge_index of a sparse matrix's stored entries, in storage order."""
    return iognn.adjacency.to_edge_index(adj)[0]


def x_input(channels=6):
    x, inputs = features(N, N, channels, bipartite=False, seed=3)
    return x, inputs


# ---- sparse matrices ----------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["coo", "csr"])
@pytest.mark.parametrize("kwargs", [{}, {"improved": True}, {"normalize": False}],
                         ids=["default", "improved", "unnormalised"])
def test_gcn_sparse_semantics_match_pyg(kind, kwargs):
    adj = sparse(kind, *random_adjacency())
    reference = adj.clone()  # PyG's unfused path flags a COO input coalesced, in place
    ours, theirs = make_pair("GCNConv", 6, 5, **kwargs)
    x, inputs = x_input()
    assert_parity(ours, theirs, lambda m: m(x, adj if m is ours else reference), inputs)


def test_gcn_sparse_csc_is_refused_like_pyg():
    adj = sparse("csc", *random_adjacency())
    ours, theirs = make_pair("GCNConv", 6, 5)
    x, _ = x_input()
    with pytest.raises(NotImplementedError):
        theirs(x, adj)
    with pytest.raises(NotImplementedError, match="CSC"):
        ours(x, adj)
    unnormalised = make_pair("GCNConv", 6, 5, normalize=False)
    assert_parity(*unnormalised, lambda m: m(x, adj), (x,))


@pytest.mark.parametrize("kind", ["coo", "csr", "csc"])
@pytest.mark.parametrize("name,kwargs", [
    ("SAGEConv", {}), ("SAGEConv", {"aggr": "max"}), ("SAGEConv", {"aggr": ["mean", "std"]}),
    ("GraphConv", {"aggr": "mean"}), ("GINConv", {})],
    ids=["sage-mean", "sage-max", "sage-multi", "graphconv-mean", "gin"])
def test_neighbourhood_layers_sparse_semantics_match_pyg(kind, name, kwargs):
    """Values weight the messages where PyG fuses (uncoalesced COO is coalesced first) and are
    ignored where it does not (a list of aggregations)."""
    adj = sparse(kind, *random_adjacency(seed=1))
    # PyG's unfused path fails on uncoalesced COO and on CSC matrices; there iognn takes the
    # stored entries, which PyG is given as an edge_index.
    reference = stored_entries(adj) if isinstance(kwargs.get("aggr"), list) and kind != "csr" \
        else adj.clone()  # PyG's unfused path flags a COO input coalesced, in place
    if name == "GINConv":
        torch.manual_seed(7)
        ours = io_nn.GINConv(mlp(6, 8, 5))
        torch.manual_seed(7)
        theirs = FusedGINConv(mlp(6, 8, 5))
    else:
        ours, theirs = make_pair(name, 6, 5, **kwargs)
    x, inputs = x_input()
    assert_parity(ours, theirs, lambda m: m(x, adj if m is ours else reference), inputs)


def alpha_run(ours, x, adj, record, reference):
    def run(layer):
        out, (adj_alpha, alpha) = layer(x, adj if layer is ours else reference,
                                        return_attention_weights=True)
        record["iognn" if layer is ours else "pyg"] = (adj_alpha, alpha)
        return out
    return run


@pytest.mark.parametrize("kind", ["coo", "csr"])
@pytest.mark.parametrize("name,kwargs", [
    ("GATConv", {"heads": 2}), ("GATConv", {"heads": 2, "add_self_loops": False}),
    ("GATv2Conv", {"heads": 2}), ("TransformerConv", {"heads": 2})],
    ids=["gat", "gat-no-loops", "gatv2", "transformer"])
def test_attention_layers_sparse_semantics_match_pyg(kind, name, kwargs):
    """With loops PyG coalesces the matrix (unique entries, loops replaced); without, it uses the
    stored entries; alpha comes back on a sparse matrix of the input's layout."""
    adj = sparse(kind, *random_adjacency(seed=2))
    ours, theirs = make_pair(name, 6, 4, **kwargs)
    x, inputs = x_input()
    # PyG's unfused path fails on an uncoalesced COO matrix unless it adds loops (coalescing it):
    # there it is given the stored entries as an edge_index.
    pyg_fails = kind == "coo" and not (name.startswith("GAT") and ours.add_self_loops)
    record = {}
    assert_parity(ours, theirs, alpha_run(ours, x, adj, record, stored_entries(adj)
                                          if pyg_fails else adj.clone()), inputs)
    (adj_a, alpha_a), (adj_b, alpha_b) = record["iognn"], record["pyg"]
    torch.testing.assert_close(alpha_a, alpha_b, rtol=1e-4, atol=1e-5)
    if pyg_fails:
        assert adj_a.layout == adj.layout
    else:
        assert adj_a.layout == adj_b.layout
        torch.testing.assert_close(adj_a.to_dense(), adj_b.to_dense(), rtol=1e-4, atol=1e-5)


def test_edge_index_subclass_matches_pyg():
    edge_index, _ = random_adjacency(seed=4)
    ei = torch_geometric.EdgeIndex(edge_index, sparse_size=(N, N)).sort_by("col")[0]
    x, inputs = x_input()
    for name, kwargs in (("GCNConv", {}), ("GATConv", {"heads": 2}), ("GraphConv", {})):
        ours, theirs = make_pair(name, 6, 4, **kwargs)
        assert_parity(ours, theirs, lambda m: m(x, ei), inputs)


# ---- the Graph cache ------------------------------------------------------------------------
@pytest.fixture
def builds(monkeypatch):
    """Counts the Graphs the layers build."""
    count = []

    class CountingGraph(iognn.Graph):
        def __init__(self, *args, **kwargs):
            count.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(_graph, "Graph", CountingGraph)
    return count


def test_a_training_loop_builds_the_graph_once(builds):
    edge_index, _ = random_adjacency(seed=5)
    conv1, conv2 = io_nn.GCNConv(6, 8), io_nn.GCNConv(8, 4)
    x, _ = x_input()
    for _ in range(3):
        conv2(conv1(x, edge_index).relu(), edge_index).sum().backward()
    assert len(builds) == 1  # both layers, every step: one Graph
    io_nn.GATConv(6, 4)(x, edge_index)  # another self-loop mode: another Graph
    assert len(builds) == 2


def test_in_place_modification_rebuilds_the_graph(builds):
    edge_index, _ = random_adjacency(seed=6)
    ours, theirs = make_pair("GCNConv", 6, 5)
    x, _ = x_input()
    ours(x, edge_index)
    edge_index[1] = edge_index[1].flip(0)  # new targets, same tensor object
    assert len(builds) == 1
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))
    assert len(builds) == 2
    adj = sparse("csr", *random_adjacency(seed=6))
    ours(x, adj)
    adj.values().mul_(3.0)
    torch.testing.assert_close(ours(x, adj), theirs(x, adj))


def cached_graphs(adj):
    slot = getattr(adj, "_iognn_graphs", None)
    return [value for _, value in slot.entries.values()] if hasattr(slot, "entries") else []


def test_cache_entries_die_with_their_adjacency():
    edge_index, _ = random_adjacency(seed=7)
    x, _ = x_input()
    io_nn.SAGEConv(6, 5)(x, edge_index)
    (graph,) = cached_graphs(edge_index)
    ref = weakref.ref(graph)
    del graph, edge_index
    gc.collect()
    assert ref() is None


def test_cache_is_bounded():
    x, _ = x_input()
    layer = io_nn.SAGEConv(6, 5)
    kept = [random_adjacency(seed=s)[0] for s in range(_graph.MAX_ENTRIES + 8)]
    for edge_index in kept:
        layer(x, edge_index)
    assert sum(len(cached_graphs(e)) for e in kept) == _graph.MAX_ENTRIES
    assert cached_graphs(kept[-1]) and not cached_graphs(kept[0])  # least recent out first


def test_cache_is_neither_copied_nor_pickled(tmp_path):
    edge_index, _ = random_adjacency(seed=8)
    x, _ = x_input()
    io_nn.GCNConv(6, 5)(x, edge_index)
    assert cached_graphs(edge_index)
    assert cached_graphs(copy.deepcopy(edge_index)) == []
    torch.save(edge_index, tmp_path / "edge_index.pt")
    loaded = torch.load(tmp_path / "edge_index.pt", weights_only=True)
    assert torch.equal(loaded, edge_index) and cached_graphs(loaded) == []
    _graph.forget_graphs(edge_index)
    assert cached_graphs(edge_index) == []


def test_sizes_are_part_of_the_key():
    _, edge_index, _ = GRAPH_CASES[2]
    first = _graph.edge_graph("t", edge_index, 30, 30)
    assert _graph.edge_graph("t", edge_index, 30, 30) is first
    assert _graph.edge_graph("t", edge_index, 31, 31).num_dst_nodes == 31
