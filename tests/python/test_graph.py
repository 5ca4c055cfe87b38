"""iognn.Graph on the CPU: layouts against a NumPy reference, every adjacency kind, PyG's self-loop
rules and fill values, degree statistics, and errors."""
import math

import numpy as np
import pytest
import torch
from torch_geometric import EdgeIndex
from torch_geometric.utils import (add_remaining_self_loops, add_self_loops, degree,
                                   remove_self_loops, to_undirected)

import iognn
from iognn import Graph, SelfLoops

from conftest import GRAPH_CASES, random_edge_index, sizes

MODES = list(SelfLoops)
ARRAYS = ("rowptr", "col", "eid", "colptr", "row", "csc2csr", "edge_map")


def reference_arrays(edge_index, num_src, num_dst, mode):
    """The seven arrays of graph.h's contract, from PyG's augmented edge list and NumPy sorts."""
    ei = edge_index.long()
    src, dst = ei[0].numpy(), ei[1].numpy()
    if mode == SelfLoops.KEEP:
        aug_src, aug_dst, edge_map = src, dst, np.arange(len(src))
    else:
        kept = np.nonzero(src != dst)[0]
        num_loops = min(num_src, num_dst)
        loop_map = np.full(num_loops, -1)
        if mode == SelfLoops.ADD_REMAINING:
            for k in np.nonzero(src == dst)[0]:  # ascending: the last input loop wins
                loop_map[src[k]] = k
        aug_src = np.concatenate([src[kept], np.arange(num_loops)])
        aug_dst = np.concatenate([dst[kept], np.arange(num_loops)])
        edge_map = np.concatenate([kept, loop_map])
    ids = np.arange(len(aug_src))
    eid = np.lexsort((ids, aug_src, aug_dst))  # by destination, then source, then id
    col = aug_src[eid]
    csc2csr = np.argsort(col, kind="stable")
    row = aug_dst[eid][csc2csr]
    rowptr = np.concatenate([[0], np.cumsum(np.bincount(aug_dst, minlength=num_dst))])
    colptr = np.concatenate([[0], np.cumsum(np.bincount(aug_src, minlength=num_src))])
    return dict(rowptr=rowptr, col=col, eid=eid, colptr=colptr, row=row, csc2csr=csc2csr,
                edge_map=edge_map)


def assert_matches_reference(g, edge_index, num_src, num_dst, mode):
    want = reference_arrays(edge_index, num_src, num_dst, mode)
    for name in ARRAYS:
        got = getattr(g, name)
        assert got.dtype == g.index_dtype, name
        np.testing.assert_array_equal(got.long().numpy(), want[name], err_msg=name)


# ---- construction from every adjacency kind ------------------------------------------------------

@pytest.mark.parametrize("index_dtype", [None, torch.int64], ids=["default", "int64"])
@pytest.mark.parametrize("mode", MODES, ids=[m.name for m in MODES])
def test_layouts_match_reference_on_every_case(graph_case, mode, index_dtype):
    _, edge_index, size = graph_case
    num_src, num_dst = sizes(size)
    g = Graph(edge_index, size, mode, index_dtype)
    assert g.index_dtype == (index_dtype or torch.int32)
    assert g.size == (num_src, num_dst) and g.is_bipartite == (num_src != num_dst)
    assert g.num_input_edges == edge_index.size(1)
    assert_matches_reference(g, edge_index, num_src, num_dst, mode)


def test_int32_int64_and_strided_inputs_agree():
    gen = torch.Generator().manual_seed(1)
    ei = random_edge_index(40, 40, 300, gen)
    base = Graph(ei, 40, SelfLoops.REPLACE)
    wide = torch.zeros(2, 900, dtype=torch.int64)
    wide[:, ::3] = ei
    layouts = [ei.int(), ei.t().contiguous().t(), ei.int().t().contiguous().t(), wide[:, ::3]]
    for layout in layouts:
        g = Graph(layout, 40, SelfLoops.REPLACE)
        for name in ARRAYS:
            assert torch.equal(getattr(g, name), getattr(base, name)), name


