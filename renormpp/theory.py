r"""Proportional-limit theory of a one-hidden-layer network with D outputs (kernel shape renormalization).

The partition function concentrates, for :math:`N_1, P \to \infty` at fixed :math:`\alpha = P/N_1`,
on the minimum :math:`Q^*` of the effective action (paper, Eq. (1); odd activations only)

.. math::
    S(Q) = \operatorname{Tr} Q - \log\det Q + \frac{1}{N_1}\Big[ y^\top (T\,\mathbb 1 + Q\otimes K/\lambda_1)^{-1} y
           + \operatorname{Tr}\log(\mathbb 1 + Q\otimes K/(\lambda_1 T)) \Big],

with :math:`K` the NNGP kernel on the training inputs (:mod:`renormpp.kernels`). The
:math:`PD \times PD` matrix is never formed: with :math:`K = V\,\mathrm{diag}(k)\,V^\top` and
:math:`\tilde y_\mu = Y^\top V_{:\mu}` the system is block diagonal,
:math:`M_\mu(Q) = (T\,\mathbb 1_D + k_\mu Q/\lambda_1)^{-1}`, and with :math:`Q = U\,\mathrm{diag}(q)\,U^\top`
every :math:`M_\mu` is diagonal in :math:`U`, so one evaluation of :math:`S` and of

.. math::
    \frac{\partial S}{\partial Q} = \mathbb 1 - Q^{-1} + \frac{1}{N_1}\sum_\mu \frac{k_\mu}{\lambda_1}
    \big[M_\mu - M_\mu \tilde y_\mu \tilde y_\mu^\top M_\mu\big]        \qquad\text{(supplement, eq:supp:full_deriv)}

costs :math:`O(D^3 + P D^2)` after one :math:`O(P^3)` eigendecomposition.

Predictions at the saddle point (supplement, eq:SM_bias and eq:SM_var), with :math:`\kappa_\mu = V_{:\mu}\cdot K(X, x_0)`:

.. math::
    \Gamma(x_0) = \frac{1}{\lambda_1} Q \sum_\mu \kappa_\mu M_\mu \tilde y_\mu, \qquad
    \Sigma(x_0) = \frac{K(x_0,x_0)}{\lambda_1} Q - \frac{1}{\lambda_1^2}\sum_\mu \kappa_\mu^2\, Q M_\mu Q,

the generalization loss :math:`\epsilon_g = \|y_0 - \Gamma\|^2 + \operatorname{Tr}\Sigma` (paper Eq. (3)) and the
readout overlaps :math:`\langle v v^\top\rangle/N_1 = Q^*/\lambda_1` (paper Eq. (4)).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.linalg
import scipy.optimize

from . import kernels
from ._checks import data_pair, matrix, positive as _positive, positive_int
from .network import ActivationLike, get_activation

METHODS = ("exact", "one_loop", "infinite_width")


class ConvergenceWarning(RuntimeWarning):
    """The minimization of the effective action stopped before the gradient vanished."""


# ----------------------------------------------------------------------------------------------
# input checks
# ----------------------------------------------------------------------------------------------
def _check_method(method: str) -> str:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(map(repr, METHODS))}")
    return method


# ----------------------------------------------------------------------------------------------
# the action in the kernel eigenbasis
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Spectrum:
    """Eigendecomposition of the train kernel, K = V diag(k) V^T, and the labels in that basis."""

    k: np.ndarray  # (P,) eigenvalues, clipped at 0
    V: np.ndarray  # (P, P) eigenvectors in columns
    Yt: np.ndarray  # (P, D) rotated labels, row mu is y~_mu = Y^T V[:, mu]

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
    """Quantities at one SPD Q, in the eigenbasis U of Q: shared by the action, gradient and Hessian."""

    def __init__(self, Q, spec: Spectrum, N1: float, T: float, lambda1: float):
        self.q, self.U = np.linalg.eigh(0.5 * (Q + Q.T))
        self.N1, self.T = N1, T
        self.kl = spec.k / lambda1  # (P,)
        self.Z = spec.Yt @ self.U  # (P, D): y~_mu in the eigenbasis of Q
        self.spd = bool(self.q[0] > 0)
        self.m = 1.0 / (T + self.kl[:, None] * self.q[None, :])  # (P, D): eigenvalues of M_mu
        self.A = self.m * self.Z  # M_mu y~_mu in the U basis

    def action(self) -> float:
        """S(Q), paper Eq. (1) in the kernel eigenbasis."""
        if not self.spd:
            return np.inf
        q, kl = self.q, self.kl
        data = np.sum(self.Z * self.A) + np.sum(np.log1p(kl[:, None] * q[None, :] / self.T))
        return float(np.sum(q) - np.sum(np.log(q)) + data / self.N1)

    def gradient(self) -> np.ndarray:
        """dS/dQ (supplement, eq:supp:full_deriv), a symmetric (D, D) matrix."""
        q, kl, A = self.q, self.kl, self.A
        G_u = np.diag(1.0 - 1.0 / q + (kl @ self.m) / self.N1) - (A.T * kl) @ A / self.N1
        return _sym(self.U @ G_u @ self.U.T)

    def hessian_u(self) -> np.ndarray:
        r"""The Hessian in the eigenbasis U of Q, as a tensor H[a, b, c, d] (D^4 entries, O(P D^3)).

        For a symmetric perturbation with :math:`E = U^\top dQ\, U`, the change of the gradient is
        :math:`U (\sum_{cd} H_{abcd} E_{cd}) U^\top`. From :math:`d(-Q^{-1}) = Q^{-1} dQ\, Q^{-1}` and
        :math:`dM_\mu = -(k_\mu/\lambda_1) M_\mu dQ\, M_\mu`:
        :math:`H_{abcd} = \delta_{ac}\delta_{bd}[1/(q_a q_b) - H^1_{ab}] + \delta_{ac} W_{adb} + \delta_{bc} W_{bda}`
        with :math:`H^1_{ab} = \frac{1}{N_1}\sum_\mu (k_\mu/\lambda_1)^2 m_{\mu a} m_{\mu b}` and
        :math:`W_{acb} = \frac{1}{N_1}\sum_\mu (k_\mu/\lambda_1)^2 m_{\mu a} A_{\mu c} A_{\mu b}`.
        """
        q, m, A, kl2, D = self.q, self.m, self.A, self.kl**2, self.q.size
        mk = m * kl2[:, None]
        H1 = mk.T @ m / self.N1
        W = (mk.T @ (A[:, :, None] * A[:, None, :]).reshape(-1, D * D)).reshape(D, D, D) / self.N1
        i = np.arange(D)
        H = np.zeros((D, D, D, D))
        H[i[:, None], i[None, :], i[:, None], i[None, :]] = 1.0 / np.outer(q, q) - H1  # [a, b, a, b]
        H[i, :, i, :] += np.swapaxes(W, 1, 2)  # [a, b, a, d] += W[a, d, b]
        H[:, i, i, :] += np.transpose(W, (2, 0, 1))  # [a, b, b, d] += W[b, d, a]
        return H

    def hessian_vp(self, E: np.ndarray) -> np.ndarray:
        """Directional derivative of dS/dQ along a symmetric E (the Hessian applied to E)."""
        Eu = self.U.T @ E @ self.U
        return _sym(self.U @ np.einsum("abcd,cd->ab", self.hessian_u(), Eu) @ self.U.T)


def moments(spec: Spectrum, Q, T: float, lambda1: float, kappa, k00):
    r"""Predictive mean and covariance from the kernel eigenbasis (supplement, eq:SM_bias and eq:SM_var).

    ``kappa`` (P, P0) holds :math:`\kappa_\mu = V_{:\mu}\cdot K(X, x_0)` in its columns, ``k00`` (P0,) is
    :math:`K(x_0, x_0)`. Returns ``(mean, s, U)``: the mean :math:`\Gamma` (P0, D), and the covariance
    :math:`\Sigma = U\,\mathrm{diag}(s)\,U^\top` by its eigenvalues ``s`` (P0, D) (clipped at 0) in the eigenbasis
    ``U`` of Q. Costs O(P P0 D + D^3): a sweep over T and lambda1 (or Q) reuses ``spec``, ``kappa`` and ``k00``.
    """
    q, U = np.linalg.eigh(Q)
    m = 1.0 / (T + (spec.k / lambda1)[:, None] * q[None, :])  # (P, D): eigenvalues of M_mu
    mean = (kappa.T @ (m * (spec.Yt @ U))) * (q / lambda1) @ U.T
    s = k00[:, None] * q[None, :] / lambda1 - (kappa.T**2 @ m) * (q / lambda1) ** 2
    return mean, np.maximum(s, 0.0), U


def _sym(A: np.ndarray) -> np.ndarray:
    return 0.5 * (A + A.T)


def _sym_rows(H: np.ndarray) -> np.ndarray:
    """(D, D, ...) -> (D(D+1)/2, ...): the symmetrized output entries (a <= b) of a linear map."""
    iu = np.triu_indices(H.shape[0])
    return (0.5 * (H + np.swapaxes(H, 0, 1)))[iu]


def _terms(Q, spec: Spectrum, N1: float, T: float, lambda1: float, grad: bool = True):
    """Action S(Q) and its gradient dS/dQ in O(D^3 + P D^2); (inf, None) if Q is not SPD."""
    st = _AtQ(Q, spec, N1, T, lambda1)
    if not st.spd:
        return np.inf, None
    return st.action(), (st.gradient() if grad else None)


def _newton(Q, spec: Spectrum, N1: float, T: float, lambda1: float, gtol: float, maxiter: int):
    """Newton's method on symmetric Q with the exact Hessian and a backtracking line search."""
    D = Q.shape[0]
    iu = np.triu_indices(D)
    st = _AtQ(Q, spec, N1, T, lambda1)
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
            st_new = _AtQ(Q + step * dQ, spec, N1, T, lambda1)
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


