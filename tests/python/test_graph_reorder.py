"""Graph(reorder=...): the row order of the tile windows, computed once at the build. The CSR, the
ops' results and the layers' outputs and gradients are those of the graph without it; "auto" keeps
the best tile fill; the errors."""
import sys

import pytest
import torch

import iognn
from iognn import Graph, SelfLoops, reorder
from iognn.bench.graphs import grid, sbm
from iognn.graph import REORDER_METHODS, _auto_methods, tile_layout

from conftest import random_edge_index
from test_tiles import check_against_reference

CHEAP = ("rcm", "degree", "bfs")
GRAPH_ARRAYS = ("rowptr", "col", "eid", "colptr", "row", "csc2csr", "edge_map")
HAS_METIS = "metis" in _auto_methods()  # libmetis linked or pymetis installed
METIS = pytest.param("metis", marks=pytest.mark.skipif(not HAS_METIS, reason="no METIS"))


def shuffled_grid(side=24, seed=0):
    edge_index, n = grid(side * side)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    return perm[edge_index], n


@pytest.mark.parametrize("method", CHEAP + (METIS,))
def test_reorder_keeps_the_graph_and_sets_the_row_order(method):
    edge_index, n = shuffled_grid()
    plain = Graph(edge_index, n, SelfLoops.ADD_REMAINING)
    graph = Graph(edge_index, n, SelfLoops.ADD_REMAINING, reorder=method)
    for name in GRAPH_ARRAYS:
        assert torch.equal(getattr(graph, name), getattr(plain, name)), name
    # METIS cuts the graph into window-sized parts (16 nodes) for the tiles.
    parts = {"num_parts": -(-n // 16)} if method == "metis" else {}
    want = reorder.order(torch.stack([plain.col, plain.csr_dst]), n, method, **parts)
    assert graph.row_order.dtype == graph.index_dtype
    assert torch.equal(graph.row_order.long(), want.long())
    assert plain.row_order is None
    stats = graph.stats
    assert stats["reorder"] == method and stats["reorder_seconds"] >= 0.0
    assert "reorder_fills" not in stats and "reorder" not in plain.stats
    check_against_reference(graph)
    check_against_reference(graph, transposed=True)
    assert tile_layout(graph).row_order is graph.row_order


def test_reorder_raises_the_fill_of_a_shuffled_grid():
    edge_index, n = shuffled_grid()
    identity = tile_layout(Graph(edge_index, n)).fill
    assert tile_layout(Graph(edge_index, n, reorder="rcm")).fill > 1.3 * identity


@pytest.mark.skipif(not HAS_METIS, reason="no METIS")
def test_metis_windows_recover_shuffled_communities():
    edge_index, n = sbm(4096, 256, 12.0, 0.25)  # 16-node communities, contiguous
    native = tile_layout(Graph(edge_index, n)).fill
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(0))
    shuffled = perm[edge_index]
    assert tile_layout(Graph(shuffled, n)).fill < 0.5 * native
    assert tile_layout(Graph(shuffled, n, reorder="metis")).fill > 0.8 * native


def test_tile_policy_defaults_and_checks():
    edge_index, n = shuffled_grid()
    assert Graph(edge_index, n).tile_policy == "csr"
    assert Graph(edge_index, n, reorder="rcm").tile_policy == "auto"
    g = Graph(edge_index, n, tile_policy="tiles")
    assert g.tile_policy == "tiles"
    with pytest.raises(ValueError, match="tile_policy"):
        g.tile_policy = "fast"
    with pytest.raises(ValueError, match="tile_policy"):
        Graph(edge_index, n, tile_policy="always")


def test_layers_keep_the_windows_of_a_given_graph():
    from iognn.nn._graph import edge_graph
    edge_index, n = shuffled_grid()
    g = Graph(edge_index, n, reorder="rcm")
    derived = edge_graph("GCNConv", g, n, n, SelfLoops.ADD_REMAINING)
    assert derived is not g and derived.self_loops == SelfLoops.ADD_REMAINING
    assert derived.tile_policy == "auto" and torch.equal(derived.row_order, g.row_order)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_auto_keeps_the_best_fill(dtype):
    edge_index, n = shuffled_grid(seed=1)
    graph = Graph(edge_index, n, index_dtype=dtype, reorder="auto")
    fills = graph.stats["reorder_fills"]
    assert set(fills) == {"identity", *CHEAP, *(("metis",) if HAS_METIS else ())}
    chosen = graph.stats["reorder"]
    assert chosen in CHEAP + ("metis",)
    assert fills[chosen] == max(fills.values()) > 1.02 * fills["identity"]
    assert graph.stats["tile_fill"] == fills[chosen] >= fills["identity"]
    parts = {"num_parts": -(-n // 16)} if chosen == "metis" else {}
    want = reorder.order(torch.stack([graph.col, graph.csr_dst]), n, chosen, **parts)
    assert torch.equal(graph.row_order.long(), want.long())
    check_against_reference(graph)  # the layout "auto" kept is the one a fresh build gives
    assert graph.stats["reorder_seconds"] > 0.0


def test_auto_keeps_the_identity_unless_an_order_beats_it():
    # Dense 16 x 16 blocks in id order: every tile is full already.
    block = torch.arange(16)
    src, dst = torch.meshgrid(block, block, indexing="ij")
    one = torch.stack([src.flatten(), dst.flatten()])
    graph = Graph(torch.cat([one, one + 16], 1), 32, reorder="auto")
    assert graph.row_order is None and graph.stats["reorder"] is None
    assert graph.stats["reorder_fills"]["identity"] == 1.0 == graph.stats["tile_fill"]


def test_auto_on_an_sbm_and_an_empty_graph():
    edge_index, n = sbm(400, 10, 6.0, 0.5, seed=3)
    graph = Graph(edge_index, n, reorder="auto")
    fills = graph.stats["reorder_fills"]
    assert graph.stats["tile_fill"] == max(fills.values()) or graph.row_order is None
    assert graph.stats["tile_fill"] >= fills["identity"]
    empty = Graph(torch.empty(2, 0, dtype=torch.long), 5, reorder="auto")
    assert empty.row_order is None and empty.stats["tile_fill"] == 0.0


def test_moved_graph_keeps_its_row_order_and_layouts():
    edge_index, n = shuffled_grid()
    graph = Graph(edge_index, n, reorder="rcm")
    forward, backward = tile_layout(graph), tile_layout(graph, True)
    stats = graph.stats
    moved = graph.to("meta")  # no data there: what it has must have come along
    assert moved.row_order.device.type == "meta"
    assert tile_layout(moved).edge_slot.device.type == "meta"
    assert tile_layout(moved, True).tile_cols.shape == backward.tile_cols.shape
    assert tile_layout(moved).row_order.device.type == "meta"
    assert tile_layout(graph) is forward  # the original keeps its own
    assert moved.stats == stats and stats["reorder"] == "rcm"


def layer_run(conv, x, graph):
    x = x.clone().requires_grad_(True)
    out = conv(x, graph)
    out.backward(torch.linspace(-1, 1, out.numel()).view_as(out))
    return out.detach(), x.grad, [p.grad.clone() for p in conv.parameters()]


@pytest.mark.parametrize("layer", ["GCNConv", "SAGEConv"])
def test_layers_are_bitwise_equal_with_and_without_reorder(layer):
    gen = torch.Generator().manual_seed(12)
    n = 300
    edge_index = random_edge_index(n, n, 2000, gen)
    x = torch.randn(n, 16, generator=gen)
    torch.manual_seed(0)
    conv = getattr(iognn.nn, layer)(16, 8)
    runs = []
    for method in (None, "rcm", "auto"):
        conv.zero_grad()
        runs.append(layer_run(conv, x, Graph(edge_index, n, reorder=method)))
    plain = runs[0]
    for run in runs[1:]:
        assert torch.equal(run[0], plain[0]) and torch.equal(run[1], plain[1])
        for a, b in zip(run[2], plain[2]):
            assert torch.equal(a, b)


def test_reorder_errors(monkeypatch):
    edge_index, n = shuffled_grid(side=6)
    with pytest.raises(ValueError, match="reorder must be None or one of"):
        Graph(edge_index, n, reorder="random")
    with pytest.raises(ValueError, match="reorder must be None or one of"):
        Graph(edge_index, n, reorder=True)
    with pytest.raises(ValueError, match="bipartite graph cannot be reordered"):
        Graph(edge_index, (n, n + 1), reorder="rcm")
    with pytest.raises(ValueError, match="deferred build cannot reorder"):
        Graph(edge_index, n, deferred_error=torch.full((1,), -1), reorder="rcm")
    assert REORDER_METHODS == ("rcm", "degree", "bfs", "metis", "auto")
    with monkeypatch.context() as m:
        m.setattr(torch.compiler, "is_compiling", lambda: True)
        with pytest.raises(RuntimeError, match="not supported inside torch.compile"):
            Graph(edge_index, n, reorder="rcm")
    # Without libmetis and pymetis: the partitioner's error, and "auto" does without METIS.
    monkeypatch.setattr(iognn.distributed.metis, "has_libmetis", lambda: False)
    monkeypatch.setitem(sys.modules, "pymetis", None)
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    with pytest.raises(RuntimeError, match="needs METIS"):
        Graph(edge_index, n, reorder="metis")
    assert "metis" not in Graph(edge_index, n, reorder="auto").stats["reorder_fills"]
