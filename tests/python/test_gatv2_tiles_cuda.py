"""The Tensor Core kernels of GATv2's tile path against fp64 references (CUDA).

The reference is the fp64 CSR op on the CPU (test_gatv2_tiles.py checks that the tile path's host
twin equals it), on the inputs rounded to the tested dtype (leaky_relu's kink then falls alike).
The scores are computed on the CUDA cores in fp32 from the staged x_dst and x_src rows; the
kernels round the softmax weights and the staged values (x_src, grad_out) to the operand
precision (bf16: 8 bits, fp16 / TF32: 11 bits) for the block products and accumulate in fp32; d
att is each window's share summed in a fixed order. Errors are measured against each tensor's
largest reference entry, with the Transformer's tolerance per precision
(test_attention_tiles_cuda.py). Outputs are poisoned (NaN bytes): a row the kernels miss fails.
The tests every variant takes (two runs bitwise equal, the layer trains on the tiles) are
parametrised in test_attention_tiles_cuda.py.
"""
import pytest
import torch

import iognn
from iognn.ops import attention_tiles
from iognn.ops.attention import gatv2_attention

from conftest import GRAPH_CASES, sizes
from test_attention_tiles_cuda import (HEADS_CHANNELS, LOW, assert_close_to, gatv2_heads,
                                       run_gat, tile_graph)

pytestmark = [pytest.mark.cuda, pytest.mark.usefixtures("allow_tf32")]

NAMES = ("out", "grad_x_src", "grad_x_dst", "grad_att")


def check(edge_index, size, H, C, dtype, seed=0, slope=0.2, **graph_kwargs):
    num_src, num_dst = sizes(size)
    xs = gatv2_heads(num_src, num_dst, H, C, seed, dtype)
    grad = torch.randn(num_dst, H, C, generator=torch.Generator().manual_seed(seed + 1),
                       dtype=torch.float64)
    g = tile_graph(edge_index, size, **graph_kwargs)
    got = run_gat(g, xs, grad, slope, "cuda", dtype, gatv2_attention)
    exp = run_gat(iognn.Graph(edge_index, size), xs, grad, slope, attention=gatv2_attention)
    assert_close_to(got, exp, dtype, NAMES)
    if num_dst > 0:
        assert attention_tiles.plans(g, "gatv2")
    return g, got


@pytest.mark.parametrize("case", GRAPH_CASES, ids=[c[0] for c in GRAPH_CASES])
@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("H,C", HEADS_CHANNELS)
def test_kernels_match_the_fp64_reference_on_every_graph_case(case, dtype, H, C):
    _, edge_index, size = case
    check(edge_index, size, H, C, dtype, seed=H * C)


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("C", [3, 20, 72])
@pytest.mark.parametrize("slope", [0.2, 0.0, 1.5])
def test_channels_and_slopes(dtype, C, slope):
    ei = torch.randint(0, 300, (2, 5000), generator=torch.Generator().manual_seed(C))
    check(ei, 300, 2, C, dtype, seed=C, slope=slope)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_row_orders_duplicates_and_self_loops(dtype, index_dtype):
    gen = torch.Generator().manual_seed(3)
    ei = torch.randint(0, 500, (2, 6000), generator=gen)
    loops = torch.arange(500).repeat(2, 1)
    ei = torch.cat([ei, ei[:, :1500], loops], 1)  # duplicate edges count twice
    g, _ = check(ei, 500, 4, 16, dtype, seed=3, reorder="rcm", index_dtype=index_dtype)
    assert g.row_order is not None


@pytest.mark.parametrize("dtype", LOW)
def test_att_gradient_sums_every_window_of_a_large_graph(dtype):
    # Over a thousand row windows and a hub row: d att sums every window's share.
    gen = torch.Generator().manual_seed(14)
    ei = torch.cat([torch.randint(0, 20000, (2, 200000), generator=gen),
                    torch.stack([torch.randint(0, 20000, (3000,), generator=gen),
                                 torch.zeros(3000, dtype=torch.long)])], 1)
    check(ei, 20000, 2, 32, dtype, seed=14)


def test_fp32_without_tf32_wide_heads_and_fp64_keep_the_csr_path():
    ei = torch.randint(0, 50, (2, 400), generator=torch.Generator().manual_seed(6))
    g = tile_graph(ei, 50)
    x, att = torch.randn(50, 2, 8, device="cuda"), torch.randn(2, 8, device="cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    assert attention_tiles.choose_gatv2(g, x, x, att, 0.2) == (False, False)
    torch.backends.cuda.matmul.allow_tf32 = True
    wide = torch.randn(50, 1, attention_tiles.MAX_CHANNELS + 8, device="cuda", dtype=torch.half)
    watt = torch.randn(1, attention_tiles.MAX_CHANNELS + 8, device="cuda", dtype=torch.half)
    assert attention_tiles.choose_gatv2(g, wide, wide, watt, 0.2) == (False, False)
    assert attention_tiles.choose_gatv2(g, x.double(), x.double(), att.double(),
                                        0.2) == (False, False)
    args = attention_tiles._layout_args(g, False, torch.half)
    with pytest.raises(NotImplementedError, match="wider"):
        torch.ops.iognn.gatv2_tiles_forward(*args, wide, wide, watt, 0.2)
