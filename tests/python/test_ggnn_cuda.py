"""GatedGraphConv (against PyG's on the GPU) and TypedGatedGraphConv (against itself on the CPU,
in fp64) on CUDA: outputs and every gradient, on program graphs; bf16 under autocast runs."""
import pytest
import torch
import torch_geometric.nn as pyg_nn

import iognn.nn as io_nn
from iognn import program_graphs as pg

pytestmark = pytest.mark.cuda


def batch(num_edge_types=4):
    from torch_geometric.data import Batch
    data = Batch.from_data_list(pg.program_graphs(3, num_edge_types, 200, 800, seed=7))
    x = torch.randn(pg.VOCAB_SIZE, 24, generator=torch.Generator().manual_seed(0))[data.x]
    return x, data.edge_index, data.edge_type


def outputs_and_grads(layer, x, *args):
    x = x.detach().clone().requires_grad_()
    out = layer(x, *args)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(3)).to(out)
    params = list(layer.parameters())
    return [out] + list(torch.autograd.grad(out, [x] + params, grad))


@pytest.mark.parametrize("aggr", ["add", "mean", "max"])
def test_gated_graph_conv_cuda_matches_pyg(aggr):
    x, edge_index, _ = batch()
    torch.manual_seed(0)
    ours = io_nn.GatedGraphConv(32, 4, aggr=aggr).cuda()
    theirs = pyg_nn.GatedGraphConv(32, 4, aggr=aggr).cuda()
    theirs.load_state_dict(ours.state_dict())
    w = torch.rand(edge_index.size(1)).cuda()
    got = outputs_and_grads(ours, x.cuda(), edge_index.cuda(), w)
    want = outputs_and_grads(theirs, x.cuda(), edge_index.cuda(), w)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4 * max(1.0, float(b.abs().max())))


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_typed_ggnn_cuda_matches_cpu_fp64(reduce):
    x, edge_index, edge_type = batch()
    torch.manual_seed(0)
    layer = io_nn.TypedGatedGraphConv(32, 4, 8, reduce=reduce)
    with torch.no_grad():
        layer.bias.normal_(0, 0.1)
    want = outputs_and_grads(layer.double(), x.double(), edge_index, edge_type)
    got = outputs_and_grads(layer.float().cuda(), x.cuda(), edge_index.cuda(), edge_type.cuda())
    for a, b in zip(got, want):
        torch.testing.assert_close(a.double().cpu(), b, rtol=1e-4,
                                   atol=1e-4 * max(1.0, float(b.abs().max())))
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = layer(x.cuda(), edge_index.cuda(), edge_type.cuda())
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.float(), got[0], rtol=0.1, atol=0.1)
