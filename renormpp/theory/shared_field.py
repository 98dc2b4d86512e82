r"""The shared-field theory: one Gaussian field shared by all neurons, each neuron's law exact (issue 46, item 2).

Where kernel-shape renormalization fails (MNIST at α ≥ 1, docs/validity.md) the finite network's hidden kernel adapts
in directions the D x D order parameter cannot reach. This theory keeps each neuron's law exact and makes only the
field that couples the neurons Gaussian.

**The field.** With the readout integrated out, :math:`p(Y\mid W) = \int d\bar f\, \exp\big(i\,{\rm tr}\,\bar f^\top Y
- \tfrac T2\|\bar f\|^2\big) \prod_i \exp\big(-\|\bar f^\top s_i\|^2/(2c)\big)` with :math:`c = \lambda_1 N_1`,
:math:`s_i = \sigma(X w_i/\sqrt{N_0})` (P) and :math:`\bar f` (P x D) the field conjugate to the predictions, one
field for all neurons. Take it Gaussian, :math:`\bar f = i\,m + g` with g of covariance :math:`\Sigma`
(:math:`PD\times PD`, output-major). Given w, :math:`g^\top s(w)` is Gaussian with covariance
:math:`q(w)_{ab} = s^\top\Sigma_{ab}\,s` (D x D: the neuron's own bulk) and :math:`z(w) = m^\top s(w)` is its spike,
so one neuron's law is the cavity law (S3) of :mod:`.single_neuron` with these:

.. math::
    p(w) \propto \mathcal N(w; 0, 1/\lambda_0)\,\det(1 + q/c)^{-1/2}\exp\big(\tfrac12 z^\top (c + q)^{-1} z\big). \tag{F1}

**Stationarity** of the field, with :math:`y = (c+q)^{-1}z` and :math:`E` the average over (F1):

.. math::
    \Sigma^{-1} = T + N_1 E\big[\big((c+q)^{-1} + y y^\top\big)\otimes s s^\top\big],\qquad
    T\,m + N_1 E[s\,y^\top] = Y.                                                                      \tag{F2}

**Predictions** at a test input :math:`x_*` (:math:`s_* = s(w; x_*)`): the mean :math:`\Gamma_a = N_1 E[s_*\,y_a]`
and, from :math:`-\partial_j^2\log Z` with a source j at :math:`x_*` (the response of m to it included),

.. math::
    \Sigma_{*ab} = N_1 E[(c+q)^{-1}_{ab}s_*^2] + N_1 E[s_*^2 y_a y_b] - N_1 E[s_* y_a]E[s_* y_b]
        - N_1^2\, n_a^\top (T + N_1 L)^{-1} n_b,                                                        \tag{F3}

:math:`L = E[((c+q)^{-1} + yy^\top)\otimes ss^\top] - E[y\otimes s]E[y\otimes s]^\top`,
:math:`(n_a)_b = E[((c+q)^{-1}_{ab} + y_a y_b)\,s_*\,s] - E[s_* y_a]E[y_b\,s]`.
For a linear activation (Gaussian s, q at its mean) (F1)-(F3) reproduce the exact theory, which is exact for linear
networks (checked in closed form by ``benchmarks/shared_field_theory.py``: 0.05-1% at MNIST P = 200).

**How it is computed.** The averages over (F1) reweight a fixed sample of M neurons (importance sampling, the
weights :math:`\rho \propto` the tilt of (F1) times prior over proposal), with the exact NNGP kernel as control
variate (:math:`E[\rho\,W\,ss^\top] \approx \overline{\rho W ss^\top} - \overline{\rho W}\,(\overline{\rho_0 ss^\top}
- K)`, :math:`\rho_0` = prior over proposal), so that at infinite width (ρ = ρ0) the theory is the NNGP posterior
exactly, for any M. The neurons are drawn from a Gaussian **proposal**: the prior, except in a few directions of
weight space (:func:`proposal_basis`: the spike's gradients :math:`X^\top m_a` and the top principal directions of X),
where its mean and covariance are fitted to the weighted neurons (tempered: the tilt raised to the largest power
β ≤ 1 at which the weights are good, then again, until β = 1). The prior alone is no proposal where the tilt is
strong: a Gaussian tilt :math:`e^{r x^2/2}` of a unit Gaussian gives weights of infinite variance from r = 1/2 on,
and at the linear teacher (N0/P = 1, α = 0.5) r ≈ 0.57 along the teacher, where 100 000 prior neurons have an
effective sample size of 1; the fitted proposal has 8 000 of 10 000 there. The weights are judged by their effective
sample size and their **Pareto k** (:func:`pareto_k`, the shape of their upper tail: above 0.7 their averages do not
hold, whatever the effective sample size says; on the small network of the slow test, prior reweighting at α = 2 had
k = 0.94 and an ε_g 10% above the fitted proposal's, with an effective sample size of 20%).

**Exact neurons** (``proposal="mcmc"``, the default). Where no Gaussian proposal reaches (F1) (Pareto k above 0.7:
MNIST at α ≥ 2.5), the neurons are moved to (F1) itself: the fitted proposal's neurons drawn by their weights, then
``moves`` Metropolis-adjusted Langevin steps of all of them at once in the proposal's coordinates (:func:`_moved`, the
gradient of (F1)'s log tilt by JAX in float64: :func:`_tilt_target`), each step leaving (F1) invariant whatever the
proposal. (F2) is then solved by **stochastic approximation** (:func:`_averaged`): the population persists, moved
``steps`` more steps at each iteration's field, and the moments of (F2) it gives are averaged over the iterations
(weights falling as 1/k in the second half) before the field is computed from them; predictions average (F3)'s
terms over ``populations`` populations. Both (F2) and (F3) invert averages over (F1), and the inverse of a noisy
average is biased: on the linear teacher at α = 2 one population of 10 000 neurons put ε_g 3% low. An earlier
version reweighted a population to the field as it moved and moved it again once its effective sample size fell
below half; from α = 2.5 on MNIST and α = 4 on the linear teacher the field then outran the neurons at every step and
did not converge, and where it converged it kept that bias.

**Fresh populations** (``fresh=True``). The persistent population's few specialists decorrelate far more slowly than
the field adapts, and on MNIST at P = 200 the field converged to the solve's own population, not to (F1)'s law (moved
on at the fixed field, the same neurons fit the training labels 10-100 times worse; see
docs/validity.md, "Is the solve's field a fixed point of (F1)'s law?"). With ``fresh=True`` each iteration draws a
new population (:func:`_renewed`): new standard normals under the proposal fitted at the field, drawn by their
weights, moved ``moves`` Langevin steps; the averaged moments are then averages over independent populations, and the
residual tests the field against (F1)'s law, at ``moves`` / ``steps`` (10) times the cost of an iteration.
Measured on MNIST (0, 1) at P = 200 (docs/validity.md, "Fresh populations"): 30 steps from the fitted proposal
do not reach (F1)'s specialists (moved on, a population gains them for 120 steps and more), so at α = 2 the fresh
solve converged to the law of too-young populations and its prediction depended on the random stream (ε_g 0.038,
0.081; sampled 0.029); at α = 10 it did not converge in 160 iterations. A solve of (F1)-(F2) on MNIST needs
populations both independent and at (F1).

**Tempered populations** (``fresh=True, tempered=True``). Each fresh population is taken from the fitted proposal to
(F1) by adaptive tempered sequential Monte Carlo (:func:`_tempered`): where the tilt is strong (the exact theory's
field at α = 2) it reaches (F1)'s specialists in 70 steps, which Langevin steps alone do not reach in 480. But at a
field where the proposal's weights look good (an effective sample size of 80%) it is one stage of 10 steps and its
populations lack a third to a half of (F1)'s specialists, as the plain fresh ones do; and populations of 4 000
neurons at (F1) leave a residual of m of 0.23-0.32 there, far above the tolerance at which the solve stopped and
five times their own Monte Carlo error (0.05 for one population: the field was no fixed point). That solve's
ε_g 0.18 and 0.22 (two streams; sampled 0.029): docs/validity.md, "Tempered populations".

**Verification** (:meth:`SharedFieldFit.verify`). A solve's residuals are measured against moments averaged over
its own iterations, each population drawn at the field of its iteration; they can be small where the field is no
fixed point of (F1)'s law (populations short of (F1), a field that wanders). ``verify`` measures the field against new,
independent populations moved to (F1) at it, with the jackknife error over them: on the small network of the tests
it tells the solve's field (0.005 +- 0.002) from the same field 5% off (0.06); on MNIST at α = 2 neither the tempered
nor the default solve's field is a fixed point (docs/validity.md, "Is the averaged field a fixed point?").

With a Gaussian proposal (``"fitted"``) the solve runs in **rounds**: the proposal fitted at the current field, then
(F2) iterated on these fixed neurons (Anderson mixing of the damped steps, :class:`_Anderson`: the damped iteration
alone creeps or diverges at α ≥ 1) until the residuals fall below ``tol``; where the settled field's weights have k >
0.7, or the neurons degenerate on the way, a new round fits the proposal at the new field (at most four). It starts
from the exact theory's field (or from a neighbouring width's fit: continuation in α, with its neurons and proposal);
the residuals of every iteration are kept. It does not converge where the weights stay unreliable (k > 0.7),
degenerate (effective sample size below ``min_ess``) or the iteration does not settle; :attr:`SharedFieldFit.reason`
says which.

Cost: :math:`O(M P^2 D^2)` per iteration and :math:`O((PD)^3)` for the inverse of (F2); at D = 2 and M = 10 000
about 3.5 s per iteration at P = 1000 on 2 cores (benchmarks/README.md, "shared_field_theory.py"). The default
M = 40 000 (four times that): with 10 000 the Monte Carlo error of the averages over (F1) biased ε_g by up to 10% on
the linear teacher at α = 1 (docs/validity.md, "The shared field on the map"); between two sets of 40 000 and 80 000
neurons ε_g still differs by about 1% at P = 200, the theory's own error.

Measured with its neurons moved to (F1) (docs/validity.md, "Exact neurons" and "Exact neurons with averaged
moments"; 40 000 neurons): with the earlier rounds of reweighted populations on MNIST (0, 1), P = 200, within 0.1%,
0.6% and 2.3% of the sampled network at α = 0.5, 1, 2 (the exact theory 3%, 8%, 36% off), no convergence from
α = 2.5 on; with averaged moments on the linear teacher at N0/P = 1, where the exact theory holds, +0.8% at α = 4
(the exact theory +1.2%, the rounds did not converge) and on MNIST at α = 2 residuals of 1.4% and 1.0% after 80
iterations, just above the tolerance. Cost: about 15 minutes a width at P = 200 on 2 cores with 40 000 neurons; the
fitted proposal is much faster.

Measured with the fitted Gaussian proposal (docs/validity.md, "A third theory" and "The shared field on the map"): on
MNIST (0, 1), P = 200, within 1% of the sampled network at α = 0.5 and 1 (the exact theory 3% and 8% off), 18% off at α = 2 (the
exact theory 36%); no convergence from α = 2.5 on, where no Gaussian proposal reaches the law (Pareto k 0.75 and
more). On the linear teacher with few inputs (N0/P = 0.1), where the exact theory is 6-18% off at α = 0.5-2, within
0.5% at α ≤ 1 and 4.7% at α = 2, its readout overlaps too; where the exact theory holds (N0/P ≥ 1) as close at α ≤ 1
(0.1-1.3%) and no convergence at α ≥ 2.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from .. import kernels
from .._checks import data_pair, positive, positive_int
from ..network import get_activation
from ..progress import bar as progress_bar
from .fit import solve as solve_exact
from .prediction import FitShape, Prediction
from .single_neuron import features


@dataclass(eq=False)
class SharedFieldFit(FitShape):
    """A solve of (F1)-(F2): the field's mean ``m`` (P, D) and covariance ``Sigma`` (PD x PD, output-major), the
    residuals of every iteration (``residuals``: rows (|T m + N1 E[s y^T] - Y| / |Y|, |dSigma| / |Sigma|)), the
    Monte Carlo error of the last in the same norms (``mc_error``, neurons moved to (F1)), the effective sample size
    ``ess`` of the reweighted prior neurons, and whether it converged (``reason`` says why not). ``predict`` and
    ``generalization_error`` as every fit's (F3); ``verify``: the field tested on new populations moved to (F1)."""

    X: np.ndarray
    Y: np.ndarray
    N1: float
    T: float
    lambda1: float
    lambda0: float
    activation: str
    m: np.ndarray
    Sigma: np.ndarray
    residuals: np.ndarray
    ess: float
    pareto_k: float
    converged: bool
    reason: str
    proposal: "Proposal | Population" = field(repr=False)  # the law the M neurons are drawn from, and their noise
    seed: int = 0
    steps: int = 3  # Langevin steps of a population between two of the populations a prediction averages over
    populations: int = 1
    fresh: bool = False  # each population drawn anew, ``moves`` steps from the proposal (not moved on ``steps``)
    moves: int = 30
    tempered: bool = False  # each fresh population taken to (F1) by tempered sequential Monte Carlo
    mc_error: tuple = (0.0, 0.0)  # the field's Monte Carlo error in the residuals' norms (_mc_error; "mcmc" only)

    @property
    def weights(self) -> np.ndarray:
        """The M neurons' weights (M, N0)."""
        return self.proposal.draw(self.lambda0)[0]

    @property
    def D(self) -> int:
        return self.Y.shape[1]

    @property
    def n_iter(self) -> int:
        return len(self.residuals)

    def __repr__(self) -> str:
        state = "converged" if self.converged else f"did not converge: {self.reason}"
        return (f"SharedFieldFit(N1={self.N1:g}, alpha={self.alpha:.3g}, D={self.D}, {state}, "
                f"{self.n_iter} iterations, ESS {self.ess:.0f} of {len(self.proposal.noise)}, Pareto k "
                f"{self.pareto_k:.2f})")

    @property
    def readout_overlap(self) -> np.ndarray:
        r""":math:`\langle v v^\top\rangle/N_1` (D x D; v of prior N(0, 1/λ1) per entry, the paper's convention), the
        counterpart of the exact theory's :math:`Q^*/\lambda_1`. Given its neuron's weights and the field, a neuron's
        readout :math:`v/\sqrt{N_1}` is Gaussian of precision :math:`c + q` and mean :math:`\mp y` (the integral that
        gives (F1)), so the overlap is :math:`N_1 E[(c+q)^{-1} + y y^\top]` over (F1); 1/λ1 at infinite width."""
        _, _, _, C, y, rho = self._law()
        return self.N1 * np.einsum("m,mab->ab", rho, C + np.einsum("ma,mb->mab", y, y)) / len(rho)

    def _law(self):
        """The M neurons' weights and features, their prior-over-proposal weights rho0 for the control variate (None
        where unreliable: :func:`_control_weights`), the per-neuron D x D terms C and y at this fit's field and their
        (F1) weights rho."""
        law, c = self.proposal, self.lambda1 * self.N1
        if isinstance(law, Population) and law.at(self.m, self.Sigma, c):  # at (F1) of this field: weights 1
            w = law.weights(self.lambda0)  # (its log-ratio is minus this tilt: computed once, not twice)
            s = features(w, self.X, self.activation).T
            C, y, log_tilt = _per_neuron(s, self.m, self.Sigma, c)
            return w, s, _control_weights(-log_tilt), C, y, np.ones(len(w))
        w, log_ratio = law.draw(self.lambda0)
        s = features(w, self.X, self.activation).T
        C, y, log_tilt = _per_neuron(s, self.m, self.Sigma, c)
        return w, s, _control_weights(log_ratio), C, y, _normalized(log_tilt + log_ratio)[0]

    def predict(self, X0) -> Prediction:
        """Mean (P0, D) and covariance (P0, D, D) of the outputs at the rows of ``X0``, (F3). With neurons moved to
        (F1) (``proposal="mcmc"``) its averages are taken over ``populations`` populations, each ``steps`` Langevin
        steps on from the last at this field: (F3) is not linear in them (the inverse of T + N1 L), and one
        population of 10 000 neurons gave an ε_g 2.5% below that of 16 averaged (the linear teacher at α = 2). A
        ``fresh`` fit's populations are each drawn anew (the proposal's neurons moved ``moves`` steps, or tempered),
        independent of the solve's."""
        if not self.converged:
            raise RuntimeError(f"this fit did not converge ({self.reason}); its predictions would mean nothing. "
                               "Continue from a converged neighbour (init=) or raise neurons")
        X0 = self._test_inputs(X0)
        law = self.proposal
        if not isinstance(law, Population) or (self.populations == 1 and not self.fresh):
            return self._combined(self._averages(X0, *self._law()), X0)
        target = _tilt_target(self.X, self.activation, self.lambda0, law.c)
        rng, gauss, xi, h, total = np.random.default_rng([self.seed, 2]), law.proposal, law.moved, law.step, None
        for k in range(self.populations):
            if self.fresh:  # each population independent of the solve's and of the others
                gauss, xi, _, _, h = _renewed(gauss, self.m, self.Sigma, target, self.moves, rng, h, X=self.X,
                                              activation=self.activation, lambda0=self.lambda0, c=law.c,
                                              tempered=self.tempered)
            elif k:
                xi, _, _, h = _moved(xi, lambda z: target(z, gauss, self.m, self.Sigma), self.steps, rng, h=h)
            fit = replace(self, proposal=replace(law, proposal=gauss, moved=xi, m=self.m, Sigma=self.Sigma))
            avg = fit._averages(X0, *fit._law())
            total = avg if total is None else {key: total[key] + (avg[key] - total[key]) / (k + 1) for key in avg}
        return self._combined(total, X0)

    def verify(self, populations: int = 4, moves: int = 240, seed: int | None = None, tol: float | None = None,
               progress: bool = False) -> "Verification":
        r"""Whether this fit's field is a fixed point of (F1)'s law, tested on new neurons: ``populations``
        populations, each drawn anew from the proposal fitted at the field and moved ``moves`` Langevin steps at it
        (:func:`_renewed`; independent of the solve's and of each other, ``seed`` their stream), give (F2)'s moments,
        and the residuals of the field against their average are reported with their Monte Carlo error (the
        jackknife over the populations: :func:`_jackknife`). The solve's own residuals are measured against moments
        averaged over its iterations, each population at the field of its iteration: where the field wanders, or its
        populations are short of (F1) (too few steps), they can be small while the field is no fixed point
        (docs/validity.md, "Is the averaged field a fixed point?"). Whether ``moves`` steps reach (F1) is
        measured by verifying again with more: where the residuals move by more than their errors, or the
        populations' mean log tilt (``log_tilt``) still rises, they had not (on MNIST at alpha = 2, (F1)'s
        specialists form over 200 steps and more: 6 minutes with the defaults at P = 200, 4 000 neurons, on 2 cores;
        ``progress``: a bar over the populations). A fit of any proposal and state, converged or not, can be
        verified."""
        populations, moves = positive_int("populations", populations), positive_int("moves", moves)
        if populations < 2:
            raise ValueError(f"populations must be 2 or more (their spread is the Monte Carlo error); got {populations}")
        tol = 1e-2 if tol is None else positive("tol", tol)
        law, c = self.proposal, self.lambda1 * self.N1
        gauss = law.proposal if isinstance(law, Population) else law
        target = _tilt_target(self.X, self.activation, self.lambda0, c)
        K = kernels.nngp(self.X, lambda0=self.lambda0, activation=self.activation)
        rng = np.random.default_rng([self.seed if seed is None else seed, 3])
        moments, tilts, h = [], [], 0.5
        bar = progress_bar(total=populations, desc="verify", unit="population", disable=not progress)
        for _ in range(populations):
            g, xi, _, _, h = _renewed(gauss, self.m, self.Sigma, target, moves, rng, h, X=self.X,
                                       activation=self.activation, lambda0=self.lambda0, c=c)
            *LWC, log_tilt = _population_moments(replace(g, noise=xi).draw(self.lambda0)[0], self.X, self.activation,
                                                 self.m, self.Sigma, c, K, self.N1, self.T)
            moments.append(LWC)
            tilts.append(float(log_tilt.mean()))
            bar.update()
        bar.close()
        L_W, L_C = (np.stack([mo[i] for mo in moments]) for i in (0, 1))
        m_vec, eye = self.m.T.reshape(-1), np.eye(self.Y.size)
        errors = (_jackknife(lambda keep: L_C[keep].mean(axis=0) @ m_vec, populations) / np.linalg.norm(self.Y),
                  _jackknife(lambda keep: np.linalg.inv(self.T * eye + L_W[keep].mean(axis=0)), populations)
                  / np.linalg.norm(self.Sigma))
        res = _field(L_W.mean(axis=0), L_C.mean(axis=0), self.m, self.Sigma, self.Y, self.T)[2]
        return Verification(residuals=tuple(map(float, res)), errors=tuple(map(float, errors)),
                            populations=populations, neurons=len(gauss.noise), moves=moves, tol=tol,
                            log_tilt=tuple(tilts))

    def _averages(self, X0, w, s, rho0, C, y, rho):
        """The averages over (F1) that (F3) is made of, from one sample of neurons."""
        M, P, D = len(rho), self.P, self.D
        act = dict(lambda0=self.lambda0, activation=self.activation)
        W = C + np.einsum("ma,mb->mab", y, y)
        Eys = ((rho[:, None] * y).T @ s).reshape(-1) / M  # E[y (x) s]
        L = _moment(s, s, rho, W, _control(s, s, rho0, kernels.nngp(self.X, **act))).reshape(P * D, P * D)
        if rho0 is not None and not _above(self.N1 * (L - np.outer(Eys, Eys)), self.T):
            rho0 = None  # the control would make (F3)'s T + N1 L indefinite (see _guarded_moments)
            L = _moment(s, s, rho, W, np.zeros((P, P))).reshape(P * D, P * D)
        sx = features(w, X0, self.activation).T
        dKx = _control(sx, s, rho0, kernels.nngp(X0, self.X, **act))
        dKxx = np.zeros(len(X0)) if rho0 is None else rho0 @ sx**2 / M - kernels.nngp_diag(X0, **act)
        rC, ryy = ((rho[:, None, None] * Z).reshape(M, D * D) for Z in (C, W - C))  # rho C, rho y y^T
        return dict(L=L, Eys=Eys,
                    Ey_sx=np.einsum("apbq,qb->pa", _moment(sx, s, rho, C, dKx), self.m),  # E[s* y_a] = E[C s* s] m
                    EC_s2=((sx**2).T @ rC - rC.sum(axis=0)[None] * dKxx[:, None]).reshape(-1, D, D) / M,
                    Eyy_s2=((sx**2).T @ ryy).reshape(-1, D, D) / M,
                    nW=_moment(sx, s, rho, W, dKx))

    def _combined(self, avg, X0) -> Prediction:
        """(F3) from its averages."""
        P, D, N1 = self.P, self.D, self.N1
        L = self.T * np.eye(P * D) + N1 * (avg["L"] - np.outer(avg["Eys"], avg["Eys"]))
        Ey_sx = avg["Ey_sx"]
        n = avg["nW"] - np.einsum("pa,bq->apbq", Ey_sx, avg["Eys"].reshape(D, P))  # (D, P0, D, P)
        n = np.moveaxis(n, 1, 0).reshape(len(X0), D, P * D)  # (P0, a, (b, mu))
        Linv_n = np.linalg.solve(L, n.reshape(-1, P * D).T).T.reshape(n.shape)
        cov = (N1 * (avg["EC_s2"] + avg["Eyy_s2"]) - N1 * np.einsum("pa,pb->pab", Ey_sx, Ey_sx)
               - N1**2 * np.einsum("pak,pbk->pab", n, Linv_n))
        return Prediction(mean=N1 * Ey_sx, cov=0.5 * (cov + np.swapaxes(cov, 1, 2)))


