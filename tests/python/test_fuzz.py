"""Differential fuzzing of iognn.nn against PyG 2.8 (generator and comparison: fuzz.py).

One test per seed, so a failure names its seed in the test id and its message carries the case
and a one-line repro (``python tests/python/fuzz.py --seed S --device D``).
Environment: IOGNN_FUZZ_CASES (default 300: about 10 s of CPU), IOGNN_FUZZ_SEED (first seed,
default 0), IOGNN_FUZZ_DEVICE (device of the unmarked test, default cpu). The `cuda` variant runs
the same seeds on the GPU, where cases may be larger and use fp16 / bf16 (scripts/gpu_check.sh
runs it with IOGNN_FUZZ_CASES=3000).
"""
import os

import pytest
import torch

import fuzz
from fuzz import check_seed

CASES = int(os.environ.get("IOGNN_FUZZ_CASES", "300"))
FIRST = int(os.environ.get("IOGNN_FUZZ_SEED", "0"))
SEEDS = range(FIRST, FIRST + CASES)


@pytest.mark.parametrize("seed", SEEDS)
def test_fuzz_matches_pyg(seed):
    check_seed(seed, os.environ.get("IOGNN_FUZZ_DEVICE", "cpu"))


@pytest.mark.cuda
@pytest.mark.parametrize("seed", SEEDS)
def test_fuzz_matches_pyg_cuda(seed):
    check_seed(seed, "cuda")


def _off_by_ten_percent(module, args, out):
    """A forward hook that makes a layer wrong: outputs scaled by 1.1 and shifted by 0.1."""
    if isinstance(out, tuple):
        return (out[0] * 1.1 + 0.1,) + out[1:]
    return out * 1.1 + 0.1


# Seeds whose cases have outputs (an empty graph's layer output may have no rows); 2244 on CUDA is
# an fp16 SAGEConv with a normalised 1-wide output, whose gradients are rounding noise: the
# comparison widens its tolerance there by PyG's own error, and must still see a wrong output.
@pytest.mark.parametrize("seed, device", [(s, "cpu") for s in range(1, 8)] + [(2244, "cuda")])
def test_the_comparison_catches_a_wrong_layer(seed, device, monkeypatch):
    build = fuzz.build_layers

    def wrong(case, on, dtype):
        ours, theirs, same_dtype = build(case, on, dtype)
        ours.register_forward_hook(_off_by_ten_percent)
        return ours, theirs, same_dtype

    monkeypatch.setattr(fuzz, "build_layers", wrong)
    case = fuzz.make_case(seed, device)  # built as for `device`, run on the CPU
    with pytest.raises(fuzz.Mismatch, match="output"):
        fuzz.run_case(case, torch.device("cpu"))
