"""iognn.ops.attention on CUDA: the device kernels against the host kernels.

The host kernels are checked against PyG in test_attention.py; here every CUDA result (output,
alpha and the gradient of every input) must equal the host result for the same inputs and the same
dropout seed: fp64 against fp64 up to summation order, fp32 / fp16 / bf16 against the fp64 host
result within conftest.tolerance. Then what only a device has: hubs split over many blocks, a
million isolated nodes, bitwise determinism, streams, CUDA-graph capture and opcheck.
"""
import math

import pytest
import torch

import iognn
import iognn.ops.attention  # noqa: F401  (registers the fake kernels and autograd formulas)

from conftest import GRAPH_CASES, random_edge_index, sizes, tolerance
from test_attention import OPS, check_opcheck, random_inputs

pytestmark = pytest.mark.cuda

VARIANTS = ["gat", "gatv2", "transformer"]
LOW_DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# (H, C): every H in {1, 4, 8} and every C in {1, 8, 16, 24, 32, 64, 128, 256}; 257 and 300 split
# a head row over several tiles (with scalar and with vector loads); H = 3 leaves GATv2's att
# gradient to pass 3 (a block's groups do not hold fixed heads).
HEADS_CHANNELS = [(1, 1), (8, 1), (4, 8), (1, 16), (8, 24), (4, 32), (1, 64), (8, 128), (4, 256),
                  (2, 257), (1, 300), (3, 16)]


def make_inputs(variant, graph, H, C, De, gen, dtype=torch.float64):
    """Host inputs (node tensors..., edge_attr, w_edge) in `dtype`; no edge features for De=None.

    GATv2's att is scaled by 1 / sqrt(C), as glorot initialises it: with N(0, 1) att its scores
    grow like sqrt(C) and their fp32 rounding alone (host kernel included) reaches the fp32
    tolerance near C = 300."""
    num_src, num_dst = graph.size
    inputs = list(random_inputs(variant, num_src, num_dst, graph.num_edges, H, C, De or 1, gen))
    if variant == "gatv2":
        inputs[2] = inputs[2] / math.sqrt(C)
    if De is None:
        inputs[-2:] = [None, None]
    return [None if t is None else t.to(dtype) for t in inputs]


def make_grads(graph, H, C, gen, dtype=torch.float64):
    """Weights of the loss out . g_out + alpha . g_alpha."""
    return [torch.randn(graph.num_dst_nodes, H, C, generator=gen, dtype=torch.float64).to(dtype),
            torch.randn(graph.num_edges, H, generator=gen, dtype=torch.float64).to(dtype)]


def on(device, tensors):
    return [None if t is None else t.to(device) for t in tensors]


def hub_edge_index(n, into, out_of, others, gen):
    """Node 0 receives `into` edges from random sources, node 1 sends `out_of` edges to random
    destinations, and `others` random edges join n nodes."""
    to_hub = torch.stack([torch.randint(0, n, (into,), generator=gen),
                          torch.zeros(into, dtype=torch.int64)])
    from_hub = torch.stack([torch.ones(out_of, dtype=torch.int64),
                            torch.randint(0, n, (out_of,), generator=gen)])
    return torch.cat([to_hub, from_hub, random_edge_index(n, n, others, gen)], 1)


def supernode_graph():
    """The host graph of conftest's "supernode" case (node 0 receives 5,000 edges)."""
    _, edge_index, size = next(c for c in GRAPH_CASES if c[0] == "supernode")
    return iognn.Graph(edge_index, size)


def device_inputs(variant, host, H, C, gen):
    """(graph, inputs, loss weights) on the device: `host` moved, fp32 inputs with edge features
    of width 3 and the loss weights drawn from `gen` in that order."""
    inputs = on("cuda", make_inputs(variant, host, H, C, 3, gen, torch.float32))
    grads = on("cuda", make_grads(host, H, C, gen, torch.float32))
    return host.cuda(), inputs, grads


