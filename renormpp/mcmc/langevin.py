r"""Langevin dynamics on a flat position: the unadjusted algorithm (ULA) and its Metropolis-adjusted form (MALA).

One update with step :math:`h` on the potential energy :math:`U` (the Euler-Maruyama step of
:math:`d\theta = -\nabla U\,dt + \sqrt 2\,dW`):

.. math::  \theta' = \theta - h\,\nabla U(\theta) + \sqrt{2h}\,\xi, \qquad \xi \sim \mathcal N(0, 1).  \tag{L1}

ULA samples the target up to an :math:`O(h)` bias. The paper (supplement, Eq. supp:eq:langevin) writes
:math:`\theta' = \theta - \epsilon\nabla(TU) + \sqrt{2\epsilon T}\,\xi`, which is (L1) with :math:`h = \epsilon T`.
MALA accepts :math:`\theta'` with probability :math:`\min(1, e^{\log r})`, where, with the proposal density
:math:`q(a|b) = \mathcal N(a;\, b - h\nabla U(b),\, 2h)`,

.. math::  \log r = U(\theta) - U(\theta') - \frac{\|\theta - \theta' + h\nabla U(\theta')\|^2}{4h}
           + \frac{\|\xi\|^2}{2},  \tag{L2}

which makes it exact (Roberts & Tweedie 1996). A MALA proposal whose U or gradient is not finite is rejected
and flagged ``diverging``; ULA tests nothing per update (see :func:`renormpp.mcmc.base.inner_loop`).
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from .base import Info, State, init, select

__all__ = ["State", "Info", "init", "build_kernel"]


def build_kernel(adjust: bool = False) -> Callable:
    """``kernel(rng_key, state, potential_fn, step_size) -> (State, Info)``: one update (L1), Metropolis-adjusted
    by (L2) if ``adjust`` (MALA)."""

    def kernel(rng_key, state: State, potential_fn: Callable, step_size):
        key_noise, key_accept = jax.random.split(rng_key)
        x, h = state.position, step_size
        noise = jax.random.normal(key_noise, x.shape, x.dtype)
        new = init(x - h * state.grad + jnp.sqrt(2.0 * h) * noise, potential_fn)  # (L1)
        if not adjust:
            one = jnp.ones((), x.dtype)
            return new, Info(one, jnp.array(False))
        finite = jnp.isfinite(new.potential_energy) & jnp.all(jnp.isfinite(new.grad))
        back = x - new.position + h * new.grad
        log_r = state.potential_energy - new.potential_energy - jnp.sum(back**2) / (4.0 * h) + 0.5 * jnp.sum(noise**2)
        accept_prob = jnp.where(finite, jnp.exp(jnp.minimum(log_r, 0.0)), 0.0)  # (L2)
        accept = jax.random.uniform(key_accept, dtype=x.dtype) < accept_prob
        return select(accept, new, state), Info(accept_prob, ~finite)

    return kernel
