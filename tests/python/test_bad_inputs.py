"""The bad-input matrix of docs/reliability.md: one test per row, over the functional ops
(iognn.Graph, iognn.ops.*) and the layers (iognn.nn convolutions and aggregations), on the CPU and
(marker `cuda`) on a GPU.

Contract checked by every row: a bad input raises a clear exception naming the argument (or, where
PyG 2.8 defines a result, iognn gives that result); never a crash, a hang or a silent wrong
answer; and the process stays usable: each test ends with a valid call on the same target whose
result is compared with PyG (or with a scatter reference for the ops).
The PyG reference always runs on the CPU (its CPU semantics are the contract; its CUDA scatter may
order NaNs and ties differently).
"""
import pytest
import torch
import torch_geometric.nn as pyg_nn
import torch_geometric.nn.aggr as pyg_aggr

import iognn
import iognn.nn as io_nn
from iognn.ops import propagate

from op_cases import FEATURE_OPS, OPS, op_inputs, reference, run_op

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
F_IN, F_OUT, HEADS, EDGE_DIM = 4, 3, 2, 2
TOL = dict(rtol=1e-4, atol=1e-5)

# The valid graph of every follow-up call: a duplicate edge (0 -> 1 twice), a self-loop (2 -> 2),
# node 5 isolated.
EDGE_INDEX = torch.tensor([[0, 1, 2, 3, 0, 2, 4, 0], [1, 2, 3, 0, 1, 2, 1, 4]])
NUM_NODES = 6
# A bipartite one: 5 sources, 3 destinations.
BI_EDGE_INDEX = torch.tensor([[0, 1, 4, 3, 2, 4], [0, 2, 2, 1, 0, 0]])
BI_SIZE = (5, 3)


@pytest.fixture(params=DEVICES)
def device(request):
    return torch.device(request.param)


def features(rows, cols=F_IN, seed=0, dtype=torch.float32):
    return torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def flush(device):
    """Surfaces any asynchronous CUDA error of the calls before (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize()


# ---- layers --------------------------------------------------------------------------------
# name -> (constructor taking the library module, the per-edge input the forward takes: None,
# 'weight' (edge_weight [E]) or 'attr' (edge_attr [E, EDGE_DIM]), supports bipartite input)
LAYERS = {
    "GCNConv": (lambda nn: nn.GCNConv(F_IN, F_OUT), "weight", False),
    "SAGEConv": (lambda nn: nn.SAGEConv(F_IN, F_OUT), None, True),
    "SAGEConv-max": (lambda nn: nn.SAGEConv(F_IN, F_OUT, aggr="max"), None, True),
    "GINConv": (lambda nn: nn.GINConv(torch.nn.Linear(F_IN, F_OUT), train_eps=True), None, True),
    "GraphConv": (lambda nn: nn.GraphConv(F_IN, F_OUT), "weight", True),
    "GATConv": (lambda nn: nn.GATConv(F_IN, F_OUT, heads=HEADS, edge_dim=EDGE_DIM), "attr", True),
    "GATv2Conv": (lambda nn: nn.GATv2Conv(F_IN, F_OUT, heads=HEADS, edge_dim=EDGE_DIM), "attr",
                  True),
    "TransformerConv": (lambda nn: nn.TransformerConv(F_IN, F_OUT, heads=HEADS,
                                                      edge_dim=EDGE_DIM), "attr", True),
}
LAYER_NAMES = list(LAYERS)
EDGE_LAYERS = [n for n in LAYER_NAMES if LAYERS[n][1] is not None]
ATTR_LAYERS = [n for n in LAYER_NAMES if LAYERS[n][1] == "attr"]
BIPARTITE_LAYERS = [n for n in LAYER_NAMES if LAYERS[n][2]]


def layer_pair(name, device):
    """(iognn layer on `device`, PyG layer on the CPU) with the same weights."""
    make = LAYERS[name][0]
    torch.manual_seed(0)
    theirs = make(pyg_nn)
    torch.manual_seed(0)
    ours = make(io_nn)
    ours.load_state_dict(theirs.state_dict())
    return ours.to(device), theirs


def edge_values(name, num_edges, seed=1):
    kind = LAYERS[name][1]
    gen = torch.Generator().manual_seed(seed)
    if kind == "weight":
        return torch.rand(num_edges, generator=gen) + 0.1
    if kind == "attr":
        return torch.randn(num_edges, EDGE_DIM, generator=gen)
    return None


def call(layer, x, edge_index, values=None, **kwargs):
    args = (x, edge_index) if values is None else (x, edge_index, values)
    return layer(*args, **kwargs)


def to(value, device):
    if isinstance(value, (tuple, list)):
        return tuple(to(v, device) for v in value)
    return None if value is None else value.to(device)


def assert_layer_valid_call(name, ours, theirs, device, bipartite=False):
    """The follow-up valid call: output and input gradients equal PyG's."""
    if bipartite:
        x = (features(BI_SIZE[0]), features(BI_SIZE[1], seed=1))
        edge_index, num_edges = BI_EDGE_INDEX, BI_EDGE_INDEX.size(1)
    else:
        x, edge_index, num_edges = features(NUM_NODES), EDGE_INDEX, EDGE_INDEX.size(1)
    values = edge_values(name, num_edges)
    xs = [t.clone().requires_grad_() for t in (x if bipartite else (x,))]
    x_ref = tuple(xs) if bipartite else xs[0]
    x_dev = [t.detach().to(device).requires_grad_() for t in xs]
    out = call(ours, tuple(x_dev) if bipartite else x_dev[0], edge_index.to(device),
               to(values, device))
    ref = call(theirs, x_ref, edge_index, values)
    flush(device)
    torch.testing.assert_close(out.cpu(), ref, **TOL)
    grad = torch.randn(ref.shape, generator=torch.Generator().manual_seed(2))
    got = torch.autograd.grad(out, x_dev, grad.to(device))
    exp = torch.autograd.grad(ref, xs, grad)
    for a, b in zip(got, exp):
        torch.testing.assert_close(a.cpu(), b, **TOL)


