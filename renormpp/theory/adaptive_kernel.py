r"""Adaptive kernel beyond shape renormalization: a moment-matched, self-consistent hidden kernel.

**Where the proportional-limit theory loses the adaptation.** After the readout v is integrated out, every neuron
enters the partition function through (paper, supplement, the step before the Gaussian equivalence)

.. math::
    \mathbb E_w\Big[\exp\Big(-\frac{1}{2\lambda_1 N_1}\sum_a (\bar f_a\cdot s(w))^2\Big)\Big],
    \qquad s(w) = \sigma(X w/\sqrt{N_0}) \in \mathbb R^P,

and the paper replaces the D projections :math:`\bar f_a\cdot s(w)` by Gaussians with covariance
:math:`\bar f^\top K\bar f` (Gaussian equivalence), which gives the action of :mod:`renormpp.theory` and the kernel
:math:`Q\otimes K/\lambda_1`. For a linear activation this is exact; for a nonlinear one on structured data (MNIST)
the projections depend on w through a few input directions and are not Gaussian: the hidden kernel itself adapts.

**The tilt on one neuron** (this module's starting point). At the saddle point :math:`Q^*` of
:math:`S(Q; K)`, with :math:`A = T + Q\otimes K/\lambda_1` and :math:`r = A^{-1} y` (P x D, column :math:`r_b`),

.. math::
    \frac{\partial S}{\partial K} = G = \frac{1}{N_1\lambda_1}\sum_{ab} Q_{ab}\big[(A^{-1})_{(b,a)} - r_b r_a^\top\big]
        = \frac{1}{N_1\lambda_1}\Big[V\,\mathrm{diag}\Big(\sum_a \frac{q_a}{T + k_\mu q_a/\lambda_1}\Big)V^\top
          - R\,Q\,R^\top\Big]                                                              \tag{A1}

(envelope theorem; :math:`K = V\mathrm{diag}(k)V^\top`, :math:`Q = U\mathrm{diag}(q)U^\top`,
:math:`R = V (m\circ \tilde Y U) U^\top` with :math:`m_{\mu a} = 1/(T + k_\mu q_a/\lambda_1)`). Since
:math:`\log Z = -\tfrac{N_1}{2} S` and the N1 feature vectors have prior covariance K, the thermodynamic identity
gives the theory's own posterior hidden kernel

.. math:: K_{\rm post} = \big\langle \tfrac{1}{N_1}\textstyle\sum_i s_i s_i^\top\big\rangle = K - K G K,    \tag{A2}

i.e. to the order of the theory each neuron's features feel the quadratic tilt
:math:`p(w) \propto \mathcal N(w; 0, 1/\lambda_0)\,e^{-\frac12 s(w)^\top G\, s(w)}`. Its first part damps features
along the well fitted kernel modes, its second (:math:`-RQR^\top`, negative) rewards features aligned with the
residual :math:`r`: the feature learning.

**Gaussian features under that tilt.** For features that are Gaussian with covariance K the tilted covariance is
:math:`\mathcal T_{\rm G}(K) = K(1 + GK)^{-1}` (equal to (A2) to the theory's order). **The true features** under the
same tilt are computed by a Gaussian variational approximation on the first-layer weights
(:math:`w \sim \mathcal N(0,\Sigma)`, the weights' Gaussian-process-limit ansatz of Seroussi, Naveh & Ringel,
Nat. Commun. 14, 908 (2023), arXiv:2112.15383, applied to the single-neuron tilt). The pre-activations
:math:`h = Xw/\sqrt{N_0}` are then Gaussian with covariance C, prior :math:`C_0 = XX^\top/(\lambda_0 N_0)`, and

.. math::
    F(C) = \tfrac12\big[\mathrm{tr}(C_0^{-1}C) - \log\det(C_0^{-1}C) - P\big] + \tfrac12\,\mathrm{tr}\,G\,\kappa(C),
    \qquad C^{-1} = C_0^{-1} + \Lambda(C),\quad\text{i.e.}\quad C = C_0(1 + \Lambda C_0)^{-1},          \tag{A3}

with :math:`\kappa(C)_{\mu\nu} = \kappa(C_{\mu\mu}, C_{\nu\nu}, C_{\mu\nu})` the activation's kernel map
(:mod:`renormpp.network`) and :math:`\Lambda = 2\,\partial(\tfrac12\mathrm{tr}\,G\kappa)/\partial C`:
:math:`\Lambda_{\mu\nu} = G_{\mu\nu}\,\partial_{12}\kappa_{\mu\nu}` off the diagonal,
:math:`\Lambda_{\mu\mu} = G_{\mu\mu}\,\tfrac{d}{dc}\kappa(c,c,c) + 2\sum_{\nu\ne\mu} G_{\mu\nu}\,\partial_{11}\kappa_{\mu\nu}`.
(A3) needs only P x P matrices (push-through: :math:`X\Sigma X^\top/N_0` with
:math:`\Sigma^{-1} = \lambda_0 + X^\top\Lambda X/N_0`); the tilted features have covariance
:math:`\mathcal T(K) = \kappa(C^*)`.

**Moment matching (no double counting).** The Gaussian-equivalent kernel :math:`K_{\rm eff}` is the one whose
Gaussian features, under the same tilt, have the true features' tilted covariance:

.. math::
    \mathcal T_{\rm G}(K_{\rm eff}) = \mathcal T(K) \iff
    K_{\rm eff} = \kappa(C^*)\,\big(1 - G\,\kappa(C^*)\big)^{-1},                                        \tag{A4}

and the method is the fixed point of (A1)-(A4): :math:`Q^* = \arg\min S(Q; K_{\rm eff})`, G from (A1) at
:math:`(Q^*, K_{\rm eff})`, C from (A3), :math:`K_{\rm eff}` from (A4), iterated (damped) to convergence. The
predictions are the theory's (:mod:`renormpp.theory`, supplement eq:SM_bias, eq:SM_var) with :math:`K_{\rm eff}` in
place of K; the predicted posterior hidden kernel is (A2) at :math:`K_{\rm eff}`,
:math:`K_{\rm post} = K_{\rm eff} - K_{\rm eff}GK_{\rm eff}`. At test inputs :math:`x_0` the tilt acts on the
train features only: :math:`C_{0X} = C^0_{0X}(1+\Lambda C_0)^{-1}`,
:math:`C_{00} = C^0_{00} - C^0_{0X}\Lambda(1 + C_0\Lambda)^{-1}C^0_{X0}`, and inverting Gaussian conditioning,

.. math::
    K_{\rm eff}(x_0, X) = \kappa_{0X}(1 - G\kappa)^{-1},\qquad
    K_{\rm eff}(x_0, x_0) = \kappa_{00} + \kappa_{0X}(1 - G\kappa)^{-1}G\,\kappa_{X0}.                      \tag{A5}

Limits. (i) Linear activation: :math:`\kappa(C) = C` and :math:`\Lambda = G`, so :math:`\kappa(C^*) = K(1+GK)^{-1}` and
(A4) returns :math:`K_{\rm eff} = K`: the method *is* the exact theory (which is exact for linear networks), with no
double counting. (ii) :math:`N_1 \to \infty` at fixed P: :math:`G = O(1/N_1)`, the true features' response to it differs from the
Gaussian ones' at first order, so :math:`K_{\rm eff} - K = O(1/N_1)` and the method tends to the exact theory
(checked: the eps_g difference falls as 1/N1). (iii) Odd activations only (the action of :mod:`renormpp.theory` without a
mean feature); one hidden layer.

What it is not: the tilt (A1) is the theory's linear response of one neuron, not the full nonlinear cavity tilt
(the log-det of the neuron's D x D overlap), and the weights are kept Gaussian (no multi-modal or saturated
first-layer posterior). Rubin et al. (ICML 2025, arXiv:2502.03210) derive the same tree-level structure (an
adapted kernel from a single-neuron problem plus fluctuation terms that rescale it); Lauditi, Bordelon & Pehlevan
(arXiv:2502.07998) and Fischer et al. (arXiv:2405.10761) solve the kernel's saddle point in mean-field-like
scalings, where this module's Q would be 1.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg

from .. import kernels
from .._checks import data_pair, matrix, positive as _positive, positive_int
from ..network import ODD_ACTIVATIONS, get_activation
from . import hidden
from .action import ConvergenceWarning, Spectrum
from .fit import _solve_spectrum
from .prediction import FitShape, Prediction, predict_in_batches, renormalized_moments


# ----------------------------------------------------------------------------------------------
# pieces
# ----------------------------------------------------------------------------------------------
_TRACE = False


class _Bath:
    r"""The other neurons, seen by one neuron: the saddle point of :math:`S(Q; K_{\rm eff})`, with
    :math:`\Gamma = A^{-1}` and :math:`r = A^{-1}y` in the eigenbases of :math:`K_{\rm eff}` (V, k) and Q (U, q)."""

    def __init__(self, spectrum: Spectrum, Q, T: float, lambda1: float, N1: float):
        self.q, self.U = np.linalg.eigh(0.5 * (Q + Q.T))
        self.Q, self.V = Q, spectrum.V
        self.m = 1.0 / (T + (spectrum.k / lambda1)[:, None] * self.q[None, :])  # (P, D): A^{-1} in the (V, U) basis
        self.R = spectrum.V @ ((self.m * (spectrum.Yt @ self.U)) @ self.U.T)  # (P, D), columns r_b
        self.scale = 1.0 / (N1 * lambda1)
        self._spectrum, self._T, self._lambda1, self._N1 = spectrum, T, lambda1, N1

    def contract(self, Omega) -> np.ndarray:
        r""":math:`\sum_{ab}\Omega_{ab}\Gamma_{ba} = V\mathrm{diag}(\sum_c m_{\mu c}(U^\top\Omega U)_{cc})V^\top`."""
        w = self.m @ np.einsum("ac,ab,bc->c", self.U, Omega, self.U)
        return (self.V * w) @ self.V.T

    @property
    def linear_G(self) -> np.ndarray:
        """Eq. (A1), which is (H1) of :mod:`renormpp.theory.hidden`."""
        G = hidden.tilt_matrix(self._spectrum, self.Q, self._T, self._lambda1, self._N1)
        return 0.5 * (G + G.T)

    def overlaps(self, kap):
        r""":math:`\bar\Sigma_{ab} = \mathrm{tr}(\Gamma_{ab}\kappa)/(\lambda_1 N_1)` and
        :math:`\bar R_{ab} = r_a^\top\kappa\, r_b/(\lambda_1 N_1)` (Eq. (A6))."""
        diag = np.sum(self.V * (kap @ self.V), axis=0)  # (V^T kap V)_mu,mu
        S = (self.U * (diag @ self.m)) @ self.U.T * self.scale
        Rb = self.R.T @ kap @ self.R * self.scale
        return 0.5 * (S + S.T), 0.5 * (Rb + Rb.T)

    def cavity(self, kap):
        r"""The saturating single-neuron log-weight :math:`\phi(\kappa)` of Eq. (A6) and :math:`G_J = -2\,\partial\phi/
        \partial\kappa`; None where :math:`1 + \bar\Sigma` is not positive definite."""
        S, Rb = self.overlaps(kap)
        D = S.shape[0]
        try:
            L = np.linalg.cholesky(np.eye(D) + S)
        except np.linalg.LinAlgError:
            return None
        W = scipy.linalg.cho_solve((L, True), np.eye(D))
        phi = -np.sum(np.log(np.diag(L))) + 0.5 * np.sum(W * Rb)
        G = (self.contract(W + W @ Rb @ W) - self.R @ W @ self.R.T) * self.scale
        return phi, 0.5 * (G + G.T)


def _erf_parts(a, b, c):
    """kappa_erf and its partial derivatives (d/dc12, d/dc11) at (c11, c22, c12) = (a, b, c)."""
    sa, sb = 1.0 + 2.0 * a, 1.0 + 2.0 * b
    root = np.sqrt(sa * sb)
    u = np.clip(2.0 * c / root, -1.0, 1.0)
    du = (2.0 / np.pi) / np.sqrt(np.maximum(1.0 - u**2, 1e-300))
    return (2.0 / np.pi) * np.arcsin(u), du * 2.0 / root, du * (-u / sa)


def kernel_parts(activation, a, b, c, order: int = 64):
    r""":math:`\kappa(a, b, c)` and its partial derivatives :math:`\partial_{12}\kappa` (by c) and
    :math:`\partial_{11}\kappa` (by a), elementwise: closed forms for erf and linear, central differences of the
    kernel map (Gauss-Hermite quadrature, :mod:`renormpp.network`) for other odd activations."""
    act = get_activation(activation)
    a, b, c = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (a, b, c)))
    if act.name == "erf":
        return _erf_parts(a, b, c)
    if act.name == "linear":
        return c.copy(), np.ones_like(c), np.zeros_like(c)
    kap = act.kernel_map(a, b, c, order=order)
    h = 1e-4 * np.sqrt(a * b) + 1e-12
    dc = (act.kernel_map(a, b, c + h, order=order) - act.kernel_map(a, b, c - h, order=order)) / (2 * h)
    ha = 1e-4 * a + 1e-12
    da = (act.kernel_map(a + ha, b, c, order=order) - act.kernel_map(a - ha, b, c, order=order)) / (2 * ha)
    return kap, dc, da


def _kernel_and_lambda(activation, C, G, order):
    """kappa(C) (P, P) and Lambda = d tr(G kappa(C)) / dC as a symmetric matrix (Eq. (A3))."""
    d = np.diag(C).copy()
    kap, dc, da = kernel_parts(activation, d[:, None], d[None, :], C, order)
    kap = 0.5 * (kap + kap.T)
    return kap, _chain(G, dc, da)


def _chain(G, dc, da):
    """Lambda from G and the kernel map's partial derivatives (Eq. (A3))."""
    Lam = G * dc
    off = G * da
    np.fill_diagonal(off, 0.0)
    diag_total = np.diag(dc) + 2.0 * np.diag(da)  # d/dc kappa(c, c, c)
    np.fill_diagonal(Lam, np.diag(G) * diag_total + 2.0 * off.sum(axis=1))
    return 0.5 * (Lam + Lam.T)


