"""Halo exchange: each rank's owned rows plus the rows of its halo, received from their owners.

``halo_exchange(x, plan)`` turns the owned rows ``[num_owned, ...]`` into ``[num_owned + num_halo,
...]`` (the local-id order of :class:`~iognn.distributed.LocalGraph`) through one
``torch.distributed.all_to_all_single``. The split lists are host-side ints fixed by the partition,
so nothing waits for the device; rows travel as raw bytes, so every dtype goes through every backend
unchanged. Backward sends the halo rows' gradients back to their owners, which add them to the rows
they sent with iognn's propagate over a small fixed Graph: a deterministic segment sum whose order
(contributions by rank ascending, the owner's own gradient at its rank's place) is the order a
one-process gather's backward accumulates in.
"""
from __future__ import annotations

import math
from typing import List, Optional

import torch
import torch.distributed as dist
from torch import Tensor

from ..graph import Graph
from ..ops.propagate import propagate


class ExchangePlan:
    """What one rank sends and receives in a halo exchange, on one device.

    Attributes:
        rank, world_size: this rank and the number of parts.
        num_owned, num_halo: the rows ``halo_exchange`` takes and the rows it appends.
        send_index: ``[sum(send_counts)]`` int64 local ids of the owned rows sent, grouped by
            receiving rank ascending (on ``device``).
        send_counts, recv_counts: rows sent to / received from each rank (host ints).
        bytes_sent: bytes this rank has sent so far, forward and backward exchanges together
            (counted on the host from the split lists: reading it costs no synchronisation).
    """

    def __init__(self, rank: int, world_size: int, num_owned: int, num_halo: int,
                 send_index: Tensor, send_counts: List[int], recv_counts: List[int],
                 device=None):
        send_counts, recv_counts = [int(c) for c in send_counts], [int(c) for c in recv_counts]
        if len(send_counts) != world_size or len(recv_counts) != world_size:
            raise ValueError(f"ExchangePlan: send_counts and recv_counts need one entry per rank "
                             f"({world_size}), got {len(send_counts)} and {len(recv_counts)}")
        if sum(recv_counts) != num_halo:
            raise ValueError(f"ExchangePlan: recv_counts sum to {sum(recv_counts)} but num_halo "
                             f"is {num_halo}")
        if send_index.dim() != 1 or send_index.numel() != sum(send_counts):
            raise ValueError(f"ExchangePlan: send_index must be 1-D with sum(send_counts) = "
                             f"{sum(send_counts)} entries, got shape {list(send_index.shape)}")
        if send_counts[rank] or recv_counts[rank]:
            raise ValueError("ExchangePlan: a rank sends nothing to itself")
        self.rank, self.world_size = int(rank), int(world_size)
        self.num_owned, self.num_halo = int(num_owned), int(num_halo)
        self.send_counts, self.recv_counts = send_counts, recv_counts
        self.device = torch.device(device) if device is not None else send_index.device
        self.send_index = send_index.to(self.device, torch.int64)
        self.bytes_sent = 0
        self._gather_back: Optional[Graph] = None

    @classmethod
    def from_local(cls, local, device=None) -> "ExchangePlan":
        """The plan of a :class:`~iognn.distributed.LocalGraph` (its send index moved to
        ``device``, default the local graph's)."""
        return cls(local.rank, local.num_parts, local.num_owned, local.num_halo,
                   local.send_index, local.send_counts, local.recv_counts,
                   device if device is not None else local.send_index.device)

    @property
    def num_sent(self) -> int:
        """Rows this rank sends per forward exchange."""
        return sum(self.send_counts)

    def bytes_per_exchange(self, row_bytes: int) -> int:
        """Bytes this rank sends in one forward exchange of rows of ``row_bytes`` bytes (the
        backward exchange sends as many the other way: ``num_halo * row_bytes``)."""
        return self.num_sent * int(row_bytes)

    @property
    def own_position(self) -> int:
        """Where the backward's rows put this rank's own gradient: after the gradients received
        from lower ranks (``sum(send_counts[:rank])`` rows)."""
        return sum(self.send_counts[:self.rank])

    def gather_back(self) -> Graph:
        """The backward's fixed-order sum: a Graph from ``[gradients received from lower ranks ;
        own gradient (num_owned rows) ; gradients received from higher ranks]`` to the owned rows.
        A Graph's rows add their in-edges by source id, so each owned row sums its contributions
        by rank ascending: the order a one-process gather's backward accumulates in."""
        if self._gather_back is None:
            ids = dict(dtype=torch.int64, device=self.device)
            own, before = torch.arange(self.num_owned, **ids), self.own_position
            received = torch.arange(self.num_sent, **ids)
            received[before:] += self.num_owned
            self._gather_back = Graph(
                torch.stack([torch.cat([before + own, received]),
                             torch.cat([own, self.send_index])]),
                (self.num_owned + self.num_sent, self.num_owned))
        return self._gather_back

    def __repr__(self) -> str:
        return (f"ExchangePlan(rank={self.rank}, world_size={self.world_size}, "
                f"num_owned={self.num_owned}, num_halo={self.num_halo}, sent={self.num_sent})")


