"""torch.compile of iognn models: fullgraph (no graph break), dynamic shapes (graphs whose node and
edge counts change share one compiled graph), the same outputs and gradients as eager, and the
fake kernels of graph construction (opcheck).

The default backend here is ``aot_eager`` (Dynamo + AOTAutograd on fake tensors with symbolic
shapes: everything but Inductor's code generation). A cold Inductor compile of these models takes
minutes on 2 CPU cores; set IOGNN_TEST_INDUCTOR=1 to run the same tests with it too.
"""
import os

import pytest
import torch
import torch.nn.functional as F
from torch._dynamo.utils import counters

import iognn.nn as io_nn
from iognn._graph_compile import build_graph_symint

BACKENDS = ["aot_eager"] + (["inductor"] if os.environ.get("IOGNN_TEST_INDUCTOR") else [])
BATCHES = [(20, 60), (27, 95), (33, 41)]  # (nodes, edges): every batch has other sizes


class TwoLayer(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        if kind == "gcn":
            self.conv1, self.conv2 = io_nn.GCNConv(8, 16), io_nn.GCNConv(16, 4)
        elif kind == "multi":
            self.conv1 = io_nn.SAGEConv(8, 16, aggr=["min", "max", "mean", "std"])
            self.conv2 = io_nn.SAGEConv(16, 4)
        elif kind == "graphconv":  # the fused propagate_linear with a root term and edge sums
            self.conv1 = io_nn.GraphConv(8, 16)
            self.conv2 = io_nn.GraphConv(16, 4, aggr="mean")
        elif kind == "stacked":  # projections stacked into one GEMM (nn.linear.stacked_linears)
            self.conv1 = io_nn.GATv2Conv(8, 4, heads=4, residual=True)
            self.conv2 = io_nn.TransformerConv(16, 4, heads=1)
        else:
            self.conv1 = io_nn.GATConv(8, 4, heads=4)
            self.conv2 = io_nn.GATConv(16, 4, heads=1)

    def forward(self, x, edge_index):
        return self.conv2(F.relu(self.conv1(x, edge_index)), edge_index)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["gcn", "gat", "multi", "stacked", "graphconv"])
def test_two_layer_model_compiles_once_for_all_batch_sizes(kind, backend, device):
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = TwoLayer(kind).to(device)
    compiled = torch.compile(model, fullgraph=True, dynamic=True, backend=backend)
    params = list(model.parameters())
    gen = torch.Generator().manual_seed(1)
    for num_nodes, num_edges in BATCHES:
        x = torch.randn(num_nodes, 8, generator=gen).to(device).requires_grad_()
        edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=gen).to(device)
        out, ref = compiled(x, edge_index), model(x, edge_index)
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
        grad = torch.randn_like(out)
        got = torch.autograd.grad(out, [x] + params, grad)
        exp = torch.autograd.grad(ref, [x] + params, grad)
        for a, b in zip(got, exp):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert counters["stats"]["unique_graphs"] == 1  # one frame compiled: no recompilation
    assert not counters["graph_break"]


def iognn_op_names(run) -> list:
    """Names of the iognn operators ``run()`` calls (CPU profiler events: every op dispatched,
    whatever device it runs on)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        run()
    return [e.name for e in prof.events() if e.name.startswith("iognn::")]


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
@pytest.mark.parametrize("kind", ["gcn", "gat", "multi"])
def test_compiled_training_step_builds_no_graph_after_warm_up(kind, device):
    """A full-graph training loop: the first compiled step builds the Graph and stores it on the
    edge_index, the second compiles the variant that reads it as an input; from then on no step
    builds a Graph, and every step equals eager."""
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = TwoLayer(kind).to(device)
    twin = TwoLayer(kind).to(device)
    twin.load_state_dict(model.state_dict())
    compiled = torch.compile(model, fullgraph=True, dynamic=True, backend=BACKENDS[0])
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(40, 8, generator=gen).to(device)
    edge_index = torch.randint(0, 40, (2, 160), generator=gen).to(device)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, twin)]

    def step(module, optimizer):
        optimizer.zero_grad()
        loss = module(x, edge_index).square().mean()
        loss.backward()
        optimizer.step()
        return loss.detach()

    for _ in range(2):
        torch.testing.assert_close(step(compiled, optimizers[0]), step(twin, optimizers[1]))
    names = iognn_op_names(lambda: [step(compiled, optimizers[0]) for _ in range(3)])
    assert names and not any("build_graph" in n for n in names)
    for _ in range(3):
        step(twin, optimizers[1])
    for a, b in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert counters["stats"]["unique_graphs"] <= 2 and not counters["graph_break"]


@pytest.mark.parametrize("self_loops", [0, 1, 2])
def test_graph_construction_fake_kernels(self_loops):
    edge_index = torch.randint(0, 10, (2, 30), generator=torch.Generator().manual_seed(2))
    edge_index[:, :4] = torch.arange(4)  # some self-loops
    for op in (torch.ops.iognn.build_graph.default, build_graph_symint._opoverload):
        torch.library.opcheck(op, (edge_index, 10, 12, self_loops, False))
        torch.library.opcheck(op, (edge_index.to(torch.int32), 12, 10, self_loops, True))
