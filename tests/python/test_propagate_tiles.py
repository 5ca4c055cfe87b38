"""The tile path of propagate (ops/propagate_tiles.py) on the host twin of its kernels.

A graph's ``tile_policy = "tiles"`` makes a CPU graph run the host kernels over the tile layout:
the same sums as the CSR path (every graph case against PyG, forward and backward, is
test_propagate.py's main test under both policies); here the low precisions, strides, duplicates,
the values, the policy and the op's errors. The CUDA kernels are checked
against these results in test_propagate_tiles_cuda.py.
"""
import pytest
import torch

import iognn
from iognn.graph import tile_layout
from iognn.ops import propagate, propagate_tiles

from conftest import tolerance
from test_propagate import reference

ops = torch.ops.iognn


def tiled(graph):
    graph.tile_policy = "tiles"
    return graph


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_tiles_match_the_csr_op_in_low_precision(dtype, index_dtype):
    gen = torch.Generator().manual_seed(5)
    ei = torch.randint(0, 300, (2, 4000), generator=gen)
    csr = iognn.Graph(ei, 300, index_dtype=index_dtype if index_dtype == torch.int64 else None)
    g = tiled(iognn.Graph(ei, 300, index_dtype=index_dtype if index_dtype == torch.int64 else None))
    x = torch.randn(300, 24, generator=gen).to(dtype)
    w = torch.rand(4000, generator=gen)
    for reduce in ("sum", "mean"):
        expected = propagate(csr, x.double(), w.double(), reduce)
        got = propagate(g, x, w, reduce)
        assert got.dtype == dtype
        torch.testing.assert_close(got.double(), expected, rtol=tolerance(dtype)[0],
                                   atol=tolerance(dtype)[1])


def test_noncontiguous_features_and_a_wide_row():
    gen = torch.Generator().manual_seed(7)
    ei = torch.cat([torch.randint(0, 50, (2, 500), generator=gen),
                    torch.stack([torch.arange(50), torch.zeros(50, dtype=torch.long)])], 1)
    g = tiled(iognn.Graph(ei, 50))
    base = torch.randn(50, 40, dtype=torch.float64, generator=gen)
    x = base[:, ::2]  # stride 2 in the feature dimension
    torch.testing.assert_close(propagate(g, x, None, "mean"),
                               reference(ei, x, None, "mean", 50))


def test_the_backward_is_deterministic():
    gen = torch.Generator().manual_seed(8)
    ei = torch.randint(0, 400, (2, 6000), generator=gen)
    g = tiled(iognn.Graph(ei, 400))
    x = torch.randn(400, 16, generator=gen, requires_grad=True)
    grads = []
    for _ in range(2):
        (gx,) = torch.autograd.grad(propagate(g, x, None, "sum").square().sum(), x)
        grads.append(gx)
    assert torch.equal(grads[0], grads[1])


def test_duplicate_edges_add_into_one_slot():
    ei = torch.tensor([[0, 0, 0, 1], [1, 1, 1, 0]])
    g = tiled(iognn.Graph(ei, 2))
    x = torch.tensor([[1.0], [10.0]], dtype=torch.float64)
    w = torch.tensor([1.0, 2.0, 4.0, 0.5], dtype=torch.float64)
    torch.testing.assert_close(propagate(g, x, w, "sum"), torch.tensor([[5.0], [7.0]],
                                                                      dtype=torch.float64))
    torch.testing.assert_close(propagate(g, x, w, "mean"), torch.tensor([[5.0], [7.0 / 3]],
                                                                       dtype=torch.float64))


def test_values_fold_weights_and_the_mean_scale():
    ei = torch.tensor([[0, 1, 2, 2], [1, 1, 0, 1]])
    g = iognn.Graph(ei, 3)
    layout = tile_layout(g)
    w = torch.tensor([1.0, 2.0, 3.0, 4.0])  # CSR order: row 0 <- 2; row 1 <- 0, 1, 2
    vals = ops.propagate_tile_values(g.rowptr, layout.edge_slot, layout.num_tiles,
                                     w, None, None, g.rowptr,
                                     torch.float32)
    dense = torch.zeros(3, 3)
    slot = layout.edge_slot
    for p in range(4):
        t, r, c = int(slot[p]) // 128, int(slot[p]) % 128 // 8, int(slot[p]) % 8
        dense[r, int(layout.tile_cols[t, c])] = vals[slot[p]]
    deg = g.rowptr.diff().float()
    expected = torch.zeros(3, 3)
    expected[g.csr_dst.long(), g.col.long()] = w / deg[g.csr_dst.long()]
    torch.testing.assert_close(dense, expected)


def test_the_policy_decides_and_plans_are_reported():
    ei = torch.randint(0, 100, (2, 800), generator=torch.Generator().manual_seed(2))
    g = iognn.Graph(ei, 100)
    x = torch.randn(100, 8)
    assert propagate_tiles.choose(g, x, None, "sum") == (False, False)  # default: CSR
    g.tile_policy = "auto"  # on a CPU graph auto never times: the kernels are the GPU's
    assert propagate_tiles.choose(g, x, None, "sum") == (False, False)
    g.tile_policy = "tiles"
    assert propagate_tiles.choose(g, x, None, "sum") == (True, True)
    (name, plan), = propagate_tiles.plans(g).items()
    assert name == "float32 F=8 sum" and plan["forward"]["path"] == "tiles"


def test_op_errors_name_the_argument():
    g = iognn.Graph(torch.tensor([[0, 1], [1, 0]]), 2)
    layout = tile_layout(g)
    vals = torch.zeros(layout.num_tiles * 128)
    x = torch.randn(2, 4)
    with pytest.raises(ValueError, match="window_ptr"):
        ops.propagate_tiles(layout.window_ptr[:-1], layout.tile_cols, None, vals, x, None, 2)
    with pytest.raises(ValueError, match="vals"):
        ops.propagate_tiles(layout.window_ptr, layout.tile_cols, None, vals[:-1], x, None, 2)
    with pytest.raises(TypeError, match="vals"):
        ops.propagate_tiles(layout.window_ptr, layout.tile_cols, None, vals.double(), x, None, 2)
    with pytest.raises(ValueError, match="bias"):
        ops.propagate_tiles(layout.window_ptr, layout.tile_cols, None, vals, x, torch.zeros(3), 2)
    with pytest.raises(ValueError, match="row_order"):
        ops.propagate_tiles(layout.window_ptr, layout.tile_cols,
                            torch.zeros(3, dtype=layout.tile_cols.dtype), vals, x, None, 2)
    with pytest.raises(ValueError, match="dtype"):
        ops.propagate_tile_values(g.rowptr, layout.edge_slot, layout.num_tiles, None, None, None,
                                  None, torch.float16)
    with pytest.raises(ValueError, match="weight"):
        ops.propagate_tile_values(g.rowptr, layout.edge_slot, layout.num_tiles, torch.ones(5),
                                  None, None, None, torch.float32)
