r"""The samplers of :mod:`renormpp.mcmc` as NumPyro kernels: :class:`Langevin` (the paper's dynamics, ULA, or MALA)
and :class:`KineticLangevin` (underdamped Langevin, OBABO, Metropolis-adjusted by default).

Both are thin adapters in the style of ``numpyro/infer/hmc.py``: ``init`` calls NumPyro's ``initialize_model``
and ravels the parameters into one flat position; ``sample`` rebuilds the potential from ``model_args`` and
``model_kwargs`` (so ``mcmc.run`` on new data after ``mcmc.post_warmup_state = mcmc.last_state`` samples the new
posterior) and runs, per recorded draw, ``inner_steps`` updates of the core kernel, then the optional exact Gibbs
step, the warmup adaptation and the observables. The mathematics is in :mod:`renormpp.mcmc`.

The paper (supplement, Eq. supp:eq:langevin) writes the Langevin update as :math:`\theta' = \theta - \epsilon\nabla
(TU) + \sqrt{2\epsilon T}\eta`: that is ULA with step :math:`h = \epsilon T` on the potential U (:func:`paper_step_size`).

A step whose potential or gradient is NaN or inf is rejected (the chain stays where it was), flagged in the
``diverging`` field, counted in ``num_divergent``, and reported with a warning that names the step size: no draw
is ever NaN. MALA and kinetic Langevin test every update; ULA tests once per recorded draw (NaN and inf
propagate) and rejects the draw's ``inner_steps`` updates together, so that its inner loop runs at the speed of
a bare loop.

A Metropolis-adjusted chain that hardly accepts its moves is frozen: its draws are its start, not the posterior.
After 50, 100, 200, ... draws past the warmup the kernel checks every chain's mean acceptance since the warmup
(``mean_accept_prob``, reset when the warmup ends, as NumPyro's HMC does) and warns, naming the chains and the step,
where it is below :data:`MIN_ACCEPT_PROB` (the same threshold as ``renormpp run``'s health check,
:func:`renormpp.diagnostics.sampler_health`).
"""
from __future__ import annotations

import warnings
import zlib
from functools import partial
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro.infer.initialization import init_to_sample
from numpyro.infer.mcmc import MCMCKernel
from numpyro.infer.util import initialize_model
from numpyro.util import identity, is_prng_key

from .._checks import positive, positive_int
from ..mcmc import adaptation, base, kinetic, langevin, metrics


class LangevinState(NamedTuple):
    """State of :class:`Langevin` and :class:`KineticLangevin` (one chain, or a batch of chains).

    ``i`` draws made so far (warmup included); ``z`` the unconstrained parameters (a dict of sites, as NumPyro's
    kernels keep them: ``init_params=state.z`` continues from it); ``potential_energy`` and the flat gradient
    ``z_grad``; ``momentum`` (flat; kinetic Langevin only, else None); ``obs``, the recorded observables (None
    without ``observables``); ``accept_prob``, the mean acceptance over the last draw's updates (1 for ULA);
    ``mean_accept_prob``, its running mean over draws; ``diverging``, a step of the last draw was non-finite and
    rejected; ``num_divergent``, the total so far (MALA and kinetic count updates, ULA draws); ``adaptation``, the
    warmup state with the current ``step_size`` and ``inverse_mass`` (also readable as fields, e.g.
    ``extra_fields=("step_size",)``); ``data_key``, the :func:`_fingerprint` of the model arguments that
    ``potential_energy`` was computed with; ``rng_key``; ``slice``, the kinetic kernel's persistent acceptance variable
    (with ``accept_shift``; else None).
    """

    i: jax.Array
    z: Any
    potential_energy: jax.Array
    z_grad: jax.Array
    momentum: Any
    obs: Any
    accept_prob: jax.Array
    mean_accept_prob: jax.Array
    diverging: jax.Array
    num_divergent: jax.Array
    adaptation: adaptation.WindowState
    data_key: jax.Array
    rng_key: jax.Array
    slice: Any = None

    @property
    def step_size(self):
        return self.adaptation.step_size

    @property
    def inverse_mass(self):
        return self.adaptation.inverse_mass


