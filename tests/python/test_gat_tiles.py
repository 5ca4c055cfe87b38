"""The GAT family's (GAT, GATv2) tests of the attention on the tile layout (ops/attention_tiles.py)
on the host twin of its kernels, and GAT's own.

A graph's ``tile_policy = "tiles"`` makes a CPU graph run the host kernels over the tile layout:
the same attention as the CSR op. The tests every variant takes (every graph case against PyG's
layer and the CSR op, in each form of inputs: GAT with and without alpha_dst, GATv2 with att
[H, C] and [1, H, C]; row orders, duplicate edges, gradcheck, determinism, either backward after
either forward, the policy) are parametrised in test_attention_tiles.py; here, for both GAT
variants, the negative slopes, the dtypes against the attention's definition, strided inputs and
the layer (self-loops, bipartite, GATv2's shared weights) on the tiles against the CSR path and
PyG; then GAT's op errors (GATv2's own tests: test_gatv2_tiles.py). The CUDA kernels are
checked against these results in test_gat_tiles_cuda.py and test_gatv2_tiles_cuda.py.
"""
import pytest
import torch
from torch_geometric.nn import GATConv as PygGATConv
from torch_geometric.nn import GATv2Conv as PygGATv2Conv

import iognn
from iognn.ops import attention_tiles

from test_attention_tiles import (TILE_VARIANTS, assert_low_precision_matches, assert_same_grads,
                                  dtype_graphs, layout_args, present, tiled)

ops = torch.ops.iognn

gat_variants = pytest.mark.parametrize("variant", ["gat", "gatv2"])


@gat_variants
@pytest.mark.parametrize("negative_slope", [0.2, 0.0, 1.0, 1.7])
def test_negative_slopes_in_each_form_of_inputs(negative_slope, variant):
    v = TILE_VARIANTS[variant]
    gen = torch.Generator().manual_seed(12)
    ei = torch.randint(0, 50, (2, 400), generator=gen)
    g = tiled(iognn.Graph(ei, 50))
    for make_inputs_of in v.input_sets:
        inputs = make_inputs_of(50, 50, 3, 5, gen)
        exp = v.attention(iognn.Graph(ei, 50), *inputs, negative_slope=negative_slope)
        got = v.attention(g, *inputs, negative_slope=negative_slope)
        assert_same_grads(got, exp, present(inputs), torch.randn_like(exp))


def softmax_reference(edge_index, num_nodes, values, score):
    """The attention by its definition, one destination i at a time: score(i, src) [edges, H] of
    its in-edges' sources src (duplicates counted per copy), then the softmax of values[src]."""
    out = torch.zeros(num_nodes, *values.shape[1:], dtype=torch.float64)
    for i in range(num_nodes):
        src = edge_index[0][edge_index[1] == i]
        if src.numel() > 0:
            p = torch.softmax(score(i, src), dim=0)
            out[i] = (p.unsqueeze(-1) * values[src]).sum(0)
    return out


def leaky_relu(x, slope):
    return torch.nn.functional.leaky_relu(x, slope)


# Each variant's (values, score(i, src)) of its inputs and negative slope.
DEFINITIONS = {
    "gat": lambda x, a_src, a_dst, slope: (
        x, lambda i, src: leaky_relu(a_src[src] + (a_dst[i] if a_dst is not None else 0), slope)),
    "gatv2": lambda x_src, x_dst, att, slope: (
        x_src, lambda i, src: (att * leaky_relu(x_dst[i] + x_src[src], slope)).sum(-1)),
}


@gat_variants
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_dtypes_match_the_fp64_csr_op_and_the_definition(dtype, index_dtype, variant):
    v = TILE_VARIANTS[variant]
    gen, ei, csr, g = dtype_graphs(index_dtype)
    # The reference takes the inputs rounded to dtype: leaky_relu's kink then falls alike.
    inputs = [t.detach().to(dtype).double().requires_grad_()
              for t in v.input_sets[0](200, 200, 2, 16, gen)]
    exp = v.attention(csr, *inputs)
    torch.testing.assert_close(exp, softmax_reference(ei, 200, *DEFINITIONS[variant](*inputs,
                                                                                    0.2)))
    grad = torch.randn(exp.shape, generator=gen, dtype=exp.dtype)
    assert_low_precision_matches(v.attention, g, inputs, exp, grad, dtype)


