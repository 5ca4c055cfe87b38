"""iognn.nn layers against their PyG 2.8 counterparts (CPU, fp32): parameter names and
initialisation, state_dict exchange both ways, outputs and every gradient (input, edge values and
each parameter) on the conftest graph cases."""
import pytest
import torch
import torch_geometric.nn as pyg_nn

import iognn.nn as io_nn

from conftest import GRAPH_CASES, sizes, tolerance

RTOL, ATOL = tolerance(torch.float32)
# Sums of 5,000 fp32 terms (the super-node case): summation-order differences reach ~2e-4 relative.
SUPERNODE_TOL = (1e-3, 1e-3)
SQUARE_CASES = [c for c in GRAPH_CASES if not isinstance(c[2], tuple)]
ALL_IDS = [c[0] for c in GRAPH_CASES]
SQUARE_IDS = [c[0] for c in SQUARE_CASES]


def mlp(a, b, c):
    return torch.nn.Sequential(torch.nn.Linear(a, b), torch.nn.ReLU(), torch.nn.Linear(b, c))


def make_pair(name, *args, **kwargs):
    """(iognn layer, PyG layer) built with the same seed; the iognn one then loads PyG's weights."""
    torch.manual_seed(7)
    ours = getattr(io_nn, name)(*args, **kwargs)
    torch.manual_seed(7)
    theirs = getattr(pyg_nn, name)(*args, **kwargs)
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def make_gin_pair(in_ch, out_ch, **kwargs):
    torch.manual_seed(7)
    ours = io_nn.GINConv(mlp(in_ch, 8, out_ch), **kwargs)
    torch.manual_seed(7)
    theirs = pyg_nn.GINConv(mlp(in_ch, 8, out_ch), **kwargs)
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def features(num_src, num_dst, channels, bipartite, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x_src = torch.randn(num_src, channels, generator=gen).requires_grad_()
    if not bipartite:
        return x_src, (x_src,)
    x_dst = torch.randn(num_dst, channels, generator=gen).requires_grad_()
    return (x_src, x_dst), (x_src, x_dst)


def case_tolerance(case):
    return SUPERNODE_TOL if case[0] == "supernode" else (RTOL, ATOL)


def assert_parity(ours, theirs, run, inputs, extra=(), unused_rows=None, tol=(RTOL, ATOL)):
    """Same output, and the same gradient for every input / extra tensor / parameter (within
    ``tol = (rtol, atol)``, atol relative to the gradient's largest magnitude when above 1).

    ``unused_rows`` maps an extra tensor's position to a mask of rows the output does not depend
    on: there iognn's gradient must be 0 (PyG's may not be, see test_gcn_matches_pyg).
    """
    rtol, atol = tol
    out, ref = run(ours), run(theirs)
    torch.testing.assert_close(out, ref, rtol=rtol, atol=atol)
    if out.numel() == 0:
        return
    grad = torch.randn_like(out)
    ours_params = dict(ours.named_parameters())
    theirs_params = dict(theirs.named_parameters())
    assert ours_params.keys() == theirs_params.keys()
    names = list(ours_params)
    tensors = list(inputs) + list(extra)
    got = torch.autograd.grad(out, tensors + [ours_params[n] for n in names], grad,
                              allow_unused=True)
    exp = torch.autograd.grad(ref, tensors + [theirs_params[n] for n in names], grad,
                              allow_unused=True)
    labels = [f"input {i}" for i in range(len(tensors))] + names
    for i, (label, a, b, t) in enumerate(zip(labels, got, exp,
                                             tensors + [ours_params[n] for n in names])):
        a = torch.zeros_like(t) if a is None else a
        b = torch.zeros_like(t) if b is None else b
        unused = (unused_rows or {}).get(i - len(inputs))
        if unused is not None:
            assert torch.all(a[unused] == 0), f"{label}: gradient of unused rows"
            a, b = a[~unused], b[~unused]
        # Gradients summed over many nodes / edges grow with the graph, and so does the rounding
        # of a different (equally exact) summation order: atol scales with the tensor's magnitude.
        scale = max(1.0, float(b.abs().max())) if b.numel() else 1.0
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol * scale,
                                   msg=lambda m: f"{label}: {m}")


