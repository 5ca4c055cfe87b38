"""The benchmark configuration and the two preset suites.

``quick`` is a smoke test: three small synthetic graphs, F=32, fp32, that finish on a CPU in well
under two minutes (CI runs it). ``full`` is the GPU benchmark: three 1M-node synthetic graphs (a
power law with super-nodes, a uniform random graph, a 2-D grid) and every real graph of the data
folder stored with at least 100k edge records, F=128, attention with (H, C) = (4, 32)
and (8, 16), fp32 and bf16, forward + backward. Its repeat counts and per-measurement time budget
are sized so that it finishes in about six minutes on one H100.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Tuple

import torch

from .cases import CASES, Workload

DTYPES: Dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16,
                                  "fp16": torch.float16, "fp64": torch.float64}
LEVELS = ("op", "layer")
MODES = ("fwd", "fwdbwd")

# Real graphs of the data folder stored with >= 100k edge records (STATS.json "stored_edges"; each
# has >= 160k directed edges once symmetrised).
FULL_REAL_GRAPHS = [
    "amazon_photo", "amazon_computers", "coauthor_cs", "coauthor_physics", "facebook_pagepage",
    "twitch_DE", "twitch_FR", "tolokers", "road-usroads",
    "road-usroads-48", "road-luxembourg-osm", "reddit10k", "tu_nci1", "tu_proteins",
]


@dataclass
class BenchConfig:
    suite: str
    graphs: List[str]
    ops: List[str]
    levels: List[str] = field(default_factory=lambda: list(LEVELS))
    feat: int = 32
    attention: List[Tuple[int, int]] = field(default_factory=lambda: [(2, 16)])  # (heads, head_dim)
    dtypes: List[str] = field(default_factory=lambda: ["fp32"])
    mode: str = "fwdbwd"
    device: str = "cpu"
    repeats: int = 5  # timed steps, at most
    warmup: int = 2  # untimed steps before timing (the last one measures peak memory)
    budget_s: float = 0.05  # time one measurement may take: fewer repeats on slow steps
    seed: int = 0
    data_dir: Optional[str] = None
    threads: Optional[int] = None  # CPU threads (torch.set_num_threads); None: torch's default

    def workloads(self) -> List[Workload]:
        out: List[Workload] = []
        for op in self.ops:
            shapes = self.attention if CASES[op].family == "attention" else [(None, None)]
            for level in self.levels:
                for dtype in self.dtypes:
                    for heads, head_dim in shapes:
                        out.append(Workload(op, level, DTYPES[dtype], self.feat, heads, head_dim))
        return out

    def as_json(self) -> dict:
        return asdict(self)


SUITES: Dict[str, dict] = {
    "quick": dict(graphs=["uniform:2000:8", "powerlaw:2000:8", "grid:1024"], ops=list(CASES),
                  feat=32, attention=[(2, 16)], dtypes=["fp32"], mode="fwdbwd",
                  repeats=5, warmup=2, budget_s=0.05),
    "full": dict(graphs=["powerlaw:1000000:16", "uniform:1000000:16", "grid:1000000"]
                 + FULL_REAL_GRAPHS, ops=list(CASES),
                 feat=128, attention=[(4, 32), (8, 16)], dtypes=["fp32", "bf16"], mode="fwdbwd",
                 repeats=20, warmup=2, budget_s=0.1),
}


def suite_config(name: str, **overrides) -> BenchConfig:
    if name not in SUITES:
        raise ValueError(f"unknown suite {name!r}: expected one of {sorted(SUITES)}")
    settings = dict(SUITES[name])
    settings.update({k: v for k, v in overrides.items() if v is not None})
    return BenchConfig(suite=name, **settings)