def test_from_edge_index_class_uses_its_sparse_size():
    gen = torch.Generator().manual_seed(2)
    ei = random_edge_index(12, 7, 40, gen)
    g, values = Graph.from_adjacency(EdgeIndex(ei, sparse_size=(12, 7)))
    assert values is None and g.size == (12, 7)
    assert_matches_reference(g, ei, 12, 7, SelfLoops.KEEP)
    g, _ = Graph.from_adjacency(EdgeIndex(ei, sparse_size=(20, 9)), self_loops="replace")
    assert g.size == (20, 9)  # the sparse size wins over the largest index
    g, _ = Graph.from_adjacency(EdgeIndex(ei))  # no sparse size: inferred, square
    assert g.size == (12, 12)
    assert Graph(EdgeIndex(ei), (12, 7)).size == (12, 7)  # an EdgeIndex is a valid edge_index


def dense_from_graph(g, values):
    """Dense adj_t [num_dst, num_src] of a KEEP graph's input edges and their values."""
    ei = g.edge_index
    out = torch.zeros(g.num_dst_nodes, g.num_src_nodes, dtype=values.dtype)
    return out.index_put_((ei[1], ei[0]), values, accumulate=True)


@pytest.mark.parametrize("layout", ["coo", "csr", "csc"])
@pytest.mark.parametrize("shape", [(30, 30), (9, 25), (31, 7)])  # (num_dst, num_src)
def test_from_torch_sparse_transposed_adjacency(layout, shape):
    num_dst, num_src = shape
    gen = torch.Generator().manual_seed(3)
    ei = random_edge_index(num_src, num_dst, 80, gen)
    w = torch.rand(80, generator=gen, dtype=torch.float64)
    adj_t = torch.sparse_coo_tensor(torch.stack([ei[1], ei[0]]), w, shape)  # adj_t[target, source]
    if layout == "csr":
        adj_t = adj_t.coalesce().to_sparse_csr()
    elif layout == "csc":
        adj_t = adj_t.coalesce().to_sparse_csc()
    g, values = Graph.from_adjacency(adj_t)
    assert g.size == (num_src, num_dst)
    assert values.shape == (g.num_input_edges,)
    # values are in the order of the edges the graph was built from: same matrix back.
    torch.testing.assert_close(dense_from_graph(g, values), adj_t.to_dense(), rtol=0, atol=1e-12)
    if layout == "coo":  # an uncoalesced COO keeps the input order exactly
        assert torch.equal(g.edge_index, ei) and torch.equal(values, w)


def test_from_torch_sparse_tensor_package():
    torch_sparse = pytest.importorskip("torch_sparse")
    gen = torch.Generator().manual_seed(4)
    ei = random_edge_index(15, 15, 60, gen)
    w = torch.rand(60, generator=gen)
    adj_t = torch_sparse.SparseTensor(row=ei[1], col=ei[0], value=w, sparse_sizes=(15, 15))
    g, values = Graph.from_adjacency(adj_t)
    torch.testing.assert_close(dense_from_graph(g, values), adj_t.to_dense())


def test_from_adjacency_rejects_other_types():
    with pytest.raises(TypeError, match="adjacency must be"):
        Graph.from_adjacency([[0, 1], [1, 0]])
    with pytest.raises(ValueError, match="2-D"):
        Graph.from_adjacency(torch.eye(3).to_sparse().unsqueeze(0))


def test_num_nodes_inference_and_index_dtype_rule():
    ei = torch.tensor([[0, 5, 2], [3, 1, 2]], dtype=torch.int32)
    g = Graph(ei)
    assert g.size == (6, 6) and g.num_nodes == 6
    assert g.index_dtype == torch.int32  # default: int32 whenever every count fits
    assert Graph(ei.long()).index_dtype == torch.int32
    assert Graph(ei, index_dtype=torch.int64).index_dtype == torch.int64
    assert Graph(ei, index_dtype=torch.int32).index_dtype == torch.int32
    assert Graph(torch.empty(2, 0, dtype=torch.int64)).size == (0, 0)
    assert Graph(ei, [6, 4]).size == (6, 4)


# ---- self-loops: PyG parity ------------------------------------------------------------------

