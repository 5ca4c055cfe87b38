"""iognn.nn layers beyond test_nn_basic against PyG 2.8 (CPU, fp32): GraphConv, GINEConv, PNAConv,
SAGEConv with every kind of ``aggr``, MessagePassing keyword arguments, lazy ``in_channels=-1``,
state_dict exchange both ways and a prebuilt iognn.Graph as the adjacency; outputs and all
gradients on the conftest graph cases and on cora."""
import pytest
import torch
import torch_geometric.nn as pyg_nn
import torch_geometric.nn.aggr as pyg_aggr

import iognn
import iognn.nn as io_nn

from conftest import GRAPH_CASES, data_dir, load_real_graph, sizes
from test_nn_basic import (ALL_IDS, assert_parity, case_tolerance, check_same_state_as_pyg,
                           edge_features, features, make_pair, mlp, shadowed_self_loops)

SQUARE_CASES = [c for c in GRAPH_CASES if not isinstance(c[2], tuple)]


def edge_index_of(case, layer, ours):
    return case[1] if layer is ours else case[1].long()


# ---- GraphConv ----------------------------------------------------------------------------
@pytest.mark.parametrize("case", GRAPH_CASES, ids=ALL_IDS)
@pytest.mark.parametrize("kwargs,weighted", [({}, True), ({"aggr": "mean"}, False),
                                             ({"aggr": "max", "bias": False}, True)],
                         ids=["add-weighted", "mean", "max-weighted"])
def test_graph_conv_matches_pyg(case, kwargs, weighted):
    num_src, num_dst = sizes(case[2])
    bipartite = isinstance(case[2], tuple)
    ours, theirs = make_pair("GraphConv", (6, 6) if bipartite else 6, 5, **kwargs)
    x, inputs = features(num_src, num_dst, 6, bipartite)
    w = torch.rand(case[1].size(1), generator=torch.Generator().manual_seed(1)).requires_grad_()
    w = w if weighted else None
    assert_parity(ours, theirs, lambda m: m(x, edge_index_of(case, m, ours), w), inputs,
                  (w,) if weighted else (), tol=case_tolerance(case))


# ---- GINEConv -----------------------------------------------------------------------------
@pytest.mark.parametrize("case", GRAPH_CASES, ids=ALL_IDS)
@pytest.mark.parametrize("edge_dim", [None, 3])
def test_gine_conv_matches_pyg(case, edge_dim):
    num_src, num_dst = sizes(case[2])
    torch.manual_seed(7)
    ours = io_nn.GINEConv(mlp(6, 8, 5), eps=0.1, train_eps=True, edge_dim=edge_dim)
    torch.manual_seed(7)
    theirs = pyg_nn.GINEConv(mlp(6, 8, 5), eps=0.1, train_eps=True, edge_dim=edge_dim)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict(theirs.state_dict())
    x, inputs = features(num_src, num_dst, 6, isinstance(case[2], tuple))
    ea = edge_features(case[1], edge_dim or 6)
    assert_parity(ours, theirs, lambda m: m(x, edge_index_of(case, m, ours), ea), inputs, (ea,),
                  tol=case_tolerance(case))


def test_gine_conv_needs_matching_edge_features():
    layer = io_nn.GINEConv(mlp(6, 8, 5))
    x, edge_index = torch.randn(4, 6), torch.tensor([[0, 1], [1, 2]])
    with pytest.raises(ValueError, match="edge_attr"):
        layer(x, edge_index)
    with pytest.raises(ValueError, match="edge_dim"):
        layer(x, edge_index, torch.randn(2, 3))


# ---- PNAConv ------------------------------------------------------------------------------
PNA_VARIANTS = [
    dict(aggregators=["mean", "min", "max", "std"],
         scalers=["identity", "amplification", "attenuation"]),
    dict(aggregators=["sum", "var"], scalers=["linear", "inverse_linear"], towers=2,
         edge_dim=3, pre_layers=2, post_layers=2, divide_input=True, train_norm=True),
]