#: the most fits of the proposal per round (each a tempering step: the tilt's power beta rises until 1), and the
#: most rounds (a fit at the current field, then the field iterated on the fitted neurons until it settles)
_FITS, _ROUNDS = 20, 4
#: the default iterations of the stochastic approximation (proposal="mcmc"); a longer ``maxiter`` stops at the
#: tolerance from there on
_AVERAGED_ITER = 80
#: iterations in each block of the averaging phase that :func:`_mc_error` splits into two alternating halves
_SPLIT_BLOCK = 5
#: the neurons' laws of :func:`solve`
PROPOSALS = ("fitted", "mcmc", "prior")
#: Pareto k of the importance weights down to which the proposal is fitted, and above which the averages are
#: unreliable (Vehtari, Simpson, Gelman, Yao & Gabry, JMLR 25, 72 (2024): k < 0.7 for a usable estimate): a field
#: that settles with k above it starts a new round
_K_FIT, _K_BAD = 0.5, 0.7


def _per_neuron(s, m, Sigma, c):
    """(C, y, log_tilt) of the M neurons with features ``s`` (M, P): C = (c + q)^-1 (M, D, D), y = C z (M, D) and the
    log of (F1)'s tilt, -1/2 logdet(1 + q/c) + 1/2 z^T C z."""
    D, P = m.shape[1], m.shape[0]
    q = np.empty((len(s), D, D))
    for a in range(D):  # matrix products (an einsum over the three took 20x longer at P = 1000)
        for b in range(a, D):
            q[:, a, b] = q[:, b, a] = np.sum((s @ Sigma[a * P:(a + 1) * P, b * P:(b + 1) * P]) * s, axis=1)
    C = np.linalg.inv(c * np.eye(D) + q)
    z = s @ m
    y = np.einsum("mab,mb->ma", C, z)
    return C, y, -0.5 * np.linalg.slogdet(np.eye(D) + q / c)[1] + 0.5 * np.einsum("ma,ma->m", z, y)


