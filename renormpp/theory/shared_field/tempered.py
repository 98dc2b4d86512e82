"""Adaptive tempered sequential Monte Carlo: a population taken from exact draws of a Gaussian proposal to (F1),
stage by stage, where Langevin steps alone would take hundreds of steps to reach (F1)'s specialists."""
from __future__ import annotations

from .langevin import Tilt, _moved
from .weights import _ess, _resampled


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
    direction. Returns the coordinates, the acceptance of each step, the mean log π_β after each, the step reached
    and the ladder of β."""
    xi = start
    ell, _ = target(xi)
    beta, betas, rates, levels = 0.0, [0.0], [], []
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
        xi = xi[_resampled((new - beta) * ell, rng)]
        beta = new
        betas.append(beta)

        xi, r, lv, h = _moved(xi, target.at(beta), moves, rng, h=h)
        rates, levels = rates + list(r), levels + list(lv)
        ell, _ = target(xi)
    return xi, tuple(rates), tuple(levels), h, tuple(betas)
