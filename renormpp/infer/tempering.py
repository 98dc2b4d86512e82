r"""Replica exchange over likelihood temperatures (parallel tempering), for posteriors whose chains hold states.

Each chain of :class:`ReplicaExchange` is a group of R replicas of the inner kernel (an :class:`.Adapter`, kinetic
Langevin by default), replica r sampling the tempered posterior

.. math:: \pi_{\beta_r}(w) \propto p(w)\, p(Y \mid w)^{\beta_r}, \qquad 1 = \beta_0 > \beta_1 > \dots > \beta_{R-1},

the prior kept and the likelihood (the model's observed sites: with v integrated out, the marginal
:math:`p(Y \mid w; T)`) raised to :math:`\beta_r` (:func:`tempered`). :math:`\beta_r` plays the part of :math:`T/T_r`
with :math:`T_r` up to :math:`T_{\max} = T/\beta_{R-1}`. Before every draw, neighbours swap positions with the
Metropolis probability

.. math:: \min\{1, \exp[(\beta_a - \beta_b)(L(w_a) - L(w_b))]\}, \qquad L = -\log p(Y \mid w),

which leaves the product of the tempered posteriors invariant; the pairs (0, 1), (2, 3), ... are tried on even draws
and (1, 2), (3, 4), ... on odd ones (the deterministic even-odd scheme of Okabe et al. 2001, non-reversible: a
walker crosses the ladder in O(R) swaps rather than O(R²), Syed et al., JRSS B 84 (2022)). Only the replicas at
:math:`\beta = 1` give draws: the state's fields (``obs``, ``accept_prob``, ``step_size``, ...) are theirs, one per
chain; each chain's swap acceptances per pair and its round trips (a walker from :math:`\beta = 1` to
:math:`\beta_{R-1}` and back) are in the state and in :meth:`ReplicaExchange.describe`.

Each replica adapts its own step and mass in the warmup (a hot replica needs a larger step); the inner kernel's
adaptation must not be pooled over chains. A swap exchanges positions only: each replica keeps its momentum, mass and
step, and its potential and force are recomputed at the position it received (the move is exact).
"""
from __future__ import annotations

import functools
from collections import namedtuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro.primitives import Messenger
from numpyro.util import is_prng_key

from .._checks import positive_int
from ..precision import full_precision
from .wrapper import ReadsThrough, Wrapper
from .adapter import Adapter, LangevinState

#: the model keyword that carries a chain's likelihood temperature (:func:`tempered` reads it)
BETA = "_beta"


class _ScaleLikelihood(Messenger):
    """Scales the log-density of every observed site (``numpyro.factor`` too) by ``beta``; the prior is kept."""

    def __init__(self, fn=None, beta=1.0):
        self.beta = beta
        super().__init__(fn)

    def process_message(self, msg):
        if msg["type"] == "sample" and msg["is_observed"]:
            msg["scale"] = self.beta if msg.get("scale") is None else self.beta * msg["scale"]


def tempered(model):
    """``model`` with the keyword :data:`BETA` (default 1): its likelihood raised to that power.

    Parameters
    ----------
    model : callable
        A NumPyro model.

    Returns
    -------
    callable
        The tempered model.
    """
    if getattr(model, "_renormpp_tempered", False):
        return model

    @functools.wraps(model)
    def at_beta(*args, **kwargs):
        beta = kwargs.pop(BETA, 1.0)
        with _ScaleLikelihood(beta=beta):
            return model(*args, **kwargs)

    at_beta._renormpp_tempered = True
    return at_beta


def geometric_ladder(replicas: int, beta_min: float) -> np.ndarray:
    """``replicas`` likelihood temperatures from 1 down to ``beta_min``, evenly spaced in log beta.

    Parameters
    ----------
    replicas : int
        The number of rungs.
    beta_min : float
        The last rung's likelihood temperature, in (0, 1).

    Returns
    -------
    numpy.ndarray, shape (replicas,)
    """
    replicas = positive_int("replicas", replicas, "the replicas per chain")
    if not 0 < beta_min < 1:
        raise ValueError(f"beta_min must be in (0, 1) (the hottest replica's power of the likelihood); got {beta_min!r}")
    if replicas < 2:
        raise ValueError("replica exchange needs at least 2 replicas per chain")
    return np.geomspace(1.0, beta_min, replicas)