def _all_to_all_rows(rows: Tensor, out: Tensor, out_counts: List[int], in_counts: List[int],
                     group) -> Tensor:
    """``rows`` ``[sum(in_counts), ...]`` scattered to the ranks by ``in_counts``; the rows
    received, grouped by sending rank (``out_counts``), are written into ``out`` (contiguous,
    same trailing shape and dtype), which is returned. Moves bytes."""
    def as_bytes(t: Tensor) -> Tensor:
        return t.view(t.size(0), math.prod(t.shape[1:])).view(torch.uint8)
    dist.all_to_all_single(as_bytes(out), as_bytes(rows.contiguous()), out_counts, in_counts,
                           group=group)
    return out


class _HaloExchange(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, plan: ExchangePlan, group):
        ctx.plan, ctx.group = plan, group
        sent = x.index_select(0, plan.send_index)
        plan.bytes_sent += sent.numel() * sent.element_size()
        rows = x.new_empty((plan.num_owned + plan.num_halo,) + x.shape[1:])
        rows[:plan.num_owned] = x
        _all_to_all_rows(sent, rows[plan.num_owned:], plan.recv_counts, plan.send_counts, group)
        return rows

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor):
        plan = ctx.plan
        own, halo = grad[:plan.num_owned], grad[plan.num_owned:]
        plan.bytes_sent += halo.numel() * halo.element_size()
        back = _all_to_all_rows(halo, halo.new_empty((plan.num_sent,) + halo.shape[1:]),
                                plan.send_counts, plan.recv_counts, ctx.group)
        before = plan.own_position
        rows = torch.cat([back[:before], own, back[before:]])
        width = math.prod(rows.shape[1:])
        summed = propagate(plan.gather_back(), rows.reshape(rows.size(0), width))
        return summed.view(own.shape), None, None


def halo_exchange(x: Tensor, plan: ExchangePlan, group=None) -> Tensor:
    """``x`` ``[num_owned, ...]`` (this rank's rows) -> ``[num_owned + num_halo, ...]``: the
    owned rows, then the halo rows received from their owners in the local graph's halo order.

    A collective: every rank of ``group`` (default: the default process group) calls it with its
    own plan. Differentiable (backward sends the halo gradients back and sums them into the sent
    rows in a fixed order). With one rank it returns ``x`` itself.
    """
    if x.size(0) != plan.num_owned:
        raise ValueError(f"halo_exchange: x has {x.size(0)} rows but the plan's rank owns "
                         f"{plan.num_owned}")
    if x.device != plan.device:
        raise ValueError(f"halo_exchange: x is on {x.device} but the plan is on {plan.device}")
    if plan.world_size == 1:
        return x
    if dist.get_world_size(group) != plan.world_size:
        raise ValueError(f"halo_exchange: the plan is for {plan.world_size} ranks but the process "
                         f"group has {dist.get_world_size(group)}")
    return _HaloExchange.apply(x, plan, group)
