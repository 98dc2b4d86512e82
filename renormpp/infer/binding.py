"""A NumPyro model bound to a flat position: its initialization, its potential and constraining map as functions of
the model's arguments, and a fingerprint of those arguments.

:class:`renormpp.infer.Langevin` and :class:`renormpp.infer.KineticLangevin` run their core algorithm
(:mod:`renormpp.mcmc`) on one flat position; this module is what connects that position to the model:
:func:`bind` initializes the model (:func:`initialize`: NumPyro's ``initialize_model``, staged in one compilation
where it can be) and returns the :class:`Bound` potential, and :func:`fingerprint` recognizes new model arguments
(``mcmc.run`` on new data after ``post_warmup_state``).
"""
from __future__ import annotations

import zlib
from functools import partial
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro import handlers
from numpyro.infer.initialization import init_to_mean, init_to_median
from numpyro.infer.util import ParamInfo, initialize_model
from numpyro.util import identity, is_prng_key

from ..precision import full_precision


def fingerprint(model_args, model_kwargs) -> jax.Array:
    """Eight numbers that change when the model's arguments change: fixed weighted sums of the arrays (the data)
    and values of the numbers (T, ...) in slots 0-3, checksums of anything else (names, functions) in slots 4-7.
    Costs O(size of the data), in one compiled function."""
    arrays, slots, other = [], [], np.zeros(4, np.float32)
    leaves = jax.tree_util.tree_leaves((tuple(model_args), dict(model_kwargs)),
                                       is_leaf=lambda x: isinstance(x, list) and not isinstance(x, tuple))
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, list):  # data given as nested lists
            leaf = np.asarray(leaf, dtype=float)
        if isinstance(leaf, (jax.Array, np.ndarray, int, float, np.number)) and not isinstance(leaf, bool):
            arrays.append(leaf)
            slots.append(i % 4)
        else:
            other[i % 4] += zlib.crc32(repr(leaf).encode()) % 2**20
    return _fold(tuple(arrays), tuple(slots), other)


@partial(jax.jit, static_argnums=1)
def _fold(arrays, slots, other):
    out = jnp.zeros(4, jnp.float32)
    for x, i in zip(arrays, slots):
        x = jnp.ravel(jnp.asarray(x, jnp.float32))
        out = out.at[i].add(jnp.sum(x * jnp.cos(0.7 * jnp.arange(x.size, dtype=jnp.float32))) + x.size)
    return jnp.concatenate([out, other])


def initialize(rng_key, model, init_strategy, model_args, model_kwargs):
    """NumPyro's ``initialize_model`` (``dynamic_args=True``): ``(params_info, potential_gen, postprocess_gen)``.

    NumPyro traces the model op by op, and every operation on the data compiles on its own (dozens of small
    compilations, seconds per point). Here the call is staged in one ``jax.jit`` instead, with the model's arguments
    closed over (so the model still sees, and checks, the concrete data), whenever the model's latent sites are all
    unconstrained and it has no ``param`` sites (:func:`is_plain`): then nothing the trace leaves behind (transforms,
    substituted values) holds a tracer. Any other model, or one that needs concrete values of what it computes, takes
    NumPyro's eager path.

    Where the strategy draws from the model (``init_to_sample``, ``init_to_median``, ``init_to_mean``: not
    ``init_to_uniform`` or ``init_to_value``), only the draw is compiled: NumPyro's first try (:func:`_first_draw`,
    the same values), without the potential energy and gradient with which NumPyro validates it (a compilation as costly as a block of draws,
    for values the sampler's own initialization computes again and checks). ``params_info`` then carries the
    parameters alone (potential energy and gradient None), and a draw where they are not finite is refused by the
    sampler instead of redrawn."""
    def call(key):
        return initialize_model(key, model, dynamic_args=True, init_strategy=init_strategy, model_args=model_args,
                                model_kwargs=model_kwargs)

    found = {}

    def traced(key):
        info, potential_gen, postprocess_gen, trace = call(key)
        found.update(gens=(potential_gen, postprocess_gen), plain=is_plain(trace))
        return info

    try:
        staged = jax.jit(traced).trace(rng_key)
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError,
            jax.errors.TracerIntegerConversionError):  # it wants concrete values: NumPyro's own path decides
        found = {}
    if found.get("plain") and _draws_from_model(init_strategy):
        draw = partial(_first_draw, model=model, init_strategy=init_strategy, model_args=model_args,
                       model_kwargs=model_kwargs)
        one = jax.jit(draw)  # per key, not vmapped: compiling the vmapped draw took twice as long
        params = one(rng_key) if is_prng_key(rng_key) else \
            jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *[one(k) for k in rng_key])
        return (ParamInfo(params, None, None), *found["gens"])
    if found.get("plain"):
        return (staged.lower().compile()(rng_key), *found["gens"])
    info, potential_gen, postprocess_gen, _ = call(rng_key)
    return info, potential_gen, postprocess_gen


