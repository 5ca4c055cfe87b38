"""``AGNNConv``: PyG 2.8's attention-based propagation (Thekumparampil et al.) on iognn's
``transformer_attention``.

``out_i = sum_j softmax_j(beta * cos(x_i, x_j)) x_j`` is the Transformer op with one head,
``query = beta * x_hat``, ``key = x_hat``, ``value = x`` and ``scale = 1``, where
``x_hat = normalize(x)``: the cosine is the dot product of the normalised rows. The gradients of x
and beta flow through ``normalize`` and the product by autograd, and through the op's own
deterministic backward. Self-loops follow PyG (``remove_self_loops`` + ``add_self_loops``).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter

from ...ops.attention import transformer_attention
from .._amp import autocast_input, like
from .._graph import structural_adjacency
from ._attention import attention_sizes, check_static
from ._common import (MessagePassingArgs, MessagePassingModule, check_attention_aggr,
                      node_major)


class AGNNConv(MessagePassingModule):
    r"""Attention-based propagation, replacing ``torch_geometric.nn.AGNNConv`` (Thekumparampil
    et al., "Attention-based Graph Neural Network for Semi-Supervised Learning", 2018).

    .. math::
        \mathbf{x}'_i = \sum_{j \in \mathcal{N}(i) \cup \{ i \}} P_{i,j} \mathbf{x}_j
        \qquad
        P_{i,j} = \frac{\exp(\beta \cdot \cos(\mathbf{x}_i, \mathbf{x}_j))}
        {\sum_{k \in \mathcal{N}(i) \cup \{ i \}} \exp(\beta \cdot \cos(\mathbf{x}_i,
        \mathbf{x}_k))}

    with a scalar :math:`\beta` (trainable unless ``requires_grad=False``). iognn computes it
    with the fused Transformer attention op (``iognn.ops.transformer_attention``): one head,
    :math:`\mathbf{q} = \beta \hat{\mathbf{x}}`, :math:`\mathbf{k} = \hat{\mathbf{x}}`,
    :math:`\mathbf{v} = \mathbf{x}`, scale 1, where :math:`\hat{\mathbf{x}}_i =
    \mathbf{x}_i / \max(\lVert \mathbf{x}_i \rVert_2, 10^{-12})` (``F.normalize``), so that
    :math:`\mathbf{q}_i^{\top} \mathbf{k}_j = \beta \cos(\mathbf{x}_i, \mathbf{x}_j)`. No
    ``[E, F]`` message tensor is formed; the cost over the op itself is two ``[N, F]`` tensors
    (:math:`\hat{\mathbf{x}}` and :math:`\mathbf{q}`, kept for the backward). The backward is
    the op's deterministic one, plus autograd through the normalisation and the product by
    :math:`\beta`.

    Args:
        requires_grad (bool, optional): Learn :math:`\beta` (a parameter initialised to 1);
            ``False`` keeps it as a buffer of value 1. (default: ``True``)
        add_self_loops (bool, optional): Remove existing self-loops and add one per node.
            (default: ``True``)
        **kwargs (optional): PyG's ``MessagePassing`` arguments (``aggr`` must stay ``'add'``;
            ``node_dim`` must name the rows of ``x``: -2 or 0; ``decomposed_layers`` has no
            effect).

    Shapes:
        - **input:** ``x`` ``[N, F]``; ``edge_index`` ``[2, E]`` (or any adjacency of
          ``docs/nn.md``).
        - **output:** ``[N, F]``.

    iognn differences:
        - ``[B, N, F]`` features raise ``ValueError`` (PyG fails with a shape error).
        - torch.sparse adjacencies PyG cannot read (a CSC matrix; an uncoalesced COO one
          without self-loops) are computed: on the stored entries, or with self-loops on the
          coalesced matrix as for the others.
        - ``aggr`` other than ``'add'`` / ``'sum'`` and ``flow='target_to_source'`` raise
          ``NotImplementedError``; a ``node_dim`` other than -2 or 0 raises ``ValueError`` at
          the forward; not scriptable with ``torch.jit.script``; no ``propagate`` / ``message``
          or explain machinery.
    """

    def __init__(self, requires_grad: bool = True, add_self_loops: bool = True, **kwargs):
        super().__init__()
        args = MessagePassingArgs("AGNNConv", kwargs, aggr="add", node_dim=-2)
        check_attention_aggr("AGNNConv", args)
        args.install(self)
        self.requires_grad = requires_grad
        self.add_self_loops = add_self_loops
        if requires_grad:
            self.beta = Parameter(torch.empty(1))
        else:
            self.register_buffer("beta", torch.ones(1))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.requires_grad:
            with torch.no_grad():
                self.beta.fill_(1)

    def forward(self, x: Tensor, edge_index) -> Tensor:
        check_static("AGNNConv", x)
        x = node_major(x, self.node_dim)
        num_src, num_dst = attention_sizes(edge_index, x, x, None, self.add_self_loops)
        adj = structural_adjacency("AGNNConv", edge_index, num_src, num_dst, self.add_self_loops)
        value = autocast_input(x)  # the op's dtype: autocast's, else x's
        # Normalised in x's own dtype (fp32 under autocast), then rounded once to the op's dtype.
        x_hat = like(F.normalize(x, p=2.0, dim=-1), value).unsqueeze(1)
        query = like(self.beta, value) * x_hat
        out = transformer_attention(adj.graph, query, x_hat, value.unsqueeze(1), scale=1.0)
        return out.squeeze(1)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}()"
