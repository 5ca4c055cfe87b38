"""Shared fixtures: graphs covering the edge cases every op is tested on, and the real datasets."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

import iognn  # noqa: F401  (loads the operator library)


def data_dir() -> Path:
    """Folder of the real datasets: $IOGNN_DATA, else ../shared/data beside the checkout."""
    env = os.environ.get("IOGNN_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "shared" / "data"


def random_edge_index(num_src: int, num_dst: int, num_edges: int, generator: torch.Generator,
                      dtype=torch.int64) -> torch.Tensor:
    src = torch.randint(0, max(num_src, 1), (num_edges,), generator=generator)
    dst = torch.randint(0, max(num_dst, 1), (num_edges,), generator=generator)
    return torch.stack([src, dst]).to(dtype)


def graph_cases():
    """(name, edge_index, size) triples: size is N (square) or (num_src, num_dst) (bipartite).

    Covers: empty graph, isolated nodes, self-loops, duplicate edges, a 5,000-in-edge super-node,
    bipartite graphs, int32 and int64 indices, a non-contiguous edge_index.
    """
    g = torch.Generator().manual_seed(1234)
    cases = []
    cases.append(("empty", torch.empty(2, 0, dtype=torch.int64), 5))
    cases.append(("no_nodes", torch.empty(2, 0, dtype=torch.int64), 0))
    ei = random_edge_index(30, 30, 120, g)
    cases.append(("random", ei, 30))
    cases.append(("random_int32", ei.to(torch.int32), 30))
    # Isolated nodes: only nodes < 10 have edges among 40.
    cases.append(("isolated", random_edge_index(10, 10, 40, g), 40))
    # Self-loops and duplicate edges (each edge repeated, plus loops on a few nodes).
    base = random_edge_index(12, 12, 30, g)
    loops = torch.arange(0, 12, 3).repeat(2, 1)
    cases.append(("loops_duplicates", torch.cat([base, base[:, :10], loops, loops[:, :2]], 1), 12))
    # Super-node: node 0 receives 5,000 edges.
    hub_src = torch.randint(0, 600, (5000,), generator=g)
    hub = torch.stack([hub_src, torch.zeros_like(hub_src)])
    cases.append(("supernode", torch.cat([hub, random_edge_index(600, 600, 900, g)], 1), 600))
    # Bipartite: 25 sources, 9 destinations (and the other way round).
    cases.append(("bipartite", random_edge_index(25, 9, 70, g), (25, 9)))
    cases.append(("bipartite_wide", random_edge_index(7, 31, 50, g, torch.int32), (7, 31)))
    # Non-contiguous edge_index: every other column of a wider tensor.
    wide = random_edge_index(20, 20, 160, g)
    cases.append(("strided", wide[:, ::2], 20))
    return cases


GRAPH_CASES = graph_cases()


@pytest.fixture(params=GRAPH_CASES, ids=[c[0] for c in GRAPH_CASES])
def graph_case(request):
    return request.param


def sizes(size):
    """(num_src, num_dst) of a case's size."""
    return tuple(size) if isinstance(size, tuple) else (size, size)


def tolerance(dtype):
    """(rtol, atol) for comparing a result in `dtype` with an fp32/fp64 reference."""
    return {
        torch.float64: (1e-9, 1e-9),
        torch.float32: (1e-4, 1e-5),
        torch.float16: (1e-2, 1e-2),
        torch.bfloat16: (3e-2, 3e-2),
    }[dtype]


def load_real_graph(name: str):
    """(edge_index [2, E] int64, num_nodes) of a real graph's topology; skips when it is absent."""
    from iognn.bench.datasets import load_edges
    root = data_dir()
    if not (root / name).exists():
        pytest.skip(f"real dataset '{name}' not found under {root} (set IOGNN_DATA)")
    return load_edges(name, str(root))


def pytest_collection_modifyitems(config, items):
    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="no CUDA device (these run in scripts/gpu_check.sh)")
        for item in items:
            if "cuda" in item.keywords:
                item.add_marker(skip)