def shadowed_self_loops(edge_index):
    """Self-loops followed by another loop on the same node: add_remaining_self_loops keeps the
    last one's weight, so the earlier ones do not reach the output."""
    ei = edge_index.long()
    shadowed = torch.zeros(ei.size(1), dtype=torch.bool)
    last = {}
    for e in (ei[0] == ei[1]).nonzero().view(-1).tolist():
        node = int(ei[0, e])
        if node in last:
            shadowed[last[node]] = True
        last[node] = e
    return shadowed


# ---- parameters and state_dict -------------------------------------------------------------
LAYERS = [
    ("GCNConv", (6, 5), {}),
    ("GCNConv", (6, 5), {"bias": False, "improved": True}),
    ("SAGEConv", (6, 5), {}),
    ("SAGEConv", ((6, 4), 5), {"project": True, "root_weight": True}),
    ("SAGEConv", (6, 5), {"root_weight": False, "bias": False}),
    ("GATConv", (6, 5), {"heads": 3, "edge_dim": 2, "residual": True}),
    ("GATConv", ((6, 4), 5), {"heads": 2, "concat": False}),
    ("GATv2Conv", (6, 5), {"heads": 3, "edge_dim": 2, "share_weights": True}),
    ("GATv2Conv", ((6, 4), 5), {"heads": 2, "residual": True}),
    ("TransformerConv", (6, 5), {"heads": 3, "edge_dim": 2, "beta": True}),
    ("TransformerConv", ((6, 4), 5), {"heads": 2, "concat": False, "root_weight": False}),
]


def check_same_state_as_pyg(name, args, kwargs):
    """The iognn and PyG layers `name(*args, **kwargs)` hold the same state_dict (keys in order,
    values) after the same seed and after reset_parameters, and exchange it both ways (strict)."""
    torch.manual_seed(3)
    ours = getattr(io_nn, name)(*args, **kwargs)
    torch.manual_seed(3)
    theirs = getattr(pyg_nn, name)(*args, **kwargs)
    a, b = ours.state_dict(), theirs.state_dict()
    assert list(a) == list(b)
    for key in a:  # identical random draws: the same initial weights
        assert a[key].shape == b[key].shape and torch.equal(a[key], b[key]), key
    # reset_parameters draws like PyG's too
    torch.manual_seed(4)
    ours.reset_parameters()
    torch.manual_seed(4)
    theirs.reset_parameters()
    for key, value in ours.state_dict().items():
        assert torch.equal(value, theirs.state_dict()[key]), key
    # exchange in both directions (strict)
    fresh = getattr(pyg_nn, name)(*args, **kwargs)
    fresh.load_state_dict(ours.state_dict())
    ours.load_state_dict(getattr(pyg_nn, name)(*args, **kwargs).state_dict())


@pytest.mark.parametrize("name,args,kwargs", LAYERS, ids=[f"{n}-{i}" for i, (n, _, _) in
                                                           enumerate(LAYERS)])
def test_same_parameters_after_same_seed_and_state_dict_both_ways(name, args, kwargs):
    check_same_state_as_pyg(name, args, kwargs)


def test_gin_state_dict_and_eps():
    ours, theirs = make_gin_pair(6, 5, eps=0.25, train_eps=True)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert "eps" in dict(ours.named_parameters())
    buffered, _ = make_gin_pair(6, 5, eps=0.5)
    assert "eps" in dict(buffered.named_buffers()) and float(buffered.eps) == 0.5
    theirs.load_state_dict(ours.state_dict())


# ---- GCNConv ------------------------------------------------------------------------------
GCN_VARIANTS = [
    {},
    {"improved": True},
    {"add_self_loops": False},
    {"normalize": False},
    {"bias": False},
]