@pytest.mark.parametrize("case", SQUARE_CASES, ids=[c[0] for c in SQUARE_CASES])
@pytest.mark.parametrize("variant", range(len(PNA_VARIANTS)))
def test_pna_conv_matches_pyg(case, variant):
    kwargs = dict(PNA_VARIANTS[variant], deg=torch.tensor([2, 6, 5, 1]))
    ours, theirs = make_pair("PNAConv", 6, 4, **kwargs)
    n = case[2]
    x, inputs = features(n, n, 6, bipartite=False)
    ea = edge_features(case[1], 3) if "edge_dim" in kwargs else None
    assert_parity(ours, theirs, lambda m: m(x, edge_index_of(case, m, ours), ea), inputs,
                  (ea,) if ea is not None else (), tol=case_tolerance(case))


# ---- SAGEConv aggregations ----------------------------------------------------------------
SAGE_AGGRS = [
    "max",
    "std",
    ["mean", "max", "std"],
    pyg_aggr.MultiAggregation(["sum", "min"], mode="proj",
                              mode_kwargs={"in_channels": 6, "out_channels": 7}),
    "softmax",  # no iognn kernel: PyG's module on gathered messages (its parameter included)
]


@pytest.mark.parametrize("case", GRAPH_CASES, ids=ALL_IDS)
@pytest.mark.parametrize("aggr", SAGE_AGGRS, ids=["max", "std", "list", "proj", "softmax"])
def test_sage_conv_aggregations_match_pyg(case, aggr):
    num_src, num_dst = sizes(case[2])
    bipartite = isinstance(case[2], tuple)
    kwargs = {"aggr": aggr}
    if aggr == "softmax":
        kwargs["aggr_kwargs"] = {"learn": True}
    ours, theirs = make_pair("SAGEConv", (6, 6) if bipartite else 6, 5, **kwargs)
    x, inputs = features(num_src, num_dst, 6, bipartite)
    assert_parity(ours, theirs, lambda m: m(x, edge_index_of(case, m, ours)), inputs,
                  tol=case_tolerance(case))


def test_message_passing_aggr_argument_of_gin_and_gcn():
    case = GRAPH_CASES[5]  # self-loops and duplicate edges
    n = case[2]
    x, inputs = features(n, n, 6, bipartite=False)
    torch.manual_seed(7)
    ours = io_nn.GINConv(mlp(6, 8, 5), aggr="max")
    torch.manual_seed(7)
    theirs = pyg_nn.GINConv(mlp(6, 8, 5), aggr="max")
    assert_parity(ours, theirs, lambda m: m(x, case[1]), inputs)
    w = torch.rand(case[1].size(1), generator=torch.Generator().manual_seed(2)).requires_grad_()
    ours, theirs = make_pair("GCNConv", 6, 5, aggr="mean")
    assert_parity(ours, theirs, lambda m: m(x, case[1], w), inputs, (w,),
                  unused_rows={0: shadowed_self_loops(case[1])})


# ---- lazy initialisation ------------------------------------------------------------------
LAZY = [
    ("GCNConv", (-1, 5), {}),
    ("SAGEConv", ((-1, -1), 5), {}),
    ("GraphConv", (-1, 5), {}),
    ("GATConv", ((-1, -1), 4), {"heads": 2, "residual": True}),
    ("GATv2Conv", (-1, 4), {"heads": 2}),
    ("TransformerConv", (-1, 4), {"heads": 2, "beta": True}),
]


@pytest.mark.parametrize("name,args,kwargs", LAZY, ids=[n for n, _, _ in LAZY])
def test_lazy_in_channels_draw_like_pyg(name, args, kwargs):
    edge_index = GRAPH_CASES[2][1]
    x = torch.randn(30, 6)
    torch.manual_seed(5)
    ours = getattr(io_nn, name)(*args, **kwargs)
    torch.manual_seed(5)
    theirs = getattr(pyg_nn, name)(*args, **kwargs)
    torch.manual_seed(6)
    out = ours(x, edge_index)
    torch.manual_seed(6)
    ref = theirs(x, edge_index)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    for key, value in ours.state_dict().items():
        assert torch.equal(value, theirs.state_dict()[key]), key
    fresh = getattr(io_nn, name)(*args, **kwargs)  # still lazy: loading materialises it
    fresh.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(fresh(x, edge_index), ref, rtol=1e-4, atol=1e-5)


