"""The Tensor Core kernels of GAT's tile path against fp64 references (CUDA).

The reference is the fp64 CSR op on the CPU (test_attention_tiles.py checks that the tile path's
host twin equals it), on the inputs rounded to the tested dtype (leaky_relu's kink then falls alike).
The kernels round the staged values (x, grad_out; bf16: 8 bits, fp16 / TF32: 11 bits) and the
softmax weights to the operand precision and accumulate in fp32; errors are measured against each
tensor's largest reference entry, with the Transformer's tolerance per precision
(test_attention_tiles_cuda.py). Outputs are poisoned (NaN bytes): a row the kernels miss fails.
The tests both variants take (two runs bitwise equal, the layer trains on the tiles) are
parametrised in test_attention_tiles_cuda.py.
"""
import pytest
import torch

import iognn
from iognn.ops import attention_tiles

from conftest import GRAPH_CASES, sizes
from test_attention_tiles_cuda import (HEADS_CHANNELS, LOW, assert_close_to, gat_heads, run_gat,
                                       tile_graph)

pytestmark = [pytest.mark.cuda, pytest.mark.usefixtures("allow_tf32")]

NAMES = ("out", "grad_x", "grad_alpha_src", "grad_alpha_dst")


def check(edge_index, size, H, C, dtype, seed=0, dst=True, slope=0.2, **graph_kwargs):
    num_src, num_dst = sizes(size)
    xs = gat_heads(num_src, num_dst, H, C, seed, dtype, dst)
    grad = torch.randn(num_dst, H, C, generator=torch.Generator().manual_seed(seed + 1),
                       dtype=torch.float64)
    g = tile_graph(edge_index, size, **graph_kwargs)
    got = run_gat(g, xs, grad, slope, "cuda", dtype)
    assert_close_to(got, run_gat(iognn.Graph(edge_index, size), xs, grad, slope), dtype, NAMES)
    if num_dst > 0:
        assert attention_tiles.plans(g, "gat")
    return g, got


@pytest.mark.parametrize("case", GRAPH_CASES, ids=[c[0] for c in GRAPH_CASES])
@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("H,C", HEADS_CHANNELS)
def test_kernels_match_the_fp64_reference_on_every_graph_case(case, dtype, H, C):
    _, edge_index, size = case
    check(edge_index, size, H, C, dtype, seed=H * C)


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("C", [3, 20, 72])
@pytest.mark.parametrize("dst,slope", [(True, 0.2), (False, 0.2), (True, 0.0), (False, 1.5)])
def test_channels_alpha_dst_and_slopes(dtype, C, dst, slope):
    ei = torch.randint(0, 300, (2, 5000), generator=torch.Generator().manual_seed(C))
    check(ei, 300, 2, C, dtype, seed=C, dst=dst, slope=slope)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_row_orders_duplicates_and_self_loops(dtype, index_dtype):
    gen = torch.Generator().manual_seed(3)
    ei = torch.randint(0, 500, (2, 6000), generator=gen)
    loops = torch.arange(500).repeat(2, 1)
    ei = torch.cat([ei, ei[:, :1500], loops], 1)  # duplicate edges count twice
    g, _ = check(ei, 500, 4, 16, dtype, seed=3, reorder="rcm", index_dtype=index_dtype)
    assert g.row_order is not None


def test_fp32_without_tf32_wide_heads_and_fp64_keep_the_csr_path():
    ei = torch.randint(0, 50, (2, 400), generator=torch.Generator().manual_seed(6))
    g = tile_graph(ei, 50)
    x, a = torch.randn(50, 2, 8, device="cuda"), torch.randn(50, 2, device="cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    assert attention_tiles.choose_gat(g, x, a, a, 0.2) == (False, False)
    torch.backends.cuda.matmul.allow_tf32 = True
    wide = torch.randn(50, 1, attention_tiles.MAX_CHANNELS + 8, device="cuda", dtype=torch.half)
    wa = torch.randn(50, 1, device="cuda", dtype=torch.half)
    assert attention_tiles.choose_gat(g, wide, wa, wa, 0.2) == (False, False)
    assert attention_tiles.choose_gat(g, x.double(), a.double(), None, 0.2) == (False, False)
    args = attention_tiles._layout_args(g, False, torch.half)
    with pytest.raises(NotImplementedError, match="wider"):
        torch.ops.iognn.gat_tiles_forward(*args, wide, wa, wa, 50, 0.2)
