"""Padded sampling (torch.ops.iognn.neighbor_sample_padded, iognn.padded_sampler), deferred graph
builds and captured mini-batch steps: the padded layout holds exactly the unpadded sample, padding
changes no real node's output, and (CUDA) the device kernel equals the host's with no host
synchronisation, inside a captured step."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import iognn
from conftest import GRAPH_CASES
from iognn.blocks import block_graphs
from iognn.captured import CapturedStep
from iognn.graph import Graph, raise_deferred_error
from iognn.minibatch import LayerStack
from iognn.padded_sampler import PaddedNeighborSampler
from test_sampler import graph_data, timed_data, to_csc

PADDED = torch.ops.iognn.neighbor_sample_padded
UNPADDED = torch.ops.iognn.neighbor_sample
SQUARE_CASES = [c for c in GRAPH_CASES if not isinstance(c[2], tuple) and c[2] > 0]
cuda = pytest.mark.cuda


def capacities(num_seeds, fanouts):
    caps, frontier = [], num_seeds
    for k in fanouts:
        frontier *= k
        caps.append(frontier)
    return caps


def padded_call(colptr, row, seed, fanouts, key, **kwargs):
    """The padded op with a fresh error word (on colptr's device); returns (outputs, error)."""
    device = colptr.device
    error = torch.full((1,), -1, dtype=torch.int64, device=device)
    out = PADDED(colptr, row, seed.to(colptr.dtype), fanouts,
                 torch.tensor([key], device=device), error, **kwargs)
    return out, error


def assert_padded_holds(padded, unpadded, num_seeds, fanouts):
    """The padded layout (kernels/sampler_types.h) of the unpadded outputs, -1 elsewhere."""
    row, col, node, edge, nodes, edges = padded
    u_row, u_col, u_node, u_edge, u_nodes, u_edges = unpadded
    caps = capacities(num_seeds, fanouts)
    assert nodes.tolist() == list(u_nodes) and edges.tolist() == list(u_edges)
    assert row.numel() == sum(caps) and node.size(0) == num_seeds + sum(caps)
    n = u_node.size(0)
    assert torch.equal(node[:n].cpu(), u_node) and bool((node[n:] == -1).all())
    for padded_t, t in ((row, u_row), (col, u_col), (edge, u_edge)):
        base = offset = 0
        for cap, count in zip(caps, u_edges):
            assert torch.equal(padded_t[base:base + count].cpu(), t[offset:offset + count])
            assert bool((padded_t[base + count:base + cap] == -1).all())
            base, offset = base + cap, offset + count


# ---- the layout -------------------------------------------------------------------------------

@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=cuda)])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("fanouts", [[3], [3, 2], [4, 0, 2], [1, 1, 1], []],
                         ids=lambda f: "_".join(map(str, f)) or "no_hops")
@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("case", SQUARE_CASES, ids=[c[0] for c in SQUARE_CASES])
def test_padded_layout_holds_the_sample(case, replace, fanouts, dtype, device):
    """On either device, the host kernel's unpadded sample in the padded layout."""
    _, edge_index, n = case
    colptr, row, _ = to_csc(edge_index.to(dtype), n)
    seed = torch.randperm(n)[:7]
    padded, error = padded_call(colptr.to(device), row.to(device), seed.to(device), fanouts, 11,
                                replace=replace)
    unpadded = UNPADDED(colptr, row, seed.to(dtype), fanouts, replace, False, 11)
    assert_padded_holds(padded, unpadded, seed.numel(), fanouts)
    assert padded[0].dtype == dtype and padded[4].dtype == torch.int64
    assert all(t.device.type == device for t in padded)
    assert error.item() == -1


