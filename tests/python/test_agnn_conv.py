"""AGNNConv against PyG 2.8's (the drop-in contract): parameters and state_dict, outputs and the
gradients of x and beta in fp32 and fp64 on every conftest graph case, every adjacency form,
autocast, a deterministic backward, clear errors, ``iognn.accelerate``; and on CUDA the same
against PyG on the GPU, with fp16 / bf16 accuracy bounded by PyG's own."""
import copy

import pytest
import torch
import torch_geometric
import torch_geometric.nn as pyg_nn

import iognn
import iognn.nn as io_nn

from conftest import GRAPH_CASES, random_edge_index, sizes, tolerance
from test_nn_adjacency import builds  # noqa: F401  (the fixture counting Graph builds)
from test_nn_basic import SUPERNODE_TOL, assert_parity

# torch's beta warnings about sparse CSR/CSC support and PyG's COO-to-CSR conversion notices
pytestmark = pytest.mark.filterwarnings("ignore:.*[Ss]parse")
VARIANTS = [{}, {"add_self_loops": False}, {"requires_grad": False},
            {"requires_grad": False, "add_self_loops": False}]
VARIANT_IDS = [",".join(f"{k}={v}" for k, v in kw.items()) or "default" for kw in VARIANTS]


def agnn_pair(beta=1.7, dtype=torch.float32, device="cpu", **kwargs):
    """(iognn layer, PyG layer) holding the same beta (a parameter or a buffer), in dtype."""
    theirs = pyg_nn.AGNNConv(**kwargs).to(device, dtype)
    with torch.no_grad():
        theirs.beta.fill_(beta)
    ours = io_nn.AGNNConv(**kwargs).to(device, dtype)
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def num_nodes(size):
    """AGNN reads one x: a bipartite case's indices fit max(num_src, num_dst) nodes."""
    return max(sizes(size))


def node_features(n, channels=6, dtype=torch.float32, device="cpu", seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, channels, generator=gen, dtype=dtype).to(device).requires_grad_()


def check_parity(ours, theirs, x, edge_index, tol, reference_adj=None):
    """Output and the gradients of x and beta (a parameter) against PyG; PyG gets
    ``reference_adj`` (default: the int64 edge_index)."""
    reference_adj = edge_index.long() if reference_adj is None else reference_adj
    assert_parity(ours, theirs, lambda m: m(x, edge_index if m is ours else reference_adj),
                  (x,), tol=tol)


# ---- parameters and state_dict ----------------------------------------------------------------
@pytest.mark.parametrize("requires_grad", [True, False])
def test_state_matches_pyg_both_ways(requires_grad):
    ours, theirs = io_nn.AGNNConv(requires_grad), pyg_nn.AGNNConv(requires_grad)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["beta"]
    assert torch.equal(ours.beta, theirs.beta) and ours.beta.dtype == torch.float32
    assert isinstance(ours.beta, torch.nn.Parameter) == requires_grad
    assert ("beta" in dict(ours.named_buffers())) != requires_grad
    assert ours.requires_grad == requires_grad and ours.add_self_loops
    assert repr(ours) == repr(theirs) == "AGNNConv()"
    with torch.no_grad():
        theirs.beta.fill_(0.25)
    ours.load_state_dict(theirs.state_dict())
    assert ours.beta.item() == 0.25
    fresh = pyg_nn.AGNNConv(requires_grad)
    fresh.load_state_dict(ours.state_dict())
    assert fresh.beta.item() == 0.25
    ours.reset_parameters()  # a trainable beta goes back to 1; a buffer keeps its value
    assert ours.beta.item() == (1.0 if requires_grad else 0.25)


def test_message_passing_arguments():
    layer = io_nn.AGNNConv(aggr="sum", node_dim=0, decomposed_layers=2)
    assert layer.aggr == "sum" and layer.node_dim == 0
    assert io_nn.AGNNConv().aggr == "add" and io_nn.AGNNConv().node_dim == -2
    with pytest.raises(NotImplementedError, match="aggr='mean' is not supported"):
        io_nn.AGNNConv(aggr="mean")
    with pytest.raises(NotImplementedError, match="target_to_source"):
        io_nn.AGNNConv(flow="target_to_source")
    with pytest.raises(TypeError, match="unexpected keyword argument 'heads'"):
        io_nn.AGNNConv(heads=2)


