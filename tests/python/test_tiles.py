"""The tile layout (iognn.graph.tile_layout) and the fill statistics against a plain-Python
reference: row windows of 16 destinations (in a row order when given), sorted distinct sources in
tiles of 8, bitmaps, edge slots; the transposed layout; the op's errors."""
import pytest
import torch

from iognn import Graph, SelfLoops
from iognn.graph import TILE_COLS, TILE_ROWS, TileLayout, tile_layout

from conftest import random_edge_index


def reference_layout(rowptr, col, order=None):
    """(tiles per window, tile columns, set bits as (tile, row, column), distinct pairs, the
    expected (tile, row, column) of every CSR position) of a CSR, windows of rows by ``order``."""
    rowptr, col = rowptr.tolist(), col.tolist()
    num_dst = len(rowptr) - 1
    order = list(range(num_dst)) if order is None else order.tolist()
    counts, columns, bits, pairs, slots = [], [], set(), set(), [None] * len(col)
    for first in range(0, num_dst, TILE_ROWS):
        rows = order[first:first + TILE_ROWS]
        window = sorted({col[e] for r in rows for e in range(rowptr[r], rowptr[r + 1])})
        tiles = -(-len(window) // TILE_COLS)
        base = len(columns) // TILE_COLS
        columns += window + [-1] * (tiles * TILE_COLS - len(window))
        counts.append(tiles)
        for k, r in enumerate(rows):
            for e in range(rowptr[r], rowptr[r + 1]):
                slot = window.index(col[e])
                slots[e] = (base + slot // TILE_COLS, k, slot % TILE_COLS)
                bits.add(slots[e])
                pairs.add((r, col[e]))
    return counts, columns, bits, len(pairs), slots


def set_bits(bitmap):
    return {(t, b // TILE_COLS, b % TILE_COLS)
            for t, words in enumerate(bitmap.tolist()) for b in range(128)
            if (words[b // 32] >> (b % 32)) & 1}


def decode_slots(edge_slot):
    return [(s // 128, s % 128 // TILE_COLS, s % TILE_COLS) for s in edge_slot.tolist()]


def check_edge_slots(tiles, rowptr, col, order=None):
    """Every position's slot decodes to a tile of its row's window, that row, a column holding its
    source and a set bit."""
    order = torch.arange(rowptr.numel() - 1) if order is None else order.cpu()
    position = torch.empty_like(order)
    position[order.long()] = torch.arange(order.numel(), dtype=order.dtype)
    window_ptr, tile_cols = tiles.window_ptr.tolist(), tiles.tile_cols.tolist()
    bitmap = tiles.tile_bitmap.tolist()
    rows = torch.repeat_interleave(torch.arange(rowptr.numel() - 1), rowptr.diff().long())
    for p, (t, r, c) in enumerate(decode_slots(tiles.edge_slot)):
        k = int(position[rows[p]])
        assert window_ptr[k // TILE_ROWS] <= t < window_ptr[k // TILE_ROWS + 1]
        assert r == k % TILE_ROWS
        assert tile_cols[t][c] == int(col[p])
        b = r * TILE_COLS + c
        assert (bitmap[t][b // 32] >> (b % 32)) & 1


def check_layout(tiles, rowptr, col, order=None):
    """The layout of the CSR (rowptr, col) with windows by ``order`` equals the reference."""
    check_edge_slots(tiles, rowptr, col, order)
    counts, columns, bits, pairs, slots = reference_layout(rowptr, col, order)
    assert tiles.window_ptr.dtype == torch.int64
    assert tiles.window_ptr.tolist() == [sum(counts[:w]) for w in range(len(counts) + 1)]
    assert tiles.tile_cols.dtype == col.dtype
    assert tiles.tile_cols.shape == (tiles.num_tiles, TILE_COLS)
    assert tiles.tile_cols.flatten().tolist() == columns
    assert tiles.tile_bitmap.dtype == torch.int32
    assert tiles.tile_bitmap.shape == (tiles.num_tiles, 4)
    assert set_bits(tiles.tile_bitmap) == bits
    assert tiles.edge_slot.dtype == torch.int64
    assert decode_slots(tiles.edge_slot) == slots
    assert tiles.num_pairs == pairs
    return tiles


def check_against_reference(graph, transposed=False):
    tiles = tile_layout(graph, transposed)
    if transposed:
        return check_layout(tiles, graph.colptr, graph.row, graph.row_order)
    return check_layout(tiles, graph.rowptr, graph.col, graph.row_order)


def edges(pairs):
    """[2, E] edge_index from (source, destination) pairs."""
    return torch.tensor(pairs, dtype=torch.long).reshape(-1, 2).t()


SMALL = {
    # Isolated destinations, duplicates, self-loops and a last window of 3 rows (19 nodes).
    "mixed": (edges([(0, 0), (5, 0), (5, 0), (3, 0), (2, 2), (2, 2), (11, 2), (18, 2), (15, 15),
                     (0, 15), *[(s, 15) for s in range(9, 17)], (1, 16), (1, 16), (18, 18),
                     (0, 18)]), 19),
    "empty": (torch.empty(2, 0, dtype=torch.long), 5),
    "no_nodes": (torch.empty(2, 0, dtype=torch.long), 0),
    "bipartite": (edges([(0, 0), (7, 0), (29, 1), (3, 17), (3, 17), (12, 20)]), (30, 21)),
}


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("name", sorted(SMALL))
def test_small_graphs_match_the_reference(name, dtype):
    edge_index, size = SMALL[name]
    graph = Graph(edge_index.to(dtype), size)
    assert graph.index_dtype == torch.int32  # small graphs are stored narrow
    check_against_reference(graph)


def test_int64_graphs_match_the_reference():
    edge_index, size = SMALL["mixed"]
    graph = Graph(edge_index, size, index_dtype=torch.int64)
    assert graph.index_dtype == torch.int64
    check_against_reference(graph)


def test_self_loop_modes_match_the_reference():
    edge_index, size = SMALL["mixed"]
    for loops in SelfLoops:
        check_against_reference(Graph(edge_index, size, loops))


def test_dense_blocks_fill_every_tile():
    block = torch.arange(16)
    src, dst = torch.meshgrid(block, block, indexing="ij")
    one = torch.stack([src.flatten(), dst.flatten()])
    graph = Graph(torch.cat([one, one + 16, one + 32], 1), 48)
    tiles = check_against_reference(graph)
    assert tiles.num_tiles == 6 and tiles.fill == 1.0
    assert (tiles.tile_bitmap == -1).all()
    assert graph.stats["tiles"] == 6 and graph.stats["tile_fill"] == 1.0


def test_random_sparse_graph_has_low_fill():
    gen = torch.Generator().manual_seed(4)
    graph = Graph(random_edge_index(2000, 2000, 6000, gen), 2000)
    tiles = check_against_reference(graph)
    # Sources rarely repeat within a window: about one bit per tile column, a fill near 1/16.
    assert tiles.fill < 0.07
    assert graph.stats["tile_fill"] == pytest.approx(tiles.fill)
    assert graph.stats["tiles"] == tiles.num_tiles


def test_layout_does_not_depend_on_the_thread_count():
    gen = torch.Generator().manual_seed(5)
    edge_index = random_edge_index(3000, 3000, 20000, gen)  # 188 windows: several chunks
    threads = torch.get_num_threads()
    layouts = []
    try:
        for count in (1, 2):
            torch.set_num_threads(count)
            layouts.append(tile_layout(Graph(edge_index, 3000)))
    finally:
        torch.set_num_threads(threads)
    one, two = layouts
    assert one.num_pairs == two.num_pairs
    for a, b in zip(one[:3], two[:3]):
        assert torch.equal(a, b)


def test_stats_have_the_tile_keys():
    graph = Graph(*SMALL["mixed"])
    pairs = check_against_reference(graph).num_pairs
    assert graph.stats["tile_fill"] == pytest.approx(pairs / (graph.stats["tiles"] * 128))
    assert Graph(*SMALL["empty"]).stats["tile_fill"] == 0.0


def test_moved_graph_keeps_its_built_layout_and_stats():
    graph = Graph(*SMALL["mixed"])
    layout = tile_layout(graph)
    stats = dict(graph.stats)
    moved = graph.to("meta")  # no data there: the layout must come from the build on the host
    assert moved.stats == stats
    moved_layout = tile_layout(moved)
    assert moved_layout.tile_cols.device.type == "meta"
    assert tile_layout(graph) is layout  # kept on the graph
    assert moved_layout.tile_bitmap.shape == layout.tile_bitmap.shape


def test_op_rejects_bad_arguments():
    op = torch.ops.iognn.tile_layout
    rowptr, col = torch.tensor([0, 1, 2]), torch.tensor([0, 1])
    with pytest.raises(TypeError, match="col has dtype"):
        op(rowptr, col.int(), 2)
    with pytest.raises(ValueError, match="rowptr must have num_dst"):
        op(rowptr[:0], col, 2)
    with pytest.raises(ValueError, match="num_src must be >= 0"):
        op(rowptr, col, -1)
    with pytest.raises(ValueError, match="non-decreasing"):
        op(torch.tensor([0, 2, 1]), col, 2)
    with pytest.raises(ValueError, match="must equal the 2 entries of col"):
        op(torch.tensor([0, 1, 1]), col, 2)
    with pytest.raises(IndexError, match=r"outside \[0, 1\)"):
        op(rowptr, col, 1)


def shuffled(n, seed, dtype):
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("name", sorted(SMALL))
def test_row_order_windows_match_the_reference(name, dtype):
    edge_index, size = SMALL[name]
    graph = Graph(edge_index, size, index_dtype=dtype)
    order = shuffled(graph.num_dst_nodes, 6, dtype)
    tiles = torch.ops.iognn.tile_layout(graph.rowptr, graph.col, graph.num_src_nodes, order)
    check_layout(TileLayout(*tiles, order), graph.rowptr, graph.col, order)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("name", sorted(SMALL))
def test_transposed_layout_matches_the_reference(name, dtype):
    edge_index, size = SMALL[name]
    graph = Graph(edge_index, size, index_dtype=dtype)
    tiles = check_against_reference(graph, transposed=True)
    assert tiles.tile_cols.dtype == dtype
    assert tile_layout(graph, True) is tiles and tile_layout(graph) is not tiles  # one per direction


def test_random_graphs_with_a_row_order_match_the_reference():
    gen = torch.Generator().manual_seed(8)
    for trial in range(3):
        n = 40 + 37 * trial
        graph = Graph(random_edge_index(n, n, 5 * n, gen), n, SelfLoops.ADD_REMAINING)
        order = shuffled(n, trial, graph.index_dtype)
        for offsets, indices in ((graph.rowptr, graph.col), (graph.colptr, graph.row)):
            tiles = torch.ops.iognn.tile_layout(offsets, indices, n, order)
            check_layout(TileLayout(*tiles, order), offsets, indices, order)


def test_a_row_order_that_regroups_shuffled_blocks_fills_every_tile():
    # Three dense 16 x 16 blocks with their nodes shuffled: the identity windows mix the blocks,
    # the order that lists each block's nodes together gives full tiles.
    block = torch.arange(16)
    src, dst = torch.meshgrid(block, block, indexing="ij")
    one = torch.stack([src.flatten(), dst.flatten()])
    perm = shuffled(48, 9, torch.int64)
    graph = Graph(perm[torch.cat([one, one + 16, one + 32], 1)], 48)
    assert tile_layout(graph).fill < 1.0
    order = perm.to(graph.index_dtype)  # window b: perm[16 b .. 16 b + 15], block b's nodes
    tiles = TileLayout(*torch.ops.iognn.tile_layout(graph.rowptr, graph.col, 48, order), order)
    check_layout(tiles, graph.rowptr, graph.col, order)
    assert tiles.num_tiles == 6 and tiles.fill == 1.0


def test_op_rejects_a_bad_row_order():
    op = torch.ops.iognn.tile_layout
    rowptr, col = torch.tensor([0, 1, 2, 2]), torch.tensor([0, 1])
    with pytest.raises(ValueError, match="row_order must have 3 entries"):
        op(rowptr, col, 2, torch.tensor([0, 1]))
    with pytest.raises(TypeError, match="row_order has dtype"):
        op(rowptr, col, 2, torch.tensor([0, 1, 2], dtype=torch.int32))
    with pytest.raises(IndexError, match=r"row_order\[2\] = 3 is outside \[0, 3\)"):
        op(rowptr, col, 2, torch.tensor([0, 1, 3]))
    with pytest.raises(IndexError, match=r"row_order\[0\] = -1 is outside"):
        op(rowptr, col, 2, torch.tensor([-1, 1, 2]))
    with pytest.raises(ValueError, match=r"row_order\[2\] = 1 repeats an earlier entry"):
        op(rowptr, col, 2, torch.tensor([0, 1, 1]))
