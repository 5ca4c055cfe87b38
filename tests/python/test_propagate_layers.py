"""The fused layer ops of the propagate family, ``iognn::linear_propagate`` (GCNConv) and
``iognn::propagate_linear`` (SAGEConv), against their composition from iognn.ops.propagate (itself
tested against PyG in test_propagate.py) in fp64, on every graph case, on the CPU and on CUDA; their
gradients by gradcheck, their registration by opcheck, their errors, and the layers' use of them
(one autograd node a layer, the general path where hooks, lazy weights or other inputs need it)."""
import pytest
import torch

import iognn
from iognn.nn import GCNConv, GraphConv, SAGEConv
from iognn.ops import propagate
from iognn.ops.propagate import linear_propagate_csr, propagate_linear_csr
from conftest import sizes, tolerance

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
ROOTS = ["none", "x", "x_root"]


def csr(g, w):
    return None if w is None else g.csr_edge_values(w)


def linear_propagate_ref(g, x, lin_w, w, reduce, bias):
    return propagate(g, x @ lin_w.T, w, reduce, bias)


def propagate_linear_ref(g, x, w, reduce, lin_w, bias, root_w, x_root):
    out = propagate(g, x, w, reduce) @ lin_w.T
    if bias is not None:
        out = out + bias
    if root_w is not None:
        out = out + (x if x_root is None else x_root) @ root_w.T
    return out


def inputs(g, device, dtype, weighted, biased, root, gen, f_in=6, f_out=5):
    """Leaf tensors of a call: x, lin_weight, edge weights (augmented order), bias, root weight and
    x_root (per `root`: none, x itself, or separate destination features)."""
    def leaf(*shape, rand=torch.randn):
        return rand(*shape, generator=gen, dtype=torch.float64).to(device, dtype).requires_grad_()
    x = leaf(g.num_src_nodes, f_in)
    return dict(x=x, lin_w=leaf(f_out, f_in), w=leaf(g.num_edges, rand=torch.rand) if weighted
                else None, bias=leaf(f_out) if biased else None,
                root_w=None if root == "none" else leaf(f_out, f_in),
                x_root=leaf(g.num_dst_nodes, f_in) if root == "x_root" else None)


def grads_of(out, leaves, grad):
    got = torch.autograd.grad(out, leaves, grad, allow_unused=True)
    return [torch.zeros_like(t) if a is None else a for a, t in zip(got, leaves)]


def assert_matches(out, ref, leaves, dtype):
    rtol, atol = tolerance(dtype)
    torch.testing.assert_close(out, ref.to(out.dtype), rtol=rtol, atol=atol)
    if out.numel() == 0:
        return
    grad = torch.randn_like(ref)
    for a, b in zip(grads_of(out, leaves, grad.to(out.dtype)), grads_of(ref, leaves, grad)):
        torch.testing.assert_close(a, b.to(a.dtype), rtol=rtol, atol=atol)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("biased", [False, True])
def test_linear_propagate_matches_the_composition(graph_case, device, reduce, weighted, biased):
    _, edge_index, size = graph_case
    g = iognn.Graph(edge_index, size).to(device)
    a = inputs(g, device, torch.float64, weighted, biased, "none", torch.Generator().manual_seed(0))
    out = linear_propagate_csr(g, a["x"], a["lin_w"], csr(g, a["w"]), reduce, a["bias"])
    ref = linear_propagate_ref(g, a["x"], a["lin_w"], a["w"], reduce, a["bias"])
    leaves = [t for t in (a["x"], a["lin_w"], a["w"], a["bias"]) if t is not None]
    assert_matches(out, ref, leaves, torch.float64)


