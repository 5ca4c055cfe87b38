"""``Linear``: a dense layer with PyG's ``torch_geometric.nn.Linear`` parameters and initialisers.

Same parameter names (``weight [out, in]``, ``bias [out]``), same initialisers and the same order of
random draws (the constructor initialises once, as PyG's does), so an iognn layer built after
``torch.manual_seed(s)`` holds exactly the weights of the PyG layer built after the same seed.
Lazy initialisation (``in_channels=-1``) is not supported.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter

_WEIGHT_INITS = (None, "glorot", "uniform", "kaiming_uniform")
_BIAS_INITS = (None, "zeros")


def glorot_(weight: Tensor) -> None:
    """Uniform in ±sqrt(6 / (fan_in + fan_out)) over the last two dimensions (PyG's ``glorot``)."""
    bound = math.sqrt(6.0 / (weight.size(-2) + weight.size(-1)))
    with torch.no_grad():
        weight.uniform_(-bound, bound)


class Linear(torch.nn.Module):
    """``y = x W^T + b``.

    Args:
        in_channels, out_channels: sizes (``in_channels`` must be positive).
        bias: learn an additive bias.
        weight_initializer: ``None`` or ``'kaiming_uniform'`` (PyTorch's default, a=sqrt(5)),
            ``'glorot'`` or ``'uniform'`` (±1/sqrt(in_channels)).
        bias_initializer: ``None`` (uniform ±1/sqrt(in_channels)) or ``'zeros'``.
    """

    def __init__(self, in_channels: int, out_channels: int, bias: bool = True,
                 weight_initializer: Optional[str] = None,
                 bias_initializer: Optional[str] = None):
        super().__init__()
        if in_channels <= 0:
            raise ValueError(f"in_channels must be positive (lazy initialisation is not "
                             f"supported), got {in_channels}")
        if weight_initializer not in _WEIGHT_INITS:
            raise ValueError(f"weight_initializer must be one of {_WEIGHT_INITS}, "
                             f"got {weight_initializer!r}")
        if bias_initializer not in _BIAS_INITS:
            raise ValueError(f"bias_initializer must be one of {_BIAS_INITS}, "
                             f"got {bias_initializer!r}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.weight_initializer = weight_initializer
        self.bias_initializer = bias_initializer
        self.weight = Parameter(torch.empty(out_channels, in_channels))
        if bias:
            self.bias = Parameter(torch.empty(out_channels))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        with torch.no_grad():
            if self.weight_initializer == "glorot":
                glorot_(self.weight)
            elif self.weight_initializer == "uniform":
                bound = 1.0 / math.sqrt(self.in_channels)
                self.weight.uniform_(-bound, bound)
            else:  # None / 'kaiming_uniform' with a = sqrt(5): bound = 1 / sqrt(fan_in)
                bound = math.sqrt(6.0 / ((1 + 5.0) * self.in_channels))
                self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                if self.bias_initializer == "zeros":
                    self.bias.zero_()
                else:
                    bound = 1.0 / math.sqrt(self.in_channels)
                    self.bias.uniform_(-bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"bias={self.bias is not None})")
