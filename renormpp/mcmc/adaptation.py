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
* Row mass (``rows``, :class:`renormpp.mcmc.metrics.RowMass`): on a weight matrix :math:`w\in\mathbb R^{R\times C}`
  the same draws give the covariance of a row pooled over the R rows,
  :math:`A = \frac1R\sum_r {\rm Cov}(w_r) = \frac1R\big[\frac1n\sum_t w_t^\top w_t - \bar w^\top \bar w\big]`,
  regularized as the diagonal (:math:`\tfrac{n}{n+5}A + 10^{-3}\tfrac{5}{n+5}I`), the block of (M1).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from numpyro.infer.hmc_util import dual_averaging, welford_covariance

from .base import select
from .metrics import RowMass, Rows


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
    ``step_size`` and ``inverse_mass``, and the ``schedule`` (start, stop, end): the draws that open and close the
    mass window and end the warmup (:func:`reschedule` moves them)."""

    step: tuple
    mass: tuple
    step_size: jnp.ndarray
    inverse_mass: jnp.ndarray
    schedule: jnp.ndarray


def reschedule(state: WindowState, start, stop, end, *, restart_window: bool = False) -> WindowState:
    """The warmup of ``state`` with its mass window moved to draws ``[start, stop)`` and its end to draw ``end``
    (each an int or an array with one value per chain): how an adaptive-length warmup ends early
    (:class:`renormpp.infer.AdaptiveWarmup`, through the sampler's ``reschedule``). Draws already past keep what
    they did, except with ``restart_window``: then the positions the mass window has gathered so far are dropped, so
    that the window learns from ``start`` on only (the chains relaxed after the window had opened)."""
    s = jnp.stack(jnp.broadcast_arrays(*(jnp.asarray(v, jnp.int32) for v in (start, stop, end))), axis=-1)
    mass = jax.tree_util.tree_map(jnp.zeros_like, state.mass) if restart_window else state.mass  # Welford's start
    return state._replace(schedule=jnp.broadcast_to(s, state.schedule.shape).astype(state.schedule.dtype), mass=mass)


def _regularize(cov, n):
    """Stan's shrinkage of a covariance estimated from n draws towards 1e-3 times the identity."""
    return n / (n + 5.0) * cov + 1e-3 * (5.0 / (n + 5.0)) * jnp.eye(cov.shape[0], dtype=cov.dtype)


def _row_moments(rows: Rows):
    """``(init, update, final)`` of the pooled row covariance of the block ``rows`` (see the module docstring)."""

    def init(dtype):
        return (jnp.zeros((rows.cols, rows.cols), dtype), jnp.zeros((rows.rows, rows.cols), dtype),
                jnp.zeros((), dtype))

    def update(position, state):
        w = position[rows.offset:rows.offset + rows.rows * rows.cols].reshape(rows.rows, rows.cols)
        s2, s1, n = state
        return s2 + w.T @ w, s1 + w, n + 1

    def final(state):
        s2, s1, n = state
        n = jnp.maximum(n, 1.0)
        mean = s1 / n
        return _regularize((s2 / n - mean.T @ mean) / rows.rows, n)

    return init, update, final


def window_adaptation(num_warmup: int, target_accept_prob: float, adapt_step_size: bool = True,
                      adapt_mass: bool = False, rows: Rows | None = None, frozen=None):
    """``(init, update)`` of the whole warmup schedule over ``num_warmup`` recorded draws.

    ``init(step_size, dim)`` starts from a unit inverse mass; ``update(i, state, accept_prob, position)`` after
    draw ``i`` (0-based, counting warmup draws) returns the new state. ``position`` may be a stack (k, dim): the k
    positions of chains that adapt together (pooled adaptation, with ``accept_prob`` their mean acceptance), so that
    a window of n draws learns the mass from k n positions. During the warmup the step follows the
    dual-averaging iterate and becomes the averaged one at the last warmup draw; the mass, if adapted, is set
    at draw 3W/4. These three draws (W/4, 3W/4, W) are the state's ``schedule``, which :func:`reschedule` can move
    while the warmup runs. After the warmup nothing changes (the chain is then an exact, fixed kernel). With ``rows`` (and
    ``adapt_mass``) the inverse mass is a :class:`RowMass`: dense and shared on the rows of that weight matrix.
    ``frozen`` (a boolean mask of the position, or None): coordinates the dynamics does not move (inverse mass 0, see
    :mod:`.metrics`), e.g. those a Gibbs step draws.
    """
    step_init, step_update, step_final = step_size_adaptation(target_accept_prob)
    mass_init, mass_update, mass_final = welford_covariance(diagonal=True)
    W = int(num_warmup)
    schedule = (W // 4, (3 * W) // 4, W)

    if rows is not None and not adapt_mass:
        raise ValueError("a row mass is learned in the warmup: rows needs adapt_mass=True")
    if rows is not None:
        row_init, row_update, row_final = _row_moments(rows)

    def freeze(diag):
        return diag if frozen is None else jnp.where(frozen, 0.0, diag).astype(diag.dtype)

    def init(step_size, dim: int, dtype=jnp.float32) -> WindowState:
        h = jnp.asarray(step_size, dtype)
        mass = (mass_init(dim), row_init(dtype)) if rows is not None else mass_init(dim) if adapt_mass else ()
        inv_mass = RowMass.identity(dim, rows, dtype) if rows is not None else jnp.ones(dim, dtype)
        inv_mass = (RowMass(freeze(inv_mass.diag), inv_mass.block, inv_mass.factor, rows) if rows is not None
                    else freeze(inv_mass))
        return WindowState(step_init(h) if adapt_step_size else (), mass, h, inv_mass, jnp.array(schedule, jnp.int32))

    def gather_one(mass, position):
        if rows is None:
            return mass_update(position, mass), None
        return (mass_update(position, mass[0]), row_update(position, mass[1])), None

    def gather(position, mass):  # one position, or a stack of them (the chains of a pooled adaptation)
        return jax.lax.scan(gather_one, mass, position if position.ndim == 2 else position[None])[0]

    def estimate(mass, inv_mass):
        """The inverse mass from the draws gathered so far."""
        if rows is None:
            return freeze(mass_final(mass, regularize=True)[0].astype(inv_mass.dtype))
        diag = freeze(mass_final(mass[0], regularize=True)[0].astype(inv_mass.diag.dtype))
        return RowMass.from_covariance(diag, row_final(mass[1]).astype(inv_mass.block.dtype), rows)

    def update(i, state: WindowState, accept_prob, position) -> WindowState:
        start, stop, end = state.schedule[0], state.schedule[1], state.schedule[2]
        warm = i < end
        step, h, inv_mass, mass = state.step, state.step_size, state.inverse_mass, state.mass
        if adapt_step_size:
            new_step = step_update(step, accept_prob)
            last = i + 1 == end
            h_new = jnp.where(last, step_final(new_step), jnp.exp(new_step[0])).astype(h.dtype)
            step, h = select(warm, (new_step, h_new), (step, h))
        if adapt_mass:
            mass = select((i >= start) & (i < stop), gather(position, mass), mass)
            switch = (i + 1 == stop) & ((mass[0] if rows is not None else mass)[2] > 1)
            inv_mass = select(switch, estimate(mass, inv_mass), inv_mass)
            if adapt_step_size:  # the scale changed: adapt the step afresh from where it is
                step = select(switch, step_init(h), step)
        return state._replace(step=step, mass=mass, step_size=h, inverse_mass=inv_mass)

    return init, update
