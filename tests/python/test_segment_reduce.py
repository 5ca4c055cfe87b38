"""iognn.ops.segment_reduce against PyG 2.8's aggregation modules on x[src] (CPU)."""
import pytest
import torch
from torch_geometric.nn import aggr

import iognn
from iognn.ops.segment_reduce import segment_reduce

from conftest import GRAPH_CASES, long_tie_rows, sizes, tie_codes, tie_counts, tolerance

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


def tied_features(num_src, F, gen, dtype):
    """Small integers (exact in every dtype, 0 included): most rows tie under min and max, and
    many extrema are 0, where torch also counts the output's zero fill as a tied element."""
    return torch.randint(-2, 3, (num_src, F), generator=gen).to(dtype)


def ops_args(g, x, reduces):
    return (g.rowptr, g.col, g.colptr, g.row, g.csc2csr, x, reduces)


def backward_args(g, x, fwd, grad, reduces):
    out, ties, wide, mean, _ = fwd
    return (g.colptr, g.row, g.csc2csr, g.rowptr, x, out, ties, wide, mean, grad, reduces)


def counts_of(g, x, reduces):
    """The min / max holder counts [num_dst, n, F] of the forward op."""
    _, ties, wide, _, _ = torch.ops.iognn.segment_reduce(*ops_args(g, x.detach(), reduces))
    return tie_counts(ties, wide, g.rowptr)


def assert_matches_pyg(g, edge_index, x, reduces, num_dst, grad, tol=None):
    """Output and grad_x of segment_reduce equal PyG's (NaN where PyG has NaN)."""
    rtol, atol = tol or tolerance(torch.float64)
    x = x.detach().requires_grad_()
    out = segment_reduce(g, x, reduces)
    ref = reference(edge_index, x, reduces, num_dst)
    torch.testing.assert_close(out, ref, rtol=rtol, atol=atol, equal_nan=True)
    if out.numel() == 0:
        return
    got, = torch.autograd.grad(out, x, grad)
    exp, = torch.autograd.grad(ref, x, grad)
    torch.testing.assert_close(got, exp, rtol=rtol, atol=atol, equal_nan=True)


def assert_matches_fp64_pyg(edge_index, x, out, reduces, num_dst, gen):
    """out = segment_reduce(..., x) in x's dtype against PyG in fp64 on the same values (the
    dtype's tolerance), then grad_x for a random output gradient drawn from `gen`."""
    dtype = x.dtype
    x64 = x.detach().double().requires_grad_()
    ref = reference(edge_index, x64, reduces, num_dst)
    rtol, atol = tolerance(dtype)
    torch.testing.assert_close(out.double(), ref, rtol=rtol, atol=atol)
    grad = torch.randn(out.shape, generator=gen).to(dtype)
    got, = torch.autograd.grad(out, x, grad)
    exp, = torch.autograd.grad(ref, x64, grad.double())
    assert got.dtype == dtype
    torch.testing.assert_close(got.double(), exp, rtol=rtol, atol=atol)


@pytest.mark.parametrize("values", ["continuous", "tied"])
@pytest.mark.parametrize("reduces", ALL_REDUCES, ids=REDUCE_IDS)
def test_matches_pyg_on_every_graph_case(graph_case, reduces, values):
    name, edge_index, size = graph_case
    num_src, num_dst = sizes(size)
    g = iognn.Graph(edge_index, size)
    gen = torch.Generator().manual_seed(0)
    # continuous: ties only between duplicate edges; tied: most extrema shared by several edges.
    x = (torch.randn(num_src, 5, dtype=torch.float64, generator=gen) if values == "continuous"
         else tied_features(num_src, 5, gen, torch.float64))
    assert segment_reduce(g, x, reduces).shape == (num_dst, 5 * len(reduces))
    grad = torch.randn(num_dst, 5 * len(reduces), dtype=torch.float64, generator=gen)
    assert_matches_pyg(g, edge_index, x, reduces, num_dst, grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reduces", FUSED[1:], ids=REDUCE_IDS[-1:])
def test_dtypes_accumulate_in_fp32(dtype, reduces):
    gen = torch.Generator().manual_seed(3)
    ei = torch.randint(0, 200, (2, 3000), generator=gen)
    g = iognn.Graph(ei, 200)
    x = distinct_features(200, 33, gen, dtype).requires_grad_()
    out = segment_reduce(g, x, reduces)
    assert out.dtype == dtype
    assert_matches_fp64_pyg(ei, x, out, reduces, 200, gen)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduces", [["min"], ["max"], FUSED[0], FUSED[1]],
                         ids=["min", "max", "fused4", "fused6"])
