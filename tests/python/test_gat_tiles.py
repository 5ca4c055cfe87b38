"""GAT's own tests of the attention on the tile layout (ops/attention_tiles.py) on the host twin
of its kernels.

A graph's ``tile_policy = "tiles"`` makes a CPU graph run the host kernels over the tile layout:
the same attention as the CSR op. The tests both variants take (every graph case against PyG's
GATConv and the CSR op, with and without alpha_dst; row orders, duplicate edges, determinism, either
backward after either forward, the policy) are parametrised in test_attention_tiles.py; here the
negative slopes, the dtypes against the attention's definition, strided inputs, the op's errors and
fake shapes, and the layer with its self-loops. The CUDA kernels are checked against these results
in test_gat_tiles_cuda.py.
"""
import pytest
import torch
from torch_geometric.nn import GATConv as PygGATConv

import iognn
from iognn.ops import attention_tiles
from iognn.ops.attention import gat_attention

from test_attention_tiles import (assert_low_precision_matches, assert_same_grads, dtype_graphs,
                                  gat_inputs, layout_args, present, tiled)
from test_compile_meta import assert_fake_outputs_match

ops = torch.ops.iognn


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
    gen, ei, csr, g = dtype_graphs(index_dtype)
    # The reference takes the inputs rounded to dtype: leaky_relu's kink then falls alike.
    inputs = [t.detach().to(dtype).double().requires_grad_()
              for t in gat_inputs(200, 200, 2, 16, gen)]
    exp = gat_attention(csr, *inputs)
    torch.testing.assert_close(exp, fp64_reference(ei, 200, *inputs, 0.2))
    grad = torch.randn(exp.shape, generator=gen, dtype=exp.dtype)
    assert_low_precision_matches(gat_attention, g, inputs, exp, grad, dtype)


@pytest.mark.parametrize("dst", [True, False])
def test_gradcheck(dst):
    gen = torch.Generator().manual_seed(6)
    ei = torch.cat([torch.randint(0, 9, (2, 30), generator=gen), torch.tensor([[1, 1], [2, 2]])], 1)
    g = tiled(iognn.Graph(ei, (9, 11)))
    inputs = gat_inputs(9, 11, 2, 3, gen, dst=dst)
    fn = (lambda *t: gat_attention(g, *t, negative_slope=0.3)) if dst else (
        lambda x, a: gat_attention(g, x, a, None, negative_slope=0.3))
    assert torch.autograd.gradcheck(fn, tuple(present(inputs)))


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
