"""Progress bars: live on a terminal, a few plain lines in a log (python/iognn/_progress.py)."""
import io

import pytest

from iognn._progress import progress_bar


class Terminal(io.StringIO):
    def isatty(self):
        return True


class Log(io.StringIO):
    def isatty(self):
        return False


def _epochs(stream, epochs=2000, **kwargs):
    bar = progress_bar(range(epochs), desc="train", file=stream, **kwargs)
    for epoch in bar:
        bar.set_postfix(loss=f"{1 / (epoch + 1):.3f}")
    bar.close()
    return stream.getvalue()


def test_log_gets_a_few_plain_lines():
    out = _epochs(Log())
    assert "\r" not in out
    lines = out.splitlines()
    assert 1 <= len(lines) <= 4
    assert all(line.startswith("train:") for line in lines)
    assert "2000/2000" in lines[-1] and "loss=0.001" in lines[-1]


def test_log_counting_bar_writes_messages_and_a_final_line():
    stream = Log()
    with progress_bar(total=10, desc="bench", unit="case", file=stream) as bar:
        for case in range(10):
            bar.set_description(f"case {case}")
            bar.update(1)
            if case == 4:
                bar.write("graph done", file=stream)
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue() and "graph done" in lines and len(lines) <= 5
    assert lines[-1].startswith("case 9:") and "10/10" in lines[-1]


def test_log_without_total_prints_only_the_final_line():
    stream = Log()
    for _ in progress_bar(iter(range(100)), desc="x", file=stream):
        pass
    assert stream.getvalue().splitlines() == [stream.getvalue().strip()]
    assert "100" in stream.getvalue()


def test_terminal_gets_a_live_bar():
    out = _epochs(Terminal(), epochs=50)
    assert out.count("\r") > 1  # redrawn in place, not one line per update
    assert "50/50" in out and "loss=0.020" in out


@pytest.mark.parametrize("stream_type", [Terminal, Log])
def test_disabled_bar_prints_nothing(stream_type):
    stream = stream_type()
    assert _epochs(stream, enabled=False) == ""
