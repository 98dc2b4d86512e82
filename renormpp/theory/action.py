r"""The effective action of an odd activation in the kernel eigenbasis: its value, gradient and Hessian, the
minimization, and the predictive moments (see :mod:`renormpp.theory` for the equations).

With :math:`K = V\,\mathrm{diag}(k)\,V^\top` and :math:`\tilde y_\mu = Y^\top V_{:\mu}` the :math:`PD \times PD` system is
block diagonal, :math:`M_\mu(Q) = (T\,\mathbb 1_D + k_\mu Q/\lambda_1)^{-1}`, and with :math:`Q = U\,\mathrm{diag}(q)\,U^\top`
every :math:`M_\mu` is diagonal in :math:`U`: one evaluation of :math:`S` and :math:`\partial S/\partial Q` costs
:math:`O(D^3 + P D^2)` after one :math:`O(P^3)` eigendecomposition.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import numpy as np
import scipy.linalg
import scipy.optimize


class ConvergenceWarning(RuntimeWarning):
    """The minimization of the effective action stopped before the gradient vanished."""


# ----------------------------------------------------------------------------------------------
# the action in the kernel eigenbasis
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Spectrum:
    """Eigendecomposition of the train kernel, K = V diag(k) V^T, and the labels in that basis."""

    k: np.ndarray  # (P,) eigenvalues, clipped at 0
    V: np.ndarray  # (P, P) eigenvectors in columns
    Yt: np.ndarray  # (P, D) rotated labels, row mu is y~_mu = Y^T V[:, mu]
    #: the kernel quantities at test inputs, shared by the refits of this spectrum (TheoryFit.test_kernel): a sweep's
    #: theory curves evaluate the same test set at dozens of widths, and its kernel does not depend on the width
    test_kernels: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_kernel(cls, K: np.ndarray, Y: np.ndarray) -> "Spectrum":
        k, V = scipy.linalg.eigh(K, overwrite_a=True, check_finite=False, driver="evd")
        scale = max(float(np.max(np.abs(k))), np.finfo(float).tiny)
        if k[0] < -1e-8 * scale:
            warnings.warn(
                f"the kernel matrix has a negative eigenvalue {k[0]:.3g} (largest {scale:.3g}); it should be "
                "positive semi-definite. For a custom activation raise the quadrature order.",
                RuntimeWarning,
                stacklevel=3,
            )
        k = np.maximum(k, 0.0)
        return cls(k=k, V=V, Yt=V.T @ Y)


class _AtQ:
    r"""Quantities at one SPD Q, in the eigenbasis U of Q: shared by the action, gradient and Hessian. ``depth`` L
    sets the prior term, :math:`L\,{\rm tr}\,Q^{1/L} - \log\det Q` (:mod:`renormpp.theory`, Eq. (D1))."""

    def __init__(self, Q, spectrum: Spectrum, N1: float, T: float, lambda1: float, depth: int = 1):
        self.q, self.U = np.linalg.eigh(0.5 * (Q + Q.T))
        self.N1, self.T, self.depth = N1, T, depth
        self.kl = spectrum.k / lambda1  # (P,)
        self.Z = spectrum.Yt @ self.U  # (P, D): y~_mu in the eigenbasis of Q
        self.spd = bool(self.q[0] > 0)
        self.m = 1.0 / (T + self.kl[:, None] * self.q[None, :])  # (P, D): eigenvalues of M_mu
        self.A = self.m * self.Z  # M_mu y~_mu in the U basis

    def action(self) -> float:
        """S(Q), paper Eq. (1) in the kernel eigenbasis."""
        if not self.spd:
            return np.inf
        q, kl = self.q, self.kl
        data = np.sum(self.Z * self.A) + np.sum(np.log1p(kl[:, None] * q[None, :] / self.T))
        L = self.depth
        return float(L * np.sum(q ** (1.0 / L)) - np.sum(np.log(q)) + data / self.N1)

    def gradient(self) -> np.ndarray:
        """dS/dQ (supplement, eq:supp:full_deriv), a symmetric (D, D) matrix."""
        q, kl, A = self.q, self.kl, self.A
        G_u = np.diag(q ** (1.0 / self.depth - 1.0) - 1.0 / q + (kl @ self.m) / self.N1) - (A.T * kl) @ A / self.N1
        return _sym(self.U @ G_u @ self.U.T)

    def hessian_u(self) -> np.ndarray:
        r"""The Hessian in the eigenbasis U of Q, as a tensor H[a, b, c, d] (D^4 entries, O(P D^3)).

        For a symmetric perturbation with :math:`E = U^\top dQ\, U`, the change of the gradient is
        :math:`U (\sum_{cd} H_{abcd} E_{cd}) U^\top`. From :math:`d(-Q^{-1}) = Q^{-1} dQ\, Q^{-1}` and
        :math:`dM_\mu = -(k_\mu/\lambda_1) M_\mu dQ\, M_\mu`:
        :math:`H_{abcd} = \delta_{ac}\delta_{bd}[1/(q_a q_b) + \Delta_{ab} - H^1_{ab}] + \delta_{ac} W_{adb} +
        \delta_{bc} W_{bda}`, with :math:`\Delta_{ab}` the divided difference of :math:`q^{1/L-1}` at
        :math:`(q_a, q_b)` (the depth-L prior term; 0 at L = 1)
        with :math:`H^1_{ab} = \frac{1}{N_1}\sum_\mu (k_\mu/\lambda_1)^2 m_{\mu a} m_{\mu b}` and
        :math:`W_{acb} = \frac{1}{N_1}\sum_\mu (k_\mu/\lambda_1)^2 m_{\mu a} A_{\mu c} A_{\mu b}`.
        """
        q, m, A, kl2, D = self.q, self.m, self.A, self.kl**2, self.q.size
        mk = m * kl2[:, None]
        H1 = mk.T @ m / self.N1
        W = (mk.T @ (A[:, :, None] * A[:, None, :]).reshape(-1, D * D)).reshape(D, D, D) / self.N1
        i = np.arange(D)
        H = np.zeros((D, D, D, D))
        H[i[:, None], i[None, :], i[:, None], i[None, :]] = 1.0 / np.outer(q, q) + self._prior_dd() - H1  # [a, b, a, b]
        H[i, :, i, :] += np.swapaxes(W, 1, 2)  # [a, b, a, d] += W[a, d, b]
        H[:, i, i, :] += np.transpose(W, (2, 0, 1))  # [a, b, b, d] += W[b, d, a]
        return H

    def _prior_dd(self) -> np.ndarray:
        """Divided differences of the depth-L prior gradient :math:`q^{1/L-1}` between the eigenvalues of Q."""
        power, q = 1.0 / self.depth - 1.0, self.q
        if power == 0.0:
            return np.zeros((q.size, q.size))
        diff = q[:, None] - q[None, :]
        close = np.abs(diff) <= 1e-6 * np.maximum(q[:, None], q[None, :])
        mid = 0.5 * (q[:, None] + q[None, :])
        return np.where(close, power * mid ** (power - 1.0),
                        (q[:, None] ** power - q[None, :] ** power) / np.where(close, 1.0, diff))

    def hessian_vp(self, E: np.ndarray) -> np.ndarray:
        """Directional derivative of dS/dQ along a symmetric E (the Hessian applied to E)."""
        Eu = self.U.T @ E @ self.U
        return _sym(self.U @ np.einsum("abcd,cd->ab", self.hessian_u(), Eu) @ self.U.T)


def moments(spectrum: Spectrum, Q, T: float, lambda1: float, kappa, k00):
    r"""Predictive mean and covariance from the kernel eigenbasis (supplement, eq:SM_bias and eq:SM_var).

    ``kappa`` (P, P0) holds :math:`\kappa_\mu = V_{:\mu}\cdot K(X, x_0)` in its columns, ``k00`` (P0,) is
    :math:`K(x_0, x_0)`. Returns ``(mean, s, U)``: the mean :math:`\Gamma` (P0, D), and the covariance
    :math:`\Sigma = U\,\mathrm{diag}(s)\,U^\top` by its eigenvalues ``s`` (P0, D) (clipped at 0) in the eigenbasis
    ``U`` of Q. Costs O(P P0 D + D^3): a sweep over T and lambda1 (or Q) reuses ``spectrum``, ``kappa`` and ``k00``.
    """
    q, U = np.linalg.eigh(Q)
    m = 1.0 / (T + (spectrum.k / lambda1)[:, None] * q[None, :])  # (P, D): eigenvalues of M_mu
    mean = (kappa.T @ (m * (spectrum.Yt @ U))) * (q / lambda1) @ U.T
    s = k00[:, None] * q[None, :] / lambda1 - (kappa.T**2 @ m) * (q / lambda1) ** 2
    return mean, np.maximum(s, 0.0), U


def _sym(A: np.ndarray) -> np.ndarray:
    return 0.5 * (A + A.T)


def _sym_rows(H: np.ndarray) -> np.ndarray:
    """(D, D, ...) -> (D(D+1)/2, ...): the symmetrized output entries (a <= b) of a linear map."""
    iu = np.triu_indices(H.shape[0])
    return (0.5 * (H + np.swapaxes(H, 0, 1)))[iu]


def _terms(Q, spectrum: Spectrum, N1: float, T: float, lambda1: float, grad: bool = True, depth: int = 1):
    """Action S(Q) and its gradient dS/dQ in O(D^3 + P D^2); (inf, None) if Q is not SPD."""
    st = _AtQ(Q, spectrum, N1, T, lambda1, depth)
    if not st.spd:
        return np.inf, None
    return st.action(), (st.gradient() if grad else None)


def _newton(Q, spectrum: Spectrum, N1: float, T: float, lambda1: float, gtol: float, maxiter: int, depth: int = 1):
    """Newton's method on symmetric Q with the exact Hessian and a backtracking line search."""
    D = Q.shape[0]
    iu = np.triu_indices(D)
    st = _AtQ(Q, spectrum, N1, T, lambda1, depth)
    S, G = st.action(), st.gradient()
    for it in range(maxiter):
        if np.linalg.norm(G) <= gtol:
            return Q, it
        # Newton equation H[E] = -G on symmetric E, in the eigenbasis of Q, upper-triangle coordinates
        Hu = st.hessian_u()
        Hu = Hu + np.swapaxes(Hu, 2, 3)  # acting on symmetric E: E_cd and E_dc are one coordinate
        Hu[:, :, np.arange(D), np.arange(D)] *= 0.5
        H = _sym_rows(Hu)[:, iu[0], iu[1]]
        # the Hessian of S in these coordinates is diag(w) H, w = 2 off the diagonal: Newton only
        # where it is positive definite, so that it heads for a minimum and never for a saddle
        w = np.where(iu[0] == iu[1], 1.0, 2.0)
        try:
            np.linalg.cholesky(_sym(w[:, None] * H))
            x = np.linalg.solve(H, -(st.U.T @ G @ st.U)[iu])
        except np.linalg.LinAlgError:
            return Q, it
        Eu = np.zeros((D, D))
        Eu[iu] = x
        Eu = Eu + np.triu(Eu, 1).T
        dQ = _sym(st.U @ Eu @ st.U.T)
        slope = np.sum(G * dQ)
        if not slope < 0:  # cannot happen with a positive definite Hessian, but for round-off
            return Q, it
        step, g_norm = 1.0, np.linalg.norm(G)
        while step > 1e-10:
            st_new = _AtQ(Q + step * dQ, spectrum, N1, T, lambda1, depth)
            S_new = st_new.action()
            if S_new <= S + 1e-4 * step * slope:  # Armijo
                G_new = st_new.gradient()
                break
            if st_new.spd and abs(S_new - S) <= 1e-12 * (1.0 + abs(S)):
                # S is flat to round-off near the minimum: judge the step by the gradient instead
                G_new = st_new.gradient()
                if np.linalg.norm(G_new) < g_norm:
                    break
            step *= 0.5
        else:
            return Q, it
        Q, st, S, G = _sym(Q + step * dQ), st_new, S_new, G_new
    return Q, maxiter


