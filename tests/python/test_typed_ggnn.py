"""iognn.nn.TypedGatedGraphConv: against an fp64 reference written plainly here (one edge at a
time, the GRU written out), torch.autograd.gradcheck on a tiny graph, a hand-rolled PyG typed
GGNN (a propagate per edge type, per-type Linear, GRUCell) with copied weights on program graphs,
the DGL state_dict conversion, the TypedGraph cache and the errors."""
from __future__ import annotations

import pytest
import torch
from torch_geometric.nn import MessagePassing

import iognn
import iognn.nn as io_nn
from iognn import program_graphs as pg
from iognn.nn.conv.typed_gated_graph_conv import (dgl_to_iognn_state_dict,
                                                   iognn_to_dgl_state_dict)

from conftest import GRAPH_CASES
from test_nn_basic import RTOL, ATOL


# ---- the references ---------------------------------------------------------------------------
def gru_reference(m, h, rnn):
    """torch.nn.GRUCell's equations, written out."""
    w_ir, w_iz, w_in = rnn.weight_ih.chunk(3)
    w_hr, w_hz, w_hn = rnn.weight_hh.chunk(3)
    zero = torch.zeros(3 * h.size(1), dtype=h.dtype)
    b_ir, b_iz, b_in = (rnn.bias_ih if rnn.bias_ih is not None else zero).chunk(3)
    b_hr, b_hz, b_hn = (rnn.bias_hh if rnn.bias_hh is not None else zero).chunk(3)
    r = torch.sigmoid(m @ w_ir.t() + b_ir + h @ w_hr.t() + b_hr)
    z = torch.sigmoid(m @ w_iz.t() + b_iz + h @ w_hz.t() + b_hz)
    n = torch.tanh(m @ w_in.t() + b_in + r * (h @ w_hn.t() + b_hn))
    return (1 - z) * n + z * h


def reference(layer, x, edge_index, edge_type):
    """The layer's definition, one edge at a time."""
    h = torch.cat([x, x.new_zeros(x.size(0), layer.channels - x.size(1))], dim=1)
    src, dst = edge_index.long().tolist()
    types = edge_type.long().tolist()
    for _ in range(layer.num_steps):
        groups = {}
        for j, i, r in zip(src, dst, types):
            message = h[j] @ layer.weight[r] + (0 if layer.bias is None else layer.bias[r])
            total, count = groups.get((i, r), (0, 0))
            groups[(i, r)] = (total + message, count + 1)
        rows = [torch.zeros(layer.channels, dtype=h.dtype) for _ in range(h.size(0))]
        for (i, _), (total, count) in groups.items():
            rows[i] = rows[i] + (total / count if layer.reduce == "mean" else total)
        m = torch.stack(rows) if rows else h.new_zeros(0, layer.channels)
        h = gru_reference(m, h, layer.rnn)
    return h


class RelationSum(MessagePassing):
    def __init__(self):
        super().__init__(aggr="add")

    def forward(self, x, edge_index, num_nodes):
        return self.propagate(edge_index, x=x, size=(num_nodes, num_nodes))


class PyGTypedGGNN(torch.nn.Module):
    """A typed GGNN as one writes it with PyG: per step, every edge type's edges propagate that
    type's Linear of h (DGL's layout: weight [H, H] applied as h @ W.T, with bias), summed, then
    a GRUCell."""

    def __init__(self, channels, num_steps, num_types):
        super().__init__()
        self.channels, self.num_steps = channels, num_steps
        self.linears = torch.nn.ModuleList(torch.nn.Linear(channels, channels)
                                           for _ in range(num_types))
        self.gru = torch.nn.GRUCell(channels, channels)
        self.conv = RelationSum()

    def forward(self, x, edge_index, edge_type):
        h = torch.cat([x, x.new_zeros(x.size(0), self.channels - x.size(1))], dim=1)
        masks = [edge_type == r for r in range(len(self.linears))]
        for _ in range(self.num_steps):
            m = torch.zeros_like(h)
            for lin, mask in zip(self.linears, masks):
                m = m + self.conv(lin(h), edge_index[:, mask], h.size(0))
            h = self.gru(m, h)
        return h


