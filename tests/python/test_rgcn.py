"""iognn.nn.RGCNConv / FastRGCNConv against PyG 2.8 on the CPU: same parameters (state_dict both
ways), outputs and gradients for every constructor argument, R in {1, 4, 16}, the graph edge
cases, one-hot (featureless) inputs, index dtypes, strided inputs; edge_type errors."""
from __future__ import annotations

import itertools

import pytest
import torch
import torch_geometric.nn as pyg_nn

import iognn
import iognn.nn as inn

from test_typed_propagate import typed_case

LAYERS = ["RGCNConv", "FastRGCNConv"]
DECOMPOSITIONS = {"none": {}, "bases": dict(num_bases=2), "blocks": dict(num_blocks=2)}


def make_pair(name, *args, **kwargs):
    """The PyG layer and the iognn layer, built from the same random draws, in fp64."""
    torch.manual_seed(7)
    pyg = getattr(pyg_nn, name)(*args, **kwargs).double()
    torch.manual_seed(7)
    ours = getattr(inn, name)(*args, **kwargs).double()
    assert list(pyg.state_dict()) == list(ours.state_dict())
    for key, value in pyg.state_dict().items():
        assert torch.equal(value, ours.state_dict()[key]), key
    return pyg, ours


def clone_input(x):
    if isinstance(x, tuple):
        return tuple(clone_input(t) for t in x)
    if x is None or not x.is_floating_point():
        return x
    return x.detach().clone().requires_grad_()


def leaves(x):
    if isinstance(x, tuple):
        return [t for part in x for t in leaves(part)]
    return [x] if x is not None and x.is_floating_point() else []


def assert_same(pyg, ours, x, edge_index, edge_type, pyg_edge_index=None, atol=1e-10):
    """Outputs and gradients (inputs and every parameter) of both layers agree."""
    x_pyg, x_ours = clone_input(x), clone_input(x)
    ref = pyg(x_pyg, edge_index if pyg_edge_index is None else pyg_edge_index, edge_type)
    out = ours(x_ours, edge_index, edge_type)
    assert out.dtype == ref.dtype and out.shape == ref.shape
    torch.testing.assert_close(out, ref, atol=atol, rtol=1e-9)
    grad = torch.randn_like(ref)
    want = torch.autograd.grad(ref, leaves(x_pyg) + list(pyg.parameters()), grad,
                               allow_unused=True)
    got = torch.autograd.grad(out, leaves(x_ours) + list(ours.parameters()), grad,
                              allow_unused=True)
    for g_want, g_got in zip(want, got):
        if g_want is None or g_got is None:
            assert (g_want is None or not g_want.any()) and (g_got is None or not g_got.any())
        else:
            torch.testing.assert_close(g_got, g_want, atol=atol, rtol=1e-9)


def typed_graph_case(name, num_types):
    return typed_case(name, num_types, seed=3)


def features(num_nodes, width, seed=5):
    return torch.randn(num_nodes, width, generator=torch.Generator().manual_seed(seed),
                       dtype=torch.float64)


@pytest.mark.parametrize("num_types", [1, 4, 16])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("root_weight", [True, False])
@pytest.mark.parametrize("aggr", ["mean", "add", "sum"])
@pytest.mark.parametrize("decomposition", list(DECOMPOSITIONS))
@pytest.mark.parametrize("layer", LAYERS)
def test_every_argument(layer, decomposition, aggr, root_weight, bias, num_types):
    edge_index, edge_type, n, _ = typed_graph_case("loops_duplicates", num_types)
    for is_sorted in (False, True):
        ei, et = edge_index, edge_type
        if is_sorted:
            et, perm = edge_type.sort(stable=True)
            ei = edge_index[:, perm]
        pyg, ours = make_pair(layer, 6, 4, num_types, aggr=aggr, root_weight=root_weight,
                              bias=bias, is_sorted=is_sorted, **DECOMPOSITIONS[decomposition])
        assert_same(pyg, ours, features(n, 6), ei, et)


@pytest.mark.parametrize("case", ["empty", "random", "random_int32", "isolated", "supernode",
                                  "bipartite", "bipartite_wide", "strided"])
