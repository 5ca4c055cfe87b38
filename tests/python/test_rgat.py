"""iognn.nn.RGATConv against PyG 2.8 on the CPU: same parameters (state_dict both ways), outputs,
attention weights and gradients (x, edge_attr, every parameter) for every constructor argument,
both evaluation strategies, the graph edge cases, index dtypes, strided inputs, adjacency kinds,
dropout; PyG's constructor errors and edge_type errors."""
from __future__ import annotations

import itertools

import pytest
import torch
import torch_geometric.nn as pyg_nn

import iognn
import iognn.nn as inn
from iognn.nn.conv.rgat_conv import STRATEGIES

from test_typed_propagate import typed_case

MECHANISMS = ["across-relation", "within-relation"]
MODES = ["additive-self-attention", "multiplicative-self-attention"]
MODS = [None, "additive", "scaled", "f-additive", "f-scaled"]
DECOMPOSITIONS = {"none": {}, "bases": dict(num_bases=2), "blocks": dict(num_blocks=2)}


def make_pair(*args, **kwargs):
    """The PyG layer and the iognn layer from the same random draws, in fp64, with every
    parameter then randomised in PyG's layer and loaded into iognn's (so that w, l1, b1, l2, b2
    and the bias matter)."""
    torch.manual_seed(7)
    pyg = pyg_nn.RGATConv(*args, **kwargs).double()
    torch.manual_seed(7)
    ours = inn.RGATConv(*args, **kwargs).double()
    assert list(pyg.state_dict()) == list(ours.state_dict())
    assert [n for n, _ in pyg.named_parameters()] == [n for n, _ in ours.named_parameters()]
    for key, value in pyg.state_dict().items():
        if key != "l2":  # uninitialised in PyG (see RGATConv's docstring)
            assert torch.equal(value, ours.state_dict()[key]), key
    assert torch.equal(ours.l2, torch.full(ours.l2.shape, 1.0 / ours.out_channels).double())
    g = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for p in pyg.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5)
    ours.load_state_dict(pyg.state_dict())
    return pyg, ours


def features(num_nodes, width, seed=5, dtype=torch.float64):
    return torch.randn(num_nodes, width, generator=torch.Generator().manual_seed(seed),
                       dtype=dtype)


def leaves_of(x, edge_attr):
    parts = list(x) if isinstance(x, tuple) else [x]
    return [t for t in parts + [edge_attr] if t is not None]


def fresh(x):
    if isinstance(x, tuple):
        return tuple(fresh(t) for t in x)
    return None if x is None else x.detach().clone().requires_grad_()


def run(layer, x, edge_index, edge_type, edge_attr, grad, **kwargs):
    """(out, alpha, gradients of the inputs and of every parameter)."""
    x, edge_attr = fresh(x), fresh(edge_attr)
    out, (_, alpha) = layer(x, edge_index, edge_type, edge_attr, return_attention_weights=True,
                            **kwargs)
    inputs = leaves_of(x, edge_attr) + list(layer.parameters())
    grads = torch.autograd.grad(out, inputs, grad(out), allow_unused=True)
    return out, alpha, [torch.zeros_like(t) if g is None else g for g, t in zip(grads, inputs)]


def assert_same(pyg, ours, x, edge_index, edge_type, edge_attr=None, pyg_edge_index=None,
                strategies=STRATEGIES, atol=1e-10, **kwargs):
    """Outputs, attention weights and gradients agree, for each evaluation strategy."""
    cache = {}

    def grad(out):
        if "g" not in cache:
            cache["g"] = torch.randn(out.shape, generator=torch.Generator().manual_seed(3),
                                     dtype=out.dtype)
        return cache["g"]
    want = run(pyg, x, edge_index if pyg_edge_index is None else pyg_edge_index, edge_type,
               edge_attr, grad, **kwargs)
    for strategy in strategies:
        ours.strategy = strategy
        got = run(ours, x, edge_index, edge_type, edge_attr, grad, **kwargs)
        assert got[0].dtype == want[0].dtype and got[0].shape == want[0].shape
        torch.testing.assert_close(got[0], want[0], atol=atol, rtol=1e-9)
        torch.testing.assert_close(got[1], want[1], atol=atol, rtol=1e-9)
        for g_got, g_want in zip(got[2], want[2]):
            torch.testing.assert_close(g_got, g_want, atol=atol, rtol=1e-9)
    ours.strategy = "auto"


def small_graph(num_nodes=14, num_edges=50, num_types=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=g)
    edge_type = torch.randint(0, num_types, (num_edges,), generator=g)
    return edge_index, edge_type


GRID_GRAPH = small_graph()


