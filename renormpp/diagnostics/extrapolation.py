"""Finite-size scaling: a weighted straight-line fit and its value at x = 0 (e.g. N1 -> infinity)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Extrapolation:
    """A straight-line fit y = ``intercept`` + ``slope`` x by weighted least squares, with the parameters' standard
    errors (scaled by sqrt(chi2/dof) where that exceeds 1, as is usual), ``chi2_dof``, and ``n`` points."""

    intercept: float
    intercept_error: float
    slope: float
    slope_error: float
    chi2_dof: float
    n: int


def extrapolate(x, y, error) -> Extrapolation:
    """Fit :math:`y = a + b x` to points with standard errors ``error`` and extrapolate to x = 0 (e.g. the deviation
    of the sampled finite networks from a theory against 1/N1: ``a`` is its value in the limit N1 -> infinity).

    Parameters
    ----------
    x : array_like
        The abscissae, e.g. 1/N1.
    y : array_like
        The values.
    error : array_like
        Their standard errors.

    Returns
    -------
    Extrapolation
        ``intercept`` (the value at x = 0) and ``slope`` with their errors, and ``chi2_dof``.
    """
    x, y, error = (np.asarray(v, dtype=float) for v in (x, y, error))
    ok = np.isfinite(x) & np.isfinite(y) & np.isfinite(error) & (error > 0)
    x, y, error = x[ok], y[ok], error[ok]
    if len(x) < 2:
        nan = float("nan")
        return Extrapolation(nan, nan, nan, nan, nan, int(len(x)))
    A = np.stack([np.ones_like(x), x], axis=1) / error[:, None]
    coef, *_ = np.linalg.lstsq(A, y / error, rcond=None)
    cov = np.linalg.inv(A.T @ A)
    dof = len(x) - 2
    chi2 = float(np.sum(((y - coef[0] - coef[1] * x) / error) ** 2))
    chi2_dof = chi2 / dof if dof > 0 else float("nan")
    scale = np.sqrt(max(chi2_dof, 1.0)) if dof > 0 else 1.0
    return Extrapolation(float(coef[0]), float(scale * np.sqrt(cov[0, 0])), float(coef[1]),
                         float(scale * np.sqrt(cov[1, 1])), chi2_dof, int(len(x)))
