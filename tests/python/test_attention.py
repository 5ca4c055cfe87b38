"""iognn.ops.attention (GAT, GATv2, Graph Transformer) against PyG 2.8's layers (CPU).

Each PyG layer is built, the projections are computed from its own parameters exactly as its
forward does, our op replaces PyG's propagate, and PyG's bias / skip handling is added back; the
output, alpha and the gradients of the input features, every parameter and edge_attr must match.
"""
import math

import numpy as np
import pytest
import torch
from torch_geometric.nn import GATConv, GATv2Conv, TransformerConv

import iognn
from iognn.ops.attention import gat_attention, gatv2_attention, transformer_attention

from conftest import GRAPH_CASES, sizes, tolerance

VARIANTS = ["gat", "gatv2", "transformer"]
LOW_DTYPES = [torch.float32, torch.float16, torch.bfloat16]
IN_CHANNELS = 5


# ---- PyG layers and the same layer computed with iognn's ops --------------------------------
def make_layer(variant, in_channels, C, H, De=None, self_loops=False, fill_value="mean"):
    torch.manual_seed(0)
    if variant == "gat":
        conv = GATConv(in_channels, C, heads=H, add_self_loops=self_loops, edge_dim=De,
                       fill_value=fill_value)
    elif variant == "gatv2":
        conv = GATv2Conv(in_channels, C, heads=H, add_self_loops=self_loops, edge_dim=De,
                         fill_value=fill_value)
    else:
        conv = TransformerConv(in_channels, C, heads=H, edge_dim=De)
    conv = conv.double()
    if getattr(conv, "bias", None) is not None:  # PyG zero-initialises it: make it count
        with torch.no_grad():
            conv.bias.normal_()
    return conv


def ours(variant, conv, x, graph, edge_attr=None, **kwargs):
    """conv's forward with iognn's attention op in place of PyG's propagate -> (out, alpha)."""
    H, C = conv.heads, conv.out_channels
    x_src, x_dst = x if isinstance(x, tuple) else (x, x)
    w_edge = None
    if variant == "gat":
        lin_src = conv.lin if conv.lin is not None else conv.lin_src
        lin_dst = conv.lin if conv.lin is not None else conv.lin_dst
        h_src = lin_src(x_src).view(-1, H, C)
        a_src = (h_src * conv.att_src).sum(-1)
        a_dst = None if x_dst is None else (lin_dst(x_dst).view(-1, H, C) * conv.att_dst).sum(-1)
        if edge_attr is not None:
            w_edge = (conv.lin_edge.weight.view(H, C, -1) * conv.att_edge.view(H, C, 1)).sum(1).t()
        out, alpha = gat_attention(graph, h_src, a_src, a_dst, edge_attr, w_edge,
                                   conv.negative_slope, return_alpha=True, **kwargs)
        skip = conv.bias
    elif variant == "gatv2":
        x_l = conv.lin_l(x_src).view(-1, H, C)
        x_r = conv.lin_r(x_dst).view(-1, H, C)
        if edge_attr is not None:
            w_edge = conv.lin_edge.weight
        out, alpha = gatv2_attention(graph, x_l, x_r, conv.att, edge_attr, w_edge,
                                     conv.negative_slope, return_alpha=True, **kwargs)
        skip = conv.bias
    else:
        query = conv.lin_query(x_dst).view(-1, H, C)
        key = conv.lin_key(x_src).view(-1, H, C)
        value = conv.lin_value(x_src).view(-1, H, C)
        if edge_attr is not None:
            w_edge = conv.lin_edge.weight
        out, alpha = transformer_attention(graph, query, key, value, edge_attr, w_edge,
                                           return_alpha=True, **kwargs)
        skip = conv.lin_skip(x_dst)
    return out.reshape(out.size(0), H * C) + skip, alpha


def theirs(conv, x, edge_index, edge_attr=None, **kwargs):
    out, (ei, alpha) = conv(x, edge_index, edge_attr, return_attention_weights=True, **kwargs)
    return out, alpha, ei