def test_ties_match_pyg_in_every_dtype(dtype, reduces):
    # PyG in fp64 on the same (exact) values: identical extrema and tie sets in every dtype.
    gen = torch.Generator().manual_seed(4)
    ei = torch.cat([torch.randint(0, 60, (2, 700), generator=gen),
                    torch.randint(0, 60, (2, 40), generator=gen).repeat(1, 3)], 1)  # duplicates
    g = iognn.Graph(ei, 60)
    x = tied_features(60, 9, gen, dtype).requires_grad_()
    out = segment_reduce(g, x, reduces)
    assert_matches_fp64_pyg(ei, x, out, reduces, 60, gen)


@pytest.mark.parametrize("fill", [0.5, 0.0, -0.0])
def test_rows_of_equal_values_match_pyg(fill):
    # Every message of a row equal: the gradient is split over the whole row (plus the zero fill
    # when the value is 0), duplicates and the 5,000-in-edge super-node included.
    _, ei, size = next(c for c in GRAPH_CASES if c[0] == "supernode")
    ei = torch.cat([ei, ei[:, :300]], 1)
    g = iognn.Graph(ei, size)
    x = torch.full((size, 3), fill, dtype=torch.float64)
    grad = torch.randn(size, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    assert_matches_pyg(g, ei, x, ["min", "max"], size, grad)


def test_int32_and_int64_graphs_agree_bitwise():
    gen = torch.Generator().manual_seed(5)
    ei = torch.randint(0, 50, (2, 400), generator=gen)
    x = tied_features(50, 8, gen, torch.float32).requires_grad_()
    g32, g64 = iognn.Graph(ei, 50), iognn.Graph(ei, 50, index_dtype=torch.int64)
    assert (g32.index_dtype, g64.index_dtype) == (torch.int32, torch.int64)
    reduces = FUSED[1]
    a, b = segment_reduce(g32, x, reduces), segment_reduce(g64, x, reduces)
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    grad = torch.randn(a.shape, generator=gen)
    ga, = torch.autograd.grad(a, x, grad)
    gb, = torch.autograd.grad(b, x, grad)
    torch.testing.assert_close(ga, gb, rtol=0, atol=0)
    t32 = torch.ops.iognn.segment_reduce(*ops_args(g32, x.detach(), reduces))[1]
    t64 = torch.ops.iognn.segment_reduce(*ops_args(g64, x.detach(), reduces))[1]
    assert t32.dtype == t64.dtype == torch.uint8 and t32.shape == (2, 50, 2, 8)
    assert torch.equal(t32, t64)
    assert int(counts_of(g64, x, reduces).max()) > 1  # the features do tie


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
        fwd = torch.ops.iognn.segment_reduce(*ops_args(g, x.detach(), reduces))
        grad = torch.randn(fwd[0].shape, generator=gen)
        torch.library.opcheck(torch.ops.iognn.segment_reduce_backward.default,
                              backward_args(g, x.detach(), fwd, grad, reduces))


def test_double_backward_raises():
    g = iognn.Graph(torch.tensor([[0, 1, 2, 0], [1, 2, 0, 1]]), 3)
    x = torch.randn(3, 4, requires_grad=True)
    (grad_x,) = torch.autograd.grad(segment_reduce(g, x, ["max", "std"]).pow(2).sum(), x,
                                    create_graph=True)
    with pytest.raises(RuntimeError, match="derivative for iognn::segment_reduce_backward"):
        grad_x.sum().backward()


def test_auxiliary_outputs():
    ei = torch.tensor([[0, 1, 2, 3], [1, 1, 1, 1]])
    g = iognn.Graph(ei, 4)
    x = torch.tensor([[1.0], [4.0], [-2.0], [4.0]])
    # Row 1 (in-edges from sources 0, 1, 2, 3): min -2 held by its third edge alone, max 4 by two
    # edges; empty rows have no holder. A sole holder is named by its position (code 2), ties are
    # tagged with their count, with or without other reductions. The min comes first whatever the
    # request order.
    _, ties, wide, _, _ = torch.ops.iognn.segment_reduce(*ops_args(g, x, ["max", "min"]))
    assert ties.dtype == torch.uint8 and ties.shape == (2, 4, 2, 1)
    assert tie_codes(ties)[:, :, 0].tolist() == [[0x8000, 0x8000], [2, 0x8002],
                                                 [0x8000, 0x8000], [0x8000, 0x8000]]
    assert wide.dtype == torch.int64 and wide.shape == (2, 0, 1)  # 4 edges: no count saturates
    _, ties, wide, mean, plain = torch.ops.iognn.segment_reduce(
        *ops_args(g, x, ["std", "max", "min"]))
    assert tie_codes(ties)[:, :, 0].tolist() == [[0x8000, 0x8000], [2, 0x8002],
                                                 [0x8000, 0x8000], [0x8000, 0x8000]]
    torch.testing.assert_close(mean, torch.tensor([[0.0], [1.75], [0.0], [0.0]]))
    assert not mean.requires_grad and not ties.requires_grad
    assert plain.numel() == 0  # no degree scalers
    _, ties, wide, mean, _ = torch.ops.iognn.segment_reduce(*ops_args(g, x, ["sum"]))
    assert ties.numel() == wide.numel() == mean.numel() == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_mean_output_only_where_the_results_lack_it(dtype):
    # var / std keep the per-row mean for the backward: in the results when the mean is requested
    # too and x is of its own accumulation dtype (fp32, fp64), else as the mean output. Either way
    # the gradient is that of the reductions called one by one.
    gen = torch.Generator().manual_seed(44)
    n, F = 30, 6
    g = iognn.Graph(torch.randint(0, n, (2, 200), generator=gen), n)
    x = torch.randn(n, F, generator=gen).to(dtype)
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    expected_mean = torch.ops.iognn.segment_reduce(*ops_args(g, x.double(), ["mean"]))[0]
    for reduces in (["mean", "std"], ["var", "sum", "mean"], ["std"], ["var", "max"]):
        fwd = torch.ops.iognn.segment_reduce(*ops_args(g, x, reduces))
        out, mean = fwd[0], fwd[3]
        assert mean.dtype == acc
        if "mean" in reduces and acc == dtype:
            assert mean.numel() == 0
        else:
            assert mean.shape == (n, F)
            rtol, atol = tolerance(dtype)
            torch.testing.assert_close(mean.double(), expected_mean, rtol=rtol, atol=atol)
        grad = torch.randn(out.shape, generator=gen).to(dtype)
        grad_x = torch.ops.iognn.segment_reduce_backward(*backward_args(g, x, fwd, grad, reduces))
        one_by_one = sum(
            torch.ops.iognn.segment_reduce_backward(*backward_args(
                g, x.double(), torch.ops.iognn.segment_reduce(*ops_args(g, x.double(), [r])),
                grad[:, k * F:(k + 1) * F].double(), [r]))
            for k, r in enumerate(reduces))
        rtol, atol = tolerance(dtype)
        torch.testing.assert_close(grad_x.double(), one_by_one, rtol=rtol, atol=atol)


def test_ties_split_the_gradient_evenly_like_pyg():
    # Destination 0 has in-edges from sources 3, 1, 0, 2, 0 (CSR order 0, 0, 1, 2, 3);
    # destination 1 from sources 2, 1; destinations 2 and 3 have none.
    ei = torch.tensor([[3, 1, 0, 2, 0, 2, 1], [0, 0, 0, 0, 0, 1, 1]])
    g = iognn.Graph(ei, 4)
    x = torch.tensor([[7.0, -1.0], [5.0, -1.0], [5.0, -1.0], [5.0, 2.0]], dtype=torch.float64)
    out = segment_reduce(g, x, ["min", "max"])  # columns: min f0, min f1, max f0, max f1
    torch.testing.assert_close(out, torch.tensor([[5.0, -1.0, 7.0, 2.0], [5.0, -1.0, 5.0, -1.0],
                                                  [0.0] * 4, [0.0] * 4], dtype=torch.float64))
    counts = counts_of(g, x, ["min", "max"])
    assert counts[:, 0].tolist() == [[3, 4], [2, 2], [0, 0], [0, 0]]  # min
    assert counts[:, 1].tolist() == [[2, 1], [2, 2], [0, 0], [0, 0]]  # max
    # dst 0: min f0 = 5 shared by sources 1, 2, 3 (1/3 each); max f0 = 7 by both edges of source
    # 0 (1/2 each); min f1 = -1 by sources 0 (twice), 1, 2 (1/4 per edge); max f1 = 2 by source 3.
    # dst 1: sources 1 and 2 tie on everything (1/2 each, min and max).
    expected = torch.tensor([[1.0, 0.5], [1 / 3 + 1, 0.25 + 1], [1 / 3 + 1, 0.25 + 1],
                             [1 / 3, 1.0]], dtype=torch.float64)
    x.requires_grad_()
    ones = torch.ones(4, 4, dtype=torch.float64)
    grad_x, = torch.autograd.grad(segment_reduce(g, x, ["min", "max"]), x, ones)
    torch.testing.assert_close(grad_x, expected)
    assert_matches_pyg(g, ei, x, ["min", "max"], 4, ones)


def test_tie_codes_past_their_16_bit_limits():
    # 40,000 ties per row (saturated codes, exact counts in the wide table) and a sole holder at
    # position 36,000 (tagged, count 1): the gradients still equal PyG's.
    ei, x = long_tie_rows()
    g = iognn.Graph(ei, 40_000)
    _, ties, wide, _, _ = torch.ops.iognn.segment_reduce(*ops_args(g, x, ["min", "max"]))
    codes = tie_codes(ties)
    assert codes[:2, :, 0].tolist() == [[0xFFFF, 0xFFFF], [0xFFFF, 0xFFFF]]
    assert wide.shape == (2, 80_003 // 0x7FFF, 2)
    assert wide[:, :2, 0].tolist() == [[40_000, 40_000], [40_000, 40_000]]
    assert codes[:2, :, 1].tolist() == [[0x8001, 0], [0x8001, 0]]
    assert tie_counts(ties, wide, g.rowptr)[2].tolist() == [[3, 1], [3, 1]]  # [min, max][f]
    grad = torch.rand(40_000, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    assert_matches_pyg(g, ei, x, ["min", "max"], 40_000, grad)


def test_zero_result_counts_the_fill_as_a_tie():
    # torch's scatter_reduce backward compares the zero-filled output with the result: a result
    # of exactly 0 (either sign) has one more tied element, whose share goes nowhere.
    ei = torch.tensor([[0, 1, 2, 3, 4], [0, 0, 0, 1, 1]])
    g = iognn.Graph(ei, 5)
    x = torch.tensor([[0.0], [-0.0], [-1.0], [0.0], [3.0]], dtype=torch.float64)
    grad = torch.tensor([[6.0, 12.0], [6.0, 12.0]] + [[1.0, 1.0]] * 3, dtype=torch.float64)
    x.requires_grad_()
    grad_x, = torch.autograd.grad(segment_reduce(g, x, ["min", "max"]), x, grad)
    # dst 0 max 0 held by sources 0 and 1 (+ the fill): 12 / 3 each; min -1 by source 2 alone.
    # dst 1 min 0 held by source 3 (+ the fill): 6 / 2; max 3 by source 4.
    assert grad_x.flatten().tolist() == [4.0, 4.0, 6.0, 3.0, 12.0]
    assert_matches_pyg(g, ei, x, ["min", "max"], 5, grad)


def test_nan_propagates_like_amax():
    ei = torch.tensor([[0, 1, 2, 3, 2], [0, 0, 0, 1, 1]])
    g = iognn.Graph(ei, 4)
    nan = float("nan")
    x = torch.tensor([[1.0, 1.0], [nan, 2.0], [nan, 0.0], [3.0, 5.0]], requires_grad=True)
    reduces = ["min", "max", "sum"]
    out = segment_reduce(g, x, reduces)
    assert out[0, 0].isnan() and out[0, 2].isnan() and out[0, 1] == 0.0 and out[0, 3] == 2.0
    counts = counts_of(g, x, reduces)
    assert counts[:2, :, 0].tolist() == [[0, 0], [0, 0]]  # NaN results: tagged, no holder
    # As in torch, a NaN result sends NaN to every in-edge of its row (here rows 0 and 1, f0).
    grad_x, = torch.autograd.grad(out[:, :4].sum(), x)
    assert grad_x[:, 0].isnan().all()
    # f1: dst 0 min 0 (+ the fill) and dst 1 min 0 (+ the fill) give source 2 1/2 each
    assert grad_x[:, 1].tolist() == [0.0, 1.0, 1.0, 1.0]
    assert_matches_pyg(g, ei, x, reduces, 4, torch.randn(4, 6), tolerance(torch.float32))


@pytest.mark.parametrize("reduces", [["min"], ["max"], ["max", "min", "sum"]],
                         ids=["min", "max", "max+min+sum"])
def test_infinite_values_match_pyg(reduces):
    # +-inf is the fold's identity: an extremum of +-inf held by the row's first edge, by a later
    # edge after finite ones, by several edges (duplicates included), next to NaN and finite values.
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[inf, -inf, inf, nan], [5.0, -inf, inf, inf], [inf, 2.0, inf, -inf],
                      [-inf, inf, inf, 1.0]], requires_grad=True)
    ei = torch.tensor([[0, 1, 1, 0, 2, 0, 2, 3, 3, 3, 2],
                       [0, 0, 1, 1, 2, 3, 3, 3, 4, 4, 5]])
    g = iognn.Graph(ei, (4, 7))  # destination 6: no in-edges
    out = segment_reduce(g, x, reduces)
    if reduces == ["min"]:  # row 2 (one edge, +inf): the first edge is the sole holder
        assert out[2].tolist()[:3] == [inf, 2.0, inf] and out[0, 0] == 5.0
        _, ties, _, _, _ = torch.ops.iognn.segment_reduce(*ops_args(g, x.detach(), reduces))
        assert tie_codes(ties)[2, 0, 0] == 0
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(3))
    assert_matches_pyg(g, ei, x, reduces, 7, grad, tolerance(torch.float32))


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
    reduces = ["min", "var"]
    fwd = torch.ops.iognn.segment_reduce(*ops_args(g, x, reduces))
    bwd = backward_args(g, x, fwd, fwd[0], reduces)[:-1]
    ties, wide, mean = fwd[1], fwd[2], fwd[3]
    with pytest.raises(ValueError, match="ties has 2 rows"):
        torch.ops.iognn.segment_reduce_backward(*bwd[:6], ties[:, :2], *bwd[7:], reduces)
    with pytest.raises(ValueError, match="ties has 1 byte planes"):
        torch.ops.iognn.segment_reduce_backward(*bwd[:6], ties[:1], *bwd[7:], reduces)
    with pytest.raises(TypeError, match="ties must have dtype Byte"):
        torch.ops.iognn.segment_reduce_backward(*bwd[:6], ties.int(), *bwd[7:], reduces)
    with pytest.raises(ValueError, match="ties must be 4-D"):
        torch.ops.iognn.segment_reduce_backward(*bwd[:6], ties[0], *bwd[7:], reduces)
    with pytest.raises(ValueError, match="wide has 2 extrema"):
        torch.ops.iognn.segment_reduce_backward(*bwd[:7], wide.expand(2, -1, -1), *bwd[8:],
                                                reduces)
    with pytest.raises(TypeError, match="mean must have dtype"):
        torch.ops.iognn.segment_reduce_backward(*bwd[:8], mean.double(), bwd[9], reduces)
    with pytest.raises(ValueError, match="grad_out has 2 features"):
        torch.ops.iognn.segment_reduce_backward(*bwd[:9], fwd[0][:, :2], reduces)
    with pytest.raises(ValueError, match="csc2csr must have one entry per edge"):
        torch.ops.iognn.segment_reduce_backward(bwd[0], bwd[1], bwd[2][:1], *bwd[3:], reduces)
    # The process stays usable after an error.
    assert segment_reduce(g, x, ["sum", "std"]).shape == (3, 4)


