r"""Data sets of the paper (supplement, "Details on datasets for Bayesian experiments").

So far: the synthetic teachers. Every loader returns a :class:`Dataset`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import erf

TEACHERS = ("linear", "erf_1hl")


@dataclass(frozen=True)
class Dataset:
    """Train and test arrays (float64) plus what was chosen to make them."""

    X: np.ndarray
    Y: np.ndarray
    X_test: np.ndarray
    Y_test: np.ndarray
    name: str
    class_names: tuple = ()
    metadata: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        return (f"Dataset({self.name!r}, X={self.X.shape}, Y={self.Y.shape}, X_test={self.X_test.shape}, "
                f"Y_test={self.Y_test.shape}, metadata={self.metadata})")


def synthetic(P: int = 1000, P_test: int = 1000, N0: int = 144, D: int = 2, teacher: str = "linear",
              seed: int = 0, teacher_width: int = 1000) -> Dataset:
    r"""Gaussian inputs :math:`x \sim \mathcal N(0, \mathbb 1_{N_0})` with labels from a teacher.

    * ``"linear"``: :math:`y = W x/\sqrt{N_0}`, :math:`W \in \mathbb R^{D\times N_0}` standard normal
      (paper, Fig. 1a).
    * ``"erf_1hl"``: :math:`y_a = \frac{1}{\sqrt{N_1}}\sum_i v_{ia}\,\mathrm{erf}(w_i\cdot x/\sqrt{N_0})`
      with ``teacher_width`` = N1 = 1000 hidden units and standard normal w, v (supplement).

    Train and test come from the same teacher; everything is drawn from ``seed``.
    """
    for name, val in (("P", P), ("P_test", P_test), ("N0", N0), ("D", D), ("teacher_width", teacher_width)):
        if int(val) != val or val < 1:
            raise ValueError(f"{name} must be a positive integer; got {val!r}")
    if teacher not in TEACHERS:
        raise ValueError(f"unknown teacher {teacher!r}; choose one of {', '.join(map(repr, TEACHERS))}")
    rng = np.random.default_rng(seed)
    X_all = rng.standard_normal((P + P_test, N0))
    if teacher == "linear":
        W = rng.standard_normal((D, N0))
        Y_all = X_all @ W.T / np.sqrt(N0)
    else:
        w = rng.standard_normal((teacher_width, N0))
        v = rng.standard_normal((teacher_width, D))
        Y_all = erf(X_all @ w.T / np.sqrt(N0)) @ v / np.sqrt(teacher_width)
    meta = dict(P=P, P_test=P_test, N0=N0, D=D, teacher=teacher, seed=seed)
    if teacher == "erf_1hl":
        meta["teacher_width"] = teacher_width
    return Dataset(X=X_all[:P], Y=Y_all[:P], X_test=X_all[P:], Y_test=Y_all[P:], name=f"synthetic-{teacher}",
                   class_names=tuple(f"y{a}" for a in range(D)), metadata=meta)
