"""Streams, CUDA graphs and determinism on a GPU (issue 8), for every op and every layer.

- Non-default streams: each op, its backward and the graph build run on a side stream whose inputs
  were produced on that stream behind a long GPU sleep; a kernel queued anywhere else would race
  with them. Results must equal the default stream's bit for bit, and the fp64 reference.
- CUDA graphs: a full training step (forward, backward and SGD-with-momentum step) of a 2-layer GCN
  and of a 2-layer GAT built from iognn.nn is captured once and replayed on new batches; every
  replay equals the same step run eagerly (loss and parameters).
- Determinism: the forward and backward of every op and layer give bit-identical outputs and
  gradients across runs: twice in this process (graphs rebuilt each time) and once in a fresh
  process (a digest of all results).
"""
import copy
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import iognn
import iognn.nn as io_nn

from op_cases import FEATURE_OPS, op_inputs, reference, run_op

pytestmark = pytest.mark.cuda
HERE = Path(__file__).resolve().parent


def hub_edges(num_nodes, num_edges, hub_degree, seed):
    """Random edges plus `hub_degree` more into node 0 (a row long enough for the heavy-row
    schedules)."""
    gen = torch.Generator().manual_seed(seed)
    rand = torch.randint(0, num_nodes, (2, num_edges), generator=gen)
    hub = torch.randint(0, num_nodes, (hub_degree,), generator=gen)
    return torch.cat([rand, torch.stack([hub, torch.zeros_like(hub)])], 1)


EDGE_INDEX = hub_edges(400, 6000, 5000, seed=0)
NUM_NODES = 400


def forward_backward(op, graph, inputs, grad):
    leaves = {k: t.detach().requires_grad_() for k, t in inputs.items()}
    out = run_op(op, graph, leaves)
    return [out] + list(torch.autograd.grad(out, list(leaves.values()), grad))


# ---- non-default streams ---------------------------------------------------------------------
@pytest.mark.parametrize("op", FEATURE_OPS + ["gcn_norm"])
def test_every_op_on_a_side_stream(op):
    host_graph = iognn.Graph(EDGE_INDEX, NUM_NODES)
    inputs = op_inputs(op, host_graph, torch.Generator().manual_seed(1))
    graph = iognn.Graph(EDGE_INDEX.cuda(), NUM_NODES)
    cuda_inputs = {k: v.cuda() for k, v in inputs.items()}
    out = run_op(op, graph, cuda_inputs)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(2)).cuda()
    expected = forward_backward(op, graph, cuda_inputs, grad)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # keeps the side stream busy while the calls are queued
        edge_index = EDGE_INDEX.cuda()
        side_inputs = {k: v.cuda() * 1 for k, v in inputs.items()}  # written on the side stream
        side_graph = iognn.Graph(edge_index, NUM_NODES)
        got = forward_backward(op, side_graph, side_inputs, grad * 1)
    side.synchronize()
    for a, b in zip(got, expected):
        assert torch.equal(a, b)
    exp = reference(op, EDGE_INDEX, NUM_NODES, inputs)
    scale = max(1.0, float(exp.abs().max()))
    torch.testing.assert_close(got[0].cpu().double(), exp, rtol=1e-4, atol=1e-4 * scale)


