r"""The network, defined once: the activation table, the NNGP kernel map of each activation, and the
forward pass of equal-width networks of depth :math:`L \ge 1`.

A network of depth L with D outputs (DESIGN.md "Notation"; the paper's network is L = 1):

.. math::
    h^{(1)} = \sigma\!\big(w^{(0)} x/\sqrt{N_0}\big),\qquad
    h^{(\ell+1)} = \sigma\!\big(w^{(\ell)} h^{(\ell)}/\sqrt{N_1}\big),\qquad
    f(x) = v\,h^{(L)}(x)/\sqrt{N_1},

with :math:`w^{(0)} \in \mathbb R^{N_1\times N_0}`, :math:`w^{(\ell)} \in \mathbb R^{N_1\times N_1}` and
:math:`v \in \mathbb R^{D\times N_1}`. The weight sites are named ``w`` at depth 1 (the paper's network) and
``w0 … w{L-1}`` at depth L > 1 (:func:`layer_sites`); optional hidden biases ``b`` (``b0 …``) add to the
pre-activations and an output bias ``c`` to f.

The one-hidden-layer convolutional network has the features :func:`conv_hidden`,
:math:`\sigma(w_c\cdot x_i/m)` of C shared m × m filters on the n_p non-overlapping patches of square images, and
the same readout, :math:`f = v\,\phi/\sqrt{C n_p}` (:func:`forward` takes any architecture's features).

Every activation is one :class:`Activation` in :data:`ACTIVATIONS`: its JAX function (used by the models,
observables and the readout), its NNGP kernel map :math:`\kappa(C_{11}, C_{22}, C_{12}) = \mathbb E[\sigma(h_1)
\sigma(h_2)]` for :math:`(h_1, h_2) \sim \mathcal N(0, C)` (paper Eq. (2); closed form, or Gauss-Hermite
quadrature when there is none), and whether it is odd (the paper's effective action, Eq. (1), holds for odd
activations). Adding an activation is one entry. Closed forms, with :math:`\cos\theta = C_{12}/\sqrt{C_{11}C_{22}}`:

* erf:    :math:`\kappa = \frac{2}{\pi}\arcsin\frac{2C_{12}}{\sqrt{(1+2C_{11})(1+2C_{22})}}`
* relu:   :math:`\kappa = \frac{\sqrt{C_{11}C_{22}}}{2\pi}(\sin\theta + (\pi-\theta)\cos\theta)`
* linear: :math:`\kappa = C_{12}`

They are evaluated with ``arctan2`` of a sine computed from a determinant, which stays accurate near
:math:`x = \pm x'` where ``arcsin``/``arccos`` lose half the digits (neural-tangents' ``stax.Erf``/``stax.Relu``).
"""
from __future__ import annotations

import math
import re
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Callable, Union

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import erf as _erf

from .patches import Patches


# ---- kernel maps -----------------------------------------------------------------------------------------------
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


def x64_context():
    """Local float64 for JAX code run on the host (never flips the global flag)."""
    try:
        return jax.enable_x64(True)
    except AttributeError:  # pragma: no cover - older jax
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

    with x64_context():
        for lo in range(0, c12.size, step):
            sl = slice(lo, lo + step)
            f1 = act(s1[sl, None] * z[None, :])  # (n, order) over z1
            h2 = s2[sl, None, None] * (rho[sl, None, None] * z[None, :, None]
                                        + rho_c[sl, None, None] * z[None, None, :])
            f2 = act(h2) @ wts  # (n, order) over z1, integrated over z2
            out[sl] = np.einsum("nk,nk,k->n", f1, f2, wts)
    return out.reshape(shape)


def _odd_on_grid(fn: Callable, lo: float = -6.0, hi: float = 6.0, n: int = 257) -> bool:
    """sigma(-h) = -sigma(h) on a grid (for activations given as functions)."""
    h = np.linspace(lo, hi, n)
    with x64_context():
        a = np.asarray(fn(h), dtype=np.float64)
        b = np.asarray(fn(-h), dtype=np.float64)
    return bool(np.allclose(a, -b, rtol=1e-10, atol=1e-12 * (1.0 + np.abs(a).max())))


