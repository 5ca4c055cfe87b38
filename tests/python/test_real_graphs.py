"""Every op family on real graphs (cora, amazon_photo, tolokers) against PyG 2.8 on the CPU.

The topology is the real one (symmetrised, as PyG stores it); features are random so each graph can
be checked at a small width quickly. Each iognn layer gets the PyG layer's state_dict; outputs and the
gradients of the input and of every parameter must match.
"""
import pytest
import torch
import torch_geometric.nn as pyg_nn
from torch_geometric.nn import aggr as pyg_aggr

import iognn
import iognn.nn as io_nn
from iognn.ops import segment_reduce

from conftest import load_real_graph

GRAPHS = ["cora", "amazon_photo", "tolokers"]
F, HEADS, C = 8, 2, 4

LAYERS = {
    "gcn": lambda m: m.GCNConv(F, F),
    "sage": lambda m: m.SAGEConv(F, F),
    "gin": lambda m: m.GINConv(torch.nn.Linear(F, F)),
    "gat": lambda m: m.GATConv(F, C, heads=HEADS),
    "gatv2": lambda m: m.GATv2Conv(F, C, heads=HEADS),
    "transformer": lambda m: m.TransformerConv(F, C, heads=HEADS),
}


def outputs_and_grads(layer, x, edge_index):
    x = x.clone().requires_grad_()
    out = layer(x, edge_index)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    params = [p for p in layer.parameters()]
    grads = torch.autograd.grad(out, [x] + params, grad)
    return out, grads


@pytest.mark.data
@pytest.mark.parametrize("name", GRAPHS)
@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_layer_matches_pyg_on_real_graph(name, layer):
    edge_index, n = load_real_graph(name)
    torch.manual_seed(0)
    theirs = LAYERS[layer](pyg_nn)
    ours = LAYERS[layer](io_nn)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(n, F, generator=torch.Generator().manual_seed(2))
    out_t, grads_t = outputs_and_grads(theirs, x, edge_index)
    out_o, grads_o = outputs_and_grads(ours, x, edge_index)
    # Hubs of ~2,000 in-edges: fp32 summation order alone moves results by ~1e-5 relative.
    torch.testing.assert_close(out_o, out_t, rtol=1e-4, atol=1e-4)
    for a, b in zip(grads_o, grads_t):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-3)


@pytest.mark.data
@pytest.mark.parametrize("name", GRAPHS)
def test_fused_reductions_match_pyg_on_real_graph(name):
    edge_index, n = load_real_graph(name)
    g = iognn.Graph(edge_index, n)
    x = torch.randn(n, F, dtype=torch.float64, generator=torch.Generator().manual_seed(3),
                    requires_grad=True)
    reduces = ["sum", "mean", "min", "max", "var", "std"]
    ours = segment_reduce(g, x, reduces)
    multi = pyg_aggr.MultiAggregation(reduces)
    theirs = multi(x[edge_index[0]], edge_index[1], dim_size=n)
    torch.testing.assert_close(ours, theirs)
    grad = torch.randn(ours.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    a, = torch.autograd.grad(ours, x, grad)
    b, = torch.autograd.grad(theirs, x, grad)
    torch.testing.assert_close(a, b)
