"""iognn.nn.HeteroConv against PyG's: the SAGEConv relations into one node type fused into one
typed propagate give PyG's outputs and gradients (sum and mean grouping, several source types,
bipartite widths, empty relations, isolated nodes), the other relations and groupings run as PyG
runs them, and the state_dict is PyG's."""
from __future__ import annotations

import pytest
import torch
import torch_geometric.nn as pnn

import iognn.nn as inn

NODES = {"paper": 9, "author": 7, "venue": 3}


def hetero_inputs(seed: int, empty=(), widths=None):
    g = torch.Generator().manual_seed(seed)
    widths = widths or {"paper": 8, "author": 8, "venue": 8}
    x = {t: torch.randn(n, widths[t], generator=g, dtype=torch.float64) for t, n in NODES.items()}
    edges = {}
    for edge_type in [("author", "writes", "paper"), ("paper", "cites", "paper"),
                      ("venue", "hosts", "paper"), ("paper", "written_by", "author"),
                      ("author", "knows", "author")]:
        src, _, dst = edge_type
        count = 0 if edge_type in empty else 20
        edges[edge_type] = torch.stack([torch.randint(NODES[src], (count,), generator=g),
                                        torch.randint(NODES[dst] - 1, (count,), generator=g)])
    return x, edges  # the last node of every type has no in-edges


def layers(module, kind: str, widths=None):
    widths = widths or {"paper": 8, "author": 8, "venue": 8}
    convs = {}
    for edge_type in [("author", "writes", "paper"), ("paper", "cites", "paper"),
                      ("venue", "hosts", "paper"), ("paper", "written_by", "author"),
                      ("author", "knows", "author")]:
        src, _, dst = edge_type
        if kind == "mixed" and edge_type == ("venue", "hosts", "paper"):
            convs[edge_type] = module.GraphConv((widths[src], widths[dst]), 5)
        elif kind == "mixed_aggr" and edge_type == ("paper", "cites", "paper"):
            convs[edge_type] = module.SAGEConv((widths[src], widths[dst]), 5, aggr="sum")
        else:
            convs[edge_type] = module.SAGEConv((widths[src], widths[dst]), 5)
    return convs


def pair(kind: str, aggr, widths=None):
    torch.manual_seed(0)
    ref = pnn.HeteroConv(layers(pnn, kind, widths), aggr=aggr).double()
    ours = inn.HeteroConv(layers(inn, kind, widths), aggr=aggr).double()
    ours.load_state_dict(ref.state_dict())
    return ours, ref


def run(model, x, edges):
    x = {k: v.clone().requires_grad_() for k, v in x.items()}
    out = model(x, edges)
    loss = sum((v * torch.arange(v.numel(), dtype=v.dtype).view_as(v)).sum() for v in out.values())
    loss.backward()
    return out, {k: v.grad for k, v in x.items()}, {n: p.grad for n, p in model.named_parameters()}


@pytest.mark.parametrize("kind", ["sage", "mixed", "mixed_aggr"])
@pytest.mark.parametrize("aggr", ["sum", "mean", "max", "cat", None])
@pytest.mark.parametrize("empty", [(), (("venue", "hosts", "paper"),)], ids=["full", "empty_rel"])
def test_matches_pyg(kind, aggr, empty):
    ours, ref = pair(kind, aggr)
    x, edges = hetero_inputs(1, empty)
    (o1, gx1, gp1), (o2, gx2, gp2) = run(ours, x, edges), run(ref, x, edges)
    assert list(o1) == list(o2)  # same destination types, in the same order
    for k in o2:
        torch.testing.assert_close(o1[k], o2[k])
    for k in gx2:
        if gx2[k] is None:
            assert gx1[k] is None
        else:
            torch.testing.assert_close(gx1[k], gx2[k])
    for k in gp2:
        torch.testing.assert_close(gp1[k], gp2[k], msg=k)


def test_bipartite_widths_and_state_dict_both_ways():
    widths = {"paper": 6, "author": 4, "venue": 4}
    ours, ref = pair("sage", "sum", widths)
    assert list(ours.state_dict()) == list(ref.state_dict())
    ref.load_state_dict(ours.state_dict())
    x, edges = hetero_inputs(2, widths=widths)
    out, ref_out = ours(x, edges), ref(x, edges)
    for k in ref_out:
        torch.testing.assert_close(out[k], ref_out[k])


def test_fused_groups_are_the_sage_relations_of_one_destination():
    ours, _ = pair("mixed", "sum")
    x, edges = hetero_inputs(3)
    groups = ours._fused_groups(x, edges)
    assert sorted(groups.values()) == sorted([
        [("author", "writes", "paper"), ("paper", "cites", "paper")],
        [("paper", "written_by", "author"), ("author", "knows", "author")]])


def test_typed_graph_cached_until_an_edge_index_changes():
    ours, ref = pair("sage", "sum")
    x, edges = hetero_inputs(4)
    ours(x, edges)
    cached = {k: v[3] for k, v in ours._typed.items()}
    ours(x, edges)
    assert all(ours._typed[k][3] is tg for k, tg in cached.items())
    edges[("author", "writes", "paper")][0, 0] = 6  # in place: a new version
    out = ours(x, edges)
    key = next(k for k in cached if ("author", "writes", "paper") in k)
    assert ours._typed[key][3] is not cached[key]
    torch.testing.assert_close(out["paper"], ref(x, edges)["paper"])


def test_extra_arguments_run_the_pyg_loop():
    ours, ref = pair("sage", "mean")
    x, edges = hetero_inputs(5)
    size = {k: (NODES[k[0]], NODES[k[2]]) for k in edges}  # a third argument dictionary
    out, ref_out = ours(x, edges, size), ref(x, edges, size)
    for k in ref_out:
        torch.testing.assert_close(out[k], ref_out[k])
    assert ours._typed == {}  # nothing fused
    with pytest.raises(ValueError, match="need to end with '_dict'"):
        ours(x, edges, size=size)


@pytest.mark.cuda
def test_cuda_matches_pyg_without_sync_once_cached():
    ours, ref = pair("mixed", "sum")
    ours, ref = ours.cuda(), ref.cuda()
    x, edges = hetero_inputs(6)
    x = {k: v.cuda() for k, v in x.items()}
    edges = {k: v.cuda() for k, v in edges.items()}
    out = ours(x, edges)  # builds and caches the typed graphs
    ref_out = ref(x, edges)
    for k in ref_out:
        torch.testing.assert_close(out[k], ref_out[k])
    fused = pair("sage", "sum")[0].cuda()
    fused(x, edges)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        again = fused(x, edges)
        sum(v.sum() for v in again.values()).backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
