"""What the samplers of :mod:`renormpp.infer` warn about: a divergent step, a frozen chain, a noisy potential and
ULA's bias.

* A step whose potential or gradient is NaN or inf is rejected (the chain stays where it was), flagged, counted, and
  reported once per chain by :func:`warn_divergence` (from a host callback), naming the step size.
* A Metropolis-adjusted chain that hardly accepts its moves is frozen: its draws are its start, not the posterior.
  After :data:`ACCEPT_CHECK_FIRST`, twice as many, ... draws past the warmup (:func:`acceptance_check_due`), every
  chain's mean acceptance since the warmup is compared with :data:`MIN_ACCEPT_PROB` (the same threshold as
  ``renormpp run``'s health check, :func:`renormpp.diagnostics.sampler_health`), and :func:`warn_low_acceptance`
  names the chains below it.
* A potential whose rounding noise is comparable to the energy changes the Metropolis test weighs: the test then
  tests the noise, the warmup shrinks the step without raising the acceptance, and the chains stand still (a float32
  cancellation in :func:`renormpp.readout.log_marginal_of` does this at P = 1000). At the first draw after
  the warmup, :func:`potential_noise` measures the noise along a short line through every chain's position and
  :func:`warn_noisy_potential` names the chains where it is above :data:`NOISE_BOUND`.
* ULA's step is flagged as biased above ``ULA_BIAS_BOUND / max_curvature`` (:func:`check_ula_step`): on a Gaussian,
  its stationary variance along the stiffest direction is then off by more than ULA_BIAS_BOUND / 2 (5%).
"""
from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np

from ..mcmc import base

#: ULA's step is flagged as biased above ``ULA_BIAS_BOUND / max_curvature``
ULA_BIAS_BOUND = 0.1
MIN_ACCEPT_PROB = base.MIN_ACCEPT_PROB
#: the rounding noise of the potential (energy units, one standard deviation) above which the chains are warned about:
#: a Metropolis test sees a noise of 0.25 in dH as a change of up to ~25% in its acceptance probabilities
NOISE_BOUND = 0.25
#: the line of :func:`potential_noise`: its points, and its half-length per coordinate relative to the position's rms
NOISE_POINTS, NOISE_REACH = 9, 1e-3
#: the first post-warmup draw at which the acceptance is checked; then at twice as many draws, and so on
ACCEPT_CHECK_FIRST = 50


class LowAcceptanceWarning(RuntimeWarning):
    """A Metropolis-adjusted chain accepts almost none of its moves: it is frozen, and its draws are not the
    posterior."""


class NoisyPotentialWarning(RuntimeWarning):
    """The potential's rounding noise is as large as the energy changes the Metropolis test weighs: the test accepts
    and rejects at random, and the chains can stand still with a shrinking step."""


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


def potential_noise(U, q):
    r"""The rounding noise of the potential ``U`` near the flat position ``q``: the residual standard deviation of a
    quadratic fitted to :math:`U(q + t\,d)` at :data:`NOISE_POINTS` values of :math:`t \in [-1, 1]`, along a fixed
    sign vector :math:`d` of per-coordinate length :data:`NOISE_REACH` times the rms of ``q`` (at least 1e-3).

    In exact arithmetic the residual is the cubic term, of order :math:`|d|^3` times U's third derivative, far below
    any noise that matters; what remains is the error of evaluating U in the sampler's precision (in float32 about
    1e-7 of |U| for a well-posed sum, far more where U is a difference of large numbers).

    The points t are fixed, so the residual is a fixed projection of the values (:data:`_RESIDUAL`, computed once in
    float64): no least-squares solve in the compiled sampler (it cost a fifth of a block's compilation)."""
    n = q.shape[-1]
    d = jax.random.rademacher(jax.random.PRNGKey(0), (n,), q.dtype)
    d = d * NOISE_REACH * jnp.maximum(jnp.sqrt(jnp.mean(q**2)), 1e-3)
    u = jax.vmap(lambda s: U(q + s * d))(jnp.asarray(_T, q.dtype))
    r = jnp.asarray(_RESIDUAL, q.dtype) @ (u - u[NOISE_POINTS // 2])
    return jnp.sqrt(jnp.sum(r**2) / (NOISE_POINTS - 3))


def _residual_projection(t):
    """The matrix that maps values at the points ``t`` to their residual from the least-squares quadratic."""
    V = np.stack([np.ones_like(t), t, t**2], axis=1)
    return np.eye(len(t)) - V @ np.linalg.pinv(V)


_T = np.linspace(-1.0, 1.0, NOISE_POINTS)
_RESIDUAL = _residual_projection(_T)


def warn_noisy_potential(noise, step_size):
    """Host callback: the chains whose potential's rounding noise (:func:`potential_noise`) is above
    :data:`NOISE_BOUND`."""
    noise = np.atleast_1d(np.asarray(noise, dtype=float))
    loud = [c for c, x in enumerate(noise) if not x <= NOISE_BOUND]
    if loud:
        warnings.warn(
            f"Langevin: the potential's rounding noise at the end of the warmup is "
            f"{', '.join(f'{noise[c]:.3g}' for c in loud)} in chain(s) {loud} (above {NOISE_BOUND}, in energy units; "
            f"step_size={float(np.max(step_size)):.3g}): the Metropolis test weighs noise, so the acceptance does not "
            "follow the step and the chains may stand still. The potential is computed in too low a precision for "
            "its size: run in float64 (jax.config.update('jax_enable_x64', True) before building the model), or "
            "compute it in a form without cancellation (a sum of squares rather than a difference of large numbers). "
            "On a GPU, products at reduced precision (TF32, XLA's default on Ampere and Hopper) do the same: "
            "renormpp's samplers compute theirs at full float32 precision; a potential or observables of your own "
            "traced elsewhere need renormpp.infer.full_precision() (or jax.default_matmul_precision('highest')).",
            NoisyPotentialWarning, stacklevel=2)


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
