"""Node-classification datasets for ``iognn train``: real graphs read by PyG's own dataset classes,
and a built-in synthetic community graph that needs no files.

``load_dataset(name)`` returns a ``torch_geometric.data.Data`` with ``x`` float32 ``[N, F]``,
``y`` int64 ``[N]``, ``edge_index`` int64 ``[2, E]`` (both directions of every undirected edge)
and boolean ``train_mask`` / ``val_mask`` / ``test_mask`` ``[N]``.

Data root: the ``root`` argument (``--data-dir``), else ``$IOGNN_DATA``, else ``../shared/data``
beside the checkout; ``<root>/<name>/`` holds the public files (see that folder's README). PyG's
classes expect ``<dir>/<Name>/raw/<file>``: that layout is built in a cache folder
(``$IOGNN_CACHE``, else ``~/.cache/iognn/datasets``) from symlinks to the data files, or, where the
stored file is in another format than PyG's, from a converted copy; PyG's processed files go there
too. Nothing is ever written into the data root or the repository.

Splits:
- cora, citeseer, pubmed: the public Planetoid split (20 per class train, 500 val, 1,000 test).
- tolokers: split 0 of the dataset's 10 public splits.
- amazon_*, coauthor_*, synthetic (no public split): a seeded random split, 20 nodes per class for
  training, 30 per class for validation, every other node for testing (fewer when a class is small).
- synthetic-products[:scale]: ogbn-products' size and split sizes times ``scale`` (see
  :mod:`iognn.synthetic_products`), generated once per scale and seed and cached.
- pubmed: ``ind.pubmed.allx`` is missing from the data folder, so only the 60 training rows and
  1,000 test rows have features (the rest are zero): use PubMed for topology and timing, not
  accuracy.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch import Tensor

from ._tools import require

TRAIN_PER_CLASS = 20
VAL_PER_CLASS = 30

PathLike = Union[str, os.PathLike]


# ---- data root and cache ------------------------------------------------------------------
def default_data_dir() -> Path:
    """``../shared/data`` beside the checkout (the repository root's parent)."""
    return Path(__file__).resolve().parents[2].parent / "shared" / "data"


def candidate_roots(root: Optional[PathLike] = None) -> List[Path]:
    """Folders searched for real datasets, in order: ``root`` alone when given, else
    ``$IOGNN_DATA`` (when set) then the default ``../shared/data``."""
    if root is not None:
        return [Path(root)]
    env = os.environ.get("IOGNN_DATA")
    roots = [Path(env)] if env else []
    return roots + [default_data_dir()]


def cache_dir() -> Path:
    env = os.environ.get("IOGNN_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "iognn" / "datasets"


def _cache_for(name: str, source: Path) -> Path:
    """A cache folder per (dataset, source folder): two data roots never share processed files."""
    key = hashlib.sha1(str(source.resolve()).encode()).hexdigest()[:10]
    return cache_dir() / f"{name}-{key}"


def _link(target: Path, link: Path) -> None:
    """Make ``link`` a symlink to ``target`` (atomically replacing anything else there)."""
    target = target.resolve()
    if link.is_symlink() and Path(os.readlink(link)) == target:
        return
    link.parent.mkdir(parents=True, exist_ok=True)
    tmp = link.with_name(f".{link.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    os.symlink(target, tmp)
    os.replace(tmp, link)


def _write_once(path: Path, write: Callable[[Path], None]) -> None:
    """Create ``path`` with ``write(tmp_path)`` unless it exists (atomic: write, then rename)."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{os.getpid()}.{path.name}")  # keeps the suffix (np.savez adds .npz)
    write(tmp)
    os.replace(tmp, path)


# ---- real datasets -------------------------------------------------------------------------------
class _Source(NamedTuple):
    folder: str                                # folder under the data root
    files: Tuple[str, ...]                     # files that must be present there
    load: Callable[[Path, Path], Any]          # (source folder, cache folder) -> PyG Data
    random_split: bool                         # no public split: draw a seeded one


_PLANETOID_PARTS = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")


def _planetoid(pyg_name: str) -> _Source:
    prefix = pyg_name.lower()
    # PubMed's allx is absent from the data folder; it is rebuilt from x (see the module note).
    parts = [p for p in _PLANETOID_PARTS if not (prefix == "pubmed" and p == "allx")]
    files = tuple(f"ind.{prefix}.{p}" for p in parts)

    def load(source: Path, cache: Path):
        require(f"reading {pyg_name}", ("scipy",))  # PyG unpickles scipy.sparse matrices
        from torch_geometric.datasets import Planetoid
        raw = cache / pyg_name / "raw"
        for f in files:
            _link(source / f, raw / f)
        if prefix == "pubmed":
            _write_once(raw / "ind.pubmed.allx", lambda tmp: _pubmed_allx(source, tmp))
        return Planetoid(str(cache), pyg_name)[0]

    return _Source(prefix, files, load, random_split=False)


def _read_pickle(path: Path):
    with open(path, "rb") as f, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # scipy.sparse.csr module path
        return pickle.load(f, encoding="latin1")


def _pubmed_allx(source: Path, out: Path) -> None:
    """A stand-in ``allx``: the rows of ``x`` (the first ``len(x)`` nodes) and zeros after them."""
    import scipy.sparse as sp
    x = _read_pickle(source / "ind.pubmed.x")
    ally = _read_pickle(source / "ind.pubmed.ally")
    rest = sp.csr_matrix((ally.shape[0] - x.shape[0], x.shape[1]), dtype=x.dtype)
    with open(out, "wb") as f:
        pickle.dump(sp.vstack([x, rest]).tocsr(), f)


def _shchur_npz(source_file: str, pyg_class: str, pyg_name: str, raw_name: str,
                folder: str) -> _Source:
    """Amazon / Coauthor: the stored ``.npz`` keeps pickled scipy matrices (``adj_matrix``,
    ``node_attr``, ``node_label``); PyG reads the original gnn-benchmark layout (``adj_data``, ...),
    so a converted copy is written into the cache."""

    def load(source: Path, cache: Path):
        require(f"reading {source_file}", ("scipy",))  # pickled scipy.sparse matrices
        import torch_geometric.datasets as pyg_datasets
        raw_dir = cache / (pyg_name.capitalize() if pyg_class == "Amazon" else pyg_name) / "raw"
        _write_once(raw_dir / raw_name,
                    lambda tmp: _to_gnn_benchmark_npz(source / source_file, tmp))
        return getattr(pyg_datasets, pyg_class)(str(cache), pyg_name)[0]

    return _Source(folder, (source_file,), load, random_split=True)


def _to_gnn_benchmark_npz(src: Path, out: Path) -> None:
    with np.load(src, allow_pickle=True) as f, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # scipy.sparse.csr module path
        adj = f["adj_matrix"].item().tocsr()
        attr = f["node_attr"].item().tocsr()
        labels = np.asarray(f["node_label"])
    np.savez(out, adj_data=adj.data, adj_indices=adj.indices, adj_indptr=adj.indptr,
             adj_shape=np.asarray(adj.shape), attr_data=attr.data, attr_indices=attr.indices,
             attr_indptr=attr.indptr, attr_shape=np.asarray(attr.shape), labels=labels)


def _tolokers() -> _Source:
    def load(source: Path, cache: Path):
        from torch_geometric.datasets import HeterophilousGraphDataset
        _link(source / "tolokers.npz", cache / "tolokers" / "raw" / "tolokers.npz")
        data = HeterophilousGraphDataset(str(cache), "tolokers")[0]
        for key in ("train_mask", "val_mask", "test_mask"):  # [N, 10] -> split 0
            data[key] = data[key][:, 0].contiguous()
        return data

    return _Source("tolokers", ("tolokers.npz",), load, random_split=False)


_REAL = {
    "cora": _planetoid("Cora"),
    "citeseer": _planetoid("CiteSeer"),
    "pubmed": _planetoid("PubMed"),
    "amazon_photo": _shchur_npz("amazon_photo.npz", "Amazon", "photo",
                                "amazon_electronics_photo.npz", "amazon_photo"),
    "amazon_computers": _shchur_npz("amazon_cs.npz", "Amazon", "computers",
                                    "amazon_electronics_computers.npz", "amazon_computers"),
    "coauthor_cs": _shchur_npz("coauthor_cs.npz", "Coauthor", "CS", "ms_academic_cs.npz",
                               "coauthor_cs"),
    "coauthor_physics": _shchur_npz("coauthor_phy.npz", "Coauthor", "Physics",
                                    "ms_academic_phy.npz", "coauthor_physics"),
    "tolokers": _tolokers(),
}

DATASETS = ("synthetic",) + tuple(_REAL)


def find_dataset(name: str, root: Optional[PathLike] = None) -> Path:
    """The folder holding ``name``'s files; FileNotFoundError naming every folder tried."""
    spec = _REAL[name]
    return find_folder(name, spec.folder, spec.files, root)


def find_folder(name: str, folder_name: str, files: Sequence[str],
                root: Optional[PathLike] = None) -> Path:
    """The first ``<data root>/<folder_name>`` holding every one of ``files``; FileNotFoundError
    naming dataset ``name`` and every folder tried."""
    tried = []
    for base in candidate_roots(root):
        folder = base / folder_name
        if all((folder / f).is_file() for f in files):
            return folder
        tried.append(str(folder))
    raise FileNotFoundError(
        f"dataset '{name}' not found: expected {', '.join(files)} in "
        f"{' or '.join(tried)}. Pass --data-dir (root=) or set IOGNN_DATA to the folder that "
        f"holds '{folder_name}/'.")


# ---- splits and the synthetic graph --------------------------------------------------------------
def per_class_split(y: Tensor, seed: int, train_per_class: int = TRAIN_PER_CLASS,
                    val_per_class: int = VAL_PER_CLASS) -> Tuple[Tensor, Tensor, Tensor]:
    """Seeded boolean masks: per class, ``train_per_class`` random nodes train, the next
    ``val_per_class`` validate (fewer when the class is smaller); every other node tests."""
    gen = torch.Generator().manual_seed(seed)
    n = y.numel()
    train, val = torch.zeros(n, dtype=torch.bool), torch.zeros(n, dtype=torch.bool)
    for c in torch.unique(y).tolist():
        idx = (y == c).nonzero().view(-1)
        idx = idx[torch.randperm(idx.numel(), generator=gen)]
        train[idx[:train_per_class]] = True
        val[idx[train_per_class:train_per_class + val_per_class]] = True
    return train, val, ~(train | val)


def synthetic_community_graph(num_nodes: int = 2000, num_classes: int = 8, avg_degree: float = 20.0,
                              intra_fraction: float = 0.55, num_features: int = 32,
                              signal: float = 0.15, seed: int = 0):
    """A seeded stochastic-block-model graph whose communities are the classes.

    Each node draws ``avg_degree / 2`` edges on average: with probability ``intra_fraction`` to a
    uniform node of its own community, else to a uniform node of another one; self-loops and
    duplicates are dropped and the graph is made undirected. Features are ``signal * mu_y + noise``
    (``mu_c``, noise standard normal), so one node's features say little about its class while a
    neighbourhood average says much: with the defaults a 2-layer GCN reaches ~88% test accuracy,
    an MLP ~21% (chance: 12.5%). Masks: :func:`per_class_split`.
    """
    from torch_geometric.data import Data
    gen = torch.Generator().manual_seed(seed)
    y = torch.arange(num_nodes) % num_classes
    y = y[torch.randperm(num_nodes, generator=gen)]
    members = torch.argsort(y, stable=True)                    # nodes grouped by community
    counts = torch.bincount(y, minlength=num_classes)
    starts = torch.cumsum(counts, 0) - counts

    num_pairs = int(num_nodes * avg_degree / 2)
    src = torch.randint(0, num_nodes, (num_pairs,), generator=gen)
    shift = torch.randint(1, max(num_classes, 2), (num_pairs,), generator=gen)
    other = (y[src] + shift) % num_classes                     # a uniform other community
    intra = torch.rand(num_pairs, generator=gen) < intra_fraction
    community = torch.where(intra, y[src], other)
    pick = (torch.rand(num_pairs, generator=gen) * counts[community]).long()
    dst = members[starts[community] + pick]

    keep = src != dst
    pairs = torch.cat([torch.stack([src[keep], dst[keep]]), torch.stack([dst[keep], src[keep]])], 1)
    key = torch.unique(pairs[0] * num_nodes + pairs[1])       # sorted by (source, target)
    edge_index = torch.stack([key // num_nodes, key % num_nodes])

    centers = torch.randn(num_classes, num_features, generator=gen)
    x = signal * centers[y] + torch.randn(num_nodes, num_features, generator=gen)
    train, val, test = per_class_split(y, seed)
    return Data(x=x, edge_index=edge_index, y=y, train_mask=train, val_mask=val, test_mask=test)


# ---- entry point ---------------------------------------------------------------------------------
def load_dataset(name: str, root: Optional[PathLike] = None, seed: int = 0):
    """Loads dataset ``name`` (one of :data:`DATASETS`) as a ``torch_geometric.data.Data``.

    Args:
        name: dataset name (case-insensitive, ``-`` or ``_``); ``synthetic-products:<scale>``
            gives that graph at a scale.
        root: data root (see the module note); unused by ``synthetic``.
        seed: seed of the synthetic graph and of the random splits.
    """
    from torch_geometric.data import Data

    from .synthetic_products import load_synthetic_products, parse_spec
    scale = parse_spec(name)
    if scale is not None:
        data, seconds = load_synthetic_products(scale, seed)
        if seconds is not None:
            print(f"generated {name} (seed {seed}) in {seconds:.1f} s; cached for later runs",
                  file=sys.stderr)
        return data
    key = name.lower().replace("-", "_")
    if key == "synthetic":
        return synthetic_community_graph(seed=seed)
    if key not in _REAL:
        raise ValueError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")
    spec = _REAL[key]
    source = find_dataset(key, root)
    data = spec.load(source, _cache_for(key, source))
    if spec.random_split:
        train, val, test = per_class_split(data.y, seed)
    else:
        train, val, test = data.train_mask, data.val_mask, data.test_mask
    return Data(x=data.x.to(torch.float32).contiguous(), edge_index=data.edge_index.long(),
                y=data.y.long(), train_mask=train.bool(), val_mask=val.bool(),
                test_mask=test.bool())
