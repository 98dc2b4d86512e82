r"""Neurons taken to (F1): the log tilt of (F1) in a Gaussian proposal's coordinates (:class:`Tilt`, JAX, float64,
compiled once per shape); Metropolis-adjusted Langevin steps of all neurons at once by the core's kernel
(:mod:`renormpp.mcmc.langevin`, :func:`_moved`); adaptive tempered sequential Monte Carlo (:func:`_tempered`); and
the populations they give (:class:`Population`, :func:`_renewed`)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Callable

import numpy as np

from ...mcmc import base, langevin
from ...network import get_activation, x64_context
from ..single_neuron import features
from .equations import _ess, _per_neuron, _resampled
from .proposals import Proposal, _fitted


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


#: tempered SMC (:func:`_tempered`) for ``tempered=True``: Langevin steps at each stage and the effective sample size
#: (share of the neurons) each stage keeps. On MNIST (0, 1), P = 200, alpha = 2 (4 000 neurons, the exact theory's
#: field) 10 and 0.8 reached (F1) in 7 stages (70 steps): the specialists (88.6 of N1) and the mean log tilt then stay
#: flat over 90 more steps, as after 14 stages of 10 at 0.95 (88.8); 4 stages of 5 at 0.5 left 63.9, still rising
_STAGE_MOVES, _STAGE_ESS = 10, 0.8


def _tempered(start, target: Tilt, rng, h: float = 0.5, moves: int = _STAGE_MOVES, ess: float = _STAGE_ESS,
              max_stages: int = 200):
    r"""Adaptive tempered sequential Monte Carlo (Del Moral, Doucet & Jasra, JRSS B 68, 411 (2006); the next power
    by bisection on the weights' effective sample size, as BlackJAX's ``adaptive_tempered_smc``) from the exact draws
    ``start`` (M, N0) of a unit Gaussian to :math:`\pi(\xi) \propto \mathcal N(\xi; 0, 1)\, e^{\ell(\xi)}`
    (the :class:`~.langevin.Tilt` ``target``): through :math:`\pi_\beta \propto \mathcal N(\xi; 0, 1)\,
    e^{\beta\ell(\xi)}`, each stage raising β as far as the incremental weights :math:`e^{\Delta\beta\,\ell}` keep
    an effective sample size of ``ess`` M, drawing the neurons by these weights (:func:`_resampled`) and moving them
    ``moves`` Langevin steps at the new β (:func:`_moved`, each leaving π_β invariant). A mode of π far from the
    start that Langevin steps reach only over hundreds of steps (the specialists of (F1) on MNIST: docs/log/validity.md,
    "Fresh populations") gets its weight from the reweighting, stage by stage, as long as some neurons lie in its
    direction. Returns the coordinates, the acceptance of each step, the mean log π_β after each, the step reached,
    the ladder of β, and the log of the normaliser :math:`E_{\mathcal N(0, 1)}[e^{\ell(\xi)}]`, the sum over stages
    of the log mean incremental weight (an unbiased estimate of the normaliser itself; Del Moral et al., Eq. (14))."""
    xi = start
    ell, _ = target(xi)
    beta, betas, rates, levels, log_z = 0.0, [0.0], [], [], 0.0
    while beta < 1.0:
        if len(betas) > max_stages:
            raise RuntimeError(f"tempered SMC did not reach the target in {max_stages} stages (beta = {beta:.3g}): "
                               "the tilt is too strong for these neurons; raise neurons")
        if _ess((1.0 - beta) * ell) >= ess * len(xi):
            new = 1.0
        else:  # bisection on the power: the largest step whose weights keep the effective sample size
            lo, hi = beta, 1.0
            for _ in range(50):
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if _ess((mid - beta) * ell) >= ess * len(xi) else (lo, mid)
            new = max(lo, beta + 1e-6)
        increment = (new - beta) * ell
        log_z += float(np.logaddexp.reduce(increment) - np.log(len(increment)))
        xi = xi[_resampled(increment, rng)]
        beta = new
        betas.append(beta)

        xi, r, lv, h = _moved(xi, target.at(beta), moves, rng, h=h)
        rates, levels = rates + list(r), levels + list(lv)
        ell, _ = target(xi)
    return xi, tuple(rates), tuple(levels), h, tuple(betas), log_z


@dataclass(frozen=True, eq=False)
class Population:
    """M neurons moved by Markov chain Monte Carlo to (F1) at the field (``m``, ``Sigma``) (``proposal="mcmc"``):
    ``moved`` are their coordinates under the Gaussian ``proposal`` (which :meth:`Proposal.draw` maps to weights),
    ``acceptance`` the share of neurons that moved at each step, ``levels`` the mean log-density after each (it
    levels off where the neurons have reached (F1)). As a law of the iteration's averages, prior over this
    law is 1/tilt at its field (``c`` = lambda1 N1; ``X`` and ``activation`` give the features): (F1) at another field
    reweights the neurons by the ratio of the two tilts."""

    proposal: Proposal
    moved: np.ndarray
    m: np.ndarray
    Sigma: np.ndarray
    c: float
    X: np.ndarray = field(repr=False)
    activation: str = "erf"
    acceptance: tuple = ()
    levels: tuple = ()
    step: float = 0.5

    @property
    def noise(self) -> np.ndarray:
        return self.moved

    def weights(self, lambda0) -> np.ndarray:
        """The neurons' weights (M, N0)."""
        return replace(self.proposal, noise=self.moved).draw(lambda0)[0]

    def draw(self, lambda0):
        """The neurons' weights (M, N0) and the log of prior over this law at each (up to a constant)."""
        w = self.weights(lambda0)
        return w, -_per_neuron(features(w, self.X, self.activation).T, self.m, self.Sigma, self.c)[2]

    def at(self, m, Sigma, c) -> bool:
        """Whether these neurons were moved to (F1) of the field (``m``, ``Sigma``) at ``c`` = lambda1 N1 (then
        their weights as a law of that (F1) are all 1)."""
        return c == self.c and np.array_equal(m, self.m) and np.array_equal(Sigma, self.Sigma)


