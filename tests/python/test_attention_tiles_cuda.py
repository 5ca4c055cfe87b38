"""The Tensor Core kernels of the Transformer attention's tile path against fp64 references (CUDA),
and the tests every variant takes (two runs bitwise equal, the layer trains on the tiles),
parametrised over them (GAT's own: test_gat_tiles_cuda.py; GATv2's: test_gatv2_tiles_cuda.py).

The reference is the fp64 CSR op on the CPU (test_attention_tiles.py checks that the tile path's
host twin equals it). The kernels round the staged operands (bf16: 8 bits, fp16 / TF32: 11 bits),
the softmax weights and the score gradients to the operand precision, and accumulate in fp32;
errors are measured against each tensor's largest reference entry, with a tolerance per
precision. Outputs are poisoned (NaN bytes): a row the kernels miss fails.
"""
import pytest
import torch

import iognn
from iognn.graph import tile_layout
from iognn.ops import attention_tiles
from iognn.ops._tile_choice import MIN_FILL
from iognn.ops.attention import gat_attention, gatv2_attention, transformer_attention

from conftest import GRAPH_CASES, sizes
from test_attention_tiles import hub_edges
from test_propagate_cuda import poison_next

pytestmark = [pytest.mark.cuda, pytest.mark.usefixtures("allow_tf32")]

# Largest error over a tensor, relative to its largest reference entry.
TOLERANCE = {torch.bfloat16: 4e-2, torch.float16: 8e-3, torch.float32: 8e-3}
LOW = [torch.bfloat16, torch.float16, torch.float32]
HEADS_CHANNELS = [(1, 8), (2, 16), (4, 32), (1, 128)]


def tile_graph(edge_index, size, policy="tiles", **kwargs):
    g = iognn.Graph(edge_index.cuda(), size, **kwargs)
    g.tile_policy = policy
    return g


def heads(num_src, num_dst, H, C, seed):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(n, H, C, generator=gen, dtype=torch.float64)
            for n in (num_dst, num_src, num_src)]


def reference(edge_index, size, q, k, v, grad):
    """(out, dq, dk, dv) of the fp64 CSR op on the CPU."""
    g = iognn.Graph(edge_index, size)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = transformer_attention(g, *leaves)
    if out.numel() == 0:
        return (out,) + tuple(torch.zeros_like(t) for t in leaves)
    return (out.detach(),) + torch.autograd.grad(out, leaves, grad)


def on_tiles(g, q, k, v, grad, dtype):
    """(out, dq, dk, dv) of the tile path on CUDA in dtype."""
    leaves = [t.to("cuda", dtype).requires_grad_() for t in (q, k, v)]
    poison_next(q.shape, dtype)
    out = transformer_attention(g, *leaves)
    if out.numel() == 0:
        return (out,) + tuple(torch.zeros_like(t) for t in leaves)
    return (out.detach(),) + torch.autograd.grad(out, leaves, grad.to("cuda", dtype))


def gat_heads(num_src, num_dst, H, C, seed, dtype, dst=True):
    """GAT's (x, alpha_src, alpha_dst or None) in fp64 on the CPU, rounded to dtype."""
    gen = torch.Generator().manual_seed(seed)
    shapes = [(num_src, H, C), (num_src, H)] + ([(num_dst, H)] if dst else [])
    ts = [torch.randn(s, generator=gen, dtype=torch.float64).to(dtype).double() for s in shapes]
    return ts + ([] if dst else [None])


