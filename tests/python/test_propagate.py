"""iognn.ops.propagate / gcn_norm against PyG 2.8's edge_index path (CPU)."""
import pytest
import torch
from torch_geometric.nn.conv.gcn_conv import gcn_norm as pyg_gcn_norm
from torch_geometric.utils import scatter

import iognn
from iognn.ops import gcn_norm, propagate

from conftest import GRAPH_CASES, sizes, tolerance

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def reference(edge_index, x, w, reduce, num_dst, bias=None):
    """PyG's non-fused message passing: gather x_j, weight, scatter to the target (+ bias)."""
    ei = edge_index.long()
    msg = x.index_select(0, ei[0])
    if w is not None:
        msg = msg * w.view(-1, 1).to(msg.dtype)
    out = scatter(msg, ei[1], 0, num_dst, reduce=reduce)
    return out if bias is None else out + bias


@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("biased", [False, True])
@pytest.mark.parametrize("policy", ["csr", "tiles"])  # tiles: the tile path's host twin
def test_matches_pyg_on_every_graph_case(graph_case, reduce, weighted, biased, policy):
    name, edge_index, size = graph_case
    num_src, num_dst = sizes(size)
    g = iognn.Graph(edge_index, size, tile_policy=policy)
    torch.manual_seed(0)
    x = torch.randn(num_src, 6, dtype=torch.float64, requires_grad=True)
    w = torch.rand(edge_index.size(1), dtype=torch.float64, requires_grad=True) if weighted else None
    b = torch.randn(6, dtype=torch.float64, requires_grad=True) if biased else None
    out = propagate(g, x, w, reduce, b)
    ref = reference(edge_index, x, w, reduce, num_dst, b)
    torch.testing.assert_close(out, ref)
    if out.numel() == 0:
        return
    assert bool(g.stats["tile_plans"]) == (policy == "tiles")  # the path taken is recorded
    grad = torch.randn_like(out)
    inputs = (x,) + ((w,) if weighted else ()) + ((b,) if biased else ())
    got = torch.autograd.grad(out, inputs, grad, allow_unused=True)
    exp = torch.autograd.grad(ref, inputs, grad, allow_unused=True)
    for a, b in zip(got, exp):
        torch.testing.assert_close(a, b if b is not None else torch.zeros_like(a))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_dtypes_accumulate_in_fp32(dtype, reduce):
    gen = torch.Generator().manual_seed(3)
    ei = torch.randint(0, 200, (2, 3000), generator=gen)
    g = iognn.Graph(ei, 200)
    x = torch.randn(200, 33, generator=gen).to(dtype).requires_grad_()
    w = torch.rand(3000, generator=gen).requires_grad_()
    b = torch.randn(33, generator=gen).to(dtype).requires_grad_()
    out = propagate(g, x, w, reduce, b)
    assert out.dtype == dtype
    ref = reference(ei, x.detach().double(), w.detach().double(), reduce, 200, b.detach().double())
    rtol, atol = tolerance(dtype)
    torch.testing.assert_close(out.double(), ref, rtol=rtol, atol=atol)
    out.backward(torch.ones_like(out))
    assert x.grad.dtype == dtype and w.grad.dtype == torch.float32 and b.grad.dtype == dtype
    torch.testing.assert_close(b.grad.double(), torch.full((33,), 200.0, dtype=torch.float64))


