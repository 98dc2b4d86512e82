r"""The single-neuron picture without the Gaussian ansatz, tested on sampled networks.

**The tilt.** With the readout v integrated out, the posterior of the first-layer weights of a network with one
hidden layer is :math:`p(W) \propto \prod_i \mathcal N(w_i; 0, 1/\lambda_0)\, p(Y\mid W)` with

.. math::
    \log p(Y\mid W) = -\tfrac12\,\mathrm{tr}\,Y^\top A^{-1} Y - \tfrac D2 \log\det A + \text{const},\qquad
    A = T\,\mathbb 1_P + \frac{1}{\lambda_1 N_1}\sum_i s_i s_i^\top,\qquad s_i = \sigma(X w_i/\sqrt{N_0}).

Adding one neuron's features ε s sᵀ/(λ1 N1) to A changes the log-likelihood at first order by
:math:`-\tfrac{\varepsilon}{2}\, s^\top G\, s` with

.. math::
    G = \frac{1}{\lambda_1 N_1}\big(D\,A^{-1} - A^{-1} Y Y^\top A^{-1}\big),                          \tag{S1}

the response of the data term to one neuron's kernel (the mean-field reading of :mod:`renormpp.theory.adaptive_kernel`'s
(A1), where the theory's :math:`Q^*` and K replace the sampled A). The single-neuron picture (Seroussi, Naveh &
Ringel, Nat. Commun. 14, 908 (2023)) says that the N1 neurons are independent draws from

.. math:: p(w) \propto \mathcal N(w; 0, 1/\lambda_0)\, \exp\big(-\tfrac12\, s(w)^\top G\, s(w)\big)          \tag{S2}

with G taken self-consistently. Here G is the **oracle** :math:`\langle G\rangle` averaged over the sampled
posterior (:func:`oracle_tilt`), and (S2) is sampled exactly (:func:`renormpp.experiments.tilted.sample_tilted`:
replica exchange on one neuron's N0 weights, across its modes), not in a Gaussian ansatz. Where (S2) with the oracle G reproduces the
sampled neurons' marginals and their kernel :math:`K_{\rm post} = \langle \tfrac1{N_1}\sum_i s_i s_i^\top\rangle`, a self-consistent mean-field
theory can work; where it does not, the neurons interact beyond a shared quadratic tilt.

**The cavity law.** (S2) is the first order of the exact conditional of one neuron given the others, which by the
Sherman-Morrison and matrix-determinant identities, with :math:`B = A_{-i}^{-1}` the inverse without neuron i and
:math:`c = \lambda_1 N_1`, is

.. math::
    p(w \mid \text{others}) \propto \mathcal N(w; 0, 1/\lambda_0)\,
    \Big(1 + \frac{s^\top B s}{c}\Big)^{-D/2} \exp\Big(\frac{\|Y^\top B s\|^2}{2\,(c + s^\top B s)}\Big). \tag{S3}

Where :math:`s^\top B s \gg c` (few neurons against many data: the features of one neuron reach directions the others
leave to the noise T, where B ~ 1/T) the first order (S2) overshoots and (S3) saturates. With B the **oracle**
cavity inverse :math:`\bar B = \langle A_{-i}^{-1}\rangle` (averaged over neurons and draws,
:func:`oracle_tilt`), (S3) is the mean-field cavity law: exact but for the fluctuations of the other neurons.

``studies/single_neuron.py`` runs the comparison on MNIST (0, 1) at P = 200 (docs/validity.md, "The single-neuron
picture").
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..network import ActivationLike, hidden, readout_given_features, x64_context


class OracleTilt(NamedTuple):
    """The oracles of a set of posterior draws: ``G`` (S1) (P, P) averaged over the draws, ``B`` the cavity inverse
    of (S3) averaged over neurons and draws, ``residual`` :math:`\\langle A^{-1}\\rangle Y` (P, D: the readout's
    residual at the training points, times 1/T where the features fit nothing), ``c`` = lambda1 N1 and the number of
    draws averaged."""

    G: np.ndarray
    B: np.ndarray
    residual: np.ndarray
    c: float
    draws: int


def features(w, X, activation: ActivationLike = "erf") -> np.ndarray:
    """:math:`s = \\sigma(X w^\\top/\\sqrt{N_0})` of weights ``w`` (..., N, N0): shape (..., P, N), float64
    (:func:`renormpp.network.hidden` in local float64)."""
    w = np.asarray(w, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    if w.shape[-1] != X.shape[1]:
        raise ValueError(f"w has {w.shape[-1]} inputs per neuron but X has N0 = {X.shape[1]} columns")
    with x64_context():  # float64 for the theory, whatever JAX's global flag
        return np.asarray(hidden({"w": w}, X, activation), dtype=np.float64)


def _one(w, X, activation):
    """The features (P,) of one neuron's weights ``w`` (N0,), in JAX."""
    return hidden({"w": w[None, :]}, X, activation)[:, 0]