# ---- degree scalers (PNA) in the epilogue ---------------------------------------------------
def unfused_scaling(out, scale):
    """PyG's DegreeScalerAggregation arithmetic on the unscaled results: cat_s(out * scale_s)."""
    return torch.cat([out * scale[:, s:s + 1] for s in range(scale.size(1))], dim=1)


def degree_like_scale(g, dtype, gen):
    """[N, 3] factors like PNA's (identity, amplification, a random positive one), in dtype."""
    deg = g.degree("in").to(dtype)
    return torch.stack([torch.ones_like(deg), torch.log(deg + 1) / 2.5,
                        torch.rand(deg.shape, generator=gen).to(dtype) + 0.5], dim=1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduces", [["max"], FUSED[0], FUSED[1]], ids=["max", "pna", "all"])
def test_degree_scales_equal_torch_scaling_bitwise(graph_case, dtype, reduces):
    """Block s of the scaled output is exactly torch's `results * scale[:, s]` in x's dtype."""
    name, edge_index, size = graph_case
    num_src, num_dst = sizes(size)
    g = iognn.Graph(edge_index, size)
    gen = torch.Generator().manual_seed(40)
    x = torch.randn(num_src, 6, generator=gen).to(dtype)
    scale = degree_like_scale(g, dtype, gen)
    out = segment_reduce(g, x, reduces, scale)
    assert out.shape == (num_dst, 3 * len(reduces) * 6) and out.dtype == dtype
    assert torch.equal(out, unfused_scaling(segment_reduce(g, x, reduces), scale))


@pytest.mark.parametrize("dtype", DTYPES)
def test_degree_scales_gradients_match_unfused(dtype):
    name, edge_index, size = GRAPH_CASES[5]  # self-loops and duplicate edges
    g = iognn.Graph(edge_index, size)
    gen = torch.Generator().manual_seed(41)
    reduces = FUSED[1]
    x = tied_features(size, 4, gen, dtype).requires_grad_()  # ties split the min / max gradient
    scale = degree_like_scale(g, dtype, gen).requires_grad_()
    grad = torch.randn(size, 3 * len(reduces) * 4, generator=gen).to(dtype)
    fused = torch.autograd.grad(segment_reduce(g, x, reduces, scale), (x, scale), grad)
    unfused = torch.autograd.grad(unfused_scaling(segment_reduce(g, x, reduces), scale),
                                  (x, scale), grad)
    rtol, atol = tolerance(dtype)
    for ours, theirs in zip(fused, unfused):
        torch.testing.assert_close(ours, theirs, rtol=rtol, atol=atol * 10)


@pytest.mark.parametrize("reduces", [["min"], ["mean", "std"], FUSED[1]],
                         ids=["min", "mean+std", "all"])
def test_degree_scales_gradcheck_fp64(reduces):
    gen = torch.Generator().manual_seed(42)
    g = iognn.Graph(torch.randint(0, 7, (2, 25), generator=gen), 9)  # nodes 7, 8 isolated
    # distinct and non-zero: a zero min / max would count the fill as a tie (half the gradient)
    x = (distinct_features(9, 3, gen, torch.float64) + 1 / 32).requires_grad_()
    scale = (torch.rand(9, 2, generator=gen, dtype=torch.float64) + 0.5).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, s: segment_reduce(g, x, reduces, s), (x, scale))


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_degree_scales_opcheck(index_dtype):
    gen = torch.Generator().manual_seed(43)
    for ei, n in [(torch.randint(0, 12, (2, 50), generator=gen), 12),
                  (torch.empty(2, 0, dtype=torch.int64), 4)]:
        g = iognn.Graph(ei, n, index_dtype=index_dtype if index_dtype == torch.int64 else None)
        x = torch.randn(n, 5, generator=gen, requires_grad=True)
        scale = torch.rand(n, 3, generator=gen, requires_grad=True)
        reduces = FUSED[1]
        torch.library.opcheck(torch.ops.iognn.segment_reduce.default,
                              ops_args(g, x, reduces) + (scale,))
        fwd = torch.ops.iognn.segment_reduce(*ops_args(g, x.detach(), reduces), scale.detach())
        assert fwd[4].shape == (n, len(reduces) * 5)  # the plain results
        grad = torch.randn(fwd[0].shape, generator=gen)
        args = (g.colptr, g.row, g.csc2csr, g.rowptr, x.detach(), fwd[4], *fwd[1:4], grad,
                reduces, scale.detach())
        torch.library.opcheck(torch.ops.iognn.segment_reduce_backward.default, args)