def forward_backward(variant, graph, inputs, grads, **kwargs):
    """[out, alpha, gradient of every given input] of loss = out . grads[0] + alpha . grads[1]."""
    # detach() keeps each input's storage, offset and strides (clone() would make them dense).
    leaves = [None if t is None else t.detach().requires_grad_() for t in inputs]
    *nodes, edge_attr, w_edge = leaves
    out, alpha = OPS[variant](graph, *nodes, edge_attr=edge_attr, w_edge=w_edge,
                              return_alpha=True, **kwargs)
    loss = (out * grads[0]).sum() + (alpha * grads[1]).sum()
    given = [t for t in leaves if t is not None]
    return [out.detach(), alpha.detach()] + list(torch.autograd.grad(loss, given))


def assert_matches(got, exp, rtol, atol):
    """Each CUDA result equals its host twin (compared in fp64) within rtol and
    atol * max(1, |twin|): sums over thousands of edges scale the absolute error."""
    assert len(got) == len(exp)
    for k, (a, b) in enumerate(zip(got, exp)):
        assert a.is_cuda and a.shape == b.shape, k
        a, b = a.detach().cpu().double(), b.detach().double()
        scale = max(1.0, float(b.abs().max())) if b.numel() else 1.0
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol * scale, msg=lambda m, k=k: f"result {k}: {m}")


FP64_TOL = (1e-8, 1e-10)  # the same fp64 math summed in another order


def check_against_host(variant, edge_index, size, H, C, De, dtype=torch.float64, dropout=0.0,
                       index_dtype=None, seed=0):
    """CUDA forward + backward equal the host kernels run in fp64 on the same (rounded) inputs."""
    gen = torch.Generator().manual_seed(seed)
    host = iognn.Graph(edge_index, size, index_dtype=index_dtype)
    inputs = make_inputs(variant, host, H, C, De, gen, dtype)
    grads = make_grads(host, H, C, gen, dtype)
    kwargs = dict(dropout=dropout, seed=1234 + seed)
    exp = forward_backward(variant, host, on("cpu", [t if t is None else t.double()
                                                     for t in inputs]),
                           [g.double() for g in grads], **kwargs)
    got = forward_backward(variant, host.cuda(), on("cuda", inputs), on("cuda", grads), **kwargs)
    assert all(t.dtype == dtype for t in got)
    assert_matches(got, exp, *(FP64_TOL if dtype == torch.float64 else tolerance(dtype)))
    if dropout > 0:  # the same mask: dropped weights are exactly 0, clearly kept ones are not
        alpha, dropped = got[1].cpu(), exp[1] == 0
        assert torch.all(alpha[dropped] == 0)
        assert torch.all(alpha[~dropped & (exp[1].abs() > 1e-3)] != 0)
    return got


# ---- parity with the host kernels -------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("De", [None, 4])
def test_matches_host_on_every_graph_case(graph_case, variant, De):
    _, edge_index, size = graph_case
    check_against_host(variant, edge_index, size, H=3, C=8, De=De, dropout=0.2)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("H,C", HEADS_CHANNELS, ids=[f"H{h}-C{c}" for h, c in HEADS_CHANNELS])
def test_heads_and_channels(variant, H, C):
    gen = torch.Generator().manual_seed(H * 1000 + C)
    edge_index = random_edge_index(40, 40, 300, gen)
    check_against_host(variant, edge_index, 40, H, C, De=3)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", LOW_DTYPES)
@pytest.mark.parametrize("C", [24, 64, 257])
def test_low_precision_matches_fp64_host(variant, dtype, C):
    gen = torch.Generator().manual_seed(19)
    edge_index = random_edge_index(200, 200, 3000, gen)
    check_against_host(variant, edge_index, 200, H=3, C=C, De=4, dtype=dtype, dropout=0.2)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_bipartite_both_ways(variant, index_dtype):
    gen = torch.Generator().manual_seed(12)
    for size in [(25, 9), (7, 31)]:
        edge_index = random_edge_index(size[0], size[1], 300, gen)
        graph = iognn.Graph(edge_index, size, index_dtype=index_dtype)
        assert graph.index_dtype == index_dtype
        check_against_host(variant, edge_index, size, H=2, C=16, De=3, dropout=0.3,
                           index_dtype=index_dtype)