def oracle_tilt(w, X, Y, *, T: float, lambda1: float = 1.0, activation: ActivationLike = "erf") -> OracleTilt:
    """The tilt (S1) and the cavity inverse of (S3) averaged over posterior draws ``w`` (draws, N1, N0) of the first
    layer (chains flattened into draws), in float64. Without neuron i, by Sherman-Morrison,
    :math:`A_{-i}^{-1} = A^{-1} + A^{-1}s_i s_i^\\top A^{-1}/(c - s_i^\\top A^{-1} s_i)`."""
    w = np.asarray(w, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    if w.ndim != 3:
        raise ValueError(f"w must be (draws, N1, N0); got shape {w.shape}")
    if not np.all(np.isfinite(w)):
        raise ValueError("w has NaN or inf entries")
    if T <= 0 or lambda1 <= 0:
        raise ValueError(f"T and lambda1 must be positive; got T = {T}, lambda1 = {lambda1}")
    n, N1 = w.shape[:2]
    P, D = Y.shape
    c = lambda1 * N1
    G, Bbar = np.zeros((P, P)), np.zeros((P, P))
    R = np.zeros((P, D))
    for one in w:
        s = features(one, X, activation)  # (P, N1)
        # A = T + s s^T / c, inverted on the N1-dimensional feature space (push-through): the readout given w
        a, L_inv, V = readout_given_features(s, Y, T=T, lambda1=lambda1)
        H = L_inv @ a.T  # (N1, P): s (cT + s^T s)^{-1} s^T = H^T H
        Ainv = (np.eye(P) - H.T @ H) / T
        r = (Y - a @ V) / T  # A^{-1} Y, the residual of the readout's mean over T
        G += (D * Ainv - r @ r.T) / c
        R += r
        As = Ainv @ s  # (P, N1)
        Bbar += Ainv + (As / (c - np.einsum("pi,pi->i", s, As))) @ As.T / N1
    return OracleTilt(G=G / n, B=Bbar / n, residual=R / n, c=float(c), draws=n)


def log_tilt(w, X, G, activation: ActivationLike = "erf"):
    """:math:`-\\tfrac12 s(w)^\\top G s(w)` of one neuron's weights ``w`` (N0,), in JAX (the factor of (S2))."""
    s = _one(w, X, activation)
    return -0.5 * s @ (G @ s)


def log_cavity(w, X, B, Y, c: float, activation: ActivationLike = "erf"):
    """The data factor of (S3) for one neuron's weights ``w`` (N0,), in JAX."""
    import jax.numpy as jnp

    s = _one(w, X, activation)
    Bs = B @ s
    x = s @ Bs
    return -0.5 * Y.shape[1] * jnp.log1p(x / c) + 0.5 * jnp.sum((Y.T @ Bs) ** 2) / (c + x)


def directions(X, Y, residual) -> dict[str, np.ndarray]:
    """The input directions (unit vectors in R^N0) on which the weights are compared: the top two principal
    directions of X (``pc1``, ``pc2``), the label direction :math:`X^\\top(y_1 - \\bar y)` of the first output
    (``labels``: for two classes the difference of the class means) and the residual direction :math:`X^\\top r_1`
    of the first output (``residual``: where a neuron's features meet the part of the labels the network has not
    fitted)."""
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    pcs = np.linalg.svd(X - X.mean(axis=0), full_matrices=False)[2]
    out = {"pc1": pcs[0], "pc2": pcs[1], "labels": X.T @ (Y[:, 0] - Y[:, 0].mean()),
           "residual": X.T @ np.asarray(residual)[:, 0]}
    return {k: u / np.linalg.norm(u) for k, u in out.items()}
