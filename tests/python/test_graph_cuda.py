"""iognn.Graph built on a CUDA device: the same seven arrays as the CPU build, bit for bit."""
import pytest
import torch

from iognn import Graph, SelfLoops

from conftest import random_edge_index

pytestmark = pytest.mark.cuda

ARRAYS = ("rowptr", "col", "eid", "colptr", "row", "csc2csr", "edge_map")
MODES = list(SelfLoops)


def assert_same_graph(gpu: Graph, cpu: Graph) -> None:
    assert gpu.device.type == "cuda"
    assert gpu.size == cpu.size and gpu.num_loops == cpu.num_loops
    for name in ARRAYS:
        a, b = getattr(gpu, name), getattr(cpu, name)
        assert a.dtype == b.dtype, name
        assert a.device == gpu.device, name
        assert torch.equal(a.cpu(), b), name


@pytest.mark.parametrize("index_dtype", [None, torch.int64], ids=["int32", "int64"])
@pytest.mark.parametrize("mode", MODES, ids=[m.name for m in MODES])
def test_equals_cpu_build_on_every_case(graph_case, mode, index_dtype):
    _, edge_index, size = graph_case
    cpu = Graph(edge_index, size, mode, index_dtype)
    gpu = Graph(edge_index.cuda(), size, mode, index_dtype)
    assert gpu.index_dtype == (index_dtype or torch.int32)
    assert_same_graph(gpu, cpu)


def strided_layouts(edge_index: torch.Tensor):
    """edge_index on the GPU with gaps between edges, edge-major, and with rows far apart."""
    dev = edge_index.cuda()
    num_edges = dev.size(1)
    wide = torch.zeros(2, 3 * num_edges, dtype=dev.dtype, device="cuda")
    wide[:, ::3] = dev
    yield wide[:, ::3]  # strides (3E, 3)
    yield dev.t().contiguous().t()  # strides (1, 2)
    rows = torch.zeros(5, num_edges, dtype=dev.dtype, device="cuda")
    rows[1], rows[4] = dev[0], dev[1]
    yield rows[1::3]  # strides (3E, 1)


@pytest.mark.sanitizer  # small: run under compute-sanitizer by scripts/gpu_check.sh
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("mode", MODES, ids=[m.name for m in MODES])
def test_strided_edge_index_on_device(dtype, mode):
    gen = torch.Generator().manual_seed(11)
    ei = random_edge_index(50, 50, 400, gen, dtype)
    ei[:, :20] = ei[0, :20]  # some self-loops
    cpu = Graph(ei, 50, mode)
    for dev in strided_layouts(ei):
        assert_same_graph(Graph(dev, 50, mode), cpu)


# Packed sort keys: 32 bits up to bits(num_src) + bits(num_dst) = 32, 64 bits past it.
@pytest.mark.parametrize("size", [(1, 1), (1, 1000), (1000, 1), (65536, 65536), (65537, 65536),
                                  (3, 1 << 20), (1 << 20, 3)])
@pytest.mark.parametrize("mode", MODES, ids=[m.name for m in MODES])
def test_key_widths(size, mode):
    gen = torch.Generator().manual_seed(sum(size))
    num_src, num_dst = size
    ei = random_edge_index(num_src, num_dst, 5000, gen)
    cpu = Graph(ei, size, mode)
    assert_same_graph(Graph(ei.cuda(), size, mode), cpu)


def test_num_nodes_inferred_on_device():
    ei = torch.tensor([[0, 3, 7], [2, 2, 5]])
    g = Graph(ei.cuda())
    assert g.size == (8, 8)
    assert_same_graph(g, Graph(ei))


def test_derived_properties_match_cpu():
    gen = torch.Generator().manual_seed(4)
    ei = random_edge_index(300, 300, 3000, gen)
    cpu = Graph(ei, 300, SelfLoops.REPLACE)
    gpu = Graph(ei.cuda(), 300, SelfLoops.REPLACE)
    assert torch.equal(gpu.edge_index.cpu(), cpu.edge_index)
    assert torch.equal(gpu.degree("in").cpu(), cpu.degree("in"))
    assert torch.equal(gpu.degree("out").cpu(), cpu.degree("out"))
    assert gpu.stats == cpu.stats
    values = torch.randn(3000, 4, generator=gen)
    for fill in (1.0, "mean", "max"):  # scatter on CUDA may sum in another order: close, not equal
        torch.testing.assert_close(gpu.augment_edge_values(values.cuda(), fill).cpu(),
                                   cpu.augment_edge_values(values, fill))
    assert gpu.to("cpu").device.type == "cpu"