def test_padded_layout_weighted_disjoint_temporal():
    data = timed_data(3)
    colptr, row, perm = to_csc(data.edge_index, data.num_nodes)
    seed = torch.tensor([0, 5, 5, 9])
    weight = torch.rand(row.numel(), dtype=torch.float64)
    for kwargs in (dict(weight=weight), dict(weight=weight, replace=True), dict(disjoint=True),
                   dict(disjoint=True, node_time=data.t), dict(
                       disjoint=True, edge_time=data.et[perm], seed_time=torch.tensor([50, 9, 99, 0]),
                       temporal_strategy="last")):
        padded, _ = padded_call(colptr, row, seed, [3, 2], 4, **kwargs)
        unpadded = UNPADDED(colptr, row, seed, [3, 2], kwargs.get("replace", False),
                            kwargs.get("disjoint", False), 4, kwargs.get("weight"),
                            kwargs.get("node_time"), kwargs.get("edge_time"),
                            kwargs.get("seed_time"), kwargs.get("temporal_strategy", "uniform"))
        if kwargs.get("disjoint"):  # node is [num_nodes, 2]: compare both columns
            assert torch.equal(padded[2][:unpadded[2].size(0)], unpadded[2])
            assert bool((padded[2][unpadded[2].size(0):] == -1).all())
            padded = padded[:2] + (padded[2][:, 1],) + padded[3:]
            unpadded = unpadded[:2] + (unpadded[2][:, 1],) + unpadded[3:]
        assert_padded_holds(padded, unpadded, seed.numel(), [3, 2])


@pytest.mark.parametrize("fanouts, match", [([2, -1], r"fan-out >= 0.*num_neighbors\[1\] = -1"),
                                            ([-2], r"num_neighbors\[0\] must be >= 0"),
                                            ([60000, 60000], "needs more than 2147483647 ids")])
def test_padded_bad_fanouts(fanouts, match):
    colptr, row, _ = to_csc(torch.tensor([[0, 1], [1, 0]], dtype=torch.int32), 2)
    with pytest.raises(ValueError, match=match):
        padded_call(colptr, row, torch.tensor([0]), fanouts, 0)


def test_padded_bad_key_and_error_word():
    colptr, row, _ = to_csc(torch.tensor([[0, 1], [1, 0]]), 2)
    seed = torch.tensor([0])
    with pytest.raises(ValueError, match="rng_seed must be a contiguous int64 tensor of one"):
        PADDED(colptr, row, seed, [1], torch.tensor([1, 2]), torch.tensor([-1]))
    with pytest.raises((TypeError, ValueError), match="error"):
        PADDED(colptr, row, seed, [1], torch.tensor([1]), torch.tensor([-1.0]))
    with pytest.raises(IndexError, match="seed"):  # the host backend raises at once
        padded_call(colptr, row, torch.tensor([5]), [1], 0)


# ---- the sampler class and its blocks ---------------------------------------------------------

def sage_stack(in_channels=8, hidden=16, classes=3, layers=2, seed=0):
    torch.manual_seed(seed)
    convs = [iognn.nn.SAGEConv(in_channels if i == 0 else hidden,
                               classes if i == layers - 1 else hidden) for i in range(layers)]
    return LayerStack(convs, dropout=0.0, mode="blocks", graph_loops=iognn.SelfLoops.KEEP)


def test_padding_changes_no_real_output():
    """The seeds' outputs on the padded blocks equal those on the unpadded sample's blocks."""
    data = graph_data(num_nodes=80, num_edges=500, seed=4)
    sampler = PaddedNeighborSampler(data, [4, 3], batch_size=6, seed=7)
    seed = torch.tensor([3, 1, 4, 1, 5, 9])
    key = int(sampler.key) + 1  # sample() advances the key before drawing
    padded = sampler.sample(seed)
    assert int(sampler.key) == key
    colptr, row = sampler._csc.colptr, sampler._csc.row
    u_row, u_col, u_node, _, u_nodes, u_edges = UNPADDED(colptr, row, seed.to(colptr.dtype),
                                                         [4, 3], False, False, key)
    model = sage_stack()
    model.eval()
    edge_index = torch.stack([u_row, u_col]).long()
    graphs = block_graphs(edge_index, u_nodes, u_edges, 2)
    expected = model(data.x[u_node.long()], edge_index, u_nodes, u_edges, graphs)[:6]
    got = model(padded.gather(data.x), padded.edge_index, padded.node_capacity,
                padded.edge_capacity, padded.block_graphs(2))
    assert got.size(0) == padded.node_capacity[0] == padded.num_sinks + 6  # sinks and seeds
    torch.testing.assert_close(padded.seed_rows(got), expected, rtol=1e-5, atol=1e-6)
    sampler.check()