def make_inputs(size, num_edges, De, gen, dtype=torch.float64):
    num_src, num_dst = sizes(size)
    x_src = torch.randn(num_src, IN_CHANNELS, generator=gen, dtype=dtype)
    if isinstance(size, tuple):
        x = (x_src.requires_grad_(),
             torch.randn(num_dst, IN_CHANNELS, generator=gen, dtype=dtype).requires_grad_())
    else:
        x = x_src.requires_grad_()
    edge_attr = None
    if De:
        edge_attr = torch.randn(num_edges, De, generator=gen, dtype=dtype).requires_grad_()
    return x, edge_attr


def leaves(conv, x, edge_attr):
    xs = list(x) if isinstance(x, tuple) else [x]
    extra = [edge_attr] if edge_attr is not None else []
    return xs + extra + [p for p in conv.parameters()]


def assert_same_results(got, exp, inputs, gen):
    """Forward outputs equal; gradients of out . g1 + alpha . g2 equal for every input."""
    for a, b in zip(got, exp):
        torch.testing.assert_close(a, b)
    if got[0].numel() == 0 and got[1].numel() == 0:
        return
    weights = [torch.randn(t.shape, generator=gen, dtype=t.dtype) for t in exp]
    loss_got = sum((t * w).sum() for t, w in zip(got, weights))
    loss_exp = sum((t * w).sum() for t, w in zip(exp, weights))
    g_got = torch.autograd.grad(loss_got, inputs, allow_unused=True)
    g_exp = torch.autograd.grad(loss_exp, inputs, allow_unused=True)
    for a, b, t in zip(g_got, g_exp, inputs):
        zero = torch.zeros_like(t)
        torch.testing.assert_close(a if a is not None else zero, b if b is not None else zero)


def check_against_pyg(variant, edge_index, size, H, C, De, seed=0):
    gen = torch.Generator().manual_seed(seed)
    in_channels = (IN_CHANNELS, IN_CHANNELS) if isinstance(size, tuple) else IN_CHANNELS
    conv = make_layer(variant, in_channels, C, H, De)
    x, edge_attr = make_inputs(size, edge_index.size(1), De, gen)
    graph = iognn.Graph(edge_index, size)
    out, alpha, ei = theirs(conv, x, edge_index.long(), edge_attr)
    torch.testing.assert_close(graph.edge_index, ei)  # alpha is in PyG's edge order
    got = ours(variant, conv, x, graph, edge_attr)
    assert_same_results(got, (out, alpha), leaves(conv, x, edge_attr), gen)


# ---- parity with PyG ------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
def test_matches_pyg_on_every_graph_case(graph_case, variant):
    name, edge_index, size = graph_case
    check_against_pyg(variant, edge_index, size, H=3, C=8, De=4)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("H", [1, 3])
@pytest.mark.parametrize("C", [1, 8, 24])
@pytest.mark.parametrize("De", [None, 2])
def test_heads_channels_and_edge_features(variant, H, C, De):
    gen = torch.Generator().manual_seed(11)
    edge_index = torch.randint(0, 20, (2, 90), generator=gen)
    check_against_pyg(variant, edge_index, 20, H, C, De)


@pytest.mark.parametrize("variant", VARIANTS)
def test_bipartite_both_ways_with_int32_graph(variant):
    gen = torch.Generator().manual_seed(12)
    for size in [(25, 9), (7, 31)]:
        ei = torch.stack([torch.randint(0, size[0], (70,), generator=gen),
                          torch.randint(0, size[1], (70,), generator=gen)]).to(torch.int32)
        check_against_pyg(variant, ei, size, H=2, C=4, De=3)


