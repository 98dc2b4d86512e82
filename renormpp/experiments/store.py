"""What a run keeps on disk, and how: atomic writes, the finished marker of a point, the check that a folder holds
the same config, and the sampler checkpoints.

A point's folder is finished when it holds ``result.json`` (written last). While sampling, ``checkpoint.npz`` holds
the sampler state and the draws so far, in a documented format that loads without running code:

* ``format_version``: :data:`CHECKPOINT_VERSION` (a file of another version is refused with a clear error);
* ``warm``, ``n``, ``seconds``: warmup iterations done, draws recorded, sampling seconds so far;
* ``state/0``, ``state/1``, ...: the leaves of the sampler state (``jax.tree_util.tree_leaves`` order), checked on
  load against the state a fresh start of the same point builds (their count, shapes and dtypes);
* ``draws/<name>``, ``stats/<name>``: the recorded observables and sampler statistics, axes (chain, draw, ...);
* ``warmup_draws/<name>``, ``warmup_stats/<name>``: the same for the warmup's draws (what an adaptive warmup decided
  on, so that a resumed warmup decides as an uninterrupted one);
* ``kernel/<name>``: the streamed sums of the hidden kernel over stretches of draws
  (:class:`renormpp.diagnostics.kernel.Segments`), where ``run.kernel_diagnosis`` is on.
"""
from __future__ import annotations

import json
import os
import time
import zipfile
from pathlib import Path

import numpy as np

from . import config as config_mod

CHECKPOINT = "checkpoint.npz"
CHECKPOINT_VERSION = 2  # 2: the warmup's schedule is part of the sampler's state
RESULT = "result.json"


class FolderInUse(RuntimeError):
    """Another renormpp run holds the output folder."""


class CheckpointError(RuntimeError):
    """A checkpoint cannot be read back (truncated, corrupt, of another format version, or of another sampler)."""


def write_atomic(path: Path, data: bytes | str) -> None:
    """Write to a temporary file beside ``path`` and rename it over: a reader never sees half a file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    os.replace(tmp, path)


def writable_folder(folder: Path, key: str = "run.out") -> Path:
    """Create ``folder`` if needed and check that files can be written in it; a ConfigError naming the folder and
    the system's reason otherwise (before any work is done)."""
    folder = Path(folder)
    probe = folder / ".renormpp-write-test"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise config_mod.ConfigError(f"cannot write to the output folder {folder} ({err.strerror or err}); choose a "
                                     f"writable {key}") from None
    return folder


