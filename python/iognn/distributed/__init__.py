"""Several GPUs over torch.distributed (``docs/distributed.md``): graph partitioning, the halo
exchange and distributed training. ``import iognn`` does not import this package."""
from .partition import LocalGraph, Partition, partition

__all__ = ["partition", "Partition", "LocalGraph"]
