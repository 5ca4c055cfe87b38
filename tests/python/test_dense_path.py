"""TypedGatedGraphConv on the dense supergraph path (iognn.dense): path='dense' equal to the sparse
path in fp64 (outputs and every gradient) on random batches of small typed graphs, program graphs
and TU-like batches; the packing cached per batch; the choice of path='auto' visible, deterministic
for fixed rates and never dense where the estimate says sparse; calibrate; the bench rows at a tiny
size; bad arguments; CUDA against the sparse path on the device (marked cuda)."""
from __future__ import annotations

import math
import time

import pytest
import torch
from torch_geometric.data import Batch

import iognn
import iognn.nn as io_nn
from iognn import dense, program_graphs as pg
from iognn.bench import ggnn
from iognn.dense import DeviceRates, choose_path, pack_supergraphs
from iognn.nn.conv import typed_gated_graph_conv as tggc

from test_dense import mixed_graphs, typed_batch

SPARSE_WINS = DeviceRates(3e12, 3e12, 1.5e12)      # gathers cheap: the estimate says sparse
DENSE_WINS = DeviceRates(1e18, 1e15, 1e6)          # gathers very dear: the estimate says dense


def layers_on_paths(channels, steps, num_types, seed=0, dtype=torch.float64, **kwargs):
    """{path: layer} holding the same (random, nonzero-bias) weights."""
    torch.manual_seed(seed)
    layers = {path: io_nn.TypedGatedGraphConv(channels, steps, num_types, path=path, **kwargs)
              for path in ("sparse", "dense", "auto")}
    with torch.no_grad():
        if layers["sparse"].bias is not None:
            layers["sparse"].bias.normal_()
    for layer in layers.values():
        layer.load_state_dict(layers["sparse"].state_dict())
    return {path: layer.to(dtype) for path, layer in layers.items()}


def run_with_grads(layer, x, *args, **kwargs):
    """(output, {name: gradient}) of a forward and a backward of a fixed random cotangent."""
    x = x.detach().clone().requires_grad_()
    for p in layer.parameters():
        p.grad = None
    out = layer(x, *args, **kwargs)
    out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(1),
                             dtype=out.dtype).to(out.device))
    grads = {"x": x.grad}
    grads.update({name: p.grad for name, p in layer.named_parameters()})
    return out, grads


def assert_same_run(a, b, tol=1e-10):
    torch.testing.assert_close(a[0], b[0], rtol=tol, atol=tol)
    assert a[1].keys() == b[1].keys()
    for name in a[1]:
        torch.testing.assert_close(a[1][name], b[1][name], rtol=tol, atol=tol, msg=name)


def program_batch(count=5, kinds=3, low=64, high=110, seed=0):
    batch = Batch.from_data_list(pg.program_graphs(count, kinds, low, high, seed))
    return batch.edge_index, batch.edge_type, batch.ptr, 2 * kinds


# ---- dense == sparse -----------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("size, block", [(16, 4), (24, 8), (12, 12)])
@pytest.mark.parametrize("kwargs", [{}, {"bias": False, "gru_bias": False}])
def test_dense_equals_sparse_on_random_batches(seed, size, block, kwargs):
    gen = torch.Generator().manual_seed(seed)
    ei, et, ptr = typed_batch(mixed_graphs(gen, 18, size), 3, gen)
    x = torch.randn(int(ptr[-1]), 5, generator=gen, dtype=torch.float64)
    layers = layers_on_paths(7, 3, 3, seed, supergraph_size=size, block_size=block, **kwargs)
    sparse = run_with_grads(layers["sparse"], x, ei, et)
    dense = run_with_grads(layers["dense"], x, ei, et, ptr)
    assert layers["dense"].last_path == "dense"
    packed = layers["dense"].packing(ei, et, ptr, x.size(0), torch.float64)
    # The mixed batch has tiles and a remainder: both halves of the dense path are exercised.
    assert packed.dense_edge_ids.numel() and packed.remainder_edge_ids.numel()
    assert_same_run(dense, sparse)