def layer_error_then_valid(name, device, exc, match, bad_call, bipartite=False):
    """`bad_call(ours)` raises `exc` matching `match`; a valid call then matches PyG."""
    ours, theirs = layer_pair(name, device)
    with pytest.raises(exc, match=match):
        bad_call(ours)
    flush(device)
    assert_layer_valid_call(name, ours, theirs, device, bipartite)


# ---- aggregations --------------------------------------------------------------------------
AGGRS = {
    "sum": lambda aggr: aggr.SumAggregation(),
    "mean": lambda aggr: aggr.MeanAggregation(),
    "min": lambda aggr: aggr.MinAggregation(),
    "max": lambda aggr: aggr.MaxAggregation(),
    "var": lambda aggr: aggr.VarAggregation(),
    "std": lambda aggr: aggr.StdAggregation(),
    "multi": lambda aggr: aggr.MultiAggregation(["mean", "max", "std"]),
}
AGGR_NAMES = list(AGGRS)
INDEX = torch.tensor([0, 2, 2, 1, 0, 2, 3])  # unsorted, group 4 empty with dim_size=5


def assert_aggr_valid_call(name, ours, device):
    x = features(INDEX.numel(), seed=3).requires_grad_()
    xd = x.detach().to(device).requires_grad_()
    out = ours(xd, INDEX.to(device), dim_size=5)
    ref = AGGRS[name](pyg_aggr)(x, INDEX, dim_size=5)
    flush(device)
    torch.testing.assert_close(out.cpu(), ref, **TOL)
    grad = torch.randn(ref.shape, generator=torch.Generator().manual_seed(4))
    (got,), (exp,) = torch.autograd.grad(out, [xd], grad.to(device)), torch.autograd.grad(
        ref, [x], grad)
    torch.testing.assert_close(got.cpu(), exp, **TOL)


def aggr_error_then_valid(name, device, exc, match, bad_call):
    ours = AGGRS[name](io_nn.aggr)
    with pytest.raises(exc, match=match):
        bad_call(ours)
    flush(device)
    assert_aggr_valid_call(name, ours, device)


# ---- ops -------------------------------------------------------------------------------------
def inputs_of(op, graph, seed=0):
    """op_cases' inputs: F_IN features, or HEADS heads of F_OUT channels for attention."""
    F = F_IN if op in ("propagate", "gcn_norm", "segment_reduce") else HEADS * F_OUT
    return op_inputs(op, graph, torch.Generator().manual_seed(seed), F=F, H=HEADS)


def cpu_reference(op, edge_index, num_dst, inputs):
    return reference(op, edge_index.cpu(), num_dst, {k: v.cpu() for k, v in inputs.items()})


def assert_op_valid_call(op, device):
    graph = iognn.Graph(EDGE_INDEX.to(device), NUM_NODES)
    inputs = inputs_of(op, graph, seed=5)
    out = run_op(op, graph, inputs)
    flush(device)
    torch.testing.assert_close(out.cpu().double(),
                               cpu_reference(op, EDGE_INDEX, NUM_NODES, inputs), **TOL)


def op_error_then_valid(op, device, exc, match, bad_call):
    with pytest.raises(exc, match=match):
        bad_call()
    flush(device)
    assert_op_valid_call(op, device)


def graph_error_then_valid(device, exc, match, bad_call):
    """An iognn.Graph construction error, then a valid Graph and propagate."""
    op_error_then_valid("propagate", device, exc, match, bad_call)


# ==== rows ====================================================================================
# ---- 1. out-of-range indices ---------------------------------------------------------------
@pytest.mark.parametrize("row,value", [(0, 7), (1, NUM_NODES)])
def test_out_of_range_index_graph(device, row, value):
    ei = EDGE_INDEX.clone()
    ei[row, 3] = value
    side = "source" if row == 0 else "destination"
    graph_error_then_valid(device, IndexError,
                           rf"edge_index\[{row}\]\[3\] = {value} is out of range for "
                           rf"{NUM_NODES} {side} nodes",
                           lambda: iognn.Graph(ei.to(device), NUM_NODES))


@pytest.mark.parametrize("name", LAYER_NAMES)
@pytest.mark.parametrize("row", [0, 1])
def test_out_of_range_index_layer(device, name, row):
    ei = EDGE_INDEX.clone()
    ei[row, 3] = NUM_NODES + 3
    values = edge_values(name, ei.size(1))
    layer_error_then_valid(name, device, IndexError,
                           rf"edge_index\[{row}\]\[3\] = 9 is out of range",
                           lambda m: call(m, features(NUM_NODES).to(device), ei.to(device),
                                          to(values, device)))


@pytest.mark.parametrize("name", AGGR_NAMES)
def test_out_of_range_index_aggregation(device, name):
    # PyG's error type and message for a dim_size below index.max() + 1.
    aggr_error_then_valid(name, device, ValueError, r"Encountered invalid 'dim_size' \(got '3' "
                          r"but expected >= '\d+'\)",
                          lambda m: m(features(7).to(device), INDEX.to(device), dim_size=3))


# ---- 2. negative indices -------------------------------------------------------------------
@pytest.mark.parametrize("num_nodes", [None, NUM_NODES], ids=["inferred", "given"])
@pytest.mark.parametrize("row", [0, 1])
def test_negative_index_graph(device, row, num_nodes):
    ei = EDGE_INDEX.clone()
    ei[row, 5] = -2
    match = (rf"edge_index\[{row}\]\[5\] = -2 is negative" if num_nodes is None else
             rf"edge_index\[{row}\]\[5\] = -2 is out of range")
    graph_error_then_valid(device, IndexError, match,
                           lambda: iognn.Graph(ei.to(device), num_nodes))