def test_current_stream_is_used():
    gen = torch.Generator().manual_seed(5)
    ei = random_edge_index(2000, 2000, 50000, gen).cuda()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        g = Graph(ei, 2000, SelfLoops.ADD_REMAINING)
        rowptr = g.rowptr.clone()  # ordered after the build on the same stream
    stream.synchronize()
    cpu = Graph(ei.cpu(), 2000, SelfLoops.ADD_REMAINING)
    assert torch.equal(rowptr.cpu(), cpu.rowptr)
    assert_same_graph(g, cpu)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_second_device():
    gen = torch.Generator().manual_seed(6)
    ei = random_edge_index(100, 100, 1000, gen)
    g = Graph(ei.to("cuda:1"), 100, SelfLoops.REPLACE)
    assert g.device == torch.device("cuda:1")
    assert_same_graph(g, Graph(ei, 100, SelfLoops.REPLACE))


def test_million_node_random_graph():
    gen = torch.Generator().manual_seed(7)
    n = 1_000_000
    ei = random_edge_index(n, n, 5_000_000, gen)
    for mode in MODES:
        assert_same_graph(Graph(ei.cuda(), n, mode), Graph(ei, n, mode))
    assert Graph(ei.cuda(), n, index_dtype=torch.int64).index_dtype == torch.int64


def test_super_node_with_200k_in_edges():
    gen = torch.Generator().manual_seed(8)
    n = 50_000
    hub_src = torch.randint(0, n, (200_000,), generator=gen)
    hub = torch.stack([hub_src, torch.zeros_like(hub_src)])
    ei = torch.cat([random_edge_index(n, n, 100_000, gen), hub], 1)
    ei = ei[:, torch.randperm(ei.size(1), generator=gen)]
    for mode in MODES:
        gpu, cpu = Graph(ei.cuda(), n, mode), Graph(ei, n, mode)
        assert_same_graph(gpu, cpu)
        # Loop modes drop the hub's random self-loops (src 0 -> 0) and add one back.
        assert gpu.max_in_degree == cpu.max_in_degree >= 199_000


# ---- validation -------------------------------------------------------------------------------

def cpu_and_cuda_errors(edge_index, size, exc=IndexError):
    with pytest.raises(exc) as cpu_err:
        Graph(edge_index, size)
    with pytest.raises(exc) as gpu_err:
        Graph(edge_index.cuda(), size)
    return str(cpu_err.value), str(gpu_err.value)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("row, value, what", [(0, -1, "edge_index[0][3] = -1"),
                                              (1, -7, "edge_index[1][3] = -7"),
                                              (0, 10, "edge_index[0][3] = 10"),
                                              (1, 12, "edge_index[1][3] = 12")])
def test_out_of_range_index_same_message_as_cpu(dtype, row, value, what):
    ei = torch.tensor([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6]], dtype=dtype)
    ei[row, 3] = value
    ei[1 - row, 5] = 99  # a later offending edge is not the one reported
    cpu_msg, gpu_msg = cpu_and_cuda_errors(ei, 10)
    assert what in gpu_msg
    assert gpu_msg == cpu_msg


@pytest.mark.sanitizer  # small: run under compute-sanitizer by scripts/gpu_check.sh
def test_first_offending_edge_wins_and_source_before_destination():
    ei = torch.zeros(2, 100_000, dtype=torch.int64)
    ei[1, 70_000] = 50  # destination out of range at 70,000
    ei[0, 40_000] = 50  # source and destination out of range at 40,000: the source is reported
    ei[1, 40_000] = 60
    cpu_msg, gpu_msg = cpu_and_cuda_errors(ei, 20)
    assert "edge_index[0][40000] = 50" in gpu_msg and gpu_msg == cpu_msg


def test_bipartite_bounds():
    ei = torch.tensor([[0, 4], [0, 1]])
    cpu_msg, gpu_msg = cpu_and_cuda_errors(ei, (3, 5))
    assert "edge_index[0][1] = 4" in gpu_msg and "3 source nodes" in gpu_msg
    assert gpu_msg == cpu_msg


@pytest.mark.sanitizer  # small: run under compute-sanitizer by scripts/gpu_check.sh
def test_bad_arguments_raise_and_process_stays_usable():
    ei = torch.tensor([[0, 1], [1, 0]], device="cuda")
    build = torch.ops.iognn.build_graph
    with pytest.raises(ValueError, match="num_src_nodes must be >= 0"):
        build(ei, -1, 2)
    with pytest.raises(ValueError, match="self_loops must be 0"):
        build(ei, 2, 2, 3)
    with pytest.raises(ValueError, match="shape"):
        build(ei[0], 2, 2)
    with pytest.raises(TypeError, match="int32 or int64"):
        build(ei.float(), 2, 2)
    with pytest.raises(IndexError, match="edge_index\\[1\\]\\[0\\] = 1 is out of range for 1 "):
        build(ei, 1, 1)
    g = Graph(ei, 2, SelfLoops.ADD_REMAINING)  # the device is still usable
    assert_same_graph(g, Graph(ei.cpu(), 2, SelfLoops.ADD_REMAINING))