def gatv2_heads(num_src, num_dst, H, C, seed, dtype):
    """GATv2's (x_src, x_dst, att [H, C]) in fp64 on the CPU, rounded to dtype."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=gen, dtype=torch.float64).to(dtype).double()
            for s in ((num_src, H, C), (num_dst, H, C), (H, C))]


def run_gat(g, xs, grad, slope, device=None, dtype=torch.float64, attention=gat_attention):
    """(out, the gradient of each given input) of attention (gat_attention: x, alpha_src[,
    alpha_dst]; gatv2_attention: x_src, x_dst, att) on g, with the inputs in dtype on device (the
    output poisoned there) or where they are."""
    leaves = [t.to(device or t.device, dtype).requires_grad_() if t is not None else None
              for t in xs]
    present = [t for t in leaves if t is not None]
    if device is not None:
        poison_next((g.num_dst_nodes, *xs[0].shape[1:]), dtype)
    out = attention(g, *leaves, negative_slope=slope)
    if out.numel() == 0:
        return (out,) + tuple(torch.zeros_like(t) for t in present)
    return (out.detach(),) + torch.autograd.grad(out, present, grad.to(out.device, dtype))


def assert_close_to(got, exp, dtype, names=("out", "grad_query", "grad_key", "grad_value")):
    for name, a, b in zip(names, got, exp):
        a = a.detach().cpu().double()
        assert not a.isnan().any(), f"{name}: NaN (a row was not written)"
        scale = max(float(b.abs().max()), 1e-3) if b.numel() else 1.0
        err = float((a - b).abs().max()) / scale if b.numel() else 0.0
        assert err <= TOLERANCE[dtype], f"{name}: relative error {err:.3g} ({dtype})"


@pytest.mark.parametrize("case", GRAPH_CASES, ids=[c[0] for c in GRAPH_CASES])
@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("H,C", HEADS_CHANNELS)
def test_kernels_match_the_fp64_reference_on_every_graph_case(case, dtype, H, C):
    name, edge_index, size = case
    num_src, num_dst = sizes(size)
    q, k, v = heads(num_src, num_dst, H, C, seed=H * C)
    grad = torch.randn(num_dst, H, C, generator=torch.Generator().manual_seed(1),
                       dtype=torch.float64)
    g = tile_graph(edge_index, size)
    got = on_tiles(g, q, k, v, grad, dtype)
    assert_close_to(got, reference(edge_index, size, q, k, v, grad), dtype)
    if num_dst > 0:
        assert attention_tiles.plans(g)


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("C", [3, 20, 72])
def test_channels_that_are_not_a_multiple_of_sixteen(dtype, C):
    gen = torch.Generator().manual_seed(C)
    ei = torch.randint(0, 300, (2, 5000), generator=gen)
    q, k, v = heads(300, 300, 2, C, seed=C)
    grad = torch.randn(300, 2, C, generator=gen, dtype=torch.float64)
    got = on_tiles(tile_graph(ei, 300), q, k, v, grad, dtype)
    assert_close_to(got, reference(ei, 300, q, k, v, grad), dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_row_orders_and_duplicates(dtype):
    gen = torch.Generator().manual_seed(3)
    ei = torch.randint(0, 500, (2, 6000), generator=gen)
    ei = torch.cat([ei, ei[:, :1500]], 1)  # duplicate edges count twice
    q, k, v = heads(500, 500, 4, 16, seed=3)
    grad = torch.randn(500, 4, 16, generator=gen, dtype=torch.float64)
    g = tile_graph(ei, 500, reorder="rcm")
    assert g.row_order is not None
    assert_close_to(on_tiles(g, q, k, v, grad, dtype), reference(ei, 500, q, k, v, grad), dtype)


# Each variant's heads, (num_src, num_dst, H, C, seed, dtype) -> fp64 inputs on the CPU, and its
# attention on the tiles, (graph, inputs, grad, dtype) -> (out, the inputs' gradients).
TILE_VARIANTS = {
    "transformer": (lambda num_src, num_dst, H, C, seed, dtype: heads(num_src, num_dst, H, C, seed),
                    lambda g, qkv, grad, dtype: on_tiles(g, *qkv, grad, dtype)),
    "gat": (gat_heads, lambda g, xs, grad, dtype: run_gat(g, xs, grad, 0.2, "cuda", dtype)),
    "gatv2": (gatv2_heads, lambda g, xs, grad, dtype: run_gat(g, xs, grad, 0.2, "cuda", dtype,
                                                              gatv2_attention)),
}


@pytest.mark.parametrize("variant", list(TILE_VARIANTS))
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_two_runs_are_bitwise_equal(dtype, variant):
    make_heads, attention = TILE_VARIANTS[variant]
    gen = torch.Generator().manual_seed(4)
    ei = hub_edges(2000, 40000, 3000, gen)
    g = tile_graph(ei, 2000)
    xs = make_heads(2000, 2000, 2, 64, 4, dtype)
    grad = torch.randn(2000, 2, 64, generator=gen, dtype=torch.float64)
    first, second = (attention(g, xs, grad, dtype) for _ in range(2))
    for a, b in zip(first, second):
        assert torch.equal(a, b)


@pytest.mark.parametrize("dense", [True, False])
def test_auto_times_both_paths_and_keeps_the_faster(dense):
    gen = torch.Generator().manual_seed(5)
    if dense:  # communities of 16 nodes: every tile is full
        blocks = torch.arange(64).repeat_interleave(256)
        src = blocks * 16 + torch.randint(0, 16, (blocks.numel(),), generator=gen)
        dst = blocks * 16 + torch.randint(0, 16, (blocks.numel(),), generator=gen)
        ei = torch.stack([src, dst])
    else:  # random edges, a fill far below propagate's MIN_FILL: attention times all the same
        ei = torch.randint(0, 1024, (2, 4096), generator=gen)
    g = tile_graph(ei, 1024, policy="auto")
    fill = tile_layout(g).fill
    assert fill > 0.5 if dense else fill < MIN_FILL
    q, k, v = heads(1024, 1024, 2, 32, seed=5)
    grad = torch.randn(1024, 2, 32, generator=gen, dtype=torch.float64)
    got = on_tiles(g, q, k, v, grad, torch.bfloat16)
    assert_close_to(got, reference(ei, 1024, q, k, v, grad), torch.bfloat16)
    (name, plan), = attention_tiles.plans(g).items()
    assert name == "bfloat16 H=2 C=32"
    for direction in ("forward", "backward"):
        entry = plan[direction]
        assert entry["reason"] == "timed" and entry["csr_ms"] > 0 and entry["tiles_ms"] > 0
        assert entry["path"] == ("tiles" if entry["tiles_ms"] < entry["csr_ms"] else "csr")


def test_fp32_without_tf32_wide_heads_and_fp64_keep_the_csr_path():
    ei = torch.randint(0, 50, (2, 400), generator=torch.Generator().manual_seed(6))
    g = tile_graph(ei, 50)
    q = torch.randn(50, 2, 8, device="cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    assert attention_tiles.choose(g, q, q, q, 0.5) == (False, False)
    torch.backends.cuda.matmul.allow_tf32 = True
    wide = torch.randn(50, 1, attention_tiles.MAX_CHANNELS + 8, device="cuda", dtype=torch.half)
    assert attention_tiles.choose(g, wide, wide, wide, 0.5) == (False, False)
    assert attention_tiles.choose(g, q.double(), q.double(), q.double(), 0.5) == (False, False)
    args = attention_tiles._layout_args(g, False, torch.half)
    with pytest.raises(NotImplementedError, match="wider"):
        torch.ops.iognn.transformer_tiles_forward(*args, wide, wide, wide, 0.5)


# GATConv and GATv2Conv add self-loops: their attention runs on (and keeps its plans on) a graph
# of their own.
@pytest.mark.parametrize("layer,reorder,plans_on_g", [("TransformerConv", None, True),
                                                      ("GATConv", "rcm", False),
                                                      ("GATv2Conv", "rcm", False)])
def test_the_layer_trains_on_the_tiles(layer, reorder, plans_on_g):
    from iognn import nn
    gen = torch.Generator().manual_seed(7)
    ei = torch.randint(0, 400, (2, 5000), generator=gen)
    torch.manual_seed(0)
    conv = getattr(nn, layer)(32, 16, heads=4).cuda().to(torch.bfloat16)
    x = torch.randn(400, 32, device="cuda", dtype=torch.bfloat16)
    g, csr = tile_graph(ei, 400, reorder=reorder), iognn.Graph(ei.cuda(), 400)
    out, exp = conv(x, g), conv(x, csr)
    if plans_on_g:
        assert attention_tiles.plans(g)
    assert_close_to((out.detach(),), (exp.detach().double().cpu(),), torch.bfloat16)
    out.float().square().sum().backward()
    assert all(p.grad is not None and p.grad.isfinite().all() for p in conv.parameters())
