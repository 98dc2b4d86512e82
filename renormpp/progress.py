"""Progress of long runs: a tqdm bar on a terminal, and one line per update elsewhere (a log file, a pipe), where a
bar's carriage-return redraws would become thousands of lines."""
from __future__ import annotations

import sys
import time


def bar(*, total: int, desc: str, unit: str = "it", initial: int = 0, disable: bool = False, leave: bool = True):
    """A progress bar with tqdm's ``update``, ``set_postfix_str``, ``total`` and ``close``: tqdm's own where stderr
    is a terminal, else a :class:`LineBar`."""
    if disable or sys.stderr.isatty():
        from tqdm.auto import tqdm

        return tqdm(total=total, initial=initial, desc=desc, unit=unit, disable=disable, leave=leave,
                    dynamic_ncols=True)
    return LineBar(total=total, initial=initial, desc=desc, unit=unit)


class LineBar:
    """Progress as plain lines on stderr: one per :meth:`update` (a finished point, a block of draws), e.g.
    ``N1=50 seed=0 warmup+sampling: 1200/2200 it (55%), 31 s, acc. 0.80``; the postfix is the one set before."""

    def __init__(self, *, total: int, desc: str, unit: str = "it", initial: int = 0):
        self.total, self.n, self.desc, self.unit = total, initial, desc, unit
        self.postfix = ""
        self._start = time.monotonic()

    def set_postfix_str(self, text: str) -> None:
        self.postfix = text

    def update(self, k: int = 1) -> None:
        self.n += k
        share = f" ({self.n / self.total:.0%})" if self.total else ""
        tail = f", {self.postfix}" if self.postfix else ""
        print(f"{self.desc}: {self.n}/{self.total} {self.unit}{share}, {time.monotonic() - self._start:.0f} s{tail}",
              file=sys.stderr, flush=True)

    def close(self) -> None:
        pass
