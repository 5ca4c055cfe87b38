"""Graph-classification datasets for ``iognn train --task graph``: a set of small graphs, one label
each, held collated (every graph's nodes, then the next graph's) as :class:`GraphSet`.

- ``tu_mutag``, ``tu_nci1``, ``tu_proteins``, ``tu_enzymes``, ``tu_ptc_mr``: the TUDataset text
  files of the data folder, read by PyG's own ``TUDataset`` (which expects
  ``<dir>/<NAME>/raw/<NAME>_*.txt``: that layout is built from symlinks in the dataset cache, as
  :mod:`iognn.datasets` does for the node datasets; PyG's processed file goes there too). Node
  features are PyG's default: the one-hot node labels (``use_node_attr=False``, so the continuous
  attributes of PROTEINS / ENZYMES are left out). Where the set has edge labels
  (``<NAME>_edge_labels.txt``: the bond types of MUTAG and PTC_MR), which PyG reads as a one-hot
  ``edge_attr``, each edge's label is ``edge_type`` (0-based, in PyG's edge order).
- ``reddit10k``: ``graphs.json`` (``{"graph id": [[u, v], ...]}``, 0-based per graph) and
  ``target.csv`` (``id,target``). Each graph is made undirected, without self-loops or duplicate
  edges (what PyG's TU reader does to REDDIT-BINARY), with one node per id up to the largest.
  These graphs have no node features: as PyG's graph-classification benchmarks do for the
  feature-less REDDIT sets, a node's feature is the one-hot of its degree (``OneHotDegree`` up to
  the largest degree of the set). Parsed once, then cached as a ``.pt`` file in the cache.
- ``synthetic-graphs``: seeded random graphs (:func:`synthetic_graphs`), no files needed.

Split (every dataset): stratified and seeded, 80% train / 10% validation / 10% test of each class
(:func:`stratified_split`), the same for every run with the same split seed (``iognn train``
uses 0).
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch
from torch import Tensor

from .datasets import PathLike, _cache_for, _link, _write_once, find_folder

# name -> (folder of the data root, TUDataset name)
TU_DATASETS: Dict[str, Tuple[str, str]] = {
    "tu_mutag": ("tu_mutag", "MUTAG"), "tu_nci1": ("tu_nci1", "NCI1"),
    "tu_proteins": ("tu_proteins", "PROTEINS"), "tu_enzymes": ("tu_enzymes", "ENZYMES"),
    "tu_ptc_mr": ("tu_ptc_mr", "PTC_MR"),
}
REDDIT_FILES = ("graphs.json", "target.csv")
GRAPH_DATASETS = ("synthetic-graphs",) + tuple(TU_DATASETS) + ("reddit10k",)
SPLIT = (0.8, 0.1)  # train and validation shares of each class; the rest tests


@dataclass
class GraphSet:
    """``num_graphs`` graphs collated: graph g owns nodes ``node_ptr[g] .. node_ptr[g + 1] - 1``
    of ``x`` and edges ``edge_ptr[g] .. edge_ptr[g + 1] - 1`` of ``edge_index``, whose node ids
    are local to their graph (0 is the graph's first node), as PyG's ``InMemoryDataset`` stores
    them. ``edge_type`` is each edge's label where the set has edge labels, else None."""
    name: str
    x: Tensor               # [total nodes, F] float32
    edge_index: Tensor      # [2, total edges] int64, ids local to each graph
    node_ptr: Tensor        # [G + 1] int64
    edge_ptr: Tensor        # [G + 1] int64
    y: Tensor               # [G] int64
    features: str           # what the node features are
    edge_type: Optional[Tensor] = None  # [total edges] int64, or None

    @property
    def num_graphs(self) -> int:
        return self.y.numel()

    @property
    def num_features(self) -> int:
        return self.x.size(1)

    @property
    def num_classes(self) -> int:
        return int(self.y.max()) + 1 if self.y.numel() else 0

    def data_list(self) -> list:
        """One ``torch_geometric.data.Data`` per graph (``x``, ``edge_index``, ``y`` ``[1]``,
        and ``edge_type`` where the set has one): what PyG's ``DataLoader`` batches."""
        from torch_geometric.data import Data
        nodes, edges = self.node_ptr.tolist(), self.edge_ptr.tolist()
        graphs = [Data(x=self.x[nodes[g]:nodes[g + 1]],
                       edge_index=self.edge_index[:, edges[g]:edges[g + 1]],
                       y=self.y[g:g + 1]) for g in range(self.num_graphs)]
        if self.edge_type is not None:
            for g, graph in enumerate(graphs):
                graph.edge_type = self.edge_type[edges[g]:edges[g + 1]]
        return graphs

    @classmethod
    def from_data_list(cls, name: str, graphs: list, features: str) -> "GraphSet":
        """Collates graphs that each have ``x``, ``edge_index`` (local ids) and a label ``y``
        (and ``edge_type``, kept where every graph has it)."""
        def offsets(counts):
            return torch.cat([torch.zeros(1, dtype=torch.long),
                              torch.tensor(counts, dtype=torch.long).cumsum(0)])
        return cls(name, torch.cat([g.x for g in graphs]).float().contiguous(),
                   torch.cat([g.edge_index for g in graphs], 1).long().contiguous(),
                   offsets([g.num_nodes for g in graphs]),
                   offsets([g.edge_index.size(1) for g in graphs]),
                   torch.cat([g.y.view(-1) for g in graphs]).long(), features,
                   torch.cat([g.edge_type for g in graphs]).long()
                   if graphs and all("edge_type" in g for g in graphs) else None)


def stratified_split(y: Tensor, seed: int = 0) -> Tuple[Tensor, Tensor, Tensor]:
    """Seeded (train, validation, test) graph indices, sorted: per class, a random 80% trains,
    the next 10% validates, the rest tests (rounded down, so a class of 1-9 graphs gives its
    validation share to test)."""
    gen = torch.Generator().manual_seed(seed)
    parts: List[List[Tensor]] = [[], [], []]
    for c in torch.unique(y).tolist():
        idx = (y == c).nonzero().view(-1)
        idx = idx[torch.randperm(idx.numel(), generator=gen)]
        n_train = int(SPLIT[0] * idx.numel())
        n_val = int(SPLIT[1] * idx.numel())
        for part, chunk in zip(parts, (idx[:n_train], idx[n_train:n_train + n_val],
                                       idx[n_train + n_val:])):
            part.append(chunk)
    return tuple(torch.cat(p).sort().values for p in parts)


# ---- readers ------------------------------------------------------------------------------------
def _tu(key: str, root: Optional[PathLike]) -> GraphSet:
    from torch_geometric.datasets import TUDataset
    folder_name, tu_name = TU_DATASETS[key]
    required = tuple(f"{tu_name}_{part}.txt" for part in ("A", "graph_indicator", "graph_labels"))
    source = find_folder(key, folder_name, required, root)
    cache = _cache_for(key, source)
    for file in sorted(source.glob(f"{tu_name}_*.txt")):
        _link(file, cache / tu_name / "raw" / file.name)
    dataset = TUDataset(str(cache), tu_name)
    graphs = [dataset[i] for i in range(len(dataset))]
    labels = dataset.num_edge_labels  # edge_attr's last columns (the only ones, without attributes)
    for graph in graphs if labels else ():
        graph.edge_type = graph.edge_attr[:, -labels:].argmax(1)
    return GraphSet.from_data_list(key, graphs, "one-hot node labels")


def _reddit_graphs(source: Path, out: Path) -> None:
    """Parses reddit10k's files into collated tensors (saved to ``out``)."""
    from torch_geometric.data import Data
    from torch_geometric.utils import degree, remove_self_loops, to_undirected
    with open(source / "graphs.json") as f:
        edges = json.load(f)
    with open(source / "target.csv", newline="") as f:
        targets = {row["id"]: int(row["target"]) for row in csv.DictReader(f)}
    graphs = []
    for graph_id in sorted(edges, key=int):
        pairs = torch.tensor(edges[graph_id], dtype=torch.long).view(-1, 2).t()
        num_nodes = int(pairs.max()) + 1 if pairs.numel() else 1
        edge_index, _ = remove_self_loops(to_undirected(pairs, num_nodes=num_nodes))
        deg = degree(edge_index[1], num_nodes, dtype=torch.long)
        graphs.append(Data(edge_index=edge_index, deg=deg, num_nodes=num_nodes,
                           y=torch.tensor([targets[graph_id]])))
    max_degree = max(int(g.deg.max()) for g in graphs)
    for g in graphs:
        g.x = torch.nn.functional.one_hot(g.deg, max_degree + 1).float()
    collated = GraphSet.from_data_list("reddit10k", graphs, "")
    torch.save({k: getattr(collated, k) for k in ("x", "edge_index", "node_ptr", "edge_ptr", "y")},
               out)


def _reddit10k(root: Optional[PathLike]) -> GraphSet:
    source = find_folder("reddit10k", "reddit10k", REDDIT_FILES, root)
    path = _cache_for("reddit10k", source) / "graphs.pt"
    _write_once(path, lambda tmp: _reddit_graphs(source, tmp))
    tensors = torch.load(path, weights_only=True)
    return GraphSet("reddit10k", features="one-hot node degree (OneHotDegree)", **tensors)


def synthetic_graphs(num_graphs: int = 600, num_classes: int = 3, min_nodes: int = 8,
                     max_nodes: int = 24, num_features: int = 8, seed: int = 0) -> GraphSet:
    """Seeded random graphs whose class sets their density: a graph of class c has n uniform
    nodes in ``[min_nodes, max_nodes]`` and ``(1 + c) * n`` random node pairs (made undirected,
    without self-loops or duplicates); node features are a one-hot random node type. A GIN
    separates the classes by counting edges; a mean-pooled GCN sees it less directly."""
    from torch_geometric.data import Data
    from torch_geometric.utils import remove_self_loops, to_undirected
    gen = torch.Generator().manual_seed(seed)
    graphs = []
    for g in range(num_graphs):
        label = g % num_classes
        n = int(torch.randint(min_nodes, max_nodes + 1, (1,), generator=gen))
        pairs = torch.randint(0, n, (2, (1 + label) * n), generator=gen)
        edge_index, _ = remove_self_loops(to_undirected(pairs, num_nodes=n))
        types = torch.randint(0, num_features, (n,), generator=gen)
        graphs.append(Data(x=torch.nn.functional.one_hot(types, num_features).float(),
                           edge_index=edge_index, y=torch.tensor([label])))
    return GraphSet.from_data_list("synthetic-graphs", graphs, "one-hot random node type")


def load_graph_dataset(name: str, root: Optional[PathLike] = None) -> GraphSet:
    """Loads graph dataset ``name`` (one of :data:`GRAPH_DATASETS`, any case, ``-`` or ``_``)."""
    key = name.lower().replace("-", "_")
    if key == "synthetic_graphs":
        return synthetic_graphs()
    if key in TU_DATASETS:
        return _tu(key, root)
    if key == "reddit10k":
        return _reddit10k(root)
    raise ValueError(f"unknown graph dataset {name!r}; choose one of {', '.join(GRAPH_DATASETS)}")


def is_graph_dataset(name: str) -> bool:
    return name.lower().replace("-", "_") in {d.replace("-", "_") for d in GRAPH_DATASETS}
