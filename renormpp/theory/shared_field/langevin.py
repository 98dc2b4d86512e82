r"""Neurons moved to (F1) exactly: the log tilt of (F1) in a Gaussian proposal's coordinates (JAX, float64, compiled
once per shape), :class:`Tilt`, and Metropolis-adjusted Langevin steps of all neurons at once, :func:`_moved`, by the
core's kernel (:mod:`renormpp.mcmc.langevin`) vectorized over the neurons."""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Callable

import numpy as np

from ...mcmc import base, langevin
from ...network import get_activation, x64_context


@dataclass(frozen=True)
class Tilt:
    r"""The law :math:`\pi(\xi) \propto \mathcal N(\xi; 0, 1)\, e^{\beta\,\ell(\xi)}` of every neuron's coordinates
    ξ (N0,): ``ell(xi, *args)`` is the log tilt of one neuron (a JAX function, compiled once per function and
    shape), ``beta`` its power (a tempered stage's; 1: the law itself).

    Called on the coordinates (M, N0) of M neurons, it gives :math:`\beta\ell` (M,) and its gradient (M, N0) in
    numpy, ``chunk`` neurons at a time, in local float64."""

    ell: Callable
    args: tuple = ()
    beta: float = 1.0
    chunk: int = 4096

    def __call__(self, xi):
        import jax.numpy as jnp

        value_and_grad = _programs(self.ell)[0]
        with x64_context():
            parts = [value_and_grad(jnp.asarray(xi[k:k + self.chunk]), self.args)
                     for k in range(0, len(xi), self.chunk)]
            ell = np.concatenate([np.asarray(v) for v, _ in parts])
            grad = np.concatenate([np.asarray(g) for _, g in parts])
        return self.beta * ell, self.beta * grad

    def at(self, beta: float) -> "Tilt":
        """The same tilt raised to the power ``beta``."""
        return replace(self, beta=float(beta))


@dataclass(frozen=True)
class _TiltTarget:
    """(F1)'s log tilt for the inputs ``X``: ``target.at(gauss, m, Sigma)`` is the :class:`Tilt` of the field (m,
    Sigma) in the coordinates of the Gaussian proposal ``gauss``; ``target(xi, gauss, m, Sigma)`` its value and
    gradient."""

    X: object
    ell: Callable

    def at(self, gauss, m, Sigma) -> Tilt:
        import jax.numpy as jnp

        P, D = m.shape
        with x64_context():
            args = tuple(jnp.asarray(a, jnp.float64) for a in (self.X, gauss.basis, gauss.mean, gauss.chol, m,
                                                                  np.reshape(Sigma, (D, P, D, P))))
        return Tilt(self.ell, args)

    def __call__(self, xi, gauss, m, Sigma):
        return self.at(gauss, m, Sigma)(xi)


def _tilt_target(X, activation, lambda0, c) -> _TiltTarget:
    r"""The log-density of (F1) over prior-over-proposal in the coordinates ξ of a Gaussian proposal:
    :math:`\ell(\xi)` = the log tilt of (F1) at w(ξ) plus the log of prior over proposal (Proposal.draw's, up to a
    constant); so that (F1) in these coordinates is :math:`\propto \mathcal N(\xi; 0, 1)\, e^{\ell(\xi)}`. The
    inputs, the field and the proposal are arguments of one program per activation, lambda0 and c
    (:func:`_tilt_ell`), compiled once per shape: every solve and every ``predict`` of the same shapes reuse it."""
    return _TiltTarget(X, _tilt_ell(activation, float(lambda0), float(c)))


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
def _tilt_ell(activation, lambda0: float, c: float):
    """(F1)'s log tilt of one neuron in a proposal's coordinates, :func:`_tilt_target`'s, for one activation,
    lambda0 and c: ``ell(xi, X, B, mean, L, m, S)`` (one function per key: its compiled programs are reused)."""
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

    return ell


@lru_cache(maxsize=32)
def _programs(ell: Callable):
    r"""The compiled programs of one log tilt ``ell(xi, *args)``, vectorized over neurons: ``ell_and_grad(xi,
    args)``, ``ell_init(xi, beta, args)`` (the core's state of each neuron) and ``ell_mala(keys, state, h, beta,
    args)``, one Metropolis-adjusted Langevin update (:func:`renormpp.mcmc.langevin.build_kernel`, (L1)-(L2)) of each
    neuron on :math:`U(\xi) = |\xi|^2/2 - \beta\,\ell(\xi)`."""
    import jax

    kernel = langevin.build_kernel(adjust=True)

    def potential(beta, args):
        return lambda x: 0.5 * x @ x - beta * ell(x, *args)

    def ell_and_grad(x, args):
        return jax.value_and_grad(ell)(x, *args)

    def ell_init(x, beta, args):
        return base.init(x, potential(beta, args))

    def ell_mala(key, state, h, beta, args):
        return kernel(key, state, potential(beta, args), h)

    return (jax.jit(jax.vmap(ell_and_grad, in_axes=(0, None))),
            jax.jit(jax.vmap(ell_init, in_axes=(0, None, None))),
            jax.jit(jax.vmap(ell_mala, in_axes=(0, 0, None, None, None))))


def _moved(start, tilt: Tilt, moves: int, rng, accept: float = 0.574, h: float = 0.5):
    r"""``moves`` Metropolis-adjusted Langevin steps of every neuron at once (Roberts & Tweedie, Bernoulli 2, 341
    (1996); the core's kernel, :mod:`renormpp.mcmc.langevin`, with its step :math:`h/2`) on
    :math:`\log\pi(\xi) = -|\xi|^2/2 + \beta\ell(\xi)` (the :class:`Tilt` ``tilt``) in the coordinates ``start``
    (M, N0) of a Gaussian proposal fitted to (F1) (so that π is near a unit Gaussian, whatever the scale of the
    tilt). Each step leaves π invariant; the step h (one for all neurons) is tuned between steps towards the mean
    acceptance probability ``accept`` from ``h``; the keys come from ``rng``. Returns the coordinates, the mean
    acceptance probability of each step, the mean of log π over the neurons after each (it levels off where they have
    reached π) and the step reached."""
    import jax
    import jax.numpy as jnp

    _, init, mala = _programs(tilt.ell)
    key = jax.random.PRNGKey(int(rng.integers(2**31)))
    rates, levels = [], []
    with x64_context():
        beta = jnp.asarray(tilt.beta, jnp.float64)
        chunks = [init(jnp.asarray(start[k:k + tilt.chunk], jnp.float64), beta, tilt.args)
                  for k in range(0, len(start), tilt.chunk)]
        for _ in range(moves):
            key, *keys = jax.random.split(key, len(chunks) + 1)
            steps = [mala(jax.random.split(k, len(st.position)), st, jnp.asarray(h / 2, jnp.float64), beta, tilt.args)
                     for k, st in zip(keys, chunks)]
            chunks = [st for st, _ in steps]
            rates.append(float(np.mean(np.concatenate([np.asarray(info.accept_prob) for _, info in steps]))))
            levels.append(-float(np.mean(np.concatenate([np.asarray(st.potential_energy) for st in chunks]))))
            h = float(np.clip(h * np.exp(2 * (rates[-1] - accept)), 1e-4, 4.0))
        xi = np.concatenate([np.asarray(st.position) for st in chunks])
    return xi, tuple(rates), tuple(levels), h