def paper_step_size(epsilon: float = 1e-3, T: float = 0.01) -> float:
    r"""ULA step :math:`h = \epsilon T` equivalent to the paper's update with learning rate :math:`\epsilon`.

    The paper's :math:`\theta \leftarrow \theta - \epsilon\nabla(T U) + \sqrt{2\epsilon T}\eta` equals
    :math:`\theta \leftarrow \theta - h\nabla U + \sqrt{2h}\eta` with :math:`h = \epsilon T`; e.g. the paper's
    :math:`\epsilon = 10^{-3}` at :math:`T = 0.01` is ``step_size=1e-5``.
    """
    if not (epsilon > 0 and T > 0):
        raise ValueError(f"epsilon and T must be positive; got epsilon={epsilon}, T={T}")
    return float(epsilon) * float(T)


#: ULA's step is flagged as biased above ``ULA_BIAS_BOUND / max_curvature``: on a Gaussian, its stationary variance
#: along the stiffest direction is then off by more than ULA_BIAS_BOUND / 2 (5%).
ULA_BIAS_BOUND = 0.1


MIN_ACCEPT_PROB = base.MIN_ACCEPT_PROB
#: the first post-warmup draw at which the acceptance is checked; then at twice as many draws, and so on
ACCEPT_CHECK_FIRST = 50


class LowAcceptanceWarning(RuntimeWarning):
    """A Metropolis-adjusted chain accepts almost none of its moves: it is frozen, and its draws are not the
    posterior."""


class ULABiasWarning(RuntimeWarning):
    """ULA's step is large against the curvature of the potential: its draws are biased, and their error bars do not
    show it."""


def _warn_divergence(first, total, step_size):
    first = np.atleast_1d(np.asarray(first))
    if first.any():
        warnings.warn(
            f"Langevin: a step with step_size={float(np.max(step_size)):.3g} gave a NaN or inf potential or gradient "
            f"({int(np.max(total))} so far in one chain); the step was rejected and the chain kept its last "
            "finite state. Reduce step_size (ULA needs h well below 2 / the largest curvature of U).",
            RuntimeWarning,
            stacklevel=2,
        )


def _warn_low_acceptance(n, mean_accept_prob, step_size):
    acc = np.atleast_1d(np.asarray(mean_accept_prob, dtype=float))
    low = [c for c, a in enumerate(acc) if a < MIN_ACCEPT_PROB]
    warnings.warn(
        f"Langevin: chain(s) {low} accepted {', '.join(f'{acc[c]:.3f}' for c in low)} of their moves on average over "
        f"the {int(n)} draws since the warmup (below {MIN_ACCEPT_PROB}) at step_size={float(np.max(step_size)):.3g}: "
        "the chain is frozen and its draws are not the posterior. Reduce step_size, or let the warmup tune it "
        "(num_warmup > 0 with adapt_step_size=True).", LowAcceptanceWarning, stacklevel=2)


def _fingerprint(model_args, model_kwargs) -> jax.Array:
    """Eight numbers that change when the model's arguments change: fixed weighted sums of the arrays (the data)
    and values of the numbers (T, ...) in slots 0-3, checksums of anything else (names, functions) in slots 4-7.
    Costs O(size of the data), in one compiled function."""
    arrays, slots, other = [], [], np.zeros(4, np.float32)
    leaves = jax.tree_util.tree_leaves((tuple(model_args), dict(model_kwargs)),
                                       is_leaf=lambda x: isinstance(x, list) and not isinstance(x, tuple))
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, list):  # data given as nested lists
            leaf = np.asarray(leaf, dtype=float)
        if isinstance(leaf, (jax.Array, np.ndarray, int, float, np.number)) and not isinstance(leaf, bool):
            arrays.append(leaf)
            slots.append(i % 4)
        else:
            other[i % 4] += zlib.crc32(repr(leaf).encode()) % 2**20
    return _fold(tuple(arrays), tuple(slots), other)


@partial(jax.jit, static_argnums=1)
def _fold(arrays, slots, other):
    out = jnp.zeros(4, jnp.float32)
    for x, i in zip(arrays, slots):
        x = jnp.ravel(jnp.asarray(x, jnp.float32))
        out = out.at[i].add(jnp.sum(x * jnp.cos(0.7 * jnp.arange(x.size, dtype=jnp.float32))) + x.size)
    return jnp.concatenate([out, other])


