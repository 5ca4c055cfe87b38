"""iognn.nn.to_hetero against torch_geometric.nn.to_hetero: on models of PyG's layers it is PyG's
model; on models of iognn layers it gives PyG's outputs, gradients and state_dict, with the
SAGEConv relations into one node type run as one typed propagate where that is valid (sum and
mean across relations, equal widths and settings) and everything else left as PyG makes it."""
from __future__ import annotations

import copy
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch_geometric.nn as pnn

import iognn.nn as inn
from iognn.nn import hetero_conv

# PyG's transformer warns about "venue", which no relation ends at (on purpose here).
pytestmark = pytest.mark.filterwarnings("ignore:There exist node types")

# "one": three node types (venue has no in-edges: a single layer, as PyG's transformer needs
# every node type a later layer reads to be a destination), five edge types; "two": two node
# types, four edge types, two layers.
GRAPHS = {
    "one": ({"paper": (9, 6), "author": (7, 6), "venue": (3, 4)},
            [("author", "writes", "paper"), ("paper", "cites", "paper"),
             ("venue", "hosts", "paper"), ("paper", "written_by", "author"),
             ("author", "knows", "author")]),
    "two": ({"paper": (9, 6), "author": (7, 6)},
            [("author", "writes", "paper"), ("paper", "cites", "paper"),
             ("paper", "written_by", "author"), ("author", "knows", "author")]),
}
# typed propagates per forward, where fusing is valid: "one" fuses writes + cites into paper
# (hosts has another source width) and written_by + knows into author; "two" the same pairs
# in each of its layers
FUSED_CALLS = {"one": 2, "two": 4}
FUSED_LAYERS = {"one": ["conv1"], "two": ["conv1", "conv2"]}


def hetero_inputs(graph: str, seed: int = 0):
    """Features and edges: the last node of every type has no in-edges, the last paper no edge
    at all, and each edge type repeats its first three edges."""
    nodes, edge_types = GRAPHS[graph]
    g = torch.Generator().manual_seed(seed)
    x = {t: torch.randn(n, f, generator=g, dtype=torch.float64) for t, (n, f) in nodes.items()}
    edges = {}
    for src, rel, dst in edge_types:
        n_src = nodes[src][0] - (src == "paper")
        e = torch.stack([torch.randint(n_src, (12,), generator=g),
                         torch.randint(nodes[dst][0] - 1, (12,), generator=g)])
        edges[(src, rel, dst)] = torch.cat([e, e[:, :3]], 1)
    return x, edges


def metadata(graph: str):
    nodes, edge_types = GRAPHS[graph]
    return list(nodes), edge_types


def model(lib, graph: str, second=None, **kwargs):
    first = lib.SAGEConv((-1, -1), 8, **kwargs)
    if graph == "one":
        return Model(first)
    return Model(first, second or lib.SAGEConv((-1, -1), 5, **kwargs))


class Model(torch.nn.Module):
    def __init__(self, conv1, conv2=None):
        super().__init__()
        self.conv1 = conv1
        if conv2 is not None:
            self.conv2 = conv2

    def forward(self, x, edge_index):
        x = self.conv1(x, edge_index)
        if hasattr(self, "conv2"):
            x = self.conv2(x.relu(), edge_index)
        return x


def pair(graph: str, group: str, lib=inn, build=model, **kwargs):
    """(ours, PyG's): iognn.nn.to_hetero of a model of ``lib``'s layers and PyG's to_hetero of
    the same model of PyG's layers, initialised and holding the same weights."""
    x, edges = hetero_inputs(graph)
    torch.manual_seed(0)
    ref = pnn.to_hetero(build(pnn, graph, **kwargs), metadata(graph), aggr=group).double()
    ours = inn.to_hetero(build(lib, graph, **kwargs), metadata(graph), aggr=group).double()
    with torch.no_grad():  # initialises the lazy layers
        ref(x, edges)
        ours(x, edges)
    ours.load_state_dict(ref.state_dict())
    return ours, ref


def run(net, x, edges):
    x = {k: v.clone().requires_grad_() for k, v in x.items()}
    out = net(x, edges)
    loss = sum((v * torch.arange(v.numel(), dtype=v.dtype, device=v.device).view_as(v)).sum()
               for v in out.values() if v is not None)
    net.zero_grad(set_to_none=True)
    loss.backward()
    return out, {k: v.grad for k, v in x.items()}, {n: p.grad for n, p in net.named_parameters()}


def assert_same_results(ours, ref, graph, exact=False):
    check = (lambda a, b, msg: torch.testing.assert_close(a, b, rtol=0, atol=0, msg=msg)) \
        if exact else (lambda a, b, msg: torch.testing.assert_close(a, b, msg=msg))
    x, edges = hetero_inputs(graph, seed=1)
    (o1, gx1, gp1), (o2, gx2, gp2) = run(ours, x, edges), run(ref, x, edges)
    assert list(o1) == list(o2)
    for k in o2:
        if o2[k] is None:  # a node type no relation ends at
            assert o1[k] is None
        else:
            check(o1[k], o2[k], k)
    for k in gx2:
        if gx2[k] is None:
            assert gx1[k] is None
        else:
            check(gx1[k], gx2[k], k)
    assert list(gp1) == list(gp2)
    for k in gp2:
        check(gp1[k], gp2[k], k)


@pytest.fixture
def typed_calls(monkeypatch):
    """Counts the typed propagates the fused relations run."""
    calls = []
    original = hetero_conv.typed_propagate

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(hetero_conv, "typed_propagate", counting)
    return calls


