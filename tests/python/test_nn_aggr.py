"""iognn.nn.aggr against torch_geometric.nn.aggr (CPU, fp32): PyG's call signature (index, ptr,
dim_size, dim, multi-dimensional inputs), every basic reduction, MultiAggregation (fused and
combine modes), DegreeScalerAggregation, outputs and input/parameter gradients, errors."""
import pytest
import torch
import torch_geometric.nn.aggr as pyg_aggr

import iognn.nn.aggr as io_aggr
from iognn.nn.aggr.resolver import from_pyg_aggregation

from conftest import GRAPH_CASES, sizes, tolerance

RTOL, ATOL = tolerance(torch.float32)
BASIC = ["SumAggregation", "MeanAggregation", "MinAggregation", "MaxAggregation",
         "VarAggregation", "StdAggregation"]


def messages_of(case, channels=5, seed=0, tied=False):
    """(x [E, F] messages, index = destination of each edge, dim_size) of a conftest graph;
    tied: small integers (0 included) that tie under min / max in most groups."""
    _, edge_index, size = case
    gen = torch.Generator().manual_seed(seed)
    shape = (edge_index.size(1), channels)
    x = (torch.randint(-2, 3, shape, generator=gen).float() if tied
         else torch.randn(shape, generator=gen))
    return x.requires_grad_(), edge_index[1].long(), sizes(size)[1]


def assert_same(ours, theirs, call, inputs, tol=(RTOL, ATOL)):
    """Same output and the same gradient for each input and parameter."""
    out, ref = call(ours), call(theirs)
    torch.testing.assert_close(out, ref, rtol=tol[0], atol=tol[1])
    if out.numel() == 0:
        return
    grad = torch.randn_like(out)
    params_a = [p for _, p in sorted(ours.named_parameters())]
    params_b = [p for _, p in sorted(theirs.named_parameters())]
    got = torch.autograd.grad(out, list(inputs) + params_a, grad, allow_unused=True)
    exp = torch.autograd.grad(ref, list(inputs) + params_b, grad, allow_unused=True)
    for a, b, t in zip(got, exp, list(inputs) + params_a):
        a = torch.zeros_like(t) if a is None else a
        b = torch.zeros_like(t) if b is None else b
        torch.testing.assert_close(a, b, rtol=tol[0], atol=tol[1])


def case_tol(case):
    return (1e-3, 1e-3) if case[0] == "supernode" else (RTOL, ATOL)


@pytest.mark.parametrize("case", GRAPH_CASES, ids=[c[0] for c in GRAPH_CASES])
@pytest.mark.parametrize("name", BASIC)
def test_basic_aggregations_match_pyg(case, name):
    x, index, dim_size = messages_of(case)
    ours, theirs = getattr(io_aggr, name)(), getattr(pyg_aggr, name)()
    assert_same(ours, theirs, lambda m: m(x, index, dim_size=dim_size), (x,), case_tol(case))


TIE_AGGRS = {
    "min": lambda pkg: pkg.MinAggregation(),
    "max": lambda pkg: pkg.MaxAggregation(),
    "multi": lambda pkg: pkg.MultiAggregation(["min", "max", "mean", "std"]),
    "degree_scaler": lambda pkg: pkg.DegreeScalerAggregation(
        ["mean", "min", "max", "std"], ["identity", "amplification"], torch.tensor([3, 5, 2, 1])),
}


@pytest.mark.parametrize("case", GRAPH_CASES, ids=[c[0] for c in GRAPH_CASES])
@pytest.mark.parametrize("aggr", list(TIE_AGGRS))
def test_min_max_ties_match_pyg(case, aggr):
    # Tied messages: the gradient is split among them (and the zero fill) exactly as in PyG.
    x, index, dim_size = messages_of(case, tied=True)
    ours, theirs = TIE_AGGRS[aggr](io_aggr), TIE_AGGRS[aggr](pyg_aggr)
    ours.load_state_dict(theirs.state_dict())
    assert_same(ours, theirs, lambda m: m(x, index, dim_size=dim_size), (x,), case_tol(case))


@pytest.mark.parametrize("name", ["VarAggregation", "StdAggregation"])
def test_semi_grad(name):
    x, index, dim_size = messages_of(GRAPH_CASES[2])
    ours = getattr(io_aggr, name)(semi_grad=True)
    theirs = getattr(pyg_aggr, name)(semi_grad=True)
    assert_same(ours, theirs, lambda m: m(x, index, dim_size=dim_size), (x,))