def tie_counts(ties: torch.Tensor, wide: torch.Tensor, rowptr: torch.Tensor) -> torch.Tensor:
    """The holder counts [num_dst, n, F] (int64) that segment_reduce's tie codes stand for.

    A code with bit 15 clear names a sole holder (count 1); otherwise its low 15 bits are the
    count, 0x7FFF meaning "see row rowptr[i] // 0x7FFF of the wide table" (segment_extremum.h).
    """
    code = tie_codes(ties)
    counts = torch.where(code < 0x8000, torch.ones_like(code), code & 0x7FFF)
    saturated = counts == 0x7FFF
    if saturated.any():
        dst, ext, f = saturated.nonzero(as_tuple=True)
        slot = rowptr.long().to(code.device)[dst] // 0x7FFF
        counts[dst, ext, f] = wide[ext, slot, f]
    return counts


def tie_codes(ties: torch.Tensor) -> torch.Tensor:
    """segment_reduce's 16-bit tie codes [num_dst, n, F] (int64) from their two byte planes
    ``ties [2, num_dst, n, F]``: lead = tag bit and payload bits 0-6, rest = payload bits 7-14."""
    lead, rest = ties[0].long(), ties[1].long()
    return ((lead & 0x80) << 8) | (rest << 7) | (lead & 0x7F)


def long_tie_rows(dtype=torch.float64):
    """(edge_index, x) past the limits of the 16-bit tie codes (kernels/segment_extremum.h).

    Destinations 0 and 1 have 40,000 in-edges each (sources 0..39,999, so an edge's position in
    its row is its source). Feature 0 is 1.0 everywhere: both rows hold 40,000 ties, past the
    0x7FFF a code counts, so their exact counts go to wide-table rows 0 and 1. Feature 1 is
    |source - 36,000| + 1: the min is held by position 36,000 alone, past the 2^15 positions a
    code names (tagged with count 1), the max by position 0 (a sole-holder code). Destination 2
    has three in-edges.
    """
    n = 40_000
    src = torch.arange(n)
    ei = torch.cat([torch.stack([src, torch.zeros(n, dtype=torch.long)]),
                    torch.stack([src, torch.ones(n, dtype=torch.long)]),
                    torch.tensor([[5, 9, 36_000], [2, 2, 2]])], 1)
    x = torch.stack([torch.ones(n, dtype=torch.float64),
                     (src - 36_000).abs().double() + 1], 1).to(dtype)
    return ei, x


@pytest.fixture
def iognn_cache(tmp_path_factory, monkeypatch):
    """The dataset cache ($IOGNN_CACHE) in the session's temporary folder, shared by its tests."""
    monkeypatch.setenv("IOGNN_CACHE", str(tmp_path_factory.getbasetemp() / "iognn-cache"))


def train_report(tmp_path, *argv) -> dict:
    """Runs ``iognn train *argv`` in process (status 0 asserted); returns its JSON report."""
    import json

    from iognn.cli import main
    path = tmp_path / "report.json"
    assert main(["train", "--json", str(path), *argv]) == 0
    return json.loads(path.read_text())


def compared_results(report: dict, table: str, columns) -> dict:
    """``{implementation: result}`` of a ``--compare pyg`` training report, after checking that
    the printed ``table`` has ``columns``, that both implementations ran and that they trained
    on the same batches (equal digests, and the table says so)."""
    for column in columns:
        assert column in table
    assert "batches: the same for every implementation" in table
    results = {r["implementation"]: r for r in report["results"]}
    assert set(results) == {"iognn", "pyg"}
    assert results["iognn"]["batch_digest"] == results["pyg"]["batch_digest"]
    return results


@pytest.fixture
def allow_tf32():
    """TF32 allowed for the test (the Tensor Core tile paths take fp32 only then), restored after."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    yield
    torch.backends.cuda.matmul.allow_tf32 = before
