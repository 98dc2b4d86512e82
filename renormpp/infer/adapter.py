r"""The samplers of :mod:`renormpp.mcmc` as NumPyro kernels: one :class:`Adapter` over an algorithm record
(:mod:`.algorithms`), and its two constructors :class:`Langevin` (the paper's dynamics, ULA, or MALA) and
:class:`KineticLangevin` (underdamped Langevin, OBABO, Metropolis-adjusted by default).

The adapter is thin, in the style of ``numpyro/infer/hmc.py``: ``init`` binds the model (:func:`.binding.bind`:
NumPyro's ``initialize_model``, the parameters ravelled into one flat position); ``sample`` rebuilds the potential
from ``model_args`` and ``model_kwargs`` (so ``mcmc.run`` on new data after ``mcmc.post_warmup_state =
mcmc.last_state`` samples the new posterior, recognized by :func:`.binding.fingerprint`) and runs, per recorded draw,
``inner_steps`` updates of the core kernel, then the optional exact Gibbs step, the warmup adaptation
(:mod:`renormpp.mcmc.adaptation`; pooled over vectorized chains or per chain) and the observables. The mathematics is
in :mod:`renormpp.mcmc`; what the adapter warns about (divergences, frozen chains, ULA's bias) in :mod:`.alerts`.

A step whose potential or gradient is NaN or inf is rejected (the chain stays where it was), flagged in the
``diverging`` field, counted in ``num_divergent``, and reported with a warning that names the step size: no draw
is ever NaN. MALA and kinetic Langevin test every update; ULA tests once per recorded draw (NaN and inf
propagate) and rejects the draw's ``inner_steps`` updates together, so that its inner loop runs at the speed of
a bare loop.

A Metropolis-adjusted chain that hardly accepts its moves is frozen: its draws are its start, not the posterior.
After 50, 100, 200, ... draws past the warmup the kernel checks every chain's mean acceptance since the warmup
(``mean_accept_prob``, reset when the warmup ends, as NumPyro's HMC does) and warns, naming the chains and the step,
where it is below :data:`~.alerts.MIN_ACCEPT_PROB`. At the first draw after the warmup it measures the potential's
rounding noise at every chain's position and warns (:class:`~.alerts.NoisyPotentialWarning`) where it is above
:data:`~.alerts.NOISE_BOUND`: a Metropolis test of noise accepts at random, whatever the step.

The warmup's schedule (where the mass window opens and closes, where the warmup ends) is read and moved through
:meth:`Adapter.schedule` and :meth:`Adapter.reschedule` (:class:`renormpp.infer.warmup.AdaptiveWarmup` does).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro.infer.initialization import init_to_sample
from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import identity, is_prng_key

from .._checks import positive, positive_int
from ..mcmc import adaptation, base, metrics
from ..precision import full_precision
from . import alerts
from .algorithms import Kinetic, Overdamped
from .binding import Bound, bind, fingerprint

class LangevinState(NamedTuple):
    """State of :class:`Langevin` and :class:`KineticLangevin` (one chain, or a batch of chains).

    ``i`` draws made so far (warmup included); ``z`` the unconstrained parameters (a dict of sites, as NumPyro's
    kernels keep them: ``init_params=state.z`` continues from it); ``potential_energy`` and the flat gradient
    ``z_grad``; ``momentum`` (flat; kinetic Langevin only, else None); ``obs``, the recorded observables (None
    without ``observables``); ``accept_prob``, the mean acceptance over the last draw's updates (1 for ULA);
    ``mean_accept_prob``, its running mean over draws; ``diverging``, a step of the last draw was non-finite and
    rejected; ``num_divergent``, the total so far (MALA and kinetic count updates, ULA draws); ``adaptation``, the
    warmup's adaptation state (:class:`renormpp.mcmc.adaptation.WindowState`) with the current ``step_size`` and
    ``inverse_mass`` (also readable as fields, e.g. ``extra_fields=("step_size",)``); ``data_key``, the
    :func:`~.binding.fingerprint` of the model arguments that ``potential_energy`` was computed with; ``rng_key``;
    ``accept_level``, the kinetic kernel's persistent acceptance variable, Neal's s (with ``accept_shift``; else None);
    ``chain_kwargs``, the chain's own model keyword arguments where chains run different targets (a dict of values, e.g.
    a replica ladder's likelihood temperatures, :mod:`.tempering`; else None: every chain the model as called).
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
    accept_level: Any = None
    chain_kwargs: Any = None

    @property
    def step_size(self):
        return self.adaptation.step_size

    @property
    def inverse_mass(self):
        return self.adaptation.inverse_mass


