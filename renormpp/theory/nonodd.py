r"""The proportional-limit theory for activations that are not odd (ReLU), with D outputs: two order parameters.

A non-odd activation has a mean feature :math:`m(x) = \mathbb E[\sigma(h(x))]`, so the NNGP kernel splits into the
feature covariance and a rank-one mean part, :math:`K = (K - M) + M`, :math:`M = m m^\top`
(:func:`renormpp.kernels.nngp_mean`). The two parts renormalize differently: the covariance by the overlap of the
readouts :math:`Q = \langle v v^\top\rangle\lambda_1/N_1`, the mean by that of their sums,
:math:`R = \langle (\sum_i v_i)(\sum_i v_i)^\top\rangle\lambda_1/N_1`, written :math:`R = (\mathbb 1 + \hat Q)^{-1}` with
its conjugate :math:`\hat Q`. The effective action (deepbays' single-output ``FC_1HL_nonodd``, generalized here to D
outputs by :math:`Q_0 \to Q`, :math:`Q_1 \to \hat Q`, products to traces, logs to log-determinants) is

.. math::
    S(Q, \hat Q) = -{\rm tr}(Q\hat Q) + \log\det(\mathbb 1 + \hat Q)
    + \frac{1}{N_1}\Big[y^\top A^{-1} y + \log\det A\Big], \qquad
    A = T\,\mathbb 1 + \frac{1}{\lambda_1}\big[Q\otimes(K - M) + R\otimes M\big],                     \tag{N1}

and the theory is its stationary point :math:`\partial S/\partial Q = \partial S/\partial\hat Q = 0` (a saddle point). For
an odd activation M = 0, :math:`\partial S/\partial\hat Q = 0` gives :math:`\hat Q = Q^{-1} - 1`, and (N1) becomes the
paper's Eq. (1) up to a constant. Infinite width is :math:`Q = R = \mathbb 1`.

In the kernel eigenbasis, :math:`A = \bigoplus_\mu (T + k_\mu Q/\lambda_1) + (\mathbb 1\otimes\tilde m)\,
\frac{R - Q}{\lambda_1}\,(\mathbb 1\otimes\tilde m)^\top` with :math:`\tilde m = V^\top m`: block diagonal plus rank D
(:mod:`.lowrank`). The action below is written in JAX (float64) for its exact gradient and Jacobian; the solve is a
root search of the gradient (``scipy.optimize.root``). The one-loop solution expands around infinite width:
:math:`\hat Q \approx g_Q`, :math:`Q \approx \mathbb 1 - g_Q + g_{\hat Q}` with :math:`g` the gradient of the data term at
:math:`(Q, \hat Q) = (\mathbb 1, 0)` (for odd activations :math:`g_{\hat Q} = 0` and this is the paper's one-loop Q).

The predictions are those of the Gaussian process with the renormalized covariance
:math:`[Q\otimes(K - M) + R\otimes M]/\lambda_1`; the readout overlaps are :math:`\langle v v^\top\rangle/N_1 =
Q/\lambda_1`, and :math:`\langle(\sum_i v_i)(\sum_i v_i)^\top\rangle/N_1 = R/\lambda_1`.
"""
from __future__ import annotations

import functools

import numpy as np
import scipy.optimize

from ..network import x64_context
from .lowrank import LowRankSystem


def _unpack(theta, D):
    """Two symmetric (D, D) matrices from their upper triangles."""
    import jax.numpy as jnp

    iu = np.triu_indices(D)
    n = len(iu[0])

    def sym(v):
        M = jnp.zeros((D, D)).at[iu].set(v)
        return M + jnp.triu(M, 1).T

    return sym(theta[:n]), sym(theta[n:])


def _pack(Q, Qhat):
    iu = np.triu_indices(Q.shape[0])
    return np.concatenate([np.asarray(Q)[iu], np.asarray(Qhat)[iu]])


def _data_term(Q, R, k, mt, Yt, T, lambda1):
    r""":math:`y^\top A^{-1}y + \log\det A` of (N1) by Woodbury's identity in the eigenbasis (JAX, differentiable)."""
    import jax.numpy as jnp

    D = Q.shape[0]
    B = T * jnp.eye(D)[None] + (k[:, None, None] / lambda1) * Q[None]  # (P, D, D)
    Binv = jnp.linalg.inv(B)
    C = (R - Q) / lambda1
    G = jnp.einsum("m,mab->ab", mt**2, Binv)
    Biy = jnp.einsum("mab,mb->ma", Binv, Yt)
    h = mt @ Biy
    I_CG = jnp.eye(D) + C @ G
    quad = jnp.sum(Yt * Biy) - h @ jnp.linalg.solve(I_CG, C @ h)
    logdet = jnp.sum(jnp.linalg.slogdet(B)[1]) + jnp.linalg.slogdet(I_CG)[1]
    return quad + logdet


