"""iognn.ops.segment_reduce against PyG 2.8's aggregation modules on x[src] (CPU)."""
import pytest
import torch
from torch_geometric.nn import aggr

import iognn
from iognn.ops.segment_reduce import segment_reduce

from conftest import GRAPH_CASES, sizes, tolerance

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
SINGLE = ["sum", "mean", "min", "max", "var", "std"]
FUSED = [["min", "max", "mean", "std"], ["sum", "mean", "var", "std", "min", "max"]]
ALL_REDUCES = [[r] for r in SINGLE] + FUSED
REDUCE_IDS = ["+".join(r) for r in ALL_REDUCES]

PYG_AGGR = {"sum": aggr.SumAggregation, "mean": aggr.MeanAggregation,
            "min": aggr.MinAggregation, "max": aggr.MaxAggregation,
            "var": aggr.VarAggregation, "std": aggr.StdAggregation}


def reference(edge_index, x, reduces, num_dst):
    """PyG's aggregation of the messages x[src] grouped by dst (MultiAggregation for several)."""
    ei = edge_index.long()
    module = (PYG_AGGR[reduces[0]]() if len(reduces) == 1
              else aggr.MultiAggregation(reduces, mode="cat"))
    return module(x.index_select(0, ei[0]), index=ei[1], dim_size=num_dst)


