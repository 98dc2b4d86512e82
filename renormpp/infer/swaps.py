r"""A Metropolis move between the specialist states of a network's posterior: reflections that exchange the role of
hidden neurons, composed with any kernel of :mod:`renormpp.infer`.

Where the posterior of the first-layer weights w (the readout v integrated out) has metastable states, sets of
class-contrast specialist neurons, no local update moves a chain between them (removing a specialist costs thousands
of nats). :class:`StateSwaps` proposes to move a specialist from one state direction to another in one step. Given
unit vectors :math:`u_a, u_b` in input space (by default the normalized class-contrast templates
:math:`\bar x_p - \bar x_q`, both signs: :func:`class_contrasts`), the Householder reflection

.. math::  R_{ab} = 1 - 2\, n n^\top, \qquad n = \frac{u_a - u_b}{\lVert u_a - u_b \rVert},  \tag{W1}

maps :math:`u_a` to :math:`u_b` and back; it is orthogonal and an involution (:math:`R_{ab}^2 = 1`). The move picks a
pair (a, b) uniformly among the pairs and a set S of neurons, and proposes

.. math::  w_i' = R_{ab}\, w_i \quad (i \in S), \qquad w_j' = w_j \quad (j \notin S).  \tag{W2}

The set S is one of: ``neurons="random"``, ``k`` neurons drawn uniformly; ``"aligned"``, the ``k`` neurons of largest
:math:`|w_i \cdot n|`; ``"all"``, every neuron (one orthogonal map of the whole layer). Each choice is the same at w
and at w' (:math:`|w_i' \cdot n| = |w_i \cdot n|`), and :math:`R_{ab}` undoes itself, so the proposal is an involution
picked with the same probability from both ends: it is symmetric. The isotropic Gaussian prior of w is invariant
under an orthogonal map, so the Metropolis acceptance

.. math::  \min\{1,\; e^{U(w) - U(w')}\} = \min\{1,\; p(Y \mid w') / p(Y \mid w)\}  \tag{W3}

is the ratio of the exact marginal likelihoods (U, the inner kernel's potential, prior included, so the prior's
invariance is not assumed by the code). The inner kernel's momentum is kept or redrawn from :math:`\mathcal N(0, M)`
after an accepted move (``momentum``): the move leaves the momentum's law unchanged either way, so both are exact.

:class:`StateSwaps` attempts one move before every ``every``-th draw of the inner kernel (each draw is the inner
kernel's ``inner_steps`` updates); its acceptance is in the state (``swap_accept_prob``, ``swaps_accepted``,
``swaps_tried``). :func:`log_ratios` scores every move at fixed weights, for a survey of which moves a posterior
accepts.
"""
from __future__ import annotations

from collections import namedtuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro.util import is_prng_key

from .._checks import matrix, positive_int
from ..mcmc import metrics
from ..mcstats.specialists import label_contrasts
from ..precision import full_precision
from .wrapper import ReadsThrough, Wrapper

#: the ways :class:`StateSwaps` picks the neurons it reflects
SELECTIONS = ("random", "aligned", "all")

#: what happens to the inner kernel's momentum after an accepted move
MOMENTUM = ("refresh", "keep")


def class_contrasts(X, Y) -> np.ndarray:
    r"""The normalized class-contrast templates :math:`\pm(\bar x_p - \bar x_q)/\lVert \bar x_p - \bar x_q \rVert`
    for every pair of classes p < q, both signs: the default state directions of :class:`StateSwaps`
    (:func:`renormpp.mcstats.specialists.label_contrasts` with ``pairs=True``; the specialist theory's templates are
    its ``pairs=False``, the centred class means).

    Parameters
    ----------
    X : array_like, shape (P, N0)
        Inputs.
    Y : array_like, shape (P, D)
        One-hot (or any) labels; each input's class is ``argmax`` of its row.

    Returns
    -------
    numpy.ndarray, shape (D (D - 1), N0)
        Unit vectors, the pair (p, q) at rows 2k and 2k + 1 (signs + and -), pairs in lexicographic order.

    Raises
    ------
    ValueError
        For shapes that disagree, fewer than two classes present, or two classes with the same mean.
    """
    X = matrix(X, "X", "P", "N0")
    Y = matrix(Y, "Y", "P", "D", vector_is_column=True)
    if X.shape[0] != Y.shape[0]:
        raise ValueError(f"X and Y must have the same number of rows P; got {X.shape[0]} and {Y.shape[0]}")
    labels = np.argmax(Y, axis=1)
    if len(np.unique(labels)) < 2:
        raise ValueError("class_contrasts needs inputs of at least two classes (Y's argmax); give one-hot labels")
    return label_contrasts(X, labels, pairs=True)