# ---- the activation table --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Activation:
    r"""One activation: its name, JAX function, NNGP kernel map, mean and parity.

    ``kappa(c11, c22, c12)`` is the closed-form kernel map on float64 numpy arrays, or None: then
    :meth:`kernel_map` integrates ``np_fn`` (or ``fn`` in float64) by Gauss-Hermite quadrature. ``np_fn`` is the
    activation on numpy arrays (:meth:`numpy`), or None: then ``fn`` runs in float64. ``mean_fn(c)``
    is the closed form of :math:`\mathbb E[\sigma(h)]`, :math:`h \sim \mathcal N(0, c)` (zero for odd
    activations), or None: then :meth:`mean` integrates by quadrature.
    """

    name: str
    fn: Callable
    odd: bool
    kappa: Callable | None = None
    np_fn: Callable | None = None
    mean_fn: Callable | None = None

    @property
    def closed_form(self) -> bool:
        return self.kappa is not None

    def kernel_map(self, c11, c22, c12, order: int = 64) -> np.ndarray:
        r""":math:`\mathbb E[\sigma(h_1)\sigma(h_2)]`, :math:`(h_1, h_2) \sim \mathcal N(0, C)`, elementwise, float64."""
        if self.kappa is not None:
            return self.kappa(*(np.asarray(c, dtype=np.float64) for c in (c11, c22, c12)))
        return gauss_hermite_kappa(self.np_fn or self.fn, c11, c22, c12, order=order)

    def mean(self, c, order: int = 64) -> np.ndarray:
        r""":math:`m(c) = \mathbb E[\sigma(h)]` for :math:`h \sim \mathcal N(0, c)`, elementwise, float64 (zero for odd
        activations; the non-odd theory's mean kernel is :math:`m(x) m(x')`)."""
        c = np.asarray(c, dtype=np.float64)
        if self.odd:
            return np.zeros_like(c)
        if self.mean_fn is not None:
            return self.mean_fn(c)
        z, wts = np.polynomial.hermite_e.hermegauss(order)
        return self.numpy(np.sqrt(c)[..., None] * z) @ (wts / wts.sum())

    def numpy(self, h) -> np.ndarray:
        r""":math:`\sigma(h)` elementwise on a numpy array, as float64 numpy: ``np_fn``, or ``fn`` in local float64."""
        with x64_context():
            return np.asarray((self.np_fn or self.fn)(h), dtype=np.float64)

    def __call__(self, h):
        return self.fn(h)


#: The named activations. Adding one is one entry here (give ``kappa`` if the kernel map has a closed form).
ACTIVATIONS: dict[str, Activation] = {a.name: a for a in (
    Activation("erf", jax.scipy.special.erf, odd=True, kappa=_kappa_erf, np_fn=_erf),
    Activation("relu", jax.nn.relu, odd=False, kappa=_kappa_relu, np_fn=lambda h: np.maximum(h, 0.0),
               mean_fn=lambda c: np.sqrt(c / (2.0 * np.pi))),
    Activation("linear", lambda h: h, odd=True, kappa=_kappa_linear),
    Activation("tanh", jnp.tanh, odd=True, np_fn=np.tanh),
)}

#: The names of the odd activations of :data:`ACTIVATIONS`, in its order: those the paper's effective action
#: (Eq. (1)) holds for, read off each record's ``odd``.
ODD_ACTIVATIONS: tuple[str, ...] = tuple(name for name, a in ACTIVATIONS.items() if a.odd)

ActivationLike = Union[str, Callable, Activation]


def get_activation(activation: ActivationLike) -> Activation:
    """The :class:`Activation` of a name in :data:`ACTIVATIONS`, or of an elementwise function (kernel map by
    quadrature, parity checked on a grid); an :class:`Activation` is returned as it is.

    Parameters
    ----------
    activation : str, callable or Activation
        A name of :data:`ACTIVATIONS`, an elementwise function, or an :class:`Activation`.

    Returns
    -------
    Activation

    Raises
    ------
    ValueError
        For an unknown name.
    """
    if isinstance(activation, Activation):
        return activation
    if isinstance(activation, str) and activation in ACTIVATIONS:
        return ACTIVATIONS[activation]
    if callable(activation):
        name = getattr(activation, "__name__", None) or type(activation).__name__
        return Activation(name, activation, odd=_odd_on_grid(activation))
    raise ValueError(
        f"unknown activation {activation!r}; choose one of {', '.join(map(repr, ACTIVATIONS))} "
        "or pass an elementwise function (its kernel is integrated by Gauss-Hermite quadrature)"
    )


def activation_name(activation: ActivationLike) -> str:
    """A name to show or store: the table's name, or the function's name."""
    return get_activation(activation).name


# ---- the forward pass ------------------------------------------------------------------------------------------
def layer_sites(depth: int) -> tuple[str, ...]:
    """Names of the hidden weight sites: ``("w",)`` at depth 1 (the paper's network), else ``("w0", …, "w{L-1}")``."""
    if int(depth) != depth or depth < 1:
        raise ValueError(f"depth must be a positive integer; got {depth!r}")
    return ("w",) if depth == 1 else tuple(f"w{ell}" for ell in range(depth))


