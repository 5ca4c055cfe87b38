"""Drop-in fidelity cases found by running PyG's own layer tests against iognn.nn, one test each
against PyG 2.8 (CPU): static-graph batches ``x [B, N, F]`` along ``node_dim``, ``flow`` /
``node_dim`` assigned after construction, ``EdgeIndex.sparse_size`` without destination features,
GCN's cache attributes, ``PNAConv.get_degree_histogram``, PyG's error for a short ``dim_size`` and
the LSTM aggregation on unsorted edges."""
import pytest
import torch
import torch_geometric.nn as pyg_nn
from torch_geometric import EdgeIndex
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader
from torch_geometric.utils import sort_edge_index

import iognn.nn as io_nn

from test_nn_basic import assert_parity, make_pair, mlp

pytestmark = pytest.mark.filterwarnings("ignore:.*[Ss]parse")
EDGE_INDEX = torch.tensor([[0, 1, 2, 3, 3, 1], [1, 2, 3, 0, 1, 1]])


def batched_layers():
    torch.manual_seed(0)
    nn_a, nn_b = mlp(16, 8, 32), mlp(16, 8, 32)
    return {
        "GCNConv": lambda lib: lib.GCNConv(16, 32),
        "GCNConv-weighted": lambda lib: lib.GCNConv(16, 32, improved=True),
        "SAGEConv": lambda lib: lib.SAGEConv(16, 32),
        "SAGEConv-multi": lambda lib: lib.SAGEConv(16, 32, aggr=["max", "std"]),
        "GINConv": lambda lib: lib.GINConv(nn_a, train_eps=True),
        "GINEConv": lambda lib: lib.GINEConv(nn_b, edge_dim=3),
        "GraphConv": lambda lib: lib.GraphConv(16, 32, aggr="max"),
    }


# ---- 1. static-graph batches -------------------------------------------------------------------
@pytest.mark.parametrize("batch", [5, 2], ids=["B>N", "B<N"])
@pytest.mark.parametrize("name", list(batched_layers()))
def test_batched_features_match_pyg_and_a_loop_over_the_batch(name, batch):
    """x [B, N, F] (PyG's static graphs): same values as PyG, and as the layer on each [N, F]."""
    make = batched_layers()[name]
    torch.manual_seed(1)
    theirs = make(pyg_nn)
    ours = make(io_nn)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(batch, 4, 16, requires_grad=True)
    extra = ()
    if name.startswith("GINE"):
        attr = torch.randn(EDGE_INDEX.size(1), 3, requires_grad=True)
        extra = (attr,)
    elif name == "GCNConv-weighted" or name == "GraphConv":
        weight = torch.rand(EDGE_INDEX.size(1), requires_grad=True)
        extra = (weight,)
    out = ours(x, EDGE_INDEX, *extra)
    assert out.shape == (batch, 4, 32)
    loop = torch.stack([ours(x[b], EDGE_INDEX, *extra) for b in range(batch)])
    torch.testing.assert_close(out, loop, rtol=1e-5, atol=1e-6)
    assert_parity(ours, theirs, lambda m: m(x, EDGE_INDEX, *extra), (x,), extra)


def test_batched_features_of_the_issue_report():
    x = torch.randn(5, 4, 16)
    ei = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
    ours, theirs = make_pair("GCNConv", 16, 32)
    torch.testing.assert_close(ours(x, ei), theirs(x, ei))
    torch.testing.assert_close(ours(x, ei), torch.stack([theirs(x[b], ei) for b in range(5)]))


def test_node_dim_is_read_on_every_call():
    """node_dim assigned after construction moves the node dimension, as in PyG."""
    ours, theirs = make_pair("SAGEConv", 16, 32, aggr="max")
    x = torch.randn(4, 3, 16)  # nodes first, a batch of 3 behind them
    ours.node_dim = theirs.node_dim = 0
    torch.testing.assert_close(ours(x, EDGE_INDEX), theirs(x, EDGE_INDEX))
    ours.node_dim = theirs.node_dim = -2
    x = x.transpose(0, 1)
    torch.testing.assert_close(ours(x, EDGE_INDEX), theirs(x, EDGE_INDEX))
    with pytest.raises(ValueError, match="node_dim=-1 does not name a node dimension"):
        ours.node_dim = -1
        ours(x, EDGE_INDEX)


