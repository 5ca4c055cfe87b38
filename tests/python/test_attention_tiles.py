"""The tile path of the attention (ops/attention_tiles.py), both variants, on the host twin of its
kernels.

A graph's ``tile_policy = "tiles"`` makes a CPU graph run the host kernels over the tile layout:
the same attention as the CSR op, so every graph case must match PyG's layer (TransformerConv,
GATConv, GATv2Conv) and the CSR op, forward and the gradients of every input, in fp64 (and the
low-precision dtypes within their tolerance). The tests every variant takes are parametrised over
:data:`TILE_VARIANTS`; the Transformer's own follow them, GAT's own are in test_gat_tiles.py,
GATv2's in test_gatv2_tiles.py. The CUDA kernels are checked against these results in
test_attention_tiles_cuda.py, test_gat_tiles_cuda.py and test_gatv2_tiles_cuda.py.
"""
import math
from typing import Callable, NamedTuple, Tuple

import pytest
import torch

import iognn
from iognn.ops import attention_tiles
from iognn.ops.attention import gat_attention, gatv2_attention, transformer_attention

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


def gat_inputs(num_src, num_dst, H, C, gen, dtype=torch.float64, dst=True):
    """x [num_src, H, C], alpha_src [num_src, H], alpha_dst [num_dst, H] (or None), as leaves."""
    shapes = [(num_src, H, C), (num_src, H)] + ([(num_dst, H)] if dst else [])
    leaves = [torch.randn(s, generator=gen, dtype=torch.float64).to(dtype).requires_grad_()
              for s in shapes]
    return leaves + ([] if dst else [None])


def gat_inputs_without_alpha_dst(num_src, num_dst, H, C, gen, dtype=torch.float64):
    return gat_inputs(num_src, num_dst, H, C, gen, dtype, dst=False)


def gatv2_inputs(num_src, num_dst, H, C, gen, dtype=torch.float64, att_shape=None):
    """x_src [num_src, H, C], x_dst [num_dst, H, C], att [H, C] (or att_shape), as leaves."""
    shapes = [(num_src, H, C), (num_dst, H, C), att_shape or (H, C)]
    return [torch.randn(s, generator=gen, dtype=torch.float64).to(dtype).requires_grad_()
            for s in shapes]


def gatv2_inputs_with_pyg_att(num_src, num_dst, H, C, gen, dtype=torch.float64):
    return gatv2_inputs(num_src, num_dst, H, C, gen, dtype, att_shape=(1, H, C))


def present(inputs):
    return [t for t in inputs if t is not None]


def assert_same_grads(got, exp, inputs, grad, **tol):
    torch.testing.assert_close(got, exp, **tol)
    if got.numel() == 0:
        return
    g_got = torch.autograd.grad(got, inputs, grad)
    g_exp = torch.autograd.grad(exp, inputs, grad)
    for a, b in zip(g_got, g_exp):
        torch.testing.assert_close(a, b.to(a.dtype), **tol)


def transformer_layer(conv, x_src, x_dst, graph, H, C):
    """TransformerConv's output with its attention on graph."""
    query = conv.lin_query(x_dst).view(-1, H, C)
    key = conv.lin_key(x_src).view(-1, H, C)
    value = conv.lin_value(x_src).view(-1, H, C)
    out = transformer_attention(graph, query, key, value)
    return out.reshape(out.size(0), H * C) + conv.lin_skip(x_dst)


def gat_layer(conv, x_src, x_dst, graph, H, C):
    """GATConv's output (the graph as it is: no self-loops added) with its attention on graph."""
    lin_src = conv.lin if conv.lin is not None else conv.lin_src
    lin_dst = conv.lin if conv.lin is not None else conv.lin_dst
    h = lin_src(x_src).view(-1, H, C)
    a_src = (h * conv.att_src).sum(-1)
    a_dst = (lin_dst(x_dst).view(-1, H, C) * conv.att_dst).sum(-1)
    out = gat_attention(graph, h, a_src, a_dst, negative_slope=conv.negative_slope)
    return out.reshape(out.size(0), H * C) + conv.bias


