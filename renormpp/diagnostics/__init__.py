r"""Honest error bars for Monte Carlo series, and the comparison of sampled networks with the theory.

* the statistics of a Monte Carlo series, with numpy only (:mod:`renormpp.mcstats`, re-exported here): the error of
  the mean (:func:`gamma_method`, :func:`blocking`, :func:`ess_error`, :func:`error_of_mean`, the
  :func:`thermalization_cut`), the equilibrium tests (:func:`drift`, :func:`chain_spread`, :func:`rhat`,
  :func:`converged`, :func:`relaxation`), the metastable states of a run (:func:`states`), the
  specialist neurons of sampled networks (:func:`specialists`) and the sampler's health (:func:`sampler_health`,
  :func:`describe_sampler`);
* :mod:`~renormpp.diagnostics.convert`: a run as an ArviZ DataTree with named dims (:func:`to_datatree`);
* :mod:`~renormpp.diagnostics.comparison`: the sampled networks against every theory (:func:`compare`, :func:`verdict`,
  :func:`summary`, :func:`why_not`);
* :mod:`~renormpp.diagnostics.extrapolation`: finite-size extrapolation (:func:`extrapolate`);
* :mod:`~renormpp.diagnostics.kernel`: the posterior's hidden kernel from draws, against the theory's
  (:func:`~renormpp.diagnostics.kernel.measure`, :func:`~renormpp.diagnostics.kernel.diagnose`).
"""
from ..mcstats import (BLOCKS, DRIFT_Z, ESTIMATORS, FALSE_ALARM, MAX_ACCEPT_FALL, MAX_DIVERGENT_FRACTION,
                       MIN_ACCEPT_PROB, MIN_EFFECTIVE, RHAT_MAX, THRESHOLD, ChainSpread, Drift, ErrorEstimate,
                       FrozenChainWarning, Relaxation, SamplerHealth, SamplerWarning, ShortRunWarning, StaleStepWarning,
                       States, acceptance_fell, blocking, chain_spread, converged, describe_sampler, drift,
                       equilibrium_z, error_of_mean, ess_error, gamma_method, relaxation, rhat, sampler_health,
                       scalar_series, states, thermalization_cut)
from ..mcstats import SPECIALIST_THRESHOLD, Specialists, specialists
from .comparison import Z_AGREE, compare, does_not_apply, summary, theory_fit, verdict, why_not
from .convert import to_datatree
from . import kernel, matching
from .extrapolation import Extrapolation, extrapolate

__all__ = [
    # the error of the mean (renormpp.mcstats.errors)
    "ErrorEstimate", "ShortRunWarning", "FrozenChainWarning", "MIN_EFFECTIVE", "thermalization_cut", "blocking",
    "gamma_method", "ess_error", "ESTIMATORS", "error_of_mean",
    # equilibrium (renormpp.mcstats.equilibrium)
    "FALSE_ALARM", "DRIFT_Z", "equilibrium_z", "Drift", "drift", "RHAT_MAX", "rhat", "ChainSpread", "chain_spread",
    "Relaxation", "relaxation", "scalar_series", "converged",
    # metastable states (renormpp.mcstats.states)
    "BLOCKS", "THRESHOLD", "States", "states",
    # the specialist neurons of sampled networks (renormpp.mcstats.specialists)
    "SPECIALIST_THRESHOLD", "Specialists", "specialists",
    # the sampler's health (renormpp.mcstats.health)
    "MIN_ACCEPT_PROB", "MAX_DIVERGENT_FRACTION", "SamplerWarning", "SamplerHealth", "sampler_health",
    "MAX_ACCEPT_FALL", "StaleStepWarning", "acceptance_fell",
    "describe_sampler",
    # conversion, the comparison with the theory, extrapolation
    "to_datatree", "Z_AGREE", "verdict", "theory_fit", "why_not", "compare", "does_not_apply", "summary",
    "Extrapolation", "extrapolate", "kernel",
]
