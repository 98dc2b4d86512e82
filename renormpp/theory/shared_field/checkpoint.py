"""Checkpoints of an averaged solve: its state saved to an ``.npz`` file as it goes, and read back by a solve of the
same data, settings and start."""
from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import numpy as np


#: seconds between two saves of a solve's checkpoint (:class:`_Checkpoint`)
_CHECKPOINT_SECONDS = 60.0


class _Checkpoint:
    """The state of an averaged solve (:func:`_averaged`) in an ``.npz`` file, saved every
    :data:`_CHECKPOINT_SECONDS` and at its end (written to a temporary file, then renamed: an interrupted save leaves
    the last one whole), and read back by a solve with the same data, settings and start (``key``, a digest of
    them): a solve of hours at P = 1000 is not lost to a closed session."""

    def __init__(self, path, key: str):
        self.path, self.key, self.last = Path(path), key, time.monotonic()
        if self.path.suffix != ".npz":
            raise ValueError(f"checkpoint must be a path ending in .npz; got {str(path)!r}")

    def load(self) -> dict | None:
        """The saved state, or None where there is none yet; a ValueError where it is another solve's."""
        if not self.path.exists():
            return None
        with np.load(self.path, allow_pickle=False) as z:
            state = {k: z[k] for k in z.files}
        if str(state.pop("key")) != self.key:
            raise ValueError(f"the checkpoint {str(self.path)!r} holds a solve of other data, settings or start; "
                             "pass another path to start this one, or delete it")
        return state

    def save(self, force: bool = False, **state) -> None:
        """Save ``state`` where :data:`_CHECKPOINT_SECONDS` have passed since the last save, or at once (``force``)."""
        if not force and time.monotonic() - self.last < _CHECKPOINT_SECONDS:
            return
        tmp = self.path.with_name(self.path.name + ".tmp.npz")
        np.savez(tmp, key=np.array(self.key), **state)
        os.replace(tmp, self.path)
        self.last = time.monotonic()


def _key(*arrays, **settings) -> str:
    """A digest of a solve's data, start and settings (the key of its checkpoint)."""
    h = hashlib.sha256(repr(sorted(settings.items())).encode())
    for a in arrays:
        h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    return h.hexdigest()