# ---- outputs and gradients against PyG -----------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
@pytest.mark.parametrize("kwargs", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("case", GRAPH_CASES, ids=[c[0] for c in GRAPH_CASES])
def test_matches_pyg(case, kwargs, dtype):
    """Every conftest case: empty graphs, isolated nodes, self-loops and duplicate edges, a
    super-node, int32 / int64 and strided indices; beta learnt (or a buffer) and not 1."""
    name, edge_index, size = case
    ours, theirs = agnn_pair(dtype=dtype, **kwargs)
    x = node_features(num_nodes(size), dtype=dtype)
    tol = SUPERNODE_TOL if name == "supernode" and dtype == torch.float32 else tolerance(dtype)
    check_parity(ours, theirs, x, edge_index, tol)


@pytest.mark.parametrize("beta", [-3.0, 0.0, 12.0])
def test_beta_sign_and_scale(beta):
    """A negative beta prefers dissimilar neighbours, 0 averages them, a large one nearly picks
    the most similar: all as PyG."""
    _, edge_index, size = next(c for c in GRAPH_CASES if c[0] == "loops_duplicates")
    ours, theirs = agnn_pair(beta=beta, dtype=torch.float64)
    check_parity(ours, theirs, node_features(size, dtype=torch.float64), edge_index,
                 tolerance(torch.float64))


def test_non_contiguous_features_and_zero_rows():
    """x a strided view (every other column) with all-zero rows: normalize's eps keeps their
    cosine 0, as in PyG."""
    _, edge_index, size = next(c for c in GRAPH_CASES if c[0] == "random")
    wide = torch.randn(size, 12, generator=torch.Generator().manual_seed(1))
    wide[:3] = 0
    x = wide[:, ::2].requires_grad_()
    assert not x.is_contiguous()
    check_parity(*agnn_pair(), x, edge_index, tolerance(torch.float32))


# ---- adjacency forms -----------------------------------------------------------------------------
def adjacency_case():
    """30 nodes with self-loops and duplicate edges, int64."""
    gen = torch.Generator().manual_seed(2)
    edge_index = random_edge_index(30, 30, 150, gen)
    loops = torch.arange(0, 30, 4).repeat(2, 1)
    return torch.cat([edge_index, loops, edge_index[:, :20]], 1), 30


def sparse_adjacency(kind, edge_index, n):
    """adj_t[target, source]: 'coo' keeps the duplicates (uncoalesced), 'csr' / 'csc' sum them."""
    coo = torch.sparse_coo_tensor(edge_index.flip(0), torch.ones(edge_index.size(1)), (n, n))
    if kind == "coo":
        return coo
    return coo.coalesce().to_sparse_csr() if kind == "csr" else coo.coalesce().to_sparse_csc()


@pytest.mark.parametrize("add_self_loops", [True, False])
@pytest.mark.parametrize("kind", ["coo", "csr", "csc"])
def test_torch_sparse_adjacency_matches_pyg(kind, add_self_loops):
    """With self-loops PyG coalesces the matrix (unique entries, loops replaced); without, it
    reads the stored entries. Where PyG fails (a CSC matrix; without loops an uncoalesced COO
    too) it is given the same matrix as CSR with loops, else the stored entries as an
    edge_index."""
    edge_index, n = adjacency_case()
    adj = sparse_adjacency(kind, edge_index, n)
    ours, theirs = agnn_pair(add_self_loops=add_self_loops)
    if kind == "csc" and add_self_loops:
        reference = adj.to_sparse_csr()
    elif kind != "csr" and not add_self_loops:
        reference = iognn.adjacency.to_edge_index(adj)[0]
    else:
        reference = adj.clone()
    check_parity(ours, theirs, node_features(n), adj, tolerance(torch.float32), reference)


@pytest.mark.parametrize("add_self_loops", [True, False])
def test_edge_index_class_matches_pyg(add_self_loops):
    edge_index, n = adjacency_case()
    ours, theirs = agnn_pair(add_self_loops=add_self_loops)
    x = node_features(n)
    for sort_order in (None, "row", "col"):
        ei = torch_geometric.EdgeIndex(edge_index, sparse_size=(n, n))
        if sort_order is not None:
            ei = ei.sort_by(sort_order)[0]
        check_parity(ours, theirs, x, ei, tolerance(torch.float32), ei)


def test_sparse_tensor_matches_pyg():
    torch_sparse = pytest.importorskip("torch_sparse")
    edge_index, n = adjacency_case()
    adj = torch_sparse.SparseTensor(row=edge_index[1], col=edge_index[0], sparse_sizes=(n, n))
    for add_self_loops in (True, False):
        ours, theirs = agnn_pair(add_self_loops=add_self_loops)
        check_parity(ours, theirs, node_features(n), adj, tolerance(torch.float32), adj)


def test_prebuilt_graph_gives_the_edge_index_result():
    """A Graph built with 'keep' gets the layer's loops (cached on it); one built with 'replace'
    is used as it is; another mode is refused."""
    edge_index, n = adjacency_case()
    x = node_features(n)
    layer, plain = io_nn.AGNNConv(), io_nn.AGNNConv(add_self_loops=False)
    keep = iognn.Graph(edge_index, n)
    replace = iognn.Graph(edge_index, n, self_loops="replace")
    assert torch.equal(layer(x, keep), layer(x, edge_index))
    assert torch.equal(layer(x, replace), layer(x, edge_index))
    assert torch.equal(plain(x, keep), plain(x, edge_index))
    with pytest.raises(ValueError, match="add_remaining"):
        layer(x, iognn.Graph(edge_index, n, self_loops="add_remaining"))
    with pytest.raises(ValueError, match="replace"):
        plain(x, replace)


def test_graph_is_built_once_per_adjacency(builds):
    edge_index, n = adjacency_case()
    x = node_features(n)
    first, second = io_nn.AGNNConv(), io_nn.AGNNConv()
    for _ in range(3):
        second(first(x, edge_index), edge_index).sum().backward()
    assert len(builds) == 1
    io_nn.GATConv(6, 4)(x, edge_index)  # GAT's loops are AGNN's: the same Graph
    assert len(builds) == 1


# ---- precision, determinism, errors, accelerate --------------------------------------------------
def relative_error(a, b):
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm().clamp(min=1e-12))


