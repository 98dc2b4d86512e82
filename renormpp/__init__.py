"""renormpp: finite Bayesian one-hidden-layer networks and their proportional-limit theory.

Submodules: :mod:`renormpp.kernels` (NNGP kernels), :mod:`renormpp.theory` (kernel shape
renormalization: the order parameter Q* and its predictions), :mod:`renormpp.datasets`.
"""
from importlib.metadata import PackageNotFoundError, version

from . import datasets, kernels, theory

try:
    __version__ = version("renormpp")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"

__all__ = ["datasets", "kernels", "theory", "__version__"]