def _renewed(gauss: Proposal, m, Sigma, target, moves: int, rng, h: float, *, fresh: bool = True,
             tempered: bool = False, X, activation, lambda0, c):
    """A population at (F1) of the field (m, Sigma) from the Gaussian proposal ``gauss``: the proposal fitted at the
    field (:func:`_fitted`), its neurons (``fresh``: new standard normals from ``rng``, independent of every earlier
    population) drawn by their weights, then moved ``moves`` Langevin steps (:func:`_moved`, from the step ``h``);
    ``tempered``: instead, new standard normals under the fitted proposal taken to (F1) by tempered sequential Monte
    Carlo (:func:`_tempered`, :data:`_STAGE_MOVES` steps a stage). Returns (the fitted proposal, the coordinates, the
    acceptances, the levels, the step reached)."""
    if fresh or tempered:
        gauss = replace(gauss, noise=rng.standard_normal(gauss.noise.shape))
    gauss, _, s, log_ratio = _fitted(gauss, m, Sigma, X=X, activation=activation, lambda0=lambda0, c=c)
    if tempered:  # the fit saw these normals: the tempering starts from new ones, exact draws of the proposal
        xi, rates, levels, h, *_ = _tempered(rng.standard_normal(gauss.noise.shape),
                                            target.at(gauss, m, Sigma), rng, h=h, moves=_STAGE_MOVES,
                                            ess=_STAGE_ESS)
        return gauss, xi, rates, levels, h
    start = gauss.noise[_resampled(_per_neuron(s, m, Sigma, c)[2] + log_ratio, rng)]
    xi, rates, levels, h = _moved(start, target.at(gauss, m, Sigma), moves, rng, h=h)
    return gauss, xi, rates, levels, h
