"""Functional iognn operators: each wraps a ``torch.ops.iognn`` op with argument handling, and the
op's fake (meta) kernel is registered next to its wrapper; the autograd formulas are C++
(``csrc/binding/autograd``)."""
from .attention import gat_attention, gatv2_attention, transformer_attention
from .propagate import gcn_norm, propagate
from .segment_reduce import segment_reduce

__all__ = ["propagate", "gcn_norm", "segment_reduce", "gat_attention", "gatv2_attention",
           "transformer_attention"]
