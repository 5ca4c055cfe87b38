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
