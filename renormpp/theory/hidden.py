r"""The hidden layer's kernel in the theory: what kernel shape renormalization predicts for the posterior's hidden
kernel, and the theory with a measured kernel in place of the NNGP kernel (the oracle test).

**The predicted hidden kernel.** Under the prior every hidden unit's features :math:`s_c = \sigma(h_c) \in
\mathbb R^P` have covariance K, and the posterior's hidden kernel is
:math:`K_{\rm post} = \frac{1}{N_1}\sum_c \langle s_c s_c^\top\rangle`. For Gaussian features with prior covariance
K, :math:`\partial_K \log Z = \frac{N_1}{2} K^{-1}(K_{\rm post} - K)K^{-1}`, and at the saddle point of the effective
action (paper Eq. (1); envelope theorem: :math:`\log Z = -\frac{N_1}{2}S(Q^*)`, the derivative at fixed
:math:`Q^*`) this gives

.. math::
    K_{\rm post} = K - K\,G\,K,\qquad
    G = \frac{1}{N_1\lambda_1}\sum_{ab} Q^*_{ab}\,\big[(A^{-1})_{ba} - r_b\,r_a^\top\big],\qquad
    A = T\,\mathbb 1 + Q^*\otimes K/\lambda_1,\quad r = A^{-1}y,                                           \tag{H1}

with :math:`(A^{-1})_{ba}` the (b, a) block of :math:`A^{-1}` (P x P) and :math:`r_a` its output-a rows of r.
The kernel gains weight along the residual r (the target) and loses it where the data term's variance lies; the
change is of order :math:`\alpha` and vanishes as :math:`N_1 \to \infty` at fixed P. In the kernel eigenbasis,
:math:`K = V\,{\rm diag}(k)\,V^\top`, :math:`\tilde r_\mu = M_\mu\tilde y_\mu` (:mod:`renormpp.theory.action`), and

.. math::
    V^\top G V = \frac{1}{N_1\lambda_1}\big[{\rm diag}_\mu\,{\rm tr}(Q^* M_\mu) - \tilde R\, Q^*\, \tilde R^\top\big],
    \qquad r_\mu \equiv \frac{u_\mu^\top K_{\rm post}\, u_\mu}{k_\mu}
    = 1 - \frac{k_\mu}{N_1\lambda_1}\big[{\rm tr}(Q^* M_\mu) - \tilde r_\mu^\top Q^* \tilde r_\mu\big]      \tag{H2}

(the spectrum ratios along the eigenvectors :math:`u_\mu` of K). At test inputs, whose features do not enter the
likelihood, :math:`K_{\rm post}(X, x_0) = K(X, x_0) - K G K(X, x_0)` and
:math:`K_{\rm post}(x_0, x_0) = K(x_0, x_0) - K(x_0, X) G K(X, x_0)`                                         (H3).
The infinite-width theory predicts :math:`K_{\rm post} = K`.

**The oracle.** :func:`with_kernel` solves the same action and predicts with the same formulas (paper Eq. (1),
supplement eq:SM_bias and eq:SM_var) with a given kernel, e.g. the measured :math:`K_{\rm post}`
(:mod:`renormpp.diagnostics.kernel`), in place of K. If it closes the gap between the theory and the sampled
networks, what the theory misses is the adaptation of the kernel.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._checks import data_pair
from .action import Spectrum
from .methods import BASELINE, SpectralProblem, get_method
from .prediction import renormalized_moments

#: the kernel-renormalization methods that take any kernel in place of the NNGP kernel (the corrected theory's 1/N1
#: term is the NNGP kernel's own): :func:`with_kernel` and the ``measured_kernel`` theory (:mod:`.measured`)
KERNEL_METHODS = ("exact", "one_loop", BASELINE)


def _check_covered(fit) -> None:
    if fit.nonodd or fit.depth != 1:
        raise ValueError("the predicted hidden kernel (H1) is derived for one hidden layer and an odd activation; "
                         f"this fit has depth {fit.depth} and activation "
                         f"{getattr(fit.activation, 'name', fit.activation)!r}")


def tilt_matrix(spectrum: Spectrum, Q, T: float, lambda1: float, N1: float, *, eigenbasis: bool = False) -> np.ndarray:
    r"""The tilt matrix G of (H1), :math:`G = \partial S/\partial K` at fixed Q (the quadratic tilt of one neuron's law
    by the others, Eq. (A1) of :mod:`.adaptive_kernel`), (P, P), at order parameter Q; with ``eigenbasis``,
    :math:`V^\top G V` of (H2) in the eigenbasis V of the kernel ``spectrum``."""
    Q = np.asarray(Q)
    q, U = np.linalg.eigh(Q)
    mq = 1.0 / (T + (spectrum.k / lambda1)[:, None] * q[None, :])  # eigenvalues of M_mu in the basis U of Q
    R = ((spectrum.Yt @ U) * mq) @ U.T  # rows r~_mu = M_mu y~_mu
    trQM = mq @ q  # tr(Q M_mu) = sum_a q_a m_mu,a
    Gt = (np.diag(trQM) - R @ Q @ R.T) / (N1 * lambda1)
    return Gt if eigenbasis else spectrum.V @ Gt @ spectrum.V.T


def _G_tilde(fit) -> np.ndarray:
    return tilt_matrix(fit.spectrum, fit.Q, fit.T, fit.lambda1, fit.N1, eigenbasis=True)


def spectrum_ratios(fit) -> np.ndarray:
    """The predicted :math:`r_\\mu = u_\\mu^\\top K_{\\rm post} u_\\mu / k_\\mu` along every eigenvector of K (ordered
    as ``fit.spectrum.k``, ascending), Eq. (H2); ones for the infinite-width method.

    Parameters
    ----------
    fit : TheoryFit
        A fit of :func:`renormpp.theory.solve`.

    Returns
    -------
    numpy.ndarray, shape (P,)
    """
    if fit.method == BASELINE:
        return np.ones_like(fit.spectrum.k)
    _check_covered(fit)
    return 1.0 - fit.spectrum.k * np.diag(_G_tilde(fit))


def predicted_kernel(fit, X0=None):
    """The hidden kernel :math:`K_{\\rm post}` that ``fit`` predicts (H1, H3): ``(train, cross, test)``, the (P, P)
    matrix on the training inputs, and with test inputs ``X0`` the (P, P0) cross kernel and the (P0,) diagonal on
    the test inputs (None without ``X0``). The infinite-width method predicts K itself.

    Parameters
    ----------
    fit : TheoryFit
        A fit of :func:`renormpp.theory.solve`.
    X0 : array_like, shape (P0, N0), optional
        Test inputs.

    Returns
    -------
    train : numpy.ndarray, shape (P, P)
    cross : numpy.ndarray, shape (P, P0) or None
    test : numpy.ndarray, shape (P0,) or None
    """
    spectrum = fit.spectrum
    kappa, k00 = fit.test_kernel(X0) if X0 is not None else (None, None)
    if fit.method == BASELINE:
        Gt = np.zeros((len(spectrum.k), len(spectrum.k)))
    else:
        _check_covered(fit)
        Gt = _G_tilde(fit)
    kG = spectrum.k[:, None] * Gt  # diag(k) G~
    train = spectrum.V @ (np.diag(spectrum.k) - kG * spectrum.k[None, :]) @ spectrum.V.T
    if X0 is None:
        return train, None, None
    cross = spectrum.V @ (kappa - kG @ kappa)
    test = k00 - np.einsum("mp,mn,np->p", kappa, Gt, kappa)
    return train, cross, test


@dataclass(frozen=True)
class KernelTheory:
    """The theory with a given kernel (:func:`with_kernel`): the order parameter ``Q`` (D, D), the predicted readout
    overlaps ``Q/lambda1`` and, with test data, the predictive ``mean`` (P0, D), the trace of the predictive
    covariance per test point ``var`` (P0,) and ``eps_g`` (paper Eq. (3))."""

    Q: np.ndarray
    readout_overlap: np.ndarray
    method: str
    mean: np.ndarray | None = None
    var: np.ndarray | None = None
    eps_g: float | None = None


def with_kernel(K, Y, *, N1, T: float, lambda1: float = 1.0, method: str = "exact", K_cross=None, k_test=None,
                Y_test=None, gtol: float = 1e-8, maxiter: int = 5000) -> KernelTheory:
    r"""The kernel-renormalization theory (paper Eq. (1), one hidden layer, odd activation) with the (P, P) kernel
    ``K`` in place of the NNGP kernel: its :math:`Q^*` (``method``: ``exact``, ``one_loop`` or ``infinite_width``)
    and, given the (P, P0) cross kernel ``K_cross``, the (P0,) test diagonal ``k_test`` and labels ``Y_test``, its
    predictions and :math:`\epsilon_g`. With the measured :math:`K_{\rm post}` this is the oracle test.

    Parameters
    ----------
    K : array_like, shape (P, P)
        The kernel on the training inputs.
    Y : array_like, shape (P, D)
        Training labels.
    N1 : float
        Hidden-layer width.
    T : float
        Temperature.
    lambda1 : float, default 1.0
        Prior precision of the readout.
    method : {"exact", "one_loop", "infinite_width"}
        The theory method.
    K_cross : array_like, shape (P, P0), optional
        The train-test cross kernel.
    k_test : array_like, shape (P0,), optional
        The test diagonal.
    Y_test : array_like, shape (P0, D), optional
        Test labels.
    gtol : float, default 1e-8
        Convergence threshold on the gradient's norm.
    maxiter : int, default 5000
        Optimizer iterations.

    Returns
    -------
    KernelTheory
    """
    K = np.asarray(K, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    Y = Y[:, None] if Y.ndim == 1 else Y
    if K.ndim != 2 or K.shape != (Y.shape[0], Y.shape[0]):
        raise ValueError(f"K must be a (P, P) matrix with P = {Y.shape[0]} rows of Y; got shape {K.shape}")
    if not np.all(np.isfinite(K)):
        raise ValueError("K has NaN or inf entries")
    record = get_method(method)
    if method not in KERNEL_METHODS:
        raise ValueError(f"with_kernel solves the methods exact, one_loop and infinite_width; got {method!r}")
    spectrum = Spectrum.from_kernel(0.5 * (K + K.T), Y)
    Q = record.solve(SpectralProblem(spectrum, float(N1), float(T), float(lambda1), 1, gtol, maxiter, None))[0]
    out = dict(Q=Q, readout_overlap=Q / lambda1, method=method)
    if K_cross is None:
        return KernelTheory(**out)
    K_cross, Y_test = data_pair(np.asarray(K_cross, dtype=np.float64).T, Y_test, "K_cross^T", "Y_test", "P0")
    k_test = np.asarray(k_test, dtype=np.float64)
    if K_cross.shape[1] != K.shape[0] or k_test.shape != (K_cross.shape[0],):
        raise ValueError(f"K_cross must be (P, P0) = ({K.shape[0]}, P0) and k_test (P0,); got {K_cross.T.shape} and "
                         f"{k_test.shape}")
    mean, cov = renormalized_moments(spectrum, Q, T, lambda1, spectrum.V.T @ K_cross.T, k_test)
    var = np.einsum("pdd->p", cov)
    return KernelTheory(**out, mean=mean, var=var, eps_g=float(np.mean(np.sum((Y_test - mean) ** 2, axis=1) + var)))