# ---- CUDA graph capture of a training step ---------------------------------------------------
class TwoLayers(torch.nn.Module):
    def __init__(self, kind, in_channels, hidden, classes):
        super().__init__()
        if kind == "gcn":
            self.conv1 = io_nn.GCNConv(in_channels, hidden)
            self.conv2 = io_nn.GCNConv(hidden, classes)
        else:
            self.conv1 = io_nn.GATConv(in_channels, hidden // 4, heads=4, edge_dim=2)
            self.conv2 = io_nn.GATConv(hidden, classes, heads=1, edge_dim=2)

    def forward(self, x, graph, edge_values):
        return self.conv2(F.relu(self.conv1(x, graph, edge_values)), graph, edge_values)


def batch(seed, num_nodes, in_channels, classes, num_edges, kind):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(num_nodes, in_channels, generator=gen)
    y = torch.randint(0, classes, (num_nodes,), generator=gen)
    values = (torch.rand(num_edges, generator=gen) + 0.5 if kind == "gcn" else
              torch.randn(num_edges, 2, generator=gen))
    return x.cuda(), y.cuda(), values.cuda()


@pytest.mark.parametrize("kind", ["gcn", "gat"])
def test_training_step_captured_in_a_cuda_graph(kind):
    in_channels, hidden, classes = 16, 32, 5
    # A prebuilt Graph: built (and validated, which synchronises) once, outside the capture.
    graph = iognn.Graph(EDGE_INDEX.cuda(), NUM_NODES)
    num_edges = graph.num_edges
    torch.manual_seed(0)
    model = TwoLayers(kind, in_channels, hidden, classes).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    static_x, static_y, static_values = batch(0, NUM_NODES, in_channels, classes, num_edges, kind)

    def step(m, opt, x, y, values):
        opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(m(x, graph, values), y)
        loss.backward()
        opt.step()
        return loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up: caches (self-loop graph, norms, plans), momentum
        for _ in range(3):
            step(model, optimizer, static_x, static_y, static_values)
    torch.cuda.current_stream().wait_stream(side)

    # The eager twin starts from the same parameters and optimizer state.
    twin = TwoLayers(kind, in_channels, hidden, classes).cuda()
    twin.load_state_dict(model.state_dict())
    twin_optimizer = torch.optim.SGD(twin.parameters(), lr=0.05, momentum=0.9)
    # A deep copy: load_state_dict would otherwise share the momentum buffers of `optimizer`.
    twin_optimizer.load_state_dict(copy.deepcopy(optimizer.state_dict()))

    cuda_graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(cuda_graph, stream=side):
        static_loss = step(model, optimizer, static_x, static_y, static_values)

    before = [p.detach().clone() for p in model.parameters()]
    for seed in range(1, 5):
        x, y, values = batch(seed, NUM_NODES, in_channels, classes, num_edges, kind)
        static_x.copy_(x)
        static_y.copy_(y)
        static_values.copy_(values)
        cuda_graph.replay()
        eager_loss = step(twin, twin_optimizer, x, y, values)
        torch.testing.assert_close(static_loss, eager_loss, rtol=1e-5, atol=1e-6)
        for (name, p), q in zip(model.named_parameters(), twin.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=lambda m: f"{name}: {m}")
    # The replays did train the model (the captured step is not a no-op).
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters()))


# ---- compute-sanitizer subset (scripts/gpu_check.sh): every op, its backward and the graph build
# on small graphs with an empty row, no nodes, a hub and bipartite sides ---------------------------
SMALL_GRAPHS = {
    "empty": (torch.empty(2, 0, dtype=torch.long), 5),
    "no_nodes": (torch.empty(2, 0, dtype=torch.long), 0),
    "hub": (hub_edges(40, 200, 300, seed=7), 40),
    "bipartite": (torch.stack([torch.arange(50) % 7, torch.arange(50) % 31]), (7, 31)),
}


@pytest.mark.sanitizer
@pytest.mark.parametrize("name", list(SMALL_GRAPHS))
def test_sanitizer_every_op_small(name):
    edge_index, size = SMALL_GRAPHS[name]
    num_dst = size[1] if isinstance(size, tuple) else size
    graph = iognn.Graph(edge_index.cuda(), size)
    host_graph = iognn.Graph(edge_index, size)
    for op in FEATURE_OPS + ["gcn_norm"]:
        inputs = op_inputs(op, host_graph, torch.Generator().manual_seed(8))
        exp = reference(op, edge_index, num_dst, inputs)
        out, *grads = forward_backward(op, graph, {k: v.cuda() for k, v in inputs.items()},
                                       torch.ones(exp.shape, device="cuda"))
        scale = max(1.0, float(exp.abs().max())) if exp.numel() else 1.0
        torch.testing.assert_close(out.cpu().double(), exp, rtol=1e-4, atol=1e-4 * scale)
        assert all(bool(g.isfinite().all()) for g in grads)


# ---- bitwise determinism -----------------------------------------------------------------------
def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 6))