def gatv2_layer(conv, x_src, x_dst, graph, H, C):
    """GATv2Conv's output (the graph as it is: no self-loops added) with its attention on graph."""
    x_l = conv.lin_l(x_src).view(-1, H, C)
    x_r = (conv.lin_l if conv.share_weights else conv.lin_r)(x_dst).view(-1, H, C)
    out = gatv2_attention(graph, x_l, x_r, conv.att, negative_slope=conv.negative_slope)
    return out.reshape(out.size(0), H * C) + conv.bias


class Variant(NamedTuple):
    """A tile attention as the shared tests call it (name: its key in attention_tiles.VARIANTS,
    plans() and make_layer)."""
    name: str
    attention: Callable  # the op: (graph, *inputs, **kwargs) -> out
    # (num_src, num_dst, H, C, gen, dtype=fp64) -> the inputs as leaves (None for an absent one):
    # each form of inputs the op takes; the first is the one the other tests use.
    input_sets: Tuple[Callable, ...]
    tile: Callable    # (graph, inputs, tiles_forward, tiles_backward) -> out, default parameter
    choose: Callable  # (graph, inputs) -> (tiles for the forward, tiles for the backward)
    layer: Callable   # (conv, x_src, x_dst, graph, H, C) -> the layer's output, attention on graph


TILE_VARIANTS = {v.name: v for v in (
    Variant("transformer", transformer_attention, (qkv,),
            lambda g, qkv, f, b: attention_tiles.tile_transformer(
                g, *qkv, 1 / math.sqrt(qkv[0].size(2)), f, b),
            lambda g, qkv: attention_tiles.choose(g, *qkv, 0.5), transformer_layer),
    Variant("gat", gat_attention, (gat_inputs, gat_inputs_without_alpha_dst),
            lambda g, xa, f, b: attention_tiles.tile_gat(g, *xa, 0.2, f, b),
            lambda g, xa: attention_tiles.choose_gat(g, *xa, 0.2), gat_layer),
    Variant("gatv2", gatv2_attention, (gatv2_inputs, gatv2_inputs_with_pyg_att),
            lambda g, xs, f, b: attention_tiles.tile_gatv2(g, *xs, 0.2, f, b),
            lambda g, xs: attention_tiles.choose_gatv2(g, *xs, 0.2), gatv2_layer))}

every_variant = pytest.mark.parametrize("variant", list(TILE_VARIANTS))


@every_variant
@pytest.mark.parametrize("H,C", HEADS_CHANNELS)
def test_tiles_match_pyg_and_the_csr_op_on_every_graph_case(graph_case, H, C, variant):
    v = TILE_VARIANTS[variant]
    name, edge_index, size = graph_case
    num_src, num_dst = sizes(size)
    gen = torch.Generator().manual_seed(3)
    # PyG's layer, and the same layer with our attention on the tiles.
    in_channels = (IN_CHANNELS, IN_CHANNELS) if isinstance(size, tuple) else IN_CHANNELS
    conv = make_layer(variant, in_channels, C, H)
    x, _ = make_inputs(size, edge_index.size(1), None, gen)
    expected = conv(x, edge_index.long())
    graph = tiled(iognn.Graph(edge_index, size))
    x_src, x_dst = x if isinstance(x, tuple) else (x, x)
    got = v.layer(conv, x_src, x_dst, graph, H, C)
    leaves = (list(x) if isinstance(x, tuple) else [x]) + list(conv.parameters())
    assert_same_grads(got, expected, leaves, torch.randn(expected.shape, generator=gen,
                                                         dtype=expected.dtype))
    if num_dst > 0:
        assert attention_tiles.plans(graph, variant)  # the tile path was taken, and recorded
    # The CSR op on the same heads, in each form of inputs.
    csr = iognn.Graph(edge_index, size)
    for make_inputs_of in v.input_sets:
        inputs = make_inputs_of(num_src, num_dst, H, C, gen)
        exp = v.attention(csr, *inputs)
        assert_same_grads(v.attention(graph, *inputs), exp, present(inputs),
                          torch.randn(exp.shape, generator=gen, dtype=exp.dtype))


