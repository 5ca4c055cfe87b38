"""torch.ops.iognn.hetero_neighbor_sample on CUDA tensors: the CPU kernel's outputs bit for bit
(uniform, replace, disjoint, temporal node and edge times, weighted with replacement and weighted
taking every positive edge; int32 and int64) on random heterogeneous graphs (self-relations, edge
types without edges, isolated nodes, fan-outs -1 and 0, hashed key tables), weighted sampling
without replacement's sizes and edges, the CPU's errors in the CPU's order, mixed devices, and
NeighborLoader over CUDA HeteroData giving the CPU loader's batches on the device."""
from __future__ import annotations

import re

import pytest
import torch
from torch_geometric.data import HeteroData
from torch_geometric.utils import coalesce

from iognn.loader import NeighborLoader
from test_sampler import to_csc

pytestmark = pytest.mark.cuda

OP = torch.ops.iognn.hetero_neighbor_sample

# Node types and edge types (src, dst) of each layout, and the edge types left without edges.
LAYOUTS = {
    "three_types": (3, [(1, 0), (0, 1), (0, 0), (2, 0)], {3}),
    "two_types": (2, [(0, 0), (1, 0), (1, 1)], {2}),
    "hub": (2, [(1, 0), (0, 1), (0, 0)], set()),  # node 0 of type 0: 2,000 in-edges of type 1
}


def random_hetero(layout, seed, dtype=torch.int64):
    """(num_nodes, edge_types, colptrs, rows, seed_sets) of a random graph of `layout`: the last
    three nodes of every type are isolated; the seed sets (two of type 0, one of type 1) hold a
    duplicate and an isolated node."""
    num_types, pairs, empty = LAYOUTS[layout]
    g = torch.Generator().manual_seed(seed)
    num_nodes = [int(torch.randint(8, 40, (1,), generator=g)) for _ in range(num_types)]
    colptrs, rows = [], []
    for t, (src, dst) in enumerate(pairs):
        num_edges = 0 if t in empty else int(torch.randint(10, 150, (1,), generator=g))
        ei = torch.stack([torch.randint(0, num_nodes[src] - 3, (num_edges,), generator=g),
                          torch.randint(0, num_nodes[dst] - 3, (num_edges,), generator=g)])
        if layout == "hub" and t == 0:
            hub = torch.stack([torch.randint(0, num_nodes[src] - 3, (2000,), generator=g),
                               torch.zeros(2000, dtype=torch.long)])
            ei = torch.cat([hub, ei], 1)
        colptr, row, _ = to_csc(ei.to(dtype), num_nodes[dst])
        colptrs.append(colptr)
        rows.append(row)

    def seeds(n, k):
        ids = torch.randint(0, n, (k,), generator=g)
        return torch.cat([ids, ids[:1], torch.tensor([n - 1])]).to(dtype)

    seed_sets = [(0, seeds(num_nodes[0], 4)), (1, seeds(num_nodes[1], 3)),
                 (0, seeds(num_nodes[0], 2))]
    return num_nodes, pairs, colptrs, rows, seed_sets


def call(graph, fanouts, device, replace=False, disjoint=False, rng_seed=0, weights=(),
         node_times=(), edge_times=(), seed_times=(), strategy="uniform"):
    """The op on `graph` with every tensor on `device`; fanouts: one list per edge type."""
    num_nodes, pairs, colptrs, rows, seed_sets = graph

    def to(t):
        return None if t is None else t.to(device)

    num_hops = len(fanouts[0]) if fanouts else 0
    return OP(num_nodes, [n for pair in pairs for n in pair], [to(c) for c in colptrs],
              [to(r) for r in rows], [t for t, _ in seed_sets], [to(s) for _, s in seed_sets],
              [k for ks in fanouts for k in ks], num_hops, replace, disjoint, rng_seed,
              [to(w) for w in weights], [to(t) for t in node_times], [to(t) for t in edge_times],
              [to(t) for t in seed_times], strategy)


def assert_same_sample(cpu, gpu):
    for name, a_list, b_list in zip(("node", "row", "col", "edge_id"), cpu[:4], gpu[:4]):
        assert len(a_list) == len(b_list), name
        for i, (a, b) in enumerate(zip(a_list, b_list)):
            assert b.is_cuda and b.dtype == a.dtype, (name, i)
            assert torch.equal(a, b.cpu()), (name, i)
    assert list(cpu[4]) == list(gpu[4]) and list(cpu[5]) == list(gpu[5])


def run_both(graph, fanouts, **kwargs):
    cpu = call(graph, fanouts, "cpu", **kwargs)
    gpu = call(graph, fanouts, "cuda", **kwargs)
    assert_same_sample(cpu, gpu)
    return cpu, gpu