@pytest.mark.parametrize("name", LAYER_NAMES)
def test_negative_index_layer(device, name):
    ei = EDGE_INDEX.clone()
    ei[1, 2] = -1
    values = edge_values(name, ei.size(1))
    layer_error_then_valid(name, device, IndexError, r"edge_index\[1\]\[2\] = -1 is out of range",
                           lambda m: call(m, features(NUM_NODES).to(device), ei.to(device),
                                          to(values, device)))


@pytest.mark.parametrize("name", AGGR_NAMES)
@pytest.mark.parametrize("dim_size", [None, 5])
def test_negative_index_aggregation(device, name, dim_size):
    index = INDEX.clone()
    index[4] = -1
    aggr_error_then_valid(name, device, IndexError, r"index assigns a message .* = -1",
                          lambda m: m(features(7).to(device), index.to(device), dim_size=dim_size))


# ---- 3. edge_index of the wrong rank / shape / dtype ---------------------------------------
BAD_SHAPES = {
    "1-D": EDGE_INDEX[0],
    "3-D": EDGE_INDEX.view(2, 2, 4),
    "3xE": torch.cat([EDGE_INDEX, EDGE_INDEX[:1]]),
    "Ex2": EDGE_INDEX.t().contiguous(),
    "empty-1-D": torch.empty(0, dtype=torch.long),
}
BAD_DTYPES = [torch.float32, torch.float64, torch.int16, torch.uint8, torch.bool]


@pytest.mark.parametrize("shape", list(BAD_SHAPES))
def test_edge_index_wrong_shape_graph(device, shape):
    ei = BAD_SHAPES[shape].to(device)
    graph_error_then_valid(device, ValueError, r"edge_index must have shape \[2, num_edges\]",
                           lambda: iognn.Graph(ei, NUM_NODES))


@pytest.mark.parametrize("name", LAYER_NAMES)
@pytest.mark.parametrize("shape", list(BAD_SHAPES))
def test_edge_index_wrong_shape_layer(device, name, shape):
    # PyG 2.8 gives no error for a 3-D edge_index in GCNConv / GATConv / GATv2Conv (it reads the
    # wrong edges) and an unrelated one elsewhere; iognn names edge_index's shape for every layer.
    ei = BAD_SHAPES[shape].to(device)
    layer_error_then_valid(name, device, ValueError, r"edge_index must have shape \[2, num_edges\]",
                           lambda m: call(m, features(NUM_NODES).to(device), ei,
                                          to(edge_values(name, 8), device)))


@pytest.mark.parametrize("dtype", BAD_DTYPES, ids=str)
def test_edge_index_wrong_dtype_graph(device, dtype):
    ei = EDGE_INDEX.to(device, dtype)
    graph_error_then_valid(device, TypeError, "edge_index must have dtype int32 or int64",
                           lambda: iognn.Graph(ei, NUM_NODES))


@pytest.mark.parametrize("name", LAYER_NAMES)
@pytest.mark.parametrize("dtype", BAD_DTYPES, ids=str)
def test_edge_index_wrong_dtype_layer(device, name, dtype):
    # PyG 2.8 silently runs GCNConv / GATConv / GATv2Conv on an int16 or bool edge_index.
    ei = EDGE_INDEX.to(device, dtype)
    layer_error_then_valid(name, device, TypeError, "edge_index must have dtype int32 or int64",
                           lambda m: call(m, features(NUM_NODES).to(device), ei,
                                          to(edge_values(name, 8), device)))


@pytest.mark.parametrize("name", AGGR_NAMES)
@pytest.mark.parametrize("bad", ["2-D", "float"])
def test_index_wrong_rank_or_dtype_aggregation(device, name, bad):
    index = INDEX.view(1, -1) if bad == "2-D" else INDEX.float()
    exc, match = (ValueError, "index must be 1-D") if bad == "2-D" else (
        TypeError, "index must have dtype int32 or int64")
    aggr_error_then_valid(name, device, exc, match,
                          lambda m: m(features(7).to(device), index.to(device), dim_size=5))


# ---- 4. features with the wrong node count -------------------------------------------------
@pytest.mark.parametrize("op", FEATURE_OPS)
def test_features_wrong_node_count_op(device, op):
    graph = iognn.Graph(EDGE_INDEX.to(device), NUM_NODES)
    inputs = inputs_of(op, graph)
    name = next(iter(inputs))  # the first feature input: x, x_src or query
    inputs[name] = inputs[name][:-1]
    op_error_then_valid(op, device, ValueError,
                        rf"{name} has {NUM_NODES - 1} rows but the graph has {NUM_NODES} nodes",
                        lambda: run_op(op, graph, inputs))


@pytest.mark.parametrize("op,name", [("gat", "alpha_src"), ("gat", "alpha_dst"),
                                     ("gatv2", "x_dst"), ("transformer", "key"),
                                     ("transformer", "value")])
def test_secondary_input_wrong_node_count_op(device, op, name):
    graph = iognn.Graph(EDGE_INDEX.to(device), NUM_NODES)
    inputs = inputs_of(op, graph)
    inputs[name] = inputs[name][1:]
    op_error_then_valid(op, device, ValueError,
                        rf"{name} (must have shape|has {NUM_NODES - 1} rows)",
                        lambda: run_op(op, graph, inputs))


