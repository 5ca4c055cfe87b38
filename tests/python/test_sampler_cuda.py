"""torch.ops.iognn.neighbor_sample on CUDA tensors: the CPU kernel's outputs bit for bit (uniform
and temporal sampling), weighted sampling's distributions, determinism, the CPU's errors, and
NeighborLoader over CUDA Data giving the CPU loader's batches on the device; the heterogeneous op
sampling CUDA tensors on the device (test_sampler_hetero_cuda.py tests it in full)."""
from __future__ import annotations

import re

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.utils import coalesce

from conftest import GRAPH_CASES
from iognn.loader import NeighborLoader
from test_sampler import (STAR_WEIGHTS, graph_data, star, successive_sampling_pairs, timed_data,
                          to_csc)

pytestmark = pytest.mark.cuda

OP = torch.ops.iognn.neighbor_sample
SQUARE_CASES = [c for c in GRAPH_CASES if not isinstance(c[2], tuple) and c[2] > 0]


def on_cuda(value):
    return value.cuda() if isinstance(value, torch.Tensor) else value


def run_both(colptr, row, seed, fanouts, **kwargs):
    """(cpu outputs, cuda outputs) of one call; checks the CUDA outputs' device and dtypes."""
    cpu = OP(colptr, row, seed.to(colptr.dtype), fanouts, **kwargs)
    gpu = OP(colptr.cuda(), row.cuda(), seed.to(colptr.dtype).cuda(), fanouts,
             **{k: on_cuda(v) for k, v in kwargs.items()})
    for a, b in zip(cpu[:4], gpu[:4]):
        assert b.is_cuda and b.dtype == a.dtype and b.shape == a.shape
    return cpu, gpu


def assert_same_sample(cpu, gpu):
    for name, a, b in zip(("row", "col", "node", "edge"), cpu[:4], gpu[:4]):
        assert torch.equal(a, b.cpu()), name
    assert list(cpu[4]) == list(gpu[4]) and list(cpu[5]) == list(gpu[5])


def supernode_graph(dtype):
    """Node 0 with 5,000 in-edges (sources repeat) on a sparse random graph of 600 nodes."""
    return next(c for c in SQUARE_CASES if c[0] == "supernode")[1].to(dtype), 600


# ---- CUDA == CPU, bit for bit -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("fanouts", [[0], [1], [3, 2], [-1, -1], [50, 3], [3, 0, 2], []],
                         ids=lambda f: "_".join(map(str, f)) or "no_hops")
