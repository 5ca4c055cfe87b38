"""GATv2's own test of its Tensor Core kernels (CUDA): the gradient of att over a thousand row
windows, each window's share summed in a fixed order. The GAT family's tests (every graph case,
channels and slopes, row orders, the CSR fallbacks) are in test_gat_tiles_cuda.py, those every
variant takes in test_attention_tiles_cuda.py.
"""
import pytest
import torch

from test_attention_tiles import hub_edges
from test_attention_tiles_cuda import LOW
from test_gat_tiles_cuda import check

pytestmark = [pytest.mark.cuda, pytest.mark.usefixtures("allow_tf32")]


@pytest.mark.parametrize("dtype", LOW)
def test_att_gradient_sums_every_window_of_a_large_graph(dtype):
    # Over a thousand row windows and a hub row: d att sums every window's share.
    ei = hub_edges(20000, 200000, 3000, torch.Generator().manual_seed(14))
    check("gatv2", ei, 20000, 2, 32, dtype, seed=14)