def _initialize(rng_key, model, init_strategy, model_args, model_kwargs):
    """NumPyro's ``initialize_model`` (``dynamic_args=True``): ``(params_info, potential_gen, postprocess_gen)``.

    NumPyro traces the model op by op, and every operation on the data compiles on its own (dozens of small
    compilations, seconds per point). Here the same call runs inside one ``jax.jit``, with the model's arguments
    closed over (so the model still sees, and checks, the concrete data), whenever the model's latent sites are all
    unconstrained and it has no ``param`` sites: then nothing the trace leaves behind (transforms, substituted
    values) holds a tracer. Any other model, or one that needs concrete values of what it computes, takes NumPyro's
    eager path."""
    def call(key):
        return initialize_model(key, model, dynamic_args=True, init_strategy=init_strategy, model_args=model_args,
                                model_kwargs=model_kwargs)

    found = {}

    def traced(key):
        info, potential_gen, postprocess_gen, trace = call(key)
        found.update(gens=(potential_gen, postprocess_gen), plain=_plain(trace))
        return info

    try:
        staged = jax.jit(traced).trace(rng_key)
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError,
            jax.errors.TracerIntegerConversionError):  # it wants concrete values: NumPyro's own path decides
        found = {}
    if found.get("plain"):
        return (staged.lower().compile()(rng_key), *found["gens"])
    info, potential_gen, postprocess_gen, _ = call(rng_key)
    return info, potential_gen, postprocess_gen


def _plain(trace) -> bool:
    """Whether a model trace has only unconstrained (real) latent sites and no ``param``/``mutable`` sites."""
    from numpyro.distributions import constraints

    for site in trace.values():
        if site["type"] in ("param", "mutable"):
            return False
        if site["type"] == "sample" and not site["is_observed"]:
            support = site["fn"].support
            while isinstance(support, constraints.independent):
                support = support.base_constraint
            if support is not constraints.real:
                return False
    return True