@pytest.mark.parametrize("name", LAYER_NAMES)
def test_features_fewer_rows_than_indices_layer(device, name):
    # Node counts come from the features, as in PyG: too few rows is an index out of range.
    layer_error_then_valid(name, device, IndexError, "edge_index.* is out of range",
                           lambda m: call(m, features(4).to(device), EDGE_INDEX.to(device),
                                          to(edge_values(name, 8), device)))


# Layers with a `size` argument (GCNConv, GATv2Conv and TransformerConv have none, as in PyG).
SIZE_LAYERS = [n for n in LAYER_NAMES if n not in ("GCNConv", "GATv2Conv", "TransformerConv")]


@pytest.mark.parametrize("name", SIZE_LAYERS)
def test_features_disagree_with_size_layer(device, name):
    # size=(N, N) given: features of N + 1 rows are refused with PyG's error.
    layer_error_then_valid(name, device, ValueError, rf"Encountered tensor with size "
                           rf"{NUM_NODES + 1} in dimension -?\d, but expected size {NUM_NODES}",
                           lambda m: call(m, features(NUM_NODES + 1).to(device),
                                          EDGE_INDEX.to(device), to(edge_values(name, 8), device),
                                          size=(NUM_NODES, NUM_NODES)))


@pytest.mark.parametrize("name", AGGR_NAMES)
def test_index_wrong_length_aggregation(device, name):
    aggr_error_then_valid(name, device, ValueError, "index has 7 entries but x has 6",
                          lambda m: m(features(6).to(device), INDEX.to(device), dim_size=5))


# ---- 5. mismatched devices (a GPU and the CPU) ---------------------------------------------
@pytest.mark.cuda
@pytest.mark.parametrize("op", OPS)
def test_mismatched_devices_op(op):
    device = torch.device("cuda")
    graph = iognn.Graph(EDGE_INDEX, NUM_NODES)  # on the CPU
    inputs = {k: v.to(device) for k, v in inputs_of(op, graph).items()}
    name = next(iter(inputs))
    op_error_then_valid(op, device, ValueError,
                        rf"{name} is on cuda:0 but the (graph is|features are) on cpu",
                        lambda: run_op(op, graph, inputs))


@pytest.mark.cuda
@pytest.mark.parametrize("name", LAYER_NAMES)
def test_mismatched_devices_layer(name):
    device = torch.device("cuda")
    # Features and weights on the GPU, edge_index on the CPU: the graph is built where edge_index
    # is, and the op names the feature tensor that is elsewhere.
    layer_error_then_valid(name, device, ValueError,
                           r"is on cuda:0 but (the graph|edge_index) is on cpu",
                           lambda m: call(m, features(NUM_NODES).to(device), EDGE_INDEX,
                                          to(edge_values(name, 8), device)))


@pytest.mark.cuda
@pytest.mark.parametrize("name", EDGE_LAYERS)
def test_mismatched_devices_edge_values_layer(name):
    device = torch.device("cuda")
    arg = "edge_weight" if LAYERS[name][1] == "weight" else "edge_attr"
    layer_error_then_valid(name, device, ValueError, rf"{name}: {arg} is on cpu but edge_index "
                           "is on cuda:0",
                           lambda m: call(m, features(NUM_NODES).to(device),
                                          EDGE_INDEX.to(device), edge_values(name, 8)))


def test_features_on_another_device_op():
    """The CPU stand-in of the device rows: a meta tensor against a CPU graph."""
    device = torch.device("cpu")
    graph = iognn.Graph(EDGE_INDEX, NUM_NODES)
    op_error_then_valid("propagate", device, ValueError, "x is on meta but the graph is on cpu",
                        lambda: propagate(graph, features(NUM_NODES).to("meta")))
    op_error_then_valid("propagate", device, ValueError, "edge_weight is on meta",
                        lambda: propagate(graph, features(NUM_NODES),
                                          torch.ones(graph.num_edges, device="meta")))


def both_layers_refuse(name, device, x, match):
    """PyG's layer and ours both raise a RuntimeError matching `match` on features x; then a valid
    call of ours still matches PyG."""
    ours, theirs = layer_pair(name, device)
    with pytest.raises(RuntimeError, match=match):
        call(theirs, x, EDGE_INDEX, edge_values(name, 8))
    with pytest.raises(RuntimeError, match=match):
        call(ours, x.to(device), EDGE_INDEX.to(device), to(edge_values(name, 8), device))
    flush(device)
    assert_layer_valid_call(name, ours, theirs, device)


# ---- 6. mismatched dtypes between features and parameters ----------------------------------
@pytest.mark.parametrize("name", LAYER_NAMES)
def test_mismatched_dtypes_layer(device, name):
    # fp64 features into an fp32 layer: the projection refuses them, exactly as in PyG.
    both_layers_refuse(name, device, features(NUM_NODES, dtype=torch.float64), "dtype")


@pytest.mark.parametrize("op,name,other", [("gat", "alpha_src", "x"), ("gat", "alpha_dst", "x"),
                                           ("gatv2", "x_dst", "x_src"), ("gatv2", "att", "x_src"),
                                           ("transformer", "key", "query"),
                                           ("transformer", "value", "query")])
def test_mismatched_dtypes_op(device, op, name, other):
    graph = iognn.Graph(EDGE_INDEX.to(device), NUM_NODES)
    inputs = inputs_of(op, graph)
    inputs[name] = inputs[name].double()
    op_error_then_valid(op, device, TypeError,
                        rf"{name} has dtype torch.float64 but {other} has dtype torch.float32",
                        lambda: run_op(op, graph, inputs))


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool], ids=str)
@pytest.mark.parametrize("op", ["propagate", "segment_reduce"])
def test_non_float_features_op(device, op, dtype):
    graph = iognn.Graph(EDGE_INDEX.to(device), NUM_NODES)
    x = torch.ones(NUM_NODES, F_IN, dtype=dtype, device=device)
    op_error_then_valid(op, device, TypeError, "x must be float32, float64, float16 or bfloat16",
                        lambda: run_op(op, graph, {"x": x}))


