"""The ops' output shapes under fake tensors come from their C++ Meta kernels (registered in
csrc/binding/*.cpp from the shape functions that size the real outputs), not from Python fakes:
no Python fake is registered for them, and under FakeTensorMode with symbolic sizes every output
has the shape and dtype of the real one. Graph construction keeps its Python fake
(iognn/_graph_compile.py: its edge count is data-dependent).
"""
import pytest
import torch
from torch._dynamo.source import ConstantSource
from torch._dynamo.utils import counters
from torch._library.simple_registry import singleton as python_registry
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

import iognn
from iognn.ops.propagate import propagate

META_OPS = ["propagate", "propagate_backward_x", "propagate_backward_weight", "segment_reduce",
            "segment_reduce_backward"] + [
    f"{variant}_attention{suffix}" for variant in ("gat", "gatv2", "transformer")
    for suffix in ("", "_backward")]


@pytest.mark.parametrize("name", META_OPS)
def test_shapes_come_from_the_cpp_meta_kernel(name):
    assert python_registry.find(f"iognn::{name}").fake_impl.kernel is None
    assert torch._C._dispatch_has_kernel_for_dispatch_key(f"iognn::{name}", "Meta")


def test_fake_tensors_run_the_cpp_meta_kernel():
    """A bad reduce list under FakeTensorMode raises the C++ binding's message: the Meta kernel ran,
    and sized the wide table by the C++ rule (edges // 0x7FFF) on a symbolic edge count."""
    g = graph()
    with FakeTensorMode(shape_env=ShapeEnv()) as mode:
        args = [mode.from_tensor(t, static_shapes=False)
                for t in (g.rowptr, g.col, g.colptr, g.row, g.csc2csr, torch.randn(13, 4))]
        wide = torch.ops.iognn.segment_reduce(*args, ["max"], None)[2]
        assert "//32767" in str(wide.shape[1]).replace(" ", "")
        with pytest.raises(ValueError, match="iognn::segment_reduce: reduce: unknown reduction"):
            torch.ops.iognn.segment_reduce(*args, ["median"], None)


def graph(num_nodes=13, num_edges=70, seed=0, index_dtype=None):
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=gen)
    return iognn.Graph(edge_index, num_nodes, index_dtype=index_dtype)


def assert_fake_outputs_match(op, args):
    """op(*args) under FakeTensorMode (every tensor size symbolic, the int arguments symbolic
    too) gives outputs of the real outputs' shapes and dtypes."""
    real = op(*args)
    shape_env = ShapeEnv()
    with FakeTensorMode(shape_env=shape_env) as mode:
        def fake(k, a):
            if isinstance(a, torch.Tensor):
                return mode.from_tensor(a, static_shapes=False)
            if isinstance(a, int) and not isinstance(a, bool):  # degree hints, dropout seed
                symbol = shape_env.create_symbol(a, ConstantSource(f"int_argument_{k}"))
                return shape_env.create_symintnode(symbol, hint=a)
            return a
        out = op(*[fake(k, a) for k, a in enumerate(args)])
    real = real if isinstance(real, tuple) else (real,)
    out = out if isinstance(out, tuple) else (out,)
    assert len(out) == len(real)
    assert any(isinstance(s, torch.SymInt) for t in out for s in t.shape)  # sized symbolically
    for got, exp in zip(out, real):
        assert [shape_env.size_hint(s.node.expr) if isinstance(s, torch.SymInt) else s
                for s in got.shape] == list(exp.shape)
        assert got.dtype == exp.dtype


def degree_hints(g):
    return list(g.max_degree_hints)


@pytest.mark.parametrize("index_dtype", [None, torch.int64])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_propagate_fake_shapes(index_dtype, weighted, dtype):
    g = graph(index_dtype=index_dtype)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(g.num_src_nodes, 6, generator=gen).to(dtype)
    w = torch.rand(g.num_edges, generator=gen).to(torch.float64 if dtype == torch.float64
                                                    else torch.float32) if weighted else None
    bias = torch.randn(6, generator=gen).to(dtype)
    ops = torch.ops.iognn
    csr = (g.rowptr, g.col, g.colptr, g.row, g.csc2csr)
    assert_fake_outputs_match(ops.propagate, [*csr, w, x, "mean", bias, *degree_hints(g)])
    grad_out = torch.randn(g.num_dst_nodes, 6, generator=gen).to(dtype)
    assert_fake_outputs_match(ops.propagate_backward_x,
                              [g.colptr, g.row, g.csc2csr, g.rowptr, w, grad_out, "sum",
                               degree_hints(g)[1]])
    assert_fake_outputs_match(ops.propagate_backward_weight,
                              [g.rowptr, g.col, grad_out, x, "sum", degree_hints(g)[0]])


