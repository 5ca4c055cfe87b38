"""iognn.nn.GatedGraphConv against PyG 2.8's (CPU): outputs and every gradient (input, edge
weights, parameters) on the conftest graph cases for each aggregation, weighted and not; the
initial draws and the state_dict both ways; padding and its errors; every MessagePassing keyword;
sparse matrices, EdgeIndex and a prebuilt iognn.Graph as the adjacency; fp64 and non-contiguous
features."""
import pytest
import torch
import torch_geometric
import torch_geometric.nn as pyg_nn

import iognn
import iognn.nn as io_nn

from conftest import GRAPH_CASES
from test_nn_basic import assert_parity, case_tolerance, check_same_state_as_pyg, make_pair

pytestmark = pytest.mark.filterwarnings("ignore:.*[Ss]parse")

# GatedGraphConv takes one node set: a bipartite case is run as a square graph over its larger side.
CASES = [(name, ei, max(size) if isinstance(size, tuple) else size)
         for name, ei, size in GRAPH_CASES]
CASE_IDS = [c[0] for c in CASES]
H = 8


class FusedGatedGraphConv(pyg_nn.GatedGraphConv):
    """PyG renders one propagate per class from its first instance's ``fuse`` flag: the sparse
    references get a class of their own, only ever built with a fusable aggregation."""


def node_features(num_nodes, channels, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(num_nodes, channels, generator=gen).requires_grad_()


def edge_weights(num_edges, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(num_edges, generator=gen) + 0.25).requires_grad_()


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("kwargs,weighted", [
    ({}, True), ({}, False), ({"aggr": "mean"}, True), ({"aggr": "mean", "bias": False}, False),
    ({"aggr": "max"}, True), ({"aggr": "max", "bias": False}, False)],
    ids=["add-weighted", "add", "mean-weighted", "mean-nobias", "max-weighted", "max-nobias"])
@pytest.mark.parametrize("channels", [5, H], ids=["padded", "full"])
def test_gated_graph_conv_matches_pyg(case, kwargs, weighted, channels):
    _, edge_index, num_nodes = case
    ours, theirs = make_pair("GatedGraphConv", H, 3, **kwargs)
    x = node_features(num_nodes, channels)
    w = edge_weights(edge_index.size(1)) if weighted else None
    assert_parity(ours, theirs, lambda m: m(x, edge_index if m is ours else edge_index.long(), w),
                  (x,), (w,) if weighted else (), tol=case_tolerance(case))


@pytest.mark.parametrize("aggr", ["min", "std", ["sum", "max"]], ids=["min", "std", "list"])
def test_other_aggregations_match_pyg(aggr):
    """Any aggregation PyG resolves (a list concatenates, so the GRU input must be 2H wide:
    PyG then fails in the GRU cell, and so does iognn)."""
    _, edge_index, num_nodes = CASES[2]
    ours, theirs = make_pair("GatedGraphConv", H, 2, aggr=aggr)
    x = node_features(num_nodes, H)
    if isinstance(aggr, list):
        with pytest.raises(RuntimeError):
            theirs(x, edge_index)
        with pytest.raises(RuntimeError):
            ours(x, edge_index)
        return
    assert_parity(ours, theirs, lambda m: m(x, edge_index), (x,))


@pytest.mark.parametrize("args,kwargs", [((H, 3), {}), ((H, 1), {"bias": False}),
                                         ((4, 2), {"aggr": "mean"}), ((H, 0), {})],
                         ids=["default", "nobias", "mean", "no-layers"])
def test_same_parameters_after_same_seed_and_state_dict_both_ways(args, kwargs):
    check_same_state_as_pyg("GatedGraphConv", args, kwargs)


def test_no_layers_returns_the_padded_input():
    ours, theirs = make_pair("GatedGraphConv", H, 0)
    x = node_features(6, 3)
    edge_index = torch.tensor([[0, 1], [1, 2]])
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index), rtol=0, atol=0)