@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("disjoint", [False, True])
@pytest.mark.parametrize("case", SQUARE_CASES, ids=[c[0] for c in SQUARE_CASES])
def test_uniform_sample_equals_cpu(case, disjoint, replace, fanouts, dtype):
    _, edge_index, n = case
    colptr, row, _ = to_csc(edge_index.to(dtype), n)
    seeds = torch.tensor([0, n // 3, n - 1, 0, n // 2])  # a duplicated seed
    for rng_seed in (0, 7):
        cpu, gpu = run_both(colptr, row, seeds, fanouts, replace=replace, disjoint=disjoint,
                            rng_seed=rng_seed)
        assert_same_sample(cpu, gpu)


def test_empty_graph_and_no_seeds_equal_cpu():
    colptr = torch.zeros(6, dtype=torch.long)
    row = torch.empty(0, dtype=torch.long)
    for seeds in (torch.arange(5), torch.empty(0, dtype=torch.long)):
        for disjoint in (False, True):
            assert_same_sample(*run_both(colptr, row, seeds, [3, -1], disjoint=disjoint))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("k", [100, 1000, 4999, 5000, -1])
@pytest.mark.parametrize("replace", [False, True])
def test_supernode_long_fan_outs_equal_cpu(k, replace, dtype):
    edge_index, n = supernode_graph(dtype)
    colptr, row, _ = to_csc(edge_index, n)
    seeds = torch.zeros(40, dtype=torch.long)
    cpu, gpu = run_both(colptr, row, seeds, [k, 5], replace=replace, rng_seed=11)
    assert_same_sample(cpu, gpu)
    cpu, gpu = run_both(colptr, row, seeds[:6], [k], replace=replace, disjoint=True, rng_seed=12)
    assert_same_sample(cpu, gpu)


def test_star_scan_limits_equal_cpu():
    colptr, row = star(300)
    seeds = torch.zeros(30, dtype=torch.long)
    for k in (5, 31, 32, 33, 64, 65, 70, 200, 299):
        assert_same_sample(*run_both(colptr, row, seeds, [k], rng_seed=k))


@pytest.mark.parametrize("strategy", ["uniform", "last"])
@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("fanouts", [[4, 3], [-1, 2], [0, 2], [40]])
@pytest.mark.parametrize("level", ["node", "edge"])
def test_temporal_sample_equals_cpu(level, fanouts, replace, strategy):
    data = timed_data()
    n = data.num_nodes
    colptr, row, perm = to_csc(data.edge_index, n)
    seeds = torch.tensor([0, 5, 17, 5, 42, 59])
    seed_time = torch.randint(0, 100, (seeds.numel(),), generator=torch.Generator().manual_seed(3))
    times = (dict(node_time=data.t) if level == "node"
             else dict(edge_time=data.et[perm].contiguous(), seed_time=seed_time))
    for dtype in (torch.int64, torch.int32):
        cpu, gpu = run_both(colptr.to(dtype), row.to(dtype), seeds, fanouts, replace=replace,
                            disjoint=True, rng_seed=5, temporal_strategy=strategy, **times)
        assert_same_sample(cpu, gpu)
    if level == "node":  # given seed times with node times
        assert_same_sample(*run_both(colptr, row, seeds, fanouts, replace=replace, disjoint=True,
                                     rng_seed=6, temporal_strategy=strategy, node_time=data.t,
                                     seed_time=seed_time))


@pytest.mark.parametrize("k", [1, 3, 100, 1000])
def test_temporal_last_on_a_supernode_with_tied_times_equals_cpu(k):
    edge_index, n = supernode_graph(torch.int64)
    colptr, row, _ = to_csc(edge_index, n)
    g = torch.Generator().manual_seed(4)
    edge_time = torch.randint(-3, 4, (row.numel(),), generator=g) * (1 << 40)  # many ties
    seeds = torch.zeros(8, dtype=torch.long)
    seed_time = torch.randint(-2, 4, (8,), generator=g) * (1 << 40)
    for strategy in ("last", "uniform"):
        for replace in (False, True):
            assert_same_sample(*run_both(colptr, row, seeds, [k, 2], replace=replace,
                                         disjoint=True, rng_seed=k, edge_time=edge_time,
                                         seed_time=seed_time, temporal_strategy=strategy))


def test_weighted_sampling_with_replacement_equals_cpu():
    # Running sums in CSC order and the same draws: equal bit for bit.
    data = graph_data(num_nodes=80, num_edges=900)
    colptr, row, _ = to_csc(data.edge_index, 80)
    weight = torch.rand(row.numel(), generator=torch.Generator().manual_seed(2),
                        dtype=torch.float64)
    weight[::4] = 0
    for k in ([3, 2], [40], [-1, 2]):
        assert_same_sample(*run_both(colptr, row, torch.tensor([1, 9, 33, 9]), k, replace=True,
                                     rng_seed=3, weight=weight))
    # Every positive weight taken (k at or above the positives): CSC order, no draw.
    assert_same_sample(*run_both(colptr, row, torch.tensor([1, 9]), [-1, 100], weight=weight))


# ---- weighted sampling without replacement: the distribution ------------------------------------

def test_weighted_draws_without_replacement_follow_successive_sampling_on_cuda():
    stats = pytest.importorskip("scipy.stats")
    colptr, row = star(5)
    trials = 6000
    seeds = torch.zeros(trials, dtype=torch.long, device="cuda")
    _, col, _, edge, _, _ = OP(colptr.cuda(), row.cuda(), seeds, [2], False, False, 1,
                               STAR_WEIGHTS.cuda())
    edge, col = edge.cpu(), col.cpu()
    assert edge.numel() == 2 * trials and torch.equal(col, torch.arange(trials).repeat_interleave(2))
    pairs = edge.view(trials, 2)
    assert bool((pairs[:, 0] != pairs[:, 1]).all()) and not bool((pairs == 0).any())
    ordered = torch.zeros(5, 5, dtype=torch.long)
    ordered.index_put_((pairs[:, 0], pairs[:, 1]), torch.ones(trials, dtype=torch.long),
                       accumulate=True)
    expected = successive_sampling_pairs(STAR_WEIGHTS)
    mask = expected > 0
    assert int(ordered[~mask].sum()) == 0
    assert stats.chisquare(ordered[mask].numpy(), (expected[mask] * trials).numpy()).pvalue > 1e-4


def test_weighted_draws_with_replacement_follow_the_weights_on_cuda():
    stats = pytest.importorskip("scipy.stats")
    colptr, row = star(5)
    seeds = torch.zeros(300, dtype=torch.long, device="cuda")
    edge = OP(colptr.cuda(), row.cuda(), seeds, [20], True, False, 4, STAR_WEIGHTS.cuda())[3]
    hits = torch.bincount(edge.cpu(), minlength=5)
    assert hits[0] == 0 and hits.sum() == 300 * 20
    expected = STAR_WEIGHTS[1:] / STAR_WEIGHTS.sum() * hits.sum()
    assert stats.chisquare(hits[1:].numpy(), expected.numpy()).pvalue > 1e-4


def test_weighted_without_replacement_takes_distinct_positive_edges_on_cuda():
    colptr, row = star(100)
    weight = torch.rand(100, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    weight[::3] = 0  # 66 positive weights
    seeds = torch.zeros(40, dtype=torch.long)
    for k in (5, 40, 65, 66, -1):
        cpu, gpu = run_both(colptr, row, seeds, [k], rng_seed=7, weight=weight)
        edge, col = gpu[3].cpu(), gpu[1].cpu()
        assert torch.equal(col, cpu[1])  # same sizes per node
        for i in range(40):
            mine = edge[col == i]
            assert mine.unique().numel() == mine.numel() and bool((weight[mine] > 0).all())
            # Same set as the CPU's where the keys agree (only last-ulp differences of log1p
            # may reorder two keys).
            assert len(set(mine.tolist()) ^ set(cpu[3][cpu[1] == i].tolist())) <= 2


# ---- determinism --------------------------------------------------------------------------------

def test_same_rng_seed_same_sample_and_another_differs():
    data = graph_data(num_nodes=200, num_edges=3000)
    colptr, row, _ = to_csc(data.edge_index, 200)
    args = (colptr.cuda(), row.cuda(), torch.arange(0, 200, 7, device="cuda"), [5, 4])
    weight = torch.rand(row.numel(), dtype=torch.float64, device="cuda")
    for kwargs in (dict(), dict(replace=True), dict(disjoint=True), dict(weight=weight)):
        a, b, c = OP(*args, rng_seed=1, **kwargs), OP(*args, rng_seed=1, **kwargs), \
            OP(*args, rng_seed=2, **kwargs)
        assert_same_sample([t.cpu() for t in a[:4]] + list(a[4:]), b)
        assert not torch.equal(a[3], c[3])


# ---- errors: the CPU's --------------------------------------------------------------------------

def error_cases():
    colptr, row = star(4)
    seed = torch.tensor([0])
    bad_colptr = torch.tensor([0, 4, 2, 4, 4, 4])
    bad_row = torch.tensor([1, 2, 7, 4])
    return [
        ("fan_out", (colptr, row, seed, [-2]), {}),
        ("fan_out_later", (colptr, row, seed, [1, -3]), {}),
        ("seed", (colptr, row, torch.tensor([0, 9]), [1]), {}),
        ("negative_seed", (colptr, row, torch.tensor([-1, 0]), [1]), {}),
        ("seed_no_hops", (colptr, row, torch.tensor([0, 9]), []), {}),
        ("colptr_ends", (colptr, row[:3], seed, [1]), {}),
        ("colptr_ends_and_fan_out", (colptr, row[:3], seed, [-2]), {}),
        ("colptr_entries", (bad_colptr, row, torch.tensor([1]), [1]), {}),
        ("row", (colptr, bad_row, seed, [-1]), {}),
        ("row_second_hop", (torch.tensor([0, 1, 2, 3, 4]), torch.tensor([1, 2, 3, 9]), seed,
                            [-1, -1, -1, -1]), {}),
        ("weight_negative", (colptr, row, seed, [1]),
         dict(weight=torch.tensor([1.0, 1.0, -1.0, 1.0], dtype=torch.float64))),
        ("weight_nan", (colptr, row, seed, [1]),
         dict(replace=True, weight=torch.tensor([float("nan"), 1, 1, 1], dtype=torch.float64))),
        ("weight_inf_second_hop", (torch.tensor([0, 1, 2, 3, 4, 4]), torch.tensor([1, 2, 3, 4]),
                                   seed, [1, 1]),
         dict(weight=torch.tensor([1.0, float("inf"), 1.0, 1.0], dtype=torch.float64))),
        ("weight_dtype", (colptr, row, seed, [1]), dict(weight=torch.ones(4))),
        ("weight_size", (colptr, row, seed, [1]), dict(weight=torch.ones(3, dtype=torch.float64))),
        ("node_time_size", (colptr, row, seed, [1]),
         dict(disjoint=True, node_time=torch.zeros(3, dtype=torch.long))),
        ("node_time_row", (colptr, bad_row, seed, [1]),
         dict(disjoint=True, node_time=torch.zeros(5, dtype=torch.long))),
        ("edge_time_dtype", (colptr, row, seed, [1]),
         dict(disjoint=True, edge_time=torch.zeros(4), seed_time=torch.zeros(1, dtype=torch.long))),
        ("seed_time_size", (colptr, row, seed, [1]),
         dict(disjoint=True, node_time=torch.zeros(5, dtype=torch.long),
              seed_time=torch.zeros(2, dtype=torch.long))),
        ("edge_time_without_seed_time", (colptr, row, seed, [1]),
         dict(disjoint=True, edge_time=torch.zeros(4, dtype=torch.long))),
        ("temporal_not_disjoint", (colptr, row, seed, [1]),
         dict(node_time=torch.zeros(5, dtype=torch.long))),
        ("temporal_not_disjoint_bad_seed", (colptr, row, torch.tensor([7]), [1]),
         dict(node_time=torch.zeros(5, dtype=torch.long))),
        ("strategy", (colptr, row, seed, [1]),
         dict(disjoint=True, node_time=torch.zeros(5, dtype=torch.long),
              temporal_strategy="first")),
        ("weighted_temporal", (colptr, row, seed, [1]),
         dict(disjoint=True, weight=torch.ones(4, dtype=torch.float64),
              node_time=torch.zeros(5, dtype=torch.long))),
        ("seed_dtype", (colptr, row, torch.tensor([0], dtype=torch.int32), [1]), {}),
        ("colptr_dtype", (colptr.float(), row, seed, [1]), {}),
    ]


ERROR_CASES = error_cases()


@pytest.mark.parametrize("args, kwargs", [c[1:] for c in ERROR_CASES],
                         ids=[c[0] for c in ERROR_CASES])
def test_errors_are_the_cpus(args, kwargs):
    with pytest.raises(Exception) as cpu:
        OP(*args, **kwargs)
    with pytest.raises(type(cpu.value)) as gpu:
        OP(*[on_cuda(a) for a in args], **{k: on_cuda(v) for k, v in kwargs.items()})
    assert str(gpu.value).splitlines()[0] == str(cpu.value).splitlines()[0]


@pytest.mark.parametrize("name", ["row", "seed", "weight", "node_time", "seed_time"])
def test_mixed_devices_name_the_argument(name):
    colptr, row = star(4)
    args = dict(colptr=colptr.cuda(), row=row.cuda(), seed=torch.tensor([0], device="cuda"))
    kwargs = dict(disjoint=True)
    if name == "weight":
        kwargs = dict(weight=torch.ones(4, dtype=torch.float64))
    elif name in ("node_time", "seed_time"):
        kwargs.update(node_time=torch.zeros(5, dtype=torch.long, device="cuda"))
        kwargs[name] = torch.zeros(5 if name == "node_time" else 1, dtype=torch.long)
    else:
        args[name] = args[name].cpu()
    with pytest.raises(ValueError, match=re.escape(f"{name} is on cpu but colptr is on cuda")):
        OP(args["colptr"], args["row"], args["seed"], [1], **kwargs)
    # A CPU graph with one CUDA input: the input is named against colptr too.
    with pytest.raises(ValueError, match=re.escape("is on cuda")):
        OP(colptr, row, torch.tensor([0], device="cuda"), [1])


@pytest.mark.parametrize("on_device", ["every input", "seeds only"])
def test_hetero_op_on_cuda_samples_on_the_device(on_device):
    colptr, row = star(4)
    seeds = [torch.tensor([0], device="cuda")]

    def hetero(colptr, row, seeds):
        return torch.ops.iognn.hetero_neighbor_sample([colptr.numel() - 1], [0, 0], [colptr],
                                                      [row], [0], seeds, [2], 1, False, False, 3,
                                                      [], [], [], [])
    if on_device == "seeds only":  # the graph on the CPU: the seeds are named against it
        with pytest.raises(ValueError, match=re.escape("seeds[0] is on cuda:0 but colptrs[0] is "
                                                       "on cpu")):
            hetero(colptr, row, seeds)
        return
    cpu = hetero(colptr, row, [s.cpu() for s in seeds])
    gpu = hetero(colptr.cuda(), row.cuda(), seeds)
    for a_list, b_list in zip(cpu[:4], gpu[:4]):
        for a, b in zip(a_list, b_list):
            assert b.is_cuda and torch.equal(a, b.cpu())
    assert cpu[4:] == gpu[4:]


# ---- the loader over CUDA Data ------------------------------------------------------------------

def batches(data, seed, **kwargs):
    torch.manual_seed(seed)
    return list(NeighborLoader(data, [4, 3], batch_size=16, shuffle=True, **kwargs))


@pytest.mark.parametrize("kwargs", [dict(), dict(replace=True), dict(disjoint=True),
                                    dict(time_attr="t"), dict(time_attr="t",
                                                              temporal_strategy="last")],
                         ids=["uniform", "replace", "disjoint", "temporal", "temporal_last"])
def test_loader_over_cuda_data_gives_the_cpu_batches_on_the_device(kwargs):
    # PyG builds the CSC with an unstable sort by destination, on the graph's device, so the CPU
    # and the CUDA CSC may order a node's in-neighbours differently (and the samples differ, the
    # distribution being the same), even on input already sorted. A graph sorted by (destination,
    # source) without duplicate edges, passed with is_sorted=True (or, for node times, sorted by
    # PyG's stable lexsort), has one CSC: both devices must then give the same batches.
    data = timed_data()
    del data.et
    data.edge_index = coalesce(data.edge_index.flip(0), num_nodes=data.num_nodes).flip(0)
    data.edge_attr = torch.randn(data.num_edges, 2)
    if "time_attr" not in kwargs:
        kwargs = dict(kwargs, is_sorted=True)
    cpu_batches = batches(data, 0, **kwargs)
    gpu_batches = batches(data.to("cuda"), 0, **kwargs)
    assert len(cpu_batches) == len(gpu_batches)
    for a, b in zip(cpu_batches, gpu_batches):
        for key in ("n_id", "e_id", "edge_index", "x", "y", "edge_attr", "t"):
            assert b[key].is_cuda, key
            assert torch.equal(a[key], b[key].cpu()), key
        if "disjoint" in kwargs or "time_attr" in kwargs:
            assert torch.equal(a.batch, b.batch.cpu())
        assert a.num_sampled_nodes == b.num_sampled_nodes
        assert a.num_sampled_edges == b.num_sampled_edges


def test_loader_with_weights_over_cuda_data_samples_positive_edges_on_the_device():
    data = graph_data(num_nodes=50, num_edges=600)
    data.w = torch.rand(data.num_edges)
    data.w[data.edge_index[0] % 3 == 0] = 0
    data = data.to("cuda")
    for replace in (False, True):
        for b in NeighborLoader(data, [4, 3], batch_size=10, weight_attr="w", replace=replace):
            assert b.e_id.is_cuda and bool((data.w[b.e_id] > 0).all())
            assert torch.equal(b.n_id[b.edge_index], data.edge_index[:, b.e_id])