LAYERS = {
    "GCNConv": (lambda: io_nn.GCNConv(8, 6), "weight"),
    "SAGEConv-mean": (lambda: io_nn.SAGEConv(8, 6), None),
    "SAGEConv-max": (lambda: io_nn.SAGEConv(8, 6, aggr="max"), None),
    "SAGEConv-multi": (lambda: io_nn.SAGEConv(8, 6, aggr=["mean", "max", "std"]), None),
    "GINConv": (lambda: io_nn.GINConv(_mlp(), train_eps=True), None),
    "GraphConv": (lambda: io_nn.GraphConv(8, 6), "weight"),
    "GATConv": (lambda: io_nn.GATConv(8, 3, heads=2, edge_dim=2), "attr"),
    "GATv2Conv": (lambda: io_nn.GATv2Conv(8, 3, heads=2, edge_dim=2), "attr"),
    "TransformerConv": (lambda: io_nn.TransformerConv(8, 3, heads=2, edge_dim=2), "attr"),
}
AGGRS = {
    "sum": io_nn.SumAggregation, "mean": io_nn.MeanAggregation, "max": io_nn.MaxAggregation,
    "std": io_nn.StdAggregation,
    "multi": lambda: io_nn.MultiAggregation(["sum", "min", "var"]),
}


def layer_results(name):
    """Output and every gradient (input, parameters) of one forward + backward on the GPU; the
    edge_index is a fresh CUDA tensor, so every run builds its graphs anew."""
    make, edge_kind = LAYERS[name]
    torch.manual_seed(3)
    layer = make().cuda()
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(NUM_NODES, 8, generator=gen).cuda().requires_grad_()
    num_edges = EDGE_INDEX.size(1)
    extra = []
    if edge_kind == "weight":
        extra = [(torch.rand(num_edges, generator=gen) + 0.5).cuda()]
    elif edge_kind == "attr":
        extra = [torch.randn(num_edges, 2, generator=gen).cuda()]
    out = layer(x, EDGE_INDEX.clone().cuda(), *extra)
    grad = torch.randn(out.shape, generator=gen).cuda()
    params = list(layer.parameters())
    return [out] + list(torch.autograd.grad(out, [x] + params, grad))


def aggr_results(name):
    gen = torch.Generator().manual_seed(5)
    index = torch.randint(0, 300, (20000,), generator=gen)
    index[:5000] = 7  # a heavy group
    x = torch.randn(20000, 8, generator=gen).cuda().requires_grad_()
    out = AGGRS[name]()(x, index.cuda(), dim_size=300)
    grad = torch.randn(out.shape, generator=gen).cuda()
    return [out] + list(torch.autograd.grad(out, [x], grad))


def op_results(op):
    gen = torch.Generator().manual_seed(6)
    graph = iognn.Graph(EDGE_INDEX.clone().cuda(), NUM_NODES)
    inputs = {k: v.cuda() for k, v in op_inputs(op, graph, gen).items()}
    out = run_op(op, graph, inputs)
    grad = torch.randn(out.shape, generator=gen).cuda()
    return forward_backward(op, graph, inputs, grad)


CASES = ([("op", op) for op in FEATURE_OPS + ["gcn_norm"]] + [("layer", n) for n in LAYERS] +
         [("aggr", n) for n in AGGRS])
RESULTS = {"op": op_results, "layer": layer_results, "aggr": aggr_results}


def digest(kind, name):
    h = hashlib.sha256()
    for t in RESULTS[kind](name):
        h.update(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


@pytest.mark.parametrize("kind,name", CASES, ids=[f"{k}-{n}" for k, n in CASES])
def test_bitwise_deterministic_in_process(kind, name):
    first, second = RESULTS[kind](name), RESULTS[kind](name)
    for a, b in zip(first, second):
        assert torch.equal(a, b)


def test_bitwise_deterministic_across_processes():
    here = {f"{k}-{n}": digest(k, n) for k, n in CASES}
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import test_streams_graphs_cuda "
            "as t; print(json.dumps({f'{k}-{n}': t.digest(k, n) for k, n in t.CASES}))")
    run = subprocess.run([sys.executable, "-c", code, str(HERE)], capture_output=True, text=True,
                         check=True)
    there = json.loads(run.stdout.strip().splitlines()[-1])
    assert there == here