def hub_edges(num_nodes, num_edges, hub_in_edges, gen):
    """num_edges random edges of num_nodes nodes, then hub_in_edges more into node 0 (a hub row)."""
    return torch.cat([torch.randint(0, num_nodes, (2, num_edges), generator=gen),
                      torch.stack([torch.randint(0, num_nodes, (hub_in_edges,), generator=gen),
                                   torch.zeros(hub_in_edges, dtype=torch.long)])], 1)


def dtype_graphs(index_dtype):
    """(generator, edge_index, the CSR graph, the tiled graph) of the dtype tests: 200 nodes."""
    gen = torch.Generator().manual_seed(5)
    ei = torch.randint(0, 200, (2, 2500), generator=gen)
    idx = index_dtype if index_dtype == torch.int64 else None
    csr, g = iognn.Graph(ei, 200, index_dtype=idx), tiled(iognn.Graph(ei, 200, index_dtype=idx))
    return gen, ei, csr, g


def assert_low_precision_matches(attention, g, inputs, exp, grad, dtype):
    """attention on g with inputs (fp64 leaves) rounded to dtype gives exp, attention's fp64
    result, and its gradients for grad, within dtype's tolerance."""
    g_exp = torch.autograd.grad(exp, inputs, grad)
    low = [t.detach().to(dtype).requires_grad_() for t in inputs]
    got = attention(g, *low)
    assert got.dtype == dtype
    rtol, atol = tolerance(dtype)
    torch.testing.assert_close(got.double(), exp, rtol=rtol, atol=atol)
    for a, b in zip(torch.autograd.grad(got, low, grad.to(dtype)), g_exp):
        torch.testing.assert_close(a.double(), b, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_low_precision_matches_the_fp64_csr_op(dtype, index_dtype):
    gen, _, csr, g = dtype_graphs(index_dtype)
    q, k, v = qkv(200, 200, 2, 16, gen)
    exp = transformer_attention(csr, q, k, v)
    grad = torch.randn(exp.shape, generator=gen, dtype=exp.dtype)
    assert_low_precision_matches(transformer_attention, g, (q, k, v), exp, grad, dtype)


# A parameter other than the default for each variant's gradcheck.
GRADCHECK_KWARGS = {"transformer": {"scale": 0.7}, "gat": {"negative_slope": 0.3},
                    "gatv2": {"negative_slope": 0.3}}


def with_leaves(inputs, leaves):
    """inputs with its present entries replaced by leaves, in order."""
    it = iter(leaves)
    return [next(it) if t is not None else None for t in inputs]


@every_variant
def test_gradcheck(variant):
    v = TILE_VARIANTS[variant]
    gen = torch.Generator().manual_seed(6)
    ei = torch.cat([torch.randint(0, 9, (2, 30), generator=gen), torch.tensor([[1, 1], [2, 2]])], 1)
    g = tiled(iognn.Graph(ei, (9, 11)))
    for make_inputs_of in v.input_sets:
        inputs = make_inputs_of(9, 11, 2, 3, gen)
        assert torch.autograd.gradcheck(
            lambda *t: v.attention(g, *with_leaves(inputs, t), **GRADCHECK_KWARGS[variant]),
            tuple(present(inputs)))


@every_variant
@pytest.mark.parametrize("reorder", ["rcm", "degree"])
def test_row_orders_change_only_the_windows(reorder, variant):
    v = TILE_VARIANTS[variant]
    gen = torch.Generator().manual_seed(7)
    ei = torch.randint(0, 90, (2, 700), generator=gen)
    g = tiled(iognn.Graph(ei, 90, reorder=reorder))
    assert g.row_order is not None
    inputs = v.input_sets[0](90, 90, 2, 8, gen)
    exp = v.attention(iognn.Graph(ei, 90), *inputs)
    assert_same_grads(v.attention(g, *inputs), exp, inputs, torch.randn_like(exp))


def duplicate_edge_inputs(variant):
    """The inputs and keyword arguments that score source 1 at 1 and source 2 at the returned
    score for destination 0, with values 3, 5, 7 for sources 0, 1, 2."""
    values = torch.tensor([[[3.0]], [[5.0]], [[7.0]]], dtype=torch.float64)
    if variant == "transformer":
        q = torch.tensor([[[1.0]], [[2.0]], [[0.0]]], dtype=torch.float64)
        k = torch.tensor([[[0.5]], [[1.0]], [[-1.0]]], dtype=torch.float64)
        return (q, k, values), {"scale": 1.0}, -1.0
    if variant == "gatv2":  # att 1: s = leaky_relu(x_dst[0] + x_src[j]), the values x_src
        x_dst = torch.tensor([[[-4.0]], [[0.0]], [[0.0]]], dtype=torch.float64)
        att = torch.ones(1, 1, dtype=torch.float64)
        return (values, x_dst, att), {"negative_slope": 0.5}, 3.0  # leaky_relu(-4 + 7)
    a_src = torch.tensor([[0.5], [1.0], [-1.0]], dtype=torch.float64)
    a_dst = torch.tensor([[0.0], [0.0], [0.0]], dtype=torch.float64)
    return (values, a_src, a_dst), {"negative_slope": 0.5}, -0.5  # leaky_relu(-1), slope 0.5


@every_variant
def test_duplicate_edges_count_in_the_softmax(variant):
    # Destination 0 <- source 1 twice and source 2 once; destination 1 <- source 0.
    ei = torch.tensor([[1, 2, 1, 0], [0, 0, 0, 1]])
    g = tiled(iognn.Graph(ei, 3))
    inputs, kwargs, score_2 = duplicate_edge_inputs(variant)
    w1, w2 = 2 * math.exp(1.0), math.exp(score_2)
    expected = torch.tensor([[[(5 * w1 + 7 * w2) / (w1 + w2)]], [[3.0]], [[0.0]]],
                            dtype=torch.float64)
    torch.testing.assert_close(TILE_VARIANTS[variant].attention(g, *inputs, **kwargs), expected)


@every_variant
def test_results_are_deterministic_for_any_thread_count(variant):
    v = TILE_VARIANTS[variant]
    gen = torch.Generator().manual_seed(8)
    ei = torch.randint(0, 400, (2, 6000), generator=gen)
    g = tiled(iognn.Graph(ei, 400))
    inputs = v.input_sets[0](400, 400, 2, 16, gen, torch.float32)
    threads = torch.get_num_threads()
    runs = []
    try:
        for count in (threads, threads, 1):
            torch.set_num_threads(count)
            out = v.attention(g, *inputs)
            runs.append((out, *torch.autograd.grad(out.square().sum(), inputs)))
    finally:
        torch.set_num_threads(threads)
    for run in runs[1:]:
        for a, b in zip(runs[0], run):
            assert torch.equal(a, b)


@every_variant
@pytest.mark.parametrize("tiles_forward,tiles_backward", [(True, False), (False, True)])
def test_either_backward_follows_either_forward(tiles_forward, tiles_backward, variant):
    v = TILE_VARIANTS[variant]
    gen = torch.Generator().manual_seed(9)
    ei = torch.randint(0, 60, (2, 500), generator=gen)
    g = iognn.Graph(ei, 60)
    inputs = v.input_sets[0](60, 60, 4, 8, gen)
    exp = v.attention(g, *inputs)
    got = v.tile(g, inputs, tiles_forward, tiles_backward)
    assert_same_grads(got, exp, inputs, torch.randn_like(exp))


@every_variant
def test_the_policy_decides_and_plans_are_reported(variant):
    v = TILE_VARIANTS[variant]
    gen = torch.Generator().manual_seed(2)
    ei = torch.randint(0, 100, (2, 800), generator=gen)
    g = iognn.Graph(ei, 100)
    inputs = v.input_sets[0](100, 100, 2, 8, gen, torch.float32)
    assert v.choose(g, inputs) == (False, False)  # default: CSR
    tiled(g, "auto")  # on a CPU graph auto never times: the kernels are the GPU's
    assert v.choose(g, inputs) == (False, False)
    tiled(g, "tiles")
    assert v.choose(g, inputs) == (True, True)
    (name, plan), = attention_tiles.plans(g, variant).items()
    assert name == "float32 H=2 C=8" and plan["forward"]["path"] == "tiles"
    for other in TILE_VARIANTS.keys() - {variant}:
        assert attention_tiles.plans(g, other) == {}  # each variant's plans are its own
    assert set(g.stats["tile_plans"]) == {f"{variant} float32 H=2 C=8"}


# w_edge's shape for edge features of 3 channels on heads of 2 x 4 (kernels/attention_types.h).
W_EDGE_SHAPES = {"transformer": (8, 3), "gat": (3, 2), "gatv2": (8, 3)}


@every_variant
@pytest.mark.parametrize("kwargs", [{"dropout": 0.3}, {"return_alpha": True}, {"edge_attr": 1}])
def test_edge_features_dropout_and_alpha_keep_the_csr_path(kwargs, variant):
    v = TILE_VARIANTS[variant]
    gen = torch.Generator().manual_seed(4)
    ei = torch.randint(0, 30, (2, 200), generator=gen)
    g = tiled(iognn.Graph(ei, 30))
    inputs = v.input_sets[0](30, 30, 2, 4, gen)
    if "edge_attr" in kwargs:
        kwargs = {"edge_attr": torch.randn(200, 3, dtype=torch.float64, generator=gen),
                  "w_edge": torch.randn(W_EDGE_SHAPES[variant], dtype=torch.float64,
                                        generator=gen)}
    v.attention(g, *inputs, **kwargs)
    assert attention_tiles.plans(g, variant) == {}


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


# What each variant's tile forward op takes after its inputs and before its parameter: GAT's
# num_dst (a literal here, not a traced size).
FORWARD_ARGS = {"transformer": (), "gat": (11,), "gatv2": ()}


@every_variant
@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_fake_shapes_come_from_the_meta_kernels(direction, variant):
    gen = torch.Generator().manual_seed(1)
    ei = torch.stack([torch.randint(0, 13, (70,), generator=gen),
                      torch.randint(0, 11, (70,), generator=gen)])
    g = iognn.Graph(ei, (13, 11))
    fwd, bwd = getattr(ops, f"{variant}_tiles_forward"), getattr(ops, f"{variant}_tiles_backward")
    extra = FORWARD_ARGS[variant]
    layout = [t for t in layout_args(g, False) if t is not None]  # no row order
    t_layout = [t for t in layout_args(g, True) if t is not None]
    # The forms of inputs the op takes (GAT's: with alpha_dst or None; GATv2's: att [H, C]).
    forms = TILE_VARIANTS[variant].input_sets[:2 if variant == "gat" else 1]
    for make_inputs_of in forms:
        inputs = [t.detach() if t is not None else None
                  for t in make_inputs_of(13, 11, 2, 4, gen, torch.float32)]
        if direction == "forward":
            assert_fake_outputs_match(
                lambda *a: fwd(*a[:2], None, a[2], *with_leaves(inputs, a[3:]), *extra, 0.5),
                [*layout, *present(inputs)])
            continue
        out, lse = fwd(layout[0], layout[1], None, layout[2], *inputs, *extra, 0.5)
        assert_fake_outputs_match(
            lambda *a: bwd(*a[:2], None, a[2], *a[3:5], None, a[5],
                           *with_leaves(inputs, a[9:]), *a[6:9], 0.5),
            [*layout, *t_layout, out, lse, out, *present(inputs)])


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
