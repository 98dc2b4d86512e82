r"""A warmup whose length adapts: each phase of the window schedule (:mod:`renormpp.mcmc.adaptation`) ends when it
has done its job, not at a fixed fraction of ``num_warmup``. It runs beside :class:`~renormpp.infer.chains.Chains`,
between blocks of draws, and reads and moves the schedule through the sampler (:meth:`.adapter.Adapter.schedule`,
:meth:`.adapter.Adapter.reschedule`).

The fixed schedule over W draws relaxes and tunes the step on ``[0, W/4)``, learns the mass on ``[W/4, 3W/4)`` and
tunes the step afresh on ``[3W/4, W)``. On the networks of the paper the chains relax from the prior in a few
draws, so most of those W draws are spent after the job is done (problem 1 of ``benchmarks/samplers.py``: the
recorded observables are stationary from draw ~10 of 200, and the step is settled by draw ~10 of each step window).
:class:`AdaptiveWarmup` watches the warmup between blocks of draws and moves the schedule's boundaries
(:meth:`.adapter.Adapter.reschedule`, :func:`renormpp.mcmc.adaptation.reschedule`):

1. **relaxed**: at draw n (at least ``min_relax``), the recorded observables of the draws ``[n/2, n)`` do not drift
   (Geweke's test between the two halves of those draws) and the chains agree, every observable at the threshold
   for all of them judged together, with one autocorrelation time shared by the observables
   (:func:`renormpp.diagnostics.relaxation`). A false alarm costs the next block of draws. With an
   autocorrelation time of its own per observable, this check fails at 40% of the checks on problem 2's draws
   after the warmup (five runs, n = 40-190), and chains relaxed by draw ~10 are found relaxed at draw 50-70; with
   the shared one it fails at 8% (n = 20-190), and they are found relaxed at draw 20-30;
   then the mass window opens at n and gathers ``max(min_mass, n)`` positions (as many as the relaxation took
   draws, at least ``min_mass``): that many draws, or that many divided by the number of chains where the chains
   adapt together (``pooled_chains``, ``sampler.pooling = "pooled"``); without a mass to learn it is empty.
   Where the chains relax only after the fixed schedule's window has opened (at draw W/4), that window restarts at
   n, its positions so far dropped (they were gathered before the chains relaxed), if the restarted window ends
   before the fixed one would: on problem 2 of ``benchmarks/samplers.py`` a chain that relaxed at draw 60 kept the
   fixed window [50, 150) and ended its warmup at 171, where a window [60, 90) ends it by ~110;
2. **step settled, chains still relaxed**: at least ``min_final`` draws after the mass is set, every chain's step
   iterates of the last ``min_final // 2`` draws average within a factor ``1 + step_tolerance`` of its dual-averaged
   step (the one the chain keeps), and the test of 1. passes again on ``[n/2, n)``: the warmup ends after the next
   draw, which sets that step. (Without that second test, on MNIST at the paper's size, where ε_g still falls at
   draw 170 of 200, the warmup ended at 171 and the chains took longer to settle after it.)
3. **found relaxed too early**: where the test of 1. fails at two checks running (n and n - ``min_final // 2``), the
   step settled, after a mass window that an early relaxation shortened, the chains were still drifting when the
   mass was learned: a slow fall that 10-25 draws do not resolve. On MNIST at the paper's size the chains pass the
   test at draw 20 (ε_g has fallen 0.52 → 0.49 in 20 draws, and falls to 0.45 by draw 200) and learned the mass on
   [20, 45): that run had not reached its accuracy after 14.4 minutes, where one with the fixed window [50, 150)
   took 9.3. The window then restarts at n, its positions dropped, and runs at least to the fixed one's end (3W/4);
   the mass learned before serves until then (MNIST: restarted at draw 80, [80, 150), 7.8 minutes). This happens
   once (the new window is not shorter than the fixed one).

The fixed schedule stays the bound: a phase that does not end early ends where it would have, so the warmup never
runs longer than ``num_warmup`` draws. After the warmup the kernel is fixed and exact whatever the warmup did; the
thermalization cut and the equilibrium tests of the analysis (:func:`renormpp.diagnostics.converged`) judge the
draws as before.
"""
from __future__ import annotations

