"""The result of a shared-field solve (:class:`SharedFieldFit`): its field, its neurons, and the predictions (F3)
and readout overlaps that follow from them."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ... import kernels
from ..._checks import positive, positive_int
from ...progress import bar as progress_bar
from ..prediction import FitShape, Prediction
from ..single_neuron import features
from .equations import (_above, _control, _control_weights, _field, _moment, _normalized, _per_neuron, _update,
                        _population_moments)
from .moves import Population, _moved, _renewed, _tilt_target
from .proposals import Proposal


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
        """"a fixed point", "not a fixed point" or "undetermined"."""
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


def _verify(fit, populations: int, moves: int, seed: int | None, tol: float | None, progress: bool) -> Verification:
    """:meth:`SharedFieldFit.verify`: ``populations`` new populations at the field of ``fit``, each moved ``moves``
    steps (:func:`_renewed`), and the field's residuals against their moments with the jackknife error."""
    populations, moves = positive_int("populations", populations), positive_int("moves", moves)
    if populations < 2:
        raise ValueError(f"populations must be 2 or more (their spread is the Monte Carlo error); got {populations}")
    tol = 1e-2 if tol is None else positive("tol", tol)
    law, c = fit.proposal, fit.lambda1 * fit.N1
    gauss = law.proposal if isinstance(law, Population) else law
    target = _tilt_target(fit.X, fit.activation, fit.lambda0, c)
    K = kernels.nngp(fit.X, lambda0=fit.lambda0, activation=fit.activation)
    rng = np.random.default_rng([fit.seed if seed is None else seed, 3])
    moments, tilts, h = [], [], 0.5
    bar = progress_bar(total=populations, desc="verify", unit="population", disable=not progress)
    for _ in range(populations):
        g, xi, _, _, h = _renewed(gauss, fit.m, fit.Sigma, target, moves, rng, h, X=fit.X,
                                   activation=fit.activation, lambda0=fit.lambda0, c=c)
        *LWC, log_tilt = _population_moments(replace(g, noise=xi).draw(fit.lambda0)[0], fit.X, fit.activation,
                                             fit.m, fit.Sigma, c, K, fit.N1, fit.T)
        moments.append(LWC)
        tilts.append(float(log_tilt.mean()))
        bar.update()
    bar.close()
    L_W, L_C = (np.stack([mo[i] for mo in moments]) for i in (0, 1))
    m_vec, cavity = fit.m.T.reshape(-1), fit.N1 if fit.cavity else None

    def update(keep):
        A, h, S, _ = _update(L_W[keep].mean(axis=0), L_C[keep].mean(axis=0), fit.m, fit.Sigma, fit.Y, fit.T, cavity)
        return A @ m_vec - h, S

    errors = (_jackknife(lambda keep: update(keep)[0], populations) / np.linalg.norm(fit.Y),
              _jackknife(lambda keep: update(keep)[1], populations) / np.linalg.norm(fit.Sigma))
    res = _field(L_W.mean(axis=0), L_C.mean(axis=0), fit.m, fit.Sigma, fit.Y, fit.T, cavity)[2]
    return Verification(residuals=tuple(map(float, res)), errors=tuple(map(float, errors)),
                        populations=populations, neurons=len(gauss.noise), moves=moves, tol=tol,
                        log_tilt=tuple(tilts))


