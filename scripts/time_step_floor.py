"""The host floor of an eager training step: the 2-layer step of ``iognn bench --suite workloads``
(dropout, layer, relu, dropout, layer, cross entropy, backward, Adam) with each graph layer replaced
by a bare ``torch.nn.Linear`` (one op and one autograd node per layer, no graph: the least any
layer library can cost), against the same step with PyG's and iognn's SAGE and GCN layers.

The variants are timed in one process in interleaved rounds (the median round is reported), then
profiled for their summed kernel time and launches (CUDA only).

Usage: python scripts/time_step_floor.py [--graphs cora,citeseer,amazon_photo] [--data DIR]
       [--rounds 3] [--steps 20] [--device cuda]
"""
import argparse
import statistics

import torch
import torch.nn.functional as F
import torch_geometric.nn as pyg_nn

import iognn.nn as io_nn
from iognn.bench.workloads import HIDDEN, TwoLayer, _node_loss, kernel_time, node_data, wall_time


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


def variants(features: int, classes: int):
    return {"linear-layer floor": lambda: LinearLayers(features, classes),
            "pyg sage": lambda: TwoLayer(pyg_nn, "sage", features, classes),
            "iognn sage": lambda: TwoLayer(io_nn, "sage", features, classes),
            "pyg gcn": lambda: TwoLayer(pyg_nn, "gcn", features, classes),
            "iognn gcn": lambda: TwoLayer(io_nn, "gcn", features, classes)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--graphs", default="cora,citeseer,amazon_photo")
    p.add_argument("--data", default=None, help="data folder of the real graphs")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--device", default="cuda")
    args = p.parse_args()
    device = torch.device(args.device)
    for graph in args.graphs.split(","):
        x, edge_index, y, train_idx, classes = node_data(graph, device, args.data, 0)
        steps = {}
        for name, make in variants(x.size(1), classes).items():
            torch.manual_seed(0)
            model = make().to(device)
            optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

            def step(model=model, optimizer=optimizer):
                optimizer.zero_grad(set_to_none=True)
                _node_loss(model, x, edge_index, y, train_idx).backward()
                optimizer.step()
            steps[name] = step
        walls = {name: [] for name in steps}
        for _ in range(args.rounds):
            for name, step in steps.items():
                walls[name].append(wall_time(step, device, 5, 3, args.steps))
        for name, step in steps.items():  # the profiler last: it slows later launches
            kernels = kernel_time(step, device, 10)
            cell = (f" ({kernels['kernel_ms']:.3f} ms kernels, {kernels['launches']:.0f} launches)"
                    if device.type == "cuda" else "")
            print(f"{graph} {name}: {statistics.median(walls[name]):.3f} ms{cell}", flush=True)


if __name__ == "__main__":
    main()
