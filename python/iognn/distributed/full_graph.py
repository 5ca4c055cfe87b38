"""Full-graph training on a partitioned graph: each rank runs the layers on its local graph.

A rank's local graph has its owned nodes as destinations and owned + halo nodes as sources
(:class:`~iognn.distributed.LocalGraph`). The layers stay communication-free: :class:`HaloConv`
wraps an iognn layer, exchanges what the layer reads from its halo sources and runs the layer's own
computation on the local graph, so the owned rows equal the one-process layer's rows:

- GCNConv: exchanges the narrower of ``x`` and ``lin(x)`` (GCN is linear, ``A (X W) = (A X) W``:
  when ``x`` is narrower it is aggregated over the local graph and the owned rows projected
  after) and normalises with the **global** degrees (the owners' degrees of the halo sources,
  exchanged once: only the owner sees a node's in-edges, self-loops included, which GCN's degree
  counts once);
- GATConv: exchanges the projected source features and their attention logits (``H * C + H``
  values per row), never edge tensors; the destination side stays local;
- SAGEConv with a sum or mean aggregation and no ``project``, when its output is narrower than
  its input: exchanges ``x W_l`` (``mean(x_j) W_l = mean(x_j W_l)``), aggregates it and adds
  ``lin_l``'s bias and ``lin_r(x)`` on the owned rows;
- any other layer that takes a ``(x_src, x_dst)`` pair (SAGEConv, GraphConv, GINConv, GATv2Conv,
  TransformerConv, ...): exchanges ``x`` and runs on ``((x_all, x_owned), graph)``.

With ``overlap`` each layer starts its exchange, computes its interior rows (destinations whose
sources are all owned) while the rows travel, then waits and computes its boundary rows; in
backward the halo gradients travel back while the interior rows' backward runs. Each layer kind
is one function of a row block, run on the whole local graph or on the two blocks.

``distribute(model, graph)`` wraps every iognn layer of a model in place; the model then runs as
before on the owned rows: ``model(local.take(data.x), graph.edge_index)``.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict
from typing import Optional, Tuple

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor

from ..graph import Graph, SelfLoops
from ..nn.conv._attention import check_static
from ..nn.conv._common import MessagePassingModule, aggregate_weighted
from ..nn.conv.gat_conv import GATConv
from ..nn.conv.gcn_conv import GCNConv
from ..nn._amp import like
from ..nn._graph import cached_on, structural_adjacency
from ..nn.aggr import MeanAggregation, SumAggregation
from ..nn.conv.sage_conv import SAGEConv
from ..ops._checks import acc_dtype
from ..ops.attention import gat_attention
from ..ops.propagate import propagate
from .halo import ExchangePlan, PendingExchange, halo_exchange, start_halo_exchange
from .launch import all_reduce_values

# HaloConv's overlap when none is given (distribute, iognn train --nproc, the bench).
OVERLAP = False


class DistributedGraph:
    """A rank's local graph prepared on its device: the local :class:`~iognn.Graph` (sources:
    owned then halo nodes; destinations: owned nodes), its :class:`ExchangePlan` and the process
    group. Only the Graphs and the send index go to the device; the LocalGraph stays where it is
    (its int64 edge list and edge ids would cost 24 bytes an edge there).

    Args:
        local: this rank's :class:`~iognn.distributed.LocalGraph` (``partition(..., ranks=[rank]).local(rank)``).
        device: where the layers run (default: the local graph's device).
        group: the process group of the exchanges (default: the default group).

    Attributes:
        edge_index: the LocalGraph's edge list, which a model's ``forward`` may pass on to its
            layers (they run on the prepared Graphs and only check its shape).
    """

    def __init__(self, local, device=None, group=None):
        self.local = local
        self.group = group
        self.plan = ExchangePlan.from_local(
            local, device if device is not None else local.edge_index.device)
        self.num_owned = local.num_owned
        self.num_interior = local.num_interior
        self.num_sources = local.num_owned + local.num_halo
        self.edge_index = local.edge_index
        self._graphs = {}
        self._blocks = {}
        self._inv_sqrt_degrees = {}
        self.graph = self.with_loops(SelfLoops.KEEP)

    @property
    def device(self) -> torch.device:
        return self.plan.device

    def with_loops(self, loops: SelfLoops) -> Graph:
        """The local Graph with the self-loop mode ``loops`` (over the owned nodes, the first
        ``num_owned`` sources), built once per mode."""
        if loops not in self._graphs:
            self._graphs[loops] = Graph(self.edge_index.to(self.device),
                                        (self.num_sources, self.num_owned), loops)
        return self._graphs[loops]

    def row_blocks(self, loops: SelfLoops) -> Tuple[Graph, Graph]:
        """The local Graph split by destination, with the self-loop mode ``loops``, built once
        per mode: the **interior** block (destinations ``[0, num_interior)``, sources the owned
        rows only: it reads no halo row) and the **boundary** block (destinations
        ``[num_interior, num_owned)`` numbered from 0, sources owned + halo). Each destination
        keeps its in-edges in the local Graph's order, so a block's rows aggregate as the whole
        graph's do."""
        if loops not in self._blocks:
            edges = self.edge_index.to(self.device)
            self._blocks[loops] = (
                _row_block(edges, 0, self.num_interior, self.num_owned, loops),
                _row_block(edges, self.num_interior, self.num_owned, self.num_sources, loops))
        return self._blocks[loops]

    def exchange(self, x: Tensor) -> Tensor:
        """``[num_owned, ...]`` -> ``[num_owned + num_halo, ...]`` (:func:`halo_exchange`)."""
        return halo_exchange(x, self.plan, self.group)

    def start_exchange(self, x: Tensor) -> PendingExchange:
        """:meth:`exchange`, started (:func:`start_halo_exchange`)."""
        return start_halo_exchange(x, self.plan, self.group)

    def gcn_degrees(self, add_self_loops: bool, dtype: torch.dtype) -> Tensor:
        """``deg^-1/2`` of every local node (owned then halo) from its global GCN degree. The
        first call per setting and dtype exchanges the owned nodes' degrees (a collective: every
        rank makes it); kept here, never evicted, so that no rank repeats it alone."""
        key = (add_self_loops, dtype)
        if key not in self._inv_sqrt_degrees:
            graph = self.with_loops(SelfLoops.ADD_REMAINING if add_self_loops
                                    else SelfLoops.KEEP)
            ones = torch.ones(self.num_sources, 1, dtype=dtype, device=self.device)
            owned = propagate(graph, ones).view(-1, 1)
            with torch.no_grad():
                degree = self.exchange(owned).view(-1)
            self._inv_sqrt_degrees[key] = degree.pow(-0.5).masked_fill(degree == 0, 0.0)
        return self._inv_sqrt_degrees[key]

    def gcn_weights(self, graph: Graph, first: int, add_self_loops: bool,
                    dtype: torch.dtype) -> Tensor:
        """GCN's normalised edge weights (augmented order) of ``graph``: the local Graph
        (``first = 0``) or a row block whose destination 0 is local node ``first``, with the
        self-loop mode of ``add_self_loops``; after :meth:`gcn_degrees`."""
        def compute():
            inv_sqrt = self.gcn_degrees(add_self_loops, dtype)
            # gcn_norm's deg(j)^-1/2 * 1 * deg(i)^-1/2, per CSR position, put in augmented order
            csr = inv_sqrt[graph.col.long()] * inv_sqrt[graph.csr_dst.long() + first]
            return torch.empty_like(csr).index_put_((graph.eid.long(),), csr)
        return cached_on(graph, ("gcn", add_self_loops, dtype), compute)

    def __repr__(self) -> str:
        return (f"DistributedGraph(rank={self.plan.rank}, world_size={self.plan.world_size}, "
                f"num_owned={self.num_owned}, num_halo={self.plan.num_halo}, "
                f"num_edges={self.edge_index.size(1)})")


class HaloConv(torch.nn.Module):
    """An iognn layer run on a rank's local graph: ``forward(x)`` takes the owned rows
    ``[num_owned, F]`` and returns the layer's output rows for them (see the module note for what
    each layer exchanges). ``edge_index`` may be passed for a drop-in call (``conv(x,
    edge_index)``): it must be the local graph's ``edge_index``; the layer runs on the prepared
    local Graph either way. Edge features / weights are not supported.

    ``overlap`` (default :data:`OVERLAP`): start the exchange, compute the interior rows (which
    read no halo row) while it runs, then wait and compute the boundary rows; without it the
    exchange completes before the layer runs on the whole local graph. Same rows either way.
    """

    def __init__(self, conv: torch.nn.Module, graph: DistributedGraph,
                 overlap: Optional[bool] = None):
        super().__init__()
        if not isinstance(conv, MessagePassingModule):
            raise TypeError(f"HaloConv wraps iognn layers (iognn.nn), got {type(conv).__name__}")
        self.conv = conv
        self.graph = graph
        self.overlap = OVERLAP if overlap is None else bool(overlap)
        self.row_bytes = 0  # the last forward's exchanged row (bytes) and whether its
        self.sends_gradient = False  # backward sends the halo gradients back

    def forward(self, x: Tensor, edge_index: Optional[Tensor] = None, *args, **kwargs) -> Tensor:
        name = type(self.conv).__name__
        if any(value is not None for value in (*args, *kwargs.values())):
            raise NotImplementedError(f"HaloConv({name}): edge weights / features and other "
                                      f"arguments are not supported in full-graph mode")
        if edge_index is not None and (not isinstance(edge_index, Tensor)
                                       or edge_index.shape != self.graph.edge_index.shape):
            raise ValueError(f"HaloConv({name}): edge_index is not this rank's local graph "
                             f"(pass DistributedGraph.edge_index, or nothing)")
        if x.size(0) != self.graph.num_owned:
            raise ValueError(f"HaloConv({name}): x has {x.size(0)} rows but this rank owns "
                             f"{self.graph.num_owned} nodes")
        if isinstance(self.conv, GCNConv):
            return self._gcn(x)
        if isinstance(self.conv, GATConv):
            return self._gat(x)
        if isinstance(self.conv, SAGEConv) and self._sage_projects_first(x):
            return self._sage_projected(x)
        # a layer that adds self-loops itself (GATv2Conv) takes the blocks with GAT's loops
        loops = SelfLoops.REPLACE if getattr(self.conv, "add_self_loops", False) \
            else SelfLoops.KEEP
        return self._rows(x, loops, lambda graph, sources, dst: self.conv((sources, x[dst]),
                                                                          graph))

    def _rows(self, rows: Tensor, loops: SelfLoops, block) -> Tensor:
        """The layer's output rows, given the rows it exchanges (``rows``, owned) and
        ``block(graph, sources, dst)``: the output rows of the local destinations ``dst`` (a
        slice) over ``graph`` (with ``loops``) whose sources are ``sources``. Overlapped: the
        interior block over the owned rows while the exchange runs, then the boundary block."""
        self.row_bytes = math.prod(rows.shape[1:]) * rows.element_size()
        self.sends_gradient = rows.requires_grad
        graph = self.graph
        if not self.overlap or graph.plan.world_size == 1:
            return block(graph.with_loops(loops), graph.exchange(rows),
                         slice(0, graph.num_owned))
        pending = graph.start_exchange(rows)
        interior, boundary = graph.row_blocks(loops)
        first = block(interior, rows, slice(0, graph.num_interior))
        return torch.cat([first, block(boundary, pending.wait(),
                                       slice(graph.num_interior, graph.num_owned))])

    def _gcn(self, x: Tensor) -> Tensor:
        conv = self.conv
        # a weighted sum or mean is linear, so the narrower of x and lin(x) crosses the ranks
        aggregate_first = (_is_linear(conv.aggr_module) and x.dim() == 2
                           and x.size(1) < conv.out_channels)
        dtype = acc_dtype(x.dtype)
        if conv.normalize:  # its first call exchanges the degrees: before the layer's exchange
            self.graph.gcn_degrees(conv.add_self_loops, dtype)
        loops = SelfLoops.ADD_REMAINING if conv.normalize and conv.add_self_loops \
            else SelfLoops.KEEP

        def block(graph, sources, dst):
            weight = (self.graph.gcn_weights(graph, dst.start, conv.add_self_loops, dtype)
                      if conv.normalize else None)
            if not aggregate_first:
                return aggregate_weighted(conv.aggr_module, graph, sources, weight, conv.bias, 0)
            out = conv.lin(aggregate_weighted(conv.aggr_module, graph, sources, weight, None, 0))
            return out if conv.bias is None else out + like(conv.bias, out)
        return self._rows(x if aggregate_first else conv.lin(x), loops, block)

    def _sage_projects_first(self, x: Tensor) -> bool:
        """Whether SAGEConv's ``lin_l`` may run before the aggregation (a sum or mean of the
        sources, no ``project`` MLP, a materialised weight) and gives narrower rows than x."""
        conv = self.conv
        weight = conv.lin_l.weight
        return (_is_linear(conv.aggr_module) and not conv.project and x.dim() == 2
                and not isinstance(weight, torch.nn.parameter.UninitializedParameter)
                and weight.size(0) < x.size(1))

    def _sage_projected(self, x: Tensor) -> Tensor:
        """SAGEConv as ``aggr(x_j W_l) + b_l + lin_r(x_i)``: the exchange moves ``x W_l``
        (``lin_l``'s forward hooks, if any, do not run on this path)."""
        conv = self.conv

        def block(graph, sources, dst):
            out = aggregate_weighted(conv.aggr_module, graph, sources, None, conv.lin_l.bias, 0)
            if conv.root_weight:
                out = out + conv.lin_r(x[dst])
            return F.normalize(out, p=2.0, dim=-1) if conv.normalize else out
        return self._rows(F.linear(x, conv.lin_l.weight), SelfLoops.KEEP, block)

    def _gat(self, x: Tensor) -> Tensor:
        conv = self.conv
        if conv.lin_edge is not None:
            raise NotImplementedError("HaloConv(GATConv): edge_dim (edge features) is not "
                                      "supported in full-graph mode")
        check_static("GATConv", x)
        heads, width = conv.heads, conv.heads * conv.out_channels
        res = conv.res(x) if conv.res is not None else None
        rows = conv._projected_rows(x, x)
        if rows is not None:  # [h | alpha_src] are sent as the GEMM wrote them: no copy
            sent, alpha_dst = rows.split([width + heads, heads], dim=1)
        else:
            h, _, alpha_src, alpha_dst = conv._project(x, x)
            sent = torch.cat([h.reshape(-1, width), alpha_src], dim=1)

        def block(graph, sources, dst):
            h_src, alpha = sources.split([width, heads], dim=1)
            adj = structural_adjacency("GATConv", graph, graph.num_src_nodes,
                                       graph.num_dst_nodes, conv.add_self_loops)
            out = gat_attention(adj.graph, h_src.view(-1, heads, conv.out_channels), alpha,
                                alpha_dst[dst], negative_slope=conv.negative_slope,
                                dropout=conv.dropout if conv.training else 0.0)
            return conv._output(out, None, None if res is None else res[dst], adj, graph)
        return self._rows(sent, SelfLoops.REPLACE if conv.add_self_loops else SelfLoops.KEEP,
                          block)

    def extra_repr(self) -> str:
        return (f"rank={self.graph.plan.rank}, world_size={self.graph.plan.world_size}, "
                f"overlap={self.overlap}")


def _row_block(edge_index: Tensor, first: int, last: int, num_sources: int,
               loops: SelfLoops) -> Graph:
    """The Graph of the local destinations ``[first, last)`` (numbered from 0) over the first
    ``num_sources`` local nodes; ``edge_index`` is sorted by destination, so their edges are one
    slice. With self-loops, the edges are what Graph builds for the whole local graph: the
    non-loop edges in order, then one loop per destination, from its own row ``first + j``.
    Graph's modes would put that loop at source ``j``, so the loops are given as edges and the
    Graph is marked with the mode (``edge_graph`` then takes it as built with the layer's
    loops)."""
    bounds = torch.tensor([first, last], dtype=edge_index.dtype, device=edge_index.device)
    lo, hi = torch.searchsorted(edge_index[1], bounds).tolist()
    src, dst = edge_index[0, lo:hi], edge_index[1, lo:hi] - first
    num_dst = last - first
    if loops != SelfLoops.KEEP:
        kept = src != dst + first
        own = torch.arange(num_dst, dtype=src.dtype, device=src.device)
        src, dst = torch.cat([src[kept], own + first]), torch.cat([dst[kept], own])
    graph = Graph(torch.stack([src, dst]), (num_sources, num_dst))
    if loops != SelfLoops.KEEP:
        graph.self_loops, graph.num_loops = loops, num_dst
    return graph


def _is_linear(aggr_module) -> bool:
    """Whether an aggregation commutes with a projection of its messages (sum, mean)."""
    return type(aggr_module) in (SumAggregation, MeanAggregation)


def distribute(model: torch.nn.Module, graph: DistributedGraph,
               overlap: Optional[bool] = None) -> torch.nn.Module:
    """Wraps every iognn layer of ``model`` (its submodules, at any depth; ``model`` itself if it
    is one) in a :class:`HaloConv` on ``graph``, in place, and returns the model. Parameters are
    kept (a state_dict key ``conv1.lin.weight`` becomes ``conv1.conv.lin.weight``): load weights
    before distributing. ``overlap``: see :class:`HaloConv` (None: :data:`OVERLAP`)."""
    if isinstance(model, MessagePassingModule):
        return HaloConv(model, graph, overlap)
    for name, child in list(model.named_children()):
        if isinstance(child, HaloConv):
            continue
        setattr(model, name, distribute(child, graph, overlap))
    return model


def exchanged_bytes_per_step(model: torch.nn.Module, halo_rows: int) -> int:
    """Bytes the last forward (and its backward) of ``model`` moved over all ranks, from the
    partition's halo rows and what each :class:`HaloConv` exchanged: ``halo_rows`` rows of its
    width forward, as many gradient rows back when they needed a gradient."""
    return sum(halo_rows * conv.row_bytes * (2 if conv.sends_gradient else 1)
               for conv in model.modules() if isinstance(conv, HaloConv))


def data_parallel(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` (on its device) in DistributedDataParallel, which averages the ranks' gradients.

    Without ``device_ids``: with them, DDP copies every tensor argument of each call to that
    device, and the ``graph.edge_index`` a full-graph model is called with stays on the host (see
    :class:`DistributedGraph`): 16 bytes an edge copied every step, for an argument the layers
    only check the shape of."""
    from torch.nn.parallel import DistributedDataParallel
    return DistributedDataParallel(model)


def check_partitions_agree(part, group=None) -> None:
    """Raises on every rank unless all ranks hold the same partition (its fingerprint)."""
    mine = (part.num_nodes, part.num_parts, part.fingerprint)
    everyone = [None] * dist.get_world_size(group)
    dist.all_gather_object(everyone, mine, group=group)
    if any(other != mine for other in everyone):
        listing = ", ".join(f"rank {r}: {f}" for r, f in enumerate(everyone))
        raise RuntimeError(f"iognn: the ranks' partitions differ ((num_nodes, num_parts, "
                           f"fingerprint) per rank: {listing}); every rank must load the same "
                           f"graph and partition it with the same method and seed")


def partition_note(report: dict) -> str:
    """The table's line about a distributed run's partition and exchanges."""
    stats = report["partition"]
    processes = "1 process" if report["world_size"] == 1 else f"{report['world_size']} processes"
    overlap = ", exchanges overlapped" if report.get("overlap") else ""
    return (f"{processes}, {stats['method']} partition{overlap}: edge cut "
            f"{report['edge_cut']:,}, halo rows {report['halo_rows']:,}, exchanged "
            f"{report['bytes_exchanged_per_epoch'] / 2**20:.2f} MiB per training step")


def train_full_graph(args) -> dict:
    """``iognn train --nproc N --loader full`` on one rank of the initialised group: loads the
    dataset, partitions it (every rank alike; the fingerprints are compared), trains the model
    of ``--model`` on the partition with DistributedDataParallel and returns the report."""

    import iognn.nn
    from ..datasets import load_dataset
    from ..train import PeakMemory, RunResult, TIME_METRIC, _sync, build_model, report_config
    from .launch import rank_device, ranks_ready
    from .partition import partition

    rank, world = dist.get_rank(), dist.get_world_size()
    device = rank_device(args)
    data = load_dataset(args.dataset, args.data_dir)
    num_classes = int(data.y.max()) + 1
    part = partition(data, world, args.partition, seed=0, ranks=[rank])  # its own layout only
    ranks_ready(args.dist_timeout)
    check_partitions_agree(part)
    local = part.local(rank)
    # the exchanges get a group of their own: their backward collectives then never queue up
    # with DDP's gradient all-reduces on one communicator
    graph = DistributedGraph(local, device, dist.new_group())
    torch.manual_seed(args.seed)
    model = build_model(args.model, iognn.nn, data.num_features, args.hidden, num_classes,
                        heads=args.heads, dropout=args.dropout, attn_dropout=args.attn_dropout)
    overlap = OVERLAP if args.overlap is None else args.overlap
    model = distribute(model, graph, overlap).to(device)
    trained = data_parallel(model)
    x, y = local.take(data.x).to(device), local.take(data.y).to(device)
    masks = {name: local.take(getattr(data, f"{name}_mask")).to(device)
             for name in ("train", "val", "test")}
    train_idx = masks["train"].nonzero().view(-1)
    # DDP averages the ranks' gradients: each rank's summed loss times world / (global count)
    # makes that average the gradient of the one-process mean loss
    scale = world / max(int(data.train_mask.sum()), 1)

    def loss_of(out):
        return F.cross_entropy(out[train_idx], y[train_idx], reduction="sum") * scale

    loss_of(trained(x, graph.edge_index)).backward()  # untimed warm-up, as one-process training
    trained.zero_grad(set_to_none=True)
    torch.manual_seed(args.seed + rank)
    optimizer = torch.optim.Adam(trained.parameters(), lr=args.lr,
                                 weight_decay=args.weight_decay)
    best = (-1.0, 0.0, 0)
    step_times, step_bytes, loss_value = [], [], float("nan")
    with PeakMemory(device) as memory:
        for epoch in range(1, args.epochs + 1):
            trained.train()
            _sync(device)
            start, sent = time.perf_counter(), graph.plan.bytes_sent
            optimizer.zero_grad(set_to_none=True)
            loss = loss_of(trained(x, graph.edge_index))
            loss.backward()
            optimizer.step()
            _sync(device)
            step_times.append(time.perf_counter() - start)
            step_bytes.append(graph.plan.bytes_sent - sent)
            expected_bytes = exchanged_bytes_per_step(model, part.halo_rows)
            model.eval()
            with torch.no_grad():
                predicted = model(x, graph.edge_index).argmax(dim=-1) == y
            counts = [float(loss.detach()) / world]
            for name in ("val", "test"):
                counts += [int(predicted[masks[name]].sum()), int(masks[name].sum())]
            loss_value, val_ok, val_n, test_ok, test_n = all_reduce_values(counts, dist.ReduceOp.SUM, device)
            val, test = val_ok / max(val_n, 1), test_ok / max(test_n, 1)
            if val > best[0]:
                best = (val, test, epoch)
    step_ms = all_reduce_values([1e3 * t for t in step_times] + step_bytes + [memory.mib],
                                dist.ReduceOp.SUM, device)
    epochs = args.epochs
    times_ms = [t / world for t in step_ms[:epochs]]  # mean over the ranks
    bytes_per_epoch = step_ms[epochs:2 * epochs]
    result = RunResult(f"iognn x{world}", best[1], best[0], best[2], loss_value,
                       sum(times_ms) / epochs, step_ms[-1] / world)
    config = report_config(args)
    config["device"] = str(device.type)
    stats = part.stats()
    return {"config": config, "time_metric": TIME_METRIC + " (ms), mean over the ranks",
            "memory_metric": memory.method + " (MiB), mean over the ranks",
            "num_nodes": data.num_nodes, "num_edges": data.num_edges, "world_size": world,
            "results": [asdict(result)], "epoch_times_ms": times_ms,
            "partition": {k: v for k, v in stats.items() if not isinstance(v, Tensor)},
            "edge_cut": part.edge_cut, "halo_rows": part.halo_rows, "overlap": overlap,
            "bytes_exchanged_per_epoch": bytes_per_epoch[-1],
            "bytes_expected_per_epoch": expected_bytes}
