"""Scale limits (issue 8): every op either works at the size or raises a clear error naming it.

CPU (in CI), small in memory:
- int64 graphs give bit-for-bit the results of int32 graphs (the int64 index paths of every op);
- feature tensors of N * F >= 2^31 logical elements: overlapping-row views (row stride 1, a few MB
  of storage) read at offsets beyond 2^31, against the same op on a compact relabelled graph.
GPU (markers `cuda` and `slow`, run by scripts/gpu_check.sh), each skipped with the amount of memory
it needs when the device has less free:
- a super-node with 10^7 in-edges, every op forward and backward;
- N * F >= 2^31 feature elements in real tensors, forward and backward, checked on the rows whose
  offsets pass 2^31;
- an int64 graph of more than 2^31 edges.
"""
import pytest
import torch

import iognn
from iognn.ops import propagate

from op_cases import (DEST_SIDE, EDGE_SIDE, FEATURE_OPS, SOURCE_FEATURES, SOURCE_SIDE,
                      op_inputs, reference, run_op)

INT32_MAX = 2**31 - 1


def forward_backward(op, graph, inputs, grad_seed=0):
    """[out, gradient of every input] for a random output gradient."""
    leaves = {k: t.detach().requires_grad_() for k, t in inputs.items()}
    out = run_op(op, graph, leaves)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(grad_seed),
                       dtype=out.dtype).to(out.device)
    return [out] + list(torch.autograd.grad(out, list(leaves.values()), grad))


# ---- CPU: int64 index paths ----------------------------------------------------------------
@pytest.mark.parametrize("op", FEATURE_OPS)
def test_int64_graph_matches_int32_bitwise(op):
    gen = torch.Generator().manual_seed(0)
    edge_index = torch.cat([torch.randint(0, 300, (2, 4000), generator=gen),
                            torch.stack([torch.randint(0, 300, (2000,), generator=gen),
                                         torch.zeros(2000, dtype=torch.long)])], 1)
    small = iognn.Graph(edge_index, (300, 310))
    wide = iognn.Graph(edge_index, (300, 310), index_dtype=torch.int64)
    assert small.index_dtype == torch.int32 and wide.index_dtype == torch.int64
    inputs = op_inputs(op, small, gen)
    for a, b in zip(forward_backward(op, small, inputs), forward_backward(op, wide, inputs)):
        assert torch.equal(a, b)


# ---- CPU: feature offsets beyond 2^31 ------------------------------------------------------
def window_rows(num_rows, *row_shape, gen):
    """A float32 [num_rows, *row_shape] view whose row r starts at element r of its storage (row
    stride 1, dense inside a row): num_rows * width logical elements over num_rows + width stored
    ones, so offsets past 2^31 cost a few MB."""
    inner, width = [], 1
    for size in reversed(row_shape):
        inner.insert(0, width)
        width *= size
    base = torch.randn(num_rows + width, generator=gen)
    return base.as_strided((num_rows,) + row_shape, (1,) + tuple(inner))


@pytest.mark.parametrize("op", FEATURE_OPS)
def test_feature_offsets_beyond_int32_forward(op):
    """Sources up to N with N * F > 2^31 (F = 2048): the op reads rows at element offsets past
    2^31 and must give bit for bit what it gives on the compact graph of the rows it uses (same
    CSR order, so the same summation order)."""
    F = 2048
    num_src = INT32_MAX // F + 4096
    assert num_src * F > INT32_MAX
    gen = torch.Generator().manual_seed(1)
    # 4 destinations; sources spread over the whole range, the last ones included.
    src = torch.cat([torch.randint(0, num_src, (60,), generator=gen),
                     torch.arange(num_src - 8, num_src)])
    dst = torch.randint(0, 4, (src.numel(),), generator=gen)
    big = iognn.Graph(torch.stack([src, dst]), (num_src, 4))
    used, compact_src = torch.unique(src, return_inverse=True)  # sorted: the order is kept
    compact = iognn.Graph(torch.stack([compact_src, dst]), (used.numel(), 4))
    inputs = op_inputs(op, big, gen, F=F,
                       src_rows=lambda n, *shape: window_rows(n, *shape, gen=gen))
    assert any(inputs[k].stride(0) == 1 for k in inputs if k in SOURCE_FEATURES)
    compact_inputs = {k: t.index_select(0, used) if k in SOURCE_SIDE else t
                      for k, t in inputs.items()}
    with torch.no_grad():
        assert torch.equal(run_op(op, big, inputs), run_op(op, compact, compact_inputs))