def test_ptr_index_none_and_dim_forms():
    gen = torch.Generator().manual_seed(3)
    index = torch.sort(torch.randint(0, 6, (40,), generator=gen)).values
    counts = torch.bincount(index, minlength=6)
    ptr = torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)])
    x = torch.randn(40, 4, generator=gen).requires_grad_()
    ours, theirs = io_aggr.MaxAggregation(), pyg_aggr.MaxAggregation()
    assert_same(ours, theirs, lambda m: m(x, ptr=ptr), (x,))                   # ptr only
    assert_same(ours, theirs, lambda m: m(x, index), (x,))                      # dim_size inferred
    assert_same(ours, theirs, lambda m: m(x), (x,))                             # one group
    assert_same(ours, theirs, lambda m: m(x, index, dim_size=8), (x,))         # empty groups
    # int32 indices give the same result (PyG's own int32 max backward returns NaN: not compared)
    torch.testing.assert_close(ours(x, index.to(torch.int32), dim_size=8), ours(x, index, None, 8))
    # a batch dimension in front (dim=-2) and the aggregated dimension first of a 3-D tensor
    xb = torch.randn(3, 40, 4, generator=gen).requires_grad_()
    assert_same(ours, theirs, lambda m: m(xb, index, dim_size=6, dim=-2), (xb,))
    x3 = torch.randn(40, 2, 3, generator=gen).requires_grad_()
    multi = ["mean", "std", "min"]
    assert_same(io_aggr.MultiAggregation(multi), pyg_aggr.MultiAggregation(multi),
                lambda m: m(x3, index, dim_size=6, dim=0), (x3,))


def test_aggregation_graph_is_cached_per_index_tensor():
    x, index, dim_size = messages_of(GRAPH_CASES[2])
    aggr = io_aggr.SumAggregation()
    from iognn.nn.aggr.base import message_index_graph
    first = message_index_graph(x.size(0), index, None, dim_size, x.device)
    assert message_index_graph(x.size(0), index, None, dim_size, x.device) is first
    index[0] = (index[0] + 1) % dim_size  # in place: the next call rebuilds
    assert message_index_graph(x.size(0), index, None, dim_size, x.device) is not first
    torch.testing.assert_close(aggr(x, index, dim_size=dim_size),
                               pyg_aggr.SumAggregation()(x, index, dim_size=dim_size))


MULTI = [
    (["sum", "mean", "min", "max", "var", "std"], {}),
    (["max", "sum"], {}),
    (["std", io_aggr.VarAggregation(semi_grad=True), "mul"], {}),  # unfused + PyG-only members
    (["mean", "max"], {"mode": "proj", "mode_kwargs": {"in_channels": 5, "out_channels": 3}}),
    (["sum", "max", "min"], {"mode": "max"}),
    (["mean", "std"], {"mode": "logsumexp"}),
]


@pytest.mark.parametrize("case", [c for c in GRAPH_CASES if c[0] in
                                  ("empty", "random", "isolated", "loops_duplicates",
                                   "bipartite_wide")], ids=lambda c: c[0])
@pytest.mark.parametrize("aggrs,kwargs", MULTI, ids=[str(i) for i in range(len(MULTI))])
def test_multi_aggregation_matches_pyg(case, aggrs, kwargs):
    x, index, dim_size = messages_of(case)
    pyg_members = [pyg_aggr.VarAggregation(semi_grad=True)
                   if isinstance(a, io_aggr.VarAggregation) else a for a in aggrs]
    torch.manual_seed(0)
    ours = io_aggr.MultiAggregation(aggrs, **kwargs)
    torch.manual_seed(0)
    theirs = pyg_aggr.MultiAggregation(pyg_members, **kwargs)
    ours.load_state_dict(theirs.state_dict())
    assert_same(ours, theirs, lambda m: m(x, index, dim_size=dim_size), (x,))
    assert list(ours.state_dict()) == list(theirs.state_dict())


def test_multi_aggregation_fuses_into_one_segment_pass(monkeypatch):
    from iognn.nn.aggr import multi
    calls = []
    original = multi.segment_reduce
    monkeypatch.setattr(multi, "segment_reduce",
                        lambda g, x, names: calls.append(list(names)) or original(g, x, names))
    x, index, dim_size = messages_of(GRAPH_CASES[2])
    out = io_aggr.MultiAggregation(["sum", "mean", "max", "mean", "std"])(x, index,
                                                                          dim_size=dim_size)
    assert calls == [["sum", "mean", "max", "std"]]  # a repeated reduction is computed once
    # (PyG's FusedAggregation returns the raw sum for the first of two 'mean's: not compared)
    mean = pyg_aggr.MeanAggregation()(x, index, dim_size=dim_size)
    torch.testing.assert_close(out[:, 5:10], mean)
    torch.testing.assert_close(out[:, 15:20], mean)


# (a lone name with a list of scalers fails in PyG, which wraps the scalers in another list)
@pytest.mark.parametrize("aggr", [["mean"], ["mean", "min", "max", "std"]])
@pytest.mark.parametrize("train_norm", [False, True])
def test_degree_scaler_matches_pyg(aggr, train_norm):
    x, index, dim_size = messages_of(GRAPH_CASES[4])  # isolated nodes: degree 0
    deg = torch.tensor([3, 5, 2, 1])
    scalers = ["identity", "amplification", "attenuation", "linear", "inverse_linear"]
    ours = io_aggr.DegreeScalerAggregation(aggr, scalers, deg, train_norm)
    theirs = pyg_aggr.DegreeScalerAggregation(aggr, scalers, deg, train_norm)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict(theirs.state_dict())
    assert_same(ours, theirs, lambda m: m(x, index, dim_size=dim_size), (x,))