# (f_in, f_out) that make propagate_linear aggregate first on every graph case, and that make it
# project first on those with about as many edges as sources (the test below checks the choice).
WIDTHS = {"aggregated": (4, 12), "projected": (24, 2)}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("root", ROOTS)
@pytest.mark.parametrize("widths", WIDTHS.values(), ids=WIDTHS.keys())
def test_propagate_linear_matches_the_composition(graph_case, device, reduce, weighted, root,
                                                  widths):
    _, edge_index, size = graph_case
    num_src, num_dst = sizes(size)
    g = iognn.Graph(edge_index, size).to(device)
    a = inputs(g, device, torch.float64, weighted, True, root, torch.Generator().manual_seed(1),
               *widths)
    if root == "x" and num_src != num_dst:  # x is its own root only on a square graph
        with pytest.raises(ValueError, match="without x_root the graph must be square"):
            propagate_linear_csr(g, a["x"], None, reduce, a["lin_w"], a["bias"], a["root_w"])
        return
    out = propagate_linear_csr(g, a["x"], csr(g, a["w"]), reduce, a["lin_w"], a["bias"],
                               a["root_w"], a["x_root"])
    ref = propagate_linear_ref(g, a["x"], a["w"], reduce, a["lin_w"], a["bias"], a["root_w"],
                               a["x_root"])
    leaves = [t for t in a.values() if t is not None]
    assert_matches(out, ref, leaves, torch.float64)


def saved_tensors(fn):
    """fn()'s result and the tensors its autograd nodes saved."""
    saved = []

    def pack(t):
        saved.append(t)
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return out, saved


# (num_src, num_dst, edges, f_in, f_out, projected): projecting first moves N_src (F_in + F_out)
# + E F_out elements, aggregating first (E + N_dst) F_in.
ORDERS = {"wide input": (200, 200, 1000, 64, 4, True),
          "same width": (200, 200, 1000, 8, 8, False),
          "sampled block": (5000, 100, 1500, 64, 16, False),
          "bipartite, few sources": (50, 400, 2000, 32, 8, True)}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", ORDERS.values(), ids=ORDERS.keys())
def test_propagate_linear_projects_first_when_that_moves_fewer_elements(device, case):
    num_src, num_dst, num_edges, f_in, f_out, projected = case
    gen = torch.Generator().manual_seed(10)
    ei = torch.stack([torch.randint(0, num_src, (num_edges,), generator=gen),
                      torch.randint(0, num_dst, (num_edges,), generator=gen)])
    g = iognn.Graph(ei, (num_src, num_dst)).to(device)
    a = inputs(g, device, torch.float64, True, True, "x_root", gen, f_in, f_out)
    out, saved = saved_tensors(lambda: propagate_linear_csr(
        g, a["x"], csr(g, a["w"]), "mean", a["lin_w"], a["bias"], a["root_w"], a["x_root"]))
    # Besides its inputs, the node keeps one tensor: projected first, h = x W^T (the edge
    # weights' gradient reads it); aggregated first, agg = A x (W's does).
    inputs_at = {t.data_ptr() for t in a.values() if t is not None}
    kept = [tuple(t.shape) for t in saved if t.dim() == 2 and t.data_ptr() not in inputs_at]
    assert kept == [(num_src, f_out) if projected else (num_dst, f_in)]
    ref = propagate_linear_ref(g, a["x"], a["w"], "mean", a["lin_w"], a["bias"], a["root_w"],
                               a["x_root"])
    assert_matches(out, ref, [t for t in a.values() if t is not None], torch.float64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_low_precision_against_fp64(device, dtype):
    gen = torch.Generator().manual_seed(2)
    ei = torch.randint(0, 300, (2, 4000), generator=gen)
    g = iognn.Graph(ei, 300).to(device)
    a = inputs(g, device, torch.float64, True, True, "x", gen, f_in=40, f_out=24)
    low = {k: None if v is None else v.detach().to(dtype if k != "w" else torch.float32)
           .requires_grad_() for k, v in a.items()}
    out = linear_propagate_csr(g, low["x"], low["lin_w"], csr(g, low["w"]), "sum", low["bias"])
    ref = linear_propagate_ref(g, a["x"], a["lin_w"], a["w"], "sum", a["bias"])
    assert out.dtype == dtype
    # Sums of rounded products: compared relative to the reference's norm.
    bound = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}[dtype]

    def close(a, b):
        assert float((a.double() - b).norm() / b.norm()) < bound

    close(out, ref)
    out = propagate_linear_csr(g, low["x"], csr(g, low["w"]), "mean", low["lin_w"], low["bias"],
                               low["root_w"])
    ref = propagate_linear_ref(g, a["x"], a["w"], "mean", a["lin_w"], a["bias"], a["root_w"], None)
    close(out, ref)
    grad = torch.randn_like(ref)
    got = grads_of(out, [low["x"], low["lin_w"], low["root_w"]], grad.to(dtype))
    exp = grads_of(ref, [a["x"], a["lin_w"], a["root_w"]], grad)
    for x, y in zip(got, exp):
        close(x, y)


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_every_input(device):
    gen = torch.Generator().manual_seed(3)
    g = iognn.Graph(torch.randint(0, 9, (2, 30), generator=gen), 9).to(device)
    a = inputs(g, device, torch.float64, True, True, "x_root", gen, f_in=4, f_out=3)
    torch.autograd.gradcheck(
        lambda x, lw, w, b: linear_propagate_csr(g, x, lw, g.csr_edge_values(w), "mean", b),
        (a["x"], a["lin_w"], a["w"], a["bias"]))
    torch.autograd.gradcheck(
        lambda x, w, lw, b, rw, xr: propagate_linear_csr(g, x, g.csr_edge_values(w), "sum", lw,
                                                         b, rw, xr),
        (a["x"], a["w"], a["lin_w"], a["bias"], a["root_w"], a["x_root"]))
    torch.autograd.gradcheck(
        lambda x, lw, rw: propagate_linear_csr(g, x, None, "mean", lw, None, rw),
        (a["x"], a["lin_w"], a["root_w"]))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_opcheck(device, index_dtype):
    gen = torch.Generator().manual_seed(4)
    for ei, n in [(torch.randint(0, 12, (2, 50), generator=gen), 12),
                  (torch.empty(2, 0, dtype=torch.int64), 4)]:
        g = iognn.Graph(ei, n, index_dtype=index_dtype if index_dtype == torch.int64 else None)
        g = g.to(device)
        a = inputs(g, device, torch.float32, True, True, "x", gen)
        graph = (g.rowptr, g.col, g.colptr, g.row, g.csc2csr, g.csr_edge_values(a["w"]))
        torch.library.opcheck(torch.ops.iognn.linear_propagate.default,
                              graph + (a["x"], a["lin_w"], "sum", a["bias"]))
        torch.library.opcheck(torch.ops.iognn.propagate_linear.default,
                              graph + (a["x"], "mean", a["lin_w"], a["bias"], a["root_w"]))
        torch.library.opcheck(torch.ops.iognn.propagate_linear.default,
                              graph + (a["x"].detach(), "sum", a["lin_w"], None, a["root_w"],
                                       a["x"][:, :6] * 2))