def test_gat_without_destination_features():
    """GATConv((x_src, None)) has no alpha_dst term: alpha_dst=None."""
    gen = torch.Generator().manual_seed(13)
    ei = torch.stack([torch.randint(0, 25, (70,), generator=gen),
                      torch.randint(0, 9, (70,), generator=gen)])
    conv = make_layer("gat", (IN_CHANNELS, IN_CHANNELS), 4, 2, De=3)
    x_src = torch.randn(25, IN_CHANNELS, generator=gen, dtype=torch.float64, requires_grad=True)
    ea = torch.randn(70, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    out, alpha, _ = theirs(conv, (x_src, None), ei, ea, size=(25, 9))
    got = ours("gat", conv, (x_src, None), iognn.Graph(ei, (25, 9)), ea)
    assert_same_results(got, (out, alpha), [x_src, ea] + list(conv.parameters()), gen)


SQUARE_CASES = [c for c in GRAPH_CASES if not isinstance(c[2], tuple)]


@pytest.mark.parametrize("variant", ["gat", "gatv2"])
@pytest.mark.parametrize("case", SQUARE_CASES, ids=[c[0] for c in SQUARE_CASES])
def test_self_loops_match_pyg_add_self_loops(case, variant):
    """SelfLoops.REPLACE + augment_edge_values(fill_value='mean') == add_self_loops=True."""
    name, edge_index, size = case
    gen = torch.Generator().manual_seed(14)
    conv = make_layer(variant, IN_CHANNELS, 4, 2, De=3, self_loops=True, fill_value="mean")
    x, ea = make_inputs(size, edge_index.size(1), 3, gen)
    out, alpha, ei = theirs(conv, x, edge_index.long(), ea)
    graph = iognn.Graph(edge_index, size, self_loops="replace")
    torch.testing.assert_close(graph.edge_index, ei)
    got = ours(variant, conv, x, graph, graph.augment_edge_values(ea, "mean"))
    assert_same_results(got, (out, alpha), leaves(conv, x, ea), gen)


@pytest.mark.parametrize("variant", ["gat", "gatv2"])
def test_self_loops_with_constant_fill_value(variant):
    gen = torch.Generator().manual_seed(15)
    edge_index = torch.randint(0, 15, (2, 60), generator=gen)
    conv = make_layer(variant, IN_CHANNELS, 4, 2, De=3, self_loops=True, fill_value=0.5)
    x, ea = make_inputs(15, 60, 3, gen)
    out, alpha, _ = theirs(conv, x, edge_index, ea)
    graph = iognn.Graph(edge_index, 15, self_loops="replace")
    got = ours(variant, conv, x, graph, graph.augment_edge_values(ea, 0.5))
    assert_same_results(got, (out, alpha), leaves(conv, x, ea), gen)


def test_lse_is_the_logsumexp_of_the_scores():
    """The saved statistics: lse[i, h] = log sum_p exp(s_p) (-inf for a node without in-edges)."""
    gen = torch.Generator().manual_seed(25)
    ei = torch.randint(0, 8, (2, 30), generator=gen)
    g = iognn.Graph(ei, 12)
    x, a_src, a_dst = (torch.randn(*shape, generator=gen, dtype=torch.float64)
                       for shape in [(12, 2, 3), (12, 2), (12, 2)])
    _, lse, _ = torch.ops.iognn.gat_attention(g.rowptr, g.col, g.eid, g.colptr, g.row, g.csc2csr,
                                              x, a_src, a_dst, None, None, 0.2, 0.0, 0, False)
    scores = torch.nn.functional.leaky_relu(a_src[ei[0]] + a_dst[ei[1]], 0.2)
    for i in range(12):
        torch.testing.assert_close(lse[i], scores[ei[1] == i].logsumexp(0))


# ---- dropout --------------------------------------------------------------------------------
def dropout_mask(seed, num_edges, heads, p):
    """Multipliers [E', H] of core/dropout_rng.h, reimplemented with numpy uint64 arithmetic."""
    u64 = np.uint64
    e = np.arange(num_edges, dtype=u64)[:, None]
    h = np.arange(heads, dtype=u64)[None, :]
    z = u64(seed) + (e * u64(heads) + h + u64(1)) * u64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> u64(30))) * u64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> u64(27))) * u64(0x94D049BB133111EB)
    z = z ^ (z >> u64(31))
    uniform = (z >> u64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)
    scale = np.float32(1.0) / (np.float32(1.0) - np.float32(p))
    return torch.from_numpy(np.where(uniform >= np.float32(p), scale, np.float32(0.0)))