def distinct_features(num_src, F, gen, dtype):
    """Features whose every column holds distinct values exact in fp16/bf16 (no min/max ties)."""
    cols = [torch.randperm(num_src, generator=gen) for _ in range(F)]
    return ((torch.stack(cols, 1) - num_src // 2) / 16.0).to(dtype)


def ops_args(g, x, reduces):
    return (g.rowptr, g.col, g.colptr, g.row, g.csc2csr, x, reduces)


@pytest.mark.parametrize("reduces", ALL_REDUCES, ids=REDUCE_IDS)
def test_matches_pyg_on_every_graph_case(graph_case, reduces):
    name, edge_index, size = graph_case
    num_src, num_dst = sizes(size)
    g = iognn.Graph(edge_index, size)
    gen = torch.Generator().manual_seed(0)
    # Continuous values: ties only between duplicate edges of one source, where PyG's even split
    # and iognn's first-edge rule give the same grad_x.
    x = torch.randn(num_src, 5, dtype=torch.float64, generator=gen, requires_grad=True)
    out = segment_reduce(g, x, reduces)
    ref = reference(edge_index, x, reduces, num_dst)
    assert out.shape == (num_dst, 5 * len(reduces))
    torch.testing.assert_close(out, ref)
    if out.numel() == 0:
        return
    grad = torch.randn(out.shape, dtype=torch.float64, generator=gen)
    got, = torch.autograd.grad(out, x, grad)
    exp, = torch.autograd.grad(ref, x, grad)
    torch.testing.assert_close(got, exp)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reduces", FUSED[1:], ids=REDUCE_IDS[-1:])
def test_dtypes_accumulate_in_fp32(dtype, reduces):
    gen = torch.Generator().manual_seed(3)
    ei = torch.randint(0, 200, (2, 3000), generator=gen)
    g = iognn.Graph(ei, 200)
    x = distinct_features(200, 33, gen, dtype).requires_grad_()
    out = segment_reduce(g, x, reduces)
    assert out.dtype == dtype
    x64 = x.detach().double().requires_grad_()
    ref = reference(ei, x64, reduces, 200)
    rtol, atol = tolerance(dtype)
    torch.testing.assert_close(out.double(), ref, rtol=rtol, atol=atol)
    grad = torch.randn(out.shape, generator=gen).to(dtype)
    got, = torch.autograd.grad(out, x, grad)
    exp, = torch.autograd.grad(ref, x64, grad.double())
    assert got.dtype == dtype
    torch.testing.assert_close(got.double(), exp, rtol=rtol, atol=atol)


def test_int32_and_int64_graphs_agree_bitwise():
    gen = torch.Generator().manual_seed(5)
    ei = torch.randint(0, 50, (2, 400), generator=gen)
    x = torch.randn(50, 8, generator=gen, requires_grad=True)
    g32, g64 = iognn.Graph(ei, 50), iognn.Graph(ei, 50, index_dtype=torch.int64)
    assert (g32.index_dtype, g64.index_dtype) == (torch.int32, torch.int64)
    reduces = FUSED[1]
    a, b = segment_reduce(g32, x, reduces), segment_reduce(g64, x, reduces)
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    grad = torch.randn(a.shape, generator=gen)
    ga, = torch.autograd.grad(a, x, grad)
    gb, = torch.autograd.grad(b, x, grad)
    torch.testing.assert_close(ga, gb, rtol=0, atol=0)
    _, amin32, amax32, _ = torch.ops.iognn.segment_reduce(*ops_args(g32, x.detach(), reduces))
    _, amin64, amax64, _ = torch.ops.iognn.segment_reduce(*ops_args(g64, x.detach(), reduces))
    assert amin32.dtype == torch.int32 and amin64.dtype == torch.int64
    assert torch.equal(amin32.long(), amin64) and torch.equal(amax32.long(), amax64)


def test_non_contiguous_features():
    gen = torch.Generator().manual_seed(6)
    ei = torch.randint(0, 40, (2, 300), generator=gen)
    g = iognn.Graph(ei, 40)
    wide = torch.randn(40, 20, dtype=torch.float64, generator=gen)
    xt = torch.randn(10, 40, dtype=torch.float64, generator=gen).t()
    for x in (wide[:, ::2], wide[:, 3:11], xt):  # feature stride 2, row stride 20, transposed
        x = x.detach().requires_grad_()
        out = segment_reduce(g, x, FUSED[1])
        ref = reference(ei, x, FUSED[1], 40)
        torch.testing.assert_close(out, ref)
        grad = torch.randn(out.shape, dtype=torch.float64, generator=gen)
        torch.testing.assert_close(torch.autograd.grad(out, x, grad)[0],
                                   torch.autograd.grad(ref, x, grad)[0])


@pytest.mark.parametrize("reduces", ALL_REDUCES, ids=REDUCE_IDS)
def test_gradcheck_fp64(reduces):
    gen = torch.Generator().manual_seed(9)
    ei = torch.randint(0, 8, (2, 30), generator=gen).unique(dim=1)  # no duplicate edges: no ties
    g = iognn.Graph(ei, (8, 8))
    x = torch.randn(8, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: segment_reduce(g, x, reduces), (x,))


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("reduces", [FUSED[1], ["max"]], ids=["all", "max"])
def test_opcheck(index_dtype, reduces):
    gen = torch.Generator().manual_seed(10)
    for ei, n in [(torch.randint(0, 12, (2, 50), generator=gen), 12),
                  (torch.empty(2, 0, dtype=torch.int64), 4)]:
        g = iognn.Graph(ei, n, index_dtype=index_dtype if index_dtype == torch.int64 else None)
        assert g.index_dtype == index_dtype
        x = torch.randn(n, 5, generator=gen, requires_grad=True)
        torch.library.opcheck(torch.ops.iognn.segment_reduce.default, ops_args(g, x, reduces))
        out, arg_min, arg_max, mean = torch.ops.iognn.segment_reduce(
            *ops_args(g, x.detach(), reduces))
        grad = torch.randn(out.shape, generator=gen)
        torch.library.opcheck(torch.ops.iognn.segment_reduce_backward.default,
                              (g.colptr, g.row, g.csc2csr, g.rowptr, x.detach(), out, arg_min,
                               arg_max, mean, grad, reduces))


def test_auxiliary_outputs():
    ei = torch.tensor([[0, 1, 2], [1, 1, 1]])
    g = iognn.Graph(ei, 3)
    x = torch.tensor([[1.0], [4.0], [-2.0]])
    out, arg_min, arg_max, mean = torch.ops.iognn.segment_reduce(*ops_args(g, x, ["std", "min"]))
    assert arg_min.tolist() == [[-1], [2], [-1]] and arg_max.numel() == 0
    torch.testing.assert_close(mean, torch.tensor([[0.0], [1.0], [0.0]]))
    assert not mean.requires_grad


def test_ties_go_to_the_first_edge_in_csr_order():
    # Destination 0 has in-edges from sources 3, 1, 0, 2, 0 (input order), i.e. CSR order 0, 0, 1,
    # 2, 3; destination 1 from sources 2, 1, i.e. CSR order 1, 2.
    ei = torch.tensor([[3, 1, 0, 2, 0, 2, 1], [0, 0, 0, 0, 0, 1, 1]])
    g = iognn.Graph(ei, 4)
    xs = torch.tensor([[7.0, -1.0], [5.0, -1.0], [5.0, -1.0], [5.0, 2.0]], dtype=torch.float64,
                      requires_grad=True)
    out = segment_reduce(g, xs, ["min", "max"])
    # Features: min f0, min f1, max f0, max f1.
    torch.testing.assert_close(out[:2], torch.tensor([[5.0, -1.0, 7.0, 2.0],
                                                      [5.0, -1.0, 5.0, -1.0]], dtype=torch.float64))
    grad_x, = torch.autograd.grad(out, xs, torch.ones_like(out))
    # min f0 of dst 0: tie among sources 1, 2, 3 -> source 1 (smallest id) takes it all; max f0:
    # source 0 (both of its edges, the first wins). dst 1 (sources 1, 2): source 1 wins every tie.
    # f1 of dst 0: min tie among sources 0, 1, 2 -> source 0; max -> source 3.
    expected = torch.tensor([[1.0, 1.0], [3.0, 2.0], [0.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    torch.testing.assert_close(grad_x, expected)
    # PyG's scatter_reduce backward splits a tie's gradient evenly instead (same total per row;
    # nonzero extrema here, as torch also counts the untouched zero fill of the output as a tie).
    ref = reference(ei, xs, ["min", "max"], 4)
    torch.testing.assert_close(out, ref)
    pyg_grad, = torch.autograd.grad(ref, xs, torch.ones_like(ref))
    assert not torch.equal(pyg_grad, grad_x)
    torch.testing.assert_close(pyg_grad.sum(0), grad_x.sum(0))


def test_nan_propagates_like_amax():
    ei = torch.tensor([[0, 1, 2, 3, 2], [0, 0, 0, 1, 1]])
    g = iognn.Graph(ei, 4)
    nan = float("nan")
    x = torch.tensor([[1.0, 1.0], [nan, 2.0], [nan, 0.0], [3.0, 5.0]], requires_grad=True)
    reduces = ["min", "max", "sum"]
    out = segment_reduce(g, x, reduces)
    ref = reference(ei, x, reduces, 4)
    torch.testing.assert_close(out, ref, equal_nan=True)
    assert out[0, 0].isnan() and out[0, 2].isnan() and out[0, 1] == 0.0 and out[0, 3] == 2.0
    _, arg_min, arg_max, _ = torch.ops.iognn.segment_reduce(*ops_args(g, x.detach(), reduces))
    # Row 0 holds sources 0, 1, 2 at CSR positions 0, 1, 2: the first NaN (source 1) wins; row 1
    # holds sources 2, 3 at positions 3, 4: source 2's NaN wins.
    assert arg_min[:2, 0].tolist() == [1, 3] and arg_max[:2, 0].tolist() == [1, 3]
    grad_x, = torch.autograd.grad(out[:, :4].sum(), x)
    assert grad_x[:, 0].tolist() == [0.0, 2.0, 2.0, 0.0]  # min and max both pick the NaN edges


def test_bad_inputs_raise_clear_errors():
    ei = torch.tensor([[0, 1, 2], [1, 2, 0]])
    g = iognn.Graph(ei, 3)
    x = torch.randn(3, 2)
    with pytest.raises(ValueError, match="reduce must be one or several"):
        segment_reduce(g, x, "median")
    with pytest.raises(ValueError, match="reduce names a reduction twice"):
        segment_reduce(g, x, ["max", "sum", "max"])
    with pytest.raises(ValueError, match="reduce must name at least one"):
        segment_reduce(g, x, [])
    with pytest.raises(TypeError, match="reduce must be a str or a sequence"):
        segment_reduce(g, x, 3)
    with pytest.raises(ValueError, match="x has 4 rows"):
        segment_reduce(g, torch.randn(4, 2), "sum")
    with pytest.raises(ValueError, match="x must be 2-D"):
        segment_reduce(g, torch.randn(3), "sum")
    with pytest.raises(TypeError, match="x must be float"):
        segment_reduce(g, torch.ones(3, 2, dtype=torch.int64), "sum")
    # The ops check their arguments too (for callers that bypass the wrapper).
    with pytest.raises(ValueError, match="unknown reduction 'median'"):
        torch.ops.iognn.segment_reduce(*ops_args(g, x, ["median"]))
    with pytest.raises(ValueError, match="'sum' is requested twice"):
        torch.ops.iognn.segment_reduce(*ops_args(g, x, ["sum", "sum"]))
    with pytest.raises(ValueError, match="x has 4 rows"):
        torch.ops.iognn.segment_reduce(*ops_args(g, torch.randn(4, 2), ["sum"]))
    with pytest.raises(TypeError, match="x must be float32"):
        torch.ops.iognn.segment_reduce(*ops_args(g, torch.ones(3, 2, dtype=torch.int32), ["sum"]))
    out, arg_min, arg_max, mean = torch.ops.iognn.segment_reduce(*ops_args(g, x, ["min", "var"]))
    bwd = (g.colptr, g.row, g.csc2csr, g.rowptr, x, out, arg_min, arg_max, mean, out)
    with pytest.raises(ValueError, match="arg_min has 2 rows"):
        torch.ops.iognn.segment_reduce_backward(*bwd[:6], arg_min[:2], *bwd[7:], ["min", "var"])
    with pytest.raises(TypeError, match="mean must have dtype"):
        torch.ops.iognn.segment_reduce_backward(*bwd[:8], mean.double(), bwd[9], ["min", "var"])
    with pytest.raises(ValueError, match="grad_out has 2 features"):
        torch.ops.iognn.segment_reduce_backward(*bwd[:9], out[:, :2], ["min", "var"])
    # The process stays usable after an error.
    assert segment_reduce(g, x, ["sum", "std"]).shape == (3, 4)