def test_attention_layers_refuse_batches_and_other_node_dims():
    for layer in (io_nn.GATConv(16, 8), io_nn.GATv2Conv(16, 8)):
        with pytest.raises(ValueError, match="static-graph batches are not supported"):
            layer(torch.randn(2, 4, 16), EDGE_INDEX)
    for layer in (io_nn.GATConv(16, 8), io_nn.TransformerConv(16, 8),
                  io_nn.PNAConv(16, 8, ["mean"], ["identity"], torch.tensor([1, 2]))):
        with pytest.raises(NotImplementedError, match="only node_dim=0"):
            layer.node_dim = -2
        assert layer.node_dim == 0


# ---- 2. flow assigned after construction ------------------------------------------------------
@pytest.mark.parametrize("layer", [io_nn.GCNConv(4, 4), io_nn.SAGEConv(4, 4), io_nn.GATConv(4, 4),
                                   io_nn.GINConv(mlp(4, 4, 4)), io_nn.TransformerConv(4, 4)],
                         ids=lambda m: type(m).__name__)
def test_flow_assigned_after_construction_raises(layer):
    layer.flow = "source_to_target"  # PyG's default: accepted
    with pytest.raises(NotImplementedError, match="flow='target_to_source' is not supported"):
        layer.flow = "target_to_source"
    with pytest.raises(ValueError, match="Expected 'flow'"):
        layer.flow = "sideways"
    assert layer.flow == "source_to_target"
    with pytest.raises(NotImplementedError, match="target_to_source"):
        type(layer)(*([mlp(4, 4, 4)] if isinstance(layer, io_nn.GINConv) else [4, 4]),
                    flow="target_to_source")


# ---- 3. EdgeIndex.sparse_size --------------------------------------------------------------------
BIPARTITE = torch.tensor([[0, 1, 2, 3], [0, 0, 1, 1]])


@pytest.mark.parametrize("sort_order", [None, "row", "col"])
@pytest.mark.parametrize("name", ["SAGEConv", "GraphConv", "GINConv", "GATConv"])
def test_edge_index_sparse_size_sets_the_destinations(name, sort_order):
    """(x_src, None) with an EdgeIndex of sparse_size (4, 2): PyG's output has 2 rows (GAT adds
    its self-loops over the 4 source rows first, which grows the EdgeIndex to 4 x 4)."""
    if name == "GINConv":
        torch.manual_seed(0)
        net = mlp(8, 8, 32)
        ours, theirs = io_nn.GINConv(net), pyg_nn.GINConv(net)
    else:
        ours, theirs = make_pair(name, (8, 16), 32)
    x = torch.randn(4, 8, requires_grad=True)
    ei = EdgeIndex(BIPARTITE, sparse_size=(4, 2), sort_order=sort_order)
    expected = theirs((x, None), ei)
    assert expected.size(0) == (4 if name == "GATConv" else 2)
    torch.testing.assert_close(ours((x, None), ei), expected)
    # Gradients against PyG's unfused path (its fused EdgeIndex SpMM fails in backward on
    # bipartite sizes): the same sizes without a sort order.
    unsorted = EdgeIndex(BIPARTITE, sparse_size=(4, 2))
    assert_parity(ours, theirs, lambda m: m((x, None), ei if m is ours else unsorted), (x,))


def test_sparse_size_mismatching_the_features_is_pyg_error():
    layer = io_nn.SAGEConv(8, 4)
    ei = EdgeIndex(BIPARTITE, sparse_size=(5, 2))
    with pytest.raises(ValueError, match="Encountered tensor with size 4 in dimension -2, but "
                                         "expected size 5"):
        layer((torch.randn(4, 8), None), ei)
    with pytest.raises(ValueError, match="expected size 3"):
        layer((torch.randn(4, 8), torch.randn(2, 8)), BIPARTITE, size=(4, 3))


def test_attention_weights_come_back_as_pyg_returns_them():
    """Without self-loops the input adjacency itself (its dtype and class); with them an
    EdgeIndex grown by the loops."""
    ours, theirs = make_pair("GATConv", 8, 4, heads=2)
    x = torch.randn(4, 8)
    ei = EdgeIndex(BIPARTITE, sparse_size=(4, 4))
    (_, (got, alpha)), (_, (exp, alpha_ref)) = (
        m(x, ei, return_attention_weights=True) for m in (ours, theirs))
    assert isinstance(got, EdgeIndex) and got.sparse_size() == exp.sparse_size()
    assert torch.equal(got.as_tensor(), exp.as_tensor())
    torch.testing.assert_close(alpha, alpha_ref)
    ours, theirs = make_pair("TransformerConv", 8, 4)
    ei32 = BIPARTITE.int()
    _, (got, _) = ours(x, ei32, return_attention_weights=True)
    assert got is ei32


