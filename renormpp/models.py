r"""The finite network as a NumPyro model: :func:`mlp` (L equal-width hidden layers), the paper's network,
:func:`one_hidden_layer` (``mlp`` at depth 1), and the one-hidden-layer convolutional network :func:`cnn`.

:math:`f(x) = v\,\sigma(w x/\sqrt{N_0})/\sqrt{N_1}` (:func:`renormpp.network.forward`) with
:math:`w \in \mathbb R^{N_1\times N_0}`, :math:`w \sim \mathcal N(0, 1/\lambda_0)`, :math:`v \in \mathbb R^{D\times N_1}`,
:math:`v \sim \mathcal N(0, 1/\lambda_1)` and the observation :math:`y \sim \mathcal N(f, T)`, so that the posterior is
the paper's Gibbs measure :math:`\propto \mathrm{prior}\cdot e^{-\mathcal L/T}` with
:math:`\mathcal L = \frac12\sum_\mu\|y^\mu - f(x^\mu)\|^2` (paper, "Problem setting"). The potential energy NumPyro
samples is :math:`U = \mathcal L/T + \lambda_0\|w\|^2/2 + \lambda_1\|v\|^2/2` + const.

At depth L the hidden weights are ``w0`` (N1, N0) and ``w1 … w{L-1}`` (N1, N1), each layer scaled by
:math:`1/\sqrt{\text{fan-in}}` (:func:`renormpp.network.hidden`), with priors :math:`\mathcal N(0, 1/\lambda_\ell)` and
:math:`\lambda_L` for v.

Plates name the axes, so that ``arviz.from_numpyro`` labels them (:data:`DIMS`): ``w`` (``w0``) has dims (hidden,
input), ``w1 …`` (hidden, hidden_in), ``v`` (output, hidden), ``y`` and ``f`` (data, output).

:func:`cnn` is the one-hidden-layer convolutional network: C shared filters on the non-overlapping
m × m patches of square images, a readout per (output, channel, patch); its dims are :data:`CNN_DIMS`.
"""
from __future__ import annotations

import jax
import numpy as np
import numpyro
import numpyro.distributions as dist

from . import readout
from ._checks import positive
from .network import ActivationLike, bias_sites, check_width, conv_hidden, forward, get_activation, layer_sites
from .patches import Patches

#: Named dimensions of each site, for ArviZ (``rp.diagnostics.to_datatree`` and ``az.from_numpyro``).
DIMS = {"w": ["hidden", "input"], "v": ["output", "hidden"], "b": ["hidden"], "c": ["output"],
        "y": ["data", "output"], "f": ["data", "output"], "w0": ["hidden", "input"], "b0": ["hidden"],
        **{f"w{ell}": ["hidden", "hidden_in"] for ell in range(1, 16)}, **{f"b{ell}": ["hidden"] for ell in range(1, 16)}}


def _data(A, name: str):
    """Inputs or labels as an array (nested lists are converted); NaN or inf refused where the values are known
    (not under a jit of the model's arguments)."""
    if not hasattr(A, "ndim"):
        A = np.asarray(A, dtype=float)
    if not isinstance(A, jax.core.Tracer) and not np.all(np.isfinite(np.asarray(A))):
        bad = int(np.size(A) - np.count_nonzero(np.isfinite(np.asarray(A))))
        raise ValueError(f"{name} contains {bad} NaN or inf entries; remove or impute them first")
    return A


class _Plates:
    """Nested named plates ``((name, size), ...)``, outermost first, the last at dim -1."""

    def __init__(self, plates):
        self.plates = [numpyro.plate(name, size, dim=i - len(plates)) for i, (name, size) in enumerate(plates)]

    def __enter__(self):
        for p in self.plates:
            p.__enter__()

    def __exit__(self, *exc):
        for p in reversed(self.plates):
            p.__exit__(*exc)


def _normal(name: str, plates, scale: float):
    """A site of independent N(0, scale^2) entries under the named plates."""
    with _Plates(plates):
        return numpyro.sample(name, dist.Normal(0.0, scale))


