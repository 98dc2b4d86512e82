"""Test-wide set-up: the real data sets are found by the loaders' own rules (see tests/realdata.py), and compiled
XLA programs are shared across the session through JAX's persistent compilation cache.

Many tests build the same tiny network at the same sizes (a point of `renormpp run`, a kernel of the notebooks' quick
size) in new closures, which JAX's in-memory cache does not recognize: each one compiled its programs anew, about 4 s
of a tiny point's 5 s. The persistent cache keys a program by its HLO, so the second test that builds the same
program loads it instead (the same executable: the draws are unchanged). The cache folder is new for every session
(nothing carries over between runs, so a session's time is what a fresh clone sees) and is shared by the xdist
workers, the subprocesses of the CLI tests and the notebooks' kernels through the environment.
"""
import os
import shutil
import tempfile

import realdata

_CACHE_ENV = "JAX_COMPILATION_CACHE_DIR"


def pytest_configure(config):
    realdata.prepare()
    if os.environ.get(_CACHE_ENV) is None and not os.environ.get("PYTEST_XDIST_WORKER"):
        folder = tempfile.mkdtemp(prefix="renormpp-test-jax-cache-")
        os.environ[_CACHE_ENV] = folder
        os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")  # every program, not only slow ones
        os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
        config._renormpp_jax_cache = folder


def pytest_unconfigure(config):
    folder = getattr(config, "_renormpp_jax_cache", None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