def test_dense_equals_sparse_on_program_graphs():
    ei, et, ptr, num_types = program_batch()
    x = torch.randn(int(ptr[-1]), 6, dtype=torch.float64)
    layers = layers_on_paths(8, 3, num_types, supergraph_size=256, block_size=64)
    assert_same_run(run_with_grads(layers["dense"], x, ei, et, ptr),
                    run_with_grads(layers["sparse"], x, ei, et))
    measures = layers["dense"].last_choice.measures
    assert 0 < measures["tile_fill"] < 1 and measures["inflation"] > 1


def test_dense_equals_sparse_on_tu_like_batches():
    x, ei, et, ptr, label = ggnn.tu_like_batch(torch.device("cpu"), 3, kinds=4)
    assert label.startswith("tu-like") and int(ptr[-1]) == x.size(0)
    x = x[:, :6].double()
    layers = layers_on_paths(8, 3, 8, supergraph_size=64, block_size=16)
    dense = run_with_grads(layers["dense"], x, ei, et, ptr)
    assert layers["dense"].last_choice.measures["remainder_edge_fraction"] == 0
    assert_same_run(dense, run_with_grads(layers["sparse"], x, ei, et))


def test_gradcheck_on_the_dense_path():
    gen = torch.Generator().manual_seed(4)
    ei, et, ptr = typed_batch([("tree", 5), ("tree", 4)], 2, gen)
    layer = layers_on_paths(3, 2, 2, supergraph_size=8, block_size=4)["dense"]
    x = torch.randn(int(ptr[-1]), 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w, b: torch.func.functional_call(
        layer, {"weight": w, "bias": b}, (x, ei, et, ptr)), (x, layer.weight, layer.bias))


def test_prebuilt_packing_and_typed_graph():
    ei, et, ptr, num_types = program_batch(count=3)
    n = int(ptr[-1])
    x = torch.randn(n, 4, dtype=torch.float64)
    layers = layers_on_paths(6, 2, num_types, supergraph_size=128, block_size=64)
    expected = layers["sparse"](x, ei, et)
    packed = pack_supergraphs((ei, et, ptr), num_types, 128, 64, dtype=torch.float64)
    torch.testing.assert_close(layers["dense"](x, ei, et, packed=packed), expected)
    tg = iognn.TypedGraph(ei, et, num_types, n)
    torch.testing.assert_close(layers["dense"](x, tg, None, ptr), expected)
    torch.testing.assert_close(layers["dense"](x, tg, ptr=ptr), expected)
    assert layers["dense"].packing(tg, None, ptr, n, torch.float64) is \
        layers["dense"].packing(tg, None, ptr, n, torch.float64)


def test_one_graph_without_ptr():
    gen = torch.Generator().manual_seed(5)
    ei, et, ptr = typed_batch([("tree", 20)], 2, gen)
    x = torch.randn(20, 4, dtype=torch.float64)
    layers = layers_on_paths(4, 2, 2, supergraph_size=32, block_size=16)
    torch.testing.assert_close(layers["dense"](x, ei, et), layers["sparse"](x, ei, et))
    assert layers["dense"].packing(ei, et, None, 20).num_graphs == 1
    # 'auto' does not pack one graph larger than a supergraph: it cannot take the dense path.
    big = layers_on_paths(4, 2, 2, supergraph_size=8, block_size=4)["auto"]
    big(x, ei, et)
    assert big.last_path == "sparse" and "does not fit" in big.last_choice.reason


# ---- the packing cache ---------------------------------------------------------------------------

def test_packing_is_cached_per_batch():
    gen = torch.Generator().manual_seed(6)
    ei, et, ptr = typed_batch(mixed_graphs(gen, 10, 8), 2, gen)
    n = int(ptr[-1])
    layer = layers_on_paths(4, 2, 2, supergraph_size=8, block_size=4)["dense"]
    first = layer.packing(ei, et, ptr, n, torch.float64)
    assert layer.packing(ei, et, ptr, n, torch.float64) is first
    layer(torch.randn(n, 4, dtype=torch.float64), ei, et, ptr)
    assert layer.packing(ei, et, ptr, n, torch.float64) is first  # forward used the cache
    # One packing per (edge_type, layer shape, dtype) is kept: another batch replaces it.
    assert layer.packing(ei, et, ptr, n, torch.float32) is not first  # tiles in the step's dtype
    assert layer.packing(ei, et, ptr.clone(), n, torch.float64) is not first  # another batch
    ptr2 = ptr.clone()
    again = layer.packing(ei, et, ptr2, n, torch.float64)
    ptr2.add_(0)  # modified in place: rebuilt
    assert layer.packing(ei, et, ptr2, n, torch.float64) is not again
    ei2 = ei.clone()
    kept = layer.packing(ei2, et, ptr, n, torch.float64)
    ei2.add_(0)
    assert layer.packing(ei2, et, ptr, n, torch.float64) is not kept


