r"""The finite one-hidden-layer network as a NumPyro model.

:math:`f(x) = v\,\sigma(w x/\sqrt{N_0})/\sqrt{N_1}` (:func:`renormpp.network.forward`) with
:math:`w \in \mathbb R^{N_1\times N_0}`, :math:`w \sim \mathcal N(0, 1/\lambda_0)`, :math:`v \in \mathbb R^{D\times N_1}`,
:math:`v \sim \mathcal N(0, 1/\lambda_1)` and the observation :math:`y \sim \mathcal N(f, T)`, so that the posterior is
the paper's Gibbs measure :math:`\propto \mathrm{prior}\cdot e^{-\mathcal L/T}` with
:math:`\mathcal L = \frac12\sum_\mu\|y^\mu - f(x^\mu)\|^2` (paper, "Problem setting"). The potential energy NumPyro
samples is :math:`U = \mathcal L/T + \lambda_0\|w\|^2/2 + \lambda_1\|v\|^2/2` + const.

Plates name the axes, so that ``arviz.from_numpyro`` labels them (:data:`DIMS`): ``w`` has dims (hidden, input),
``v`` (output, hidden), ``y`` and ``f`` (data, output).
"""
from __future__ import annotations

import jax
import numpy as np
import numpyro
import numpyro.distributions as dist

from . import readout
from ._checks import positive
from .network import ActivationLike, check_width, forward, get_activation

#: Named dimensions of each site, for ArviZ (``rp.diagnostics.to_datatree`` and ``az.from_numpyro``).
DIMS = {"w": ["hidden", "input"], "v": ["output", "hidden"], "b": ["hidden"], "c": ["output"],
        "y": ["data", "output"], "f": ["data", "output"]}


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


def one_hidden_layer(X, Y=None, *, N1: int, activation: ActivationLike = "erf", T: float = 0.01,
                     lambda0: float = 1.0, lambda1: float = 1.0, bias: bool = False, D: int | None = None,
                     integrate_v: bool = False):
    r"""NumPyro model of the Bayesian one-hidden-layer network (see the module docstring).

    Parameters
    ----------
    X : (P, N0) inputs. Y : (P, D) labels, or None to predict (then ``D`` must be given, and the
        network outputs are recorded as the deterministic site ``f``).
    N1 : hidden units. activation : a name of :data:`renormpp.network.ACTIVATIONS` or an elementwise JAX function.
    T : temperature (observation variance). lambda0, lambda1 : prior precisions of w and v.
    bias : add biases ``b`` (N1,) ~ N(0, 1/lambda0) to the pre-activations and ``c`` (D,) ~ N(0, 1/lambda1)
        to the outputs (the paper sets biases to zero).
    integrate_v : integrate the readout v out exactly, so that only w (and b) are sampled, from
        :math:`p(w|{\rm data}) \propto p(w)\,p(Y|w)` (:func:`renormpp.readout.log_marginal`). Sample it with any
        kernel, record :func:`renormpp.readout.rao_blackwell` observables, and draw v given w with
        :func:`renormpp.readout.sample_readout` where v itself is needed. Needs Y, and no output bias.
    """
    X = _data(X, "X")
    Y = None if Y is None else _data(Y, "Y")
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
    N1 = check_width(N1)
    for name, value in (("T", T), ("lambda0", lambda0), ("lambda1", lambda1)):
        positive(name, value)
    act = get_activation(activation)
    if integrate_v and Y is None:
        raise ValueError("integrate_v=True needs the labels Y (it integrates v out of the likelihood)")
    if integrate_v and bias:
        raise ValueError("integrate_v=True covers networks without biases (bias=False, the paper's); "
                         "use integrate_v=False for bias=True")

    s0, s1 = 1.0 / np.sqrt(lambda0), 1.0 / np.sqrt(lambda1)
    params = {"w": _normal("w", (("hidden", N1), ("input", N0)), s0)}
    if integrate_v:
        cond = readout.conditional(params, X, Y, T=T, lambda1=lambda1, activation=act)
        numpyro.factor("y", readout.log_marginal(cond, Y))
        return
    params["v"] = _normal("v", (("output", D), ("hidden", N1)), s1)
    if bias:
        params["b"] = _normal("b", (("hidden", N1),), s0)
        params["c"] = _normal("c", (("output", D),), s1)
    f = forward(params, X, act)
    if Y is None:
        numpyro.deterministic("f", f)
    with _Plates((("data", P), ("output", D))):
        numpyro.sample("y", dist.Normal(f, np.sqrt(T)), obs=Y)
