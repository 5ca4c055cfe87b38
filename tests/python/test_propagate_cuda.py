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
from test_propagate import check_opcheck

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
    """300 nodes, 3,000 random edges, node 1 receiving 5,000 edges and nodes 2 and 3 receiving 300
    and 257 (rows of more than 256 edges are heavy: propagate_kernels.cuh): heavy rows of many and
    of a few segments beside light rows, every schedule path."""
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


# ---- determinism, streams, the device schedule ----------------------------------------------
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
def test_graphs_of_the_same_sizes_in_the_same_memory():
    """Nothing survives a call: a new graph in a freed one's memory, with the same sizes and
    other heavy rows, gets its own schedule."""
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
    run_ops(ac, x, w, grad, "mean")
    for name in ("rowptr", "col", "colptr", "row", "csc2csr"):
        getattr(ac, name).copy_(getattr(b, name))
    got = run_ops(ac, x, w, grad, "mean")
    ref = run_ops(b, x.cpu().double(), w.cpu().double(), grad.cpu().double(), "mean")
    for name, g_, r in zip(("out", "grad_x", "grad_w"), got, ref):
        assert_matches(g_, r, torch.float32, name)


def run_hinted(g, x, w, grad, reduce, hints):
    """The three ops with the degree hints (max_in, max_out) given explicitly."""
    out = ops.propagate(g.rowptr, g.col, g.colptr, g.row, g.csc2csr, w, x, reduce, None, *hints)
    gx = ops.propagate_backward_x(g.colptr, g.row, g.csc2csr, g.rowptr, w, grad, reduce, hints[1])
    gw = ops.propagate_backward_weight(g.rowptr, g.col, grad, x, reduce, hints[0])
    return out, gx, gw


@pytest.mark.cuda
def test_capture_of_a_hub_graph_replays_the_eager_result():
    """The heavy-row schedule is planned on the device inside each call, so a capture runs the
    same kernels as eager (nothing synchronises, nothing is cached) and replays equal it."""
    gc = hub_graph(seed=16).to("cuda")
    gen = torch.Generator().manual_seed(16)
    x, w, grad = (t.cuda() for t in make_inputs(gc, 64, torch.float32, True, gen))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        captured = run_ops(gc, x, w, grad, "mean")
    for _ in range(2):
        x.copy_(torch.randn_like(x))
        grad.copy_(torch.randn_like(grad))
        graph.replay()
        torch.cuda.synchronize()
        for a, b in zip(captured, run_ops(gc, x, w, grad, "mean")):
            assert torch.equal(a, b)


@pytest.mark.cuda
@pytest.mark.parametrize("heavy", [False, True], ids=["light", "hub"])
def test_no_call_synchronises(heavy):
    """Forward and backward of a device-built graph, with or without heavy rows, never wait for
    the device (the sync detector raises on any synchronisation)."""
    gen = torch.Generator().manual_seed(17)
    edge_index = torch.randint(0, 3000, (2, 20000), generator=gen)
    if heavy:
        hub = torch.stack([torch.arange(3000), torch.zeros(3000, dtype=torch.long)])
        edge_index = torch.cat([edge_index, hub, hub.flip(0)], 1)
    g = iognn.Graph(edge_index.cuda(), 3000)
    x = torch.randn(3000, 16, device="cuda", requires_grad=True)
    w = torch.rand(g.num_edges, device="cuda", requires_grad=True)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = propagate(g, x, w, "mean")
        out.backward(torch.ones_like(out))
    finally:
        torch.cuda.set_sync_debug_mode(0)
    gh = g.to("cpu")
    xr = x.detach().cpu().double().requires_grad_()
    wr = w.detach().cpu().double().requires_grad_()
    ref = propagate(gh, xr, wr, "mean")
    ref.backward(torch.ones_like(ref))
    assert_matches(out, ref.detach(), torch.float32, "out")
    assert_matches(x.grad, xr.grad, torch.float32, "grad_x")
    assert_matches(w.grad, wr.grad, torch.float32, "grad_w")


def kernels_of(fn):
    """CUDA kernels (memsets included) that fn runs."""
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(e.device_type == torch.autograd.DeviceType.CUDA for e in prof.events())


@pytest.mark.cuda
def test_degree_hints_decide_the_heavy_passes():
    """A graph without heavy rows runs each op as one kernel once its longest rows are known
    (the Graph's hints); unknown hints (-1) plan for heavy rows; hints below the true longest row
    still give the exact result (heavy rows then take the light path)."""
    gen = torch.Generator().manual_seed(18)
    light = iognn.Graph(torch.randint(0, 2000, (2, 40000), generator=gen).cuda(), 2000)
    assert light.max_degree_hints == tuple(
        int(light.degree(d).max()) for d in ("in", "out"))
    x, w, grad = (t.cuda() for t in make_inputs(light, 32, torch.float32, True, gen))
    assert kernels_of(lambda: run_hinted(light, x, w, grad, "sum", light.max_degree_hints)) == 3
    assert kernels_of(lambda: run_hinted(light, x, w, grad, "sum", (-1, -1))) > 3
    hub = hub_graph(seed=18).to("cuda")
    x, w, grad = (t.cuda() for t in make_inputs(hub, 32, torch.float32, True, gen))
    exact = run_hinted(hub, x, w, grad, "mean", (-1, -1))
    for hints in (hub.max_degree_hints, (1, 1)):
        ref = run_ops(hub.to("cpu"), x.cpu().double(), w.cpu().double(), grad.cpu().double(),
                      "mean")
        for name, got, r in zip(("out", "grad_x", "grad_w"),
                                run_hinted(hub, x, w, grad, "mean", hints), ref):
            assert_matches(got, r, torch.float32, name)
    for a, b in zip(exact, run_hinted(hub, x, w, grad, "mean", hub.max_degree_hints)):
        assert torch.equal(a, b)


# ---- registration and errors ------------------------------------------------------------------
@pytest.mark.cuda
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("weighted", [False, True])
def test_opcheck_cuda(index_dtype, weighted):
    check_opcheck(index_dtype, weighted, "cuda")


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


@pytest.mark.cuda
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_light_rows_equal_the_host_op_bit_for_bit(reduce):
    """Light rows are summed in CSR order with every product rounded on its own, as the host
    kernels do (built with -ffp-contract=off): a fused multiply-add on either side breaks this."""
    g = light_graph(seed=19)
    gen = torch.Generator().manual_seed(19)
    x, w, grad = make_inputs(g, 32, torch.float32, True, gen)
    bias = make_bias(32, torch.float32, gen)
    gc = g.to("cuda")
    got = ops.propagate(gc.rowptr, gc.col, gc.colptr, gc.row, gc.csc2csr, w.cuda(), x.cuda(),
                        reduce, bias.cuda(), *gc.max_degree_hints)
    got_x = ops.propagate_backward_x(gc.colptr, gc.row, gc.csc2csr, gc.rowptr, w.cuda(),
                                     grad.cuda(), reduce, gc.max_degree_hints[1])
    assert torch.equal(got.cpu(), ops.propagate(g.rowptr, g.col, g.colptr, g.row, g.csc2csr, w, x,
                                                reduce, bias))
    assert torch.equal(got_x.cpu(), ops.propagate_backward_x(g.colptr, g.row, g.csc2csr, g.rowptr,
                                                             w, grad, reduce))