SQUARE_CASES = [c for c in GRAPH_CASES if not isinstance(c[2], tuple)]
# PyG's string fills scatter into min(num_src, num_dst) rows, so they need num_dst <= num_src.
STRING_FILL_CASES = [c for c in GRAPH_CASES if sizes(c[2])[1] <= sizes(c[2])[0]]


def edge_weights(n, seed, shape=()):
    return torch.rand((n,) + shape, generator=torch.Generator().manual_seed(seed),
                      dtype=torch.float64) + 0.5


@pytest.mark.parametrize("fill", [1.0, 2.0])
@pytest.mark.parametrize("case", GRAPH_CASES, ids=[c[0] for c in GRAPH_CASES])
def test_add_remaining_matches_pyg(case, fill):
    _, edge_index, size = case
    num_src, num_dst = sizes(size)
    ei = edge_index.long()
    w = edge_weights(ei.size(1), 5)
    ref_ei, ref_w = add_remaining_self_loops(ei, w, fill, min(num_src, num_dst))
    g = Graph(edge_index, size, SelfLoops.ADD_REMAINING)
    assert torch.equal(g.edge_index, ref_ei)
    torch.testing.assert_close(g.augment_edge_values(w, fill), ref_w, rtol=0, atol=0)


def test_add_remaining_existing_loops_keep_their_value():
    ei = torch.tensor([[0, 1, 1, 2, 1], [1, 1, 0, 2, 1]])  # node 1 has two loops, node 2 one
    w = torch.tensor([10.0, 11.0, 12.0, 13.0, 14.0])
    g = Graph(ei, 4, SelfLoops.ADD_REMAINING)
    loops = g.augment_edge_values(w, 2.0)[-4:]
    assert loops.tolist() == [2.0, 14.0, 13.0, 2.0]  # the last input loop of node 1 wins
    assert g.edge_map[-4:].tolist() == [-1, 4, 3, -1]


FILLS = [1.0, 0.5, "add", "sum", "mean", "max", "min", "mul", "tensor"]


@pytest.mark.parametrize("fill", FILLS)
@pytest.mark.parametrize("case", STRING_FILL_CASES, ids=[c[0] for c in STRING_FILL_CASES])
def test_replace_matches_pyg(case, fill):
    _, edge_index, size = case
    num_src, num_dst = sizes(size)
    ei = edge_index.long()
    for shape in [(), (3,)]:
        w = edge_weights(ei.size(1), 6, shape)
        fill_value = torch.arange(1.0, 4.0)[: shape[0] if shape else 1].squeeze() \
            if fill == "tensor" else fill
        num_nodes = size if isinstance(size, tuple) else num_src
        no_loops, no_loop_w = remove_self_loops(ei, w)
        ref_ei, ref_w = add_self_loops(no_loops, no_loop_w, fill_value=fill_value,
                                       num_nodes=num_nodes)
        g = Graph(edge_index, size, SelfLoops.REPLACE)
        assert torch.equal(g.edge_index, ref_ei)
        got = g.augment_edge_values(w, fill_value)
        assert got.dtype == w.dtype and got.shape == ref_w.shape
        torch.testing.assert_close(got, ref_w)


def test_replace_on_wide_bipartite_graph_matches_pyg():
    gen = torch.Generator().manual_seed(9)
    ei = random_edge_index(7, 31, 50, gen)
    w = edge_weights(50, 7)
    for fill in (3.0, torch.tensor(0.25, dtype=torch.float64)):
        ref_ei, ref_w = add_self_loops(*remove_self_loops(ei, w), fill_value=fill, num_nodes=(7, 31))
        g = Graph(ei, (7, 31), SelfLoops.REPLACE)
        assert g.num_loops == 7
        assert torch.equal(g.edge_index, ref_ei)
        torch.testing.assert_close(g.augment_edge_values(w, fill), ref_w)


def test_augment_edge_values_checks_and_keep():
    ei = torch.tensor([[0, 1], [1, 0]])
    w = torch.tensor([1.0, 2.0])
    assert Graph(ei, 2).augment_edge_values(w, "mean") is w  # KEEP: unchanged
    g = Graph(ei, 2, SelfLoops.REPLACE)
    assert g.augment_edge_values(None) is None
    with pytest.raises(ValueError, match="3 rows but the graph was built from 2 edges"):
        g.augment_edge_values(torch.ones(3))
    with pytest.raises(ValueError, match="fill_value must be"):
        g.augment_edge_values(w, "median")
    assert torch.equal(g.csr_edge_values(torch.arange(4.0)), torch.arange(4.0)[g.eid.long()])
    with pytest.raises(ValueError, match="expected 4"):
        g.csr_edge_values(torch.ones(2))