def test_edge_weight_dtype_is_the_accumulation_dtype(device):
    # Any float edge_weight is accepted and used in fp32 (fp64 for fp64 features); an integer one
    # is refused by name.
    graph = iognn.Graph(EDGE_INDEX.to(device), NUM_NODES)
    x = features(NUM_NODES).to(device)
    w = torch.rand(graph.num_edges, dtype=torch.float64, device=device)
    torch.testing.assert_close(propagate(graph, x, w), propagate(graph, x, w.float()))
    op_error_then_valid("propagate", device, TypeError, "edge_weight must be a floating-point",
                        lambda: propagate(graph, x, w.long()))


# ---- 7. NaN / Inf in features: propagated as PyG does --------------------------------------
def with_non_finite(x, seed=6):
    gen = torch.Generator().manual_seed(seed)
    x = x.clone()
    flat = x.view(-1)
    picks = torch.randperm(flat.numel(), generator=gen)[:6]
    flat[picks[:2]] = float("nan")
    flat[picks[2:4]] = float("inf")
    flat[picks[4:]] = -float("inf")
    return x


def assert_grad_like_pyg(got, exp):
    """Where PyG's gradient is finite, iognn's equals it. Where PyG's is not (the gradient of a
    min / max / std over a NaN), iognn's may be finite: its min / max send the gradient to the
    winning (NaN) element instead of dividing it among no elements."""
    finite = exp.isfinite()
    torch.testing.assert_close(got[finite], exp[finite], **TOL)
    assert not finite[~got.isfinite()].any(), "non-finite gradient where PyG's is finite"


@pytest.mark.parametrize("name", LAYER_NAMES)
def test_nan_inf_features_layer(device, name):
    ours, theirs = layer_pair(name, device)
    x = with_non_finite(features(NUM_NODES)).requires_grad_()
    xd = x.detach().to(device).requires_grad_()
    values = edge_values(name, 8)
    out = call(ours, xd, EDGE_INDEX.to(device), to(values, device))
    ref = call(theirs, x, EDGE_INDEX, values)
    flush(device)
    assert out.isnan().any()
    torch.testing.assert_close(out.cpu(), ref, equal_nan=True, **TOL)
    grad = torch.randn(ref.shape, generator=torch.Generator().manual_seed(7))
    (got,), (exp,) = torch.autograd.grad(out, [xd], grad.to(device)), torch.autograd.grad(
        ref, [x], grad)
    assert_grad_like_pyg(got.cpu(), exp)
    assert_layer_valid_call(name, ours, theirs, device)


@pytest.mark.parametrize("name", AGGR_NAMES)
def test_nan_inf_features_aggregation(device, name):
    ours, theirs = AGGRS[name](io_nn.aggr), AGGRS[name](pyg_aggr)
    x = with_non_finite(features(INDEX.numel())).requires_grad_()
    xd = x.detach().to(device).requires_grad_()
    out = ours(xd, INDEX.to(device), dim_size=5)
    ref = theirs(x, INDEX, dim_size=5)
    flush(device)
    torch.testing.assert_close(out.cpu(), ref, equal_nan=True, **TOL)
    grad = torch.randn(ref.shape, generator=torch.Generator().manual_seed(7))
    (got,), (exp,) = torch.autograd.grad(out, [xd], grad.to(device)), torch.autograd.grad(
        ref, [x], grad)
    assert_grad_like_pyg(got.cpu(), exp)
    assert_aggr_valid_call(name, ours, device)


@pytest.mark.parametrize("op", FEATURE_OPS)
def test_nan_inf_features_op(device, op):
    graph = iognn.Graph(EDGE_INDEX.to(device), NUM_NODES)
    inputs = inputs_of(op, graph)
    name = next(iter(inputs))
    inputs[name] = with_non_finite(inputs[name].cpu()).to(device)
    out = run_op(op, graph, inputs)
    flush(device)
    ref = cpu_reference(op, EDGE_INDEX, NUM_NODES, inputs)
    torch.testing.assert_close(out.cpu().double(), ref, equal_nan=True, **TOL)
    assert_op_valid_call(op, device)


# ---- 8. zero-size graphs and zero-width features -------------------------------------------
EMPTY_GRAPHS = {"no_nodes": (0, 0), "no_edges": (NUM_NODES, 0)}


@pytest.mark.parametrize("graph_kind", list(EMPTY_GRAPHS))
@pytest.mark.parametrize("name", LAYER_NAMES)
def test_zero_size_graph_layer(device, name, graph_kind):
    num_nodes, num_edges = EMPTY_GRAPHS[graph_kind]
    ours, theirs = layer_pair(name, device)
    x = features(num_nodes).requires_grad_()
    xd = x.detach().to(device).requires_grad_()
    ei = torch.empty(2, 0, dtype=torch.long)
    values = edge_values(name, num_edges)
    out = call(ours, xd, ei.to(device), to(values, device))
    ref = call(theirs, x, ei, values)
    torch.testing.assert_close(out.cpu(), ref, **TOL)
    if ref.numel():
        grad = torch.ones_like(ref)
        (got,), (exp,) = (torch.autograd.grad(out, [xd], grad.to(device)),
                          torch.autograd.grad(ref, [x], grad))
        torch.testing.assert_close(got.cpu(), exp, **TOL)
    assert_layer_valid_call(name, ours, theirs, device)


