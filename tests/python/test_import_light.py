"""``import iognn`` needs torch (and PyG for the layers) only: scipy, tqdm and matplotlib are the
``tools`` extra (``pip install iognn[tools]``), imported by the tools where they use them; a tool
whose dependency is missing says how to install it. And the packages export public names only."""
from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import iognn
import iognn.nn
import iognn.nn.aggr
import iognn.ops
from iognn import _tools

REPO = Path(__file__).resolve().parents[2]
TOOLS = ("scipy", "tqdm", "matplotlib")
HINT = "pip install iognn[tools]"


def run_python(code: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO / "python")] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=REPO)


# Makes the tools' dependencies unimportable, as if they were not installed.
BLOCK = "import sys\nfor m in {mods!r}: sys.modules[m] = None\n"


def test_import_loads_no_tool_dependency():
    # torch itself imports tqdm when it is installed (torch.hub's download bars): only what iognn
    # adds on top of torch counts.
    result = run_python(
        "import sys\n"
        f"tools = {TOOLS!r}\n"
        "import torch\n"
        "before = [m for m in tools if m in sys.modules]\n"
        "assert 'scipy' not in before and 'matplotlib' not in before, before\n"
        "import iognn, iognn.nn, iognn.ops\n"
        "from iognn import Graph, CapturedStep, accelerate\n"
        "added = [m for m in tools if m in sys.modules and m not in before]\n"
        "assert not added, added\n"
        "assert not any(m in sys.modules for m in ('iognn.bench', 'iognn.train', "
        "'iognn.datasets', 'iognn._progress')), sorted(m for m in sys.modules if 'iognn' in m)\n")
    assert result.returncode == 0, result.stderr


def test_library_works_without_tool_dependencies():
    result = run_python(
        BLOCK.format(mods=TOOLS) +
        "import torch, iognn, iognn.nn, iognn.ops\n"
        "from iognn import Graph, CapturedStep, accelerate\n"
        "ei = torch.tensor([[0, 1, 2], [1, 2, 0]])\n"
        "x = torch.randn(3, 4)\n"
        "assert iognn.ops.propagate(Graph(ei, 3), x, None, 'sum').shape == (3, 4)\n"
        "assert iognn.nn.GCNConv(4, 2)(x, ei).shape == (3, 2)\n"
        "from iognn.cli import build_parser\n"
        "build_parser()  # `iognn --help` works too\n")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("command, blocked", [
    (["train", "--epochs", "1"], ("tqdm",)),
    (["train", "--epochs", "1", "--dataset", "cora"], ("scipy",)),
    (["bench", "--device", "cpu", "--graphs", "uniform:50:2"], ("matplotlib",)),
])
def test_cli_names_the_extra_when_a_dependency_is_missing(command, blocked, tmp_path):
    argv = command + ["--json" if command[0] == "train" else "--out", str(tmp_path / "out")]
    result = run_python(BLOCK.format(mods=blocked) + f"from iognn.cli import main\nmain({argv!r})\n")
    assert result.returncode == 1, (result.stdout, result.stderr)
    message = result.stderr.strip().splitlines()[-1]
    assert HINT in message and blocked[0] in message and f"iognn {command[0]}" in message
    assert "Traceback" not in result.stderr


def test_library_entry_points_name_the_extra(monkeypatch, tmp_path):
    from iognn.bench import report
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(_tools.MissingToolDependency, match=r"matplotlib.*pip install iognn\[tools\]"):
        report.heatmap([], "speedup", "title", str(tmp_path / "plot.png"))
    monkeypatch.setitem(sys.modules, "scipy", None)
    assert _tools.missing() == ["scipy", "matplotlib"]
    with pytest.raises(ImportError, match=r"scipy"):
        _tools.require("reading cora", ("scipy",))


def test_tools_extra_matches_the_requirements_file():
    def name(requirement: str) -> str:
        for sep in "<>=!~[; ":
            requirement = requirement.split(sep)[0]
        return requirement.strip().lower().replace("_", "-")

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert tuple(name(r) for r in extras["tools"]) == _tools.TOOL_DEPENDENCIES
    assert not {name(r) for r in project["dependencies"]} & set(TOOLS)
    # `make` installs requirements.txt: it must hold the dependencies, the tools and the tests
    lines = (REPO / "requirements.txt").read_text().splitlines()
    listed = {name(line) for line in lines if line.strip() and not line.startswith("#")}
    wanted = project["dependencies"] + extras["tools"] + extras["test"]
    assert {name(r) for r in wanted} <= listed


HELPERS = {"resolve_aggregation", "from_pyg_aggregation", "build_shared", "cached_graph"}


@pytest.mark.parametrize("module", [iognn, iognn.nn, iognn.nn.aggr, iognn.ops],
                         ids=lambda m: m.__name__)
def test_all_lists_public_names_that_resolve(module):
    names = module.__all__
    assert len(names) == len(set(names))
    for n in names:
        assert hasattr(module, n), f"{module.__name__}.__all__ names {n!r}, which does not exist"
        assert n == "__version__" or not n.startswith("_"), n
        assert n not in HELPERS, n
    # star-import gives exactly __all__
    namespace: dict = {}
    exec(f"from {module.__name__} import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(names)


def test_helpers_import_from_their_modules():
    from iognn.nn.aggr.resolver import from_pyg_aggregation, resolve_aggregation
    assert callable(from_pyg_aggregation) and callable(resolve_aggregation)
