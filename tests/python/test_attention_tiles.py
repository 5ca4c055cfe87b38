"""The tile path of the Transformer attention (ops/attention_tiles.py) on the host twin of its
kernels.

A graph's ``tile_policy = "tiles"`` makes a CPU graph run the host kernels over the tile layout:
the same attention as the CSR op, so every graph case must match PyG's TransformerConv and the
CSR op, forward and the gradients of query, key and value, in fp64 (and the low-precision dtypes
within their tolerance). The CUDA kernels are checked against these results in
test_attention_tiles_cuda.py.
"""
import math

import pytest
import torch

import iognn
from iognn.ops import attention_tiles
from iognn.ops.attention import transformer_attention

from conftest import sizes, tolerance
from test_attention import IN_CHANNELS, make_inputs, make_layer
from test_compile_meta import assert_fake_outputs_match

ops = torch.ops.iognn

HEADS_CHANNELS = [(1, 8), (2, 16), (4, 32), (1, 128)]


def tiled(graph, policy="tiles"):
    graph.tile_policy = policy
    return graph


def qkv(num_src, num_dst, H, C, gen, dtype=torch.float64):
    shapes = ((num_dst, H, C), (num_src, H, C), (num_src, H, C))
    return [torch.randn(s, generator=gen, dtype=torch.float64).to(dtype).requires_grad_()
            for s in shapes]


def assert_same_grads(got, exp, inputs, grad, **tol):
    torch.testing.assert_close(got, exp, **tol)
    if got.numel() == 0:
        return
    g_got = torch.autograd.grad(got, inputs, grad)
    g_exp = torch.autograd.grad(exp, inputs, grad)
    for a, b in zip(g_got, g_exp):
        torch.testing.assert_close(a, b.to(a.dtype), **tol)


