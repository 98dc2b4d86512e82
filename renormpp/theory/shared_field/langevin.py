r"""Neurons moved to (F1) exactly: the log-density of (F1) and its gradient in a Gaussian proposal's coordinates
(JAX, float64, compiled once per shape), and Metropolis-adjusted Langevin steps of all neurons at once."""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...network import get_activation


def _tilt_target(X, activation, lambda0, c, chunk: int = 4096):
    r"""The log-density of (F1) over prior-over-proposal in the coordinates ξ of a Gaussian proposal, and its
    gradient: ``target(xi, gauss, m, Sigma) -> (ell (M,), grad (M, N0))``, :math:`\ell(\xi)` = the log tilt of (F1)
    at w(ξ) plus the log of prior over proposal (Proposal.draw's, up to a constant); so that (F1) in these coordinates
    is :math:`\propto \mathcal N(\xi; 0, 1)\, e^{\ell(\xi)}`. JAX in local float64, ``chunk`` neurons at a time.
    The inputs, the field and the proposal are arguments of one program (:func:`_tilt_step`) compiled once per
    shape: every solve and every ``predict`` of the same shapes reuse it."""
    import jax.numpy as jnp

    from ...network import x64_context

    step = _tilt_step(activation, float(lambda0), float(c))
    with x64_context():
        X = jnp.asarray(X, jnp.float64)

    def target(xi, gauss, m, Sigma):
        P, D = m.shape
        with x64_context():
            args = (X, gauss.basis, gauss.mean, gauss.chol, m, Sigma.reshape(D, P, D, P))
            parts = [step(jnp.asarray(xi[k:k + chunk]), *args) for k in range(0, len(xi), chunk)]
            return (np.concatenate([np.asarray(v) for v, _ in parts]),
                    np.concatenate([np.asarray(g) for _, g in parts]))

    return target


@lru_cache(maxsize=1)
def _quadratic():
    r"""``quadratic(s, S)``: (F1)'s :math:`q_{ab} = s^\top \Sigma_{ab} s` of one neuron's features s (P,) under the
    field's covariance S (D, P, D, P), symmetric as a PD x PD matrix, with its gradient in s from the same product
    :math:`U = \Sigma s`: :math:`\partial q_{ab}/\partial s = U_{a\cdot b} + U_{b\cdot a}` by that symmetry.
    Autodiff of the einsum multiplies by S a second time (at P = 1000 a third of a step's time,
    benchmarks/shared_field_speed.py); S is not differentiated."""
    import jax
    import jax.numpy as jnp

    @jax.custom_vjp
    def quadratic(s, S):
        return jnp.einsum("p,apbq,q->ab", s, S, s)

    def forward(s, S):
        U = jnp.einsum("apbq,q->apb", S, s)
        return jnp.einsum("p,apb->ab", s, U), U

    def backward(U, g):
        return jnp.einsum("ab,apb->p", g, U) + jnp.einsum("ab,bpa->p", g, U), None

    quadratic.defvjp(forward, backward)
    return quadratic


@lru_cache(maxsize=16)
def _tilt_step(activation, lambda0: float, c: float):
    """The compiled ``(ell, grad)`` of :func:`_tilt_target` over a chunk of neurons, for one activation, lambda0 and
    c: ``step(xi, X, B, mean, L, m, S)``."""
    import jax
    import jax.numpy as jnp

    act = get_activation(activation).fn
    quadratic = _quadratic()

    def ell(xi, X, B, mean, L, m, S):
        eta = xi @ B
        u = mean + eta @ L.T
        w = xi / np.sqrt(lambda0) + (u - eta / np.sqrt(lambda0)) @ B.T
        s = act(X @ w / np.sqrt(X.shape[1]))
        q = quadratic(s, S)
        z = m.T @ s
        D = len(z)
        log_tilt = -0.5 * jnp.linalg.slogdet(jnp.eye(D) + q / c)[1] + 0.5 * z @ jnp.linalg.solve(c * jnp.eye(D) + q, z)
        return log_tilt - 0.5 * lambda0 * u @ u + 0.5 * eta @ eta

    return jax.jit(jax.vmap(jax.value_and_grad(ell), in_axes=(0,) + (None,) * 6))


def _moved(start, target, moves: int, rng, accept: float = 0.574, h: float = 0.5):
    r"""``moves`` Metropolis-adjusted Langevin steps of every neuron at once (Roberts & Tweedie, Bernoulli 2, 341
    (1996)) on :math:`\log\pi(\xi) = -|\xi|^2/2 + \ell(\xi)` in the coordinates ``start`` (M, N0) of a Gaussian
    proposal fitted to (F1) (so that π is near a unit Gaussian, whatever the scale of the tilt); ``target(xi) ->
    (ell, grad)``. Each step leaves (F1) invariant; the step h (one for all neurons) is tuned between steps towards
    the acceptance ``accept`` from ``h``. Returns the coordinates, the acceptance of each step, the mean of log π over
    the neurons after each (it levels off where they have reached (F1)) and the step reached."""
    def log_pi(xi, ell, grad):
        return -0.5 * np.sum(xi * xi, axis=1) + ell, grad - xi

    xi = start
    lp, g = log_pi(xi, *target(xi))
    rates, levels = [], []
    for _ in range(moves):
        new = xi + 0.5 * h * g + np.sqrt(h) * rng.standard_normal(xi.shape)
        lp_new, g_new = log_pi(new, *target(new))
        log_q_back = -np.sum((xi - new - 0.5 * h * g_new) ** 2, axis=1) / (2 * h)
        log_q_fwd = -np.sum((new - xi - 0.5 * h * g) ** 2, axis=1) / (2 * h)
        take = np.log(rng.random(len(xi))) < lp_new - lp + log_q_back - log_q_fwd
        xi, lp, g = (np.where(take[:, None], new, xi), np.where(take, lp_new, lp),
                     np.where(take[:, None], g_new, g))
        rates.append(float(take.mean()))
        levels.append(float(lp.mean()))
        h = float(np.clip(h * np.exp(2 * (rates[-1] - accept)), 1e-4, 4.0))
    return xi, tuple(rates), tuple(levels), h
