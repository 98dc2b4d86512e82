r"""(F2) by stochastic approximation on populations at (F1) (``proposal="mcmc"``): the moments averaged over the
iterations, the field stepped towards their solution, the Monte Carlo error of the averaged moments, and the solve's
checkpoint (its state saved to an ``.npz`` file as it goes, and read back by a solve of the same data, settings and
start)."""
from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from ...progress import bar as progress_bar
from .equations import _field, _population_moments, _update
from .moves import Population, _moved


#: seconds between two saves of a solve's checkpoint (:class:`_Checkpoint`)
_CHECKPOINT_SECONDS = 60.0


class _Checkpoint:
    """The state of an averaged solve (:func:`_averaged`) in an ``.npz`` file, saved every
    :data:`_CHECKPOINT_SECONDS` and at its end (written to a temporary file, then renamed: an interrupted save leaves
    the last one whole), and read back by a solve with the same data, settings and start (``key``, a digest of
    them): a solve of hours at P = 1000 is not lost to a closed session."""

    def __init__(self, path, key: str):
        self.path, self.key, self.last = Path(path), key, time.monotonic()
        if self.path.suffix != ".npz":
            raise ValueError(f"checkpoint must be a path ending in .npz; got {str(path)!r}")

    def load(self) -> dict | None:
        """The saved state, or None where there is none yet; a ValueError where it is another solve's."""
        if not self.path.exists():
            return None
        with np.load(self.path, allow_pickle=False) as z:
            state = {k: z[k] for k in z.files}
        if str(state.pop("key")) != self.key:
            raise ValueError(f"the checkpoint {str(self.path)!r} holds a solve of other data, settings or start; "
                             "pass another path to start this one, or delete it")
        return state

    def save(self, force: bool = False, **state) -> None:
        """Save ``state`` where :data:`_CHECKPOINT_SECONDS` have passed since the last save, or at once (``force``)."""
        if not force and time.monotonic() - self.last < _CHECKPOINT_SECONDS:
            return
        tmp = self.path.with_name(self.path.name + ".tmp.npz")
        np.savez(tmp, key=np.array(self.key), **state)
        os.replace(tmp, self.path)
        self.last = time.monotonic()


def _key(*arrays, **settings) -> str:
    """A digest of a solve's data, start and settings (the key of its checkpoint)."""
    h = hashlib.sha256(repr(sorted(settings.items())).encode())
    for a in arrays:
        h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    return h.hexdigest()


#: the default iterations of the stochastic approximation (proposal="mcmc"); a longer ``maxiter`` stops at the
#: tolerance from there on
_AVERAGED_ITER = 80
#: iterations in each block of the averaging phase that :func:`_mc_error` splits into two alternating halves
_SPLIT_BLOCK = 5