def test_gat_without_destination_term():
    gen = torch.Generator().manual_seed(13)
    edge_index = random_edge_index(25, 9, 200, gen)
    host = iognn.Graph(edge_index, (25, 9))
    x, a_src = (torch.randn(25, 2, 8, generator=gen, dtype=torch.float64),
                torch.randn(25, 2, generator=gen, dtype=torch.float64))
    grads = make_grads(host, 2, 8, gen)

    def run(graph, device):
        inputs = [t.to(device).requires_grad_() for t in (x, a_src)]
        out, alpha = OPS["gat"](graph, *inputs, None, return_alpha=True, dropout=0.25, seed=3)
        loss = (out * grads[0].to(device)).sum() + (alpha * grads[1].to(device)).sum()
        return [out, alpha] + list(torch.autograd.grad(loss, inputs))

    assert_matches(run(host.cuda(), "cuda"), run(host, "cpu"), *FP64_TOL)


@pytest.mark.parametrize("variant", VARIANTS)
def test_misaligned_and_strided_inputs(variant):
    """Row-strided views and inputs 4 bytes off a 16-byte boundary (scalar loads) give the
    results of contiguous inputs (16-byte vector loads)."""
    gen = torch.Generator().manual_seed(20)
    edge_index = random_edge_index(50, 50, 600, gen)
    H, C = 2, 16
    graph, inputs, grads = device_inputs(variant, iognn.Graph(edge_index, 50), H, C, gen)

    def shifted(t):  # same values, data pointer 4 bytes past a 16-byte boundary
        flat = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
        view = flat[1:].view(t.shape)
        view.copy_(t)
        return view

    def row_strided(t):  # same values, row stride 3 * H * C
        wide = torch.zeros(t.size(0), 3, *t.shape[1:], dtype=t.dtype, device=t.device)
        wide[:, 1] = t
        return wide[:, 1]

    # assert_matches compares a CUDA result with a host tensor
    base = [t.cpu() for t in forward_backward(variant, graph, inputs, grads, dropout=0.1, seed=5)]
    nodes = len(inputs) - 2
    for layout in (shifted, row_strided):
        changed = [layout(t) if k < nodes and t.dim() == 3 else t for k, t in enumerate(inputs)]
        assert any(t.data_ptr() % 16 for t in changed) or any(
            t.stride(0) != t[0].numel() for t in changed)
        got = forward_backward(variant, graph, changed, grads, dropout=0.1, seed=5)
        assert_matches(got, base, *tolerance(torch.float32))


# ---- one head of wide channels -----------------------------------------------------------------
def single_head_edge_index(gen):
    """Destination i < 40 has in-degree i (every padding count of an edge batch; 0: an empty row),
    destination 40 has 300 in-edges (above the chunk length: merged from chunks), source 79 has
    over 200 out-edges, 200 into destinations 41..59 (a chunked source in the backward);
    destinations 60..79 have no in-edges."""
    n = 80
    dst = torch.repeat_interleave(torch.arange(40), torch.arange(40))
    rows = [torch.stack([torch.randint(0, n, (dst.numel(),), generator=gen), dst]),
            torch.stack([torch.randint(0, n, (300,), generator=gen), torch.full((300,), 40)]),
            torch.stack([torch.full((200,), 79), torch.randint(41, 60, (200,), generator=gen)])]
    return torch.cat(rows, 1), n


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("C", [64, 96, 128])
@pytest.mark.parametrize("De", [None, 3])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_single_head_wide_rows(variant, C, De, index_dtype):
    gen = torch.Generator().manual_seed(C + (De or 0))
    edge_index, n = single_head_edge_index(gen)
    check_against_host(variant, edge_index, n, H=1, C=C, De=De, dropout=0.1,
                       index_dtype=index_dtype)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("C", [64, 128])