def grid():
    """Every attention mechanism x mode (x dim) x mod x heads x decomposition x edge_dim; concat
    alternates over the decomposition x edge_dim combinations, so that every other combination
    meets both values of concat."""
    combos = list(itertools.product(DECOMPOSITIONS, [None, 2]))
    for mechanism, mode, mod, heads, dim in itertools.product(MECHANISMS, MODES, MODS, [1, 3],
                                                               [1, 2]):
        if mode == "additive-self-attention" and dim > 1:
            continue
        for k, (decomposition, edge_dim) in enumerate(combos):
            concat = (k + heads + dim) % 2 == 0
            yield mechanism, mode, mod, heads, dim, concat, decomposition, edge_dim


@pytest.mark.parametrize("mechanism,mode,mod,heads,dim,concat,decomposition,edge_dim",
                         list(grid()))
def test_matches_pyg(mechanism, mode, mod, heads, dim, concat, decomposition, edge_dim):
    pyg, ours = make_pair(4, 4, 3, mod=mod, attention_mechanism=mechanism, attention_mode=mode,
                          heads=heads, dim=dim, concat=concat, edge_dim=edge_dim,
                          **DECOMPOSITIONS[decomposition])
    edge_index, edge_type = GRID_GRAPH
    edge_attr = None if edge_dim is None else features(edge_index.size(1), edge_dim, seed=9)
    assert_same(pyg, ours, features(14, 4), edge_index, edge_type, edge_attr)


CASES = ["empty", "no_nodes", "random", "random_int32", "isolated", "loops_duplicates", "strided",
         "supernode"]


@pytest.mark.parametrize("num_types", [1, 4, 16])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("case", CASES)
def test_graph_cases(case, mechanism, mode, num_types):
    """Empty graphs, isolated nodes, self-loops, duplicate edges, a super-node, int32 and strided
    edge_index (PyG's scatter needs int64: it gets the same edges as int64)."""
    edge_index, edge_type, num_nodes, _ = typed_case(case, num_types, seed=3)
    dim = 2 if mode == MODES[1] else 1
    pyg, ours = make_pair(5, 3, num_types, attention_mechanism=mechanism, attention_mode=mode,
                          heads=2, dim=dim, mod="scaled", edge_dim=3)
    edge_attr = features(edge_index.size(1), 3, seed=4)
    assert_same(pyg, ours, features(num_nodes, 5), edge_index, edge_type, edge_attr,
                pyg_edge_index=edge_index.long(), atol=1e-9)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_relation_without_edges(mechanism):
    edge_index, edge_type = small_graph(num_types=3)
    edge_type = edge_type * 2  # types 0, 2, 4 of 6: 1, 3 and 5 have no edges
    pyg, ours = make_pair(4, 2, 6, attention_mechanism=mechanism, heads=3, num_bases=3)
    assert_same(pyg, ours, features(14, 4), edge_index, edge_type)


def test_index_dtypes_and_strided_inputs():
    """int32 edge_index and edge_type, non-contiguous x, edge_attr and edge_index."""
    pyg, ours = make_pair(4, 3, 3, attention_mode=MODES[1], heads=2, dim=2, edge_dim=2)
    edge_index, edge_type = small_graph(num_edges=100)
    wide_x = features(14, 8)
    wide_attr = features(50, 4, seed=8)
    strided_index = edge_index[:, ::2]
    assert not wide_x[:, ::2].is_contiguous() and not strided_index.is_contiguous()
    assert_same(pyg, ours, wide_x[:, ::2], strided_index.int(), edge_type[::2].int(),
                wide_attr[:, 1::2], pyg_edge_index=strided_index)


def test_one_dimensional_edge_attr():
    pyg, ours = make_pair(4, 3, 3, heads=2, edge_dim=1)
    edge_index, edge_type = small_graph()
    assert_same(pyg, ours, features(14, 4), edge_index, edge_type, features(50, 1).view(-1))


def test_bipartite_pair_input():
    """A pair (x_src, x_dst): queries from the destinations, keys and values from the sources."""
    pyg, ours = make_pair(4, 3, 3, attention_mode=MODES[1], heads=2, dim=2)
    g = torch.Generator().manual_seed(2)
    edge_index = torch.stack([torch.randint(0, 11, (40,), generator=g),
                              torch.randint(0, 6, (40,), generator=g)])
    edge_type = torch.randint(0, 3, (40,), generator=g)
    assert_same(pyg, ours, (features(11, 4), features(6, 4, seed=6)), edge_index, edge_type)


@pytest.mark.parametrize("aggr", ["add", "sum", "mean"])
@pytest.mark.parametrize("mod", MODS)
def test_aggr(aggr, mod):
    pyg, ours = make_pair(4, 3, 3, heads=2, mod=mod, aggr=aggr)
    edge_index, edge_type = small_graph()
    assert_same(pyg, ours, features(14, 4), edge_index, edge_type)


