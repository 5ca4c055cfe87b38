"""Aggregation modules with PyG 2.8's classes, call signature and results (``iognn.nn.aggr``).

Each module is called as PyG's, ``aggr(x, index=None, ptr=None, dim_size=None, dim=-2)`` (see
:class:`Aggregation`), and layers hand it their own graph. Differences from PyG (see
``docs/nn.md``): a malformed ``ptr`` raises ``ValueError``; ``torch.jit.script`` is not
supported; the per-class differences are in each class's docstring.
"""
from .base import Aggregation
from .basic import (MaxAggregation, MeanAggregation, MinAggregation, StdAggregation,
                    SumAggregation, VarAggregation)
from .multi import MultiAggregation
from .scaler import DegreeScalerAggregation

__all__ = ["Aggregation", "SumAggregation", "MeanAggregation", "MinAggregation", "MaxAggregation",
           "VarAggregation", "StdAggregation", "MultiAggregation", "DegreeScalerAggregation"]
