"""iognn.distributed.partition: every method and METIS backend on random graphs (uniform, powerlaw,
SBM, a multigraph with self-loops, duplicates and isolated nodes), 1 to 4 parts, checked against
the layout's definitions recomputed here with plain torch; then inputs, determinism, the
fingerprint and the errors."""
from __future__ import annotations

import dataclasses
import sys

import pytest
import torch

from iognn.bench import graphs
from iognn.distributed import LocalGraph, Partition, partition
from iognn.distributed import metis as metis_module


def multigraph(num_nodes: int = 120, seed: int = 0):
    """Duplicates, self-loops, unsorted edges and isolated nodes (ids >= num_nodes - 10)."""
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, num_nodes - 10, (2, 4 * num_nodes), generator=g)
    loops = torch.arange(0, num_nodes - 10, 7).repeat(2, 1)
    return torch.cat([ei, ei[:, :50], loops], dim=1), num_nodes


GRAPHS = {
    "uniform": lambda: graphs.uniform(300, 4, seed=1),
    "powerlaw": lambda: graphs.powerlaw(300, 4, seed=2),
    "sbm": lambda: graphs.sbm(300, 4, 6, 1, seed=3),
    "multigraph": multigraph,
}
# (method, backend or the given assignment's rule)
METHODS = [("metis", "libmetis"), ("metis", "pymetis"), ("random", None), ("given", None)]


def given_parts(num_nodes: int, num_parts: int) -> torch.Tensor:
    """An unbalanced assignment that leaves the last part empty when there are 3 or more."""
    g = torch.Generator().manual_seed(num_parts)
    used = num_parts - 1 if num_parts >= 3 else num_parts
    return torch.randint(0, used, (num_nodes,), generator=g)


def run(edge_index, num_nodes, num_parts, method, backend, **kwargs) -> Partition:
    if method == "given":
        return partition(edge_index, num_parts, None, num_nodes=num_nodes,
                         parts=given_parts(num_nodes, num_parts), **kwargs)
    return partition(edge_index, num_parts, method, num_nodes=num_nodes,
                     backend=backend or "auto", **kwargs)


def check_layout(p: Partition, edge_index: torch.Tensor, num_nodes: int) -> None:
    """Recomputes every part's layout from the definitions and compares."""
    src, dst = edge_index.long().cpu()
    parts, P, N = p.parts, p.num_parts, num_nodes
    assert parts.dtype == torch.int64 and parts.shape == (N,)
    assert int(parts.min()) >= 0 and int(parts.max()) < P
    cut = parts[src] != parts[dst]
    assert p.edge_cut == int(cut.sum())
    boundary = torch.zeros(N, dtype=torch.bool)
    boundary[src[cut]] = True
    boundary[dst[cut]] = True
    in_degree = torch.bincount(dst, minlength=N)
    locals_ = [p.local(r) for r in range(P)]
    times_seen = torch.zeros(src.numel(), dtype=torch.int64)
    for r, lg in enumerate(locals_):
        assert isinstance(lg, LocalGraph)
        assert (lg.rank, lg.num_parts, lg.num_nodes_global, lg.fingerprint) == (
            r, P, N, p.fingerprint)
        mine = parts == r
        interior = torch.nonzero(mine & ~boundary).flatten()
        border = torch.nonzero(mine & boundary).flatten()
        assert torch.equal(lg.owned_nodes, torch.cat([interior, border]))
        assert (lg.num_owned, lg.num_interior) == (int(mine.sum()), interior.numel())
        # halo: sources of r's edges owned elsewhere, by (owner, owner's local order); a halo node
        # is on its owner's boundary, where the local order is the global id's
        into_r = torch.nonzero(parts[dst] == r).flatten()
        halo = torch.unique(src[into_r][parts[src[into_r]] != r])
        halo = halo[torch.sort(parts[halo] * N + halo).indices]
        assert torch.equal(lg.halo_nodes, halo) and lg.num_halo == halo.numel()
        assert bool(boundary[halo].all())
        local_to_global = torch.cat([lg.owned_nodes, lg.halo_nodes])
        # edges: all of those into r, by local destination, input order within one
        local_of = torch.full((N,), -1, dtype=torch.int64)
        local_of[local_to_global] = torch.arange(local_to_global.numel())
        order = torch.sort(local_of[dst[into_r]], stable=True).indices
        assert torch.equal(lg.edge_ids, into_r[order])
        assert lg.edge_index.dtype == torch.int64 and lg.edge_index.shape == (2, into_r.numel())
        assert torch.equal(local_to_global[lg.edge_index[0]], src[lg.edge_ids])
        assert torch.equal(local_to_global[lg.edge_index[1]], dst[lg.edge_ids])
        assert bool((lg.edge_index[1] < lg.num_owned).all())
        times_seen[lg.edge_ids] += 1
        assert torch.equal(lg.in_degree, in_degree[local_to_global])
        assert lg.recv_counts == torch.bincount(parts[halo], minlength=P).tolist()
        assert lg.send_counts[r] == lg.recv_counts[r] == 0
        assert lg.send_index.numel() == sum(lg.send_counts)
    assert bool((times_seen == 1).all())
    assert p.halo_rows == sum(lg.num_halo for lg in locals_)
    # rank r's group for q lists the rows q receives from r, in q's halo order
    for r, lg in enumerate(locals_):
        sent = torch.split(lg.send_index, lg.send_counts)
        for q, other in enumerate(locals_):
            assert lg.send_counts[q] == other.recv_counts[r]
            begin = sum(other.recv_counts[:r])
            expected = other.halo_nodes[begin:begin + other.recv_counts[r]]
            assert torch.equal(lg.owned_nodes[sent[q]], expected)
            assert bool((sent[q] >= lg.num_interior).all())


