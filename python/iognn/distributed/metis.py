"""METIS node-to-part assignments for :func:`iognn.distributed.partition`.

Two backends, tried in this order by ``backend="auto"``:

- ``"libmetis"``: the system METIS (Debian's ``libmetis-dev``) linked into ``iognn._C`` when the
  build found it (``torch.ops.iognn.has_metis()``);
- ``"pymetis"``: the ``pymetis`` wheel from PyPI, fed the same symmetrised graph (built in C++).

Both run ``METIS_PartGraphKway`` on the symmetrised graph without self-loops and duplicate edges,
seeded: the same seed gives the same parts. The two backends' METIS versions differ, so they need
not give the same parts as each other.
"""
from __future__ import annotations

from typing import Tuple

import torch
from torch import Tensor

BACKENDS = ("auto", "libmetis", "pymetis")

_HOW_TO_GET_METIS = ("install libmetis-dev (apt-get install libmetis-dev) and rebuild iognn, or "
                     "pip install pymetis")


def has_libmetis() -> bool:
    """Whether this build of ``iognn._C`` links libmetis."""
    return bool(torch.ops.iognn.has_metis())


def check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")


def metis_parts(edge_index: Tensor, num_nodes: int, num_parts: int, seed: int,
                backend: str = "auto") -> Tuple[Tensor, str]:
    """``(parts [num_nodes] int64, backend that ran)`` for a host ``edge_index``."""
    check_backend(backend)
    if backend != "pymetis" and has_libmetis():
        return torch.ops.iognn.metis_partition(edge_index, num_nodes, num_parts, seed), "libmetis"
    if backend == "libmetis":
        raise RuntimeError("backend='libmetis': this build of iognn has no libmetis; "
                           "install libmetis-dev and rebuild iognn, or use backend='pymetis'")
    try:
        import pymetis
    except ImportError:
        raise RuntimeError("method='metis' needs METIS: this build of iognn has no libmetis and "
                           f"pymetis is not installed; {_HOW_TO_GET_METIS} "
                           "(or use method='random')") from None
    if num_parts == 1:  # what the libmetis path returns too, without calling METIS
        return torch.zeros(num_nodes, dtype=torch.int64), "pymetis"
    xadj, adjncy = torch.ops.iognn.metis_graph(edge_index, num_nodes)
    adjacency = pymetis.CSRAdjacency(adj_starts=xadj.numpy(), adjacent=adjncy.numpy())
    _, parts = pymetis.part_graph(num_parts, adjacency, options=pymetis.Options(seed=seed))
    return torch.as_tensor(parts, dtype=torch.int64), "pymetis"
