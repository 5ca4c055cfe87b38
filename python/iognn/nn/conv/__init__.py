"""Message-passing layers with PyG 2.8's names, signatures, parameters and results."""
from .gat_conv import GATConv
from .gatv2_conv import GATv2Conv
from .gcn_conv import GCNConv
from .gin_conv import GINConv, GINEConv
from .graph_conv import GraphConv
from .pna_conv import PNAConv
from .sage_conv import SAGEConv
from .transformer_conv import TransformerConv

__all__ = ["GCNConv", "SAGEConv", "GINConv", "GINEConv", "GraphConv", "GATConv", "GATv2Conv",
           "TransformerConv", "PNAConv"]