@pytest.mark.parametrize("H,C", HEADS_CHANNELS)
def test_tiles_match_pyg_and_the_csr_op_on_every_graph_case(graph_case, H, C):
    name, edge_index, size = graph_case
    num_src, num_dst = sizes(size)
    gen = torch.Generator().manual_seed(3)
    # PyG's TransformerConv, and the same layer with our attention on the tiles.
    in_channels = (IN_CHANNELS, IN_CHANNELS) if isinstance(size, tuple) else IN_CHANNELS
    conv = make_layer("transformer", in_channels, C, H)
    x, _ = make_inputs(size, edge_index.size(1), None, gen)
    expected = conv(x, edge_index.long())
    graph = tiled(iognn.Graph(edge_index, size))
    x_src, x_dst = x if isinstance(x, tuple) else (x, x)
    query = conv.lin_query(x_dst).view(-1, H, C)
    key = conv.lin_key(x_src).view(-1, H, C)
    value = conv.lin_value(x_src).view(-1, H, C)
    out = transformer_attention(graph, query, key, value)
    got = out.reshape(out.size(0), H * C) + conv.lin_skip(x_dst)
    leaves = (list(x) if isinstance(x, tuple) else [x]) + list(conv.parameters())
    assert_same_grads(got, expected, leaves, torch.randn(expected.shape, generator=gen,
                                                         dtype=expected.dtype))
    if num_dst > 0:
        assert attention_tiles.plans(graph)  # the tile path was taken, and recorded
    # The CSR op on the same heads.
    q, k, v = qkv(num_src, num_dst, H, C, gen)
    csr = iognn.Graph(edge_index, size)
    exp = transformer_attention(csr, q, k, v)
    assert_same_grads(transformer_attention(graph, q, k, v), exp, (q, k, v),
                      torch.randn(exp.shape, generator=gen, dtype=exp.dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_low_precision_matches_the_fp64_csr_op(dtype, index_dtype):
    gen = torch.Generator().manual_seed(5)
    ei = torch.randint(0, 200, (2, 2500), generator=gen)
    idx = index_dtype if index_dtype == torch.int64 else None
    csr, g = iognn.Graph(ei, 200, index_dtype=idx), tiled(iognn.Graph(ei, 200, index_dtype=idx))
    q, k, v = qkv(200, 200, 2, 16, gen)
    exp = transformer_attention(csr, q, k, v)
    grad = torch.randn(exp.shape, generator=gen, dtype=exp.dtype)
    g_exp = torch.autograd.grad(exp, (q, k, v), grad)
    low = [t.detach().to(dtype).requires_grad_() for t in (q, k, v)]
    got = transformer_attention(g, *low)
    assert got.dtype == dtype
    rtol, atol = tolerance(dtype)
    torch.testing.assert_close(got.double(), exp, rtol=rtol, atol=atol)
    for a, b in zip(torch.autograd.grad(got, low, grad.to(dtype)), g_exp):
        torch.testing.assert_close(a.double(), b, rtol=rtol, atol=atol)


def test_gradcheck():
    gen = torch.Generator().manual_seed(6)
    ei = torch.cat([torch.randint(0, 9, (2, 30), generator=gen), torch.tensor([[1, 1], [2, 2]])], 1)
    g = tiled(iognn.Graph(ei, (9, 11)))
    q, k, v = qkv(9, 11, 2, 3, gen)
    assert torch.autograd.gradcheck(lambda *t: transformer_attention(g, *t, scale=0.7), (q, k, v))


@pytest.mark.parametrize("reorder", ["rcm", "degree"])
def test_row_orders_change_only_the_windows(reorder):
    gen = torch.Generator().manual_seed(7)
    ei = torch.randint(0, 90, (2, 700), generator=gen)
    g = tiled(iognn.Graph(ei, 90, reorder=reorder))
    assert g.row_order is not None
    q, k, v = qkv(90, 90, 2, 8, gen)
    exp = transformer_attention(iognn.Graph(ei, 90), q, k, v)
    assert_same_grads(transformer_attention(g, q, k, v), exp, (q, k, v), torch.randn_like(exp))


def test_duplicate_edges_count_in_the_softmax():
    # Destination 0 <- source 1 twice and source 2 once; destination 1 <- source 0.
    ei = torch.tensor([[1, 2, 1, 0], [0, 0, 0, 1]])
    g = tiled(iognn.Graph(ei, 3))
    q = torch.tensor([[[1.0]], [[2.0]], [[0.0]]], dtype=torch.float64)
    k = torch.tensor([[[0.5]], [[1.0]], [[-1.0]]], dtype=torch.float64)
    v = torch.tensor([[[3.0]], [[5.0]], [[7.0]]], dtype=torch.float64)
    w1, w2 = 2 * math.exp(1.0), math.exp(-1.0)
    expected = torch.tensor([[[(5 * w1 + 7 * w2) / (w1 + w2)]], [[3.0]], [[0.0]]],
                            dtype=torch.float64)
    torch.testing.assert_close(transformer_attention(g, q, k, v, scale=1.0), expected)


def test_results_are_deterministic_for_any_thread_count():
    gen = torch.Generator().manual_seed(8)
    ei = torch.randint(0, 400, (2, 6000), generator=gen)
    g = tiled(iognn.Graph(ei, 400))
    q, k, v = qkv(400, 400, 2, 16, gen, torch.float32)
    threads = torch.get_num_threads()
    runs = []
    try:
        for count in (threads, threads, 1):
            torch.set_num_threads(count)
            out = transformer_attention(g, q, k, v)
            runs.append((out, *torch.autograd.grad(out.square().sum(), (q, k, v))))
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
    q, k, v = qkv(60, 60, 4, 8, gen)
    exp = transformer_attention(g, q, k, v)
    got = attention_tiles.tile_transformer(g, q, k, v, 1 / math.sqrt(8), tiles_forward,
                                           tiles_backward)
    assert_same_grads(got, exp, (q, k, v), torch.randn_like(exp))


def test_the_policy_decides_and_plans_are_reported():
    gen = torch.Generator().manual_seed(2)
    ei = torch.randint(0, 100, (2, 800), generator=gen)
    g = iognn.Graph(ei, 100)
    q, k, v = qkv(100, 100, 2, 8, gen, torch.float32)
    assert attention_tiles.choose(g, q, k, v, 0.5) == (False, False)  # default: CSR
    tiled(g, "auto")  # on a CPU graph auto never times: the kernels are the GPU's
    assert attention_tiles.choose(g, q, k, v, 0.5) == (False, False)
    tiled(g, "tiles")
    assert attention_tiles.choose(g, q, k, v, 0.5) == (True, True)
    (name, plan), = attention_tiles.plans(g).items()
    assert name == "float32 H=2 C=8" and plan["forward"]["path"] == "tiles"


@pytest.mark.parametrize("kwargs", [{"dropout": 0.3}, {"return_alpha": True}, {"edge_attr": 1}])
def test_edge_features_dropout_and_alpha_keep_the_csr_path(kwargs):
    gen = torch.Generator().manual_seed(4)
    ei = torch.randint(0, 30, (2, 200), generator=gen)
    g = tiled(iognn.Graph(ei, 30))
    q, k, v = qkv(30, 30, 2, 4, gen)
    if "edge_attr" in kwargs:
        kwargs = {"edge_attr": torch.randn(200, 3, dtype=torch.float64, generator=gen),
                  "w_edge": torch.randn(8, 3, dtype=torch.float64, generator=gen)}
    transformer_attention(g, q, k, v, **kwargs)
    assert attention_tiles.plans(g) == {}


def layout_args(g, transposed, dtype=torch.float32):
    return attention_tiles._layout_args(g, transposed, dtype)


def test_op_errors_name_the_argument():
    g = iognn.Graph(torch.tensor([[0, 1, 2], [1, 0, 0]]), 3)
    window_ptr, tile_cols, row_order, counts = layout_args(g, False)
    q, k, v = (torch.randn(3, 2, 4) for _ in range(3))
    fwd = ops.transformer_tiles_forward
    with pytest.raises(ValueError, match="window_ptr"):
        fwd(window_ptr[:-1], tile_cols, None, counts, q, k, v, 0.5)
    with pytest.raises(ValueError, match="counts"):
        fwd(window_ptr, tile_cols, None, counts[:-1], q, k, v, 0.5)
    with pytest.raises(TypeError, match="counts"):
        fwd(window_ptr, tile_cols, None, counts.double(), q, k, v, 0.5)
    with pytest.raises(ValueError, match="row_order"):
        fwd(window_ptr, tile_cols, torch.zeros(2, dtype=tile_cols.dtype), counts, q, k, v, 0.5)
    with pytest.raises(ValueError, match="value"):
        fwd(window_ptr, tile_cols, None, counts, q, k, v[:, :1], 0.5)
    with pytest.raises(TypeError, match="key"):
        fwd(window_ptr, tile_cols, None, counts, q, k.double(), v, 0.5)
    out, lse = fwd(window_ptr, tile_cols, None, counts, q, k, v, 0.5)
    bwd = ops.transformer_tiles_backward
    fwd_layout, t_layout = layout_args(g, False), layout_args(g, True)
    with pytest.raises(ValueError, match="window_ptr_t"):
        bwd(*fwd_layout, t_layout[0][:-1], *t_layout[1:], q, k, v, out, lse, out, 0.5)
    with pytest.raises(TypeError, match="lse"):
        bwd(*fwd_layout, *t_layout, q, k, v, out, lse.double(), out, 0.5)
    with pytest.raises(ValueError, match="grad_out"):
        bwd(*fwd_layout, *t_layout, q, k, v, out, lse, out[:2], 0.5)


@pytest.mark.parametrize("name", ["transformer_tiles_forward", "transformer_tiles_backward"])
def test_fake_shapes_come_from_the_meta_kernels(name):
    gen = torch.Generator().manual_seed(1)
    ei = torch.stack([torch.randint(0, 13, (70,), generator=gen),
                      torch.randint(0, 11, (70,), generator=gen)])
    g = iognn.Graph(ei, (13, 11))
    q, k, v = (t.detach() for t in qkv(13, 11, 2, 4, gen, torch.float32))
    args = [*layout_args(g, False), q, k, v]
    if name == "transformer_tiles_backward":
        out, lse = ops.transformer_tiles_forward(*args, 0.5)
        args = [*layout_args(g, False), *layout_args(g, True), q, k, v, out, lse, out]
    args = [a for a in args if a is not None]  # no row order
    op = getattr(ops, name)
    if name == "transformer_tiles_forward":
        assert_fake_outputs_match(lambda *a: op(*a[:2], None, *a[2:], 0.5), args)
    else:
        assert_fake_outputs_match(lambda *a: op(*a[:2], None, *a[2:5], None, *a[5:], 0.5), args)


def test_the_layer_runs_on_the_tiles_in_eval_mode():
    from iognn.nn import TransformerConv
    gen = torch.Generator().manual_seed(11)
    ei = torch.randint(0, 40, (2, 300), generator=gen)
    torch.manual_seed(0)
    conv = TransformerConv(6, 8, heads=2, dropout=0.2).double().eval()
    x = torch.randn(40, 6, generator=gen, dtype=torch.float64)
    g = tiled(iognn.Graph(ei, 40))
    torch.testing.assert_close(conv(x, g), conv(x, iognn.Graph(ei, 40)))
    assert attention_tiles.plans(g)
