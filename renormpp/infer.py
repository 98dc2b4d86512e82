r"""Langevin MCMC as a NumPyro kernel: the paper's dynamics (ULA) and its Metropolis-adjusted form (MALA).

One update of the unadjusted Langevin algorithm (ULA) on the potential energy :math:`U` with step :math:`h`:

.. math::  \theta' = \theta - h\,\nabla U(\theta) + \sqrt{2h}\,\eta, \qquad \eta \sim \mathcal N(0, 1).

The paper (supplement, Eq. supp:eq:langevin) writes :math:`\theta' = \theta - \epsilon\nabla\tilde{\mathcal L}
+ \sqrt{2\epsilon T}\,\eta` with :math:`\tilde{\mathcal L} = T U`: that is ULA with :math:`h = \epsilon T`
(:func:`paper_step_size`). ULA samples the posterior up to an :math:`O(h)` bias; ``adjust=True`` adds the
Metropolis-Hastings test with the Langevin proposal :math:`q(\theta'|\theta) = \mathcal N(\theta - h\nabla U, 2h)`
(MALA), which makes it exact.

A step whose potential or gradient is NaN or inf is rejected (the chain stays where it was), flagged in
the ``diverging`` field, counted in ``num_divergent``, and reported with a warning that names the step
size: no draw is ever NaN. MALA tests every update; ULA, whose updates have no test, tests once per
recorded draw (NaN and inf propagate) and rejects the draw's ``inner_steps`` updates together, so that
its inner loop runs at the speed of a bare loop.
"""
from __future__ import annotations

import warnings
from collections import namedtuple
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro.infer.hmc_util import dual_averaging as _dual_averaging
from numpyro.infer.initialization import init_to_sample
from numpyro.infer.mcmc import MCMCKernel
from numpyro.infer.util import initialize_model
from numpyro.util import identity, is_prng_key

LangevinState = namedtuple(
    "LangevinState",
    ["i", "z", "potential_energy", "z_grad", "obs", "accept_prob", "mean_accept_prob", "diverging",
     "num_divergent", "step_size", "adapt_state", "rng_key"],
)
LangevinState.__doc__ = """State of :class:`Langevin`: draw counter ``i``, position ``z`` (dict of sites),
its ``potential_energy`` and flat gradient ``z_grad``, the recorded observables ``obs`` (None without
``observables``), the mean acceptance probability over the last draw's inner steps ``accept_prob`` (1 for
ULA), its running mean ``mean_accept_prob`` over the draws, ``diverging`` (a step of the last draw
was non-finite and rejected), ``num_divergent`` (the total so far: MALA counts updates, ULA draws), the
current ``step_size``, the dual-averaging state ``adapt_state`` (empty without adaptation) and ``rng_key``."""


def paper_step_size(epsilon: float = 1e-3, T: float = 0.01) -> float:
    r"""ULA step :math:`h = \epsilon T` equivalent to the paper's update with learning rate :math:`\epsilon`.

    The paper's :math:`\theta \leftarrow \theta - \epsilon\nabla(T U) + \sqrt{2\epsilon T}\eta` equals
    :math:`\theta \leftarrow \theta - h\nabla U + \sqrt{2h}\eta` with :math:`h = \epsilon T`; e.g. the paper's
    :math:`\epsilon = 10^{-3}` at :math:`T = 0.01` is ``step_size=1e-5``.
    """
    if not (epsilon > 0 and T > 0):
        raise ValueError(f"epsilon and T must be positive; got epsilon={epsilon}, T={T}")
    return float(epsilon) * float(T)


def _warn_divergence(first, total, step_size):
    first = np.atleast_1d(np.asarray(first))
    if first.any():
        warnings.warn(
            f"Langevin: a step with step_size={float(step_size):.3g} gave a NaN or inf potential or gradient "
            f"({int(np.max(total))} so far in one chain); the step was rejected and the chain kept its last "
            "finite state. Reduce step_size (ULA needs h well below 2 / the largest curvature of U).",
            RuntimeWarning,
            stacklevel=2,
        )