SCALERS = ["identity", "amplification", "attenuation", "linear", "inverse_linear"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("aggr", ["max", ["mean", "min", "max", "std"]], ids=["max", "pna"])
@pytest.mark.parametrize("shape", [(5,), (2, 3)], ids=["2d", "3d"])
def test_degree_scaler_runs_in_the_reduction_kernel(monkeypatch, dtype, aggr, shape):
    """One segment_reduce call with the scalers, equal (bitwise) to reducing then scaling."""
    from iognn.nn.aggr import scaler
    x, index, dim_size = messages_of(GRAPH_CASES[4])  # isolated nodes: degree 0
    x = torch.randn((x.size(0),) + shape, generator=torch.Generator().manual_seed(3)).to(dtype)
    module = io_aggr.DegreeScalerAggregation(aggr, SCALERS, torch.tensor([3, 5, 2, 1]))
    calls = []
    original = scaler.segment_reduce
    monkeypatch.setattr(scaler, "segment_reduce", lambda g, x, names, scale: calls.append(
        (list(names), scale.shape)) or original(g, x, names, scale))
    fused = module(x, index, dim_size=dim_size, dim=0)
    names = [aggr] if isinstance(aggr, str) else aggr
    assert calls == [(names, (dim_size, len(SCALERS)))]
    monkeypatch.setattr(module.aggr, "fused_reduces", lambda: None)  # the reduce-then-scale path
    unfused = module(x, index, dim_size=dim_size, dim=0)
    assert len(calls) == 1 and fused.shape == unfused.shape
    assert fused.shape == (dim_size,) + shape[:-1] + (len(SCALERS) * len(names) * shape[-1],)
    assert torch.equal(fused, unfused)


def test_degree_scaler_unfusable_aggregations_scale_after():
    """semi_grad std, a 'sum'-combined MultiAggregation and PyG-only children take the unfused
    path and still match PyG."""
    x, index, dim_size = messages_of(GRAPH_CASES[2])
    deg = torch.tensor([1, 4, 2])
    for make in (lambda pkg: pkg.StdAggregation(semi_grad=True),
                 lambda pkg: pkg.MultiAggregation(["min", "max"], mode="sum"),
                 lambda pkg: pkg.MultiAggregation(["mean", pyg_aggr.SoftmaxAggregation()])):
        ours = io_aggr.DegreeScalerAggregation(make(io_aggr), SCALERS, deg)
        assert ours.aggr.fused_reduces() is None
        theirs = pyg_aggr.DegreeScalerAggregation(make(pyg_aggr), SCALERS, deg)
        ours.load_state_dict(theirs.state_dict())
        assert_same(ours, theirs, lambda m: m(x, index, dim_size=dim_size), (x,))


def test_pyg_instances_convert_and_share_parameters():
    theirs = pyg_aggr.MultiAggregation(
        ["mean", pyg_aggr.StdAggregation(semi_grad=True), "softmax"], mode="proj",
        mode_kwargs={"in_channels": 4, "out_channels": 2})
    ours = from_pyg_aggregation(theirs)
    assert isinstance(ours, io_aggr.MultiAggregation)
    assert isinstance(ours.aggrs[1], io_aggr.StdAggregation) and ours.aggrs[1].semi_grad
    assert type(ours.aggrs[2]) is pyg_aggr.SoftmaxAggregation  # no iognn kernel: PyG's module
    assert ours.lin.weight is theirs.lin.weight and ours.lin.bias is theirs.lin.bias
    x = torch.randn(12, 4, requires_grad=True)
    index = torch.tensor([0, 0, 1, 2, 2, 2, 3, 3, 0, 1, 1, 3])
    assert_same(ours, theirs, lambda m: m(x, index, dim_size=5), (x,))


def test_bad_arguments_raise_clear_errors():
    aggr = io_aggr.MeanAggregation()
    x = torch.randn(4, 3)
    with pytest.raises(ValueError, match="dimension"):
        aggr(x, torch.zeros(4, dtype=torch.long), dim=2)
    with pytest.raises(ValueError, match="index has 3 entries"):
        aggr(x, torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="invalid 'dim_size'"):  # PyG's error
        aggr(x, torch.tensor([0, 1, 5, 1]), dim_size=3)
    with pytest.raises(TypeError, match="index"):
        aggr(x, torch.zeros(4))
    with pytest.raises(ValueError, match="dim_size"):
        aggr(x, ptr=torch.tensor([0, 2, 4]), dim_size=3)
    with pytest.raises(ValueError, match="attn"):
        io_aggr.MultiAggregation(["mean", "max"], mode="attn")
    with pytest.raises(ValueError, match="scaler"):
        io_aggr.DegreeScalerAggregation("mean", "cubic", torch.tensor([1, 2]))