def test_bad_arguments_name_themselves():
    g = iognn.Graph(torch.tensor([[0, 1, 2], [1, 2, 0]]), 3)
    x, w = torch.randn(3, 4), torch.randn(5, 4)
    with pytest.raises(RuntimeError, match="lin_weight has dtype Double but x has dtype Float"):
        linear_propagate_csr(g, x, w.double(), None, "sum")
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        linear_propagate_csr(g, x, torch.randn(5, 3), None, "sum")
    with pytest.raises(ValueError, match="x must be 2-D"):
        linear_propagate_csr(g, x.view(3, 2, 2), w, None, "sum")
    with pytest.raises(ValueError, match="bias"):
        linear_propagate_csr(g, x, w, None, "sum", torch.randn(4))
    with pytest.raises(ValueError, match="reduce must be 'sum' or 'mean'"):
        linear_propagate_csr(g, x, w, None, "max")
    with pytest.raises(ValueError, match="x_root is given without root_weight"):
        propagate_linear_csr(g, x, None, "sum", w, None, None, x)
    with pytest.raises(RuntimeError, match="root_weight has dtype Double"):
        propagate_linear_csr(g, x, None, "sum", w, None, w.double())
    bip = iognn.Graph(torch.tensor([[0, 3], [1, 0]]), (4, 2))
    with pytest.raises(ValueError, match="without x_root the graph must be square"):
        propagate_linear_csr(bip, torch.randn(4, 4), None, "sum", w, None, w)


# ---- the layers -----------------------------------------------------------------------------
def node_of(out):
    return out.grad_fn.name()


def general_path(module):
    """Forces a layer onto its general path: a (no-op) forward hook on each projection."""
    for lin in ("lin", "lin_l", "lin_r", "lin_rel", "lin_root"):
        if isinstance(getattr(module, lin, None), torch.nn.Module):
            getattr(module, lin).register_forward_hook(lambda *args: None)
    return module