@dataclass(eq=False)
class SharedFieldFit(FitShape):
    """A solve of (F1)-(F2), as :func:`solve` returns it.

    ``predict`` and ``generalization_error`` give (F3), as every fit's; ``verify`` tests the field on new
    populations moved to (F1).

    Attributes
    ----------
    m, Sigma : ndarray
        The field's mean (P, D) and covariance (PD, PD), output-major: the field each neuron's law (F1) is taken in
        (with ``cavity``, the field of the other N1 - 1 neurons' sites and the prior).
    cavity : bool
        Whether the field is the cavity of averaged expectation propagation, (C1)-(C2), instead of (F2).
    residuals : ndarray
        The residuals of every iteration, rows (|T m + N1 E[s y^T] - Y| / |Y|, |dSigma| / |Sigma|).
    mc_error : tuple
        The Monte Carlo error of the last residuals in the same norms (neurons moved to (F1) only).
    ess, pareto_k : float
        The effective sample size and Pareto k of the reweighted neurons' weights.
    converged : bool
        Whether the solve converged; ``reason`` says why not.
    proposal : Proposal or Population
        The law the neurons are drawn from, with their noise.
    """

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
    cavity: bool = False  # m, Sigma are the cavity field of averaged expectation propagation, (C1)-(C2)

    method = "shared_field"

    @property
    def Q(self) -> np.ndarray:
        r"""The counterpart of the kernel theory's order parameter, :math:`\lambda_1\langle v v^\top\rangle/N_1`
        (D x D)."""
        return self.lambda1 * self.readout_overlap

    @property
    def weights(self) -> np.ndarray:
        """The M neurons' weights (M, N0)."""
        return self.proposal.draw(self.lambda0)[0]

    @property
    def D(self) -> int:
        """The number of outputs."""
        return self.Y.shape[1]

    @property
    def n_iter(self) -> int:
        """The iterations the solve took."""
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
        """The mean and covariance of the outputs at new inputs, (F3).

        With neurons moved to (F1) (``proposal="mcmc"``) its averages are taken over ``populations`` populations,
        each ``steps`` Langevin steps on from the last at this field: (F3) is not linear in them (the inverse of
        T + N1 L), and one population of 10 000 neurons gives an ε_g 2.5% below that of 16 averaged (the linear
        teacher at α = 2). A ``fresh`` fit's populations are each drawn anew (the proposal's neurons moved ``moves``
        steps, or tempered), independent of the solve's.

        Parameters
        ----------
        X0 : array_like
            The test inputs (P0, N0).

        Returns
        -------
        Prediction
            The mean (P0, D) and covariance (P0, D, D).

        Raises
        ------
        RuntimeError
            Where the fit did not converge.
        """
        if not self.converged:
            raise RuntimeError(f"this fit did not converge ({self.reason}); its predictions would mean nothing. "
                               "Continue from a converged neighbour (init=) or raise neurons")
        X0 = self._test_inputs(X0)
        return self._combined(self._population_averages(X0), X0)

    def _population_averages(self, X0) -> dict:
        """The averages that (F3) is made of (:meth:`_averages`), over this fit's ``populations`` populations."""
        law = self.proposal
        if not isinstance(law, Population) or (self.populations == 1 and not self.fresh):
            return self._averages(X0, *self._law())
        target = _tilt_target(self.X, self.activation, self.lambda0, law.c)
        rng, gauss, xi, h, total = np.random.default_rng([self.seed, 2]), law.proposal, law.moved, law.step, None
        for k in range(self.populations):
            if self.fresh:  # each population independent of the solve's and of the others
                gauss, xi, _, _, h = _renewed(gauss, self.m, self.Sigma, target, self.moves, rng, h, X=self.X,
                                              activation=self.activation, lambda0=self.lambda0, c=law.c,
                                              tempered=self.tempered)
            elif k:
                xi, _, _, h = _moved(xi, target.at(gauss, self.m, self.Sigma), self.steps, rng, h=h)
            fit = replace(self, proposal=replace(law, proposal=gauss, moved=xi, m=self.m, Sigma=self.Sigma))
            avg = fit._averages(X0, *fit._law())
            total = avg if total is None else {key: total[key] + (avg[key] - total[key]) / (k + 1) for key in avg}
        return total

    def verify(self, populations: int = 4, moves: int = 240, seed: int | None = None, tol: float | None = None,
               progress: bool = False) -> Verification:
        r"""Test whether this fit's field is a fixed point of (F1)'s law, on new neurons.

        ``populations`` populations, each drawn anew from the proposal fitted at the field and moved ``moves``
        Langevin steps at it (independent of the solve's and of each other), give (F2)'s moments; the residuals of
        the field against their average are reported with their Monte Carlo error (the jackknife over the
        populations). The solve's own residuals are measured against moments averaged over its iterations, each
        population at the field of its iteration: where the field wanders, or its populations are short of (F1), they
        can be small while the field is no fixed point (docs/log/validity.md, "Is the averaged field a fixed point?").
        Whether ``moves`` steps reach (F1) is measured by verifying again with more: where the residuals move by more
        than their errors, or the populations' mean log tilt still rises, they had not. On MNIST at alpha = 2, (F1)'s
        specialists form over 200 steps and more; the defaults take 6 minutes at P = 200 with 4 000 neurons on 2
        cores. A fit of any proposal and state, converged or not, can be verified.

        Parameters
        ----------
        populations : int, optional
            New populations, 2 or more (their spread is the Monte Carlo error).
        moves : int, optional
            Langevin steps of each population at the field.
        seed : int, optional
            The populations' random stream; the fit's own seed by default.
        tol : float, optional
            The residual below which the field is a fixed point (1e-2 by default).
        progress : bool, optional
            Show a bar over the populations.

        Returns
        -------
        Verification
            The residuals, their errors and the verdict.
        """
        return _verify(self, populations=populations, moves=moves, seed=seed, tol=tol, progress=progress)

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
        EC_xs = _moment(sx, s, rho, C, dKx)  # E[C (x) s* s^T], (D, P0, D, P): the mean's response to m
        return dict(L=L, Eys=Eys, EC_xs=EC_xs,
                    Ey_sx=np.einsum("apbq,qb->pa", EC_xs, self.m),  # E[s* y_a] = E[C s* s] m
                    EC_s2=((sx**2).T @ rC - rC.sum(axis=0)[None] * dKxx[:, None]).reshape(-1, D, D) / M,
                    Eyy_s2=((sx**2).T @ ryy).reshape(-1, D, D) / M,
                    nW=_moment(sx, s, rho, W, dKx))

    def _combined(self, avg, X0) -> Prediction:
        r"""(F3) from its averages. At a cavity field (C4): each neuron's output covaries with the other N1 - 1
        through the field they share, :math:`N_1(N_1-1)\,n^\top(T + (N_1-1)\tilde L)^{-1}n` for (F3)'s
        :math:`N_1^2 n^\top(T + N_1\tilde L)^{-1}n` (its own share is in its law at the cavity): exact at N1 = 1, (F3)
        at infinite width."""
        P, D, N1 = self.P, self.D, self.N1
        others = N1 - 1 if self.cavity else N1  # the neurons whose field one neuron's output responds with (C4)
        L = self.T * np.eye(P * D) + others * (avg["L"] - np.outer(avg["Eys"], avg["Eys"]))
        Ey_sx = avg["Ey_sx"]
        n = avg["nW"] - np.einsum("pa,bq->apbq", Ey_sx, avg["Eys"].reshape(D, P))  # (D, P0, D, P)
        n = np.moveaxis(n, 1, 0).reshape(len(X0), D, P * D)  # (P0, a, (b, mu))
        Linv_n = np.linalg.solve(L, n.reshape(-1, P * D).T).T.reshape(n.shape)
        cov = (N1 * (avg["EC_s2"] + avg["Eyy_s2"]) - N1 * np.einsum("pa,pb->pab", Ey_sx, Ey_sx)
               - N1 * others * np.einsum("pak,pbk->pab", n, Linv_n))
        return Prediction(mean=N1 * Ey_sx, cov=0.5 * (cov + np.swapaxes(cov, 1, 2)))
