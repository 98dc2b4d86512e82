"""Stopping a run cleanly: SIGTERM sets :data:`STOP`; the point in flight finishes its block of draws, saves a
checkpoint and raises :class:`Interrupted`."""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading

STOP = threading.Event()  # set by SIGTERM: finish the current block, save, stop


class Interrupted(RuntimeError):
    """A run was stopped (SIGTERM or Ctrl-C) after saving its progress; run it again to resume."""


class NotStarted(Interrupted):
    """A point was not started because the run had been stopped."""


def _on_sigterm(signum, frame):
    STOP.set()
    for child in multiprocessing.active_children():  # process-pool workers: they save and stop too
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGTERM)


@contextlib.contextmanager
def stop_on_sigterm():
    """While inside (in the main thread), SIGTERM sets :data:`STOP` instead of killing the process."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
