"""iognn.reorder: Reverse Cuthill-McKee (one graph and per graph of a batch), bandwidths, the other
orders (degree, BFS, METIS; each a deterministic permutation, degree and BFS against plain-Python
references) and permute_data on PyG Data (node attributes, relabelled edges, GCNConv outputs).

Checks permutation validity, bandwidth against the input order on shuffled paths, grids and trees
(and against scipy's RCM where scipy is installed), known small orders, degenerate graphs (empty,
isolated nodes, self-loops, duplicates), int32 / int64, batches and the errors."""
from __future__ import annotations

import pytest
import torch

from iognn import reorder

INDEX_DTYPES = [torch.int32, torch.int64]


def path(n: int) -> torch.Tensor:
    v = torch.arange(n - 1)
    return torch.stack([v, v + 1])


def grid(rows: int, cols: int) -> torch.Tensor:
    ids = torch.arange(rows * cols).view(rows, cols)
    across = torch.stack([ids[:, :-1].reshape(-1), ids[:, 1:].reshape(-1)])
    down = torch.stack([ids[:-1].reshape(-1), ids[1:].reshape(-1)])
    return torch.cat([across, down], 1)


def random_tree(n: int, gen: torch.Generator) -> torch.Tensor:
    child = torch.arange(1, n)
    parent = (torch.rand(n - 1, generator=gen) * child).long()
    return torch.stack([parent, child])


def shuffled(edge_index: torch.Tensor, n: int, seed: int, dtype=torch.int64) -> torch.Tensor:
    relabel = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    return relabel[edge_index].to(dtype)


def assert_permutation(perm: torch.Tensor, lo: int, hi: int) -> None:
    assert torch.equal(perm[lo:hi].sort().values.long(), torch.arange(lo, hi))


@pytest.mark.parametrize("dtype", INDEX_DTYPES)
@pytest.mark.parametrize("n", [2, 3, 10, 257])
def test_shuffled_path_gets_bandwidth_one(n, dtype):
    ei = shuffled(path(n), n, seed=n, dtype=dtype)
    perm = reorder.rcm(ei, n)
    assert perm.dtype == dtype and perm.shape == (n,)
    assert_permutation(perm, 0, n)
    assert reorder.bandwidth(ei, n, perm) == 1


@pytest.mark.parametrize("rows, cols", [(2, 2), (4, 9), (11, 17), (30, 30)])
def test_shuffled_grid_is_within_one_of_its_row_order(rows, cols):
    n = rows * cols
    ei = shuffled(grid(rows, cols), n, seed=n)
    perm = reorder.rcm(ei, n)
    assert_permutation(perm, 0, n)
    width = reorder.bandwidth(ei, n, perm)
    assert width <= min(rows, cols) + 1
    assert width <= reorder.bandwidth(ei, n)


@pytest.mark.parametrize("seed", range(10))
def test_shuffled_tree_is_never_wider_than_its_input_order(seed):
    gen = torch.Generator().manual_seed(seed)
    n = 3 + 37 * seed
    ei = shuffled(random_tree(n, gen), n, seed=seed + 50)
    perm = reorder.rcm(ei, n)
    assert_permutation(perm, 0, n)
    assert reorder.bandwidth(ei, n, perm) <= reorder.bandwidth(ei, n)


@pytest.mark.parametrize("rows, cols", [(5, 8), (12, 24), (17, 23)])
def test_grid_bandwidth_close_to_scipy(rows, cols):
    sp = pytest.importorskip("scipy.sparse")
    csgraph = pytest.importorskip("scipy.sparse.csgraph")
    n = rows * cols
    ei = shuffled(grid(rows, cols), n, seed=3)
    a = sp.coo_matrix((torch.ones(ei.size(1)).numpy(), (ei[0].numpy(), ei[1].numpy())),
                      shape=(n, n)).tocsr()
    theirs = torch.from_numpy(csgraph.reverse_cuthill_mckee((a + a.T).tocsr(),
                                                            symmetric_mode=True).astype("int64"))
    # Tie-breaking differs between implementations: the orders differ, the bandwidths barely.
    assert reorder.bandwidth(ei, n, reorder.rcm(ei, n)) <= reorder.bandwidth(ei, n, theirs) + 1