def pyg_with_mask(conv, x, edge_index, edge_attr, mask, monkeypatch):
    """PyG's layer with its attention dropout replaced by the given mask (augmented edge order)."""
    def masked(input, p=0.5, training=True, inplace=False):
        return input * mask.to(input.dtype)
    with monkeypatch.context() as m:
        m.setattr(torch.nn.functional, "dropout", masked)
        return theirs(conv, x, edge_index, edge_attr)[:2]


@pytest.mark.parametrize("variant", VARIANTS)
def test_dropout_mask_is_the_same_in_forward_and_backward(variant, monkeypatch):
    """Forward, alpha and every gradient equal PyG's layer run with the explicit mask."""
    gen = torch.Generator().manual_seed(16)
    edge_index = torch.randint(0, 20, (2, 150), generator=gen)
    conv = make_layer(variant, IN_CHANNELS, 4, 3, De=2)
    x, ea = make_inputs(20, 150, 2, gen)
    p, seed = 0.4, 1234
    mask = dropout_mask(seed, 150, 3, p)
    assert 0.2 < (mask == 0).float().mean() < 0.6
    exp = pyg_with_mask(conv, x, edge_index, ea, mask, monkeypatch)
    got = ours(variant, conv, x, iognn.Graph(edge_index, 20), ea, dropout=p, seed=seed)
    assert_same_results(got, exp, leaves(conv, x, ea), gen)


def test_dropout_mask_is_keyed_by_augmented_edge_id():
    """The same mask for int32 and int64 graphs (different CSR storage, same edge ids); different
    seeds give different masks; dropout=0 is no dropout whatever the seed."""
    gen = torch.Generator().manual_seed(17)
    ei = torch.randint(0, 30, (2, 400), generator=gen)
    x = torch.randn(30, 2, 4, generator=gen, requires_grad=True)
    a_src, a_dst = torch.randn(30, 2, generator=gen), torch.randn(30, 2, generator=gen)
    g32, g64 = iognn.Graph(ei, 30), iognn.Graph(ei, 30, index_dtype=torch.int64)
    assert g32.index_dtype == torch.int32 and g64.index_dtype == torch.int64

    def run(g, **kw):
        out, alpha = gat_attention(g, x, a_src, a_dst, return_alpha=True, **kw)
        grad, = torch.autograd.grad(out.square().sum(), x)
        return out, alpha, grad

    for a, b in zip(run(g32, dropout=0.5, seed=7), run(g64, dropout=0.5, seed=7)):
        assert torch.equal(a, b)
    _, alpha7, _ = run(g32, dropout=0.5, seed=7)
    _, alpha8, _ = run(g32, dropout=0.5, seed=8)
    assert not torch.equal(alpha7 == 0, alpha8 == 0)
    _, alpha_plain, _ = run(g32)
    dropped = alpha7 == 0
    torch.testing.assert_close(alpha7[~dropped], 2 * alpha_plain[~dropped])
    for a, b in zip(run(g32, dropout=0.0, seed=99), run(g32)):
        assert torch.equal(a, b)


def test_seed_none_draws_from_torch_generator():
    gen = torch.Generator().manual_seed(18)
    ei = torch.randint(0, 30, (2, 300), generator=gen)
    g = iognn.Graph(ei, 30)
    q, k, v = (torch.randn(30, 2, 4, generator=gen) for _ in range(3))

    def run():
        return transformer_attention(g, q, k, v, dropout=0.5)

    torch.manual_seed(3)
    a = run()
    torch.manual_seed(3)
    b = run()
    c = run()
    assert torch.equal(a, b) and not torch.equal(a, c)
    state = torch.get_rng_state()
    transformer_attention(g, q, k, v, dropout=0.0)  # eval mode: no draw
    assert torch.equal(state, torch.get_rng_state())


# ---- dtypes ---------------------------------------------------------------------------------
def random_inputs(variant, num_src, num_dst, num_edges, H, C, De, gen):
    """fp64 inputs of a variant's op, in its argument order (edge_attr, w_edge last)."""
    def r(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)
    if variant == "gat":
        nodes = (r(num_src, H, C), r(num_src, H), r(num_dst, H))
        w_edge = r(De, H)
    elif variant == "gatv2":
        nodes = (r(num_src, H, C), r(num_dst, H, C), r(H, C))
        w_edge = r(H * C, De) / math.sqrt(De)
    else:
        nodes = (r(num_dst, H, C), r(num_src, H, C), r(num_src, H, C))
        w_edge = r(H * C, De) / math.sqrt(De)
    return nodes + (r(num_edges, De), w_edge)


