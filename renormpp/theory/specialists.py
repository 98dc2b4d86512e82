r"""Specialists in the field of the bulk: k neurons kept exact, the other :math:`N_1 - k` renormalized.

Where a finite network divides its labour (MNIST at large α: a few neurons whose features align with the label
contrasts carry most of the readout), no law of independent neurons describes it. This theory keeps ``k`` neurons
explicit, with their exact law, and treats the other :math:`N_b = N_1 - k` neurons (the bulk) as kernel-shape
renormalization does (:mod:`renormpp.theory`, paper Eq. (1)): their kernel is :math:`Q\otimes K`, Q a D x D order
parameter. With v integrated out, the weights :math:`W_s` (k x N0) of the specialists and Q have the weight
:math:`e^{-E(Q, W_s)}` with

.. math::
    E(Q, W_s) = \frac{N_b}{2}\big[\operatorname{Tr}Q - \log\det Q\big] + \frac{\lambda_0}{2}\|W_s\|^2
      + \frac12\Big[y^\top A^{-1} y + \log\det A\Big],\qquad
    A = T\,\mathbb 1 + \frac{N_b}{N_1\lambda_1}\,Q\otimes K + \frac{1}{\lambda_1 N_1}\,S S^\top\otimes\mathbb 1_D,
    \tag{SP1}

:math:`S = \sigma(X W_s^\top/\sqrt{N_0})` (P x k) the specialists' features. At k = 0 (SP1) is :math:`N_1/2` times the
paper's action; at k = N1 it is the exact posterior of the finite network with v integrated out. **Self-consistency**:
Q sits at the saddle point of (SP1) averaged over the specialists' law at that Q,

.. math::
    Q^{-1} = \mathbb 1 + \frac{1}{N_b}\Big\langle \frac{\partial}{\partial Q}\big[y^\top A^{-1}y + \log\det A\big]
    \Big\rangle_{W_s \sim p(W_s\mid Q)},\qquad
    p(W_s\mid Q) \propto e^{-E(Q, W_s)},                                                                 \tag{SP2}

which by the envelope theorem is the law of :math:`W_s` with Q at its own saddle up to second order in the response of
Q to one configuration. In the eigenbasis :math:`Q = U\,{\rm diag}(q)\,U^\top` the matrix A is block diagonal,
:math:`A_d = T + \beta_b q_d K + S S^\top/(\lambda_1 N_1)` (:math:`\beta_b = N_b/(N_1\lambda_1)`), and in the eigenbasis
of K each block is a diagonal plus a rank-k term (Woodbury): one evaluation costs :math:`O(P^2 k + P N_0 k)` after
one eigendecomposition of K, and

.. math::
    \frac{\partial}{\partial Q_{ab}}\big[y^\top A^{-1}y + \log\det A\big]
    = \beta_b\Big[\sum_d u_{da}u_{db}\,{\rm tr}(A_d^{-1}K) - r_a^\top K\,r_b\Big],\qquad
    R = \sum_d A_d^{-1}(Y u_d)\,u_d^\top.                                                                \tag{SP3}

**Predictions** given :math:`(Q, W_s)` are those of a Gaussian process with the covariance of (SP1) (test-train
blocks :math:`\beta_b Q\otimes K(x_0, X) + s_0 S^\top\otimes\mathbb 1/(\lambda_1 N_1)`), averaged over the
specialists' law: the generalization loss :math:`\epsilon_g = \langle \|y_0 - \Gamma\|^2 + {\rm Tr}\,\Sigma\rangle`
(paper Eq. (3)) and the readout overlaps

.. math::
    \frac{\langle v v^\top\rangle}{N_1} = \frac{N_b}{N_1}\frac{Q}{\lambda_1}
    + \frac{1}{N_1}\sum_{s}\big\langle m_s m_s^\top + \Sigma_s\big\rangle,                             \tag{SP4}

with :math:`m_s, \Sigma_s` the mean and covariance of a specialist's readout given :math:`W_s` (Gaussian conditioning).

**The number k.** The explicit neurons are free to specialize or not; the theory converges as k grows (k = N1 is
exact). :func:`sweep` solves k = 0, 1, ... and stops where one more explicit neuron changes ε_g by less than
``rtol``: the bulk then holds no further specialist. Its law is sampled exactly (on the k N0 weights by the sampler passed in, generalized HMC
of :mod:`renormpp.mcmc` by default; chains from the prior and from the label-contrast templates, in float64).

What this theory does not hold: the bulk is kernel-shape renormalization, so the adaptation of the bulk's own kernel
beyond the D x D rescaling (which the shared field, :mod:`renormpp.theory.shared_field`, captures at α <= 2 on
MNIST) is missing; ``studies/specialist_theory.py`` measures both against sampled networks (docs/validity.md).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..mcmc import sampling
from ..kernels import nngp, nngp_diag
from ..mcstats import error_of_mean
from ..mcstats.specialists import label_contrasts
from ..network import ActivationLike, hidden, x64_context
from .action import minimize_cholesky
from .prediction import FitShape, Prediction

__all__ = ["SpecialistFit", "solve", "sweep", "conditional"]


# ----------------------------------------------------------------------------------------------------------------
# the blocks of (SP1) in the eigenbasis of K
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _SplitData:
    X: np.ndarray
    Y: np.ndarray
    kappa: np.ndarray  # (P,) eigenvalues of K
    V: np.ndarray  # (P, P) eigenvectors of K
    N1: int
    k: int
    T: float
    lambda0: float
    lambda1: float
    activation: ActivationLike

    @property
    def beta(self) -> float:
        return (self.N1 - self.k) / (self.N1 * self.lambda1)

    def scaled_features(self, W, X=None):
        """:math:`\\sigma(X W^\\top/\\sqrt{N_0})/\\sqrt{\\lambda_1 N_1}` of draws W (n, k, N0): (n, P, k), float64."""
        X = self.X if X is None else X
        with x64_context():
            s = np.asarray(hidden({"w": np.asarray(W, np.float64)}, np.asarray(X, np.float64), self.activation))
        return s / np.sqrt(self.lambda1 * self.N1)


def _blocks(pb: _SplitData, Q, St):
    """Per draw and eigen-direction d of Q: the diagonal a (D, P), the Woodbury core inverse Minv (n, D, k, k),
    and the rotated labels z (D, P). ``St`` (n, P, k) are the scaled features in K's eigenbasis."""
    q, U = np.linalg.eigh(0.5 * (Q + Q.T))
    if q[0] <= 0:
        raise ValueError(f"Q is not positive definite (eigenvalues {q}); the iteration diverged")
    a = pb.T + pb.beta * q[:, None] * pb.kappa[None, :]  # (D, P)
    z = (pb.V.T @ pb.Y @ U).T  # (D, P)
    Sa = St[:, None, :, :] / a[None, :, :, None]  # (n, D, P, k)
    M = np.eye(St.shape[-1]) + np.einsum("npk,ndpl->ndkl", St, Sa)
    return q, U, a, z, Sa, np.linalg.inv(M) if St.shape[-1] else M


