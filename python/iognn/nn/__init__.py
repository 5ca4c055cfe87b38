"""``iognn.nn``: drop-in replacements for PyG layers, computed with iognn's ops.

Each layer has the PyG 2.8 class name, constructor and forward signature, parameter names and
initialisation, so ``layer.load_state_dict(pyg_layer.state_dict())`` works both ways and gives the
same outputs.
"""
from .conv import GATConv, GATv2Conv, GCNConv, GINConv, SAGEConv, TransformerConv
from .linear import Linear

__all__ = ["Linear", "GCNConv", "SAGEConv", "GINConv", "GATConv", "GATv2Conv", "TransformerConv"]