def test_size_argument():
    pyg, ours = make_pair(4, 3, 3)
    edge_index, edge_type = small_graph()
    x = features(14, 4)
    assert_same(pyg, ours, x, edge_index, edge_type, size=(14, 14))
    for layer in (pyg, ours):
        with pytest.raises(ValueError, match="Encountered tensor with size 14"):
            layer(x, edge_index, edge_type, size=(14, 9))


def test_fp32():
    pyg, ours = make_pair(6, 5, 4, attention_mode=MODES[1], heads=3, dim=2, edge_dim=2)
    pyg.float(), ours.float()
    edge_index, edge_type = small_graph(num_types=4)
    x = features(14, 6, dtype=torch.float32)
    attr = features(50, 2, dtype=torch.float32)
    want, got = pyg(x, edge_index, edge_type, attr), ours(x, edge_index, edge_type, attr)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_return_attention_weights_structure():
    pyg, ours = make_pair(4, 3, 3, heads=2)
    edge_index, edge_type = small_graph()
    x = features(14, 4)
    out = ours(x, edge_index, edge_type)
    assert isinstance(out, torch.Tensor)
    assert isinstance(ours(x, edge_index, edge_type, return_attention_weights=None),
                      torch.Tensor)
    for flag in (True, False):  # PyG returns the weights for any bool
        got, (ei, alpha) = ours(x, edge_index, edge_type, return_attention_weights=flag)
        want, (pyg_ei, pyg_alpha) = pyg(x, edge_index, edge_type, return_attention_weights=flag)
        assert ei is edge_index and pyg_ei is edge_index
        assert alpha.shape == pyg_alpha.shape == (50, 2)
        torch.testing.assert_close(alpha, pyg_alpha, atol=1e-12, rtol=1e-10)
        torch.testing.assert_close(got, out, atol=0, rtol=0)


def test_adjacency_kinds():
    """EdgeIndex (as PyG), a TypedGraph, and a torch.sparse matrix whose values are the edge types
    (PyG's RGATConv fails on torch.sparse input: compared to the index input)."""
    from torch_geometric import EdgeIndex
    pyg, ours = make_pair(4, 3, 3, heads=2)
    edge_index, edge_type = small_graph()
    x = features(14, 4)
    assert_same(pyg, ours, x, EdgeIndex(edge_index, sparse_size=(14, 14)), edge_type)
    want, (_, alpha) = ours(x, edge_index, edge_type, return_attention_weights=True)
    tg = iognn.TypedGraph(edge_index, edge_type, 3, 14)
    got, (ei, got_alpha) = ours(x, tg, return_attention_weights=True)
    torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(got_alpha, alpha, atol=1e-12, rtol=1e-10)
    assert torch.equal(ei, edge_index)
    key = edge_index[1] * 14 + edge_index[0]
    unique = torch.unique(key)  # a coalesced matrix: one entry per (dst, src)
    first = torch.tensor([int((key == k).nonzero()[0]) for k in unique])
    ei_u, et_u = edge_index[:, first], edge_type[first]
    want, (_, alpha) = ours(x, ei_u, et_u, return_attention_weights=True)
    coo = torch.sparse_coo_tensor(ei_u.flip(0), et_u, (14, 14)).coalesce()
    for adj in (coo, coo.to_sparse_csr()):
        got, (matrix, got_alpha) = ours(x, adj, return_attention_weights=True)
        torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-10)
        torch.testing.assert_close(got_alpha, alpha, atol=1e-12, rtol=1e-10)
        assert matrix.layout == adj.layout and matrix.shape == (14, 14, 2)
        got = ours(x, adj, et_u)  # an explicit edge_type wins over the values (PyG's rule)
        torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-10)


def test_dropout_matches_pyg():
    """Training mode draws PyG's mask (F.dropout on [E, H*D] in edge order); eval applies none."""
    pyg, ours = make_pair(4, 3, 3, heads=2, dropout=0.5)
    edge_index, edge_type = small_graph()
    x = features(14, 4)
    pyg.train(), ours.train()
    torch.manual_seed(5)
    want = pyg(x, edge_index, edge_type)
    torch.manual_seed(5)
    got = ours(x, edge_index, edge_type)
    torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-10)
    pyg.eval(), ours.eval()
    torch.testing.assert_close(ours(x, edge_index, edge_type), pyg(x, edge_index, edge_type),
                               atol=1e-12, rtol=1e-10)


