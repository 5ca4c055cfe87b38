"""iognn.nn layers under torch.autocast on the CPU (bf16 and fp16): they run in the reduced
precision, return the autocast dtype, and stay close (outputs and gradients) to fp32."""
import pytest
import torch

import iognn.nn as io_nn

N, E = 30, 120


def mlp():
    # smooth: a ReLU whose input is rounded across 0 changes a gradient entirely
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 5))


def layers():
    deg = torch.tensor([1, 2, 3])
    return {
        "gcn": (lambda: io_nn.GCNConv(6, 5), "w"),
        "sage": (lambda: io_nn.SAGEConv(6, 5, aggr=["mean", "max", "std"]), None),
        "gin": (lambda: io_nn.GINConv(mlp(), train_eps=True), None),
        "gine": (lambda: io_nn.GINEConv(mlp(), edge_dim=3), "e"),
        "graphconv": (lambda: io_nn.GraphConv(6, 5, aggr="max"), "w"),
        "gat": (lambda: io_nn.GATConv(6, 4, heads=2, edge_dim=3, residual=True), "e"),
        "gatv2": (lambda: io_nn.GATv2Conv(6, 4, heads=2, edge_dim=3), "e"),
        "transformer": (lambda: io_nn.TransformerConv(6, 4, heads=2, edge_dim=3, beta=True), "e"),
        "pna": (lambda: io_nn.PNAConv(6, 4, ["mean", "max"], ["identity", "linear"], deg=deg,
                                      edge_dim=3, towers=2), "e"),
    }


def relative_error(a, b):
    return float((a.float() - b).norm() / b.norm().clamp(min=1e-12))


@pytest.mark.parametrize("dtype,bound", [(torch.bfloat16, 0.05), (torch.float16, 0.01)],
                         ids=["bf16", "fp16"])  # relative error bound of the outputs
@pytest.mark.parametrize("name", list(layers()))
def test_autocast(name, dtype, bound):
    factory, extra = layers()[name]
    torch.manual_seed(0)
    layer = factory()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(N, 6, generator=gen, requires_grad=True)
    edge_index = torch.randint(0, N, (2, E), generator=gen)
    args = {"w": (torch.rand(E, generator=gen),), "e": (torch.randn(E, 3, generator=gen),),
            None: ()}[extra]
    params = [p for p in layer.parameters() if p.requires_grad]
    ref = layer(x, edge_index, *args)
    grad = torch.randn_like(ref)
    ref_grads = torch.autograd.grad(ref, [x] + params, grad)
    with torch.autocast("cpu", dtype=dtype):
        out = layer(x, edge_index, *args)
    assert out.dtype == dtype
    assert relative_error(out, ref) < bound
    grads = torch.autograd.grad(out, [x] + params, grad.to(dtype))
    for g, r in zip(grads, ref_grads):
        assert g.dtype == torch.float32  # parameters and inputs keep their dtype
        if r.norm() < 1e-5:  # a zero true gradient (TransformerConv's key bias): rounding only
            assert g.abs().max() < 1e-2
        else:  # loose: GINEConv's message ReLU flips where rounding crosses 0
            assert relative_error(g, r) < 0.1


def test_aggregation_under_autocast():
    x = torch.randn(40, 4)
    index = torch.randint(0, 6, (40,), generator=torch.Generator().manual_seed(0))
    ref = io_nn.MultiAggregation(["sum", "max", "std"])(x, index, dim_size=6)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = io_nn.MultiAggregation(["sum", "max", "std"])(x, index, dim_size=6)
    assert out.dtype == torch.bfloat16 and relative_error(out, ref) < 0.05