@pytest.mark.parametrize("which", ["in", "out"])
@pytest.mark.parametrize("name", LAYER_NAMES)
def test_zero_width_layer(device, name, which):
    # in_channels=0 or out_channels=0: the result PyG gives, or PyG's own error (the attention
    # layers cannot view [N, 0] as [N, heads, 0] in either library).
    make = LAYERS[name][0]
    if name == "GINConv":
        make = (lambda nn: nn.GINConv(torch.nn.Linear(0, F_OUT))) if which == "in" else (
            lambda nn: nn.GINConv(torch.nn.Linear(F_IN, 0)))
    else:
        cls = name.split("-")[0]
        kwargs = {"aggr": "max"} if name == "SAGEConv-max" else (
            {"heads": HEADS, "edge_dim": EDGE_DIM} if LAYERS[name][1] == "attr" else {})
        args = (0, F_OUT) if which == "in" else (F_IN, 0)
        make = (lambda nn: getattr(nn, cls)(*args, **kwargs))
    torch.manual_seed(0)
    theirs, ours = make(pyg_nn), make(io_nn).to(device)
    x = features(NUM_NODES, 0 if which == "in" else F_IN)
    values = edge_values(name, 8)
    try:  # in_channels=0 reads as lazy in both libraries: this call materialises the weights
        call(theirs, x, EDGE_INDEX, values)
    except RuntimeError as error:
        with pytest.raises(RuntimeError, match=str(error).split(" because")[0][:40]):
            call(ours, x.to(device), EDGE_INDEX.to(device), to(values, device))
        return
    with torch.no_grad():  # a fan-in of 0 leaves PyG's biases uninitialised: give them values
        for p in theirs.parameters():
            p.uniform_(-1, 1)
    ours.load_state_dict(theirs.state_dict())
    out = call(ours, x.to(device), EDGE_INDEX.to(device), to(values, device))
    flush(device)
    torch.testing.assert_close(out.cpu(), call(theirs, x, EDGE_INDEX, values), **TOL)


@pytest.mark.parametrize("name", AGGR_NAMES)
@pytest.mark.parametrize("shape", [(0, F_IN), (INDEX.numel(), 0)], ids=["no_messages", "no_width"])
def test_zero_size_aggregation(device, name, shape):
    ours, theirs = AGGRS[name](io_nn.aggr), AGGRS[name](pyg_aggr)
    x = torch.randn(shape)
    index = INDEX[: shape[0]]
    out = ours(x.to(device), index.to(device), dim_size=5)
    torch.testing.assert_close(out.cpu(), theirs(x, index, dim_size=5))
    assert_aggr_valid_call(name, ours, device)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("num_nodes", [0, NUM_NODES])
def test_zero_size_graph_op(device, op, num_nodes):
    ei = torch.empty(2, 0, dtype=torch.long)
    graph = iognn.Graph(ei.to(device), num_nodes)
    inputs = inputs_of(op, graph)
    out = run_op(op, graph, inputs)
    flush(device)
    torch.testing.assert_close(out.cpu().double(), cpu_reference(op, ei, num_nodes, inputs))
    assert_op_valid_call(op, device)


@pytest.mark.parametrize("op", ["propagate", "segment_reduce"])
def test_zero_width_features_op(device, op):
    graph = iognn.Graph(EDGE_INDEX.to(device), NUM_NODES)
    x = torch.randn(NUM_NODES, 0, device=device, requires_grad=True)
    out = run_op(op, graph, {"x": x})
    assert out.shape == (NUM_NODES, 0)
    out.sum().backward()
    assert x.grad.shape == x.shape
    assert_op_valid_call(op, device)


@pytest.mark.parametrize("op", ["gat", "gatv2", "transformer"])
@pytest.mark.parametrize("dim", [1, 2], ids=["no_heads", "no_channels"])
def test_zero_heads_or_channels_op(device, op, dim):
    graph = iognn.Graph(EDGE_INDEX.to(device), NUM_NODES)
    inputs = inputs_of(op, graph)
    name = next(iter(inputs))
    inputs[name] = inputs[name].narrow(dim, 0, 0)
    op_error_then_valid(op, device, ValueError, f"{name} must have at least one head and one "
                        "channel", lambda: run_op(op, graph, inputs))


# ---- 9. num_nodes smaller than the largest index -------------------------------------------
@pytest.mark.parametrize("num_nodes", [3, (NUM_NODES, 3), (3, NUM_NODES)],
                         ids=["square", "few_dst", "few_src"])
def test_num_nodes_too_small_graph(device, num_nodes):
    graph_error_then_valid(device, IndexError, "edge_index.* is out of range for 3",
                           lambda: iognn.Graph(EDGE_INDEX.to(device), num_nodes))


@pytest.mark.parametrize("name", SIZE_LAYERS)
def test_size_too_small_layer(device, name):
    # The other layers take their node counts from the features
    # (test_features_fewer_rows_than_indices_layer).
    layer_error_then_valid(name, device, IndexError, "edge_index.* is out of range for 3",
                           lambda m: call(m, features(3).to(device), EDGE_INDEX.to(device),
                                          to(edge_values(name, 8), device), size=(3, 3)))


@pytest.mark.parametrize("bad", [[0, 2, 7], [0, 5, 3, 7], [1, 2, 7], [-1, 2, 7], []],
                         ids=["short_end", "decreasing", "late_start", "negative", "empty"])
@pytest.mark.parametrize("name", AGGR_NAMES)
def test_ptr_contract_aggregation(device, name, bad):
    # PyG: ptr non-decreasing from 0 to the number of messages; otherwise its segment kernels
    # raise, drop messages or read past the end. iognn refuses every such ptr by name.
    ptr = torch.tensor(bad, dtype=torch.long)
    ptr_ok = torch.tensor([0, 2, 5, 6])
    aggr_error_then_valid(name, device, ValueError, "ptr must be non-decreasing",
                          lambda m: m(features(6).to(device), ptr=ptr.to(device)))
    ours, theirs = AGGRS[name](io_nn.aggr), AGGRS[name](pyg_aggr)
    x = features(6)
    torch.testing.assert_close(ours(x.to(device), ptr=ptr_ok.to(device)).cpu(),
                               theirs(x, ptr=ptr_ok), **TOL)