def test_state_dict_both_ways():
    pyg, ours = make_pair(6, 3, 3, num_blocks=3, heads=2, edge_dim=2)
    fresh_pyg = pyg_nn.RGATConv(6, 3, 3, num_blocks=3, heads=2, edge_dim=2).double()
    fresh_pyg.load_state_dict(ours.state_dict())
    edge_index, edge_type = small_graph()
    x, attr = features(14, 6), features(50, 2)
    torch.testing.assert_close(fresh_pyg(x, edge_index, edge_type, attr),
                               ours(x, edge_index, edge_type, attr), atol=1e-12, rtol=1e-10)


def test_deterministic():
    _, ours = make_pair(6, 4, 5, attention_mode=MODES[1], heads=3, dim=2, mod="additive")
    edge_index, edge_type = small_graph(num_types=5)
    x = features(14, 6)
    runs = [run(ours, x, edge_index, edge_type, None, torch.ones_like) for _ in range(2)]
    for a, b in zip([runs[0][0], runs[0][1]] + runs[0][2], [runs[1][0], runs[1][1]] + runs[1][2]):
        assert torch.equal(a, b)


def test_auto_strategy():
    """Dense at small R; grouped when N * R rows outweigh the distinct (relation, source)
    pairs."""
    _, ours = make_pair(4, 4, 128)
    edge_index, edge_type = small_graph(num_nodes=40, num_edges=60, num_types=128)
    tg = iognn.TypedGraph(edge_index, edge_type, 128, 40)
    from iognn.nn.conv.rgat_conv import _choose_strategy
    assert _choose_strategy("auto", tg, 4, 4) == "grouped"
    small = iognn.TypedGraph(*small_graph(num_types=2), 2, 14)
    assert _choose_strategy("auto", small, 4, 4) == "dense"
    ours.strategy = "sparse"
    with pytest.raises(ValueError, match="strategy"):
        ours(features(40, 4), edge_index, edge_type)


# ---- errors ------------------------------------------------------------------------------------
CONSTRUCTOR_ERRORS = [
    (dict(attention_mechanism="both"), ValueError, "attention mechanism"),
    (dict(attention_mode="dot"), ValueError, "attention mode"),
    (dict(dim=2), ValueError, "cannot be applied when value of d"),
    (dict(mod="scaled", dropout=0.1), ValueError, "mod must be None"),
    (dict(num_bases=2, num_blocks=2), ValueError, "Can not apply both"),
    (dict(num_blocks=3), AssertionError, "multiple of 'num_blocks'"),
    (dict(node_dim=1), TypeError, "multiple values for keyword argument 'node_dim'"),
]


@pytest.mark.parametrize("kwargs,error,match", CONSTRUCTOR_ERRORS)
def test_constructor_errors_as_pyg(kwargs, error, match):
    for cls in (pyg_nn.RGATConv, inn.RGATConv):
        with pytest.raises(error, match=match):
            cls(4, 4, 3, **kwargs)


def test_forward_errors():
    edge_index, edge_type = small_graph()
    x = features(14, 4)
    layer = inn.RGATConv(4, 3, 3).double()
    with pytest.raises(TypeError, match="edge_type"):
        layer(x, edge_index, edge_type.double())
    with pytest.raises(ValueError, match="edge_type"):
        layer(x, edge_index, edge_type[:-1])
    with pytest.raises(IndexError, match="edge_type"):
        layer(x, edge_index, edge_type + 3)
    with pytest.raises(IndexError, match="edge_type"):
        layer(x, edge_index, edge_type - 1)
    with pytest.raises(ValueError, match="edge_type"):
        layer(x, edge_index)
    with pytest.raises(TypeError, match="x must be"):
        layer(torch.arange(14), edge_index, edge_type)
    for cls in (pyg_nn.RGATConv, inn.RGATConv):  # edge_attr without edge_dim: PyG's assertion
        with pytest.raises(AssertionError, match="edge_dim"):
            cls(4, 3, 3).double()(x, edge_index, edge_type, features(50, 2))
        with pytest.raises(ValueError, match="Block-diagonal"):
            cls(4, 4, 3, num_blocks=2)(torch.arange(14), edge_index, edge_type)
    with pytest.raises(ValueError, match="edge_attr"):
        inn.RGATConv(4, 3, 3, edge_dim=2).double()(x, edge_index, edge_type, features(49, 2))
    with pytest.raises(NotImplementedError, match="aggr"):
        inn.RGATConv(4, 3, 3, aggr="max")
    with pytest.raises(NotImplementedError, match="target_to_source"):
        inn.RGATConv(4, 3, 3, flow="target_to_source")


def test_repr():
    assert repr(inn.RGATConv(4, 3, 2, heads=2)) == repr(pyg_nn.RGATConv(4, 3, 2, heads=2))