def reflection_normals(directions) -> np.ndarray:
    """The normals n of (W1) of every unordered pair of ``directions`` (pairs of equal vectors left out).

    Parameters
    ----------
    directions : array_like, shape (K, N0)
        State directions; each is normalized here.

    Returns
    -------
    numpy.ndarray, shape (M, N0)
        One unit normal per pair (a, b), a < b.

    Raises
    ------
    ValueError
        For fewer than two directions, a zero or non-finite direction, or no pair of distinct directions.
    """
    U = matrix(directions, "directions", "K", "N0")
    norms = np.linalg.norm(U, axis=1)
    if U.shape[0] < 2 or np.any(norms == 0):
        raise ValueError("directions must be two or more non-zero vectors (rows): e.g. class_contrasts(X, Y)")
    U = U / norms[:, None]
    normals = []
    for a in range(len(U)):
        for b in range(a + 1, len(U)):
            d = U[a] - U[b]
            if np.linalg.norm(d) > 1e-6:
                normals.append(d / np.linalg.norm(d))
    if not normals:
        raise ValueError("the directions are all equal: no reflection between them")
    return np.stack(normals)


def _select(W, n, key, selection: str, k: int):
    """The mask (N1,) of the neurons reflected along ``n`` at weights ``W`` (N1, N0)."""
    N1 = W.shape[0]
    if selection == "all":
        return jnp.ones(N1, bool)
    if selection == "aligned":
        top = jax.lax.top_k(jnp.abs(W @ n), k)[1]
    else:
        top = jax.random.choice(key, N1, (k,), replace=False)
    return jnp.zeros(N1, bool).at[top].set(True)


def reflect(W, n, mask):
    """(W2): the rows of ``W`` (N1, N0) where ``mask`` holds reflected by :math:`1 - 2 n n^\\top`.

    Parameters
    ----------
    W : array, shape (N1, N0)
        Hidden weights, one neuron per row.
    n : array, shape (N0,)
        A unit normal.
    mask : array of bool, shape (N1,)
        The neurons reflected.

    Returns
    -------
    array, shape (N1, N0)
    """
    return W - 2.0 * jnp.where(mask, W @ n, 0.0)[:, None] * n[None, :]


def log_ratios(potential, W, normals, *, selection: str = "aligned", k: int = 1, rng_key=None) -> np.ndarray:
    """The log acceptance ratio :math:`U(w) - U(w')` of (W3) of the move along every normal, at fixed weights.

    Parameters
    ----------
    potential : callable
        U of the weights (N1, N0) (prior included), JAX-traceable.
    W : array_like, shape (N1, N0)
        The weights.
    normals : array_like, shape (M, N0)
        Unit normals, e.g. :func:`reflection_normals` of :func:`class_contrasts`.
    selection : {"random", "aligned", "all"}, default "aligned"
        Which neurons move (see :class:`StateSwaps`).
    k : int, default 1
        Neurons moved for ``"random"`` and ``"aligned"``.
    rng_key : jax.Array, optional
        For ``"random"``.

    Returns
    -------
    numpy.ndarray, shape (M,)
        One log-ratio per normal; ``exp(min(0, .))`` is the move's acceptance.

    Raises
    ------
    ValueError
        For an unknown selection or a k outside [1, N1].
    """
    W = jnp.asarray(W)
    N = jnp.asarray(normals, W.dtype)
    _check_selection(selection, k, W.shape[0])
    keys = jax.random.split(jax.random.PRNGKey(0) if rng_key is None else rng_key, N.shape[0])
    U0 = potential(W)

    def one(n, key):
        return U0 - potential(reflect(W, n, _select(W, n, key, selection, k)))
    return np.asarray(jax.jit(jax.vmap(one))(N, keys))


