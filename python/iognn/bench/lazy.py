"""Lazy access to optional code: iognn ops and layers still being written, torch_sparse.

A case that needs something absent raises :class:`Unavailable`; the runner records the row as
'unavailable' instead of failing, so the suite runs on any branch and picks the code up once it
is there.
"""
from __future__ import annotations

import importlib


class Unavailable(Exception):
    """An implementation (module, class or function) is not present in this installation."""


def optional_attr(module: str, name: str):
    """``module.name``, or :class:`Unavailable` when the module or the attribute does not exist.

    Only a missing module counts as unavailable: an ImportError raised inside an existing module
    is a bug and propagates.
    """
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module.startswith(exc.name):
            raise Unavailable(f"{module} is not installed or not merged yet") from None
        raise
    try:
        return getattr(mod, name)
    except AttributeError:
        raise Unavailable(f"{module}.{name} does not exist yet") from None