class Langevin(MCMCKernel):
    r"""Langevin dynamics (ULA, or MALA with ``adjust=True``) as a :class:`numpyro.infer.mcmc.MCMCKernel`.

    Parameters
    ----------
    model : a NumPyro model, e.g. :func:`renormpp.models.one_hidden_layer`; or
    potential_fn : the potential energy U of a pytree of parameters (then give ``init_params`` to ``run``).
    step_size : the ULA step h (see :func:`paper_step_size` for the paper's units).
    adjust : Metropolis-adjust each update (MALA); the acceptance probability is in ``extra_fields``.
    inner_steps : updates per recorded draw, in one compiled loop (the paper records every 100).
    observables : ``fn(params) -> pytree`` recorded instead of the parameters (e.g.
        :func:`renormpp.observables.default`); ``params`` are the constrained sites of the model.
    init_strategy : how to initialize from the model; the default draws from the prior, as the paper does.
    adapt_step_size : MALA only: during the ``num_warmup`` draws of :class:`~numpyro.infer.MCMC`, tune the step
        by dual averaging (Hoffman & Gelman 2014, numpyro's ``dual_averaging``) so that the mean acceptance
        probability of a draw's updates approaches ``target_accept_prob``; ``step_size`` is the first guess.
        The step is fixed after the warmup (the chain is then exact MALA); it is in the state's ``step_size``.
    target_accept_prob : the acceptance target, 0.574 by default (optimal for MALA in high dimension,
        Roberts & Rosenthal 1998).
    gibbs_fn, gibbs_sites : an exact Gibbs update of some sites, ``gibbs_fn(rng_key, gibbs_sites, other_sites) ->
        gibbs_sites`` (the signature of :class:`numpyro.infer.HMCGibbs`), applied after the ``inner_steps``
        updates of every draw; e.g. ``gibbs_fn=renormpp.readout.gibbs_fn(X, Y, T=T, lambda1=lambda1)`` with
        ``gibbs_sites=("v",)`` draws the readout exactly given w, so the Langevin updates only have to move w
        (the v moves they also make are harmless). Each part leaves the posterior invariant, so the
        composition does. The sites must be unconstrained (a Normal prior, as v's).
    warn_divergences : warn (from a host callback) at the first divergence of each chain. The callback
        costs throughput on a CPU (about 20% at P=1000, N0=144, N1=1000 on 2 cores, a few % at N0=784;
        ``benchmarks/sampler.py``); with False, divergences are only flagged (``diverging``,
        ``num_divergent``), and draws are still never NaN.

    Use with :class:`numpyro.infer.MCMC` (any ``chain_method``; thinning; progress bar). To continue a run,
    ``mcmc.post_warmup_state = mcmc.last_state`` and ``mcmc.run(mcmc.last_state.rng_key, ...)``.
    """

    def __init__(self, model=None, *, potential_fn=None, step_size: float, adjust: bool = False,
                 inner_steps: int = 1, observables: Callable | None = None,
                 init_strategy: Callable = init_to_sample, warn_divergences: bool = True,
                 adapt_step_size: bool = False, target_accept_prob: float = 0.574,
                 gibbs_fn: Callable | None = None, gibbs_sites=("v",)):
        if (model is None) == (potential_fn is None):
            raise ValueError("give exactly one of model or potential_fn")
        if not (np.isfinite(step_size) and step_size > 0):
            raise ValueError(f"step_size must be a positive finite number; got {step_size!r}")
        if int(inner_steps) != inner_steps or inner_steps < 1:
            raise ValueError(f"inner_steps must be a positive integer; got {inner_steps!r}")
        if adapt_step_size and not adjust:
            raise ValueError("adapt_step_size needs adjust=True (MALA): ULA has no acceptance probability to target")
        if not 0 < target_accept_prob < 1:
            raise ValueError(f"target_accept_prob must be in (0, 1); got {target_accept_prob!r}")
        if gibbs_fn is not None and not gibbs_sites:
            raise ValueError("gibbs_fn needs the names of the sites it updates: gibbs_sites=('v',)")
        self._gibbs_fn, self._gibbs_sites = gibbs_fn, tuple(gibbs_sites)
        self._adapt = bool(adapt_step_size)
        self._target = float(target_accept_prob)
        self._num_warmup = 0
        self._model = model
        self._potential_fn = potential_fn
        self._step_size = float(step_size)
        self._adjust = bool(adjust)
        self._inner_steps = int(inner_steps)
        self._observables = observables
        self._init_strategy = init_strategy
        self._warn_divergences = bool(warn_divergences)
        self._postprocess_fn = None
        self._sample_fn = None  # set by init; MCMC calls init while this is None

    # ---- MCMCKernel interface -------------------------------------------------------------------
    @property
    def model(self):
        return self._model

    @property
    def step_size(self) -> float:
        return self._step_size

    @property
    def sample_field(self):
        return "z" if self._observables is None else "obs"

    @property
    def default_fields(self):
        return (self.sample_field,)

    def get_diagnostics_str(self, state):
        acc = f"acc. prob={float(jnp.mean(state.mean_accept_prob)):.2f}, " if self._adjust else ""
        return f"{acc}divergences={int(jnp.sum(state.num_divergent))}"

    def postprocess_fn(self, model_args, model_kwargs):
        if self._observables is not None or self._postprocess_fn is None:
            return identity
        return self._postprocess_fn(*model_args, **(model_kwargs or {}))

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        model_kwargs = {} if model_kwargs is None else model_kwargs
        self._num_warmup = int(num_warmup)
        batched = not is_prng_key(rng_key)
        if batched:
            rng_key, key_init = jnp.swapaxes(jax.vmap(jax.random.split)(rng_key), 0, 1)
        else:
            rng_key, key_init = jax.random.split(rng_key)
        if self._model is not None:
            params_info, potential_gen, self._postprocess_fn, _ = initialize_model(
                key_init, self._model, dynamic_args=True, init_strategy=self._init_strategy,
                model_args=model_args, model_kwargs=model_kwargs,
            )
            if init_params is None:  # MCMC.run(..., init_params=...) takes precedence over init_strategy
                init_params = params_info[0]
            self._potential_fn = potential_gen(*model_args, **model_kwargs)
            self._constrain = self._postprocess_fn(*model_args, **model_kwargs)
        else:
            if init_params is None:
                raise ValueError("with potential_fn, pass init_params to MCMC.run")
            self._constrain = identity
        if self._gibbs_fn is not None:
            sites = set(init_params)
            missing = [k for k in self._gibbs_sites if k not in sites]
            if missing:
                raise ValueError(f"gibbs_sites {missing} are not sites of the model (its sites: {sorted(sites)})")
        init_fn, advance = self._init_one, self._sample_one
        if batched:
            init_fn, advance = jax.vmap(init_fn), jax.vmap(advance)
        h = self._step_size

        def sample_fn(state):
            new = advance(state)
            # one host callback, and only when some chain diverged for the first time (a callback
            # inside the vmapped update would run once per chain and draw, and cost 100x the update)
            first = (state.num_divergent == 0) & new.diverging
            jax.lax.cond(jnp.any(first),
                         lambda: jax.debug.callback(_warn_divergence, first, new.num_divergent, h),
                         lambda: None)
            return new

        self._sample_fn = sample_fn if self._warn_divergences else advance
        return init_fn(init_params, rng_key)

    def sample(self, state, model_args, model_kwargs):
        return self._sample_fn(state)

    # ---- the algorithm, for one chain ---------------------------------------------------------------
    def _record(self, z):
        return None if self._observables is None else self._observables(self._constrain(z))

    def _init_one(self, z, rng_key):
        pe, grad = jax.value_and_grad(self._potential_fn)(z)
        grad_flat = ravel_pytree(grad)[0]
        if not isinstance(pe, jax.core.Tracer) and not (np.isfinite(pe) and np.all(np.isfinite(grad_flat))):
            raise ValueError("the potential energy or its gradient is not finite at the initial parameters")
        zero = jnp.zeros((), dtype=pe.dtype)
        h = zero + self._step_size
        adapt = _dual_averaging()[0](jnp.log(10.0 * h)) if self._adapt else ()
        return LangevinState(jnp.array(0), z, pe, grad_flat, self._record(z), zero + 1.0, zero,
                             jnp.array(False), jnp.array(0), h, adapt, rng_key)

    def _sample_one(self, state: LangevinState) -> LangevinState:
        h = state.step_size
        z_flat, unravel = ravel_pytree(state.z)

        def U(zf):
            return self._potential_fn(unravel(zf))

        def propose(zf, grad, key):
            noise = jax.random.normal(key, zf.shape, zf.dtype)
            prop = zf - h * grad + jnp.sqrt(2.0 * h) * noise
            return prop, noise, *jax.value_and_grad(U)(prop)

        def mala(_, carry):  # Metropolis-adjusted: each update accepted or rejected, non-finite ones rejected
            zf, pe, grad, acc_sum, div, key = carry
            key, key_noise, key_acc = jax.random.split(key, 3)
            prop, noise, pe_new, grad_new = propose(zf, grad, key_noise)
            finite = jnp.isfinite(pe_new) & jnp.all(jnp.isfinite(grad_new))
            # log q(z | z') - log q(z' | z) with q(a | b) = N(a; b - h grad U(b), 2h)
            back = zf - prop + h * grad_new
            log_ratio = pe - pe_new - jnp.sum(back**2) / (4.0 * h) + 0.5 * jnp.sum(noise**2)
            accept_prob = jnp.where(finite, jnp.exp(jnp.minimum(log_ratio, 0.0)), 0.0)
            accept = jax.random.uniform(key_acc) < accept_prob
            zf, pe, grad = jax.tree_util.tree_map(lambda new, old: jnp.where(accept, new, old),
                                                  (prop, pe_new, grad_new), (zf, pe, grad))
            return zf, pe, grad, acc_sum + accept_prob, div + (~finite).astype(jnp.int32), key

        def ula(_, carry):  # no per-update test: NaN/inf propagate and are caught once per draw below
            zf, pe, grad, key = carry
            key, key_noise = jax.random.split(key)
            prop, _, pe, grad = propose(zf, grad, key_noise)
            return prop, pe, grad, key

        start = (z_flat, state.potential_energy, state.z_grad)
        if self._adjust:
            carry = (*start, jnp.zeros_like(state.potential_energy), jnp.array(0), state.rng_key)
            z_flat, pe, grad, acc_sum, n_div, rng_key = jax.lax.fori_loop(0, self._inner_steps, mala, carry)
        else:
            z_flat, pe, grad, rng_key = jax.lax.fori_loop(0, self._inner_steps, ula, (*start, state.rng_key))
            finite = jnp.isfinite(pe) & jnp.all(jnp.isfinite(grad)) & jnp.all(jnp.isfinite(z_flat))
            z_flat, pe, grad = jax.tree_util.tree_map(lambda new, old: jnp.where(finite, new, old),
                                                      (z_flat, pe, grad), start)
            n_div = (~finite).astype(jnp.int32)
            acc_sum = finite.astype(pe.dtype) * self._inner_steps
        accept_prob = acc_sum / self._inner_steps
        i = state.i + 1
        mean_accept_prob = state.mean_accept_prob + (accept_prob - state.mean_accept_prob) / i
        z, pe, grad, rng_key = self._gibbs(unravel(z_flat), pe, grad, rng_key)
        h, adapt = self._adapt_step(state, accept_prob) if self._adapt else (h, ())
        return LangevinState(i, z, pe, grad, self._record(z), accept_prob, mean_accept_prob, n_div > 0,
                             state.num_divergent + n_div, h, adapt, rng_key)

    def _gibbs(self, z, pe, grad, rng_key):
        """The exact Gibbs update of ``gibbs_sites`` (if any), with the potential and gradient at the new point;
        a non-finite result (e.g. a failed Cholesky factor in float32) keeps the old point."""
        if self._gibbs_fn is None:
            return z, pe, grad, rng_key
        rng_key, key = jax.random.split(rng_key)
        gibbs = {k: z[k] for k in self._gibbs_sites}
        rest = {k: v for k, v in z.items() if k not in gibbs}
        new = {**z, **self._gibbs_fn(key, gibbs, rest)}
        pe_new, grad_new = jax.value_and_grad(self._potential_fn)(new)
        grad_new = ravel_pytree(grad_new)[0]
        finite = jnp.isfinite(pe_new) & jnp.all(jnp.isfinite(grad_new))
        z, pe, grad = jax.tree_util.tree_map(lambda a, b: jnp.where(finite, a, b), (new, pe_new, grad_new), (z, pe, grad))
        return z, pe, grad, rng_key

    def _adapt_step(self, state: LangevinState, accept_prob):
        """Dual averaging of log h towards the target acceptance during the warmup draws; then the average."""
        adapt = _dual_averaging()[1](self._target - accept_prob, state.adapt_state)
        warm = state.i < self._num_warmup
        last = state.i + 1 == self._num_warmup
        h = jnp.where(warm, jnp.exp(jnp.where(last, adapt[1], adapt[0])), state.step_size).astype(state.step_size.dtype)
        adapt = jax.tree_util.tree_map(lambda new, old: jnp.where(warm, new, old), adapt, state.adapt_state)
        return h, adapt


