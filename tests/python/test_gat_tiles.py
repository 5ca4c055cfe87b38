"""GAT's attention on the tile layout (ops/attention_tiles.py) on the host twin of its kernels.

A graph's ``tile_policy = "tiles"`` makes a CPU graph run the host kernels over the tile layout:
the same attention as the CSR op, so every graph case must match PyG's GATConv and the CSR op,
forward and the gradients of x, alpha_src and alpha_dst (also without alpha_dst), in fp64 (and the
low-precision dtypes within their tolerance). The CUDA kernels are checked against these results in
test_gat_tiles_cuda.py.
"""
import math

import pytest
import torch
from torch_geometric.nn import GATConv as PygGATConv

import iognn
from iognn.ops import attention_tiles
from iognn.ops.attention import gat_attention

from conftest import sizes, tolerance
from test_attention import IN_CHANNELS, make_inputs, make_layer
from test_attention_tiles import HEADS_CHANNELS, assert_same_grads, tiled
from test_compile_meta import assert_fake_outputs_match

ops = torch.ops.iognn


def gat_inputs(num_src, num_dst, H, C, gen, dtype=torch.float64, dst=True):
    """x [num_src, H, C], alpha_src [num_src, H], alpha_dst [num_dst, H] (or None), as leaves."""
    shapes = [(num_src, H, C), (num_src, H)] + ([(num_dst, H)] if dst else [])
    leaves = [torch.randn(s, generator=gen, dtype=torch.float64).to(dtype).requires_grad_()
              for s in shapes]
    return leaves + ([] if dst else [None])


def present(inputs):
    return [t for t in inputs if t is not None]


@pytest.mark.parametrize("H,C", HEADS_CHANNELS)
def test_tiles_match_pyg_and_the_csr_op_on_every_graph_case(graph_case, H, C):
    name, edge_index, size = graph_case
    num_src, num_dst = sizes(size)
    gen = torch.Generator().manual_seed(3)
    # PyG's GATConv, and the same layer with our attention on the tiles.
    in_channels = (IN_CHANNELS, IN_CHANNELS) if isinstance(size, tuple) else IN_CHANNELS
    conv = make_layer("gat", in_channels, C, H)
    x, _ = make_inputs(size, edge_index.size(1), None, gen)
    expected = conv(x, edge_index.long())
    graph = tiled(iognn.Graph(edge_index, size))
    x_src, x_dst = x if isinstance(x, tuple) else (x, x)
    lin_src = conv.lin if conv.lin is not None else conv.lin_src
    lin_dst = conv.lin if conv.lin is not None else conv.lin_dst
    h = lin_src(x_src).view(-1, H, C)
    a_src = (h * conv.att_src).sum(-1)
    a_dst = (lin_dst(x_dst).view(-1, H, C) * conv.att_dst).sum(-1)
    out = gat_attention(graph, h, a_src, a_dst, negative_slope=conv.negative_slope)
    got = out.reshape(out.size(0), H * C) + conv.bias
    leaves = (list(x) if isinstance(x, tuple) else [x]) + list(conv.parameters())
    assert_same_grads(got, expected, leaves, torch.randn(expected.shape, generator=gen,
                                                         dtype=expected.dtype))
    if num_dst > 0:
        assert attention_tiles.plans(graph, "gat")  # the tile path was taken, and recorded
    # The CSR op on the same heads, with and without alpha_dst.
    csr = iognn.Graph(edge_index, size)
    for dst in (True, False):
        inputs = gat_inputs(num_src, num_dst, H, C, gen, dst=dst)
        exp = gat_attention(csr, *inputs)
        assert_same_grads(gat_attention(graph, *inputs), exp, present(inputs),
                          torch.randn(exp.shape, generator=gen, dtype=exp.dtype))


@pytest.mark.parametrize("negative_slope", [0.2, 0.0, 1.0, 1.7])
@pytest.mark.parametrize("dst", [True, False])
def test_negative_slopes_with_and_without_alpha_dst(negative_slope, dst):
    gen = torch.Generator().manual_seed(12)
    ei = torch.randint(0, 50, (2, 400), generator=gen)
    g = tiled(iognn.Graph(ei, 50))
    inputs = gat_inputs(50, 50, 3, 5, gen, dst=dst)
    exp = gat_attention(iognn.Graph(ei, 50), *inputs, negative_slope=negative_slope)
    got = gat_attention(g, *inputs, negative_slope=negative_slope)
    assert_same_grads(got, exp, present(inputs), torch.randn_like(exp))