def tilted_preactivations(C0, tilt, activation="erf", Lam0=None, *, tol: float = 1e-7, maxiter: int = 500,
                          order: int = 64):
    r"""Minimize the single-neuron free energy of Eq. (A3) over Gaussian pre-activations,

    :math:`F(\Lambda) = \tfrac12[\mathrm{tr}(1+\Lambda C_0)^{-1} + \log\det(1+\Lambda C_0) - P] - \phi(\kappa(C))`,
    :math:`C = C_0(1+\Lambda C_0)^{-1}`, where ``tilt(kap)`` returns :math:`(\phi, G)` with
    :math:`G = -2\,\partial\phi/\partial\kappa` (or None outside its domain). Steps along the natural gradient
    :math:`d = \Lambda(C) - \Lambda` (a descent direction: :math:`dF = -\tfrac12\mathrm{tr}(CdCd) < 0`) with
    Armijo backtracking; converged when :math:`\|d\| \le` ``tol`` :math:`\|\Lambda(C)\|`.
    Returns ``(C, kappa(C), Lambda, G, n_iter, converged)``.
    """
    P = C0.shape[0]
    eye = np.eye(P)

    def state(Lam):
        M = eye + C0 @ Lam  # C = M^{-1} C0
        sign, logdet = np.linalg.slogdet(M)
        if sign <= 0:
            return None
        C = np.linalg.solve(M, C0)
        C = 0.5 * (C + C.T)
        d = np.diag(C).copy()
        if np.any(d <= 0) or np.linalg.eigvalsh(C)[0] < -1e-10 * d.max():
            return None
        kap, dc, da = kernel_parts(activation, d[:, None], d[None, :], C, order)
        kap = 0.5 * (kap + kap.T)
        out = tilt(kap)
        if out is None:
            return None
        phi, G = out
        F = 0.5 * (np.trace(np.linalg.inv(M)) + logdet - P) - phi
        return F, C, kap, G, _chain(G, dc, da)

    Lam = np.zeros((P, P)) if Lam0 is None else Lam0.copy()
    st = state(Lam)
    if st is None:
        Lam = np.zeros((P, P))
        st = state(Lam)
    for it in range(1, maxiter + 1):
        F, C, kap, G, target = st
        d = target - Lam
        if _TRACE:
            print(it, F, np.linalg.norm(d) / max(np.linalg.norm(target), 1e-300), flush=True)
        if np.linalg.norm(d) <= tol * max(np.linalg.norm(target), 1e-300):
            return C, kap, Lam, G, it, True
        slope = -0.5 * np.sum((C @ d) * (d @ C).T)
        step = 1.0
        while step > 1e-12:
            new = state(Lam + step * d)
            if new is not None and new[0] <= F + 1e-4 * step * slope:
                break
            step *= 0.5
        else:
            return C, kap, Lam, G, it, False
        Lam, st = Lam + step * d, new
        if F - st[0] <= 1e-14 * (1.0 + abs(F)) and np.linalg.norm(d) <= 1e-4 * np.linalg.norm(target):
            # F is flat to round-off: the fixed point is reached to the precision F allows
            return st[1], st[2], Lam, st[3], it, True
    F, C, kap, G, _ = st
    return C, kap, Lam, G, maxiter, False