# ---- the choice ----------------------------------------------------------------------------------

def test_default_path_is_sparse_and_unchanged():
    ei, et, ptr, num_types = program_batch(count=2)
    x = torch.randn(int(ptr[-1]), 4)
    torch.manual_seed(0)
    layer = io_nn.TypedGatedGraphConv(8, 2, num_types)
    assert layer.path == "sparse" and layer.last_path is None
    tg = iognn.TypedGraph(ei, et, num_types, x.size(0))
    h = torch.cat([x, x.new_zeros(x.size(0), 4)], 1)
    for _ in range(2):  # the step the layer ran before it had paths, bit for bit
        m = iognn.ops.typed_propagate(tg, h, layer.weight, "sum", bias=layer.bias)
        h = layer.rnn(m, h)
    assert torch.equal(layer(x, ei, et), h)
    assert torch.equal(layer(x, ei, et, ptr), h)  # the sparse path ignores ptr
    assert layer.last_path == "sparse" and "path='sparse'" in layer.last_choice.reason
    assert repr(layer) == "TypedGatedGraphConv(8, num_steps=2, num_edge_types=6, reduce='sum')"


@pytest.mark.parametrize("rates, expected", [(SPARSE_WINS, "sparse"), (DENSE_WINS, "dense")])
def test_auto_follows_the_estimate_and_shows_it(rates, expected):
    gen = torch.Generator().manual_seed(7)
    ei, et, ptr = typed_batch([("tree", 14)] * 12, 3, gen)
    x = torch.randn(int(ptr[-1]), 4, dtype=torch.float64)
    layers = layers_on_paths(6, 2, 3, supergraph_size=32, block_size=16, rates=rates)
    auto = layers["auto"]
    out = auto(x, ei, et, ptr)
    packed = auto.packing(ei, et, ptr, x.size(0), torch.float64)
    estimate = choose_path(packed, 6, 6, torch.float64, rates, margin=tggc.AUTO_MARGIN)
    assert auto.last_path == estimate.path == expected
    choice = auto.last_choice
    assert (choice.path, choice.reason) == (estimate.path, estimate.reason)
    assert choice.reason.startswith(expected) and "tile fill" in choice.reason
    for key in ("tile_fill", "inflation", "edges_per_slot", "padding", "remainder_edge_fraction"):
        assert key in choice.as_dict()
    torch.testing.assert_close(out, layers["sparse"](x, ei, et))
    for _ in range(3):  # deterministic for fixed rates
        auto(x, ei, et, ptr)
        assert (auto.last_path, auto.last_choice.reason) == (choice.path, choice.reason)
    forced = layers["dense"]
    forced(x, ei, et, ptr)
    assert forced.last_path == "dense" and "forced by path='dense'" in forced.last_choice.reason


def test_auto_never_dense_where_the_estimate_says_sparse():
    gen = torch.Generator().manual_seed(8)
    graphs = [("tree", 10)] * 8 + [("tree", 3)] * 8
    ei, et, ptr = typed_batch(graphs, 2, gen, loops_and_duplicates=False)
    x = torch.randn(int(ptr[-1]), 4, dtype=torch.float64)
    packed = pack_supergraphs((ei, et, ptr), 2, 16, 8, dtype=torch.float64)
    seen = set()
    for gather in torch.logspace(5, 13, 33).tolist():
        rates = DeviceRates(1e13, 1e12, gather, 1e-6)
        layer = io_nn.TypedGatedGraphConv(4, 1, 2, path="auto", supergraph_size=16,
                                          block_size=8, rates=rates).double()
        layer(x, ei, et, packed=packed)
        plain = choose_path(packed, 4, 4, torch.float64, rates)
        with_margin = choose_path(packed, 4, 4, torch.float64, rates, margin=tggc.AUTO_MARGIN)
        assert layer.last_path == with_margin.path
        if plain.path == "sparse":
            assert layer.last_path == "sparse"
        seen.add((plain.path, layer.last_path))
    # The sweep crosses over, and somewhere the margin keeps a close call on the sparse path.
    assert {("sparse", "sparse"), ("dense", "dense"), ("dense", "sparse")} <= seen