OPS = {"gat": gat_attention, "gatv2": gatv2_attention, "transformer": transformer_attention}


def run_op(variant, graph, inputs, **kwargs):
    *nodes, edge_attr, w_edge = inputs
    return OPS[variant](graph, *nodes, edge_attr=edge_attr, w_edge=w_edge, return_alpha=True,
                        **kwargs)


def forward_backward(variant, graph, inputs, grads, **kwargs):
    """(out, alpha, grad of every input) for the loss out . grads[0] + alpha . grads[1]."""
    inputs = [t.detach().requires_grad_() for t in inputs]
    out, alpha = run_op(variant, graph, inputs, **kwargs)
    loss = (out * grads[0]).sum() + (alpha * grads[1]).sum()
    return (out, alpha) + torch.autograd.grad(loss, inputs)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", LOW_DTYPES)
def test_low_precision_matches_fp64_reference(variant, dtype):
    gen = torch.Generator().manual_seed(19)
    ei = torch.randint(0, 200, (2, 3000), generator=gen)
    g = iognn.Graph(ei, 200)
    H, C, De = 3, 24, 4
    inputs = [t.to(dtype) for t in random_inputs(variant, 200, 200, 3000, H, C, De, gen)]
    grads = [torch.randn(200, H, C, generator=gen).to(dtype),
             torch.randn(3000, H, generator=gen).to(dtype)]
    got = forward_backward(variant, g, inputs, grads, dropout=0.2, seed=5)
    exp = forward_backward(variant, g, [t.double() for t in inputs],
                           [t.double() for t in grads], dropout=0.2, seed=5)
    rtol, atol = tolerance(dtype)
    for a, b in zip(got, exp):
        assert a.dtype == dtype
        # Sums over thousands of edges: the absolute tolerance scales with the result's size.
        scale = max(1.0, float(b.detach().abs().max()))
        torch.testing.assert_close(a.detach().double(), b.detach(), rtol=rtol, atol=atol * scale)


# ---- layouts, determinism -------------------------------------------------------------------
def test_strided_inputs_give_identical_results():
    """Row-strided views are read in place; other layouts are copied; the results are identical."""
    gen = torch.Generator().manual_seed(20)
    ei = torch.randint(0, 40, (2, 300), generator=gen)
    g = iognn.Graph(ei, 40)
    H, C = 2, 4
    qkv = torch.randn(40, 3, H, C, generator=gen, dtype=torch.float64)
    q, k = qkv[:, 0], qkv[:, 1]                                 # row stride 3*H*C
    v = torch.randn(C, H, 40, generator=gen, dtype=torch.float64).permute(2, 1, 0)  # transposed
    ea = torch.randn(300, 6, generator=gen, dtype=torch.float64)[:, ::2]  # column stride 2
    w = torch.randn(3, H * C, generator=gen, dtype=torch.float64).t()  # [H*C, 3], transposed
    grads = [torch.randn(40, H, C, generator=gen, dtype=torch.float64),
             torch.randn(300, H, generator=gen, dtype=torch.float64)]
    strided = forward_backward("transformer", g, [q, k, v, ea, w], grads)
    dense = forward_backward("transformer", g, [t.contiguous() for t in (q, k, v, ea, w)], grads)
    for a, b in zip(strided, dense):
        assert torch.equal(a, b)


@pytest.mark.parametrize("variant", VARIANTS)
def test_bitwise_deterministic_across_thread_counts(variant):
    name, ei, size = next(c for c in GRAPH_CASES if c[0] == "supernode")
    gen = torch.Generator().manual_seed(21)
    g = iognn.Graph(ei, size)
    inputs = [t.float() for t in random_inputs(variant, size, size, g.num_edges, 2, 8, 3, gen)]
    grads = [torch.randn(size, 2, 8, generator=gen), torch.randn(g.num_edges, 2, generator=gen)]
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = forward_backward(variant, g, inputs, grads, dropout=0.3, seed=9)
        torch.set_num_threads(3)
        three = forward_backward(variant, g, inputs, grads, dropout=0.3, seed=9)
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(one, three):
        assert torch.equal(a, b)


