"""Verification of a solve's field: new, independent populations moved to (F1) at the field, the residuals of the
field against their moments, and the jackknife error over the populations."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ... import kernels
from ..._checks import positive, positive_int
from ...progress import bar as progress_bar
from .equations import _field, _population_moments
from .langevin import _tilt_target
from .populations import Population, _renewed


def _jackknife(statistic, n: int) -> float:
    r"""The jackknife standard error (Efron & Stein, Ann. Stat. 9, 586 (1981)) of an array ``statistic(keep)`` of
    ``n`` independent parts (``keep``: a boolean mask of the parts it is computed from), in the Frobenius norm:
    :math:`\sqrt{\tfrac{n-1}{n}\sum_j \|\theta_{(-j)} - \bar\theta_{(\cdot)}\|^2}`; for a mean it is the
    standard error of the mean."""
    out = np.stack([statistic(np.arange(n) != j) for j in range(n)])
    return float(np.sqrt((n - 1) / n * np.sum((out - out.mean(axis=0)) ** 2)))


@dataclass(frozen=True)
class Verification:
    """:meth:`SharedFieldFit.verify`'s answer: the residuals of the field, (m, Sigma) in the solve's norms, against
    (F2)'s moments of ``populations`` new populations of ``neurons`` neurons moved ``moves`` steps to (F1), their
    Monte Carlo errors (jackknife), ``tol``, and each population's mean log tilt of (F1) (``log_tilt``).
    ``verdict``: "a fixed point" (both residuals below tol, and their errors too), "not a fixed point" (a residual
    above tol by more than twice its error) or "undetermined" (raise populations)."""

    residuals: tuple
    errors: tuple
    populations: int
    neurons: int
    moves: int
    tol: float
    log_tilt: tuple = ()

    @property
    def verdict(self) -> str:
        """"a fixed point", "not a fixed point" or "undetermined"."""
        if max(self.residuals) < self.tol and max(self.errors) < self.tol:
            return "a fixed point"
        if any(r - 2 * e >= self.tol for r, e in zip(self.residuals, self.errors)):
            return "not a fixed point"
        return "undetermined"

    def __str__(self) -> str:
        (rm, rS), (em, eS) = self.residuals, self.errors
        undetermined = self.verdict == "undetermined"
        return (f"{'undetermined whether a fixed point' if undetermined else self.verdict} of (F1)'s law (tol "
                f"{self.tol:g}): residuals {rm:.3g} +- {em:.2g} (m), {rS:.3g} +- {eS:.2g} (Sigma) against "
                f"{self.populations} new populations of {self.neurons} neurons, {self.moves} Langevin steps each"
                + ("; more populations lower the errors" if undetermined else ""))


def _verify(fit, populations: int, moves: int, seed: int | None, tol: float | None, progress: bool) -> Verification:
    """:meth:`SharedFieldFit.verify`: ``populations`` new populations at the field of ``fit``, each moved ``moves``
    steps (:func:`_renewed`), and the field's residuals against their moments with the jackknife error."""
    populations, moves = positive_int("populations", populations), positive_int("moves", moves)
    if populations < 2:
        raise ValueError(f"populations must be 2 or more (their spread is the Monte Carlo error); got {populations}")
    tol = 1e-2 if tol is None else positive("tol", tol)
    law, c = fit.proposal, fit.lambda1 * fit.N1
    gauss = law.proposal if isinstance(law, Population) else law
    target = _tilt_target(fit.X, fit.activation, fit.lambda0, c)
    K = kernels.nngp(fit.X, lambda0=fit.lambda0, activation=fit.activation)
    rng = np.random.default_rng([fit.seed if seed is None else seed, 3])
    moments, tilts, h = [], [], 0.5
    bar = progress_bar(total=populations, desc="verify", unit="population", disable=not progress)
    for _ in range(populations):
        g, xi, _, _, h = _renewed(gauss, fit.m, fit.Sigma, target, moves, rng, h, X=fit.X,
                                   activation=fit.activation, lambda0=fit.lambda0, c=c)
        *LWC, log_tilt = _population_moments(replace(g, noise=xi).draw(fit.lambda0)[0], fit.X, fit.activation,
                                             fit.m, fit.Sigma, c, K, fit.N1, fit.T)
        moments.append(LWC)
        tilts.append(float(log_tilt.mean()))
        bar.update()
    bar.close()
    L_W, L_C = (np.stack([mo[i] for mo in moments]) for i in (0, 1))
    m_vec, eye = fit.m.T.reshape(-1), np.eye(fit.Y.size)
    errors = (_jackknife(lambda keep: L_C[keep].mean(axis=0) @ m_vec, populations) / np.linalg.norm(fit.Y),
              _jackknife(lambda keep: np.linalg.inv(fit.T * eye + L_W[keep].mean(axis=0)), populations)
              / np.linalg.norm(fit.Sigma))
    res = _field(L_W.mean(axis=0), L_C.mean(axis=0), fit.m, fit.Sigma, fit.Y, fit.T)[2]
    return Verification(residuals=tuple(map(float, res)), errors=tuple(map(float, errors)),
                        populations=populations, neurons=len(gauss.noise), moves=moves, tol=tol,
                        log_tilt=tuple(tilts))
