r"""Specialists in the field of an adaptive bulk: k neurons kept exact, the other :math:`N_b = N_1 - k` following the
shared field.

The specialist theory (:mod:`renormpp.theory.specialists`) keeps k neurons exact in the field of a bulk renormalized
by a D x D matrix Q; the shared-field theory (:mod:`renormpp.theory.shared_field`) gives each neuron its own law in
one Gaussian field. Here the bulk is the shared field's: its :math:`N_b` neurons each follow (F1) in the field of all
(the specialists included), and the specialists stay exact in the bulk's field. k = 0 is the shared field, k = N1 the
finite network's exact posterior (v integrated out); both limits hold by construction and are tested against dense
algebra.

**The specialists' law.** With the readout integrated out, the k specialists' features
:math:`\tilde S = \sigma(X W_s^\top/\sqrt{N_0})/\sqrt{c}` (P x k, :math:`c = \lambda_1 N_1`) enter the conjugate
field's quadratic form exactly, :math:`T_s = T + \mathbb 1_D\otimes\tilde S\tilde S^\top` (PD x PD, output-major);
the bulk enters as the shared field's moments :math:`L_W = N_b E[W\otimes ss^\top]`,
:math:`L_C = N_b E[(c+q)^{-1}\otimes ss^\top]` over (F1). The field given :math:`W_s` is Gaussian,

.. math::
    m(W_s) = (T_s + L_C)^{-1} y,\qquad \Sigma(W_s) = (T_s + L_W)^{-1},                                  \tag{FS1}

and the specialists' law is the one whose response to :math:`T_s` is that field's,
:math:`\partial\log p/\partial T_s = -\tfrac12(\Sigma - m m^\top)`:

.. math::
    p(W_s) \propto \mathcal N(W_s; 0, 1/\lambda_0)\,
        \exp\Big(-\tfrac12\,y^\top (T_s + L_C)^{-1} y - \tfrac12\log\det(T_s + L_W)\Big),                \tag{FS2}

at k = N1 (no bulk, L = 0) the exact marginal likelihood :math:`\mathcal N(Y; 0, T + \mathbb 1_D\otimes
SS^\top/c)` of the finite network. Both are rank-Dk updates of :math:`T + L` (Woodbury): one evaluation costs
:math:`O((PD)^2 Dk)`.

**The bulk** follows (F1) of :mod:`renormpp.theory.shared_field` at the field of all, the field (FS1) averaged over the
specialists' law, :math:`\bar m = \langle m(W_s)\rangle`, :math:`\bar\Sigma = \langle\Sigma(W_s)\rangle`
(FS3): at k = 0 this is (F2) with :math:`N_1` neurons, the shared field itself.

**Predictions** given :math:`W_s` are (F3) with :math:`T \to T_s` and the specialists' test features
:math:`\tilde S_*` added: the mean :math:`\Gamma = N_b E[(c+q)^{-1}\otimes s_* s^\top]\,m(W_s) + \tilde S_*\tilde
S^\top m(W_s)` and the covariance

.. math::
    \Sigma_* = N_b\big(E[(c+q)^{-1}s_*^2] + E[s_*^2 yy^\top] - E[s_*y]E[s_*y]^\top\big) + |\tilde S_*|^2
        - n^\top\big(T_s + N_b L\big)^{-1} n,\qquad n = N_b\,n_{\rm bulk} + \mathbb 1_D\otimes\tilde S\tilde S_*^\top,
    \tag{FS4}

averaged over the specialists' law as a mixture (the mean of the covariances plus the covariance of the means). The
readout overlaps are the bulk's :math:`N_b E[(c+q)^{-1} + yy^\top]` plus each specialist's :math:`\mu\mu^\top +
C`, its readout :math:`v/\sqrt{N_1}` Gaussian of mean :math:`\mu_a = \tilde s^\top m_a/\sqrt c` and covariance
:math:`C_{ab} = (\delta_{ab} - \tilde s^\top\Sigma_{ab}\tilde s)/c` (the exact posterior of v given the features).

**How it is solved.** Outer iterations alternate the specialists' draws (the sampler passed in, on (FS2) at the bulk's
moments) with ``inner`` iterations of the bulk: its population moved ``steps`` Langevin steps to (F1) at the field
of all, its moments following the field until the last outer iteration and averaged over its iterations (the shared
field's stochastic approximation: a population far from (F1), forming specialists over hundreds of steps, makes
moments averaged over all iterations lag behind it) and the field stepped towards (FS3) of the present draws.

What it does not hold: the bulk's law depends on the specialists only through the averaged field; the bulk's own
fluctuation terms of (FS4) are those of that field.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .. import kernels
from .._checks import positive, positive_int
from ..mcmc import sampling
from ..network import ActivationLike, hidden
from ..progress import bar as progress_bar
from .prediction import Prediction
from .shared_field.equations import _population_moments
from .shared_field.fit import SharedFieldFit
from .shared_field.moves import Population, _moved, _renewed, _tilt_target
from .shared_field.proposals import Proposal, proposal_basis
from .specialists import ExplicitNeurons, _SplitData, _problem, _start_Q, _templates, sample_law

__all__ = ["FieldSpecialistFit", "solve"]


# ----------------------------------------------------------------------------------------------------------------
# (FS1)-(FS3): the field given the specialists, their law, the field of all
# ----------------------------------------------------------------------------------------------------------------
def _lift(St, D: int) -> np.ndarray:
    r""":math:`\mathbb 1_D\otimes\tilde S` of draws ``St`` (n, P, k): (n, PD, Dk), rows output-major (a, p),
    columns (a, i)."""
    n, P, k = St.shape
    return np.einsum("ab,npi->napbi", np.eye(D), St).reshape(n, P * D, D * k)


def _woodbury(B, U):
    r"""For :math:`A = B^{-1}` and each draw's :math:`U_j` (n, PD, r): :math:`BU_j` (n, PD, r) and
    :math:`(1 + U_j^\top B U_j)^{-1}` (n, r, r), so that :math:`(A + U_jU_j^\top)^{-1} = B - BU_j M_j^{-1} U_j^\top B`."""
    BU = np.einsum("pq,nqr->npr", B, U)
    M = np.eye(U.shape[-1]) + np.einsum("npr,nps->nrs", U, BU)
    return BU, np.linalg.inv(M)


def _inverses(L_W, L_C, T):
    """:math:`(T + L_W)^{-1}` and :math:`(T + L_C)^{-1}`, symmetrized."""
    eye = np.eye(len(L_W))
    return tuple(0.5 * (B + B.T) for B in (np.linalg.inv(T * eye + L) for L in (L_W, L_C)))


def fields(L_W, L_C, St, Y, T):
    r"""(FS1) per draw and (FS3): the field's mean given each draw ``St`` (n, P, k) of the scaled specialists'
    features, (n, P, D), and the field of all, :math:`(\bar m, \bar\Sigma)` ((P, D), (PD, PD)). With no
    specialist (k = 0) it is (F2)'s field of the moments."""
    P, D = Y.shape
    y = Y.T.reshape(-1)
    B_W, B_C = _inverses(L_W, L_C, T)
    if St.shape[-1] == 0:
        m = (B_C @ y).reshape(D, P).T
        return m[None], m, B_W
    U = _lift(St, D)
    BU, Minv = _woodbury(B_C, U)
    By = B_C @ y
    m = By[None] - np.einsum("npr,nrs,nqs,q->np", BU, Minv, BU, y)
    BU, Minv = _woodbury(B_W, U)
    Sigma = B_W - np.einsum("npr,nrs,nqs->pq", BU, Minv, BU) / len(U)
    m = m.reshape(len(U), D, P).transpose(0, 2, 1)
    return m, m.mean(axis=0), 0.5 * (Sigma + Sigma.T)


