"""Op-level forward and forward + backward ms of the CSR Transformer and GAT attention at one head
(C = 64 and 128, fp32 and bf16) on a random graph of 200,000 nodes whose in-degrees are uniform in
[1, 31] (3.2M edges): the single-head case of the locality work. It needs only the public op API,
so ``scripts/gpu_ab.sh`` can run it against older trees, e.g.

    scripts/gpu_ab.sh .base/7a3b96b.tar -- python3 scripts/time_single_head.py

Times are medians of CUDA-event-timed steps, as ``iognn bench`` takes them
(``iognn.bench.timing.measure``: the forward and the whole forward + backward of one step).
"""
import os

import torch

import iognn
from iognn.bench.timing import Step, measure

NUM_NODES = 200_000


def random_graph(num_nodes: int, seed: int = 0) -> "iognn.Graph":
    gen = torch.Generator().manual_seed(seed)
    degrees = torch.randint(1, 32, (num_nodes,), generator=gen)
    dst = torch.arange(num_nodes).repeat_interleave(degrees)
    src = torch.randint(0, num_nodes, (dst.numel(),), generator=gen)
    return iognn.Graph(torch.stack([src, dst]).cuda(), (num_nodes, num_nodes))


def op_inputs(op: str, n: int, channels: int, dtype):
    """The op's differentiable inputs at one head: (query, key, value) or (x, alpha_src,
    alpha_dst)."""
    shapes = [(n, 1, channels)] * 3 if op == "transformer" else [(n, 1, channels), (n, 1), (n, 1)]
    return [torch.randn(s, device="cuda", dtype=dtype, requires_grad=True) for s in shapes]


def main():
    label = os.environ.get("IOGNN_AB_LABEL", "")
    graph = random_graph(NUM_NODES)
    ops = {"transformer": iognn.ops.transformer_attention, "gat": iognn.ops.gat_attention}
    for name, op in ops.items():
        for channels in (64, 128):
            for dtype in (torch.float32, torch.bfloat16):
                torch.manual_seed(0)
                inputs = op_inputs(name, NUM_NODES, channels, dtype)
                grad = torch.randn(NUM_NODES, 1, channels, device="cuda", dtype=dtype)
                step = Step(lambda *t, op=op: op(graph, *t), [inputs], grad)
                m = measure(step, torch.device("cuda"), warmup=5, repeats=20, budget_s=10.0)
                print(f"[{label}] {name} 1x{channels} {str(dtype)[6:]}: fwd {m.fwd_ms:.3f} "
                      f"fwd+bwd {m.fwdbwd_ms:.3f}", flush=True)


if __name__ == "__main__":
    main()
