"""Attention family: GAT, GATv2 and Graph-Transformer attention over an :class:`iognn.Graph`.

For every destination i and head h, each in-edge j -> i (augmented edge id e) gets a score s, the
scores of i's in-edges are softmax-normalised into ``alpha`` and the output is the
``alpha``-weighted sum of one value per edge:

- GAT:         ``s = leaky_relu(alpha_src[j] + alpha_dst[i] + edge_attr[e] @ w_edge)``,
               value ``x[j]``
- GATv2:       ``s = att . leaky_relu(x_dst[i] + x_src[j] + lin_edge(edge_attr[e]))``,
               value ``x_src[j]``
- Transformer: ``s = scale * query[i] . (key[j] + lin_edge(edge_attr[e]))``,
               value ``value[j] + lin_edge(edge_attr[e])``

exactly as PyG 2.8's GATConv / GATv2Conv / TransformerConv compute them (a destination without
in-edges gets 0). The ops are fused: no ``[E', H*C]`` tensor is formed; the backward recomputes the
attention from a per-(destination, head) logsumexp. Attention dropout is counter-based, keyed by
(seed, augmented edge id, head): the same mask in forward and backward, for int32 and int64 graphs
and for the CPU and CUDA kernels. ``edge_attr`` rows are in the graph's augmented edge order
(apply ``graph.augment_edge_values`` first); ``alpha`` is returned in that order too.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from ._checks import check_edge_values, check_features, check_graph

Result = Union[Tensor, Tuple[Tensor, Tensor]]


def gat_attention(graph, x: Tensor, alpha_src: Tensor, alpha_dst: Optional[Tensor],
                  edge_attr: Optional[Tensor] = None, w_edge: Optional[Tensor] = None,
                  negative_slope: float = 0.2, dropout: float = 0.0, return_alpha: bool = False,
                  seed: Optional[int] = None) -> Result:
    """GATConv's attention and aggregation.

    Args:
        graph: an :class:`iognn.Graph`.
        x: projected source features ``[num_src_nodes, H, C]``.
        alpha_src: ``(x * att_src).sum(-1)``, ``[num_src_nodes, H]``.
        alpha_dst: ``(x_dst * att_dst).sum(-1)``, ``[num_dst_nodes, H]``, or None (no target term).
        edge_attr: optional ``[num_edges, De]`` (or ``[num_edges]``) edge features.
        w_edge: ``[De, H]``, ``lin_edge.weight`` contracted with ``att_edge``
            (``(W.view(H, C, De) * att_edge.view(H, C, 1)).sum(1).t()``); required with edge_attr.
        negative_slope: leaky_relu slope.
        dropout: attention dropout probability in [0, 1) (pass 0 in eval mode).
        return_alpha: also return the attention weights after dropout, ``[num_edges, H]``.
        seed: dropout seed; None draws one from torch's default generator.
    Returns:
        ``out [num_dst_nodes, H, C]``, or ``(out, alpha)``.

    Without edge features, dropout or alpha, a graph whose ``tile_policy`` is not ``"csr"`` may
    run on the tile path (``ops/attention_tiles.py``).
    """
    check_graph(graph)
    H, C = _heads_channels("x", x)
    check_features("x", x, graph, graph.num_src_nodes, dim=3)
    _check_tensor("alpha_src", alpha_src, x, (graph.num_src_nodes, H), "[num_src_nodes, heads]")
    if alpha_dst is not None:
        _check_tensor("alpha_dst", alpha_dst, x, (graph.num_dst_nodes, H),
                      "[num_dst_nodes, heads]")
    edge_attr = _edge_attr(graph, edge_attr, w_edge, x)
    if edge_attr is not None:
        _check_tensor("w_edge", w_edge, x, (edge_attr.size(1), H), "[edge_dim, heads]")
    if _tile_path_may_run(graph, edge_attr, dropout, return_alpha):
        from . import attention_tiles  # the tile path (ops/attention_tiles.py)
        paths = attention_tiles.choose_gat(graph, x, alpha_src, alpha_dst, float(negative_slope))
        if any(paths):
            return attention_tiles.tile_gat(graph, x, alpha_src, alpha_dst,
                                            float(negative_slope), *paths)
    dropout, seed = _dropout_seed(dropout, seed)
    out, _, alpha = torch.ops.iognn.gat_attention(
        *_graph_tensors(graph), x, alpha_src, alpha_dst, edge_attr, w_edge,
        float(negative_slope), dropout, seed, bool(return_alpha), *graph.max_degree_hints)
    return (out, alpha) if return_alpha else out


def gatv2_attention(graph, x_src: Tensor, x_dst: Tensor, att: Tensor,
                    edge_attr: Optional[Tensor] = None, w_edge: Optional[Tensor] = None,
                    negative_slope: float = 0.2, dropout: float = 0.0, return_alpha: bool = False,
                    seed: Optional[int] = None) -> Result:
    """GATv2Conv's attention and aggregation.

    Args:
        x_src: ``lin_l(x_src)`` viewed as ``[num_src_nodes, H, C]``.
        x_dst: ``lin_r(x_dst)`` viewed as ``[num_dst_nodes, H, C]``.
        att: ``[H, C]`` or ``[1, H, C]``.
        edge_attr: optional ``[num_edges, De]`` (or ``[num_edges]``) edge features.
        w_edge: ``lin_edge.weight`` ``[H * C, De]`` (no bias); required with edge_attr.
        Other arguments and the result as in :func:`gat_attention` (alpha after dropout).

    Without edge features, dropout or alpha, a graph whose ``tile_policy`` is not ``"csr"`` may
    run on the tile path (``ops/attention_tiles.py``).
    """
    check_graph(graph)
    H, C = _heads_channels("x_src", x_src)
    check_features("x_src", x_src, graph, graph.num_src_nodes, dim=3)
    check_features("x_dst", x_dst, graph, graph.num_dst_nodes, dim=3)
    _check_tensor("x_dst", x_dst, x_src, (graph.num_dst_nodes, H, C),
                  "[num_dst_nodes, heads, channels]", "x_src")
    if isinstance(att, Tensor) and att.dim() == 3 and att.size(0) == 1:
        att = att.squeeze(0)
    _check_tensor("att", att, x_src, (H, C), "[heads, channels] or [1, heads, channels]", "x_src")
    edge_attr = _edge_attr(graph, edge_attr, w_edge, x_src, "x_src")
    if edge_attr is not None:
        _check_tensor("w_edge", w_edge, x_src, (H * C, edge_attr.size(1)),
                      "[heads * channels, edge_dim]", "x_src")
    if _tile_path_may_run(graph, edge_attr, dropout, return_alpha):
        from . import attention_tiles  # the tile path (ops/attention_tiles.py)
        slope = float(negative_slope)
        paths = attention_tiles.choose_gatv2(graph, x_src, x_dst, att, slope)
        if any(paths):
            return attention_tiles.tile_gatv2(graph, x_src, x_dst, att, slope, *paths)
    dropout, seed = _dropout_seed(dropout, seed)
    out, _, alpha = torch.ops.iognn.gatv2_attention(
        *_graph_tensors(graph), x_src, x_dst, att, edge_attr, w_edge, float(negative_slope),
        dropout, seed, bool(return_alpha), *graph.max_degree_hints)
    return (out, alpha) if return_alpha else out


def transformer_attention(graph, query: Tensor, key: Tensor, value: Tensor,
                          edge_attr: Optional[Tensor] = None, w_edge: Optional[Tensor] = None,
                          dropout: float = 0.0, return_alpha: bool = False,
                          seed: Optional[int] = None, scale: Optional[float] = None) -> Result:
    """TransformerConv's attention and aggregation.

    Args:
        query: ``[num_dst_nodes, H, C]``; key, value: ``[num_src_nodes, H, C]``.
        edge_attr: optional ``[num_edges, De]`` (or ``[num_edges]``) edge features, added to the
            keys and the values through ``w_edge``.
        w_edge: ``lin_edge.weight`` ``[H * C, De]`` (no bias); required with edge_attr.
        scale: score scale, ``1 / sqrt(C)`` by default.
        return_alpha: also return the attention weights *before* dropout (as PyG does).
        Other arguments and the result as in :func:`gat_attention`.

    Without edge features, dropout or alpha, a graph whose ``tile_policy`` is not ``"csr"`` may
    run on the tile path (``ops/attention_tiles.py``).
    """
    check_graph(graph)
    H, C = _heads_channels("query", query)
    check_features("query", query, graph, graph.num_dst_nodes, dim=3)
    for name, t in (("key", key), ("value", value)):
        check_features(name, t, graph, graph.num_src_nodes, dim=3)
        _check_tensor(name, t, query, (graph.num_src_nodes, H, C),
                      "[num_src_nodes, heads, channels]", "query")
    edge_attr = _edge_attr(graph, edge_attr, w_edge, query, "query")
    if edge_attr is not None:
        _check_tensor("w_edge", w_edge, query, (H * C, edge_attr.size(1)),
                      "[heads * channels, edge_dim]", "query")
    scale = 1.0 / math.sqrt(C) if scale is None else float(scale)
    if _tile_path_may_run(graph, edge_attr, dropout, return_alpha):
        from . import attention_tiles  # the tile path (ops/attention_tiles.py)
        paths = attention_tiles.choose(graph, query, key, value, scale)
        if any(paths):
            return attention_tiles.tile_transformer(graph, query, key, value, scale, *paths)
    dropout, seed = _dropout_seed(dropout, seed)
    out, _, alpha = torch.ops.iognn.transformer_attention(
        *_graph_tensors(graph), query, key, value, edge_attr, w_edge, scale, dropout, seed,
        bool(return_alpha), *graph.max_degree_hints)
    return (out, alpha) if return_alpha else out


# ---- argument handling ---------------------------------------------------------------------
def _tile_path_may_run(graph, edge_attr, dropout, return_alpha) -> bool:
    """The tile path takes no edge features, dropout or alpha, and never a "csr" graph."""
    return (edge_attr is None and float(dropout) == 0.0 and not return_alpha
            and getattr(graph, "tile_policy", "csr") != "csr")


def _graph_tensors(graph) -> Tuple[Tensor, ...]:
    return (graph.rowptr, graph.col, graph.eid, graph.colptr, graph.row, graph.csc2csr)


def _heads_channels(name: str, t: Tensor) -> Tuple[int, int]:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a Tensor, got {type(t).__name__}")
    if t.dim() != 3:
        raise ValueError(f"{name} must be 3-D [num_nodes, heads, channels], got shape "
                         f"{list(t.shape)}")
    if t.size(1) < 1 or t.size(2) < 1:
        raise ValueError(f"{name} must have at least one head and one channel, got shape "
                         f"{list(t.shape)}")
    return t.size(1), t.size(2)


def _check_tensor(name: str, t, ref: Tensor, shape: Sequence[int], meaning: str,
                  ref_name: str = "x") -> None:
    """t must be a tensor of `shape` with the dtype and device of `ref`."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a Tensor, got {type(t).__name__}")
    if t.dtype != ref.dtype:
        raise TypeError(f"{name} has dtype {t.dtype} but {ref_name} has dtype {ref.dtype}")
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {meaning} = {list(shape)}, got {list(t.shape)}")
    if t.device != ref.device:
        raise ValueError(f"{name} is on {t.device} but {ref_name} is on {ref.device}")


