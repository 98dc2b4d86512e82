"""What every loader shares: the :class:`Dataset` it returns, where data lives, and downloads."""
from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import urllib.error
import urllib.request
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._checks import positive_ints as check_positive_ints  # noqa: F401 (the loaders' and baselines' name)

ENV_VAR = "RENORMPP_DATA"


@dataclass(frozen=True)
class Dataset:
    """Train and test arrays (float64) plus what was chosen to make them.

    ``metadata`` records the seed and every choice a loader made (normalization, selection, where
    the paper is ambiguous); array-valued entries (e.g. the indices of the selected examples in the
    source files) are shown by shape only in the ``repr``.
    """

    X: np.ndarray
    Y: np.ndarray
    X_test: np.ndarray
    Y_test: np.ndarray
    name: str
    class_names: tuple = ()
    metadata: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        meta = {k: (f"<array {v.shape}>" if isinstance(v, np.ndarray) else v) for k, v in self.metadata.items()}
        return (f"Dataset({self.name!r}, X={self.X.shape}, Y={self.Y.shape}, X_test={self.X_test.shape}, "
                f"Y_test={self.Y_test.shape}, metadata={meta})")


def data_dir(root: str | os.PathLike | None = None) -> Path:
    """Where data lives: ``root`` if given, else ``$RENORMPP_DATA`` if set, else ``~/.cache/renormpp``.

    Parameters
    ----------
    root : str or path, optional
        The folder; the environment or the cache by default.

    Returns
    -------
    pathlib.Path
    """
    if root is None:
        root = os.environ.get(ENV_VAR) or Path.home() / ".cache" / "renormpp"
    return Path(root).expanduser()


def find_files(names, dirs, suffixes=("",)) -> dict | None:
    """``{name: path}`` from the first of ``dirs`` that holds every name (with one of ``suffixes``), else None."""
    for d in dirs:
        found = {}
        for n in names:
            path = next((d / (n + s) for s in suffixes if (d / (n + s)).is_file()), None)
            if path is None:
                break
            found[n] = path
        else:
            return found
    return None


def missing_error(what: str, names, dirs, how: str, fetch_command: str) -> FileNotFoundError:
    """The error for files not found: which, where they were looked for, how to get them (``fetch_command`` on the
    command line, ``download=True`` in Python, or by hand: ``how``)."""
    return FileNotFoundError(
        f"{what} not found. Expected the files {', '.join(names)} together in one of: "
        f"{', '.join(str(d) for d in dirs)}. Get them with `{fetch_command}` (in Python: pass download=True); "
        f"or {how}; or point root= (or the {ENV_VAR} environment variable) at the folder "
        "that holds them.")


def md5sum(path: Path, gunzip: bool = False) -> str:
    """MD5 of a file's bytes, or of its decompressed bytes when ``gunzip`` and the file is gzipped."""
    with open(path, "rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
    h = hashlib.md5(usedforsecurity=False)
    with (gzip.open if gunzip and gzipped else open)(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def download(urls, dest: Path, md5: str, *, gunzip: bool = False, timeout: float = 60.0,
             by_hand: str = "") -> Path:
    """Fetch ``dest`` from the first reachable of ``urls`` and check its MD5 (of the decompressed bytes when
    ``gunzip``, so that a mirror's re-compression does not matter). A file that fails the check is discarded.
    ``by_hand``: how to get the file without this function, for the error messages."""
    by_hand = by_hand or f"fetch {dest.name} by hand into {dest.parent}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    failures = []
    for url in urls:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response, open(part, "wb") as f:
                shutil.copyfileobj(response, f)
        except (OSError, ValueError) as err:  # URLError, HTTPError, timeouts, refused connections, bad URLs
            part.unlink(missing_ok=True)
            http = isinstance(err, urllib.error.HTTPError)
            failures.append(f"{url}: " + (f"HTTP {err.code} {err.reason}" if http else str(getattr(err, "reason", err))))
            continue
        try:
            got = md5sum(part, gunzip)
        except (OSError, EOFError, zlib.error) as err:
            got = f"unreadable ({err})"
        if got != md5:
            part.unlink()
            raise ValueError(f"checksum mismatch for {url}: md5 {got}, expected {md5}. The download was "
                             f"discarded; try again later, or {by_hand}.")
        return part.replace(dest)
    raise ConnectionError(f"could not download {dest.name}:\n  " + "\n  ".join(failures)
                          + f"\nCheck the network and try again, or {by_hand}.")
