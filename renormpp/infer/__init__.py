r"""Samplers as NumPyro kernels, and a driver for long runs.

* :class:`Langevin` (ULA, or MALA with ``adjust=True``) and :class:`KineticLangevin` (OBABO, Metropolis-adjusted):
  constructors of one thin ``MCMCKernel`` adapter (:class:`~.adapter.Adapter`) over the pure core
  :mod:`renormpp.mcmc`, which runs an algorithm record (:mod:`.algorithms`) on the model bound to a flat position
  (:mod:`.binding`; every product at full float32 precision: :func:`full_precision`) and warns about divergences, frozen chains and ULA's bias (:mod:`.alerts`);
* :class:`Observed`: any NumPyro kernel (NUTS, HMCGibbs, ...) recording observables instead of the parameters;
* :class:`Chains`: a sampler's chains run in compiled blocks of draws, continued from a state: what
  ``numpyro.infer.MCMC`` does, compiled once per block length, for long runs that checkpoint between blocks;
* :class:`AdaptiveWarmup`: between those blocks, ends the warmup's phases when they have done their job
  (:mod:`.warmup`);
* :class:`ReplicaExchange`: a ladder of replicas per chain at powers of the likelihood, neighbours swapping, for
  posteriors whose chains hold states (:mod:`.tempering`);
* :class:`StateSwaps`: reflections that move specialist neurons between state directions (class contrasts),
  a Metropolis move between the states that no local update crosses (:mod:`.swaps`);
* :func:`nuts_sampler`: NumPyro's NUTS under the signature of :mod:`renormpp.mcmc.sampling`, for a theory that
  samples;
* :mod:`.starts`: where chains start (a prior draw, a rescaled one, the trained network), for chains of several kinds
  that must agree.
"""
from .adapter import Adapter, KineticLangevin, Langevin, LangevinState
from .alerts import ULA_BIAS_BOUND, LowAcceptanceWarning, NoisyPotentialWarning, ULABiasWarning
from .algorithms import paper_step_size
from ..precision import full_precision
from .chains import Accumulator, Chains, DivergenceWarning
from . import starts
from .nuts import nuts_sampler
from .observed import Observed, ObservedState
from .swaps import StateSwaps, SwapState, class_contrasts
from .tempering import ReplicaExchange, ReplicaState, geometric_ladder, tempered
from .warmup import AdaptiveWarmup
from .wrapper import Wrapper, adapts_warmup

__all__ = ["Accumulator", "Adapter", "AdaptiveWarmup", "Chains", "DivergenceWarning", "KineticLangevin", "Langevin", "LangevinState",
           "LowAcceptanceWarning", "NoisyPotentialWarning", "Observed", "ObservedState", "ReplicaExchange", "ReplicaState", "StateSwaps", "SwapState", "class_contrasts", "ULABiasWarning", "ULA_BIAS_BOUND", "full_precision", "geometric_ladder", "nuts_sampler", "paper_step_size", "starts", "tempered"]