def _lambdas(lambdas, depth: int) -> tuple[float, ...]:
    """One prior precision per layer, hidden layers then readout: ``lambdas`` is one number for all of them or
    ``depth + 1`` numbers."""
    lams = np.atleast_1d(np.asarray(lambdas, dtype=float))
    if lams.ndim != 1 or lams.size not in (1, depth + 1):
        raise ValueError(f"lambdas must be one number or {depth + 1} (one per hidden layer, then the readout) at "
                         f"depth {depth}; got {lambdas!r}")
    lams = np.broadcast_to(lams, (depth + 1,))
    return tuple(positive(f"lambdas[{i}]", float(x), "prior precision") for i, x in enumerate(lams))


def _inputs(X, Y, D: int | None, T: float, integrate_v: bool):
    """``(X, Y, D)`` checked: X (P, N0), Y (P, D) or None (then D must be given), T > 0, and Y where v is
    integrated out."""
    X = _data(X, "X")
    Y = None if Y is None else _data(Y, "Y")
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-d array (P, N0); got shape {X.shape}")
    P = X.shape[0]
    if Y is not None:
        if Y.ndim != 2 or Y.shape[0] != P:
            raise ValueError(f"Y must have shape (P, D) = ({P}, D); got {Y.shape}")
        if D is not None and D != Y.shape[1]:
            raise ValueError(f"D={D} does not match Y, which has {Y.shape[1]} columns")
        D = Y.shape[1]
    elif D is None:
        raise ValueError("give Y or the number of outputs D")
    positive("T", T)
    if integrate_v and Y is None:
        raise ValueError("integrate_v=True needs the labels Y (it integrates v out of the likelihood)")
    return X, Y, D


def _likelihood(f, Y, T: float) -> None:
    r"""The observation :math:`y \sim \mathcal N(f, T)` of the outputs f (P, D); without labels, f is recorded as the
    deterministic site ``f``."""
    if Y is None:
        numpyro.deterministic("f", f)
    with _Plates((("data", f.shape[0]), ("output", f.shape[1]))):
        numpyro.sample("y", dist.Normal(f, np.sqrt(T)), obs=Y)


def mlp(X, Y=None, *, N1: int, depth: int = 1, activation: ActivationLike = "erf", T: float = 0.01,
        lambdas=1.0, bias: bool = False, D: int | None = None, integrate_v: bool = False):
    r"""NumPyro model of the Bayesian network with ``depth`` equal-width hidden layers (see the module docstring).

    Parameters
    ----------
    X : array_like, shape (P, N0)
        Inputs.
    Y : array_like, shape (P, D), optional
        Labels, or None to predict (then ``D`` must be given, and the network outputs are recorded as the
        deterministic site ``f``).
    N1 : int
        Width of every hidden layer.
    depth : int, default 1
        Number of hidden layers L; the weight sites are ``w`` (N1, N0) at depth 1 and ``w0`` (N1, N0),
        ``w1 … w{L-1}`` (N1, N1) at depth L > 1, the readout ``v`` (D, N1).
    activation : str or callable, default "erf"
        A name of :data:`renormpp.network.ACTIVATIONS` or an elementwise JAX function.
    T : float, default 0.01
        Temperature (observation variance).
    lambdas : float or sequence of float, default 1.0
        Prior precisions, one number for every layer or ``depth + 1`` numbers (the hidden layers in order, then the
        readout): weights of layer l are N(0, 1/lambda_l), each layer scaled by 1/sqrt(fan-in).
    bias : bool, default False
        Add biases ``b`` (``b0 …``, (N1,) each, prior of their layer) to the pre-activations and ``c`` (D,)
        ~ N(0, 1/lambda_L) to the outputs (the paper sets biases to zero).
    D : int, optional
        Number of outputs, needed where Y is None.
    integrate_v : bool, default False
        Integrate the readout v out exactly (at any depth: v given the hidden weights is Gaussian), so that only the
        hidden weights are sampled, from :math:`p(w|{\rm data}) \propto p(w)\,p(Y|w)`
        (:func:`renormpp.readout.log_marginal_of`). Needs Y, and no biases.

    Returns
    -------
    None
        A NumPyro model: it records sample sites, for ``numpyro.infer.MCMC`` and :class:`renormpp.infer.Chains`.

    Raises
    ------
    ValueError
        For inputs with NaN or inf, Y None without D, T <= 0, ``lambdas`` of the wrong length, or ``integrate_v``
        without Y or with biases.
    """
    X, Y, D = _inputs(X, Y, D, T, integrate_v)
    N0 = X.shape[1]
    N1 = check_width(N1)
    sites = layer_sites(depth)
    lams = _lambdas(lambdas, len(sites))
    act = get_activation(activation)
    if integrate_v and bias:
        raise ValueError("integrate_v=True covers networks without biases (bias=False, the paper's); "
                         "use integrate_v=False for bias=True")

    scales = [1.0 / np.sqrt(lam) for lam in lams]
    params = {name: _normal(name, (("hidden", N1), ("input", N0) if ell == 0 else ("hidden_in", N1)), scales[ell])
              for ell, name in enumerate(sites)}
    if integrate_v:
        numpyro.factor("y", readout.log_marginal_of(params, X, Y, T=T, lambda1=lams[-1], activation=act))
        return
    params["v"] = _normal("v", (("output", D), ("hidden", N1)), scales[-1])
    if bias:
        for ell, name in enumerate(bias_sites(depth)):
            params[name] = _normal(name, (("hidden", N1),), scales[ell])
        params["c"] = _normal("c", (("output", D),), scales[-1])
    _likelihood(forward(params, X, act), Y, T)


