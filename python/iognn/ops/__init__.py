"""Functional iognn operators: each wraps a ``torch.ops.iognn`` op with argument handling, and the
op's autograd formula and fake (meta) kernel are registered next to its wrapper."""
from .propagate import gcn_norm, propagate
from .segment_reduce import segment_reduce

__all__ = ["propagate", "gcn_norm", "segment_reduce"]