def _energy(pb: _SplitData, Q, St):
    r"""The average over draws of (SP1)'s Q-dependent part, :math:`\frac{N_b}{2}[{\rm Tr}Q - \log\det Q] +
    \frac12\langle y^\top A^{-1}y + \log\det A\rangle`, and its gradient (SP3) (D, D)."""
    q, U, a, z, Sa, Minv = _blocks(pb, Q, St)
    b = np.einsum("ndpk,dp->ndk", Sa, z)
    r = z[None] / a[None] - np.einsum("ndpk,ndkl,ndl->ndp", Sa, Minv, b)  # A_d^{-1} z_d, (n, D, P)
    quad = np.sum(z * z / a) - np.einsum("ndk,ndkl,ndl->n", b, Minv, b)
    logdet = np.sum(np.log(a)) - np.linalg.slogdet(Minv)[1].sum(axis=-1)
    # tr(A_d^{-1} K) = sum_p kappa_p [1/a - (Sa Minv Sa^T)_pp]
    tr = np.sum(pb.kappa / a, axis=1)[None] - np.einsum("ndpk,ndkl,ndpl,p->nd", Sa, Minv, Sa, pb.kappa)
    G_u = np.einsum("nd,de->nde", tr, np.eye(len(q))) - np.einsum("ndp,p,nep->nde", r, pb.kappa, r)
    Nb = pb.N1 - pb.k
    E = 0.5 * Nb * (np.sum(q) - np.sum(np.log(q))) + 0.5 * np.mean(quad + logdet)
    grad = 0.5 * Nb * (np.eye(len(q)) - U @ np.diag(1 / q) @ U.T) + 0.5 * pb.beta * U @ G_u.mean(axis=0) @ U.T
    return float(E), _sym(grad)


