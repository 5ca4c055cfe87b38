"""Progress bars for the command-line tools: a live tqdm bar on a terminal, a few plain lines
elsewhere (a log file, a pipe), where each carriage-return update of a bar would become a line."""
from __future__ import annotations

import sys
import time
from typing import Iterable, Optional, TextIO

from tqdm import tqdm

_LINE_FORMAT = "{desc}: {percentage:3.0f}% {n_fmt}/{total_fmt} [{elapsed}, {rate_fmt}{postfix}]"


def progress_bar(iterable: Optional[Iterable] = None, *, total: Optional[int] = None,
                 desc: str = "", unit: str = "it", enabled: bool = True,
                 file: Optional[TextIO] = None, lines: int = 4):
    """A tqdm bar over ``iterable`` (or counting up to ``total``) on ``file`` (stderr by
    default) when it is a terminal, else a :class:`LogProgress` printing at most ``lines`` lines.
    Either way the object supports iteration, ``update``, ``set_description``, ``set_postfix``,
    ``write``, ``close`` and ``with``; ``enabled=False`` prints nothing but ``write``'s text."""
    file = sys.stderr if file is None else file
    if enabled and not (hasattr(file, "isatty") and file.isatty()):
        return LogProgress(iterable, total=total, desc=desc, unit=unit, file=file, lines=lines)
    return tqdm(iterable, total=total, desc=desc, unit=unit, disable=not enabled, file=file,
                dynamic_ncols=True)


class LogProgress:
    """The part of tqdm's interface the tools use, printing a line each time another
    ``1/lines`` of the total is done and a final line at :meth:`close` (only the final line when
    the total is unknown)."""

    def __init__(self, iterable: Optional[Iterable] = None, *, total: Optional[int] = None,
                 desc: str = "", unit: str = "it", file: TextIO, lines: int = 4):
        if total is None and hasattr(iterable, "__len__"):
            total = len(iterable)
        self.iterable, self.total, self.desc, self.unit = iterable, total, desc, unit
        self.file = file
        self.n, self.postfix, self.closed = 0, "", False
        self.step = -(-total // lines) if total else None  # ceil: at most `lines` lines in all
        self.next_line = self.step
        self.start = time.perf_counter()

    def __iter__(self):
        for item in self.iterable:
            yield item
            self.update()  # after the loop body, as tqdm does, so its postfix is on the line
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def update(self, n: int = 1) -> None:
        self.n += n
        if self.step and self.total > self.n >= self.next_line:  # the final line is close's
            self._print()
            self.next_line = (self.n // self.step + 1) * self.step

    def set_description(self, desc: str) -> None:
        self.desc = desc

    def set_postfix(self, **values) -> None:
        self.postfix = ", ".join(f"{key}={str(value).strip()}" for key, value in values.items())

    def write(self, s: str, file: Optional[TextIO] = None) -> None:
        print(s, file=self.file if file is None else file, flush=True)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._print()

    def _print(self) -> None:
        line = tqdm.format_meter(self.n, self.total, time.perf_counter() - self.start,
                                 prefix=self.desc, unit=self.unit, postfix=self.postfix,
                                 bar_format=_LINE_FORMAT if self.total else None)
        self.write(line)
