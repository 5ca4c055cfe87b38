"""The Tensor Core tile kernels of propagate against fp64 references (CUDA).

Errors are bounded per element by the sum of the absolute terms, |A| |x|, computed in fp64: the
tile path rounds each value (weight, folded with the mean's 1 / deg) to the operand precision
(bf16: 8 bits, fp16 / TF32: 11 bits) and accumulates in fp32, so a cancelling sum keeps an absolute
error of the order of the terms, which a relative check on the result would misjudge.
Outputs are poisoned (NaN bytes): a row the kernel misses fails.
"""
import pytest
import torch

import iognn
from iognn.ops import propagate, propagate_tiles

from conftest import GRAPH_CASES, sizes
from test_propagate_cuda import poison_next

pytestmark = [pytest.mark.cuda, pytest.mark.usefixtures("allow_tf32")]

# Operand rounding of each precision, times a margin for fp32 accumulation over long rows.
OPERAND_EPS = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11, torch.float32: 2.0 ** -10}
LOW = [torch.bfloat16, torch.float16, torch.float32]


def check_bounded(got, x, w, g_cpu, reduce, dtype, bias=None, what="out"):
    """got (CUDA) against the fp64 CPU op, |err| <= 4 eps (|A| |x|) + the output rounding."""
    x64 = x.detach().cpu().double()
    w64 = None if w is None else w.detach().cpu().double()
    ref = torch.ops.iognn.propagate(g_cpu.rowptr, g_cpu.col, g_cpu.colptr, g_cpu.row,
                                    g_cpu.csc2csr, w64, x64, reduce,
                                    None if bias is None else bias.cpu().double())
    mag = torch.ops.iognn.propagate(g_cpu.rowptr, g_cpu.col, g_cpu.colptr, g_cpu.row,
                                    g_cpu.csc2csr, None if w64 is None else w64.abs(), x64.abs(),
                                    reduce, None)
    if bias is not None:
        mag = mag + bias.cpu().double().abs()
    err = (got.detach().cpu().double() - ref).abs()
    bound = 4 * OPERAND_EPS[dtype] * mag + 2 * OPERAND_EPS[dtype] * ref.abs() + 1e-6
    bad = err > bound
    assert not bad.any(), (f"{what}: {int(bad.sum())} elements out of bounds, worst "
                           f"{float((err - bound).max()):.3g}")


def tile_graph(edge_index, size):
    g = iognn.Graph(edge_index.cuda(), size)
    g.tile_policy = "tiles"
    return g


@pytest.mark.parametrize("case", GRAPH_CASES, ids=[c[0] for c in GRAPH_CASES])
@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_forward_and_backward_on_every_graph_case(case, dtype, reduce):
    name, edge_index, size = case
    num_src, num_dst = sizes(size)
    g_cpu = iognn.Graph(edge_index, size)
    g = tile_graph(edge_index, size)
    gen = torch.Generator().manual_seed(0)
    for F, weighted in ((8, False), (37, True), (128, True)):
        x = torch.randn(num_src, F, generator=gen).to(dtype).cuda().requires_grad_()
        w = torch.rand(edge_index.size(1), generator=gen).cuda() if weighted else None
        b = torch.randn(F, generator=gen).to(dtype).cuda() if weighted else None
        poison_next((num_dst, F), dtype)
        out = propagate(g, x, w, reduce, b)
        wc = g.csr_edge_values(w)
        check_bounded(out, x, None if wc is None else wc, g_cpu, reduce, dtype, b)
        if out.numel() == 0:
            continue
        grad = torch.randn(num_dst, F, generator=gen).to(dtype).cuda()
        (gx,) = torch.autograd.grad(out, x, grad)
        # grad_x = A^T grad: the reference is the same check on the reversed graph.
        g_t = iognn.Graph(edge_index.flip(0), (num_dst, num_src))
        w_t = None if w is None else g_t.csr_edge_values(w.cpu())
        if reduce == "mean":
            deg = g_cpu.rowptr.diff().double().clamp(min=1)
            grad_ref = grad.cpu().double() / deg.view(-1, 1)
        else:
            grad_ref = grad.cpu().double()
        check_bounded(gx, grad_ref, w_t, g_t, "sum", dtype, what="grad_x")