def _tril_to_Q(theta: np.ndarray, D: int):
    """Q = L L^T with L lower triangular and log-parametrized diagonal (always SPD)."""
    L = np.zeros((D, D))
    L[np.tril_indices(D)] = theta
    d = np.diag_indices(D)
    L[d] = np.exp(L[d])
    return L @ L.T, L


def _Q_to_tril(Q: np.ndarray) -> np.ndarray:
    L = np.linalg.cholesky(Q)
    d = np.diag_indices(Q.shape[0])
    L[d] = np.log(L[d])
    return L[np.tril_indices(Q.shape[0])]


def _minimize(Q0, spec: Spectrum, N1: float, T: float, lambda1: float, gtol: float, maxiter: int):
    """Newton from Q0; where that stalls (far from the minimum the Hessian may be indefinite),
    L-BFGS on a Cholesky factor (always SPD), then Newton again to polish to ``gtol``."""
    Q, n_iter = _newton(Q0, spec, N1, T, lambda1, gtol, maxiter=min(maxiter, 30))
    if np.linalg.norm(_terms(Q, spec, N1, T, lambda1)[1]) <= gtol:
        return Q, n_iter
    D = Q0.shape[0]
    tri = np.tril_indices(D)
    diag = np.diag_indices(D)

    def fun(theta):
        Q, L = _tril_to_Q(theta, D)
        S, G = _terms(Q, spec, N1, T, lambda1)
        if G is None or not np.isfinite(S):
            return np.inf, np.zeros_like(theta)
        dL = 2.0 * G @ L  # dS/dL for symmetric G
        dL[diag] *= L[diag]  # chain rule through the log-diagonal
        return S, dL[tri]

    res = scipy.optimize.minimize(
        fun, _Q_to_tril(Q), jac=True, method="L-BFGS-B",
        options=dict(maxiter=max(maxiter - n_iter, 1), maxcor=30, ftol=1e-15, gtol=gtol * 1e-2),
    )
    n_iter += int(res.nit)
    Q, _ = _tril_to_Q(res.x, D)
    Q, n_newton = _newton(_sym(Q), spec, N1, T, lambda1, gtol, maxiter=max(maxiter - n_iter, 0))
    return Q, n_iter + n_newton


