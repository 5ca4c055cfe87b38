"""CUDA propagate ops against the CPU op in fp64.

Every CUDA result is compared with the host op run on the same (dtype-rounded) inputs in fp64.
Outputs are poisoned (the caching allocator hands back a block just filled with NaN bytes), so an
element a kernel forgets to write fails the comparison. The tests marked `sanitizer` are the small
subset scripts/gpu_check.sh runs under compute-sanitizer.
"""
import pytest
import torch

import iognn
from iognn.ops import propagate  # the autograd wrapper (registers fake kernels and autograd)
from conftest import GRAPH_CASES, tolerance

ops = torch.ops.iognn
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
WIDTHS = [1, 3, 8, 32, 33, 128, 256]


def acc_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def poison_next(shape, dtype):
    """Makes the next CUDA allocation of this size come back full of NaN bytes."""
    nbytes = max(1, torch.Size(shape).numel() * torch.empty(0, dtype=dtype).element_size())
    torch.empty(nbytes, dtype=torch.uint8, device="cuda").fill_(255)


def run_ops(g, x, w, grad, reduce, bias=None):
    """(out, grad_x, grad_w) of the three ops; w in CSR order (or None), bias [F] (or None)."""
    on_cuda = x.is_cuda
    if on_cuda:
        poison_next((g.num_dst_nodes, x.size(1)), x.dtype)
    out = ops.propagate(g.rowptr, g.col, g.colptr, g.row, g.csc2csr, w, x, reduce, bias)
    if on_cuda:
        poison_next((g.num_src_nodes, grad.size(1)), grad.dtype)
    gx = ops.propagate_backward_x(g.colptr, g.row, g.csc2csr, g.rowptr, w, grad, reduce)
    if on_cuda:
        poison_next((g.num_edges,), acc_dtype(x.dtype))
    gw = ops.propagate_backward_weight(g.rowptr, g.col, grad, x, reduce)
    return out, gx, gw


def assert_matches(got, ref, dtype, what, rtol=None, atol=None):
    """got (CUDA, in its dtype) against ref (CPU, fp64); atol scales with the reference."""
    rtol_d, atol_d = tolerance(dtype)
    rtol = rtol_d if rtol is None else rtol
    atol = atol_d if atol is None else atol
    got = got.detach().cpu().double()
    scale = max(1.0, ref.abs().max().item()) if ref.numel() else 1.0
    torch.testing.assert_close(got, ref, rtol=rtol, atol=atol * scale, msg=lambda m: f"{what}: {m}")


def make_inputs(g, F, dtype, weighted, gen):
    """CPU inputs: x [num_src, F] and grad [num_dst, F] in dtype, w [E] (CSR order) in acc dtype."""
    x = torch.randn(g.num_src_nodes, F, generator=gen).to(dtype)
    grad = torch.randn(g.num_dst_nodes, F, generator=gen).to(dtype)
    w = torch.rand(g.num_edges, generator=gen).to(acc_dtype(dtype)) if weighted else None
    return x, w, grad


def make_bias(F, dtype, gen):
    """A layer's bias [F] in dtype (weighted calls carry one: both forward epilogues are covered)."""
    return torch.randn(F, generator=gen).to(dtype)


def compare_with_cpu(g, F, dtype, reduce, weighted, seed=0, x=None, rtol=None, atol=None):
    gen = torch.Generator().manual_seed(seed)
    x_cpu, w, grad = make_inputs(g, F, dtype, weighted, gen)
    bias = make_bias(F, dtype, gen) if weighted else None
    if x is None:
        x = x_cpu.cuda()
    else:  # a given CUDA x (strided layouts); the reference reads the same values
        x_cpu = x.cpu()
    gc = g.to("cuda")
    got = run_ops(gc, x, None if w is None else w.cuda(), grad.cuda(), reduce,
                  None if bias is None else bias.cuda())
    ref = run_ops(g, x_cpu.double(), None if w is None else w.double(), grad.double(), reduce,
                  None if bias is None else bias.double())
    for name, a, b in zip(("out", "grad_x", "grad_w"), got, ref):
        assert a.is_cuda and a.dtype == (acc_dtype(dtype) if name == "grad_w" else dtype)
        assert_matches(a, b, dtype, name, rtol, atol)
    return got