#: The constructor parameters of the kernels, numpydoc entries by name (:func:`_parameters` picks a kernel's own).
_ENTRIES = {
    "model": r"""model : callable, optional
        A NumPyro model, e.g. :func:`renormpp.models.one_hidden_layer`; give exactly one of ``model`` and
        ``potential_fn``.""",
    "algorithm": r"""algorithm : Overdamped or Kinetic
        The core algorithm, a record of :mod:`.algorithms`.""",
    "potential_fn": r"""potential_fn : callable, optional
        The potential energy U of a pytree of parameters (then give ``init_params`` to ``run``).""",
    "step_size": r"""step_size : float
        The step h (see :func:`~.algorithms.paper_step_size` for the paper's units); with ``adapt_step_size``, the
        first guess.""",
    "friction": r"""friction : float, default 1.0
        The friction :math:`\gamma`.""",
    "adjust": r"""adjust : bool
        Metropolis-adjust each update (MALA for :class:`Langevin`, generalized HMC for :class:`KineticLangevin`); the
        acceptance probability is in ``extra_fields``. ``adjust=False`` drops the Metropolis test (an
        :math:`O(h^2)` bias); ``adapt_step_size`` needs ``adjust=True``.""",
    "inner_steps": r"""inner_steps : int, default 1
        Updates per recorded draw, in one compiled loop (the paper records every 100).""",
    "observables": r"""observables : callable, optional
        ``fn(params) -> pytree`` recorded instead of the parameters (e.g. :func:`renormpp.observables.default`);
        ``params`` are the constrained sites of the model.""",
    "init_strategy": r"""init_strategy : callable, default init_to_sample
        How to initialize from the model; the default draws from the prior, as the paper does.""",
    "warn_divergences": r"""warn_divergences : bool, default True
        Warn (from a host callback) at the first divergence of each chain. With False, divergences are only flagged
        (``diverging``, ``num_divergent``), and draws are still never NaN.""",
    "adapt_step_size": r"""adapt_step_size : bool
        Adjusted kernels: during the ``num_warmup`` draws of :class:`~numpyro.infer.MCMC`, tune the step by dual
        averaging (:mod:`renormpp.mcmc.adaptation`) so that the mean acceptance probability of a draw's updates
        approaches ``target_accept_prob``; ``step_size`` is the first guess. The step is fixed after the warmup (the
        chain is then exact); it is in the state's ``step_size``.""",
    "adapt_mass": r"""adapt_mass : bool, default True
        In the warmup, set a diagonal mass :math:`M^{-1} = {\rm Var}(q)` estimated from the second and third quarters
        of the warmup (Stan's regularization), then restart the step adaptation (:mod:`renormpp.mcmc.adaptation`).""",
    "target_accept_prob": r"""target_accept_prob : float, optional
        The acceptance target, in (0, 1) (default: the algorithm's, 0.574 for MALA, 0.8 for kinetic Langevin).""",
    "gibbs_fn": r"""gibbs_fn : callable, optional
        An exact Gibbs update of some sites, ``gibbs_fn(rng_key, gibbs_sites, hmc_sites) -> gibbs_sites`` (the
        signature of :class:`numpyro.infer.HMCGibbs`), applied after the ``inner_steps`` updates of every draw; e.g.
        ``gibbs_fn=renormpp.readout.gibbs_fn(X, Y, T=T, lambda1=lambda1)`` with ``gibbs_sites=("v",)`` draws the
        readout exactly given w, so the Langevin updates only have to move w (the v moves they also make are
        harmless). Each part leaves the posterior invariant, so the composition does. The sites must be
        unconstrained (a Normal prior, as v's). ``gibbs_fn`` holds its own data: build a new one to continue on new
        data.""",
    "gibbs_sites": r"""gibbs_sites : tuple of str, default ("v",)
        The sites ``gibbs_fn`` updates.""",
    "row_mass": r"""row_mass : str, optional
        A site name, e.g. ``"w"``: on that weight matrix the mass is not diagonal but one dense matrix shared by its
        rows, the rows' covariance pooled over rows and warmup draws (:mod:`renormpp.mcmc.metrics`, Eq. M1); it
        undoes the anisotropy of the input data (MNIST's), which a diagonal mass cannot.""",
    "freeze_gibbs_sites": r"""freeze_gibbs_sites : bool, default False
        With ``gibbs_fn``: the kinetic updates leave the Gibbs sites where they are (infinite mass) and only move the
        others, so the stiffness of v (its conditional precision grows as P/(T N1)) no longer limits the step; the
        exact Gibbs draw moves v.""",
    "accept_shift": r"""accept_shift : float, default 0.0
        Where > 0, the Metropolis test uses Neal's non-reversible uniform, moved by that shift per update
        (:mod:`renormpp.mcmc.kinetic`), so rejections, and with them the momentum reversals, cluster.""",
    "pooled_adaptation": r"""pooled_adaptation : bool, default False
        With vectorized chains, the warmup adapts one step (and mass) for all chains from all of them: the dual
        averaging follows their mean acceptance, the mass window gathers every chain's positions, so a window of n
        draws of k chains learns from k n positions (cross-chain adaptation). The chains stay independent given what
        they learned, and exact after the warmup. Without it (and with ``chain_method="sequential"``) each chain
        adapts on its own, as Stan does.""",
    "warn_low_acceptance": r"""warn_low_acceptance : bool, default True
        Adjusted kernels: warn (:class:`~.alerts.LowAcceptanceWarning`) where a chain's mean acceptance since the
        warmup is below :data:`~.alerts.MIN_ACCEPT_PROB` after 50, 100, 200, ... draws (a frozen chain).""",
}