def test_known_orders():
    assert reorder.rcm(path(4), 4).tolist() == [3, 2, 1, 0]
    # 1's neighbours are visited by increasing degree: the leaf 3 before 2 (degree 3).
    ei = torch.tensor([[0, 1, 1, 2, 2], [1, 2, 3, 4, 5]])
    assert reorder.rcm(ei, 6).tolist() == [5, 4, 2, 3, 1, 0]
    # Components by smallest id ({0, 2}, {1, 3}), then the isolated node 4.
    assert reorder.rcm(torch.tensor([[2, 3], [0, 1]]), 5).tolist() == [2, 0, 3, 1, 4]


@pytest.mark.parametrize("dtype", INDEX_DTYPES)
def test_empty_graph_and_isolated_nodes(dtype):
    none = torch.empty(2, 0, dtype=dtype)
    assert reorder.rcm(none, 0).shape == (0,)
    assert reorder.rcm(none, 0).dtype == dtype
    assert reorder.rcm(none, 4).tolist() == [0, 1, 2, 3]
    assert reorder.bandwidth(none, 4) == 0
    assert reorder.rcm(none, 0, torch.tensor([0])).shape == (0,)


def test_self_loops_duplicates_and_direction_do_not_change_the_order():
    gen = torch.Generator().manual_seed(0)
    n = 40
    ei = shuffled(random_tree(n, gen), n, seed=1)
    loops = torch.arange(0, n, 3).repeat(2, 1)
    noisy = torch.cat([ei, ei.flip(0), ei[:, :7], loops], 1)
    assert torch.equal(reorder.rcm(noisy, n), reorder.rcm(ei, n))
    assert reorder.bandwidth(noisy, n) == reorder.bandwidth(ei, n)


def test_int32_and_int64_agree_and_strided_input():
    n = 60
    ei = shuffled(grid(6, 10), n, seed=4)
    strided = torch.stack([ei, ei], 2).view(2, -1)[:, ::2]  # non-contiguous view of ei
    assert torch.equal(reorder.rcm(ei.int(), n).long(), reorder.rcm(ei, n))
    assert torch.equal(reorder.rcm(strided, n), reorder.rcm(ei, n))
    assert reorder.bandwidth(ei, n) == reorder.bandwidth(ei.int(), n)


def batch_of(graphs):
    """(edge_index, ptr) of graphs given as (edge_index, num_nodes) pairs."""
    parts, ptr = [], [0]
    for ei, n in graphs:
        parts.append(ei + ptr[-1])
        ptr.append(ptr[-1] + n)
    return torch.cat(parts, 1), torch.tensor(ptr)


@pytest.mark.parametrize("ptr_dtype", INDEX_DTYPES)
def test_batch_orders_each_graph_like_alone(ptr_dtype):
    gen = torch.Generator().manual_seed(5)
    graphs = []
    for g in range(60):
        n = int(g % 9)
        ei = shuffled(random_tree(n, gen), n, seed=g) if n > 1 else torch.empty(2, 0,
                                                                               dtype=torch.long)
        graphs.append((ei, n))
    ei, ptr = batch_of(graphs)
    perm = reorder.rcm(ei, int(ptr[-1]), ptr.to(ptr_dtype))
    widths = reorder.graph_bandwidths(ei, int(ptr[-1]), ptr, perm)
    assert widths.shape == (len(graphs),)
    for g, (gei, n) in enumerate(graphs):
        lo = int(ptr[g])
        assert_permutation(perm, lo, lo + n)
        alone = reorder.rcm(gei, n)
        assert torch.equal(perm[lo:lo + n] - lo, alone)
        assert int(widths[g]) == reorder.bandwidth(gei, n, alone)


def test_inverse_permutation():
    perm = torch.tensor([2, 0, 3, 1])
    inv = reorder.inverse_permutation(perm)
    assert torch.equal(inv[perm], torch.arange(4))
    assert torch.equal(perm[inv], torch.arange(4))


