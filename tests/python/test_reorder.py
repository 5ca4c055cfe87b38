"""iognn.reorder: Reverse Cuthill-McKee (one graph and per graph of a batch) and bandwidths.

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