def test_wider_input_raises_like_pyg():
    ours, theirs = make_pair("GatedGraphConv", 4, 2)
    x, edge_index = torch.randn(5, 6), torch.tensor([[0, 1], [1, 2]])
    with pytest.raises(ValueError, match="not allowed to be larger") as pyg_error:
        theirs(x, edge_index)
    with pytest.raises(ValueError) as our_error:
        ours(x, edge_index)
    assert str(our_error.value) == str(pyg_error.value)


@pytest.mark.parametrize("bad,error", [
    (lambda: torch.randn(2, 5, 3), ValueError),
    (lambda: torch.randn(4), ValueError),
    (lambda: torch.ones(5, 3, dtype=torch.long), TypeError),
    (lambda: (torch.randn(5, 3), torch.randn(5, 3)), TypeError)],
    ids=["3d", "1d", "integer", "pair"])
def test_bad_features_raise(bad, error):
    layer = io_nn.GatedGraphConv(4, 2)
    with pytest.raises(error, match="x"):
        layer(bad(), torch.tensor([[0, 1], [1, 2]]))


@pytest.mark.parametrize("weight,match", [
    (torch.ones(2, 1), "1-D"), (torch.ones(3), "edges"), ([1.0, 1.0], "Tensor")],
    ids=["2d", "length", "list"])
def test_bad_edge_weight_raises_naming_it(weight, match):
    layer = io_nn.GatedGraphConv(4, 2)
    with pytest.raises((TypeError, ValueError), match=f"edge_weight.*{match}|{match}.*edge_weight"):
        layer(torch.randn(5, 3), torch.tensor([[0, 1], [1, 2]]), weight)


def test_edge_index_out_of_range_raises():
    layer = io_nn.GatedGraphConv(4, 2)
    with pytest.raises((IndexError, ValueError)):
        layer(torch.randn(3, 4), torch.tensor([[0, 5], [1, 2]]))


@pytest.mark.parametrize("aggr", ["add", "max"])
def test_non_contiguous_features_match_pyg(aggr):
    _, edge_index, num_nodes = CASES[2]
    ours, theirs = make_pair("GatedGraphConv", H, 2, aggr=aggr)
    gen = torch.Generator().manual_seed(5)
    wide = torch.randn(H, 2 * num_nodes, generator=gen).requires_grad_()
    for x in (wide.t()[::2], wide.t()[:, :5], wide.t()[1::2]):  # transposed and strided views
        assert not x.is_contiguous()
        assert_parity(ours, theirs, lambda m: m(x, edge_index), (wide,))


@pytest.mark.parametrize("aggr", ["add", "mean", "max"])
def test_double_precision_matches_pyg(aggr):
    _, edge_index, num_nodes = CASES[5]  # loops and duplicates
    ours, theirs = make_pair("GatedGraphConv", H, 3, aggr=aggr)
    ours.double()
    theirs.double()
    x = node_features(num_nodes, 5).detach().double().requires_grad_()
    w = edge_weights(edge_index.size(1)).detach().double().requires_grad_()
    assert_parity(ours, theirs, lambda m: m(x, edge_index, w), (x,), (w,), tol=(1e-10, 1e-10))
    assert ours(x, edge_index, w).dtype == torch.float64


def test_message_passing_keywords():
    _, edge_index, num_nodes = CASES[2]
    x = node_features(num_nodes, H)
    for kwargs in ({"node_dim": 0}, {"decomposed_layers": 2},
                   {"aggr": "mean", "aggr_kwargs": {}}):
        ours, theirs = make_pair("GatedGraphConv", H, 2, **kwargs)
        assert ours.aggr == theirs.aggr and ours.node_dim == theirs.node_dim
        assert_parity(ours, theirs, lambda m: m(x, edge_index), (x,))
    with pytest.raises(NotImplementedError, match="target_to_source"):
        io_nn.GatedGraphConv(H, 2, flow="target_to_source")
    with pytest.raises(TypeError, match="unexpected keyword argument 'heads'"):
        io_nn.GatedGraphConv(H, 2, heads=2)
    layer = io_nn.GatedGraphConv(H, 2)
    with pytest.raises(NotImplementedError):
        layer.flow = "target_to_source"