# Fan-outs per hop, applied to every edge type (a list of lists: edge type t takes entry t % len).
FANOUTS = {
    "mixed": [[2, 1], [3, 0], [-1, 2], [1, 1]],
    "full": [[-1, -1, -1]],
    "zero_first": [[0, 2], [3, 0]],
    "one_hop": [[3]],
    "long": [[50, 3], [40, 2]],
    "no_hops": [[]],
}


def fanouts_for(name, num_edge_types):
    ks = FANOUTS[name]
    return [ks[t % len(ks)] for t in range(num_edge_types)]


# ---- CUDA == CPU, bit for bit -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("fanouts", list(FANOUTS))
@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("disjoint", [False, True])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_uniform_sample_equals_cpu(layout, disjoint, replace, fanouts, dtype):
    for seed in range(3):
        graph = random_hetero(layout, seed, dtype)
        for rng_seed in (0, 7):
            run_both(graph, fanouts_for(fanouts, len(graph[1])), replace=replace,
                     disjoint=disjoint, rng_seed=rng_seed)


def test_no_seeds_and_no_edges_equal_cpu():
    num_nodes, pairs, colptrs, rows, seed_sets = random_hetero("three_types", 0)
    empty = (num_nodes, pairs, colptrs, rows, [(0, torch.empty(0, dtype=torch.long))])
    no_edges = (num_nodes, pairs, [torch.zeros_like(c) for c in colptrs],
                [torch.empty(0, dtype=torch.long) for _ in rows], seed_sets)
    for graph in (empty, no_edges):
        for disjoint in (False, True):
            run_both(graph, [[3, -1]] * len(pairs), disjoint=disjoint)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_hashed_key_tables_equal_cpu(dtype):
    # 400 trees over 60,000 nodes: keys past the dense tables, and tables that grow hop by hop.
    g = torch.Generator().manual_seed(5)
    num_nodes = [60000, 3000]
    pairs = [(1, 0), (0, 1), (0, 0)]
    colptrs, rows = [], []
    for src, dst in pairs:
        ei = torch.stack([torch.randint(0, num_nodes[src], (200000,), generator=g),
                          torch.randint(0, num_nodes[dst], (200000,), generator=g)])
        colptr, row, _ = to_csc(ei.to(dtype), num_nodes[dst])
        colptrs.append(colptr)
        rows.append(row)
    seeds = torch.randint(0, num_nodes[0], (400,), generator=g).to(dtype)
    graph = (num_nodes, pairs, colptrs, rows, [(0, seeds), (1, seeds[:30] % num_nodes[1])])
    for replace in (False, True):
        run_both(graph, [[5, 4, 3]] * 3, disjoint=True, replace=replace, rng_seed=3)
    run_both(graph, [[5, 4, 3]] * 3, rng_seed=4)