def test_int32_and_int64_graphs_agree():
    gen = torch.Generator().manual_seed(5)
    ei = torch.randint(0, 50, (2, 400), generator=gen)
    x = torch.randn(50, 8, generator=gen)
    a = propagate(iognn.Graph(ei, 50), x)
    b = propagate(iognn.Graph(ei, 50, index_dtype=torch.int64), x)
    assert iognn.Graph(ei, 50, index_dtype=torch.int64).index_dtype == torch.int64
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_non_contiguous_features():
    gen = torch.Generator().manual_seed(6)
    ei = torch.randint(0, 40, (2, 300), generator=gen)
    g = iognn.Graph(ei, 40)
    wide = torch.randn(40, 20, generator=gen)
    x = wide[:, ::2]  # feature stride 2
    torch.testing.assert_close(propagate(g, x, reduce="mean"),
                               reference(ei, x, None, "mean", 40))
    xt = torch.randn(10, 40, generator=gen).t()  # row stride 1, feature stride 40
    torch.testing.assert_close(propagate(g, xt), reference(ei, xt, None, "sum", 40))


SQUARE_CASES = [c for c in GRAPH_CASES if not isinstance(c[2], tuple)]  # GCN is square-only


@pytest.mark.parametrize("improved", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("case", SQUARE_CASES, ids=[c[0] for c in SQUARE_CASES])
def test_gcn_norm_matches_pyg(case, improved, weighted):
    name, edge_index, size = case
    ei = edge_index.long()
    gen = torch.Generator().manual_seed(7)
    w = torch.rand(ei.size(1), generator=gen, dtype=torch.float64) if weighted else None
    ref_ei, ref_w = pyg_gcn_norm(ei, w, size, improved=improved, add_self_loops=True,
                                 dtype=torch.float64)
    g = iognn.Graph(ei, size, self_loops="add_remaining")
    fill = 2.0 if improved else 1.0
    w_aug = g.augment_edge_values(w, fill) if weighted else None
    got = gcn_norm(g, w_aug, dtype=torch.float64)
    torch.testing.assert_close(g.edge_index, ref_ei)
    torch.testing.assert_close(got, ref_w)


def test_gcn_norm_gradient_flows_to_edge_weight():
    gen = torch.Generator().manual_seed(8)
    ei = torch.randint(0, 15, (2, 60), generator=gen)
    # At most one input self-loop per node: with repeated loops PyG's index_put hands the loop's
    # gradient to every copy although only the last one's value is used (iognn: the last one only).
    loop = ei[0] == ei[1]
    first = torch.ones(60, dtype=torch.bool)
    for node in ei[0, loop].unique():
        idx = (loop & (ei[0] == node)).nonzero().view(-1)
        first[idx[:-1]] = False
    ei = ei[:, first]
    w = torch.rand(ei.size(1), generator=gen, dtype=torch.float64, requires_grad=True)
    g = iognn.Graph(ei, 15, self_loops="add_remaining")
    x = torch.randn(15, 4, generator=gen, dtype=torch.float64)

    def ours(w):
        return propagate(g, x, gcn_norm(g, g.augment_edge_values(w, 1.0), torch.float64))

    def theirs(w):
        e, nw = pyg_gcn_norm(ei, w, 15, add_self_loops=True, dtype=torch.float64)
        return reference(e, x, nw, "sum", 15)

    gr = torch.randn(15, 4, generator=gen, dtype=torch.float64)
    a, = torch.autograd.grad(ours(w), w, gr)
    b, = torch.autograd.grad(theirs(w), w, gr)
    torch.testing.assert_close(a, b)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_gradcheck_fp64(reduce):
    gen = torch.Generator().manual_seed(9)
    ei = torch.cat([torch.randint(0, 8, (2, 25), generator=gen), torch.tensor([[1, 1], [1, 1]])], 1)
    g = iognn.Graph(ei, (8, 8))
    x = torch.randn(8, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    w = torch.rand(g.num_edges, dtype=torch.float64, generator=gen, requires_grad=True)
    b = torch.randn(3, dtype=torch.float64, generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w: propagate(g, x, w, reduce), (x, w))
    assert torch.autograd.gradcheck(lambda x, w, b: propagate(g, x, w, reduce, b), (x, w, b))


def check_opcheck(index_dtype, weighted, device):
    """torch.library.opcheck of propagate (with and without a bias) and of its two backward ops
    on `device`, on a graph with edges and an empty one."""
    gen = torch.Generator().manual_seed(10)
    for ei, n in [(torch.randint(0, 12, (2, 50), generator=gen), 12),
                  (torch.empty(2, 0, dtype=torch.int64), 4)]:
        g = iognn.Graph(ei, n, index_dtype=index_dtype if index_dtype == torch.int64 else None)
        g = g.to(device)
        x = torch.randn(n, 5, device=device, requires_grad=True)
        w = torch.rand(g.num_edges, device=device, requires_grad=True) if weighted else None
        args = (g.rowptr, g.col, g.colptr, g.row, g.csc2csr, w, x, "mean")
        torch.library.opcheck(torch.ops.iognn.propagate.default, args)
        bias = torch.randn(5, device=device, requires_grad=True)
        torch.library.opcheck(torch.ops.iognn.propagate.default, args + (bias,))
        grad = torch.randn(n, 5, device=device)
        # The backward ops are not differentiable (see test_double_backward_raises).
        w_const = w.detach() if weighted else None
        torch.library.opcheck(torch.ops.iognn.propagate_backward_x.default,
                              (g.colptr, g.row, g.csc2csr, g.rowptr, w_const, grad, "sum"))
        torch.library.opcheck(torch.ops.iognn.propagate_backward_weight.default,
                              (g.rowptr, g.col, grad, x.detach(), "mean"))


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("weighted", [False, True])
def test_opcheck(index_dtype, weighted):
    check_opcheck(index_dtype, weighted, "cpu")


def test_double_backward_raises():
    # The backward ops have no derivative of their own: a second derivative through them must fail
    # loudly rather than treat grad_x as a constant.
    g = iognn.Graph(torch.tensor([[0, 1, 2], [1, 2, 0]]), 3)
    x = torch.randn(3, 4, requires_grad=True)
    w = torch.rand(3, requires_grad=True)
    (grad_x,) = torch.autograd.grad(propagate(g, x, w).pow(2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="derivative for iognn::propagate_backward_x"):
        grad_x.sum().backward()


def test_bad_inputs_raise_clear_errors():
    ei = torch.tensor([[0, 1, 2], [1, 2, 0]])
    g = iognn.Graph(ei, 3)
    with pytest.raises(ValueError, match="x has 4 rows"):
        propagate(g, torch.randn(4, 2))
    with pytest.raises(ValueError, match="x must be 2-D"):
        propagate(g, torch.randn(3))
    with pytest.raises(TypeError, match="x must be float"):
        propagate(g, torch.ones(3, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match="edge_weight has 2 entries"):
        propagate(g, torch.randn(3, 2), torch.ones(2))
    with pytest.raises(ValueError, match="reduce must be"):
        propagate(g, torch.randn(3, 2), reduce="max")
    # The op itself checks its arguments too (for callers that bypass the wrapper).
    with pytest.raises(ValueError, match="x has 4 rows"):
        torch.ops.iognn.propagate(g.rowptr, g.col, g.colptr, g.row, g.csc2csr, None,
                                  torch.randn(4, 2), "sum")
    with pytest.raises(TypeError, match="edge_weight must have dtype"):
        torch.ops.iognn.propagate(g.rowptr, g.col, g.colptr, g.row, g.csc2csr,
                                  torch.ones(3, dtype=torch.float64), torch.randn(3, 2), "sum")
    x = torch.randn(3, 2)
    with pytest.raises(ValueError, match="bias has 3 entries"):
        propagate(g, x, bias=torch.zeros(3))
    with pytest.raises(ValueError, match="bias must be 1-D"):
        propagate(g, x, bias=torch.zeros(1, 2))
    with pytest.raises(TypeError, match="bias must have dtype"):
        propagate(g, x, bias=torch.zeros(2, dtype=torch.float64))
    # The process stays usable after an error.
    assert propagate(g, torch.ones(3, 2)).shape == (3, 2)