def _gradient(pb: _SplitData, Q, St) -> np.ndarray:
    """The average over draws of (SP3): the derivative of the data term, a (D, D) matrix."""
    Nb = pb.N1 - pb.k
    _, grad = _energy(pb, Q, St)
    return 2 * grad - Nb * (np.eye(len(Q)) - np.linalg.inv(Q))


def _sym(A):
    return 0.5 * (A + A.T)


def _self_consistent_Q(pb: _SplitData, Q, St, gtol=1e-9):
    """(SP2) on fixed draws: the minimum over SPD Q of the averaged energy (:func:`_energy`), by L-BFGS on the
    Cholesky factor of Q (Q = L L^T, dE/dL = 2 G L; :func:`renormpp.theory.action.minimize_cholesky`, on L itself)."""

    def terms(Q):
        try:
            return _energy(pb, Q, St)
        except ValueError:  # a singular L: Q not positive definite
            return np.inf, None

    return minimize_cholesky(terms, Q, gtol=gtol, maxiter=2000, maxcor=10, log_diagonal=False).Q


def _log_density(pb: _SplitData, Q):
    """:math:`-E(Q, W_s)` up to a constant, a JAX function of W_s (k, N0) in float64 (Woodbury in K's basis)."""
    import jax.numpy as jnp

    q, U = np.linalg.eigh(0.5 * (Q + Q.T))
    a = jnp.asarray(pb.T + pb.beta * q[:, None] * pb.kappa[None, :])  # (D, P)
    z = jnp.asarray((pb.V.T @ pb.Y @ U).T)
    Vt, X = jnp.asarray(pb.V.T), jnp.asarray(pb.X)
    c = np.sqrt(pb.lambda1 * pb.N1)

    def log_p(W):
        St = Vt @ hidden({"w": W}, X, pb.activation) / c  # (P, k)
        Sa = St[None] / a[:, :, None]  # (D, P, k)
        M = jnp.eye(W.shape[0]) + jnp.einsum("pk,dpl->dkl", St, Sa)
        L = jnp.linalg.cholesky(M)
        b = jnp.einsum("dpk,dp->dk", Sa, z)
        w = jnp.linalg.solve(L, b[..., None])[..., 0]
        quad = jnp.sum(z * z / a) - jnp.sum(w * w)
        logdet = jnp.sum(jnp.log(a)) + 2 * jnp.sum(jnp.log(jnp.diagonal(L, axis1=-2, axis2=-1)))
        return -0.5 * pb.lambda0 * jnp.sum(W * W) - 0.5 * (quad + logdet)

    return log_p