# ---- 10. bipartite sizes swapped -------------------------------------------------------------
def test_bipartite_sizes_swapped_graph(device):
    graph_error_then_valid(device, IndexError, r"edge_index\[0\]\[2\] = 4 is out of range for 3 "
                           "source nodes",
                           lambda: iognn.Graph(BI_EDGE_INDEX.to(device), BI_SIZE[::-1]))


@pytest.mark.parametrize("op", FEATURE_OPS)
def test_bipartite_sides_swapped_op(device, op):
    graph = iognn.Graph(BI_EDGE_INDEX.to(device), BI_SIZE)
    swapped = iognn.Graph(torch.empty(2, 0, dtype=torch.long, device=device), BI_SIZE[::-1])
    inputs = inputs_of(op, swapped)  # every node input sized for the other side
    name = next(iter(inputs))
    op_error_then_valid(op, device, ValueError, rf"{name} has \d rows but the graph has",
                        lambda: run_op(op, graph, inputs))


@pytest.mark.parametrize("name", BIPARTITE_LAYERS)
def test_bipartite_inputs_swapped_layer(device, name):
    x_src, x_dst = features(BI_SIZE[0]), features(BI_SIZE[1], seed=1)
    values = edge_values(name, BI_EDGE_INDEX.size(1))
    layer_error_then_valid(name, device, IndexError,
                           r"edge_index\[0\]\[2\] = 4 is out of range for 3 source nodes",
                           lambda m: call(m, (x_dst.to(device), x_src.to(device)),
                                          BI_EDGE_INDEX.to(device), to(values, device)),
                           bipartite=True)
    # Swapped sides that keep every index in range are just another graph: PyG's result.
    ours, theirs = layer_pair(name, device)
    in_range = BI_EDGE_INDEX.clamp(max=2)
    out = call(ours, (x_dst.to(device), x_src.to(device)), in_range.to(device), to(values, device))
    torch.testing.assert_close(out.cpu(), call(theirs, (x_dst, x_src), in_range, values), **TOL)


# ---- 11. edge values with the wrong edge count ---------------------------------------------
@pytest.mark.parametrize("delta", [-1, 1])
@pytest.mark.parametrize("name", EDGE_LAYERS)
def test_edge_values_wrong_edge_count_layer(device, name, delta):
    arg = "edge_weight" if LAYERS[name][1] == "weight" else "edge_attr"
    values = edge_values(name, 8 + delta)
    layer_error_then_valid(name, device, ValueError,
                           rf"{name}: {arg} has {8 + delta} rows but edge_index has 8 edges",
                           lambda m: call(m, features(NUM_NODES).to(device),
                                          EDGE_INDEX.to(device), values.to(device)))


@pytest.mark.parametrize("name", ["GCNConv", "GraphConv"])
def test_edge_weight_not_1d_layer(device, name):
    # PyG broadcasts an [E, 1] edge_weight by accident of its formulas (and fails on [E, 2]);
    # iognn asks for the documented [E].
    layer_error_then_valid(name, device, ValueError, rf"{name}: edge_weight must be 1-D",
                           lambda m: call(m, features(NUM_NODES).to(device),
                                          EDGE_INDEX.to(device), torch.rand(8, 1, device=device)))


@pytest.mark.parametrize("op", ["propagate", "gcn_norm", "gat", "gatv2", "transformer"])
def test_edge_values_wrong_edge_count_op(device, op):
    graph = iognn.Graph(EDGE_INDEX.to(device), NUM_NODES)
    inputs = inputs_of(op, graph)
    if op in ("propagate", "gcn_norm"):
        inputs["edge_weight"] = torch.rand(graph.num_edges + 1, device=device)
        match = "edge_weight has 9 entries but the graph has 8 edges"
    else:
        ref = next(iter(inputs.values()))
        inputs["edge_attr"] = torch.randn(graph.num_edges - 1, EDGE_DIM, device=device)
        inputs["w_edge"] = torch.randn(*((EDGE_DIM, HEADS) if op == "gat" else
                                         (HEADS * F_OUT, EDGE_DIM)), device=device)
        match = "edge_attr has 7 entries but the graph has 8 edges"
        assert ref.dtype == inputs["edge_attr"].dtype
    op_error_then_valid(op, device, ValueError, match, lambda: run_op(op, graph, inputs))


# ---- 12. heads x channels not matching -----------------------------------------------------
HEAD_MISMATCHES = [
    ("gat", "alpha_src", lambda i: torch.randn(NUM_NODES, HEADS + 1)),
    ("gat", "alpha_dst", lambda i: torch.randn(NUM_NODES, HEADS - 1)),
    ("gatv2", "att", lambda i: torch.randn(HEADS, F_OUT + 1)),
    ("gatv2", "att", lambda i: torch.randn(HEADS + 1, F_OUT)),
    ("gatv2", "x_dst", lambda i: torch.randn(NUM_NODES, HEADS, F_OUT + 1)),
    ("transformer", "key", lambda i: torch.randn(NUM_NODES, HEADS + 1, F_OUT)),
    ("transformer", "value", lambda i: torch.randn(NUM_NODES, HEADS, F_OUT - 1)),
]


@pytest.mark.parametrize("op,name,make", HEAD_MISMATCHES,
                         ids=[f"{o}-{n}-{i}" for i, (o, n, _) in enumerate(HEAD_MISMATCHES)])
