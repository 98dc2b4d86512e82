r"""Observables of one network draw, for recording during sampling or evaluating afterwards.

Each constructor returns a function ``fn(params) -> value`` of one draw (a dict with ``w``, ``v``, ...):

* :func:`eps_g`: the generalization error of the draw on a test set,
  :math:`\epsilon_g = \frac{1}{P_0}\sum_i \|y_0^i - f(x_0^i)\|^2` (the paper's generalization loss, below Eq. (3));
* :func:`overlap`: the readout overlaps :math:`v v^\top / N_1`, (D, D) (paper Eq. (4) predicts their mean,
  :math:`Q^*/\lambda_1`; for the CNN :math:`v v^\top/(C n_p)`);
* :func:`combine`: several of them as one function returning a dict; :func:`default` is the paper's pair;
* :func:`hidden_sums`: the hidden layer's kernel :math:`\sigma(h)\sigma(h)^\top/N_1` on the train and test inputs
  and the first layer's :math:`w^\top w/N_1`, too large to keep per draw: summed over draws by
  :class:`renormpp.infer.Accumulator` from the weights that :func:`with_hidden` passes on
  (:mod:`renormpp.diagnostics.kernel` makes the posterior's hidden kernel of them).

Use them as ``rp.infer.Langevin(..., observables=fn)`` so that a long run keeps only these, or on samples from
any sampler with :func:`evaluate`. :func:`renormpp.readout.rao_blackwell` gives their expectations given the
hidden weights, under the same names. ``arviz.from_numpyro(mcmc, dims=DIMS)`` names their axes.
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from ._checks import data_pair, positive_int
from .network import ActivationLike, check_input_width, forward, hidden

#: Named dimensions of the recorded observables, for ``arviz.from_numpyro(mcmc, dims=DIMS)``.
DIMS = {"overlap": ["output", "output_"], "eps_g": [], "local_overlap": ["output", "patch", "output_", "patch_"]}


def check_outputs(params: dict, Y, name: str = "Y_test") -> None:
    """A ValueError unless the labels have as many columns as the network's readout v has outputs."""
    if "v" in params and params["v"].shape[0] != Y.shape[-1]:
        raise ValueError(f"{name} has D = {Y.shape[-1]} outputs but the network's readout v has {params['v'].shape[0]}")


def eps_g(X_test, Y_test, activation: ActivationLike = "erf", features: Callable = hidden) -> Callable:
    """The generalization error of one draw: the mean over the test set of ||y0 - f(x0)||^2 (``features``: what the
    readout sees, :func:`renormpp.network.forward`).

    Parameters
    ----------
    X_test : array_like, shape (P0, N0)
        Test inputs.
    Y_test : array_like, shape (P0, D)
        Test labels.
    activation : str or callable, default "erf"
        The network's activation (:func:`renormpp.network.get_activation`).
    features : callable, default renormpp.network.hidden
        ``features(params, X, activation)``, what the readout sees (:func:`renormpp.network.conv_hidden` for the CNN).

    Returns
    -------
    callable
        ``fn(params) -> float``.
    """
    X_test, Y_test = (jnp.asarray(a) for a in data_pair(X_test, Y_test, "X_test", "Y_test", "P0"))

    def fn(params):
        if features is hidden:  # another architecture's features check their own inputs
            check_input_width(params, X_test, "X_test")
        check_outputs(params, Y_test)
        return jnp.mean(jnp.sum((Y_test - forward(params, X_test, activation, features)) ** 2, axis=-1))

    return fn


def overlap() -> Callable:
    """The readout overlaps v v^T / n of one draw, shape (D, D), n the number of features the readout sees: N1 for the
    fully connected network; C n_p for the convolutional one, whose v (D, C, n_p) is flattened, so that its overlap is
    the mean over patches of the local overlaps v_{a,.,i} . v_{b,.,i} / C (:mod:`renormpp.readout`'s normalization).

    Returns
    -------
    callable
        ``fn(params) -> (D, D)``.
    """

    def fn(params):
        v = params["v"].reshape(params["v"].shape[0], -1)
        return v @ v.T / v.shape[-1]

    return fn


def local_overlap(n_patches: int) -> Callable:
    r"""The CNN's local readout overlaps of one draw, :math:`\sum_c v_{a,c,i}v_{b,c,j}/C`, shape (D, n_p, D, n_p) (v is
    (D, C, n_p), or (D, C n_p) channel-major); their mean is :math:`Q^*_{(ai),(bj)}/\lambda_1`
    (:attr:`renormpp.theory.ConvFit.local_overlap`), their patch average :func:`overlap`.

    Parameters
    ----------
    n_patches : int
        The patches per image, n_p.

    Returns
    -------
    callable
        ``fn(params) -> (D, n_p, D, n_p)``.
    """
    n_patches = positive_int("n_patches", n_patches, "patches per image")

    def fn(params):
        v = params["v"]
        v = v.reshape(v.shape[0], -1, n_patches)
        return jnp.einsum("aci,bcj->aibj", v, v) / v.shape[1]

    return fn


def combine(**fns: Callable) -> Callable:
    """One function returning ``{name: fn(params)}``; e.g. ``combine(eps_g=..., overlap=...)``.

    Parameters
    ----------
    **fns : callable
        The observables by name, each ``fn(params)``.

    Returns
    -------
    callable
        ``fn(params) -> {name: value}``.
    """
    if not fns:
        raise ValueError("give at least one observable, e.g. combine(overlap=overlap())")

    def all_of(params):
        return {name: fn(params) for name, fn in fns.items()}

    return all_of