def hub_graph(index_dtype=None, seed=0):
    """300 nodes, 3,000 random edges, node 1 receiving 5,000 edges (3 segments), node 2 receiving
    300 (one segment) and node 3 receiving 257 (just heavy): every schedule path."""
    gen = torch.Generator().manual_seed(seed)
    parts = [torch.randint(0, 300, (2, 3000), generator=gen)]
    for node, deg in ((1, 5000), (2, 300), (3, 257)):
        src = torch.randint(0, 300, (deg,), generator=gen)
        parts.append(torch.stack([src, torch.full_like(src, node)]))
    ei = torch.cat(parts, 1)
    perm = torch.randperm(ei.size(1), generator=gen)
    ei = ei[:, perm]
    # Sources fan out too: node 4 sends 3,000 edges (a heavy row of the transposed CSR).
    dst = torch.randint(0, 300, (3000,), generator=gen)
    ei = torch.cat([ei, torch.stack([torch.full_like(dst, 4), dst])], 1)
    return iognn.Graph(ei, 300, index_dtype=index_dtype)


def light_graph(seed=0):
    """2,000 nodes and 20,000 random edges: rows of a few dozen entries both ways (no heavy row)."""
    gen = torch.Generator().manual_seed(seed)
    return iognn.Graph(torch.randint(0, 2000, (2, 20_000), generator=gen), 2000)


