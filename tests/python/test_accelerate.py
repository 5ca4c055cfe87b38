"""iognn.accelerate: PyG layers of a mixed model swapped for iognn layers holding the same
parameter objects, the report, and training to the same result as the untouched PyG model."""
import copy

import pytest
import torch
import torch.nn.functional as F
import torch_geometric.nn as pyg_nn
import torch_geometric.nn.aggr as pyg_aggr

import iognn
import iognn.nn as io_nn

N = 40


class Mixed(torch.nn.Module):
    """Supported layers of every kind, an unsupported one, a user MLP and a readout."""

    def __init__(self):
        super().__init__()
        self.convs = torch.nn.ModuleList([
            pyg_nn.GCNConv(8, 16),
            pyg_nn.SAGEConv(16, 16, aggr=["mean", "max", "std"]),
            pyg_nn.GATConv(16, 4, heads=4, dropout=0.0),
            pyg_nn.GINConv(torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU())),
            pyg_nn.ChebConv(16, 16, K=2),
            pyg_nn.TransformerConv(16, 8, heads=2),
            pyg_nn.GATv2Conv(16, 16, share_weights=True),
            pyg_nn.GraphConv(16, 16, aggr="max"),
        ])
        self.gine = pyg_nn.GINEConv(torch.nn.Linear(16, 16), edge_dim=3, train_eps=True)
        self.pna = pyg_nn.PNAConv(16, 16, ["mean", "min", "max", "std"],
                                  ["identity", "amplification", "attenuation"],
                                  deg=torch.tensor([1, 4, 6, 2]), towers=2, edge_dim=3,
                                  pre_layers=2, post_layers=2)
        self.pool = pyg_aggr.MultiAggregation(["mean", "max"], mode="proj",
                                              mode_kwargs={"in_channels": 16, "out_channels": 3})

    def forward(self, x, edge_index, edge_attr, batch):
        for conv in self.convs:
            x = F.dropout(conv(x, edge_index).relu(), p=0.2, training=self.training)
        x = self.gine(x, edge_index, edge_attr).relu()
        x = self.pna(x, edge_index, edge_attr)
        return self.pool(x, batch, dim_size=4)


def data(seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(N, 8, generator=gen), torch.randint(0, N, (2, 160), generator=gen),
            torch.randn(160, 3, generator=gen), torch.arange(N) % 4)


def test_mixed_model_is_accelerated_with_shared_parameters():
    torch.manual_seed(0)
    model = Mixed()
    reference = copy.deepcopy(model)
    params_before = dict(model.named_parameters())
    user_mlp = model.convs[3].nn
    rng_before = torch.get_rng_state()
    report = iognn.accelerate(model)
    assert torch.equal(torch.get_rng_state(), rng_before)  # no random draws
    assert report.model is model
    assert [name for name, _ in report.replaced] == [
        "convs.0", "convs.1", "convs.2", "convs.3", "convs.5", "convs.6", "convs.7", "gine",
        "pna", "pool"]
    assert report.skipped == [("convs.4", "ChebConv", "no iognn equivalent")]
    assert type(model.convs[0]) is io_nn.GCNConv and type(model.pool) is io_nn.MultiAggregation
    assert type(model.convs[4]) is pyg_nn.ChebConv
    # the very same parameter objects, the same state_dict, the user's MLP object
    assert dict(model.named_parameters()).keys() == params_before.keys()
    assert all(p is params_before[n] for n, p in model.named_parameters())
    assert model.convs[3].nn is user_mlp
    assert list(model.state_dict()) == list(reference.state_dict())
    model.eval()
    reference.eval()
    x, edge_index, edge_attr, batch = data()
    torch.testing.assert_close(model(x, edge_index, edge_attr, batch),
                               reference(x, edge_index, edge_attr, batch), rtol=1e-4, atol=1e-5)


def test_accelerated_model_trains_to_the_same_result():
    torch.manual_seed(1)
    model = Mixed()
    reference = copy.deepcopy(model)
    # Built before accelerate: still valid after (the parameters are shared, not copied).
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, eps=1e-4)
    iognn.accelerate(model)
    ref_optimizer = torch.optim.Adam(reference.parameters(), lr=0.01, eps=1e-4)
    x, edge_index, edge_attr, batch = data(1)
    y = torch.tensor([0, 1, 2, 1])
    losses = {}
    for name, net, opt in (("iognn", model, optimizer), ("pyg", reference, ref_optimizer)):
        torch.manual_seed(2)  # the same dropout masks in both runs
        losses[name] = []
        for _ in range(15):
            opt.zero_grad()
            loss = F.cross_entropy(net(x, edge_index, edge_attr, batch), y)
            loss.backward()
            opt.step()
            losses[name].append(float(loss))
    # Adam's eps is raised from 1e-8: Adam normalises each step, so on parameters whose true
    # gradient is zero (TransformerConv's key bias: softmax ignores it) a tiny eps turns rounding
    # noise into full-size steps that differ between any two summation orders.
    assert losses["pyg"][-1] < 0.5 * losses["pyg"][0]  # it did train
    torch.testing.assert_close(losses["iognn"], losses["pyg"], rtol=2e-3, atol=2e-4)
    # Trained predictions agree.
    model.eval()
    reference.eval()
    torch.testing.assert_close(model(x, edge_index, edge_attr, batch),
                               reference(x, edge_index, edge_attr, batch), rtol=1e-2, atol=1e-3)


def test_root_layer_subclasses_hooks_and_unsupported_options_are_reported():
    layer = pyg_nn.GCNConv(4, 4)
    report = iognn.accelerate(layer)
    assert type(report.model) is io_nn.GCNConv and report.replaced == [("", "GCNConv")]
    assert report.model.lin.weight is layer.lin.weight

    class MyGCN(pyg_nn.GCNConv):
        pass

    hooked = pyg_nn.SAGEConv(4, 4)
    hooked.register_propagate_forward_hook(lambda *args: None)
    model = torch.nn.Sequential(MyGCN(4, 4), hooked, pyg_nn.GATConv(4, 4, aggr="mean"),
                                pyg_nn.GINConv(torch.nn.Identity(), flow="target_to_source"))
    report = iognn.accelerate(model)
    assert report.replaced == []
    reasons = {name: reason for name, _, reason in report.skipped}
    assert "subclass" in reasons["0"] and "hooks" in reasons["1"]
    assert "aggr" in reasons["2"] and "flow" in reasons["3"]
    with pytest.raises(TypeError, match="torch.nn.Module"):
        iognn.accelerate("model")


def test_lazy_layers_stay_lazy_and_materialise_the_shared_parameter():
    model = torch.nn.Sequential(pyg_nn.GATConv((-1, -1), 4, heads=2))
    weight = model[0].lin_src.weight
    iognn.accelerate(model)
    x = torch.randn(N, 5)
    out = model[0](x, data()[1])
    assert out.shape == (N, 8)
    assert model[0].lin_src.weight is weight and weight.shape == (8, 5)
