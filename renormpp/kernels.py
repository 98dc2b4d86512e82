r"""NNGP kernel matrices of equal-width networks of depth L, in float64.

For pre-activations :math:`h = w x / \sqrt{N_0}` with :math:`w \sim \mathcal N(0, 1/\lambda_0)`,
the pair :math:`(h(x), h(x'))` is Gaussian with covariance

.. math::  C^{(1)}(x, x') = \frac{x \cdot x'}{\lambda_0 N_0},

and the NNGP kernel of one hidden layer is :math:`K^{(1)} = \kappa(C^{(1)}) = \mathbb E[\sigma(h(x))\,\sigma(h(x'))]`
(DESIGN.md "Notation"; the paper writes it :math:`K^{\rm NNGP}`, Eq. (2)). Deeper layers compose the map
(DESIGN.md "Beyond one hidden layer"):

.. math::  C^{(\ell+1)} = K^{(\ell)}/\lambda_\ell, \qquad K^{(\ell+1)} = \kappa(C^{(\ell+1)}),

with :math:`\lambda_\ell` the prior precision of the weights of layer :math:`\ell`. The kernel map
:math:`\kappa` of each activation (closed form, or Gauss-Hermite quadrature) is in :mod:`renormpp.network`.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ._checks import matrix, positive
from .network import ActivationLike, get_activation


def _as_inputs(X, name: str) -> np.ndarray:
    return matrix(X, name, "n", "N0 features")


def hidden_lambdas(lambda0: float | Sequence[float], depth: int = 1) -> tuple[float, ...]:
    r"""The prior precisions :math:`(\lambda_0, …, \lambda_{L-1})` of the L hidden layers' weights from
    ``lambda0``: one number for every layer, or a sequence of ``depth`` numbers."""
    if int(depth) != depth or depth < 1:
        raise ValueError(f"depth must be a positive integer; got {depth!r}")
    if np.ndim(lambda0) == 0:
        return (positive("lambda0", lambda0, "prior precision of the hidden-layer weights"),) * int(depth)
    lams = tuple(lambda0)
    if len(lams) != depth:
        raise ValueError(f"lambda0 must be one number or {depth} (one per hidden layer) at depth {depth}; "
                         f"got {len(lams)}")
    return tuple(positive(f"lambda0[{i}]", lam, "prior precision of a hidden layer") for i, lam in enumerate(lams))


def nngp(X1, X2=None, *, lambda0: float | Sequence[float] = 1.0, activation: ActivationLike = "erf",
         depth: int = 1, order: int = 64):
    r"""NNGP kernel matrix :math:`K^{(L)}(X_1, X_2)` of shape (n1, n2), float64.

    Parameters
    ----------
    X1 : array_like, shape (n1, N0)
        Inputs.
    X2 : array_like, shape (n2, N0), optional
        Inputs; None means ``X2 = X1`` (the result is then exactly symmetric).
    lambda0 : float or sequence of float, default 1.0
        Prior precision of the hidden-layer weights, :math:`C^{(1)} = x\cdot x'/(\lambda_0 N_0)`; at depth L one
        number for every layer or L numbers :math:`(\lambda_0, …, \lambda_{L-1})`.
    activation : str or callable, default "erf"
        ``"erf"``, ``"relu"``, ``"linear"`` (closed forms), ``"tanh"``, or an elementwise callable (Gauss-Hermite
        quadrature with ``order`` nodes per dimension).
    depth : int, default 1
        Number of hidden layers L; the kernel map is composed L times.
    order : int, default 64
        Gauss-Hermite nodes per dimension, for activations without a closed form.

    Returns
    -------
    numpy.ndarray, shape (n1, n2)
        The kernel, float64.
    """
    act = get_activation(activation)
    lams = hidden_lambdas(lambda0, depth)
    X1 = _as_inputs(X1, "X1")
    same = X2 is None
    X2 = X1 if same else _as_inputs(X2, "X2")
    if X1.shape[1] != X2.shape[1]:
        raise ValueError(f"X1 and X2 must have the same number of features N0; got {X1.shape[1]} and {X2.shape[1]}")
    n0 = X1.shape[1]
    K = X1 @ X2.T / (lams[0] * n0)
    c11 = np.einsum("ij,ij->i", X1, X1) / (lams[0] * n0)
    c22 = c11 if same else np.einsum("ij,ij->i", X2, X2) / (lams[0] * n0)
    if same:
        np.fill_diagonal(K, c11)
    rows = max(1, 2**20 // max(K.shape[1], 1))
    for ell in range(depth):
        if ell:  # C^(l+1) = K^(l) / lambda_l, in place
            K /= lams[ell]
            c11, c22 = (act.kernel_map(c, c, c, order=order) / lams[ell] for c in (c11, c22))
        # overwrite C with K block by block: the kernel stage holds one n1 x n2 matrix, not five
        for lo in range(0, K.shape[0], rows):
            sl = slice(lo, lo + rows)
            K[sl] = act.kernel_map(c11[sl, None], c22[None, :], K[sl], order=order)
        if same and not act.closed_form:
            K = 0.5 * (K + K.T)  # the closed forms are symmetric in (x, x') to the last bit already
    return K


def nngp_diag(X, *, lambda0: float | Sequence[float] = 1.0, activation: ActivationLike = "erf", depth: int = 1,
              order: int = 64):
    """Diagonal :math:`K^{(L)}(x, x)` for each row of X, shape (n,), without forming the n x n matrix.

    Parameters
    ----------
    X : array_like, shape (n, N0)
        Inputs.
    lambda0 : float or sequence of float, default 1.0
        Prior precision of the hidden-layer weights, as for :func:`nngp`.
    activation : str or callable, default "erf"
        As for :func:`nngp`.
    depth : int, default 1
        Number of hidden layers L.
    order : int, default 64
        Gauss-Hermite nodes, for activations without a closed form.

    Returns
    -------
    numpy.ndarray, shape (n,)
    """
    act = get_activation(activation)
    lams = hidden_lambdas(lambda0, depth)
    X = _as_inputs(X, "X")
    c = np.einsum("ij,ij->i", X, X) / (lams[0] * X.shape[1])
    for ell in range(depth):
        k = act.kernel_map(c, c, c, order=order)
        if ell + 1 < depth:
            c = k / lams[ell + 1]
    return k


def nngp_mean(X, *, lambda0: float = 1.0, activation: ActivationLike = "erf", order: int = 64):
    r"""The mean feature :math:`m(x) = \mathbb E[\sigma(h(x))]`, :math:`h(x) \sim \mathcal N(0, C(x, x))`, for each row of
    X, shape (n,): zero for odd activations. One hidden layer. The non-odd theory's mean kernel is
    :math:`M = m m^\top`, and :math:`K - M` is the covariance of the features.

    Parameters
    ----------
    X : array_like, shape (n, N0)
        Inputs.
    lambda0 : float, default 1.0
        Prior precision of the hidden-layer weights.
    activation : str or callable, default "erf"
        As for :func:`nngp`.
    order : int, default 64
        Gauss-Hermite nodes, for activations without a closed form.

    Returns
    -------
    numpy.ndarray, shape (n,)
    """
    act = get_activation(activation)
    (lam,) = hidden_lambdas(lambda0, 1)
    X = _as_inputs(X, "X")
    return act.mean(np.einsum("ij,ij->i", X, X) / (lam * X.shape[1]), order=order)
