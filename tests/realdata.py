"""Where the tests find the real data sets: by the loaders' own rules (``root=``, ``$RENORMPP_DATA``,
``~/.cache/renormpp``), never by a path of this workspace.

:func:`prepare` runs once per test session (tests/conftest.py): when ``$RENORMPP_DATA`` is not set and the project's
shared data folder (``../shared/data`` beside the repository, which CI has and a user's clone does not) is there, it
makes a data folder in the temp directory, with that MNIST linked and CIFAR-10 written in its canonical layout by
``../shared/data/cifar10/to_batches.py`` (about 10 s, once), and points ``$RENORMPP_DATA`` at it, for the tests and
the notebooks they run. Without it, tests that need real data skip with the loader's message, which names the missing
files and where they were looked for (:func:`missing`).
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def prepare() -> None:
    if os.environ.get("RENORMPP_DATA") or not SHARED.is_dir():
        return
    shared = SHARED.resolve()
    root = Path(tempfile.gettempdir()) / "renormpp-test-data"
    root.mkdir(exist_ok=True)
    mnist = root / "mnist"
    if mnist.is_symlink() and mnist.resolve() != shared / "mnist":
        mnist.unlink()  # left by a clone elsewhere
    if (shared / "mnist").is_dir() and not mnist.is_symlink():
        mnist.symlink_to(shared / "mnist", target_is_directory=True)
    script = shared / "cifar10" / "to_batches.py"
    if script.is_file() and not (root / "cifar-10-batches-py" / "test_batch").is_file():
        subprocess.run([sys.executable, str(script), str(root)], check=True, capture_output=True)
    os.environ["RENORMPP_DATA"] = str(root)


def missing(name: str) -> str | None:
    """None if the loaders find data set ``name`` ("mnist" or "cifar10"); else why not (the files, the folders)."""
    import renormpp as rp

    try:
        rp.datasets.locate(name)
    except FileNotFoundError as err:
        return f"real {name} not available: {err}"
    return None
