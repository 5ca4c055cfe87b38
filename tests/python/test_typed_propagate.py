"""iognn.TypedGraph and iognn.ops.typed_propagate against an fp64 reference written plainly here:
every strategy, sum and mean, message bias, gradients, one-hot features, errors."""
from __future__ import annotations

import pytest
import torch

import iognn
from iognn.ops import typed_propagate
from iognn.typed import SMALL_DENSE, STRATEGIES

from conftest import GRAPH_CASES


def reference(edge_index, edge_type, num_dst, x, weight, reduce, bias=None):
    """out[i] = sum_r reduce_{e: dst=i, type=r} (x[src] @ weight[r] + bias[r]), one edge at a
    time in fp64 (x None: one-hot rows)."""
    R, f_in, f_out = weight.shape
    x = torch.eye(f_in, dtype=weight.dtype) if x is None else x
    src, dst = edge_index.long()
    edge_type = edge_type.long()
    sums = [[None] * R for _ in range(num_dst)]
    counts = [[0] * R for _ in range(num_dst)]
    for e in range(src.numel()):
        i, r = int(dst[e]), int(edge_type[e])
        message = x[src[e]] @ weight[r] + (0 if bias is None else bias[r])
        sums[i][r] = message if sums[i][r] is None else sums[i][r] + message
        counts[i][r] += 1
    rows = []
    for i in range(num_dst):
        row = torch.zeros(f_out, dtype=weight.dtype)
        for r in range(R):
            if counts[i][r]:
                row = row + (sums[i][r] / counts[i][r] if reduce == "mean" else sums[i][r])
        rows.append(row)
    return torch.stack(rows) if rows else torch.zeros(0, f_out, dtype=weight.dtype)


def typed_case(name, num_types, seed=0):
    """(edge_index, edge_type, num_src, num_dst) of a conftest graph case with random types (in
    the index dtype of the case)."""
    edge_index, size = next((ei, s) for n, ei, s in GRAPH_CASES if n == name)
    g = torch.Generator().manual_seed(seed)
    edge_type = torch.randint(0, num_types, (edge_index.size(1),), generator=g)
    num_src, num_dst = (size, size) if isinstance(size, int) else size
    return edge_index, edge_type.to(edge_index.dtype), num_src, num_dst


SMALL_CASES = ["empty", "no_nodes", "random", "random_int32", "isolated", "loops_duplicates",
               "bipartite", "bipartite_wide", "strided"]