@pytest.mark.parametrize("case", SQUARE_CASES, ids=SQUARE_IDS)
@pytest.mark.parametrize("kwargs", GCN_VARIANTS, ids=lambda k: ",".join(k) or "default")
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "edge_weight"])
def test_gcn_matches_pyg(case, kwargs, weighted):
    _, edge_index, n = case
    ours, theirs = make_pair("GCNConv", 6, 5, **kwargs)
    x, inputs = features(n, n, 6, bipartite=False)
    w, extra, unused = None, (), None
    if weighted:
        gen = torch.Generator().manual_seed(1)
        w = (torch.rand(edge_index.size(1), generator=gen) + 0.1).requires_grad_()
        extra = (w,)
        # With several loops on one node only the last one's weight is used. PyG picks it by an
        # indexed assignment whose backward still sends gradient to the shadowed copies; iognn
        # gives them the true gradient, 0.
        if ours.add_self_loops:
            unused = {0: shadowed_self_loops(edge_index)}
    assert_parity(ours, theirs,
                  lambda layer: layer(x, edge_index if layer is ours else edge_index.long(), w),
                  inputs, extra, unused, case_tolerance(case))


def test_gcn_cached_reuses_the_first_graph():
    _, edge_index, n = SQUARE_CASES[2]
    ours, theirs = make_pair("GCNConv", 6, 5, cached=True)
    x, _ = features(n, n, 6, bipartite=False)
    torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index), rtol=RTOL, atol=ATOL)
    # Cached: a different edge_index is ignored, as in PyG.
    other = edge_index[:, : edge_index.size(1) // 2]
    torch.testing.assert_close(ours(x, other), theirs(x, other), rtol=RTOL, atol=ATOL)
    ours.reset_parameters()
    assert ours._cached_edge_index is None


def test_gcn_rejects_bad_arguments():
    with pytest.raises(ValueError, match="self-loops"):
        io_nn.GCNConv(4, 4, normalize=False, add_self_loops=True)
    layer = io_nn.GCNConv(4, 4)
    x = torch.randn(3, 4)
    with pytest.raises(ValueError, match="bipartite"):
        layer((x, x), torch.tensor([[0], [1]]))
    with pytest.raises(NotImplementedError, match="CSC"):
        layer(x, torch.eye(3).to_sparse_csc())
    with pytest.raises(TypeError, match="edge_index"):
        layer(x, [[0], [1]])


# ---- SAGEConv -----------------------------------------------------------------------------
SAGE_VARIANTS = [
    {},
    {"aggr": "sum"},
    {"aggr": "add", "bias": False},
    {"normalize": True},
    {"root_weight": False},
    {"project": True},
]


@pytest.mark.parametrize("case", GRAPH_CASES, ids=ALL_IDS)
@pytest.mark.parametrize("kwargs", SAGE_VARIANTS, ids=lambda k: ",".join(f"{a}={v}" for a, v in
                                                                         k.items()) or "default")
def test_sage_matches_pyg(case, kwargs):
    _, edge_index, size = case
    num_src, num_dst = sizes(size)
    bipartite = isinstance(size, tuple)
    ours, theirs = make_pair("SAGEConv", 6, 5, **kwargs)
    x, inputs = features(num_src, num_dst, 6, bipartite)
    assert_parity(ours, theirs,
                  lambda layer: layer(x, edge_index if layer is ours else edge_index.long()),
                  inputs, tol=case_tolerance(case))


def test_sage_bipartite_with_different_widths_and_missing_destination_features():
    gen = torch.Generator().manual_seed(2)
    edge_index = torch.stack([torch.randint(0, 15, (60,), generator=gen),
                              torch.randint(0, 6, (60,), generator=gen)])
    ours, theirs = make_pair("SAGEConv", (7, 3), 4, project=True)
    x_src = torch.randn(15, 7, generator=gen).requires_grad_()
    x_dst = torch.randn(6, 3, generator=gen).requires_grad_()
    assert_parity(ours, theirs, lambda layer: layer((x_src, x_dst), edge_index), (x_src, x_dst))
    assert_parity(ours, theirs, lambda layer: layer((x_src, None), edge_index, size=(15, 6)),
                  (x_src,))


def test_layers_reject_unsupported_message_passing_arguments():
    with pytest.raises(NotImplementedError, match="flow"):
        io_nn.SAGEConv(4, 4, flow="target_to_source")
    with pytest.raises(TypeError, match="unexpected keyword"):
        io_nn.GCNConv(4, 4, not_an_argument=1)
    with pytest.raises(NotImplementedError, match="aggr"):
        io_nn.GATConv(4, 4, aggr="mean")


# ---- GINConv ------------------------------------------------------------------------------
@pytest.mark.parametrize("case", GRAPH_CASES, ids=ALL_IDS)
@pytest.mark.parametrize("kwargs", [{}, {"eps": 0.3}, {"eps": -0.2, "train_eps": True}],
                         ids=["default", "eps", "train_eps"])
def test_gin_matches_pyg(case, kwargs):
    _, edge_index, size = case
    num_src, num_dst = sizes(size)
    ours, theirs = make_gin_pair(6, 5, **kwargs)
    x, inputs = features(num_src, num_dst, 6, isinstance(size, tuple))
    assert_parity(ours, theirs,
                  lambda layer: layer(x, edge_index if layer is ours else edge_index.long()),
                  inputs, tol=case_tolerance(case))


# ---- attention layers ---------------------------------------------------------------------
ATTENTION_CASES = [c for c in GRAPH_CASES if c[0] not in ("no_nodes",)]


def edge_features(edge_index, dim, seed=5):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(edge_index.size(1), dim, generator=gen).requires_grad_()


def attention_run(ours, x, edge_index, edge_attr, alphas):
    """A runner for assert_parity that also records each layer's (edge_index, alpha)."""
    def run(layer):
        ei = edge_index if layer is ours else edge_index.long()
        out, (ei_out, alpha) = layer(x, ei, edge_attr, return_attention_weights=True)
        alphas["iognn" if layer is ours else "pyg"] = (ei_out, alpha)
        return out
    return run


def assert_same_alpha(alphas):
    (ei_a, alpha_a), (ei_b, alpha_b) = alphas["iognn"], alphas["pyg"]
    assert torch.equal(ei_a, ei_b)
    torch.testing.assert_close(alpha_a, alpha_b, rtol=RTOL, atol=ATOL)


def check_attention_layer(layer_name, case, kwargs):
    """An attention layer built with `kwargs` against PyG's on `case` (6 -> 4 channels per head,
    edge features of width 3 with ``edge_dim``): output, every gradient and the attention weights
    with their edge_index."""
    _, edge_index, size = case
    num_src, num_dst = sizes(size)
    bipartite = isinstance(size, tuple)
    ours, theirs = make_pair(layer_name, (6, 6) if bipartite else 6, 4, **kwargs)
    x, inputs = features(num_src, num_dst, 6, bipartite)
    ea = edge_features(edge_index, 3) if "edge_dim" in kwargs else None
    extra = (ea,) if ea is not None else ()
    alphas = {}
    assert_parity(ours, theirs, attention_run(ours, x, edge_index, ea, alphas), inputs, extra,
                  tol=case_tolerance(case))
    assert_same_alpha(alphas)


GAT_VARIANTS = [
    {"heads": 2},
    {"heads": 3, "concat": False, "negative_slope": 0.1},
    {"heads": 2, "add_self_loops": False, "bias": False},
    {"heads": 2, "edge_dim": 3, "fill_value": "mean", "residual": True},
    {"heads": 1, "edge_dim": 3, "fill_value": 0.5},
]


def skip_if_pyg_cannot_fill_mean(kwargs, num_src, num_dst):
    if kwargs.get("fill_value") == "mean" and num_dst > num_src:
        pytest.skip("PyG's add_self_loops cannot compute 'mean' loop features when targets "
                    "outnumber sources (its scatter has min(num_src, num_dst) rows)")


@pytest.mark.parametrize("layer_name", ["GATConv", "GATv2Conv"])
@pytest.mark.parametrize("case", ATTENTION_CASES, ids=[c[0] for c in ATTENTION_CASES])
@pytest.mark.parametrize("kwargs", GAT_VARIANTS, ids=lambda k: ",".join(k))
def test_gat_layers_match_pyg(layer_name, case, kwargs):
    skip_if_pyg_cannot_fill_mean(kwargs, *sizes(case[2]))
    check_attention_layer(layer_name, case, kwargs)


TRANSFORMER_VARIANTS = [
    {"heads": 2},
    {"heads": 3, "concat": False, "beta": True},
    {"heads": 2, "edge_dim": 3, "root_weight": False},
    {"heads": 2, "edge_dim": 3, "beta": True, "bias": False},
]


@pytest.mark.parametrize("case", ATTENTION_CASES, ids=[c[0] for c in ATTENTION_CASES])
@pytest.mark.parametrize("kwargs", TRANSFORMER_VARIANTS, ids=lambda k: ",".join(k))
def test_transformer_matches_pyg(case, kwargs):
    check_attention_layer("TransformerConv", case, kwargs)


def test_attention_dropout_only_in_training():
    gen = torch.Generator().manual_seed(9)
    edge_index = torch.randint(0, 30, (2, 200), generator=gen)
    x = torch.randn(30, 6, generator=gen)
    for name in ("GATConv", "GATv2Conv", "TransformerConv"):
        ours, theirs = make_pair(name, 6, 4, heads=2, dropout=0.5)
        ours.eval()
        theirs.eval()
        reference = theirs(x, edge_index)
        torch.testing.assert_close(ours(x, edge_index), reference, rtol=RTOL, atol=ATOL)
        ours.train()
        assert not torch.allclose(ours(x, edge_index), reference)


def test_gat_size_argument_and_missing_destination_features():
    gen = torch.Generator().manual_seed(4)
    edge_index = torch.stack([torch.randint(0, 12, (50,), generator=gen),
                              torch.randint(0, 5, (50,), generator=gen)])
    x_src = torch.randn(12, 6, generator=gen).requires_grad_()
    ours, theirs = make_pair("GATConv", (6, 6), 4, heads=2, add_self_loops=False)
    assert_parity(ours, theirs, lambda layer: layer((x_src, None), edge_index, size=(12, 5)),
                  (x_src,))


def test_attention_layers_reject_missing_edge_features():
    x = torch.randn(4, 6)
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])
    with pytest.raises(ValueError, match="edge_dim"):
        io_nn.GATv2Conv(6, 4)(x, edge_index, torch.randn(3, 2))
    with pytest.raises(ValueError, match="edge_attr"):
        io_nn.TransformerConv(6, 4, edge_dim=2)(x, edge_index)


