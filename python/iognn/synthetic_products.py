"""``synthetic-products``: a seeded graph of ogbn-products' size and shape, generated in seconds.

At scale 1: 2,449,029 nodes, about 61.8M directed edges (both directions of about 30.9M distinct
undirected pairs, no self-loops), 100 float32 features, 47 classes, and a random split of 196,615
training, 39,323 validation and 2,213,091 test nodes: the sizes of ogbn-products. ``scale``
multiplies the node, pair and split counts (``synthetic-products:0.01`` is a 24k-node graph with
the same average degree, for tests and CI).

The graph is a degree-corrected stochastic block model whose blocks are the classes:

- class sizes are skewed (share of class c proportional to ``(c + 1) ** -0.8``), and labels are
  assigned to random node ids;
- every node has a propensity drawn from a Pareto law (``u ** (-1 / (GAMMA - 1))``, capped), so
  degrees follow a power law with tail exponent about ``GAMMA`` and a few hubs of some thousands
  of neighbours;
- each undirected pair picks its first end by propensity; its other end, with probability
  ``INTRA``, by propensity within the first end's class, else by propensity among all nodes.
  Self-loops and repeated pairs are dropped and further rounds of draws top the count up (to
  within 0.1% of the target, a random subset kept where a round overshoots); the pairs are stored
  in both directions, sorted by (destination, source): the CSC order a sampler wants;
- features are ``SIGNAL * centre[class] + standard normal noise``: one node's features say
  little of its class, its sampled neighbourhood much more (edge homophily about 0.7;
  ogbn-products: 0.81), so accuracy is well above chance (1/47) and well below 100%.

Everything is vectorised torch from one ``torch.Generator``: the same ``(scale, seed)`` gives the
same tensors. :func:`load_synthetic_products` caches the result under
:func:`iognn.datasets.cache_dir` (one ``.pt`` file per scale and seed), so only the first run
generates it.
"""
from __future__ import annotations

import os
from typing import Dict, Optional

import torch
from torch import Tensor

NAME = "synthetic-products"
NUM_NODES = 2_449_029
NUM_PAIRS = 30_929_570           # ogbn-products' 61,859,140 directed edges / 2
NUM_FEATURES = 100
NUM_CLASSES = 47
NUM_TRAIN, NUM_VAL = 196_615, 39_323
GAMMA = 2.5                      # degree power-law exponent
MAX_PROPENSITY = 700.0           # cap: the largest hubs get some thousands of neighbours
INTRA = 0.7                      # share of pairs drawn inside the first end's class
SIGNAL = 0.15                    # class-centre weight of the features (noise: 1)
CLASS_SKEW = 0.8
DRAW_EXTRA = 1.02                # first round: pairs drawn per pair wanted (repeats are dropped)
MAX_ROUNDS = 4
FORMAT_VERSION = 2
_CHUNK = 1 << 20


def sizes(scale: float) -> Dict[str, int]:
    """Node, drawn-pair and split counts at ``scale`` (at least 2 nodes per class)."""
    if not scale > 0:
        raise ValueError(f"{NAME}: scale must be positive, got {scale}")
    num_nodes = max(2 * NUM_CLASSES, round(NUM_NODES * scale))
    ratio = num_nodes / NUM_NODES
    return {"num_nodes": num_nodes, "num_pairs": max(num_nodes, round(NUM_PAIRS * ratio)),
            "num_train": max(NUM_CLASSES, round(NUM_TRAIN * ratio)),
            "num_val": max(NUM_CLASSES, round(NUM_VAL * ratio))}


def _class_counts(num_nodes: int) -> Tensor:
    share = torch.arange(1, NUM_CLASSES + 1, dtype=torch.float64) ** -CLASS_SKEW
    counts = (share / share.sum() * num_nodes).floor().long().clamp_(min=1)
    counts[0] += num_nodes - int(counts.sum())
    return counts


def _pick(cdf: Tensor, low: Tensor, width: Tensor, gen: torch.Generator) -> Tensor:
    """Positions drawn by propensity: ``cdf`` is the running sum of propensities; each draw lands
    in ``[low, low + width)`` of that sum (a block of positions, or all of them)."""
    target = torch.rand(low.shape, generator=gen, dtype=torch.float64).mul_(width).add_(low)
    return torch.searchsorted(cdf, target, right=True).clamp_(max=cdf.numel() - 1)


