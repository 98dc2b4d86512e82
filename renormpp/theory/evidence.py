r"""The evidence of a theory with explicit neurons: :math:`\log Z` of the finite network, as the field-specialist
theory (:mod:`renormpp.theory.field_specialists`) approximates it with k neurons explicit.

The finite network's evidence (v integrated out) is :math:`Z = \int dW\,\mathcal N(W; 0, 1/\lambda_0)\,
\mathcal N(Y; 0, T + \mathbb 1_D\otimes SS^\top/c)`, with :math:`c = \lambda_1 N_1`. In the conjugate field
:math:`\bar f` (:mod:`renormpp.theory.shared_field`) it is a Gaussian integral over :math:`\bar f` of the product of
one factor per neuron, :math:`\zeta(\bar f) = E_w\,e^{-|\bar f^\top s(w)|^2/2c}`.

**The shared field's free energy.** With :math:`\bar f = i m + g`, g Gaussian of covariance Σ, the average of one
neuron's factor is (F1)'s normaliser :math:`Z_1(m, \Sigma) = E_{w\sim\rm prior}[\det(1 + q/c)^{-1/2}
e^{z^\top(c+q)^{-1}z/2}]`, and

.. math::
    \Phi(m, \Sigma) = \tfrac12 m^\top T m - m^\top y + \tfrac12\log\det\Sigma - \tfrac T2{\rm tr}\,\Sigma
        + \tfrac{PD}2(1 - \log 2\pi) + N_1\log Z_1(m, \Sigma)                                            \tag{E1}

(m, y = vec Y output-major): its stationary points are (F2), since :math:`\partial_m N_1\log Z_1 = N_1 E[sy^\top]`
and :math:`\partial_\Sigma N_1\log Z_1 = -\tfrac12 L_W`. With no neuron its value is :math:`\log\mathcal N(Y; 0, T)`,
and at infinite width, where :math:`N_1\log Z_1 \to \tfrac12 m^\top(K/\lambda_1)m - \tfrac12{\rm tr}\,\Sigma
K/\lambda_1`, the NNGP's :math:`\log\mathcal N(Y; 0, T + K/\lambda_1)`: both exact.

**With k explicit neurons** the bulk of :math:`N_b = N_1 - k` enters (FS2) through its moments at the field of all
:math:`(\bar m, \bar\Sigma)`: there :math:`N_b\log Z_1(m, \Sigma) \approx \kappa + \tfrac12 m^\top L_C m -
\tfrac12{\rm tr}\,L_W\Sigma`, with the same value and slopes at that field (:math:`N_b E[s\,y^\top] = L_C\bar m`
holds for (F1)'s law at it). The explicit neurons' factors are Gaussian in :math:`\bar f`, so the field's integral
given :math:`W_s` is (E1)'s saddle with T replaced by :math:`T_s`, and its value is the log-density (FS2) itself:

.. math::
    \log Z_k = \log E_{W_s\sim\rm prior}\,e^{\ell(W_s)} - \tfrac{PD}2\log 2\pi + N_b\log Z_1(\bar m, \bar\Sigma)
        - \tfrac12\bar m^\top L_C\bar m + \tfrac12{\rm tr}\,L_W\bar\Sigma,                                \tag{E2}

:math:`\ell(W_s) = -\tfrac12 y^\top(T_s + L_C)^{-1}y - \tfrac12\log\det(T_s + L_W)`. At k = 0 this is (E1) at
the shared field's fixed point; at k = N1 (no bulk, L = 0) it is :math:`\log E_W\,\mathcal N(Y; 0, T_s)`, the exact
evidence. Both expectations over the prior are computed by adaptive tempered sequential Monte Carlo
(:func:`renormpp.theory.shared_field.moves._tempered`: the explicit neurons together, one bulk neuron alone), the
log of the product of each stage's mean incremental weight; the error of :math:`\log Z_k` is the spread of
``replicates`` independent runs over their square root.

**At a cavity field** (``shared_field.solve(..., cavity=True)``, averaged EP): the field's law is
:math:`\propto G(\bar f)\,t(\bar f)^{N_1}`, with the prior G and one site per neuron
:math:`t = e^{-\bar f^\top\Lambda\bar f/2 + i\bar f^\top b}`, read off the cavity :math:`(m, \Sigma)` of N1 - 1 of
them: :math:`\Lambda = (\Sigma^{-1} - T)/(N_1 - 1)`, :math:`b = (\Sigma^{-1}m - y)/(N_1 - 1)`. EP's evidence is the
integral of the Gaussian approximation with each site corrected by the ratio of the true factor's average to its own,
both over the cavity:

.. math::
    \log Z = \log\int G\,t^{N_1} + N_1\big(\log Z_1(m, \Sigma) - \log E_\backslash[t]\big),                \tag{E3}

:math:`\log\int G t^{N_1} = -\tfrac{PD}2\log 2\pi - \tfrac12\log\det P_g - \tfrac12 h^\top P_g^{-1}h` with
:math:`P_g = T + N_1\Lambda`, :math:`h = y + N_1 b`, and :math:`\log E_\backslash[t] = \tfrac12 m^\top\Lambda m - m^\top
b - \tfrac12\log\det(1 + \Sigma\Lambda) - \tfrac12 r^\top(\Sigma^{-1} + \Lambda)^{-1}r`, :math:`r = \Lambda m - b`.
At N1 = 1 the cavity is the prior and (E3) the exact evidence (tests/test_cavity.py, against quadrature); the
sites' terms vanish there, and are checked only against the exact evidence at finite width (docs/log/validity.md,
"The cavity field in the package").

The free energy of the state with k explicit neurons is :math:`F(k) = -\log Z_k` (:attr:`Evidence.free_energy`).
What it does not hold: the explicit neurons are not restricted to specialists, nor the bulk to the rest, so F(k) has no
combinatorial factor :math:`\log\binom{N_1}{k}`; each k approximates the same evidence, and the k whose F is
lowest is the one whose approximation puts the most weight on the data (a ranking, not a count of specialists).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .._checks import positive_int
from ..network import x64_context
from .field_specialists import FieldSpecialistFit, _explicit_part, _inverses
from .shared_field.fit import SharedFieldFit
from .shared_field.moves import Tilt, _tempered, _tilt_target
from .shared_field.proposals import Proposal, proposal_basis

__all__ = ["Evidence", "log_evidence"]


@dataclass(frozen=True)
class Evidence:
    r"""The evidence :math:`\log Z_k` (E2) of a field-specialist fit, or (E1) or (E3) of a shared-field fit
    (k = 0), with its Monte Carlo error.

    Attributes
    ----------
    log_z : float
        The mean of :math:`\log Z_k` over the replicates.
    error : float
        Their standard deviation over the square root of their number (0 where nothing is sampled).
    k, N1 : int
        Explicit neurons and the width.
    replicates : numpy.ndarray
        :math:`\log Z_k` of each independent run.
    explicit, bulk : numpy.ndarray
        Per run, :math:`\log E\,e^{\ell - \ell_0}` of the explicit neurons and :math:`N_b\log Z_1` of the bulk.
    gaussian : float
        The rest of (E2): :math:`\ell_0 - \tfrac{PD}2\log 2\pi - \tfrac12\bar m^\top L_C\bar m + \tfrac12{\rm
        tr}\,L_W\bar\Sigma`, with :math:`\ell_0` the value of ℓ with no specialist.
    """

    log_z: float
    error: float
    k: int
    N1: int
    replicates: np.ndarray
    explicit: np.ndarray
    bulk: np.ndarray
    gaussian: float

    @property
    def free_energy(self) -> float:
        """F(k) = -log Z_k."""
        return -self.log_z

    def __repr__(self) -> str:
        return f"Evidence(k={self.k}, N1={self.N1}, log_z={self.log_z:.4f} ± {self.error:.2g})"


@lru_cache(maxsize=16)
def _explicit_ell(activation, lambda0: float, k: int):
    r"""The explicit neurons' log tilt in the prior's unit coordinates, ``ell(xi, X, c, By, B_C, B_W)``:
    :math:`\ell(W_s) - \ell_0` at :math:`W_s = \xi/\sqrt{\lambda_0}` (xi (k N0,)), one function per key so that its
    compiled programs are reused."""
    part = _explicit_part(activation)

    def ell(xi, X, c, By, B_C, B_W):
        return part(xi.reshape(k, X.shape[1]) / np.sqrt(lambda0), X, c, By, B_C, B_W)

    return ell


def log_evidence(fit: FieldSpecialistFit | SharedFieldFit, *, neurons: int = 4000, replicates: int = 4,
                 seed: int = 0) -> Evidence:
    r"""The evidence :math:`\log Z_k` of a theory's fit, by tempered SMC, with its error: (E2) of a field-specialist
    fit, (E1) of a shared-field fit, (E3) of a cavity fit (``shared_field.solve(..., cavity=True)``).

    Parameters
    ----------
    fit : FieldSpecialistFit or SharedFieldFit
        A solve of :func:`renormpp.theory.field_specialists.solve` (any k, 0 to N1) or of
        :func:`renormpp.theory.shared_field.solve` (k = 0; its field a fixed point, as a converged solve's).
    neurons : int, default 4000
        Particles of each tempered SMC run (over the k explicit neurons together, and over one bulk neuron).
    replicates : int, default 4
        Independent runs; their spread gives the error (at least 2).
    seed : int, default 0
        Random seed.

    Returns
    -------
    Evidence

    Raises
    ------
    TypeError
        Where ``fit`` is neither a field-specialist nor a shared-field fit.
    ValueError
        Where ``neurons`` or ``replicates`` is not a positive integer, or ``replicates`` is 1.
    """
    if not isinstance(fit, (FieldSpecialistFit, SharedFieldFit)):
        raise TypeError(f"log_evidence takes a field-specialist fit (rp.theory.field_specialists.solve) or a "
                        f"shared-field fit (rp.theory.shared_field.solve); got {type(fit).__name__}")
    positive_int("neurons", neurons)
    if positive_int("replicates", replicates) < 2:
        raise ValueError("replicates must be at least 2: their spread is the error of log Z")
    if isinstance(fit, SharedFieldFit):
        return _field_evidence(fit, neurons, replicates, seed)
    pb = fit._pb
    P, D = pb.Y.shape
    Nb, c = pb.N1 - pb.k, pb.lambda1 * pb.N1
    y = pb.Y.T.reshape(-1)
    B_W, B_C = _inverses(fit.L_W, fit.L_C, pb.T)
    By = B_C @ y
    ell0 = -0.5 * y @ By + 0.5 * np.linalg.slogdet(B_W)[1]
    gaussian = ell0 - 0.5 * P * D * np.log(2 * np.pi)
    if Nb:
        m, Sigma = fit.bulk.m, fit.bulk.Sigma
        mv = m.T.reshape(-1)
        gaussian += -0.5 * mv @ fit.L_C @ mv + 0.5 * np.sum(fit.L_W * Sigma)
        one = _tilt_target(pb.X, pb.activation, pb.lambda0, c)
    rng = np.random.default_rng([seed, 11])
    explicit, bulk = np.zeros(replicates), np.zeros(replicates)
    N0 = pb.X.shape[1]
    if pb.k:
        import jax.numpy as jnp

        with x64_context():
            args = tuple(jnp.asarray(a, jnp.float64) for a in (pb.X, np.sqrt(c), By, B_C, B_W))
        target = Tilt(_explicit_ell(pb.activation, float(pb.lambda0), pb.k), args)
    for r in range(replicates):
        if pb.k:
            explicit[r] = _tempered(rng.standard_normal((neurons, pb.k * N0)), target, rng)[-1]
        if Nb:
            prior = Proposal.prior(np.zeros((1, N0)), proposal_basis(pb.X, m), pb.lambda0)
            bulk[r] = Nb * _tempered(rng.standard_normal((neurons, N0)), one.at(prior, m, Sigma), rng)[-1]
    runs = gaussian + explicit + bulk
    sampled = bool(pb.k or Nb)
    return Evidence(log_z=float(runs.mean()), error=float(runs.std(ddof=1) / np.sqrt(replicates)) if sampled else 0.0,
                    k=pb.k, N1=pb.N1, replicates=runs, explicit=explicit, bulk=bulk, gaussian=float(gaussian))


def _field_evidence(fit: SharedFieldFit, neurons: int, replicates: int, seed: int) -> Evidence:
    """(E1) at a shared field, or (E3) at a cavity field, with N1 log Z1 by tempered SMC over one neuron."""
    P, D = fit.Y.shape
    PD, T, N1, eye = P * D, fit.T, fit.N1, np.eye(P * D)
    y, mv, S = fit.Y.T.reshape(-1), fit.m.T.reshape(-1), fit.Sigma
    if not fit.cavity:  # (E1) without its N1 log Z1
        gaussian = (0.5 * T * mv @ mv - mv @ y + 0.5 * np.linalg.slogdet(S)[1] - 0.5 * T * np.trace(S)
                    + 0.5 * PD * (1 - np.log(2 * np.pi)))
    else:  # (E3) without its N1 log Z1: the site from the cavity (C2) at its fixed point; none matters at N1 = 1
        Pc = np.linalg.inv(S)
        Pc = 0.5 * (Pc + Pc.T)
        Lam, b = ((Pc - T * eye) / (N1 - 1), (Pc @ mv - y) / (N1 - 1)) if N1 > 1 else (0 * eye, 0 * y)
        Pg, h = T * eye + N1 * Lam, y + N1 * b
        r = Lam @ mv - b
        log_site = (0.5 * mv @ Lam @ mv - mv @ b - 0.5 * np.linalg.slogdet(eye + S @ Lam)[1]
                    - 0.5 * r @ np.linalg.solve(Pc + Lam, r))
        gaussian = (-0.5 * PD * np.log(2 * np.pi) - 0.5 * np.linalg.slogdet(Pg)[1] - 0.5 * h @ np.linalg.solve(Pg, h)
                    - N1 * log_site)
    N0 = fit.X.shape[1]
    one = _tilt_target(fit.X, fit.activation, fit.lambda0, fit.lambda1 * N1)
    prior = Proposal.prior(np.zeros((1, N0)), proposal_basis(fit.X, fit.m), fit.lambda0)
    rng = np.random.default_rng([seed, 11])
    bulk = np.array([N1 * _tempered(rng.standard_normal((neurons, N0)), one.at(prior, fit.m, S), rng)[-1]
                     for _ in range(replicates)])
    runs = gaussian + bulk
    return Evidence(log_z=float(runs.mean()), error=float(runs.std(ddof=1) / np.sqrt(replicates)), k=0, N1=N1,
                    replicates=runs, explicit=np.zeros(replicates), bulk=bulk, gaussian=float(gaussian))
