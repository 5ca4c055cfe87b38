"""The optional dependencies of iognn's tools (``iognn train``, ``iognn bench``, the dataset
readers and the benchmark plots): the ``tools`` extra, ``pip install iognn[tools]``.

``import iognn`` (the layers, ops, Graph, CapturedStep, accelerate) needs none of them: the tools
import them where they use them, and :func:`require` turns a missing one into an error that says
how to install it.
"""
from __future__ import annotations

import importlib.util
from typing import List, Sequence

EXTRA = "iognn[tools]"
INSTALL_HINT = f"pip install {EXTRA}"
TOOL_DEPENDENCIES = ("scipy", "tqdm", "matplotlib")  # the `tools` extra of pyproject.toml


class MissingToolDependency(ImportError):
    """A dependency of the ``tools`` extra is not installed."""


def missing(modules: Sequence[str] = TOOL_DEPENDENCIES) -> List[str]:
    """The top-level modules of ``modules`` that cannot be imported (not installed)."""
    return [m for m in modules if importlib.util.find_spec(m.split(".")[0]) is None]


def require(what: str, modules: Sequence[str] = TOOL_DEPENDENCIES) -> None:
    """Raises :class:`MissingToolDependency` naming ``what`` (e.g. ``'iognn bench'``), the modules
    that are absent and the install command, unless every module of ``modules`` is installed."""
    absent = missing(modules)
    if absent:
        verb = "is" if len(absent) == 1 else "are"
        raise MissingToolDependency(
            f"{what} needs {', '.join(absent)}, which {verb} not installed; install the "
            f"dependencies of iognn's tools with: {INSTALL_HINT}", name=absent[0])


def require_for_command(command: str, modules: Sequence[str] = TOOL_DEPENDENCIES) -> None:
    """:func:`require` for a command-line tool, checked before it starts any work: a missing
    module exits (status 1) with the message instead of a traceback."""
    try:
        require(command, modules)
    except MissingToolDependency as error:
        raise SystemExit(f"error: {error}") from None
