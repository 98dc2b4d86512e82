"""The solve of (F1)-(F2) (:func:`solve`) and its continuation over a series of widths (:func:`continued`)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from ... import kernels
from ..._checks import data_pair, positive, positive_int
from ...network import get_activation
from ..fit import solve_renormalized as solve_exact
from .averaged import _AVERAGED_ITER, _Checkpoint, _averaged, _key
from .equations import (_K_BAD, _control, _control_weights, _ess, _field, _guarded_moments, _normalized, _per_neuron,
                        _positive, pareto_k)
from .fit import SharedFieldFit
from .moves import Population, _moved, _renewed, _tilt_target
from .proposals import Proposal, _FITS, _fitted, proposal_basis


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
        """Forget the past steps (a new round's neurons); the scale and the best residual stay."""
        self.dx, self.df, self.last = [], [], None

    def step(self, m, m_new, Sigma, Sigma_new):
        """The next field (m, Sigma) from the present one and the field (F2) gives from it (m_new, Sigma_new)."""
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


def _cavity_start(fit: SharedFieldFit, N1: float) -> SharedFieldFit:
    r"""The cavity field that a shared field's fixed point gives (C3): its precision and shift,
    :math:`A = \Sigma^{-1}` and :math:`h = A m`, are the prior's and N1 equal sites', and the cavity holds N1 - 1 of
    them, :math:`A_\backslash = T + \tfrac{N_1-1}{N_1}(A - T)`, :math:`h_\backslash = y + \tfrac{N_1-1}{N_1}(h - y)`.
    At the width N1 of the cavity solve (``fit`` may be at another: continuation). Averaged EP started there
    converges where started from the exact theory's field it lands on improper cavities
    (negative sites: on P = 5 at N1 = 4, T = 0.1)."""
    y, share, eye = fit.Y.T.reshape(-1), (N1 - 1) / N1, np.eye(fit.Y.size)
    A = np.linalg.inv(fit.Sigma)
    A_c = fit.T * eye + share * (0.5 * (A + A.T) - fit.T * eye)
    h_c = y + share * (A @ fit.m.T.reshape(-1) - y)
    Sigma = np.linalg.inv(A_c)
    return replace(fit, m=np.linalg.solve(A_c, h_c).reshape(fit.D, fit.P).T, Sigma=0.5 * (Sigma + Sigma.T),
                   cavity=True)


#: the most rounds of a ``"fitted"`` solve (a fit of the proposal at the current field, then the field iterated on
#: the fitted neurons until it settles)
_ROUNDS = 4
#: the neurons' laws of :func:`solve`
PROPOSALS = ("fitted", "mcmc", "prior")


def solve(X, Y, *, N1: float, T: float, lambda1: float = 1.0, lambda0: float = 1.0, activation: str = "erf",
          neurons: int = 40_000, damping: float | None = None, maxiter: int | None = None, tol: float | None = None,
          min_ess: float = 100.0, proposal: str = "mcmc", accelerate: bool = True, memory: int = 5,
          init: SharedFieldFit | None = None, seed: int = 0, moves: int = 30, steps: int = 3,
          populations: int = 16, fresh: bool = False, tempered: bool = False, cavity: bool = False,
          progress: bool = False, checkpoint=None) -> SharedFieldFit:
    """Solve (F2) for the shared field, with averages over (F1) from a population of neurons.

    The default (``"mcmc"``) moves the fitted proposal's neurons to (F1) exactly by ``moves`` Langevin steps, then
    runs ``maxiter`` (80) iterations of stochastic approximation: ``steps`` steps of the population each, the moments
    of (F2) averaged over the iterations, the field moved ``damping`` (0.3) of the way to their solution. It has
    converged where the residuals of the field against the averaged moments fall below ``tol`` (1e-2) and so does
    the Monte Carlo error of the averaged moments (``mc_error`` of the fit: a residual within the noise is no fixed
    point). A ``maxiter`` above 80 is a cap: past the 80th iteration the solve stops where both are below ``tol``.
    Predictions average over ``populations`` populations.

    With a Gaussian proposal (``"fitted"``, or the ``"prior"`` alone) the solve runs fixed-point iterations on fixed
    neurons, ``damping`` (0.6) of each step taken, mixed over the last ``memory`` steps (Anderson, ``accelerate``),
    in rounds: the proposal fitted at the current field, then (F2) iterated until the residuals fall below ``tol``
    (1e-5); where the settled field's weights have Pareto k above 0.7 a new round fits the proposal again.

    Where it does not converge, ``converged`` is False and ``reason`` says why: the weights' tail, an effective
    sample size below ``min_ess``, residuals that did not settle, or a number that stopped being finite.

    Parameters
    ----------
    X : array_like
        Training inputs (P, N0).
    Y : array_like
        Training outputs (P, D).
    N1 : float
        The hidden width.
    T : float
        The temperature.
    lambda1, lambda0 : float, optional
        The prior precisions of the readout and of the hidden weights.
    activation : str, optional
        The hidden activation (the theory is checked for odd ones: erf, tanh, linear).
    neurons : int, optional
        The neurons M that the averages over (F1) are taken from. With 10 000 the Monte Carlo error biases ε_g by up
        to 10% on the linear teacher at α = 1; between 40 000 and 80 000 ε_g differs by about 1% at P = 200.
    damping : float, optional
        The share of each fixed-point step taken, in (0, 1]; 0.3 (``"mcmc"``) or 0.6 by default.
    maxiter : int, optional
        Iterations in all rounds together; 80 (``"mcmc"``) or 40 by default.
    tol : float, optional
        The residual below which the field has converged; 1e-2 (``"mcmc"``) or 1e-5 by default.
    min_ess : float, optional
        The effective sample size below which reweighted neurons have degenerated (Gaussian proposals).
    proposal : {"mcmc", "fitted", "prior"}, optional
        The neurons' law: moved to (F1) exactly, a Gaussian fitted to the tilted law, or the prior.
    accelerate : bool, optional
        Anderson mixing of the fixed-point steps (Gaussian proposals).
    memory : int, optional
        Past steps that Anderson mixing combines; 0 is damping alone.
    init : SharedFieldFit, optional
        A fit at a neighbouring width to start from, with its neurons and proposal (continuation in α); by default
        the solve starts from the exact theory's field.
    seed : int, optional
        The neurons' random stream.
    moves : int, optional
        Langevin steps that take a population from the fitted proposal to (F1).
    steps : int, optional
        Langevin steps of the population at each iteration (``"mcmc"``).
    populations : int, optional
        Populations that a prediction averages over (``"mcmc"``).
    fresh : bool, optional
        Draw each iteration's population (and each of a prediction's) anew from the proposal fitted at the field and
        move it ``moves`` steps, independent of the last, instead of moving one population on ``steps`` steps an
        iteration (whose slowly decorrelating specialists the field can fit: docs/log/validity.md, "Is the solve's field
        a fixed point of (F1)'s law?"). Costs ``moves`` / ``steps`` times an iteration. ``"mcmc"`` only.
    tempered : bool, optional
        With ``fresh``: take each population to (F1) by adaptive tempered sequential Monte Carlo (stages of 10
        Langevin steps, as many as the proposal's weights ask for) instead of ``moves`` steps.
    cavity : bool, optional
        Take each neuron in the cavity field of the other N1 - 1 (averaged expectation propagation, (C1)-(C2) of
        :func:`~renormpp.theory.shared_field.equations._update`) instead of the field of all N1, its own share
        included (F2); solved from the shared field's fixed point with the same settings (checkpointed beside
        ``checkpoint`` as ``<stem>-shared.npz``), or from ``init``. Exact at N1 = 1 (with ``proposal="fitted"``
        where one neuron's law has separated modes: the moved population may miss one), (F2) at infinite width;
        between, its evidence and readout overlaps are about the shared field's (docs/log/validity.md, "The cavity
        field in the package"). N1 >= 1.
    progress : bool, optional
        A bar over the iterations with their residuals (``"mcmc"``; a solve takes minutes to an hour at
        P = 200-1000), one line per iteration where stderr is not a terminal.
    checkpoint : str or Path, optional
        A path ``*.npz`` where the ``"mcmc"`` solve saves its state every minute and at its end. Called again with the
        same data, start and settings it continues from there to the same field as a solve without a break (a
        finished one returns at once).

    Returns
    -------
    SharedFieldFit
        The field, its residuals and neurons, and whether it converged.

    Raises
    ------
    ValueError
        On a setting out of its range, an ``init`` on other inputs, or a checkpoint of another solve.
    """
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
    if cavity not in (True, False) or (cavity and N1 < 1):
        raise ValueError(f"cavity must be True or False, and True only for N1 >= 1 (the cavity holds the other "
                         f"N1 - 1 neurons); got cavity={cavity!r}, N1={N1:g}")
    moves, steps, populations = (positive_int(k, v) for k, v in (("moves", moves), ("steps", steps),
                                                                  ("populations", populations)))
    if cavity and (init is None or not init.cavity):  # start from the shared field's fixed point (C3)
        settings = dict(lambda1=lambda1, lambda0=lambda0, activation=activation, neurons=neurons, damping=damping,
                        maxiter=maxiter, tol=tol, min_ess=min_ess, proposal=proposal, accelerate=accelerate,
                        memory=memory, seed=seed, moves=moves, steps=steps, populations=populations, fresh=fresh,
                        tempered=tempered, progress=progress)
        shared = None if checkpoint is None else Path(checkpoint).with_name(f"{Path(checkpoint).stem}-shared.npz")
        base = init if init is not None else solve(X, Y, N1=N1, T=T, **settings, checkpoint=shared)
        if not (np.all(np.isfinite(base.m)) and np.all(np.isfinite(base.Sigma))):  # (a start: converged or not)
            return replace(base, cavity=True, reason=f"the shared field that starts the cavity failed ({base.reason})")
        return solve(X, Y, N1=N1, T=T, **settings, init=_cavity_start(base, N1), cavity=True, checkpoint=checkpoint)
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
        xi, rates, levels, h = _moved(start, target.at(gauss, m, Sigma), moves, rng)
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
                                                 **({"tempered": True} if tempered else {}),
                                                 **({"cavity": True} if cavity else {})))
            state = store.load()
        if state is None:
            law = move(law, m, Sigma)
        else:  # a saved solve: its neurons (their noise now the moved coordinates) and its moves' stream
            gauss = Proposal(state["xi"], state["basis"], state["mean"], state["chol"])
            law = Population(gauss, state["xi"], m.copy(), Sigma.copy(), c, X, activation, (), (), float(state["h"]))
        m, Sigma, law, residuals, error, reason = _averaged(law, m, Sigma, target, Y, N1=N1, T=T, lambda0=lambda0, K=K,
                                                     damping=damping, maxiter=maxiter, tol=tol, steps=steps, rng=rng,
                                                     progress=progress, store=store, state=state,
                                                     renew=renew if fresh else None,
                                                     cavity=N1 if cavity else None)
        return SharedFieldFit(X=X, Y=Y, N1=N1, T=T, lambda1=lambda1, lambda0=lambda0, activation=activation, m=m,
                              Sigma=Sigma, residuals=residuals, ess=float(M), pareto_k=0.0, converged=not reason,
                              reason=reason, proposal=law, seed=seed, steps=steps, populations=populations,
                              fresh=fresh, moves=moves, tempered=tempered, mc_error=error, cavity=cavity)
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
            m_new, Sigma_new, res = _field(*_guarded_moments(s, rho, C, y, dK, N1, T), m, Sigma, Y, T,
                                           N1 if cavity else None)
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
                          converged=not reason, reason=reason, proposal=law, seed=seed, cavity=cavity)