def _parameters(*names: str) -> str:
    """The numpydoc Parameters, Raises and Notes sections of a kernel whose constructor takes ``names``."""
    entries = "\n    ".join(_ENTRIES[name] for name in names)
    return f"""
    Parameters
    ----------
    {entries}

    Raises
    ------
    ValueError
        For both or neither of ``model`` and ``potential_fn``, a step or inner-step count that is not positive,
        ``adapt_step_size`` without ``adjust``, a target outside (0, 1), or ``gibbs_fn`` without its sites.

    Notes
    -----
    Use with :class:`numpyro.infer.MCMC` (any ``chain_method``; thinning; progress bar). To continue a run,
    ``mcmc.post_warmup_state = mcmc.last_state`` and ``mcmc.run(mcmc.last_state.rng_key, ...)``.
"""


def _noise(kernel, state, model_args, model_kwargs, batched):
    """:func:`.alerts.potential_noise` of the kernel's potential at the chains' positions in ``state`` (each chain's
    own: at its likelihood temperature where it has one)."""
    def one(s):
        return alerts.potential_noise(kernel.potential(model_args, model_kwargs, s.chain_kwargs), ravel_pytree(s.z)[0])
    return jax.vmap(one)(state) if batched else one(state)


class Adapter(MCMCKernel):
    __doc__ = r"""The core algorithm ``algorithm`` (a record of :mod:`.algorithms`: :class:`~.algorithms.Overdamped`,
    :class:`~.algorithms.Kinetic`) as a :class:`numpyro.infer.mcmc.MCMCKernel`; :class:`Langevin` and
    :class:`KineticLangevin` build it with their algorithm's options.
    """ + _parameters("model", "algorithm", "potential_fn", "step_size", "inner_steps", "observables", "init_strategy",
                      "warn_divergences", "adapt_step_size", "target_accept_prob", "gibbs_fn", "gibbs_sites",
                      "pooled_adaptation", "warn_low_acceptance")

    def __init__(self, model=None, *, algorithm, potential_fn=None, step_size: float, inner_steps: int = 1,
                 observables: Callable | None = None, init_strategy: Callable = init_to_sample,
                 warn_divergences: bool = True, adapt_step_size: bool = False, target_accept_prob: float | None = None,
                 gibbs_fn: Callable | None = None, gibbs_sites=("v",), pooled_adaptation: bool = False,
                 warn_low_acceptance: bool = True):
        if (model is None) == (potential_fn is None):
            raise ValueError("give exactly one of model or potential_fn")
        step_size = positive("step_size", step_size, "the Langevin step h")
        inner_steps = positive_int("inner_steps", inner_steps, "updates per recorded draw")
        if adapt_step_size and not algorithm.adjust:
            raise ValueError("adapt_step_size needs adjust=True: an unadjusted kernel has no acceptance probability "
                             "to target")
        target = algorithm.target_accept_prob if target_accept_prob is None else positive("target_accept_prob",
                                                                                           target_accept_prob)
        if not target < 1:
            raise ValueError(f"target_accept_prob must be in (0, 1); got {target_accept_prob!r}")
        if gibbs_fn is not None and not gibbs_sites:
            raise ValueError("gibbs_fn needs the names of the sites it updates: gibbs_sites=('v',)")
        if algorithm.freeze_gibbs_sites and gibbs_fn is None:
            raise ValueError("freeze_gibbs_sites=True leaves the Gibbs sites to gibbs_fn: pass gibbs_fn too")
        self.algorithm = algorithm
        self._model, self._potential_fn = model, potential_fn
        self._step_size, self._inner_steps = float(step_size), int(inner_steps)
        self._observables, self._init_strategy = observables, init_strategy
        self._warn_divergences = bool(warn_divergences)
        self._warn_acceptance = bool(warn_low_acceptance)
        self._pooled = bool(pooled_adaptation)
        self._adapt_step, self._target = bool(adapt_step_size), float(target)
        self._gibbs_fn, self._gibbs_sites = gibbs_fn, tuple(gibbs_sites)
        self._bound: Bound | None = None
        self._sample_fn = None  # set by init; MCMC calls init again while it is None (e.g. after unpickling)
        self._loop = self._warm_update = None
        self._num_warmup = 0
        self.curvature = None  #: ULA only: the potential's largest curvature at the start (see ULA_BIAS_BOUND)

    #: its warmup has a schedule that :class:`~renormpp.infer.warmup.AdaptiveWarmup` may move (the warmup protocol of
    #: :mod:`renormpp.infer.wrapper`)
    adapts_warmup = True

    @property
    def adapts_mass(self) -> bool:
        """Whether the warmup learns a mass (a window of :mod:`renormpp.mcmc.adaptation`)."""
        return self.algorithm.adapt_mass

    @property
    def pools_adaptation(self) -> bool:
        """Whether vectorized chains adapt together (``pooled_adaptation``)."""
        return self._pooled

    # ---- the warmup's schedule, for a controller between blocks of draws (renormpp.infer.warmup) ----------------
    @staticmethod
    def schedule(state) -> tuple[int, int, int]:
        """(start, stop, end) of the mass window and the warmup of ``state``, as the kernel runs them (the first
        chain's)."""
        s = np.asarray(state.adaptation.schedule).reshape(-1, 3)[0]
        return int(s[0]), int(s[1]), int(s[2])

    @staticmethod
    def reschedule(state, start, stop, end, *, restart_window: bool = False):
        """``state`` with its mass window moved to draws ``[start, stop)`` and its warmup's end to ``end``
        (:func:`renormpp.mcmc.adaptation.reschedule`; ``restart_window`` drops the positions gathered so far)."""
        return state._replace(adaptation=adaptation.reschedule(state.adaptation, start, stop, end,
                                                               restart_window=restart_window))

    @staticmethod
    def averaged_log_step(state) -> np.ndarray | None:
        """Each chain's dual-averaged log step (the one it keeps when the warmup ends; NumPyro's ``DAState.x_avg``),
        or None where the step is not adapted."""
        if not state.adaptation.step:
            return None
        return np.asarray(state.adaptation.step[1], dtype=float).reshape(-1)

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
        acc = f"acc. prob={float(jnp.mean(state.mean_accept_prob)):.2f}, " if self.algorithm.adjust else ""
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
        return self.init_per_chain(rng_key, num_warmup, init_params, model_args, model_kwargs)

    def init_per_chain(self, rng_key, num_warmup, init_params, model_args, model_kwargs, chain_kwargs=None):
        """:meth:`init`, each chain with its own model keyword arguments ``chain_kwargs`` (a dict of arrays with a
        leading chain axis; None: every chain the model as called), kept in the state's ``chain_kwargs`` and merged
        into ``model_kwargs`` at every potential evaluation (:meth:`potential`). A wrapper that runs chains on different
        targets uses it, e.g. :class:`.tempering.ReplicaExchange` with its likelihood temperatures."""
        model_kwargs = {} if model_kwargs is None else model_kwargs
        algo = self.algorithm
        self._num_warmup = int(num_warmup)
        batched = not is_prng_key(rng_key)
        keys = jax.vmap(lambda k: jax.random.split(k, 3))(rng_key) if batched else jax.random.split(rng_key, 3)
        rng_key, key_init, key_core = (keys[:, j] for j in range(3)) if batched else keys
        self._bound, init_params = bind(key_init, self._model, self._potential_fn, self._init_strategy, init_params,
                                        model_args, model_kwargs, batched)
        one = jax.tree_util.tree_map(lambda x: x[0], init_params) if batched else init_params
        if self._gibbs_fn is not None:
            missing = [k for k in self._gibbs_sites if not isinstance(one, dict) or k not in one]
            if missing:
                sites = sorted(one) if isinstance(one, dict) else "none: the parameters are not a dict"
                raise ValueError(f"gibbs_sites {missing} are not sites of the model (its sites: {sites})")
        ravel = lambda p: ravel_pytree(p)[0]  # noqa: E731
        position = jax.vmap(ravel)(init_params) if batched else ravel(init_params)
        U = self._bound.potential(model_args, model_kwargs)
        rows = metrics.matrix_site(one, algo.row_mass) if algo.row_mass else None
        frozen = None
        if algo.freeze_gibbs_sites and self._gibbs_fn is not None:
            frozen = ravel_pytree({k: jnp.full(jnp.shape(x), k in self._gibbs_sites) for k, x in one.items()})[0] > 0
        warm_init, self._warm_update = adaptation.window_adaptation(self._num_warmup, self._target, self._adapt_step,
                                                                    algo.adapt_mass, rows, frozen)
        self._loop = base.inner_loop(algo.build(), self._inner_steps)

        data_key = fingerprint(model_args, model_kwargs)

        @full_precision()
        def init_all(position, keys, args, own):
            def init_one(x, key, own):
                U = self.potential(args, model_kwargs, own)
                ws = warm_init(self._step_size, x.shape[-1], x.dtype)
                core = algo.init(x, U, key, ws.inverse_mass)
                zero = jnp.zeros((), x.dtype)
                return LangevinState(jnp.array(0), self._bound.unravel(x), core.potential_energy, core.grad,
                                     obs=self._record(x, args, model_kwargs), accept_prob=zero + 1.0,
                                     mean_accept_prob=zero, diverging=jnp.array(False), num_divergent=jnp.array(0),
                                     adaptation=ws, data_key=data_key, rng_key=None, chain_kwargs=own,
                                     **algo.unpack(core))

            return jax.vmap(init_one, (0, 0, None if own is None else 0))(position, keys, own) if batched else \
                init_one(position, keys, own)

        # one compilation instead of an op-by-op trace (seconds per point); data given as nested lists stays eager
        arrays = all(a is None or isinstance(a, (jax.Array, np.ndarray)) for a in model_args)
        if chain_kwargs is not None:
            chain_kwargs = {k: jnp.asarray(v, position.dtype) for k, v in chain_kwargs.items()}
        state = (jax.jit(init_all) if arrays else init_all)(position, key_core, tuple(model_args), chain_kwargs)
        pe, grad = state.potential_energy, state.z_grad
        concrete = not isinstance(pe, jax.core.Tracer)
        if concrete and not (np.all(np.isfinite(pe)) and np.all(np.isfinite(grad))):
            raise ValueError("the potential energy or its gradient is not finite at the initial parameters")
        self.curvature = None
        if concrete and algo.checks_curvature:
            x0 = position[0] if batched else position
            self.curvature = float(jax.jit(base.max_curvature, static_argnums=0)(U, x0, key_init[0] if batched
                                                                                 else key_init))
            alerts.check_ula_step(self._step_size, self.curvature)
        self._sample_fn = self.sample
        return state._replace(rng_key=rng_key)

    def sample(self, state, model_args, model_kwargs):
        with full_precision():  # every product of the step, the record and the alerts (no TF32 on GPUs)
            return self._sample(state, model_args, model_kwargs)

    def _sample(self, state, model_args, model_kwargs):
        model_kwargs = {} if model_kwargs is None else model_kwargs
        U = self._bound.potential(model_args, model_kwargs)
        batched = jnp.ndim(state.i) > 0
        state = self._refresh_if_new_data(state, U, model_args, model_kwargs, batched)

        def one(s):
            Us = U if s.chain_kwargs is None else self.potential(model_args, model_kwargs, s.chain_kwargs)
            return self._sample_one(s, Us, model_args, model_kwargs)

        new = jax.vmap(one)(state) if batched else one(state)
        new = self._adapt(state, new, batched)
        if self._warn_divergences:
            # one host callback, and only when some chain diverged for the first time (a callback inside the
            # vmapped update would run once per chain and draw)
            first = (state.num_divergent == 0) & new.diverging
            jax.lax.cond(jnp.any(first),
                         lambda: jax.debug.callback(alerts.warn_divergence, first, new.num_divergent, new.step_size),
                         lambda: None)
        if self.algorithm.adjust and self._warn_acceptance:
            # at 50, 100, 200, ... draws after the warmup (the warmup's end: the same for every chain)
            n = new.i - new.adaptation.schedule[..., 2]
            n = n[0] if batched else n

            def noise():  # once, at the first draw after the warmup
                level = _noise(self, new, model_args, model_kwargs, batched)
                jax.lax.cond(jnp.any(~(level <= alerts.NOISE_BOUND)),
                             lambda: jax.debug.callback(alerts.warn_noisy_potential, level, new.step_size),
                             lambda: None)

            jax.lax.cond(n == 1, noise, lambda: None)
            jax.lax.cond(alerts.acceptance_check_due(n) & jnp.any(new.mean_accept_prob < alerts.MIN_ACCEPT_PROB),
                         lambda: jax.debug.callback(alerts.warn_low_acceptance, n, new.mean_accept_prob,
                                                    new.step_size),
                         lambda: None)
        return new

    def potential(self, model_args, model_kwargs=None, chain_kwargs=None):
        """U of the flat position (after :meth:`init`), the model called with ``model_kwargs`` and, where given, one
        chain's own keyword arguments ``chain_kwargs`` (:meth:`init_per_chain`) on top."""
        model_kwargs = {} if model_kwargs is None else model_kwargs
        return self._bound.potential(model_args, model_kwargs if chain_kwargs is None else {**model_kwargs,
                                                                                            **chain_kwargs})

    def potential_noise(self, state, model_args, model_kwargs=None) -> np.ndarray:
        """The potential's rounding noise (:func:`.alerts.potential_noise`, energy units) at each chain's position
        in ``state``, as the check at the warmup's end measures it (in the sampler's precision, every product at full
        float32 precision): one number per chain. Above :data:`.alerts.NOISE_BOUND` the Metropolis test weighs
        noise (``benchmarks/gpu_check.py`` reports it at the paper's hardest point)."""
        model_kwargs = {} if model_kwargs is None else model_kwargs
        batched = jnp.ndim(state.i) > 0
        with full_precision():
            return np.atleast_1d(np.asarray(jax.jit(lambda st: _noise(self, st, model_args, model_kwargs, batched))(
                state), dtype=float))

    def _adapt(self, state, new, batched):
        """The warmup's adaptation after a draw (:mod:`renormpp.mcmc.adaptation`), skipped once every chain is past
        the warmup: outside the vmap over chains, so that the skip is a real branch (not both sides computed)."""
        def one(old, s, accept_prob, position):
            return s._replace(adaptation=self._warm_update(old.i, s.adaptation, accept_prob, position))

        flat = jax.vmap(lambda z: ravel_pytree(z)[0]) if batched else (lambda z: ravel_pytree(z)[0])
        if batched and self._pooled:  # every chain adapts from all of them: the same step and mass for all
            def update(old, s):  # computed once (chain 0's state, which every chain shares) and given to each
                first = jax.tree.map(lambda x: x[0], (old, s))
                adapted = one(*first, jnp.mean(s.accept_prob), flat(s.z)).adaptation
                n = s.accept_prob.shape[0]
                return s._replace(adaptation=jax.tree.map(lambda x: jnp.broadcast_to(x, (n, *jnp.shape(x))), adapted))
        else:
            def update(old, s):
                return (jax.vmap(one) if batched else one)(old, s, s.accept_prob, flat(s.z))

        return jax.lax.cond(jnp.any(state.i < state.adaptation.schedule[..., 2]), update, lambda old, s: s, state, new)

    def _refresh_if_new_data(self, state, U, model_args, model_kwargs, batched):
        """The state keeps U and its gradient at its point; when the model's arguments changed since (``mcmc.run`` on
        new data after ``post_warmup_state``), recompute them there, once: the chains would otherwise test their
        moves against the old posterior's energy. The arguments are recognized by :func:`.binding.fingerprint`."""
        key = fingerprint(model_args, model_kwargs)
        changed = jnp.any(key != (state.data_key[0] if batched else state.data_key))  # the same for every chain

        def refresh(st):
            def one(s):
                Us = U if s.chain_kwargs is None else self.potential(model_args, model_kwargs, s.chain_kwargs)
                pe, grad = jax.value_and_grad(Us)(ravel_pytree(s.z)[0])
                return s._replace(potential_energy=pe, z_grad=grad)
            st = jax.vmap(one)(st) if batched else one(st)
            return st._replace(data_key=jnp.broadcast_to(key, st.data_key.shape))

        return jax.lax.cond(changed, refresh, lambda st: st, state)

    def describe(self, state=None) -> str:
        """The sampler and its step, for reports: e.g. ``"ULA, step_size=1e-05 (h*curvature = 0.003)"``."""
        algo = self.algorithm
        text = f"{algo.label}, step_size={self._step_size:.3g}"
        if state is not None and self._adapt_step:
            text = f"{algo.label}, step_size={float(np.mean(np.asarray(state.step_size))):.3g} (adapted)"
        if self.curvature is not None:
            text += (f" (h*curvature = {self._step_size * self.curvature:.2g} at the start; bound "
                     f"{alerts.ULA_BIAS_BOUND})")
        if state is not None and algo.adjust:
            text += f", mean acceptance {float(np.mean(np.asarray(state.mean_accept_prob))):.2f}"
        if self._pooled and (self._adapt_step or algo.adapt_mass):
            text += ", adaptation pooled over the chains"
        gibbs = f", exact Gibbs draw of {'/'.join(self._gibbs_sites)}" if self._gibbs_fn else ""
        return text + f", {self._inner_steps} updates per draw" + gibbs + algo.details(self._gibbs_sites)

    # ---- one chain ---------------------------------------------------------------------------------------------
    def _record(self, position, model_args, model_kwargs):
        if self._observables is None:
            return None
        return self._observables(self._bound.constrained(position, model_args, model_kwargs))

    def _gibbs_draw(self, rng_key, position):
        """The flat position with ``gibbs_sites`` redrawn by ``gibbs_fn`` given the other sites."""
        z = self._bound.unravel(position)
        sites = {k: z[k] for k in self._gibbs_sites}
        rest = {k: v for k, v in z.items() if k not in sites}
        return ravel_pytree({**z, **self._gibbs_fn(rng_key, sites, rest)})[0]

    def _sample_one(self, state: LangevinState, U, model_args, model_kwargs) -> LangevinState:
        rng_key, key_loop, key_gibbs = jax.random.split(state.rng_key, 3)
        ws = state.adaptation
        core = self.algorithm.core_state(ravel_pytree(state.z)[0], state)
        core, info = self._loop(key_loop, core, U, *self.algorithm.args(ws))
        if self._gibbs_fn is not None:
            core = base.gibbs_step(key_gibbs, core, U, self._gibbs_draw)
        i = state.i + 1
        end = ws.schedule[2]  # the warmup's end: the running mean restarts there, as in NumPyro's HMC
        mean_accept_prob = state.mean_accept_prob + (info.accept_prob - state.mean_accept_prob) / jnp.where(
            state.i < end, i, i - end)
        return LangevinState(i, self._bound.unravel(core.position), core.potential_energy, core.grad,
                             obs=self._record(core.position, model_args, model_kwargs),
                             accept_prob=info.accept_prob, mean_accept_prob=mean_accept_prob,
                             diverging=info.num_divergent > 0, num_divergent=state.num_divergent + info.num_divergent,
                             adaptation=ws, data_key=state.data_key, rng_key=rng_key, chain_kwargs=state.chain_kwargs,
                             **self.algorithm.unpack(core))