def test_margin_compares_the_parts_the_paths_do_not_share():
    gen = torch.Generator().manual_seed(9)
    ei, et, ptr = typed_batch([("tree", 12)] * 6, 2, gen)
    packed = pack_supergraphs((ei, et, ptr), 2, 16, 8)
    one = choose_path(packed, 8, 8, rates=DENSE_WINS)
    assert one.path == "dense" and "needs" not in one.reason
    assert choose_path(packed, 8, 8, rates=DENSE_WINS, margin=1.0).reason == one.reason
    cost = one.measures["cost"]["sparse"]
    shared = (cost["transform_flops"] / DENSE_WINS.gemm_flops_per_s
              + cost["transform_bytes"] / DENSE_WINS.bytes_per_s)
    ratio = (one.sparse_seconds - shared) / (one.dense_seconds - shared)
    assert choose_path(packed, 8, 8, rates=DENSE_WINS, margin=ratio * 0.99).path == "dense"
    above = choose_path(packed, 8, 8, rates=DENSE_WINS, margin=ratio * 1.01)
    assert above.path == "sparse" and "beyond the shared transform" in above.reason
    for bad in (0.5, float("nan")):
        with pytest.raises(ValueError, match="margin"):
            choose_path(packed, 8, 8, rates=DENSE_WINS, margin=bad)


def test_auto_with_mean_stays_sparse():
    gen = torch.Generator().manual_seed(10)
    ei, et, ptr = typed_batch([("tree", 6)] * 4, 2, gen)
    layer = io_nn.TypedGatedGraphConv(4, 2, 2, reduce="mean", path="auto", supergraph_size=8,
                                      block_size=8, rates=DENSE_WINS)
    x = torch.randn(int(ptr[-1]), 4)
    torch.manual_seed(0)
    out = layer(x, ei, et, ptr)
    assert layer.last_path == "sparse" and "reduce='mean'" in layer.last_choice.reason
    assert math.isnan(layer.last_choice.dense_seconds)
    sparse = io_nn.TypedGatedGraphConv(4, 2, 2, reduce="mean")
    sparse.load_state_dict(layer.state_dict())
    assert torch.equal(out, sparse(x, ei, et))


def test_auto_calibrates_once_without_rates(monkeypatch):
    calls = []
    monkeypatch.setattr(tggc, "calibrate", lambda device, dtype: calls.append((device, dtype))
                        or SPARSE_WINS)
    gen = torch.Generator().manual_seed(11)
    ei, et, ptr = typed_batch([("tree", 6)] * 4, 2, gen)
    layer = io_nn.TypedGatedGraphConv(4, 2, 2, path="auto", supergraph_size=8, block_size=8)
    layer(torch.randn(int(ptr[-1]), 4), ei, et, ptr)
    assert calls == [(torch.device("cpu"), torch.float32)] and layer.last_path == "sparse"


def test_repr_names_the_path():
    layer = io_nn.TypedGatedGraphConv(4, 2, 3, path="auto", supergraph_size=64, block_size=16)
    assert repr(layer) == ("TypedGatedGraphConv(4, num_steps=2, num_edge_types=3, reduce='sum', "
                           "path='auto', supergraph_size=64, block_size=16)")


# ---- calibrate -----------------------------------------------------------------------------------

def test_calibrate_measures_and_caches():
    dense.forget_rates()
    start = time.perf_counter()
    rates = dense.calibrate("cpu", torch.float32)
    assert time.perf_counter() - start < 5  # well under a second unless the CPUs are shared
    for value in (rates.gemm_flops_per_s, rates.bytes_per_s, rates.gather_bytes_per_s,
                  rates.launch_seconds):
        assert math.isfinite(value) and value > 0
    assert dense.calibrate(torch.device("cpu"), torch.float32) is rates
    assert dense.calibrate("cpu", torch.float64) is not rates
    assert dense.calibrate("cpu", torch.float32, refresh=True) is not rates
    dense.forget_rates()
    assert dense.calibrate("cpu", torch.float32) is not rates
    with pytest.raises(TypeError, match="floating-point"):
        dense.measure_rates("cpu", torch.int32)