import numpy as np

from ..mcstats import relaxation, scalar_series


class AdaptiveWarmup:
    """Ends the warmup of a chains' state early when its phases have done their job (see the module docstring).

    >>> warm = AdaptiveWarmup.of(chains, num_warmup=200)
    >>> while warm.running(state):
    ...     state, draws, stats = chains.run(state, 10)
    ...     state = warm.update(state, draws, stats)

    In :meth:`update`, ``draws`` are the recorded observables of the block, arrays (chain, draw, ...), and ``stats``
    holds ``step_size``, the step of each draw (chain, draw). :attr:`log` lists what was decided at which draw.

    Parameters
    ----------
    sampler : Adapter
        The chains' sampler (an :class:`~.adapter.Adapter`: it reads and moves the warmup's schedule, and says
        whether the warmup learns a mass).
    num_warmup : int
        The fixed schedule's length W, the bound: the warmup never runs longer.
    min_relax : int, default 20
        The first draw at which the chains may be found relaxed (at least 16: the drift test needs 8 draws in half of
        them).
    min_mass : int, default 50
        The fewest positions the mass window gathers.
    min_final : int, default 20
        Draws after the mass is set before the step may be found settled, judged on the last ``min_final // 2``
        draws (at least 4).
    step_tolerance : float, default 0.15
        The step is settled where its iterates average within a factor ``1 + step_tolerance`` of the dual-averaged
        step.
    pooled_chains : int, default 1
        The number of chains that adapt together (``sampler.pooling = "pooled"``): the mass window then lasts its
        positions divided by this many draws. :meth:`of` sets it from the chains.
    history : tuple of (dict, dict), optional
        ``(draws, stats)`` of the warmup draws made before (a resumed run), so that it decides as an uninterrupted
        one.

    Raises
    ------
    ValueError
        For ``min_relax`` < 16, ``min_final`` < 4, or ``pooled_chains`` that is not a positive integer.
    """

    def __init__(self, sampler, num_warmup: int, *, min_relax: int = 20, min_mass: int = 50,
                 min_final: int = 20, step_tolerance: float = 0.15, pooled_chains: int = 1,
                 history: tuple[dict, dict] | None = None):
        if min_relax < 16 or min_final < 4:
            raise ValueError("min_relax >= 16 (the drift test needs 8 draws in half of them) and min_final >= 4")
        if int(pooled_chains) != pooled_chains or pooled_chains < 1:
            raise ValueError(f"pooled_chains must be a positive integer; got {pooled_chains!r}")
        self.sampler = sampler
        self.num_warmup, self.adapt_mass, self.pooled_chains = int(num_warmup), bool(sampler.adapts_mass), \
            int(pooled_chains)
        self.min_relax, self.min_mass, self.min_final = int(min_relax), int(min_mass), int(min_final)
        self.step_tolerance = float(step_tolerance)
        W = self.num_warmup
        self._fixed = (W // 4, (3 * W) // 4)  # the fixed schedule's mass window (mcmc.adaptation), until relaxed
        self._series, self._steps = [], []
        self.log: list[str] = []
        if history is not None and history[0]:  # the warmup's draws before a resumption
            self._remember(*history)

    @classmethod
    def of(cls, chains, num_warmup: int, history: tuple[dict, dict] | None = None) -> "AdaptiveWarmup":
        """The adaptive warmup of :class:`~.chains.Chains` ``chains`` (vectorized chains that pool their adaptation
        learn a mass window's positions from all of them at once).

        Parameters
        ----------
        chains : Chains
            The chains whose warmup it watches.
        num_warmup : int
            The fixed schedule's length, the bound.
        history : tuple of (dict, dict), optional
            ``(draws, stats)`` of the warmup draws made before (a resumed run).

        Returns
        -------
        AdaptiveWarmup
        """
        sampler = chains.sampler
        pooled = sampler.pools_adaptation and chains.chain_method == "vectorized"
        return cls(sampler, num_warmup, pooled_chains=chains.num_chains if pooled else 1, history=history)

    def schedule(self, state) -> tuple[int, int, int]:
        """(start, stop, end) of the mass window and the warmup, as the sampler runs them (the first chain's)."""
        return self.sampler.schedule(state)

    @staticmethod
    def done(state) -> int:
        """Draws made so far, warmup included."""
        return int(np.max(np.asarray(state.i)))

    def running(self, state) -> bool:
        """Whether the chains of ``state`` are still in their warmup (its end, as the schedule stands now).

        Parameters
        ----------
        state
            The chains' state.

        Returns
        -------
        bool
        """
        return self.done(state) < self.schedule(state)[2]

    def update(self, state, draws: dict, stats: dict):
        """The state with its schedule moved after a block of warmup draws (the same state if nothing changes).

        Parameters
        ----------
        state
            The chains' state after the block.
        draws : dict
            The block's recorded observables, arrays (chain, draw, ...).
        stats : dict
            The block's ``step_size`` per draw (chain, draw).

        Returns
        -------
        state
            The state, its schedule moved where a phase has done its job.
        """
        self._remember(draws, stats)
        n = self.done(state)
        start, stop, end = self.schedule(state)
        window = -(-max(self.min_mass, n) // self.pooled_chains) if self.adapt_mass else 0  # x pooled chains
        opened = start < n  # the fixed schedule's window has begun (n = start: not yet)
        reschedule = self.sampler.reschedule
        if ((start, stop) == self._fixed and n < stop and n >= self.min_relax and (not opened or n + window < stop)
                and self._relaxed(n)):  # the schedule is still the fixed one: the chains were not found relaxed yet
            stop = min(n + window, stop)
            self.log.append((f"draw {n}: relaxed; the mass window restarts: [{n}, {stop}), the positions of "
                             f"[{start}, {n}) dropped" if opened else f"draw {n}: relaxed; mass window [{n}, {stop})")
                            if self.adapt_mass else f"draw {n}: relaxed")
            return reschedule(state, n, stop, end, restart_window=opened)
        if not (stop <= n < end - 1 and n - stop >= self.min_final and self._step_settled(state)):
            return state
        if self._relaxed(n):
            self.log.append(f"draw {n}: step settled at "
                            f"{np.round(np.exp(self.sampler.averaged_log_step(state)), 4).tolist()}; "
                            f"the warmup ends at draw {n + 1} (of at most {self.num_warmup})")
            return reschedule(state, start, stop, n + 1)
        again = max(n + window, self._fixed[1])  # a window as long as the fixed schedule's, at least
        back = n - self.min_final // 2  # the check before, on the draws [back/2, back)
        if (self.adapt_mass and stop < self._fixed[1] and back - stop >= self.min_final and again + self.min_final < end
                and not self._relaxed(back)):  # found relaxed too early: the chains still drift, twice running
            self.log.append(f"draw {n}: the chains still drift (relaxed too early); the mass window restarts: "
                            f"[{n}, {again}), the mass of [{start}, {stop}) kept until then")
            return reschedule(state, n, again, end, restart_window=True)
        return state

    def _remember(self, draws, stats):
        self._series.append(scalar_series(draws))
        self._steps.append(np.log(np.asarray(stats["step_size"], dtype=float)))

    def _relaxed(self, n: int) -> bool:
        """The draws [n/2, n) of the warmup (``self._series`` holds them all, from draw 0) pass the relaxation test."""
        series = {k: np.concatenate([b[k] for b in self._series], axis=1) for k in self._series[0]}
        return relaxation([x[:, n // 2:n] for x in series.values()]).relaxed

    def _step_settled(self, state) -> bool:
        averaged = self.sampler.averaged_log_step(state)
        if averaged is None:  # a fixed step: nothing to settle
            return True
        recent = np.concatenate(self._steps, axis=1)[:, -(self.min_final // 2):].mean(axis=1)
        return bool(np.all(np.abs(recent - averaged) <= np.log1p(self.step_tolerance)))