def _normalized(log_w):
    """Weights of mean 1 from their logs, and how far the largest log lies above the median."""
    rho = np.exp(log_w - log_w.max())
    return rho / rho.mean(), float(log_w.max() - np.median(log_w))


def _ess(log_w) -> float:
    rho = np.exp(log_w - log_w.max())
    return float(rho.sum() ** 2 / np.sum(rho**2))


def pareto_k(log_w) -> float:
    """The Pareto k of importance weights from their logs (ArviZ's Pareto-smoothed importance sampling): the shape of
    their upper tail; weights of tail exp(r x^2 / 2) on a unit Gaussian x have k = r, and variance from k = 1/2 on;
    equal weights 0, and so the largest weights all equal (a bounded tail); infinite where one weight holds nearly
    all (ArviZ's fit of the tail gives NaN there, which compared as reliable)."""
    from arviz_stats.base import array_stats

    log_w = np.asarray(log_w, dtype=float)
    if np.ptp(log_w) <= 1e-12 * max(1.0, np.abs(log_w).max()):  # equal weights (neurons drawn from the law itself)
        return 0.0
    try:
        k = float(array_stats.psislw(-log_w, 1.0)[1])
    except ValueError as err:  # the largest weights all equal: a bounded tail
        if "tail values are the same" not in str(err):
            raise
        return 0.0
    return np.inf if np.isnan(k) else k


