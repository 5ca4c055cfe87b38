"""Argument checks shared by the functional ops (messages name the argument)."""
from __future__ import annotations

import torch
from torch import Tensor

FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """Dtype of edge weights and statistics for features of `dtype` (fp32; fp64 for fp64)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


# What an op reads from its graph argument: an iognn.Graph, or a Graph-like view with the same
# CSR attributes (iognn.nn's MessageGraph).
_GRAPH_ATTRIBUTES = ("rowptr", "col", "colptr", "row", "csc2csr", "max_degree_hints",
                     "num_src_nodes", "num_dst_nodes")


def check_graph(graph) -> None:
    """TypeError unless `graph` is an iognn.Graph (a raw edge_index is the usual mistake)."""
    if not all(hasattr(graph, a) for a in _GRAPH_ATTRIBUTES):
        raise TypeError(f"graph must be an iognn.Graph (build one with iognn.Graph(edge_index, "
                        f"num_nodes)), got {type(graph).__name__}")


def check_features(name: str, x: Tensor, graph, rows: int, dim: int = 2) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a Tensor, got {type(x).__name__}")
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be float32, float64, float16 or bfloat16, got {x.dtype}")
    if x.dim() != dim:
        raise ValueError(f"{name} must be {dim}-D, got shape {list(x.shape)}")
    if x.size(0) != rows:
        raise ValueError(f"{name} has {x.size(0)} rows but the graph has {rows} nodes on that side")
    if x.device != graph.device:
        raise ValueError(f"{name} is on {x.device} but the graph is on {graph.device}")


def check_edge_values(name: str, values: Tensor, graph, ref: Tensor) -> None:
    if not isinstance(values, Tensor):
        raise TypeError(f"{name} must be a Tensor, got {type(values).__name__}")
    if not values.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {values.dtype}")
    if values.size(0) != graph.num_edges:
        raise ValueError(f"{name} has {values.size(0)} entries but the graph has "
                         f"{graph.num_edges} edges")
    if values.device != ref.device:
        raise ValueError(f"{name} is on {values.device} but the features are on {ref.device}")