def _templates(pb: _SplitData, chains: int, rng) -> np.ndarray:
    """Starts (chains, k, N0): even chains from the prior, odd ones with the neurons on the label-contrast templates
    (the centred class means, :func:`renormpp.mcstats.specialists.label_contrasts` with ``pairs=False``, scaled to the
    prior's norm) plus prior noise. The classes are the labels' argmax, or for one output its halves at the median."""
    N0 = pb.X.shape[1]
    W = rng.standard_normal((chains, pb.k, N0)) / np.sqrt(pb.lambda0)
    labels = np.argmax(pb.Y, axis=1) if pb.Y.shape[1] > 1 else (pb.Y[:, 0] > np.median(pb.Y[:, 0])).astype(int)
    contrasts = label_contrasts(pb.X, labels, pairs=False)
    for ch in range(1, chains, 2):
        for i in range(pb.k):
            W[ch, i] = 0.5 * W[ch, i] + 2.0 * np.sqrt(N0 / pb.lambda0) * contrasts[i % len(contrasts)]
    return W


def _sample(pb: _SplitData, Q, init, num_warmup: int, num_samples: int, seed: int, thinning: int, sampler):
    """Draws (chains * num_samples, k, N0) of p(W_s | Q) by ``sampler`` (the signature of
    :mod:`renormpp.mcmc.sampling`) in float64, and the last states (chains, k, N0)."""
    return sample_law(lambda: _log_density(pb, Q), init, num_warmup, num_samples, seed, thinning, sampler)


def sample_law(log_density, init, num_warmup: int, num_samples: int, seed: int, thinning: int, sampler):
    """Draws (chains * num_samples, k, N0) of the specialists' law by ``sampler`` (the signature of
    :mod:`renormpp.mcmc.sampling`) in float64, and the last states (chains, k, N0). ``log_density()`` builds the
    law's log-density, a JAX function of W (k, N0), in local float64; a ``FloatingPointError`` names the way out
    where the sampler produced NaN or inf."""
    import jax

    with x64_context():
        log_p = log_density()
        out = sampler(jax.random.PRNGKey(seed), lambda W: -log_p(W), np.asarray(init, np.float64), num_warmup,
                      num_samples, thinning)
    draws = np.asarray(out.draws, np.float64)
    if not np.all(np.isfinite(draws)):
        raise FloatingPointError("the specialists' sampler produced NaN or inf; raise the warmup or pass another "
                                 "sampler (sampler=rp.infer.nuts_sampler())")
    return draws.reshape((-1,) + draws.shape[2:]), np.asarray(out.last, np.float64)


# ----------------------------------------------------------------------------------------------------------------
# the fit and its predictions
# ----------------------------------------------------------------------------------------------------------------
class ExplicitNeurons(FitShape):
    """What the fits of theories with ``k`` explicit neurons share (:class:`SpecialistFit`,
    :class:`renormpp.theory.field_specialists.FieldSpecialistFit`): the network of their problem ``_pb``, the
    number of ``draws`` ``W`` (n, k, N0) of the explicit neurons that their predictions average over, from ``chains``
    chains, and the Monte Carlo error of those averages. A subclass gives ``eps_g_per_draw`` and
    ``overlap_per_draw``."""

    @property
    def variant(self) -> str:
        """What tells fits of this theory apart in a comparison: ``k=2``."""
        return f"k={self.k}"

    N1 = property(lambda self: self._pb.N1)
    T = property(lambda self: self._pb.T)
    lambda0 = property(lambda self: self._pb.lambda0)
    lambda1 = property(lambda self: self._pb.lambda1)
    activation = property(lambda self: self._pb.activation)
    X = property(lambda self: self._pb.X)
    Y = property(lambda self: self._pb.Y)

    @property
    def draws(self) -> int:
        """The draws of the explicit neurons that the predictions average over (0 at k = 0: nothing sampled)."""
        return len(self.W) if self.k else 0

    def monte_carlo_error(self, X0, Y0) -> dict:
        """The theory's own Monte Carlo error of ε_g and of the overlaps (D, D), from the draws of its ``chains``
        chains by the Gamma method (:func:`renormpp.mcstats.error_of_mean`); zero at k = 0."""
        if not self.draws:
            return super().monte_carlo_error(X0, Y0)
        chains = lambda x: np.reshape(x, (self.chains, -1) + np.shape(x)[1:])  # noqa: E731
        eps = error_of_mean(chains(self.eps_g_per_draw(X0, Y0)), cut=0).error
        ov = chains(self.overlap_per_draw())
        D = ov.shape[-1]
        return dict(eps_g=float(eps), overlap=np.array([[error_of_mean(ov[..., a, b], cut=0).error
                                                          for b in range(D)] for a in range(D)]))