@pytest.mark.parametrize("num_parts", [1, 2, 3, 4])
@pytest.mark.parametrize("method, backend", METHODS, ids=[m if b is None else f"{m}-{b}"
                                                          for m, b in METHODS])
@pytest.mark.parametrize("graph", list(GRAPHS))
def test_layout_matches_the_definitions(graph, method, backend, num_parts):
    edge_index, num_nodes = GRAPHS[graph]()
    p = run(edge_index, num_nodes, num_parts, method, backend)
    assert (p.num_parts, p.num_nodes, p.num_edges) == (num_parts, num_nodes, edge_index.size(1))
    assert p.method == method and p.backend == backend
    check_layout(p, edge_index, num_nodes)
    stats = p.stats()
    assert stats["owned"] == [p.local(r).num_owned for r in range(num_parts)]
    assert stats["halo_rows"] == p.halo_rows and stats["edge_cut"] == p.edge_cut
    assert sum(stats["edges"]) == edge_index.size(1) and stats["backend"] == backend
    assert stats["seconds"] >= stats["layout_seconds"] >= 0
    if method == "random":
        sizes = torch.bincount(p.parts, minlength=num_parts)
        assert int(sizes.max() - sizes.min()) <= 1
    check_own_layouts(p, edge_index, num_nodes)


def check_own_layouts(p: Partition, edge_index: torch.Tensor, num_nodes: int) -> None:
    """Each rank's layout built alone (``ranks=[r]``) equals the all-ranks one, with the same
    statistics, cut and fingerprint."""
    sized = ("edge_cut", "halo_rows", "owned", "interior", "boundary", "halo", "edges",
             "fingerprint")
    for r in range(p.num_parts):
        own = partition(edge_index, p.num_parts, num_nodes=num_nodes, parts=p.parts, ranks=[r])
        assert own.built_ranks == (r,)
        assert {k: own.stats()[k] for k in sized} == {k: p.stats()[k] for k in sized}
        mine, reference = own.local(r), p.local(r)
        for field in dataclasses.fields(LocalGraph):
            a, b = getattr(mine, field.name), getattr(reference, field.name)
            assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b, field.name
        for other in range(p.num_parts):
            if other != r:
                with pytest.raises(ValueError, match="not built"):
                    own.local(other)


def test_empty_part_and_edgeless_graph():
    parts = torch.tensor([0, 0, 2, 2, 0])
    p = partition(torch.empty(2, 0, dtype=torch.int64), 3, parts=parts)
    check_layout(p, torch.empty(2, 0, dtype=torch.int64), 5)
    check_own_layouts(p, torch.empty(2, 0, dtype=torch.int64), 5)
    empty = p.local(1)
    assert (empty.num_owned, empty.num_halo, empty.edge_index.shape) == (0, 0, (2, 0))
    assert p.edge_cut == p.halo_rows == 0 and p.local(0).num_interior == 3
    for method in ("metis", "random"):
        q = partition(torch.empty(2, 0, dtype=torch.int64), 3, method, num_nodes=7)
        check_layout(q, torch.empty(2, 0, dtype=torch.int64), 7)


def test_hand_made_graph():
    # 0 -> 1 -> 2 -> 3 plus a loop on 3 and a duplicate 1 -> 2; parts {0, 1} | {2, 3}
    ei = torch.tensor([[0, 1, 2, 3, 1], [1, 2, 3, 3, 2]])
    p = partition(ei, 2, parts=torch.tensor([0, 0, 1, 1]))
    a, b = p.local(0), p.local(1)
    assert a.owned_nodes.tolist() == [0, 1] and a.num_interior == 1 and a.num_halo == 0
    assert b.owned_nodes.tolist() == [3, 2] and b.num_interior == 1 and b.halo_nodes.tolist() == [1]
    # local ids 3 -> 0, 2 -> 1, 1 -> 2; node 3's in-edges first, each node's in input order
    assert b.edge_index.tolist() == [[1, 0, 2, 2], [0, 0, 1, 1]]
    assert b.edge_ids.tolist() == [2, 3, 1, 4]
    assert b.in_degree.tolist() == [2, 2, 1]
    assert a.send_index.tolist() == [1] and a.send_counts == [0, 1] and b.recv_counts == [1, 0]
    assert p.edge_cut == 2 and p.halo_rows == 1