def test_errors_name_the_argument():
    ei = torch.tensor([[0, 1], [1, 2]])
    with pytest.raises(TypeError, match="edge_index"):
        reorder.rcm(ei.float(), 3)
    with pytest.raises(ValueError, match="edge_index"):
        reorder.rcm(ei[0], 3)
    with pytest.raises(IndexError, match=r"edge_index\[1\]\[1\] = 2"):
        reorder.rcm(ei, 2)
    with pytest.raises(ValueError, match="edge_index: edge 1 joins node 1 of graph 0"):
        reorder.rcm(ei, 3, torch.tensor([0, 2, 3]))
    with pytest.raises(ValueError, match="ptr"):
        reorder.rcm(ei, 3, torch.tensor([0, 2]))
    with pytest.raises(TypeError, match="ptr"):
        reorder.rcm(ei, 3, torch.tensor([0.0, 3.0]))
    with pytest.raises(TypeError, match="num_nodes"):
        reorder.rcm(ei, 3.0)
    with pytest.raises(ValueError, match="perm"):
        reorder.bandwidth(ei, 3, torch.tensor([0, 0, 1]))
    with pytest.raises(ValueError, match="perm"):
        reorder.bandwidth(ei, 3, torch.tensor([0, 1]))


@pytest.mark.cuda
def test_device_inputs_give_device_outputs():
    n = 50
    ei = shuffled(grid(5, 10), n, seed=2)
    perm = reorder.rcm(ei.cuda(), n, torch.tensor([0, n]).cuda())
    assert perm.device.type == "cuda"
    assert torch.equal(perm.cpu(), reorder.rcm(ei, n))
    assert reorder.bandwidth(ei.cuda(), n, perm) == reorder.bandwidth(ei, n, perm.cpu())


# --- order(method): degree sort, BFS, METIS partition order next to RCM ---------------------------

def has_metis() -> bool:
    from iognn.distributed.metis import has_libmetis
    try:
        import pymetis  # noqa: F401
        return True
    except ImportError:
        return has_libmetis()


METHODS = [m if m != "metis" else pytest.param(
    m, marks=pytest.mark.skipif(not has_metis(), reason="no libmetis or pymetis"))
    for m in reorder.METHODS]


def degree_reference(ei: torch.Tensor, n: int) -> list:
    degree = [0] * n
    for u, v in ei.t().tolist():
        degree[u] += 1
        degree[v] += 1
    return sorted(range(n), key=lambda v: (-degree[v], v))


def bfs_reference(ei: torch.Tensor, n: int) -> list:
    neighbours = [set() for _ in range(n)]
    for u, v in ei.t().tolist():
        if u != v:
            neighbours[u].add(v)
            neighbours[v].add(u)
    seen, out = [False] * n, []
    for root in range(n):
        if seen[root]:
            continue
        seen[root] = True
        out.append(root)
        head = len(out) - 1
        while head < len(out):
            for w in sorted(neighbours[out[head]]):
                if not seen[w]:
                    seen[w] = True
                    out.append(w)
            head += 1
    return out