KineticState = namedtuple(
    "KineticState",
    ["i", "z", "potential_energy", "z_grad", "p", "obs", "accept_prob", "mean_accept_prob", "diverging",
     "num_divergent", "step_size", "adapt_state", "inverse_mass", "welford", "rng_key"],
)
KineticState.__doc__ = """State of :class:`KineticLangevin`: as :data:`LangevinState`, plus the flat momentum ``p``,
the diagonal ``inverse_mass`` and the ``welford`` (count, mean, sum of squares) estimate of the positions'
variance gathered in the warmup."""


class KineticLangevin(Langevin):
    r"""Underdamped (kinetic) Langevin dynamics, OBABO splitting, optionally Metropolis-adjusted (GHMC).

    Positions q and momenta p with the Hamiltonian :math:`H = U(q) + \tfrac12 p^\top M^{-1} p` and friction
    :math:`\gamma`. One update, with :math:`a = e^{-\gamma h/2}`:

    * O: :math:`p \leftarrow a\,p + \sqrt{1-a^2}\,M^{1/2}\eta`;
    * BAB: one leapfrog step of size h, :math:`(q, p) \to (q', p')`; with ``adjust=True`` it is accepted with
      probability :math:`\min(1, e^{-\Delta H})`, and on rejection q stays and the momentum is flipped
      (Horowitz's generalized HMC: exact for any h); without, the scheme has an :math:`O(h^2)` bias;
    * O again.

    Momentum persists across updates (for :math:`\gamma h \ll 1`), so the chain moves ballistically over a
    time :math:`1/\gamma` instead of diffusing as ULA/MALA do. In the warmup (``num_warmup`` draws of MCMC)
    ``adapt_step_size`` tunes h by dual averaging to ``target_accept_prob`` (default 0.8) and ``adapt_mass``
    sets a diagonal mass :math:`M^{-1} = {\rm Var}(q)` estimated from the second and third quarters of the
    warmup (Stan's regularization), then restarts the step adaptation. Other parameters as :class:`Langevin`.
    """

    def __init__(self, model=None, *, potential_fn=None, step_size: float, friction: float = 1.0,
                 adjust: bool = True, inner_steps: int = 1, observables: Callable | None = None,
                 init_strategy: Callable = init_to_sample, warn_divergences: bool = True,
                 adapt_step_size: bool = True, adapt_mass: bool = True, target_accept_prob: float = 0.8,
                 gibbs_fn: Callable | None = None, gibbs_sites=("v",)):
        super().__init__(model, potential_fn=potential_fn, step_size=step_size, adjust=adjust,
                         inner_steps=inner_steps, observables=observables, init_strategy=init_strategy,
                         warn_divergences=warn_divergences, adapt_step_size=adapt_step_size,
                         target_accept_prob=target_accept_prob, gibbs_fn=gibbs_fn, gibbs_sites=gibbs_sites)
        if not (np.isfinite(friction) and friction > 0):
            raise ValueError(f"friction must be a positive finite number; got {friction!r}")
        self._friction = float(friction)
        self._adapt_mass = bool(adapt_mass)

    def _init_one(self, z, rng_key):
        s = super()._init_one(z, rng_key)
        rng_key, key_p = jax.random.split(s.rng_key)
        p = jax.random.normal(key_p, s.z_grad.shape, s.z_grad.dtype)
        zero = jnp.zeros_like(s.z_grad)
        welford = (jnp.array(0), zero, zero)
        return KineticState(s.i, s.z, s.potential_energy, s.z_grad, p, s.obs, s.accept_prob, s.mean_accept_prob,
                            s.diverging, s.num_divergent, s.step_size, s.adapt_state, zero + 1.0, welford, rng_key)

    def _sample_one(self, state: KineticState) -> KineticState:
        h, inv_mass = state.step_size, state.inverse_mass
        a = jnp.exp(-self._friction * h / 2)
        z_flat, unravel = ravel_pytree(state.z)

        def U(zf):
            return self._potential_fn(unravel(zf))

        def refresh(p, key):
            return a * p + jnp.sqrt(1 - a**2) * jax.random.normal(key, p.shape, p.dtype) / jnp.sqrt(inv_mass)

        def update(_, carry):
            q, p, pe, grad, acc_sum, div, key = carry
            key, k1, k2, k3 = jax.random.split(key, 4)
            p = refresh(p, k1)
            p_half = p - h / 2 * grad
            q_new = q + h * inv_mass * p_half
            pe_new, grad_new = jax.value_and_grad(U)(q_new)
            p_new = p_half - h / 2 * grad_new
            finite = jnp.isfinite(pe_new) & jnp.all(jnp.isfinite(grad_new))
            dH = pe_new - pe + 0.5 * jnp.sum(inv_mass * (p_new**2 - p**2))
            prob = jnp.where(finite, jnp.exp(jnp.minimum(-dH, 0.0)) if self._adjust else 1.0, 0.0)
            accept = jax.random.uniform(k2) < prob
            q, pe, grad = jax.tree_util.tree_map(lambda new, old: jnp.where(accept, new, old),
                                                 (q_new, pe_new, grad_new), (q, pe, grad))
            p = jnp.where(accept, p_new, -p)  # a rejected step flips the momentum (generalized HMC)
            return q, refresh(p, k3), pe, grad, acc_sum + prob, div + (~finite).astype(jnp.int32), key

        carry = (z_flat, state.p, state.potential_energy, state.z_grad, jnp.zeros_like(state.potential_energy),
                 jnp.array(0), state.rng_key)
        z_flat, p, pe, grad, acc_sum, n_div, rng_key = jax.lax.fori_loop(0, self._inner_steps, update, carry)
        accept_prob = acc_sum / self._inner_steps
        i = state.i + 1
        mean_accept_prob = state.mean_accept_prob + (accept_prob - state.mean_accept_prob) / i
        h, adapt = self._adapt_step(state, accept_prob) if self._adapt else (h, ())
        z, pe, grad, rng_key = self._gibbs(unravel(z_flat), pe, grad, rng_key)  # the momentum stays: p is
        if self._gibbs_fn is not None:  # independent of q under the target, so the Gibbs step keeps it invariant
            z_flat = ravel_pytree(z)[0]
        inv_mass, welford = state.inverse_mass, state.welford
        if self._adapt_mass:
            inv_mass, welford, h, adapt = self._adapt_mass_step(state, z_flat, h, adapt)
        return KineticState(i, z, pe, grad, p, self._record(z), accept_prob, mean_accept_prob, n_div > 0,
                            state.num_divergent + n_div, h, adapt, inv_mass, welford, rng_key)

    def _adapt_mass_step(self, state: KineticState, q, h, adapt):
        """Welford variance of q over warmup draws [W/4, 3W/4); at 3W/4 it becomes the inverse mass and the
        step adaptation restarts from the current step."""
        W = self._num_warmup
        start, stop = W // 4, (3 * W) // 4
        n, mean, m2 = state.welford
        gather = (state.i >= start) & (state.i < stop)
        n_new = n + 1
        delta = q - mean
        mean_new = mean + delta / n_new
        m2_new = m2 + delta * (q - mean_new)
        n, mean, m2 = jax.tree_util.tree_map(lambda new, old: jnp.where(gather, new, old),
                                             (n_new, mean_new, m2_new), (n, mean, m2))
        switch = (state.i + 1 == stop) & (n > 1)
        var = m2 / jnp.maximum(n - 1, 1)
        regularized = (n / (n + 5.0)) * var + 1e-3 * (5.0 / (n + 5.0))  # as Stan
        inv_mass = jnp.where(switch, regularized, state.inverse_mass).astype(state.inverse_mass.dtype)
        if self._adapt:
            restart = _dual_averaging()[0](jnp.log(10.0 * h))
            adapt = jax.tree_util.tree_map(lambda new, old: jnp.where(switch, new, old), restart, adapt)
        return inv_mass, (n, mean, m2), h, adapt