@dataclass(frozen=True)
class SpecialistFit(ExplicitNeurons):
    """A solve of (SP1)-(SP2): the bulk's order parameter ``Q`` (D, D) and the specialists' draws ``W`` (n, k, N0),
    with the protocol of every fit (:data:`renormpp.theory.PROTOCOL`): its predictions are the moments of the mixture
    over the specialists' law.

    Attributes
    ----------
    Q : numpy.ndarray, shape (D, D)
        The bulk's order parameter at (SP2).
    W : numpy.ndarray, shape (n, k, N0)
        Draws of the specialists' weights from their law at Q (``chains`` chains, one after the other).
    k : int
        The number of explicit neurons.
    history : list of float
        max |ΔQ| of each outer iteration.
    chains : int
        The chains the draws come from (their Monte Carlo error is that of ``chains`` series).
    noise : float
        The draws' own noise in Q at the last iteration: half the largest difference between the fixed points (SP2)
        of the two halves of its draws (one chain against the other where there are two).
    rtol : float
        The outer iteration has converged where its last max |ΔQ| is within three times ``noise`` (a step that the
        draws' noise explains) or at most ``rtol`` max |Q|.
    """

    Q: np.ndarray
    W: np.ndarray
    k: int
    history: list
    _pb: _SplitData
    chains: int = 1
    noise: float = 0.0
    rtol: float = 0.01
    method = "specialists"


    @property
    def converged(self) -> bool:
        """Whether the last outer iteration moved Q by no more than its draws' noise explains (three times
        ``noise``), or by at most ``rtol`` of its largest entry."""
        return not self.reason

    @property
    def reason(self) -> str:
        """Why the fit has not converged; "" where it has."""
        if not self.history:
            return ""
        scale = float(np.max(np.abs(self.Q)))
        if self.history[-1] <= max(self.rtol * scale, 3 * self.noise):
            return ""
        return (f"the outer iteration did not settle: its last max |dQ| = {self.history[-1]:.2g}, beyond three times "
                f"the draws' noise ({self.noise:.2g}) and rtol {self.rtol:g} of max |Q| = {scale:.2g}; raise "
                "iterations")

    # --- predictions --------------------------------------------------------------------------------------------
    def predict_per_draw(self, X0):
        """Given each draw of the specialists, (SP1) conditioned: the mean (n, P0, D) and the variances (n, P0, D)
        of f along the eigenvectors of Q, and those eigenvectors U (D, D)."""
        return _predict(self._pb, self.Q, self.W, self._test_inputs(X0))

    def predict(self, X0) -> Prediction:
        """The mean (P0, D) and covariance (P0, D, D) of f at ``X0`` over the specialists' law: the mixture of the
        Gaussians of each draw (the mean of their covariances plus the covariance of their means)."""
        mean_n, var_n, U = self.predict_per_draw(X0)
        mean = mean_n.mean(axis=0)
        dev = mean_n - mean
        cov = np.einsum("ad,xd,bd->xab", U, var_n.mean(axis=0), U) + np.einsum("nxa,nxb->xab", dev, dev) / len(dev)
        return Prediction(mean=mean, cov=cov)

    def eps_g_per_draw(self, X0, Y0) -> np.ndarray:
        """ε_g given each draw of the specialists (n,): its spread says how much their law matters; its mean is
        ``generalization_error``."""
        X0 = self._test_inputs(X0)
        Y0 = np.asarray(Y0, np.float64).reshape(len(X0), -1)
        mean, var, _ = self.predict_per_draw(X0)
        return np.mean(np.sum((Y0[None] - mean) ** 2, axis=-1) + var.sum(axis=-1), axis=-1)

    @property
    def readout_overlap(self) -> np.ndarray:
        r"""The readout overlaps :math:`\langle v v^\top\rangle/N_1` (D, D) of (SP4)."""
        return self.overlap_per_draw().mean(axis=0)

    def overlap_per_draw(self) -> np.ndarray:
        r"""(SP4) given each draw of the specialists, (n, D, D)."""
        pb = self._pb
        q, U, a, z, Sa, Minv = _blocks(pb, self.Q, self._rotated())
        # in block d a specialist's readout (times sqrt(lambda1)) has mean M^-1 Sa^T z_d and covariance M^-1, since
        # S~^T A_d^-1 = M^-1 Sa^T (Woodbury)
        m = np.einsum("ndkl,ndpl,dp->nkd", Minv, Sa, z) / np.sqrt(pb.lambda1)  # (n, k, D), U basis
        spec = np.einsum("nkd,nke->nde", m, m) + np.einsum("ndkk,de->nde", Minv, np.eye(len(q))) / pb.lambda1
        return (pb.N1 - pb.k) / pb.N1 * self.Q / pb.lambda1 + np.einsum("ad,nde,be->nab", U, spec, U) / pb.N1

    def _rotated(self):
        return np.einsum("pq,nqk->npk", self._pb.V.T, self._pb.scaled_features(self.W))


