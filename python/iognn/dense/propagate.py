"""Typed message passing over packed supergraphs: three batched products per step.

``dense_typed_propagate(packed, h, weight, bias)`` computes, for every node i,
``out[i] = sum over in-edges e = (j -> i) of h[j] @ weight[type(e)] + bias[type(e)]``, the math of
``iognn.ops.typed_propagate(tg, h, weight, reduce='sum', bias=bias)``:

1. one GEMM ``hw = h_perm @ W`` over the supergraph slots, ``W = [F_in, P * F_out]`` the
   per-type weights side by side, so ``hw`` viewed ``[Q * K, b * P, F_out]`` holds each block's
   ``(source, type)`` rows;
2. three batched matmuls, the tiles of one diagonal ``[Q * K, b, b * P]`` against the block rows
   of ``hw`` one block before, at, and after each destination block (zero blocks at the ends),
   summed in that order;
3. the remainder edges through iognn's propagate (deterministic, no atomics) on a graph whose
   sources are ``local * P + type`` rows of the remainder nodes' ``h @ W``;
4. one gather back to batch order, plus ``in_type_counts @ bias``.

Every step is a torch op (autograd included) with shapes fixed by (Q, S, b, P, F) and the remainder
size; it runs wherever ``packed`` lives (CPU or CUDA).
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ..ops._checks import FLOAT_DTYPES
from ..ops.propagate import propagate
from .pack import PackedSupergraphs


def _check_tensor(name: str, t, dims: int, dtype: torch.dtype, device: torch.device) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a Tensor, got {type(t).__name__}")
    if t.dtype != dtype:
        raise TypeError(f"{name} has dtype {t.dtype} but h has {dtype}")
    if t.dim() != dims:
        raise ValueError(f"{name} must be {dims}-D, got shape {list(t.shape)}")
    if t.device != device:
        raise ValueError(f"{name} is on {t.device} but the packed batch is on {device}")


def _check_inputs(packed, h, weight, bias) -> None:
    if not isinstance(packed, PackedSupergraphs):
        raise TypeError("packed must be a PackedSupergraphs (iognn.dense.pack_supergraphs), got "
                        f"{type(packed).__name__}")
    if not isinstance(h, Tensor) or h.dtype not in FLOAT_DTYPES:
        raise TypeError("h must be a float32, float64, float16 or bfloat16 Tensor, got "
                        f"{getattr(h, 'dtype', type(h).__name__)}")
    _check_tensor("h", h, 2, h.dtype, packed.device)
    if h.size(0) != packed.num_nodes:
        raise ValueError(f"h has {h.size(0)} rows but the packed batch has {packed.num_nodes} "
                         "nodes")
    _check_tensor("weight", weight, 3, h.dtype, packed.device)
    if weight.shape[:2] != (packed.num_edge_types, h.size(1)):
        raise ValueError(f"weight must have shape [num_edge_types={packed.num_edge_types}, "
                         f"F_in={h.size(1)}, F_out], got {list(weight.shape)}")
    if bias is not None:
        _check_tensor("bias", bias, 2, h.dtype, packed.device)
        if bias.shape != (packed.num_edge_types, weight.size(2)):
            raise ValueError(f"bias must have shape [num_edge_types={packed.num_edge_types}, "
                             f"F_out={weight.size(2)}], got {list(bias.shape)}")


def _dense_part(packed: PackedSupergraphs, h: Tensor, stacked_weight: Tensor) -> Tensor:
    """``[Q * S, F_out]``: the tile products for every slot (0 for padding slots)."""
    b, P, f_out = packed.block, packed.num_edge_types, stacked_weight.size(1) // packed.num_edge_types
    blocks = packed.num_super * packed.num_blocks
    # Padding slots read an appended zero row of h.
    gather = torch.where(packed.slot_node >= 0, packed.slot_node, packed.num_nodes)
    h_slots = torch.cat([h, h.new_zeros(1, h.size(1))])[gather]
    hw = (h_slots @ stacked_weight).view(blocks, b * P, f_out)
    zero = hw.new_zeros(1, b * P, f_out)
    hw = torch.cat([zero, hw, zero])  # block -1 and block Q * K are empty
    tiles = packed.tiles.to(h.dtype).view(blocks, 3, b, b * P)
    out = torch.bmm(tiles[:, 0], hw[:-2])
    out = out + torch.bmm(tiles[:, 1], hw[1:-1])
    out = out + torch.bmm(tiles[:, 2], hw[2:])
    return out.view(packed.num_slots, f_out)


def _remainder_part(packed: PackedSupergraphs, h: Tensor, stacked_weight: Tensor) -> Tensor:
    """``[R, F_out]``: the remainder graphs' edges, transform then aggregate."""
    P, f_out = packed.num_edge_types, stacked_weight.size(1) // packed.num_edge_types
    rows = packed.remainder_nodes.numel()
    if rows == 0:
        return h.new_zeros(0, f_out)
    hw = (h[packed.remainder_nodes] @ stacked_weight).view(rows * P, f_out)
    return propagate(packed.remainder_graph, hw, None, "sum")


def dense_typed_propagate(packed: PackedSupergraphs, h: Tensor, weight: Tensor,
                          bias: Optional[Tensor] = None) -> Tensor:
    """Sum over in-edges of ``h[src] @ weight[type] + bias[type]``, on the dense path.

    Args:
        packed: a :class:`PackedSupergraphs` of the batch (``pack_supergraphs``).
        h: ``[N, F_in]`` node features in batch order.
        weight: ``[P, F_in, F_out]``, h's dtype.
        bias: optional ``[P, F_out]``: a per-edge message bias (node i gets
            ``sum_t n(i, t) * bias[t]``).
    Returns:
        ``[N, F_out]`` in batch order, differentiable in h, weight and bias.
    """
    _check_inputs(packed, h, weight, bias)
    P, f_in, f_out = weight.shape
    stacked_weight = weight.permute(1, 0, 2).reshape(f_in, P * f_out)
    rows = torch.cat([_dense_part(packed, h, stacked_weight),
                      _remainder_part(packed, h, stacked_weight)])
    out = rows[packed.output_row]
    if bias is not None:
        out = out + packed.in_type_counts.to(h.dtype) @ bias
    return out