def _control_weights(log_w0):
    """The weights rho0 (mean 1) that carry the neurons to the prior for the control variate (:func:`_control`), from
    their logs; None where they are unreliable: a Pareto k above 0.7, or an effective sample size below half the
    neurons (the proposal's own standard of good weights). From (F1) to the prior they degenerate where the tilt is
    strong: on MNIST P = 200 at α = 10, ESS 1-200 of 4000 and k up to 9, the sample's "kernel" off by 2-4 times the
    norm of the exact one (0.03-0.09 where the weights are good), and T + L_W of (F2) indefinite (its smallest
    eigenvalue down to -1.7e5): the field's covariance blew up and the solve wandered. There the plain averages,
    without the control, are taken."""
    return None if _ess(log_w0) < len(log_w0) / 2 or not pareto_k(log_w0) <= _K_BAD else _normalized(log_w0)[0]


def _control(s1, s2, rho0, K):
    """The control variate: the weighted sample's estimate of the NNGP kernel, :math:`\\overline{\\rho_0 s_1 s_2^\\top}`,
    minus the exact one ``K``; zero where ``rho0`` is None (:func:`_control_weights`)."""
    if rho0 is None:
        return np.zeros(K.shape)
    return (s1 * rho0[:, None]).T @ s2 / len(rho0) - K


def proposal_basis(X, m, pcs: int = 10) -> np.ndarray:
    """Orthonormal directions of weight space (N0, k) where the proposal departs from the prior: :math:`X^\\top m_a`
    (the gradient of the spike z = m^T s at small preactivations, up to a factor) and the top ``pcs`` principal
    directions of X. The tilt of (F1) depends on w only through Xw, so nothing outside X's row space moves."""
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


def _resampled(log_w, rng) -> np.ndarray:
    """Indices of M neurons drawn in proportion to exp(log_w), systematically (one uniform for all: the least noise)."""
    rho = np.exp(log_w - log_w.max())
    edges = np.cumsum(rho / rho.sum())
    return np.minimum(np.searchsorted(edges, (rng.random() + np.arange(len(rho))) / len(rho)), len(rho) - 1)


def _tilt_target(X, activation, lambda0, c, chunk: int = 4096):
    r"""The log-density of (F1) over prior-over-proposal in the coordinates ξ of a Gaussian proposal, and its
    gradient: ``target(xi, gauss, m, Sigma) -> (ell (M,), grad (M, N0))``, :math:`\ell(\xi)` = the log tilt of (F1)
    at w(ξ) plus the log of prior over proposal (Proposal.draw's, up to a constant); so that (F1) in these coordinates
    is :math:`\propto \mathcal N(\xi; 0, 1)\, e^{\ell(\xi)}`. JAX in local float64, ``chunk`` neurons at a time.
    The inputs, the field and the proposal are arguments of one program (:func:`_tilt_step`) compiled once per
    shape: every solve and every ``predict`` of the same shapes reuse it (each call compiled it again before, about
    two seconds a prediction)."""
    import jax.numpy as jnp

    from ..network import x64_context

    step = _tilt_step(activation, float(lambda0), float(c))
    with x64_context():
        X = jnp.asarray(X, jnp.float64)

    def target(xi, gauss, m, Sigma):
        P, D = m.shape
        with x64_context():
            args = (X, gauss.basis, gauss.mean, gauss.chol, m, Sigma.reshape(D, P, D, P))
            parts = [step(jnp.asarray(xi[k:k + chunk]), *args) for k in range(0, len(xi), chunk)]
            return (np.concatenate([np.asarray(v) for v, _ in parts]),
                    np.concatenate([np.asarray(g) for _, g in parts]))

    return target


@lru_cache(maxsize=1)
def _quadratic():
    r"""``quadratic(s, S)``: (F1)'s :math:`q_{ab} = s^\top \Sigma_{ab} s` of one neuron's features s (P,) under the
    field's covariance S (D, P, D, P), symmetric as a PD x PD matrix, with its gradient in s from the same product
    :math:`U = \Sigma s`: :math:`\partial q_{ab}/\partial s = U_{a\cdot b} + U_{b\cdot a}` by that symmetry.
    Autodiff of the einsum multiplies by S a second time (at P = 1000 a third of a step's time,
    benchmarks/shared_field_speed.py); S is not differentiated."""
    import jax
    import jax.numpy as jnp

    @jax.custom_vjp
    def quadratic(s, S):
        return jnp.einsum("p,apbq,q->ab", s, S, s)

    def forward(s, S):
        U = jnp.einsum("apbq,q->apb", S, s)
        return jnp.einsum("p,apb->ab", s, U), U

    def backward(U, g):
        return jnp.einsum("ab,apb->p", g, U) + jnp.einsum("ab,bpa->p", g, U), None

    quadratic.defvjp(forward, backward)
    return quadratic


