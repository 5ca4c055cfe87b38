"""Several GPUs over torch.distributed (``docs/distributed.md``): graph partitioning, the halo
exchange and distributed training. ``import iognn`` does not import this package."""
from .partition import LocalGraph, Partition, partition
from .halo import ExchangePlan, PendingExchange, halo_exchange, start_halo_exchange
from .full_graph import DistributedGraph, HaloConv, data_parallel, distribute

__all__ = ["partition", "Partition", "LocalGraph", "ExchangePlan", "halo_exchange",
           "start_halo_exchange", "PendingExchange",
           "DistributedGraph", "HaloConv", "distribute", "data_parallel"]