# ----------------------------------------------------------------------------------------------
# results
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Prediction:
    r"""Gaussian posterior of the network outputs at test points (supplement, eq:SM_bias and eq:SM_var).

    ``mean`` (P0, D) is :math:`\Gamma`, ``cov`` (P0, D, D) is :math:`\Sigma` (variance of f, without the
    observation noise T). All covariances share the eigenvectors ``basis`` (D, D) of Q; ``cov_eigvals``
    (P0, D) are their eigenvalues, clipped at 0 against round-off.
    """

    mean: np.ndarray
    cov: np.ndarray
    basis: np.ndarray
    cov_eigvals: np.ndarray

    @property
    def var(self) -> np.ndarray:
        """Per-output predictive variances, the diagonal of ``cov``, shape (P0, D)."""
        return np.einsum("pdd->pd", self.cov)


@dataclass(frozen=True)
class TheoryFit:
    """Result of :func:`solve`: the order parameter Q* and everything predicted from it.

    Attributes: ``Q`` (D, D); ``converged`` (``exact``: the gradient norm reached ``gtol``; ``one_loop``:
    the perturbative Q is positive definite; always True for ``infinite_width``); ``grad_norm`` (Frobenius norm of dS/dQ at Q; for ``one_loop`` it measures
    how far the perturbative Q is from the saddle point); ``action`` S(Q); ``method``; ``n_iter``.
    """

    Q: np.ndarray
    converged: bool
    grad_norm: float
    action: float
    method: str
    n_iter: int
    N1: float
    T: float
    lambda0: float
    lambda1: float
    activation: ActivationLike
    X: np.ndarray = field(repr=False)
    spectrum: Spectrum = field(repr=False)

    # --- derived quantities ------------------------------------------------------------------
    @property
    def P(self) -> int:
        return self.X.shape[0]

    @property
    def D(self) -> int:
        return self.Q.shape[0]

    @property
    def alpha(self) -> float:
        """alpha = P / N1."""
        return self.P / self.N1

    @property
    def readout_overlap(self) -> np.ndarray:
        r"""Prediction for :math:`\langle v v^\top\rangle / N_1 = Q^*/\lambda_1` (paper Eq. (4))."""
        return self.Q / self.lambda1

    def action_and_gradient(self, Q) -> tuple[float, np.ndarray]:
        """S(Q) and dS/dQ at any SPD Q (D, D), on this fit's data and parameters."""
        Q = np.asarray(Q, dtype=np.float64)
        if Q.shape != (self.D, self.D):
            raise ValueError(f"Q must have shape {(self.D, self.D)}; got {Q.shape}")
        S, G = _terms(Q, self.spectrum, self.N1, self.T, self.lambda1)
        if G is None:
            raise ValueError("Q must be symmetric positive definite")
        return S, G

    def refit(self, method: str | None = None, *, N1=None, T=None, lambda1=None, **solver_options) -> "TheoryFit":
        """Solve again with another method, width, temperature or readout prior.

        Only ``lambda0`` and the activation change the kernel, so the eigendecomposition of K is
        reused: a sweep over N1, T or lambda1 costs O(P D^2) per point instead of O(P^3).
        """
        N1 = self.N1 if N1 is None else _positive("N1", N1, "hidden-layer width")
        T = self.T if T is None else _positive("T", T, "temperature")
        lambda1 = self.lambda1 if lambda1 is None else _positive("lambda1", lambda1, "prior precision of the readout weights")
        return _solve_spectrum(self.spectrum, self.X, N1, T, self.lambda0, lambda1, self.activation,
                               self.method if method is None else method, **solver_options)

    # --- predictions -----------------------------------------------------------------------------
    def _test_inputs(self, X0) -> np.ndarray:
        X0 = matrix(X0, "X0", "P0", "N0 features")
        if X0.shape[1] != self.X.shape[1]:
            raise ValueError(f"X0 has {X0.shape[1]} features but the training inputs have {self.X.shape[1]}")
        return X0

    def predict(self, X0, batch_size: int = 4096) -> Prediction:
        """Predictive mean (P0, D) and covariance (P0, D, D) of the outputs at the rows of X0."""
        X0 = self._test_inputs(X0)
        parts = [moments(self.spectrum, self.Q, self.T, self.lambda1, *self.test_kernel(X0[lo:lo + batch_size]))
                 for lo in range(0, X0.shape[0], batch_size)]
        mean, s, U = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), parts[0][2]
        cov = np.einsum("ia,pa,ja->pij", U, s, U)
        return Prediction(mean=mean, cov=cov, basis=U, cov_eigvals=s)

    def test_kernel(self, X0) -> tuple[np.ndarray, np.ndarray]:
        """The kernel quantities that :func:`moments` needs at test inputs X0 (P0, N0): kappa = V^T K(X, X0),
        shape (P, P0), and K(x0, x0), shape (P0,). They depend on lambda0 and the activation only."""
        kappa = self.spectrum.V.T @ kernels.nngp(self.X, X0, lambda0=self.lambda0, activation=self.activation)
        return kappa, kernels.nngp_diag(X0, lambda0=self.lambda0, activation=self.activation)

    def generalization_error(self, X0, Y0) -> float:
        r""":math:`\epsilon_g`, the mean over test points of :math:`\|y_0-\Gamma\|^2 + \operatorname{Tr}\Sigma` (Eq. (3))."""
        X0 = self._test_inputs(X0)
        X0, Y0 = data_pair(X0, Y0, "X0", "Y0", "P0")
        if Y0.shape[1] != self.D:
            raise ValueError(f"Y0 has D={Y0.shape[1]} outputs but the training labels have D={self.D}")
        pred = self.predict(X0)
        return float(np.mean(np.sum((Y0 - pred.mean) ** 2, axis=1) + pred.cov_eigvals.sum(axis=1)))

    def posterior_predictive(self, X0):
        """The predictive distribution as ``numpyro.distributions.MultivariateNormal``.

        Batch shape (P0,), event shape (D,). Computed in float64; the distribution holds its
        parameters in JAX's default dtype (float32 unless ``jax_enable_x64`` is on).
        """
        import jax.numpy as jnp
        import numpyro.distributions as dist

        pred = self.predict(X0)
        # square root U diag(sqrt(s)) -> lower-triangular factor by QR, valid also for singular cov
        root = pred.basis[None, :, :] * np.sqrt(pred.cov_eigvals)[:, None, :]
        r = np.linalg.qr(np.swapaxes(root, 1, 2), mode="r")
        sign = np.where(np.diagonal(r, axis1=1, axis2=2) < 0, -1.0, 1.0)
        scale_tril = np.swapaxes(r * sign[:, :, None], 1, 2)
        return dist.MultivariateNormal(jnp.asarray(pred.mean), scale_tril=jnp.asarray(scale_tril))


