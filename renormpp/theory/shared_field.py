r"""The shared-field theory: one Gaussian field shared by all neurons, each neuron's law exact (issue 46, item 2).

Where kernel-shape renormalization fails (MNIST at α ≥ 1, docs/validity.md) the finite network's hidden kernel adapts
in directions the D x D order parameter cannot reach. This theory keeps each neuron's law exact and makes only the
field that couples the neurons Gaussian.

**The field.** With the readout integrated out, :math:`p(Y\mid W) = \int d\bar f\, \exp\big(i\,{\rm tr}\,\bar f^\top Y
- \tfrac T2\|\bar f\|^2\big) \prod_i \exp\big(-\|\bar f^\top s_i\|^2/(2c)\big)` with :math:`c = \lambda_1 N_1`,
:math:`s_i = \sigma(X w_i/\sqrt{N_0})` (P) and :math:`\bar f` (P x D) the field conjugate to the predictions, one
field for all neurons. Take it Gaussian, :math:`\bar f = i\,m + g` with g of covariance :math:`\Sigma`
(:math:`PD\times PD`, output-major). Given w, :math:`g^\top s(w)` is Gaussian with covariance
:math:`q(w)_{ab} = s^\top\Sigma_{ab}\,s` (D x D: the neuron's own bulk) and :math:`z(w) = m^\top s(w)` is its spike,
so one neuron's law is the cavity law (S3) of :mod:`.single_neuron` with these:

.. math::
    p(w) \propto \mathcal N(w; 0, 1/\lambda_0)\,\det(1 + q/c)^{-1/2}\exp\big(\tfrac12 z^\top (c + q)^{-1} z\big). \tag{F1}

**Stationarity** of the field, with :math:`y = (c+q)^{-1}z` and :math:`E` the average over (F1):

.. math::
    \Sigma^{-1} = T + N_1 E\big[\big((c+q)^{-1} + y y^\top\big)\otimes s s^\top\big],\qquad
    T\,m + N_1 E[s\,y^\top] = Y.                                                                      \tag{F2}

**Predictions** at a test input :math:`x_*` (:math:`s_* = s(w; x_*)`): the mean :math:`\Gamma_a = N_1 E[s_*\,y_a]`
and, from :math:`-\partial_j^2\log Z` with a source j at :math:`x_*` (the response of m to it included),

.. math::
    \Sigma_{*ab} = N_1 E[(c+q)^{-1}_{ab}s_*^2] + N_1 E[s_*^2 y_a y_b] - N_1 E[s_* y_a]E[s_* y_b]
        - N_1^2\, n_a^\top (T + N_1 L)^{-1} n_b,                                                        \tag{F3}

:math:`L = E[((c+q)^{-1} + yy^\top)\otimes ss^\top] - E[y\otimes s]E[y\otimes s]^\top`,
:math:`(n_a)_b = E[((c+q)^{-1}_{ab} + y_a y_b)\,s_*\,s] - E[s_* y_a]E[y_b\,s]`.
For a linear activation (Gaussian s, q at its mean) (F1)-(F3) reproduce the exact theory, which is exact for linear
networks (checked in closed form by ``benchmarks/shared_field_theory.py``: 0.05-1% at MNIST P = 200).

**How it is computed.** The averages over (F1) reweight a fixed sample of M prior neurons (importance sampling, the
weights :math:`\rho \propto` the tilt of (F1)), with the exact NNGP kernel as control variate
(:math:`E[\rho\,W\,ss^\top] \approx \overline{\rho W ss^\top} - \overline{\rho W}\,(\overline{ss^\top} - K)`),
so that at infinite width (ρ = 1) the theory is the NNGP posterior exactly, for any M. (F2) is iterated with
damping from the exact theory's field (or from a neighbouring width's fit: continuation in α); the residuals of every
iteration are kept. It does not converge where the reweighted prior sample degenerates (effective sample size below
``min_ess``: the tilt has moved the neurons far from the prior, MNIST at α ≥ 3 with M = 10 000) or where the
iteration does not settle; :attr:`SharedFieldFit.reason` says which.

Cost: :math:`O(M P^2 D^2)` per iteration and :math:`O((PD)^3)` for the inverse of (F2); at D = 2 and M = 10 000
about 3.5 s per iteration at P = 1000 on 2 cores (benchmarks/README.md, "shared_field_theory.py").

Measured (MNIST (0, 1), P = 200, docs/validity.md, "A third theory"): within the sampled network's error bar at
α = 0.5 and 1 (the exact theory 3% and 9% off), two thirds of the exact theory's gap at α = 2 (+19% left); no
convergence from α = 2.5 (P = 200) and α = 4 (P = 1000) on, where the reweighted prior neurons degenerate.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import kernels
from .._checks import data_pair, positive, positive_int
from ..network import get_activation
from .fit import solve as solve_exact
from .prediction import FitShape, Prediction
from .single_neuron import features


@dataclass(eq=False)
class SharedFieldFit(FitShape):
    """A solve of (F1)-(F2): the field's mean ``m`` (P, D) and covariance ``Sigma`` (PD x PD, output-major), the
    residuals of every iteration (``residuals``: rows (|T m + N1 E[s y^T] - Y| / |Y|, |dSigma| / |Sigma|)), the
    effective sample size ``ess`` of the reweighted prior neurons, and whether it converged (``reason`` says why
    not). ``predict`` and ``generalization_error`` as every fit's (F3)."""

    X: np.ndarray
    Y: np.ndarray
    N1: float
    T: float
    lambda1: float
    lambda0: float
    activation: str
    m: np.ndarray
    Sigma: np.ndarray
    residuals: np.ndarray
    ess: float
    converged: bool
    reason: str
    weights: np.ndarray = field(repr=False)  # the M prior neurons (M, N0)
    seed: int = 0

    @property
    def D(self) -> int:
        return self.Y.shape[1]

    @property
    def n_iter(self) -> int:
        return len(self.residuals)

    def __repr__(self) -> str:
        state = "converged" if self.converged else f"did not converge: {self.reason}"
        return (f"SharedFieldFit(N1={self.N1:g}, alpha={self.alpha:.3g}, D={self.D}, {state}, "
                f"{self.n_iter} iterations, ESS {self.ess:.0f} of {len(self.weights)})")

    def _law(self):
        """The M prior neurons' features, their (F1) weights and the per-neuron D x D terms at this fit's field."""
        s = features(self.weights, self.X, self.activation).T
        return (s, *_per_neuron(s, self.m, self.Sigma, self.lambda1 * self.N1))

    def predict(self, X0) -> Prediction:
        """Mean (P0, D) and covariance (P0, D, D) of the outputs at the rows of ``X0``, (F3)."""
        if not self.converged:
            raise RuntimeError(f"this fit did not converge ({self.reason}); its predictions would mean nothing. "
                               "Continue from a converged neighbour (init=) or raise neurons")
        X0 = self._test_inputs(X0)
        s, C, y, rho, _ = self._law()
        M, P, D, N1 = len(rho), self.P, self.D, self.N1
        act = dict(lambda0=self.lambda0, activation=self.activation)
        dK = s.T @ s / M - kernels.nngp(self.X, **act)
        sx = features(self.weights, X0, self.activation).T
        dKx = sx.T @ s / M - kernels.nngp(X0, self.X, **act)
        dKxx = np.mean(sx**2, axis=0) - kernels.nngp_diag(X0, **act)
        W = C + np.einsum("ma,mb->mab", y, y)
        L = _moment(s, s, rho, W, dK).reshape(P * D, P * D)
        Eys = ((rho[:, None] * y).T @ s).reshape(-1) / M  # E[y (x) s]
        L = self.T * np.eye(P * D) + N1 * (L - np.outer(Eys, Eys))
        Ey_sx = np.einsum("apbq,qb->pa", _moment(sx, s, rho, C, dKx), self.m)  # E[s* y_a] = E[C_ab s* s] m_b
        mean = N1 * Ey_sx
        rC, ryy = ((rho[:, None, None] * Z).reshape(M, D * D) for Z in (C, W - C))  # rho C, rho y y^T
        EC_s2 = ((sx**2).T @ rC - rC.sum(axis=0)[None] * dKxx[:, None]).reshape(-1, D, D) / M
        Eyy_s2 = ((sx**2).T @ ryy).reshape(-1, D, D) / M
        n = _moment(sx, s, rho, W, dKx) - np.einsum("pa,bq->apbq", Ey_sx, Eys.reshape(D, P))  # (D, P0, D, P)
        n = np.moveaxis(n, 1, 0).reshape(len(X0), D, P * D)  # (P0, a, (b, mu))
        Linv_n = np.linalg.solve(L, n.reshape(-1, P * D).T).T.reshape(n.shape)
        cov = (N1 * (EC_s2 + Eyy_s2) - N1 * np.einsum("pa,pb->pab", Ey_sx, Ey_sx)
               - N1**2 * np.einsum("pak,pbk->pab", n, Linv_n))
        return Prediction(mean=mean, cov=0.5 * (cov + np.swapaxes(cov, 1, 2)))


