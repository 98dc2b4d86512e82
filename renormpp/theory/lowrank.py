r"""Gaussian-process predictions for a :math:`PD\times PD` system that is block diagonal in the kernel eigenbasis plus a
low-rank term, without forming it (Woodbury's identity and the matrix determinant lemma).

In the eigenbasis :math:`V` of the kernel the train covariance of the D outputs is

.. math::
    A = B + U C U^\top, \qquad B = \bigoplus_\mu \big(T\,\mathbb 1_D + k'_\mu Q_b\big), \qquad
    U_{(a\mu),(cj)} = \delta_{ac} W_{\mu j},                                                       \tag{W1}

with per-mode scalars :math:`k'` (P,), a symmetric :math:`Q_b` (D, D), :math:`W` (P, r) and :math:`C` (Dr, Dr). Then

.. math::
    A^{-1} = B^{-1} - B^{-1} U (\mathbb 1 + C G)^{-1} C U^\top B^{-1}, \quad G = U^\top B^{-1} U, \qquad
    \log\det A = \log\det B + \log\det(\mathbb 1 + C G),                                            \tag{W2}

so the action costs :math:`O(P D^2 r^2 + D^3 r^3)` and the predictions :math:`O(P P_0 D (D + r))`. At a test point the
cross-covariance with the train outputs is :math:`K_x = Q_b \otimes \kappa' + U E` (:math:`\kappa'` in the eigenbasis,
E (Dr, D)) and the prior covariance :math:`K_{00}` (D, D):

.. math::  \Gamma = K_x^\top A^{-1} y, \qquad \Sigma = K_{00} - K_x^\top A^{-1} K_x.                       \tag{W3}

The odd theory (:mod:`.action`) is the case r = 0; the 1/N1-corrected kernel (:mod:`.corrected`) and the non-odd
theory's mean kernel (:mod:`.nonodd`) are low-rank terms.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np


class LowRankSystem(NamedTuple):
    """The train system (W1): per-mode ``kp`` (P,), ``Qb`` (D, D), ``W`` (P, r), ``C`` (D r, D r) with index (c, j) ->
    c r + j, the temperature ``T``, and the labels in the kernel eigenbasis ``Yt`` (P, D)."""

    kp: np.ndarray
    Qb: np.ndarray
    W: np.ndarray
    C: np.ndarray
    T: float
    Yt: np.ndarray


class _Rotated(NamedTuple):
    """The system in the eigenbasis ``U`` of Qb (eigenvalues ``q``): ``b`` (P, D) the diagonal of B^{-1}, ``C`` rotated,
    ``G`` (D r, D r), ``F`` = (1 + C G)^{-1} C, and ``z`` = A^{-1} y (P, D)."""

    q: np.ndarray
    U: np.ndarray
    b: np.ndarray
    C: np.ndarray
    G: np.ndarray
    F: np.ndarray
    z: np.ndarray
    logdet: float


def _rotate_C(C, U, r):
    """C in the rotated output basis: (U^T x 1_r) C (U x 1_r)."""
    R = np.kron(U, np.eye(r))
    return R.T @ C @ R


def _solve(s: LowRankSystem) -> _Rotated:
    q, U = np.linalg.eigh(0.5 * (s.Qb + s.Qb.T))
    P, D = s.Yt.shape
    r = s.W.shape[1]
    b = 1.0 / (s.T + s.kp[:, None] * q[None, :])  # (P, D)
    yh = s.Yt @ U
    C = _rotate_C(s.C, U, r) if r else np.zeros((0, 0))
    # G[(c, j), (c', j')] = delta_cc' sum_mu b_mu,c W_mu,j W_mu,j'
    G = np.zeros((D * r, D * r))
    for c in range(D):
        G[c * r:(c + 1) * r, c * r:(c + 1) * r] = (s.W * b[:, c:c + 1]).T @ s.W
    I_CG = np.eye(D * r) + C @ G
    F = np.linalg.solve(I_CG, C) if r else C
    h = (s.W.T @ (b * yh)).T.reshape(-1)  # h[(c, j)] = sum_mu W_mu,j b_mu,c yh_mu,c
    corr = (F @ h).reshape(D, r)  # (c, j)
    z = b * (yh - s.W @ corr.T)  # A^{-1} y in the rotated basis: B^{-1} yh - B^{-1} U F h
    sign, logdet_cg = np.linalg.slogdet(I_CG) if r else (1.0, 0.0)
    positive = sign > 0 and bool(np.all(b > 0))
    logdet = float(-np.sum(np.log(np.abs(b))) + logdet_cg) if positive else np.inf
    return _Rotated(q, U, b, C, G, F, z, logdet)


def action_terms(s: LowRankSystem) -> tuple[float, float]:
    """:math:`y^\\top A^{-1} y` and :math:`\\log\\det A` by (W2); log det is inf where A is not positive definite."""
    rot = _solve(s)
    return float(np.sum((s.Yt @ rot.U) * rot.z)), rot.logdet


def moments(s: LowRankSystem, kappa_p, E, K00):
    """Predictive mean (P0, D) and covariance (P0, D, D) by (W3) for test points with ``kappa_p`` (P, P0), ``E``
    (P0, D r, D) and ``K00`` (P0, D, D), in the original output basis."""
    rot = _solve(s)
    q, U, b, z = rot.q, rot.U, rot.b, rot.z
    P, D = b.shape
    r = s.W.shape[1]
    P0 = kappa_p.shape[1]
    Er = np.kron(U, np.eye(r)).T @ E @ U if r else np.zeros((P0, 0, D))  # rotated E (batched matmuls)
    # mean_e = q_e sum_mu kappa'_mu z_mu,e + sum_(c,j) E[(c,j), e] u[(c,j)],  u[(c,j)] = sum_mu W_mu,j z_mu,c
    mean = (kappa_p.T @ z) * q[None, :]
    if r:
        u = (s.W.T @ z).T.reshape(-1)
        mean = mean + np.einsum("nke,k->ne", Er, u)
    # K_x^T B^{-1} K_x: the block part, diagonal in the rotated basis, the cross terms and E^T G E
    cov = -((kappa_p**2).T @ (b * q**2))[:, :, None] * np.eye(D)[None]
    if r:
        # Wq[(c, j), n, e] = q_c delta_ce sum_mu W_mu,j b_mu,c kappa'_mu: the block part of U^T B^{-1} K_x
        WbK = np.stack([(s.W * b[:, c:c + 1]).T @ kappa_p for c in range(D)], axis=1).T  # (P0, D, r)
        Wq = np.einsum("ncj,c,ce->ncje", WbK, q, np.eye(D)).reshape(P0, D * r, D)
        GE = rot.G @ Er
        L = Wq + GE  # (U^T B^{-1} K_x)[(c, j), e]
        cross = np.swapaxes(Wq, 1, 2) @ Er
        cov = cov - cross - np.swapaxes(cross, 1, 2) - np.swapaxes(Er, 1, 2) @ GE
        cov = cov + np.swapaxes(L, 1, 2) @ (rot.F @ L)
    mean = mean @ U.T
    cov = U @ cov @ U.T + K00
    return mean, 0.5 * (cov + np.swapaxes(cov, 1, 2))