class _Bound(NamedTuple):
    """What ``init`` learns from the model: the potential and the constraining map as functions of the model's
    arguments, and the unravelling of the flat position. Dropped on pickling (NumPyro's convention)."""

    potential_gen: Callable
    postprocess_gen: Callable
    unravel: Callable


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
        by dual averaging (:mod:`renormpp.mcmc.adaptation`) so that the mean acceptance probability of a draw's
        updates approaches ``target_accept_prob``; ``step_size`` is the first guess. The step is fixed after the
        warmup (the chain is then exact MALA); it is in the state's ``step_size``.
    target_accept_prob : the acceptance target, 0.574 by default (optimal for MALA in high dimension,
        Roberts & Rosenthal 1998).
    gibbs_fn, gibbs_sites : an exact Gibbs update of some sites, ``gibbs_fn(rng_key, gibbs_sites, hmc_sites) ->
        gibbs_sites`` (the signature of :class:`numpyro.infer.HMCGibbs`), applied after the ``inner_steps``
        updates of every draw; e.g. ``gibbs_fn=renormpp.readout.gibbs_fn(X, Y, T=T, lambda1=lambda1)`` with
        ``gibbs_sites=("v",)`` draws the readout exactly given w, so the Langevin updates only have to move w
        (the v moves they also make are harmless). Each part leaves the posterior invariant, so the
        composition does. The sites must be unconstrained (a Normal prior, as v's). ``gibbs_fn`` holds its own
        data: build a new one to continue on new data.
    pooled_adaptation : with vectorized chains, the warmup adapts one step (and mass) for all chains from all of
        them: the dual averaging follows their mean acceptance, the mass window gathers every chain's positions, so
        a window of n draws of k chains learns from k n positions (cross-chain adaptation). The chains stay
        independent given what they learned, and exact after the warmup. Without it (and with
        ``chain_method="sequential"``) each chain adapts on its own, as Stan does.
    warn_divergences : warn (from a host callback) at the first divergence of each chain. With False,
        divergences are only flagged (``diverging``, ``num_divergent``), and draws are still never NaN.
    warn_low_acceptance : adjusted kernels: warn (:class:`LowAcceptanceWarning`) where a chain's mean acceptance
        since the warmup is below :data:`MIN_ACCEPT_PROB` after 50, 100, 200, ... draws (a frozen chain).

    Use with :class:`numpyro.infer.MCMC` (any ``chain_method``; thinning; progress bar). To continue a run,
    ``mcmc.post_warmup_state = mcmc.last_state`` and ``mcmc.run(mcmc.last_state.rng_key, ...)``.
    """

    _target_default = 0.574

    def __init__(self, model=None, *, potential_fn=None, step_size: float, adjust: bool = False,
                 inner_steps: int = 1, observables: Callable | None = None,
                 init_strategy: Callable = init_to_sample, warn_divergences: bool = True,
                 adapt_step_size: bool = False, target_accept_prob: float | None = None,
                 gibbs_fn: Callable | None = None, gibbs_sites=("v",), pooled_adaptation: bool = False,
                 warn_low_acceptance: bool = True):
        if (model is None) == (potential_fn is None):
            raise ValueError("give exactly one of model or potential_fn")
        step_size = positive("step_size", step_size, "the Langevin step h")
        inner_steps = positive_int("inner_steps", inner_steps, "updates per recorded draw")
        if adapt_step_size and not adjust:
            raise ValueError("adapt_step_size needs adjust=True: an unadjusted kernel has no acceptance probability "
                             "to target")
        target = self._target_default if target_accept_prob is None else positive("target_accept_prob",
                                                                                  target_accept_prob)
        if not target < 1:
            raise ValueError(f"target_accept_prob must be in (0, 1); got {target_accept_prob!r}")
        if gibbs_fn is not None and not gibbs_sites:
            raise ValueError("gibbs_fn needs the names of the sites it updates: gibbs_sites=('v',)")
        self._model, self._potential_fn = model, potential_fn
        self._step_size, self._adjust, self._inner_steps = float(step_size), bool(adjust), int(inner_steps)
        self._observables, self._init_strategy = observables, init_strategy
        self._warn_divergences = bool(warn_divergences)
        self._warn_acceptance = bool(warn_low_acceptance)
        self._pooled = bool(pooled_adaptation)
        self._adapt_step, self._adapt_mass, self._target = bool(adapt_step_size), False, float(target)
        self._row_mass, self._freeze_gibbs = None, False
        self._gibbs_fn, self._gibbs_sites = gibbs_fn, tuple(gibbs_sites)
        self._bound: _Bound | None = None
        self._sample_fn = None  # set by init; MCMC calls init again while it is None (e.g. after unpickling)
        self._loop = self._warm_update = None
        self._num_warmup = 0
        self.curvature = None  #: ULA only: the potential's largest curvature at the start (see ULA_BIAS_BOUND)

    # ---- the core algorithm: what KineticLangevin replaces -----------------------------------------------------
    def _core_kernel(self):
        return langevin.build_kernel(self._adjust)

    def _core_init(self, position, potential_fn, rng_key, inverse_mass):
        return langevin.init(position, potential_fn)

    def _core_state(self, position, state: LangevinState):
        return base.State(position, state.potential_energy, state.z_grad)

    @property
    def adapts_mass(self) -> bool:
        """Whether the warmup learns a mass (a window of :mod:`renormpp.mcmc.adaptation`)."""
        return self._adapt_mass

    @property
    def pools_adaptation(self) -> bool:
        """Whether vectorized chains adapt together (``pooled_adaptation``)."""
        return self._pooled

    def _core_args(self, ws: adaptation.WindowState) -> tuple:
        return (ws.step_size,)

    # ---- MCMCKernel interface ----------------------------------------------------------------------------------
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
        if self._observables is not None or self._bound is None:
            return identity
        return self._bound.postprocess_gen(*model_args, **(model_kwargs or {}))

    def __getstate__(self):
        state = self.__dict__.copy()
        for name in ("_bound", "_sample_fn", "_loop", "_warm_update"):  # functions of the model: rebuilt by init
            state[name] = None
        return state

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        model_kwargs = {} if model_kwargs is None else model_kwargs
        self._num_warmup = int(num_warmup)
        batched = not is_prng_key(rng_key)
        keys = jax.vmap(lambda k: jax.random.split(k, 3))(rng_key) if batched else jax.random.split(rng_key, 3)
        rng_key, key_init, key_core = (keys[:, j] for j in range(3)) if batched else keys
        if self._model is not None:
            params_info, potential_gen, postprocess_gen = _initialize(key_init, self._model, self._init_strategy,
                                                                      model_args, model_kwargs)
            if init_params is None:  # MCMC.run(..., init_params=...) takes precedence over init_strategy
                init_params = params_info[0]
        else:
            if init_params is None:
                raise ValueError("with potential_fn, pass init_params to MCMC.run")
            potential_fn = self._potential_fn
            potential_gen, postprocess_gen = (lambda *a, **k: potential_fn), (lambda *a, **k: identity)
        one = jax.tree_util.tree_map(lambda x: x[0], init_params) if batched else init_params
        if self._gibbs_fn is not None:
            missing = [k for k in self._gibbs_sites if not isinstance(one, dict) or k not in one]
            if missing:
                sites = sorted(one) if isinstance(one, dict) else "none: the parameters are not a dict"
                raise ValueError(f"gibbs_sites {missing} are not sites of the model (its sites: {sites})")
        self._bound = _Bound(potential_gen, postprocess_gen, ravel_pytree(one)[1])
        ravel = lambda p: ravel_pytree(p)[0]  # noqa: E731
        position = jax.vmap(ravel)(init_params) if batched else ravel(init_params)
        U = self._flat_potential(model_args, model_kwargs)
        rows = metrics.matrix_site(one, self._row_mass) if self._row_mass else None
        frozen = None
        if self._freeze_gibbs and self._gibbs_fn is not None:
            frozen = ravel_pytree({k: jnp.full(jnp.shape(x), k in self._gibbs_sites) for k, x in one.items()})[0] > 0
        warm_init, self._warm_update = adaptation.window_adaptation(self._num_warmup, self._target, self._adapt_step,
                                                                    self._adapt_mass, rows, frozen)
        self._loop = base.inner_loop(self._core_kernel(), self._inner_steps)

        data_key = _fingerprint(model_args, model_kwargs)

        def init_all(position, keys, args):
            U = self._flat_potential(args, model_kwargs)

            def init_one(x, key):
                ws = warm_init(self._step_size, x.shape[-1], x.dtype)
                core = self._core_init(x, U, key, ws.inverse_mass)
                zero = jnp.zeros((), x.dtype)
                return LangevinState(jnp.array(0), self._bound.unravel(x), core.potential_energy, core.grad,
                                     getattr(core, "momentum", None), self._record(x, args, model_kwargs),
                                     zero + 1.0, zero, jnp.array(False), jnp.array(0), ws, data_key, None,
                                     getattr(core, "slice", None))

            return jax.vmap(init_one)(position, keys) if batched else init_one(position, keys)

        # one compilation instead of an op-by-op trace (seconds per point); data given as nested lists stays eager
        arrays = all(a is None or isinstance(a, (jax.Array, np.ndarray)) for a in model_args)
        state = (jax.jit(init_all) if arrays else init_all)(position, key_core, tuple(model_args))
        pe, grad = state.potential_energy, state.z_grad
        concrete = not isinstance(pe, jax.core.Tracer)
        if concrete and not (np.all(np.isfinite(pe)) and np.all(np.isfinite(grad))):
            raise ValueError("the potential energy or its gradient is not finite at the initial parameters")
        self.curvature = None
        if concrete and not self._adjust and type(self) is Langevin:
            x0 = position[0] if batched else position
            self.curvature = float(jax.jit(base.max_curvature, static_argnums=0)(U, x0, key_init[0] if batched
                                                                                 else key_init))
            self._check_ula_step()
        self._sample_fn = self.sample
        return state._replace(rng_key=rng_key)

    def sample(self, state, model_args, model_kwargs):
        model_kwargs = {} if model_kwargs is None else model_kwargs
        U = self._flat_potential(model_args, model_kwargs)
        batched = jnp.ndim(state.i) > 0
        state = self._refresh_if_new_data(state, U, model_args, model_kwargs, batched)

        def one(s):
            return self._sample_one(s, U, model_args, model_kwargs)

        new = jax.vmap(one)(state) if batched else one(state)
        new = self._adapt(state, new, batched)
        if self._warn_divergences:
            # one host callback, and only when some chain diverged for the first time (a callback inside the
            # vmapped update would run once per chain and draw)
            first = (state.num_divergent == 0) & new.diverging
            jax.lax.cond(jnp.any(first),
                         lambda: jax.debug.callback(_warn_divergence, first, new.num_divergent, new.step_size),
                         lambda: None)
        if self._adjust and self._warn_acceptance:
            # at 50, 100, 200, ... draws after the warmup (the warmup's end: the same for every chain)
            n = new.i - new.adaptation.schedule[..., 2]
            n = n[0] if batched else n
            check = (n >= ACCEPT_CHECK_FIRST) & (n % ACCEPT_CHECK_FIRST == 0)
            check &= jnp.bitwise_and(n // ACCEPT_CHECK_FIRST, n // ACCEPT_CHECK_FIRST - 1) == 0  # a power of two
            jax.lax.cond(check & jnp.any(new.mean_accept_prob < MIN_ACCEPT_PROB),
                         lambda: jax.debug.callback(_warn_low_acceptance, n, new.mean_accept_prob, new.step_size),
                         lambda: None)
        return new

    def _adapt(self, state, new, batched):
        """The warmup's adaptation after a draw (:mod:`renormpp.mcmc.adaptation`), skipped once every chain is past
        the warmup: outside the vmap over chains, so that the skip is a real branch (not both sides computed)."""
        def one(old, s, accept_prob, position):
            return s._replace(adaptation=self._warm_update(old.i, s.adaptation, accept_prob, position))

        flat = jax.vmap(lambda z: ravel_pytree(z)[0]) if batched else (lambda z: ravel_pytree(z)[0])
        if batched and self._pooled:  # every chain adapts from all of them: the same step and mass for all
            def update(old, s):
                return jax.vmap(one, in_axes=(0, 0, None, None))(old, s, jnp.mean(s.accept_prob), flat(s.z))
        else:
            def update(old, s):
                return (jax.vmap(one) if batched else one)(old, s, s.accept_prob, flat(s.z))

        return jax.lax.cond(jnp.any(state.i < state.adaptation.schedule[..., 2]), update, lambda old, s: s, state, new)

    def _refresh_if_new_data(self, state, U, model_args, model_kwargs, batched):
        """The state keeps U and its gradient at its point; when the model's arguments changed since (``mcmc.run`` on
        new data after ``post_warmup_state``), recompute them there, once: the chains would otherwise test their
        moves against the old posterior's energy. The arguments are recognized by :func:`_fingerprint`."""
        key = _fingerprint(model_args, model_kwargs)
        changed = jnp.any(key != (state.data_key[0] if batched else state.data_key))  # the same for every chain

        def refresh(st):
            def one(s):
                pe, grad = jax.value_and_grad(U)(ravel_pytree(s.z)[0])
                return s._replace(potential_energy=pe, z_grad=grad)
            st = jax.vmap(one)(st) if batched else one(st)
            return st._replace(data_key=jnp.broadcast_to(key, st.data_key.shape))

        return jax.lax.cond(changed, refresh, lambda st: st, state)

    def _check_ula_step(self):
        """Warn when ULA's step is above the documented bound ULA_BIAS_BOUND / max_curvature (at the start)."""
        h_lambda = self._step_size * self.curvature
        if h_lambda > ULA_BIAS_BOUND:
            effect = (f"its stationary variance along that direction is off by about {h_lambda / 2:.0%} (exact for a "
                      "Gaussian)" if h_lambda < 2 else "it is unstable along that direction (h*curvature >= 2)")
            warnings.warn(
                f"ULA with step_size={self._step_size:.3g} is biased: the potential's largest curvature at the start is "
                f"{self.curvature:.3g}, so h*curvature = {h_lambda:.2g} and {effect}; the error bars of its draws do "
                f"not show this. Use step_size <= {ULA_BIAS_BOUND / self.curvature:.2g} (h*curvature <= "
                f"{ULA_BIAS_BOUND}), or an exact sampler: adjust=True (MALA) or KineticLangevin.",
                ULABiasWarning, stacklevel=4)

    def describe(self, state=None) -> str:
        """The sampler and its step, for reports: e.g. ``"ULA, step_size=1e-05 (h*curvature = 0.003)"``."""
        kind = "MALA" if self._adjust else "ULA"
        text = f"{kind}, step_size={self._step_size:.3g}"
        if state is not None and self._adapt_step:
            text = f"{kind}, step_size={float(np.mean(np.asarray(state.step_size))):.3g} (adapted)"
        if self.curvature is not None:
            text += f" (h*curvature = {self._step_size * self.curvature:.2g} at the start; bound {ULA_BIAS_BOUND})"
        if state is not None and self._adjust:
            text += f", mean acceptance {float(np.mean(np.asarray(state.mean_accept_prob))):.2f}"
        if self._pooled and (self._adapt_step or self._adapt_mass):
            text += ", adaptation pooled over the chains"
        return text + f", {self._inner_steps} updates per draw" + (", exact Gibbs draw of "
                                                                   f"{'/'.join(self._gibbs_sites)}" if self._gibbs_fn
                                                                   else "")

    # ---- one chain ---------------------------------------------------------------------------------------------
    def _flat_potential(self, model_args, model_kwargs):
        """U of the flat position, with the model's current arguments (new data after post_warmup_state)."""
        U, unravel = self._bound.potential_gen(*model_args, **model_kwargs), self._bound.unravel
        return lambda x: U(unravel(x))

    def _record(self, position, model_args, model_kwargs):
        if self._observables is None:
            return None
        return self._observables(self._bound.postprocess_gen(*model_args, **model_kwargs)(self._bound.unravel(position)))

    def _gibbs_draw(self, rng_key, position):
        """The flat position with ``gibbs_sites`` redrawn by ``gibbs_fn`` given the other sites."""
        z = self._bound.unravel(position)
        sites = {k: z[k] for k in self._gibbs_sites}
        rest = {k: v for k, v in z.items() if k not in sites}
        return ravel_pytree({**z, **self._gibbs_fn(rng_key, sites, rest)})[0]

    def _sample_one(self, state: LangevinState, U, model_args, model_kwargs) -> LangevinState:
        rng_key, key_loop, key_gibbs = jax.random.split(state.rng_key, 3)
        ws = state.adaptation
        core = self._core_state(ravel_pytree(state.z)[0], state)
        core, info = self._loop(key_loop, core, U, *self._core_args(ws))
        if self._gibbs_fn is not None:
            core = base.gibbs_step(key_gibbs, core, U, self._gibbs_draw)
        i = state.i + 1
        end = ws.schedule[2]  # the warmup's end: the running mean restarts there, as in NumPyro's HMC
        mean_accept_prob = state.mean_accept_prob + (info.accept_prob - state.mean_accept_prob) / jnp.where(
            state.i < end, i, i - end)
        return LangevinState(i, self._bound.unravel(core.position), core.potential_energy, core.grad,
                             getattr(core, "momentum", None), self._record(core.position, model_args, model_kwargs),
                             info.accept_prob, mean_accept_prob, info.num_divergent > 0,
                             state.num_divergent + info.num_divergent, ws, state.data_key, rng_key,
                             getattr(core, "slice", None))


