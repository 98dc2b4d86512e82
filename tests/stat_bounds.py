"""Margins that statistical tests earn from their own error estimates (issue 44, item 2).

A statistical test compares numbers that carry errors (Monte Carlo means with their Gamma-method errors, a theory
with none). Its threshold is not a round number chosen by eye but the bound that a family of ``n`` comparisons
exceeds with probability :data:`FALSE_ALARM` on correct code, if the errors are right (Bonferroni over the family,
two-sided normal tails). A test's docstring records how often it failed over several seeds on correct code and that
it fails on a planted bug.
"""
from __future__ import annotations

import numpy as np
from scipy.stats import chi2, norm

#: the rate at which one statistical test may fail on correct code, when its errors are right
FALSE_ALARM = 1e-4


def z_bound(n: int = 1, false_alarm: float = FALSE_ALARM) -> float:
    """The |z| that any of ``n`` independent standard normals exceeds with probability ``false_alarm`` (at most):
    ``norm.isf(false_alarm / (2 n))``. 3.89 for one comparison, 4.42 for 10, 4.75 for 50."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    return float(norm.isf(false_alarm / (2 * n)))


def assert_z_within(z, n: int | None = None, false_alarm: float = FALSE_ALARM, what: str = "") -> float:
    """Assert that every entry of ``z`` (z-scores of a family; ``n`` entries unless given) lies within
    :func:`z_bound`; returns the bound. The message names the worst entry."""
    z = np.atleast_1d(np.asarray(z, dtype=float))
    if not np.all(np.isfinite(z)):
        raise AssertionError(f"{what}: non-finite z-scores {z}")
    bound = z_bound(n or z.size, false_alarm)
    worst = int(np.argmax(np.abs(z)))
    assert np.abs(z[worst]) < bound, (f"{what}: |z| = {abs(z[worst]):.2f} at entry {worst} exceeds the bound "
                                     f"{bound:.2f} (false-alarm rate {false_alarm:g} over {n or z.size})")
    return bound


def homogeneity_p(means, errors) -> float:
    """p-value of the hypothesis that independent estimates ``means`` (with standard errors ``errors``) share one
    value: the chi-square of their deviations from the inverse-variance weighted mean, ``len(means) - 1`` degrees
    of freedom."""
    m, e = np.asarray(means, dtype=float), np.asarray(errors, dtype=float)
    if m.shape != e.shape or m.size < 2 or np.any(e <= 0) or not np.all(np.isfinite(m)):
        raise ValueError(f"need two or more finite means with positive errors; got {m} +- {e}")
    w = 1 / e**2
    mean = np.sum(w * m) / np.sum(w)
    return float(chi2.sf(np.sum(w * (m - mean) ** 2), m.size - 1))