# ---- helpers ----------------------------------------------------------------------------------
def double_layer(channels, steps, num_types, seed=0, **kwargs):
    torch.manual_seed(seed)
    layer = io_nn.TypedGatedGraphConv(channels, steps, num_types, **kwargs).double()
    with torch.no_grad():  # non-zero biases, so that they are checked
        for p in layer.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return layer


def types_for(edge_index, num_types, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = torch.randint(0, num_types, (edge_index.size(1),), generator=g)
    return t.int() if edge_index.dtype == torch.int32 else t


CASES = [(name, ei, max(size) if isinstance(size, tuple) else size)
         for name, ei, size in GRAPH_CASES if name != "supernode"]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("kwargs", [{}, {"reduce": "mean"}, {"bias": False, "gru_bias": False}],
                         ids=["sum", "mean", "nobias"])
def test_matches_fp64_reference(case, kwargs):
    _, edge_index, num_nodes = case
    layer = double_layer(6, 3, 4, **kwargs)
    edge_type = types_for(edge_index, 4)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(num_nodes, 4, generator=g, dtype=torch.float64).requires_grad_()
    out = layer(x, edge_index, edge_type)
    ref = reference(layer, x, edge_index, edge_type)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    if out.numel() == 0:
        return
    grad = torch.randn_like(out)
    params = [x] + list(layer.parameters())
    got = torch.autograd.grad(out, params, grad, allow_unused=True)
    want = torch.autograd.grad(ref, params, grad, allow_unused=True)
    for a, b, p in zip(got, want, params):
        a = torch.zeros_like(p) if a is None else a
        b = torch.zeros_like(p) if b is None else b
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_gradcheck(reduce):
    layer = double_layer(3, 2, 3, reduce=reduce)
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 0, 0, 2], [1, 2, 0, 0, 0, 0, 3, 0]])
    edge_type = torch.tensor([0, 1, 2, 0, 0, 1, 2, 2])
    x = torch.randn(5, 2, dtype=torch.float64, requires_grad=True)
    names = [n for n, _ in layer.named_parameters()]

    def run(x, *params):
        state = dict(zip(names, params))
        return torch.func.functional_call(layer, state, (x, edge_index, edge_type))

    params = [p.detach().clone().requires_grad_() for p in layer.parameters()]
    assert torch.autograd.gradcheck(run, (x, *params))


