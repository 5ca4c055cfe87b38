"""Mixed precision inside the layers.

iognn's ops are not autocast-aware: they compute in the dtype of their feature input (accumulating
in fp32) and require the attention vectors / edge features to share that dtype. Linear layers
autocast themselves, so under ``torch.autocast`` their outputs are already in the autocast dtype;
the helpers below bring everything else the ops and the final additions read to that dtype, so a
layer returns the autocast dtype. Outside autocast they return their input unchanged.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor


def autocast_dtype(x: Tensor) -> Optional[torch.dtype]:
    """The autocast dtype active for x's device type, or None."""
    device_type = x.device.type
    if not torch.is_autocast_enabled(device_type):
        return None
    return torch.get_autocast_dtype(device_type)


def autocast_input(x: Optional[Tensor]) -> Optional[Tensor]:
    """x in the autocast dtype when autocast is on and x is a wider float tensor, else x."""
    if x is None or not x.is_floating_point():
        return x
    dtype = autocast_dtype(x)
    if dtype is None or x.dtype == dtype or x.dtype == torch.float64:
        return x
    return x.to(dtype)


def like(t: Optional[Tensor], ref: Tensor) -> Optional[Tensor]:
    """t (a parameter or edge tensor) in ref's float dtype: a differentiable cast (a no-op in
    fp32)."""
    if t is None or t.dtype == ref.dtype or not t.is_floating_point():
        return t
    return t.to(ref.dtype)