def test_data_input_int32_and_num_nodes():
    from torch_geometric.data import Data
    edge_index, num_nodes = multigraph()
    data = Data(edge_index=edge_index, num_nodes=num_nodes)
    ref = partition(data, 3, "random", seed=5)
    assert ref.num_nodes == num_nodes  # the isolated trailing nodes count
    for other in (partition(edge_index.int(), 3, "random", num_nodes=num_nodes, seed=5),
                  partition(edge_index.t().contiguous().t(), 3, "random", num_nodes=num_nodes,
                            seed=5)):
        assert torch.equal(other.parts, ref.parts) and other.fingerprint == ref.fingerprint
        for r in range(3):
            assert torch.equal(other.local(r).edge_index, ref.local(r).edge_index)
    # without num_nodes, the largest index + 1 (or the length of parts)
    assert partition(edge_index, 2, "random").num_nodes == int(edge_index.max()) + 1
    assert partition(edge_index, 2, parts=torch.zeros(num_nodes, dtype=torch.int32)).num_nodes == \
        num_nodes


def has_metis() -> bool:
    try:
        import pymetis  # noqa: F401
        return True
    except ImportError:
        return metis_module.has_libmetis()


# The GPU machines have neither METIS backend (and no network to install one); the CPU tests above
# cover METIS itself, so here METIS runs where it is present and the random method everywhere.
@pytest.mark.cuda
@pytest.mark.parametrize("method", [
    "random", pytest.param("metis", marks=pytest.mark.skipif(not has_metis(), reason="no METIS"))])
def test_cuda_input_is_partitioned_on_the_cpu(method):
    edge_index, num_nodes = graphs.sbm(300, 4, 6, 1, seed=3)
    ref = partition(edge_index, 4, method, num_nodes=num_nodes)
    p = partition(edge_index.cuda(), 4, method, num_nodes=num_nodes)
    assert p.parts.device.type == "cpu" and torch.equal(p.parts, ref.parts)
    lg = p.local(2)
    assert lg.edge_index.device.type == "cpu"
    moved = lg.to("cuda")
    assert moved.edge_index.is_cuda and moved.send_index.is_cuda
    x = torch.randn(num_nodes, 3, device="cuda")
    assert torch.equal(moved.take(x).cpu(), x.cpu()[lg.owned_nodes])


def test_take_and_to():
    edge_index, num_nodes = GRAPHS["uniform"]()
    lg = partition(edge_index, 3, "random").local(1)
    x = torch.randn(num_nodes, 4)
    assert torch.equal(lg.take(x), x[lg.owned_nodes])
    moved = lg.to("cpu")
    assert moved is not lg and torch.equal(moved.halo_nodes, lg.halo_nodes)
    assert moved.send_counts == lg.send_counts and lg.num_local == lg.num_owned + lg.num_halo


@pytest.mark.parametrize("method, backend", METHODS[:3], ids=["libmetis", "pymetis", "random"])
def test_same_seed_same_parts(method, backend):
    edge_index, num_nodes = GRAPHS["powerlaw"]()
    a, b = (partition(edge_index, 4, method, seed=7, backend=backend or "auto") for _ in range(2))
    assert torch.equal(a.parts, b.parts) and a.fingerprint == b.fingerprint
    if method == "random":
        c = partition(edge_index, 4, method, seed=8)
        assert not torch.equal(a.parts, c.parts) and a.fingerprint != c.fingerprint


@pytest.mark.parametrize("backend", ["libmetis", "pymetis"])
def test_metis_cuts_an_sbm_along_its_blocks(backend):
    edge_index, num_nodes = graphs.sbm(2000, 4, 10, 0.5, seed=0)
    metis = partition(edge_index, 4, "metis", backend=backend)
    random = partition(edge_index, 4, "random")
    assert metis.edge_cut < random.edge_cut / 4
    sizes = torch.bincount(metis.parts, minlength=4)
    assert int(sizes.min()) > 0.9 * num_nodes / 4  # METIS balances within a few percent