def test_single_head_wide_rows_storage_types(variant, dtype, C):
    gen = torch.Generator().manual_seed(7 * C)
    edge_index, n = single_head_edge_index(gen)
    got = check_against_host(variant, edge_index, n, H=1, C=C, De=None, dtype=dtype)
    assert torch.count_nonzero(got[0][60:]) == 0 and torch.count_nonzero(got[0][0]) == 0


# ---- degree extremes --------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
def test_hubs_split_over_many_blocks(variant):
    """A destination with 200,000 in-edges and a source with 100,000 out-edges (both far above the
    chunk length, so their states are merged from many partial chunks)."""
    gen = torch.Generator().manual_seed(30)
    n = 3000
    edge_index = hub_edge_index(n, 200_000, 100_000, 20_000, gen)
    check_against_host(variant, edge_index, n, H=2, C=16, De=2, dropout=0.1)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("hints", ["measured", "unknown", "understated"])
def test_degree_hints_choose_the_chunking_not_the_results(variant, hints):
    """A destination with 200 in-edges and a source with 150 out-edges: longer than a small
    graph's chunk (64 edges), within the light-only bound (256). With the build's hints their rows
    run whole in one group; without hints (a graph built under torch.compile) they are chunked; a
    bound that understates them (a deferred build's wrong degree_bounds) runs them whole too. All
    three give the host kernels' results."""
    gen = torch.Generator().manual_seed(32)
    n = 600
    host = iognn.Graph(hub_edge_index(n, 200, 150, 3000, gen), n)
    assert min(host.max_degree_hints) > 64
    inputs = make_inputs(variant, host, 2, 16, 3, gen)
    grads = make_grads(host, 2, 16, gen)
    exp = forward_backward(variant, host, inputs, grads, dropout=0.1, seed=5)
    graph = host.cuda()
    graph.max_degree_hints = {"measured": host.max_degree_hints, "unknown": (-1, -1),
                              "understated": (4, 4)}[hints]
    got = forward_backward(variant, graph, on("cuda", inputs), on("cuda", grads), dropout=0.1,
                           seed=5)
    assert_matches(got, exp, *FP64_TOL)


@pytest.mark.parametrize("variant", VARIANTS)
def test_million_isolated_nodes(variant):
    gen = torch.Generator().manual_seed(31)
    n = 1_000_000
    edge_index = random_edge_index(100, 100, 2000, gen)
    got = check_against_host(variant, edge_index, n, H=1, C=8, De=None, dtype=torch.float32)
    assert torch.count_nonzero(got[0][100:]) == 0
    assert all(torch.count_nonzero(g[100:]) == 0 for g in got[2:] if g.size(0) == n)


# ---- determinism, streams, CUDA graphs ------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
def test_bitwise_deterministic(variant):
    gen = torch.Generator().manual_seed(21)
    graph, inputs, grads = device_inputs(variant, supernode_graph(), 2, 24, gen)
    first = forward_backward(variant, graph, inputs, grads, dropout=0.3, seed=9)
    second = forward_backward(variant, graph, inputs, grads, dropout=0.3, seed=9)
    for a, b in zip(first, second):
        assert torch.equal(a, b)


@pytest.mark.parametrize("variant", VARIANTS)
def test_non_default_stream(variant):
    gen = torch.Generator().manual_seed(22)
    edge_index = random_edge_index(300, 300, 5000, gen)
    graph, inputs, grads = device_inputs(variant, iognn.Graph(edge_index, 300), 4, 32, gen)
    expected = forward_backward(variant, graph, inputs, grads, dropout=0.2, seed=4)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got = forward_backward(variant, graph, inputs, grads, dropout=0.2, seed=4)
    torch.cuda.current_stream().wait_stream(side)
    for a, b in zip(got, expected):
        assert torch.equal(a, b)