class Langevin(Adapter):
    __doc__ = r"""Langevin dynamics (ULA, or MALA with ``adjust=True``) as a :class:`numpyro.infer.mcmc.MCMCKernel`:
    :class:`Adapter` over :class:`~.algorithms.Overdamped`. ``adjust``: Metropolis-adjust each update (MALA); the
    acceptance probability is in ``extra_fields``. ``adapt_step_size`` needs it. The default acceptance target is 0.574
    (optimal for MALA in high dimension, Roberts & Rosenthal 1998).
    """ + _parameters("model", "potential_fn", "step_size", "adjust", "inner_steps", "observables", "init_strategy",
                      "warn_divergences", "adapt_step_size", "target_accept_prob", "gibbs_fn", "gibbs_sites",
                      "pooled_adaptation", "warn_low_acceptance")

    def __init__(self, model=None, *, potential_fn=None, step_size: float, adjust: bool = False,
                 inner_steps: int = 1, observables: Callable | None = None,
                 init_strategy: Callable = init_to_sample, warn_divergences: bool = True,
                 adapt_step_size: bool = False, target_accept_prob: float | None = None,
                 gibbs_fn: Callable | None = None, gibbs_sites=("v",), pooled_adaptation: bool = False,
                 warn_low_acceptance: bool = True):
        super().__init__(model, algorithm=Overdamped(bool(adjust)), potential_fn=potential_fn, step_size=step_size,
                         inner_steps=inner_steps, observables=observables, init_strategy=init_strategy,
                         warn_divergences=warn_divergences, adapt_step_size=adapt_step_size,
                         target_accept_prob=target_accept_prob, gibbs_fn=gibbs_fn, gibbs_sites=gibbs_sites,
                         pooled_adaptation=pooled_adaptation, warn_low_acceptance=warn_low_acceptance)