def one_hidden_layer(X, Y=None, *, N1: int, activation: ActivationLike = "erf", T: float = 0.01,
                     lambda0: float = 1.0, lambda1: float = 1.0, bias: bool = False, D: int | None = None,
                     integrate_v: bool = False):
    r"""NumPyro model of the paper's one-hidden-layer network: :func:`mlp` at depth 1 with
    ``lambdas = (lambda0, lambda1)``, the prior precisions of w and v (same sites and draws).

    Parameters
    ----------
    X : array_like, shape (P, N0)
        Inputs.
    Y : array_like, shape (P, D), optional
        Labels, or None to predict (then ``D`` must be given, and the outputs are the deterministic site ``f``).
    N1 : int
        Hidden-layer width.
    activation : str or callable, default "erf"
        A name of :data:`renormpp.network.ACTIVATIONS` or an elementwise JAX function.
    T : float, default 0.01
        Temperature (observation variance).
    lambda0 : float, default 1.0
        Prior precision of the hidden weights w ~ N(0, 1/lambda0).
    lambda1 : float, default 1.0
        Prior precision of the readout v ~ N(0, 1/lambda1).
    bias : bool, default False
        Add biases, as for :func:`mlp`.
    D : int, optional
        Number of outputs, needed where Y is None.
    integrate_v : bool, default False
        Integrate the readout out exactly, as for :func:`mlp`: only w is sampled. Needs Y.

    Returns
    -------
    None
        A NumPyro model: it records sample sites, for ``numpyro.infer.MCMC`` and :class:`renormpp.infer.Chains`.

    Raises
    ------
    ValueError
        As for :func:`mlp`, and for lambda0 or lambda1 <= 0.
    """
    positive("lambda0", lambda0)
    positive("lambda1", lambda1)
    return mlp(X, Y, N1=N1, depth=1, activation=activation, T=T, lambdas=(lambda0, lambda1), bias=bias, D=D,
               integrate_v=integrate_v)


#: Named dimensions of the convolutional network's sites (:func:`cnn`; its plates name them too, so
#: ``arviz.from_numpyro(mcmc)`` finds them without this table).
CNN_DIMS = {"w": ["channel", "patch_pixel"], "v": ["output", "channel", "patch"], "y": ["data", "output"],
            "f": ["data", "output"]}