def _predict(pb: _SplitData, Q, W, X0, chunk: int = 16):
    """Mean (n, P0, D) and variances (n, P0, D) along Q's eigenvectors at ``X0`` per draw, ``chunk`` draws at a time,
    and those eigenvectors U."""
    X0 = np.asarray(X0, np.float64)
    if len(W) > chunk:
        parts = [_predict(pb, Q, W[i:i + chunk], X0, chunk) for i in range(0, len(W), chunk)]
        return np.concatenate([m for m, _, _ in parts]), np.concatenate([v for _, v, _ in parts]), parts[0][2]
    St = np.einsum("pq,nqk->npk", pb.V.T, pb.scaled_features(W))
    S0 = pb.scaled_features(W, X0)  # (n, P0, k)
    q, U, a, z, Sa, Minv = _blocks(pb, Q, St)
    Kx = pb.V.T @ nngp(pb.X, X0, lambda0=pb.lambda0, activation=pb.activation)  # (P, P0)
    k00 = nngp_diag(X0, lambda0=pb.lambda0, activation=pb.activation)
    n, D = len(W), len(q)
    mean_u = np.zeros((n, len(X0), D))
    var = np.zeros((n, len(X0), D))
    for d in range(D):
        C = pb.beta * q[d] * Kx[None] + np.einsum("npk,nxk->npx", St, S0)  # (n, P, P0)
        Ca = C / a[d][None, :, None]
        SC = np.einsum("npk,npx->nkx", St, Ca)  # S~^T D^-1 C
        AinvC = Ca - np.einsum("npk,nkl,nlx->npx", Sa[:, d], Minv[:, d], SC)
        mean_u[..., d] = np.einsum("npx,p->nx", AinvC, z[d])
        var[..., d] = pb.beta * q[d] * k00[None] + np.sum(S0 ** 2, axis=-1) - np.einsum("npx,npx->nx", C, AinvC)
    return mean_u @ U.T, var, U