def _draws_from_model(init_strategy) -> bool:
    """Whether NumPyro initializes with ``init_strategy`` by running the model and drawing from each site's
    distribution: ``init_to_sample`` (``init_to_median`` of one draw), ``init_to_median``, ``init_to_mean``. (Its
    ``find_valid_initial_params`` draws ``init_to_uniform`` and ``init_to_value`` without the model.)"""
    strategy = init_strategy if isinstance(init_strategy, partial) else init_strategy()
    return strategy.func in (init_to_median, init_to_mean)


def _first_draw(key, *, model, init_strategy, model_args, model_kwargs):
    """The latent values of NumPyro's first try in ``find_valid_initial_params`` for a plain model and a strategy that
    draws from the model: the model seeded with the second half of ``random.split(key)``, its values substituted by
    the strategy (unconstrained sites: the values are the parameters)."""
    strategy = init_strategy if isinstance(init_strategy, partial) else init_strategy()
    if strategy.func is init_to_median and strategy.keywords.get("num_samples") == 1:
        strategy = _one_prior_draw
    seeded = handlers.substitute(handlers.seed(model, jax.random.split(key)[1]), substitute_fn=strategy)
    trace = handlers.trace(seeded).get_trace(*model_args, **model_kwargs)
    return {name: site["value"] for name, site in trace.items()
            if site["type"] == "sample" and not site["is_observed"]}


def _one_prior_draw(site):
    """``init_to_sample``'s value at a site (``init_to_median`` of one prior draw: that draw), without the median's
    sort (measured: 1.15 -> 1.06 s of compilation, within the noise; the per-key draw was the saving)."""
    if site["type"] != "sample" or site["is_observed"] or site["fn"].support.is_discrete:
        return None
    if site["value"] is not None:
        return site["value"]
    return site["fn"](sample_shape=(1,) + site["kwargs"]["sample_shape"], rng_key=site["kwargs"]["rng_key"])[0]


def is_plain(trace) -> bool:
    """Whether a model trace has only unconstrained (real) latent sites and no ``param``/``mutable`` sites."""
    from numpyro.distributions import constraints

    for site in trace.values():
        if site["type"] in ("param", "mutable"):
            return False
        if site["type"] == "sample" and not site["is_observed"]:
            support = site["fn"].support
            while isinstance(support, constraints.independent):
                support = support.base_constraint
            if support is not constraints.real:
                return False
    return True


class Bound(NamedTuple):
    """What initialization learns from the model: the potential and the constraining map as functions of the model's
    arguments, and the unravelling of the flat position. Dropped on pickling (NumPyro's convention)."""

    potential_gen: Callable
    postprocess_gen: Callable
    unravel: Callable

    def potential(self, model_args, model_kwargs) -> Callable:
        """U of the flat position, with the model's current arguments (new data after post_warmup_state)."""
        U, unravel = self.potential_gen(*model_args, **model_kwargs), self.unravel

        def energy(x):
            with full_precision():  # and its gradient: the transposed products keep the precision of the forward ones
                return U(unravel(x))

        return energy

    def constrained(self, position, model_args, model_kwargs):
        """The constrained sites of the model at the flat ``position``."""
        with full_precision():
            return self.postprocess_gen(*model_args, **model_kwargs)(self.unravel(position))


def bind(rng_key, model, potential_fn, init_strategy, init_params, model_args, model_kwargs, batched: bool):
    """``(bound, init_params)``: the :class:`Bound` potential of ``model`` (or of ``potential_fn``, a function of the
    parameters), and the initial parameters: ``init_params`` where given (they take precedence over
    ``init_strategy``), else the model's initialization (one per chain where ``batched``: ``rng_key`` is then a stack
    of keys)."""
    if model is not None:
        params_info, potential_gen, postprocess_gen = initialize(rng_key, model, init_strategy, model_args,
                                                                 model_kwargs)
        if init_params is None:  # MCMC.run(..., init_params=...) takes precedence over init_strategy
            init_params = params_info[0]
    else:
        if init_params is None:
            raise ValueError("with potential_fn, pass init_params to MCMC.run")
        potential_gen, postprocess_gen = (lambda *a, **k: potential_fn), (lambda *a, **k: identity)
    one = jax.tree_util.tree_map(lambda x: x[0], init_params) if batched else init_params
    return Bound(potential_gen, postprocess_gen, ravel_pytree(one)[1]), init_params
