"""``iognn bench``: benchmarks of iognn's ops and layers against PyTorch Geometric.

Run ``python -m iognn.bench --help`` (or ``iognn bench``); see docs/benchmarks.md. The entry point
is :func:`main`; :mod:`.graphs` generates the synthetic graphs, :mod:`.datasets` reads the real
ones, :mod:`.cases` defines what is compared, :mod:`.timing` and :mod:`.floor` how it is measured,
:mod:`.runner` runs a configuration and :mod:`.report` writes the results.
"""
from .cli import main

__all__ = ["main"]
