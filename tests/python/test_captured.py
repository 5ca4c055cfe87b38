"""iognn.CapturedStep: a whole training step (forward, loss, backward, Adam) captured in a CUDA
graph equals eager training bit for bit (losses, gradients, parameters after several steps), for GCN,
SAGE and GAT models with feature dropout; its argument rules; the eager fallback on the CPU."""
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import iognn
import iognn.nn as io_nn


class Model(torch.nn.Module):
    def __init__(self, kind: str, attn_dropout: float = 0.0):
        super().__init__()
        if kind == "gcn":
            self.conv1, self.conv2 = io_nn.GCNConv(12, 16), io_nn.GCNConv(16, 5)
        elif kind == "sage":
            self.conv1 = io_nn.SAGEConv(12, 16, aggr=["mean", "max"])
            self.conv2 = io_nn.SAGEConv(16, 5)
        else:
            self.conv1 = io_nn.GATConv(12, 4, heads=4, dropout=attn_dropout)
            self.conv2 = io_nn.GATConv(16, 5, heads=1)

    def forward(self, x, edge_index):
        x = F.dropout(x, 0.3, self.training)
        return self.conv2(F.relu(self.conv1(x, edge_index)), edge_index)


def loss_fn(model, x, edge_index, y, train_idx):
    return F.cross_entropy(model(x, edge_index)[train_idx], y[train_idx])


def problem(device, num_nodes=200, num_edges=1200, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(num_nodes, 12, generator=gen)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=gen)
    y = torch.randint(0, 5, (num_nodes,), generator=gen)
    train_idx = (torch.rand(num_nodes, generator=gen) < 0.5).nonzero().view(-1)
    return [t.to(device) for t in (x, edge_index, y, train_idx)]


def twins(kind, device):
    torch.manual_seed(0)
    a = Model(kind).to(device)
    b = Model(kind).to(device)
    b.load_state_dict(a.state_dict())
    optimizers = [torch.optim.Adam(m.parameters(), lr=0.01, weight_decay=5e-4,
                                   capturable=device == "cuda") for m in (a, b)]
    return (a, optimizers[0]), (b, optimizers[1])


def eager_step(model, optimizer, *args):
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(model, *args)
    loss.backward()
    optimizer.step()
    return loss.detach().clone()


def run_both(kind, device, steps=6):
    (model, opt), (ref, ref_opt) = twins(kind, device)
    args = problem(device)
    step = iognn.CapturedStep(model, opt, loss_fn)
    torch.manual_seed(5)
    losses = [step(*args).clone() for _ in range(steps)]
    torch.manual_seed(5)
    expected = [eager_step(ref, ref_opt, *args) for _ in range(steps)]
    return step, (model, ref), losses, expected


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["gcn", "sage", "gat"])
def test_captured_training_equals_eager_bitwise(kind):
    step, (model, ref), losses, expected = run_both(kind, "cuda")
    assert step.captured
    for a, b in zip(losses, expected):
        assert torch.equal(a, b)
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        assert torch.equal(p, q), name
        assert torch.equal(p.grad, q.grad), f"gradient of {name}"


@pytest.mark.cuda
def test_replays_survive_the_eviction_of_every_cache():
    """The capture reads cached Graphs and GCN normalisations (a hub makes the captured row
    schedule plan heavy rows on the device); other graphs then push all of them out of the
    caches: the replays still equal eager training."""
    (model, opt), (ref, ref_opt) = twins("gcn", "cuda")
    x, edge_index, y, train_idx = problem("cuda")
    hub = torch.randint(0, x.size(0), (3000,), device="cuda")
    edge_index = torch.cat([edge_index, torch.stack([hub, torch.zeros_like(hub)])], 1)
    args = (x, edge_index, y, train_idx)
    step = iognn.CapturedStep(model, opt, loss_fn, warmup=1)
    torch.manual_seed(5)
    losses = [step(*args).clone() for _ in range(3)]  # warm-up, capture, replay
    layer = io_nn.GCNConv(12, 4).cuda()
    gen = torch.Generator(device="cuda").manual_seed(1)  # the default one feeds the dropout
    for k in range(80):  # > 64 cached entries, each graph with a hub
        other = torch.randint(0, 300, (2, 2000), device="cuda", generator=gen)
        other[1, :400] = k % 300
        layer(torch.randn(300, 12, device="cuda", generator=gen), other)
    losses += [step(*args).clone() for _ in range(3)]
    torch.manual_seed(5)
    expected = [eager_step(ref, ref_opt, *args) for _ in range(6)]
    for a, b in zip(losses, expected):
        assert torch.equal(a, b)