def test_launches_enter_the_estimate_only_with_a_launch_time():
    gen = torch.Generator().manual_seed(12)
    ei, et, ptr = typed_batch([("tree", 6)] * 4 + [("tree", 40)], 2, gen)
    packed = pack_supergraphs((ei, et, ptr), 2, 8, 8)
    assert packed.remainder_nodes.numel()
    cost = dense.estimate_cost(packed, 4, 4)
    assert cost["dense"]["launches"] > cost["sparse"]["launches"]
    base = DeviceRates(1e12, 1e11, 1e10)
    slow = DeviceRates(1e12, 1e11, 1e10, launch_seconds=1e-5)
    extra = 1e-5 * (cost["dense"]["launches"] - cost["sparse"]["launches"])
    a, b = choose_path(packed, 4, 4, rates=base), choose_path(packed, 4, 4, rates=slow)
    assert (b.dense_seconds - b.sparse_seconds) - (a.dense_seconds - a.sparse_seconds) == \
        pytest.approx(extra)


# ---- errors --------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["Dense", "gpu", None, 1, ""])
def test_bad_path_values_raise(path):
    with pytest.raises(ValueError, match="path must be one of"):
        io_nn.TypedGatedGraphConv(4, 2, 3, path=path)


def test_bad_dense_arguments_raise():
    with pytest.raises(ValueError, match="reduce='sum' only"):
        io_nn.TypedGatedGraphConv(4, 2, 3, reduce="mean", path="dense")
    with pytest.raises(ValueError, match="multiple of block"):
        io_nn.TypedGatedGraphConv(4, 2, 3, path="dense", supergraph_size=20, block_size=8)
    with pytest.raises(ValueError, match="at least 1"):
        io_nn.TypedGatedGraphConv(4, 2, 3, path="auto", block_size=0)
    with pytest.raises(TypeError, match="rates"):
        io_nn.TypedGatedGraphConv(4, 2, 3, path="auto", rates=(1e12, 1e12, 1e12))
    gen = torch.Generator().manual_seed(13)
    ei, et, ptr = typed_batch([("tree", 6)] * 3, 3, gen)
    n = int(ptr[-1])
    x = torch.randn(n, 4)
    layer = io_nn.TypedGatedGraphConv(4, 2, 3, path="dense", supergraph_size=8, block_size=8)
    with pytest.raises(TypeError, match="packed must be"):
        layer(x, ei, et, packed=(ei, et, ptr))
    with pytest.raises(ValueError, match="the packing has 2 edge types"):
        layer(x, ei, et, packed=pack_supergraphs((ei, et.clamp(max=1), ptr), 2, 8, 8))
    with pytest.raises(ValueError, match="x 14 nodes"):
        layer(x[:-4], ei[:, :0], et[:0], packed=pack_supergraphs((ei, et, ptr), 3, 8, 8))
    with pytest.raises(TypeError, match="ptr must be a Tensor"):
        layer(x, ei, et, [0, 6, 12, 18])
    with pytest.raises(ValueError, match="x 17 nodes"):
        layer(x[:-1], ei[:, :4], et[:4], torch.tensor([0, 6, 12, 17]).clone()[:3])
    with pytest.raises(ValueError, match="edge_type is required"):
        layer(x, ei, None, ptr)
    with pytest.raises(ValueError, match="edge_type must be None"):
        layer(x, iognn.TypedGraph(ei, et, 3, n), et, ptr)
    with pytest.raises(IndexError, match="edge_type"):
        layer(x, ei, torch.full_like(et, 3), ptr)


# ---- the bench rows at a tiny size ---------------------------------------------------------------

@pytest.fixture
def tiny_bench(monkeypatch):
    monkeypatch.setattr(ggnn, "HIDDEN", 16)
    monkeypatch.setattr(ggnn, "STEPS", 2)
    monkeypatch.setattr(ggnn, "EDGE_KINDS", 3)
    monkeypatch.setitem(ggnn.SIZES, "cpu", (2, 80, 120))
    monkeypatch.setitem(ggnn.TU_LIKE, "cpu", (6, 8, 14))
    monkeypatch.setattr(ggnn, "DENSE_BATCHES", {"programs": (None, 256, 128),
                                                "tu-like": (None, 32, 8),
                                                "tu-like P1": (1, 32, 8)})
    monkeypatch.setattr(ggnn, "DENSE_PATH_DEVICES", ("cpu", "cuda"))