# Every output of segment_reduce present or not: ties / wide (min, max), mean (var / std without
# the mean, or with it in fp16), plain (scale).
REDUCE_SETS = [["sum"], ["min"], ["max", "min"], ["var"], ["mean", "std"], ["min", "var", "max"],
               ["sum", "mean", "min", "max", "var", "std"]]


@pytest.mark.parametrize("reduces", REDUCE_SETS, ids=["-".join(r) for r in REDUCE_SETS])
@pytest.mark.parametrize("scaled", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_segment_reduce_fake_shapes(reduces, scaled, dtype):
    # Over 0x7FFF edges: the tie codes' wide table has a row.
    g = graph(num_nodes=40, num_edges=33000) if "min" in reduces else graph()
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(g.num_src_nodes, 3, generator=gen).to(dtype)
    scale = torch.rand(g.num_dst_nodes, 2, generator=gen).to(dtype) if scaled else None
    csr = (g.rowptr, g.col, g.colptr, g.row, g.csc2csr)
    ops = torch.ops.iognn
    args = [*csr, x, reduces, scale, *degree_hints(g)]
    assert_fake_outputs_match(ops.segment_reduce, args)
    out, ties, wide, mean, plain = ops.segment_reduce(*args)
    assert (wide.numel() > 0) == ("min" in reduces or "max" in reduces)
    results = plain if scaled else out
    assert_fake_outputs_match(ops.segment_reduce_backward,
                              [g.colptr, g.row, g.csc2csr, g.rowptr, x, results, ties, wide, mean,
                               torch.randn_like(out), reduces, scale, degree_hints(g)[1]])


@pytest.mark.parametrize("variant", ["gat", "gatv2", "transformer"])
@pytest.mark.parametrize("return_alpha", [False, True])
@pytest.mark.parametrize("with_edge_attr", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_attention_fake_shapes(variant, return_alpha, with_edge_attr, dtype):
    g = graph()
    gen = torch.Generator().manual_seed(3)
    n, E, H, C, De = g.num_src_nodes, g.num_edges, 2, 3, 4

    def rand(*shape):
        return torch.randn(*shape, generator=gen).to(dtype)

    if variant == "gat":
        # alpha_dst absent: the empty gradient of an absent input.
        nodes = [rand(n, H, C), rand(n, H), None if with_edge_attr else rand(n, H)]
        w_edge = rand(De, H)
    else:
        nodes = [rand(n, H, C), rand(n, H, C), rand(H, C) if variant == "gatv2" else rand(n, H, C)]
        w_edge = rand(H * C, De)
    edge = [rand(E, De), w_edge] if with_edge_attr else [None, None]
    graph_tensors = [g.rowptr, g.col, g.eid, g.colptr, g.row, g.csc2csr]
    scalars = [0.2, 0.25, 77]  # negative slope or scale, dropout, seed
    forward = getattr(torch.ops.iognn, f"{variant}_attention")
    backward = getattr(torch.ops.iognn, f"{variant}_attention_backward")
    assert_fake_outputs_match(forward, graph_tensors + nodes + edge + scalars + [return_alpha])
    _, lse, _ = forward(*graph_tensors, *nodes, *edge, *scalars, return_alpha)
    grad_alpha = rand(E, H) if return_alpha else None
    assert_fake_outputs_match(backward, graph_tensors + nodes + edge +
                              [lse, rand(n, H, C), grad_alpha] + scalars)


def test_eager_graphs_degree_hints_share_one_compiled_graph():
    """The degree hints of Graphs built outside torch.compile are SymInt arguments: graphs whose
    longest rows differ share one compiled graph (an int argument would be specialised)."""
    torch._dynamo.reset()
    counters.clear()

    def step(g, x):
        return propagate(g, x, None, "sum")

    compiled = torch.compile(step, fullgraph=True, dynamic=True, backend="aot_eager")
    hints = set()
    for seed, (n, e) in enumerate([(20, 60), (27, 95), (33, 41), (50, 400)]):
        g = graph(n, e, seed)
        hints.add(g.max_degree_hints)
        x = torch.randn(n, 8)
        torch.testing.assert_close(compiled(g, x), step(g, x))
    assert len(hints) > 1
    assert counters["stats"]["unique_graphs"] == 1