def leaf(*shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_()


def check_against_reference(tg, edge_index, edge_type, x, weight, reduce, bias, strategy,
                            atol=1e-10):
    num_dst = tg.num_dst_nodes
    out = typed_propagate(tg, x, weight, reduce, bias, strategy=strategy)
    ref = reference(edge_index, edge_type, num_dst, x, weight, reduce, bias)
    torch.testing.assert_close(out, ref, atol=atol, rtol=1e-10)
    grad = torch.randn_like(ref)
    inputs = [t for t in (x, weight, bias) if t is not None and t.is_floating_point()]
    got = torch.autograd.grad(out, inputs, grad)  # every input reached, also without edges
    want = (torch.autograd.grad(ref, inputs, grad, allow_unused=True) if ref.requires_grad
            else [None] * len(inputs))  # no edges: every gradient is zero
    for g_got, g_want, t in zip(got, want, inputs):
        g_want = torch.zeros_like(t) if g_want is None else g_want
        torch.testing.assert_close(g_got, g_want, atol=atol, rtol=1e-10)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("num_types", [1, 4, 16])
@pytest.mark.parametrize("case", SMALL_CASES)
def test_matches_reference(case, num_types, with_bias, reduce, strategy):
    edge_index, edge_type, num_src, num_dst = typed_case(case, num_types)
    tg = iognn.TypedGraph(edge_index, edge_type, num_types, (num_src, num_dst))
    x = leaf(num_src, 5, seed=1)
    weight = leaf(num_types, 5, 3, seed=2)
    bias = leaf(num_types, 3, seed=3) if with_bias else None
    check_against_reference(tg, edge_index, edge_type, x, weight, reduce, bias, strategy)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_supernode_and_wide_features(strategy, reduce):
    edge_index, edge_type, size, _ = typed_case("supernode", 4)
    tg = iognn.TypedGraph(edge_index, edge_type, 4, size)
    x, weight = leaf(size, 6, seed=4), leaf(4, 6, 9, seed=5)
    out = typed_propagate(tg, x, weight, reduce, strategy=strategy)
    ref = reference(edge_index, edge_type, size, x, weight, reduce)
    torch.testing.assert_close(out, ref, atol=1e-9, rtol=1e-10)


def test_type_without_edges_and_noncontiguous_inputs():
    edge_index, edge_type, size, _ = typed_case("random", 4)
    edge_type = torch.where(edge_type == 2, torch.zeros_like(edge_type), edge_type)
    tg = iognn.TypedGraph(edge_index, edge_type, 4, size)
    x = leaf(5, size, seed=6).t()  # [N, 5], column-major
    weight = leaf(4, 3, 5, seed=7).transpose(1, 2)  # [4, 5, 3], non-contiguous
    for strategy in STRATEGIES:
        check_against_reference(tg, edge_index, edge_type, x, weight, "mean", None, strategy)
    assert int(tg.counts()[:, 2].sum()) == 0


@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("case", ["random", "bipartite", "empty", "loops_duplicates"])
def test_one_hot_features(case, with_bias, reduce):
    edge_index, edge_type, num_src, num_dst = typed_case(case, 4)
    tg = iognn.TypedGraph(edge_index, edge_type, 4, (num_src, num_dst))
    weight = leaf(4, num_src, 3, seed=8)
    bias = leaf(4, 3, seed=9) if with_bias else None
    check_against_reference(tg, edge_index, edge_type, None, weight, reduce, bias, "auto")
    # Positions: x[j] = e_{ids[j]} over F_in = 7 columns.
    ids = torch.randint(0, 7, (num_src,), generator=torch.Generator().manual_seed(10))
    weight7 = leaf(4, 7, 3, seed=11)
    out = typed_propagate(tg, ids, weight7, reduce, bias)
    dense = torch.nn.functional.one_hot(ids, 7).double()
    torch.testing.assert_close(out, typed_propagate(tg, dense, weight7, reduce, bias))
    # x=None over more columns than sources: x[j] = e_j.
    wide = leaf(4, num_src + 3, 3, seed=12)
    eye = torch.eye(num_src, num_src + 3, dtype=torch.float64)
    torch.testing.assert_close(typed_propagate(tg, None, wide, reduce, bias),
                               typed_propagate(tg, eye, wide, reduce, bias))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_low_precision(dtype, strategy, reduce):
    edge_index, edge_type, size, _ = typed_case("random", 4)
    tg = iognn.TypedGraph(edge_index, edge_type, 4, size)
    x, weight, bias = leaf(size, 8, seed=12), leaf(4, 8, 8, seed=13), leaf(4, 8, seed=14)
    ref = reference(edge_index, edge_type, size, x, weight, reduce, bias)
    out = typed_propagate(tg, x.to(dtype), weight.to(dtype), reduce, bias.to(dtype),
                          strategy=strategy)
    assert out.dtype == dtype
    tol = {torch.float32: 1e-5, torch.float16: 2e-2, torch.bfloat16: 1e-1}[dtype]
    torch.testing.assert_close(out.double(), ref.detach(), atol=tol * 10, rtol=tol)


def test_counts_and_groups():
    edge_index = torch.tensor([[0, 1, 2, 0, 3], [1, 1, 1, 2, 0]])
    edge_type = torch.tensor([0, 0, 2, 1, 2])
    tg = iognn.TypedGraph(edge_index, edge_type, 3)
    want = torch.zeros(4, 3, dtype=torch.int64)
    want[1, 0], want[1, 2], want[2, 1], want[0, 2] = 2, 1, 1, 1
    assert torch.equal(tg.counts(), want)
    assert tg.num_groups == 4 and tg.num_pairs == 5
    assert (tg.num_types, tg.num_src_nodes, tg.num_dst_nodes, tg.num_edges) == (3, 4, 4, 5)
    assert tg.device == torch.device("cpu")
    assert tg.to("cpu") is tg


def test_strategy_choice():
    g = torch.Generator().manual_seed(0)
    edge_index = torch.randint(0, 1000, (2, 4000), generator=g)
    few = iognn.TypedGraph(edge_index, torch.randint(0, 4, (4000,), generator=g), 4)
    many = iognn.TypedGraph(edge_index, torch.randint(0, 128, (4000,), generator=g), 128)
    assert few.strategy(64, 128) == "aggregate_dense"
    assert few.strategy(128, 64) == "transform_dense"
    assert few.strategy(128, 128) == "transform_dense"  # equal widths: nothing kept for backward
    # At R = 128 the N * R * F intermediate (8-16M elements) is 32x the edge count, but small
    # enough that one GEMM beats a GEMM per type: dense; at 8x the nodes it is grouped.
    assert many.strategy(64, 128) == "aggregate_dense"
    assert many.strategy(128, 64) == "transform_dense"
    big_index = torch.randint(0, 8000, (2, 4000), generator=g)
    big = iognn.TypedGraph(big_index, torch.randint(0, 128, (4000,), generator=g), 128)
    assert 8000 * 128 * 64 > SMALL_DENSE
    assert big.strategy(64, 128) == "aggregate_grouped"
    assert big.strategy(128, 64) == "transform_grouped"
    x, weight = torch.randn(1000, 8), torch.randn(128, 8, 4)
    torch.testing.assert_close(typed_propagate(many, x, weight, "mean"),
                               typed_propagate(many, x, weight, "mean",
                                               strategy="transform_dense"))


def test_deterministic():
    edge_index, edge_type, size, _ = typed_case("supernode", 4)
    tg = iognn.TypedGraph(edge_index, edge_type, 4, size)
    x = torch.randn(size, 16)
    for strategy in STRATEGIES:
        weight = torch.randn(4, 16, 16, requires_grad=True)
        outs = [typed_propagate(tg, x, weight, "mean", strategy=strategy) for _ in range(2)]
        grads = [torch.autograd.grad(o.square().sum(), weight)[0] for o in outs]
        assert torch.equal(outs[0], outs[1]) and torch.equal(grads[0], grads[1])


# ---- errors ------------------------------------------------------------------------------------
EI = torch.tensor([[0, 1, 2], [1, 2, 0]])


@pytest.mark.parametrize("edge_type, error", [
    (torch.tensor([0, 1, 3]), IndexError),
    (torch.tensor([0, -1, 1]), IndexError),
    (torch.tensor([0, 1]), ValueError),
    (torch.tensor([[0, 1, 2]]), ValueError),
    (torch.tensor([0.0, 1.0, 2.0]), TypeError),
    ([0, 1, 2], TypeError),
])
def test_bad_edge_type(edge_type, error):
    with pytest.raises(error, match="edge_type"):
        iognn.TypedGraph(EI, edge_type, 3)


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_types"):
        iognn.TypedGraph(EI, torch.tensor([0, 0, 0]), 0)
    with pytest.raises(IndexError, match=r"edge_index\[1\]"):
        iognn.TypedGraph(EI, torch.tensor([0, 0, 0]), 1, (3, 2))
    tg = iognn.TypedGraph(EI, torch.tensor([0, 1, 2]), 3)
    x, w = torch.randn(3, 4), torch.randn(3, 4, 2)
    with pytest.raises(TypeError, match="TypedGraph"):
        typed_propagate(EI, x, w)
    with pytest.raises(ValueError, match="reduce"):
        typed_propagate(tg, x, w, "max")
    with pytest.raises(ValueError, match="strategy"):
        typed_propagate(tg, x, w, strategy="fast")
    with pytest.raises(ValueError, match="weight"):
        typed_propagate(tg, x, torch.randn(2, 4, 2))
    with pytest.raises(ValueError, match="x"):
        typed_propagate(tg, torch.randn(3, 5), w)
    with pytest.raises(TypeError, match="dtype"):
        typed_propagate(tg, x.double(), w)
    with pytest.raises(ValueError, match="bias"):
        typed_propagate(tg, x, w, bias=torch.randn(2))
    with pytest.raises(ValueError, match="one-hot"):
        typed_propagate(tg, None, torch.randn(3, 2, 2))