def matched_kernel(kap, G) -> np.ndarray:
    r"""Eq. (A4): :math:`K_{\rm eff} = \kappa\,(1 - G\kappa)^{-1}`, the Gaussian-equivalent prior kernel whose tilted
    covariance is the true features' ``kap``."""
    P = kap.shape[0]
    Keff = np.linalg.solve(np.eye(P) - kap @ G, kap)  # (1 - kap G)^{-1} kap = kap (1 - G kap)^{-1}
    return 0.5 * (Keff + Keff.T)


#: The activations the adaptive theory covers: the odd ones of :data:`renormpp.network.ACTIVATIONS`, whose tilted
#: kernel it computes (:func:`kernel_parts`: closed forms for erf and linear, quadrature of the kernel map for others).
ACTIVATIONS = ODD_ACTIVATIONS


# ----------------------------------------------------------------------------------------------
# result
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AdaptiveKernelFit(FitShape):
    """Result of :func:`solve`: the adapted Gaussian-equivalent kernel K_eff, its order parameter Q, and predictions.

    ``Q`` (D, D); ``kernel``: K_eff on the train inputs (P, P), Eq. (A4); ``K_post``: the predicted posterior hidden
    kernel :math:`K_{\\rm eff} - K_{\\rm eff} G K_{\\rm eff}` (A2); ``K_tilted``: the tilted true-feature covariance
    :math:`\\kappa(C^*)`; ``prior_kernel``: the NNGP K; ``G``: the tilt (A1); ``converged``: the outer fixed point and
    the saddle point of Q both converged; ``n_iter``: outer iterations; ``change``: the last relative change of
    K_eff; ``exact``: the :class:`renormpp.theory.TheoryFit` at K_eff (its ``generalization_error`` uses the NNGP
    test kernel, so use this object's).
    """

    Q: np.ndarray
    kernel: np.ndarray = field(repr=False)
    K_post: np.ndarray = field(repr=False)
    K_tilted: np.ndarray = field(repr=False)
    prior_kernel: np.ndarray = field(repr=False)
    G: np.ndarray = field(repr=False)
    G_tilt: np.ndarray = field(repr=False)
    converged: bool
    n_iter: int
    change: float
    N1: float
    T: float
    lambda0: float
    lambda1: float
    activation: str
    X: np.ndarray = field(repr=False)
    Y: np.ndarray = field(repr=False)
    spectrum: Spectrum = field(repr=False)
    Lam: np.ndarray = field(repr=False)
    C0: np.ndarray = field(repr=False)
    order: int = 64
    method: str = "adaptive_kernel"

    @property
    def reason(self) -> str:
        """Why the fit has not converged; "" where it has."""
        if self.converged:
            return ""
        return (f"the adaptive kernel did not converge: relative change of K_eff {self.change:.2g} after "
                f"{self.n_iter} iterations at alpha = {self.alpha:.3g}")

    @property
    def readout_overlap(self) -> np.ndarray:
        r"""Prediction for :math:`\langle v v^\top\rangle/N_1 = Q/\lambda_1` (paper Eq. (4) at K_eff)."""
        return self.Q / self.lambda1

    def test_kernel(self, X0):
        """Eq. (A5): ``(kappa, k00)`` with kappa = V^T K_eff(X, X0) (P, P0) and k00 = K_eff(x0, x0) (P0,)."""
        X0 = matrix(X0, "X0", "P0", "N0 features")
        if X0.shape[1] != self.X.shape[1]:
            raise ValueError(f"X0 has {X0.shape[1]} features but the training inputs have {self.X.shape[1]}")
        N0 = self.X.shape[1]
        C0_0X = X0 @ self.X.T / (self.lambda0 * N0)
        c0_00 = np.einsum("ij,ij->i", X0, X0) / (self.lambda0 * N0)
        P = self.P
        B = np.linalg.solve((np.eye(P) + self.Lam @ self.C0).T, C0_0X.T).T  # C0_0X (1 + Lam C0)^{-1}
        c_00 = c0_00 - np.einsum("ij,ij->i", B, C0_0X @ self.Lam.T)  # C0_00 - C0_0X (1 + Lam C0)^{-1} Lam C0_X0
        c_xx = np.diag(self._C)
        kap_0X = kernel_parts(self.activation, c_00[:, None], c_xx[None, :], B, self.order)[0]
        kap_00 = kernel_parts(self.activation, c_00, c_00, c_00, self.order)[0]
        W = np.linalg.solve((np.eye(P) - self.G_tilt @ self.K_tilted).T, kap_0X.T).T  # kap_0X (1 - G kap)^{-1}
        k00 = kap_00 + np.einsum("ij,ij->i", W, kap_0X @ self.G_tilt)
        return self.spectrum.V.T @ W.T, k00

    @property
    def _C(self) -> np.ndarray:
        return np.linalg.solve(np.eye(self.P) + self.C0 @ self.Lam, self.C0)

    def predict(self, X0, batch_size: int = 4096) -> Prediction:
        """Predictive mean (P0, D) and covariance (P0, D, D): the renormalized GP with kernel Q (x) K_eff/lambda1."""
        return predict_in_batches(
            lambda X: renormalized_moments(self.spectrum, self.Q, self.T, self.lambda1, *self.test_kernel(X)),
            matrix(X0, "X0", "P0", "N0 features"), batch_size)

    def kernel_ratios(self, n: int = 10, K_post=None) -> np.ndarray:
        r""":math:`r_k = u_k^\top K_{\rm post} u_k / k_k` on the top ``n`` eigendirections u_k of the NNGP K (largest
        first), for this fit's predicted K_post or a given (measured) one."""
        k, V = np.linalg.eigh(self.prior_kernel)
        Kp = self.K_post if K_post is None else np.asarray(K_post, dtype=np.float64)
        idx = np.argsort(k)[::-1][:n]
        return np.einsum("pk,pq,qk->k", V[:, idx], Kp, V[:, idx]) / k[idx]


