"""GATv2's own tests of the attention on the tile layout (ops/attention_tiles.py) on the host twin
of its kernels.

A graph's ``tile_policy = "tiles"`` makes a CPU graph run the host kernels over the tile layout:
the same attention as the CSR op. The tests every variant takes (every graph case and H x C
against PyG's GATv2Conv and the CSR op, with att [H, C] and [1, H, C]; row orders, duplicate
edges, determinism, either backward after either forward, the policy) are parametrised in
test_attention_tiles.py; here the negative slopes, the dtypes against the attention's definition,
gradcheck, strided inputs, the op's errors and fake shapes, the gradient of att over many
windows, and the layer (self-loops, shared weights, bipartite) on the tiles against the CSR path
and PyG. The CUDA kernels are checked against these results in test_gatv2_tiles_cuda.py.
"""
import pytest
import torch
from torch_geometric.nn import GATv2Conv as PygGATv2Conv

import iognn
from iognn.ops import attention_tiles
from iognn.ops.attention import gatv2_attention

from test_attention_tiles import (assert_low_precision_matches, assert_same_grads, dtype_graphs,
                                  gatv2_inputs, layout_args, tiled)
from test_compile_meta import assert_fake_outputs_match

ops = torch.ops.iognn


@pytest.mark.parametrize("negative_slope", [0.2, 0.0, 1.0, 1.7])
def test_negative_slopes(negative_slope):
    gen = torch.Generator().manual_seed(12)
    ei = torch.randint(0, 50, (2, 400), generator=gen)
    g = tiled(iognn.Graph(ei, 50))
    inputs = gatv2_inputs(50, 50, 3, 5, gen)
    exp = gatv2_attention(iognn.Graph(ei, 50), *inputs, negative_slope=negative_slope)
    got = gatv2_attention(g, *inputs, negative_slope=negative_slope)
    assert_same_grads(got, exp, inputs, torch.randn_like(exp))


def fp64_reference(edge_index, num_nodes, x_src, x_dst, att, slope):
    """The attention by its definition, one edge at a time (duplicates counted per copy)."""
    out = torch.zeros(num_nodes, *x_src.shape[1:], dtype=torch.float64)
    for i in range(num_nodes):
        src = edge_index[0][edge_index[1] == i]
        if src.numel() == 0:
            continue
        z = x_dst[i] + x_src[src]  # [edges, H, C]
        s = (att * torch.nn.functional.leaky_relu(z, slope)).sum(-1)
        p = torch.softmax(s, dim=0)
        out[i] = (p.unsqueeze(-1) * x_src[src]).sum(0)
    return out


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_dtypes_match_the_fp64_csr_op_and_the_definition(dtype, index_dtype):
    gen, ei, csr, g = dtype_graphs(index_dtype)
    # The reference takes the inputs rounded to dtype: leaky_relu's kink then falls alike.
    inputs = [t.detach().to(dtype).double().requires_grad_()
              for t in gatv2_inputs(200, 200, 2, 16, gen)]
    exp = gatv2_attention(csr, *inputs)
    torch.testing.assert_close(exp, fp64_reference(ei, 200, *inputs, 0.2))
    grad = torch.randn(exp.shape, generator=gen, dtype=exp.dtype)
    assert_low_precision_matches(gatv2_attention, g, inputs, exp, grad, dtype, edge_sums=(2,))


def test_gradcheck():
    gen = torch.Generator().manual_seed(6)
    ei = torch.cat([torch.randint(0, 9, (2, 30), generator=gen), torch.tensor([[1, 1], [2, 2]])], 1)
    g = tiled(iognn.Graph(ei, (9, 11)))
    inputs = gatv2_inputs(9, 11, 2, 3, gen)
    assert torch.autograd.gradcheck(lambda *t: gatv2_attention(g, *t, negative_slope=0.3),
                                    tuple(inputs))