class ReplicaState(ReadsThrough, namedtuple("ReplicaState", ["inner", "walker", "heading", "round_trips",
                                                             "swaps_accepted", "swaps_tried", "rng_key"])):
    """State of :class:`ReplicaExchange`: ``inner``, the inner kernel's state of every replica (leading axis: chain x
    replica, the chain's replicas in ladder order); ``walker``, which walker sits at each rung (chain, rung);
    ``heading``, per walker, +1 on its way up the ladder since it last left beta = 1, -1 on its way down after
    reaching the hottest rung, 0 before it first reached beta = 1; ``round_trips`` per chain; ``swaps_accepted`` and
    ``swaps_tried`` per chain and pair of rungs (r, r + 1); ``rng_key``.

    The fields of the replicas at beta = 1 read as the state's own (``state.obs``, ``state.accept_prob``, ...): the
    chain's draws."""

    __slots__ = ()

    def _through(self, value):  # the replicas at beta = 1
        return jax.tree_util.tree_map(self._cold, value)

    def _cold(self, x):
        if x is None:
            return None
        R, batched = self.walker.shape[-1], self.walker.ndim == 2
        return x.reshape((-1, R) + x.shape[1:])[:, 0] if batched else x[0]

    @property
    def swap_rate(self):
        """The acceptance of the swaps tried so far, per chain and pair of rungs."""
        return self.swaps_accepted / jnp.maximum(self.swaps_tried, 1)


