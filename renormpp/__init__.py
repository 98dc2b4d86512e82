"""renormpp: finite Bayesian one-hidden-layer networks and their proportional-limit theory.

Submodules: :mod:`renormpp.kernels` (NNGP kernels), :mod:`renormpp.theory` (kernel shape
renormalization: the order parameter Q* and its predictions), :mod:`renormpp.models` (the finite
network as a NumPyro model), :mod:`renormpp.infer` (Langevin MCMC kernel), :mod:`renormpp.observables`
(generalization loss and readout overlaps per draw), :mod:`renormpp.diagnostics` (error bars,
theory against sampling), :mod:`renormpp.plots` (the paper's figures), :mod:`renormpp.datasets`,
:mod:`renormpp.experiments` (sweeps over N1: config, resumable runner, executors, reports),
:mod:`renormpp.baselines` (Adam-trained networks with a hyperparameter search, the best infinite-width GP).
"""
from importlib.metadata import PackageNotFoundError, version

from . import baselines, datasets, diagnostics, experiments, infer, kernels, models, observables, plots, theory

try:
    __version__ = version("renormpp")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"

__all__ = ["baselines", "datasets", "diagnostics", "experiments", "infer", "kernels", "models", "observables", "plots", "theory", "__version__"]
