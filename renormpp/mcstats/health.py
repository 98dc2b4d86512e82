"""Did the sampler work? Its acceptance, its divergences and its frozen chains (:func:`sampler_health`), and the
sampler and its step in words (:func:`describe_sampler`)."""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ..mcmc import base as _base

#: a chain whose mean acceptance (after the warmup) is below this hardly moves: it fails the health check (the
#: threshold of the kernels' own warning, renormpp.mcmc.base)
MIN_ACCEPT_PROB = _base.MIN_ACCEPT_PROB
#: a chain with more than this fraction of draws that made a divergent step fails the health check
MAX_DIVERGENT_FRACTION = 0.01
#: a fall of the mean acceptance from the first tenth to the last quarter of the draws after the warmup above this
#: (at the step and mass the warmup fixed) warns that the chains moved on after the warmup (:class:`StaleStepWarning`)
MAX_ACCEPT_FALL = 0.25


class SamplerWarning(RuntimeWarning):
    """The sampler failed: a chain froze, hardly accepted its moves, or diverged; its draws are not the posterior."""


class StaleStepWarning(RuntimeWarning):
    """The acceptance at the step and mass the warmup fixed fell during sampling: the chains moved after the warmup
    into a region where that step no longer fits (they may still be relaxing); the draws are exact, but slow."""


@dataclass(frozen=True)
class SamplerHealth:
    """Per-chain acceptance and divergence fraction (None where not recorded), the frozen chains, and the verdict:
    ``ok`` unless a chain froze, its mean acceptance is below :data:`MIN_ACCEPT_PROB`, or more than
    :data:`MAX_DIVERGENT_FRACTION` of its draws diverged; ``problems`` says which."""

    ok: bool
    problems: tuple = ()
    accept_prob: np.ndarray | None = None
    divergent_fraction: np.ndarray | None = None
    frozen: tuple = ()


def sampler_health(stats: dict | None = None, series=None, *, warn: bool = True) -> SamplerHealth:
    """Check the sampler statistics ``stats`` (``accept_prob`` and/or ``diverging``, axes (chain, draw), after the
    warmup) and an observable ``series`` (chain, draw) that a moving chain changes; a :class:`SamplerWarning` lists
    the problems.

    Parameters
    ----------
    stats : dict, optional
        ``accept_prob`` and/or ``diverging``, axes (chain, draw), after the warmup.
    series : array_like, shape (chain, draw), optional
        An observable that a moving chain changes (a frozen chain is one where it does not).
    warn : bool, default True
        Issue the :class:`SamplerWarning` where there are problems.

    Returns
    -------
    SamplerHealth
    """
    stats = stats or {}
    problems = []
    acc = div = None
    if "accept_prob" in stats:
        acc = np.asarray(stats["accept_prob"], dtype=float).reshape(np.shape(stats["accept_prob"])[0], -1).mean(axis=1)
        low = [c for c, a in enumerate(acc) if a < MIN_ACCEPT_PROB]
        if low:
            problems.append(f"chain(s) {low} accepted {', '.join(f'{acc[c]:.3f}' for c in low)} of their moves (below "
                            f"{MIN_ACCEPT_PROB}): the step is too large for the Metropolis test")
    if "diverging" in stats:
        d = np.asarray(stats["diverging"], dtype=bool)
        div = d.reshape(d.shape[0], -1).mean(axis=1)
        bad = [c for c, f in enumerate(div) if f > MAX_DIVERGENT_FRACTION]
        if bad:
            problems.append(f"chain(s) {bad} diverged in {', '.join(f'{div[c]:.0%}' for c in bad)} of their draws "
                            f"(more than {MAX_DIVERGENT_FRACTION:.0%}): the step is too large")
    frozen = ()
    if series is not None:
        x = np.asarray(series, dtype=float)
        x = x.reshape(x.shape[0], -1) if x.ndim > 1 else x[None]
        frozen = tuple(c for c in range(x.shape[0]) if np.ptp(x[c]) == 0)
        if frozen:
            problems.append(f"chain(s) {list(frozen)} did not move: every draw is the same")
    if problems and warn:
        warnings.warn("the sampler failed, its draws are not samples of the posterior: " + "; ".join(problems),
                      SamplerWarning, stacklevel=2)
    fell = acceptance_fell(stats.get("accept_prob"))
    if fell and warn:
        warnings.warn(fell, StaleStepWarning, stacklevel=2)
    return SamplerHealth(not problems, tuple(problems), acc, div, frozen)


def acceptance_fell(accept_prob, fall: float = MAX_ACCEPT_FALL, min_draws: int = 200) -> str | None:
    """Where the mean acceptance ``accept_prob`` (chain, draw; after the warmup, pooled over the chains) of the last
    quarter of the draws is more than ``fall`` below that of the first tenth, a sentence that says so and what to
    do; None otherwise (or for fewer than ``min_draws`` draws per chain). The kernel is fixed after the warmup, so a
    falling acceptance means the chains moved on into a stiffer region than the one the warmup learned its step and
    mass in (Fig. 1a at α = 10 after a warmup of 200 draws: 0.80 at its end, 0.53 over the first tenth of the next
    11 000 draws, 0.12 over the last quarter), and the step is too large there.

    Parameters
    ----------
    accept_prob : array_like, shape (chain, draw)
        The acceptance probability of each draw after the warmup.
    fall : float, default MAX_ACCEPT_FALL
        The fall that counts.
    min_draws : int, default 200
        The fewest draws per chain judged.

    Returns
    -------
    str or None
    """
    if accept_prob is None:
        return None
    a = np.asarray(accept_prob, dtype=float)
    a = a.reshape(a.shape[0], -1) if a.ndim > 1 else a[None]
    n = a.shape[1]
    if n < min_draws:
        return None
    first, last = float(a[:, :n // 10].mean()), float(a[:, -(n // 4):].mean())
    if first - last <= fall:
        return None
    return (f"the acceptance at the warmup's step fell from {first:.2f} (first tenth of the draws) to {last:.2f} "
            "(last quarter): the chains moved on after the warmup into a region where that step and mass are too "
            "large, and may still be relaxing; the draws are exact but slow. A longer warmup learns the step and mass "
            "where the chains end up (in renormpp run: sampler.num_warmup = 10000 with sampler.warmup = \"fixed\" "
            "settles Fig. 1a at alpha = 10, benchmarks/README.md)")



def describe_sampler(sampler, state) -> str:
    """The sampler and its (adapted) step, in words, for the comparison and the report: the kernel's own
    ``describe(state)`` where it has one (the Langevin kernels of :mod:`renormpp.infer`), else the class name of the
    kernel (inside :class:`renormpp.infer.Observed`) and the step size its warmup adapted, e.g.
    ``"NUTS, adapted step_size=0.0123"``.

    Parameters
    ----------
    sampler : numpyro.infer.mcmc.MCMCKernel
        The kernel.
    state : object
        Its state after the warmup.

    Returns
    -------
    str
    """
    if hasattr(sampler, "describe"):
        return sampler.describe(state)
    step = getattr(getattr(state, "adapt_state", None), "step_size", None)
    inner = getattr(sampler, "inner", sampler)
    return type(inner).__name__ + (f", adapted step_size={float(np.mean(np.asarray(step))):.3g}" if step is not None
                                   else "")