# ---- operator checks ------------------------------------------------------------------------
def op_args(variant, graph, inputs, return_alpha):
    *nodes, edge_attr, w_edge = inputs
    scalars = (0.2,) if variant != "transformer" else (0.5,)  # negative_slope or scale
    graph_tensors = (graph.rowptr, graph.col, graph.eid, graph.colptr, graph.row, graph.csc2csr)
    return graph_tensors + tuple(nodes) + (edge_attr, w_edge) + scalars + (0.25, 77, return_alpha)


def check_opcheck(variant, index_dtype, with_edge_attr, device, seed):
    """torch.library.opcheck of the forward and backward ops on `device`, on a graph with edges
    and an empty one (inputs drawn on the host from `seed`, then moved)."""
    gen = torch.Generator().manual_seed(seed)
    forward = getattr(torch.ops.iognn, f"{variant}_attention").default
    backward = getattr(torch.ops.iognn, f"{variant}_attention_backward").default
    for ei, n in [(torch.randint(0, 12, (2, 50), generator=gen), 12),
                  (torch.empty(2, 0, dtype=torch.int64), 4)]:
        g = iognn.Graph(ei, n, index_dtype=torch.int64 if index_dtype == torch.int64 else None)
        assert g.index_dtype == index_dtype
        g = g.to(device)
        inputs = [t.float().to(device)
                  for t in random_inputs(variant, n, n, g.num_edges, 2, 3, 2, gen)]
        if not with_edge_attr:
            inputs[-2:] = [None, None]
        # alpha requested with edge features, the empty [0, H] alpha without.
        args = op_args(variant, g, [t if t is None else t.requires_grad_() for t in inputs],
                       return_alpha=with_edge_attr)
        torch.library.opcheck(forward, args)
        _, lse, _ = forward(*args)
        detached = [t if t is None else t.detach() for t in inputs]
        grad_out = torch.randn(n, 2, 3, generator=gen).to(device)
        grad_alpha = torch.randn(g.num_edges, 2, generator=gen).to(device)
        fwd = op_args(variant, g, detached, return_alpha=True)
        # Backward arguments: the forward's tensors, lse, grad_out, grad_alpha, its scalars.
        bwd = fwd[:11] + (lse.detach(), grad_out, grad_alpha) + fwd[11:-1]
        torch.library.opcheck(backward, bwd)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("with_edge_attr", [False, True])
def test_opcheck(variant, index_dtype, with_edge_attr):
    check_opcheck(variant, index_dtype, with_edge_attr, "cpu", seed=22)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_gradcheck_fp64(variant, dropout):
    gen = torch.Generator().manual_seed(23)
    ei = torch.cat([torch.randint(0, 6, (2, 16), generator=gen), torch.tensor([[2, 2], [2, 2]])], 1)
    g = iognn.Graph(ei, (6, 6))
    inputs = [t.requires_grad_() for t in random_inputs(variant, 6, 6, g.num_edges, 2, 3, 2, gen)]

    def fn(*inputs):
        return run_op(variant, g, inputs, dropout=dropout, seed=31)

    assert torch.autograd.gradcheck(fn, inputs)


def test_gradcheck_gat_without_alpha_dst():
    gen = torch.Generator().manual_seed(24)
    ei = torch.stack([torch.randint(0, 7, (18,), generator=gen),
                      torch.randint(0, 4, (18,), generator=gen)])
    g = iognn.Graph(ei, (7, 4))
    x, a_src = (torch.randn(7, 2, 3, generator=gen, dtype=torch.float64, requires_grad=True),
                torch.randn(7, 2, generator=gen, dtype=torch.float64, requires_grad=True))
    assert torch.autograd.gradcheck(
        lambda x, a_src: gat_attention(g, x, a_src, None, return_alpha=True), (x, a_src))