def fp64_reference(edge_index, num_nodes, x, a_src, a_dst, slope):
    """The attention by its definition, one edge at a time (duplicates counted per copy)."""
    out = torch.zeros(num_nodes, *x.shape[1:], dtype=torch.float64)
    for i in range(num_nodes):
        src = edge_index[0][edge_index[1] == i]
        if src.numel() == 0:
            continue
        pre = a_src[src] + (a_dst[i] if a_dst is not None else 0)
        p = torch.softmax(torch.nn.functional.leaky_relu(pre, slope), dim=0)
        out[i] = (p.unsqueeze(-1) * x[src]).sum(0)
    return out


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_dtypes_match_the_fp64_csr_op_and_the_definition(dtype, index_dtype):
    gen = torch.Generator().manual_seed(5)
    ei = torch.randint(0, 200, (2, 2500), generator=gen)
    idx = index_dtype if index_dtype == torch.int64 else None
    csr, g = iognn.Graph(ei, 200, index_dtype=idx), tiled(iognn.Graph(ei, 200, index_dtype=idx))
    # The reference takes the inputs rounded to dtype: leaky_relu's kink then falls alike.
    inputs = [t.detach().to(dtype).double().requires_grad_()
              for t in gat_inputs(200, 200, 2, 16, gen)]
    exp = gat_attention(csr, *inputs)
    torch.testing.assert_close(exp, fp64_reference(ei, 200, *inputs, 0.2))
    grad = torch.randn(exp.shape, generator=gen, dtype=exp.dtype)
    g_exp = torch.autograd.grad(exp, inputs, grad)
    low = [t.detach().to(dtype).requires_grad_() for t in inputs]
    got = gat_attention(g, *low)
    assert got.dtype == dtype
    rtol, atol = tolerance(dtype)
    torch.testing.assert_close(got.double(), exp, rtol=rtol, atol=atol)
    for a, b in zip(torch.autograd.grad(got, low, grad.to(dtype)), g_exp):
        torch.testing.assert_close(a.double(), b, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dst", [True, False])
def test_gradcheck(dst):
    gen = torch.Generator().manual_seed(6)
    ei = torch.cat([torch.randint(0, 9, (2, 30), generator=gen), torch.tensor([[1, 1], [2, 2]])], 1)
    g = tiled(iognn.Graph(ei, (9, 11)))
    inputs = gat_inputs(9, 11, 2, 3, gen, dst=dst)
    fn = (lambda *t: gat_attention(g, *t, negative_slope=0.3)) if dst else (
        lambda x, a: gat_attention(g, x, a, None, negative_slope=0.3))
    assert torch.autograd.gradcheck(fn, tuple(present(inputs)))


@pytest.mark.parametrize("reorder", ["rcm", "degree"])
def test_row_orders_change_only_the_windows(reorder):
    gen = torch.Generator().manual_seed(7)
    ei = torch.randint(0, 90, (2, 700), generator=gen)
    g = tiled(iognn.Graph(ei, 90, reorder=reorder))
    assert g.row_order is not None
    inputs = gat_inputs(90, 90, 2, 8, gen)
    exp = gat_attention(iognn.Graph(ei, 90), *inputs)
    assert_same_grads(gat_attention(g, *inputs), exp, inputs, torch.randn_like(exp))


def test_duplicate_edges_count_in_the_softmax():
    # Destination 0 <- source 1 twice and source 2 once; destination 1 <- source 0.
    ei = torch.tensor([[1, 2, 1, 0], [0, 0, 0, 1]])
    g = tiled(iognn.Graph(ei, 3))
    x = torch.tensor([[[3.0]], [[5.0]], [[7.0]]], dtype=torch.float64)
    a_src = torch.tensor([[0.5], [1.0], [-1.0]], dtype=torch.float64)
    a_dst = torch.tensor([[0.0], [0.0], [0.0]], dtype=torch.float64)
    w1, w2 = 2 * math.exp(1.0), math.exp(-0.5)  # leaky_relu(-1) = -0.5 with slope 0.5
    expected = torch.tensor([[[(5 * w1 + 7 * w2) / (w1 + w2)]], [[3.0]], [[0.0]]],
                            dtype=torch.float64)
    torch.testing.assert_close(gat_attention(g, x, a_src, a_dst, negative_slope=0.5), expected)


def test_non_contiguous_inputs():
    gen = torch.Generator().manual_seed(13)
    ei = torch.randint(0, 40, (2, 300), generator=gen)
    g, csr = tiled(iognn.Graph(ei, 40)), iognn.Graph(ei, 40)
    wide = torch.randn(40, 2, 12, generator=gen, dtype=torch.float64, requires_grad=True)
    logits = torch.randn(40, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    x, a_src, a_dst = wide[:, :, 2:9], logits[:, 0:4:2], logits[:, 1:4:2]  # strided views
    assert not (x.is_contiguous() or a_src.is_contiguous() or a_dst.is_contiguous())
    exp = gat_attention(csr, x, a_src, a_dst)
    assert_same_grads(gat_attention(g, x, a_src, a_dst), exp, (wide, logits),
                      torch.randn_like(exp))


def test_results_are_deterministic_for_any_thread_count():
    gen = torch.Generator().manual_seed(8)
    ei = torch.randint(0, 400, (2, 6000), generator=gen)
    g = tiled(iognn.Graph(ei, 400))
    inputs = gat_inputs(400, 400, 2, 16, gen, torch.float32)
    threads = torch.get_num_threads()
    runs = []
    try:
        for count in (threads, threads, 1):
            torch.set_num_threads(count)
            out = gat_attention(g, *inputs)
            runs.append((out, *torch.autograd.grad(out.square().sum(), inputs)))
    finally:
        torch.set_num_threads(threads)
    for run in runs[1:]:
        for a, b in zip(runs[0], run):
            assert torch.equal(a, b)


@pytest.mark.parametrize("tiles_forward,tiles_backward", [(True, False), (False, True)])
def test_either_backward_follows_either_forward(tiles_forward, tiles_backward):
    gen = torch.Generator().manual_seed(9)
    ei = torch.randint(0, 60, (2, 500), generator=gen)
    g = iognn.Graph(ei, 60)
    inputs = gat_inputs(60, 60, 4, 8, gen)
    exp = gat_attention(g, *inputs)
    got = attention_tiles.tile_gat(g, *inputs, 0.2, tiles_forward, tiles_backward)
    assert_same_grads(got, exp, inputs, torch.randn_like(exp))


def test_the_policy_decides_and_plans_are_reported():
    gen = torch.Generator().manual_seed(2)
    ei = torch.randint(0, 100, (2, 800), generator=gen)
    g = iognn.Graph(ei, 100)
    x, a_src, a_dst = gat_inputs(100, 100, 2, 8, gen, torch.float32)
    assert attention_tiles.choose_gat(g, x, a_src, a_dst, 0.2) == (False, False)  # default: CSR
    tiled(g, "auto")  # on a CPU graph auto never times: the kernels are the GPU's
    assert attention_tiles.choose_gat(g, x, a_src, a_dst, 0.2) == (False, False)
    tiled(g, "tiles")
    assert attention_tiles.choose_gat(g, x, a_src, a_dst, 0.2) == (True, True)
    (name, plan), = attention_tiles.plans(g, "gat").items()
    assert name == "float32 H=2 C=8" and plan["forward"]["path"] == "tiles"
    assert attention_tiles.plans(g) == {}  # the Transformer's plans are its own
    assert set(g.stats["tile_plans"]) == {"gat float32 H=2 C=8"}


@pytest.mark.parametrize("kwargs", [{"dropout": 0.3}, {"return_alpha": True}, {"edge_attr": 1}])
def test_edge_features_dropout_and_alpha_keep_the_csr_path(kwargs):
    gen = torch.Generator().manual_seed(4)
    ei = torch.randint(0, 30, (2, 200), generator=gen)
    g = tiled(iognn.Graph(ei, 30))
    inputs = gat_inputs(30, 30, 2, 4, gen)
    if "edge_attr" in kwargs:
        kwargs = {"edge_attr": torch.randn(200, 3, dtype=torch.float64, generator=gen),
                  "w_edge": torch.randn(3, 2, dtype=torch.float64, generator=gen)}
    gat_attention(g, *inputs, **kwargs)
    assert attention_tiles.plans(g, "gat") == {}


def layout_args(g, transposed, dtype=torch.float32):
    return attention_tiles._layout_args(g, transposed, dtype)


def test_op_errors_name_the_argument():
    g = iognn.Graph(torch.tensor([[0, 1, 2], [1, 0, 0]]), 3)
    layout = layout_args(g, False)
    x, a = torch.randn(3, 2, 4), torch.randn(3, 2)
    fwd = ops.gat_tiles_forward
    with pytest.raises(ValueError, match="window_ptr"):
        fwd(*layout, x, a, None, 20, 0.2)  # num_dst disagrees with the layout
    with pytest.raises(ValueError, match="alpha_dst"):
        fwd(*layout, x, a, a[:2], 3, 0.2)
    with pytest.raises(ValueError, match="alpha_src"):
        fwd(*layout, x, a[:, :1], a, 3, 0.2)
    with pytest.raises(TypeError, match="alpha_src"):
        fwd(*layout, x, a.double(), a, 3, 0.2)
    with pytest.raises(TypeError, match="counts"):
        fwd(*layout[:3], layout[3].double(), x, a, a, 3, 0.2)
    out, lse = fwd(*layout, x, a, a, 3, 0.2)
    bwd = ops.gat_tiles_backward
    t_layout = layout_args(g, True)
    with pytest.raises(ValueError, match="window_ptr_t"):
        bwd(*layout, t_layout[0][:-1], *t_layout[1:], x, a, a, out, lse, out, 0.2)
    with pytest.raises(TypeError, match="lse"):
        bwd(*layout, *t_layout, x, a, a, out, lse.double(), out, 0.2)
    with pytest.raises(ValueError, match="grad_out"):
        bwd(*layout, *t_layout, x, a, a, out, lse, out[:, :1], 0.2)


@pytest.mark.parametrize("dst", [True, False])
@pytest.mark.parametrize("name", ["gat_tiles_forward", "gat_tiles_backward"])
def test_fake_shapes_come_from_the_meta_kernels(name, dst):
    gen = torch.Generator().manual_seed(1)
    ei = torch.stack([torch.randint(0, 13, (70,), generator=gen),
                      torch.randint(0, 11, (70,), generator=gen)])
    g = iognn.Graph(ei, (13, 11))
    x, a_src, a_dst = (t.detach() if t is not None else None
                       for t in gat_inputs(13, 11, 2, 4, gen, torch.float32, dst=dst))
    layout = [t for t in layout_args(g, False) if t is not None]  # no row order
    op = getattr(ops, name)
    if name == "gat_tiles_forward":
        args = [*layout, x, a_src] + ([a_dst] if dst else [])
        assert_fake_outputs_match(
            lambda *a: op(*a[:2], None, *a[2:5], a[5] if dst else None, 11, 0.3), args)
    else:
        out, lse = ops.gat_tiles_forward(layout[0], layout[1], None, layout[2], x, a_src, a_dst,
                                         11, 0.3)
        t_layout = [t for t in layout_args(g, True) if t is not None]
        args = [*layout, *t_layout, x, a_src, out, lse, out] + ([a_dst] if dst else [])
        assert_fake_outputs_match(
            lambda *a: op(*a[:2], None, *a[2:5], None, *a[5:8], a[11] if dst else None,
                          *a[8:11], 0.3), args)


@pytest.mark.parametrize("heads,concat", [(1, True), (3, True), (2, False)])
def test_the_layer_with_self_loops_runs_on_the_tiles_and_equals_pyg(monkeypatch, heads, concat):
    from iognn.nn import GATConv
    calls = []
    tile_gat = attention_tiles.tile_gat
    monkeypatch.setattr(attention_tiles, "tile_gat", lambda *a: calls.append(a[-2:]) or tile_gat(*a))
    gen = torch.Generator().manual_seed(11)
    ei = torch.randint(0, 60, (2, 400), generator=gen)
    ei = torch.cat([ei, ei[:, :50], torch.tensor([[3, 4], [3, 4]])], 1)  # duplicates, loops
    torch.manual_seed(0)
    theirs = PygGATConv(6, 8, heads=heads, concat=concat, negative_slope=0.3).double().eval()
    with torch.no_grad():
        theirs.bias.normal_()
    ours = GATConv(6, 8, heads=heads, concat=concat, negative_slope=0.3).double().eval()
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(60, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    g = iognn.Graph(ei, 60, reorder="rcm")
    g.tile_policy = "tiles"
    out, exp = ours(x, g), theirs(x, ei)
    assert calls == [(True, True)]  # GATConv's graph with loops kept the policy: tiles both ways
    grad = torch.randn(exp.shape, generator=gen, dtype=exp.dtype)
    torch.testing.assert_close(out, exp)
    for a, b in zip(torch.autograd.grad(out, [x, *ours.parameters()], grad),
                    torch.autograd.grad(exp, [x, *theirs.parameters()], grad)):
        torch.testing.assert_close(a, b)