def bias_sites(depth: int) -> tuple[str, ...]:
    """Names of the hidden bias sites, matching :func:`layer_sites`: ``("b",)`` or ``("b0", …)``."""
    return tuple("b" + name[1:] for name in layer_sites(depth))


_DEEP = re.compile(r"w(\d+)$")


def depth_of(params: dict) -> int:
    """The depth of a draw ``params`` from its weight sites (``w``, or ``w0 … w{L-1}``)."""
    if "w" in params:
        return 1
    depth = sum(1 for k in params if _DEEP.match(k))
    if depth == 0 or any(f"w{ell}" not in params for ell in range(depth)):
        raise ValueError(f"params must hold the hidden weights 'w' or 'w0', 'w1', …; got sites {sorted(params)}")
    return depth


def check_input_width(params: dict, X, name: str = "X") -> None:
    """A ValueError unless the rows of ``X`` have as many features as the first layer of ``params`` takes."""
    w = params[layer_sites(depth_of(params))[0]]
    if X.shape[-1] != w.shape[-1]:
        raise ValueError(f"{name} has {X.shape[-1]} features per row but the network's first layer takes N0 = "
                         f"{w.shape[-1]} inputs; give inputs of the training data's width")


def hidden(params: dict, X, activation: ActivationLike = "erf"):
    r"""Features of the last hidden layer :math:`h^{(L)}(X)`, shape (P, N1), of one draw ``params``.

    Each layer is :math:`\sigma(h W^\top/\sqrt{\text{fan-in}} [+ b])`; ``params`` holds ``w`` (``w0 …``) and
    optionally ``b`` (``b0 …``), as :func:`layer_sites` and :func:`bias_sites` name them.

    Parameters
    ----------
    params : dict
        One draw's sites: ``w`` (``w0 …``), optionally ``b`` (``b0 …``), and for the outputs ``v`` (and ``c``).
    X : array_like, shape (P, N0)
        Inputs, one per row.
    activation : str or callable, default "erf"
        The network's activation (:func:`get_activation`).

    Returns
    -------
    jax.Array, shape (P, N1)
    """
    act = get_activation(activation).fn
    depth = depth_of(params)
    h = X
    for w_name, b_name in zip(layer_sites(depth), bias_sites(depth)):
        w = params[w_name]
        h = h @ jnp.swapaxes(w, -1, -2) / np.sqrt(w.shape[-1])
        if b_name in params:
            h = h + params[b_name]
        h = act(h)
    return h


# ---- the readout given the features ---------------------------------------------------------------------------
def readout_given_features(phi, Y, *, T, lambda1, inverse_factor=None):
    r"""The Gaussian of the readout v given the hidden weights, from the features ``phi`` (..., P, n) the readout sees
    and the labels ``Y`` (P, D), in the :math:`n\times n` Gram matrix: ``(A, L_inv, V)``.

    The network :math:`f = v\,\phi/\sqrt n` with :math:`v \sim \mathcal N(0, 1/\lambda_1)` and noise T is, given the
    hidden weights, a Bayesian linear regression on the features. With :math:`A = \Phi/\sqrt{\lambda_1 n}` (P, n),
    :math:`G = A^\top A + T\,\mathbb 1_n` and :math:`L^{-1}` the inverse of G's lower Cholesky factor
    (:math:`G^{-1} = L^{-\top}L^{-1}`), for each output a

    .. math::
        \sqrt{\lambda_1}\,\mathbb E[v_a\mid w] = V_{:a},\quad V = G^{-1}A^\top Y,\qquad
        \lambda_1\,{\rm Cov}(v_a\mid w) = T\,G^{-1},\qquad
        C^{-1} = \big(\mathbb 1_P - A\,G^{-1}A^\top\big)/T,

    the last the inverse of :math:`C = AA^\top + T\,\mathbb 1_P` (push-through; C is the data-space form of
    :mod:`renormpp.readout`). Each neuron's readout energy :math:`\mathbb E[\|v_i\|^2\mid w] = (\|V_i\|^2 +
    D\,T\,(G^{-1})_{ii})/\lambda_1` (:mod:`renormpp.mcstats.specialists`), the readout overlap and the predictions
    (:func:`renormpp.readout.weight_space_observables`) and the oracle tilt (:mod:`renormpp.theory.single_neuron`)
    follow from these three.

    ``phi`` is a numpy array (leading axes: a stack of draws) or a JAX array; ``inverse_factor(G)`` gives
    :math:`L^{-1}` (default: the inverse of ``linalg.cholesky(G)`` of numpy or JAX, as ``phi`` is).
    """
    xp = np if isinstance(phi, np.ndarray) else jnp
    n = phi.shape[-1]
    A = phi / xp.sqrt(lambda1 * n)
    At = xp.swapaxes(A, -1, -2)
    G = At @ A + T * xp.eye(n, dtype=A.dtype)
    L_inv = inverse_factor(G) if inverse_factor is not None else xp.linalg.inv(xp.linalg.cholesky(G))
    return A, L_inv, xp.swapaxes(L_inv, -1, -2) @ (L_inv @ (At @ Y))


