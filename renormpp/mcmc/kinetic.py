r"""Underdamped (kinetic) Langevin dynamics on a flat position, OBABO splitting, Metropolis-adjusted or not.

Positions q, momenta p, the Hamiltonian :math:`H = U(q) + \tfrac12 p^\top M^{-1} p` with an inverse mass
:math:`M^{-1}` (diagonal, or shared by the rows of a weight matrix: :mod:`.metrics`) and friction :math:`\gamma`.
One update with step h and :math:`a = e^{-\gamma h/2}`:

.. math::
    \text{O:}\; p \leftarrow a\,p + \sqrt{1-a^2}\,M^{1/2}\eta; \qquad
    \text{BAB:}\; p_{1/2} = p - \tfrac h2\nabla U(q),\; q' = q + h M^{-1}p_{1/2},\;
    p' = p_{1/2} - \tfrac h2 \nabla U(q'); \qquad \text{O again.}   \tag{K1}

With ``adjust=True`` the BAB step is accepted with probability :math:`\min(1, e^{-\Delta H})`,
:math:`\Delta H = H(q', p') - H(q, p)`; a rejected step keeps q and flips the momentum, :math:`p \leftarrow -p`
(Horowitz's generalized HMC, exact for any h). Without the test the scheme has an :math:`O(h^2)` bias in the
stationary variances. The momentum persists over a time :math:`1/\gamma`, so the chain moves ballistically
where ULA and MALA diffuse. A proposal whose U or gradient is not finite is rejected and flagged ``diverging``.

Each rejection reverses the momentum, so at an acceptance of 0.8 the motion turns round every few updates whatever
the friction. With ``accept_shift`` :math:`\delta > 0` the test uses Neal's (2020) non-reversible uniform instead of a
fresh one: a variable :math:`s \in [-1, 1)`, kept in the state, moves before every test by
:math:`s \leftarrow ((s + 1 + \delta) \bmod 2) - 1`; the step is accepted if :math:`|s| < e^{-\Delta H}`, and then
:math:`s \leftarrow s\,e^{\Delta H}`. :math:`\pi(q, p)\times{\rm Uniform}(s)` stays invariant, and rejections
cluster in time, so the momentum persists over longer stretches between reversals (tested on a Gaussian in
``tests/test_mcmc.py``).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from .base import Info, select
from .metrics import functions

__all__ = ["State", "Info", "init", "build_kernel"]


class State(NamedTuple):
    """Position q (n,), momentum p (n,), U and its gradient at q, and Neal's acceptance variable s, ``accept_level`` (a
    scalar in [-1, 1); None where each test draws a fresh uniform)."""

    position: jax.Array
    momentum: jax.Array
    potential_energy: jax.Array
    grad: jax.Array
    accept_level: jax.Array | None = None


def init(position, potential_fn: Callable, rng_key, inverse_mass=1.0, persistent_accept: bool = False) -> State:
    """The state at ``position`` with a momentum drawn from :math:`\\mathcal N(0, M)` (``inverse_mass``: an array,
    diagonal, or a :class:`renormpp.mcmc.metrics.RowMass`), and with ``persistent_accept`` a uniform s in [-1, 1)
    for ``build_kernel(accept_shift=...)``."""
    pe, grad = jax.value_and_grad(potential_fn)(position)
    draw, _, _ = functions(inverse_mass)
    if not persistent_accept:
        return State(position, draw(rng_key, position), pe, grad)
    k_p, k_s = jax.random.split(rng_key)
    return State(position, draw(k_p, position), pe, grad, jax.random.uniform(k_s, (), position.dtype, -1.0, 1.0))


def build_kernel(adjust: bool = True, accept_shift: float = 0.0) -> Callable:
    """``kernel(rng_key, state, potential_fn, step_size, inverse_mass, friction) -> (State, Info)``: one OBABO
    update (K1), Metropolis-adjusted if ``adjust``; with ``accept_shift`` > 0 (and a state from
    ``init(..., persistent_accept=True)``) the test uses Neal's non-reversible uniform, moved by that shift."""
    if accept_shift and not adjust:
        raise ValueError("accept_shift changes the Metropolis test: it needs adjust=True")

    def kernel(rng_key, state: State, potential_fn: Callable, step_size, inverse_mass, friction):
        k_o1, k_acc, k_o2 = jax.random.split(rng_key, 3)
        h = step_size
        a = jnp.exp(-friction * h / 2)
        draw, velocity, kinetic_energy = functions(inverse_mass)

        def refresh(momentum, key):  # O
            return a * momentum + jnp.sqrt(1 - a**2) * draw(key, momentum)

        q, momentum = state.position, refresh(state.momentum, k_o1)
        momentum_half = momentum - h / 2 * state.grad  # B
        q_new = q + h * velocity(momentum_half)  # A
        pe_new, grad_new = jax.value_and_grad(potential_fn)(q_new)
        momentum_new = momentum_half - h / 2 * grad_new  # B
        finite = jnp.isfinite(pe_new) & jnp.all(jnp.isfinite(grad_new))
        if adjust:
            dH = pe_new - state.potential_energy + kinetic_energy(momentum_new) - kinetic_energy(momentum)
            accept_prob = jnp.where(finite, jnp.exp(jnp.minimum(-dH, 0.0)), 0.0)
        else:
            accept_prob = finite.astype(q.dtype)
        if accept_shift:
            if state.accept_level is None:
                raise ValueError("accept_shift needs the acceptance variable in the state: "
                                 "init(..., persistent_accept=True)")
            s = jnp.mod(state.accept_level + 1 + accept_shift, 2) - 1
            accept = jnp.abs(s) < accept_prob
            s_new = jnp.where(accept, s * jnp.exp(jnp.where(accept, dH, 0.0)), s)  # s e^{dH}, not clipped
        else:
            accept = jax.random.uniform(k_acc, dtype=q.dtype) < accept_prob
            s_new = state.accept_level
        new = select(accept, State(q_new, momentum_new, pe_new, grad_new, s_new),
                     state._replace(momentum=-momentum, accept_level=s_new))  # rejected: flip
        return new._replace(momentum=refresh(new.momentum, k_o2)), Info(accept_prob, ~finite)

    return kernel