@pytest.mark.parametrize("decomposition", list(DECOMPOSITIONS))
@pytest.mark.parametrize("layer", LAYERS)
def test_graph_cases(layer, decomposition, case):
    edge_index, edge_type, num_src, num_dst = typed_graph_case(case, 4)  # int32 with int32
    bipartite = num_src != num_dst
    pyg, ours = make_pair(layer, (6, 2) if bipartite else 6, 4, 4,
                          **DECOMPOSITIONS[decomposition])
    x = (features(num_src, 6), features(num_dst, 2, seed=6)) if bipartite else features(num_src, 6)
    # PyG's scatter needs int64 indices for FastRGCNConv: it gets them, iognn the int32 ones.
    assert_same(pyg, ours, x, edge_index, edge_type, pyg_edge_index=edge_index.long())


@pytest.mark.parametrize("layer", LAYERS)
def test_type_without_edges_and_strided_inputs(layer):
    edge_index, edge_type, n, _ = typed_graph_case("random", 4)
    edge_type = torch.where(edge_type == 1, torch.full_like(edge_type, 3), edge_type)
    wide_type = torch.stack([edge_type, edge_type], 1)  # edge_type[:, 0] is strided
    x = features(6, n).t()  # [n, 6], column-major
    for decomposition in DECOMPOSITIONS.values():
        pyg, ours = make_pair(layer, 6, 4, 4, **decomposition)
        assert_same(pyg, ours, x, edge_index, wide_type[:, 0])


@pytest.mark.parametrize("aggr", ["mean", "add"])
@pytest.mark.parametrize("decomposition", ["none", "bases"])
@pytest.mark.parametrize("layer", LAYERS)
def test_featureless(layer, decomposition, aggr):
    edge_index, edge_type, n, _ = typed_graph_case("random", 4)
    pyg, ours = make_pair(layer, n, 4, 4, aggr=aggr, **DECOMPOSITIONS[decomposition])
    assert_same(pyg, ours, None, edge_index, edge_type)
    assert_same(pyg, ours, torch.arange(n), edge_index, edge_type)
    # Node ids that are not the positions: RGCNConv reads weight rows at the ids, FastRGCNConv
    # at the source index (PyG's behaviour, kept).
    ids = torch.randperm(n, generator=torch.Generator().manual_seed(0))
    assert_same(pyg, ours, ids, edge_index, edge_type)
    # Bipartite: ids for sources and destinations.
    num_dst = 9
    keep = edge_index[1] < num_dst
    pyg, ours = make_pair(layer, (n, num_dst), 4, 4, aggr=aggr, **DECOMPOSITIONS[decomposition])
    assert_same(pyg, ours, (ids, torch.arange(num_dst)), edge_index[:, keep], edge_type[keep])


@pytest.mark.parametrize("layer", LAYERS)
def test_featureless_blocks_raise(layer):
    edge_index, edge_type, n, _ = typed_graph_case("random", 4)
    ours = getattr(inn, layer)(n, 4, 4, num_blocks=2)
    with pytest.raises(ValueError, match="Block-diagonal"):
        ours(None, edge_index, edge_type)


@pytest.mark.parametrize("layer", LAYERS)
def test_state_dict_both_ways(layer):
    edge_index, edge_type, n, _ = typed_graph_case("random", 4)
    x = features(n, 6)
    for decomposition in DECOMPOSITIONS.values():
        pyg, ours = make_pair(layer, 6, 4, 4, **decomposition)
        with torch.no_grad():
            for p in pyg.parameters():
                p.normal_()
        ours.load_state_dict(pyg.state_dict())
        assert_same(pyg, ours, x, edge_index, edge_type)
        with torch.no_grad():
            for p in ours.parameters():
                p.normal_()
        pyg.load_state_dict(ours.state_dict())
        assert_same(pyg, ours, x, edge_index, edge_type)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_low_precision_dtype_follows_pyg(dtype):
    edge_index, edge_type, n, _ = typed_graph_case("random", 4)
    pyg, ours = make_pair("RGCNConv", 6, 4, 4)
    pyg, ours = pyg.to(dtype), ours.to(dtype)
    x = features(n, 6).to(dtype)
    ref, out = pyg(x, edge_index, edge_type), ours(x, edge_index, edge_type)
    assert out.dtype == ref.dtype
    tol = 1e-5 if dtype == torch.float32 else 5e-2
    torch.testing.assert_close(out, ref, atol=tol, rtol=tol)


