"""``iognn::gat_projection`` (GATConv's features and both attention logits from one GEMM, one
autograd node) against the separate ops it replaces, on the CPU and on CUDA: values, gradients,
gradcheck, opcheck, errors, and GATConv's use of it."""
import pytest
import torch

from iognn.nn import GATConv

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]


def composition(x, w, att_src, att_dst):
    """The separate ops: h = x W^T, alpha_k = (h.view(N, H, C) * att_k).sum(-1)."""
    H, C = att_src.shape[1:]
    h = x @ w.T
    hv = h.view(-1, H, C)
    return torch.cat([h, (hv * att_src).sum(-1), (hv * att_dst).sum(-1)], dim=1)


def leaves(device, dtype, n=37, f=11, heads=3, channels=5, seed=0):
    gen = torch.Generator().manual_seed(seed)

    def leaf(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).to(device, dtype)\
            .requires_grad_()
    return (leaf(n, f), leaf(heads * channels, f), leaf(1, heads, channels),
            leaf(1, heads, channels))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("shape", [(37, 11, 3, 5), (0, 4, 2, 2), (9, 16, 1, 8), (5, 3, 8, 1)],
                         ids=["multi_head", "no_nodes", "one_head", "one_channel"])
def test_matches_the_separate_ops(device, dtype, shape):
    n, f, heads, channels = shape
    args = leaves(device, dtype, n, f, heads, channels)
    rows = torch.ops.iognn.gat_projection(*args)
    ref = composition(*args)
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rows, ref, **tol)
    grad = torch.randn_like(ref)
    got = torch.autograd.grad(rows, args, grad, allow_unused=True)
    exp = torch.autograd.grad(ref, args, grad, allow_unused=True)
    for a, b, t in zip(got, exp, args):
        torch.testing.assert_close(a, torch.zeros_like(t) if b is None else b, **tol)


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_and_partial_gradients(device):
    args = leaves(device, torch.float64, n=6, f=4, heads=2, channels=3)
    torch.autograd.gradcheck(torch.ops.iognn.gat_projection, args)
    x, w, a_s, a_d = args
    rows = torch.ops.iognn.gat_projection(x.detach(), w, a_s.detach(), a_d)
    gw, gd = torch.autograd.grad(rows.sum(), (w, a_d))
    ew, ed = torch.autograd.grad(composition(x.detach(), w, a_s.detach(), a_d).sum(), (w, a_d))
    torch.testing.assert_close(gw, ew)
    torch.testing.assert_close(gd, ed)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for shape in ((12, 7, 2, 4), (0, 3, 1, 2)):
        torch.library.opcheck(torch.ops.iognn.gat_projection.default,
                              leaves(device, torch.float32, *shape))


def test_bad_arguments_name_themselves():
    x, w, a_s, a_d = (t.detach() for t in leaves("cpu", torch.float32))
    with pytest.raises(ValueError, match="att_src must be 3-D"):
        torch.ops.iognn.gat_projection(x, w, a_s[0], a_d)
    with pytest.raises(ValueError, match="att_dst must have the shape of att_src"):
        torch.ops.iognn.gat_projection(x, w, a_s, a_d[:, :2])
    with pytest.raises(ValueError, match="weight must have heads \\* channels = 15 rows"):
        torch.ops.iognn.gat_projection(x, w[:14], a_s, a_d)
    with pytest.raises(RuntimeError, match="weight has dtype Double but att_src has dtype Float"):
        torch.ops.iognn.gat_projection(x, w.double(), a_s, a_d)
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        torch.ops.iognn.gat_projection(x[:, :5], w, a_s, a_d)
    with pytest.raises(ValueError, match="x must be 2-D"):
        torch.ops.iognn.gat_projection(x[0], w, a_s, a_d)


def nodes(out):
    """Names of every autograd node behind out."""
    seen, stack = set(), [out.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        stack.extend(f for f, _ in fn.next_functions)
    return {fn.name() for fn in seen}


@pytest.mark.parametrize("device", DEVICES)
def test_gat_conv_projects_with_one_node_outside_autocast(device):
    ei = torch.randint(0, 30, (2, 120), generator=torch.Generator().manual_seed(1)).to(device)
    x = torch.randn(30, 16, device=device, requires_grad=True)
    conv = GATConv(16, 8, heads=4).to(device)
    names = nodes(conv(x, ei))
    assert any("GatProjectionFunction" in n for n in names)
    assert not any(n.startswith(("MulBackward", "SumBackward", "MmBackward")) for n in names)
    with torch.autocast(device, dtype=torch.bfloat16):  # the GEMM in bf16, the transform in fp32
        names = nodes(conv(x, ei))
    assert not any("GatProjectionFunction" in n for n in names)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_against_fp64(device, dtype):
    exact = leaves(device, torch.float64, n=200, f=32, heads=4, channels=8)
    low = [t.detach().to(dtype).requires_grad_() for t in exact]
    rows, ref = torch.ops.iognn.gat_projection(*low), composition(*exact)
    assert rows.dtype == dtype
    bound = 4e-3 if dtype == torch.float16 else 3e-2  # relative to the norm: rounded sums
    assert float((rows.double() - ref).norm() / ref.norm()) < bound
    grad = torch.randn_like(ref)
    for a, b in zip(torch.autograd.grad(rows, low, grad.to(dtype)),
                    torch.autograd.grad(ref, exact, grad)):
        assert a.dtype == dtype
        assert float((a.double() - b).norm() / b.norm()) < bound
