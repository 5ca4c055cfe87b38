"""iognn.dense: supergraph packing (every edge kept, in a tile or in the remainder), the dense typed
propagate against an fp64 reference written as a loop over edges, gradients, degenerate batches,
bad arguments, the path choice, and CUDA against CPU (marked cuda)."""
from __future__ import annotations

from collections import Counter

import pytest
import torch

import iognn
from iognn import reorder
from iognn.dense import (DeviceRates, PackedSupergraphs, choose_path, dense_typed_propagate,
                         estimate_cost, pack_supergraphs)


# ---- batches -------------------------------------------------------------------------------------

def tree_edges(n: int, gen: torch.Generator) -> torch.Tensor:
    """A random tree with both directions of each edge (program-graph-like: narrow after RCM)."""
    if n < 2:
        return torch.empty(2, 0, dtype=torch.long)
    child = torch.arange(1, n)
    parent = (torch.rand(n - 1, generator=gen) * child).long()
    e = torch.stack([parent, child])
    return torch.cat([e, e.flip(0)], 1)


def dense_random_edges(n: int, gen: torch.Generator) -> torch.Tensor:
    """Many random edges: wide bandwidth whatever the order."""
    return torch.randint(0, n, (2, 4 * n), generator=gen)


def typed_batch(graphs, num_types: int, gen: torch.Generator, loops_and_duplicates=True):
    """(edge_index, edge_type, ptr) of graphs given as (kind, num_nodes): kind 'tree', 'wide' or
    'empty' (no edges); each graph's node ids shuffled, plus self-loops and duplicate edges."""
    parts, ptr = [], [0]
    for kind, n in graphs:
        e = {"tree": tree_edges, "wide": dense_random_edges}.get(kind, lambda n, g: None)(n, gen)
        if e is None or n == 0:
            e = torch.empty(2, 0, dtype=torch.long)
        elif loops_and_duplicates:
            e = torch.cat([e, e[:, : e.size(1) // 4], torch.arange(0, n, 3).repeat(2, 1)], 1)
        if n:
            e = torch.randperm(n, generator=gen)[e]
        parts.append(e + ptr[-1])
        ptr.append(ptr[-1] + n)
    ei = torch.cat(parts, 1)
    return ei, torch.randint(0, num_types, (ei.size(1),), generator=gen), torch.tensor(ptr)


def mixed_graphs(gen: torch.Generator, count: int, size: int):
    """Trees of 1..size nodes, a few larger than `size`, a few wide-band ones, some edgeless."""
    graphs = []
    for i in range(count):
        roll = int(torch.randint(0, 10, (1,), generator=gen))
        if roll == 0:
            graphs.append(("tree", size + 1 + int(torch.randint(0, size, (1,), generator=gen))))
        elif roll == 1:
            graphs.append(("wide", 12 + int(torch.randint(0, 8, (1,), generator=gen))))
        elif roll == 2:
            graphs.append(("empty", int(torch.randint(0, 3, (1,), generator=gen))))
        else:
            graphs.append(("tree", 1 + int(torch.randint(0, size, (1,), generator=gen))))
    return graphs


def reference(ei, et, h, weight, bias=None):
    """fp64 sum over in-edges of h[src] @ weight[type] + bias[type], one edge at a time."""
    h, weight = h.double().cpu(), weight.double().cpu()
    out = torch.zeros(h.size(0), weight.size(2), dtype=torch.float64)
    for k in range(ei.size(1)):
        s, d, t = int(ei[0, k]), int(ei[1, k]), int(et[k])
        out[d] += h[s] @ weight[t]
        if bias is not None:
            out[d] += bias[t].double().cpu()
    return out


def edges_of(packed: PackedSupergraphs) -> Counter:
    """The multiset of (src, dst, type) batch edges a packing holds, read back from the tiles and
    the remainder graph (independently of how the packer built them)."""
    S, b, P = packed.size, packed.block, packed.num_edge_types
    tiles = packed.tiles.cpu()
    slot_node = packed.slot_node.cpu()
    found = Counter()
    for q, k, d, r, c, t in tiles.nonzero().tolist():
        dst_slot = q * S + k * b + r
        src_block = k + d - 1
        assert 0 <= src_block < S // b, "a tile reaches outside its supergraph"
        src_slot = q * S + src_block * b + c
        src, dst = int(slot_node[src_slot]), int(slot_node[dst_slot])
        assert src >= 0 and dst >= 0, "an edge into or from a padding slot"
        count = float(tiles[q, k, d, r, c, t])
        assert count == int(count)
        found[(src, dst, t)] += int(count)
    rem = packed.remainder_nodes.cpu()
    rei = packed.remainder_graph.edge_index.cpu().long()
    for s, d in rei.t().tolist():
        found[(int(rem[s // P]), int(rem[d]), s % P)] += 1
    return found


def input_edges(ei, et) -> Counter:
    return Counter(zip(ei[0].tolist(), ei[1].tolist(), et.tolist()))


# ---- packing -------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("size, block", [(16, 4), (12, 12), (30, 6)])
def test_packing_keeps_every_edge(seed, size, block):
    gen = torch.Generator().manual_seed(seed)
    P = 3
    graphs = mixed_graphs(gen, 40, size)
    ei, et, ptr = typed_batch(graphs, P, gen)
    packed = pack_supergraphs((ei, et, ptr), P, size=size, block=block)
    assert edges_of(packed) == input_edges(ei, et)
    assert packed.dense_edge_ids.numel() + packed.remainder_edge_ids.numel() == ei.size(1)
    assert torch.equal(torch.cat([packed.dense_edge_ids, packed.remainder_edge_ids]).sort().values,
                       torch.arange(ei.size(1)))

    # Remainder graphs are exactly those too big or too wide after RCM.
    sizes = ptr.diff()
    perm = reorder.rcm(ei, int(ptr[-1]), ptr)
    width = reorder.graph_bandwidths(ei, int(ptr[-1]), ptr, perm)
    assert torch.equal(packed.graph_bandwidth, width)
    to_remainder = (sizes > size) | (width > block)
    assert torch.equal(packed.graph_super[sizes > 0] < 0, to_remainder[sizes > 0])
    assert bool(to_remainder.any())  # the mix has graphs too big or too wide

    # Whole graphs, in consecutive slots of one supergraph, in RCM order.
    for g in range(len(graphs)):
        lo, hi = int(ptr[g]), int(ptr[g + 1])
        slots = packed.node_slot[perm[lo:hi]]
        if hi == lo or bool(to_remainder[g]):
            assert bool((packed.node_slot[lo:hi] < 0).all())
            continue
        assert torch.equal(slots, slots[0] + torch.arange(hi - lo))
        assert bool((packed.node_super[lo:hi] == packed.graph_super[g]).all())
        assert int(packed.node_position[lo:hi].max()) < size

    # slot_node and node_slot are inverse; padding slots are -1; output rows are a permutation.
    dense = packed.node_slot >= 0
    assert torch.equal(packed.slot_node[packed.node_slot[dense]],
                       torch.arange(int(ptr[-1]))[dense])
    assert int((packed.slot_node >= 0).sum()) == int(dense.sum())
    assert torch.equal(packed.output_row.sort().values,
                       torch.cat([packed.node_slot[dense].sort().values,
                                  packed.num_slots + torch.arange(int((~dense).sum()))]))
    counts = torch.zeros(int(ptr[-1]), P)
    for s, d, t in zip(ei[0].tolist(), ei[1].tolist(), et.tolist()):
        counts[d, t] += 1
    assert torch.equal(packed.in_type_counts, counts)


def test_next_fit_places_graphs_in_batch_order():
    gen = torch.Generator().manual_seed(0)
    # Sizes 5, 5, 3, 7, 2 into S = 12: [5, 5] | [3, 7, 2]; 12 is not a multiple of 5.
    ei, et, ptr = typed_batch([("tree", n) for n in (5, 5, 3, 7, 2)], 2, gen,
                              loops_and_duplicates=False)
    packed = pack_supergraphs((ei, et, ptr), 2, size=12, block=12)
    assert packed.graph_super.tolist() == [0, 0, 1, 1, 1]
    assert packed.num_super == 2
    starts = [int(packed.node_position[int(ptr[g]):int(ptr[g + 1])].min()) for g in range(5)]
    assert starts == [0, 5, 0, 3, 10]
    assert packed.tiles.shape == (2, 1, 3, 12, 12, 2)
    assert packed.tiles_by_type.shape == (2, 1, 3, 2, 12, 12)


def test_shapes_and_padding_to_num_super():
    gen = torch.Generator().manual_seed(1)
    ei, et, ptr = typed_batch([("tree", 6)] * 5, 4, gen)
    packed = pack_supergraphs((ei, et, ptr), 4, size=16, block=8, num_super=6)
    assert packed.tiles.shape == (6, 2, 3, 8, 8, 4)
    assert packed.slot_node.shape == (96,)
    assert packed.num_super == 6 and packed.num_blocks == 2
    assert edges_of(packed) == input_edges(ei, et)
    with pytest.raises(ValueError, match="num_super"):
        pack_supergraphs((ei, et, ptr), 4, size=16, block=8, num_super=2)
    assert "supergraphs=6" in repr(packed)


def test_pyg_batch_input():
    from torch_geometric.data import Batch, Data
    gen = torch.Generator().manual_seed(2)
    data = []
    for n in (4, 9, 1, 6):
        e = tree_edges(n, gen)
        data.append(Data(edge_index=e, edge_type=torch.randint(0, 2, (e.size(1),), generator=gen),
                         num_nodes=n))
    batch = Batch.from_data_list(data)
    packed = pack_supergraphs(batch, 2, size=10, block=5)
    assert edges_of(packed) == input_edges(batch.edge_index, batch.edge_type)
    h, w = torch.randn(20, 3, dtype=torch.float64), torch.randn(2, 3, 2, dtype=torch.float64)
    torch.testing.assert_close(dense_typed_propagate(packed, h, w),
                               reference(batch.edge_index, batch.edge_type, h, w))
    # One Data (no ptr), one edge type (no edge_type).
    single = Data(edge_index=tree_edges(7, gen), num_nodes=7)
    packed = pack_supergraphs(single, 1, size=8, block=4)
    zeros = torch.zeros(single.edge_index.size(1), dtype=torch.long)
    assert edges_of(packed) == input_edges(single.edge_index, zeros)


# ---- the dense propagate against the fp64 reference ---------------------------------------------

CONFIGS = [(16, 4, 3), (12, 12, 1), (30, 6, 5), (8, 2, 2)]  # (S, b, P)


@pytest.mark.parametrize("size, block, P", CONFIGS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("with_bias", [False, True])
def test_dense_equals_reference(size, block, P, dtype, with_bias):
    gen = torch.Generator().manual_seed(size * 10 + P)
    ei, et, ptr = typed_batch(mixed_graphs(gen, 25, size), P, gen)
    n = int(ptr[-1])
    packed = pack_supergraphs((ei, et, ptr), P, size=size, block=block)
    h = torch.randn(n, 7, generator=gen, dtype=torch.float64)
    w = torch.randn(P, 7, 5, generator=gen, dtype=torch.float64)
    b = torch.randn(P, 5, generator=gen, dtype=torch.float64) if with_bias else None
    out = dense_typed_propagate(packed, h.to(dtype), w.to(dtype), None if b is None else b.to(dtype))
    assert out.dtype == dtype and out.shape == (n, 5)
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out.double(), reference(ei, et, h, w, b), **tol)


def test_all_dense_and_all_remainder_agree():
    gen = torch.Generator().manual_seed(3)
    ei, et, ptr = typed_batch([("tree", 9)] * 6 + [("wide", 14)], 3, gen)
    h = torch.randn(int(ptr[-1]), 4, dtype=torch.float64)
    w = torch.randn(3, 4, 6, dtype=torch.float64)
    bias = torch.randn(3, 6, dtype=torch.float64)
    ref = reference(ei, et, h, w, bias)
    for size, block in [(16, 16), (4, 1)]:  # roomy: trees dense; tiny: (almost) all remainder
        packed = pack_supergraphs((ei, et, ptr), 3, size=size, block=block)
        torch.testing.assert_close(dense_typed_propagate(packed, h, w, bias), ref)
    assert packed.remainder_nodes.numel() == int(ptr[-1])


def test_deterministic():
    gen = torch.Generator().manual_seed(4)
    ei, et, ptr = typed_batch(mixed_graphs(gen, 30, 16), 4, gen)
    packed = pack_supergraphs((ei, et, ptr), 4, size=16, block=8)
    h, w = torch.randn(int(ptr[-1]), 8), torch.randn(4, 8, 8)
    assert torch.equal(dense_typed_propagate(packed, h, w), dense_typed_propagate(packed, h, w))


def test_gradcheck():
    gen = torch.Generator().manual_seed(5)
    ei, et, ptr = typed_batch([("tree", 4), ("tree", 3), ("wide", 5), ("empty", 1)], 2, gen)
    packed = pack_supergraphs((ei, et, ptr), 2, size=6, block=2)
    assert packed.remainder_nodes.numel() > 0 and packed.dense_edge_ids.numel() > 0
    h = torch.randn(int(ptr[-1]), 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(2, 3, 2, dtype=torch.float64, requires_grad=True)
    b = torch.randn(2, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda *a: dense_typed_propagate(packed, *a), (h, w, b))


def test_gradients_match_reference():
    gen = torch.Generator().manual_seed(6)
    ei, et, ptr = typed_batch(mixed_graphs(gen, 12, 10), 3, gen)
    packed = pack_supergraphs((ei, et, ptr), 3, size=10, block=5)
    args = [torch.randn(int(ptr[-1]), 4, dtype=torch.float64), torch.randn(3, 4, 3, dtype=torch.float64),
            torch.randn(3, 3, dtype=torch.float64)]
    ours = [a.clone().requires_grad_() for a in args]
    theirs = [a.clone().requires_grad_() for a in args]
    grad = torch.randn(int(ptr[-1]), 3, dtype=torch.float64)
    dense_typed_propagate(packed, *ours).backward(grad)
    reference(ei, et, *theirs).backward(grad)
    for a, r in zip(ours, theirs):
        torch.testing.assert_close(a.grad, r.grad)


# ---- degenerate batches --------------------------------------------------------------------------

def test_empty_batch():
    empty = (torch.empty(2, 0, dtype=torch.long), torch.empty(0, dtype=torch.long),
             torch.tensor([0]))
    packed = pack_supergraphs(empty, 3, size=8, block=4)
    assert packed.num_super == 0 and packed.tiles.shape == (0, 2, 3, 4, 4, 3)
    out = dense_typed_propagate(packed, torch.randn(0, 5), torch.randn(3, 5, 2), torch.randn(3, 2))
    assert out.shape == (0, 2)
    assert choose_path(packed, 5, 2).path == "sparse"


def test_single_node_and_edgeless_graphs():
    gen = torch.Generator().manual_seed(7)
    ei, et, ptr = typed_batch([("empty", 1), ("empty", 0), ("tree", 1), ("empty", 2),
                               ("tree", 3)], 2, gen, loops_and_duplicates=False)
    packed = pack_supergraphs((ei, et, ptr), 2, size=4, block=2)
    h, w, b = (torch.randn(7, 3, dtype=torch.float64), torch.randn(2, 3, 2, dtype=torch.float64),
               torch.randn(2, 2, dtype=torch.float64))
    out = dense_typed_propagate(packed, h, w, b)
    torch.testing.assert_close(out, reference(ei, et, h, w, b))
    assert bool((out[:4] == 0).all())  # nodes without in-edges get nothing, bias included
    assert packed.graph_super[1] == -1  # a graph without nodes takes no place


def test_self_loop_only_graph():
    ei = torch.tensor([[0, 0, 1], [0, 0, 1]])
    et = torch.tensor([1, 1, 0])
    packed = pack_supergraphs((ei, et, torch.tensor([0, 2])), 2, size=2, block=1)
    assert float(packed.tiles.sum()) == 3
    h, w = torch.randn(2, 2, dtype=torch.float64), torch.randn(2, 2, 2, dtype=torch.float64)
    torch.testing.assert_close(dense_typed_propagate(packed, h, w), reference(ei, et, h, w))


# ---- errors --------------------------------------------------------------------------------------

def test_bad_packing_arguments():
    ei = torch.tensor([[0, 1, 2], [1, 2, 0]])
    et = torch.tensor([0, 1, 0])
    ptr = torch.tensor([0, 3])
    with pytest.raises(ValueError, match=r"size \(S = 10\) must be a multiple of block \(b = 4\)"):
        pack_supergraphs((ei, et, ptr), 2, size=10, block=4)
    with pytest.raises(ValueError, match="block"):
        pack_supergraphs((ei, et, ptr), 2, size=8, block=0)
    with pytest.raises(TypeError, match="size"):
        pack_supergraphs((ei, et, ptr), 2, size=8.0, block=4)
    with pytest.raises(ValueError, match="num_edge_types"):
        pack_supergraphs((ei, et, ptr), 0, size=8, block=4)
    with pytest.raises(IndexError, match=r"edge_type\[1\] = 1 is out of range"):
        pack_supergraphs((ei, et, ptr), 1, size=8, block=4)
    with pytest.raises(IndexError, match="edge_type"):
        pack_supergraphs((ei, torch.tensor([0, -1, 0]), ptr), 2, size=8, block=4)
    with pytest.raises(TypeError, match="edge_type"):
        pack_supergraphs((ei, et.float(), ptr), 2, size=8, block=4)
    with pytest.raises(ValueError, match="edge_type"):
        pack_supergraphs((ei, et[:2], ptr), 2, size=8, block=4)
    with pytest.raises(ValueError, match="edge_type"):
        pack_supergraphs((ei, None, ptr), 2, size=8, block=4)
    with pytest.raises(ValueError, match="edge_index"):
        pack_supergraphs((ei, et, torch.tensor([0, 1, 3])), 2, size=8, block=4)
    with pytest.raises(ValueError, match=r"ptr\[0\] must be 0"):
        pack_supergraphs((ei, et, torch.tensor([1, 3])), 2, size=8, block=4)
    with pytest.raises(IndexError, match="edge_index"):  # ptr[-1] is the node count
        pack_supergraphs((ei, et, torch.tensor([0, 2])), 2, size=8, block=4)
    with pytest.raises(TypeError, match="ptr"):
        pack_supergraphs((ei, et, [0, 3]), 2, size=8, block=4)
    with pytest.raises(TypeError, match="edge_index"):
        pack_supergraphs((ei.float(), et, ptr), 2, size=8, block=4)
    with pytest.raises(TypeError, match="batch"):
        pack_supergraphs(object(), 2, size=8, block=4)


def test_bad_propagate_arguments():
    ei = torch.tensor([[0, 1, 2], [1, 2, 0]])
    packed = pack_supergraphs((ei, torch.tensor([0, 1, 0]), torch.tensor([0, 3])), 2, size=4,
                              block=2)
    h, w, b = torch.randn(3, 4), torch.randn(2, 4, 5), torch.randn(2, 5)
    with pytest.raises(ValueError, match="h has 2 rows"):
        dense_typed_propagate(packed, h[:2], w)
    with pytest.raises(TypeError, match="h must be"):
        dense_typed_propagate(packed, h.long(), w)
    with pytest.raises(ValueError, match="weight must have shape"):
        dense_typed_propagate(packed, h, w[:1])
    with pytest.raises(TypeError, match="weight has dtype"):
        dense_typed_propagate(packed, h, w.double())
    with pytest.raises(ValueError, match="bias must have shape"):
        dense_typed_propagate(packed, h, w, b[:, :2])
    with pytest.raises(TypeError, match="packed"):
        dense_typed_propagate((ei,), h, w)


# ---- the path choice -----------------------------------------------------------------------------

def test_choice_is_visible_and_follows_the_estimate():
    gen = torch.Generator().manual_seed(8)
    ei, et, ptr = typed_batch([("tree", 30)] * 20, 20, gen)
    packed = pack_supergraphs((ei, et, ptr), 20, size=64, block=32)
    choice = choose_path(packed, 128, 128, rates=DeviceRates(3e12, 3e12, 1.5e12))
    report = choice.as_dict()
    for key in ("path", "reason", "tile_fill", "inflation", "edges_per_slot", "padding",
                "remainder_edge_fraction", "dense_seconds", "sparse_seconds", "cost"):
        assert key in report
    d = report["edges_per_slot"]
    assert report["inflation"] == pytest.approx(3 * 32 * 20 / d)
    # P = 20 trees: hundreds of times the sparse FLOPs; sparse wins at any sane rates.
    assert choice.path == "sparse" and "tile fill" in choice.reason and "sparse" in repr(choice)
    # Gathers made very expensive: the estimate flips to dense, and says so.
    flipped = choose_path(packed, 128, 128, rates=DeviceRates(1e18, 3e12, 1e6))
    assert flipped.path == "dense" and flipped.reason.startswith("dense")


def test_cost_counts_the_inflation():
    gen = torch.Generator().manual_seed(9)
    ei, et, ptr = typed_batch([("tree", 8)] * 4, 2, gen, loops_and_duplicates=False)
    packed = pack_supergraphs((ei, et, ptr), 2, size=16, block=8)
    cost = estimate_cost(packed, 4, 6)
    slots, E = packed.num_slots, ei.size(1)
    assert cost["dense"]["aggregate_flops"] == 6 * slots * 8 * 2 * 6
    assert cost["sparse"]["aggregate_flops"] == 2 * E * 6
    assert cost["dense"]["transform_flops"] == 2 * slots * 4 * 2 * 6


# ---- the contract op, once it exists -------------------------------------------------------------

def test_matches_typed_propagate_when_available():
    if not hasattr(iognn.ops, "typed_propagate"):
        pytest.skip("iognn.ops.typed_propagate is not in this build yet")
    gen = torch.Generator().manual_seed(10)
    ei, et, ptr = typed_batch(mixed_graphs(gen, 20, 12), 3, gen)
    n = int(ptr[-1])
    packed = pack_supergraphs((ei, et, ptr), 3, size=12, block=4)
    h, w, b = (torch.randn(n, 5, dtype=torch.float64), torch.randn(3, 5, 4, dtype=torch.float64),
               torch.randn(3, 4, dtype=torch.float64))
    tg = iognn.TypedGraph(ei, et, 3, n)
    torch.testing.assert_close(dense_typed_propagate(packed, h, w, b),
                               iognn.ops.typed_propagate(tg, h, w, reduce="sum", bias=b))


# ---- CUDA against CPU (run on a GPU machine) -----------------------------------------------------

@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_cuda_matches_cpu(dtype):
    gen = torch.Generator().manual_seed(11)
    ei, et, ptr = typed_batch(mixed_graphs(gen, 60, 32), 5, gen)
    n = int(ptr[-1])
    cpu = pack_supergraphs((ei, et, ptr), 5, size=32, block=8)
    gpu = pack_supergraphs((ei.cuda(), et.cuda(), ptr.cuda()), 5, size=32, block=8)
    assert gpu.device.type == "cuda" and gpu.remainder_graph.device.type == "cuda"
    assert torch.equal(gpu.tiles.cpu(), cpu.tiles)
    assert torch.equal(gpu.output_row.cpu(), cpu.output_row)
    args = [torch.randn(n, 16, dtype=torch.float64), torch.randn(5, 16, 8, dtype=torch.float64),
            torch.randn(5, 8, dtype=torch.float64)]
    dev = [a.to("cuda", dtype).requires_grad_() for a in args]
    out = dense_typed_propagate(gpu, *dev)
    ref = reference(ei, et, *args)
    tol = {torch.float64: 1e-10, torch.float32: 1e-3, torch.bfloat16: 1e-1}[dtype]
    torch.testing.assert_close(out.double().cpu(), ref, rtol=tol, atol=tol * 10)
    out.sum().backward()
    host = [a.to(dtype).requires_grad_() for a in args]
    dense_typed_propagate(cpu, *host).sum().backward()
    for a, b in zip(dev, host):
        torch.testing.assert_close(a.grad.double().cpu(), b.grad.double(), rtol=tol, atol=tol * 10)
    # Run to run, bit for bit.
    assert torch.equal(dense_typed_propagate(gpu, *dev), out)
