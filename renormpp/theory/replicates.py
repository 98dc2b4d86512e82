r"""Independent replicates of a sampled theory: its predictions averaged, and its own Monte Carlo error measured from
their spread, whatever its source.

A theory that samples (``shared_field``, ``specialists``, ``field_specialists``) moves with its seed through more than
the draws it averages over: its fixed point is itself reached by a stochastic iteration (the bulk's population, the
field stepped towards noisy moments). On the hyperplane problem (tests/hyperplane.py, N1 = 6, T = 0.05) the
shared field's ε_g moved by 1.3% (standard deviation over 4 seeds) where the 16 populations its predictions average
over account for 0.5%, and a fit's ``monte_carlo_error`` from its own draws sees none of it. R replicates, solves
with the seeds ``seed``, ``seed + 1``, ..., ``seed + R - 1``, measure it:

.. math::
    \bar\Gamma = \frac1R\sum_r \Gamma_r,\qquad \bar\Sigma = \frac1R\sum_r\Sigma_r,\qquad
    \delta\epsilon_g = \frac{s_R(\epsilon_{g,r})}{\sqrt R},                                            \tag{R1}

the predictions' mean and covariance the replicates' averages (their spread is the theory's noise, not the
posterior's variance) and the error of ε_g and of each overlap the standard deviation of the replicates' values
(ddof = 1) over :math:`\sqrt R`, an estimate with R - 1 degrees of freedom.

The noise of a predictive mean does not average out of ε_g: it adds its variance to :math:`\|y_0 - \Gamma\|^2`,
so that a single solve's ε_g is high by the variance of its mean (on the hyperplane problem about 1.5% of ε_g, the
size of its seed-to-seed spread), and the averaged mean's by that variance over R. The replicates measure it,
:math:`s^2(x_0) = \sum_r\|\Gamma_r - \bar\Gamma\|^2/(R-1)`, and remove it:

.. math::
    \epsilon_g = \Big\langle \|y_0 - \bar\Gamma\|^2 + \operatorname{Tr}\bar\Sigma
        - \frac{s^2(x_0)}{R}\Big\rangle_{x_0},                                                      \tag{R2}

unbiased where the replicates' means scatter independently about the theory's (it is also the replicates' mean ε_g
less :math:`\langle s^2\rangle`). The noise within one solve (the populations its predictions average over) stays in
each replicate's ε_g and so in (R2); its error is the replicates' spread as above. ``rp.theory.solve(...,
replicates=R)`` and ``spec.theory(name, replicates=R)`` give one for any sampled record of
:data:`renormpp.theory.THEORIES`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .prediction import FitShape, Prediction

__all__ = ["Replicates"]


@dataclass(frozen=True, eq=False)
class Replicates(FitShape):
    """R independent solves of one sampled theory, ``fits`` (their seeds ``seeds``), as one fit with the protocol of
    every fit (:data:`renormpp.theory.PROTOCOL`): the predictions (R1) and the error from the replicates' spread.
    What the replicates share (the network, the method, its variant) is read from the first.

    Attributes
    ----------
    fits : tuple
        The replicates' fits.
    seeds : tuple of int
        Their seeds.
    """

    fits: tuple
    seeds: tuple
    _cache: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        if len(self.fits) < 2:
            raise ValueError(f"replicates need at least 2 fits to measure their spread; got {len(self.fits)}")

    def __getattr__(self, name):  # the network, the method, the variant: the replicates share them
        if name.startswith("_") or name == "fits":
            raise AttributeError(name)
        return getattr(self.fits[0], name)

    def __repr__(self) -> str:
        return (f"Replicates(method={self.method!r}, {self.variant}, seeds={list(self.seeds)}, N1={self.N1:g}, "
                f"T={self.T:g}, converged={self.converged})")

    @property
    def variant(self) -> str:
        """What tells this fit apart in a comparison: the replicates' variant and their number, ``k=2, R=4``."""
        inner = getattr(self.fits[0], "variant", "")
        return f"{inner}, R={len(self.fits)}" if inner else f"R={len(self.fits)}"

    @property
    def converged(self) -> bool:
        """Whether every replicate converged."""
        return all(f.converged for f in self.fits)

    @property
    def reason(self) -> str:
        """Why the replicates do not hold (each one's reason, with its seed); "" where all converged."""
        return "; ".join(f"seed {s}: {f.reason}" for s, f in zip(self.seeds, self.fits) if not f.converged)

    @property
    def draws(self) -> int:
        """The draws of all replicates together."""
        return sum(f.draws for f in self.fits)

    @property
    def Q(self) -> np.ndarray:
        """The replicates' mean order parameter (D, D)."""
        return np.mean([f.Q for f in self.fits], axis=0)

    @property
    def readout_overlap(self) -> np.ndarray:
        r""":math:`\langle vv^\top\rangle/N_1` (D, D): the replicates' mean."""
        return np.mean([f.readout_overlap for f in self.fits], axis=0)

    def _predictions(self, X0) -> list:
        """Each replicate's prediction at ``X0`` (kept for the last test inputs: the error and ε_g both need them)."""
        X0 = self._test_inputs(X0)
        key = (X0.shape, hash(X0.tobytes()))
        if self._cache.get("key") != key:
            self._cache.clear()
            self._cache.update(key=key, predictions=[f.predict(X0) for f in self.fits])
        return self._cache["predictions"]

    def predict(self, X0) -> Prediction:
        """The mean (P0, D) and covariance (P0, D, D) of f at ``X0``: the replicates' averages (R1).

        Raises
        ------
        RuntimeError
            Where a replicate did not converge.
        """
        if not self.converged:
            raise RuntimeError(f"these replicates did not all converge ({self.reason}); their predictions would mean "
                               "nothing")
        preds = self._predictions(X0)
        return Prediction(mean=np.mean([p.mean for p in preds], axis=0), cov=np.mean([p.cov for p in preds], axis=0))

    def generalization_error(self, X0, Y0) -> float:
        """ε_g (R2): that of the averaged prediction less the variance of its mean, which the replicates' spread
        measures (see the module)."""
        preds = self._predictions(X0)
        R = len(preds)
        spread = np.sum(np.var([p.mean for p in preds], axis=0, ddof=1), axis=-1)  # s^2(x0), summed over outputs
        return float(super().generalization_error(X0, Y0) - np.mean(spread) / R)

    def eps_g_per_replicate(self, X0, Y0) -> np.ndarray:
        """ε_g of each replicate (R,)."""
        X0 = self._test_inputs(X0)
        Y0 = np.asarray(Y0, np.float64).reshape(len(X0), -1)
        return np.array([np.mean(np.sum((Y0 - p.mean) ** 2, axis=1) + p.var.sum(axis=1))
                         for p in self._predictions(X0)])

    def monte_carlo_error(self, X0, Y0) -> dict:
        """The theory's own error of ε_g and of the overlaps (D, D), from the replicates' spread (R1): every source
        of noise of a solve, its fixed point's included."""
        R = len(self.fits)
        ov = np.array([f.readout_overlap for f in self.fits])
        return dict(eps_g=float(np.std(self.eps_g_per_replicate(X0, Y0), ddof=1) / np.sqrt(R)),
                    overlap=np.std(ov, axis=0, ddof=1) / np.sqrt(R))