@pytest.mark.parametrize("dtype,bound", [(torch.bfloat16, 0.05), (torch.float16, 0.01)],
                         ids=["bf16", "fp16"])
def test_autocast(dtype, bound):
    """Under autocast the layer computes in the autocast dtype and returns it, as the other
    attention layers do; beta and x keep their fp32 gradients."""
    edge_index, n = adjacency_case()
    layer = agnn_pair()[0]
    x = node_features(n)
    ref = layer(x, edge_index)
    grad = torch.randn(ref.shape, generator=torch.Generator().manual_seed(3))
    ref_grads = torch.autograd.grad(ref, [x, layer.beta], grad)
    with torch.autocast("cpu", dtype=dtype):
        out = layer(x, edge_index)
    assert out.dtype == dtype and relative_error(out, ref) < bound
    grads = torch.autograd.grad(out, [x, layer.beta], grad.to(dtype))
    for got, exp in zip(grads, ref_grads):
        assert got.dtype == torch.float32 and relative_error(got, exp) < 0.1


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_half_precision_inputs(dtype):
    """fp16 / bf16 x and layer (no autocast): the result in that dtype, close to fp32."""
    edge_index, n = adjacency_case()
    ours, _ = agnn_pair()
    x = node_features(n)
    half = copy.deepcopy(ours).to(dtype)
    out = half(x.detach().to(dtype), edge_index)
    assert out.dtype == dtype
    assert relative_error(out, ours(x, edge_index)) < tolerance(dtype)[0] * 3


def backward_twice(layer, x, edge_index):
    results = []
    for _ in range(2):
        leaf = x.detach().requires_grad_()
        out = layer(leaf, edge_index)
        grads = torch.autograd.grad(out, [leaf, layer.beta], torch.ones_like(out))
        results.append((out, *grads))
    return results


def test_backward_is_deterministic():
    _, edge_index, size = next(c for c in GRAPH_CASES if c[0] == "supernode")  # 5,000 in-edges
    first, second = backward_twice(agnn_pair()[0], node_features(size), edge_index)
    for a, b in zip(first, second):
        assert torch.equal(a, b)


def test_bad_inputs_raise_clear_errors():
    edge_index, n = adjacency_case()
    layer = io_nn.AGNNConv()
    with pytest.raises(ValueError, match="must be 2-D"):
        layer(torch.randn(2, n, 6), edge_index)
    with pytest.raises(ValueError, match="must be 2-D"):
        layer(torch.randn(n), edge_index)
    with pytest.raises(TypeError, match="x must be float32"):
        layer(torch.ones(n, 6, dtype=torch.long), edge_index)
    with pytest.raises(TypeError, match="edge_index must be"):
        layer(torch.randn(n, 6), edge_index.tolist())
    with pytest.raises(ValueError, match="Encountered tensor with size 5"):
        layer(torch.randn(5, 6), iognn.Graph(edge_index, n))
    layer.node_dim = -1
    with pytest.raises(ValueError, match="node_dim=-1 does not name a node dimension"):
        layer(torch.randn(n, 6), edge_index)
    layer.node_dim = 0  # PyG's alternative name of the rows of [N, F]
    assert layer(torch.randn(n, 6), edge_index).shape == (n, 6)