LAYERS = [("GCNConv", lambda: GCNConv(16, 8), "LinearPropagateFunction"),
          ("GCNConv_mean", lambda: GCNConv(16, 8, aggr="mean", normalize=False),
           "LinearPropagateFunction"),
          ("SAGEConv", lambda: SAGEConv(16, 8), "PropagateLinearFunction"),
          ("SAGEConv_sum_no_root", lambda: SAGEConv(16, 8, aggr="sum", root_weight=False),
           "PropagateLinearFunction"),
          ("GraphConv", lambda: GraphConv(16, 8), "PropagateLinearFunction"),
          ("GraphConv_mean", lambda: GraphConv(16, 8, aggr="mean"), "PropagateLinearFunction")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,make,node", LAYERS, ids=[c[0] for c in LAYERS])
def test_layers_run_one_node_and_match_their_general_path(device, name, make, node):
    gen = torch.Generator().manual_seed(5)
    ei = torch.randint(0, 50, (2, 300), generator=gen).to(device)
    x = torch.randn(50, 16, generator=gen).to(device).requires_grad_()
    torch.manual_seed(0)
    fused = make().to(device)
    torch.manual_seed(0)
    general = general_path(make().to(device))
    out, ref = fused(x, ei), general(x, ei)
    assert node in node_of(out) and node not in node_of(ref)
    # The node's inputs are the leaves themselves: nothing else was recorded.
    assert {type(f).__name__ for f, _ in out.grad_fn.next_functions if f is not None} == {
        "AccumulateGrad"}
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    grad = torch.randn_like(out)
    leaves = [x] + list(fused.parameters())
    got = torch.autograd.grad(out, leaves, grad)
    exp = torch.autograd.grad(ref, [x] + list(general.parameters()), grad)
    for a, b in zip(got, exp):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_sage_bipartite_and_projected_inputs_take_the_fused_path(device):
    gen = torch.Generator().manual_seed(6)
    ei = torch.stack([torch.randint(0, 40, (200,), generator=gen),
                      torch.randint(0, 15, (200,), generator=gen)]).to(device)
    xs = torch.randn(40, 16, generator=gen).to(device).requires_grad_()
    xd = torch.randn(15, 12, generator=gen).to(device).requires_grad_()
    for kwargs in (dict(), dict(project=True)):
        torch.manual_seed(0)
        fused = SAGEConv((16, 12), 8, **kwargs).to(device)
        torch.manual_seed(0)
        general = general_path(SAGEConv((16, 12), 8, **kwargs).to(device))
        if kwargs:
            general.lin._forward_hooks.clear()  # the projection itself is not fused
        out, ref = fused((xs, xd), ei), general((xs, xd), ei)
        assert "PropagateLinearFunction" in node_of(out)
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
        grad = torch.randn_like(out)
        for a, b in zip(torch.autograd.grad(out, [xs, xd], grad),
                        torch.autograd.grad(ref, [xs, xd], grad)):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_graph_conv_edge_weights_get_their_gradient_through_the_fused_op(device):
    gen = torch.Generator().manual_seed(9)
    ei = torch.randint(0, 40, (2, 250), generator=gen).to(device)
    x = torch.randn(40, 16, generator=gen).to(device).requires_grad_()
    w = torch.rand(250, generator=gen).to(device).requires_grad_()
    torch.manual_seed(0)
    fused = GraphConv(16, 8).to(device)
    torch.manual_seed(0)
    general = general_path(GraphConv(16, 8).to(device))
    out, ref = fused(x, ei, w), general(x, ei, w)
    assert "PropagateLinearFunction" in node_of(out)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    grad = torch.randn_like(out)
    for a, b in zip(torch.autograd.grad(out, [x, w], grad), torch.autograd.grad(ref, [x, w], grad)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_hooks_lazy_weights_and_batches_keep_the_general_path():
    ei = torch.randint(0, 20, (2, 60), generator=torch.Generator().manual_seed(7))
    x = torch.randn(20, 16, requires_grad=True)
    seen = []
    gcn = GCNConv(16, 8)
    gcn.lin.register_forward_hook(lambda module, inp, out: seen.append(out.shape))
    assert "LinearPropagateFunction" not in node_of(gcn(x, ei)) and seen == [(20, 8)]
    lazy = SAGEConv(-1, 8)
    first = lazy(x, ei)  # materialises lin_l / lin_r through their pre-hooks
    assert "PropagateLinearFunction" not in node_of(first)
    second = lazy(x, ei)
    assert "PropagateLinearFunction" in node_of(second)
    torch.testing.assert_close(first, second)
    batch = torch.randn(3, 20, 16)  # [*, N, F]: the general path's batch columns
    out = GCNConv(16, 8)(batch, ei)
    assert out.shape == (3, 20, 8)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_autocast_matches_the_general_path(device):
    dtype = torch.bfloat16
    ei = torch.randint(0, 60, (2, 400), generator=torch.Generator().manual_seed(8)).to(device)
    x = torch.randn(60, 16, device=device, requires_grad=True)
    for make in (lambda: GCNConv(16, 8), lambda: SAGEConv(16, 8)):
        torch.manual_seed(0)
        fused = make().to(device)
        torch.manual_seed(0)
        general = general_path(make().to(device))
        with torch.autocast(device, dtype=dtype):
            out, ref = fused(x, ei), general(x, ei)
        assert out.dtype == ref.dtype == dtype
        torch.testing.assert_close(out, ref, rtol=2e-2, atol=2e-2)
        grad = torch.randn_like(out)
        for a, b in zip(torch.autograd.grad(out, [x] + list(fused.parameters()), grad),
                        torch.autograd.grad(ref, [x] + list(general.parameters()), grad)):
            assert a.dtype == b.dtype
            torch.testing.assert_close(a, b, rtol=3e-2, atol=3e-2)


WIDE = {"SAGEConv": lambda lib: lib.SAGEConv(96, 4),
        "SAGEConv_bipartite": lambda lib: lib.SAGEConv((96, 24), 4),
        "GraphConv": lambda lib: lib.GraphConv(96, 4)}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", WIDE)
def test_wide_inputs_project_first_and_match_pyg(device, name):
    """A wide input projected before the aggregation (A (x W^T) instead of PyG's (A x) W^T): the
    same outputs and gradients as PyG's layer, up to fp32 rounding."""
    import torch_geometric.nn as pyg_nn
    gen = torch.Generator().manual_seed(11)
    bipartite = name.endswith("bipartite")
    num_dst = 150 if bipartite else 300
    ei = torch.stack([torch.randint(0, 300, (2000,), generator=gen),
                      torch.randint(0, num_dst, (2000,), generator=gen)]).to(device)
    x = torch.randn(300, 96, generator=gen).to(device).requires_grad_()
    x_dst = torch.randn(num_dst, 24, generator=gen).to(device).requires_grad_()
    inp = (x, x_dst) if bipartite else x
    torch.manual_seed(0)
    theirs = WIDE[name](pyg_nn).to(device)
    ours = WIDE[name](iognn.nn).to(device)
    ours.load_state_dict(theirs.state_dict())
    out, ref = ours(inp, ei), theirs(inp, ei)
    assert "PropagateLinearFunction" in node_of(out)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    grad = torch.randn_like(out)
    leaves = [x, x_dst] if bipartite else [x]
    got = torch.autograd.grad(out, leaves + list(ours.parameters()), grad)
    exp = torch.autograd.grad(ref, leaves + list(theirs.parameters()), grad)
    for a, b in zip(got, exp):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_tile_policy_keeps_the_fused_path_where_no_tile_kernel_runs(device):
    """A graph whose tile_policy allows tiles (a reordered one: "auto") runs the fused op for
    features no tile kernel takes (fp32 without TF32 on CUDA; on the CPU under "auto"), and the
    general path, which may choose the tiles, where one may run (bf16 under autocast on CUDA; the
    host twin under tile_policy="tiles" on the CPU)."""
    gen = torch.Generator().manual_seed(12)
    ei = torch.randint(0, 64, (2, 400), generator=gen).to(device)
    x = torch.randn(64, 16, generator=gen).to(device).requires_grad_()
    conv = SAGEConv(16, 8).to(device)
    graph = iognn.Graph(ei, 64).to(device)
    for policy in ("auto", "tiles"):
        graph.tile_policy = policy
        fused = device == "cuda" or policy == "auto"
        assert ("PropagateLinearFunction" in node_of(conv(x, graph))) == fused, policy
        if device == "cuda":
            with torch.autocast("cuda", dtype=torch.bfloat16):
                assert "PropagateLinearFunction" not in node_of(conv(x, graph)), policy
