"""The fused GCN / SAGE layer ops against the separate ops they replace and PyG, in one process:
wall time of a layer's forward + backward and of a 2-layer training step (forward, cross entropy,
backward, Adam) on real graphs, plus the summed kernel time and launches of each (torch.profiler).

The separate ops are forced by a no-op forward hook on each projection (a hooked ``Linear`` is
called, not fused: docs/nn.md); the three variants are timed in interleaved rounds so that clock and
host drift spread over all of them.

Usage: python scripts/time_fused_layers.py [--graphs cora,citeseer,amazon_photo] [--data DIR]
       [--rounds 7] [--steps 30] [--device cuda]
The graphs are read as in ``iognn bench`` ($IOGNN_DATA or --data). Kernel times and launches are
reported on CUDA only.
"""
import argparse
import statistics
import time

import torch
import torch_geometric.nn as pyg_nn

import iognn.nn as io_nn
from iognn.bench.workloads import TwoLayer, _node_loss, fwd_bwd, kernel_time, node_data

VARIANTS = ("pyg", "separate", "fused")


def separate_ops(model):
    """Hooks every projection of the model's iognn layers, which keeps them on separate ops."""
    for module in model.modules():
        for name in ("lin", "lin_l", "lin_r", "lin_rel", "lin_root"):
            lin = getattr(module, name, None)
            if isinstance(lin, io_nn.Linear):
                lin.register_forward_hook(lambda *args: None)
    return model


def make(variant, build, device):
    torch.manual_seed(0)
    model = build(pyg_nn if variant == "pyg" else io_nn).to(device)
    return separate_ops(model) if variant == "separate" else model


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def walls(steps, rounds, n, device):
    """Median ms per step of each variant over interleaved rounds of n steps."""
    times = {k: [] for k in steps}
    for step in steps.values():
        for _ in range(10):
            step()
    sync(device)
    for _ in range(rounds):
        for k, step in steps.items():
            start = time.perf_counter()
            for _ in range(n):
                step()
            sync(device)
            times[k].append((time.perf_counter() - start) * 1e3 / n)
    return {k: statistics.median(v) for k, v in times.items()}


def layer_steps(layer, x, edge_index):
    grad = torch.randn(x.size(0), 64, device=x.device)
    return {v: fwd_bwd(make(v, lambda lib: getattr(lib, layer)(64, 64), x.device),
                       (x, edge_index), lambda out: grad, leaves=(x,)) for v in VARIANTS}


def training_step(model, data, forward=None):
    """One full-graph training step of `model` (forward, cross entropy, backward, Adam); the
    forward pass runs `forward` (e.g. the compiled model) when given."""
    x, edge_index, y, train_idx, _ = data
    forward = model if forward is None else forward
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def step():
        optimizer.zero_grad(set_to_none=True)
        _node_loss(forward, x, edge_index, y, train_idx).backward()
        optimizer.step()
    return step


def training_steps(model_name, data):
    x, classes = data[0], data[4]
    return {v: training_step(make(v, lambda lib: TwoLayer(lib, model_name, x.size(1), classes),
                                  x.device), data) for v in VARIANTS}


def parse_args(description: str, rounds: int, steps: int, extra=()) -> argparse.Namespace:
    """The options of this script and of scripts/time_step_floor.py (plus its `extra` ones:
    (flag, add_argument keywords) pairs)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--graphs", default="cora,citeseer,amazon_photo")
    p.add_argument("--data", default=None, help="data folder of the real graphs")
    p.add_argument("--rounds", type=int, default=rounds)
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--device", default="cuda")
    for flag, options in extra:
        p.add_argument(flag, **options)
    return p.parse_args()


def main():
    args = parse_args(__doc__.split("\n")[0], rounds=7, steps=30)
    device = torch.device(args.device)
    rows = []
    for graph in args.graphs.split(","):
        data = node_data(graph, device, args.data, 0)
        x = torch.randn(data[0].size(0), 64, device=device, requires_grad=True)
        for layer in ("GCNConv", "SAGEConv"):
            steps = layer_steps(layer, x, data[1])
            rows.append((f"{graph} {layer} fwd+bwd", steps,
                         walls(steps, args.rounds, args.steps, device)))
        for model_name in ("gcn", "sage"):
            steps = training_steps(model_name, data)
            rows.append((f"{graph} 2-layer {model_name} step", steps,
                         walls(steps, args.rounds, args.steps, device)))
    for name, steps, wall in rows:  # the profiler last: once attached, launches cost more host
        kernels = {k: kernel_time(s, device, 20) for k, s in steps.items()}
        cells = "  ".join(f"{k} {wall[k]:.3f}" + (
            f" ({kernels[k]['kernel_ms']:.3f} ms kernels, {kernels[k]['launches']:.0f} launches)"
            if device.type == "cuda" else "") for k in VARIANTS)
        print(f"{name}: {cells} | fused vs separate {wall['separate'] / wall['fused']:.2f}x, "
              f"vs pyg {wall['pyg'] / wall['fused']:.2f}x", flush=True)


if __name__ == "__main__":
    main()