def test_accelerate_swaps_pyg_layers_and_shares_beta():
    buffered = pyg_nn.AGNNConv(requires_grad=False, add_self_loops=False)
    model = torch.nn.ModuleList([pyg_nn.AGNNConv(), buffered, pyg_nn.AGNNConv(aggr="mean")])
    reference = copy.deepcopy(model)
    beta = model[0].beta
    report = iognn.accelerate(model)
    assert report.replaced == [("0", "AGNNConv"), ("1", "AGNNConv")]
    assert report.skipped == [("2", "AGNNConv", "aggr='mean' (iognn's attention sums)")]
    assert type(model[0]) is io_nn.AGNNConv and model[0].beta is beta
    assert model[1].beta is buffered.beta and not model[1].add_self_loops
    edge_index, n = adjacency_case()
    x = node_features(n)
    for ours, theirs in zip(model[:2], reference[:2]):
        torch.testing.assert_close(ours(x, edge_index), theirs(x, edge_index))


# ---- CUDA ----------------------------------------------------------------------------------------
CUDA_CASES = [c for c in GRAPH_CASES if c[0] != "no_nodes"]


@pytest.mark.cuda
@pytest.mark.parametrize("kwargs", VARIANTS[:2], ids=VARIANT_IDS[:2])
@pytest.mark.parametrize("case", CUDA_CASES, ids=[c[0] for c in CUDA_CASES])
def test_matches_pyg_cuda(case, kwargs):
    name, edge_index, size = case
    ours, theirs = agnn_pair(device="cuda", **kwargs)
    x = node_features(num_nodes(size), device="cuda")
    tol = SUPERNODE_TOL if name == "supernode" else tolerance(torch.float32)
    check_parity(ours, theirs, x, edge_index.cuda(), tol)


@pytest.mark.cuda
@pytest.mark.parametrize("channels", [1, 8, 16, 24, 32, 64, 128, 256])
def test_feature_widths_match_pyg_cuda(channels):
    edge_index = random_edge_index(300, 300, 3000, torch.Generator().manual_seed(channels))
    ours, theirs = agnn_pair(device="cuda")
    x = node_features(300, channels, device="cuda")
    check_parity(ours, theirs, x, edge_index.cuda(), tolerance(torch.float32))


@pytest.mark.cuda
def test_backward_is_deterministic_cuda():
    gen = torch.Generator().manual_seed(3)
    hub_src = torch.randint(0, 50_000, (200_000,), generator=gen)
    edge_index = torch.cat([torch.stack([hub_src, torch.zeros_like(hub_src)]),
                            random_edge_index(50_000, 50_000, 100_000, gen)], 1).cuda()
    layer = agnn_pair(device="cuda")[0]
    first, second = backward_twice(layer, node_features(50_000, 32, device="cuda"), edge_index)
    for a, b in zip(first, second):
        assert torch.equal(a, b)


# Relative errors below these count as exact whatever PyG's own (4 eps in fp16 / bf16).
FLOOR = {torch.float32: 1e-5}


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16],
                         ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("graph", ["uniform:2000:15", "powerlaw:200000:16"])
def test_as_accurate_as_pyg_cuda(graph, dtype):
    """Norm-wise relative errors of the output and the gradients of x and beta against PyG in
    fp64 on the GPU: no more than twice PyG's own in ``dtype`` plus FLOOR."""
    from iognn.bench.graphs import load_graph
    edge_index, n = load_graph(graph, seed=1, device="cuda")
    ours, theirs = agnn_pair(dtype=dtype, device="cuda")
    reference = copy.deepcopy(theirs).double()
    x = torch.randn(n, 64, generator=torch.Generator(device="cuda").manual_seed(0),
                    device="cuda").to(dtype)
    ref_x = x.double().requires_grad_()
    ref_out = reference(ref_x, edge_index)
    grad = torch.randn(ref_out.shape, device="cuda", dtype=torch.float64,
                       generator=torch.Generator(device="cuda").manual_seed(1))
    expected = [ref_out, *torch.autograd.grad(ref_out, [ref_x, reference.beta], grad)]

    def errors(layer):
        leaf = x.detach().requires_grad_()
        out = layer(leaf, edge_index)
        got = [out, *torch.autograd.grad(out, [leaf, layer.beta], grad.to(dtype))]
        return [relative_error(g, e) for g, e in zip(got, expected)]

    floor = FLOOR.get(dtype, 4 * torch.finfo(dtype).eps)
    for label, a, b in zip(["output", "grad x", "grad beta"], errors(ours), errors(theirs)):
        assert a <= 2 * b + floor, f"{label}: iognn relative error {a:.3g}, PyG's {b:.3g}"
