r"""The statistics of Monte Carlo series, with numpy, scipy and ArviZ (no theory, no model): the error of the
mean (:mod:`~renormpp.mcstats.errors`), the equilibrium tests (:mod:`~renormpp.mcstats.equilibrium`) and the
sampler's health (:mod:`~renormpp.mcstats.health`); the specialist neurons of sampled networks
(:mod:`~renormpp.mcstats.specialists`, with the network's activation table and readout given the features from
:mod:`renormpp.network`, and the label-contrast directions). They sit below :mod:`renormpp.infer` (its adaptive
warmup asks :func:`relaxation`), and :mod:`renormpp.diagnostics` re-exports them (``rp.diagnostics.gamma_method``, ...) beside
the comparison with the theory.
"""
from .equilibrium import (DRIFT_Z, FALSE_ALARM, RHAT_MAX, ChainSpread, Drift, Relaxation, chain_spread, converged,
                          drift, equilibrium_z, relaxation, rhat, scalar_series)
from .errors import (ESTIMATORS, MIN_EFFECTIVE, ErrorEstimate, FrozenChainWarning, ShortRunWarning, blocking,
                     error_of_mean, ess_error, gamma_method, thermalization_cut)
from .states import BLOCKS, THRESHOLD, States, states
from .specialists import SPECIALIST_THRESHOLD, Specialists, specialists
from .health import (MAX_ACCEPT_FALL, MAX_DIVERGENT_FRACTION, MIN_ACCEPT_PROB, SamplerHealth, SamplerWarning,
                     StaleStepWarning, acceptance_fell, describe_sampler, sampler_health)

__all__ = ["ErrorEstimate", "ShortRunWarning", "FrozenChainWarning", "MIN_EFFECTIVE", "thermalization_cut", "blocking",
           "gamma_method", "ess_error", "ESTIMATORS", "error_of_mean",
           "FALSE_ALARM", "DRIFT_Z", "equilibrium_z", "Drift", "drift", "RHAT_MAX", "rhat", "ChainSpread",
           "chain_spread", "Relaxation", "relaxation", "scalar_series", "converged",
           "MIN_ACCEPT_PROB", "MAX_DIVERGENT_FRACTION", "SamplerWarning", "SamplerHealth", "sampler_health",
           "MAX_ACCEPT_FALL", "StaleStepWarning", "acceptance_fell",
           "describe_sampler", "BLOCKS", "THRESHOLD", "States", "states",
           "SPECIALIST_THRESHOLD", "Specialists", "specialists"]