# ----------------------------------------------------------------------------------------------
# solve
# ----------------------------------------------------------------------------------------------
def solve(X, Y, N1, T: float = 0.01, lambda0: float = 1.0, lambda1: float = 1.0,
          activation: ActivationLike = "erf", method: str = "exact", *, gtol: float = 1e-8,
          maxiter: int = 5000) -> TheoryFit:
    r"""Solve the proportional-limit theory for a one-hidden-layer network on data (X, Y).

    Parameters
    ----------
    X : (P, N0) training inputs. Y : (P, D) training labels ((P,) means D = 1).
    N1 : hidden-layer width (alpha = P / N1). T : temperature. lambda0, lambda1 : prior precisions
        of the first- and second-layer weights.
    activation : ``"erf"``, ``"relu"``, ``"linear"``, ``"tanh"`` or an elementwise callable.
    method : ``"exact"`` minimizes S(Q) over SPD Q: Newton steps with the analytic Hessian from the
        one-loop Q (or Q = 1 where that is not positive definite), falling back on L-BFGS on a
        Cholesky factor where Newton stalls, to ``|dS/dQ| <= gtol``; ``"one_loop"`` is the perturbative
        :math:`Q = 1 + \alpha Q^{(1)}` (supplement, eq:supp:final_perturbative_eq),
        :math:`Q^{(1)} = -\frac{1}{P}\sum_\mu \frac{k_\mu}{\lambda_1}[M^0_\mu - M^0_\mu\tilde y_\mu\tilde y_\mu^\top M^0_\mu]`;
        ``"infinite_width"`` is Q = 1 (the NNGP posterior). The action holds for odd activations
        only, so ``exact`` and ``one_loop`` refuse others.
    gtol : convergence threshold on the Frobenius norm of dS/dQ. maxiter : optimizer iterations
        (L-BFGS and Newton together).

    Returns
    -------
    TheoryFit
    """
    method = _check_method(method)
    _check_applies(method, activation)
    X, Y = data_pair(X, Y)
    N1 = _positive("N1", N1, "hidden-layer width")
    T = _positive("T", T, "temperature")
    lambda0 = _positive("lambda0", lambda0, "prior precision of the first-layer weights")
    lambda1 = _positive("lambda1", lambda1, "prior precision of the readout weights")
    K = kernels.nngp(X, lambda0=lambda0, activation=activation)
    spec = Spectrum.from_kernel(K, Y)
    return _solve_spectrum(spec, X, N1, T, lambda0, lambda1, activation, method, gtol=gtol, maxiter=maxiter)


