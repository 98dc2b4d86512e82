"""renormpp: finite Bayesian one-hidden-layer networks and their proportional-limit theory.

Start with :class:`Spec` (:mod:`renormpp.spec`): one network on one data set, declared once, yielding its NumPyro
model, the recommended sampler, its observables, its theory and the comparison of the two.

Layers (docs/architecture.md): :mod:`renormpp.network` (the network once: activations, kernel maps, forward
pass) under :mod:`renormpp.kernels` (NNGP kernels) and :mod:`renormpp.models` (the network as a NumPyro model);
:mod:`renormpp.architectures` (one record per kind of network: its model, readout features, theory and options);
:mod:`renormpp.theory` (kernel shape renormalization: the order parameter Q* and its predictions);
:mod:`renormpp.mcmc` (a pure sampler core) under :mod:`renormpp.infer` (its NumPyro kernels);
:mod:`renormpp.observables` (generalization error and readout overlaps per draw) and :mod:`renormpp.readout`
(v given w in closed form); :mod:`renormpp.mcstats` (error bars, equilibrium tests, sampler health) under
:mod:`renormpp.diagnostics` (theory against sampling);
:mod:`renormpp.plots` (the paper's figures); :mod:`renormpp.datasets`; :mod:`renormpp.experiments` (sweeps over
N1: config, resumable runner, executors, reports); :mod:`renormpp.baselines` (Adam-trained networks with a
hyperparameter search, the best infinite-width GP).
"""
from importlib.metadata import PackageNotFoundError, version

from . import _compat
from . import (architectures, baselines, datasets, diagnostics, experiments, infer, kernels, mcmc, mcstats, models,
               network, observables, plots, readout, theory)
from .spec import Spec

_compat.link_submodules("numpyro")

try:
    __version__ = version("renormpp")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"

__all__ = ["Spec", "architectures", "baselines", "datasets", "diagnostics", "experiments", "infer", "kernels", "mcmc", "mcstats",
           "models", "network", "observables", "plots", "readout", "theory", "__version__"]
