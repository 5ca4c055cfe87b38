"""Docstring text that several layers share, written once here and filled into each class's
docstring at import, so that ``help()`` still shows every layer's whole PyG-style documentation.

A docstring line holding only ``{name}`` is replaced by the section ``name`` (``shared_doc``),
indented as the marker was; an unknown name raises KeyError at import.
"""
from __future__ import annotations

import re
import textwrap

_MARKER = re.compile(r"^( *)\{(\w+)\}$", re.MULTILINE)

_ATTENTION_UNSUPPORTED = """\
- ``aggr`` other than ``'add'``, ``node_dim`` other than 0 and
  ``flow='target_to_source'`` raise ``NotImplementedError``; not scriptable with
  ``torch.jit.script``; no ``_alpha``, ``propagate``/``message`` or explain machinery."""

SECTIONS = {
    # ---- aggregations without arguments (sum, mean, min, max)
    "no_arguments": """\
Takes no arguments; called, with the shapes of every aggregation (an empty group gives 0), as
:class:`Aggregation`.""",
    # ---- layers on iognn's aggregations (GINConv, GINEConv, GraphConv, SAGEConv)
    "mp_kwargs": """\
**kwargs (optional): PyG's ``MessagePassing`` arguments (``aggr_kwargs``, ``node_dim``,
    ``decomposed_layers`` (no effect), ``flow``).""",
    "pair_input": """\
- **input:** ``x`` ``[N, F_in]``, a static-graph batch ``[*, N, F_in]``, or a pair
  ``(x_src [N_s, F_s], x_dst [N_t, F_t])`` (``x_dst`` may be ``None``: no root term);""",
    "aggr_differences": """\
- An order-dependent ``aggr`` (``'lstm'``, ...) on an ``edge_index`` not sorted by
  destination is computed, each node's messages taken in (destination, source) order
  (PyG raises ``ValueError``).
- torch.sparse adjacencies PyG's unfused path cannot read (uncoalesced COO, CSC) and
  torch.sparse adjacencies with ``[*, N, F]`` features are computed on the stored
  entries (PyG fails).
- ``flow='target_to_source'`` raises ``NotImplementedError``; not scriptable with
  ``torch.jit.script``; no ``propagate``/``message``/explain machinery.""",
    # ---- attention layers (GATConv, GATv2Conv, TransformerConv)
    "gat_args": """\
in_channels (int or tuple): Size of each input feature vector (``-1``: lazy), or a
    ``(source, destination)`` pair of sizes for bipartite graphs.
out_channels (int): Size of each head's output.
heads (int, optional): Number of attention heads :math:`H`. (default: ``1``)
concat (bool, optional): Concatenate the heads; ``False`` averages them.
    (default: ``True``)
negative_slope (float, optional): LeakyReLU slope. (default: ``0.2``)
dropout (float, optional): Dropout probability of the attention coefficients (training
    mode only). (default: ``0.0``)
add_self_loops (bool, optional): Remove existing self-loops and add one per node (over
    ``min(N_s, N_t)`` nodes for bipartite inputs). (default: ``True``)""",
    "gat_errors": """\
- ``edge_attr`` of the wrong width raises ``ValueError``; ``[B, N, F]`` features raise
  ``ValueError`` (PyG: ``AssertionError``); edge features together with a sparse
  adjacency and self-loops raise ``NotImplementedError`` (PyG fails too).
""" + _ATTENTION_UNSUPPORTED,
    "attention_unsupported": _ATTENTION_UNSUPPORTED,
}


def shared_doc(cls):
    """Class decorator: fills the ``{name}`` lines of ``cls``'s docstring from SECTIONS."""
    if cls.__doc__:  # None under python -OO
        cls.__doc__ = _MARKER.sub(
            lambda m: textwrap.indent(SECTIONS[m.group(2)], m.group(1)), cls.__doc__)
    return cls