def test_repr_matches_pyg():
    ours, theirs = make_pair("GatedGraphConv", H, 3)
    assert repr(ours) == repr(theirs) == "GatedGraphConv(8, num_layers=3)"


def random_adjacency(num_nodes=30, seed=0):
    """Edges with self-loops and duplicates, and positive values."""
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes, (2, 150), generator=gen)
    edge_index = torch.cat([edge_index, torch.arange(0, num_nodes, 4).repeat(2, 1),
                            edge_index[:, :20]], dim=1)
    return edge_index, torch.rand(edge_index.size(1), generator=gen) + 0.5


@pytest.mark.parametrize("kind", ["coo", "csr"])
@pytest.mark.parametrize("aggr", ["add", "mean", "max"])
def test_sparse_adjacency_matches_pyg(kind, aggr):
    """A sparse matrix's values weight the messages (PyG's fused path; an uncoalesced COO matrix
    is coalesced first) and an edge_weight given with it is ignored, as in PyG."""
    edge_index, values = random_adjacency()
    coo = torch.sparse_coo_tensor(edge_index.flip(0), values, (30, 30))
    adj = coo if kind == "coo" else coo.coalesce().to_sparse_csr()
    torch.manual_seed(7)
    ours = io_nn.GatedGraphConv(H, 2, aggr=aggr)
    torch.manual_seed(7)
    theirs = FusedGatedGraphConv(H, 2, aggr=aggr)
    x = node_features(30, 5)
    assert_parity(ours, theirs, lambda m: m(x, adj if m is ours else adj.clone()), (x,))
    ignored = torch.rand(values.numel())
    torch.testing.assert_close(ours(x, adj, ignored), ours(x, adj))


def test_edge_index_and_prebuilt_graph_match_pyg():
    edge_index, values = random_adjacency(seed=4)
    x = node_features(30, 5)
    ours, theirs = make_pair("GatedGraphConv", H, 2)
    sorted_ei = torch_geometric.EdgeIndex(edge_index, sparse_size=(30, 30)).sort_by("col")[0]
    assert_parity(ours, theirs, lambda m: m(x, sorted_ei), (x,))
    graph = iognn.Graph(edge_index, 30)
    w = values.clone().requires_grad_()
    assert_parity(ours, theirs, lambda m: m(x, graph if m is ours else edge_index, w), (x,), (w,))


def test_graph_is_built_once_per_edge_index():
    edge_index, _ = random_adjacency(seed=6)
    layer = io_nn.GatedGraphConv(H, 4)
    x = node_features(30, H)
    layer(x, edge_index)
    built = dict(edge_index._iognn_graphs.entries)
    assert len(built) == 1
    layer(x, edge_index)
    assert {k: v[1] for k, v in edge_index._iognn_graphs.entries.items()} == \
        {k: v[1] for k, v in built.items()}


@pytest.mark.parametrize("aggr", ["add", "max"])
def test_autocast_keeps_pyg_dtypes(aggr):
    """Under CPU autocast the state keeps x's dtype (PyG's GRU cell promotes back to it) and the
    result is close to PyG's at bf16 precision."""
    _, edge_index, num_nodes = CASES[2]
    ours, theirs = make_pair("GatedGraphConv", H, 3, aggr=aggr)
    x = node_features(num_nodes, 5).detach()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, ref = ours(x, edge_index), theirs(x, edge_index)
    assert out.dtype == ref.dtype
    torch.testing.assert_close(out, ref, rtol=0.05, atol=0.05)