def random_multigraph(n: int, e: int, seed: int) -> torch.Tensor:
    """Random edges with self-loops, duplicates and (for e small against n) isolated nodes."""
    gen = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, e), generator=gen)
    return torch.cat([ei, ei[:, : e // 5], torch.arange(0, n, 7).repeat(2, 1)], 1)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", INDEX_DTYPES)
@pytest.mark.parametrize("n, e", [(1, 0), (5, 0), (9, 4), (40, 30), (200, 900)])
def test_every_method_is_a_deterministic_permutation(method, dtype, n, e):
    ei = random_multigraph(n, e, seed=n + e).to(dtype)
    perm = reorder.order(ei, n, method)
    assert perm.dtype == dtype and perm.shape == (n,)
    assert_permutation(perm, 0, n)
    assert torch.equal(reorder.order(ei, n, method), perm)
    assert torch.equal(reorder.order(ei.long(), n, method).to(dtype), perm)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", INDEX_DTYPES)
def test_every_method_on_an_empty_graph(method, dtype):
    none = torch.empty(2, 0, dtype=dtype)
    assert reorder.order(none, 0, method).shape == (0,)
    assert reorder.order(none, 0, method).dtype == dtype


def test_rcm_method_is_rcm():
    ei = shuffled(grid(7, 9), 63, seed=3)
    assert torch.equal(reorder.order(ei, 63, "rcm"), reorder.rcm(ei, 63))
    assert torch.equal(reorder.order(ei, 63), reorder.rcm(ei, 63))


@pytest.mark.parametrize("dtype", INDEX_DTYPES)
@pytest.mark.parametrize("n, e", [(6, 0), (12, 10), (30, 45), (64, 300)])
def test_degree_and_bfs_match_python_references(dtype, n, e):
    ei = random_multigraph(n, e, seed=e).to(dtype)
    assert reorder.order(ei, n, "degree").tolist() == degree_reference(ei, n)
    assert reorder.order(ei, n, "bfs").tolist() == bfs_reference(ei, n)


def test_known_degree_and_bfs_orders():
    ei = torch.tensor([[0, 1, 1, 3, 4], [1, 2, 3, 3, 0]])
    # Degrees 2, 3, 1, 3 (a self-loop counts twice), 1, 0: ties by id.
    assert reorder.order(ei, 6, "degree").tolist() == [1, 3, 0, 2, 4, 5]
    assert reorder.order(ei, 6, "bfs").tolist() == [0, 1, 4, 2, 3, 5]
    # BFS components by smallest id ({0, 2}, {1, 3}), then the isolated node 4.
    assert reorder.order(torch.tensor([[2, 3], [0, 1]]), 5, "bfs").tolist() == [0, 2, 1, 3, 4]


@pytest.mark.parametrize("method", ["degree", "bfs"])
def test_batch_orders_each_graph_like_alone_for_degree_and_bfs(method):
    graphs = [(random_multigraph(n, 2 * n, seed=n) if n else torch.empty(2, 0, dtype=torch.long), n)
              for n in [0, 1, 5, 12, 3, 30]]
    ei, ptr = batch_of(graphs)
    perm = reorder.order(ei, int(ptr[-1]), method, ptr)
    for g, (gei, n) in enumerate(graphs):
        lo = int(ptr[g])
        assert torch.equal(perm[lo:lo + n] - lo, reorder.order(gei, n, method))


@pytest.mark.parametrize("method", ["rcm", "bfs"])
def test_rcm_and_bfs_narrow_a_shuffled_grid(method):
    rows, cols = 20, 30
    n = rows * cols
    ei = shuffled(grid(rows, cols), n, seed=11)
    width = reorder.bandwidth(ei, n, reorder.order(ei, n, method))
    assert width < reorder.bandwidth(ei, n) // 4
    assert width <= 2 * min(rows, cols) + 1


@pytest.mark.skipif(not has_metis(), reason="no libmetis or pymetis")
def test_metis_order_groups_the_partition_parts():
    from iognn.distributed import partition
    n = 600
    ei = shuffled(grid(20, 30), n, seed=12)
    perm = reorder.order(ei, n, "metis", num_parts=4, seed=3)
    parts = partition(ei, 4, "metis", num_nodes=n, seed=3).parts
    # Grouped by part, ascending; within a part by id.
    assert torch.equal(perm, torch.sort(parts * n + torch.arange(n)).indices)
    assert torch.equal(reorder.order(ei, n, "metis", num_parts=4, seed=3), perm)
    assert_permutation(reorder.order(ei, n, "metis"), 0, n)


def test_metis_without_metis_says_how_to_get_it(monkeypatch):
    import builtins
    import iognn.distributed.metis as metis
    real_import = builtins.__import__

    def no_pymetis(name, *args, **kwargs):
        if name == "pymetis":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(metis, "has_libmetis", lambda: False)
    monkeypatch.setattr(builtins, "__import__", no_pymetis)
    with pytest.raises(RuntimeError, match="pip install pymetis"):
        reorder.order(path(10), 10, "metis", num_parts=2)


def test_order_errors_name_the_argument():
    ei = torch.tensor([[0, 1], [1, 2]])
    with pytest.raises(ValueError, match="method"):
        reorder.order(ei, 3, "random")
    with pytest.raises(ValueError, match="method"):
        reorder.order(ei, 3, None)
    with pytest.raises(ValueError, match="num_parts"):
        reorder.order(ei, 3, "metis", num_parts=4)
    with pytest.raises(TypeError, match="num_parts"):
        reorder.order(ei, 3, "metis", num_parts=2.0)
    with pytest.raises(ValueError, match="num_parts"):
        reorder.order(ei, 3, "bfs", num_parts=2)
    with pytest.raises(ValueError, match="ptr"):
        reorder.order(ei, 3, "metis", torch.tensor([0, 3]))
    for method in ["degree", "bfs"]:
        with pytest.raises(IndexError, match=r"edge_index\[1\]\[1\] = 2"):
            reorder.order(ei, 2, method)
        with pytest.raises(ValueError, match="edge_index: edge 1 joins node 1 of graph 0"):
            reorder.order(ei, 3, method, torch.tensor([0, 2, 3]))
        with pytest.raises(TypeError, match="edge_index"):
            reorder.order(ei.float(), 3, method)
    with pytest.raises(ValueError, match="parts"):
        torch.ops.iognn.part_order(torch.tensor([0, 2]), 2)


# --- permute_data / iognn.reorder(data, method) -------------------------------------------------

def node_data(n: int = 50, seed: int = 0):
    from torch_geometric.data import Data
    gen = torch.Generator().manual_seed(seed)
    ei = random_multigraph(n, 3 * n, seed=seed)
    return Data(x=torch.randn(n, 8, generator=gen), edge_index=ei,
                edge_attr=torch.randn(ei.shape[1], 3, generator=gen),
                y=torch.randint(0, 4, (n,), generator=gen), train_mask=torch.rand(n, generator=gen) > 0.5,
                pos=torch.randn(n, 2, generator=gen), name="g")


@pytest.mark.parametrize("method", METHODS)
def test_permute_data_permutes_node_attributes_and_relabels_edges(method):
    data = node_data()
    out, perm, seconds = reorder.permute_data(data, method)
    assert seconds >= 0.0 and perm.dtype == torch.int64
    assert torch.equal(perm, reorder.order(data.edge_index, data.num_nodes, method).long())
    for key in ["x", "y", "train_mask", "pos"]:
        assert torch.equal(out[key], data[key][perm])
    assert out.name == "g" and torch.equal(out.edge_attr, data.edge_attr)
    # Edge k still joins the same two nodes, now under their new positions.
    assert torch.equal(perm[out.edge_index], data.edge_index)
    assert torch.equal(data.x, node_data().x)  # the input is not modified


def test_permute_data_round_trip_and_given_perm():
    data = node_data(seed=2)
    out, perm, _ = reorder.permute_data(data, "bfs")
    back, inv, seconds = reorder.permute_data(out, reorder.inverse_permutation(perm).int())
    assert seconds == 0.0 and inv.dtype == torch.int64
    for key in ["x", "y", "train_mask", "pos", "edge_index", "edge_attr"]:
        assert torch.equal(back[key], data[key])


def test_module_is_callable_and_keeps_its_functions():
    import iognn
    data = node_data(seed=3)
    out, perm, _ = iognn.reorder(data, "degree")
    expected = reorder.permute_data(data, "degree")
    assert torch.equal(perm, expected.perm) and torch.equal(out.x, expected.data.x)
    assert iognn.reorder.rcm is reorder.rcm


def test_gcn_on_permuted_data_gives_the_permuted_outputs():
    from iognn.nn import GCNConv
    torch.manual_seed(0)
    data = node_data(n=80, seed=4)
    conv = GCNConv(8, 16)
    expected = conv(data.x, data.edge_index)
    for method in ["rcm", "degree", "bfs"]:
        out, perm, _ = reorder.permute_data(data, method)
        torch.testing.assert_close(conv(out.x, out.edge_index), expected[perm], rtol=1e-5,
                                   atol=1e-5)


def test_batch_is_reordered_graph_by_graph():
    from torch_geometric.data import Batch
    batch = Batch.from_data_list([node_data(n, seed=n) for n in [5, 9, 14]])
    out, perm, _ = reorder.permute_data(batch, "rcm")
    assert torch.equal(out.batch, batch.batch)  # every node stays in its graph's range
    assert torch.equal(perm, reorder.rcm(batch.edge_index, batch.num_nodes, batch.ptr))


def test_permute_data_errors_name_the_argument():
    data = node_data(n=6)
    with pytest.raises(ValueError, match="method"):
        reorder.permute_data(data, "random")
    with pytest.raises(ValueError, match="method_or_perm"):
        reorder.permute_data(data, torch.tensor([0, 0, 1, 2, 3, 4]))
    with pytest.raises(ValueError, match="method_or_perm"):
        reorder.permute_data(data, torch.tensor([0, 1, 2, 3, 4, 6]))
    with pytest.raises(ValueError, match="method_or_perm"):
        reorder.permute_data(data, torch.arange(5))
    with pytest.raises(TypeError, match="method_or_perm"):
        reorder.permute_data(data, torch.arange(6.0))
    with pytest.raises(TypeError, match="method_or_perm"):
        reorder.permute_data(data, [0, 1, 2, 3, 4, 5])
    with pytest.raises(TypeError, match="data"):
        reorder.permute_data(torch.zeros(3), "rcm")
