r"""What every kernel of the core shares: the state, ``select``, the inner loop and the Gibbs step."""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

#: a Metropolis-adjusted chain whose mean acceptance is below this hardly moves: it is frozen (the kernels' warning,
#: renormpp.infer; the health check of a run, renormpp.diagnostics.sampler_health)
MIN_ACCEPT_PROB = 0.1


class State(NamedTuple):
    """A point of the chain: the flat ``position`` (n,), its ``potential_energy`` U and its gradient ``grad`` (n,)."""

    position: jax.Array
    potential_energy: jax.Array
    grad: jax.Array


class Info(NamedTuple):
    """What one update reports: the Metropolis ``accept_prob`` (1 for unadjusted updates) and ``diverging``
    (the proposal's potential or gradient was NaN or inf, and it was rejected)."""

    accept_prob: jax.Array
    diverging: jax.Array


class LoopInfo(NamedTuple):
    """What :func:`inner_loop` reports for k updates: the mean ``accept_prob`` and the ``num_divergent`` count."""

    accept_prob: jax.Array
    num_divergent: jax.Array


def init(position, potential_fn: Callable) -> State:
    """The state at ``position``: :math:`U` and :math:`\\nabla U` in one pass."""
    pe, grad = jax.value_and_grad(potential_fn)(position)
    return State(position, pe, grad)


def select(accept, new, old):
    """``new`` where ``accept`` else ``old``, leaf by leaf (the accept/reject of every Metropolis test)."""
    return jax.tree_util.tree_map(lambda a, b: jnp.where(accept, a, b), new, old)


def is_finite(state) -> jax.Array:
    """True if every entry of every field of ``state`` is finite."""
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in jax.tree_util.tree_leaves(state)]))


def inner_loop(kernel: Callable, num_steps: int) -> Callable:
    """``run(rng_key, state, *args) -> (state, LoopInfo)``: ``num_steps`` updates of ``kernel`` in one ``fori_loop``.

    The acceptance probabilities are averaged and the divergences counted. A state that is not finite at the
    end (an unadjusted kernel, which tests nothing per update, lets NaN and inf propagate) is rejected as a
    whole: the loop returns its starting state, with acceptance 0 and one more divergence. So no draw is NaN,
    and a kernel needs no finiteness test per update unless its Metropolis test needs one.
    """
    num_steps = int(num_steps)

    def run(rng_key, state, *args):
        def body(_, carry):
            key, st, acc, n_div = carry
            key, sub = jax.random.split(key)
            st, info = kernel(sub, st, *args)
            return key, st, acc + info.accept_prob, n_div + info.diverging.astype(jnp.int32)

        zero = jnp.zeros((), state.potential_energy.dtype)
        _, new, acc, n_div = jax.lax.fori_loop(0, num_steps, body, (rng_key, state, zero, jnp.array(0, jnp.int32)))
        ok = is_finite(new)
        return select(ok, new, state), LoopInfo(jnp.where(ok, acc / num_steps, zero),
                                                n_div + (~ok).astype(jnp.int32))

    return run


def gibbs_step(rng_key, state, potential_fn: Callable, conditional_draw: Callable):
    r"""An exact Gibbs update: ``conditional_draw(rng_key, position) -> position`` redraws some coordinates from
    their conditional distribution; U and :math:`\nabla U` are recomputed there. Any other field of ``state``
    (a momentum) is kept, which leaves the joint target invariant when it is independent of the position.
    A non-finite result (e.g. a failed Cholesky factor in float32) keeps the old point."""
    position = conditional_draw(rng_key, state.position)
    pe, grad = jax.value_and_grad(potential_fn)(position)
    new = state._replace(position=position, potential_energy=pe, grad=grad)
    return select(is_finite(new), new, state)


def max_curvature(potential_fn: Callable, position, rng_key, num_iters: int = 30) -> jax.Array:
    r"""The largest eigenvalue :math:`\lambda_{\max}` of the Hessian of U at ``position``, by power iteration on
    Hessian-vector products (``num_iters`` of them, each about two gradients).

    It sets the scale of a stable, accurate Langevin step: ULA is unstable for :math:`h > 2/\lambda_{\max}`, and on a
    Gaussian its stationary variance along the stiffest direction is :math:`1/(\lambda(1 - h\lambda/2))`, off by
    :math:`h\lambda/2` (supplement's Langevin update; Roberts & Tweedie 1996).
    """
    grad = jax.grad(potential_fn)

    def hvp(v):
        return jax.jvp(grad, (position,), (v,))[1]

    def body(_, v):
        w = hvp(v)
        return w / jnp.maximum(jnp.linalg.norm(w), jnp.finfo(w.dtype).tiny)

    v0 = jax.random.normal(rng_key, position.shape, position.dtype)
    v = jax.lax.fori_loop(0, num_iters, body, v0 / jnp.linalg.norm(v0))
    return jnp.vdot(v, hvp(v))