def test_stacked_linears_equal_separate_ones():
    from iognn.nn.linear import Linear, stacked_linears
    torch.manual_seed(0)
    x = torch.randn(7, 5, dtype=torch.float64, requires_grad=True)
    lins = [Linear(5, n).double() for n in (3, 4, 2)]
    stacked = stacked_linears(x, lins)
    separate = [lin(x) for lin in lins]
    for a, b in zip(stacked, separate):
        torch.testing.assert_close(a, b)
    grads = [torch.randn_like(t) for t in separate]
    got = torch.autograd.grad(stacked, [x] + [p for lin in lins for p in lin.parameters()], grads)
    want = torch.autograd.grad(separate, [x] + [p for lin in lins for p in lin.parameters()],
                               grads)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    # batched inputs split along the feature dimension
    xb = torch.randn(2, 7, 5, dtype=torch.float64)
    for a, lin in zip(stacked_linears(xb, lins), lins):
        torch.testing.assert_close(a, lin(xb))


def test_stacked_linears_refuse_lazy_weights_and_mixed_biases():
    from iognn.nn.linear import Linear, stacked_linears
    x = torch.randn(4, 5)
    assert stacked_linears(x, [Linear(-1, 3), Linear(5, 3)]) is None
    assert stacked_linears(x, [Linear(5, 3, bias=False), Linear(5, 3)]) is None
    both = stacked_linears(x, [Linear(5, 3, bias=False), Linear(5, 2, bias=False)])
    assert [t.shape for t in both] == [(4, 3), (4, 2)]