def conditional(X, Y, W, *, N1: int, T: float, Q=None, lambda0: float = 1.0, lambda1: float = 1.0,
                activation: ActivationLike = "erf") -> SpecialistFit:
    r"""(SP1) with the specialists' weights given, ``W`` (n, k, N0) (e.g. the specialists of sampled networks), and Q
    at its saddle point (SP2) over those draws unless given: the bulk's prediction in their field.

    Parameters
    ----------
    X, Y : array_like
        Training inputs (P, N0) and labels (P, D).
    W : array_like, shape (n, k, N0)
        The explicit neurons' weights, one set per draw.
    N1 : int
        The network's width (the bulk has N1 - k neurons).
    T : float
        Temperature.
    Q : array_like, shape (D, D), optional
        The bulk's order parameter; default: the fixed point of (SP2) on ``W``.
    lambda0, lambda1 : float, default 1.0
        Prior precisions of the hidden and readout weights.
    activation : str or callable, default "erf"
        An odd activation (the bulk's theory is kernel-shape renormalization).

    Returns
    -------
    SpecialistFit
    """
    W = np.asarray(W, np.float64)
    if W.ndim != 3:
        raise ValueError(f"W must be (draws, k, N0); got shape {W.shape}")
    pb = _problem(X, Y, N1, W.shape[1], T, lambda0, lambda1, activation)
    St = np.einsum("pq,nqk->npk", pb.V.T, pb.scaled_features(W))
    Q = _start_Q(pb) if Q is None else np.asarray(Q, np.float64)
    if W.shape[1] < N1:
        Q = _self_consistent_Q(pb, Q, St)
    return SpecialistFit(Q=Q, W=W, k=W.shape[1], history=[], _pb=pb)


def _problem(X, Y, N1, k, T, lambda0, lambda1, activation) -> _SplitData:
    from ..network import ODD_ACTIVATIONS, get_activation

    X = np.asarray(X, np.float64)
    Y = np.asarray(Y, np.float64)
    Y = Y[:, None] if Y.ndim == 1 else Y
    if X.ndim != 2 or len(Y) != len(X):
        raise ValueError(f"X must be (P, N0) and Y (P, D) with the same P; got {X.shape} and {Y.shape}")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(Y))):
        raise ValueError("X or Y has NaN or inf entries; clean the data first")
    if T <= 0 or lambda0 <= 0 or lambda1 <= 0:
        raise ValueError(f"T, lambda0 and lambda1 must be positive; got {T}, {lambda0}, {lambda1}")
    if not 0 <= k <= N1 or int(N1) != N1:
        raise ValueError(f"need an integer N1 and 0 <= k <= N1; got N1 = {N1}, k = {k}")
    act = get_activation(activation)
    if not getattr(act, "odd", True):
        raise ValueError(f"the bulk's theory needs an odd activation; {act.name!r} is not (use one of "
                         f"{', '.join(ODD_ACTIVATIONS)})")
    kappa, V = np.linalg.eigh(nngp(X, lambda0=lambda0, activation=activation))
    return _SplitData(X=X, Y=Y, kappa=np.maximum(kappa, 0.0), V=V, N1=int(N1), k=int(k), T=float(T),
                    lambda0=float(lambda0), lambda1=float(lambda1), activation=activation)


def _start_Q(pb: _SplitData) -> np.ndarray:
    from .fit import solve_renormalized as exact

    return np.asarray(exact(pb.X, pb.Y, N1=pb.N1, T=pb.T, lambda0=pb.lambda0, lambda1=pb.lambda1,
                            activation=pb.activation).Q, np.float64)


