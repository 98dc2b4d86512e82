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
                 adapt_step_size: bool = False, target_accept_prob: float = 0.574):
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
        z = unravel(z_flat)
        h, adapt = self._adapt_step(state, accept_prob) if self._adapt else (h, ())
        return LangevinState(i, z, pe, grad, self._record(z), accept_prob, mean_accept_prob, n_div > 0,
                             state.num_divergent + n_div, h, adapt, rng_key)

    def _adapt_step(self, state: LangevinState, accept_prob):
        """Dual averaging of log h towards the target acceptance during the warmup draws; then the average."""
        adapt = _dual_averaging()[1](self._target - accept_prob, state.adapt_state)
        warm = state.i < self._num_warmup
        last = state.i + 1 == self._num_warmup
        h = jnp.where(warm, jnp.exp(jnp.where(last, adapt[1], adapt[0])), state.step_size).astype(state.step_size.dtype)
        adapt = jax.tree_util.tree_map(lambda new, old: jnp.where(warm, new, old), adapt, state.adapt_state)
        return h, adapt
