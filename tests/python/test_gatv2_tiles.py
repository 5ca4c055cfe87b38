"""GATv2's own tests of the attention on the tile layout (ops/attention_tiles.py) on the host
twin of its kernels: the gradient of att over many windows (each window's share, summed in a fixed
order) and the op's errors. The tests every variant takes are parametrised in
test_attention_tiles.py, those of the GAT family (slopes, dtypes against the definition, strided
inputs, the layer) in test_gat_tiles.py. The CUDA kernels are checked against these results in
test_gatv2_tiles_cuda.py.
"""
import pytest
import torch

import iognn
from iognn.ops.attention import gatv2_attention

from test_attention_tiles import assert_same_grads, gatv2_inputs, hub_edges, layout_args, tiled

ops = torch.ops.iognn


def test_att_gradient_sums_every_window_of_a_large_graph():
    # Hundreds of row windows, a hub row: d att is the sum of every window's share.
    gen = torch.Generator().manual_seed(14)
    ei = hub_edges(3000, 20000, 500, gen)
    inputs = gatv2_inputs(3000, 3000, 2, 4, gen)
    exp = gatv2_attention(iognn.Graph(ei, 3000), *inputs)
    got = gatv2_attention(tiled(iognn.Graph(ei, 3000)), *inputs)
    assert_same_grads(got, exp, inputs, torch.randn(exp.shape, generator=gen,
                                                    dtype=torch.float64))


def test_op_errors_name_the_argument():
    g = iognn.Graph(torch.tensor([[0, 1, 2], [1, 0, 0]]), 3)
    layout, t_layout = layout_args(g, False), layout_args(g, True)
    x, att = torch.randn(3, 2, 4), torch.randn(2, 4)
    fwd, bwd = ops.gatv2_tiles_forward, ops.gatv2_tiles_backward
    out, lse = fwd(*layout, x, x, att, 0.2)
    # (error, the argument the message names, the call)
    cases = [
        (ValueError, "window_ptr", lambda: fwd(*layout, x, torch.randn(20, 2, 4), att, 0.2)),
        (ValueError, "x_dst", lambda: fwd(*layout, x, x[:, :1], att, 0.2)),
        (ValueError, "att", lambda: fwd(*layout, x, x, att[:1], 0.2)),
        (TypeError, "att", lambda: fwd(*layout, x, x, att.double(), 0.2)),
        (TypeError, "counts", lambda: fwd(*layout[:3], layout[3].double(), x, x, att, 0.2)),
        (ValueError, "window_ptr_t",
         lambda: bwd(*layout, t_layout[0][:-1], *t_layout[1:], x, x, att, out, lse, out, 0.2)),
        (TypeError, "lse", lambda: bwd(*layout, *t_layout, x, x, att, out, lse.double(), out, 0.2)),
        (ValueError, "grad_out",
         lambda: bwd(*layout, *t_layout, x, x, att, out, lse, out[:, :1], 0.2)),
    ]
    for error, name, call in cases:
        with pytest.raises(error, match=name):
            call()