# ---- derived views, statistics ------------------------------------------------------------------

@pytest.mark.parametrize("case", GRAPH_CASES, ids=[c[0] for c in GRAPH_CASES])
def test_degree_and_csr_dst(case):
    _, edge_index, size = case
    num_src, num_dst = sizes(size)
    g = Graph(edge_index, size)
    ei = edge_index.long()
    assert torch.equal(g.degree("in").long(), degree(ei[1], num_dst, torch.long))
    assert torch.equal(g.degree("out").long(), degree(ei[0], num_src, torch.long))
    assert torch.equal(g.csr_dst.long(), ei[1][g.eid.long()])
    with pytest.raises(ValueError, match="'in' or 'out'"):
        g.degree("both")


def numpy_stats(in_deg, out_deg):
    """The statistics as graph.h documents them, computed independently."""
    n = len(in_deg)
    ordered = np.sort(in_deg)

    def percentile(q):  # smallest d with #(deg <= d) >= q * n
        return int(ordered[max(math.ceil(q * n), 1) - 1]) if n else 0

    buckets = [0] * 40
    for d in in_deg:
        buckets[min(0 if d == 0 else int(d).bit_length(), 39)] += 1
    return {
        "max_in_degree": int(in_deg.max(initial=0)), "max_out_degree": int(out_deg.max(initial=0)),
        "mean_in_degree": float(in_deg.sum()) / n if n else 0.0,
        "p50_in_degree": percentile(0.5), "p90_in_degree": percentile(0.9),
        "p99_in_degree": percentile(0.99), "isolated_dst": int((in_deg == 0).sum()),
        "in_degree_log2_buckets": buckets,
    }


@pytest.mark.parametrize("case", GRAPH_CASES, ids=[c[0] for c in GRAPH_CASES])
def test_stats_match_numpy(case):
    _, edge_index, size = case
    g = Graph(edge_index, size, SelfLoops.ADD_REMAINING)
    want = numpy_stats(g.degree("in").numpy(), g.degree("out").numpy())
    got = dict(g.stats)
    assert got.pop("tiles") >= 0 and 0.0 <= got.pop("tile_fill") <= 1.0  # test_tiles.py
    assert got.pop("tile_plans") == {}  # no propagate has run (test_propagate_tiles.py)
    assert got.pop("symmetric") == g.is_symmetric
    assert got.pop("mean_in_degree") == pytest.approx(want.pop("mean_in_degree"), rel=1e-15)
    assert got == want
    assert g.max_in_degree == want["max_in_degree"]


def test_stats_percentiles_on_a_skewed_graph():
    hub = torch.stack([torch.arange(1000) % 100, torch.zeros(1000, dtype=torch.long)])
    ring = torch.stack([torch.arange(100), (torch.arange(100) + 1) % 100])
    g = Graph(torch.cat([hub, ring], 1), 100)
    st = g.stats
    assert (st["max_in_degree"], st["p50_in_degree"], st["p99_in_degree"]) == (1001, 1, 1)
    assert st["in_degree_log2_buckets"][1] == 99 and st["in_degree_log2_buckets"][10] == 1
    assert st["mean_in_degree"] == pytest.approx(11.0)


def test_is_symmetric():
    gen = torch.Generator().manual_seed(10)
    directed = random_edge_index(50, 50, 200, gen)
    undirected = to_undirected(directed, num_nodes=50)
    assert Graph(undirected, 50).is_symmetric
    assert Graph(undirected, 50, SelfLoops.ADD_REMAINING).is_symmetric
    assert not Graph(directed, 50).is_symmetric
    assert not Graph(torch.tensor([[0], [0]]), (2, 1)).is_symmetric  # bipartite
    assert Graph(torch.empty(2, 0, dtype=torch.long), 3).is_symmetric


