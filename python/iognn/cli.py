"""The ``iognn`` console command: ``iognn <command> [options]`` (also ``python -m iognn``).

A command is a module whose docstring's first line is its summary and which provides
``add_arguments(parser)`` and ``run(args) -> int``; adding one is one line in :data:`COMMANDS`.
"""
from __future__ import annotations

import argparse
import importlib
from typing import List, Optional

COMMANDS = {
    "train": "iognn.train",
    "bench": "iognn.bench.cli",
}


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the command docstring's layout and shows each option's default (unless None/False)."""

    def _get_help_string(self, action):
        hidden = action.default is None or action.default is False \
            or action.default == argparse.SUPPRESS
        if hidden or not action.help or not action.option_strings:
            return action.help
        return f"{action.help} (default: %(default)s)"


def build_parser() -> argparse.ArgumentParser:
    from . import __version__
    parser = argparse.ArgumentParser(prog="iognn", description="IO-aware GNN layers for PyTorch.")
    parser.add_argument("--version", action="version", version=f"iognn {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="command")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        doc = (module.__doc__ or "").strip()
        sub = commands.add_parser(name, help=doc.splitlines()[0] if doc else None, description=doc,
                                  formatter_class=_HelpFormatter)
        module.add_arguments(sub)
        sub.set_defaults(run=module.run)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)
