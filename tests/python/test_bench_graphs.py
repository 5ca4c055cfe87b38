"""Benchmark graph generators and loaders (iognn.bench.graphs / iognn.bench.datasets)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from iognn.bench import datasets
from iognn.bench.graphs import degree_stats, generate, load_graph

# spec -> (exact N, upper bound on E); every generator promises no loops and no duplicates
SPECS = {
    "powerlaw:3000:6": (3000, 3000 * 6 * 1.1),  # Poissonised: the draw count itself varies a little
    "powerlaw:3000:6:2.8": (3000, 3000 * 6 * 1.1),
    "uniform:3000:6": (3000, 3000 * 6),
    "grid:1024": (1024, 4 * 1024),
    "grid:1000": (961, 4 * 961),  # rounded down to 31 x 31
    "grid:400:shuffle": (400, 4 * 400),
    "mesh3d:1000": (1000, 6 * 1000),
    "mesh3d:999": (729, 6 * 729),  # rounded down to 9 x 9 x 9
    "mesh3d:512:shuffle": (512, 6 * 512),
    "sbm:3000:6:5:1": (3000, 3000 * 6),
    "rmat:11:8": (2048, 2048 * 8),
    "batch:50:40:4": (2000, 2000 * 4),
}


def edge_keys(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    return edge_index[0] * num_nodes + edge_index[1]


@pytest.mark.parametrize("spec", sorted(SPECS))
def test_generator_contract(spec):
    num_nodes, max_edges = SPECS[spec]
    edge_index, n = generate(spec, seed=3)
    assert n == num_nodes
    assert edge_index.dtype == torch.int64 and edge_index.dim() == 2 and edge_index.size(0) == 2
    e = edge_index.size(1)
    assert 0.5 * max_edges / 1.1 < e <= max_edges
    assert int(edge_index.min()) >= 0 and int(edge_index.max()) < n
    assert not bool((edge_index[0] == edge_index[1]).any()), "self-loops"
    keys = edge_keys(edge_index, n)
    assert bool((keys[1:] > keys[:-1]).all()), "edges must be unique and sorted by (source, target)"


@pytest.mark.parametrize("spec", sorted(SPECS))
def test_generator_is_deterministic_by_seed(spec):
    a, _ = generate(spec, seed=11)
    b, _ = generate(spec, seed=11)
    assert torch.equal(a, b)
    c, _ = generate(spec, seed=12)
    if spec.startswith(("grid", "mesh3d")) and not spec.endswith("shuffle"):
        assert torch.equal(a, c)  # the lattice has no randomness
    else:
        assert not torch.equal(a, c)


def test_uniform_keeps_almost_every_draw():
    edge_index, n = generate("uniform:20000:8", seed=0)
    assert 0.99 * n * 8 <= edge_index.size(1) <= n * 8
    deg = torch.bincount(edge_index[1], minlength=n).float()
    assert abs(deg.mean().item() - 8) < 0.1 and deg.max().item() < 40  # no super-nodes


def tail_exponent(edge_index: torch.Tensor, num_nodes: int) -> float:
    """Degree exponent from a log-log regression of the in-degree CCDF over its tail (degrees from
    3x the mean while at least 50 nodes remain): P(K >= k) ~ k^-(exponent - 1)."""
    deg = torch.bincount(edge_index[1], minlength=num_nodes).numpy()
    ks = np.unique(np.logspace(np.log10(max(3 * deg.mean(), 5)), np.log10(deg.max()), 30).astype(int))
    ccdf = np.array([(deg >= k).mean() for k in ks])
    keep = ccdf * num_nodes >= 50
    assert keep.sum() >= 8, "tail too short to fit"
    slope = np.polyfit(np.log(ks[keep]), np.log(ccdf[keep]), 1)[0]
    return 1.0 - slope


@pytest.mark.parametrize("exponent", [2.1, 2.5, 3.0])
def test_powerlaw_degree_exponent(exponent):
    edge_index, n = generate(f"powerlaw:60000:10:{exponent}", seed=1)
    assert abs(tail_exponent(edge_index, n) - exponent) < 0.3
    stats = degree_stats(edge_index, n)
    assert stats["in_degree_max"] > 20 * stats["in_degree_mean"]  # heavy tail, super-nodes


def test_powerlaw_default_exponent_and_edge_loss():
    edge_index, n = generate("powerlaw:60000:10", seed=2)
    assert abs(tail_exponent(edge_index, n) - 2.1) < 0.3
    # hub-to-hub duplicates are dropped: E below N*avgdeg, but not by much
    assert 0.7 * n * 10 < edge_index.size(1) < n * 10


LATTICES = [("grid", 2, 12), ("mesh3d", 3, 7)]  # (kind, dimensions, side)


@pytest.mark.parametrize("kind, dims, side", LATTICES, ids=[k for k, _, _ in LATTICES])
def test_lattice_degrees(kind, dims, side):
    edge_index, n = generate(f"{kind}:{side ** dims + 5}", seed=0)  # rounded down to side^dims
    assert n == side ** dims
    assert edge_index.size(1) == 2 * dims * side ** (dims - 1) * (side - 1)
    deg_in = torch.bincount(edge_index[1], minlength=n).view((side,) * dims)
    deg_out = torch.bincount(edge_index[0], minlength=n).view((side,) * dims)
    assert torch.equal(deg_in, deg_out)
    # a node has 2 neighbours along each axis, 1 along each axis where it lies on the border
    coords = torch.stack(torch.meshgrid(*[torch.arange(side)] * dims, indexing="ij"))
    on_border = ((coords == 0) | (coords == side - 1)).sum(0)
    assert torch.equal(deg_in, 2 * dims - on_border)
    assert bool((deg_in[(slice(1, -1),) * dims] == 2 * dims).all())  # interior
    assert int((deg_in == dims).sum()) == 2 ** dims  # the corners
    # both directions of every edge, neighbours one step apart on the lattice
    keys = set(edge_keys(edge_index, n).tolist())
    assert all(d * n + s in keys for s, d in edge_index.t().tolist())
    steps = torch.zeros(edge_index.size(1), dtype=torch.long)
    for axis in range(dims):
        coord = edge_index // side ** axis % side
        steps += (coord[0] - coord[1]).abs()
    assert bool((steps == 1).all())


@pytest.mark.parametrize("kind, dims, side", LATTICES, ids=[k for k, _, _ in LATTICES])
def test_lattice_shuffle_relabels_the_nodes(kind, dims, side):
    """``:shuffle`` is the lattice with its node ids permuted by ``randperm`` of the seed: the
    same graph, its row-major locality gone."""
    n = side ** dims
    plain, _ = generate(f"{kind}:{n}", seed=0)
    shuffled, count = generate(f"{kind}:{n}:shuffle", seed=9)
    assert count == n and shuffled.size(1) == plain.size(1)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(9))
    relabelled = torch.sort(edge_keys(perm[plain], n)).values
    assert torch.equal(relabelled, edge_keys(shuffled, n))
    # row-major ids put lattice neighbours at most side^(dims-1) apart; shuffled ids do not
    assert int((plain[0] - plain[1]).abs().max()) == side ** (dims - 1)
    assert float((shuffled[0] - shuffled[1]).abs().float().mean()) > n / 5


def test_batch_block_structure():
    graphs, nodes = 30, 25
    edge_index, n = generate(f"batch:{graphs}:{nodes}:3", seed=4)
    assert n == graphs * nodes
    assert torch.equal(edge_index[0] // nodes, edge_index[1] // nodes)  # no edge between graphs
    per_graph = torch.bincount(edge_index[0] // nodes, minlength=graphs)
    assert bool((per_graph > 0).all())  # every small graph has edges


def test_sbm_block_fractions():
    n, blocks, deg_in, deg_out = 20000, 8, 6.0, 2.0
    edge_index, _ = generate(f"sbm:{n}:{blocks}:{deg_in}:{deg_out}", seed=5)
    start = torch.arange(blocks + 1) * n // blocks  # contiguous blocks
    block_of = torch.bucketize(edge_index, start[1:-1], right=True)
    intra = (block_of[0] == block_of[1]).float().mean().item()
    assert abs(intra - deg_in / (deg_in + deg_out)) < 0.02
    assert abs(edge_index.size(1) / n - (deg_in + deg_out)) < 0.1


def test_rmat_is_skewed():
    edge_index, n = generate("rmat:14:16", seed=6)
    assert n == 1 << 14
    stats = degree_stats(edge_index, n)
    assert 0.6 * n * 16 < stats["num_edges"] <= n * 16
    assert stats["in_degree_max"] > 30 * stats["in_degree_mean"]
    # a=0.57 > d=0.05: low ids (before the permutation) dominate, so degrees are very uneven
    assert stats["in_degree_p50"] < stats["in_degree_mean"]


def test_degree_stats_exact():
    # in-degrees: node0 1, node1 2, node2 0, node3 5 ; out-degrees: node0 4, node1 2, node2 2
    src = torch.tensor([0, 0, 0, 0, 1, 1, 2, 2])
    dst = torch.tensor([1, 3, 3, 3, 3, 0, 1, 3])
    stats = degree_stats(torch.stack([src, dst]), 5)
    assert stats == {"num_nodes": 5, "num_edges": 8, "in_degree_max": 5, "in_degree_mean": 1.6,
                     "in_degree_p50": 1, "in_degree_p99": 5, "out_degree_max": 4,
                     "out_degree_p99": 4, "isolated_nodes": 1}
    assert degree_stats(torch.empty(2, 0, dtype=torch.long), 0)["in_degree_max"] == 0


@pytest.mark.parametrize("spec, message", [
    ("cube:10", "unknown graph generator"),
    ("uniform:10", "takes 2 fields"),
    ("powerlaw:10:2:2:2", "takes 2 to 3 fields"),
    ("uniform:ten:2", "uniform:ten:2"),
    ("grid:0", "positive"),
    ("grid:100:shuffled", "expected 'shuffle' as the last field, got 'shuffled'"),
    ("mesh3d:100:shuffle:1", "takes 1 to 2 fields"),
    ("powerlaw:100:4:0.5", "exponent must be > 1"),
    ("sbm:10:20:1:1", "blocks"),
    ("rmat:40:2", "scale"),
    ("no_such_dataset", "unknown graph"),
])
def test_bad_specs_raise(spec, message):
    with pytest.raises(ValueError, match=message):
        load_graph(spec)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("spec", ["powerlaw:5000:8", "uniform:5000:8", "rmat:12:8", "sbm:5000:4:4:2"])
def test_generators_run_on_cuda(spec):
    a, n = generate(spec, seed=1, device="cuda")
    b, _ = generate(spec, seed=1, device="cuda")
    assert a.is_cuda and torch.equal(a, b)
    keys = edge_keys(a, n)
    assert bool((keys[1:] > keys[:-1]).all()) and not bool((a[0] == a[1]).any())


# ---- real graphs ------------------------------------------------------------------------------
needs_data = pytest.mark.skipif(not (datasets.data_root() / "cora").is_dir(),
                                reason="real datasets absent (set IOGNN_DATA)")


@pytest.mark.data
@needs_data
@pytest.mark.parametrize("name, nodes, edges", [
    ("cora", 2708, 10556),            # PyG's Planetoid counts
    ("citeseer", 3327, 9104),
    ("amazon_photo", 7650, 238162),   # PyG's Amazon('Photo')
    ("tolokers", 11758, 1038000),
    ("road-minnesota", 2642, 6606),
    ("tu_mutag", 3371, 7442),
    ("twitch_PTBR", 1912, 62598),
])
def test_real_graphs_are_symmetric_and_simple(name, nodes, edges):
    edge_index, n = load_graph(name)
    assert (n, edge_index.size(1)) == (nodes, edges)
    keys = edge_keys(edge_index, n)
    assert bool((keys[1:] > keys[:-1]).all()) and not bool((edge_index[0] == edge_index[1]).any())
    reverse = torch.sort(edge_keys(edge_index.flip(0), n)).values
    assert torch.equal(keys, reverse)


@pytest.mark.data
@needs_data
def test_dataset_names_match_stats_json():
    stats = datasets.dataset_summary()
    assert set(datasets.DATASETS) <= set(stats)
    edge_index, n = load_graph("Cora")  # case-insensitive
    assert n == stats["cora"]["nodes"]


# name -> (nodes, stored (undirected) edges, maximum degree), as in the data folder's STATS.json
ROADS = {"road-usroads-48": (126146, 161950, 7), "road-usroads": (129164, 165435, 7),
         "road-luxembourg-osm": (114599, 119666, 6), "road-minnesota": (2642, 3303, 5)}


@pytest.mark.data
@pytest.mark.parametrize("name", sorted(ROADS))
def test_road_networks_load_as_bench_graphs(name):
    """The MatrixMarket road graphs (one triangle stored) as bench graphs: both directions of
    each stored edge, nothing else."""
    if not (datasets.data_root() / "road_networks" / f"{name}.mtx").is_file():
        pytest.skip(f"{name} absent from the data folder (set IOGNN_DATA)")
    nodes, stored, max_degree = ROADS[name]
    edge_index, n = load_graph(name)
    assert (n, edge_index.size(1)) == (nodes, 2 * stored)
    assert degree_stats(edge_index, n)["in_degree_max"] == max_degree
    keys = edge_keys(edge_index, n)
    assert torch.equal(keys, torch.sort(edge_keys(edge_index.flip(0), n)).values)


def test_missing_data_folder_is_reported(tmp_path):
    with pytest.raises(datasets.DatasetUnavailable, match="IOGNN_DATA"):
        load_graph("cora", data_dir=str(tmp_path))
