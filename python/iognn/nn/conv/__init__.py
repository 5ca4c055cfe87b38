"""Message-passing layers with PyG 2.8's names, signatures, parameters and results.

Every layer also takes PyG's ``MessagePassing`` keyword arguments (``aggr`` where PyG lets it
change, ``aggr_kwargs``, ``node_dim``, ``decomposed_layers``: accepted, no effect) and every
adjacency PyG accepts (``[2, E]`` tensors, ``EdgeIndex``, ``iognn.Graph``, torch.sparse,
``SparseTensor``). Common differences from PyG (see ``docs/nn.md``): ``flow='target_to_source'``
raises ``NotImplementedError``; the layers cannot be compiled with ``torch.jit.script`` (use
``torch.compile``); PyG's private machinery (``propagate``, ``message``, ``aggregate``,
``jittable()``, ``_alpha``, explain mode) does not exist. Each class's docstring lists its own.
"""
from .agnn_conv import AGNNConv
from .gat_conv import GATConv
from .gated_graph_conv import GatedGraphConv
from .gatv2_conv import GATv2Conv
from .gcn_conv import GCNConv
from .gin_conv import GINConv, GINEConv
from .graph_conv import GraphConv
from .pna_conv import PNAConv
from .rgat_conv import RGATConv
from .rgcn_conv import FastRGCNConv, RGCNConv
from .sage_conv import SAGEConv
from .transformer_conv import TransformerConv
from .typed_gated_graph_conv import TypedGatedGraphConv

__all__ = ["GCNConv", "SAGEConv", "GINConv", "GINEConv", "GraphConv", "GATConv", "GATv2Conv",
           "TransformerConv", "AGNNConv", "PNAConv", "GatedGraphConv", "TypedGatedGraphConv",
           "RGCNConv", "FastRGCNConv", "RGATConv"]
