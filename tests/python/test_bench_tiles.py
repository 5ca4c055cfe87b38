"""python -m iognn.bench.tiles: its CPU-side behaviour (the timings themselves need a GPU and run in
scripts on the GPU machine)."""
import pytest
import torch

from iognn.bench import tiles


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message of a machine without CUDA")
def test_without_cuda_the_bench_says_why(capsys):
    with pytest.raises(SystemExit) as exit_info:
        tiles.main(["--sweep"])
    assert exit_info.value.code == 2
    assert "CUDA device" in capsys.readouterr().err


def test_a_sweep_row_reads_as_its_fields():
    row = {"graph": "batch:16384:16:12", "order": "rcm", "op": "propagate", "dtype": "bf16",
           "fill": 0.495, "reorder_s": 0.16, "csr_fwd": 0.156, "csr_bwd": 0.192,
           "tiles_fwd": 0.120, "tiles_bwd": 0.117, "speedup": 1.47, "auto": "tiles/tiles",
           "auto_vs_best": 1.0}
    line = tiles.format_sweep_row(row)
    for text in ("batch:16384:16:12", "rcm", "propagate", "bf16", "fill 0.495", "0.156+0.192",
                 "0.120+0.117", "x1.47", "auto tiles/tiles 1.000 of best"):
        assert text in line


def test_shuffling_keeps_the_edge_multiset_up_to_relabelling():
    edge_index = torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]])
    shuffled = tiles._shuffled(edge_index, 3, seed=0)
    assert shuffled.shape == edge_index.shape
    degrees = sorted(torch.bincount(edge_index[1], minlength=3).tolist())
    assert sorted(torch.bincount(shuffled[1], minlength=3).tolist()) == degrees


@pytest.mark.parametrize("op", ["transformer:2", "gat:2", "gatv2:2"])
def test_the_attention_ops_time_both_paths_of_their_variant(op):
    import iognn
    edge_index = torch.randint(0, 40, (2, 300), generator=torch.Generator().manual_seed(0))
    g = iognn.Graph(edge_index, 40)
    ran = []

    def ms(fn):  # runs each path once (on the host twin) instead of timing it
        ran.append(fn())
        return 1.0
    times, choose = tiles._op_timings(op, g, 40, torch.float32, 16, ms, device="cpu")
    assert times == {"csr_fwd": 1.0, "csr_bwd": 1.0, "tiles_fwd": 1.0, "tiles_bwd": 1.0}
    (csr_out, _), grads, (tiles_out, _), tile_grads = ran
    torch.testing.assert_close(tiles_out, csr_out)
    for a, b in zip(tile_grads, grads):
        torch.testing.assert_close(a, b)
    assert len(grads) == 3
    assert choose() == (False, False)  # "auto" on a CPU graph keeps the CSR path
