"""Edge lists of the real graphs in the data folder (read-only; see its README for the formats).

Only the topology is read. Every graph is returned as a simple directed graph: undirected graphs
stored once are symmetrised, and self-loops and duplicate edges are dropped, so the edge count is
twice the number of distinct undirected non-loop edges (cora: 10,556, as in PyG). The layers under
test add their own self-loops where their contract says so.

The folder is ``data_dir`` if given, else the first existing folder of
:func:`iognn.datasets.candidate_roots` (``$IOGNN_DATA``, then ``../shared/data`` beside the checkout).
"""
from __future__ import annotations

import gzip
import json
import pickle
import warnings
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

import numpy as np
import torch

from .._tools import require
from ..datasets import candidate_roots
from .graphs import simplify


class DatasetUnavailable(FileNotFoundError):
    """The data folder or the dataset's files are absent."""


def data_root(data_dir: Optional[str] = None) -> Path:
    roots = candidate_roots(data_dir)
    return next((r for r in roots if r.is_dir()), roots[0])


def _count_rows(path: Path) -> int:
    """Data rows of a CSV file with one header line."""
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip()) - 1


def _pairs(path: Path, skip_header: bool, delimiter=None, comments="#") -> np.ndarray:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        arr = np.loadtxt(f, dtype=np.int64, delimiter=delimiter, comments=comments,
                         skiprows=1 if skip_header else 0, ndmin=2, usecols=(0, 1))
    return arr


# ---- loaders: each returns (pairs [E, 2] int64 as stored, num_nodes) --------------------------
def _planetoid(root: Path, name: str):
    with open(root / name / f"ind.{name}.graph", "rb") as f:
        adjacency = pickle.load(f, encoding="latin1")  # {node: [neighbours]}
    src = np.fromiter((u for u, vs in adjacency.items() for _ in vs), dtype=np.int64)
    dst = np.fromiter((v for vs in adjacency.values() for v in vs), dtype=np.int64)
    num_nodes = max(len(adjacency), int(src.max(initial=-1)) + 1, int(dst.max(initial=-1)) + 1)
    return np.stack([src, dst], axis=1), num_nodes


def _npz_adjacency(root: Path, folder: str, file: str):
    require(f"reading {file}", ("scipy",))  # the matrices are pickled scipy.sparse ones
    with np.load(root / folder / file, allow_pickle=True) as data, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # pickled from scipy.sparse.csr
        adj = data["adj_matrix"].item().tocoo()  # a pickled scipy.sparse matrix
    return np.stack([adj.row, adj.col], axis=1).astype(np.int64), int(adj.shape[0])


def _musae(root: Path, folder: str, edges: str, target: str):
    return (_pairs(root / folder / edges, skip_header=True, delimiter=","),
            _count_rows(root / folder / target))


def _tolokers(root: Path):
    with np.load(root / "tolokers" / "tolokers.npz") as data:
        return data["edges"].astype(np.int64), int(data["node_labels"].shape[0])


def _snap(root: Path):
    pairs = _pairs(root / "ego_facebook" / "facebook_combined.txt.gz", skip_header=False)
    return pairs, int(pairs.max()) + 1


def _matrix_market(root: Path, name: str):
    rows = _pairs(root / "road_networks" / f"{name}.mtx", skip_header=False, comments="%")
    num_nodes = int(rows[0, 0])  # the size line: rows cols entries
    return rows[1:] - 1, num_nodes  # 1-based


def _reddit10k(root: Path):
    with open(root / "reddit10k" / "graphs.json") as f:
        graphs = json.load(f)
    parts, offset = [], 0
    for key in sorted(graphs, key=int):
        pairs = np.asarray(graphs[key], dtype=np.int64).reshape(-1, 2)
        parts.append(pairs + offset)
        offset += int(pairs.max(initial=-1)) + 1  # per-graph ids are 0-based and contiguous
    return np.concatenate(parts), offset


def _tu(root: Path, folder: str):
    prefix = folder[len("tu_"):].upper()
    pairs = _pairs(root / folder / f"{prefix}_A.txt", skip_header=False, delimiter=",")
    num_nodes = _count_rows(root / folder / f"{prefix}_graph_indicator.txt") + 1  # no header
    return pairs - 1, num_nodes


def _registry() -> Dict[str, Callable[[Path], Tuple[np.ndarray, int]]]:
    reg: Dict[str, Callable] = {
        name: (lambda root, n=name: _planetoid(root, n)) for name in ("cora", "citeseer", "pubmed")}
    for name, file in (("amazon_computers", "amazon_cs.npz"), ("amazon_photo", "amazon_photo.npz"),
                       ("coauthor_cs", "coauthor_cs.npz"), ("coauthor_physics", "coauthor_phy.npz")):
        reg[name] = lambda root, n=name, f=file: _npz_adjacency(root, n, f)
    reg["facebook_pagepage"] = lambda root: _musae(root, "facebook_pagepage", "facebook_edges.csv",
                                                   "facebook_target.csv")
    for country in ("DE", "ENGB", "ES", "FR", "PTBR", "RU"):
        reg[f"twitch_{country}"] = lambda root, c=country: _musae(root, "twitch", f"{c}_edges.csv",
                                                                  f"{c}_target.csv")
    reg["lastfm_asia"] = lambda root: _musae(root, "lastfm_asia", "edges.csv", "target.csv")
    reg["tolokers"] = _tolokers
    reg["ego_facebook"] = _snap
    for road in ("road-usroads-48", "road-usroads", "road-luxembourg-osm", "road-minnesota"):
        reg[road] = lambda root, n=road: _matrix_market(root, n)
    reg["reddit10k"] = _reddit10k
    for tu in ("tu_nci1", "tu_mutag", "tu_enzymes", "tu_proteins", "tu_ptc_mr"):
        reg[tu] = lambda root, n=tu: _tu(root, n)
    return reg


DATASETS = _registry()


def canonical_name(name: str) -> str:
    lookup = {n.lower(): n for n in DATASETS}
    if name.lower() not in lookup:
        raise ValueError(f"unknown graph {name!r}: not a generator spec (kind:args) nor one of the "
                         f"datasets {sorted(DATASETS)}")
    return lookup[name.lower()]


def load_edges(name: str, data_dir: Optional[str] = None) -> Tuple[torch.Tensor, int]:
    """``(edge_index [2, E] int64, num_nodes)`` of a real graph, symmetrised and simple (CPU)."""
    name = canonical_name(name)
    root = data_root(data_dir)
    try:
        pairs, num_nodes = DATASETS[name](root)
    except FileNotFoundError as exc:
        raise DatasetUnavailable(f"dataset {name!r} is not in the data folder {root} "
                                 f"(set IOGNN_DATA): {exc}") from None
    ei = torch.from_numpy(np.ascontiguousarray(pairs.T))
    if ei.numel() and (int(ei.min()) < 0 or int(ei.max()) >= num_nodes):
        raise ValueError(f"dataset {name!r}: node ids outside [0, {num_nodes})")
    both = torch.cat([ei, ei.flip(0)], dim=1)
    return simplify(both[0], both[1], num_nodes), num_nodes


def dataset_summary(data_dir: Optional[str] = None) -> Dict[str, dict]:
    """The folder's STATS.json (node and edge counts per dataset), or {} when it is absent."""
    path = data_root(data_dir) / "STATS.json"
    if not path.is_file():
        return {}
    with open(path) as f:
        return json.load(f)
