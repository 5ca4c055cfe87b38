"""typed_propagate and RGCNConv / FastRGCNConv on CUDA against the CPU in fp64: every strategy,
both reductions, the message bias, gradients, one-hot inputs, low precision; bit-identical reruns
and no host synchronisation once the TypedGraph is built."""
import pytest
import torch

import iognn
import iognn.nn as inn
from iognn.ops import typed_propagate
from iognn.typed import STRATEGIES
from conftest import tolerance
from test_typed_propagate import typed_case

pytestmark = pytest.mark.cuda

CASES = ["empty", "random", "random_int32", "isolated", "loops_duplicates", "supernode",
         "bipartite", "bipartite_wide", "strided"]


def run(tg, x, weight, bias, reduce, strategy, grad):
    leaves = [t.detach().clone().requires_grad_() for t in (x, weight, bias)]
    out = typed_propagate(tg, leaves[0], leaves[1], reduce, leaves[2], strategy=strategy)
    return [out] + list(torch.autograd.grad(out, leaves, grad.to(out.dtype)))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("num_types", [1, 4, 16])
@pytest.mark.parametrize("case", CASES)
def test_cuda_matches_cpu(case, num_types, reduce, strategy, dtype):
    edge_index, edge_type, num_src, num_dst = typed_case(case, num_types)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(num_src, 24, generator=g, dtype=torch.float64).to(dtype)
    weight = torch.randn(num_types, 24, 40, generator=g, dtype=torch.float64).to(dtype)
    bias = torch.randn(num_types, 40, generator=g, dtype=torch.float64).to(dtype)
    grad = torch.randn(num_dst, 40, generator=g, dtype=torch.float64)
    cpu = iognn.TypedGraph(edge_index, edge_type, num_types, (num_src, num_dst))
    gpu = iognn.TypedGraph(edge_index.cuda(), edge_type.cuda(), num_types, (num_src, num_dst))
    want = run(cpu, x.double(), weight.double(), bias.double(), reduce, strategy, grad)
    got = run(gpu, x.cuda(), weight.cuda(), bias.cuda(), reduce, strategy, grad.cuda())
    rtol, atol = tolerance(dtype)
    for g_got, g_want in zip(got, want):
        assert g_got.dtype == dtype
        scale = max(1.0, float(g_want.detach().abs().max())) if g_want.numel() else 1.0
        torch.testing.assert_close(g_got.cpu().double(), g_want, rtol=rtol * 10,
                                   atol=atol * 10 * scale)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_cuda_bit_identical_reruns(strategy):
    edge_index, edge_type, num_src, num_dst = typed_case("supernode", 16)
    tg = iognn.TypedGraph(edge_index.cuda(), edge_type.cuda(), 16, num_src)
    x = torch.randn(num_src, 64, device="cuda")
    weight = torch.randn(16, 64, 96, device="cuda")
    grad = torch.randn(num_dst, 96, device="cuda")
    runs = [run(tg, x, weight, torch.zeros(16, 96, device="cuda"), "mean", strategy, grad)
            for _ in range(2)]
    for a, b in zip(*runs):
        assert torch.equal(a, b)


@pytest.mark.parametrize("layer", ["RGCNConv", "FastRGCNConv"])
@pytest.mark.parametrize("decomposition", [{}, dict(num_bases=3), dict(num_blocks=4)])
@pytest.mark.parametrize("aggr", ["mean", "add"])
def test_layers_cuda_match_cpu_without_sync(layer, decomposition, aggr):
    edge_index, edge_type, n, _ = typed_case("random", 8)
    torch.manual_seed(0)
    cpu_layer = getattr(inn, layer)(16, 32, 8, aggr=aggr, **decomposition).double()
    gpu_layer = getattr(inn, layer)(16, 32, 8, aggr=aggr, **decomposition).double().cuda()
    gpu_layer.load_state_dict(cpu_layer.state_dict())
    x = torch.randn(n, 16, dtype=torch.float64)
    ei, et = edge_index.cuda(), edge_type.cuda()
    out_gpu = gpu_layer(x.cuda(), ei, et)  # builds and caches the TypedGraph
    torch.testing.assert_close(out_gpu.cpu(), cpu_layer(x, edge_index, edge_type))
    x_gpu = x.cuda()  # (a copy from pageable host memory synchronises)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = gpu_layer(x_gpu, ei, et)
        out.square().sum().backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.testing.assert_close(out, out_gpu)


@pytest.mark.parametrize("layer", ["RGCNConv", "FastRGCNConv"])
def test_featureless_cuda(layer):
    edge_index, edge_type, n, _ = typed_case("random", 4)
    torch.manual_seed(0)
    cpu_layer = getattr(inn, layer)(n, 8, 4).double()
    gpu_layer = getattr(inn, layer)(n, 8, 4).double().cuda()
    gpu_layer.load_state_dict(cpu_layer.state_dict())
    ei, et = edge_index.cuda(), edge_type.cuda()
    for x in (None, torch.randperm(n)):
        want = cpu_layer(x, edge_index, edge_type)
        got = gpu_layer(None if x is None else x.cuda(), ei, et)
        torch.testing.assert_close(got.cpu(), want)