def _per_neuron(s, m, Sigma, c):
    """(C, y, rho, tail) of the M neurons with features ``s`` (M, P): C = (c + q)^-1 (M, D, D), y = C z (M, D), the
    normalized (F1) weights rho (mean 1) and how far the largest log-weight lies above their median."""
    D, P = m.shape[1], m.shape[0]
    q = np.empty((len(s), D, D))
    for a in range(D):  # matrix products (an einsum over the three took 20x longer at P = 1000)
        for b in range(a, D):
            q[:, a, b] = q[:, b, a] = np.sum((s @ Sigma[a * P:(a + 1) * P, b * P:(b + 1) * P]) * s, axis=1)
    C = np.linalg.inv(c * np.eye(D) + q)
    z = s @ m
    y = np.einsum("mab,mb->ma", C, z)
    log_rho = -0.5 * np.linalg.slogdet(np.eye(D) + q / c)[1] + 0.5 * np.einsum("ma,ma->m", z, y)
    rho = np.exp(log_rho - log_rho.max())
    return C, y, rho / rho.mean(), float(log_rho.max() - np.median(log_rho))


def _moment(s1, s2, rho, W, dK):
    r""":math:`E[W_{ab}\, s_1 s_2^\top]` over (F1), (D, P1, D, P2), with the control variate ``dK`` (the prior
    sample's :math:`\overline{s_1 s_2^\top}` minus the exact NNGP kernel)."""
    M, D = len(rho), W.shape[1]
    out = np.empty((D, s1.shape[1], D, s2.shape[1]))
    for a in range(D):
        for b in range(D):
            rw = rho * W[:, a, b]
            out[a, :, b] = (s1 * rw[:, None]).T @ s2 / M - rw.mean() * dK
    return out


