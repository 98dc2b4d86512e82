r"""NNGP kernels of a one-hidden-layer network, in float64.

For pre-activations :math:`h = w x / \sqrt{N_0}` with :math:`w \sim \mathcal N(0, 1/\lambda_0)`,
the pair :math:`(h(x), h(x'))` is Gaussian with covariance

.. math::  C(x, x') = \frac{x \cdot x'}{\lambda_0 N_0},

and the NNGP kernel is :math:`K(x, x') = \mathbb E[\sigma(h(x))\,\sigma(h(x'))]`
(DESIGN.md "Notation"; the paper writes it :math:`K^{\rm NNGP}`, Eq. (2)). Closed forms:

* erf:    :math:`K = \frac{2}{\pi}\arcsin\frac{2C_{12}}{\sqrt{(1+2C_{11})(1+2C_{22})}}`
* relu:   :math:`K = \frac{\sqrt{C_{11}C_{22}}}{2\pi}(\sin\theta + (\pi-\theta)\cos\theta)`,
  :math:`\cos\theta = C_{12}/\sqrt{C_{11}C_{22}}`
* linear: :math:`K = C_{12}`

The closed forms are evaluated with ``arctan2`` of a sine computed from a determinant, which
stays accurate near :math:`x = \pm x'` where ``arcsin``/``arccos`` lose half the digits
(the same trick as neural-tangents' ``stax.Erf``/``stax.Relu``). Any other elementwise
activation is integrated by bivariate Gauss-Hermite quadrature (:func:`gauss_hermite_kappa`).
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import Callable, Union

import numpy as np

from ._checks import positive

Activation = Union[str, Callable]

CLOSED_FORM = ("erf", "relu", "linear")
#: Named activations handled by quadrature of the numpy function given here.
QUADRATURE = {"tanh": np.tanh}
#: Named activations that are odd, sigma(-h) = -sigma(h): the paper's action holds for these.
ODD_NAMED = ("erf", "linear", "tanh")
ACTIVATIONS = CLOSED_FORM + tuple(QUADRATURE)


def _kappa_erf(c11, c22, c12):
    # arcsin(u) with u = 2 c12 / sqrt(a b) equals arctan2(2 c12, sqrt(a b - 4 c12^2));
    # a b - 4 c12^2 >= 0 by Cauchy-Schwarz and is exact (1 + 4 c11) on the diagonal.
    ab = (1.0 + 2.0 * c11) * (1.0 + 2.0 * c22)
    return (2.0 / np.pi) * np.arctan2(2.0 * c12, np.sqrt(np.maximum(ab - 4.0 * c12**2, 0.0)))


def _kappa_relu(c11, c22, c12):
    # sqrt(c11 c22) sin(theta) from the determinant; theta by arctan2 (exact at theta = 0, pi)
    sin_norm = np.sqrt(np.maximum(c11 * c22 - c12**2, 0.0))
    theta = np.arctan2(sin_norm, c12)
    return (sin_norm + (np.pi - theta) * c12) / (2.0 * np.pi)


def _kappa_linear(c11, c22, c12):
    return np.broadcast_arrays(c11, c22, c12)[2].astype(np.float64, copy=True)


_CLOSED = {"erf": _kappa_erf, "relu": _kappa_relu, "linear": _kappa_linear}


def _x64_context():
    """Local float64 for jax-based activations (never flips the global flag)."""
    try:
        import jax

        return jax.enable_x64(True)
    except (ImportError, AttributeError):  # pragma: no cover - jax is a dependency
        return nullcontext()


def gauss_hermite_kappa(fn: Callable, c11, c22, c12, order: int = 64, chunk: int = 2**22):
    r""":math:`\mathbb E[\sigma(h_1)\sigma(h_2)]` for :math:`(h_1,h_2)\sim\mathcal N(0,C)` by quadrature.

    Writes :math:`h_1 = \sqrt{C_{11}}\,z_1`, :math:`h_2 = \sqrt{C_{22}}(\rho z_1 + \sqrt{1-\rho^2}z_2)`
    with :math:`\rho = C_{12}/\sqrt{C_{11}C_{22}}` and integrates :math:`z_1, z_2 \sim \mathcal N(0,1)`
    on a tensor grid of ``order`` probabilists' Gauss-Hermite nodes each, at a cost of ``order**2``
    activation calls per pair. Exact for polynomial activations of degree < 2 ``order``. For
    saturating ones the nodes must resolve the scale :math:`1/\sqrt{C}`: for erf the error is about
    2e-5 at ``order=48`` and 1e-8 at ``order=96`` for :math:`C \approx 1`, and 100 times larger at
    :math:`C \approx 4`. Activations with a kink (relu) converge only algebraically (~1e-3).
    Arguments broadcast against each other; ``fn`` must act elementwise on float64 arrays.
    """
    c11, c22, c12 = np.broadcast_arrays(*(np.asarray(c, dtype=np.float64) for c in (c11, c22, c12)))
    shape = c12.shape
    c11, c22, c12 = c11.ravel(), c22.ravel(), c12.ravel()
    z, wts = np.polynomial.hermite_e.hermegauss(order)
    wts = wts / wts.sum()
    s1, s2 = np.sqrt(c11), np.sqrt(c22)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where(s1 * s2 > 0, c12 / (s1 * s2), 0.0)
    rho = np.clip(rho, -1.0, 1.0)
    rho_c = np.sqrt(1.0 - rho**2)
    out = np.empty(c12.size)
    step = max(1, chunk // (order * order))

    def act(h):
        return np.asarray(fn(h), dtype=np.float64)

    with _x64_context():
        for lo in range(0, c12.size, step):
            sl = slice(lo, lo + step)
            f1 = act(s1[sl, None] * z[None, :])  # (n, order) over z1
            h2 = s2[sl, None, None] * (rho[sl, None, None] * z[None, :, None]
                                        + rho_c[sl, None, None] * z[None, None, :])
            f2 = act(h2) @ wts  # (n, order) over z1, integrated over z2
            out[sl] = np.einsum("nk,nk,k->n", f1, f2, wts)
    return out.reshape(shape)


def is_odd(activation: Activation, lo: float = -6.0, hi: float = 6.0, n: int = 257) -> bool:
    """True if sigma(-h) = -sigma(h) for the activation (checked on a grid for callables)."""
    if isinstance(activation, str):
        return activation in ODD_NAMED
    h = np.linspace(lo, hi, n)
    with _x64_context():
        a = np.asarray(activation(h), dtype=np.float64)
        b = np.asarray(activation(-h), dtype=np.float64)
    return bool(np.allclose(a, -b, rtol=1e-10, atol=1e-12 * (1.0 + np.abs(a).max())))


def check_activation(activation: Activation) -> Activation:
    """Return ``activation`` if it is a known name or a callable; otherwise raise ValueError."""
    if callable(activation):
        return activation
    if isinstance(activation, str) and activation in ACTIVATIONS:
        return activation
    raise ValueError(
        f"unknown activation {activation!r}; choose one of {', '.join(map(repr, ACTIVATIONS))} "
        "or pass an elementwise function (it is integrated by Gauss-Hermite quadrature)"
    )


def kappa(activation: Activation, c11, c22, c12, order: int = 64):
    """Kernel value from the pre-activation covariance entries, elementwise (float64)."""
    activation = check_activation(activation)
    if isinstance(activation, str) and activation in _CLOSED:
        args = (np.asarray(c, dtype=np.float64) for c in (c11, c22, c12))
        return _CLOSED[activation](*args)
    fn = QUADRATURE[activation] if isinstance(activation, str) else activation
    return gauss_hermite_kappa(fn, c11, c22, c12, order=order)


def _as_inputs(X, name: str) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"{name} must be a 2-d array (n, N0); got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{name} contains NaN or inf; clean or impute the inputs first")
    return X


def _check_lambda0(lambda0) -> float:
    return positive("lambda0", lambda0, "prior precision of w")


def nngp(X1, X2=None, *, lambda0: float = 1.0, activation: Activation = "erf", order: int = 64):
    r"""NNGP kernel matrix :math:`K(X_1, X_2)` of shape (n1, n2), float64.

    Parameters
    ----------
    X1, X2 : arrays (n1, N0) and (n2, N0). ``X2=None`` means ``X2 = X1`` (the result is then
        exactly symmetric).
    lambda0 : prior precision of the first-layer weights; :math:`C = x\cdot x'/(\lambda_0 N_0)`.
    activation : ``"erf"``, ``"relu"``, ``"linear"`` (closed forms), ``"tanh"``, or an elementwise
        callable (Gauss-Hermite quadrature with ``order`` nodes per dimension).
    """
    activation = check_activation(activation)
    lambda0 = _check_lambda0(lambda0)
    X1 = _as_inputs(X1, "X1")
    same = X2 is None
    X2 = X1 if same else _as_inputs(X2, "X2")
    if X1.shape[1] != X2.shape[1]:
        raise ValueError(f"X1 and X2 must have the same number of features N0; got {X1.shape[1]} and {X2.shape[1]}")
    n0 = X1.shape[1]
    c12 = X1 @ X2.T / (lambda0 * n0)
    c11 = np.einsum("ij,ij->i", X1, X1) / (lambda0 * n0)
    c22 = c11 if same else np.einsum("ij,ij->i", X2, X2) / (lambda0 * n0)
    if same:
        np.fill_diagonal(c12, c11)
    # overwrite C12 with K block by block: the kernel stage holds one n1 x n2 matrix, not five
    K = c12
    rows = max(1, 2**20 // max(K.shape[1], 1))
    for lo in range(0, K.shape[0], rows):
        sl = slice(lo, lo + rows)
        K[sl] = kappa(activation, c11[sl, None], c22[None, :], K[sl], order=order)
    if same and not (isinstance(activation, str) and activation in _CLOSED):
        K = 0.5 * (K + K.T)  # the closed forms are symmetric in (x, x') to the last bit already
    return K


def nngp_diag(X, *, lambda0: float = 1.0, activation: Activation = "erf", order: int = 64):
    """Diagonal K(x, x) for each row of X, shape (n,), without forming the n x n matrix."""
    activation = check_activation(activation)
    lambda0 = _check_lambda0(lambda0)
    X = _as_inputs(X, "X")
    c = np.einsum("ij,ij->i", X, X) / (lambda0 * X.shape[1])
    return kappa(activation, c, c, c, order=order)
