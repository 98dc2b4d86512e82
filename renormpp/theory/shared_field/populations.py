"""Populations of neurons at (F1): the neurons moved to (F1) at a field (:class:`Population`), and a population
drawn anew at a field (:func:`_renewed`: the proposal fitted there, then Langevin steps or tempered SMC)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..single_neuron import features
from .equations import _per_neuron
from .langevin import _moved
from .proposals import Proposal, _fitted
from .tempered import _STAGE_ESS, _STAGE_MOVES, _tempered
from .weights import _resampled


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
        xi, rates, levels, h, _ = _tempered(rng.standard_normal(gauss.noise.shape),
                                            target.at(gauss, m, Sigma), rng, h=h, moves=_STAGE_MOVES,
                                            ess=_STAGE_ESS)
        return gauss, xi, rates, levels, h
    start = gauss.noise[_resampled(_per_neuron(s, m, Sigma, c)[2] + log_ratio, rng)]
    xi, rates, levels, h = _moved(start, target.at(gauss, m, Sigma), moves, rng, h=h)
    return gauss, xi, rates, levels, h