def test_sampler_arguments():
    data = graph_data()
    with pytest.raises(ValueError, match=r"num_neighbors\[1\] must be an int >= 0"):
        PaddedNeighborSampler(data, [2, -1], batch_size=4)
    with pytest.raises(ValueError, match="batch_size must be an int >= 1"):
        PaddedNeighborSampler(data, [2], batch_size=0)
    sampler = PaddedNeighborSampler(data, [2], batch_size=4)
    with pytest.raises(ValueError, match=r"seed must have shape \[4\]"):
        sampler.sample(torch.tensor([1, 2]))


def test_check_reports_recorded_errors():
    sampler = PaddedNeighborSampler(graph_data(), [2], batch_size=2)
    sampler.check()  # nothing recorded
    sampler.error.fill_(1)
    with pytest.raises(IndexError, match="a seed is out of range"):
        sampler.check()
    sampler.check()  # the word was reset
    sampler.build_error.fill_(2 * 7 + 1)
    with pytest.raises(IndexError, match=r"edge_index\[1\] at edge 7 is out of range"):
        sampler.check()


# ---- deferred graph builds --------------------------------------------------------------------

def test_deferred_build_equals_build_on_cpu():
    edge_index = torch.tensor([[0, 2, 1, 2], [1, 0, 2, 2]])
    error = torch.full((1,), -1)
    a = Graph(edge_index, (3, 4), deferred_error=error)
    b = Graph(edge_index, (3, 4))
    for name in ("rowptr", "col", "eid", "colptr", "row", "csc2csr", "edge_map"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert error.item() == -1
    raise_deferred_error(error)
    with pytest.raises(IndexError):  # the host build raises at once
        Graph(torch.tensor([[0], [5]]), (3, 4), deferred_error=error)


def test_deferred_build_arguments():
    edge_index = torch.tensor([[0], [1]])
    error = torch.full((1,), -1)
    with pytest.raises(ValueError, match="needs num_nodes"):
        Graph(edge_index, deferred_error=error)
    with pytest.raises(ValueError, match="keeps self-loops"):
        Graph(edge_index, 2, "replace", deferred_error=error)
    with pytest.raises(ValueError, match="error must be a contiguous int64 tensor of one entry"):
        Graph(edge_index, 2, deferred_error=torch.full((2,), -1))
    with pytest.raises(ValueError, match="degree_bounds are for deferred builds"):
        Graph(edge_index, 2, degree_bounds=(3, -1))
    with pytest.raises(ValueError, match="degree_bounds must be two ints >= -1"):
        Graph(edge_index, 2, deferred_error=error, degree_bounds=(3,))
    with pytest.raises(IndexError, match=r"edge_index\[0\] at edge 3"):
        raise_deferred_error(torch.tensor([6]))


def test_captured_step_volatile_argument_check():
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.Adam(model.parameters())
    with pytest.raises(ValueError, match="volatile must list argument positions"):
        CapturedStep(model, optimizer, lambda m: m.weight.sum(), volatile=[-1])


# ---- CUDA -------------------------------------------------------------------------------------

@cuda
def test_cuda_padded_weighted_disjoint_temporal_equal_cpu():
    data = timed_data(3)
    colptr, row, perm = to_csc(data.edge_index, data.num_nodes)
    seed = torch.tensor([0, 5, 5, 9])
    weight = torch.rand(row.numel(), dtype=torch.float64)
    for kwargs in (dict(weight=weight, replace=True), dict(disjoint=True),
                   dict(disjoint=True, node_time=data.t),
                   dict(disjoint=True, edge_time=data.et[perm], seed_time=torch.tensor(
                       [50, 9, 99, 0]), temporal_strategy="last")):
        cpu, _ = padded_call(colptr, row, seed, [3, 2], 4, **kwargs)
        gpu, _ = padded_call(colptr.cuda(), row.cuda(), seed.cuda(), [3, 2], 4,
                             **{k: v.cuda() if isinstance(v, torch.Tensor) else v
                                for k, v in kwargs.items()})
        for a, b in zip(cpu, gpu):
            assert torch.equal(a, b.cpu()), kwargs.keys()


@cuda
def test_cuda_padded_records_bad_seed_without_raising():
    colptr, row, _ = to_csc(torch.tensor([[0, 1, 2], [1, 2, 0]]), 3)
    out, error = padded_call(colptr.cuda(), row.cuda(), torch.tensor([1, 7]).cuda(), [2], 0)
    assert error.item() == 1  # kPaddedBadSeed
    assert out[0].numel() == 4


@cuda
def test_cuda_deferred_build_equals_build_and_records_errors():
    edge_index = torch.randint(0, 50, (2, 400), device="cuda")
    error = torch.full((1,), -1, device="cuda")
    a = Graph(edge_index, (50, 60), deferred_error=error)
    b = Graph(edge_index, (50, 60))
    for name in ("rowptr", "col", "eid", "colptr", "row", "csc2csr", "edge_map"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert a.max_degree_hints == (-1, -1) and error.item() == -1
    bounded = Graph(edge_index, (50, 60), deferred_error=error, degree_bounds=(400, -1))
    assert bounded.max_degree_hints == (400, -1)
    assert bounded.max_in_degree == b.max_in_degree  # a bound is a hint, not the measure
    bad = edge_index.clone()
    bad[1, 17] = 60
    c = Graph(bad, (50, 60), deferred_error=error)  # no raise: recorded, empty graph
    assert error.item() == 2 * 17 + 1
    assert int(c.rowptr.abs().sum()) == 0 and int(c.colptr.abs().sum()) == 0
    with pytest.raises(IndexError, match=r"edge_index\[1\] at edge 17"):
        raise_deferred_error(error)


@cuda
def test_cuda_captured_padded_step_equals_eager():
    """Five captured SAGE steps on padded batches equal five eager ones (same keys, same seeds)."""
    data = graph_data(num_nodes=300, num_edges=3000, seed=2).cuda()
    batches = [torch.randint(0, 300, (32,), device="cuda") for _ in range(5)]
    valid = torch.ones(32, dtype=torch.bool, device="cuda")
    results = []
    for capture in (False, True):
        sampler = PaddedNeighborSampler(data, [5, 3], batch_size=32, seed=1)
        model = sage_stack().cuda()
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01, capturable=capture)

        def loss_fn(model, seed, valid):
            s = sampler.sample(seed)
            out = model(s.gather(data.x), s.edge_index, s.node_capacity, s.edge_capacity,
                        s.block_graphs(2))
            labels = torch.where(valid, data.y.index_select(0, seed), -100)
            return F.cross_entropy(s.seed_rows(out), labels, ignore_index=-100)

        step = CapturedStep(model, optimizer, loss_fn, enabled=capture, volatile=(0, 1))
        losses = [float(step(seed, valid)) for seed in batches]
        sampler.check()
        assert step.captured == capture
        results.append((losses, [p.detach().clone() for p in model.parameters()]))
    (eager_losses, eager_params), (losses, params) = results
    assert losses == pytest.approx(eager_losses, rel=1e-5)
    for a, b in zip(eager_params, params):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
