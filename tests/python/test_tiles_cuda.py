"""The tile layout built on a CUDA device (kernels/cuda/tile_layout.h) equals the host build bit for
bit: random graphs, a shuffled grid, an SBM, hubs, empty and one-row graphs, int32/int64, with and
without a row order, both directions; the same errors; deterministic."""
import pytest
import torch

from iognn import Graph, SelfLoops
from iognn.bench.graphs import grid, sbm
from iognn.graph import tile_layout

from conftest import random_edge_index

pytestmark = pytest.mark.cuda

op = torch.ops.iognn.tile_layout


def assert_same_layout(offsets, indices, num_src, order=None):
    """The op on the device equals the op on the host, every array bit for bit."""
    host = op(offsets.cpu(), indices.cpu(), num_src, None if order is None else order.cpu())
    device = op(offsets.cuda(), indices.cuda(), num_src, None if order is None else order.cuda())
    for want, got in zip(host[:4], device[:4]):
        assert got.device.type == "cuda"
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got.cpu(), want)
    assert device[4] == host[4]
    return device


def random_order(n, seed, dtype):
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed)).to(dtype)


def edge_cases():
    gen = torch.Generator().manual_seed(21)
    shuffled = torch.randperm(900, generator=gen)
    hub = torch.stack([torch.arange(5000) % 3000, torch.zeros(5000, dtype=torch.long)])
    return {
        "random": (random_edge_index(3000, 3000, 40000, gen), 3000),
        "random_bipartite": (random_edge_index(700, 2000, 9000, gen), (700, 2000)),
        "shuffled_grid": (shuffled[grid(900)[0]], 900),
        "sbm": sbm(2000, 25, 8.0, 1.0, seed=2),
        "hub": (torch.cat([hub, random_edge_index(3000, 3000, 3000, gen)], 1), 3000),
        "empty": (torch.empty(2, 0, dtype=torch.long), 5),
        "no_nodes": (torch.empty(2, 0, dtype=torch.long), 0),
        "one_row": (torch.tensor([[3, 1, 3, 0], [0, 0, 0, 0]]), (4, 1)),
        "isolated_rows": (torch.tensor([[0, 9, 9], [17, 17, 33]]), 40),
    }


CASES = edge_cases()


@pytest.mark.parametrize("ordered", [False, True])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_device_build_equals_the_host_build(name, dtype, ordered):
    edge_index, size = CASES[name]
    graph = Graph(edge_index, size, SelfLoops.KEEP, index_dtype=dtype)
    for offsets, indices, num_src, num_rows in (
            (graph.rowptr, graph.col, graph.num_src_nodes, graph.num_dst_nodes),
            (graph.colptr, graph.row, graph.num_dst_nodes, graph.num_src_nodes)):
        order = random_order(num_rows, 3, dtype) if ordered else None
        assert_same_layout(offsets, indices, num_src, order)


def test_self_loop_modes_and_duplicates():
    gen = torch.Generator().manual_seed(22)
    edge_index = random_edge_index(300, 300, 3000, gen)
    edge_index = torch.cat([edge_index, edge_index[:, :500]], 1)  # duplicates
    for loops in SelfLoops:
        graph = Graph(edge_index, 300, loops)
        assert_same_layout(graph.rowptr, graph.col, 300, random_order(300, 4, graph.index_dtype))


def test_wide_source_ids_fit_the_sort_key():
    # Sources near 2^40 (int64): 40 column bits, plus the windows and rows.
    num_src = 2 ** 40
    rowptr = torch.tensor([0, 2, 2, 5])
    col = torch.tensor([num_src - 1, 5, 2 ** 39, 7, num_src - 1])
    assert_same_layout(rowptr, col, num_src, torch.tensor([2, 0, 1]))


def test_graph_on_cuda_builds_on_the_device():
    edge_index, n = CASES["shuffled_grid"]
    for method in (None, "rcm"):
        host = Graph(edge_index, n, reorder=method)
        device = Graph(edge_index.cuda(), n, reorder=method)
        assert (device.row_order is None) == (method is None)
        for transposed in (False, True):
            got, want = tile_layout(device, transposed), tile_layout(host, transposed)
            assert got.tile_cols.device.type == "cuda"
            for a, b in zip(got[:4], want[:4]):
                assert torch.equal(a.cpu(), b)
            assert got.num_pairs == want.num_pairs
        assert device.stats["tile_fill"] == host.stats["tile_fill"]
        moved = host.cuda()
        assert tile_layout(moved).edge_slot.device.type == "cuda"


def test_device_build_is_deterministic():
    edge_index, n = CASES["random"]
    graph = Graph(edge_index.cuda(), n)
    order = random_order(n, 5, graph.index_dtype).cuda()
    one = op(graph.rowptr, graph.col, n, order)
    two = op(graph.rowptr, graph.col, n, order)
    for a, b in zip(one[:4], two[:4]):
        assert torch.equal(a, b)


def test_device_errors_match_the_host():
    rowptr, col = torch.tensor([0, 1, 2]), torch.tensor([0, 1])
    bad = [
        ((torch.tensor([0, 2, 1]), col, 2, None), ValueError, "non-decreasing"),
        ((torch.tensor([1, 1, 2]), col, 2, None), ValueError, r"rowptr\[0\] must be 0"),
        ((torch.tensor([0, 1, 1]), col, 2, None), ValueError, "must equal the 2 entries of col"),
        ((torch.tensor([0]), col, 2, None), ValueError, "must equal the 2 entries of col"),
        ((rowptr, col, 1, None), IndexError, r"col\[1\] = 1 is outside \[0, 1\)"),
        ((rowptr, torch.tensor([0, -3]), 2, None), IndexError, r"col\[1\] = -3 is outside"),
        ((rowptr, col, 2, torch.tensor([0, 2])), IndexError, r"row_order\[1\] = 2 is outside"),
        ((rowptr, col, 2, torch.tensor([1, 1])), ValueError, r"row_order\[1\] = 1 repeats"),
        ((rowptr, col, 2, torch.tensor([0, 1, 0])), ValueError, "row_order must have 2 entries"),
    ]
    for args, error, match in bad:
        for device in ("cpu", "cuda"):
            moved = [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]
            with pytest.raises(error, match=match):
                op(*moved)
    with pytest.raises(ValueError, match="col is on"):
        op(rowptr.cuda(), col, 2)