def _edge_attr(graph, edge_attr: Optional[Tensor], w_edge: Optional[Tensor], ref: Tensor,
               ref_name: str = "x") -> Optional[Tensor]:
    """Checks edge_attr ([E'] or [E', De]) against the graph; returns it 2-D (or None)."""
    if (edge_attr is None) != (w_edge is None):
        given = "edge_attr" if w_edge is None else "w_edge"
        raise ValueError(f"edge_attr and w_edge must be given together (got {given} only)")
    if edge_attr is None:
        return None
    check_edge_values("edge_attr", edge_attr, graph, ref)
    if edge_attr.dim() == 1:
        edge_attr = edge_attr.view(-1, 1)
    if edge_attr.dim() != 2:
        raise ValueError(f"edge_attr must be 1-D or 2-D [num_edges, edge_dim], got shape "
                         f"{list(edge_attr.shape)}")
    if edge_attr.dtype != ref.dtype:
        raise TypeError(f"edge_attr has dtype {edge_attr.dtype} but {ref_name} has dtype "
                        f"{ref.dtype}")
    return edge_attr


def _dropout_seed(dropout: float, seed: Optional[int]) -> Tuple[float, int]:
    dropout = float(dropout)
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")
    if dropout == 0.0:
        return 0.0, 0 if seed is None else int(seed)  # no draw: eval mode leaves the RNG alone
    if seed is None:
        if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
            raise RuntimeError("attention dropout cannot run inside a captured CUDA graph: its "
                               "seed is drawn on the host, so every replay would apply the same "
                               "mask; set the attention layers' dropout to 0 (or run the step "
                               "eagerly), or pass a seed to replay one fixed mask")
        seed = int(torch.randint(0, 2**62, ()))
    return dropout, int(seed)
