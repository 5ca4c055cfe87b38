"""The adjacency handling every iognn.nn layer shares: node counts and the Graph of one forward.

Keeping Graph construction in this one function lets a per-adjacency cache be added in one place.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from ..graph import Graph, SelfLoops


def node_counts(x_src: Tensor, x_dst: Optional[Tensor],
                size: Optional[Tuple[int, int]]) -> Tuple[int, int]:
    """(num_src, num_dst) as PyG's MessagePassing infers them.

    ``size`` wins when given; otherwise the feature rows, and a missing ``x_dst`` means as many
    destinations as sources (PyG's ``size_i = size[1] or size[0]``).
    """
    if size is not None:
        if len(size) != 2:
            raise ValueError(f"size must be a pair (num_src, num_dst), got {size}")
        num_src = int(size[0]) if size[0] is not None else int(x_src.size(0))
        num_dst = int(size[1]) if size[1] is not None else num_src
        return num_src, num_dst
    num_src = int(x_src.size(0))
    return num_src, int(x_dst.size(0)) if x_dst is not None else num_src


def layer_graph(layer: str, edge_index, num_nodes, self_loops: SelfLoops = SelfLoops.KEEP) -> Graph:
    """The Graph a layer's forward reads, built from a ``[2, E]`` edge_index (or PyG ``EdgeIndex``).

    Sparse adjacency matrices are refused: PyG gives them layer-specific semantics (values as
    weights, ``fill_diag`` instead of ``add_remaining_self_loops``) that these layers do not mirror.
    """
    if isinstance(edge_index, Tensor) and edge_index.layout != torch.strided:
        raise TypeError(f"{layer}: edge_index must be a [2, num_edges] index tensor; sparse "
                        f"adjacency matrices are not supported")
    if not isinstance(edge_index, Tensor):
        raise TypeError(f"{layer}: edge_index must be a [2, num_edges] index tensor, "
                        f"got {type(edge_index).__name__}")
    return Graph(edge_index, num_nodes, self_loops)