def default(X_test, Y_test, activation: ActivationLike = "erf", features: Callable = hidden,
            patches: int = 1) -> Callable:
    """The paper's pair of observables of a draw: the generalization error and the readout overlap.

    Parameters
    ----------
    X_test : array_like, shape (P0, N0)
        Test inputs.
    Y_test : array_like, shape (P0, D)
        Test labels.
    activation : str or callable, default "erf"
        The network's activation.
    features : callable, default renormpp.network.hidden
        ``features(params, X, activation)``, what the readout sees: :func:`renormpp.network.hidden` (fully
        connected) or :func:`renormpp.network.conv_hidden` (the CNN).
    patches : int, default 1
        With ``patches`` > 1 (the CNN's n_p), also ``"local_overlap"`` (:func:`local_overlap`).

    Returns
    -------
    callable
        ``fn(params) -> {"eps_g": generalization error, "overlap": v v^T / N1}`` of the constrained sites of a
        draw, for ``observables=`` of the samplers or :func:`evaluate`.
    """
    fns = dict(eps_g=eps_g(X_test, Y_test, activation, features), overlap=overlap())
    if positive_int("patches", patches, "number of patches the readout's features group into") > 1:
        fns["local_overlap"] = local_overlap(patches)
    return combine(**fns)


#: The entry of a record (:func:`with_hidden`) that passes the hidden layers' weights to an Accumulator.
HIDDEN = "hidden_weights"


def with_hidden(record: Callable) -> Callable:
    """``record`` with the draw's weights other than the readout's (``v``, ``c``) under :data:`HIDDEN`, for
    :class:`renormpp.infer.Accumulator` (which takes them out of the per-draw record)."""

    def fn(params):
        return {**record(params), HIDDEN: {k: a for k, a in params.items() if k not in ("v", "c")}}

    return fn


def hidden_sums(X, X_test, activation: ActivationLike = "erf", features: Callable = hidden,
                first_layer: str = "w") -> Callable:
    r"""The summands of the posterior's hidden kernel, one draw's weights ``params`` -> dict of

    * ``train`` (P, P): :math:`\phi(X)\phi(X)^\top/n` (n = N1 features of the last hidden layer, or the
      architecture's ``features``), ``cross`` (P, P0): :math:`\phi(X)\phi(X_0)^\top/n`, ``test`` (P0,): the diagonal
      :math:`\|\phi(x_0)\|^2/n` on the test inputs;
    * ``first_layer`` (N0, N0): :math:`w^\top w/N_1` of the weights that see the input (site ``first_layer``).

    Their means over the posterior are :math:`K_{\rm post}` and :math:`\langle w^\top w\rangle/N_1`; under the prior
    they are the NNGP kernel K and :math:`\mathbb 1/\lambda_0`. Cost per draw :math:`O(P (P + P_0) n + N_1 N_0^2)`.

    Parameters
    ----------
    X : array_like, shape (P, N0)
        Training inputs.
    X_test : array_like, shape (P0, N0)
        Test inputs.
    activation : str or callable, default "erf"
        The network's activation (:func:`renormpp.network.get_activation`).
    features : callable, default renormpp.network.hidden
        ``features(params, X, activation)``, what the readout sees (:func:`renormpp.network.conv_hidden` for the CNN).
    first_layer : str, default "w"
        The site of the weights that see the input.

    Returns
    -------
    callable
        ``fn(params) -> {"train", "cross", "test", "first_layer"}``.
    """
    X, X_test = jnp.asarray(X), jnp.asarray(X_test)

    def fn(params):
        phi, phi0 = features(params, X, activation), features(params, X_test, activation)
        n, w = phi.shape[-1], params[first_layer]
        return {"train": phi @ phi.T / n, "cross": phi @ phi0.T / n, "test": jnp.sum(phi0**2, axis=-1) / n,
                "first_layer": w.T @ w / w.shape[0]}

    return fn


def evaluate(fn: Callable, samples: dict, batch_dims: int = 1, chunk: int = 256):
    """Apply ``fn`` to every draw of ``samples`` (arrays with ``batch_dims`` leading draw axes).

    Works on ``mcmc.get_samples()`` (batch_dims=1) or ``get_samples(group_by_chain=True)`` (2),
    e.g. from NUTS; draws are processed ``chunk`` at a time to bound memory.

    Parameters
    ----------
    fn : callable
        ``fn(params) -> pytree`` of one draw, e.g. :func:`default`'s.
    samples : dict
        Arrays of the draws, with ``batch_dims`` leading draw axes.
    batch_dims : int, default 1
        The number of leading draw axes: 1 for (draw, ...), 2 for (chain, draw, ...).
    chunk : int, default 256
        Draws computed at a time.

    Returns
    -------
    pytree
        ``fn``'s output per draw, with the draw axes of ``samples`` leading.

    Raises
    ------
    ValueError
        Where ``samples`` is empty.
    """
    leaves = jax.tree_util.tree_leaves(samples)
    if not leaves:
        raise ValueError("samples is empty")
    batch = leaves[0].shape[:batch_dims]
    flat = jax.tree_util.tree_map(lambda a: jnp.reshape(a, (-1,) + a.shape[batch_dims:]), samples)
    n = int(np.prod(batch))
    f = jax.jit(jax.vmap(fn))
    parts = [f(jax.tree_util.tree_map(lambda a: a[lo:lo + chunk], flat)) for lo in range(0, n, chunk)]
    out = jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs), *parts)
    return jax.tree_util.tree_map(lambda a: jnp.reshape(a, batch + a.shape[1:]), out)