@lru_cache(maxsize=16)
def _tilt_step(activation, lambda0: float, c: float):
    """The compiled ``(ell, grad)`` of :func:`_tilt_target` over a chunk of neurons, for one activation, lambda0 and
    c: ``step(xi, X, B, mean, L, m, S)``."""
    import jax
    import jax.numpy as jnp

    act = get_activation(activation).fn
    quadratic = _quadratic()

    def ell(xi, X, B, mean, L, m, S):
        eta = xi @ B
        u = mean + eta @ L.T
        w = xi / np.sqrt(lambda0) + (u - eta / np.sqrt(lambda0)) @ B.T
        s = act(X @ w / np.sqrt(X.shape[1]))
        q = quadratic(s, S)
        z = m.T @ s
        D = len(z)
        log_tilt = -0.5 * jnp.linalg.slogdet(jnp.eye(D) + q / c)[1] + 0.5 * z @ jnp.linalg.solve(c * jnp.eye(D) + q, z)
        return log_tilt - 0.5 * lambda0 * u @ u + 0.5 * eta @ eta

    return jax.jit(jax.vmap(jax.value_and_grad(ell), in_axes=(0,) + (None,) * 6))


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
                                            lambda xi: target(xi, gauss, m, Sigma), rng, h=h, moves=_STAGE_MOVES,
                                            ess=_STAGE_ESS)
        return gauss, xi, rates, levels, h
    start = gauss.noise[_resampled(_per_neuron(s, m, Sigma, c)[2] + log_ratio, rng)]
    xi, rates, levels, h = _moved(start, lambda xi: target(xi, gauss, m, Sigma), moves, rng, h=h)
    return gauss, xi, rates, levels, h


def _moved(start, target, moves: int, rng, accept: float = 0.574, h: float = 0.5):
    r"""``moves`` Metropolis-adjusted Langevin steps of every neuron at once (Roberts & Tweedie, Bernoulli 2, 341
    (1996)) on :math:`\log\pi(\xi) = -|\xi|^2/2 + \ell(\xi)` in the coordinates ``start`` (M, N0) of a Gaussian
    proposal fitted to (F1) (so that π is near a unit Gaussian, whatever the scale of the tilt); ``target(xi) ->
    (ell, grad)``. Each step leaves (F1) invariant; the step h (one for all neurons) is tuned between steps towards
    the acceptance ``accept`` from ``h``. Returns the coordinates, the acceptance of each step, the mean of log π over
    the neurons after each (it levels off where they have reached (F1)) and the step reached."""
    def log_pi(xi, ell, grad):
        return -0.5 * np.sum(xi * xi, axis=1) + ell, grad - xi

    xi = start
    lp, g = log_pi(xi, *target(xi))
    rates, levels = [], []
    for _ in range(moves):
        new = xi + 0.5 * h * g + np.sqrt(h) * rng.standard_normal(xi.shape)
        lp_new, g_new = log_pi(new, *target(new))
        log_q_back = -np.sum((xi - new - 0.5 * h * g_new) ** 2, axis=1) / (2 * h)
        log_q_fwd = -np.sum((new - xi - 0.5 * h * g) ** 2, axis=1) / (2 * h)
        take = np.log(rng.random(len(xi))) < lp_new - lp + log_q_back - log_q_fwd
        xi, lp, g = (np.where(take[:, None], new, xi), np.where(take, lp_new, lp),
                     np.where(take[:, None], g_new, g))
        rates.append(float(take.mean()))
        levels.append(float(lp.mean()))
        h = float(np.clip(h * np.exp(2 * (rates[-1] - accept)), 1e-4, 4.0))
    return xi, tuple(rates), tuple(levels), h


#: tempered SMC (:func:`_tempered`) for ``tempered=True``: Langevin steps at each stage and the effective sample size
#: (share of the neurons) each stage keeps. On MNIST (0, 1), P = 200, alpha = 2 (4 000 neurons, the exact theory's
#: field) 10 and 0.8 reached (F1) in 7 stages (70 steps): the specialists (88.6 of N1) and the mean log tilt then stay
#: flat over 90 more steps, as after 14 stages of 10 at 0.95 (88.8); 4 stages of 5 at 0.5 left 63.9, still rising
_STAGE_MOVES, _STAGE_ESS = 10, 0.8