def solve(X, Y, *, N1: int, k: int, T: float, lambda0: float = 1.0, lambda1: float = 1.0,
          activation: ActivationLike = "erf", iterations: int = 3, num_warmup: int = 300, num_samples: int = 200,
          chains: int = 4, thinning: int = 2, seed: int = 0, Q0=None, sampler=None) -> SpecialistFit:
    r"""Solve (SP1)-(SP2) with ``k`` explicit neurons: alternate draws of the specialists at Q with the fixed
    point (SP2) of Q on those draws, ``iterations`` times.

    Parameters
    ----------
    X, Y : array_like
        Training inputs (P, N0) and labels (P, D).
    N1 : int
        The network's width.
    k : int
        Explicit neurons, 0 <= k <= N1 (k = 0: kernel-shape renormalization).
    T : float
        Temperature.
    lambda0, lambda1 : float, default 1.0
        Prior precisions of the hidden and readout weights.
    activation : str or callable, default "erf"
        An odd activation.
    iterations : int, default 3
        Outer iterations (draws at Q, then Q at the draws).
    num_warmup, num_samples, chains, thinning : int
        The sampler's run per iteration; the chains continue from one iteration to the next, half of them start on the
        label-contrast templates.
    seed : int, default 0
        Random seed.
    Q0 : array_like, optional
        Start of Q; default the exact theory's Q* at width N1.
    sampler : callable, optional
        How the specialists are drawn: any sampler of :mod:`renormpp.mcmc.sampling`'s signature; default
        :func:`renormpp.mcmc.sampling.ghmc` (generalized HMC, ten updates per draw). NumPyro's NUTS:
        ``sampler=rp.infer.nuts_sampler()``.

    Returns
    -------
    SpecialistFit
    """
    pb = _problem(X, Y, N1, k, T, lambda0, lambda1, activation)
    Q = _start_Q(pb) if Q0 is None else np.asarray(Q0, np.float64)
    if k == 0:
        return SpecialistFit(Q=Q, W=np.zeros((1, 0, pb.X.shape[1])), k=0, history=[], _pb=pb)
    sampler = sampling.ghmc() if sampler is None else sampler
    state = _templates(pb, chains, np.random.default_rng(seed))
    history, noise = [], 0.0
    for it in range(iterations):
        W, state = _sample(pb, Q, state, num_warmup if it == 0 else num_warmup // 3, num_samples, seed + it,
                           thinning, sampler)
        if k < N1:
            St = np.einsum("pq,nqk->npk", pb.V.T, pb.scaled_features(W))
            new = _self_consistent_Q(pb, Q, St)
            history.append(float(np.max(np.abs(new - Q))))
            if it == iterations - 1:  # the draws' own noise in Q: the fixed points of two halves of them
                a, b = (_self_consistent_Q(pb, new, half) for half in np.array_split(St, 2))
                noise = float(np.max(np.abs(a - b))) / 2
            Q = new
    if iterations > 1:  # the final draws at the final Q
        W, state = _sample(pb, Q, state, num_warmup // 3, num_samples, seed + iterations, thinning, sampler)
    return SpecialistFit(Q=Q, W=W, k=k, history=history, _pb=pb, chains=chains, noise=noise)


def sweep(X, Y, X0, Y0, *, N1: int, T: float, k_max: int = 4, rtol: float = 0.02, **options):
    r"""Solve k = 0, 1, ... up to ``k_max`` and stop where one more explicit neuron changes ε_g by less than ``rtol``
    (relative): the fits and the ε_g of each k, and the chosen k.

    Parameters
    ----------
    X, Y : array_like
        Training inputs and labels.
    X0, Y0 : array_like
        Test inputs and labels, for ε_g.
    N1 : int
        The network's width.
    T : float
        Temperature.
    k_max : int, default 4
        The largest k tried.
    rtol : float, default 0.02
        The relative change of ε_g below which k stops growing.
    **options
        Passed to :func:`solve`.

    Returns
    -------
    dict
        ``fits`` (k -> SpecialistFit), ``eps_g`` (k -> float) and ``k`` (the chosen one).
    """
    fits, eps = {}, {}
    Q = None
    for k in range(0, min(k_max, N1) + 1):
        fits[k] = solve(X, Y, N1=N1, k=k, T=T, Q0=Q, **options)
        Q = fits[k].Q
        eps[k] = fits[k].generalization_error(X0, Y0)
        if k > 0 and abs(eps[k] - eps[k - 1]) <= rtol * abs(eps[k - 1]):
            return dict(fits=fits, eps_g=eps, k=k - 1)
    return dict(fits=fits, eps_g=eps, k=max(eps))
