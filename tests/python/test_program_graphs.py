"""iognn.program_graphs: determinism by seed, sizes, edge-type ranges and reverses, the
VarMisuse target (candidates, label, slot isolated from the data flow), locality and batching."""
import pytest
import torch
from torch_geometric.loader import DataLoader

from iognn import program_graphs as pg

P = 8


@pytest.fixture(scope="module")
def graphs():
    return pg.program_graphs(12, num_edge_types=P, min_nodes=100, max_nodes=1500, seed=3)


def same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a.keys()
                                        if isinstance(a[k], torch.Tensor))


def test_deterministic_by_seed_and_prefix_stable(graphs):
    again = pg.program_graphs(12, num_edge_types=P, min_nodes=100, max_nodes=1500, seed=3)
    assert all(same(a, b) for a, b in zip(graphs, again))
    prefix = pg.program_graphs(5, num_edge_types=P, min_nodes=100, max_nodes=1500, seed=3)
    assert all(same(a, b) for a, b in zip(graphs, prefix))
    other = pg.program_graphs(5, num_edge_types=P, min_nodes=100, max_nodes=1500, seed=4)
    assert not all(same(a, b) for a, b in zip(graphs, other))


def test_sizes_within_range(graphs):
    counts = [g.num_nodes for g in graphs]
    assert all(100 <= n <= 1500 for n in counts)
    assert len(set(counts)) > 1
    for g in graphs:
        assert g.x.shape == (g.num_nodes,) and g.x.dtype == torch.long
        assert 0 <= int(g.x.min()) and int(g.x.max()) < pg.VOCAB_SIZE
        assert g.edge_index.shape == (2, g.edge_type.numel())
        assert int(g.edge_index.min()) >= 0 and int(g.edge_index.max()) < g.num_nodes
    exact = pg.program_graphs(3, num_edge_types=P, min_nodes=700, max_nodes=700, seed=0)
    assert [g.num_nodes for g in exact] == [700] * 3


@pytest.mark.parametrize("num_edge_types", [1, 2, 4, 6, 10, 20])
def test_edge_types_and_reverses(num_edge_types):
    names = pg.edge_type_names(num_edge_types)
    assert len(names) == 2 * num_edge_types
    assert names[num_edge_types:] == ["rev_" + n for n in names[:num_edge_types]]
    for g in pg.program_graphs(3, num_edge_types=num_edge_types, min_nodes=300, max_nodes=600,
                               seed=1):
        et = g.edge_type
        assert et.dtype == torch.long
        assert 0 <= int(et.min()) and int(et.max()) < 2 * num_edge_types
        forward = et < num_edge_types
        half = int(forward.sum())
        assert 2 * half == et.numel() and bool(forward[:half].all())
        # every forward edge (s, d, r) has its reverse (d, s, r + P), in the same position
        torch.testing.assert_close(g.edge_index[:, half:], g.edge_index[:, :half].flip(0))
        torch.testing.assert_close(et[half:], et[:half] + num_edge_types)
    present = set(et.tolist())
    assert {0, num_edge_types} <= present  # Child and its reverse
    if num_edge_types >= 2:
        assert names.index("NextToken") in present


def test_tree_edges_form_a_preorder_tree(graphs):
    names = pg.edge_type_names(P)
    child = [i for i, n in enumerate(names) if n.startswith("Child")]
    for g in graphs:
        mask = torch.isin(g.edge_type, torch.tensor(child))
        src, dst = g.edge_index[:, mask]
        assert torch.equal(dst.sort().values, torch.arange(1, g.num_nodes))  # one parent each
        assert bool((src < dst).all())  # pre-order numbering


CHILD_KINDS = P - 5  # Child_0 .. Child_rest


def parent_of(g, node):
    into = (g.edge_index[1] == node) & (g.edge_type < CHILD_KINDS)
    return int(g.edge_index[0, into][0])


def children_of(g, node):
    out = (g.edge_index[0] == node) & (g.edge_type < CHILD_KINDS)
    return g.edge_index[1, out].sort().values.tolist()


def variable_type(g, node):
    """The variable type of a node read off the typed graph: operators, literals and type tokens
    carry it; an identifier takes its declaration's or assigned expression's, or its last
    write's (a bare call argument or condition)."""
    token = int(g.x[node])
    if pg._OP0 <= token < pg._LIT0:
        return (token - pg._OP0) // pg.OPS_PER_TYPE
    if pg._LIT0 <= token < pg._FN0:
        return token - pg._LIT0
    if pg._TYPE0 <= token < pg._OP0:
        return token - pg._TYPE0
    parent = parent_of(g, node)
    kind = pg.SYNTAX[int(g.x[parent])] if int(g.x[parent]) < len(pg.SYNTAX) else "Op"
    if kind == "Op":
        return variable_type(g, parent)
    if kind == "Decl":
        return variable_type(g, children_of(g, parent)[0])
    if kind == "Assign" and children_of(g, parent)[0] == node:
        return variable_type(g, children_of(g, parent)[1])
    write = (g.edge_index[1] == node) & (g.edge_type == pg.edge_type_names(P).index("LastWrite"))
    return variable_type(g, int(g.edge_index[0, write][0]))


def test_varmisuse_target(graphs):
    names = pg.edge_type_names(P)
    flow = [names.index(k) for k in ("LastUse", "LastWrite", "ComputedFrom")]
    flow += [k + P for k in flow]
    slot_token = pg.SYNTAX.index("SLOT")
    labels = set()
    for g in graphs:
        slot = int(g.slot_index)
        assert g.candidate_index.shape == (4,) and g.y.shape == (1,)
        assert int(g.x[slot]) == slot_token and int((g.x == slot_token).sum()) == 1
        assert 0 <= int(g.y) < 4
        labels.add(int(g.y))
        cands = g.candidate_index
        assert len(set(cands.tolist())) == 4 and bool((cands < slot).all())
        assert all(int(g.x[c]) >= pg.VOCAB_SIZE - pg.NUM_NAMES for c in cands)  # identifiers
        touching = (g.edge_index == slot).any(0)
        assert not bool(torch.isin(g.edge_type[touching], torch.tensor(flow)).any())
        # the slot's parent is an operator, whose type the right candidate alone has
        required = variable_type(g, parent_of(g, slot))
        types = [variable_type(g, int(c)) for c in cands]
        assert [t == required for t in types] == [i == int(g.y) for i in range(4)]
    assert len(labels) > 1


def test_locality(graphs):
    stats = pg.statistics(graphs)
    assert stats["mean_span"] < stats["nodes"] / 8


def test_batches_offset_the_node_indices(graphs):
    batch = next(iter(DataLoader(graphs[:3], batch_size=3)))
    offsets = [0, graphs[0].num_nodes, graphs[0].num_nodes + graphs[1].num_nodes]
    assert batch.candidate_index.view(3, 4).tolist() == [
        (g.candidate_index + o).tolist() for g, o in zip(graphs, offsets)]
    assert batch.slot_index.tolist() == [int(g.slot_index) + o for g, o in zip(graphs, offsets)]
    assert batch.y.shape == (3,)


@pytest.mark.parametrize("kwargs", [dict(min_nodes=10), dict(min_nodes=500, max_nodes=400),
                                    dict(num_edge_types=0), dict(num_candidates=1),
                                    dict(min_nodes=64, num_candidates=12)])
def test_bad_arguments_raise(kwargs):
    with pytest.raises(ValueError):
        pg.program_graphs(1, **kwargs)