class CholeskyMinimum(NamedTuple):
    """The result of :func:`minimize_cholesky`: ``Q`` = L L^T at L-BFGS's last iterate (symmetrized), its iterations
    ``n_iter``, and ``reason``: "" where L-BFGS-B reports convergence, otherwise its message (why it stopped)."""

    Q: np.ndarray
    n_iter: int
    reason: str


def minimize_cholesky(terms: Callable, Q0, *, gtol: float, maxiter: int, maxcor: int = 30,
                      log_diagonal: bool = True) -> CholeskyMinimum:
    r"""Minimize an action S(Q) over symmetric positive definite Q by L-BFGS-B on a Cholesky factor,
    :math:`Q = L L^\top` with L lower triangular, from ``Q0``: the minimizer of the saddle points of the fully
    connected action (paper Eq. (1), Eq. (D1) at depth L), of the convolutional one ((C4) of
    :mod:`renormpp.theory.conv`) and of the specialists' bulk ((SP2) of :mod:`renormpp.theory.specialists`).

    The variables are the entries of L on and below the diagonal; for a symmetric gradient :math:`G = \partial S/
    \partial Q` the chain rule gives :math:`\partial S/\partial L = 2\,G L`. With ``log_diagonal`` the diagonal of
    L is :math:`e^{\theta}` (its gradient times :math:`L_{ii}`), so every iterate is positive definite; without it
    (the specialists' parametrization) a singular L is left to ``terms`` to refuse.

    ``terms(Q) -> (S, G)`` gives the action and its symmetric gradient, ``(inf, None)`` where Q is off the action's
    domain (L-BFGS-B then backtracks). ``gtol`` is L-BFGS-B's own tolerance on the largest component of the gradient
    in L (not the Frobenius norm of G), ``maxiter`` and ``maxcor`` its iterations and stored corrections; ``ftol`` is
    1e-15, so that the gradient decides.
    """
    D = Q0.shape[0]
    tri, diag = np.tril_indices(D), np.diag_indices(D)

    def factor(theta):
        L = np.zeros((D, D))
        L[tri] = theta
        if log_diagonal:
            L[diag] = np.exp(L[diag])
        return L

    def fun(theta):
        L = factor(theta)
        S, G = terms(L @ L.T)
        if G is None or not np.isfinite(S):
            return np.inf, np.zeros_like(theta)
        dL = 2.0 * G @ L  # dS/dL for symmetric G
        if log_diagonal:
            dL[diag] *= L[diag]  # chain rule through the log-diagonal
        return S, dL[tri]

    L0 = np.linalg.cholesky(_sym(np.asarray(Q0, dtype=np.float64)))
    if log_diagonal:
        L0[diag] = np.log(L0[diag])
    res = scipy.optimize.minimize(fun, L0[tri], jac=True, method="L-BFGS-B",
                                  options=dict(maxiter=maxiter, maxcor=maxcor, ftol=1e-15, gtol=gtol))
    L = factor(res.x)
    return CholeskyMinimum(_sym(L @ L.T), int(res.nit), "" if res.success else str(res.message))


def _minimize(Q0, spectrum: Spectrum, N1: float, T: float, lambda1: float, gtol: float, maxiter: int, depth: int = 1):
    """Newton from Q0; where that stalls (far from the minimum the Hessian may be indefinite),
    L-BFGS on a Cholesky factor (:func:`minimize_cholesky`, always SPD), then Newton again to polish to ``gtol``."""
    Q, n_iter = _newton(Q0, spectrum, N1, T, lambda1, gtol, maxiter=min(maxiter, 30), depth=depth)
    if np.linalg.norm(_terms(Q, spectrum, N1, T, lambda1, depth=depth)[1]) <= gtol:
        return Q, n_iter
    lbfgs = minimize_cholesky(lambda Q: _terms(Q, spectrum, N1, T, lambda1, depth=depth), Q,
                              gtol=gtol * 1e-2, maxiter=max(maxiter - n_iter, 1))
    n_iter += lbfgs.n_iter
    Q, n_newton = _newton(lbfgs.Q, spectrum, N1, T, lambda1, gtol, maxiter=max(maxiter - n_iter, 0), depth=depth)
    return Q, n_iter + n_newton


