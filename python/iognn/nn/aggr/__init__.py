"""Aggregation modules with PyG 2.8's classes, call signature and results (``iognn.nn.aggr``)."""
from .base import Aggregation
from .basic import (MaxAggregation, MeanAggregation, MinAggregation, StdAggregation,
                    SumAggregation, VarAggregation)
from .multi import MultiAggregation
from .scaler import DegreeScalerAggregation

__all__ = ["Aggregation", "SumAggregation", "MeanAggregation", "MinAggregation", "MaxAggregation",
           "VarAggregation", "StdAggregation", "MultiAggregation", "DegreeScalerAggregation"]
