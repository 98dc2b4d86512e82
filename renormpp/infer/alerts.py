"""What the samplers of :mod:`renormpp.infer` warn about: a divergent step, a frozen chain and ULA's bias.

* A step whose potential or gradient is NaN or inf is rejected (the chain stays where it was), flagged, counted, and
  reported once per chain by :func:`warn_divergence` (from a host callback), naming the step size.
* A Metropolis-adjusted chain that hardly accepts its moves is frozen: its draws are its start, not the posterior.
  After :data:`ACCEPT_CHECK_FIRST`, twice as many, ... draws past the warmup (:func:`acceptance_check_due`), every
  chain's mean acceptance since the warmup is compared with :data:`MIN_ACCEPT_PROB` (the same threshold as
  ``renormpp run``'s health check, :func:`renormpp.diagnostics.sampler_health`), and :func:`warn_low_acceptance`
  names the chains below it.
* ULA's step is flagged as biased above ``ULA_BIAS_BOUND / max_curvature`` (:func:`check_ula_step`): on a Gaussian,
  its stationary variance along the stiffest direction is then off by more than ULA_BIAS_BOUND / 2 (5%).
"""
from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np

from ..mcmc import base

#: ULA's step is flagged as biased above ``ULA_BIAS_BOUND / max_curvature``
ULA_BIAS_BOUND = 0.1
MIN_ACCEPT_PROB = base.MIN_ACCEPT_PROB
#: the first post-warmup draw at which the acceptance is checked; then at twice as many draws, and so on
ACCEPT_CHECK_FIRST = 50


class LowAcceptanceWarning(RuntimeWarning):
    """A Metropolis-adjusted chain accepts almost none of its moves: it is frozen, and its draws are not the
    posterior."""


class ULABiasWarning(RuntimeWarning):
    """ULA's step is large against the curvature of the potential: its draws are biased, and their error bars do not
    show it."""


def warn_divergence(first, total, step_size):
    """Host callback: some chain made its first divergent step (``first``, per chain; ``total`` so far)."""
    first = np.atleast_1d(np.asarray(first))
    if first.any():
        warnings.warn(
            f"Langevin: a step with step_size={float(np.max(step_size)):.3g} gave a NaN or inf potential or gradient "
            f"({int(np.max(total))} so far in one chain); the step was rejected and the chain kept its last "
            "finite state. Reduce step_size (ULA needs h well below 2 / the largest curvature of U).",
            RuntimeWarning,
            stacklevel=2,
        )


def acceptance_check_due(n):
    """Whether ``n`` draws after the warmup is a check of the acceptance: 50, 100, 200, 400, ..."""
    check = (n >= ACCEPT_CHECK_FIRST) & (n % ACCEPT_CHECK_FIRST == 0)
    return check & (jnp.bitwise_and(n // ACCEPT_CHECK_FIRST, n // ACCEPT_CHECK_FIRST - 1) == 0)  # a power of two


def warn_low_acceptance(n, mean_accept_prob, step_size):
    """Host callback: the chains whose mean acceptance over the ``n`` draws since the warmup is below
    :data:`MIN_ACCEPT_PROB`."""
    acc = np.atleast_1d(np.asarray(mean_accept_prob, dtype=float))
    low = [c for c, a in enumerate(acc) if a < MIN_ACCEPT_PROB]
    warnings.warn(
        f"Langevin: chain(s) {low} accepted {', '.join(f'{acc[c]:.3f}' for c in low)} of their moves on average over "
        f"the {int(n)} draws since the warmup (below {MIN_ACCEPT_PROB}) at step_size={float(np.max(step_size)):.3g}: "
        "the chain is frozen and its draws are not the posterior. Reduce step_size, or let the warmup tune it "
        "(num_warmup > 0 with adapt_step_size=True).", LowAcceptanceWarning, stacklevel=2)


def check_ula_step(step_size: float, curvature: float) -> None:
    """Warn when ULA's step is above the documented bound ULA_BIAS_BOUND / max_curvature (at the start)."""
    h_lambda = step_size * curvature
    if h_lambda > ULA_BIAS_BOUND:
        effect = (f"its stationary variance along that direction is off by about {h_lambda / 2:.0%} (exact for a "
                  "Gaussian)" if h_lambda < 2 else "it is unstable along that direction (h*curvature >= 2)")
        warnings.warn(
            f"ULA with step_size={step_size:.3g} is biased: the potential's largest curvature at the start is "
            f"{curvature:.3g}, so h*curvature = {h_lambda:.2g} and {effect}; the error bars of its draws do "
            f"not show this. Use step_size <= {ULA_BIAS_BOUND / curvature:.2g} (h*curvature <= "
            f"{ULA_BIAS_BOUND}), or an exact sampler: adjust=True (MALA) or KineticLangevin.",
            ULABiasWarning, stacklevel=4)