# ---- GPU: super-node, N * F >= 2^31, more than 2^31 edges ----------------------------------
def need_gpu_memory(nbytes, what):
    torch.cuda.empty_cache()  # blocks cached by earlier tests count as free
    free, _ = torch.cuda.mem_get_info()
    if free < nbytes * 1.1:
        pytest.skip(f"{what} needs about {nbytes / 2**30:.1f} GiB of GPU memory; "
                    f"{free / 2**30:.1f} GiB free on {torch.cuda.get_device_name()}")


def assert_close_fp32(got, exp, what):
    got, exp = got.detach(), exp.detach()
    scale = max(1.0, float(exp.abs().max())) if exp.numel() else 1.0
    torch.testing.assert_close(got.double(), exp.double(), rtol=1e-4, atol=1e-4 * scale,
                               msg=lambda m: f"{what}: {m}")


def check_rows(op, edge_index, inputs, out, source_grads, rows, sources):
    """out[rows] and the gradients (loss = out.sum()) of the given sources against the fp64
    reference on the edges into `rows`; `rows` must hold every destination of `sources`."""
    keep = torch.isin(edge_index[1], rows)
    sub = edge_index[:, keep]
    used, sub_src = torch.unique(sub[0], return_inverse=True)
    sub_dst = torch.searchsorted(rows, sub[1])
    pick = {**{k: used for k in SOURCE_SIDE}, **{k: rows for k in DEST_SIDE}}
    ref_inputs = {k: (t.detach()[keep] if k in EDGE_SIDE else
                      t.detach()[pick[k]] if k in pick else t.detach()).double().requires_grad_()
                  for k, t in inputs.items()}
    exp = reference(op, torch.stack([sub_src, sub_dst]), rows.numel(), ref_inputs)
    assert_close_fp32(out[rows], exp, "output rows")
    names = [k for k in inputs if k in SOURCE_SIDE]
    exp_grads = torch.autograd.grad(exp.sum(), [ref_inputs[k] for k in names])
    position = torch.searchsorted(used, sources)
    assert bool((used[position] == sources).all()), "a checked source has no edge into rows"
    for name, got, want in zip(names, source_grads, exp_grads):
        assert_close_fp32(got[sources], want[position], f"gradient of {name}")


def forward_and_source_grads(op, graph, inputs):
    leaves = {k: t.requires_grad_() for k, t in inputs.items()}
    out = run_op(op, graph, leaves)
    grads = torch.autograd.grad(out.sum(), [t for k, t in leaves.items() if k in SOURCE_SIDE])
    return out.detach(), grads


