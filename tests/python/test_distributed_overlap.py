"""HaloConv's overlap (the interior rows computed while the halo exchange runs) on 1, 2 and 4
processes (gloo; NCCL on as many GPUs as are visible): the overlapped models' outputs, parameter
gradients and input gradients equal the non-overlapped ones and the one-process model's, for GCN,
SAGE, GAT and the generic path (GIN, GATv2 with its self-loops), on layouts with an empty interior,
an empty boundary, an empty halo and a rank that owns no node."""
from __future__ import annotations

import pytest
import torch

from distributed_ranks import WORLDS_AND_BACKENDS, rank_device, run_ranks
from iognn.distributed import DistributedGraph, distribute, partition
from test_distributed_full_graph import make_model

MODELS = ("gcn", "sage", "gat", "gin", "gatv2")
# 8 -> 16 -> 4: GCN aggregates x first, then projects first; SAGE takes the generic path, then
# exchanges x W_l
WIDTHS = (8, 16, 4)
CLUSTER, NUM_CLUSTERS = 12, 4


def clustered_graph():
    """Clusters A, B, C, D of 12 nodes, dense inside (with duplicate edges and self-loops), joined
    by a few cut edges: A <-> B both ways, D -> A only (D sends, receives nothing), C alone; the
    last node (in D) is isolated. Returns the edge_index, the features and an output gradient."""
    g = torch.Generator().manual_seed(11)
    blocks = []
    for c in range(NUM_CLUSTERS):
        size = CLUSTER - 1 if c == NUM_CLUSTERS - 1 else CLUSTER
        blocks.append(torch.randint(0, size, (2, 5 * size), generator=g) + c * CLUSTER)
    inside = torch.cat(blocks, dim=1)
    loops = torch.arange(0, NUM_CLUSTERS * CLUSTER - 1, 7).repeat(2, 1)
    cut = torch.tensor([[0, 13, 5, 20, 37, 40], [12, 2, 18, 7, 1, 3]])
    edge_index = torch.cat([inside, inside[:, :10], loops, cut], dim=1)
    num_nodes = NUM_CLUSTERS * CLUSTER
    return (edge_index, torch.randn(num_nodes, WIDTHS[0], generator=g),
            torch.randn(num_nodes, WIDTHS[-1], generator=g))


def assignments(world: int) -> dict:
    """Node -> rank assignments: by cluster; on 4 ranks also A and B interleaved over ranks 0 and
    1 (all boundary), C and D on rank 2, nothing on rank 3."""
    cluster = torch.arange(NUM_CLUSTERS * CLUSTER) // CLUSTER
    if world == 2:
        return {"clusters": cluster % 2}
    mixed = torch.where(cluster < 2, torch.arange(cluster.numel()) % 2, 2)
    return {"clusters": cluster, "mixed": mixed}


def overlap_rank(rank, world, edge_index, x, grad_out, backend, models):
    """Per assignment, model and overlap: this rank's layout sizes, output rows, parameter
    gradients and input gradients of ``(out * grad_out[owned]).sum()``."""
    device = rank_device(backend, rank)
    results = {}
    for how, parts in assignments(world).items():
        local = partition(edge_index, world, parts=parts).local(rank)
        graph = DistributedGraph(local, device)
        results[how, "sizes"] = (local.num_interior, local.num_owned, local.num_halo)
        results[how, "owned"] = local.owned_nodes
        for name in models:
            for overlap in (False, True):
                model = distribute(make_model(name, WIDTHS[0], WIDTHS[1], WIDTHS[2]), graph,
                                   overlap=overlap).to(device)
                xs = local.take(x).to(device).requires_grad_()
                out = model(xs, graph.edge_index)
                (out * local.take(grad_out).to(device)).sum().backward()
                results[how, name, overlap] = dict(
                    out=out.detach(), x_grad=xs.grad,
                    grads={k.replace(".conv.", "."): p.grad for k, p in model.named_parameters()})
    return results


def one_process(name: str, edge_index, x, grad_out) -> dict:
    model = make_model(name, WIDTHS[0], WIDTHS[1], WIDTHS[2])
    xs = x.clone().requires_grad_()
    out = model(xs, edge_index)
    (out * grad_out).sum().backward()
    return dict(out=out.detach(), x_grad=xs.grad,
                grads={k: p.grad for k, p in model.named_parameters()})


@pytest.mark.parametrize("world, backend", WORLDS_AND_BACKENDS)
def test_overlap_matches(world, backend):
    edge_index, x, grad_out = clustered_graph()
    ranks = run_ranks(overlap_rank, world, edge_index, x, grad_out, backend, MODELS,
                      backend=backend)
    for how in assignments(world):
        sizes = [r[how, "sizes"] for r in ranks]
        assert any(0 < i < o for i, o, _ in sizes), sizes  # some rank overlaps real work
        for name in MODELS:
            want = one_process(name, edge_index, x, grad_out)
            for r in ranks:
                plain, overlapped = r[how, name, False], r[how, name, True]
                owned = r[how, "owned"]
                for got in (plain, overlapped):
                    torch.testing.assert_close(got["out"].cpu(), want["out"][owned])
                    torch.testing.assert_close(got["x_grad"].cpu(), want["x_grad"][owned])
                torch.testing.assert_close(overlapped["out"], plain["out"])
                torch.testing.assert_close(overlapped["x_grad"], plain["x_grad"])
                if name == "gat" and backend == "gloo":
                    # the attention's rows are the same CSR rows in either mode: bit for bit
                    assert torch.equal(overlapped["out"], plain["out"])
            for overlap in (False, True):
                for key, grad in want["grads"].items():
                    total = sum(r[how, name, overlap]["grads"][key].cpu() for r in ranks)
                    torch.testing.assert_close(total, grad, msg=f"{how} {name} {overlap} {key}")
    if world == 4:  # the layouts cover the edge cases
        clusters = [r["clusters", "sizes"] for r in ranks]
        mixed = [r["mixed", "sizes"] for r in ranks]
        assert clusters[2][0] == clusters[2][1] and clusters[2][2] == 0  # no boundary, no halo
        assert clusters[3][0] < clusters[3][1] and clusters[3][2] == 0  # boundary, no halo
        assert mixed[0][0] == 0 < mixed[0][1] and mixed[1][0] == 0 < mixed[1][1]  # no interior
        assert mixed[3] == (0, 0, 0)  # owns nothing


def test_overlap_on_one_process_is_the_one_process_model():
    """One part: no exchange; the overlapped model is the one-process model."""
    edge_index, x, grad_out = clustered_graph()
    local = partition(edge_index, 1, "random", num_nodes=x.size(0)).local(0)
    graph = DistributedGraph(local)
    for name in MODELS:
        want = one_process(name, edge_index, x, grad_out)
        model = distribute(make_model(name, WIDTHS[0], WIDTHS[1], WIDTHS[2]), graph,
                           overlap=True)
        out = model(local.take(x), graph.edge_index)
        torch.testing.assert_close(out, want["out"][local.owned_nodes])
