r"""Warmup adaptation as ``(init, update)`` pairs: the step size by dual averaging, a diagonal mass from the
variance of the warmup draws, and the window schedule that combines them.

* Step size (Hoffman & Gelman 2014, Sec. 3.2; NumPyro's ``dual_averaging``): with :math:`x = \log h`,
  :math:`\bar g_t = (1 - \tfrac{1}{t + t_0})\bar g_{t-1} + \tfrac{\delta - a_t}{t + t_0}`,
  :math:`x_t = \mu - \tfrac{\sqrt t}{\gamma}\bar g_t`, :math:`\mu = \log 10 h_0`, and the step of the
  adapted chain is :math:`h = e^{\bar x}` with :math:`\bar x` the weighted average of the :math:`x_t`;
  :math:`a_t` is the mean acceptance of a draw's updates and :math:`\delta` the target.
* Diagonal mass (Stan's windowed adaptation, regularized as Stan does; NumPyro's ``welford_covariance``):
  the positions of the warmup draws :math:`[W/4, 3W/4)` give :math:`M^{-1} = \tfrac{n}{n+5}{\rm Var}(q) +
  10^{-3}\tfrac{5}{n+5}`; at :math:`3W/4` it is set and the step adaptation restarts from the current step.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from numpyro.infer.hmc_util import dual_averaging, welford_covariance

from .base import select


def step_size_adaptation(target_accept_prob: float):
    """``(init, update, final)``: ``init(step_size)``, ``update(state, accept_prob)`` and ``final(state)``; the current
    step of a state is ``exp(state[0])``, the adapted one ``final(state) = exp(state[1])`` (the averaged iterate)."""
    da_init, da_update = dual_averaging()

    def init(step_size):
        return da_init(jnp.log(10.0 * step_size))

    def update(state, accept_prob):
        return da_update(target_accept_prob - accept_prob, state)

    def final(state):
        return jnp.exp(state[1])

    return init, update, final


class WindowState(NamedTuple):
    """Warmup adaptation: the dual-averaging state, the Welford (mean, m2, n) of the positions, the current
    ``step_size`` and ``inverse_mass``."""

    step: tuple
    mass: tuple
    step_size: jnp.ndarray
    inverse_mass: jnp.ndarray


def window_adaptation(num_warmup: int, target_accept_prob: float, adapt_step_size: bool = True,
                      adapt_mass: bool = False):
    """``(init, update)`` of the whole warmup schedule over ``num_warmup`` recorded draws.

    ``init(step_size, dim)`` starts from a unit inverse mass; ``update(i, state, accept_prob, position)`` after
    draw ``i`` (0-based, counting warmup draws) returns the new state. During the warmup the step follows the
    dual-averaging iterate and becomes the averaged one at the last warmup draw; the mass, if adapted, is set
    at draw 3W/4. After the warmup nothing changes (the chain is then an exact, fixed kernel).
    """
    step_init, step_update, step_final = step_size_adaptation(target_accept_prob)
    mass_init, mass_update, mass_final = welford_covariance(diagonal=True)
    W = int(num_warmup)
    start, stop = W // 4, (3 * W) // 4

    def init(step_size, dim: int, dtype=jnp.float32) -> WindowState:
        h = jnp.asarray(step_size, dtype)
        return WindowState(step_init(h) if adapt_step_size else (), mass_init(dim) if adapt_mass else (),
                           h, jnp.ones(dim, dtype))

    def update(i, state: WindowState, accept_prob, position) -> WindowState:
        warm = i < W
        step, h, inv_mass, mass = state.step, state.step_size, state.inverse_mass, state.mass
        if adapt_step_size:
            new_step = step_update(step, accept_prob)
            last = i + 1 == W
            h_new = jnp.where(last, step_final(new_step), jnp.exp(new_step[0])).astype(h.dtype)
            step, h = select(warm, (new_step, h_new), (step, h))
        if adapt_mass:
            gather = (i >= start) & (i < stop)
            mass = select(gather, mass_update(position, mass), mass)
            switch = (i + 1 == stop) & (mass[2] > 1)
            inv_mass = jnp.where(switch, mass_final(mass, regularize=True)[0], inv_mass).astype(inv_mass.dtype)
            if adapt_step_size:  # the scale changed: adapt the step afresh from where it is
                step = select(switch, step_init(h), step)
        return WindowState(step, mass, h, inv_mass)

    return init, update
