"""Gaussian proposals of the neurons: the prior except in a few directions of weight space, where the mean and
covariance are fitted to the neurons weighted by (F1)'s tilt, tempered until the weights are good."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..single_neuron import features
from .equations import _K_FIT, _ess, _normalized, _per_neuron, pareto_k

#: the most fits of the proposal per round (each a tempering step: the tilt's power beta rises until 1)
_FITS = 20


def proposal_basis(X, m, pcs: int = 10) -> np.ndarray:
    """Orthonormal directions of weight space where the proposal departs from the prior.

    They are :math:`X^\\top m_a` (the gradient of the spike z = m^T s at small preactivations, up to a factor) and the
    top ``pcs`` principal directions of X. The tilt of (F1) depends on w only through Xw, so nothing outside X's row
    space moves.

    Parameters
    ----------
    X : ndarray
        The training inputs (P, N0).
    m : ndarray
        The field's mean (P, D).
    pcs : int, optional
        How many principal directions of X to include.

    Returns
    -------
    ndarray
        The directions (N0, k), orthonormal columns, k at most D + ``pcs``.
    """
    _, _, Vt = np.linalg.svd(X, full_matrices=False)
    U, _ = np.linalg.qr(np.concatenate([X.T @ m, Vt[:pcs].T], axis=1))
    return U


@dataclass(frozen=True)
class Proposal:
    """A Gaussian law of the M neurons: the prior N(0, 1/lambda0) outside the directions ``basis`` (N0, k), there
    mean ``mean`` (k,) and covariance chol chol^T; the neurons are the fixed standard normals ``noise`` (M, N0)
    mapped through it (a new proposal moves them continuously)."""

    noise: np.ndarray
    basis: np.ndarray
    mean: np.ndarray
    chol: np.ndarray

    @classmethod
    def prior(cls, noise, basis, lambda0):
        """The prior itself: in the directions ``basis`` mean 0 and covariance 1/lambda0."""
        k = basis.shape[1]
        return cls(noise, basis, np.zeros(k), np.eye(k) / np.sqrt(lambda0))

    def draw(self, lambda0):
        """The neurons' weights (M, N0) and the log of prior over proposal at each."""
        eta = self.noise @ self.basis
        u = self.mean + eta @ self.chol.T
        w = self.noise / np.sqrt(lambda0) + (u - eta / np.sqrt(lambda0)) @ self.basis.T
        white = np.linalg.solve(self.chol, (u - self.mean).T)
        log_ratio = (-0.5 * lambda0 * np.sum(u * u, axis=1) + 0.5 * np.sum(white**2, axis=0)
                     + np.sum(np.log(np.abs(np.diag(self.chol)))) + 0.5 * len(self.mean) * np.log(lambda0))
        return w, log_ratio

    def coordinates(self, w, lambda0):
        """The standard normals (M, N0) that :meth:`draw` maps to the weights ``w``: the inverse of its map."""
        u = w @ self.basis
        eta = np.linalg.solve(self.chol, (u - self.mean).T).T
        return np.sqrt(lambda0) * (w - u @ self.basis.T) + eta @ self.basis.T

    def fitted(self, w, log_tilt, log_ratio, target: float) -> tuple["Proposal", float]:
        """The proposal with mean and covariance (in ``basis``) of the neurons ``w`` weighted by the tilt raised to
        the largest power beta <= 1 at which their weights are good: an effective sample size of at least
        ``target`` and a Pareto k of at most 0.5 (finite variance); and beta."""
        def good(beta):
            log_w = beta * log_tilt + log_ratio
            return _ess(log_w) >= target and pareto_k(log_w) <= _K_FIT

        beta = 1.0
        if not good(beta):
            lo, hi = 0.0, 1.0
            for _ in range(30):
                beta = 0.5 * (lo + hi)
                lo, hi = (beta, hi) if good(beta) else (lo, beta)
            beta = lo
        rho, _ = _normalized(beta * log_tilt + log_ratio)
        u = w @ self.basis
        mean = rho @ u / len(rho)
        cov = ((u - mean) * rho[:, None]).T @ (u - mean) / len(rho)
        return Proposal(self.noise, self.basis, mean, np.linalg.cholesky(0.5 * (cov + cov.T))), beta


def _fitted(law: Proposal, m, Sigma, *, X, activation, lambda0, c, fits: int = _FITS):
    """The Gaussian proposal ``law`` fitted to (F1) at the field (m, Sigma), tempered (:meth:`Proposal.fitted`), at
    most ``fits`` times, until its weights are good (an effective sample size of half the neurons, Pareto k at most
    0.5) or stop improving (or the weighted neurons span too few directions to fit it); with its neurons' weights,
    features (M, P) and log prior over proposal."""
    def neurons_of(law):
        w, log_ratio = law.draw(lambda0)
        return w, features(w, X, activation).T, log_ratio

    M = len(law.noise)
    w, s, log_ratio = neurons_of(law)
    log_tilt = _per_neuron(s, m, Sigma, c)[2]
    k_hat = pareto_k(log_tilt + log_ratio)
    for _ in range(fits):
        if _ess(log_tilt + log_ratio) >= M / 2 and k_hat <= _K_FIT:
            break
        try:
            new, beta = law.fitted(w, log_tilt, log_ratio, M / 2)
        except np.linalg.LinAlgError:  # the weighted neurons span fewer directions than the basis: keep the last
            break
        w_new, s_new, ratio_new = neurons_of(new)
        tilt_new = _per_neuron(s_new, m, Sigma, c)[2]
        k_new = pareto_k(tilt_new + ratio_new)
        if beta == 1.0 and k_new >= k_hat - 0.01:  # the whole tilt, and no better: keep the last proposal
            break
        law, w, s, log_ratio, log_tilt, k_hat = new, w_new, s_new, ratio_new, tilt_new, k_new
    return law, w, s, log_ratio