# ----------------------------------------------------------------------------------------------
# solve
# ----------------------------------------------------------------------------------------------
def _saddle(Keff, X, Y, N1, T, lambda0, lambda1, activation, gtol):
    """The exact theory's saddle point on the kernel Keff and the bath it makes."""
    spectrum = Spectrum.from_kernel(Keff.copy(), Y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit = _solve_spectrum(spectrum, X, N1, T, lambda0, lambda1, activation, "exact", gtol=gtol)
    return fit, _Bath(spectrum, fit.Q, T, lambda1, N1)


def solve(X, Y, N1, T: float = 0.01, lambda0: float = 1.0, lambda1: float = 1.0, activation: str = "erf", *,
          damping: float = 0.5, tol: float = 1e-6, maxiter: int = 200, inner_maxiter: int = 500, gtol: float = 1e-8,
          order: int = 64, tilt: str = "cavity") -> AdaptiveKernelFit:
    r"""The adaptive-kernel theory (module docstring, Eqs. (A1)-(A5)) on data (X, Y).

    One hidden layer, odd activations (:data:`ACTIVATIONS`).

    Parameters
    ----------
    X, Y, N1, T, lambda0, lambda1, activation
        As for :func:`renormpp.theory.solve`.
    damping : float, default 0.5
        The outer iteration mixes :math:`K_{\rm eff} \leftarrow (1-\delta)K_{\rm eff}^{\rm new} + \delta
        K_{\rm eff}` with δ = ``damping``.
    tol : float, default 1e-6
        Converged when the relative (Frobenius) change of K_eff is below it.
    maxiter : int, default 200
        Outer iterations.
    inner_maxiter : int, default 500
        Iterations of (A3).
    gtol : float, default 1e-8
        Tolerance of the saddle point of Q.
    order : int, default 64
        Gauss-Hermite nodes for activations without a closed-form kernel (tanh).
    tilt : str, default "cavity"
        The single-neuron tilt (module docstring).

    Returns
    -------
    AdaptiveKernelFit
    """
    if tilt not in ("cavity", "linear"):
        raise ValueError(f"tilt must be 'cavity' (Eq. (A6)) or 'linear' (Eq. (A1)); got {tilt!r}")
    act = get_activation(activation)
    if not act.odd or act.name not in ACTIVATIONS:
        raise ValueError(f"the adaptive theory holds for the odd activations {', '.join(map(repr, ACTIVATIONS))} "
                         f"(its action has no mean feature); got {act.name!r}")
    X, Y = data_pair(X, Y)
    N1 = _positive("N1", N1, "hidden-layer width")
    T = _positive("T", T, "temperature")
    lambda0 = _positive("lambda0", lambda0, "prior precision of the hidden-layer weights")
    lambda1 = _positive("lambda1", lambda1, "prior precision of the readout weights")
    damping = float(damping)
    if not 0.0 <= damping < 1.0:
        raise ValueError(f"damping must be in [0, 1); got {damping}")
    tol = _positive("tol", tol, "tolerance on the change of K_eff")
    maxiter = positive_int("maxiter", maxiter, "outer iterations")
    inner_maxiter = positive_int("inner_maxiter", inner_maxiter, "iterations of the tilted pre-activations")

    N0 = X.shape[1]
    C0 = X @ X.T / (lambda0 * N0)
    K = kernels.nngp(X, lambda0=lambda0, activation=act.name, order=order)
    Keff, Lam = K.copy(), None
    change, inner_ok, n_iter, converged = np.inf, True, 0, False
    for n_iter in range(1, maxiter + 1):
        fit, bath = _saddle(Keff, X, Y, N1, T, lambda0, lambda1, act.name, gtol)
        if tilt == "linear":
            G_lin = bath.linear_G
            if np.min(np.linalg.eigvals(G_lin @ Keff).real) <= -1.0:
                raise ValueError("the linear tilt (A1) is not normalizable here (K^-1 + G is not positive definite: "
                                 "the quadratic reward along the residual beats the prior); use tilt='cavity'")
            rule = lambda kap: (-0.5 * np.sum(G_lin * kap), G_lin)  # noqa: E731
        else:
            rule = bath.cavity
        C, kap, Lam, G_n, _, inner_ok = tilted_preactivations(C0, rule, act.name, Lam, maxiter=inner_maxiter,
                                                              order=order)
        new = matched_kernel(kap, G_n)
        change = float(np.linalg.norm(new - Keff) / np.linalg.norm(Keff))
        if change < tol and inner_ok:
            Keff, converged = new, True  # Eq. (A4) exactly at the returned kappa, Lambda (the test kernel (A5) uses them)
            break
        Keff = (1.0 - damping) * new + damping * Keff
    fit, bath = _saddle(Keff, X, Y, N1, T, lambda0, lambda1, act.name, gtol)
    G = bath.linear_G
    converged = converged and fit.converged
    spectrum = fit.spectrum
    if not converged:
        warnings.warn(f"the adaptive kernel did not converge: relative change of K_eff {change:.2g} (tol {tol:.2g}) "
                      f"after {n_iter} iterations, saddle point converged: {fit.converged}, tilted pre-activations "
                      f"converged: {inner_ok}. Raise maxiter or damping.", ConvergenceWarning, stacklevel=2)
    K_post = Keff - Keff @ G @ Keff
    return AdaptiveKernelFit(Q=fit.Q, kernel=Keff, K_post=0.5 * (K_post + K_post.T), K_tilted=kap, prior_kernel=K, G=G, G_tilt=G_n,
                       converged=converged, n_iter=n_iter, change=change, N1=N1, T=T, lambda0=lambda0,
                       lambda1=lambda1, activation=act.name, X=X, Y=Y, spectrum=spectrum, Lam=Lam, C0=C0, order=order)