@pytest.mark.parametrize("graph", ["one", "two"])
@pytest.mark.parametrize("aggr", ["sum", "mean", "max"])
@pytest.mark.parametrize("sage_aggr", ["mean", "sum"])
def test_iognn_layers_match_pyg(graph, aggr, sage_aggr, typed_calls):
    ours, ref = pair(graph, aggr, aggr=sage_aggr)
    fused = aggr in ("sum", "mean")
    assert ours.fused_layers == (FUSED_LAYERS[graph] if fused else [])
    typed_calls.clear()
    assert_same_results(ours, ref, graph)
    assert len(typed_calls) == (FUSED_CALLS[graph] if fused else 0)


@pytest.mark.parametrize("graph", ["one", "two"])
@pytest.mark.parametrize("aggr", ["sum", "mean", "max"])
def test_pyg_layers_give_pyg_model(graph, aggr, typed_calls):
    ours, ref = pair(graph, aggr, lib=pnn)
    assert ours.fused_layers == []
    assert ours.code == ref.code
    assert_same_results(ours, ref, graph, exact=True)
    assert typed_calls == []


@pytest.mark.parametrize("graph", ["one", "two"])
def test_state_dict_both_ways(graph):
    ours, ref = pair(graph, "sum")
    assert list(ours.state_dict()) == list(ref.state_dict())
    torch.manual_seed(1)
    other = pnn.to_hetero(model(pnn, graph), metadata(graph)).double()
    with torch.no_grad():
        other(*hetero_inputs(graph))
    ref.load_state_dict(other.state_dict())
    ours.load_state_dict(other.state_dict())
    assert_same_results(ours, ref, graph)
    ref.load_state_dict(ours.state_dict())
    for k, v in ours.state_dict().items():
        assert torch.equal(ref.state_dict()[k], v)


def gat_then_sage(lib, graph, **kwargs):
    return Model(lib.GATConv((-1, -1), 4, heads=2, add_self_loops=False),
                 lib.SAGEConv((-1, -1), 5))


def gat_only(lib, graph, **kwargs):
    return Model(lib.GATConv((-1, -1), 4, heads=2, add_self_loops=False))


@pytest.mark.parametrize("build,fused_layers,fused_calls",
                         [(gat_only, [], 0), (gat_then_sage, ["conv2"], 2)],
                         ids=["gat", "gat_sage"])
def test_gat_layers_stay_unfused(build, fused_layers, fused_calls, typed_calls):
    ours, ref = pair("two", "sum", build=build)
    assert ours.fused_layers == fused_layers
    assert not any(target.startswith("iognn_fused.conv1") for target in
                   (node.target for node in ours.graph.nodes if node.op == "call_module"))
    typed_calls.clear()
    assert_same_results(ours, ref, "two")
    assert len(typed_calls) == fused_calls


@pytest.mark.parametrize("kwargs", [dict(aggr="max"), dict(normalize=True), dict(project=True)],
                         ids=["max", "normalize", "project"])
def test_other_sage_settings_stay_unfused(kwargs, typed_calls):
    if "project" in kwargs:  # project needs the input width
        def build(lib, graph, **kw):
            return Model(lib.SAGEConv(6, 8, **kw), lib.SAGEConv(8, 5, **kw))
    else:
        build = model
    ours, ref = pair("two", "sum", build=build, **kwargs)
    assert ours.fused_layers == []
    typed_calls.clear()
    assert_same_results(ours, ref, "two")
    assert typed_calls == []


def test_lazy_layers_run_unfused_until_initialised(typed_calls):
    x, edges = hetero_inputs("two")
    torch.manual_seed(0)
    ours = inn.to_hetero(model(inn, "two"), metadata("two")).double()
    assert ours.fused_layers == ["conv1", "conv2"]
    ours(x, edges)  # the first call initialises the layers, each relation on its own
    assert typed_calls == []
    ours(x, edges)
    assert len(typed_calls) == FUSED_CALLS["two"]


def test_copies_keep_the_fused_model():
    ours, _ = pair("two", "mean")
    x, edges = hetero_inputs("two", seed=2)
    expected = ours(x, edges)
    buffer = io.BytesIO()
    torch.save(ours, buffer)
    buffer.seek(0)
    for again in (copy.deepcopy(ours), torch.load(buffer, weights_only=False)):
        assert again.fused_layers == ours.fused_layers
        out = again(x, edges)
        for k in expected:
            assert torch.equal(out[k], expected[k])


def test_loaded_on_first_use():
    code = ("import sys, iognn.nn\n"
            "assert 'iognn.nn.to_hetero_transformer' not in sys.modules\n"
            "from iognn.nn import to_hetero\n"
            "assert to_hetero is iognn.nn.to_hetero and callable(to_hetero)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).resolve().parents[2] / "python"), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=300)
    assert result.returncode == 0, result.stderr


@pytest.mark.cuda
@pytest.mark.parametrize("aggr", ["sum", "mean"])
def test_cuda_matches_pyg(aggr, typed_calls):
    ours, ref = pair("two", aggr)
    ours, ref = ours.cuda(), ref.cuda()
    x, edges = hetero_inputs("two", seed=3)
    x = {k: v.cuda() for k, v in x.items()}
    edges = {k: v.cuda() for k, v in edges.items()}
    typed_calls.clear()
    (o1, gx1, gp1), (o2, gx2, gp2) = run(ours, x, edges), run(ref, x, edges)
    assert len(typed_calls) == FUSED_CALLS["two"]
    for ours_part, ref_part in ((o1, o2), (gx1, gx2), (gp1, gp2)):
        for k in ref_part:
            torch.testing.assert_close(ours_part[k], ref_part[k], msg=k)