def test_bench_rows_on_every_path(tiny_bench):
    from iognn.bench.workloads import WorkloadsConfig, markdown, run_workloads
    rows = run_workloads(WorkloadsConfig(device="cpu", parts=("ggnn",), warmup=1, rounds=1,
                                         steps=1), log=lambda line: None)
    dense_rows = rows[5:]  # after the GatedGraphConv, typed GGNN and TypedGraph build rows
    assert dense_rows[0].workload == "dense path calibrate fp32"
    assert "TFLOP/s" in dense_rows[0].note
    for row in dense_rows:
        assert row.status == "ok", row
        assert row.part == "ggnn" and row.wall_ms > 0
    expected = []
    for name, kinds, size, block in [("programs", 3, 256, 128), ("tu-like", 3, 32, 8),
                                     ("tu-like P1", 1, 32, 8)]:
        workload = f"typed GGNN T2 h16 R{2 * kinds} S{size} b{block}"
        expected += [(workload, "sparse"), (workload, "dense"), (workload, "auto"),
                     (f"supergraph packing S{size} b{block}", "iognn")]
    assert [(r.workload, r.impl) for r in dense_rows[1:]] == expected
    assert dense_rows[1].graph.startswith("programs 2x[80,120]")
    assert dense_rows[5].graph.startswith("tu-like 6x[8,14] P3")
    for row in dense_rows[1:]:
        if row.impl in ("dense", "auto"):
            assert row.note.startswith(("took dense", "took sparse")) and "fill" in row.note
            assert float(row.note.split(f"max |{row.impl} - sparse| ")[1]) < 1e-4
        if row.impl == "dense":
            assert row.note.startswith("took dense")
        if row.impl == "iognn":
            assert "supergraphs" in row.note
    assert "sparse wall ms" in markdown(rows)


def test_bench_part_on_cpu_keeps_its_rows_by_default():
    assert ggnn.DENSE_PATH_DEVICES == ("cuda",)


# ---- CUDA (run on a GPU machine) -----------------------------------------------------------------

@pytest.mark.cuda
@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-10), (torch.float32, 2e-4)])
def test_cuda_dense_equals_sparse(dtype, tol):
    gen = torch.Generator().manual_seed(14)
    ei, et, ptr = typed_batch(mixed_graphs(gen, 60, 32), 5, gen)
    x = torch.randn(int(ptr[-1]), 12, generator=gen, dtype=torch.float64)
    layers = layers_on_paths(16, 4, 5, dtype=dtype, supergraph_size=64, block_size=16)
    layers = {path: layer.cuda() for path, layer in layers.items()}
    args = (x.to("cuda", dtype), ei.cuda(), et.cuda())
    dense_run = run_with_grads(layers["dense"], *args, ptr.cuda())
    assert layers["dense"].packing(*args[1:], ptr.cuda(), x.size(0), dtype).device.type == "cuda"
    assert_same_run(dense_run, run_with_grads(layers["sparse"], *args), tol)
    again = run_with_grads(layers["dense"], *args, ptr.cuda())
    assert torch.equal(again[0], dense_run[0])  # run to run, bit for bit


@pytest.mark.cuda
def test_cuda_calibrate_and_auto():
    dense.forget_rates()
    torch.cuda.synchronize()
    start = time.perf_counter()
    rates = dense.calibrate("cuda", torch.float32)
    assert time.perf_counter() - start < 2
    assert dense.calibrate(torch.device("cuda"), torch.float32) is rates
    assert rates.gemm_flops_per_s > 1e12 and rates.bytes_per_s > 1e11
    ei, et, ptr, num_types = program_batch()
    x = torch.randn(int(ptr[-1]), 8, device="cuda")
    layer = io_nn.TypedGatedGraphConv(16, 2, num_types, path="auto", supergraph_size=256,
                                      block_size=64).cuda()
    layer(x, ei.cuda(), et.cuda(), ptr.cuda())
    packed = layer.packing(ei.cuda(), et.cuda(), ptr.cuda(), x.size(0))
    assert layer.last_path == choose_path(packed, 16, 16, torch.float32, rates,
                                          margin=tggc.AUTO_MARGIN).path