def _averaged(law: Population, m, Sigma, target, Y, *, N1, T, lambda0, K, damping, maxiter, tol, steps, rng,
              progress=False, store: _Checkpoint | None = None, state: dict | None = None, renew=None,
              cavity=None):
    r"""(F2) by stochastic approximation on a persistent population (``proposal="mcmc"``): each iteration moves the
    neurons ``law`` by ``steps`` more Langevin steps at the current field, takes the moments
    :math:`N_1 E[W\otimes ss^\top]` of (F2) (W = (c+q)^{-1} + yy^T, and (c+q)^{-1}) over them, and steps the field,
    ``damping`` of the way, to the solution of (F2) with the moments averaged over iterations: with weight ``damping``
    in the first half (the moments follow the field), then with weights falling as 1/k (Robbins & Monro, Ann. Math.
    Stat. 22, 400 (1951); the moments of many populations averaged). Averaging the moments, not the fields they give,
    matters: the field is a matrix inverse of the moments, and the inverse of a noisy estimate is biased (by about
    3% in ε_g with 10 000 neurons on the linear teacher at α = 2). No importance weight enters: the neurons are at
    (F1), the field is left where they were last moved. Past the default length (:data:`_AVERAGED_ITER` iterations,
    whose solves run it through) the iteration stops at the first residual below ``tol`` once averaging, where the
    Monte Carlo error of the averaged moments (:func:`_mc_error`) is below ``tol`` too (a first crossing of a noisy
    residual is no fixed point): a ``maxiter`` of 160 is a cap, not a cost. ``store``
    saves the state as it goes, ``state`` (a saved one) continues from it: the same iterations as without a break.
    ``renew`` (``fresh=True``): ``renew(gauss, m, Sigma, h) -> (gauss, xi, rates, levels, h)`` gives each
    iteration a new population, independent of the last (:func:`_renewed`), instead of moving the last one on.
    ``cavity`` (N1): the field is the cavity's of averaged expectation propagation, (C1)-(C2) (:func:`_update`).
    Returns (m, Sigma, the population, residuals, the Monte Carlo error, reason)."""
    gauss, xi, c, h = law.proposal, law.moved, law.c, law.step
    burn = maxiter // 2
    residuals, rates, levels, L_W, L_C, reason = [], list(law.acceptance), list(law.levels), 0.0, 0.0, ""
    first, done, error = 0, False, (np.inf, np.inf)
    halves = np.zeros((2, 2) + 2 * (Y.size,))  # the averaging phase's moments (L_W, L_C) summed in two halves
    block = max(1, min(_SPLIT_BLOCK, (maxiter - burn) // 4))  # of alternate blocks, at least two each
    counts = np.zeros(2, dtype=int)
    if state is not None:
        first, done, reason = int(state["next"]), bool(state["done"]), str(state["reason"])
        m, Sigma, L_W, L_C, h = state["m"], state["Sigma"], state["L_W"], state["L_C"], float(state["h"])
        residuals, rates, levels = list(state["residuals"]), list(state["rates"]), list(state["levels"])
        if "halves" in state:  # (a checkpoint saved without the halves holds no Monte Carlo error: infinite)
            halves, counts, error = state["halves"], state["counts"], tuple(state["error"])
        rng.bit_generator.state = json.loads(str(state["rng"]))

    def save(k, force=False):
        if store is not None:
            store.save(force, next=k, done=done, reason=reason, m=m, Sigma=Sigma, L_W=L_W, L_C=L_C, h=h, xi=xi,
                       residuals=np.asarray(residuals).reshape(-1, 2), rates=rates, levels=levels,
                       halves=halves, counts=counts, error=np.asarray(error),
                       rng=json.dumps(rng.bit_generator.state), basis=gauss.basis, mean=gauss.mean, chol=gauss.chol)

    bar = progress_bar(total=maxiter, initial=first, desc="shared field", disable=not progress)
    for k in range(first, maxiter if not done else first):
        if k:
            if renew is not None:
                gauss, xi, r, lv, h = renew(gauss, m, Sigma, h)
            else:
                xi, r, lv, h = _moved(xi, target.at(gauss, m, Sigma), steps, rng, h=h)
            rates, levels = rates + list(r), levels + list(lv)
        LW, LC, _ = _population_moments(replace(gauss, noise=xi).draw(lambda0)[0], law.X, law.activation, m, Sigma,
                                        c, K, N1, T)
        a = 1.0 if k == 0 else damping if k < burn else max(damping / (1 + damping * (k - burn)), 1 / (k + 1))
        L_W, L_C = L_W + a * (LW - L_W), L_C + a * (LC - L_C)
        if k >= burn:
            half = (k - burn) // block % 2
            halves[half, 0] += LW
            halves[half, 1] += LC
            counts[half] += 1
        m_new, Sigma_new, res = _field(L_W, L_C, m, Sigma, Y, T, cavity)
        if not np.all(np.isfinite(res)):
            reason = "the iteration produced a number that is not finite"
            break
        residuals.append(res)
        if k >= burn:
            error = _mc_error(halves, counts, m, Sigma, Y, T, cavity)
        bar.set_postfix_str(f"residuals {res[0]:.2g}, {res[1]:.2g} (tol {tol:g}), "
                            + (f"averaging, Monte Carlo error {max(error):.2g}" if k >= burn
                               else "following the field"))
        bar.update()
        if k >= max(burn, _AVERAGED_ITER - 1) and max(res) < tol and max(error) < tol:
            break  # averaging and settled, beyond the moments' own noise: the field is left where it was measured
        if k < maxiter - 1:
            m, Sigma = m + damping * (m_new - m), Sigma + damping * (Sigma_new - Sigma)
            save(k + 1)
    bar.close()
    if not reason and max(residuals[-1]) >= tol:
        reason = (f"the residuals {residuals[-1][0]:.2g}, {residuals[-1][1]:.2g} of the field with averaged moments "
                  f"did not fall below tol = {tol:g} in {maxiter} iterations ({burn} following the field, the rest "
                  "averaging); raise maxiter, or neurons")
    elif not reason and not np.isfinite(max(error)):
        reason = ("the Monte Carlo error of the averaged moments was not measured (an averaging phase too short to "
                  "split into two halves, or a checkpoint saved without them); raise maxiter")
    elif not reason and max(error) >= tol:
        reason = (f"the residuals fell below tol = {tol:g}, but the Monte Carlo error of the averaged moments "
                  f"({error[0]:.2g} in m, {error[1]:.2g} in Sigma, from two halves of the iterations) did not in "
                  f"{maxiter} iterations: the residuals are within the noise; raise neurons, or maxiter")
    done = True
    save(len(residuals), force=True)
    law = Population(gauss, xi, m.copy(), Sigma.copy(), c, law.X, law.activation, tuple(rates), tuple(levels), h)
    return m, Sigma, law, np.asarray(residuals).reshape(-1, 2), error, reason


def _mc_error(halves, counts, m, Sigma, Y, T, cavity=None):
    r"""The Monte Carlo error of the field that the averaged moments give, in the residuals' norms (:func:`_field`):
    the averaging phase's iterations split into two halves (alternate blocks of :data:`_SPLIT_BLOCK` iterations, fewer
    in a short solve), and half the difference of what their moments give (:func:`_update`),
    :math:`\|(A^A - A^B)m - (h^A - h^B)\|/(2\|y\|)` and
    :math:`\|\Sigma'_A - \Sigma'_B\|/(2\|\Sigma\|)`: for two independent halves of n iterations of variance σ² each,
    the difference has variance 4σ²/n and the whole average σ²/n. The halves are independent where each iteration's
    population is drawn anew (``fresh``); with one population moved on, only where its blocks decorrelate (a few
    steps where the tilt is weak; where specialists form over hundreds of steps, on MNIST, the error is
    underestimated). A residual below ``tol`` says little where this error is above it. Its source is not only the
    neurons' count: on MNIST at α = 2 it was 0.21 where 80 independent populations of the noise measured at a fixed
    field give about 0.005 (docs/log/validity.md, "Is the averaged field a fixed point?"). Infinite before both halves
    hold an iteration."""
    if counts.min() == 0:
        return np.inf, np.inf
    try:
        (A_A, h_A, S_A, _), (A_B, h_B, S_B, _) = (_update(*(halves[i] / counts[i]), m, Sigma, Y, T, cavity)
                                                  for i in (0, 1))
    except np.linalg.LinAlgError:
        return np.inf, np.inf
    mv = m.T.reshape(-1)
    return (float(np.linalg.norm((A_A - A_B) @ mv - (h_A - h_B)) / (2 * np.linalg.norm(Y))),
            float(np.linalg.norm(S_A - S_B) / (2 * np.linalg.norm(Sigma))))