def _log_density(pb: _SplitData, L_W, L_C):
    r"""(FS2) up to a constant, a JAX function of W_s (k, N0) in float64 (Woodbury on :math:`T + L`):
    :math:`-\tfrac{\lambda_0}2|W_s|^2 - \tfrac12 y^\top(T + L_C)^{-1}y` plus :func:`_explicit_part`."""
    import jax.numpy as jnp

    B_W, B_C = (jnp.asarray(B) for B in _inverses(L_W, L_C, pb.T))
    y = jnp.asarray(pb.Y.T.reshape(-1))
    By = B_C @ y
    X, c = jnp.asarray(pb.X), np.sqrt(pb.lambda1 * pb.N1)
    part = _explicit_part(pb.activation)

    def log_p(W):
        return -0.5 * pb.lambda0 * jnp.sum(W * W) - 0.5 * y @ By + part(W, X, c, By, B_C, B_W)

    return log_p


def _explicit_part(activation):
    r"""The explicit neurons' share of (FS2), ``part(W, X, c, By, B_C, B_W)``: with :math:`U = \mathbb 1_D\otimes
    \tilde S` of the scaled features :math:`\tilde S = \sigma(XW^\top/\sqrt{N_0})/\sqrt{\lambda_1 N_1}` (the
    argument ``c`` is that square root) and :math:`B = (T + L)^{-1}`,
    :math:`\tfrac12 b^\top(1 + U^\top B_C U)^{-1}b - \tfrac12\log\det(1 + U^\top B_W U)`, :math:`b = U^\top B_C y`;
    so that (FS2)'s :math:`-\tfrac12 y^\top(T_s + L_C)^{-1}y - \tfrac12\log\det(T_s + L_W)` is this plus its value
    at no specialist (Woodbury and the matrix determinant lemma)."""
    import jax.numpy as jnp

    def part(W, X, c, By, B_C, B_W):
        P, D = X.shape[0], len(By) // X.shape[0]
        S = hidden({"w": W}, X, activation) / c  # (P, k)
        U = jnp.einsum("ab,pi->apbi", jnp.eye(D), S).reshape(P * D, D * W.shape[0])
        I = jnp.eye(U.shape[1])
        w = jnp.linalg.solve(jnp.linalg.cholesky(I + U.T @ (B_C @ U)), U.T @ By)
        Lw = jnp.linalg.cholesky(I + U.T @ (B_W @ U))
        return 0.5 * w @ w - jnp.sum(jnp.log(jnp.diagonal(Lw)))

    return part


