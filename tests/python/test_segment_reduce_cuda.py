"""iognn::segment_reduce(_backward) on CUDA against the CPU op (itself tested against PyG).

Every comparison covers the outputs, the ties / wide / mean auxiliary tensors and grad_x. The
reference is the CPU op in fp64 on the same (rounded) values, so min / max values and their tie
codes must match exactly in every dtype; the CPU op itself equals PyG, ties included
(test_segment_reduce.py), and PyG on CUDA is compared directly too. Graphs with rows of degree in
the thousands or the millions go through the split-and-merge path of the CUDA kernels (heavy
rows), the others through the one-group-per-row path; both are checked for bit-identical reruns.
"""
import pytest
import torch

import iognn
from iognn.ops.segment_reduce import segment_reduce

from conftest import long_tie_rows, random_edge_index, sizes, tie_codes, tie_counts, tolerance

pytestmark = pytest.mark.cuda

SINGLE = ["sum", "mean", "min", "max", "var", "std"]
FUSED = [["min", "max", "mean", "std"], ["sum", "mean", "var", "std", "min", "max"]]
ALL_REDUCES = [[r] for r in SINGLE] + FUSED
REDUCE_IDS = ["+".join(r) for r in ALL_REDUCES]
ALL_SIX = FUSED[1]


# ---- helpers ------------------------------------------------------------------------------------
def poison_allocator():
    """Leaves NaN-filled blocks in the caching allocator, so outputs a kernel forgets to write show up
    as NaN in the comparisons instead of as stale correct-looking values."""
    blocks = [torch.full((n,), float("nan"), device="cuda") for n in (1 << 24, 1 << 18, 1 << 12)]
    del blocks


def run_op(g, x, reduces, grad):
    """(out, ties, wide, mean, grad_x) of the forward and backward ops on g's device."""
    out, ties, wide, mean, _ = torch.ops.iognn.segment_reduce(
        g.rowptr, g.col, g.colptr, g.row, g.csc2csr, x, reduces)
    grad_x = torch.ops.iognn.segment_reduce_backward(
        g.colptr, g.row, g.csc2csr, g.rowptr, x, out, ties, wide, mean, grad, reduces)
    return out, ties, wide, mean, grad_x


def mean_rows(out, mean, reduces, F):
    """The per-row mean of var / std that the backward reads: the mean output, or the results'
    mean slot when they hold it (the mean output is then empty)."""
    if mean.numel() > 0 or "mean" not in reduces:
        return mean
    k = reduces.index("mean")
    return out[:, k * F:(k + 1) * F]


def counts(g, got):
    """The min / max holder counts [num_dst, n, F] of run_op's results (on the CPU)."""
    return tie_counts(got[1].cpu(), got[2].cpu(), g.rowptr.cpu())


def fp32_atol(g):
    """Absolute tolerance of fp32 results on g: sums over rows of hundreds or more edges (or grad_x
    sums over as many out-edges), which cancel, carry absolute errors up to ~1e-3 in fp32."""
    longest = max(int(ptr.diff().max()) if ptr.numel() > 1 else 0 for ptr in (g.rowptr, g.colptr))
    return 5e-3 if longest >= 200 else tolerance(torch.float32)[1]


def check_against_cpu(g, x, reduces, seed=0, grad=None, tol=None):
    """Runs the CUDA ops on x (any dtype, on the CPU; moved here) and compares every result with the
    CPU ops on x.double() (within tol = (rtol, atol) when given). Returns the CUDA results."""
    gen = torch.Generator().manual_seed(seed)
    num_dst = g.rowptr.numel() - 1
    if grad is None:
        grad = torch.randn(num_dst, len(reduces) * x.size(1), generator=gen).to(x.dtype)
    poison_allocator()
    got = run_op(g.to("cuda"), x.cuda(), reduces, grad.cuda())
    torch.cuda.synchronize()
    ref = run_op(g, x.double(), reduces, grad.double())
    rtol, atol = tolerance(x.dtype)
    if x.dtype == torch.float32:
        atol = fp32_atol(g)
    if tol is not None:
        rtol, atol = tol
    out, ties, wide, mean, grad_x = (t.cpu() for t in got)
    assert out.dtype == x.dtype and grad_x.dtype == x.dtype
    torch.testing.assert_close(out.double(), ref[0], rtol=rtol, atol=atol, equal_nan=True)
    assert torch.equal(ties, ref[1]), "tie codes differ"
    assert torch.equal(wide, ref[2]), "wide tie counts differ"
    assert mean.dtype == (torch.float64 if x.dtype == torch.float64 else torch.float32)
    F = x.size(1)
    torch.testing.assert_close(mean_rows(out, mean, reduces, F).double(),
                               mean_rows(ref[0], ref[3], reduces, F), rtol=rtol, atol=atol,
                               equal_nan=True)
    torch.testing.assert_close(grad_x.double(), ref[4], rtol=rtol, atol=atol, equal_nan=True)
    return got


