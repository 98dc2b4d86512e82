r"""The readout weights given the first layer, in closed form: Rao-Blackwellized observables, an exact Gibbs
step for v, and the marginal likelihood of w (the readout integrated out).

Given w the network :math:`f(x) = v\,\phi(x)/\sqrt{N_1}`, :math:`\phi(x) = \sigma(w x/\sqrt{N_0})`, is linear in
v, whose prior is :math:`\mathcal N(0, 1/\lambda_1)`. So f given w is a Gaussian process with the *empirical*
kernel of the hidden layer, and each output is a Bayesian linear regression with noise T:

.. math::

    K_w(x, x') = \frac{\phi(x)\cdot\phi(x')}{\lambda_1 N_1},\qquad C = K_w(X, X) + T\,\mathbb 1_P,\qquad
    \alpha = C^{-1} Y \quad (P\times D).

Then, for every output a, b (the same covariance for each output):

* :math:`E[v_a|w] = \Phi^\top\alpha_a/(\lambda_1\sqrt{N_1})`,
  :math:`{\rm Cov}(v_a|w) = \Sigma = \big(\mathbb 1 - \Phi^\top C^{-1}\Phi/(\lambda_1 N_1)\big)/\lambda_1`;
* :math:`E[v_a\cdot v_b/N_1\,|\,w] = \alpha_a^\top K_w\alpha_b/(\lambda_1 N_1)
  + \delta_{ab}\big(1 - {\rm tr}(C^{-1}K_w)/N_1\big)/\lambda_1` (the readout overlap of the paper's Eq. (4));
* :math:`E[f(x_0)|w] = K_w(x_0, X)\alpha`, :math:`{\rm Var}(f_a(x_0)|w) = K_w(x_0,x_0) - K_w(x_0,X)C^{-1}K_w(X,x_0)`,
  so :math:`E[\epsilon_g|w] = \frac1{P_0}\sum_{x_0}\big(\|y_0 - E[f(x_0)|w]\|^2 + D\,{\rm Var}(f(x_0)|w)\big)`;
* :math:`\log p(Y|w) = -\frac12{\rm tr}(Y^\top\alpha) - \frac D2\log\det C - \frac{PD}2\log 2\pi`.

Everything costs one :math:`P\times P` Cholesky factor and :math:`O(P^2 N_1)`. Averaging the conditional
expectations over draws of w (Rao-Blackwellization) never has a larger variance than averaging the
observables of draws of (w, v); sampling w from its marginal (``one_hidden_layer(..., readout="marginal")``)
removes the slow coupling between w and v altogether.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve

from .models import Activation, hidden


class Conditional(NamedTuple):
    """The Gaussian of f and v given w on the training set: features ``phi`` (P, N1), ``K`` = K_w(X, X),
    the Cholesky factor ``L`` of C = K + T 1, and ``alpha`` = C^{-1} Y."""

    phi: jax.Array
    K: jax.Array
    L: jax.Array
    alpha: jax.Array
    lambda1: float


features = hidden  # phi(X) = sigma(X w^T / sqrt(N0) [+ b]), (P, N1)


def conditional(w, X, Y, *, T: float, lambda1: float, activation: Activation = "erf", b=None) -> Conditional:
    """The quantities above for one draw of w (and the hidden biases ``b``, if the model has them)."""
    phi = features(w, X, activation, b)
    K = phi @ phi.T / (lambda1 * w.shape[0])
    L = jnp.linalg.cholesky(K + T * jnp.eye(K.shape[0], dtype=K.dtype))
    return Conditional(phi, K, L, cho_solve((L, True), Y), lambda1)


def log_marginal(cond: Conditional, Y):
    r""":math:`\log p(Y|w)`, the readout integrated out."""
    P, D = Y.shape
    return (-0.5 * jnp.sum(Y * cond.alpha) - D * jnp.sum(jnp.log(jnp.diag(cond.L)))
            - 0.5 * P * D * jnp.log(2 * jnp.pi))


def readout_overlap(cond: Conditional):
    r""":math:`E[v v^\top/N_1\,|\,w]`, (D, D)."""
    N1 = cond.phi.shape[-1]
    tr = jnp.trace(cho_solve((cond.L, True), cond.K))
    D = cond.alpha.shape[-1]
    return (cond.alpha.T @ cond.K @ cond.alpha / N1 + jnp.eye(D, dtype=cond.K.dtype) * (1.0 - tr / N1)) / cond.lambda1


def predict(cond: Conditional, phi_test):
    """Mean (P0, D) and variance (P0,) of f at test points with features ``phi_test``, given w."""
    k = phi_test @ cond.phi.T / (cond.lambda1 * cond.phi.shape[-1])
    kk = jnp.sum(phi_test**2, axis=-1) / (cond.lambda1 * cond.phi.shape[-1])
    half = jax.scipy.linalg.solve_triangular(cond.L, k.T, lower=True)
    return k @ cond.alpha, kk - jnp.sum(half**2, axis=0)


def generalization_loss(cond: Conditional, phi_test, Y_test):
    r""":math:`E[\epsilon_g|w]`: mean over the test set of :math:`\|y_0 - E f\|^2 + D\,{\rm Var} f`."""
    mean, var = predict(cond, phi_test)
    return jnp.mean(jnp.sum((Y_test - mean) ** 2, axis=-1) + Y_test.shape[-1] * var)


def sample_readout(rng_key, cond: Conditional, Y, *, T: float):
    r"""An exact draw of v (D, N1) from p(v | w, data) (Matheron's rule: a prior draw, corrected).

    :math:`v = v_0 + \big(\Phi^\top C^{-1}(Y - \Phi v_0^\top/\sqrt{N_1} - \epsilon)\big)^\top/(\lambda_1\sqrt{N_1})`
    with :math:`v_0 \sim \mathcal N(0, 1/\lambda_1)`, :math:`\epsilon \sim \mathcal N(0, T)`.
    """
    P, N1 = cond.phi.shape
    D = Y.shape[-1]
    k0, k1 = jax.random.split(rng_key)
    v0 = jax.random.normal(k0, (D, N1), cond.phi.dtype) / jnp.sqrt(cond.lambda1)
    eps = jax.random.normal(k1, (P, D), cond.phi.dtype) * jnp.sqrt(T)
    r = Y - cond.phi @ v0.T / jnp.sqrt(N1) - eps
    return v0 + (cond.phi.T @ cho_solve((cond.L, True), r)).T / (cond.lambda1 * jnp.sqrt(N1))


def rao_blackwell(X, Y, X_test, Y_test, *, T: float, lambda1: float, activation: Activation = "erf"):
    """Observables ``fn(params) -> {"eps_g", "overlap"}`` that average v out exactly given ``params["w"]``.

    A drop-in for :func:`renormpp.observables.default` (same names and shapes, the same expectations, less
    variance), for any sampler: ``Langevin(..., observables=fn)`` or ``observables.evaluate(fn, samples)``.
    """
    X, Y, X_test, Y_test = (jnp.asarray(a) for a in (X, Y, X_test, Y_test))

    def fn(params):
        if "c" in params:
            raise ValueError("rao_blackwell covers networks without an output bias c (the paper's); use "
                             "observables.default for a model with bias=True")
        w, b = params["w"], params.get("b")
        cond = conditional(w, X.astype(w.dtype), Y.astype(w.dtype), T=T, lambda1=lambda1, activation=activation, b=b)
        phi_test = features(w, X_test.astype(w.dtype), activation, b)
        return {"eps_g": generalization_loss(cond, phi_test, Y_test.astype(w.dtype)),
                "overlap": readout_overlap(cond)}

    return fn


def gibbs_fn(X, Y, *, T: float, lambda1: float, activation: Activation = "erf"):
    """The exact Gibbs update of v for :class:`numpyro.infer.HMCGibbs`: HMC/NUTS moves on w, then v ~ p(v | w).

    ``HMCGibbs(NUTS(one_hidden_layer), gibbs_fn=gibbs_fn(X, Y, T=T, lambda1=lambda1), gibbs_sites=["v"])``.
    """
    X, Y = jnp.asarray(X), jnp.asarray(Y)

    def update(rng_key, gibbs_sites, hmc_sites):
        if "c" in hmc_sites:
            raise ValueError("gibbs_fn covers networks without an output bias c (the paper's): with c, v | w is not "
                             "this conditional; sample v with w (readout='sampled') for a model with bias=True")
        w = hmc_sites["w"]
        cond = conditional(w, X.astype(w.dtype), Y.astype(w.dtype), T=T, lambda1=lambda1, activation=activation,
                           b=hmc_sites.get("b"))
        return {"v": sample_readout(rng_key, cond, Y.astype(w.dtype), T=T)}

    return update