# ----------------------------------------------------------------------------------------------------------------
# the fit
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class FieldSpecialistFit(ExplicitNeurons):
    """A solve of (FS1)-(FS3): the specialists' draws ``W`` (n, k, N0), the bulk's moments ``L_W``, ``L_C`` (PD,
    PD) and its population (``bulk``, a :class:`~renormpp.theory.shared_field.SharedFieldFit` at the field of all,
    whose averages (F3) the predictions (FS4) are made of), with the protocol of every fit
    (:data:`renormpp.theory.PROTOCOL`).

    Attributes
    ----------
    W : numpy.ndarray, shape (n, k, N0)
        Draws of the specialists' weights from (FS2), ``chains`` chains one after the other.
    k : int
        The number of explicit neurons.
    m, Sigma : numpy.ndarray
        The field of all (FS3), (P, D) and (PD, PD).
    history : list of float
        The relative change of the field's mean in each outer iteration.
    chains : int
        The chains the draws come from.
    noise : float
        The bulk's own noise in the field's mean (relative): half the difference of the means that two halves of its
        averaged moments give (alternate blocks of five iterations).
    """

    W: np.ndarray
    k: int
    m: np.ndarray
    Sigma: np.ndarray
    L_W: np.ndarray
    L_C: np.ndarray
    history: list
    bulk: SharedFieldFit | None
    _pb: _SplitData
    chains: int = 1
    rtol: float = 0.03
    noise: float = 0.0
    method = "field_specialists"

    @property
    def Q(self) -> np.ndarray:
        r""":math:`\lambda_1\langle vv^\top\rangle/N_1` (D x D), the counterpart of the kernel theory's Q."""
        return self.lambda1 * self.readout_overlap

    @property
    def converged(self) -> bool:
        """Whether the last outer iteration moved the field's mean by at most ``rtol`` (relative), or by no more than
        the bulk's moments' own noise explains (three times ``noise``)."""
        return not self.reason

    @property
    def reason(self) -> str:
        """Why the fit has not converged; "" where it has."""
        if not self.history or self.history[-1] <= max(self.rtol, 3 * self.noise):
            return ""
        return (f"the outer iteration did not settle: its last relative change of the field's mean is "
                f"{self.history[-1]:.2g}, beyond rtol = {self.rtol:g} and three times the bulk's noise "
                f"({self.noise:.2g}); raise iterations, inner or neurons")

    # --- per draw -----------------------------------------------------------------------------------------------
    def _features(self, X=None):
        """The scaled specialists' features (n, P, k) at ``X`` (the training inputs by default)."""
        return self._pb.scaled_features(self.W, X)

    def _draw_fields(self):
        """The scaled features of the draws (n, P, k) and the field's mean given each (n, P, D) (FS1); with no
        specialist, the field the bulk's neurons were moved at (so that k = 0 is (F3) itself)."""
        St = self._features()
        if not self.k:
            return St, self.bulk.m[None]
        m, _, _ = fields(self.L_W, self.L_C, St, self.Y, self.T)
        return St, m

    def predict_per_draw(self, X0):
        """(FS4) given each draw of the specialists: the mean (n, P0, D) and covariance (n, P0, D, D)."""
        pb, X0 = self._pb, self._test_inputs(X0)
        P, D = self.Y.shape
        Nb = self.N1 - self.k
        St, m = self._draw_fields()
        S0 = self._features(X0)  # (n, P0, k)
        n_draws, P0 = len(St), len(X0)
        m_vec = m.transpose(0, 2, 1).reshape(n_draws, P * D)
        if Nb:
            avg = self.bulk._population_averages(X0)
            R = Nb * avg["EC_xs"].reshape(D * P0, P * D)  # (a, x) x (b, p)
            mean = (m_vec @ R.T).reshape(n_draws, D, P0).transpose(0, 2, 1)
            base = Nb * (avg["EC_s2"] + avg["Eyy_s2"] - np.einsum("pa,pb->pab", avg["Ey_sx"], avg["Ey_sx"]))
            Lb = self.T * np.eye(P * D) + Nb * (avg["L"] - np.outer(avg["Eys"], avg["Eys"]))
            nb = Nb * np.moveaxis(avg["nW"] - np.einsum("pa,bq->apbq", avg["Ey_sx"], avg["Eys"].reshape(D, P)),
                                  1, 0).reshape(P0, D, P * D)
        else:
            mean = np.zeros((n_draws, P0, D))
            base = np.zeros((P0, D, D))
            Lb = self.T * np.eye(P * D)
            nb = np.zeros((P0, D, P * D))
        B = np.linalg.inv(Lb)
        B = 0.5 * (B + B.T)
        nBn = np.einsum("xar,rs,xbs->xab", nb, B, nb)
        cov = np.empty((n_draws, P0, D, D))
        if not self.k:
            cov[:] = base - nBn
            return mean, cov
        mean = mean + np.einsum("nxi,npi,npa->nxa", S0, St, m)
        U = _lift(St, D)  # (n, PD, Dk)
        BU, Minv = _woodbury(B, U)
        UBU = np.einsum("npr,nps->nrs", U, BU).reshape(n_draws, D, self.k, D, self.k)
        Z = np.einsum("xar,nrs->nxas", nb, BU).reshape(n_draws, P0, D, D, self.k)  # n_b B U, columns (b, i)
        eye = np.eye(D)
        # F[(x, a), (b, i)] = delta_ab S0[x, i]: the specialists' part of n, F U^T
        ZF = np.einsum("nxabi,nxi->nxab", Z, S0)  # n_b B U F^T
        FUBUF = np.einsum("nxi,naibl,nxl->nxab", S0, UBU, S0)
        G = Z + np.einsum("nxi,naibl->nxabl", S0, UBU)  # n B U, (n, x, a, (b, l))
        G = G.reshape(n_draws, P0, D, D * self.k)
        quad = nBn[None] + ZF + np.swapaxes(ZF, -1, -2) + FUBUF - np.einsum("nxar,nrs,nxbs->nxab", G, Minv, G)
        cov[:] = base[None] + np.einsum("nxi,nxi,ab->nxab", S0, S0, eye) - quad
        return mean, 0.5 * (cov + np.swapaxes(cov, -1, -2))

    def predict(self, X0) -> Prediction:
        """The mean (P0, D) and covariance (P0, D, D) of f at ``X0``: (FS4) mixed over the specialists' draws (the
        mean of their covariances plus the covariance of their means).

        Raises
        ------
        RuntimeError
            Where the fit did not converge.
        """
        if not self.converged:
            raise RuntimeError(f"this fit did not converge ({self.reason}); its predictions would mean nothing")
        mean_n, cov_n = self.predict_per_draw(X0)
        mean = mean_n.mean(axis=0)
        dev = mean_n - mean
        return Prediction(mean=mean, cov=cov_n.mean(axis=0) + np.einsum("nxa,nxb->xab", dev, dev) / len(dev))

    def eps_g_per_draw(self, X0, Y0) -> np.ndarray:
        """ε_g given each draw of the specialists (n,); its mean is ``generalization_error``."""
        X0 = self._test_inputs(X0)
        Y0 = np.asarray(Y0, np.float64).reshape(len(X0), -1)
        mean, cov = self.predict_per_draw(X0)
        return np.mean(np.sum((Y0[None] - mean) ** 2, axis=-1) + np.trace(cov, axis1=-2, axis2=-1), axis=-1)

    def overlap_per_draw(self) -> np.ndarray:
        r"""The readout overlaps :math:`\langle vv^\top\rangle/N_1` given each draw of the specialists, (n, D, D)."""
        P, D = self.Y.shape
        Nb, c = self.N1 - self.k, self.lambda1 * self.N1
        bulk = Nb / self.N1 * self.bulk.readout_overlap if Nb else np.zeros((D, D))
        if not self.k:
            return bulk[None]
        St, m = self._draw_fields()
        U = _lift(St, D)
        B_W, _ = _inverses(self.L_W, self.L_C, self.T)
        BU, Minv = _woodbury(B_W, U)
        # s~^T Sigma_ab s~ per specialist: (U^T Sigma U) with Sigma = B - BU M^-1 U^T B
        UBU = np.einsum("npr,nps->nrs", U, BU)
        USU = (UBU - UBU @ Minv @ UBU).reshape(len(U), D, self.k, D, self.k)
        mu = np.einsum("npi,npa->nia", St, m)  # s~^T m_a: v/sqrt(N1) has mean mu / sqrt(c)... times sqrt(c)
        cov = (np.eye(D)[None, None] - np.einsum("naibi->niab", USU)) / c
        return bulk[None] + np.einsum("nia,nib->nab", mu, mu) / c + cov.sum(axis=1)

    @property
    def readout_overlap(self) -> np.ndarray:
        r""":math:`\langle vv^\top\rangle/N_1` (D, D): the bulk's and the specialists' (see the module)."""
        return self.overlap_per_draw().mean(axis=0)