@pytest.mark.cuda
def test_captured_step_takes_new_features_and_refuses_new_structure():
    (model, opt), _ = twins("gcn", "cuda")
    x, edge_index, y, mask = problem("cuda")
    step = iognn.CapturedStep(model, opt, loss_fn, warmup=1)
    for _ in range(3):
        step(x, edge_index, y, mask)
    step(x * 2, edge_index, y, mask)  # a new feature tensor: copied in
    step(x, edge_index.clone(), y, mask)  # another object with the same values: accepted
    other = problem("cuda", seed=1)[1]
    with pytest.raises(ValueError, match="fixed by the capture"):
        step(x, other, y, mask)
    with pytest.raises(ValueError, match="shape"):
        step(x[:10], edge_index, y, mask)


SYNCHRONISING_STEP = """
import torch, torch.nn.functional as F, iognn, iognn.nn as io_nn
torch.manual_seed(0)
model = io_nn.GCNConv(4, 3).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(10, 4, device="cuda")
edge_index = torch.randint(0, 10, (2, 30), device="cuda")
y = torch.randint(0, 3, (10,), device="cuda")
mask = torch.rand(10, device="cuda") < 0.5
def by_mask(model, x, edge_index, y, mask):
    return F.cross_entropy(model(x, edge_index)[mask], y[mask])
step = iognn.CapturedStep(model, opt, by_mask, warmup=1)
step(x, edge_index, y, mask)
step(x, edge_index, y, mask)
"""


@pytest.mark.cuda
def test_a_step_that_synchronises_is_refused_with_its_causes():
    """Indexing by a boolean mask reads a size back: the capture fails with an error naming the
    usual causes. (In a process of its own: a capture that CUDA invalidates leaves PyTorch's CUDA
    generator unusable for later captures in that process.)"""
    result = subprocess.run([sys.executable, "-c", SYNCHRONISING_STEP], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode != 0
    assert "could not be captured" in result.stderr and "boolean mask" in result.stderr, \
        result.stderr[-2000:]


@pytest.mark.cuda
def test_attention_dropout_is_refused_inside_a_capture():
    torch.manual_seed(0)
    model = Model("gat", attn_dropout=0.2).cuda()
    opt = torch.optim.Adam(model.parameters())
    step = iognn.CapturedStep(model, opt, loss_fn, warmup=1)
    args = problem("cuda")
    step(*args)  # eager warm-up: allowed
    with pytest.raises(RuntimeError, match="attention dropout cannot run inside a captured"):
        step(*args)


def test_cpu_runs_the_eager_step():
    (model, opt), (ref, ref_opt) = twins("sage", "cpu")
    args = problem("cpu")
    step = iognn.CapturedStep(model, opt, loss_fn)
    assert not step.enabled
    torch.manual_seed(5)
    losses = [step(*args) for _ in range(3)]
    torch.manual_seed(5)
    expected = [eager_step(ref, ref_opt, *args) for _ in range(3)]
    assert not step.captured
    for a, b in zip(losses, expected):
        assert torch.equal(a, b)
    for p, q in zip(model.parameters(), ref.parameters()):
        assert torch.equal(p, q)


def test_bad_arguments():
    model = Model("gcn")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match="model"):
        iognn.CapturedStep(lambda x: x, opt, loss_fn)
    with pytest.raises(TypeError, match="optimizer"):
        iognn.CapturedStep(model, "adam", loss_fn)
    with pytest.raises(TypeError, match="loss_fn"):
        iognn.CapturedStep(model, opt, None)
    with pytest.raises(ValueError, match="warmup"):
        iognn.CapturedStep(model, opt, loss_fn, warmup=0)
    with pytest.raises(ValueError, match="CUDA device"):
        iognn.CapturedStep(model, opt, loss_fn, enabled=True)
    step = iognn.CapturedStep(model, opt, lambda m, x, ei: m(x, ei))
    with pytest.raises(ValueError, match="scalar tensor"):
        step(*problem("cpu")[:2])
