"""Graph construction under torch.compile / torch.export: the fake (meta) kernel of
``iognn::build_graph`` and a symbolic-size twin of the op.

Output sizes: ``rowptr [num_dst + 1]``, ``colptr [num_src + 1]``, five ``[E']`` edge tensors and
the host tensor ``max_degrees [2]``.
``E' = E`` when self-loops are kept; otherwise ``E'`` depends on how many input edges are loops, so
it is a fresh data-dependent size (``new_dynamic_size``) bounded by ``L <= E' <= E + L`` with
``L = min(num_src, num_dst)`` loops appended. The index dtype follows the kernel's rule (int32 when
every count fits, int64 otherwise, or int64 on request); a graph whose upper bound ``E + L`` does
not fit in int32 while ``E'`` might must request int64 to be traced.

``iognn::build_graph`` declares its node counts as ``int``, which torch.compile specialises (one
compiled graph per node count). ``build_graph_symint`` is the same op with ``SymInt`` counts (a
``torch.library.custom_op`` whose implementation calls ``iognn::build_graph``); ``iognn.Graph``
uses it while compiling, so graphs of any size share one compiled graph. Declaring the C++
schema's counts as ``SymInt`` would make this twin unnecessary.
"""
from __future__ import annotations

from typing import Tuple

import torch
from torch import Tensor

_INT32_LIMIT = 2**31 - 1  # the kernel stores int32 indices when every count is below this


def _build_graph_fake(edge_index, num_src, num_dst, self_loops=0, force_int64=False):
    """The outputs of ``iognn::build_graph`` for fake tensors (see the module docstring).

    Unlike the other ops (whose Meta kernels are C++, csrc/binding/meta.cpp), graph construction
    keeps a Python fake: without self-loops kept, ``E'`` is known only from the data, and a fresh
    data-dependent size comes from the fake context (``get_ctx().new_dynamic_size()``), which only
    Python kernels have. The index dtype mirrors the C++ rule (``graph_index_dtype`` in
    csrc/binding/graph_build.h) on the bound ``E + L``, the capacity the device build allocates.
    """
    num_input = edge_index.size(1)
    if self_loops == 0:
        num_edges, upper = num_input, num_input
    else:
        num_loops = min(num_src, num_dst)
        num_edges = torch.library.get_ctx().new_dynamic_size()
        torch._check(num_edges >= num_loops)
        torch._check(num_edges <= num_input + num_loops)
        upper = num_input + num_loops
    counts_fit = num_src < _INT32_LIMIT and num_dst < _INT32_LIMIT and num_input < _INT32_LIMIT
    if force_int64 or not counts_fit:
        dtype = torch.int64
    elif upper < _INT32_LIMIT:
        dtype = torch.int32
    else:
        raise ValueError("iognn::build_graph: with self-loops this graph may or may not fit int32 "
                         "indices, which is only known at run time; build it with "
                         "index_dtype=torch.int64 to trace it")
    col, eid, row, csc2csr, edge_map = (edge_index.new_empty(num_edges, dtype=dtype)
                                        for _ in range(5))
    rowptr = edge_index.new_empty(num_dst + 1, dtype=dtype)
    colptr = edge_index.new_empty(num_src + 1, dtype=dtype)
    max_degrees = torch.empty(2, dtype=torch.int64)  # a host tensor, as the kernels give it
    return rowptr, col, eid, colptr, row, csc2csr, edge_map, max_degrees


torch.library.register_fake("iognn::build_graph")(_build_graph_fake)


@torch.library.custom_op("iognn::build_graph_symint", mutates_args=())
def build_graph_symint(edge_index: Tensor, num_src: int, num_dst: int, self_loops: int,
                       force_int64: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor,
                                                   Tensor, Tensor]:
    """``iognn::build_graph`` with symbolic node counts (see the module docstring)."""
    return tuple(torch.ops.iognn.build_graph(edge_index, num_src, num_dst, self_loops,
                                             force_int64))


build_graph_symint.register_fake(_build_graph_fake)
