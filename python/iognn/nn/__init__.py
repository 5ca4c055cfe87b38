"""``iognn.nn``: drop-in replacements for PyG layers, computed with iognn's ops.

Each layer has the PyG 2.8 class name, constructor and forward signature, parameter names and
initialisation, so ``layer.load_state_dict(pyg_layer.state_dict())`` works both ways and gives the
same outputs. See ``docs/nn.md`` for the supported arguments and the differences.
"""
from . import aggr
from .aggr import (Aggregation, DegreeScalerAggregation, MaxAggregation, MeanAggregation,
                   MinAggregation, MultiAggregation, StdAggregation, SumAggregation,
                   VarAggregation)
from ._graph import forget_graphs
from .conv import (AGNNConv, FastRGCNConv, GATConv, GATv2Conv, GatedGraphConv, GCNConv, GINConv,
                   GINEConv, GraphConv, PNAConv, RGATConv, RGCNConv, SAGEConv, TransformerConv,
                   TypedGatedGraphConv)
from .linear import Linear

__all__ = ["Linear", "GCNConv", "SAGEConv", "GINConv", "GINEConv", "GraphConv", "GATConv",
           "GATv2Conv", "TransformerConv", "AGNNConv", "PNAConv", "GatedGraphConv",
           "TypedGatedGraphConv", "RGCNConv", "FastRGCNConv", "RGATConv", "HeteroConv",
           "to_hetero", "aggr",
           "Aggregation", "SumAggregation", "MeanAggregation",
           "MinAggregation", "MaxAggregation", "VarAggregation", "StdAggregation",
           "MultiAggregation", "DegreeScalerAggregation", "forget_graphs"]


def __getattr__(name: str):
    # HeteroConv subclasses PyG's HeteroConv and to_hetero runs PyG's transformer: importing
    # them imports torch_geometric (and its own dependencies), which `import iognn` must not
    # need. They load on first use.
    if name == "HeteroConv":
        from .hetero_conv import HeteroConv
        return HeteroConv
    if name == "to_hetero":
        from .to_hetero_transformer import to_hetero
        return to_hetero
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
