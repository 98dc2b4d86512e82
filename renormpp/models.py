r"""The finite one-hidden-layer network as a NumPyro model.

:math:`f(x) = v\,\sigma(w x/\sqrt{N_0})/\sqrt{N_1}` with :math:`w \in \mathbb R^{N_1\times N_0}`,
:math:`w \sim \mathcal N(0, 1/\lambda_0)`, :math:`v \in \mathbb R^{D\times N_1}`, :math:`v \sim \mathcal N(0, 1/\lambda_1)`
and the observation :math:`y \sim \mathcal N(f, T)`, so that the posterior is the paper's Gibbs measure
:math:`\propto \mathrm{prior}\cdot e^{-\mathcal L/T}` with :math:`\mathcal L = \frac12\sum_\mu\|y^\mu - f(x^\mu)\|^2`
(paper, "Problem setting"). The potential energy NumPyro samples is
:math:`U = \mathcal L/T + \lambda_0\|w\|^2/2 + \lambda_1\|v\|^2/2` + const.

Plates name the axes, so that ``arviz.from_numpyro`` labels them: ``w`` has dims (hidden, input),
``v`` (output, hidden), ``y`` (data, output).
"""
from __future__ import annotations

from typing import Callable, Union

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from ._checks import positive

Activation = Union[str, Callable]

ACTIVATIONS: dict[str, Callable] = {
    "erf": jax.scipy.special.erf,
    "relu": jax.nn.relu,
    "tanh": jnp.tanh,
    "linear": lambda h: h,
}

#: Named dimensions of each site, for ArviZ.
DIMS = {"w": ["hidden", "input"], "v": ["output", "hidden"], "b": ["hidden"], "c": ["output"],
        "y": ["data", "output"], "f": ["data", "output"]}


def activation_fn(activation: Activation) -> Callable:
    """The JAX function for an activation name, or the callable itself."""
    if callable(activation):
        return activation
    try:
        return ACTIVATIONS[activation]
    except (KeyError, TypeError):
        raise ValueError(f"unknown activation {activation!r}; choose one of "
                         f"{', '.join(map(repr, ACTIVATIONS))} or pass an elementwise function") from None


def hidden(w, X, activation: Activation = "erf", b=None):
    r"""Hidden-layer features :math:`\phi(X) = \sigma(X w^\top/\sqrt{N_0} [+ b])`, shape (P, N1)."""
    h = X @ w.T / np.sqrt(X.shape[-1])
    if b is not None:
        h = h + b
    return activation_fn(activation)(h)


def forward(params: dict, X, activation: Activation = "erf"):
    r"""Network outputs :math:`f(X)` of shape (P, D) for one draw ``params`` = {"w", "v"[, "b", "c"]}."""
    w, v = params["w"], params["v"]
    f = hidden(w, X, activation, params.get("b")) @ v.T / np.sqrt(w.shape[0])
    if "c" in params:
        f = f + params["c"]
    return f


def one_hidden_layer(X, Y=None, *, N1: int, activation: Activation = "erf", T: float = 0.01,
                     lambda0: float = 1.0, lambda1: float = 1.0, bias: bool = False, D: int | None = None,
                     readout: str = "sampled"):
    r"""NumPyro model of the Bayesian one-hidden-layer network (see the module docstring).

    Parameters
    ----------
    X : (P, N0) inputs. Y : (P, D) labels, or None to predict (then ``D`` must be given, and the
        network outputs are recorded as the deterministic site ``f``).
    N1 : hidden units. activation : "erf", "relu", "tanh", "linear" or an elementwise JAX function.
    T : temperature (observation variance). lambda0, lambda1 : prior precisions of w and v.
    bias : add biases ``b`` (N1,) ~ N(0, 1/lambda0) to the pre-activations and ``c`` (D,) ~ N(0, 1/lambda1)
        to the outputs (the paper sets biases to zero).
    readout : ``"sampled"`` (the network as written), or ``"marginal"``: v integrated out exactly, so that only
        w (and b) are sampled, from :math:`p(w|{\rm data}) \propto p(w)\,p(Y|w)` (:mod:`renormpp.readout`).
        Sample it with any kernel, record :func:`renormpp.readout.rao_blackwell` observables, and draw v given
        w with :func:`renormpp.readout.sample_readout` where v itself is needed. Needs Y, and no output bias.
    """
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-d array (P, N0); got shape {X.shape}")
    P, N0 = X.shape
    if Y is not None:
        if Y.ndim != 2 or Y.shape[0] != P:
            raise ValueError(f"Y must have shape (P, D) = ({P}, D); got {Y.shape}")
        if D is not None and D != Y.shape[1]:
            raise ValueError(f"D={D} does not match Y, which has {Y.shape[1]} columns")
        D = Y.shape[1]
    elif D is None:
        raise ValueError("give Y or the number of outputs D")
    if int(N1) != N1 or N1 < 1:
        raise ValueError(f"N1 must be a positive integer; got {N1!r}")
    for name, value in (("T", T), ("lambda0", lambda0), ("lambda1", lambda1)):
        positive(name, value)
    if readout not in ("sampled", "marginal"):
        raise ValueError(f"readout must be 'sampled' or 'marginal'; got {readout!r}")
    act = activation_fn(activation)
    if readout == "marginal":
        return _marginal(X, Y, N1=N1, activation=act, T=T, lambda0=lambda0, lambda1=lambda1, bias=bias)

    with numpyro.plate("hidden", N1, dim=-2):
        with numpyro.plate("input", N0, dim=-1):
            w = numpyro.sample("w", dist.Normal(0.0, 1.0 / np.sqrt(lambda0)))
    with numpyro.plate("output", D, dim=-2):
        with numpyro.plate("hidden", N1, dim=-1):
            v = numpyro.sample("v", dist.Normal(0.0, 1.0 / np.sqrt(lambda1)))
    params = {"w": w, "v": v}
    if bias:
        with numpyro.plate("hidden", N1, dim=-1):
            params["b"] = numpyro.sample("b", dist.Normal(0.0, 1.0 / np.sqrt(lambda0)))
        with numpyro.plate("output", D, dim=-1):
            params["c"] = numpyro.sample("c", dist.Normal(0.0, 1.0 / np.sqrt(lambda1)))
    f = forward(params, X, act)
    if Y is None:
        numpyro.deterministic("f", f)
    with numpyro.plate("data", P, dim=-2):
        with numpyro.plate("output", D, dim=-1):
            numpyro.sample("y", dist.Normal(f, np.sqrt(T)), obs=Y)


def _marginal(X, Y, *, N1, activation, T, lambda0, lambda1, bias):
    """w (and b) with the readout integrated out: the factor log p(Y | w) of :mod:`renormpp.readout`."""
    from . import readout

    if Y is None:
        raise ValueError("readout='marginal' needs the labels Y (it integrates v out of the likelihood)")
    if bias:
        raise ValueError("readout='marginal' covers hidden biases only through bias=False (no output bias c); "
                         "use readout='sampled' for bias=True")
    P, N0 = X.shape
    with numpyro.plate("hidden", N1, dim=-2):
        with numpyro.plate("input", N0, dim=-1):
            w = numpyro.sample("w", dist.Normal(0.0, 1.0 / np.sqrt(lambda0)))
    cond = readout.conditional(w, X, Y, T=T, lambda1=lambda1, activation=activation)
    numpyro.factor("y", readout.log_marginal(cond, Y))
