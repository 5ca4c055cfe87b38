"""halo_exchange on 1, 2 and 4 processes (gloo; NCCL on as many GPUs as are visible): the rows
received and the gradients summed back equal a one-process gather's, bitwise."""
from __future__ import annotations

import pytest
import torch

from distributed_ranks import WORLDS_AND_BACKENDS, rank_device, run_ranks
from iognn.distributed import ExchangePlan, halo_exchange, start_halo_exchange

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def layout(parts: torch.Tensor, halos):
    """Hand-made plans: rank r owns the nodes of part r (ascending) and receives the global ids
    ``halos[r]`` (grouped by owner ascending, each group in its owner's order). Returns
    ``(owned, halo, plans)`` per rank as host data."""
    world = len(halos)
    owned = [(parts == r).nonzero().view(-1) for r in range(world)]
    local_of = {int(v): i for r in range(world) for i, v in enumerate(owned[r].tolist())}
    halo, groups = [], []
    for r in range(world):
        by_owner = [sorted((v for v in halos[r] if parts[v] == q), key=local_of.get)
                    for q in range(world)]
        groups.append(by_owner)
        halo.append(torch.tensor([v for g in by_owner for v in g], dtype=torch.int64))
    plans = []
    for r in range(world):
        send = [[local_of[v] for v in groups[q][r]] for q in range(world)]
        plans.append(dict(rank=r, world_size=world, num_owned=owned[r].numel(),
                          num_halo=halo[r].numel(),
                          send_index=torch.tensor([i for s in send for i in s], dtype=torch.int64),
                          send_counts=[len(s) for s in send],
                          recv_counts=[len(g) for g in groups[r]]))
    return owned, halo, plans


def cases(world: int):
    """(parts, halos) examples for ``world`` ranks: random halos; an empty halo on one rank; a rank
    that owns nothing (with 2+ ranks)."""
    g = torch.Generator().manual_seed(world)
    n = 13
    parts = torch.randint(0, world, (n,), generator=g)
    out = []
    halos = [[v for v in range(n) if parts[v] != r and torch.rand(1, generator=g) < 0.6]
             for r in range(world)]
    out.append((parts, halos))
    out.append((parts, [[] if r == 0 else h for r, h in enumerate(halos)]))
    if world > 1:
        empty = parts.clamp(min=1)
        out.append((empty, [[v for v in range(n) if empty[v] != r] for r in range(world)]))
    return out


def exchange_rank(rank, world, examples, backend):
    """Each example: this rank's exchanged rows, the gradient of its owned rows and the byte
    counter, for x of shape [N, 3, 2] in each dtype."""
    device = rank_device(backend, rank)
    results = []
    for x, grads, plan_args in examples:
        plan = ExchangePlan(device=device, **plan_args[rank])
        for dtype in DTYPES:
            mine = x[rank].to(device, dtype).detach().requires_grad_()
            out = halo_exchange(mine, plan)
            out.backward(grads[rank].to(device, dtype))
            results.append((out.detach(), mine.grad, plan.bytes_sent))
            plan.bytes_sent = 0
    return results


def reference(x: torch.Tensor, owned, halo, grads, dtype):
    """One process: rank r's rows ``x[owned_r ++ halo_r]`` from one gather over all ranks, and the
    gradient of every node from its backward (accumulated in index order)."""
    index = torch.cat([torch.cat([o, h]) for o, h in zip(owned, halo)])
    full = x.to(dtype).detach().requires_grad_()
    rows = full.index_select(0, index)
    rows.backward(torch.cat(grads).to(dtype))
    sizes = [o.numel() + h.numel() for o, h in zip(owned, halo)]
    return rows.detach().split(sizes), full.grad


def check_exchange(world: int, backend: str):
    g = torch.Generator().manual_seed(100 + world)
    examples, expected = [], []
    for parts, halos in cases(world):
        owned, halo, plans = layout(parts, halos)
        x = torch.randn(parts.numel(), 3, 2, generator=g)
        grads = [torch.randn(o.numel() + h.numel(), 3, 2, generator=g)
                 for o, h in zip(owned, halo)]
        examples.append(([x[o] for o in owned], grads, plans))
        for dtype in DTYPES:
            rows, grad = reference(x, owned, halo, grads, dtype)
            row_bytes = 6 * torch.empty(0, dtype=dtype).element_size()
            expected.append([(rows[r], grad[owned[r]],
                              row_bytes * (plans[r]["send_index"].numel() + halo[r].numel()))
                             for r in range(world)])
    results = run_ranks(exchange_rank, world, examples, backend, backend=backend)
    for i, want in enumerate(expected):
        exact = DTYPES[i % len(DTYPES)] == torch.float32 or world <= 2
        for r in range(world):
            rows, grad, sent = results[r][i]
            assert torch.equal(rows, want[r][0])
            # fp16/bf16 gradients: a one-process index_add rounds after every term, the fixed-order
            # sum once (they agree when at most two terms meet: two ranks)
            if exact:
                assert torch.equal(grad, want[r][1])
            else:
                torch.testing.assert_close(grad, want[r][1])
            assert sent == want[r][2]


@pytest.mark.parametrize("world, backend", WORLDS_AND_BACKENDS)
def test_halo_exchange(world, backend):
    check_exchange(world, backend)


def overlap_order_rank(rank, world, plans):
    """A started exchange with work recorded before its wait: the order in which backward runs
    the exchange's two nodes and that work's node."""
    plan = ExchangePlan(**plans[rank])
    x = torch.randn(plan.num_owned, 3).requires_grad_()
    pending = start_halo_exchange(x, plan)
    interior = x * 2  # reads no halo row
    rows = pending.wait()
    order = []
    wait = rows.grad_fn
    for node, name in ((wait, "wait"), (interior.grad_fn, "interior"),
                       (wait.next_functions[0][0], "start")):
        node.register_prehook(lambda grads, name=name: order.append(name))
    (interior.sum() + rows.sum()).backward()
    return order


def test_backward_overlaps_the_work_between_start_and_wait():
    """Backward starts sending the halo gradients back (the wait's node), runs the nodes recorded
    between start and wait, and only then sums what came back (the start's node)."""
    _, _, plans = layout(*cases(2)[0])
    for order in run_ranks(overlap_order_rank, 2, plans):
        assert order == ["wait", "interior", "start"]


def test_one_rank_returns_input():
    plan = ExchangePlan(0, 1, 4, 0, torch.empty(0, dtype=torch.int64), [0], [0])
    x = torch.randn(4, 2)
    assert halo_exchange(x, plan) is x


def test_plan_checks():
    empty = torch.empty(0, dtype=torch.int64)
    with pytest.raises(ValueError, match="one entry per rank"):
        ExchangePlan(0, 2, 3, 0, empty, [0], [0, 0])
    with pytest.raises(ValueError, match="num_halo"):
        ExchangePlan(0, 2, 3, 2, empty, [0, 0], [0, 1])
    with pytest.raises(ValueError, match="send_index"):
        ExchangePlan(0, 2, 3, 0, empty, [0, 1], [0, 0])
    with pytest.raises(ValueError, match="itself"):
        ExchangePlan(0, 2, 3, 1, torch.zeros(1, dtype=torch.int64), [1, 0], [1, 0])
    plan = ExchangePlan(0, 1, 3, 0, empty, [0], [0])
    with pytest.raises(ValueError, match="rows"):
        halo_exchange(torch.randn(2, 1), plan)