@pytest.mark.parametrize("num_edge_types", [2, 3])
def test_matches_hand_rolled_pyg_typed_ggnn(num_edge_types):
    data = pg.program_graphs(1, num_edge_types=num_edge_types, min_nodes=300, max_nodes=400,
                             seed=5)[0]
    num_types, channels = 2 * num_edge_types, 16
    torch.manual_seed(0)
    theirs = PyGTypedGGNN(channels, 4, num_types)
    with torch.no_grad():
        for lin in theirs.linears:
            lin.bias.normal_(0, 0.1)
    # the hand-rolled model's state_dict is DGL's: linears.{r}.weight / .bias and gru.*
    ours = io_nn.TypedGatedGraphConv.from_dgl_state_dict(theirs.state_dict(), num_steps=4)
    embedding = torch.randn(pg.VOCAB_SIZE, 12, generator=torch.Generator().manual_seed(1))
    x = embedding[data.x].requires_grad_()
    out = ours(x, data.edge_index, data.edge_type)
    ref = theirs(x, data.edge_index, data.edge_type)
    torch.testing.assert_close(out, ref, rtol=RTOL, atol=ATOL)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, [x, ours.weight, ours.bias, ours.rnn.weight_ih], grad)
    want = torch.autograd.grad(ref, [x] + [lin.weight for lin in theirs.linears]
                               + [lin.bias for lin in theirs.linears] + [theirs.gru.weight_ih],
                               grad)
    R = num_types
    torch.testing.assert_close(got[0], want[0], rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(got[1], torch.stack([w.t() for w in want[1:1 + R]]), rtol=RTOL,
                               atol=ATOL * float(got[1].abs().max()))
    torch.testing.assert_close(got[2], torch.stack(want[1 + R:1 + 2 * R]), rtol=RTOL,
                               atol=ATOL * float(got[2].abs().max()))
    torch.testing.assert_close(got[3], want[-1], rtol=RTOL, atol=ATOL * float(got[3].abs().max()))


def synthetic_dgl_state(channels=5, num_types=3, gru_bias=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    state = {}
    for r in range(num_types):
        state[f"linears.{r}.weight"] = torch.randn(channels, channels, generator=g)
        state[f"linears.{r}.bias"] = torch.randn(channels, generator=g)
    gru = torch.nn.GRUCell(channels, channels, bias=gru_bias)
    for k, v in gru.state_dict().items():
        state["gru." + k] = torch.randn(v.shape, generator=g)
    return state


@pytest.mark.parametrize("gru_bias", [True, False])
def test_dgl_state_dict_conversion(gru_bias):
    state = synthetic_dgl_state(gru_bias=gru_bias)
    layer = io_nn.TypedGatedGraphConv.from_dgl_state_dict(state, num_steps=2)
    assert (layer.channels, layer.num_edge_types, layer.num_steps) == (5, 3, 2)
    assert layer.rnn.bias_ih is not None if gru_bias else layer.rnn.bias_ih is None
    for r in range(3):
        assert torch.equal(layer.weight[r], state[f"linears.{r}.weight"].t())
        assert torch.equal(layer.bias[r], state[f"linears.{r}.bias"])
    assert torch.equal(layer.rnn.weight_hh, state["gru.weight_hh"])
    back = layer.to_dgl_state_dict()
    assert back.keys() == state.keys()
    assert all(torch.equal(back[k], state[k]) for k in state)
    # DGL's message: linears[r](h_src) = h_src @ W.T + b, one per edge, summed
    edge_index = torch.tensor([[0, 1, 2, 3, 3], [1, 2, 0, 0, 0]])
    edge_type = torch.tensor([0, 1, 2, 2, 1])
    x = torch.randn(4, 3)
    h = torch.cat([x, x.new_zeros(4, 2)], 1)
    for _ in range(2):
        m = torch.zeros_like(h)
        for (j, i), r in zip(edge_index.t().tolist(), edge_type.tolist()):
            m[i] += h[j] @ state[f"linears.{r}.weight"].t() + state[f"linears.{r}.bias"]
        h = torch.gru_cell(m, h, state["gru.weight_ih"], state["gru.weight_hh"],
                           state.get("gru.bias_ih"), state.get("gru.bias_hh"))
    torch.testing.assert_close(layer(x, edge_index, edge_type), h, rtol=RTOL, atol=ATOL)


def test_dgl_conversion_errors():
    with pytest.raises(ValueError, match="linears"):
        dgl_to_iognn_state_dict({"gru.weight_ih": torch.zeros(3, 1)})
    with pytest.raises(ValueError, match="bias=True"):
        iognn_to_dgl_state_dict(io_nn.TypedGatedGraphConv(4, 1, 2, bias=False).state_dict())


def test_parameters_and_state_dict():
    layer = io_nn.TypedGatedGraphConv(8, 5, 6)
    assert list(layer.state_dict()) == ["weight", "bias", "rnn.weight_ih", "rnn.weight_hh",
                                        "rnn.bias_ih", "rnn.bias_hh"]
    assert layer.weight.shape == (6, 8, 8) and layer.bias.shape == (6, 8)
    assert bool((layer.bias == 0).all())
    torch.manual_seed(1)
    layer.reset_parameters()
    first = {k: v.clone() for k, v in layer.state_dict().items()}
    torch.manual_seed(1)
    layer.reset_parameters()
    assert all(torch.equal(first[k], v) for k, v in layer.state_dict().items())
    bare = io_nn.TypedGatedGraphConv(8, 5, 6, bias=False, gru_bias=False)
    assert list(bare.state_dict()) == ["weight", "rnn.weight_ih", "rnn.weight_hh"]
    assert repr(layer) == "TypedGatedGraphConv(8, num_steps=5, num_edge_types=6, reduce='sum')"


def test_prebuilt_typed_graph_and_cache():
    edge_index = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
    edge_type = torch.tensor([0, 1, 0, 1])
    layer = io_nn.TypedGatedGraphConv(4, 2, 2)
    x = torch.randn(4, 4)
    out = layer(x, edge_index, edge_type)
    tg = layer.typed_graph(edge_index, edge_type, 4)
    assert layer.typed_graph(edge_index, edge_type, 4) is tg  # built once
    torch.testing.assert_close(layer(x, iognn.TypedGraph(edge_index, edge_type, 2, 4)), out)
    edge_type[1] = 0  # in place: rebuilt
    assert layer.typed_graph(edge_index, edge_type, 4) is not tg
    changed = layer(x, edge_index, edge_type)
    assert not torch.allclose(changed, out)
    edge_index[1, 0] = 3
    torch.testing.assert_close(layer(x, edge_index, edge_type),
                               layer(x, edge_index.clone(), edge_type.clone()))


@pytest.mark.parametrize("edge_type,error", [
    (torch.tensor([0, 1, 2]), IndexError), (torch.tensor([0, 1]), ValueError),
    (torch.tensor([0.0, 1.0, 0.0]), TypeError), (torch.tensor([0, -1, 1]), IndexError)],
    ids=["out-of-range", "length", "float", "negative"])
def test_bad_edge_type_names_it(edge_type, error):
    layer = io_nn.TypedGatedGraphConv(4, 1, 2)
    with pytest.raises(error, match="edge_type"):
        layer(torch.randn(3, 4), torch.tensor([[0, 1, 2], [1, 2, 0]]), edge_type)


def test_bad_inputs_raise():
    layer = io_nn.TypedGatedGraphConv(4, 1, 2)
    edge_index = torch.tensor([[0, 1], [1, 2]])
    with pytest.raises(ValueError, match="not allowed to be larger"):
        layer(torch.randn(3, 5), edge_index, torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="edge_type is required"):
        layer(torch.randn(3, 4), edge_index)
    with pytest.raises(ValueError, match="types"):
        layer(torch.randn(3, 4), iognn.TypedGraph(edge_index, torch.tensor([0, 1]), 3, 3))
    with pytest.raises(ValueError, match="reduce"):
        io_nn.TypedGatedGraphConv(4, 1, 2, reduce="max")


def test_batched_program_graphs_match_per_graph():
    from torch_geometric.loader import DataLoader
    graphs = pg.program_graphs(3, num_edge_types=4, min_nodes=100, max_nodes=300, seed=2)
    batch = next(iter(DataLoader(graphs, batch_size=3)))
    torch.manual_seed(0)
    layer = io_nn.TypedGatedGraphConv(8, 3, 8)
    embedding = torch.randn(pg.VOCAB_SIZE, 8)
    out = layer(embedding[batch.x], batch.edge_index, batch.edge_type)
    parts = [layer(embedding[g.x], g.edge_index, g.edge_type) for g in graphs]
    torch.testing.assert_close(out, torch.cat(parts), rtol=RTOL, atol=ATOL)


def test_autocast_keeps_the_state_dtype():
    edge_index = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
    edge_type = torch.tensor([0, 1, 0, 1])
    layer = io_nn.TypedGatedGraphConv(4, 2, 2)
    x = torch.randn(4, 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = layer(x, edge_index, edge_type)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, layer(x, edge_index, edge_type), rtol=0.05, atol=0.05)