def cnn(X, Y=None, *, N1: int, image_shape, patch: int, activation: ActivationLike = "erf", T: float = 0.01,
        lambda0: float = 1.0, lambda1: float = 1.0, D: int | None = None, integrate_v: bool = False):
    r"""NumPyro model of the one-hidden-layer convolutional network (Aiudi et al., Nat. Commun. 16 (2025),
    rpacelli/deepbays' CONV_1HL).

    The rows of X are square single-channel images of side s (:math:`N_0 = s^2` pixels, row-major), cut into
    :math:`n_p = (s/m)^2` non-overlapping :math:`m\times m` patches :math:`x_i` (:class:`renormpp.patches.Patches`).
    ``N1`` = C channels, each a filter :math:`w_c \in \mathbb R^{m^2}` shared by every patch, and a readout per
    (output, channel, patch):

    .. math::
        h_{ci} = w_c\cdot x_i/m,\qquad
        f_a(x) = \frac{1}{\sqrt{C n_p}}\sum_{c,i} v_{aci}\,\sigma(h_{ci}),\qquad
        w \sim \mathcal N(0, 1/\lambda_0),\quad v \sim \mathcal N(0, 1/\lambda_1),\quad y \sim \mathcal N(f, T),

    so the posterior is :math:`\propto \mathrm{prior}\cdot e^{-\mathcal L/T}` as for :func:`mlp`. Sites: ``w`` (C, m²),
    dims (channel, patch_pixel); ``v`` (D, C, n_p), dims (output, channel, patch) (:data:`CNN_DIMS`); ``y`` and,
    without labels, ``f`` (data, output). The features :math:`\sigma(h_{ci})` are
    :func:`renormpp.network.conv_hidden` (feature c n_p + i), so :mod:`renormpp.readout` (the exact Gibbs draw of v,
    v integrated out, the Rao-Blackwellized observables) serves this network as it does the fully connected one.
    With ``patch`` = s (n_p = 1) it is :func:`one_hidden_layer` (1/m = 1/√N0).

    Parameters
    ----------
    X : array_like, shape (P, s*s)
        Images, one per row.
    Y : array_like, shape (P, D), optional
        Labels, or None to predict (then ``D`` must be given).
    N1 : int
        The number of channels C.
    image_shape : int, tuple or str
        The side s, (s, s) or "s x s".
    patch : int
        The patch side m, a divisor of s.
    activation : str or callable, default "erf"
        As for :func:`one_hidden_layer`.
    T : float, default 0.01
        Temperature (observation variance).
    lambda0 : float, default 1.0
        Prior precision of the filters w.
    lambda1 : float, default 1.0
        Prior precision of the readout v.
    D : int, optional
        Number of outputs, needed where Y is None.
    integrate_v : bool, default False
        Integrate the readout out exactly (:func:`renormpp.readout.log_marginal_of` of the C n_p features): only w
        is sampled. Needs Y.

    Returns
    -------
    None
        A NumPyro model: it records sample sites, for ``numpyro.infer.MCMC`` and :class:`renormpp.infer.Chains`.

    Raises
    ------
    ValueError
        For images that are not s x s, a patch side that does not divide s, and as for :func:`one_hidden_layer`.
    """
    X, Y, D = _inputs(X, Y, D, T, integrate_v)
    geometry = Patches(image_shape, patch)
    geometry.check(X.shape[1])
    C = check_width(N1)
    positive("lambda0", lambda0)
    positive("lambda1", lambda1)
    act = get_activation(activation)
    w = _normal("w", (("channel", C), ("patch_pixel", geometry.patch_size)), 1.0 / np.sqrt(lambda0))
    if integrate_v:
        numpyro.factor("y", readout.log_marginal_of({"w": w}, X, Y, T=T, lambda1=lambda1, activation=act,
                                                    features=conv_hidden))
        return
    v = _normal("v", (("output", D), ("channel", C), ("patch", geometry.n_patches)), 1.0 / np.sqrt(lambda1))
    _likelihood(forward({"w": w, "v": v}, X, act, conv_hidden), Y, T)