# ----------------------------------------------------------------------------------------------------------------
# the solve
# ----------------------------------------------------------------------------------------------------------------
def solve(X, Y, *, N1: int, k: int, T: float, lambda0: float = 1.0, lambda1: float = 1.0,
          activation: ActivationLike = "erf", neurons: int = 4000, iterations: int = 6, inner: int = 20,
          moves: int = 200, steps: int = 10, damping: float = 0.5, average: int | None = None, num_warmup: int = 300,
          num_samples: int = 100,
          chains: int = 4, thinning: int = 2, rtol: float = 0.03, populations: int = 16, seed: int = 0,
          sampler=None, progress: bool = False) -> FieldSpecialistFit:
    r"""Solve (FS1)-(FS3) with ``k`` explicit neurons in the field of an adaptive bulk of N1 - k.

    Parameters
    ----------
    X, Y : array_like
        Training inputs (P, N0) and labels (P, D).
    N1 : int
        The network's width.
    k : int
        Explicit neurons, 0 <= k <= N1 (k = 0: the shared field; k = N1: the exact posterior).
    T : float
        Temperature.
    lambda0, lambda1 : float, default 1.0
        Prior precisions of the hidden and readout weights.
    activation : str or callable, default "erf"
        An odd activation.
    neurons : int, default 4000
        The bulk's population, moved to (F1).
    iterations : int, default 6
        Outer iterations (the specialists drawn at the bulk's moments, then the bulk at their field).
    inner : int, default 20
        The bulk's iterations per outer iteration: the moments follow the field (weight ``damping``) until the last
        outer iteration, and are averaged over its iterations (weights 1/j).
    moves, steps : int, default 200 and 10
        Langevin steps of the bulk's first population, and of each inner iteration. (F1)'s specialists form over
        hundreds of steps: on the hyperplane problem at N1 = 6 (tests/test_field_specialists.py) 30 and 3 left the
        population forming them through the solve, and ε_g moved by 10% from one seed to the next; 200 and 10 agree
        within 3% over seeds.
    damping : float, default 0.5
        The share of the way to (FS3) the field steps in each inner iteration.
    average : int, optional
        The bulk's iterations of the last outer iteration, whose moments are averaged (default ``inner``). More
        lower the field's noise (on the hyperplane problem at N1 = 6, 80 in place of 20 took ``noise`` from 0.5-0.8%
        to 0.2%), but the field still moves while the average forms, so the last outer step grows with them.
    num_warmup, num_samples, chains, thinning : int
        The specialists' sampler per outer iteration; the chains continue, half of them start on the label-contrast
        templates.
    rtol : float, default 0.03
        The outer iteration has converged where its last relative change of the field's mean is at most this.
    populations : int, default 16
        The bulk's populations that the predictions (FS4) average over, each ``steps`` Langevin steps on from the
        last at the field of all (as the shared field's :meth:`~renormpp.theory.shared_field.SharedFieldFit.predict`):
        the mean multiplies the bulk's moments by the field's mean, large where T is small, so one population's noise
        moves ε_g (on the hyperplane problem at N1 = 6, T = 0.05, one population of 3000 neurons put it 50% high).
    seed : int, default 0
        Random seed.
    sampler : callable, optional
        How the specialists are drawn (:mod:`renormpp.mcmc.sampling`'s signature); default
        :func:`renormpp.mcmc.sampling.ghmc`; NumPyro's NUTS: ``sampler=rp.infer.nuts_sampler()``.
    progress : bool, default False
        Show a bar over the outer iterations.

    Returns
    -------
    FieldSpecialistFit
    """
    pb = _problem(X, Y, N1, k, T, lambda0, lambda1, activation)
    for name, value in dict(neurons=neurons, iterations=iterations, inner=inner, moves=moves, steps=steps,
                            chains=chains, thinning=thinning, num_samples=num_samples,
                            populations=populations).items():
        positive_int(name, value)
    if not 0 < damping <= 1:
        raise ValueError(f"damping must be in (0, 1]; got {damping}")
    positive("rtol", rtol)
    average = inner if average is None else positive_int("average", average)
    X, Y, T = pb.X, pb.Y, pb.T
    P, D = Y.shape
    c, Nb = pb.lambda1 * pb.N1, pb.N1 - pb.k
    sampler = sampling.ghmc() if sampler is None else sampler
    rng = np.random.default_rng([seed, 5])
    # the start: the exact theory's field
    A0 = T * np.eye(P * D) + np.kron(_start_Q(pb), kernels.nngp(X, lambda0=pb.lambda0, activation=activation)) \
        / pb.lambda1
    Sigma = np.linalg.inv(A0)
    m = np.linalg.solve(A0, Y.T.reshape(-1)).reshape(D, P).T
    ctx = dict(X=X, activation=activation, lambda0=pb.lambda0, c=c)
    K = kernels.nngp(X, lambda0=pb.lambda0, activation=activation)
    target = _tilt_target(X, activation, pb.lambda0, c)
    zero = np.zeros((P * D, P * D))
    L_W, L_C, gauss, xi, h = zero, zero, None, None, 0.5
    if Nb:
        law = Proposal.prior(rng.standard_normal((neurons, X.shape[1])), proposal_basis(X, m), pb.lambda0)
        gauss, xi, _, _, h = _renewed(law, m, Sigma, target, moves, rng, h, fresh=False, **ctx)
        L_W, L_C, _ = _population_moments(replace(gauss, noise=xi).draw(pb.lambda0)[0], X, activation, m, Sigma,
                                          c, K, Nb, T)
    state = _templates(pb, chains, rng) if pb.k else None
    W = np.zeros((1, 0, X.shape[1]))
    history, noise = [], 0.0
    field_at = (m, Sigma)  # the field the bulk's population was last moved at
    halves = np.zeros((2, 2, P * D, P * D))  # the averaging phase's moments, in alternate blocks of iterations
    count, block, j, burn = np.zeros(2, dtype=int), 5, 0, (iterations - 1) * inner
    bar = progress_bar(total=iterations, desc=f"field specialists k={pb.k}", disable=not progress)
    for it in range(iterations if Nb else 1):
        if pb.k:
            W, state = sample_law(lambda: _log_density(pb, L_W, L_C), state, num_warmup if it == 0 else
                                  num_warmup // 3, num_samples, seed + it, thinning, sampler)
        St = pb.scaled_features(W) if pb.k else np.zeros((1, P, 0))
        m_start = m
        for _ in range((inner if it < iterations - 1 else average) if Nb else 0):
            xi, _, _, h = _moved(xi, target.at(gauss, m, Sigma), steps, rng, h=h)
            field_at = (m, Sigma)
            LW, LC, _ = _population_moments(replace(gauss, noise=xi).draw(pb.lambda0)[0], X, activation, m, Sigma,
                                            c, K, Nb, T)
            # the moments follow the field (and the population, which may still be forming specialists) until the
            # last outer iteration, and are averaged over its iterations with weights 1/j
            a = damping if j < burn else 1 / (j - burn + 1)
            L_W, L_C = L_W + a * (LW - L_W), L_C + a * (LC - L_C)
            if j >= burn:
                half = (j - burn) // block % 2
                halves[half] += (LW, LC)
                count[half] += 1
            _, m_new, Sigma_new = fields(L_W, L_C, St, Y, T)
            m, Sigma = m + damping * (m_new - m), Sigma + damping * (Sigma_new - Sigma)
            j += 1
        if Nb:
            history.append(float(np.linalg.norm(m - m_start) / np.linalg.norm(m_start)))
        if count.min():  # the moments' own noise in the field's mean: what the two halves of them give
            a, b = (fields(*(halves[i] / count[i]), St, Y, T)[1] for i in (0, 1))
            noise = float(np.linalg.norm(a - b) / (2 * np.linalg.norm(m)))
        bar.update()
    bar.close()
    if pb.k and Nb:  # the final draws at the final moments
        W, state = sample_law(lambda: _log_density(pb, L_W, L_C), state, num_warmup // 3, num_samples,
                              seed + iterations, thinning, sampler)
    bulk = None
    if Nb:
        m, Sigma = field_at
        bulk = SharedFieldFit(X=X, Y=Y, N1=pb.N1, T=T, lambda1=pb.lambda1, lambda0=pb.lambda0, activation=activation,
                              m=m, Sigma=Sigma, residuals=np.zeros((0, 2)), ess=float(len(xi)), pareto_k=0.0,
                              converged=True, reason="",
                              proposal=Population(gauss, xi, m.copy(), Sigma.copy(), c, X, activation, step=h),
                              seed=seed, populations=populations, steps=steps)
    if pb.k:
        _, m, Sigma = fields(L_W, L_C, pb.scaled_features(W), Y, T)
    return FieldSpecialistFit(W=W, k=pb.k, m=m, Sigma=Sigma, L_W=L_W, L_C=L_C, history=history, bulk=bulk, _pb=pb,
                              chains=chains if pb.k else 1, rtol=rtol, noise=noise)