class ReplicaExchange(Wrapper):
    """Replica exchange of ``inner`` (an :class:`.Adapter` built on a NumPyro model, its adaptation not pooled) over
    the likelihood temperatures ``betas`` (``betas[0] = 1``, decreasing; e.g. :func:`geometric_ladder`): see the
    module docstring. The inner kernel's model is replaced by :func:`tempered` of it.

    >>> inner = KineticLangevin(model, step_size=1e-3, inner_steps=10, observables=obs)
    >>> kernel = ReplicaExchange(inner, geometric_ladder(8, 0.1))
    >>> MCMC(kernel, num_warmup=200, num_samples=1000, num_chains=2, chain_method="vectorized")

    Parameters
    ----------
    inner : Adapter
        The kernel of each replica, built on a NumPyro model, its adaptation not pooled.
    betas : array_like
        The likelihood temperatures, ``betas[0] = 1``, decreasing.
    """

    def __init__(self, inner: Adapter, betas):
        if not isinstance(inner, Adapter) or inner.model is None:
            raise ValueError("ReplicaExchange needs a renormpp kernel built on a NumPyro model (Langevin or "
                             "KineticLangevin with model=...): it tempers the model's likelihood")
        if inner.pools_adaptation:
            raise ValueError("the replicas of a ladder need a step each: build the inner kernel with "
                             "pooled_adaptation=False")
        betas = np.asarray(betas, dtype=float)
        if betas.ndim != 1 or len(betas) < 2 or betas[0] != 1.0 or not np.all(np.diff(betas) < 0) or betas[-1] <= 0:
            raise ValueError(f"betas must start at 1 and decrease to a positive value, at least 2 of them; got "
                             f"{betas.tolist()}")
        inner._model = tempered(inner.model)
        self.inner, self.betas = inner, betas

    @property
    def replicas(self) -> int:
        return len(self.betas)

    # ---- MCMCKernel interface (the rest is the Wrapper's: the inner kernel's) -----------------------------------
    _sample_fn = None  # MCMC initializes the ladder anew for each run

    def get_diagnostics_str(self, state):
        return (f"{self.inner.get_diagnostics_str(state.inner)}, swaps={float(jnp.mean(state.swap_rate)):.2f}, "
                f"round trips={int(jnp.sum(state.round_trips))}")

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        R, batched = self.replicas, not is_prng_key(rng_key)
        keys = rng_key if batched else rng_key[None]
        C = keys.shape[0]
        split = jax.vmap(lambda k: jax.random.split(k, R + 1))(keys)  # (C, R + 1): the replicas', then the swaps'
        params = None
        if init_params is not None:  # every replica of a chain starts where the chain does
            params = jax.tree_util.tree_map(
                lambda x: jnp.repeat(jnp.asarray(x) if batched else jnp.asarray(x)[None], R, axis=0), init_params)
        inner = self.inner.init_per_chain(split[:, :R].reshape((C * R,) + split.shape[2:]), num_warmup, params,
                                          model_args, model_kwargs, chain_kwargs={BETA: np.tile(self.betas, C)})
        rungs = jnp.broadcast_to(jnp.arange(R), (C, R))
        state = ReplicaState(inner, rungs, jnp.zeros((C, R), jnp.int32), jnp.zeros(C, jnp.int32),
                             jnp.zeros((C, R - 1), jnp.int32), jnp.zeros((C, R - 1), jnp.int32), split[:, R])
        return state if batched else _chain_axis(state, add=False)

    def sample(self, state, model_args, model_kwargs):
        model_kwargs = {} if model_kwargs is None else model_kwargs
        batched = state.walker.ndim == 2
        with full_precision():
            st = self._swap(state if batched else _chain_axis(state, add=True), model_args, model_kwargs)
            st = st._replace(inner=self.inner.sample(st.inner, model_args, model_kwargs))
        return st if batched else _chain_axis(st, add=False)

    def _swap(self, st: ReplicaState, model_args, model_kwargs) -> ReplicaState:
        """The even-odd swaps of one draw, for every chain (leading axis of the counters: chain)."""
        R, C = self.replicas, st.walker.shape[0]
        betas = jnp.asarray(self.betas, st.inner.potential_energy.dtype)
        inner = st.inner
        flat = jax.vmap(lambda z: ravel_pytree(z)[0])(inner.z)  # (C R, n)
        U = lambda b: self.inner.potential(model_args, model_kwargs, {BETA: b})  # noqa: E731
        L = jax.vmap(lambda x: U(1.0)(x) - U(0.0)(x))(flat).reshape(C, R)  # -log-likelihood at each rung
        pair = jnp.arange(R - 1)
        tried = jnp.broadcast_to(pair % 2 == inner.i.reshape(C, R)[:, :1] % 2, (C, R - 1))
        keys = jax.vmap(jax.random.split)(st.rng_key)
        log_u = jnp.log(jax.vmap(lambda k: jax.random.uniform(k, (R - 1,)))(keys[:, 1]))
        accepted = tried & (log_u < _log_swap_ratio(betas, L))
        a = accepted.astype(jnp.int32)  # the pairs tried are disjoint: rung r takes from r + 1, or r - 1, or itself
        take = jnp.arange(R) + jnp.pad(a, ((0, 0), (0, 1))) - jnp.pad(a, ((0, 0), (1, 0)))  # (C, R)
        src = (jnp.arange(C)[:, None] * R + take).reshape(-1)
        moved = (take != jnp.arange(R)).reshape(-1)
        x = flat[src]
        pe, grad = jax.vmap(lambda x, b: jax.value_and_grad(U(b))(x))(x, jnp.tile(betas, C))
        inner = inner._replace(z=jax.tree_util.tree_map(lambda a: a[src], inner.z),
                               potential_energy=jnp.where(moved, pe, inner.potential_energy),
                               z_grad=jnp.where(moved[:, None], grad, inner.z_grad))
        walker = jnp.take_along_axis(st.walker, take, axis=1)
        heading, trips = jax.vmap(_headings)(walker, st.heading, st.round_trips)
        return st._replace(inner=inner, walker=walker, heading=heading, round_trips=trips,
                           swaps_accepted=st.swaps_accepted + a, swaps_tried=st.swaps_tried + tried,
                           rng_key=keys[:, 0])

    # ---- the warmup's schedule and reports are the inner kernel's (the Wrapper's), one step per replica ----------
    @property
    def pools_adaptation(self) -> bool:
        return False

    def describe(self, state=None) -> str:
        """The ladder, the swaps and the round trips, then the inner kernel at beta = 1."""
        text = (f"replica exchange over {self.replicas} likelihood temperatures beta = 1 ... {self.betas[-1]:.3g} "
                "(geometric: " if np.allclose(self.betas, geometric_ladder(self.replicas, self.betas[-1])) else
                f"replica exchange over likelihood temperatures beta = {np.round(self.betas, 4).tolist()} (")
        text += "even-odd swaps before every draw)"
        if state is not None:
            rate = np.asarray(state.swap_rate, dtype=float).reshape(-1, self.replicas - 1).mean(axis=0)
            text += (f", swap acceptance per pair {np.round(rate, 2).tolist()}, round trips "
                     f"{np.asarray(state.round_trips).reshape(-1).tolist()} per chain")
        cold = None if state is None else jax.tree_util.tree_map(state._cold, state.inner)
        return text + "; at beta = 1: " + self.inner.describe(cold)


def _log_swap_ratio(betas, L):
    r"""The log Metropolis ratio of swapping rungs r and r + 1, :math:`(\beta_r - \beta_{r+1})(L_r - L_{r+1})`, per
    chain (rows of ``L``, the -log-likelihood at each rung)."""
    return (betas[:-1] - betas[1:]) * (L[:, :-1] - L[:, 1:])


def _chain_axis(state: ReplicaState, add: bool) -> ReplicaState:
    """``state`` of one chain with a chain axis of length 1 on its counters (``add``), or without it (the inner
    state is flat over chain x replica either way)."""
    f = (lambda x: x[None]) if add else (lambda x: x[0])
    return state._replace(**{k: f(getattr(state, k)) for k in ReplicaState._fields if k != "inner"})


def _headings(walker, heading, trips):
    """One chain's walkers after a swap: the one at beta = 1 heads up (a round trip where it came down), the one at
    the hottest rung heads down."""
    cold, hot = walker[0], walker[-1]
    trips = trips + (heading[cold] == -1)
    heading = heading.at[cold].set(1)
    heading = heading.at[hot].set(jnp.where(heading[hot] == 1, -1, heading[hot]))
    return heading, trips