def _check_selection(selection, k, N1=None):
    if selection not in SELECTIONS:
        raise ValueError(f"neurons must be one of {SELECTIONS}; got {selection!r}")
    if N1 is not None and selection != "all" and not 1 <= k <= N1:
        raise ValueError(f"k={k} neurons to reflect, but the layer has N1={N1}: choose 1 <= k <= N1")


class SwapState(ReadsThrough, namedtuple("SwapState", ["inner", "swap_accept_prob", "swaps_accepted", "swaps_tried"])):
    """State of :class:`StateSwaps`: ``inner``, the inner kernel's state (its fields read through:
    ``state.z``, ``state.obs``, ``state.rng_key``, ...); ``swap_accept_prob``, the acceptance probability of the last
    attempted move (per chain); ``swaps_accepted`` and ``swaps_tried``, counts so far (per chain)."""

    __slots__ = ()

    @property
    def swap_rate(self):
        """The share of the moves tried so far that were accepted, per chain."""
        return self.swaps_accepted / jnp.maximum(self.swaps_tried, 1)


class StateSwaps(Wrapper):
    r"""``StateSwaps(inner, directions)``: the inner kernel's draws, with a reflection move (W1)-(W3) between state
    directions attempted before every ``every``-th draw.

    Parameters
    ----------
    inner : Adapter
        The inner kernel, e.g. ``spec.kernel()`` (:class:`~.adapter.KineticLangevin` on w's marginal) or
        :class:`~.adapter.Langevin`; built on a model whose site ``site`` is the (N1, N0) weight matrix.
    directions : array_like, shape (K, N0)
        State directions (normalized here), e.g. :func:`class_contrasts` of the training data; every unordered pair
        gives one reflection.
    every : int, default 1
        Draws of the inner kernel between attempts.
    neurons : {"random", "aligned", "all"}, default "aligned"
        The neurons reflected: ``k`` uniformly drawn, the ``k`` of largest :math:`|w_i \cdot n|`, or all.
    k : int, default 1
        Neurons reflected for ``"random"`` and ``"aligned"``.
    momentum : {"refresh", "keep"}, default "refresh"
        After an accepted move: redraw the inner kernel's momentum from :math:`\mathcal N(0, M)`, or keep it.
    site : str, default "w"
        The model's site of the hidden weights.

    Raises
    ------
    ValueError
        For an unknown ``neurons`` or ``momentum``, a non-positive ``every`` or ``k``, fewer than two distinct
        directions, or (at ``init``) a site that is not an (N1, N0) matrix matching the directions.

    Notes
    -----
    Use with :class:`numpyro.infer.MCMC`, any ``chain_method`` (``"vectorized"`` included). The move comes before the
    inner kernel's draw, so the draw's recorded observables are at the chain's final position. Move acceptance in
    ``extra_fields=("swap_accept_prob",)`` and in ``mcmc.last_state.swap_rate``.
    """

    def __init__(self, inner, directions, *, every: int = 1, neurons: str = "aligned", k: int = 1,
                 momentum: str = "refresh", site: str = "w"):
        _check_selection(neurons, positive_int("k", k, "neurons reflected per move"))
        if momentum not in MOMENTUM:
            raise ValueError(f"momentum must be one of {MOMENTUM}; got {momentum!r}")
        self.inner = inner
        self.normals = reflection_normals(directions)
        self.every = positive_int("every", every, "draws between moves")
        self.neurons, self.k, self.momentum, self.site = neurons, int(k), momentum, site
        self._batched = False

    # ---- MCMCKernel interface (the rest is the Wrapper's: the inner kernel's) -----------------------------------
    @property
    def is_ensemble_kernel(self):
        return False

    def get_diagnostics_str(self, state):
        rate = float(jnp.mean(state.swap_rate))
        return f"{self.inner.get_diagnostics_str(state.inner)}, swap acc. {rate:.3f}"

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        self._batched = not is_prng_key(rng_key)
        inner = self.inner.init(rng_key, num_warmup, init_params, model_args, model_kwargs)
        W = inner.z[self.site] if isinstance(inner.z, dict) and self.site in inner.z else None
        shape = None if W is None else W.shape[1:] if self._batched else W.shape
        if shape is None or len(shape) != 2 or shape[1] != self.normals.shape[1]:
            raise ValueError(f"site {self.site!r} must be an (N1, N0) weight matrix with N0 = "
                             f"{self.normals.shape[1]} (the directions' length); got "
                             f"{None if shape is None else tuple(shape)}")
        _check_selection(self.neurons, self.k, shape[0])
        lead = (jnp.shape(inner.i)[0],) if self._batched else ()
        zero = jnp.zeros(lead, inner.potential_energy.dtype)
        return SwapState(inner, zero, jnp.zeros(lead, jnp.int32), jnp.zeros(lead, jnp.int32))

    def sample(self, state, model_args, model_kwargs):
        model_kwargs = {} if model_kwargs is None else model_kwargs
        with full_precision():
            i = state.inner.i[0] if self._batched else state.inner.i
            due = (i % self.every) == 0
            moved = jax.lax.cond(due, lambda s: self._attempt(s, model_args, model_kwargs), lambda s: s, state)
            inner = self.inner.sample(moved.inner, model_args, model_kwargs)
            return moved._replace(inner=inner)

    # ---- the move ----------------------------------------------------------------------------------------------
    def _attempt(self, state, model_args, model_kwargs):
        normals = jnp.asarray(self.normals, state.inner.potential_energy.dtype)

        def one(s):
            key_next, k_pair, k_sel, k_u, k_p = jax.random.split(s.rng_key, 5)
            U = self.inner.potential(model_args, model_kwargs, s.chain_kwargs)
            z = s.z
            W = z[self.site]
            n = normals[jax.random.randint(k_pair, (), 0, normals.shape[0])]
            W_new = reflect(W, n, _select(W, n, k_sel, self.neurons, self.k))
            x_new = ravel_pytree({**z, self.site: W_new})[0]
            pe_new, grad_new = jax.value_and_grad(U)(x_new)
            log_ratio = s.potential_energy - pe_new
            prob = jnp.where(jnp.isfinite(log_ratio), jnp.exp(jnp.minimum(log_ratio, 0.0)), 0.0)
            accept = jnp.log(jax.random.uniform(k_u, dtype=prob.dtype)) < jnp.where(jnp.isfinite(log_ratio),
                                                                                   log_ratio, -jnp.inf)
            changes = dict(z={**z, self.site: jnp.where(accept, W_new, W)},
                           potential_energy=jnp.where(accept, pe_new, s.potential_energy),
                           z_grad=jnp.where(accept, grad_new, s.z_grad), rng_key=key_next)
            if self.momentum == "refresh" and getattr(s, "momentum", None) is not None:
                draw = metrics.functions(s.adaptation.inverse_mass)[0]
                changes["momentum"] = jnp.where(accept, draw(k_p, s.momentum), s.momentum)
            return s._replace(**changes), prob, accept

        inner, prob, accept = (jax.vmap(one) if self._batched else one)(state.inner)
        return SwapState(inner, prob, state.swaps_accepted + accept.astype(jnp.int32), state.swaps_tried + 1)

    def describe(self, state=None) -> str:
        """The inner kernel's description and the move's, with its acceptance where ``state`` is given."""
        text = (f"{self.inner.describe(None if state is None else state.inner)}; reflections between "
                f"{self.normals.shape[0]} pairs of state directions every {self.every} draws, neurons "
                f"{self.neurons!r}" + (f" (k = {self.k})" if self.neurons != "all" else "")
                + f", momentum {'redrawn' if self.momentum == 'refresh' else 'kept'} after a move")
        if state is not None:
            text += (f", acceptance {int(np.sum(np.asarray(state.swaps_accepted)))}/"
                     f"{int(np.sum(np.asarray(state.swaps_tried)))}")
        return text


__all__ = ["MOMENTUM", "SELECTIONS", "StateSwaps", "SwapState", "class_contrasts", "log_ratios", "reflect",
           "reflection_normals"]
