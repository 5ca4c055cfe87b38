"""The Tensor Core kernels of GAT's tile path against fp64 references (CUDA).

The reference is the fp64 CSR op on the CPU (test_gat_tiles.py checks that the tile path's host
twin equals it), on the inputs rounded to the tested dtype (leaky_relu's kink then falls alike).
The kernels round the staged values (x, grad_out; bf16: 8 bits, fp16 / TF32: 11 bits) and the
softmax weights to the operand precision and accumulate in fp32; errors are measured against each
tensor's largest reference entry, with the Transformer's tolerance per precision
(test_attention_tiles_cuda.py). Outputs are poisoned (NaN bytes): a row the kernels miss fails.
"""
import pytest
import torch

import iognn
from iognn.ops import attention_tiles
from iognn.ops.attention import gat_attention

from conftest import GRAPH_CASES, sizes
from test_attention_tiles_cuda import HEADS_CHANNELS, LOW, assert_close_to, tile_graph
from test_propagate_cuda import poison_next

pytestmark = [pytest.mark.cuda, pytest.mark.usefixtures("allow_tf32")]

NAMES = ("out", "grad_x", "grad_alpha_src", "grad_alpha_dst")


def inputs(num_src, num_dst, H, C, seed, dtype, dst=True):
    """(x, alpha_src, alpha_dst or None) in fp64 on the CPU, rounded to dtype."""
    gen = torch.Generator().manual_seed(seed)
    shapes = [(num_src, H, C), (num_src, H)] + ([(num_dst, H)] if dst else [])
    ts = [torch.randn(s, generator=gen, dtype=torch.float64).to(dtype).double() for s in shapes]
    return ts + ([] if dst else [None])


def run(g, xs, grad, slope, device=None, dtype=torch.float64):
    """(out, grad_x, grad_alpha_src[, grad_alpha_dst]) of gat_attention on g."""
    leaves = [t.to(device or t.device, dtype).requires_grad_() if t is not None else None
              for t in xs]
    present = [t for t in leaves if t is not None]
    if device is not None:
        poison_next((g.num_dst_nodes, *xs[0].shape[1:]), dtype)
    out = gat_attention(g, *leaves, negative_slope=slope)
    if out.numel() == 0:
        return (out,) + tuple(torch.zeros_like(t) for t in present)
    return (out.detach(),) + torch.autograd.grad(out, present, grad.to(out.device, dtype))


def check(edge_index, size, H, C, dtype, seed=0, dst=True, slope=0.2, **graph_kwargs):
    num_src, num_dst = sizes(size)
    xs = inputs(num_src, num_dst, H, C, seed, dtype, dst)
    grad = torch.randn(num_dst, H, C, generator=torch.Generator().manual_seed(seed + 1),
                       dtype=torch.float64)
    g = tile_graph(edge_index, size, **graph_kwargs)
    got = run(g, xs, grad, slope, "cuda", dtype)
    assert_close_to(got, run(iognn.Graph(edge_index, size), xs, grad, slope), dtype, NAMES)
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


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_two_runs_are_bitwise_equal(dtype):
    gen = torch.Generator().manual_seed(4)
    ei = torch.cat([torch.randint(0, 2000, (2, 40000), generator=gen),
                    torch.stack([torch.randint(0, 2000, (3000,), generator=gen),
                                 torch.zeros(3000, dtype=torch.long)])], 1)  # a hub row
    g = tile_graph(ei, 2000)
    xs = inputs(2000, 2000, 2, 64, 4, dtype)
    grad = torch.randn(2000, 2, 64, generator=gen, dtype=torch.float64)
    first, second = (run(g, xs, grad, 0.2, "cuda", dtype) for _ in range(2))
    for a, b in zip(first, second):
        assert torch.equal(a, b)


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


def test_the_layer_trains_on_the_tiles():
    from iognn.nn import GATConv
    gen = torch.Generator().manual_seed(7)
    ei = torch.randint(0, 400, (2, 5000), generator=gen)
    torch.manual_seed(0)
    conv = GATConv(32, 16, heads=4).cuda().to(torch.bfloat16)
    x = torch.randn(400, 32, device="cuda", dtype=torch.bfloat16)
    g = iognn.Graph(ei.cuda(), 400, reorder="rcm")
    g.tile_policy = "tiles"
    out, exp = conv(x, g), conv(x, iognn.Graph(ei.cuda(), 400))
    assert_close_to((out.detach(),), (exp.detach().double().cpu(),), torch.bfloat16)
    out.float().square().sum().backward()
    assert all(p.grad is not None and p.grad.isfinite().all() for p in conv.parameters())
