"""Measured :class:`DeviceRates` for one (device, dtype): a few short timed runs, cached.

``calibrate(device, dtype)`` times four small kernels shaped like the ones the two paths run:

- GEMM rate: ``torch.bmm`` of tile-shaped operands ``[B, 32, 1024] @ [B, 1024, 128]`` (the dense
  path's products: ``b = 32`` rows, ``b * P`` columns, ``F_out = 128``), FLOPs / second;
- streaming bandwidth: a device-to-device copy (bytes read + written) / second;
- gather bandwidth: ``src[index]`` of random rows of 128 features (the sparse aggregation's
  reads), counted as bytes read + written per second, so the sparse path's gathers are never
  costed above what the device showed (the estimate stays on the sparse side of doubt);
- launch time: the host time of one small op issued without waiting (both paths pay it per op).

Each is the median of a few rounds after one warm-up; sizes are chosen so the whole calibration
takes well under a second on a GPU and on a CPU. Results are cached per (device, dtype) for the
process: :func:`calibrate` measures once, ``refresh=True`` measures again, :func:`forget_rates`
clears the cache.
"""
from __future__ import annotations

from typing import Callable, Dict, Tuple

import torch

from .cost import DeviceRates

_ROUNDS = 3
# Per device type: (bmm batch, copy elements, gather source rows, gathered rows, launches timed).
_SIZES = {"cuda": (256, 1 << 26, 1 << 18, 1 << 20, 200), "cpu": (4, 1 << 24, 1 << 16, 1 << 16, 200)}
_TILE_ROWS, _TILE_COLS, _FEATURES = 32, 1024, 128

_cache: Dict[Tuple[str, torch.dtype], DeviceRates] = {}


def _key(device, dtype: torch.dtype) -> Tuple[str, torch.dtype]:
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return str(device), dtype


def _seconds(run: Callable[[], object], device: torch.device, repeats: int = 1) -> float:
    """Median wall seconds of ``repeats`` back-to-back calls of ``run`` (after one warm-up):
    the bench's own clock."""
    from ..bench.workloads import wall_time  # the bench imports the layers, which import this
    return max(wall_time(run, device, 1, _ROUNDS, repeats) / 1e3, 1e-9)


def measure_rates(device, dtype: torch.dtype = torch.float32) -> DeviceRates:
    """Times the four kernels of the module note on ``device`` in ``dtype`` (no cache)."""
    device = torch.device(device)
    if not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point dtype, got {dtype}")
    batch, copy_elements, source_rows, gathered_rows, launches = _SIZES[
        "cuda" if device.type == "cuda" else "cpu"]
    elt = torch.empty(0, dtype=dtype).element_size()
    gen = torch.Generator(device=device).manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, device=device, dtype=dtype)

    tiles, rows = randn(batch, _TILE_ROWS, _TILE_COLS), randn(batch, _TILE_COLS, _FEATURES)
    gemm = 2 * batch * _TILE_ROWS * _TILE_COLS * _FEATURES / _seconds(
        lambda: torch.bmm(tiles, rows), device)
    del tiles, rows
    source, target = randn(copy_elements), torch.empty(copy_elements, device=device, dtype=dtype)
    streaming = 2 * copy_elements * elt / _seconds(lambda: target.copy_(source), device)
    del source, target
    table = randn(source_rows, _FEATURES)
    index = torch.randint(0, source_rows, (gathered_rows,), generator=gen, device=device)
    gather = 2 * gathered_rows * _FEATURES * elt / _seconds(lambda: table[index], device)
    del table, index
    small = torch.zeros(8, device=device, dtype=dtype)
    launch = _seconds(lambda: small.add_(1), device, repeats=launches)
    return DeviceRates(gemm, streaming, gather, launch)


def calibrate(device, dtype: torch.dtype = torch.float32, *, refresh: bool = False) -> DeviceRates:
    """The measured :class:`DeviceRates` of ``device`` for ``dtype``, cached for the process
    (``refresh=True`` measures again). ``TypedGatedGraphConv(path='auto')`` calls this on first
    use unless given ``rates``."""
    key = _key(device, dtype)
    if refresh or key not in _cache:
        _cache[key] = measure_rates(key[0], dtype)
    return _cache[key]


def forget_rates() -> None:
    """Clears :func:`calibrate`'s cache."""
    _cache.clear()
