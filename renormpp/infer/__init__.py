r"""Samplers as NumPyro kernels, and a driver for long runs.

* :class:`Langevin` (ULA, or MALA with ``adjust=True``) and :class:`KineticLangevin` (OBABO, Metropolis-adjusted):
  thin ``MCMCKernel`` adapters over the pure core :mod:`renormpp.mcmc`;
* :class:`Observed`: any NumPyro kernel (NUTS, HMCGibbs, ...) recording observables instead of the parameters;
* :class:`Chains`: a kernel's chains run in compiled blocks of draws, continued from a state: what
  ``numpyro.infer.MCMC`` does, compiled once per block length, for long runs that checkpoint between blocks.
"""
from .chains import Chains, DivergenceWarning
from .langevin import (ULA_BIAS_BOUND, KineticLangevin, Langevin, LangevinState, LowAcceptanceWarning, ULABiasWarning,
                       paper_step_size)
from .observed import Observed, ObservedState

__all__ = ["Chains", "DivergenceWarning", "KineticLangevin", "Langevin", "LangevinState", "LowAcceptanceWarning",
           "Observed", "ObservedState", "ULABiasWarning", "ULA_BIAS_BOUND", "paper_step_size"]
