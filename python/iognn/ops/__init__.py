"""Functional iognn operators: each wraps a ``torch.ops.iognn`` op with argument handling. The ops'
Meta kernels (their output shapes under fake tensors and torch.compile, ``csrc/binding/meta.cpp``)
and autograd formulas (``csrc/binding/autograd``) are C++."""
from .attention import gat_attention, gatv2_attention, transformer_attention
from .propagate import gcn_norm, propagate
from .segment_reduce import segment_reduce
from .typed_propagate import typed_propagate

__all__ = ["propagate", "gcn_norm", "segment_reduce", "gat_attention", "gatv2_attention",
           "transformer_attention", "typed_propagate"]
