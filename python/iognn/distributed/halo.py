"""Halo exchange: each rank's owned rows plus the rows of its halo, received from their owners.

``halo_exchange(x, plan)`` turns the owned rows ``[num_owned, ...]`` into ``[num_owned + num_halo,
...]`` (the local-id order of :class:`~iognn.distributed.LocalGraph`) through one
``torch.distributed.all_to_all_single``. The split lists are host-side ints fixed by the partition,
so nothing waits for the device; rows travel as raw bytes, so every dtype goes through every backend
unchanged. Backward sends the halo rows' gradients back to their owners, which add them to the rows
they sent with iognn's propagate over a small fixed Graph: a deterministic segment sum whose order
(contributions by rank ascending, the owner's own gradient at its rank's place) is the order a
one-process gather's backward accumulates in.

``start_halo_exchange(x, plan)`` starts the same exchange and returns at once; its ``wait()``
gives the rows. Work queued in between (a layer's interior rows, which read no halo row) overlaps
the collective, and in backward the gradients' way back overlaps the backward of that work.
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


class _Flight:
    """One exchange shared by its two autograd nodes: the collective in flight (forward: the
    halo rows; backward: their gradients going back) and, in backward, the rows received."""

    def __init__(self, plan: ExchangePlan, group):
        self.plan, self.group = plan, group
        self.work = self.buffers = self.received = None

    def send(self, rows: Tensor, out: Tensor, backward: bool) -> None:
        """Starts sending ``rows`` to the ranks (forward: split by the plan's ``send_counts``,
        received by ``recv_counts``; backward the other way); the rows received, grouped by
        sending rank, land in ``out`` (contiguous, same trailing shape and dtype) once
        :meth:`wait` returns. Moves bytes, counted in the plan's ``bytes_sent``; the buffers stay
        alive while the collective runs."""
        def as_bytes(t: Tensor) -> Tensor:
            return t.view(t.size(0), math.prod(t.shape[1:])).view(torch.uint8)
        plan = self.plan
        counts = (plan.send_counts, plan.recv_counts)
        in_counts, out_counts = counts[::-1] if backward else counts
        rows = rows.contiguous()
        plan.bytes_sent += rows.numel() * rows.element_size()
        self.buffers = (rows, out)
        self.work = dist.all_to_all_single(as_bytes(out), as_bytes(rows), out_counts, in_counts,
                                           group=self.group, async_op=True)

    def wait(self) -> None:
        """Orders the current stream after the collective (NCCL: the host does not wait; gloo:
        it does) and lets its buffers go."""
        self.work.wait()
        self.work = self.buffers = None


class _HaloStart(torch.autograd.Function):
    """``x`` -> the rows ``[owned; halo]`` whose halo part is still arriving (read them only
    through :class:`_HaloWait`). Backward: waits for the gradients coming back and sums them into
    the rows sent, in the fixed order of :meth:`ExchangePlan.gather_back`."""

    @staticmethod
    def forward(ctx, x: Tensor, flight: _Flight):
        ctx.flight, plan = flight, flight.plan
        rows = x.new_empty((plan.num_owned + plan.num_halo,) + x.shape[1:])
        rows[:plan.num_owned] = x
        flight.send(x.index_select(0, plan.send_index), rows[plan.num_owned:], backward=False)
        return rows

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor):
        flight = ctx.flight
        flight.wait()
        back, flight.received = flight.received, None
        own, before = grad[:flight.plan.num_owned], flight.plan.own_position
        rows = torch.cat([back[:before], own, back[before:]])
        width = math.prod(rows.shape[1:])
        summed = propagate(flight.plan.gather_back(), rows.reshape(rows.size(0), width))
        return summed.view(own.shape), None


class _HaloWait(torch.autograd.Function):
    """Waits for :class:`_HaloStart`'s rows. Backward: starts sending the halo rows' gradients
    back to their owners and returns at once; the owners' sum waits in ``_HaloStart``'s backward,
    which autograd runs after the nodes recorded between the two (their backward overlaps the
    collective)."""

    @staticmethod
    def forward(ctx, rows: Tensor, flight: _Flight):
        ctx.flight = flight
        flight.wait()
        return rows

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor):
        flight = ctx.flight
        halo = grad[flight.plan.num_owned:]
        flight.received = halo.new_empty((flight.plan.num_sent,) + halo.shape[1:])
        flight.send(halo, flight.received, backward=True)
        return grad, None


class PendingExchange:
    """A halo exchange in flight (:func:`start_halo_exchange`): :meth:`wait` returns its rows."""

    def __init__(self, rows: Tensor, flight: Optional[_Flight]):
        self._rows, self._flight = rows, flight

    def wait(self) -> Tensor:
        """``[num_owned + num_halo, ...]``: the owned rows, then the halo rows. Call it once, on
        every rank (NCCL: only the current stream waits)."""
        if self._flight is None:
            return self._rows
        rows, flight, self._rows, self._flight = self._rows, self._flight, None, None
        return _HaloWait.apply(rows, flight)


def start_halo_exchange(x: Tensor, plan: ExchangePlan, group=None) -> PendingExchange:
    """Starts :func:`halo_exchange` and returns at once: work queued before :meth:`PendingExchange.wait`
    overlaps the collective (it must not read the halo rows). Differentiable: in backward the
    gradients go back while autograd runs the nodes recorded between the start and the wait."""
    if x.size(0) != plan.num_owned:
        raise ValueError(f"halo_exchange: x has {x.size(0)} rows but the plan's rank owns "
                         f"{plan.num_owned}")
    if x.device != plan.device:
        raise ValueError(f"halo_exchange: x is on {x.device} but the plan is on {plan.device}")
    if plan.world_size == 1:
        return PendingExchange(x, None)
    if dist.get_world_size(group) != plan.world_size:
        raise ValueError(f"halo_exchange: the plan is for {plan.world_size} ranks but the process "
                         f"group has {dist.get_world_size(group)}")
    flight = _Flight(plan, group)
    return PendingExchange(_HaloStart.apply(x, flight), flight)


def halo_exchange(x: Tensor, plan: ExchangePlan, group=None) -> Tensor:
    """``x`` ``[num_owned, ...]`` (this rank's rows) -> ``[num_owned + num_halo, ...]``: the
    owned rows, then the halo rows received from their owners in the local graph's halo order.

    A collective: every rank of ``group`` (default: the default process group) calls it with its
    own plan. Differentiable (backward sends the halo gradients back and sums them into the sent
    rows in a fixed order). With one rank it returns ``x`` itself.
    """
    return start_halo_exchange(x, plan, group).wait()
