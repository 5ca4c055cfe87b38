"""Benchmark graphs from a spec string: synthetic generators and the real graphs of the data folder.

A spec is ``kind:arg:arg...`` for a generator or a dataset name (see :mod:`.datasets`). Every
generator returns ``(edge_index, num_nodes)``: an int64 ``[2, E]`` tensor (row 0 = source j, row 1
= target i, PyG's convention) on the requested device, with self-loops and duplicate edges removed
and the edges sorted by (source, target), as ``torch_geometric.utils.coalesce`` would leave them.
The graphs are directed unless stated; ``avgdeg`` is the number of edges drawn per node, so it is
the mean in-degree (= mean out-degree) before duplicates and loops are dropped.

Determinism: every random draw comes from a ``torch.Generator`` seeded with ``seed`` on the target
device, so a (spec, seed, device type) triple always gives the same graph; CPU and CUDA generators
produce different streams, so the same seed gives different graphs on the two devices.

Generators (all vectorised; a 1M-node / 16M-edge graph takes seconds on a CPU):
  ``powerlaw:N:avgdeg[:exponent]``  Chung-Lu: node of rank r (1-based) has weight r^(-1/(exponent-1))
      (default exponent 2.1), so degrees follow P(k) ~ k^-exponent. About N*avgdeg (source, target)
      pairs are drawn independently in proportion to the weights (Poissonised: each node's number of
      draws is Poisson with mean proportional to its weight, then one side is shuffled; this needs
      neither torch.multinomial, limited to 2^24 categories, nor a random-access searchsorted), and
      node ids are randomly permuted. The top weights exceed sqrt(sum of weights), so hub-to-hub
      pairs are drawn many times over: dropping duplicates and loops leaves E below N*avgdeg, by
      about 17% at 1M nodes, avgdeg 16, exponent 2.1 (max in-degree about 200k), and by under 1% at
      exponent 2.5. The hubs are the point: they are the super-nodes that stress a kernel.
  ``uniform:N:avgdeg``  Erdos-Renyi-like: N*avgdeg uniformly random pairs, loops/duplicates dropped.
  ``grid:N[:shuffle]``  a side x side 4-neighbour lattice with side = floor(sqrt(N)), both
      directions of every edge: N is rounded down to side^2 when it is not a perfect square. Node
      id = row*side + col; interior nodes have degree 4, border nodes 3, corners 2.
  ``mesh3d:N[:shuffle]``  the same in 3-D: a side^3 6-neighbour lattice, side = floor(cbrt(N)),
      node id = (plane*side + row)*side + col; interior degree 6, face 5, edge 4, corner 3.
      The lattices are deterministic; ``shuffle`` permutes their node ids at random (drawn from
      ``seed``), which scatters the neighbours that the row-major ids keep close, so that a
      reordering has a locality to recover.
  ``sbm:N:blocks:deg_in:deg_out``  stochastic block model with ``blocks`` contiguous blocks (block b
      holds nodes [b*N//blocks, (b+1)*N//blocks)). Each node draws on average ``deg_in`` edges to
      uniformly chosen nodes of its own block and ``deg_out`` edges to uniformly chosen nodes of the
      other blocks (expected out-degrees, not probabilities); loops/duplicates dropped.
  ``rmat:scale:edgefactor``  R-MAT (Graph500 parameters a=0.57, b=0.19, c=0.19, d=0.05) on
      N = 2^scale nodes with edgefactor*N draws, node ids randomly permuted; R-MAT draws many
      duplicates, so E ends below edgefactor*N (by about 9% at scale 16 and 4% at scale 20 with
      edgefactor 16).
  ``batch:G:nodes:deg``  G disjoint random graphs of ``nodes`` nodes each (graph g holds nodes
      [g*nodes, (g+1)*nodes)), each with nodes*deg uniformly random intra-graph draws.
"""
from __future__ import annotations

import math
from typing import Callable, Dict, Optional, Tuple, Union

import torch
from torch import Tensor

Device = Union[str, torch.device, None]
EdgeList = Tuple[Tensor, int]


def _generator(seed: int, device: torch.device) -> torch.Generator:
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    return gen


