r"""A whole run of the core: warmup, then draws, for several chains at once, as one pure function.

A *sampler* is any callable

    ``sampler(rng_key, potential_fn, init, num_warmup, num_samples, thinning=1) -> Samples``

with ``init`` the starts of the chains (chains, \*shape) and ``potential_fn`` U of one position of that shape;
after the warmup it runs ``num_samples`` draws and keeps every ``thinning``-th (NumPyro's ``MCMC`` convention). This
is how a theory that samples receives its sampler (the specialists of :mod:`renormpp.theory.specialists`): the
theory builds U, the caller chooses how to sample it. :func:`ghmc` builds one from this core (the default);
:func:`renormpp.infer.nuts_sampler` gives NumPyro's NUTS under the same signature.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import kinetic
from .adaptation import window_adaptation
from .base import inner_loop

__all__ = ["Samples", "ghmc"]


class Samples(NamedTuple):
    """The result of a sampler: ``draws`` (chains, num_samples, \\*shape), the chains' ``last`` positions (chains,
    \\*shape) to continue from, and per chain the mean ``accept_prob`` and the ``num_divergent`` updates of the
    sampling phase."""

    draws: np.ndarray
    last: np.ndarray
    accept_prob: np.ndarray
    num_divergent: np.ndarray


def ghmc(*, inner_steps: int = 10, friction: float = 1.0, step_size: float = 0.1, target_accept_prob: float = 0.8,
         adapt_mass: bool = True) -> Callable:
    r"""A sampler (see the module) of Metropolis-adjusted kinetic Langevin dynamics, OBABO (K1) of
    :mod:`renormpp.mcmc.kinetic` (generalized HMC: exact for any step), ``inner_steps`` updates per recorded draw
    and friction :math:`\gamma` = ``friction``. Its warmup is :func:`renormpp.mcmc.adaptation.window_adaptation`: the
    step by dual averaging towards ``target_accept_prob`` from ``step_size``, and with ``adapt_mass`` a diagonal
    mass from the draws of the middle half of the warmup. The chains are vectorized and adapt each on its own."""
    if inner_steps < 1 or friction <= 0 or step_size <= 0 or not 0 < target_accept_prob < 1:
        raise ValueError("ghmc needs inner_steps >= 1, friction > 0, step_size > 0 and 0 < target_accept_prob < 1; "
                         f"got {inner_steps}, {friction}, {step_size}, {target_accept_prob}")
    update = kinetic.build_kernel(adjust=True)

    def sample(rng_key, potential_fn: Callable, init, num_warmup: int, num_samples: int, thinning: int = 1):
        init = jnp.asarray(init)
        if init.ndim < 2 or not bool(jnp.all(jnp.isfinite(init))):
            raise ValueError(f"init must be finite starts of shape (chains, ...); got shape {init.shape}")
        shape, dim = init.shape[1:], int(np.prod(init.shape[1:]))
        n_warm, n_keep = int(num_warmup), int(num_samples)

        def U(flat):
            return potential_fn(flat.reshape(shape))

        adapt_init, adapt_update = window_adaptation(n_warm, target_accept_prob, adapt_mass=adapt_mass)
        run = inner_loop(update, inner_steps)

        def chain(key, start):
            k_init, k_run = jax.random.split(key)
            flat = start.reshape(-1)
            adapt = adapt_init(step_size, dim, flat.dtype)
            state = kinetic.init(flat, U, k_init, adapt.inverse_mass)

            def body(carry, xs):
                i, key = xs
                state, adapt = carry
                state, info = run(key, state, U, adapt.step_size, adapt.inverse_mass, friction)
                adapt = adapt_update(i, adapt, info.accept_prob, state.position)
                return (state, adapt), (state.position, info.accept_prob, info.num_divergent)

            steps = jnp.arange(n_warm + n_keep)
            (state, _), (pos, acc, div) = jax.lax.scan(body, (state, adapt),
                                                       (steps, jax.random.split(k_run, len(steps))))
            kept = slice(n_warm + int(thinning) - 1, None, int(thinning))
            return pos[kept].reshape((-1,) + shape), state.position.reshape(shape), acc[n_warm:].mean(), \
                div[n_warm:].sum()

        draws, last, acc, div = jax.jit(jax.vmap(chain))(jax.random.split(rng_key, len(init)), init)
        return Samples(np.asarray(draws), np.asarray(last), np.asarray(acc), np.asarray(div))

    return sample