def test_fingerprint_ignores_edge_order_but_not_the_graph():
    edge_index, num_nodes = multigraph()
    parts = given_parts(num_nodes, 3)
    ref = partition(edge_index, 3, parts=parts).fingerprint
    shuffled = edge_index[:, torch.randperm(edge_index.size(1))]
    assert partition(shuffled, 3, parts=parts).fingerprint == ref
    other_parts = parts.clone()
    other_parts[0] = (other_parts[0] + 1) % 3
    assert partition(edge_index, 3, parts=other_parts).fingerprint != ref
    assert partition(edge_index[:, 1:], 3, parts=parts, num_nodes=num_nodes).fingerprint != ref
    assert partition(edge_index, 3, parts=parts, num_nodes=num_nodes).fingerprint == ref
    assert partition(edge_index, 4, parts=parts).fingerprint != ref


def test_metis_backend_errors(monkeypatch):
    edge_index, num_nodes = GRAPHS["uniform"]()
    monkeypatch.setattr(metis_module, "has_libmetis", lambda: False)
    assert partition(edge_index, 2, "metis").backend == "pymetis"  # auto falls back
    with pytest.raises(RuntimeError, match="backend='libmetis'.*libmetis-dev"):
        partition(edge_index, 2, "metis", backend="libmetis")
    monkeypatch.setitem(sys.modules, "pymetis", None)
    with pytest.raises(RuntimeError, match="pip install pymetis.*libmetis-dev|libmetis-dev.*pymetis"):
        partition(edge_index, 2, "metis")
    assert partition(edge_index, 2, "random").method == "random"  # needs neither


ERRORS = [
    (dict(num_parts=0), ValueError, "num_parts"),
    (dict(num_parts=31), ValueError, "num_parts"),
    (dict(num_parts=2.0), TypeError, "num_parts"),
    (dict(num_parts=True), TypeError, "num_parts"),
    (dict(method="spectral"), ValueError, "method"),
    (dict(method="random", parts=torch.zeros(30, dtype=torch.int64)), ValueError, "method"),
    (dict(parts=torch.zeros(29, dtype=torch.int64)), ValueError, "parts"),
    (dict(parts=torch.zeros(30)), TypeError, "parts"),
    (dict(parts=[0] * 30), TypeError, "parts"),
    (dict(parts=torch.full((30,), 2)), ValueError, r"parts\[0\] = 2"),
    (dict(parts=torch.full((30,), -1)), ValueError, r"parts\[0\] = -1"),
    (dict(seed=-1), ValueError, "seed"),
    (dict(seed=2 ** 31), ValueError, "seed"),
    (dict(backend="scotch"), ValueError, "backend"),
    (dict(edge_index=torch.zeros(3, 4, dtype=torch.int64)), ValueError, "edge_index"),
    (dict(edge_index=torch.zeros(2, 4)), TypeError, "edge_index"),
    (dict(edge_index=torch.tensor([[0, 1], [1, 30]])), IndexError, r"edge_index\[1\]\[1\] = 30"),
    (dict(edge_index=torch.tensor([[0, -1], [1, 2]])), IndexError, r"edge_index\[0\]\[1\] = -1"),
    (dict(edge_index="edges"), TypeError, "data_or_edge_index"),
    (dict(num_nodes=-1), ValueError, "num_nodes"),
]


@pytest.mark.parametrize("kwargs, error, match", ERRORS,
                         ids=[f"{next(iter(k))}-{i}" for i, (k, _, _) in enumerate(ERRORS)])
@pytest.mark.parametrize("method", ["metis", "random"])
def test_bad_arguments_raise_naming_the_argument(kwargs, error, match, method):
    args = dict(edge_index=torch.tensor([[0, 1, 2], [1, 2, 0]]), num_parts=2, method=method,
                num_nodes=30)
    args.update(kwargs)
    if "parts" in args and "method" not in kwargs:
        args["method"] = None
    with pytest.raises(error, match=match):
        partition(args.pop("edge_index"), args.pop("num_parts"), **args)


def test_local_rejects_a_bad_rank():
    p = partition(torch.tensor([[0, 1], [1, 0]]), 2, "random")
    for rank in (-1, 2, 1.0):
        with pytest.raises(ValueError, match="rank"):
            p.local(rank)


@pytest.mark.parametrize("ranks, error", [([2], ValueError), ([-1], ValueError),
                                          ([0.0], ValueError), (1, TypeError)])
def test_bad_ranks_raise(ranks, error):
    with pytest.raises(error, match="ranks"):
        partition(torch.tensor([[0, 1], [1, 0]]), 2, "random", ranks=ranks)


def test_ranks_are_built_once_in_order():
    edge_index = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
    p = partition(edge_index, 4, "random", ranks=[3, 1, 3])
    assert p.built_ranks == (1, 3) and p.local(3).rank == 3
    none = partition(edge_index, 4, "random", ranks=())
    assert none.built_ranks == () and none.halo_rows == p.halo_rows > 0