def test_heads_channels_mismatch_op(device, op, name, make):
    graph = iognn.Graph(EDGE_INDEX.to(device), NUM_NODES)
    inputs = inputs_of(op, graph)
    inputs[name] = make(inputs).to(device)
    op_error_then_valid(op, device, ValueError, rf"{name} must have shape",
                        lambda: run_op(op, graph, inputs))


@pytest.mark.parametrize("op", ["gat", "gatv2", "transformer"])
def test_edge_weights_of_wrong_heads_op(device, op):
    graph = iognn.Graph(EDGE_INDEX.to(device), NUM_NODES)
    inputs = inputs_of(op, graph)
    inputs["edge_attr"] = torch.randn(graph.num_edges, EDGE_DIM, device=device)
    inputs["w_edge"] = torch.randn(*((EDGE_DIM, HEADS + 1) if op == "gat" else
                                     (HEADS * F_OUT + 1, EDGE_DIM)), device=device)
    op_error_then_valid(op, device, ValueError, "w_edge must have shape",
                        lambda: run_op(op, graph, inputs))


@pytest.mark.parametrize("width", [1, EDGE_DIM + 1])
@pytest.mark.parametrize("name", ATTR_LAYERS)
def test_edge_attr_width_not_edge_dim_layer(device, name, width):
    # PyG: a shape error inside lin_edge's matmul; iognn names edge_attr and edge_dim.
    values = torch.randn(8, width) if width > 1 else torch.randn(8)
    layer_error_then_valid(name, device, ValueError, rf"{name}: edge_attr must have shape "
                           rf"\[num_edges, edge_dim={EDGE_DIM}\]",
                           lambda m: call(m, features(NUM_NODES).to(device),
                                          EDGE_INDEX.to(device), values.to(device)))


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool], ids=str)
@pytest.mark.parametrize("name", LAYER_NAMES)
def test_non_float_features_layer(device, name, dtype):
    # PyG: a dtype error inside the first matmul (or a result); iognn names x.
    x = torch.ones(NUM_NODES, F_IN, dtype=dtype, device=device)
    layer_error_then_valid(name, device, TypeError, "x must be float32, float64, float16 or bfloat16",
                           lambda m: call(m, x, EDGE_INDEX.to(device)))


def test_edge_attr_checks_of_gine_and_pna(device):
    """GINEConv and PNAConv name edge_attr when its width is not edge_dim and x when it is not
    floating point; valid calls then work."""
    from torch_geometric.utils import degree
    deg = torch.bincount(degree(EDGE_INDEX[1], NUM_NODES).long())
    layers = {"GINEConv": io_nn.GINEConv(torch.nn.Linear(F_IN, F_OUT), edge_dim=EDGE_DIM),
              "PNAConv": io_nn.PNAConv(F_IN, F_OUT, ["mean", "max"], ["identity"], deg,
                                    edge_dim=EDGE_DIM)}
    ei = EDGE_INDEX.to(device)
    x = features(NUM_NODES).to(device)
    for name, layer in layers.items():
        layer = layer.to(device)
        with pytest.raises(ValueError, match=rf"{name}: edge_attr must have shape "
                                             rf"\[num_edges, edge_dim={EDGE_DIM}\]"):
            layer(x, ei, edge_attr=torch.randn(ei.size(1), EDGE_DIM + 1, device=device))
        with pytest.raises(TypeError, match="x must be float32"):
            layer(x.long(), ei, edge_attr=torch.randn(ei.size(1), EDGE_DIM, device=device))
        out = layer(x, ei, edge_attr=torch.randn(ei.size(1), EDGE_DIM, device=device))
        assert out.shape == (NUM_NODES, F_OUT) and torch.isfinite(out).all()


def test_transformer_refuses_batched_features(device):
    # As GATConv and GATv2Conv (PyG fails deep inside with a size mismatch).
    layer = io_nn.TransformerConv(F_IN, F_OUT, heads=HEADS).to(device)
    with pytest.raises(ValueError, match="TransformerConv: node features must be 2-D"):
        layer(features(NUM_NODES).to(device).expand(2, -1, -1), EDGE_INDEX.to(device))


@pytest.mark.parametrize("name", LAYER_NAMES)
def test_feature_width_not_in_channels_layer(device, name):
    # The input projection refuses the width, as in PyG (same exception and message).
    both_layers_refuse(name, device, features(NUM_NODES, F_IN + 1), "shapes cannot be multiplied")


# ---- argument kinds the rows above rely on ---------------------------------------------------
@pytest.mark.parametrize("num_nodes", [5.5, 6.0, "6", None, True, (NUM_NODES, None)],
                         ids=["float", "integral_float", "str", "pair_none", "bool",
                              "none_in_pair"])
def test_num_nodes_must_be_integers_graph(device, num_nodes):
    if num_nodes is None:
        num_nodes = (None, NUM_NODES)
    graph_error_then_valid(device, TypeError, "num_nodes must hold integer node counts",
                           lambda: iognn.Graph(EDGE_INDEX.to(device), num_nodes))


def test_num_nodes_integer_likes_are_accepted():
    import numpy as np
    for n in (np.int64(NUM_NODES), torch.tensor(NUM_NODES), (np.int32(6), torch.tensor(6))):
        assert iognn.Graph(EDGE_INDEX, n).size == (NUM_NODES, NUM_NODES)


@pytest.mark.parametrize("op", ["propagate", "gcn_norm", "gat", "gatv2", "transformer",
                                "segment_reduce"])
def test_graph_argument_must_be_a_graph_op(device, op):
    graph = iognn.Graph(EDGE_INDEX.to(device), NUM_NODES)
    inputs = inputs_of(op, graph)
    op_error_then_valid(op, device, TypeError, "graph must be an iognn.Graph",
                        lambda: run_op(op, EDGE_INDEX.to(device), inputs))