def generate(scale: float = 1.0, seed: int = 0) -> Dict[str, Tensor]:
    """The graph as tensors: ``x`` [N, 100] float32, ``y`` [N] int64, ``edge_index`` [2, E] int64
    (sorted by destination, then source), ``train_mask`` / ``val_mask`` / ``test_mask`` [N]."""
    n = sizes(scale)
    num_nodes, num_pairs = n["num_nodes"], n["num_pairs"]
    gen = torch.Generator().manual_seed(seed)

    # Positions 0..N-1 are grouped by class; node ids are a random permutation of them.
    counts = _class_counts(num_nodes)
    ends = counts.cumsum(0)
    label_of_position = torch.repeat_interleave(torch.arange(NUM_CLASSES), counts)
    node_of_position = torch.randperm(num_nodes, generator=gen)
    propensity = torch.rand(num_nodes, generator=gen, dtype=torch.float64)
    propensity = propensity.clamp_(min=1e-12).pow_(-1.0 / (GAMMA - 1)).clamp_(max=MAX_PROPENSITY)
    cdf = propensity.cumsum(0)
    del propensity
    total = cdf[-1]
    class_low = torch.cat([cdf.new_zeros(1), cdf[ends[:-1] - 1]])
    class_mass = cdf[ends - 1] - class_low

    # Distinct undirected pairs as keys low id * N + high id (self-loops dropped); rounds of
    # draws top up what repeats took away until the target count is (nearly) reached.
    pairs = torch.empty(0, dtype=torch.int64)
    draws = round(num_pairs * DRAW_EXTRA)
    for _ in range(MAX_ROUNDS):
        first = _pick(cdf, torch.zeros(draws, dtype=torch.float64), total, gen)
        cls = label_of_position[first]
        intra = torch.rand(draws, generator=gen) < INTRA
        second = _pick(cdf, torch.where(intra, class_low[cls], 0.0),
                       torch.where(intra, class_mass[cls], total), gen)
        del cls, intra
        first, second = node_of_position[first], node_of_position[second]
        keep = first != second
        low, high = torch.minimum(first, second)[keep], torch.maximum(first, second)[keep]
        del first, second, keep
        before = pairs.numel()
        pairs = torch.unique(torch.cat([pairs, low.mul_(num_nodes).add_(high)]))
        del low, high
        missing = num_pairs - pairs.numel()
        if missing <= num_pairs // 1000:
            break
        new_share = (pairs.numel() - before) / draws   # of the last draws, the part kept
        draws = round(missing / max(new_share, 0.05))
    del cdf
    if pairs.numel() > num_pairs:  # the last round overshot: keep a random subset
        pairs = pairs[torch.randperm(pairs.numel(), generator=gen)[:num_pairs].sort().values]

    # Both directions, sorted by (destination, source).
    low, high = pairs.div(num_nodes, rounding_mode="floor"), pairs.remainder_(num_nodes)
    keys = torch.cat([high.mul(num_nodes).add_(low), low.mul_(num_nodes).add_(high)])
    del low, high, pairs
    keys = torch.sort(keys).values
    edge_index = torch.stack([keys.remainder(num_nodes),
                              keys.div_(num_nodes, rounding_mode="floor")])
    del keys

    y = torch.empty(num_nodes, dtype=torch.int64)
    y[node_of_position] = label_of_position
    centres = torch.randn(NUM_CLASSES, NUM_FEATURES, generator=gen).mul_(SIGNAL)
    x = torch.randn(num_nodes, NUM_FEATURES, generator=gen)
    for start in range(0, num_nodes, _CHUNK):  # chunks of rows: no second [N, F] temporary
        x[start:start + _CHUNK] += centres[y[start:start + _CHUNK]]

    order = torch.randperm(num_nodes, generator=gen)
    masks = {}
    for key, lo, hi in (("train_mask", 0, n["num_train"]),
                        ("val_mask", n["num_train"], n["num_train"] + n["num_val"]),
                        ("test_mask", n["num_train"] + n["num_val"], num_nodes)):
        masks[key] = torch.zeros(num_nodes, dtype=torch.bool)
        masks[key][order[lo:hi]] = True
    return {"x": x, "y": y, "edge_index": edge_index, **masks}


def parse_spec(name: str) -> Optional[float]:
    """The scale of a ``synthetic-products[:scale]`` name (any case, ``-`` or ``_``), else None."""
    base, _, scale = name.lower().replace("_", "-").partition(":")
    if base != NAME:
        return None
    if not scale:
        return 1.0
    try:
        value = float(scale)
    except ValueError:
        raise ValueError(f"{NAME}: scale must be a number, got {scale!r} in {name!r}") from None
    sizes(value)  # validates
    return value


def cache_path(scale: float, seed: int):
    from .datasets import cache_dir
    return cache_dir() / f"{NAME}-v{FORMAT_VERSION}-scale{scale:g}-seed{seed}.pt"


def load_synthetic_products(scale: float = 1.0, seed: int = 0, cache: bool = True):
    """The graph as a ``torch_geometric.data.Data``: loaded from the cache when there, else
    generated (and stored there when ``cache``). Returns ``(data, generated_seconds or None)``."""
    import time

    from torch_geometric.data import Data
    path = cache_path(scale, seed)
    seconds = None
    if cache and path.exists():
        tensors = torch.load(path, mmap=True, weights_only=True)
    else:
        start = time.perf_counter()
        tensors = generate(scale, seed)
        seconds = time.perf_counter() - start
        if cache:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{os.getpid()}.{path.name}")
            torch.save(tensors, tmp)
            os.replace(tmp, path)
    return Data(**tensors), seconds


def statistics(data) -> Dict[str, float]:
    """Sizes, degree and homophily figures of a graph (for tests and the docs)."""
    src, dst = data.edge_index
    degree = torch.bincount(dst, minlength=data.num_nodes)
    top = degree.sort(descending=True).values[: max(1, data.num_nodes // 100)]
    return {"num_nodes": data.num_nodes, "num_edges": int(src.numel()),
            "num_classes": int(data.y.max()) + 1, "mean_degree": float(degree.float().mean()),
            "median_degree": float(degree.float().median()), "max_degree": int(degree.max()),
            "top1pct_edge_share": float(top.sum()) / max(1, src.numel()),
            "homophily": float((data.y[src] == data.y[dst]).float().mean()),
            "num_train": int(data.train_mask.sum()), "num_val": int(data.val_mask.sum()),
            "num_test": int(data.test_mask.sum())}

