"""RGATConv on CUDA against the CPU in fp64 (outputs, attention weights, gradients) for both
strategies, both mechanisms and modes, every mod, the graph edge cases; fp32 within tolerance;
bit-identical reruns (no float atomics)."""
import pytest
import torch

import iognn.nn as inn
from iognn.nn.conv.rgat_conv import STRATEGIES
from test_typed_propagate import typed_case

pytestmark = pytest.mark.cuda

MODES = ["additive-self-attention", "multiplicative-self-attention"]
MECHANISMS = ["across-relation", "within-relation"]
MODS = [None, "additive", "scaled", "f-additive", "f-scaled"]
CASES = ["empty", "random", "random_int32", "isolated", "loops_duplicates", "supernode",
         "strided"]


def layer(num_types, mode, mechanism, mod, dtype, **kwargs):
    torch.manual_seed(0)
    dim = 2 if mode == MODES[1] else 1
    conv = inn.RGATConv(6, 4, num_types, attention_mode=mode, attention_mechanism=mechanism,
                        mod=mod, heads=3, dim=dim, edge_dim=2, **kwargs)
    with torch.no_grad():
        for p in conv.parameters():
            p.normal_(0, 0.5)
    return conv.to(dtype)


def run(conv, x, edge_index, edge_type, edge_attr, grad, strategy):
    conv.strategy = strategy
    x, edge_attr = (t.detach().clone().requires_grad_() for t in (x, edge_attr))
    out, (_, alpha) = conv(x, edge_index, edge_type, edge_attr, return_attention_weights=True)
    inputs = [x, edge_attr] + list(conv.parameters())
    grads = torch.autograd.grad(out, inputs, grad.to(out), allow_unused=True)
    return [out, alpha] + [torch.zeros_like(t) if g is None else g
                           for g, t in zip(grads, inputs)]


def inputs(case, num_types):
    edge_index, edge_type, num_nodes, _ = typed_case(case, num_types)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(num_nodes, 6, generator=g, dtype=torch.float64)
    edge_attr = torch.randn(edge_index.size(1), 2, generator=g, dtype=torch.float64)
    return edge_index, edge_type, x, edge_attr


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("mod", MODS)
@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("num_types", [1, 4, 16])
@pytest.mark.parametrize("case", CASES)
def test_cuda_matches_cpu(case, num_types, mode, mechanism, mod, strategy):
    edge_index, edge_type, x, edge_attr = inputs(case, num_types)
    conv = layer(num_types, mode, mechanism, mod, torch.float64)
    grad = torch.randn(x.size(0), conv.bias.numel(), generator=torch.Generator().manual_seed(2),
                       dtype=torch.float64)
    want = run(conv, x, edge_index, edge_type, edge_attr, grad, strategy)
    conv.cuda()
    got = run(conv, x.cuda(), edge_index.cuda(), edge_type.cuda(), edge_attr.cuda(), grad.cuda(),
              strategy)
    for g_got, g_want in zip(got, want):
        assert g_got.is_cuda
        torch.testing.assert_close(g_got.cpu(), g_want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_cuda_fp32(strategy):
    edge_index, edge_type, x, edge_attr = inputs("supernode", 4)
    conv = layer(4, MODES[1], MECHANISMS[1], "scaled", torch.float64)
    grad = torch.randn(x.size(0), conv.bias.numel(), generator=torch.Generator().manual_seed(2),
                       dtype=torch.float64)
    want = run(conv, x, edge_index, edge_type, edge_attr, grad, strategy)
    conv.float().cuda()
    got = run(conv, x.float().cuda(), edge_index.cuda(), edge_type.cuda(),
              edge_attr.float().cuda(), grad.cuda(), strategy)
    for g_got, g_want in zip(got, want):
        assert g_got.dtype == torch.float32
        scale = max(1.0, float(g_want.abs().max())) if g_want.numel() else 1.0
        torch.testing.assert_close(g_got.cpu().double(), g_want, rtol=1e-3, atol=1e-4 * scale)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_cuda_bitwise_reruns(mechanism, strategy):
    edge_index, edge_type, x, edge_attr = inputs("supernode", 16)
    conv = layer(16, MODES[1], mechanism, "additive", torch.float32).cuda()
    args = (x.float().cuda(), edge_index.cuda(), edge_type.cuda(), edge_attr.float().cuda(),
            torch.ones(x.size(0), conv.bias.numel(), device="cuda"), strategy)
    first, second = run(conv, *args), run(conv, *args)
    for a, b in zip(first, second):
        assert torch.equal(a, b)


def test_cuda_dropout_trains():
    edge_index, edge_type, x, edge_attr = inputs("random", 4)
    conv = layer(4, MODES[0], MECHANISMS[0], None, torch.float32, dropout=0.5).cuda().train()
    out = conv(x.float().cuda(), edge_index.cuda(), edge_type.cuda(), edge_attr.float().cuda())
    out.sum().backward()
    assert torch.isfinite(out).all() and conv.weight.grad is not None