def applies(method: str, activation: ActivationLike) -> bool:
    """Whether theory ``method`` holds for ``activation``: the effective action (Eq. (1)) is derived for odd
    activations, so ``exact`` and ``one_loop`` need one; ``infinite_width`` (the NNGP posterior) holds for any."""
    return _check_method(method) == "infinite_width" or get_activation(activation).odd


def _check_applies(method: str, activation: ActivationLike) -> None:
    if not applies(method, activation):
        raise ValueError(
            f"method={method!r} needs an odd activation (sigma(-h) = -sigma(h)): the effective action of "
            f"the paper holds for odd activations only, and {get_activation(activation).name!r} is not odd. Use an "
            "odd activation ('erf', 'tanh', 'linear') or method='infinite_width', which holds for any activation."
        )


def _solve_spectrum(spec, X, N1, T, lambda0, lambda1, activation, method, gtol=1e-8, maxiter=5000):
    _check_applies(method, activation)
    gtol = _positive("gtol", gtol, "tolerance on |dS/dQ|")
    maxiter = positive_int("maxiter", maxiter, "iterations of the minimization")
    D = spec.Yt.shape[1]
    eye = np.eye(D)
    n_iter = 0
    if method == "infinite_width":
        Q = eye
    else:
        _, G1 = _terms(eye, spec, N1, T, lambda1)
        Q = eye - G1  # at Q = 1 the gradient is the data term: Q_1loop = 1 + alpha Q^(1)
        q_min = np.linalg.eigvalsh(Q)[0]
        if method == "one_loop" and q_min <= 0:
            warnings.warn(
                f"the one-loop Q is not positive definite (smallest eigenvalue {q_min:.3g}) at alpha = "
                f"{X.shape[0] / N1:.3g}: perturbation theory has broken down; use method='exact'",
                RuntimeWarning, stacklevel=3,
            )
        if method == "exact":
            Q0 = Q if q_min > 0.05 else eye
            Q, n_iter = _minimize(Q0, spec, N1, T, lambda1, gtol, maxiter)
    S, G = _terms(Q, spec, N1, T, lambda1)
    # only a non-SPD one-loop Q has G None: S is +inf there (-log det Q), and the result is flagged
    grad_norm = float(np.linalg.norm(G)) if G is not None else np.inf
    converged = grad_norm <= gtol if method == "exact" else G is not None
    if method == "exact" and not converged:
        warnings.warn(
            f"the minimization of the effective action did not converge: |dS/dQ| = {grad_norm:.3g} > "
            f"gtol = {gtol:.3g} after {n_iter} iterations. Check fit.converged; raise maxiter or gtol.",
            ConvergenceWarning, stacklevel=3,
        )
    return TheoryFit(Q=Q, converged=bool(converged), grad_norm=grad_norm, action=float(S), method=method,
                     n_iter=n_iter, N1=N1, T=T, lambda0=lambda0, lambda1=lambda1, activation=activation,
                     X=X, spectrum=spec)