def conv_geometry(N0: int, patch_pixels: int):
    """The :class:`renormpp.patches.Patches` of a one-hidden-layer CNN read off its shapes: square images of
    ``N0`` = s² pixels and filters of ``patch_pixels`` = m² weights; a ValueError where either is not a square."""
    side, m = math.isqrt(int(N0)), math.isqrt(int(patch_pixels))
    if side * side != N0:
        raise ValueError(f"X has {N0} columns, which is not a square image (side x side pixels, row-major): the "
                         "convolutional network takes square single-channel images")
    if m * m != patch_pixels:
        raise ValueError(f"the filters w have {patch_pixels} columns, which is not a square patch (m x m pixels)")
    return Patches(side, m)


def conv_hidden(params: dict, X, activation: ActivationLike = "erf"):
    r"""Features of a one-hidden-layer convolutional network, shape (P, C n_p), of one draw ``params``.

    The images (rows of X, :math:`N_0 = s^2` pixels) are cut into :math:`n_p = (s/m)^2` non-overlapping
    :math:`m\times m` patches :math:`x_i` (:class:`renormpp.patches.Patches`); filter :math:`w_c` (row c of ``w``,
    (C, m²)) is shared by every patch:

    .. math::
        h_{ci}(x) = w_c\cdot x_i/m,\qquad \phi_{c\,n_p + i}(x) = \sigma(h_{ci}(x))

    (channel-major: feature c n_p + i). The readout :math:`f(x) = v\,\phi(x)/\sqrt{C n_p}` (:func:`forward`) takes
    v as (D, C, n_p) or (D, C n_p). The geometry is read off the shapes (:func:`conv_geometry`), as :func:`hidden`
    reads the depth off ``params``.

    Parameters
    ----------
    params : dict
        One draw's filters ``w`` (C, m²).
    X : array_like, shape (P, s*s)
        Images, one per row.
    activation : str or callable, default "erf"
        The network's activation (:func:`get_activation`).

    Returns
    -------
    jax.Array, shape (P, C n_p)
    """
    w = params["w"]
    geometry = conv_geometry(X.shape[-1], w.shape[-1])
    h = jnp.einsum("pik,ck->pci", geometry.extract(X), w) / geometry.patch
    return get_activation(activation).fn(h).reshape(X.shape[0], -1)


def forward(params: dict, X, activation: ActivationLike = "erf", features: Callable = hidden):
    r"""Network outputs :math:`f(X) = v\,\phi(X)/\sqrt{n}\,[+\,c]` of shape (P, D) for one draw ``params``:
    :math:`\phi = h^{(L)}` (:func:`hidden`, n = N1) for the fully connected network, or another architecture's
    ``features`` (:mod:`renormpp.architectures`; :func:`conv_hidden`, n = C n_p). The readout ``v`` is (D, n), or
    (D, ...) with n entries per output (the CNN's (D, C, n_p)).

    Parameters
    ----------
    params : dict
        One draw's sites: ``w`` (``w0 …``), optionally ``b`` (``b0 …``), and for the outputs ``v`` (and ``c``).
    X : array_like, shape (P, N0)
        Inputs, one per row.
    activation : str or callable, default "erf"
        The network's activation (:func:`get_activation`).
    features : callable, default hidden
        ``features(params, X, activation)``, what the readout sees.

    Returns
    -------
    jax.Array, shape (P, D)
    """
    v = params["v"]
    phi = features(params, X, activation)
    f = phi @ v.reshape(v.shape[0], -1).T / np.sqrt(phi.shape[-1])
    if "c" in params:
        f = f + params["c"]
    return f


def check_width(N1) -> int:
    """``N1`` as an int if it is a positive integer; otherwise a ValueError."""
    if isinstance(N1, bool) or not isinstance(N1, (int, np.integer, float)) or int(N1) != N1 or N1 < 1:
        raise ValueError(f"N1 must be a positive integer (hidden units); got {N1!r}")
    return int(N1)