# ---- 4. GCN's cache attributes -------------------------------------------------------------------
def test_clearing_the_gcn_cache_uses_the_new_graph():
    ours, theirs = make_pair("GCNConv", 8, 4, cached=True)
    x = torch.randn(4, 8)
    first, second = EDGE_INDEX, BIPARTITE
    torch.testing.assert_close(ours(x, first), theirs(x, first))
    assert ours._cached_edge_index is not None
    edge_index, weight = ours._cached_edge_index
    ref_index, ref_weight = theirs._cached_edge_index
    torch.testing.assert_close(edge_index, ref_index)
    torch.testing.assert_close(weight, ref_weight)
    torch.testing.assert_close(ours(x, second), theirs(x, second))  # stale graph, as in PyG
    ours._cached_edge_index = None
    theirs._cached_edge_index = None
    assert ours._cached_edge_index is None
    torch.testing.assert_close(ours(x, second), theirs(x, second))
    torch.testing.assert_close(ours(x, first), theirs(x, first))  # the second graph is cached


def test_an_assigned_gcn_cache_is_propagated_over_as_it_is():
    ours, theirs = make_pair("GCNConv", 8, 4, cached=True)
    x = torch.randn(4, 8)
    assigned = (EDGE_INDEX, torch.rand(EDGE_INDEX.size(1)))
    ours._cached_edge_index = theirs._cached_edge_index = assigned
    torch.testing.assert_close(ours(x, BIPARTITE), theirs(x, BIPARTITE))
    assert ours._cached_edge_index is assigned
    with pytest.raises(TypeError, match="_cached_edge_index must be None or an"):
        ours._cached_edge_index = EDGE_INDEX


def test_reset_parameters_clears_the_gcn_cache():
    ours, _ = make_pair("GCNConv", 8, 4, cached=True)
    ours(torch.randn(4, 8), EDGE_INDEX)
    ours.reset_parameters()
    assert ours._cached_edge_index is None and ours._cached_adj_t is None


# ---- 5. PNAConv.get_degree_histogram -------------------------------------------------------------
def test_degree_histogram_matches_pyg():
    gen = torch.Generator().manual_seed(0)
    graphs = []
    for n in (5, 9, 1, 12):
        edges = torch.randint(0, n, (2, 3 * n), generator=gen)
        graphs.append(Data(edge_index=edges, num_nodes=n + 2))  # + 2 isolated nodes
    loader = DataLoader(graphs, batch_size=2)
    expected = pyg_nn.PNAConv.get_degree_histogram(loader)
    got = io_nn.PNAConv.get_degree_histogram(loader)
    assert got.dtype == torch.long and torch.equal(got, expected)
    assert torch.equal(io_nn.PNAConv.get_degree_histogram(graphs), expected)
    assert torch.equal(io_nn.PNAConv.get_degree_histogram([]), torch.zeros(1, dtype=torch.long))


# ---- 6. PyG's error for a short dim_size ---------------------------------------------------------
@pytest.mark.parametrize("name", ["SumAggregation", "MaxAggregation", "StdAggregation"])
def test_short_dim_size_raises_pyg_value_error(name):
    x, index = torch.randn(6, 4), torch.tensor([0, 0, 1, 2, 2, 3])
    for lib in (pyg_nn.aggr, io_nn.aggr):
        with pytest.raises(ValueError, match=r"Encountered invalid 'dim_size' \(got '2' but "
                                             r"expected >= '4'\)"):
            getattr(lib, name)()(x, index, dim_size=2)


# ---- 7. LSTM aggregation on unsorted edges -------------------------------------------------------
def test_lstm_aggregation_on_unsorted_edges_is_pyg_result_on_sorted_ones():
    """PyG refuses an edge_index not sorted by destination for aggr='lstm'; iognn reads its
    CSR, which holds each destination's messages ordered by source: PyG's result on the edges
    sorted by (destination, source)."""
    ours, theirs = make_pair("SAGEConv", 8, 4, aggr="lstm")
    x = torch.randn(4, 8)
    with pytest.raises(ValueError, match="sorted"):
        theirs(x, EDGE_INDEX)
    sorted_edges = sort_edge_index(EDGE_INDEX, sort_by_row=False)
    torch.testing.assert_close(ours(x, EDGE_INDEX), theirs(x, sorted_edges))