def test_sparse_and_typed_graph_adjacencies():
    edge_index, edge_type, n, _ = typed_graph_case("random", 4)
    pyg, ours = make_pair("RGCNConv", 6, 4, 4)
    x = features(n, 6)
    ref = pyg(x, edge_index, edge_type)
    adj = torch.sparse_coo_tensor(edge_index.flip(0), edge_type, (n, n))  # values: the types
    torch.testing.assert_close(ours(x, adj), ref)
    tg = iognn.TypedGraph(edge_index, edge_type, 4, n)
    torch.testing.assert_close(ours(x, tg), ref)
    with pytest.raises(ValueError, match="edge_type must be None"):
        ours(x, adj, edge_type)
    with pytest.raises(ValueError, match="4 types"):
        inn.RGCNConv(6, 4, 5).double()(x, tg)


def test_typed_graph_is_cached_per_edge_type():
    edge_index, edge_type, n, _ = typed_graph_case("random", 4)
    pyg, ours = make_pair("RGCNConv", 6, 4, 4)
    x = features(n, 6)
    ours(x, edge_index, edge_type)
    entries = edge_index._iognn_graphs.entries
    tg = entries[("typed", 4)][1][2]
    ours(x, edge_index, edge_type)
    assert entries[("typed", 4)][1][2] is tg
    edge_type[:5] = (edge_type[:5] + 1) % 4  # in place: a new TypedGraph
    assert_same(pyg, ours, x, edge_index, edge_type)
    assert entries[("typed", 4)][1][2] is not tg
    other = edge_type.clone()
    tg = entries[("typed", 4)][1][2]
    ours(x, edge_index, other)
    assert entries[("typed", 4)][1][2] is not tg


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("edge_type, error", [
    (torch.tensor([0.0] * 120), TypeError),
    (torch.zeros(119, dtype=torch.int64), ValueError),
    (torch.full((120,), 4), IndexError),
    (torch.full((120,), -1), IndexError),
])
def test_bad_edge_type(layer, edge_type, error):
    edge_index, _, n, _ = typed_graph_case("random", 4)
    ours = getattr(inn, layer)(6, 4, 4)
    with pytest.raises(error, match="edge_type"):
        ours(torch.randn(n, 6), edge_index, edge_type)
    with pytest.raises(ValueError, match="edge_type"):
        ours(torch.randn(n, 6), edge_index)


def test_constructor_errors_and_aggr():
    with pytest.raises(ValueError, match="both"):
        inn.RGCNConv(6, 4, 3, num_bases=2, num_blocks=2)
    with pytest.raises(AssertionError):
        inn.RGCNConv(6, 4, 3, num_blocks=4)
    with pytest.raises(TypeError, match="node_dim"):
        inn.RGCNConv(6, 4, 3, node_dim=0)
    edge_index, edge_type, n, _ = typed_graph_case("random", 3)
    x = torch.randn(n, 6)
    with pytest.raises(NotImplementedError, match="max"):
        inn.RGCNConv(6, 4, 3, aggr="max")(x, edge_index, edge_type)
    with pytest.raises(AssertionError):
        inn.FastRGCNConv(6, 4, 3, aggr="max")(x, edge_index, edge_type)
    assert repr(inn.RGCNConv(6, 4, 3)) == repr(pyg_nn.RGCNConv(6, 4, 3))
    assert repr(inn.FastRGCNConv(6, 4, 3)) == repr(pyg_nn.FastRGCNConv(6, 4, 3))


def test_all_strategies_give_the_layer_result():
    """The layer's op under each strategy (aggregate / transform first, dense / grouped)."""
    from iognn.ops import typed_propagate
    from iognn.typed import STRATEGIES
    edge_index, edge_type, n, _ = typed_graph_case("supernode", 16)
    tg = iognn.TypedGraph(edge_index, edge_type, 16, n)
    x = features(n, 6)
    for aggr, f_out in itertools.product(["sum", "mean"], [3, 9]):
        weight = torch.randn(16, 6, f_out, dtype=torch.float64)
        outs = [typed_propagate(tg, x, weight, aggr, strategy=s) for s in STRATEGIES]
        for out in outs[1:]:
            torch.testing.assert_close(out, outs[0])