def timed(graph, seed):
    """Node times for types 0 and 1 (type 2, where present, has none), edge times for every edge
    type but the first, and seed times, in [0, 100)."""
    num_nodes, pairs, _, rows, seed_sets = graph
    g = torch.Generator().manual_seed(seed)
    node_times = [torch.randint(0, 100, (n,), generator=g) for n in num_nodes]
    if len(num_nodes) > 2:
        node_times[2] = None
    edge_times = [None] + [torch.randint(0, 100, (r.numel(),), generator=g) for r in rows[1:]]
    seed_times = [torch.randint(0, 100, (s.numel(),), generator=g) for _, s in seed_sets]
    return node_times, edge_times, seed_times


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("strategy", ["uniform", "last"])
@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("fanouts", ["mixed", "full", "long"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_temporal_sample_equals_cpu(layout, fanouts, replace, strategy, dtype):
    for seed in range(2):
        graph = random_hetero(layout, seed, dtype)
        node_times, edge_times, seed_times = timed(graph, seed)
        ks = fanouts_for(fanouts, len(graph[1]))
        common = dict(replace=replace, disjoint=True, rng_seed=seed, strategy=strategy)
        run_both(graph, ks, node_times=node_times, **common)  # the seeds' own times
        run_both(graph, ks, node_times=node_times, seed_times=seed_times, **common)
        run_both(graph, ks, edge_times=edge_times, seed_times=seed_times, **common)


def weighted(graph, seed):
    """fp64 weights for every edge type but the last, every fourth one zero."""
    g = torch.Generator().manual_seed(seed)
    weights = [torch.rand(r.numel(), generator=g, dtype=torch.float64) for r in graph[3]]
    for w in weights:
        w[::4] = 0
    return weights[:-1] + [None]


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_weighted_sampling_with_replacement_equals_cpu(layout, dtype):
    for seed in range(3):
        graph = random_hetero(layout, seed, dtype)
        weights = weighted(graph, seed)
        for name in ("mixed", "one_hop", "long"):
            for disjoint in (False, True):
                run_both(graph, fanouts_for(name, len(graph[1])), replace=True, disjoint=disjoint,
                         rng_seed=seed, weights=weights)
        # Every positive weight taken (k = -1, or k at or above the positives): no draw.
        run_both(graph, [[-1, 5000]] * len(graph[1]), weights=weights)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_weighted_without_replacement_takes_distinct_positive_edges(layout):
    graph = random_hetero(layout, 1)
    weights = weighted(graph, 1)
    ks = [[3]] * len(graph[1])
    cpu = call(graph, ks, "cpu", rng_seed=2, weights=weights)
    gpu = call(graph, ks, "cuda", rng_seed=2, weights=weights)
    assert list(cpu[5]) == list(gpu[5])
    for t, w in enumerate(weights):
        edge, col = gpu[3][t].cpu(), gpu[2][t].cpu()
        assert torch.equal(col, cpu[2][t])  # the same sizes per frontier node
        for i in col.unique().tolist():
            mine = edge[col == i]
            assert mine.unique().numel() == mine.numel()
            if w is not None:
                assert bool((w[mine] > 0).all())
                # The CPU's set where the keys agree (only last-ulp differences of log1p may
                # reorder two keys).
                assert len(set(mine.tolist()) ^ set(cpu[3][t][cpu[2][t] == i].tolist())) <= 2
            else:
                assert torch.equal(mine, cpu[3][t][cpu[2][t] == i])


def test_same_rng_seed_same_sample_and_another_differs():
    graph = random_hetero("three_types", 2)
    ks = [[4, 3]] * 4
    a, b, c = (call(graph, ks, "cuda", rng_seed=s) for s in (1, 1, 2))
    assert_same_sample([[t.cpu() for t in x] for x in a[:4]] + list(a[4:]), b)
    assert any(not torch.equal(x, y) for x, y in zip(a[3], c[3]))


@pytest.mark.sanitizer
def test_sanitizer_small_samples_equal_cpu():
    # A small subset for compute-sanitizer (scripts/gpu_check.sh): each kind of draw, relabelling.
    graph = random_hetero("three_types", 0)
    ks = fanouts_for("mixed", len(graph[1]))
    run_both(graph, ks)
    run_both(graph, ks, replace=True, disjoint=True)
    node_times, _, _ = timed(graph, 0)
    run_both(graph, ks, disjoint=True, node_times=node_times, strategy="last")
    run_both(graph, ks, replace=True, weights=weighted(graph, 0))


# ---- errors: the CPU's, in the CPU's order ------------------------------------------------------

def small_graph(colptr0=(0, 2, 3, 4), row0=(0, 1, 2, 3), colptr1=(0, 1, 2, 3, 3), row1=(0, 1, 2),
                colptr2=(0, 1, 1, 1), row2=(2,)):
    """Node type 0 (3 nodes), 1 (4 nodes); edge types 1 -> 0, 0 -> 1, 0 -> 0."""
    def t(values):
        return torch.tensor(values, dtype=torch.long)
    return ([3, 4], [(1, 0), (0, 1), (0, 0)], [t(colptr0), t(colptr1), t(colptr2)],
            [t(row0), t(row1), t(row2)])


def case(graph, seed_sets, fanouts, **kwargs):
    return (graph + ([(n, torch.tensor(s, dtype=torch.long)) for n, s in seed_sets],), fanouts,
            kwargs)


def error_cases():
    ok = small_graph()
    one = [[1]] * 3
    full = [[-1, -1]] * 3
    times = dict(disjoint=True, node_times=[torch.zeros(3, dtype=torch.long),
                                            torch.zeros(4, dtype=torch.long)])
    w = torch.ones(4, dtype=torch.float64)
    return {
        "fan_out": case(ok, [(0, [0])], [[1], [-2], [1]]),
        "fan_out_later": case(ok, [(0, [0])], [[1, 1], [1, -3], [1, 1]]),
        "seed": case(ok, [(0, [0]), (1, [1, 9])], one),
        "negative_seed": case(ok, [(0, [-1, 0])], one),
        "seed_no_hops": case(ok, [(1, [0]), (0, [3])], [[]] * 3),
        "seed_type": case(ok, [(0, [0]), (5, [0])], one),
        "seed_and_fan_out": case(ok, [(0, [7])], [[1], [-2], [1]]),
        "colptr_ends": case(small_graph(row2=(2, 0)), [(0, [0])], one),
        "colptr_ends_and_fan_out": case(small_graph(row2=(2, 0)), [(0, [0])], [[1], [-2], [1]]),
        "colptr_ends_and_seed": case(small_graph(row1=(0, 1)), [(0, [0, 8])], one),
        "colptr_entries": case(small_graph(colptr0=(0, 3, 1, 4)), [(0, [1])], one),
        "row": case(small_graph(row0=(0, 1, 9, 3)), [(0, [0, 1, 2])], full),
        "row_then_later_frontier": case(small_graph(row0=(9, 1, 2, 3), colptr2=(0, 1, 0, 1)),
                                        [(0, [0, 1])], one),
        "frontier_then_later_row": case(small_graph(colptr0=(0, 3, 1, 4), row2=(7,)),
                                        [(0, [0, 1])], one),
        "row_then_next_hop_frontier": case(small_graph(row0=(0, 1, 2, 3), row2=(9,),
                                                       colptr1=(0, 5, 2, 3, 3)),
                                           [(0, [0])], full),
        "row_second_hop": case(small_graph(row0=(0, 1, 2, 3), row1=(0, 7, 2)), [(0, [0])], full),
        "weight_negative": case(ok, [(0, [0])], one,
                                weights=[torch.tensor([1.0, -1.0, 1.0, 1.0],
                                                      dtype=torch.float64), None, None]),
        "weight_nan": case(ok, [(0, [0])], one, replace=True,
                           weights=[torch.tensor([float("nan"), 1, 1, 1], dtype=torch.float64),
                                    None, None]),
        "weight_inf_second_hop": case(ok, [(0, [0])], full,
                                      weights=[w, torch.tensor([1.0, float("inf"), 1.0],
                                                               dtype=torch.float64), None]),
        "node_time_row": case(small_graph(row0=(0, 1, 9, 3)), [(0, [1])], one, **times),
        "temporal_not_disjoint": case(ok, [(0, [0])], one,
                                      node_times=[torch.zeros(3, dtype=torch.long), None]),
        "seed_times_needed": case(ok, [(0, [0]), (1, [0])], one, disjoint=True,
                                  node_times=[torch.zeros(3, dtype=torch.long), None]),
        "edge_time_without_seed_time": case(ok, [(0, [0])], one, disjoint=True,
                                            edge_times=[None, None,
                                                        torch.zeros(1, dtype=torch.long)]),
        "node_times_size": case(ok, [(0, [0])], one, disjoint=True,
                                node_times=[torch.zeros(3, dtype=torch.long)]),
        "weighted_temporal": case(ok, [(0, [0])], one, weights=[w, None, None], **times),
        "strategy": case(ok, [(0, [0])], one, strategy="first", **times),
    }


ERROR_CASES = error_cases()


@pytest.mark.parametrize("name", list(ERROR_CASES))
def test_errors_are_the_cpus(name):
    graph, fanouts, kwargs = ERROR_CASES[name]
    with pytest.raises(Exception) as cpu:
        call(graph, fanouts, "cpu", **kwargs)
    with pytest.raises(type(cpu.value)) as gpu:
        call(graph, fanouts, "cuda", **kwargs)
    assert str(gpu.value).splitlines()[0] == str(cpu.value).splitlines()[0]


def test_the_device_stays_usable_after_an_error():
    graph, fanouts, kwargs = ERROR_CASES["row_then_later_frontier"]
    with pytest.raises(IndexError):
        call(graph, fanouts, "cuda", **kwargs)
    run_both(random_hetero("three_types", 0), [[2, 2]] * 4)


@pytest.mark.parametrize("name", ["rows[1]", "seeds[0]", "weights[0]", "node_times[1]",
                                  "seed_times[0]"])
def test_mixed_devices_name_the_argument(name):
    num_nodes, pairs, colptrs, rows = small_graph()
    kind, index = name[:-3], int(name[-2])
    lists = dict(colptrs=[c.cuda() for c in colptrs], rows=[r.cuda() for r in rows],
                 seeds=[torch.tensor([0], device="cuda")], weights=[], node_times=[],
                 seed_times=[])
    if kind == "weights":
        lists["weights"] = [torch.ones(4, dtype=torch.float64, device="cuda"), None, None]
    if kind in ("node_times", "seed_times"):
        lists["node_times"] = [torch.zeros(3, dtype=torch.long, device="cuda"),
                               torch.zeros(4, dtype=torch.long, device="cuda")]
        lists["seed_times"] = [torch.zeros(1, dtype=torch.long, device="cuda")]
    lists[kind][index] = lists[kind][index].cpu()
    with pytest.raises(ValueError, match=re.escape(f"{name} is on cpu but colptrs[0] is on cuda")):
        OP(num_nodes, [n for p in pairs for n in p], lists["colptrs"], lists["rows"], [0],
           lists["seeds"], [1, 1, 1], 1, False, bool(lists["node_times"]), 0, lists["weights"],
           lists["node_times"], [], lists["seed_times"])
    # A CPU graph with one CUDA input: the input is named against colptrs[0].
    with pytest.raises(ValueError, match=re.escape("seeds[0] is on cuda")):
        OP(num_nodes, [n for p in pairs for n in p], colptrs, rows, [0],
           [torch.tensor([0], device="cuda")], [1, 1, 1], 1, False, False, 0, [], [], [], [])


# ---- the loader over CUDA HeteroData ------------------------------------------------------------

def sorted_academic():
    """paper / author / institution / venue (no edges): writes, rev_writes, affiliated, cites (a
    self-relation) and an edge type without edges, each sorted by (destination, source) without
    duplicates, so that PyG builds one CSC on either device; node times for papers and authors,
    edge weights, edge features; some isolated nodes."""
    g = torch.Generator().manual_seed(0)
    sizes = {"paper": 40, "author": 25, "institution": 5, "venue": 3}
    data = HeteroData()
    for t, n in sizes.items():
        data[t].x = torch.randn(n, 8, generator=g)
    for t in ("paper", "author"):
        data[t].time = torch.randint(0, 50, (sizes[t],), generator=g)
    writes = torch.stack([torch.randint(0, 23, (120,), generator=g),
                          torch.randint(0, 37, (120,), generator=g)])
    edges = {("author", "writes", "paper"): writes,
             ("paper", "rev_writes", "author"): writes.flip(0),
             ("author", "affiliated", "institution"):
                 torch.stack([torch.arange(23), torch.arange(23) % 5]),
             ("paper", "cites", "paper"): torch.randint(0, 37, (2, 90), generator=g),
             ("institution", "hosts", "paper"): torch.empty(2, 0, dtype=torch.long)}
    for et, ei in edges.items():
        num = max(sizes[et[0]], sizes[et[-1]])
        ei = coalesce(ei.flip(0), num_nodes=num).flip(0)
        data[et].edge_index = ei
        data[et].edge_attr = torch.randn(ei.size(1), 2, generator=g)
        data[et].w = torch.rand(ei.size(1), generator=g) * (torch.arange(ei.size(1)) % 3 > 0)
    return data


def hetero_batches(data, **kwargs):
    torch.manual_seed(0)
    return list(NeighborLoader(data, [4, 3], input_nodes=("paper", torch.arange(37)),
                               batch_size=8, shuffle=True, **kwargs))


@pytest.mark.parametrize("kwargs", [dict(), dict(replace=True), dict(disjoint=True),
                                    dict(weight_attr="w", replace=True), dict(time_attr="time"),
                                    dict(time_attr="time", temporal_strategy="last")],
                         ids=["uniform", "replace", "disjoint", "weighted_replace", "temporal",
                              "temporal_last"])
def test_loader_over_cuda_heterodata_gives_the_cpu_batches_on_the_device(kwargs):
    # As for Data (test_sampler_cuda.py): a graph sorted by (destination, source) without
    # duplicates, passed with is_sorted=True (or, for node times, sorted by PyG's stable
    # lexsort), has one CSC, so both devices must give the same batches.
    data = sorted_academic()
    if "time_attr" not in kwargs:
        kwargs = dict(kwargs, is_sorted=True)
    cpu_batches = hetero_batches(data, **kwargs)
    gpu_batches = hetero_batches(data.to("cuda"), **kwargs)
    assert len(cpu_batches) == len(gpu_batches)
    with_batch = "disjoint" in kwargs or "time_attr" in kwargs
    for a, b in zip(cpu_batches, gpu_batches):
        for t in data.node_types:
            for key in ("n_id", "x") + (("batch",) if with_batch else ()):
                assert b[t][key].is_cuda, (t, key)
                assert torch.equal(a[t][key], b[t][key].cpu()), (t, key)
            assert a[t].num_sampled_nodes == b[t].num_sampled_nodes, t
        for et in data.edge_types:
            for key in ("edge_index", "e_id", "edge_attr"):
                assert b[et][key].is_cuda, (et, key)
                assert torch.equal(a[et][key], b[et][key].cpu()), (et, key)
            assert a[et].num_sampled_edges == b[et].num_sampled_edges, et
        assert torch.equal(a["paper"].input_id, b["paper"].input_id.cpu())