@pytest.mark.cuda
@pytest.mark.slow
@pytest.mark.parametrize("op", FEATURE_OPS)
def test_supernode_with_ten_million_in_edges(op):
    N, hub_edges, F = 1_000_000, 10_000_000, 16
    # edge_index, the graph, and the reference's fp64 gathers of [E, F] (a few live at once).
    need_gpu_memory(hub_edges * (2 * 8 + 6 * 4 + 6 * F * 8), "a 10^7-in-edge super-node")
    gen = torch.Generator(device="cuda").manual_seed(2)
    hub_src = torch.randint(0, N, (hub_edges,), device="cuda", generator=gen)
    rest = torch.randint(0, N, (2, 2_000_000), device="cuda", generator=gen)
    edge_index = torch.cat([torch.stack([hub_src, torch.zeros_like(hub_src)]), rest], 1)
    graph = iognn.Graph(edge_index, N)
    assert graph.max_in_degree >= hub_edges
    inputs = op_inputs(op, graph, torch.Generator(device="cuda").manual_seed(3), F=F)
    out, grads = forward_and_source_grads(op, graph, inputs)
    torch.cuda.synchronize()
    # The super-node and a few other rows; the sources checked send edges only into those rows.
    rows = torch.arange(0, 64, device="cuda")
    into_rows = torch.isin(edge_index[1], rows)
    sends_elsewhere = torch.zeros(N, dtype=torch.bool, device="cuda")
    sends_elsewhere[edge_index[0][~into_rows]] = True
    candidates = torch.unique(edge_index[0][into_rows])
    sources = candidates[~sends_elsewhere[candidates]][:256]
    assert sources.numel() > 0
    check_rows(op, edge_index, inputs, out, grads, rows, sources)


@pytest.mark.cuda
@pytest.mark.slow
@pytest.mark.parametrize("op", FEATURE_OPS)
def test_feature_elements_beyond_int32_cuda(op):
    """Real [N, F] tensors with N * F >= 2^31 (F = 64): propagate on a square graph (offsets past
    2^31 on both sides), the others with that many sources (their outputs stay small)."""
    F = 64
    num_src = INT32_MAX // F + 2**16
    num_dst = num_src if op == "propagate" else 2**20
    big = {"propagate": 4, "segment_reduce": 2, "gat": 2, "gatv2": 2, "transformer": 4}[op]
    need_gpu_memory(big * num_src * F * 4 + num_src * 64, f"{op} with N * F >= 2^31 (fp32)")
    gen = torch.Generator(device="cuda").manual_seed(4)
    last_src = torch.arange(num_src - 512, num_src, device="cuda")
    last_dst = torch.arange(num_dst - 512, num_dst, device="cuda")
    edge_index = torch.cat([
        torch.stack([torch.randint(0, num_src - 512, (2**24,), device="cuda", generator=gen),
                     torch.randint(0, num_dst - 512, (2**24,), device="cuda", generator=gen)]),
        torch.stack([last_src, last_dst.flip(0)])], 1)
    graph = iognn.Graph(edge_index, (num_src, num_dst))
    inputs = op_inputs(op, graph, torch.Generator(device="cuda").manual_seed(5), F=F)
    out, grads = forward_and_source_grads(op, graph, inputs)
    # The last 512 sources send edges only into the last 512 destinations (offsets past 2^31 on
    # the source side, and on the destination side for propagate); a few first rows too.
    rows = torch.cat([torch.arange(64, device="cuda"), last_dst])
    check_rows(op, edge_index, inputs, out, grads, rows, last_src)


@pytest.mark.cuda
@pytest.mark.slow
def test_more_than_int32_max_edges():
    E = 2**31 + 2**20
    N = 2**20
    # edge_index (int32) + col, eid, row, csc2csr, edge_map in int64 + the build's sort buffers
    # (about two more int64 edge arrays).
    need_gpu_memory(E * (2 * 4 + 5 * 8 + 2 * 8), "an int64 graph of 2^31 + 2^20 edges")
    gen = torch.Generator(device="cuda").manual_seed(6)
    edge_index = torch.randint(0, N, (2, E), device="cuda", dtype=torch.int32, generator=gen)
    graph = iognn.Graph(edge_index, N)
    assert graph.index_dtype == torch.int64 and graph.num_edges == E
    in_degree = torch.bincount(edge_index[1], minlength=N)
    del edge_index
    x = torch.ones(N, 1, device="cuda", requires_grad=True)
    out = propagate(graph, x)  # a sum of ones: every node's in-degree
    assert torch.equal(out.view(-1).long(), in_degree)
    (grad,) = torch.autograd.grad(out, x, torch.ones_like(out))  # every source's out-degree
    assert int(grad.double().sum()) == E