def simplify(src: Tensor, dst: Tensor, num_nodes: int) -> Tensor:
    """``[2, E]`` int64 edges without self-loops and duplicates, sorted by (source, target)."""
    keep = src != dst
    key = src[keep] * num_nodes + dst[keep]
    key = torch.unique(key)  # sorted, so the result is coalesced
    return torch.stack([key // num_nodes, key % num_nodes])


def _uniform_below(high: Tensor, gen: torch.Generator) -> Tensor:
    """One uniform integer in [0, high[k]) for every entry of ``high`` (all >= 1)."""
    u = torch.rand(high.numel(), generator=gen, device=high.device, dtype=torch.float64)
    return torch.minimum((u * high).long(), high - 1)


def powerlaw(num_nodes: int, avg_degree: float, exponent: float = 2.1, *, seed: int = 0,
             device: Device = None) -> EdgeList:
    if exponent <= 1.0:
        raise ValueError(f"the powerlaw exponent must be > 1, got {exponent}")
    device = torch.device(device or "cpu")
    gen = _generator(seed, device)
    rank = torch.arange(1, num_nodes + 1, device=device, dtype=torch.float64)
    weight = rank.pow(-1.0 / (exponent - 1.0))
    rate = weight * (num_nodes * avg_degree / weight.sum())  # expected draws per node and side
    # Poissonised sampling: the number of draws landing on each node is Poisson(rate) (independent
    # across nodes), so the sorted list of sampled endpoints is a repeat_interleave; shuffling one
    # side pairs the endpoints uniformly at random, which is the same as drawing i.i.d. pairs from
    # the weights. Both sides are cut to the shorter list (a random cut, since one is shuffled).
    src = _rank_list(rate, gen)
    dst = _rank_list(rate, gen)
    dst = dst[torch.randperm(dst.numel(), generator=gen, device=device)]
    draws = min(src.numel(), dst.numel())
    perm = torch.randperm(num_nodes, generator=gen, device=device)
    return simplify(perm[src[:draws]], perm[dst[:draws]], num_nodes), num_nodes


def _rank_list(rate: Tensor, gen: torch.Generator) -> Tensor:
    counts = torch.poisson(rate, generator=gen).long()
    return torch.repeat_interleave(torch.arange(rate.numel(), device=rate.device), counts)


def uniform(num_nodes: int, avg_degree: float, *, seed: int = 0, device: Device = None) -> EdgeList:
    device = torch.device(device or "cpu")
    gen = _generator(seed, device)
    draws = int(round(num_nodes * avg_degree))
    src = torch.randint(num_nodes, (draws,), generator=gen, device=device)
    dst = torch.randint(num_nodes, (draws,), generator=gen, device=device)
    return simplify(src, dst, num_nodes), num_nodes


def grid(num_nodes: int, shuffle: bool = False, *, seed: int = 0,
         device: Device = None) -> EdgeList:
    """``seed`` only draws the shuffle: without it the lattice has no randomness."""
    return _lattice(num_nodes, 2, shuffle, seed, device)


def mesh3d(num_nodes: int, shuffle: bool = False, *, seed: int = 0,
           device: Device = None) -> EdgeList:
    """``seed`` only draws the shuffle: without it the lattice has no randomness."""
    return _lattice(num_nodes, 3, shuffle, seed, device)


def _lattice(num_nodes: int, dims: int, shuffle: bool, seed: int, device: Device) -> EdgeList:
    """The ``side^dims`` lattice (side the integer dims-th root of num_nodes) with an edge both
    ways between nodes one step apart along one axis; node ids row-major, or shuffled."""
    device = torch.device(device or "cpu")
    side = _integer_root(num_nodes, dims)
    size = side ** dims
    ids = torch.arange(size, device=device).view((side,) * dims)
    one_way = torch.cat([torch.stack([ids.narrow(axis, 0, side - 1).reshape(-1),
                                      ids.narrow(axis, 1, side - 1).reshape(-1)])
                         for axis in range(dims)], dim=1)
    both = torch.cat([one_way, one_way.flip(0)], dim=1)
    if shuffle:
        both = torch.randperm(size, generator=_generator(seed, device), device=device)[both]
    return simplify(both[0], both[1], size), size


def _integer_root(n: int, k: int) -> int:
    """The largest r with r^k <= n (exact, where a float root may be one off)."""
    r = int(round(n ** (1.0 / k)))
    while r ** k > n:
        r -= 1
    while (r + 1) ** k <= n:
        r += 1
    return r


def _shuffle_flag(field: str) -> bool:
    """The optional last field of the lattice specs."""
    if field != "shuffle":
        raise ValueError(f"expected 'shuffle' as the last field, got {field!r}")
    return True


def sbm(num_nodes: int, blocks: int, deg_in: float, deg_out: float, *, seed: int = 0,
        device: Device = None) -> EdgeList:
    if not 1 <= blocks <= num_nodes:
        raise ValueError(f"sbm needs 1 <= blocks <= N, got blocks={blocks}, N={num_nodes}")
    device = torch.device(device or "cpu")
    gen = _generator(seed, device)
    # block b holds the nodes [start[b], start[b+1])
    start = torch.arange(blocks + 1, device=device) * num_nodes // blocks
    size = start.diff()
    block_of = torch.repeat_interleave(torch.arange(blocks, device=device), size)

    n_in = int(round(num_nodes * deg_in))
    src_in = torch.randint(num_nodes, (n_in,), generator=gen, device=device)
    b = block_of[src_in]
    dst_in = start[b] + _uniform_below(size[b], gen)

    n_out = int(round(num_nodes * deg_out)) if blocks > 1 else 0
    src_out = torch.randint(num_nodes, (n_out,), generator=gen, device=device)
    b = block_of[src_out]
    offset = _uniform_below(num_nodes - size[b], gen)  # a node outside block b:
    dst_out = offset + size[b] * (offset >= start[b])                 # skip over block b's range
    return simplify(torch.cat([src_in, src_out]), torch.cat([dst_in, dst_out]), num_nodes), num_nodes


RMAT_MAX_SCALE = 31
RMAT_PROBS = (0.57, 0.19, 0.19, 0.05)  # quadrants (src bit, dst bit) = (0,0), (0,1), (1,0), (1,1)
_RMAT_LEVELS_PER_DRAW = 4


def _rmat_table(levels: int, device: torch.device) -> Tuple[Tensor, Tensor, Tensor]:
    """CDF over the 4^levels quadrant sequences of `levels` recursion steps, and the source and
    target bits each sequence contributes (the first step gives the most significant bit)."""
    combo = torch.arange(4 ** levels, device=device)
    prob = torch.ones(combo.numel(), dtype=torch.float64, device=device)
    src_bits = torch.zeros_like(combo)
    dst_bits = torch.zeros_like(combo)
    probs = torch.tensor(RMAT_PROBS, dtype=torch.float64, device=device)
    for level in range(levels):
        quadrant = (combo >> (2 * level)) & 3
        prob *= probs[quadrant]
        src_bits = (src_bits << 1) | (quadrant >> 1)
        dst_bits = (dst_bits << 1) | (quadrant & 1)
    return torch.cumsum(prob, 0), src_bits, dst_bits


def rmat(scale: int, edge_factor: float, *, seed: int = 0, device: Device = None) -> EdgeList:
    if not 1 <= scale <= RMAT_MAX_SCALE:
        raise ValueError(f"rmat scale must be in [1, {RMAT_MAX_SCALE}], got {scale}")
    device = torch.device(device or "cpu")
    gen = _generator(seed, device)
    num_nodes = 1 << scale
    draws = int(round(num_nodes * edge_factor))
    src = torch.zeros(draws, dtype=torch.long, device=device)
    dst = torch.zeros(draws, dtype=torch.long, device=device)
    done = 0
    while done < scale:  # several recursion levels per random draw, through a small lookup table
        levels = min(_RMAT_LEVELS_PER_DRAW, scale - done)
        cdf, src_bits, dst_bits = _rmat_table(levels, device)
        u = torch.rand(draws, generator=gen, device=device, dtype=torch.float64) * cdf[-1]
        combo = torch.searchsorted(cdf, u, right=True).clamp_max_(cdf.numel() - 1)
        src = (src << levels) | src_bits[combo]
        dst = (dst << levels) | dst_bits[combo]
        done += levels
    perm = torch.randperm(num_nodes, generator=gen, device=device)
    return simplify(perm[src], perm[dst], num_nodes), num_nodes


def batch(num_graphs: int, nodes: int, degree: float, *, seed: int = 0,
          device: Device = None) -> EdgeList:
    device = torch.device(device or "cpu")
    gen = _generator(seed, device)
    num_nodes = num_graphs * nodes
    draws = int(round(num_nodes * degree))
    src = torch.randint(num_nodes, (draws,), generator=gen, device=device)
    dst = (src // nodes) * nodes + torch.randint(nodes, (draws,), generator=gen, device=device)
    return simplify(src, dst, num_nodes), num_nodes


def indegree(num_nodes: int, low: int, high: int, *, seed: int = 0,
             device: Device = None) -> EdgeList:
    """``indegree:N:low:high``: every node draws an in-degree uniform in [low, high] and that many
    uniformly random other nodes as sources (the random graph of the single-head attention target:
    ``indegree:200000:1:31``, 3.2M edges). A source is ``(i + 1 + r) mod N`` with r uniform in
    [0, N - 1), so there are no loops; the rare repeated sources (about d^2 / 2N of a node's d) are
    dropped, so a few nodes end one below their draw."""
    if not 0 <= low <= high < num_nodes:
        raise ValueError(f"indegree: need 0 <= low <= high < N, got {low}, {high}, N={num_nodes}")
    device = torch.device(device or "cpu")
    gen = _generator(seed, device)
    degree = torch.randint(low, high + 1, (num_nodes,), generator=gen, device=device)
    dst = torch.repeat_interleave(torch.arange(num_nodes, device=device), degree)
    shift = torch.randint(num_nodes - 1, (dst.numel(),), generator=gen, device=device)
    return simplify((dst + 1 + shift) % num_nodes, dst, num_nodes), num_nodes


# name -> (function, argument converters of the spec fields; trailing ones may be omitted when the
# function gives them a default)
GENERATORS: Dict[str, Tuple[Callable[..., EdgeList], Tuple[type, ...], int]] = {
    "powerlaw": (powerlaw, (int, float, float), 2),
    "uniform": (uniform, (int, float), 2),
    "grid": (grid, (int, _shuffle_flag), 1),
    "mesh3d": (mesh3d, (int, _shuffle_flag), 1),
    "sbm": (sbm, (int, int, float, float), 4),
    "rmat": (rmat, (int, float), 2),
    "batch": (batch, (int, int, float), 3),
    "indegree": (indegree, (int, int, int), 3),
}


def is_synthetic(spec: str) -> bool:
    return ":" in spec


def parse_spec(spec: str) -> Tuple[Callable[..., EdgeList], list]:
    """(generator, arguments) of a generator spec such as ``powerlaw:1000000:16``; ValueError on
    an unknown kind, a wrong number of fields or a non-positive size (the generators check the
    ranges of their other arguments)."""
    kind, *fields = spec.split(":")
    if kind not in GENERATORS:
        raise ValueError(f"unknown graph generator {kind!r} in spec {spec!r}; "
                         f"expected one of {sorted(GENERATORS)}")
    fn, types, required = GENERATORS[kind]
    if not required <= len(fields) <= len(types):
        count = str(required) if required == len(types) else f"{required} to {len(types)}"
        raise ValueError(f"graph spec {spec!r}: {kind} takes {count} fields "
                         f"({fn.__name__}{_signature(fn)}), got {len(fields)}")
    try:
        args = [t(f) for t, f in zip(types, fields)]
    except ValueError as exc:
        raise ValueError(f"graph spec {spec!r}: {exc}") from None
    if args[0] <= 0 or any(a < 0 for a in args[1:]):
        raise ValueError(f"graph spec {spec!r}: sizes must be positive and degrees non-negative")
    return fn, args


def generate(spec: str, seed: int = 0, device: Device = None) -> EdgeList:
    """Edges of a generator spec such as ``powerlaw:1000000:16`` (see the module docstring)."""
    fn, args = parse_spec(spec)
    return fn(*args, seed=seed, device=device)


def check_spec(spec: str) -> None:
    """Raises ValueError for a spec that is neither a generator spec nor a dataset name (a range
    error of a generator argument, or a dataset's absent files, show when the graph is loaded)."""
    if is_synthetic(spec):
        parse_spec(spec)
    else:
        from .datasets import canonical_name
        canonical_name(spec)


def _signature(fn) -> str:
    import inspect
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.kind == p.POSITIONAL_OR_KEYWORD]
    return "(" + ", ".join(p.name for p in params) + ")"


def load_graph(spec: str, seed: int = 0, device: Device = None,
               data_dir: Optional[str] = None) -> EdgeList:
    """A generator spec or a real dataset name (edges on `device`)."""
    if is_synthetic(spec):
        return generate(spec, seed=seed, device=device)
    from .datasets import load_edges
    edge_index, num_nodes = load_edges(spec, data_dir)
    return edge_index.to(device or "cpu"), num_nodes


def degree_stats(edge_index: Tensor, num_nodes: int) -> dict:
    """Exact degree statistics (in-degree = edges per target; percentiles from a degree histogram,
    never torch.quantile, which fails past 2^24 elements)."""
    in_deg = torch.bincount(edge_index[1], minlength=num_nodes)
    out_deg = torch.bincount(edge_index[0], minlength=num_nodes)
    num_edges = int(edge_index.size(1))

    def percentile(deg: Tensor, q: float) -> int:
        hist = torch.bincount(deg)
        cum = torch.cumsum(hist, 0)
        target = torch.tensor(math.ceil(q * num_nodes), device=cum.device, dtype=cum.dtype)
        return int(torch.searchsorted(cum, target).item())

    empty = num_nodes == 0
    return {
        "num_nodes": num_nodes,
        "num_edges": num_edges,
        "in_degree_max": 0 if empty else int(in_deg.max()),
        "in_degree_mean": 0.0 if empty else num_edges / num_nodes,
        "in_degree_p50": 0 if empty else percentile(in_deg, 0.50),
        "in_degree_p99": 0 if empty else percentile(in_deg, 0.99),
        "out_degree_max": 0 if empty else int(out_deg.max()),
        "out_degree_p99": 0 if empty else percentile(out_deg, 0.99),
        "isolated_nodes": 0 if empty else int(((in_deg == 0) & (out_deg == 0)).sum()),
    }
