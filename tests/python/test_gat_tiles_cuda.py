"""The Tensor Core kernels of the GAT family's tile path (GAT, GATv2) against fp64 references
(CUDA).

The reference is the fp64 CSR op on the CPU (test_attention_tiles.py and test_gat_tiles.py check
that the tile path's host twin equals it), on the inputs rounded to the tested dtype (leaky_relu's
kink then falls alike). GAT's scores come from the logits, GATv2's are computed on the CUDA cores
in fp32 from the staged x_dst and x_src rows; the kernels round the staged values (x or x_src,
grad_out; bf16: 8 bits, fp16 / TF32: 11 bits) and the softmax weights to the operand precision
and accumulate in fp32; GATv2's d att is each window's share summed in a fixed order. Errors are
measured against each tensor's largest reference entry, with the Transformer's tolerance per
precision (test_attention_tiles_cuda.py). Outputs are poisoned (NaN bytes): a row the kernels
miss fails. The tests every variant takes (two runs bitwise equal, the layer trains on the tiles)
are parametrised in test_attention_tiles_cuda.py; GATv2's own are in test_gatv2_tiles_cuda.py.
"""
import pytest
import torch

import iognn
from iognn.ops import attention_tiles
from iognn.ops.attention import gat_attention, gatv2_attention

from conftest import GRAPH_CASES, sizes
from test_attention_tiles import TILE_VARIANTS
from test_attention_tiles_cuda import (HEADS_CHANNELS, LOW, assert_close_to, gat_heads,
                                       gatv2_heads, run_gat, tile_graph)

pytestmark = [pytest.mark.cuda, pytest.mark.usefixtures("allow_tf32")]

# Each variant's attention, its heads (num_src, num_dst, H, C, seed, dtype, dst) -> fp64 inputs on
# the CPU (GATv2 has no absent input) and the names of its outputs.
VARIANTS = {
    "gat": (gat_attention, gat_heads, ("out", "grad_x", "grad_alpha_src", "grad_alpha_dst")),
    "gatv2": (gatv2_attention, lambda *a, dst=True: gatv2_heads(*a),
              ("out", "grad_x_src", "grad_x_dst", "grad_att")),
}
gat_variants = pytest.mark.parametrize("variant", list(VARIANTS))


def check(variant, edge_index, size, H, C, dtype, seed=0, dst=True, slope=0.2, **graph_kwargs):
    attention, heads, names = VARIANTS[variant]
    num_src, num_dst = sizes(size)
    xs = heads(num_src, num_dst, H, C, seed, dtype, dst=dst)
    grad = torch.randn(num_dst, H, C, generator=torch.Generator().manual_seed(seed + 1),
                       dtype=torch.float64)
    g = tile_graph(edge_index, size, **graph_kwargs)
    got = run_gat(g, xs, grad, slope, "cuda", dtype, attention)
    exp = run_gat(iognn.Graph(edge_index, size), xs, grad, slope, attention=attention)
    assert_close_to(got, exp, dtype, names)
    if num_dst > 0:
        assert attention_tiles.plans(g, variant)
    return g, got


@gat_variants
@pytest.mark.parametrize("case", GRAPH_CASES, ids=[c[0] for c in GRAPH_CASES])
@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("H,C", HEADS_CHANNELS)
def test_kernels_match_the_fp64_reference_on_every_graph_case(case, dtype, H, C, variant):
    _, edge_index, size = case
    check(variant, edge_index, size, H, C, dtype, seed=H * C)


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("C", [3, 20, 72])
@pytest.mark.parametrize("variant,dst,slope", [
    ("gat", True, 0.2), ("gat", False, 0.2), ("gat", True, 0.0), ("gat", False, 1.5),
    ("gatv2", True, 0.2), ("gatv2", True, 0.0), ("gatv2", True, 1.5)])
def test_channels_alpha_dst_and_slopes(dtype, C, variant, dst, slope):
    ei = torch.randint(0, 300, (2, 5000), generator=torch.Generator().manual_seed(C))
    check(variant, ei, 300, 2, C, dtype, seed=C, dst=dst, slope=slope)


@gat_variants
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_row_orders_duplicates_and_self_loops(dtype, index_dtype, variant):
    gen = torch.Generator().manual_seed(3)
    ei = torch.randint(0, 500, (2, 6000), generator=gen)
    loops = torch.arange(500).repeat(2, 1)
    ei = torch.cat([ei, ei[:, :1500], loops], 1)  # duplicate edges count twice
    g, _ = check(variant, ei, 500, 4, 16, dtype, seed=3, reorder="rcm", index_dtype=index_dtype)
    assert g.row_order is not None


@gat_variants
def test_fp32_without_tf32_wide_heads_and_fp64_keep_the_csr_path(variant):
    _, heads, _ = VARIANTS[variant]
    choose = TILE_VARIANTS[variant].choose
    ei = torch.randint(0, 50, (2, 400), generator=torch.Generator().manual_seed(6))
    g = tile_graph(ei, 50)
    xs = [t.to("cuda", torch.float32) for t in heads(50, 50, 2, 8, 6, torch.float32)]
    torch.backends.cuda.matmul.allow_tf32 = False
    assert choose(g, xs) == (False, False)
    torch.backends.cuda.matmul.allow_tf32 = True
    wide = [t.to("cuda", torch.half)
            for t in heads(50, 50, 1, attention_tiles.MAX_CHANNELS + 8, 6, torch.half)]
    assert choose(g, wide) == (False, False)
    assert choose(g, [t.double() for t in xs]) == (False, False)
    with pytest.raises(NotImplementedError, match="wider"):
        attention_tiles.VARIANTS[variant].tiles_forward(g, wide, 0.2)
