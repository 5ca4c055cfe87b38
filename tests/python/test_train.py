"""``iognn train``: the CLI (in process and as ``python -m iognn``), its JSON report, identical
starting weights with ``--compare pyg`` and accuracy parity with PyG on the synthetic dataset."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from iognn import train
from iognn.cli import build_parser, main
from iognn.train import MODELS, build_models, pick_device

REPO = Path(__file__).resolve().parents[2]


def run_cli(tmp_path, *args):
    path = tmp_path / "report.json"
    assert main(["train", "--no-progress", "--json", str(path), *args]) == 0
    return json.loads(path.read_text())


@pytest.mark.parametrize("model", MODELS)
def test_cli_compare_prints_table_and_writes_json(tmp_path, capsys, model):
    report = run_cli(tmp_path, "--model", model, "--epochs", "2", "--hidden", "16", "--heads", "2",
                     "--compare", "pyg")
    table = capsys.readouterr().out
    assert "implementation" in table and "test acc %" in table and "peak MiB" in table
    results = {r["implementation"]: r for r in report["results"]}
    assert set(results) == {"iognn", "pyg"}
    assert all(name in table for name in results)
    for r in results.values():
        assert 0.0 <= r["test_acc"] <= 1.0 and 0.0 <= r["val_acc"] <= 1.0
        assert 1 <= r["best_epoch"] <= 2
        assert r["time_per_epoch_ms"] > 0 and r["peak_memory_mib"] >= 0
    assert report["config"]["model"] == model and report["config"]["device"] == "cpu"
    assert "MiB" in report["memory_metric"] and report["num_nodes"] == 2000


def test_compare_starts_from_identical_weights():
    args = build_parser().parse_args(["train", "--model", "gat", "--compare", "pyg",
                                      "--heads", "2"])
    models = build_models(args, in_channels=32, num_classes=8)
    assert list(models) == ["iognn", "pyg"]
    ours, theirs = models["iognn"].state_dict(), models["pyg"].state_dict()
    assert list(ours) == list(theirs)
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)


def test_gcn_reaches_pyg_accuracy_on_synthetic(tmp_path):
    report = run_cli(tmp_path, "--model", "gcn", "--epochs", "60", "--compare", "pyg")
    acc = {r["implementation"]: r["test_acc"] for r in report["results"]}
    assert abs(acc["iognn"] - acc["pyg"]) <= 0.015
    assert acc["iognn"] > 0.6  # the synthetic graph is learnable (chance is 1/8)


def test_python_dash_m_runs(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO / "python")] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    proc = subprocess.run([sys.executable, "-m", "iognn", "train", "--epochs", "1", "--hidden", "8",
                           "--no-progress"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "iognn" in proc.stdout and "test acc %" in proc.stdout
    assert "pyg" not in proc.stdout.split("implementation", 1)[1].split("ms/epoch:")[0]


def test_missing_dataset_is_a_clean_error(tmp_path):
    with pytest.raises(SystemExit, match="dataset 'cora' not found"):
        main(["train", "--dataset", "cora", "--data-dir", str(tmp_path), "--epochs", "1"])


def test_bad_arguments_are_rejected(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--model", "mlp"])
    assert "invalid choice" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="--epochs"):
        main(["train", "--epochs", "0"])


def test_device_choice_falls_back_to_cpu_without_cuda_kernels(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(train, "iognn_runs_on_cuda", lambda model, heads: False)
    assert pick_device("auto", "gat", 8) == torch.device("cpu")
    assert "no CUDA kernels for 'gat'" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="no CUDA kernels"):
        pick_device("cuda", "gat", 8)
    assert pick_device("cpu", "gat", 8) == torch.device("cpu")


def test_device_cuda_requested_without_a_device(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pick_device("auto", "gcn", 8) == torch.device("cpu")
    with pytest.raises(SystemExit, match="no CUDA device"):
        pick_device("cuda", "gcn", 8)