class FolderLock:
    """An exclusive lock on an output folder (``.renormpp.lock``, holding the pid), so that two runs never work on
    one folder: the second is refused with :class:`FolderInUse`, naming the holder. Released on exit."""

    def __init__(self, folder: Path):
        self.path = Path(folder) / ".renormpp.lock"
        self._file = None

    def __enter__(self):
        import fcntl

        f = open(self.path, "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            holder = f.read().strip() or "unknown"
            f.close()
            raise FolderInUse(f"{self.path.parent} is in use by another renormpp run (pid {holder}); wait for it to "
                              f"finish, or stop it (kill -TERM {holder}: it saves its progress), then run again") from None
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        self._file = f
        return self

    def __exit__(self, *exc):
        import fcntl

        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None


def check_same_config(saved: Path, cfg, *, ignore=(), remedy: str) -> None:
    """Raise :class:`~renormpp.experiments.config.ConfigError` if the config saved at ``saved`` differs from ``cfg``
    in a key not in ``ignore``; nothing if there is none saved yet."""
    if not saved.exists():
        return
    point = isinstance(cfg, config_mod.PointConfig)
    changed = config_mod.differences(config_mod.resolve(config_mod.load(saved), point=point), cfg, ignore=ignore)
    if changed:
        raise config_mod.ConfigError(f"{saved.parent} holds a {'point' if point else 'run'} with a different config "
                                     f"({', '.join(changed)} differ); {remedy}")


class PointStore:
    """The folder of one point."""

    def __init__(self, folder):
        self.folder = Path(folder)

    @property
    def finished(self) -> bool:
        return (self.folder / RESULT).exists()

    def result(self) -> dict:
        return json.loads((self.folder / RESULT).read_text())

    def write(self, name: str, data: bytes | str) -> None:
        write_atomic(self.folder / name, data)

    def write_json(self, name: str, value) -> None:
        self.write(name, json.dumps(value, indent=1))

    def read_json(self, name: str, default=None):
        path = self.folder / name
        return json.loads(path.read_text()) if path.exists() else default

    def finish(self, result: dict) -> None:
        """Write ``result.json``, the marker of a finished point, and drop the checkpoint."""
        self.write_json(RESULT, result)
        (self.folder / CHECKPOINT).unlink(missing_ok=True)

    def checkpoint(self, template) -> "Checkpoint":
        old = self.folder / "checkpoint.pkl"
        if old.exists():
            raise CheckpointError(
                f"{old} is a checkpoint of an earlier renormpp (a pickle, which this version does not open: loading a "
                "pickle runs code from the file). Finish the run with the version that wrote it, or delete the file "
                "to restart this point from its beginning.")
        return Checkpoint(self.folder / CHECKPOINT, template)


def _flat(prefix: str, tree: dict) -> dict:
    return {f"{prefix}/{k}": np.asarray(v) for k, v in tree.items()}


def _concat(parts: list[dict]) -> dict:
    return {k: np.concatenate([p[k] for p in parts], axis=1) for k in parts[0]} if parts else {}


class Checkpoint:
    """Sampler state, progress and draws of one point (see the module docstring for the file format).

    ``template`` is the state a fresh start builds; a saved state is read into its tree structure.
    """

    def __init__(self, path: Path, template):
        import jax

        self.path = Path(path)
        self.state, self.warm, self.n, self.seconds = template, 0, 0, 0.0
        self._draws, self._stats, self._warm_draws, self._warm_stats = [], [], [], []
        self.sums: dict = {}  # streamed sums kept beside the draws (renormpp.diagnostics.kernel.Segments.arrays)
        self._treedef = jax.tree_util.tree_structure(template)
        if self.path.exists():
            self._load(jax.tree_util.tree_leaves(template))
        self.saved_at = time.monotonic()

    def _load(self, leaves) -> None:
        import jax

        remedy = "Delete it to restart this point from its beginning (its draws so far are lost)."
        try:
            with np.load(self.path, allow_pickle=False) as f:
                files = {k: f[k] for k in f.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
            raise CheckpointError(f"the checkpoint {self.path} cannot be read ({type(err).__name__}: {err}): it is "
                                  f"truncated or corrupt. {remedy}") from None
        version = int(files.get("format_version", -1))
        if version != CHECKPOINT_VERSION:
            raise CheckpointError(f"the checkpoint {self.path} has format version {version}; this renormpp reads "
                                  f"version {CHECKPOINT_VERSION}. {remedy}")
        saved = [files.get(f"state/{i}") for i in range(len(leaves))]
        if (any(s is None for s in saved) or f"state/{len(leaves)}" in files
                or any(s.shape != np.shape(t) or s.dtype != np.asarray(t).dtype for s, t in zip(saved, leaves))):
            raise CheckpointError(f"the checkpoint {self.path} holds the state of another sampler (its arrays do not "
                                  f"match this point's). A run started by an earlier renormpp, before the hidden-kernel "
                                  f"diagnosis, resumes with kernel_diagnosis = false in the [run] table of its "
                                  f"config.toml. Otherwise: {remedy}")
        self.state = jax.tree_util.tree_unflatten(self._treedef, saved)
        self.warm, self.n, self.seconds = int(files["warm"]), int(files["n"]), float(files["seconds"])
        for group, parts in (("draws", self._draws), ("stats", self._stats), ("warmup_draws", self._warm_draws),
                             ("warmup_stats", self._warm_stats)):
            block = {k.split("/", 1)[1]: v for k, v in files.items() if k.startswith(group + "/")}
            if block:
                parts.append(block)
        self.sums = {k: v for k, v in files.items() if k.startswith("kernel/")}

    def add(self, draws: dict, stats: dict, warmup: bool = False) -> None:
        """Keep a block of draws and statistics (of the warmup with ``warmup``)."""
        (self._warm_draws if warmup else self._draws).append(draws)
        (self._warm_stats if warmup else self._stats).append(stats)

    def joined(self, warmup: bool = False) -> tuple[dict, dict]:
        """The draws and statistics so far (of the warmup with ``warmup``), each ``{name: array (chain, draw, ...)}``."""
        if warmup:
            return _concat(self._warm_draws), _concat(self._warm_stats)
        return _concat(self._draws), _concat(self._stats)

    def save(self) -> None:
        import io

        import jax

        draws, stats = self.joined()
        self._draws, self._stats = ([draws], [stats]) if draws else ([], [])
        warm_draws, warm_stats = self.joined(warmup=True)
        self._warm_draws, self._warm_stats = ([warm_draws], [warm_stats]) if warm_draws else ([], [])
        arrays = {f"state/{i}": np.asarray(x) for i, x in enumerate(jax.tree_util.tree_leaves(jax.device_get(self.state)))}
        arrays |= (_flat("draws", draws) | _flat("stats", stats) | _flat("warmup_draws", warm_draws)
                   | _flat("warmup_stats", warm_stats) | self.sums)
        buf = io.BytesIO()
        np.savez(buf, format_version=CHECKPOINT_VERSION, warm=self.warm, n=self.n, seconds=self.seconds, **arrays)
        write_atomic(self.path, buf.getvalue())
        self.saved_at = time.monotonic()