class KineticLangevin(Adapter):
    __doc__ = r"""Underdamped (kinetic) Langevin dynamics, OBABO splitting (:mod:`renormpp.mcmc.kinetic`),
    Metropolis-adjusted (generalized HMC: exact) by default, as a :class:`numpyro.infer.mcmc.MCMCKernel`:
    :class:`Adapter` over :class:`~.algorithms.Kinetic`.

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
    """ + _parameters("model", "potential_fn", "step_size", "friction", "adjust", "inner_steps", "observables",
                      "init_strategy", "warn_divergences", "adapt_step_size", "adapt_mass", "target_accept_prob",
                      "gibbs_fn", "gibbs_sites", "row_mass", "freeze_gibbs_sites", "accept_shift",
                      "pooled_adaptation", "warn_low_acceptance")

    def __init__(self, model=None, *, potential_fn=None, step_size: float, friction: float = 1.0,
                 adjust: bool = True, inner_steps: int = 1, observables: Callable | None = None,
                 init_strategy: Callable = init_to_sample, warn_divergences: bool = True,
                 adapt_step_size: bool = True, adapt_mass: bool = True, target_accept_prob: float | None = None,
                 gibbs_fn: Callable | None = None, gibbs_sites=("v",), row_mass: str | None = None,
                 freeze_gibbs_sites: bool = False, accept_shift: float = 0.0, pooled_adaptation: bool = False,
                 warn_low_acceptance: bool = True):
        algorithm = Kinetic(bool(adjust), friction, accept_shift, bool(adapt_mass), row_mass, bool(freeze_gibbs_sites))
        super().__init__(model, algorithm=algorithm, potential_fn=potential_fn, step_size=step_size,
                         inner_steps=inner_steps, observables=observables, init_strategy=init_strategy,
                         warn_divergences=warn_divergences, adapt_step_size=adapt_step_size,
                         target_accept_prob=target_accept_prob, gibbs_fn=gibbs_fn, gibbs_sites=gibbs_sites,
                         pooled_adaptation=pooled_adaptation, warn_low_acceptance=warn_low_acceptance)