@pytest.mark.parametrize("dtype", LOW)
def test_deterministic_and_equal_to_the_host_twin_in_structure(dtype):
    gen = torch.Generator().manual_seed(4)
    ei = torch.randint(0, 3000, (2, 60000), generator=gen)
    g = tile_graph(ei, 3000)
    x = torch.randn(3000, 96, generator=gen).to(dtype).cuda().requires_grad_()
    runs = []
    for _ in range(2):
        out = propagate(g, x, None, "sum")
        (gx,) = torch.autograd.grad(out, x, torch.ones_like(out))
        runs.append((out, gx))
    assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[1][1])


@pytest.mark.parametrize("F", [1, 7, 16, 64, 65, 200])
def test_widths_and_strided_features(F):
    gen = torch.Generator().manual_seed(F)
    ei = torch.randint(0, 500, (2, 8000), generator=gen)
    g_cpu = iognn.Graph(ei, 500)
    g = tile_graph(ei, 500)
    base = torch.randn(500, 2 * F + 3, generator=gen).to(torch.bfloat16).cuda()
    for x in (base[:, :F], base[:, 1:F + 1], base[:, ::2][:, :F]):
        out = propagate(g, x, None, "mean")
        check_bounded(out, x, None, g_cpu, "mean", torch.bfloat16)


def test_auto_times_both_paths_once_and_reports_the_choice():
    gen = torch.Generator().manual_seed(9)
    # A block-diagonal graph: 16-node cliques, fill 1 (the tiles' best case).
    blocks = torch.arange(0, 4096, 16)
    src = (blocks.view(-1, 1, 1) + torch.arange(16).view(1, -1, 1)).expand(-1, 16, 16).reshape(-1)
    dst = (blocks.view(-1, 1, 1) + torch.arange(16).view(1, 1, -1)).expand(-1, 16, 16).reshape(-1)
    g = iognn.Graph(torch.stack([src, dst]).cuda(), 4096)
    g.tile_policy = "auto"
    x = torch.randn(4096, 128, generator=gen).to(torch.bfloat16).cuda()
    propagate(g, x, None, "sum")
    (plan,) = propagate_tiles.plans(g).values()
    for direction in ("forward", "backward"):
        p = plan[direction]
        assert p["reason"] == "timed" and p["csr_ms"] > 0 and p["tiles_ms"] > 0
        assert p["path"] == ("tiles" if p["tiles_ms"] < p["csr_ms"] else "csr")
        assert p["fill"] == 1.0


def test_tf32_needs_the_users_permission():
    torch.backends.cuda.matmul.allow_tf32 = False
    g = tile_graph(torch.tensor([[0, 1], [1, 0]]), 2)
    assert propagate_tiles.choose(g, torch.ones(2, 4, device="cuda"), None, "sum") == (False, False)
    assert propagate_tiles.choose(g, torch.ones(2, 4, device="cuda", dtype=torch.float64), None,
                                  "sum") == (False, False)


def test_capture_without_a_plan_runs_the_csr_path():
    g = iognn.Graph(torch.randint(0, 100, (2, 1000)).cuda(), 100)
    g.tile_policy = "auto"
    x = torch.randn(100, 32, device="cuda", dtype=torch.bfloat16)
    propagate(g, x, None, "sum")  # warm-up outside the capture (builds, no plan for F=16 yet)
    graph = torch.cuda.CUDAGraph()
    y = x[:, :16].contiguous()
    with torch.cuda.graph(graph):
        out = propagate(g, y, None, "sum")
    graph.replay()
    torch.cuda.synchronize()
    assert "bfloat16 F=16 sum" not in propagate_tiles.plans(g)
    torch.testing.assert_close(out.float(), propagate(iognn.Graph(g.edge_index, 100), y, None,
                                                      "sum").float())