class KineticLangevin(Langevin):
    r"""Underdamped (kinetic) Langevin dynamics, OBABO splitting (:mod:`renormpp.mcmc.kinetic`), Metropolis-adjusted
    (generalized HMC: exact) by default, as a :class:`numpyro.infer.mcmc.MCMCKernel`.

    Momentum persists across updates (for :math:`\gamma h \ll 1`), so the chain moves ballistically over a
    time :math:`1/\gamma` instead of diffusing as ULA/MALA do. In the warmup (``num_warmup`` draws of MCMC)
    ``adapt_step_size`` tunes h by dual averaging to ``target_accept_prob`` (default 0.8) and ``adapt_mass``
    sets a diagonal mass :math:`M^{-1} = {\rm Var}(q)` estimated from the second and third quarters of the
    warmup (Stan's regularization), then restarts the step adaptation (:mod:`renormpp.mcmc.adaptation`).
    ``row_mass`` (a site name, e.g. ``"w"``): on that weight matrix the mass is not diagonal but one dense matrix
    shared by its rows, the rows' covariance pooled over rows and warmup draws (:mod:`renormpp.mcmc.metrics`, Eq. M1);
    it undoes the anisotropy of the input data (MNIST's), which a diagonal mass cannot. ``freeze_gibbs_sites=True``
    (with ``gibbs_fn``): the kinetic updates leave the Gibbs sites where they are (infinite mass) and only move the
    others, so the stiffness of v (its conditional precision grows as P/(T N1)) no longer limits the step; the
    exact Gibbs draw moves v. ``friction`` is :math:`\gamma`; ``adjust=False`` drops the Metropolis test (an
    :math:`O(h^2)` bias). ``accept_shift`` > 0: the Metropolis test uses Neal's non-reversible uniform, moved by that
    shift per update (:mod:`renormpp.mcmc.kinetic`), so rejections, and with them the momentum reversals, cluster.
    Other parameters as :class:`Langevin`.
    """

    _target_default = 0.8

    def __init__(self, model=None, *, potential_fn=None, step_size: float, friction: float = 1.0,
                 adjust: bool = True, inner_steps: int = 1, observables: Callable | None = None,
                 init_strategy: Callable = init_to_sample, warn_divergences: bool = True,
                 adapt_step_size: bool = True, adapt_mass: bool = True, target_accept_prob: float | None = None,
                 gibbs_fn: Callable | None = None, gibbs_sites=("v",), row_mass: str | None = None,
                 freeze_gibbs_sites: bool = False, accept_shift: float = 0.0, pooled_adaptation: bool = False,
                 warn_low_acceptance: bool = True):
        super().__init__(model, potential_fn=potential_fn, step_size=step_size, adjust=adjust,
                         inner_steps=inner_steps, observables=observables, init_strategy=init_strategy,
                         warn_divergences=warn_divergences, adapt_step_size=adapt_step_size,
                         target_accept_prob=target_accept_prob, gibbs_fn=gibbs_fn, gibbs_sites=gibbs_sites,
                         pooled_adaptation=pooled_adaptation, warn_low_acceptance=warn_low_acceptance)
        self._friction = positive("friction", friction, "the friction gamma")
        self._adapt_mass = bool(adapt_mass)
        if row_mass is not None and not self._adapt_mass:
            raise ValueError("row_mass is learned in the warmup: it needs adapt_mass=True (and num_warmup > 0)")
        if freeze_gibbs_sites and gibbs_fn is None:
            raise ValueError("freeze_gibbs_sites=True leaves the Gibbs sites to gibbs_fn: pass gibbs_fn too")
        self._row_mass, self._freeze_gibbs = row_mass, bool(freeze_gibbs_sites)
        if not 0.0 <= accept_shift < 2.0 or (accept_shift and not adjust):
            raise ValueError(f"accept_shift = {accept_shift!r}: it is the shift of Neal's acceptance variable per "
                             "update, in [0, 2) (0: a fresh uniform each test), and needs adjust=True")
        self._accept_shift = float(accept_shift)

    def _core_kernel(self):
        return kinetic.build_kernel(self._adjust, self._accept_shift)

    def _core_init(self, position, potential_fn, rng_key, inverse_mass):
        return kinetic.init(position, potential_fn, rng_key, inverse_mass, persistent_accept=self._accept_shift > 0)

    def _core_state(self, position, state: LangevinState):
        return kinetic.State(position, state.momentum, state.potential_energy, state.z_grad, state.slice)

    def _core_args(self, ws: adaptation.WindowState) -> tuple:
        return ws.step_size, ws.inverse_mass, self._friction

    def describe(self, state=None) -> str:
        text = super().describe(state).replace("MALA" if self._adjust else "ULA",
                                               "kinetic Langevin (GHMC)" if self._adjust else "kinetic Langevin")
        mass = (f", mass adapted (dense on the rows of {self._row_mass})" if self._row_mass
                else ", diagonal mass adapted")
        frozen = f", {'/'.join(self._gibbs_sites)} left to the Gibbs draw" if self._freeze_gibbs else ""
        neal = f", Neal's non-reversible acceptance (shift {self._accept_shift:g})" if self._accept_shift else ""
        return text + f", friction {self._friction:g}" + (mass if self._adapt_mass else "") + frozen + neal
