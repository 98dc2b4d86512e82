r"""The leading 1/N1 correction of the predictions around the renormalized kernel, for D outputs.

At finite width the hidden kernel :math:`K_w = \phi(X)\phi(X)^\top/N_1` fluctuates around its mean. For Gaussian
features its prior covariance is :math:`{\rm Cov}(K_{\mu\nu}, K_{\rho\sigma}) = (K_{\mu\rho}K_{\nu\sigma} +
K_{\mu\sigma}K_{\nu\rho})/N_1`, and the data shift its posterior mean by the linear response to the likelihood
(Zavatone-Veth, Canatar, Ruben & Pehlevan 2021, evaluated around the renormalized kernel as in deepbays'
single-output ``FC_1HL_corrected``). With D outputs the likelihood of the renormalized model is that of the Gaussian
process with covariance :math:`T\,\mathbb 1 + \bar Q \otimes K_w`, :math:`\bar Q = Q^*/\lambda_1`, so

.. math::
    \frac{\partial \log p(Y|K_w)}{\partial K_w} = \tfrac12 \sum_{ab} \bar Q_{ab}\big(\alpha_a\alpha_b^\top - A_{ab}\big),
    \qquad A = (T\,\mathbb 1 + \bar Q\otimes K)^{-1},\quad \alpha = A y,                            \tag{C1}

and the corrected kernels, train-train, test-train and test-test, are

.. math::
    K_c = K + \frac{1}{N_1} K\,\Delta\, K, \qquad K_c(x_0, X) = K(x_0, X) + \frac{1}{N_1} K(x_0, X)\,\Delta\,K, \qquad
    K_c(x_0, x_0) = K(x_0,x_0) + \frac{1}{N_1} K(x_0, X)\,\Delta\,K(X, x_0),                    \tag{C2}

with :math:`\Delta = \sum_{ab}\bar Q_{ab}(\alpha_a\alpha_b^\top - A_{ab})`. For D = 1 this is
:math:`K[1 + (\bar Q/N_1)(\tilde K^{-1}yy^\top - 1)\tilde K^{-1}K]`, :math:`\tilde K = \bar QK + T` (DESIGN.md). The
predictions are those of the renormalized GP (Eq. (3) and the supplement's eq:SM_bias, eq:SM_var) with
:math:`\bar Q\otimes K_c` in place of :math:`\bar Q\otimes K`.

In the kernel eigenbasis, with :math:`M_\mu = (T + k_\mu\bar Q)^{-1}`, :math:`\tilde\alpha_\mu = M_\mu\tilde y_\mu` and
:math:`t_\mu = {\rm tr}(\bar Q M_\mu)`, :math:`\Delta = Z Z^\top - {\rm diag}(t)` with :math:`Z = \tilde\alpha\bar Q^{1/2}`
(P, D), so :math:`K_c = {\rm diag}(k - k^2 t/N_1) + W W^\top`, :math:`W = {\rm diag}(k) Z/\sqrt{N_1}`: block diagonal
plus rank D (:mod:`.lowrank`), and nothing of size PD x PD is formed.

The order parameter stays the exact :math:`Q^*`, and so does the prediction for the readout overlaps,
:math:`\langle v v^\top\rangle/N_1 = Q^*/\lambda_1`: their 1/N1 correction (the one-loop fluctuation of Q around the
saddle point) is not derived here. The correction holds for odd activations (the Gaussian-feature covariance
above has no mean term).
"""
from __future__ import annotations

import numpy as np

from .lowrank import LowRankSystem


def correction(spectrum, Q, T: float, lambda1: float, N1: float):
    """``(kp, Z, t)`` of (C2) in the eigenbasis: the corrected diagonal ``kp`` = k - k^2 t / N1, ``Z`` (P, D) and
    ``t`` (P,)."""
    Qbar = Q / lambda1
    q, U = np.linalg.eigh(0.5 * (Qbar + Qbar.T))
    m = 1.0 / (T + spectrum.k[:, None] * q[None, :])  # eigenvalues of M_mu in U
    alpha = m * (spectrum.Yt @ U)  # M_mu y~_mu in U
    Z = alpha * np.sqrt(np.maximum(q, 0.0))[None, :]  # alpha Qbar^(1/2), in U (a rotation of Z: Z Z^T unchanged)
    t = m @ q
    return spectrum.k - spectrum.k**2 * t / N1, Z, t


def system(spectrum, Q, T: float, lambda1: float, N1: float) -> LowRankSystem:
    """The train system :math:`T + \\bar Q\\otimes K_c` in the form (W1)."""
    kp, Z, _ = correction(spectrum, Q, T, lambda1, N1)
    Qbar = Q / lambda1
    W = spectrum.k[:, None] * Z / np.sqrt(N1)
    return LowRankSystem(kp, Qbar, W, np.kron(Qbar, np.eye(W.shape[1])), T, spectrum.Yt)


def test_terms(spectrum, Q, T: float, lambda1: float, N1: float, kappa, k00):
    """``(kappa', E, K00)`` of (W3) at test points: ``kappa`` (P, P0) = V^T K(X, X0), ``k00`` (P0,) = K(x0, x0)."""
    kp, Z, t = correction(spectrum, Q, T, lambda1, N1)
    Qbar = Q / lambda1
    s = (Z.T @ kappa).T / np.sqrt(N1)  # (P0, D): Z^T kappa / sqrt(N1)
    D = Q.shape[0]
    kappa_p = kappa * (1.0 - spectrum.k * t / N1)[:, None]
    E = np.einsum("ce,nj->ncje", Qbar, s).reshape(len(k00), D * D, D)  # E[(c, j), e] = Qbar_ce s_j
    k00_c = k00 + np.sum(s**2, axis=1) - (kappa**2 * t[:, None]).sum(axis=0) / N1
    return kappa_p, E, k00_c[:, None, None] * Qbar[None]