# ---- correctness ----------------------------------------------------------------------------
@pytest.mark.cuda
@pytest.mark.parametrize("index_dtype", [None, torch.int64], ids=["default_index", "int64"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_every_graph_case_matches_cpu(graph_case, reduce, weighted, index_dtype):
    name, edge_index, size = graph_case
    g = iognn.Graph(edge_index, size, index_dtype=index_dtype)
    compare_with_cpu(g, 8, torch.float32, reduce, weighted)


@pytest.mark.cuda
@pytest.mark.parametrize("F", WIDTHS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_dtypes_and_widths_match_cpu(dtype, F, reduce):
    compare_with_cpu(hub_graph(), F, dtype, reduce, weighted=True, seed=F)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("layout", ["aligned_stride", "misaligned", "feature_stride_2", "expanded"])
def test_strided_x(dtype, layout):
    g = hub_graph()
    gen = torch.Generator().manual_seed(4)
    n, F = g.num_src_nodes, 32
    if layout == "aligned_stride":  # row stride 40, base 16-byte aligned: the vector path
        x = torch.randn(n, 40, generator=gen).to(dtype).cuda()[:, 8:8 + F]
    elif layout == "misaligned":  # base off by one element: the scalar path
        x = torch.randn(n, 40, generator=gen).to(dtype).cuda()[:, 1:1 + F]
    elif layout == "feature_stride_2":  # copied to a unit feature stride by the op
        x = torch.randn(n, 2 * F, generator=gen).to(dtype).cuda()[:, ::2]
    else:  # row stride 0
        x = torch.randn(1, F, generator=gen).to(dtype).cuda().expand(n, F)
    compare_with_cpu(g, F, dtype, "mean", weighted=True, x=x)


@pytest.mark.cuda
@pytest.mark.parametrize("index_dtype", [None, torch.int64], ids=["int32", "int64"])
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_hub_with_200k_in_edges(index_dtype, reduce):
    gen = torch.Generator().manual_seed(11)
    n = 50_000
    hub_src = torch.randint(0, n, (200_000,), generator=gen)
    ei = torch.cat([torch.stack([hub_src, torch.zeros_like(hub_src)]),
                    torch.randint(0, n, (2, 100_000), generator=gen)], 1)
    g = iognn.Graph(ei, n, index_dtype=index_dtype)
    out, _, _ = compare_with_cpu(g, 64, torch.float32, reduce, weighted=True, rtol=1e-4, atol=1e-4)
    assert out.shape == (n, 64)


@pytest.mark.cuda
@pytest.mark.parametrize("weighted", [False, True])
def test_int32_and_int64_graphs_agree_bitwise(weighted):
    gen = torch.Generator().manual_seed(5)
    ei = torch.randint(0, 400, (2, 6000), generator=gen)
    g32, g64 = iognn.Graph(ei, 400).to("cuda"), iognn.Graph(ei, 400, index_dtype=torch.int64).to("cuda")
    assert g32.index_dtype == torch.int32 and g64.index_dtype == torch.int64
    x, w, grad = (t.cuda() if t is not None else None
                  for t in make_inputs(g32, 40, torch.float32, weighted, gen))
    for a, b in zip(run_ops(g32, x, w, grad, "mean"), run_ops(g64, x, w, grad, "mean")):
        assert torch.equal(a, b)


@pytest.mark.cuda
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_gradients_through_the_wrapper(reduce):
    """iognn.ops.propagate on CUDA: autograd gives the CPU op's gradients (and passes gradcheck)."""
    gen = torch.Generator().manual_seed(9)
    ei = torch.cat([torch.randint(0, 8, (2, 25), generator=gen), torch.tensor([[1, 1], [1, 1]])], 1)
    g = iognn.Graph(ei, 8)
    gc = g.to("cuda")
    x = torch.randn(8, 3, dtype=torch.float64, generator=gen)
    w = torch.rand(g.num_edges, dtype=torch.float64, generator=gen)
    b = torch.randn(3, dtype=torch.float64, generator=gen)
    xc, wc, bc = (t.cuda().requires_grad_() for t in (x, w, b))
    assert torch.autograd.gradcheck(lambda *a: propagate(gc, a[0], a[1], reduce, a[2]),
                                    (xc, wc, bc))
    xr, wr, br = (t.clone().requires_grad_() for t in (x, w, b))
    grad = torch.randn(8, 3, dtype=torch.float64, generator=gen)
    got = torch.autograd.grad(propagate(gc, xc, wc, reduce, bc), (xc, wc, bc), grad.cuda())
    exp = torch.autograd.grad(propagate(g, xr, wr, reduce, br), (xr, wr, br), grad)
    for a, b in zip(got, exp):
        torch.testing.assert_close(a.cpu(), b)


# ---- determinism, streams, cached schedules --------------------------------------------------------------
@pytest.mark.cuda
@pytest.mark.parametrize("dtype,F", [(torch.float32, 64), (torch.float16, 33), (torch.float64, 8)],
                         ids=["f32x64", "f16x33", "f64x8"])
@pytest.mark.parametrize("graph", [hub_graph, light_graph], ids=["hub", "light"])
def test_bitwise_deterministic(dtype, F, graph):
    gc = graph().to("cuda")
    gen = torch.Generator().manual_seed(12)
    x, w, grad = (t.cuda() for t in make_inputs(gc, F, dtype, True, gen))
    bias = make_bias(F, dtype, gen).cuda()
    first = run_ops(gc, x, w, grad, "mean", bias)
    for _ in range(3):
        for a, b in zip(first, run_ops(gc, x, w, grad, "mean", bias)):
            assert torch.equal(a, b)


@pytest.mark.cuda
def test_non_default_stream():
    g = hub_graph()
    gc = g.to("cuda")
    gen = torch.Generator().manual_seed(13)
    x, w, grad = (t.cuda() for t in make_inputs(gc, 64, torch.float32, True, gen))
    ref = run_ops(gc, x, w, grad, "sum")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got = run_ops(gc, x, w, grad, "sum")
    torch.cuda.current_stream().wait_stream(side)
    for a, b in zip(got, ref):
        assert torch.equal(a, b)


@pytest.mark.cuda
def test_freed_graph_memory_reused_by_another_graph():
    """Schedules are keyed by pointer: a new graph in the old one's memory must not
    inherit them (different heavy rows each round, same sizes)."""
    for trial in range(3):
        gen = torch.Generator().manual_seed(100 + trial)
        hub = torch.randint(0, 500, (1000 * (trial + 1),), generator=gen)
        rest = torch.randint(0, 500, (2, 6000 - hub.numel()), generator=gen)
        ei = torch.cat([torch.stack([hub, torch.full_like(hub, 7 * trial)]), rest], 1)
        g = iognn.Graph(ei, 500)
        compare_with_cpu(g, 32, torch.float32, "mean", weighted=trial % 2 == 1, seed=trial)
        del g


@pytest.mark.cuda
def test_in_place_graph_edit_is_seen():
    gen = torch.Generator().manual_seed(15)
    a = iognn.Graph(torch.randint(0, 400, (2, 5000), generator=gen), 400)
    hub = torch.randint(0, 400, (3000,), generator=gen)
    b = iognn.Graph(torch.cat([torch.stack([hub, torch.zeros_like(hub)]),
                               torch.randint(0, 400, (2, 2000), generator=gen)], 1), 400)
    assert a.num_edges == b.num_edges and a.index_dtype == b.index_dtype
    ac = a.to("cuda")
    x, w, grad = (t.cuda() for t in make_inputs(a, 32, torch.float32, True, gen))
    run_ops(ac, x, w, grad, "mean")  # caches a's schedule
    for name in ("rowptr", "col", "colptr", "row", "csc2csr"):
        getattr(ac, name).copy_(getattr(b, name))
    got = run_ops(ac, x, w, grad, "mean")
    ref = run_ops(b, x.cpu().double(), w.cpu().double(), grad.cpu().double(), "mean")
    for name, g_, r in zip(("out", "grad_x", "grad_w"), got, ref):
        assert_matches(g_, r, torch.float32, name)


@pytest.mark.cuda
def test_capture_before_the_schedule_is_cached():
    """A CUDA-graph capture of an op on a graph whose schedule is not cached yet runs with the
    empty schedule (nothing may synchronise while capturing); the replay equals eager."""
    gc = hub_graph(seed=16).to("cuda")
    x = torch.randn(gc.num_src_nodes, 64, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        out = ops.propagate(gc.rowptr, gc.col, gc.colptr, gc.row, gc.csc2csr, None, x, "mean")
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    ref = ops.propagate(gc.rowptr, gc.col, gc.colptr, gc.row, gc.csc2csr, None, x, "mean")
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.cuda
def test_graph_built_on_the_device_needs_no_schedule_readback():
    """The device build reports the longest rows, so a graph without heavy rows (the usual
    sampled block) goes to its first forward and backward without a host sync; a graph with a
    heavy row still reads its schedule back once (which the sync detector sees)."""
    gen = torch.Generator().manual_seed(17)
    light = torch.randint(0, 3000, (2, 20000), generator=gen).cuda()
    heavy = torch.cat([light, torch.stack([torch.arange(400), torch.zeros(400, dtype=torch.long)]
                                          ).cuda()], 1)
    for edge_index, syncs in ((light, False), (heavy, True)):
        g = iognn.Graph(edge_index, 3000)
        x = torch.randn(3000, 16, device="cuda", requires_grad=True)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            if syncs:
                with pytest.raises(RuntimeError, match="synchroniz"):
                    ops.propagate(g.rowptr, g.col, g.colptr, g.row, g.csc2csr, None, x, "sum")
            else:
                out = ops.propagate(g.rowptr, g.col, g.colptr, g.row, g.csc2csr, None, x, "sum")
                out.backward(torch.ones_like(out))
        finally:
            torch.cuda.set_sync_debug_mode(0)
        if not syncs:
            ref = ops.propagate(g.rowptr.cpu(), g.col.cpu(), g.colptr.cpu(), g.row.cpu(),
                                g.csc2csr.cpu(), None, x.detach().cpu(), "sum")
            torch.testing.assert_close(out.cpu(), ref)
            torch.testing.assert_close(x.grad.cpu(), torch.bincount(
                edge_index[0].cpu(), minlength=3000).float()[:, None].expand(-1, 16))


# ---- registration and errors ------------------------------------------------------------------
@pytest.mark.cuda
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("weighted", [False, True])
def test_opcheck_cuda(index_dtype, weighted):
    gen = torch.Generator().manual_seed(10)
    for ei, n in [(torch.randint(0, 12, (2, 50), generator=gen), 12),
                  (torch.empty(2, 0, dtype=torch.int64), 4)]:
        g = iognn.Graph(ei, n, index_dtype=index_dtype if index_dtype == torch.int64 else None)
        g = g.to("cuda")
        x = torch.randn(n, 5, device="cuda", requires_grad=True)
        w = torch.rand(g.num_edges, device="cuda", requires_grad=True) if weighted else None
        torch.library.opcheck(ops.propagate.default,
                              (g.rowptr, g.col, g.colptr, g.row, g.csc2csr, w, x, "mean"))
        grad = torch.randn(n, 5, device="cuda")
        w_const = w.detach() if weighted else None  # the backward ops are not differentiable
        torch.library.opcheck(ops.propagate_backward_x.default,
                              (g.colptr, g.row, g.csc2csr, g.rowptr, w_const, grad, "sum"))
        torch.library.opcheck(ops.propagate_backward_weight.default,
                              (g.rowptr, g.col, grad, x.detach(), "mean"))


@pytest.mark.cuda
def test_mixed_devices_raise_value_errors():
    g = iognn.Graph(torch.tensor([[0, 1, 2], [1, 2, 0]]), 3)
    gc = g.to("cuda")
    x = torch.randn(3, 4, device="cuda")
    with pytest.raises(ValueError, match="rowptr is on cpu"):
        ops.propagate(g.rowptr, gc.col, gc.colptr, gc.row, gc.csc2csr, None, x, "sum")
    with pytest.raises(ValueError, match="edge_weight is on cpu"):
        ops.propagate(gc.rowptr, gc.col, gc.colptr, gc.row, gc.csc2csr, torch.ones(3), x, "sum")
    with pytest.raises(ValueError, match="csc2csr is on cpu"):
        ops.propagate_backward_x(gc.colptr, gc.row, g.csc2csr, gc.rowptr, None, x, "sum")
    with pytest.raises(ValueError, match="x has 4 rows"):
        ops.propagate(gc.rowptr, gc.col, gc.colptr, gc.row, gc.csc2csr, None,
                      torch.randn(4, 4, device="cuda"), "sum")
    assert propagate(gc, x).shape == (3, 4)  # the process stays usable


# ---- compute-sanitizer subset (own kernels: light rows, heavy rows, merge) ------------------
@pytest.mark.cuda
@pytest.mark.sanitizer
@pytest.mark.parametrize("dtype,F", [(torch.float32, 32), (torch.float32, 3), (torch.float16, 33)],
                         ids=["f32x32", "f32x3", "f16x33"])
def test_sanitizer_own_kernels(dtype, F):
    compare_with_cpu(hub_graph(), F, dtype, "mean", weighted=True)


@pytest.mark.cuda
@pytest.mark.sanitizer
def test_sanitizer_empty_and_isolated():
    for name, edge_index, size in GRAPH_CASES:
        if name in ("empty", "no_nodes", "isolated", "bipartite_wide"):
            compare_with_cpu(iognn.Graph(edge_index, size), 8, torch.float32, "sum", weighted=True)