def solve(X, Y, *, N1: float, T: float, lambda1: float = 1.0, lambda0: float = 1.0, activation: str = "erf",
          neurons: int = 10_000, damping: float = 0.6, maxiter: int = 40, tol: float = 1e-5, min_ess: float = 100.0,
          init: SharedFieldFit | None = None, seed: int = 0) -> SharedFieldFit:
    """Solve (F2) for the shared field: damped fixed-point iterations (``damping`` of each step taken; Newton steps
    on m diverge), from the exact theory's field or from ``init`` (a fit at a neighbouring width: continuation in
    alpha, with its prior neurons), averages over (F1) from ``neurons`` prior neurons drawn with ``seed``. Converged
    where both residuals fall below ``tol``; it stops early, with ``converged`` False and the ``reason``, where the
    effective sample size falls below ``min_ess`` or a number stops being finite."""
    X, Y = data_pair(X, Y)
    N1, T = positive("N1", N1, "the hidden width"), positive("T", T, "the temperature")
    lambda1, lambda0 = positive("lambda1", lambda1), positive("lambda0", lambda0)
    neurons, maxiter = positive_int("neurons", neurons), positive_int("maxiter", maxiter)
    if not 0 < damping <= 1:
        raise ValueError(f"damping must be in (0, 1] (the share of each fixed-point step taken); got {damping}")
    activation = get_activation(activation).name
    P, D = Y.shape
    c = lambda1 * N1
    if init is not None:
        if init.X.shape != X.shape or not np.array_equal(init.X, X):
            raise ValueError("init is a fit on other training inputs; continue from a fit on the same X")
        m, Sigma, weights, seed = init.m.copy(), init.Sigma.copy(), init.weights, init.seed  # its neurons
    else:
        rng = np.random.default_rng(seed)
        weights = rng.standard_normal((neurons, X.shape[1])) / np.sqrt(lambda0)
        A0 = T * np.eye(P * D) + np.kron(np.atleast_2d(solve_exact(X, Y, N1=N1, T=T, lambda1=lambda1,
                                                                   lambda0=lambda0, activation=activation).Q),
                                         kernels.nngp(X, lambda0=lambda0, activation=activation)) / lambda1
        Sigma = np.linalg.inv(A0)
        m = np.linalg.solve(A0, Y.T.reshape(-1)).reshape(D, P).T
    s = features(weights, X, activation).T
    M = len(s)
    dK = s.T @ s / M - kernels.nngp(X, lambda0=lambda0, activation=activation)
    eye, y_vec = np.eye(P * D), Y.T.reshape(-1)
    residuals, reason, ess = [], "", float(M)
    for _ in range(maxiter):
        C, y, rho, tail = _per_neuron(s, m, Sigma, c)
        ess = float(M / np.mean(rho**2))
        if ess < min_ess:
            reason = (f"the reweighted prior neurons degenerate (effective sample size {ess:.0f} < min_ess = "
                      f"{min_ess:g}): the tilt of (F1) has moved the neurons far from the prior (the largest "
                      f"log-weight lies {tail:.1f} above the median: more neurons help only where that is a few "
                      "units); continue from a converged neighbouring width (init=) or raise neurons")
            break
        W = C + np.einsum("ma,mb->mab", y, y)
        Sigma_new = np.linalg.inv(T * eye + N1 * _moment(s, s, rho, W, dK).reshape(P * D, P * D))
        Sigma_new = 0.5 * (Sigma_new + Sigma_new.T)
        A1 = T * eye + N1 * _moment(s, s, rho, C, dK).reshape(P * D, P * D)
        m_vec = m.T.reshape(-1)
        res = (np.linalg.norm(A1 @ m_vec - y_vec) / np.linalg.norm(y_vec),
               np.linalg.norm(Sigma_new - Sigma) / np.linalg.norm(Sigma))
        if not np.all(np.isfinite(res)):
            reason = "the iteration produced a number that is not finite"
            break
        residuals.append(res)
        if max(res) < tol:
            break
        m = m - damping * (m_vec - np.linalg.solve(A1, y_vec)).reshape(D, P).T
        Sigma = (1 - damping) * Sigma + damping * Sigma_new
    else:
        reason = (f"the residuals {residuals[-1][0]:.2g}, {residuals[-1][1]:.2g} did not fall below tol = {tol:g} in "
                  f"{maxiter} iterations; raise maxiter or lower damping")
    return SharedFieldFit(X=X, Y=Y, N1=N1, T=T, lambda1=lambda1, lambda0=lambda0, activation=activation, m=m,
                          Sigma=Sigma, residuals=np.asarray(residuals).reshape(-1, 2), ess=ess,
                          converged=not reason, reason=reason, weights=weights, seed=seed)