def test_to_cpu_repr_and_edge_index_cache():
    ei = torch.tensor([[0, 1, 2], [1, 2, 0]])
    g = Graph(ei, 3, "add_remaining")
    assert g.to("cpu") is g and g.cpu() is g and g.to(torch.device("cpu")) is g
    assert g.device == torch.device("cpu")
    assert repr(g) == ("Graph(num_nodes=3, num_edges=6, self_loops=ADD_REMAINING, "
                       "index_dtype=int32, device=cpu)")
    b = Graph(ei, (4, 3), index_dtype=torch.int64)
    assert repr(b) == ("Graph(num_src_nodes=4, num_dst_nodes=3, num_edges=3, index_dtype=int64, "
                       "device=cpu)")
    assert g.edge_index is g.edge_index and g.edge_index.dtype == torch.int64


# ---- errors --------------------------------------------------------------------------------------

def assert_usable():
    """A valid build right after an error: nothing is left in a bad state."""
    g = Graph(torch.tensor([[0, 1], [1, 0]]), 2, SelfLoops.ADD_REMAINING)
    assert g.num_edges == 4 and g.rowptr.tolist() == [0, 2, 4]


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("bad, num_nodes, message", [
    ([[0, 1, -2], [1, 2, 0]], 5, r"edge_index\[0\]\[2\] = -2 is out of range for 5 source nodes"),
    ([[0, 1, 2], [1, -1, 0]], 5, r"edge_index\[1\]\[1\] = -1 is out of range for 5 destination"),
    ([[0, 1, -2], [1, 2, 0]], None, r"edge_index\[0\]\[2\] = -2 is negative"),
    ([[0, 1, 2], [-4, 1, 0]], None, r"edge_index\[1\]\[0\] = -4 is negative"),
    ([[0, 5, 2], [1, 2, 0]], 5, r"edge_index\[0\]\[1\] = 5 is out of range for 5 source nodes"),
    ([[0, 1, 2], [1, 2, 9]], 5, r"edge_index\[1\]\[2\] = 9 is out of range for 5 destination"),
    # num_nodes smaller than the largest index
    ([[0, 1, 7], [7, 2, 0]], 4, r"edge_index\[1\]\[0\] = 7 is out of range for 4 destination"),
    # bipartite sizes swapped: 6 sources and 2 destinations given as (2, 6)
    ([[0, 5, 3], [1, 0, 1]], (2, 6), r"edge_index\[0\]\[1\] = 5 is out of range for 2 source"),
])
def test_index_errors_name_the_edge(dtype, bad, num_nodes, message):
    with pytest.raises(IndexError, match=message):
        Graph(torch.tensor(bad, dtype=dtype), num_nodes)
    assert_usable()


@pytest.mark.parametrize("edge_index, exc, message", [
    (torch.zeros(3, 4, dtype=torch.long), ValueError, r"shape \[2, num_edges\], got \[3, 4\]"),
    (torch.zeros(8, dtype=torch.long), ValueError, r"shape \[2, num_edges\], got \[8\]"),
    (torch.zeros(2, 2, 2, dtype=torch.long), ValueError, r"shape \[2, num_edges\]"),
    (torch.zeros(2, 4), TypeError, "int32 or int64, got torch.float32"),
    (torch.zeros(2, 4, dtype=torch.int16), TypeError, "int32 or int64, got torch.int16"),
    ([[0, 1], [1, 0]], TypeError, "edge_index must be a Tensor, got list"),
])
def test_shape_and_dtype_errors(edge_index, exc, message):
    with pytest.raises(exc, match=message):
        Graph(edge_index, 4)
    assert_usable()