# ---- bad inputs ------------------------------------------------------------------------------
def test_bad_inputs_raise_clear_errors():
    ei = torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]])
    g = iognn.Graph(ei, 3)
    x, a = torch.randn(3, 2, 4), torch.randn(3, 2)
    ea, w = torch.randn(4, 5), torch.randn(5, 2)
    with pytest.raises(ValueError, match="x has 4 rows"):
        gat_attention(g, torch.randn(4, 2, 4), a, a)
    with pytest.raises(ValueError, match="x must be 3-D"):
        gat_attention(g, torch.randn(3, 8), a, a)
    with pytest.raises(ValueError, match=r"alpha_src must have shape .* = \[3, 2\]"):
        gat_attention(g, x, torch.randn(3, 3), a)
    with pytest.raises(TypeError, match="alpha_dst has dtype torch.float64"):
        gat_attention(g, x, a, a.double())
    with pytest.raises(ValueError, match="edge_attr has 3 entries but the graph has 4 edges"):
        gat_attention(g, x, a, a, torch.randn(3, 5), w)
    with pytest.raises(ValueError, match="edge_attr and w_edge must be given together"):
        gat_attention(g, x, a, a, ea)
    with pytest.raises(ValueError, match=r"w_edge must have shape \[edge_dim, heads\]"):
        gat_attention(g, x, a, a, ea, torch.randn(5, 3))
    with pytest.raises(ValueError, match="dropout must be in"):
        gat_attention(g, x, a, a, dropout=1.0)
    with pytest.raises(ValueError, match=r"att must have shape"):
        gatv2_attention(g, x, x, torch.randn(2, 3))
    with pytest.raises(ValueError, match=r"x_dst must have shape"):
        gatv2_attention(g, x, torch.randn(3, 2, 3), torch.randn(2, 4))
    with pytest.raises(ValueError, match=r"w_edge must have shape \[heads \* channels, edge_dim\]"):
        gatv2_attention(g, x, x, torch.randn(2, 4), ea, torch.randn(8, 4))
    with pytest.raises(ValueError, match=r"key must have shape"):
        transformer_attention(g, x, torch.randn(3, 1, 4), x)
    with pytest.raises(ValueError, match="value has 2 rows"):
        transformer_attention(g, x, x, torch.randn(2, 2, 4))
    with pytest.raises(TypeError, match="query must be float"):
        transformer_attention(g, x.long(), x, x)
    # The ops check their arguments too (for callers that bypass the wrappers).
    graph = (g.rowptr, g.col, g.eid, g.colptr, g.row, g.csc2csr)
    with pytest.raises(ValueError, match="iognn::gat_attention: alpha_src has 2 rows"):
        torch.ops.iognn.gat_attention(*graph, x, torch.randn(2, 2), None, None, None, 0.2, 0.0,
                                      0, False)
    with pytest.raises(ValueError, match="edge_attr and w_edge must be given together"):
        torch.ops.iognn.gatv2_attention(*graph, x, x, torch.randn(2, 4), ea, None, 0.2, 0.0, 0,
                                        False)
    with pytest.raises(ValueError, match="dropout must be in"):
        torch.ops.iognn.transformer_attention(*graph, x, x, x, None, None, 0.5, -0.1, 0, False)
    with pytest.raises(TypeError, match="key must have dtype"):
        torch.ops.iognn.transformer_attention(*graph, x, x.double(), x, None, None, 0.5, 0.0, 0,
                                              False)
    with pytest.raises(ValueError, match="eid must have 4 entries"):
        torch.ops.iognn.transformer_attention(g.rowptr, g.col, g.eid[:3], g.colptr, g.row,
                                              g.csc2csr, x, x, x, None, None, 0.5, 0.0, 0, False)
    with pytest.raises(ValueError, match="lse has 1 heads"):
        torch.ops.iognn.gat_attention_backward(*graph, x, a, a, None, None, torch.randn(3, 1),
                                               torch.randn(3, 2, 4), None, 0.2, 0.0, 0)
    # The process stays usable after an error.
    assert gat_attention(g, x, a, a).shape == (3, 2, 4)