# ---- state_dict exchange of the new layers -----------------------------------------------
STATE_LAYERS = [
    ("GraphConv", ((6, 4), 5), {"aggr": "mean"}),
    ("SAGEConv", (6, 5), {"aggr": ["mean", "max"]}),
    ("SAGEConv", (6, 5), {"aggr": "lstm"}),
    ("PNAConv", (6, 4), {"aggregators": ["mean", "max"], "scalers": ["identity", "linear"],
                         "deg": torch.tensor([1, 2, 3]), "edge_dim": 2, "towers": 2,
                         "train_norm": True}),
]


@pytest.mark.parametrize("name,args,kwargs", STATE_LAYERS,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(STATE_LAYERS)])
def test_state_dict_round_trip(name, args, kwargs):
    check_same_state_as_pyg(name, args, kwargs)


# ---- a prebuilt Graph ---------------------------------------------------------------------
def test_prebuilt_graph_gives_the_edge_index_result():
    edge_index = GRAPH_CASES[5][1]  # loops and duplicates
    n = GRAPH_CASES[5][2]
    x = torch.randn(n, 6)
    w = torch.rand(edge_index.size(1))
    ea = torch.randn(edge_index.size(1), 2)
    keep = iognn.Graph(edge_index, n)
    layers = [(io_nn.GCNConv(6, 5), (w,)), (io_nn.GATConv(6, 4, heads=2, edge_dim=2), (ea,)),
              (io_nn.SAGEConv(6, 5, aggr=["mean", "max"]), ()), (io_nn.GraphConv(6, 5), (w,))]
    for layer, extra in layers:
        torch.testing.assert_close(layer(x, keep, *extra), layer(x, edge_index, *extra))
    gcn = io_nn.GCNConv(6, 5)
    own = iognn.Graph(edge_index, n, self_loops="add_remaining")
    torch.testing.assert_close(gcn(x, own, w), gcn(x, edge_index, w))
    with pytest.raises(ValueError, match="add_remaining"):
        io_nn.GATConv(6, 4)(x, own)


# ---- cora -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name,kwargs", [
    ("GCNConv", {}), ("SAGEConv", {"aggr": ["mean", "max", "std"]}), ("GATConv", {"heads": 4}),
    ("GATv2Conv", {"heads": 2}), ("GraphConv", {}), ("TransformerConv", {"heads": 2}),
    ("PNAConv", {"aggregators": ["mean", "min", "max", "std"], "towers": 2,
                 "scalers": ["identity", "amplification", "attenuation"],
                 "deg": torch.tensor([0, 500, 700, 600, 400, 300, 200])})],
    ids=lambda v: v if isinstance(v, str) else "")
def test_layers_match_pyg_on_cora(name, kwargs):
    # cora's real 0/1 features: min / max / std aggregations of raw features tie almost everywhere
    # (their gradient is split among tied messages exactly as PyG does). PNA only aggregates
    # Linear outputs of [x_i, x_j] (no ties), so it gets 64 random features, which keeps it fast.
    edge_index, num_nodes = load_real_graph("cora")
    x = (torch.randn(num_nodes, 64, generator=torch.Generator().manual_seed(0))
         if name == "PNAConv" else load_cora_features()).requires_grad_()
    assert x.shape[0] == num_nodes
    ours, theirs = make_pair(name, x.shape[1], 8, **kwargs)
    assert_parity(ours, theirs, lambda m: m(x, edge_index), (x,), tol=(1e-4, 2e-5))


def load_cora_features():
    """cora's bag-of-words features [2708, 1433] (0/1, fp32) in PyG's node order: Planetoid's allx
    then tx, the test rows moved to their test.index ids as PyG's loader does."""
    import pickle
    import warnings

    import numpy as np
    root = data_dir() / "cora"
    parts = []
    for name in ("allx", "tx"):
        with open(root / f"ind.cora.{name}", "rb") as f, warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # the pickles name scipy.sparse.csr
            parts.append(torch.from_numpy(pickle.load(f, encoding="latin1").toarray()))
    x = torch.cat(parts).float()
    test_index = torch.from_numpy(np.loadtxt(root / "ind.cora.test.index", dtype=np.int64))
    x[test_index] = x[test_index.sort().values]
    return x