# Each variant's inputs as strided views of wide [40, 2, 12] and params [40, 6].
STRIDED = {
    "gat": lambda wide, params: (wide[:, :, 2:9], params[:, 0:4:2], params[:, 1:4:2]),
    "gatv2": lambda wide, params: (wide[:, :, 2:9], wide.flip(0)[:, :, 4:11],
                                   params[:7, 1:5:2].t()),
}


@gat_variants
def test_non_contiguous_inputs(variant):
    gen = torch.Generator().manual_seed(13)
    ei = torch.randint(0, 40, (2, 300), generator=gen)
    g, csr = tiled(iognn.Graph(ei, 40)), iognn.Graph(ei, 40)
    wide = torch.randn(40, 2, 12, generator=gen, dtype=torch.float64, requires_grad=True)
    params = torch.randn(40, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    inputs = STRIDED[variant](wide, params)
    assert not any(t.is_contiguous() for t in inputs)
    attention = TILE_VARIANTS[variant].attention
    exp = attention(csr, *inputs)
    assert_same_grads(attention(g, *inputs), exp, (wide, params), torch.randn_like(exp))


# Each variant's layer: PyG's, iognn's name, the tile function its attention calls.
LAYERS = {"gat": (PygGATConv, "GATConv", "tile_gat"),
          "gatv2": (PygGATv2Conv, "GATv2Conv", "tile_gatv2")}


@pytest.mark.parametrize("variant,heads,concat,kwargs", [
    ("gat", 1, True, {}), ("gat", 3, True, {}), ("gat", 2, False, {}),
    ("gat", 2, True, {"bipartite": True}), ("gatv2", 1, True, {}), ("gatv2", 3, True, {}),
    ("gatv2", 2, False, {"share_weights": True}), ("gatv2", 2, True, {"bipartite": True})])
def test_the_layer_runs_on_the_tiles_and_equals_the_csr_path_and_pyg(
        monkeypatch, variant, heads, concat, kwargs):
    from iognn import nn
    theirs_cls, name, tile_fn = LAYERS[variant]
    calls = []
    tile = getattr(attention_tiles, tile_fn)
    monkeypatch.setattr(attention_tiles, tile_fn, lambda *a: calls.append(a[-2:]) or tile(*a))
    gen = torch.Generator().manual_seed(11)
    bipartite = kwargs.pop("bipartite", False)
    num_src, num_dst = (60, 45) if bipartite else (60, 60)
    ei = torch.stack([torch.randint(0, num_src, (400,), generator=gen),
                      torch.randint(0, num_dst, (400,), generator=gen)])
    ei = torch.cat([ei, ei[:, :50], torch.tensor([[3, 4], [3, 4]])], 1)  # duplicates, loops
    torch.manual_seed(0)
    kwargs = dict(heads=heads, concat=concat, negative_slope=0.3, add_self_loops=not bipartite,
                  **kwargs)
    theirs = theirs_cls(6, 8, **kwargs).double().eval()
    with torch.no_grad():
        theirs.bias.normal_()
    ours = getattr(nn, name)(6, 8, **kwargs).double().eval()
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(num_src, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    x_dst = torch.randn(num_dst, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    inputs, leaves = ((x, x_dst), [x, x_dst]) if bipartite else (x, [x])
    size = (num_src, num_dst) if bipartite else num_src
    g = iognn.Graph(ei, size, reorder=None if bipartite else "rcm")
    g.tile_policy = "tiles"
    out, exp = ours(inputs, g), theirs(inputs, ei)
    assert calls == [(True, True)]  # the layer's graph kept the policy: tiles both ways
    torch.testing.assert_close(out, ours(inputs, iognn.Graph(ei, size)))  # the CSR path
    grad = torch.randn(exp.shape, generator=gen, dtype=exp.dtype)
    torch.testing.assert_close(out, exp)
    for a, b in zip(torch.autograd.grad(out, leaves + list(ours.parameters()), grad),
                    torch.autograd.grad(exp, leaves + list(theirs.parameters()), grad)):
        torch.testing.assert_close(a, b)


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