def distinct_features(num_src, F, gen, dtype):
    """Columns of distinct multiples of 1/16 (exact in fp16 and bf16 for num_src <= 512): no
    min / max ties between different sources, no var close to the std clamp."""
    cols = [torch.randperm(num_src, generator=gen) for _ in range(F)]
    return ((torch.stack(cols, 1) - num_src // 2) / 16.0).to(dtype)


def tied_features(num_src, F, gen, dtype):
    """Small integers (exact in every dtype, 0 included): most rows tie under min and max, and
    many extrema are 0, where the output's zero fill counts as a tie too."""
    return torch.randint(-2, 3, (num_src, F), generator=gen).to(dtype)


def graph_with_hubs(num_nodes, degrees, extra_edges, seed, out_degrees=(), index_dtype=None):
    """A square graph whose destinations 0, 1, ... have the given in-degrees (random sources), whose
    sources num_nodes - 1, num_nodes - 2, ... have the given out-degrees (random destinations), plus
    extra_edges random edges."""
    gen = torch.Generator().manual_seed(seed)
    parts = [random_edge_index(num_nodes, num_nodes, extra_edges, gen)]
    for dst, deg in enumerate(degrees):
        src = torch.randint(0, num_nodes, (deg,), generator=gen)
        parts.append(torch.stack([src, torch.full_like(src, dst)]))
    for k, deg in enumerate(out_degrees):
        dst = torch.randint(0, num_nodes, (deg,), generator=gen)
        parts.append(torch.stack([torch.full_like(dst, num_nodes - 1 - k), dst]))
    return iognn.Graph(torch.cat(parts, 1), num_nodes, index_dtype=index_dtype)


# Degrees around every plausible light/heavy threshold and segment boundary (multiples of 128),
# used as in-degrees (forward rows) and out-degrees (backward rows).
BOUNDARY_DEGREES = [127, 128, 129, 255, 256, 257, 383, 384, 385, 1000, 4097]


def boundary_graph(num_nodes, extra_edges, seed, index_dtype=None):
    return graph_with_hubs(num_nodes, BOUNDARY_DEGREES, extra_edges, seed,
                           out_degrees=BOUNDARY_DEGREES, index_dtype=index_dtype)


# ---- parity with the CPU op -----------------------------------------------------------------------
@pytest.mark.parametrize("reduces", ALL_REDUCES, ids=REDUCE_IDS)
def test_matches_cpu_on_every_graph_case(graph_case, reduces):
    name, edge_index, size = graph_case
    num_src, _ = sizes(size)
    g = iognn.Graph(edge_index, size)
    gen = torch.Generator().manual_seed(0)
    for x in (torch.randn(num_src, 5, dtype=torch.float64, generator=gen),   # one element per lane
              torch.randn(num_src, 8, dtype=torch.float64, generator=gen),   # 16-byte packs
              tied_features(num_src, 5, gen, torch.float64),                 # ties, per element
              tied_features(num_src, 8, gen, torch.float64)):                # ties, packed
        check_against_cpu(g, x, reduces)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reduces", [["min"], ["max"], FUSED[0], ALL_SIX],
                         ids=["min", "max", "fused4", "all"])
def test_ties_in_every_dtype(dtype, reduces):
    # Rows of every degree around the light/heavy thresholds (split rows merge their counts).
    g = boundary_graph(400, 3000, seed=31)
    gen = torch.Generator().manual_seed(32)
    check_against_cpu(g, tied_features(400, 24, gen, dtype), reduces)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reduces", ALL_REDUCES, ids=REDUCE_IDS)
def test_dtypes_against_fp64(dtype, reduces):
    g = boundary_graph(400, 3000, seed=1)
    gen = torch.Generator().manual_seed(2)
    check_against_cpu(g, distinct_features(400, 24, gen, dtype), reduces)


# Widths whose last chunk of a row fills only part of a group of lanes (33 one-wide lanes; 40 and
# 200 fp32 features: 10 of 16 lanes, 18 of 32), which the min / max-only backward's index tiles
# must leave out of their shuffles.
@pytest.mark.parametrize("F", [1, 3, 8, 32, 33, 40, 128, 200, 256])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize("reduces", [ALL_SIX, ["min"], ["max", "min"]], ids=["all", "min", "max+min"])
def test_feature_widths(F, dtype, reduces):
    g = boundary_graph(300, 2000, seed=3)
    gen = torch.Generator().manual_seed(4)
    check_against_cpu(g, distinct_features(300, F, gen, dtype), reduces)


# Degrees that start, fill and overflow the edge batches of the kernels (4 gathers in flight in the
# forward, 1 or 2 edges in the min / max backward) and the index tiles of the min / max-only
# backward (one edge per lane of a group: 2, 16 or 32 lanes at these widths), as in-degrees and
# out-degrees, on a sparse graph (most rows 0-3 edges); sole holders and ties.
BATCH_DEGREES = list(range(1, 18)) + [24, 31, 32, 33, 47, 63, 64, 65]


@pytest.mark.parametrize("values", ["distinct", "tied"])
@pytest.mark.parametrize("F", [8, 64, 128])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("reduces", [["min"], ["max", "min"], FUSED[0]],
                         ids=["min", "max+min", "min+max+mean+std"])
def test_batch_and_tile_boundaries(reduces, dtype, F, values):
    g = graph_with_hubs(300, BATCH_DEGREES, 150, seed=5, out_degrees=BATCH_DEGREES)
    gen = torch.Generator().manual_seed(6)
    features = distinct_features if values == "distinct" else tied_features
    # Most rows of this sparse graph have 1-3 in-edges, so an fp32 std is often small and its
    # gradient, g (x_j - mean) / (deg std), cancels: fp32 arithmetic (iognn's, and PyG's alike)
    # is off the fp64 reference by up to ~1e-3 there. A min / max share sent to a wrong edge
    # would be off by a whole gradient value.
    tol = (1e-3, 3e-3) if dtype == torch.float32 and "std" in reduces else None
    check_against_cpu(g, features(300, F, gen, dtype), reduces, tol=tol)


LONG_ROW_DEGREES = [127, 128, 129, 200, 256, 257, 300, 511]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("reduces", [["min"], ["max", "min"], FUSED[0]],
                         ids=["min", "max+min", "min+max+mean+std"])
def test_sole_holders_in_rows_longer_than_a_lead_byte(reduces, dtype):
    # Rows of 127-511 distinct sources with distinct values: every min / max has a sole holder,
    # whose code's lead byte holds its position mod 128. In the rows longer than 128, the edges
    # 128, 256, ... positions away share that byte and must read the rest byte to learn they are
    # not the holder: a share sent to one of them would be off by a whole gradient value.
    gen = torch.Generator().manual_seed(8)
    parts = []
    for dst, deg in enumerate(LONG_ROW_DEGREES):
        src = torch.randperm(512, generator=gen)[:deg]
        parts.append(torch.stack([src, torch.full_like(src, dst)]))
    g = iognn.Graph(torch.cat(parts, 1), 512)
    got = check_against_cpu(g, distinct_features(512, 16, gen, dtype), reduces)
    codes = tie_codes(got[1].cpu())[:len(LONG_ROW_DEGREES)]
    assert (codes < 0x8000).all()  # sole holders only
    assert (codes >= 128).sum() >= 30  # many of them past the first 128 positions


def test_strided_and_misaligned_features():
    # Each view must give bit-identical results to its contiguous copy (a per-element path for
    # misaligned rows, 16-byte packs otherwise: the same arithmetic per element), and match fp64.
    g = graph_with_hubs(64, [300, 700], 500, seed=5, out_degrees=[600])
    gen = torch.Generator().manual_seed(6)
    wide = torch.randn(64, 24, generator=gen)
    narrow = torch.randn(8, 64, generator=gen)
    one_row = torch.randn(1, 16, generator=gen)
    views = {  # the same view of a CPU and a CUDA base tensor
        "feature stride 2": (wide, lambda t: t[:, ::2]),
        "row stride 24, aligned": (wide, lambda t: t[:, 4:12]),
        "row stride 24, misaligned": (wide, lambda t: t[:, 3:11]),
        "transposed": (narrow, lambda t: t.t()),
        "row stride 0": (one_row, lambda t: t.expand(64, 16)),
    }
    g_cuda = g.to("cuda")
    for what, (base, view) in views.items():
        x, x_cuda = view(base), view(base.cuda())
        assert x_cuda.stride() == x.stride(), what
        grad = torch.randn(64, 6 * x.size(1), generator=gen).cuda()
        got = run_op(g_cuda, x_cuda, ALL_SIX, grad)
        for a, b in zip(got, run_op(g_cuda, x_cuda.contiguous(), ALL_SIX, grad)):
            assert torch.equal(a, b), what
        if what != "row stride 0":  # (identical rows: var is pure rounding noise)
            ref = run_op(g, x.double(), ALL_SIX, grad.double().cpu())
            for a, b in zip(got, ref):
                torch.testing.assert_close(a.cpu().to(b.dtype), b, rtol=1e-4, atol=fp32_atol(g))


@pytest.mark.parametrize("reduces", [ALL_SIX, ["max"]], ids=["all", "max"])
def test_int32_and_int64_graphs_agree_bitwise(reduces):
    g32 = boundary_graph(200, 1500, seed=7).to("cuda")
    g64 = boundary_graph(200, 1500, seed=7, index_dtype=torch.int64).to("cuda")
    assert (g32.index_dtype, g64.index_dtype) == (torch.int32, torch.int64)
    gen = torch.Generator().manual_seed(8)
    x = torch.randn(200, 16, generator=gen).cuda()
    grad = torch.randn(200, 16 * len(reduces), generator=gen).cuda()
    a, b = run_op(g32, x, reduces, grad), run_op(g64, x, reduces, grad)
    for t32, t64 in zip(a, b):  # tie codes and counts too: no output depends on the index dtype
        assert torch.equal(t32, t64)


# ---- schedule: super-nodes, ties, NaN, empty rows, determinism, streams ------------------------
def test_more_heavy_rows_than_merge_blocks():
    # 2,500 destinations of in-degree 300 and 2,500 sources of out-degree 300 among 600k nodes
    # (1.5M edges): each is a heavy row of the schedule in fp64 (its threshold is 182 here, forward
    # and backward: csr_schedule.cuh), and 2,500 rows are more than the slot-table and
    # merge grids have blocks (two waves of resident blocks: 2,112 / 1,056 on an H100), so their
    # blocks stride over several rows.
    n, heavy, deg, F = 600_000, 2_500, 300, 32
    gen = torch.Generator().manual_seed(41)
    into = torch.stack([torch.randint(0, n, (heavy * deg,), generator=gen),
                        torch.arange(heavy).repeat_interleave(deg)])
    out_of = torch.stack([(n - 1 - torch.arange(heavy)).repeat_interleave(deg),
                          torch.randint(0, n, (heavy * deg,), generator=gen)])
    g = iognn.Graph(torch.cat([into, out_of], 1), n)
    x = torch.randn(n, F, dtype=torch.float64, generator=gen)
    for reduces in (ALL_SIX, ["min"], ["sum"]):
        grad = torch.randn(n, len(reduces) * F, dtype=torch.float64, generator=gen)
        first = check_against_cpu(g, x, reduces, grad=grad)
        again = run_op(g.to("cuda"), x.cuda(), reduces, grad.cuda())
        for a, b in zip(first, again):  # bit-identical rerun
            assert torch.equal(a, b)


HUB_GRAPH_NODES, HUB_EDGES = 4096, 1_000_000


def million_edge_hubs(seed, extra_edges):
    """(graph, generator): HUB_GRAPH_NODES nodes where destination 0 has HUB_EDGES in-edges from
    random sources and source 1 has HUB_EDGES out-edges to random destinations, plus extra_edges
    random edges; the generator (seeded with seed) drew them and goes on to draw the features."""
    n, hub = HUB_GRAPH_NODES, HUB_EDGES
    gen = torch.Generator().manual_seed(seed)
    into_0 = torch.stack([torch.randint(0, n, (hub,), generator=gen), torch.zeros(hub, dtype=torch.long)])
    out_of_1 = torch.stack([torch.ones(hub, dtype=torch.long), torch.randint(0, n, (hub,), generator=gen)])
    edge_index = torch.cat([into_0, out_of_1, random_edge_index(n, n, extra_edges, gen)], 1)
    return iognn.Graph(edge_index, n), gen


@pytest.mark.slow
def test_million_edge_hubs():
    # Destination 0 has 10^6 in-edges (split over many segments and blocks); source 1 has 10^6
    # out-edges (the backward's heavy row). Every other node has a few hundred of each.
    n, hub = HUB_GRAPH_NODES, HUB_EDGES
    g, gen = million_edge_hubs(seed=9, extra_edges=50_000)
    assert int(g.rowptr[1] - g.rowptr[0]) > hub and int(g.colptr[2] - g.colptr[1]) > hub
    x = torch.randn(n, 16, dtype=torch.float64, generator=gen)
    check_against_cpu(g, x, ALL_SIX, seed=10)
    # fp32 sums over the hubs (~250 copies of each source in a row) carry absolute errors of
    # several units in any order, so fp32 is checked on the reductions without long sums.
    check_against_cpu(g, x.float(), ["min", "max"], seed=11)


@pytest.mark.slow
def test_million_edge_hub_with_ties():
    # Destination 0: 10^6 in-edges whose values are 5 integers (about 200k ties per value and
    # feature, counted over many segments); source 1: 10^6 out-edges, about 250 duplicates per
    # destination, all tied with each other.
    n = HUB_GRAPH_NODES
    g, gen = million_edge_hubs(seed=33, extra_edges=20_000)
    x = tied_features(n, 16, gen, torch.float64)
    # A positive gradient: every grad_x entry is a sum of positive shares, checked relatively
    # (an absolute tolerance would hide a wrong share of 1/200k). fp64 agrees with the CPU up to
    # the summation order, so any wrong count or share shows; fp32 sums 10^6 shares for source 1.
    grad = torch.rand(n, 32, generator=gen, dtype=torch.float64) + 0.5
    got = check_against_cpu(g, x, ["min", "max"], grad=grad, tol=(1e-9, 1e-12))
    held = counts(g, got)
    assert int(held[0].min()) > 150_000  # saturated: the exact counts come from the wide table
    assert (tie_codes(got[1].cpu())[0] == 0xFFFF).all()
    check_against_cpu(g, x.float(), ["min", "max"], grad=grad.float(), tol=(1e-3, 1e-12))
    check_against_cpu(g, x, FUSED[0], seed=34)  # fused with mean and std (long sums: fp64)


@pytest.mark.parametrize("fill", [0.5, 0.0])
@pytest.mark.parametrize("degree", [50, 5000])
def test_rows_of_equal_values_split_evenly(degree, fill):
    # Every value equal: each in-edge of row i gets 1 / deg_i of its min and of its max gradient
    # (1 / (deg_i + 1) for a value of 0: the zero fill ties too), however the row is split.
    g = graph_with_hubs(300, [degree, degree + 1], 600, seed=12)
    x = torch.full((300, 8), fill)
    grad = torch.ones(300, 16)
    got = run_op(g.to("cuda"), x.cuda(), ["min", "max"], grad.cuda())
    out, grad_x = got[0].cpu(), got[4].cpu()
    deg = (g.rowptr[1:] - g.rowptr[:-1]).long()
    # every holder count is the degree (a row of one edge: a sole holder, unless the value is 0)
    assert torch.equal(counts(g, got), deg[:, None, None].expand(-1, 2, 8))
    torch.testing.assert_close(out, torch.where(deg[:, None] > 0, fill, 0.0).expand(-1, 16))
    share = 2.0 / (deg.double() + (1.0 if fill == 0.0 else 0.0)).clamp(min=1)
    expected = torch.zeros(300, dtype=torch.float64).index_add_(
        0, g.col.long(), share.repeat_interleave(deg))
    torch.testing.assert_close(grad_x, expected.float()[:, None].expand(-1, 8))
    check_against_cpu(g, x, ["min", "max"], grad=grad)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_tie_codes_past_their_16_bit_limits(dtype):
    # Rows of 40,000 ties (split into segments: the first holder and the saturated count survive
    # the merge) and a sole holder past position 2^15: the same codes, wide counts and grad_x as
    # the CPU op, for the min / max kernel and the general one (min / max with a linear part).
    ei, x = long_tie_rows(dtype)
    g = iognn.Graph(ei, 40_000)
    got = check_against_cpu(g, x, ["min", "max"], seed=43)
    assert tie_codes(got[1].cpu())[:2, :, 0].eq(0xFFFF).all()
    assert counts(g, got)[:2, :, 0].eq(40_000).all()
    check_against_cpu(g, x, FUSED[0], seed=44, tol=(1e-2, 1e-2) if dtype != torch.float64 else None)


def test_ties_small_examples_match_cpu():
    ei = torch.tensor([[3, 1, 0, 2, 0, 2, 1], [0, 0, 0, 0, 0, 1, 1]])
    g = iognn.Graph(ei, 4)
    x = torch.tensor([[7.0, -1.0], [5.0, -1.0], [5.0, -1.0], [5.0, 2.0]], dtype=torch.float64)
    got = check_against_cpu(g, x, ["min", "max"], grad=torch.ones(4, 4, dtype=torch.float64))
    assert counts(g, got)[:, 0].tolist() == [[3, 4], [2, 2], [0, 0], [0, 0]]
    # A result of 0 (either sign): the zero fill is one more tied element.
    ei = torch.tensor([[0, 1, 2, 3, 4], [0, 0, 0, 1, 1]])
    x = torch.tensor([[0.0], [-0.0], [-1.0], [0.0], [3.0]], dtype=torch.float64)
    grad = torch.tensor([[6.0, 12.0], [6.0, 12.0]] + [[1.0, 1.0]] * 3, dtype=torch.float64)
    got = check_against_cpu(iognn.Graph(ei, 5), x, ["min", "max"], grad=grad)
    assert got[4].flatten().tolist() == [4.0, 4.0, 6.0, 3.0, 12.0]


@pytest.mark.parametrize("degree", [3, 3000])
def test_nan_propagates_like_amax(degree):
    g = graph_with_hubs(100, [degree], 300, seed=13)
    gen = torch.Generator().manual_seed(14)
    x = torch.randn(100, 4, generator=gen)
    x[g.col[g.rowptr[1] - 2].long(), 0] = float("nan")  # late in row 0 (a later segment if split)
    x[7, 1] = float("nan")
    got = check_against_cpu(g, x, ["min", "max", "sum"], seed=15)
    assert got[0][0, 0].isnan() and got[0][0, 4].isnan()
    # as in torch, a NaN result sends NaN to every in-edge of its row
    sources = g.col[g.rowptr[0]:g.rowptr[1]].long().unique()  # row 0, whose f0 result is NaN
    assert got[4].cpu()[sources, 0].isnan().all()


@pytest.mark.parametrize("degree", [3, 3000])
def test_infinite_values_match_cpu(degree):
    # +-inf is the min / max fold's identity: every f0 value is +inf (min: tied in rows of two or
    # more edges, a sole holder in rows of one), 90 of 100 sources are +inf in f1 (a split row's
    # segments fold +inf runs before finite values), some f2 values are -inf, and one f3 value is
    # +inf (the max's sole holder wherever that source sends); heavy sources in the backward too.
    g = graph_with_hubs(100, [degree], 300, seed=17, out_degrees=[3000])
    gen = torch.Generator().manual_seed(18)
    x = torch.randn(100, 8, generator=gen)
    x[:, 0] = float("inf")
    x[:90, 1] = float("inf")
    x[torch.randperm(100, generator=gen)[:10], 2] = float("-inf")
    x[5, 3] = float("inf")
    for reduces in (["min"], ["max"], ["min", "max", "sum"]):
        got = check_against_cpu(g, x, reduces, seed=19)
        assert got[0][:, 0].isinf().sum() > 0


def test_empty_rows_give_zeros_and_no_ties():
    ei = torch.tensor([[0, 1, 2, 2], [1, 1, 3, 3]])
    g = iognn.Graph(ei, (3, 6))
    x = torch.randn(3, 8, dtype=torch.float64)
    got = check_against_cpu(g, x, ALL_SIX)
    out, mean, held = got[0].cpu(), got[3].cpu(), counts(g, got)
    empty = torch.tensor([0, 2, 4, 5])
    assert torch.equal(out[empty], torch.zeros(4, 48, dtype=torch.float64))
    assert (tie_codes(got[1].cpu())[empty] == 0x8000).all()  # tagged, no holder
    assert (held[3] == 2).all()  # source 2's duplicate edge ties with itself
    assert mean.numel() == 0  # fp64 with the mean requested: the results hold it (zero above)


def test_no_edges_and_no_features():
    g = iognn.Graph(torch.empty(2, 0, dtype=torch.long), (4, 3))
    check_against_cpu(g, torch.randn(4, 5), ALL_SIX)  # grad_x must be written as zeros
    g = graph_with_hubs(10, [3], 10, seed=16)
    out, ties, _, _, grad_x = run_op(g.to("cuda"), torch.empty(10, 0, device="cuda"), ALL_SIX,
                                     torch.empty(10, 0, device="cuda"))
    assert out.shape == (10, 0) and ties.shape == (2, 10, 2, 0) and grad_x.shape == (10, 0)


@pytest.mark.parametrize("values", ["continuous", "tied"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_bitwise_deterministic(dtype, values):
    g = graph_with_hubs(2000, [200_000, 30_000, 3000], 40_000, seed=17,
                        out_degrees=[100_000, 5000]).to("cuda")
    gen = torch.Generator().manual_seed(18)
    x = (torch.randn(2000, 64, generator=gen) if values == "continuous"
         else tied_features(2000, 64, gen, torch.float32)).to(dtype).cuda()
    grad = torch.randn(2000, 6 * 64, generator=gen).to(dtype).cuda()
    first = run_op(g, x, ALL_SIX, grad)
    poison_allocator()
    second = run_op(g, x, ALL_SIX, grad)
    for a, b in zip(first, second):
        assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("F", [3, 64], ids=["per-element", "packed"])
def test_min_max_with_a_linear_part_equal_min_max_alone(F, dtype):
    # With var, min and max run in the backward's second pass, which adds the first (linear)
    # pass's sums, kept in acc precision; alone, in its only pass. A zero var gradient makes those
    # sums exact zeros, so both must give the same grad_x bit for bit, on light and split (heavy)
    # source rows, with ties and zero results.
    g = graph_with_hubs(400, [3000, 300], 2500, seed=41, out_degrees=[5000, 600]).to("cuda")
    gen = torch.Generator().manual_seed(42)
    x = tied_features(400, F, gen, dtype).cuda()
    grad = torch.randn(400, 3 * F, generator=gen).to(dtype).cuda()
    grad[:, 2 * F:] = 0
    direct = run_op(g, x, ["min", "max"], grad[:, :2 * F].contiguous())[4]
    general = run_op(g, x, ["min", "max", "var"], grad)[4]
    assert torch.equal(direct, general)
    assert direct.abs().sum() > 0


def test_non_default_stream():
    g = graph_with_hubs(500, [5000, 700], 3000, seed=19, out_degrees=[4000]).to("cuda")
    gen = torch.Generator().manual_seed(20)
    x = torch.randn(500, 32, generator=gen).cuda()
    grad = torch.randn(500, 6 * 32, generator=gen).cuda()
    expected = run_op(g, x, ALL_SIX, grad)
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        got = run_op(g, x, ALL_SIX, grad)
    torch.cuda.current_stream().wait_stream(stream)
    for a, b in zip(got, expected):
        assert torch.equal(a, b)


def test_captured_in_a_cuda_graph():
    # The fused forward and its two-pass backward (heavy rows: the schedule's in-kernel heavy-row
    # list, no host read-back) captured in a CUDA graph and replayed on new values equal eager
    # calls bit for bit.
    g = graph_with_hubs(500, [5000, 700], 3000, seed=23, out_degrees=[4000]).to("cuda")
    gen = torch.Generator().manual_seed(24)
    for reduces in (FUSED[0], ALL_SIX):
        static_x = torch.randn(500, 32, generator=gen).cuda()
        static_grad = torch.randn(500, len(reduces) * 32, generator=gen).cuda()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up outside the capture
            run_op(g, static_x, reduces, static_grad)
        torch.cuda.current_stream().wait_stream(side)
        captured = torch.cuda.CUDAGraph()
        with torch.cuda.graph(captured):
            static_out = run_op(g, static_x, reduces, static_grad)
        for _ in range(2):
            static_x.copy_(torch.randn(500, 32, generator=gen))
            static_grad.copy_(torch.randn(500, len(reduces) * 32, generator=gen))
            captured.replay()
            expected = run_op(g, static_x, reduces, static_grad)
            for a, b in zip(static_out, expected):
                assert torch.equal(a, b)


# ---- autograd, PyG, opcheck ----------------------------------------------------------------------
def test_backward_allocates_only_grad_x():
    # The auxiliary outputs take no gradient: autograd must not hand the backward zero-filled
    # tensors of their size (they would double this backward's memory).
    gen = torch.Generator().manual_seed(40)
    n, F = 20_000, 64
    g = iognn.Graph(random_edge_index(n, n, 8 * n, gen), n).to("cuda")
    x = torch.randn(n, F, generator=gen).cuda().requires_grad_()
    out = segment_reduce(g, x, ["min", "max"])
    grad = torch.randn(out.shape, generator=gen).cuda()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out.backward(grad)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    assert peak <= n * F * 4 + (2 << 20), f"backward peak {peak} bytes, grad_x is {n * F * 4}"


def test_autograd_through_the_functional_op():
    g = graph_with_hubs(120, [900], 600, seed=21, out_degrees=[800])
    gen = torch.Generator().manual_seed(22)
    x = torch.randn(120, 12, dtype=torch.float64, generator=gen)
    grad = torch.randn(120, 6 * 12, dtype=torch.float64, generator=gen)
    grads = []
    for graph, xs in ((g, x.clone()), (g.to("cuda"), x.cuda())):
        xs.requires_grad_()
        out = segment_reduce(graph, xs, ALL_SIX)
        grads.append((out.detach().cpu(), torch.autograd.grad(out, xs, grad.to(xs.device))[0].cpu()))
    torch.testing.assert_close(grads[1], grads[0])


@pytest.mark.parametrize("reduces", [["min"], ["max"], FUSED[0], ALL_SIX],
                         ids=["min", "max", "fused4", "all"])
@pytest.mark.parametrize("values", ["continuous", "tied"])
def test_matches_pyg_on_cuda(values, reduces):
    # PyG's CUDA path (torch.scatter_reduce, or torch_scatter when installed, which has no tie
    # split: then only continuous values are compared), outputs and gradients, in fp64 so that
    # only the order of PyG's atomic sums differs.
    from torch_geometric import typing as pyg_typing
    from torch_geometric.nn import aggr
    if values == "tied" and pyg_typing.WITH_TORCH_SCATTER:
        pytest.skip("torch_scatter's min/max backward gives ties to one element")
    g = graph_with_hubs(150, [2000], 900, seed=23, out_degrees=[1500])
    gen = torch.Generator().manual_seed(35)
    x = (torch.randn(150, 10, generator=gen, dtype=torch.float64) if values == "continuous"
         else tied_features(150, 10, gen, torch.float64)).cuda().requires_grad_()
    ei = g.edge_index.cuda().long()
    module = (aggr.MultiAggregation(reduces, mode="cat") if len(reduces) > 1
              else aggr.MinAggregation() if reduces == ["min"] else aggr.MaxAggregation())
    ref = module(x.index_select(0, ei[0]), index=ei[1], dim_size=150)
    out = segment_reduce(g.to("cuda"), x, reduces)
    torch.testing.assert_close(out, ref)
    grad = torch.randn(out.shape, generator=gen, dtype=torch.float64).cuda()
    torch.testing.assert_close(torch.autograd.grad(out, x, grad)[0],
                               torch.autograd.grad(ref, x, grad)[0])


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("reduces", [ALL_SIX, ["max"]], ids=["all", "max"])
def test_opcheck(index_dtype, reduces):
    gen = torch.Generator().manual_seed(24)
    for g in (graph_with_hubs(40, [400], 100, seed=25, out_degrees=[300], index_dtype=index_dtype),
              iognn.Graph(torch.empty(2, 0, dtype=torch.int64), 4, index_dtype=index_dtype)):
        g = g.to("cuda")
        assert g.index_dtype == index_dtype
        n = g.num_src_nodes
        x = torch.randn(n, 5, generator=gen).cuda().requires_grad_()
        args = (g.rowptr, g.col, g.colptr, g.row, g.csc2csr, x, reduces)
        torch.library.opcheck(torch.ops.iognn.segment_reduce.default, args)
        out, ties, wide, mean, _ = torch.ops.iognn.segment_reduce(*args[:5], x.detach(), reduces)
        grad = torch.randn(out.shape, generator=gen).cuda()
        torch.library.opcheck(torch.ops.iognn.segment_reduce_backward.default,
                              (g.colptr, g.row, g.csc2csr, g.rowptr, x.detach(), out, ties, wide,
                               mean, grad, reduces))


def test_device_mismatch_raises():
    g = graph_with_hubs(10, [3], 10, seed=26)
    x = torch.randn(10, 2, device="cuda")
    with pytest.raises(ValueError, match="rowptr is on cpu"):
        torch.ops.iognn.segment_reduce(g.rowptr, g.col, g.colptr, g.row, g.csc2csr, x, ["sum"])
    with pytest.raises(ValueError, match="unknown reduction 'median'"):
        g = g.to("cuda")
        torch.ops.iognn.segment_reduce(g.rowptr, g.col, g.colptr, g.row, g.csc2csr, x,
                                       ["median"])


# ---- degree scalers (PNA) in the epilogue ---------------------------------------------------------
def degree_like_scale(g, dtype, seed):
    """[N, 3] factors like PNA's (identity, amplification, a random positive one), in dtype."""
    deg = g.degree("in").to(dtype)
    gen = torch.Generator().manual_seed(seed)
    rand = torch.rand(deg.shape, generator=gen).to(deg.device, dtype) + 0.5
    return torch.stack([torch.ones_like(deg), torch.log(deg + 1) / 2.5, rand], dim=1)


def check_scaled_against_cpu(g, x, reduces, seed):
    """The scaled op on CUDA: out is exactly its own plain results times each scale column (x's
    dtype), and out, grad_x and grad_scale match the CPU op in fp64 on the same values."""
    scale = degree_like_scale(g, x.dtype, seed)
    gen = torch.Generator().manual_seed(seed)
    grad = torch.randn(g.num_dst_nodes, 3 * len(reduces) * x.size(1), generator=gen).to(x.dtype)
    results = []
    for device, dtype in (("cuda", x.dtype), ("cpu", torch.float64)):
        xd = x.to(device, dtype).requires_grad_()
        sd = scale.to(device, dtype).requires_grad_()
        out = segment_reduce(g.to(device), xd, reduces, sd)
        results.append((out, *torch.autograd.grad(out, (xd, sd), grad.to(device, dtype))))
    graph = (g.rowptr, g.col, g.colptr, g.row, g.csc2csr)
    fwd = torch.ops.iognn.segment_reduce(*(t.cuda() for t in graph), x.cuda(), reduces,
                                         scale.cuda())
    plain = fwd[4].cpu()
    scaled = torch.cat([plain * scale[:, s:s + 1] for s in range(3)], dim=1)
    assert torch.equal(results[0][0].cpu(), scaled), "scaled blocks differ from plain * scale"
    rtol, atol = tolerance(x.dtype)
    if x.dtype == torch.float32:
        atol = fp32_atol(g)
    for got, ref in zip(results[0][:2], results[1][:2]):  # out, grad_x
        torch.testing.assert_close(got.cpu().double(), ref, rtol=rtol, atol=atol * 4)
    # grad_scale sums S * K * F products in x's dtype: its error scales with their magnitudes.
    magnitude = torch.bmm(grad.double().abs().view(g.num_dst_nodes, 3, -1),
                          plain.double().abs().view(g.num_dst_nodes, -1, 1)).view(-1, 3)
    error = (results[0][2].cpu().double() - results[1][2]).abs()
    assert bool((error <= rtol * magnitude + atol).all()), "grad_scale differs"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reduces", [["max"], FUSED[0], ALL_SIX], ids=["max", "pna", "all"])
def test_degree_scales_match_cpu(dtype, reduces):
    g = boundary_graph(400, 3000, seed=33)  # light and split rows on both sides
    gen = torch.Generator().manual_seed(34)
    for F in (8, 5):  # 16-byte packs and one element per lane
        check_scaled_against_cpu(g, distinct_features(400, F, gen, dtype), reduces, seed=35)


def test_degree_scales_bitwise_deterministic_and_empty():
    g = boundary_graph(400, 3000, seed=36).to("cuda")
    x = torch.randn(400, 16, device="cuda")
    scale = degree_like_scale(g, torch.float32, seed=37)
    runs = []
    for _ in range(2):
        xr = x.clone().requires_grad_()
        out = segment_reduce(g, xr, ALL_SIX, scale)
        runs.append((out, torch.autograd.grad(out, xr, torch.ones_like(out))[0]))
    assert all(torch.equal(a, b) for a, b in zip(*runs))
    empty = iognn.Graph(torch.empty(2, 0, dtype=torch.int64), 4).to("cuda")
    out = segment_reduce(empty, torch.randn(4, 3, device="cuda"), FUSED[0],
                         torch.rand(4, 2, device="cuda"))
    assert out.shape == (4, 24) and not out.any()


# ---- small cases for compute-sanitizer (memcheck, racecheck) -------------------------------------
@pytest.mark.sanitizer
@pytest.mark.parametrize("F", [3, 8, 40], ids=["per-element", "packed", "part-group"])
@pytest.mark.parametrize("reduces", [ALL_SIX, ["min", "max"]], ids=["all", "min+max"])
def test_sanitizer_light_and_heavy_rows(F, reduces):
    # Split rows on both sides (destination 0, source 63) and light ones; min + max alone take the
    # backward's index tiles (warp shuffles over part of a group with F = 40).
    g = graph_with_hubs(64, [700, 260], 300, seed=27, out_degrees=[650])
    gen = torch.Generator().manual_seed(28)
    check_against_cpu(g, torch.randn(64, F, generator=gen), reduces)


@pytest.mark.sanitizer
def test_sanitizer_half_precision_and_empty_rows():
    g = graph_with_hubs(80, [900], 40, seed=29, out_degrees=[700])  # many empty rows
    gen = torch.Generator().manual_seed(30)
    check_against_cpu(g, distinct_features(80, 16, gen, torch.float16), ["max", "std"])


@pytest.mark.sanitizer
def test_sanitizer_degree_scales():
    g = graph_with_hubs(64, [700], 200, seed=38, out_degrees=[650])
    gen = torch.Generator().manual_seed(39)
    check_scaled_against_cpu(g, torch.randn(64, 8, generator=gen), FUSED[0], seed=40)