def _action(theta, k, mt, Yt, T, lambda1, N1):
    import jax.numpy as jnp

    D = Yt.shape[1]
    Q, Qhat = _unpack(theta, D)
    R = jnp.linalg.inv(jnp.eye(D) + Qhat)
    return (-jnp.trace(Q @ Qhat) + jnp.linalg.slogdet(jnp.eye(D) + Qhat)[1]
            + _data_term(Q, R, k, mt, Yt, T, lambda1) / N1)


@functools.lru_cache(maxsize=None)
def _compiled():
    """The gradient of (N1) and its Jacobian, compiled once per shape (the data are arguments, not constants)."""
    import jax

    grad = jax.grad(_action)
    return jax.jit(grad), jax.jit(jax.jacfwd(grad))


def _gradient_and_jacobian(spectrum, mt, T, lambda1, N1):
    """``(grad(theta), jacobian(theta))`` of (N1) in the upper-triangle coordinates, float64. The root search asks
    for the Jacobian only now and then (MINPACK's hybrj updates it by Broyden's rule in between)."""
    grad, jac = _compiled()
    args = (spectrum.k, mt, spectrum.Yt, float(T), float(lambda1), float(N1))

    def as_numpy(fn):
        def call(theta):
            with x64_context():
                return np.asarray(fn(theta, *args), dtype=float)
        return call

    return as_numpy(grad), as_numpy(jac)


def solve(spectrum, mt, T: float, lambda1: float, N1: float, *, one_loop: bool, gtol: float, maxiter: int):
    """``(Q, R, grad_norm, n_iter)`` at the stationary point of (N1) (or its one-loop expansion)."""
    D = spectrum.Yt.shape[1]
    start = _pack(np.eye(D), np.zeros((D, D)))
    with x64_context():
        grad_fn, jac_fn = _gradient_and_jacobian(spectrum, mt, T, lambda1, N1)
        if one_loop:
            import jax

            args = (spectrum.k, mt, spectrum.Yt, T, lambda1)
            g = jax.grad(lambda th: _data_term(*_split(th, D), *args) / N1)(start)
            gQ, gQhat = (np.asarray(x) for x in _unpack(g, D))
            off = np.where(np.eye(D, dtype=bool), 1.0, 0.5)  # upper-triangle coordinates count off-diagonals twice
            Qhat, Q = gQ * off, np.eye(D) - gQ * off + gQhat * off
            theta, n_iter = _pack(Q, Qhat), 0
        else:
            res = scipy.optimize.root(grad_fn, start, jac=jac_fn, method="hybr", options=dict(xtol=1e-14, maxfev=maxiter))
            theta, n_iter = res.x, int(res.nfev)
        grad = grad_fn(theta)
        Q, Qhat = (np.asarray(x) for x in _unpack(theta, D))
    R = np.linalg.inv(np.eye(D) + Qhat)
    return Q, R, float(np.linalg.norm(grad)), n_iter


def _split(theta, D):
    """(Q, R) from the coordinates (Q, Qhat)."""
    import jax.numpy as jnp

    Q, Qhat = _unpack(theta, D)
    return Q, jnp.linalg.inv(jnp.eye(D) + Qhat)


def action(spectrum, mt, T, lambda1, N1, Q, Qhat) -> float:
    """S(Q, Qhat) of (N1) at given order parameters."""
    with x64_context():
        return float(_action(_pack(Q, Qhat), spectrum.k, mt, spectrum.Yt, T, lambda1, N1))


def system(spectrum, mt, Q, R, T: float, lambda1: float) -> LowRankSystem:
    """The train covariance of (N1) in the form (W1) of :mod:`.lowrank`."""
    return LowRankSystem(spectrum.k, Q / lambda1, mt[:, None], (R - Q) / lambda1, T, spectrum.Yt)


def test_terms(Q, R, lambda1: float, kappa, k00, m0):
    """``(kappa', E, K00)`` of (W3): test-train covariance :math:`[Q\\otimes K + (R - Q)\\otimes m_0\\tilde m^\\top]/
    \\lambda_1` and the prior :math:`[Q k_{00} + (R - Q) m_0^2]/\\lambda_1` at test points with means ``m0`` (P0,)."""
    C = (R - Q) / lambda1
    return kappa, m0[:, None, None] * C[None], k00[:, None, None] * (Q / lambda1)[None] + (m0**2)[:, None, None] * C[None]
