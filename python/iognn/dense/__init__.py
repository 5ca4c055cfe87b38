"""Balog et al.'s dense path for batches of small typed graphs (``docs/dense.md``).

``pack_supergraphs`` orders each graph by Reverse Cuthill-McKee and packs whole graphs into
fixed-size supergraphs of block-tridiagonal adjacency tiles (graphs that do not fit go to a sparse
remainder; no edge is dropped); ``dense_typed_propagate`` runs the typed sum propagate on them as
three batched products; ``choose_path`` says whether that is expected to beat the sparse path, and
why, at rates ``calibrate`` measures on the device.
"""
from .calibrate import calibrate, forget_rates, measure_rates
from .cost import DeviceRates, PathChoice, choose_path, estimate_cost
from .pack import PackedSupergraphs, pack_supergraphs
from .propagate import dense_typed_propagate

__all__ = ["pack_supergraphs", "PackedSupergraphs", "dense_typed_propagate", "estimate_cost",
           "choose_path", "PathChoice", "DeviceRates", "calibrate", "measure_rates",
           "forget_rates"]