def _tempered(start, target, rng, h: float = 0.5, moves: int = _STAGE_MOVES, ess: float = _STAGE_ESS,
              max_stages: int = 200):
    r"""Adaptive tempered sequential Monte Carlo (Del Moral, Doucet & Jasra, JRSS B 68, 411 (2006); the next power
    by bisection on the weights' effective sample size, as BlackJAX's ``adaptive_tempered_smc``) from the exact draws
    ``start`` (M, N0) of a unit Gaussian to :math:`\pi(\xi) \propto \mathcal N(\xi; 0, 1)\, e^{\ell(\xi)}`
    (``target(xi) -> (ell, grad)``, as :func:`_moved`'s): through :math:`\pi_\beta \propto \mathcal N(\xi; 0, 1)\,
    e^{\beta\ell(\xi)}`, each stage raising β as far as the incremental weights :math:`e^{\Delta\beta\,\ell}` keep
    an effective sample size of ``ess`` M, drawing the neurons by these weights (:func:`_resampled`) and moving them
    ``moves`` Langevin steps at the new β (:func:`_moved`, each leaving π_β invariant). A mode of π far from the
    start that Langevin steps reach only over hundreds of steps (the specialists of (F1) on MNIST: docs/validity.md,
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

        def stage(z, b=beta):
            v, g = target(z)
            return b * v, b * g

        xi, r, lv, h = _moved(xi, stage, moves, rng, h=h)
        rates, levels = rates + list(r), levels + list(lv)
        ell, _ = target(xi)
    return xi, tuple(rates), tuple(levels), h, tuple(betas)


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


def _averaged(law: Population, m, Sigma, target, Y, *, N1, T, lambda0, K, damping, maxiter, tol, steps, rng,
              progress=False, store: _Checkpoint | None = None, state: dict | None = None, renew=None):
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
        if "halves" in state:  # (a checkpoint of an earlier version holds no Monte Carlo error: infinite)
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
                xi, r, lv, h = _moved(xi, lambda z: target(z, gauss, m, Sigma), steps, rng, h=h)
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
        m_new, Sigma_new, res = _field(L_W, L_C, m, Sigma, Y, T)
        if not np.all(np.isfinite(res)):
            reason = "the iteration produced a number that is not finite"
            break
        residuals.append(res)
        if k >= burn:
            error = _mc_error(halves, counts, m, Sigma, Y, T)
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
                  "split into two halves, or a checkpoint of an earlier version); raise maxiter")
    elif not reason and max(error) >= tol:
        reason = (f"the residuals fell below tol = {tol:g}, but the Monte Carlo error of the averaged moments "
                  f"({error[0]:.2g} in m, {error[1]:.2g} in Sigma, from two halves of the iterations) did not in "
                  f"{maxiter} iterations: the residuals are within the noise; raise neurons, or maxiter")
    done = True
    save(len(residuals), force=True)
    law = Population(gauss, xi, m.copy(), Sigma.copy(), c, law.X, law.activation, tuple(rates), tuple(levels), h)
    return m, Sigma, law, np.asarray(residuals).reshape(-1, 2), error, reason


def _mc_error(halves, counts, m, Sigma, Y, T):
    r"""The Monte Carlo error of the field that the averaged moments give, in the residuals' norms (:func:`_field`):
    the averaging phase's iterations split into two halves (alternate blocks of :data:`_SPLIT_BLOCK` iterations, fewer
    in a short solve), and half the difference of what their moments give, :math:`\|(L_C^A - L_C^B)m\|/(2\|y\|)` and
    :math:`\|\Sigma'_A - \Sigma'_B\|/(2\|\Sigma\|)`: for two independent halves of n iterations of variance σ² each,
    the difference has variance 4σ²/n and the whole average σ²/n. The halves are independent where each iteration's
    population is drawn anew (``fresh``); with one population moved on, only where its blocks decorrelate (a few
    steps where the tilt is weak; where specialists form over hundreds of steps, on MNIST, the error is
    underestimated). A residual below ``tol`` says little where this error is above it. Its source is not only the
    neurons' count: on MNIST at α = 2 it was 0.21 where 80 independent populations of the noise measured at a fixed
    field give about 0.005 (docs/validity.md, "Is the averaged field a fixed point?"). Infinite before both halves
    hold an iteration."""
    if counts.min() == 0:
        return np.inf, np.inf
    (W_A, C_A), (W_B, C_B) = halves[0] / counts[0], halves[1] / counts[1]
    y_vec, eye = Y.T.reshape(-1), np.eye(Y.size)
    S_A, S_B = np.linalg.inv(T * eye + W_A), np.linalg.inv(T * eye + W_B)
    return (float(np.linalg.norm((C_A - C_B) @ m.T.reshape(-1)) / (2 * np.linalg.norm(y_vec))),
            float(np.linalg.norm(S_A - S_B) / (2 * np.linalg.norm(Sigma))))


def _jackknife(statistic, n: int) -> float:
    r"""The jackknife standard error (Efron & Stein, Ann. Stat. 9, 586 (1981)) of an array ``statistic(keep)`` of
    ``n`` independent parts (``keep``: a boolean mask of the parts it is computed from), in the Frobenius norm:
    :math:`\sqrt{\tfrac{n-1}{n}\sum_j \|\theta_{(-j)} - \bar\theta_{(\cdot)}\|^2}`; for a mean it is the
    standard error of the mean."""
    out = np.stack([statistic(np.arange(n) != j) for j in range(n)])
    return float(np.sqrt((n - 1) / n * np.sum((out - out.mean(axis=0)) ** 2)))


@dataclass(frozen=True)
class Verification:
    """:meth:`SharedFieldFit.verify`'s answer: the residuals of the field, (m, Sigma) in the solve's norms, against
    (F2)'s moments of ``populations`` new populations of ``neurons`` neurons moved ``moves`` steps to (F1), their
    Monte Carlo errors (jackknife), ``tol``, and each population's mean log tilt of (F1) (``log_tilt``).
    ``verdict``: "a fixed point" (both residuals below tol, and their errors too), "not a fixed point" (a residual
    above tol by more than twice its error) or "undetermined" (raise populations)."""

    residuals: tuple
    errors: tuple
    populations: int
    neurons: int
    moves: int
    tol: float
    log_tilt: tuple = ()

    @property
    def verdict(self) -> str:
        if max(self.residuals) < self.tol and max(self.errors) < self.tol:
            return "a fixed point"
        if any(r - 2 * e >= self.tol for r, e in zip(self.residuals, self.errors)):
            return "not a fixed point"
        return "undetermined"

    def __str__(self) -> str:
        (rm, rS), (em, eS) = self.residuals, self.errors
        undetermined = self.verdict == "undetermined"
        return (f"{'undetermined whether a fixed point' if undetermined else self.verdict} of (F1)'s law (tol "
                f"{self.tol:g}): residuals {rm:.3g} +- {em:.2g} (m), {rS:.3g} +- {eS:.2g} (Sigma) against "
                f"{self.populations} new populations of {self.neurons} neurons, {self.moves} Langevin steps each"
                + ("; more populations lower the errors" if undetermined else ""))


def _moments(s, rho, C, y, dK, N1):
    r"""(F2)'s moments over the neurons ``s`` with weights ``rho``: :math:`L_W = N_1 E[W\otimes ss^\top]`,
    W = (c+q)^{-1} + yy^T, and :math:`L_C = N_1 E[(c+q)^{-1}\otimes ss^\top]`, each (PD, PD)."""
    PD = s.shape[1] * C.shape[1]
    return tuple(N1 * _moment(s, s, rho, Z, dK).reshape(PD, PD) for Z in (C + np.einsum("ma,mb->mab", y, y), C))


def _population_moments(w, X, activation, m, Sigma, c, K, N1, T):
    """(F2)'s moments from one population ``w`` of neurons drawn at (F1)'s law (equal weights), with the control
    variate of the prior over (F1) (its weights 1 / tilt) where :func:`_guarded_moments` keeps it; and each neuron's
    log tilt."""
    s = features(w, X, activation).T
    C, y, log_tilt = _per_neuron(s, m, Sigma, c)
    dK = _control(s, s, _control_weights(-log_tilt), K)
    return (*_guarded_moments(s, np.ones(len(s)), C, y, dK, N1, T), log_tilt)


def _guarded_moments(s, rho, C, y, dK, N1, T):
    r"""(F2)'s moments (:func:`_moments`) of one iteration, with the control variate ``dK``
    where it keeps them above :math:`-T/2` (both :math:`T/2 + L_W` and :math:`T/2 + L_C` positive definite), and
    without it otherwise. The plain moments are positive semidefinite, so :math:`\Sigma' = (T + L_W)^{-1}` is
    bounded by 1/T; the control, exact where the tilt is weak (at infinite width it removes the Monte Carlo error of
    the kernel), is a noisy difference where the tilt is strong: on MNIST P = 200 at α = 10, with weights that pass
    :func:`_control_weights` (50-80% of the neurons effective, Pareto k below 0), it made :math:`T + L_W` indefinite
    (smallest eigenvalue -0.2 to -0.004 at T = 0.01; each such iteration a spike of the field's covariance) and
    (F3)'s :math:`T + N_1 L` too (-0.22: ε_g 0.0097 where the plain averages give 0.0145). The same test keeps it out
    of (F3) (:meth:`SharedFieldFit.predict`)."""
    moments = _moments(s, rho, C, y, dK, N1)
    if not np.any(dK) or all(_above(L, T) for L in moments):
        return moments
    return _moments(s, rho, C, y, np.zeros(dK.shape), N1)


def _above(L, T) -> bool:
    """Whether T/2 + L is positive definite."""
    return _positive(L + 0.5 * T * np.eye(len(L)))


def _positive(A) -> bool:
    """Whether the symmetric matrix ``A`` is positive definite (its Cholesky factor exists)."""
    try:
        np.linalg.cholesky(A)
    except np.linalg.LinAlgError:
        return False
    return True


def _field(L_W, L_C, m, Sigma, Y, T):
    r"""The field that (F2) gives from the moments (:func:`_moments`): the mean :math:`m' = (T + L_C)^{-1}y` (P, D),
    the covariance :math:`\Sigma' = (T + L_W)^{-1}` (symmetrized), and the residuals of the present field (m, Sigma):
    :math:`\|(T + L_C)m - y\|/\|y\|` and :math:`\|\Sigma' - \Sigma\|/\|\Sigma\|`."""
    P, D = Y.shape
    eye, y_vec = np.eye(P * D), Y.T.reshape(-1)
    Sigma_new = np.linalg.inv(T * eye + L_W)
    A1 = T * eye + L_C
    res = (np.linalg.norm(A1 @ m.T.reshape(-1) - y_vec) / np.linalg.norm(y_vec),
           np.linalg.norm(Sigma_new - Sigma) / np.linalg.norm(Sigma))
    return np.linalg.solve(A1, y_vec).reshape(D, P).T, 0.5 * (Sigma_new + Sigma_new.T), res


def _moment(s1, s2, rho, W, dK):
    r""":math:`E[W_{ab}\, s_1 s_2^\top]` over (F1), (D, P1, D, P2), with the control variate ``dK``
    (:func:`_control`). W is symmetric in (a, b): where ``s2`` is ``s1`` (the moments of (F2)) the block (b, a) is
    the block (a, b), computed once (a quarter of (F2)'s moments at D = 2)."""
    M, D = len(rho), W.shape[1]
    out = np.empty((D, s1.shape[1], D, s2.shape[1]))
    for a in range(D):
        for b in range(a if s2 is s1 else 0, D):
            rw = rho * W[:, a, b]
            out[a, :, b] = (s1 * rw[:, None]).T @ s2 / M - rw.mean() * dK
            if s2 is s1:
                out[b, :, a] = out[a, :, b]
    return out


class _Anderson:
    """Anderson mixing of the fixed-point iteration (m, Sigma) -> (m', Sigma') of (F2) (Walker & Ni, SIAM J. Numer.
    Anal. 49, 1715 (2011)): the step mixes the last ``memory`` iterates' steps to cancel the residual in their span,
    ``damping`` of the new step taken; ``memory`` 0 is plain damping. The damped iteration alone converges slowly
    where its map has eigenvalues both near 1 and below -1 (the linear teacher at alpha = 1: a contraction of 0.92
    per iteration at damping 0.3, divergence at 0.6). A step whose Sigma is not positive definite, or whose residual
    grew tenfold over the best, is replaced by the damped one and the memory cleared."""

    def __init__(self, damping: float, memory: int):
        self.damping, self.memory = damping, memory
        self.dx, self.df, self.last, self.best, self.scale = [], [], None, np.inf, None

    def reset(self):
        self.dx, self.df, self.last = [], [], None

    def step(self, m, m_new, Sigma, Sigma_new):
        shape = m.shape
        if self.scale is None:
            self.scale = (np.linalg.norm(m), np.linalg.norm(Sigma))
        x = np.concatenate([m.ravel() / self.scale[0], Sigma.ravel() / self.scale[1]])
        f = np.concatenate([m_new.ravel() / self.scale[0], Sigma_new.ravel() / self.scale[1]]) - x
        norm = np.linalg.norm(f)
        if norm > 10 * self.best:
            self.dx, self.df = [], []
        self.best = min(self.best, norm)
        if self.last is not None and self.memory:
            self.dx.append(x - self.last[0])
            self.df.append(f - self.last[1])
            self.dx, self.df = self.dx[-self.memory:], self.df[-self.memory:]
        self.last = (x, f)
        step = self.damping * f
        if self.df:
            dF = np.stack(self.df, axis=1)
            gamma = np.linalg.lstsq(dF, f, rcond=None)[0]
            step = step - (np.stack(self.dx, axis=1) + self.damping * dF) @ gamma
        new = x + step
        n = m.size
        m_out, S_out = new[:n].reshape(shape) * self.scale[0], new[n:].reshape(Sigma.shape) * self.scale[1]
        S_out = 0.5 * (S_out + S_out.T)
        if self.df and not _positive(S_out):  # extrapolated out of the positive definite cone: the damped step
            self.dx, self.df, self.last = [], [], None
            return m + self.damping * (m_new - m), Sigma + self.damping * (Sigma_new - Sigma)
        return m_out, S_out


def solve(X, Y, *, N1: float, T: float, lambda1: float = 1.0, lambda0: float = 1.0, activation: str = "erf",
          neurons: int = 40_000, damping: float | None = None, maxiter: int | None = None, tol: float | None = None,
          min_ess: float = 100.0, proposal: str = "mcmc", accelerate: bool = True, memory: int = 5,
          init: SharedFieldFit | None = None, seed: int = 0, moves: int = 30, steps: int = 3,
          populations: int = 16, fresh: bool = False, tempered: bool = False, progress: bool = False,
          checkpoint=None) -> SharedFieldFit:
    """Solve (F2) for the shared field: fixed-point iterations, ``damping`` of each step taken, mixed over the last
    ``memory`` steps (Anderson, ``accelerate``; Newton steps on m diverge), from the exact theory's field or from
    ``init`` (a fit at a neighbouring width: continuation in alpha, with its neurons and proposal), with averages over
    (F1) from ``neurons`` neurons drawn with ``seed`` from a Gaussian proposal, ``"fitted"`` to the tilted law (in
    rounds, see the module's docstring), or the ``"prior"`` alone; ``maxiter`` iterations in all rounds together.
    Converged where both residuals fall below ``tol`` with reliable weights (Pareto k at most 0.7); otherwise
    ``converged`` is False and the ``reason`` says why: the weights' tail, an effective sample size below
    ``min_ess``, residuals that did not settle, or a number that stopped being finite.

    ``"mcmc"`` (the default): the fitted proposal's neurons moved to (F1) exactly by ``moves`` Langevin steps, then
    ``maxiter`` (80) iterations of stochastic approximation, ``steps`` steps of the population each, the moments of
    (F2) averaged over the iterations, the field moved ``damping`` (0.3) of the way to their solution (Anderson mixing
    does not apply to noisy steps); converged where the residuals of the field against the averaged moments fall
    below ``tol`` (1e-2: they fall as the averages settle, as 1/k), and so does the Monte Carlo error of the averaged
    moments (``mc_error`` of the fit, :func:`_mc_error`: a residual within the noise is no fixed point; "did not
    converge" says which was not met); a ``maxiter`` above 80 is a cap: past the 80th iteration and its first half
    the solve stops where both are below ``tol``; predictions averaged over ``populations``. ``fresh``: each
    iteration's population (and each of a prediction's) drawn anew from the proposal fitted at the field and moved
    ``moves`` steps, independent of the last, instead of one population moved on ``steps`` steps an iteration (whose
    slowly decorrelating specialists the field can fit, and whose Monte Carlo error the halves of its iterations
    underestimate: docs/validity.md, "Is the solve's field a fixed point of (F1)'s law?"); ``moves`` / ``steps``
    times the cost of an iteration. ``tempered`` (with ``fresh``): each of these populations taken from
    the fitted proposal to (F1) by adaptive tempered sequential Monte Carlo (:func:`_tempered`: stages of
    :data:`_STAGE_MOVES` Langevin steps, as many stages as the proposal's weights ask for: 7 at the exact theory's
    field on MNIST at P = 200, α = 2, one where they look good, which misses specialists: docs/validity.md,
    "Tempered populations") instead of ``moves`` steps. ``progress``: a bar over these iterations with
    their residuals (``"mcmc"``; a solve takes minutes to an hour at P = 200-1000), one line per iteration where
    stderr is not a terminal. ``checkpoint``: a path ``*.npz`` where the ``"mcmc"`` solve saves its state every minute
    and at its end; called again with the same data, start and settings it continues from there to the same field as
    a solve without a break (a finished one returns at once; the neurons' proposal then keeps their moved coordinates
    as its noise, which only a continuation from the fit, ``init=``, sees)."""
    X, Y = data_pair(X, Y)
    N1, T = positive("N1", N1, "the hidden width"), positive("T", T, "the temperature")
    lambda1, lambda0 = positive("lambda1", lambda1), positive("lambda0", lambda0)
    averaged = proposal == "mcmc"
    damping = (0.3 if averaged else 0.6) if damping is None else damping
    maxiter = (_AVERAGED_ITER if averaged else 40) if maxiter is None else maxiter
    tol = (1e-2 if averaged else 1e-5) if tol is None else positive("tol", tol)
    neurons, maxiter = positive_int("neurons", neurons), positive_int("maxiter", maxiter)
    if not 0 < damping <= 1:
        raise ValueError(f"damping must be in (0, 1] (the share of each fixed-point step taken); got {damping}")
    if isinstance(memory, bool) or int(memory) != memory or memory < 0:
        raise ValueError(f"memory must be a whole number of past steps, 0 or more (0: damping alone); got {memory!r}")
    if proposal not in PROPOSALS:
        raise ValueError(f"proposal must be one of {', '.join(map(repr, PROPOSALS))} ('fitted': the neurons' Gaussian "
                         "law fitted to the tilt; 'mcmc': then moved to (F1) exactly; 'prior'); got " f"{proposal!r}")
    if fresh not in (True, False) or (fresh and proposal != "mcmc"):
        raise ValueError(f"fresh must be True or False, and True only with proposal='mcmc' (it draws each iteration's "
                         f"neurons anew and moves them to (F1)); got fresh={fresh!r}, proposal={proposal!r}")
    if tempered not in (True, False) or (tempered and not fresh):
        raise ValueError(f"tempered must be True or False, and True only with fresh=True (it is how each fresh "
                         f"population is taken to (F1)); got tempered={tempered!r}, fresh={fresh!r}")
    moves, steps, populations = (positive_int(k, v) for k, v in (("moves", moves), ("steps", steps),
                                                                  ("populations", populations)))
    activation = get_activation(activation).name
    P, D = Y.shape
    c = lambda1 * N1
    if init is not None:
        if init.X.shape != X.shape or not np.array_equal(init.X, X):
            raise ValueError("init is a fit on other training inputs; continue from a fit on the same X")
        m, Sigma, law, seed = init.m.copy(), init.Sigma.copy(), init.proposal, init.seed  # its neurons
        if isinstance(law, Population) and proposal != "mcmc":
            law = law.proposal
    else:
        A0 = T * np.eye(P * D) + np.kron(np.atleast_2d(solve_exact(X, Y, N1=N1, T=T, lambda1=lambda1,
                                                                   lambda0=lambda0, activation=activation).Q),
                                         kernels.nngp(X, lambda0=lambda0, activation=activation)) / lambda1
        Sigma = np.linalg.inv(A0)
        m = np.linalg.solve(A0, Y.T.reshape(-1)).reshape(D, P).T
        noise = np.random.default_rng(seed).standard_normal((neurons, X.shape[1]))
        law = Proposal.prior(noise, proposal_basis(X, m), lambda0)
    K = kernels.nngp(X, lambda0=lambda0, activation=activation)
    M = len(law.noise)
    ctx = dict(X=X, activation=activation, lambda0=lambda0, c=c)

    def fit_law(law, m, Sigma):
        """The proposal fitted to (F1) at the field (:func:`_fitted`), its neurons' features, log prior over proposal
        and control variate."""
        law, _, s, log_ratio = _fitted(law, m, Sigma, fits=_FITS if proposal != "prior" else 0, **ctx)
        return law, s, log_ratio, _control(s, s, _control_weights(log_ratio), K)

    rng = np.random.default_rng([seed, 1])  # the moves' own stream
    target = _tilt_target(X, activation, lambda0, c) if proposal == "mcmc" else None

    def move(law, m, Sigma):
        """The Gaussian proposal fitted at the field, then its neurons (or the last population's) moved to (F1)."""
        if not isinstance(law, Population):  # the proposal's neurons drawn by their weights at this field
            gauss, xi, rates, levels, h = _renewed(law, m, Sigma, target, moves, rng, 0.5, fresh=False,
                                                   tempered=tempered, **ctx)
            return Population(gauss, xi, m.copy(), Sigma.copy(), c, X, activation, rates, levels, h)
        gauss = fit_law(law.proposal, m, Sigma)[0]  # the population carries on, in the new proposal's coordinates
        start = gauss.coordinates(law.draw(lambda0)[0], lambda0)
        xi, rates, levels, h = _moved(start, lambda xi: target(xi, gauss, m, Sigma), moves, rng)
        return Population(gauss, xi, m.copy(), Sigma.copy(), c, X, activation, rates, levels, h)

    def renew(gauss, m, Sigma, h):
        """An iteration's population drawn anew (``fresh``)."""
        return _renewed(gauss, m, Sigma, target, moves, rng, h, tempered=tempered, **ctx)

    if checkpoint is not None and not averaged:
        raise ValueError("checkpoint= saves the averaged solve (proposal='mcmc'), whose iterations take minutes; "
                         f"a {proposal!r} solve is not saved: leave checkpoint out")
    if averaged:
        store = state = None
        if checkpoint is not None:
            store = _Checkpoint(checkpoint, _key(X, Y, m, Sigma, N1=N1, T=T, lambda1=lambda1, lambda0=lambda0,
                                                 activation=activation, neurons=M, damping=damping, maxiter=maxiter,
                                                 tol=tol, seed=seed, moves=moves, steps=steps,
                                                 **({"fresh": True} if fresh else {}),
                                                 **({"tempered": True} if tempered else {})))
            state = store.load()
        if state is None:
            law = move(law, m, Sigma)
        else:  # a saved solve: its neurons (their noise now the moved coordinates) and its moves' stream
            gauss = Proposal(state["xi"], state["basis"], state["mean"], state["chol"])
            law = Population(gauss, state["xi"], m.copy(), Sigma.copy(), c, X, activation, (), (), float(state["h"]))
        m, Sigma, law, residuals, error, reason = _averaged(law, m, Sigma, target, Y, N1=N1, T=T, lambda0=lambda0, K=K,
                                                     damping=damping, maxiter=maxiter, tol=tol, steps=steps, rng=rng,
                                                     progress=progress, store=store, state=state,
                                                     renew=renew if fresh else None)
        return SharedFieldFit(X=X, Y=Y, N1=N1, T=T, lambda1=lambda1, lambda0=lambda0, activation=activation, m=m,
                              Sigma=Sigma, residuals=residuals, ess=float(M), pareto_k=0.0, converged=not reason,
                              reason=reason, proposal=law, seed=seed, steps=steps, populations=populations,
                              fresh=fresh, moves=moves, tempered=tempered, mc_error=error)
    residuals, reason, ess, k_hat = [], "", float(M), 0.0
    mixer = _Anderson(damping, int(memory) if accelerate else 0)
    budget = maxiter
    for round_ in range({"fitted": _ROUNDS, "prior": 1}[proposal]):
        # a round: the neurons' proposal fitted at the current field, then the field iterated on these neurons
        if budget == 0:  # no iteration left: the last round's reason stands
            break
        law, s, log_ratio, dK = fit_law(law, m, Sigma)
        mixer.reset()
        reason, settled = "", False
        while budget > 0:
            budget -= 1
            C, y, log_tilt = _per_neuron(s, m, Sigma, c)
            ess, k_hat = _ess(log_tilt + log_ratio), pareto_k(log_tilt + log_ratio)
            rho, tail = _normalized(log_tilt + log_ratio)
            if ess < min_ess:
                reason = (f"the reweighted neurons degenerate (effective sample size {ess:.0f} < min_ess = "
                          f"{min_ess:g}): the tilt of (F1) has moved the neurons far from their proposal (the largest "
                          f"log-weight lies {tail:.1f} above the median: more neurons help only where that is a few "
                          "units); continue from a converged neighbouring width (init=) or raise neurons")
                break
            m_new, Sigma_new, res = _field(*_guarded_moments(s, rho, C, y, dK, N1, T), m, Sigma, Y, T)
            if not np.all(np.isfinite(res)):
                reason = "the iteration produced a number that is not finite"
                break
            residuals.append(res)
            if max(res) < tol:
                settled = True
                break
            m, Sigma = mixer.step(m, m_new, Sigma, Sigma_new)
        else:
            reason = (f"the residuals {residuals[-1][0]:.2g}, {residuals[-1][1]:.2g} did not fall below tol = {tol:g} "
                      f"in {maxiter} iterations; raise maxiter or lower damping")
        if reason.startswith(("the iteration", "the residuals")) or (settled and k_hat <= _K_BAD):
            break
    if not reason and k_hat > _K_BAD:
        reason = (f"the importance weights of the neurons are unreliable (Pareto k = {k_hat:.2f} > {_K_BAD:g}: their "
                  "tail is too heavy for their averages to hold, whatever the effective sample size of "
                  f"{ess:.0f} says); raise neurons" + (", or use proposal='fitted'" if proposal == "prior" else ""))
    return SharedFieldFit(X=X, Y=Y, N1=N1, T=T, lambda1=lambda1, lambda0=lambda0, activation=activation, m=m,
                          Sigma=Sigma, residuals=np.asarray(residuals).reshape(-1, 2), ess=ess, pareto_k=k_hat,
                          converged=not reason, reason=reason, proposal=law, seed=seed)


def continued(X, Y, widths, checkpoints=None, **kwargs):
    """The solves at each of ``widths``, widest first, each continued from the last converged one (its field, neurons
    and proposal: continuation in alpha; the first from the exact theory's field), yielded as ``(N1, fit)`` as each
    is done; ``kwargs``: those of :func:`solve`; ``checkpoints``: a folder for each width's checkpoint
    (``N1=<width>.npz``). On MNIST (0, 1) at P = 200 the solve at alpha = 2 from the exact theory's field
    degenerates (effective sample size 1), continued from alpha = 1 it converges (+19% against the sampled networks,
    docs/validity.md)."""
    init = None
    for N1 in sorted(widths, reverse=True):
        if checkpoints is not None:
            Path(checkpoints).mkdir(parents=True, exist_ok=True)
            kwargs["checkpoint"] = Path(checkpoints) / f"N1={N1:g}.npz"
        fit = solve(X, Y, N1=N1, init=init, **kwargs)
        yield N1, fit
        if fit.converged:
            init = fit