def test_degree_scales_non_contiguous_and_bad_inputs():
    g = iognn.Graph(torch.tensor([[0, 1, 2, 2], [1, 1, 0, 2]]), 3)
    x = torch.randn(3, 2)
    wide = torch.rand(3, 4)
    out = segment_reduce(g, x, ["mean", "max"], wide[:, ::2])  # a strided [3, 2] view
    assert torch.equal(out, unfused_scaling(segment_reduce(g, x, ["mean", "max"]),
                                            wide[:, ::2].contiguous()))
    with pytest.raises(ValueError, match=r"scale must have shape \[num_dst_nodes=3"):
        segment_reduce(g, x, "sum", torch.rand(2, 2))
    with pytest.raises(ValueError, match="scale must have shape"):
        segment_reduce(g, x, "sum", torch.rand(3, 0))
    with pytest.raises(ValueError, match="scale must have shape"):
        segment_reduce(g, x, "sum", torch.rand(3))
    with pytest.raises(TypeError, match="scale must have the dtype of x"):
        segment_reduce(g, x, "sum", torch.rand(3, 2, dtype=torch.float64))
    with pytest.raises(TypeError, match="scale must be a Tensor"):
        segment_reduce(g, x, "sum", [[1.0]] * 3)
    # The ops check scale too (for callers that bypass the wrapper).
    with pytest.raises(ValueError, match="scale has 2 rows"):
        torch.ops.iognn.segment_reduce(*ops_args(g, x, ["sum"]), torch.rand(2, 2))
    with pytest.raises(TypeError, match="scale must have dtype"):
        torch.ops.iognn.segment_reduce(*ops_args(g, x, ["sum"]), torch.rand(3, 2).double())
    with pytest.raises(ValueError, match="scale must have at least one column"):
        torch.ops.iognn.segment_reduce(*ops_args(g, x, ["sum"]), torch.rand(3, 0))
    fwd = torch.ops.iognn.segment_reduce(*ops_args(g, x, ["sum"]), torch.rand(3, 2))
    with pytest.raises(ValueError, match="grad_out has 2 features"):  # expects S * K * F = 4
        torch.ops.iognn.segment_reduce_backward(g.colptr, g.row, g.csc2csr, g.rowptr, x, fwd[4],
                                                *fwd[1:4], fwd[4], ["sum"], torch.rand(3, 2))