def continued(X, Y, widths, checkpoints=None, **kwargs):
    """Solve a series of widths, widest first, each continued from the last converged one.

    Each solve starts from the last converged fit (its field, neurons and proposal: continuation in α); the first
    from the exact theory's field. On MNIST (0, 1) at P = 200 the solve at α = 2 from the exact theory's field
    degenerates (effective sample size 1); continued from α = 1 it converges (+19% against the sampled networks,
    docs/validity.md).

    Parameters
    ----------
    X, Y : array_like
        Training inputs (P, N0) and outputs (P, D).
    widths : iterable of float
        The hidden widths N1.
    checkpoints : str or Path, optional
        A folder for each width's checkpoint (``N1=<width>.npz``; see :func:`solve`'s ``checkpoint``).
    **kwargs
        Those of :func:`solve`.

    Yields
    ------
    tuple of (float, SharedFieldFit)
        ``(N1, fit)``, as each width is done.
    """
    init = None
    for N1 in sorted(widths, reverse=True):
        if checkpoints is not None:
            Path(checkpoints).mkdir(parents=True, exist_ok=True)
            kwargs["checkpoint"] = Path(checkpoints) / f"N1={N1:g}.npz"
        fit = solve(X, Y, N1=N1, init=init, **kwargs)
        yield N1, fit
        if fit.converged:
            init = fit