@pytest.mark.parametrize("variant", VARIANTS)
def test_cuda_graph_capture_of_forward_and_backward(variant):
    """Forward + backward captured once and replayed on new input values equal eager calls."""
    gen = torch.Generator().manual_seed(23)
    host = supernode_graph()
    H, C = 2, 16
    graph, static, grads = device_inputs(variant, host, H, C, gen)
    leaves = [t.requires_grad_() for t in static]

    def step():
        *nodes, edge_attr, w_edge = leaves
        out, alpha = OPS[variant](graph, *nodes, edge_attr=edge_attr, w_edge=w_edge,
                                  return_alpha=True, dropout=0.2, seed=11)
        loss = (out * grads[0]).sum() + (alpha * grads[1]).sum()
        return [out, alpha] + list(torch.autograd.grad(loss, leaves))

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):  # warm-up outside the capture (allocator pools, lazy init)
            step()
    torch.cuda.current_stream().wait_stream(side)
    cuda_graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(cuda_graph):
        captured = step()

    for trial in range(2):
        fresh = on("cuda", make_inputs(variant, host, H, C, 3, gen, torch.float32))
        with torch.no_grad():
            for t, v in zip(leaves, fresh):
                t.copy_(v)
        cuda_graph.replay()
        eager = forward_backward(variant, graph, fresh, grads, dropout=0.2, seed=11)
        for a, b in zip(captured, eager):
            assert torch.equal(a, b), trial


# ---- operator checks, errors -------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("with_edge_attr", [False, True])
def test_opcheck(variant, index_dtype, with_edge_attr):
    check_opcheck(variant, index_dtype, with_edge_attr, "cuda", seed=24)


def test_mixed_devices_raise_clear_errors():
    ei = torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]])
    g = iognn.Graph(ei, 3).cuda()
    x, a = torch.randn(3, 2, 4, device="cuda"), torch.randn(3, 2, device="cuda")
    graph = (g.rowptr, g.col, g.eid, g.colptr, g.row, g.csc2csr)
    with pytest.raises(ValueError, match="alpha_src is on cpu"):
        torch.ops.iognn.gat_attention(*graph, x, a.cpu(), None, None, None, 0.2, 0.0, 0, False)
    with pytest.raises(ValueError, match="edge_attr is on cpu"):
        torch.ops.iognn.transformer_attention(*graph, x, x, x, torch.randn(4, 3),
                                              torch.randn(8, 3, device="cuda"), 0.5, 0.0, 0,
                                              False)
    with pytest.raises(ValueError, match="rowptr is on cpu"):
        torch.ops.iognn.gatv2_attention(g.rowptr.cpu(), *graph[1:], x, x, torch.randn(
            2, 4, device="cuda"), None, None, 0.2, 0.0, 0, False)


# ---- small cases for compute-sanitizer (scripts/gpu_check.sh) ----------------------------------
@pytest.mark.sanitizer
@pytest.mark.parametrize("variant", VARIANTS)
def test_sanitizer_heavy_rows_and_sources(variant):
    """Chunked heavy rows and sources, alpha, dropout and edge features on a tiny graph."""
    gen = torch.Generator().manual_seed(40)
    hub = torch.stack([torch.randint(0, 30, (300,), generator=gen), torch.zeros(300).long()])
    fan = torch.stack([torch.ones(200).long(), torch.randint(0, 30, (200,), generator=gen)])
    edge_index = torch.cat([hub, fan, random_edge_index(30, 30, 60, gen)], 1)
    check_against_host(variant, edge_index, 30, H=2, C=8, De=3, dtype=torch.float32,
                       dropout=0.2)


@pytest.mark.sanitizer
@pytest.mark.parametrize("variant", VARIANTS)
def test_sanitizer_tiled_head_rows(variant):
    """A head row split over tiles (C = 257, scalar loads) on a bipartite int64 graph."""
    gen = torch.Generator().manual_seed(41)
    edge_index = random_edge_index(9, 7, 40, gen)
    check_against_host(variant, edge_index, (9, 7), H=2, C=257, De=2, dtype=torch.float32,
                       dropout=0.2, index_dtype=torch.int64)