def test_argument_errors():
    ei = torch.tensor([[0, 1], [1, 0]])
    with pytest.raises(ValueError, match="self_loops must be .*got 'bogus'"):
        Graph(ei, 2, self_loops="bogus")
    with pytest.raises(ValueError, match="self_loops must be .*got 3"):
        Graph(ei, 2, self_loops=3)
    with pytest.raises(ValueError, match="self_loops must be .*got True"):
        Graph(ei, 2, self_loops=True)
    with pytest.raises(TypeError, match="index_dtype must be"):
        Graph(ei, 2, index_dtype=torch.float32)
    with pytest.raises(TypeError, match="index_dtype must be"):
        Graph(ei, 2, index_dtype=torch.int16)
    with pytest.raises(ValueError, match="non-negative"):
        Graph(ei, -1)
    with pytest.raises(ValueError, match="an int or a pair"):
        Graph(ei, (2, 2, 2))
    with pytest.raises(ValueError, match="self_loops must be 0"):  # the operator's own check
        torch.ops.iognn.build_graph(ei, 2, 2, 7)
    with pytest.raises(ValueError, match="num_dst_nodes must be >= 0"):
        torch.ops.iognn.build_graph(ei, 2, -3)
    assert_usable()
    assert Graph(ei, 2, self_loops=2).self_loops == SelfLoops.REPLACE
    assert Graph(ei, 2, self_loops="Add_Remaining").self_loops == SelfLoops.ADD_REMAINING
    assert isinstance(iognn.Graph(ei), Graph)


def sorted_by_destination(edge_index, by_source):
    """edge_index stably sorted by destination (and then source), with the permutation used."""
    src, dst = edge_index.long()
    key = dst * (int(src.max()) + 1 if src.numel() else 1) + src if by_source else dst
    perm = torch.sort(key, stable=True).indices
    return edge_index[:, perm], perm


def assert_same_graph_from_permuted_input(a: Graph, b: Graph, perm: torch.Tensor) -> None:
    """a was built from edge_index[:, perm], b from edge_index: same layout, same input edges."""
    for name in ("rowptr", "col", "colptr", "row", "csc2csr"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name

    def input_ids(g, remap):  # input id of each CSR position (-1: an added loop)
        return torch.cat([remap, remap.new_tensor([-1])])[g.edge_map[g.eid.long()].long()]
    identity = torch.arange(perm.numel())
    assert torch.equal(input_ids(a, perm), input_ids(b, identity))


@pytest.mark.parametrize("by_source", [True, False], ids=["dst-src", "dst"])
@pytest.mark.parametrize("mode", list(SelfLoops), ids=[m.name for m in SelfLoops])
def test_sorted_input_gives_the_same_graph(graph_case, mode, by_source):
    _, edge_index, size = graph_case
    ordered, perm = sorted_by_destination(edge_index, by_source)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        a = Graph(ordered.to(device), size, mode).cpu()
        b = Graph(edge_index.to(device), size, mode).cpu()
        assert_same_graph_from_permuted_input(a, b, perm)


def test_edge_index_sorted_by_column_gives_the_same_graph():
    """A PyG EdgeIndex sorted by column (destination), the layout a sorted sampler or
    ``sort_by('col')`` yields, builds the graph of its plain edge_index (on the GPU it takes the
    path without a row sort when its rows are sorted within each column too)."""
    gen = torch.Generator().manual_seed(5)
    edge_index = random_edge_index(40, 30, 300, gen)
    ordered, _ = sorted_by_destination(edge_index, by_source=True)
    adj = EdgeIndex(ordered, sparse_size=(40, 30), sort_order="col")
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        for mode in SelfLoops:
            got, _ = Graph.from_adjacency(adj.to(device), self_loops=mode)
            want = Graph(ordered.to(device), (40, 30), mode)
            for name in ("rowptr", "col", "eid", "colptr", "row", "csc2csr", "edge_map"):
                assert torch.equal(getattr(got, name).cpu(), getattr(want, name).cpu()), name


@pytest.mark.parametrize("self_loops", list(SelfLoops))
def test_max_degree_hints_are_the_longest_rows(graph_case, self_loops):
    """The build's degree hints equal the longest row of each CSR (0 for a side without nodes
    or edges), for every graph case and self-loop mode, on the CPU and (when present) the GPU."""
    name, edge_index, size = graph_case
    for device in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):
        g = Graph(edge_index.to(device), size, self_loops=self_loops)
        longest = tuple(int(g.degree(d).max()) if g.degree(d).numel() else 0
                        for d in ("in", "out"))
        assert g.max_degree_hints == longest, (name, device)
        assert g.max_in_degree == longest[0]
        assert g.to("cpu").max_degree_hints == longest