def test_non_contiguous_inputs():
    gen = torch.Generator().manual_seed(13)
    ei = torch.randint(0, 40, (2, 300), generator=gen)
    g, csr = tiled(iognn.Graph(ei, 40)), iognn.Graph(ei, 40)
    wide = torch.randn(40, 2, 12, generator=gen, dtype=torch.float64, requires_grad=True)
    params = torch.randn(7, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    x_src, x_dst, att = wide[:, :, 2:9], wide.flip(0)[:, :, 4:11], params.t()[1:3]
    assert not (x_src.is_contiguous() or x_dst.is_contiguous() or att.is_contiguous())
    exp = gatv2_attention(csr, x_src, x_dst, att)
    assert_same_grads(gatv2_attention(g, x_src, x_dst, att), exp, (wide, params),
                      torch.randn_like(exp))


def test_att_gradient_sums_every_window_of_a_large_graph():
    # Hundreds of row windows, a hub row: d att is the sum of every window's share.
    gen = torch.Generator().manual_seed(14)
    ei = torch.cat([torch.randint(0, 3000, (2, 20000), generator=gen),
                    torch.stack([torch.randint(0, 3000, (500,), generator=gen),
                                 torch.zeros(500, dtype=torch.long)])], 1)
    inputs = gatv2_inputs(3000, 3000, 2, 4, gen)
    exp = gatv2_attention(iognn.Graph(ei, 3000), *inputs)
    got = gatv2_attention(tiled(iognn.Graph(ei, 3000)), *inputs)
    assert_same_grads(got, exp, inputs, torch.randn(exp.shape, generator=gen,
                                                    dtype=torch.float64))


@pytest.mark.parametrize("kwargs", [{"dropout": 0.3}, {"return_alpha": True}, {"edge_attr": 1}])
def test_edge_features_dropout_and_alpha_keep_the_csr_path(kwargs):
    gen = torch.Generator().manual_seed(4)
    ei = torch.randint(0, 30, (2, 200), generator=gen)
    g = tiled(iognn.Graph(ei, 30))
    inputs = gatv2_inputs(30, 30, 2, 4, gen)
    if "edge_attr" in kwargs:
        kwargs = {"edge_attr": torch.randn(200, 3, dtype=torch.float64, generator=gen),
                  "w_edge": torch.randn(8, 3, dtype=torch.float64, generator=gen)}
    gatv2_attention(g, *inputs, **kwargs)
    assert attention_tiles.plans(g, "gatv2") == {}


def test_op_errors_name_the_argument():
    g = iognn.Graph(torch.tensor([[0, 1, 2], [1, 0, 0]]), 3)
    layout = layout_args(g, False)
    x, att = torch.randn(3, 2, 4), torch.randn(2, 4)
    fwd = ops.gatv2_tiles_forward
    with pytest.raises(ValueError, match="window_ptr"):
        fwd(*layout, x, torch.randn(20, 2, 4), att, 0.2)  # x_dst's rows disagree with the layout
    with pytest.raises(ValueError, match="x_dst"):
        fwd(*layout, x, x[:, :1], att, 0.2)
    with pytest.raises(ValueError, match="att"):
        fwd(*layout, x, x, att[:1], 0.2)
    with pytest.raises(TypeError, match="att"):
        fwd(*layout, x, x, att.double(), 0.2)
    with pytest.raises(TypeError, match="counts"):
        fwd(*layout[:3], layout[3].double(), x, x, att, 0.2)
    out, lse = fwd(*layout, x, x, att, 0.2)
    bwd = ops.gatv2_tiles_backward
    t_layout = layout_args(g, True)
    with pytest.raises(ValueError, match="window_ptr_t"):
        bwd(*layout, t_layout[0][:-1], *t_layout[1:], x, x, att, out, lse, out, 0.2)
    with pytest.raises(TypeError, match="lse"):
        bwd(*layout, *t_layout, x, x, att, out, lse.double(), out, 0.2)
    with pytest.raises(ValueError, match="grad_out"):
        bwd(*layout, *t_layout, x, x, att, out, lse, out[:, :1], 0.2)


@pytest.mark.parametrize("name", ["gatv2_tiles_forward", "gatv2_tiles_backward"])
def test_fake_shapes_come_from_the_meta_kernels(name):
    gen = torch.Generator().manual_seed(1)
    ei = torch.stack([torch.randint(0, 13, (70,), generator=gen),
                      torch.randint(0, 11, (70,), generator=gen)])
    g = iognn.Graph(ei, (13, 11))
    x_src, x_dst, att = (t.detach() for t in gatv2_inputs(13, 11, 2, 4, gen, torch.float32))
    layout = [t for t in layout_args(g, False) if t is not None]  # no row order
    op = getattr(ops, name)
    if name == "gatv2_tiles_forward":
        assert_fake_outputs_match(lambda *a: op(*a[:2], None, *a[2:], 0.3),
                                  [*layout, x_src, x_dst, att])
    else:
        out, lse = ops.gatv2_tiles_forward(layout[0], layout[1], None, layout[2], x_src, x_dst,
                                           att, 0.3)
        t_layout = [t for t in layout_args(g, True) if t is not None]
        assert_fake_outputs_match(
            lambda *a: op(*a[:2], None, *a[2:5], None, *a[5:], 0.3),
            [*layout, *t_layout, x_src, x_dst, att, out, lse, out])


@pytest.mark.parametrize("heads,concat,share_weights,bipartite",
                         [(1, True, False, False), (3, True, False, False),
                          (2, False, True, False), (2, True, False, True)])
def test_the_layer_runs_on_the_tiles_and_equals_the_csr_path_and_pyg(
        monkeypatch, heads, concat, share_weights, bipartite):
    from iognn.nn import GATv2Conv
    calls = []
    tile_gatv2 = attention_tiles.tile_gatv2
    monkeypatch.setattr(attention_tiles, "tile_gatv2",
                        lambda *a: calls.append(a[-2:]) or tile_gatv2(*a))
    gen = torch.Generator().manual_seed(11)
    num_src, num_dst = (60, 45) if bipartite else (60, 60)
    ei = torch.stack([torch.randint(0, num_src, (400,), generator=gen),
                      torch.randint(0, num_dst, (400,), generator=gen)])
    ei = torch.cat([ei, ei[:, :50], torch.tensor([[3, 4], [3, 4]])], 1)  # duplicates, loops
    torch.manual_seed(0)
    kwargs = dict(heads=heads, concat=concat, negative_slope=0.3, share_weights=share_weights,
                  add_self_loops=not bipartite)
    theirs = PygGATv2Conv(6, 8, **kwargs).double().eval()
    with torch.no_grad():
        theirs.bias.normal_()
    ours = GATv2Conv(6, 8, **kwargs).double().eval()
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(num_src, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    x_dst = torch.randn(num_dst, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    inputs, leaves = ((x, x_dst), [x, x_dst]) if bipartite else (x, [x])
    size = (num_src, num_dst) if bipartite else num_src
    g = iognn.Graph(ei, size, reorder=None if bipartite else "rcm")
    g.tile_policy = "tiles"
    out = ours(inputs, g)
    assert calls == [(True, True)]  # the layer's graph kept the policy: tiles both ways
    exp = ours(inputs, iognn.Graph(ei, size))  # the CSR path
    grad = torch.randn(exp.shape, generator=gen, dtype=exp.dtype)
    torch.testing.assert_close(out, exp)
    torch.testing.assert_close(out, theirs(inputs, ei))
    params = list(ours.parameters())
    for a, b in zip(torch.autograd.grad(out, leaves + params, grad),
                    torch.autograd.grad(exp, leaves + params, grad)):
        torch.testing.assert_close(a, b)
