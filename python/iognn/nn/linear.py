"""``Linear``: a dense layer with PyG's ``torch_geometric.nn.Linear`` parameters and initialisers.

Same parameter names (``weight [out, in]``, ``bias [out]``), same initialisers and the same order of
random draws (the constructor initialises once, as PyG's does), so an iognn layer built after
``torch.manual_seed(s)`` holds exactly the weights of the PyG layer built after the same seed.

Lazy initialisation as in PyG: ``in_channels=-1`` leaves ``weight`` an ``UninitializedParameter``
(and ``bias`` uninitialised) until the first forward, which sets ``in_channels`` from the input's
last dimension and draws both; a state_dict holding a materialised weight materialises it on load.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter
from torch.nn.parameter import UninitializedParameter, is_lazy

_WEIGHT_INITS = (None, "glorot", "uniform", "kaiming_uniform")
_BIAS_INITS = (None, "zeros")


def glorot_(weight: Optional[Tensor]) -> None:
    """Uniform in ±sqrt(6 / (fan_in + fan_out)) over the last two dimensions (PyG's ``glorot``)."""
    if weight is None:
        return
    bound = math.sqrt(6.0 / (weight.size(-2) + weight.size(-1)))
    with torch.no_grad():
        weight.uniform_(-bound, bound)


def zeros_(tensor: Optional[Tensor]) -> None:
    """Fills ``tensor`` (a bias, or None: nothing) with zeros, outside autograd (PyG's ``zeros``)."""
    if tensor is not None:
        with torch.no_grad():
            tensor.zero_()


def register_bias(module: torch.nn.Module, size: int, bias: bool) -> None:
    """Registers ``module.bias``: an uninitialised ``[size]`` parameter, or None without ``bias``
    (as PyG's layers do: the attribute exists either way)."""
    module.register_parameter("bias", Parameter(torch.empty(size)) if bias else None)


class Linear(torch.nn.Module):
    r"""Dense affine layer, replacing ``torch_geometric.nn.Linear`` (PyG's ``torch.nn.Linear``
    with lazy input size and selectable initialisers).

    .. math::
        \mathbf{y} = \mathbf{x} \mathbf{W}^{\top} + \mathbf{b}

    ``weight`` is ``[out_channels, in_channels]`` and ``bias`` ``[out_channels]``, drawn by the
    same initialisers in the same order as PyG's, so a layer built after ``torch.manual_seed(s)``
    holds PyG's weights.

    Args:
        in_channels (int): Size of each input sample; ``-1`` (any value ``<= 0``) leaves
            ``weight`` uninitialised until the first call, which reads the size from the input's
            last dimension and draws the weights (a ``state_dict`` with a materialised weight
            also fixes it on load).
        out_channels (int): Size of each output sample.
        bias (bool, optional): Learn the additive bias :math:`\mathbf{b}`. (default: ``True``)
        weight_initializer (str, optional): ``'glorot'`` (uniform in
            :math:`\pm\sqrt{6 / (F_{in} + F_{out})}`), ``'uniform'`` (uniform in
            :math:`\pm 1/\sqrt{F_{in}}`), ``'kaiming_uniform'`` or ``None`` (both PyTorch's
            default: Kaiming uniform with :math:`a = \sqrt{5}`). Any other value raises
            ``ValueError``. (default: ``None``)
        bias_initializer (str, optional): ``'zeros'``, or ``None`` (uniform in
            :math:`\pm 1/\sqrt{F_{in}}`). (default: ``None``)

    Shapes:
        - **input:** ``x`` ``[*, F_in]``
        - **output:** ``[*, F_out]``

    iognn differences:
        Cannot be compiled with ``torch.jit.script`` (use ``torch.compile``).
    """

    def __init__(self, in_channels: int, out_channels: int, bias: bool = True,
                 weight_initializer: Optional[str] = None,
                 bias_initializer: Optional[str] = None):
        super().__init__()
        for name, value, known in (("weight_initializer", weight_initializer, _WEIGHT_INITS),
                                   ("bias_initializer", bias_initializer, _BIAS_INITS)):
            if value not in known:
                raise ValueError(f"{name} must be one of {known}, got {value!r}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.weight_initializer = weight_initializer
        self.bias_initializer = bias_initializer
        if in_channels > 0:
            self.weight = Parameter(torch.empty(out_channels, in_channels))
        else:
            self.weight = UninitializedParameter()
            self._hook = self.register_forward_pre_hook(Linear._initialize_parameters)
        register_bias(self, out_channels, bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.in_channels <= 0:  # lazy: drawn on the first forward
            return
        with torch.no_grad():
            if self.weight_initializer == "glorot":
                glorot_(self.weight)
            elif self.weight_initializer == "uniform":
                bound = 1.0 / math.sqrt(self.in_channels)
                self.weight.uniform_(-bound, bound)
            else:  # None / 'kaiming_uniform' with a = sqrt(5): bound = 1 / sqrt(fan_in),
                # in PyG's arithmetic ((sqrt 5)^2 rounds above 5: fp64 draws differ otherwise)
                bound = math.sqrt(6.0 / ((1 + math.sqrt(5) ** 2) * self.in_channels))
                self.weight.uniform_(-bound, bound)
            if self.bias is not None:
                if self.bias_initializer == "zeros":
                    self.bias.zero_()
                else:
                    bound = 1.0 / math.sqrt(self.in_channels)
                    self.bias.uniform_(-bound, bound)

    def _initialize_parameters(self, inputs) -> None:
        """Forward pre-hook of a lazy layer: materialise and draw the weights once."""
        if is_lazy(self.weight):
            self.in_channels = inputs[0].size(-1)
            with torch.no_grad():
                self.weight.materialize((self.out_channels, self.in_channels))
            self.reset_parameters()
        self._remove_hook()

    def _remove_hook(self) -> None:
        if hasattr(self, "_hook"):
            self._hook.remove()
            del self._hook

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        # An uninitialised weight cannot be detached: it is saved as it is (as PyG does).
        if is_lazy(self.weight):
            destination[prefix + "weight"] = self.weight
            if self.bias is not None:
                destination[prefix + "bias"] = self.bias if keep_vars else self.bias.detach()
            return
        super()._save_to_state_dict(destination, prefix, keep_vars)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # A materialised weight loaded into a lazy layer fixes its input size (PyG's behaviour).
        weight = state_dict.get(prefix + "weight")
        if weight is not None and not is_lazy(weight) and is_lazy(self.weight):
            self.in_channels = weight.size(-1)
            self.weight.materialize((self.out_channels, self.in_channels))
            self._remove_hook()
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, "
                f"bias={self.bias is not None})")


def stacked_linears(x: Tensor, lins) -> Optional[list]:
    """``[lin(x) for lin in lins]`` from one GEMM against the stacked weights (views of one
    output), or None when the layers cannot be stacked: a weight still lazy, or a bias on some
    layers but not all. On small graphs a GEMM costs more host time than device time, so a layer
    that projects one input several ways saves two GEMMs per extra projection (forward and
    backward) and the additions of x's gradients. Forward hooks of the Linear modules do not run
    on this path."""
    weights = [lin.weight for lin in lins]
    # isinstance, not is_lazy: TorchDynamo traces the one and breaks the graph at the other
    if any(isinstance(w, UninitializedParameter) for w in weights):
        return None
    biases = [lin.bias for lin in lins]
    if any(b is None for b in biases) and not all(b is None for b in biases):
        return None
    bias = None if biases[0] is None else torch.cat(biases)
    out = F.linear(x, torch.cat(weights), bias)
    return list(out.split([w.size(0) for w in weights], dim=-1))
