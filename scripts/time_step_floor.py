"""The host floor of an eager training step: the 2-layer step of ``iognn bench --suite workloads``
(dropout, layer, relu, dropout, layer, cross entropy, backward, Adam) with each graph layer replaced
by a bare ``torch.nn.Linear`` (one op and one autograd node per layer, no graph: the least any
layer library can cost), against the same step with PyG's and iognn's SAGE, GCN and GAT layers.
With ``--compile`` the linear-layer step and iognn's steps are also timed under ``torch.compile``
(modes ``default`` and ``reduce-overhead``, the model compiled as by ``iognn bench``): what
compilation adds to or takes from a step that has no graph layer at all is the floor against which
"compiled is never slower than eager" is judged.

The variants are timed in one process in interleaved rounds (the median round is reported, as by
scripts/time_fused_layers.py), then profiled for their summed kernel time and launches (CUDA only).

Usage: python scripts/time_step_floor.py [--graphs cora,citeseer,amazon_photo] [--data DIR]
       [--rounds 3] [--steps 20] [--device cuda] [--compile]
"""
import torch
import torch.nn.functional as F
import torch_geometric.nn as pyg_nn

import iognn.nn as io_nn
from iognn.bench.workloads import HIDDEN, TwoLayer, kernel_time, node_data
from time_fused_layers import parse_args, training_step, walls  # (scripts/: shared timing)


class LinearLayers(torch.nn.Module):
    """TwoLayer's step with a bare linear projection in place of each graph layer."""

    def __init__(self, in_channels: int, num_classes: int):
        super().__init__()
        self.conv1 = torch.nn.Linear(in_channels, HIDDEN)
        self.conv2 = torch.nn.Linear(HIDDEN, num_classes)

    def forward(self, x, edge_index):
        x = F.dropout(x, 0.5, self.training)
        x = F.relu(self.conv1(x))
        x = F.dropout(x, 0.5, self.training)
        return self.conv2(x)


COMPILE_MODES = {"compile": "default", "compile-ro": "reduce-overhead"}


def variants(features: int, classes: int):
    return {"linear-layer floor": lambda: LinearLayers(features, classes),
            "pyg sage": lambda: TwoLayer(pyg_nn, "sage", features, classes),
            "iognn sage": lambda: TwoLayer(io_nn, "sage", features, classes),
            "pyg gcn": lambda: TwoLayer(pyg_nn, "gcn", features, classes),
            "iognn gcn": lambda: TwoLayer(io_nn, "gcn", features, classes),
            "pyg gat": lambda: TwoLayer(pyg_nn, "gat", features, classes),
            "iognn gat": lambda: TwoLayer(io_nn, "gat", features, classes)}


def main():
    args = parse_args(__doc__.split("\n")[0], rounds=3, steps=20,
                      extra=[("--compile", dict(action="store_true",
                                                help="also time compiled steps"))])
    device = torch.device(args.device)
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    for graph in args.graphs.split(","):
        data = node_data(graph, device, args.data, 0)
        steps = {}
        for name, make in variants(data[0].size(1), data[4]).items():
            torch.manual_seed(0)
            steps[name] = training_step(make().to(device), data)
            if args.compile and not name.startswith("pyg"):
                for suffix, mode in COMPILE_MODES.items():
                    torch.manual_seed(0)
                    model = make().to(device)
                    steps[f"{name} {suffix}"] = training_step(
                        model, data, torch.compile(model, mode=mode))
        wall = walls(steps, args.rounds, args.steps, device)
        for name, step in steps.items():  # the profiler last: it slows later launches
            kernels = kernel_time(step, device, 10)
            cell = (f" ({kernels['kernel_ms']:.3f} ms kernels, {kernels['launches']:.0f} launches)"
                    if device.type == "cuda" else "")
            print(f"{graph} {name}: {wall[name]:.3f} ms{cell}", flush=True)


if __name__ == "__main__":
    main()
