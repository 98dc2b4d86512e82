"""Importance weights of the neurons: their normalization, effective sample size, Pareto k and systematic
resampling, and the weights that carry the neurons to the prior for the control variate."""
from __future__ import annotations

import numpy as np

#: Pareto k of the importance weights down to which the proposal is fitted, and above which the averages are
#: unreliable (Vehtari, Simpson, Gelman, Yao & Gabry, JMLR 25, 72 (2024): k < 0.7 for a usable estimate): a field
#: that settles with k above it starts a new round
_K_FIT, _K_BAD = 0.5, 0.7


def _normalized(log_w):
    """Weights of mean 1 from their logs, and how far the largest log lies above the median."""
    rho = np.exp(log_w - log_w.max())
    return rho / rho.mean(), float(log_w.max() - np.median(log_w))


def _ess(log_w) -> float:
    """The effective sample size (Kish) of weights from their logs."""
    rho = np.exp(log_w - log_w.max())
    return float(rho.sum() ** 2 / np.sum(rho**2))


def pareto_k(log_w) -> float:
    """The Pareto k of importance weights: the shape of their upper tail (ArviZ's Pareto-smoothed importance sampling).

    Weights of tail exp(r x^2 / 2) on a unit Gaussian x have k = r, and a finite variance only below k = 1/2; their
    averages hold below k = 0.7.

    Parameters
    ----------
    log_w : array_like
        The logs of the weights, up to a constant.

    Returns
    -------
    float
        The tail's shape k: 0 for equal weights, and where the largest weights all equal (a bounded tail); infinite
        where one weight holds nearly all of them (ArviZ's fit of the tail gives NaN there).
    """
    from arviz_stats.base import array_stats

    log_w = np.asarray(log_w, dtype=float)
    if np.ptp(log_w) <= 1e-12 * max(1.0, np.abs(log_w).max()):  # equal weights (neurons drawn from the law itself)
        return 0.0
    try:
        k = float(array_stats.psislw(-log_w, 1.0)[1])
    except ValueError as err:  # the largest weights all equal: a bounded tail
        if "tail values are the same" not in str(err):
            raise
        return 0.0
    return np.inf if np.isnan(k) else k


def _control_weights(log_w0):
    """The weights rho0 (mean 1) that carry the neurons to the prior for the control variate (:func:`_control`), from
    their logs; None where they are unreliable: a Pareto k above 0.7, or an effective sample size below half the
    neurons (the proposal's own standard of good weights). From (F1) to the prior they degenerate where the tilt is
    strong: on MNIST P = 200 at α = 10, ESS 1-200 of 4000 and k up to 9, the sample's "kernel" off by 2-4 times the
    norm of the exact one (0.03-0.09 where the weights are good), and T + L_W of (F2) indefinite (its smallest
    eigenvalue down to -1.7e5): the field's covariance blew up and the solve wandered. There the plain averages,
    without the control, are taken."""
    return None if _ess(log_w0) < len(log_w0) / 2 or not pareto_k(log_w0) <= _K_BAD else _normalized(log_w0)[0]


def _resampled(log_w, rng) -> np.ndarray:
    """Indices of M neurons drawn in proportion to exp(log_w), systematically (one uniform for all: the least noise)."""
    rho = np.exp(log_w - log_w.max())
    edges = np.cumsum(rho / rho.sum())
    return np.minimum(np.searchsorted(edges, (rng.random() + np.arange(len(rho))) / len(rho)), len(rho) - 1)
