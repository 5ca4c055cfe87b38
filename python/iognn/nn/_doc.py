"""Docstring text that several layers share, written once here and filled into each class's
docstring at import, so that ``help()`` still shows every layer's whole PyG-style documentation.

A docstring line holding only ``{name}`` is replaced by the section ``name`` (``shared_doc``),
indented as the marker was; an unknown name raises KeyError at import.
"""
from __future__ import annotations

import re
import textwrap

_MARKER = re.compile(r"^( *)\{(\w+)\}$", re.MULTILINE)

SECTIONS = {
    # ---- aggregations
    "no_arguments": """\
Takes no arguments; called, with the shapes of every aggregation (an empty group gives 0), as
:class:`Aggregation`.""",
    # ---- layers on iognn's aggregations (GIN, GINE, GraphConv, SAGE)
    "mp_kwargs": """\
**kwargs (optional): PyG's ``MessagePassing`` arguments (``aggr_kwargs``, ``node_dim``,
    ``decomposed_layers`` (no effect), ``flow``).""",
    "pair_input": """\
- **input:** ``x`` ``[N, F_in]``, a static-graph batch ``[*, N, F_in]``, or a pair
  ``(x_src [N_s, F_s], x_dst [N_t, F_t])`` (``x_dst`` may be ``None``: no root term);""",
    "pair_output": """\
- **output:** ``[N, F_out]``, or ``[N_t, F_out]`` for a pair (``[*, N, F_out]`` for a
  batch)""",
    "unsorted_lstm": """\
- An order-dependent ``aggr`` (``'lstm'``, ...) on an ``edge_index`` not sorted by
  destination is computed in (destination, source) order (PyG raises ``ValueError``).""",
    "sparse_unfused": """\
- torch.sparse adjacencies PyG's unfused path cannot read (uncoalesced COO, CSC) and
  torch.sparse adjacencies with ``[*, N, F]`` features are computed on the stored
  entries (PyG fails).
- ``flow='target_to_source'`` raises ``NotImplementedError``; not scriptable with
  ``torch.jit.script``; no ``propagate``/``message``/explain machinery.""",
    # ---- attention layers (GAT, GATv2, Transformer)
    "attention_in_channels": """\
in_channels (int or tuple): Size of each input feature vector (``-1``: lazy), or a
    ``(source, destination)`` pair of sizes for bipartite graphs.""",
    "attention_concat_dropout": """\
concat (bool, optional): Concatenate the heads; ``False`` averages them.
    (default: ``True``)""",
    "attention_dropout_arg": """\
dropout (float, optional): Dropout probability of the attention coefficients (training
    mode only). (default: ``0.0``)""",
    "attention_kwargs": """\
**kwargs (optional): PyG's ``MessagePassing`` arguments (``aggr`` must stay ``'add'``;
    ``node_dim`` must stay 0; ``decomposed_layers`` has no effect).""",
    "attention_dropout_mask": """\
- Attention dropout uses iognn's counter-based mask: PyG's random stream gives other
  masks (same statistics).""",
    "attention_unsupported": """\
- ``aggr`` other than ``'add'``, ``node_dim`` other than 0 and
  ``flow='target_to_source'`` raise ``NotImplementedError``; not scriptable with
  ``torch.jit.script``; no ``_alpha``, ``propagate``/``message`` or explain machinery.""",
}


def shared_doc(cls):
    """Class decorator: fills the ``{name}`` lines of ``cls``'s docstring from SECTIONS."""
    if cls.__doc__:  # None under python -OO
        cls.__doc__ = _MARKER.sub(
            lambda m: textwrap.indent(SECTIONS[m.group(2)], m.group(1)), cls.__doc__)
    return cls
