r"""The proportional-limit theory of a one-hidden-layer convolutional network with D outputs: local kernel
renormalization (Aiudi, Pacelli, Baglioni, Vezzani, Burioni, Rotondo, Nat. Commun. 16 (2025), arXiv:2307.11807; their
code, rpacelli/deepbays ``CONV_1HL``, has one output). Entry point: :func:`renormpp.theory.solve` with ``conv=``.

**The network** (issue 33, ``CONV_1HL``'s conventions). Square single-channel images of side s, cut into
non-overlapping :math:`m\times m` patches :math:`x_i`, :math:`n_p = (s/m)^2` (:mod:`renormpp.patches`); :math:`C = N_1`
channels, each a filter :math:`w_c \sim \mathcal N(0, 1/\lambda_0)` of :math:`m^2` weights shared by all patches;
:math:`h_{ci} = w_c\cdot x_i/m`; :math:`f_a(x) = \sum_{c,i} v_{aci}\,\sigma(h_{ci})/\sqrt{C n_p}`,
:math:`v \sim \mathcal N(0, 1/\lambda_1)`; posterior :math:`\propto` prior
:math:`\cdot\, e^{-\|Y - f\|^2/(2T)}`. Under the prior of one filter the pre-activations of all patches of all
images are jointly Gaussian, and

.. math::
    C_{ij}(\mu,\nu) = \frac{x_i^\mu\cdot x_j^\nu}{m^2\lambda_0}, \qquad
    K_{ij}(\mu,\nu) = \mathbb E[\sigma(h_i^\mu)\sigma(h_j^\nu)] = \kappa\big(C_{ii}(\mu,\mu), C_{jj}(\nu,\nu),
    C_{ij}(\mu,\nu)\big) = K_{ji}(\nu,\mu)                                                                   \tag{C1}

with :math:`\kappa` the activation's NNGP map (:mod:`renormpp.network`).

**Derivation** (the fully connected one of the supplement, with an index (a, i) where it had a). Write the likelihood
with auxiliary fields, :math:`e^{-\|y-f\|^2/2T} \propto \int d\bar s\, e^{-T\|\bar s\|^2/2 + i\sum_{a\mu}\bar s_{a\mu}
(y_{a\mu} - f_a(x^\mu))}`. The readout weights are Gaussian and independent per (a, c, i); integrating them leaves

.. math::
    \prod_c \exp\Big(-\frac{1}{2\lambda_1 C n_p}\sum_{ai} q_{c,ai}^2\Big), \qquad
    q_{c,ai} = \sum_\mu \bar s_{a\mu}\,\sigma(h^\mu_{ci}).                                                    \tag{C2}

The channels are i.i.d. under the prior of w. In the proportional limit (C, P → ∞ at fixed α = P/C) the
:math:`D n_p` numbers :math:`q_{c,\cdot}` of one channel are Gaussian (the fully connected theory's Gaussian
equivalence), with covariance :math:`M_{(ai),(bj)} = \bar s_a^\top K_{ij}\bar s_b`: cross terms in outputs and in
patches appear through the shared filter although the readout has none. Hence
:math:`\mathbb E_w \exp(-|q_c|^2/2\lambda_1 C n_p) = \det(\mathbb 1 + M/(\lambda_1 C n_p))^{-1/2}`. Fixing
:math:`R = M/C` with a conjugate field, which sits at :math:`Q/(\lambda_1 n_p)` at the saddle point, makes the
:math:`\bar s` integral Gaussian with the :math:`PD\times PD` precision (y stacked by output, index (a, μ) → aP + μ)

.. math::
    A_{(a\mu),(b\nu)} = T\,\delta_{ab}\delta_{\mu\nu} + \frac{1}{\lambda_1 n_p}\sum_{ij} Q_{(ai),(bj)} K_{ij}(\mu,\nu),
                                                                                                          \tag{C3}

and the R integral's saddle point gives :math:`Q = (\mathbb 1 + R/(\lambda_1 n_p))^{-1}`. Altogether
:math:`Z \simeq \int dQ\, e^{-C\,S(Q)/2}` with Q symmetric positive definite of size :math:`D n_p` (index (a, i) →
a n_p + i) and the action

.. math::
    S(Q) = \operatorname{tr} Q - \log\det Q + \frac{1}{C}\Big[y^\top A^{-1} y + \log\det(A/T)\Big].            \tag{C4}

:math:`\log\det(A/T)` is the fully connected action's :math:`\operatorname{Tr}\log(\mathbb 1 + Q\otimes K/(\lambda_1T))`
(:mod:`renormpp.theory`); deepbays writes :math:`\log\det A`, a constant :math:`PD\log T/C` away (same Q*, the value of
S shifted). With :math:`r = A^{-1}y` and :math:`B = A^{-1} - r r^\top`, the gradient and the Hessian along a symmetric E
(:math:`\delta A = \sum_{ij} E_{(ai),(bj)}K_{ij}/(\lambda_1 n_p)`, :math:`u = A^{-1}\delta A\, r`) are

.. math::
    \frac{\partial S}{\partial Q_{(ai),(bj)}} = \delta - (Q^{-1})_{(ai),(bj)}
        + \frac{1}{C\lambda_1 n_p}\sum_{\mu\nu} K_{ij}(\mu,\nu)\, B_{(a\mu),(b\nu)},                            \tag{C5}

.. math::
    H[E] = Q^{-1}EQ^{-1} + \frac{1}{C\lambda_1 n_p}\sum_{\mu\nu}K_{ij}(\mu,\nu)\,\delta B_{(a\mu),(b\nu)},\quad
    \delta B = -A^{-1}\delta A A^{-1} + u r^\top + r u^\top.                                                  \tag{C6}

Special cases. :math:`n_p = 1` (patch = side): :math:`h = w\cdot x/\sqrt{N_0}`, :math:`K_{11}` is the NNGP kernel and
:math:`A = T + Q\otimes K/\lambda_1`: exactly the fully connected theory with :math:`N_1 = C`. :math:`Q = \mathbb 1`:
:math:`A = T + \mathbb 1_D\otimes K_{\rm CNN}/\lambda_1`, :math:`K_{\rm CNN} = \frac{1}{n_p}\sum_i K_{ii}`, the
infinite-width CNN (only equal patches: the readout weights of different patches are independent). One loop: the
prior's Hessian at Q = 1 is the identity, so expanding (C4) about Q = 1 to second order in Q − 1 and first in α,

.. math::
    Q^{\rm 1-loop} = \mathbb 1 - \partial_Q S|_{Q=\mathbb 1} = \mathbb 1 - \frac{1}{C\lambda_1 n_p}
        \Big[\sum_{\mu\nu} K_{ij}(\mu,\nu) B_{(a\mu),(b\nu)}\Big]_{Q=\mathbb 1},                                \tag{C7}

the fully connected :math:`1 + \alpha Q^{(1)}` at :math:`n_p = 1` (derived here; ``method="one_loop"``).

**Predictions.** A test point x0 enters the :math:`\bar s` integral at zero temperature; its outputs are Gaussian with
(supplement, eq:SM_bias and eq:SM_var, with the renormalized kernel of (C3))

.. math::
    \Gamma_a(x_0) = \sum_{b\nu} k_{(a0),(b\nu)}\, r_{(b\nu)}, \qquad
    \Sigma_{ab}(x_0) = k_{(a0),(b0)} - \sum_{c\mu,d\nu} k_{(a0),(c\mu)} (A^{-1})_{(c\mu),(d\nu)} k_{(b0),(d\nu)},
                                                                                                          \tag{C8}

:math:`k_{(a0),(b\nu)} = \frac{1}{\lambda_1 n_p}\sum_{ij} Q_{(ai),(bj)} K_{ij}(x_0, x^\nu)`,
:math:`k_{(a0),(b0)} = \frac{1}{\lambda_1 n_p}\sum_{ij} Q_{(ai),(bj)} K_{ij}(x_0, x_0)` (the patches of one image),
and :math:`\epsilon_g = \langle\|y_0 - \Gamma(x_0)\|^2 + \operatorname{tr}\Sigma(x_0)\rangle_{x_0}` (C9). **Readout
overlaps**: a source J on :math:`\sum_c v_c v_c^\top` (:math:`v_c` the :math:`D n_p` weights of channel c) turns the
per-channel factor into :math:`\det(\lambda_1 - J + M/(C n_p))^{-1/2}`, so at the saddle point

.. math::
    \frac{1}{C}\Big\langle\sum_c v_{a,c,i}\, v_{b,c,j}\Big\rangle = \big[(\lambda_1 + R/n_p)^{-1}\big]_{(ai),(bj)}
        = \frac{Q_{(ai),(bj)}}{\lambda_1},                                                                     \tag{C10}

:attr:`ConvFit.local_overlap`; its patch average :math:`\frac{1}{n_p}\sum_i Q_{(ai),(bi)}/\lambda_1`,
:attr:`ConvFit.readout_overlap`, is what :math:`\sum_{c,i} v_{aci}v_{bci}/(C n_p)` of a sampled network estimates.

**Cost.** The :math:`n_p(n_p+1)/2` blocks :math:`K_{ij}`, :math:`i\le j` (the others by (C1)'s symmetry), are held in
float64 when they fit ``kernel_memory`` and otherwise recomputed in chunks at every pass. (C3) and (C5) are one pass
over them each (a matrix product with :math:`D^2` columns); an evaluation adds one Cholesky factorization and one
inverse of A. The minimization is Newton's method with the Hessian (C6) applied by conjugate gradients,
preconditioned by the prior's Hessian, from the one-loop Q; L-BFGS on a Cholesky factor of Q where Newton stalls.
The factorizations run on one BLAS thread (on busy cores threaded LAPACK was up to 60x slower; benchmarks/cnn.py).
Odd activations only: a non-odd one (relu) would need the mean feature's second order parameter
(:mod:`renormpp.theory.nonodd` derives it for the fully connected network only).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

import numpy as np
import scipy.linalg
import scipy.optimize

from .._checks import data_pair, matrix, positive as _positive, positive_int
from ..network import ActivationLike, get_activation
from ..patches import Patches, PatchesLike, as_patches
from .action import _Q_to_tril, _sym, _tril_to_Q
from .prediction import FitShape, Prediction
from .methods import METHODS, get_method

#: The methods of the convolutional theory (the others of :data:`renormpp.theory.METHODS` are not derived for it).
CONV_METHODS = ("exact", "one_loop", "infinite_width")
#: Bytes of float64 patch kernels :math:`K_{ij}`, i <= j, held at once; beyond it they are recomputed at every pass.
KERNEL_MEMORY = 2**31
#: Bytes of kernel values computed at once (a chunk of train blocks, or the test kernels of a batch of test points).
CHUNK_MEMORY = 2**27


# ----------------------------------------------------------------------------------------------
# the patch kernels
# ----------------------------------------------------------------------------------------------
class PatchKernels:
    r"""The patch kernels :math:`K_{ij}(\mu,\nu)` of (C1) on the training images and the two passes over them.

    The blocks of the pairs i <= j (``ip``, ``jp``: numpy.triu_indices) are held as one (n_pairs, P*P) float64 array
    when they fit ``memory`` bytes, and recomputed in chunks at every pass otherwise. :meth:`combine` is (C3)'s sum,
    :meth:`contract` (C5)'s, its adjoint; :meth:`test` gives the test-train and test-test sums of (C8).
    """

    def __init__(self, X: np.ndarray, conv: Patches, lambda0: float, activation: ActivationLike,
                 memory: float = KERNEL_MEMORY):
        self.conv, self.act, self.lambda0 = conv, get_activation(activation), lambda0
        self.Z = self._scaled(X)  # (P, n_p, m*m): C_ij(mu, nu) = Z[mu, i] . Z[nu, j]
        self.c = np.einsum("pim,pim->pi", self.Z, self.Z)  # (P, n_p): C_ii(mu, mu)
        self.Zp = np.ascontiguousarray(self.Z.transpose(1, 0, 2))  # (n_p, P, m*m)
        self.ip, self.jp = np.triu_indices(conv.n_patches)
        self.P = X.shape[0]
        block = 8 * self.P**2
        self.rows = max(1, min(len(self.ip), CHUNK_MEMORY // block))  # pairs per recomputed chunk
        self.cached = block * len(self.ip) <= memory
        self._K = self._compute(0, len(self.ip)) if self.cached else None

    @property
    def n_pairs(self) -> int:
        return len(self.ip)

    @property
    def nbytes(self) -> int:
        """Bytes of the blocks i <= j in float64 (held only where they fit the budget)."""
        return 8 * self.P**2 * self.n_pairs

    def _scaled(self, X) -> np.ndarray:
        return self.conv.extract(X) / (self.conv.patch * np.sqrt(self.lambda0))

    def block(self, i: int, j: int) -> np.ndarray:
        """:math:`K_{ij}` (P, P) on the training images (the held block, or computed; :math:`K_{ji}^\top` for i > j)."""
        if i > j:
            return self.block(j, i).T
        k = int(np.flatnonzero((self.ip == i) & (self.jp == j))[0])
        return (self._K[k] if self.cached else self._compute(k, k + 1)[0]).reshape(self.P, self.P)

    def _compute(self, lo: int, hi: int) -> np.ndarray:
        """The blocks of pairs lo..hi-1 (n, P*P): one matrix product and one kernel map per run of pairs with the
        same i (a few small products are slow where BLAS threads wait on a busy machine)."""
        P = self.P
        out = np.empty((hi - lo, P * P))
        group = max(1, CHUNK_MEMORY // (6 * 8 * P * P))
        k = lo
        while k < hi:
            i = self.ip[k]
            end = min(hi, k + group, int(np.searchsorted(self.ip, i, side="right")))
            js = self.jp[k:end]
            C = (self.Zp[i] @ self.Zp[js].reshape(-1, self.Zp.shape[2]).T).reshape(P, len(js), P)
            K = self.act.kernel_map(self.c[:, i, None, None], self.c.T[None, js, :], C)
            out[k - lo:end - lo] = K.transpose(1, 0, 2).reshape(len(js), P * P)
            if js[0] == i:  # the diagonal block, symmetric to the last bit
                Kii = out[k - lo].reshape(P, P)
                Kii[...] = 0.5 * (Kii + Kii.T)
            k = end
        return out

    def chunks(self):
        """(slice of pairs, their blocks (n, P*P)), the held array at once or recomputed chunk by chunk."""
        if self.cached:
            yield slice(0, self.n_pairs), self._K
            return
        for lo in range(0, self.n_pairs, self.rows):
            hi = min(lo + self.rows, self.n_pairs)
            yield slice(lo, hi), self._compute(lo, hi)

    def combine(self, E4: np.ndarray) -> np.ndarray:
        r""":math:`\sum_{ij} E_{(ai),(bj)} K_{ij}(\mu,\nu)` as a (PD, PD) matrix, for a symmetric E4 (D, n_p, D, n_p).

        From the pairs i <= j alone: with :math:`X_{ab} = \sum_{i\le j} w_{ij} E_{(ai),(bj)} K_{ij}` (w = 1/2 on
        i = j) the sum is :math:`X_{ab} + X_{ba}^\top`, as :math:`E_{(bi),(aj)}K_{ij}^\top = E_{(aj),(bi)}K_{ji}`."""
        D, P = E4.shape[0], self.P
        coef = E4[:, self.ip, :, self.jp].reshape(self.n_pairs, D * D)  # [p, (a, b)] = E4[a, i_p, b, j_p]
        coef[self.ip == self.jp] *= 0.5
        X = np.zeros((D * D, P * P))
        for sl, K in self.chunks():
            X += coef[sl].T @ K
        M = X.reshape(D, D, P, P).transpose(0, 2, 1, 3).reshape(D * P, D * P)
        return M + M.T

    def contract(self, B: np.ndarray) -> np.ndarray:
        r"""(D, n_p, D, n_p) :math:`G_{(ai),(bj)} = \sum_{\mu\nu} K_{ij}(\mu,\nu) B_{(a\mu),(b\nu)}` for a symmetric B
        (PD, PD): the adjoint of :meth:`combine`,
        :math:`\langle G, E\rangle = \langle B, \mathrm{combine}(E)\rangle`."""
        P = self.P
        D = B.shape[0] // P
        Bf = B.reshape(D, P, D, P).transpose(1, 3, 0, 2).reshape(P * P, D * D)
        g = np.empty((self.n_pairs, D * D))
        for sl, K in self.chunks():
            g[sl] = K @ Bf
        g = g.reshape(self.n_pairs, D, D)
        G = np.empty((D, self.conv.n_patches, D, self.conv.n_patches))
        G[:, self.ip, :, self.jp] = g
        G[:, self.jp, :, self.ip] = g.transpose(0, 2, 1)  # G[b, j, a, i] = G[a, i, b, j]
        return G

    def test(self, X0: np.ndarray, W4: np.ndarray):
        r"""For test images X0 (P0, N0) and W4 (D, n_p, D, n_p): ``(k0, k00)`` with
        k0 (P0, D, PD) = :math:`\sum_{ij} W_{(ai),(bj)} K_{ij}(x_0, x^\nu)` at column bP + ν and k00 (P0, D, D) =
        :math:`\sum_{ij} W_{(ai),(bj)} K_{ij}(x_0, x_0)`."""
        Z0 = self._scaled(X0)
        c0 = np.einsum("pim,pim->pi", Z0, Z0)
        (P0, n, _), P, D = Z0.shape, self.P, W4.shape[0]
        C = (Z0.reshape(P0 * n, -1) @ self.Z.reshape(P * n, -1).T).reshape(P0, n, P, n)  # C[x, i, nu, j]
        K = self.act.kernel_map(c0[:, :, None, None], self.c[None, None, :, :], C)
        W = W4.transpose(1, 3, 0, 2).reshape(n * n, D * D)  # [(i, j), (a, b)]
        k0 = K.transpose(0, 2, 1, 3).reshape(P0 * P, n * n) @ W  # [(x, nu), (a, b)]
        k0 = k0.reshape(P0, P, D, D).transpose(0, 2, 3, 1).reshape(P0, D, D * P)
        K00 = self.act.kernel_map(c0[:, :, None], c0[:, None, :], Z0 @ Z0.transpose(0, 2, 1))  # (P0, n, n)
        return k0, np.einsum("aibj,xij->xab", W4, K00)

    def test_batch(self) -> int:
        """Test points per batch of :meth:`test` (its kernel values, a few copies, within ``CHUNK_MEMORY``)."""
        return max(1, CHUNK_MEMORY // (6 * 8 * self.conv.n_patches**2 * self.P))


# ----------------------------------------------------------------------------------------------
# the action at one Q
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Problem:
    """The data and parameters of one solve: kernels, labels stacked by output (y of (C3)), C = N1, T, lambda1."""

    kernels: PatchKernels
    y: np.ndarray
    N1: float
    T: float
    lambda1: float

    @property
    def n(self) -> int:
        """The size of Q, D n_p."""
        return self.D * self.kernels.conv.n_patches

    @property
    def D(self) -> int:
        return self.y.size // self.kernels.P

    @property
    def scale(self) -> float:
        """1 / (lambda1 n_p)."""
        return 1.0 / (self.lambda1 * self.kernels.conv.n_patches)

    def four(self, Q: np.ndarray) -> np.ndarray:
        """(D n_p, D n_p) -> (D, n_p, D, n_p)."""
        n_p = self.kernels.conv.n_patches
        return Q.reshape(self.D, n_p, self.D, n_p)

    def at(self, Q, grad: bool = True) -> "_At":
        return _At(self, Q, grad)


@cache
def _blas():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _one_thread():
    """One BLAS thread for LAPACK's factorizations: on busy cores their threads wait on each other (a Cholesky
    factorization of 1000 x 1000 took 1.3 s on two threads and 0.02 s on one under load; the solve at the target size
    3x less time), while the matrix products keep every thread."""
    return _blas().limit(limits=1, user_api="blas")


def _factor(pb: _Problem, Q: np.ndarray):
    """The Cholesky factor of A (C3) at Q and r = A^{-1} y; a LinAlgError where A is not positive definite."""
    A = pb.kernels.combine(pb.four(Q)) * pb.scale
    A[np.diag_indices_from(A)] += pb.T
    with _one_thread():
        cf = scipy.linalg.cho_factor(A, lower=True, overwrite_a=True, check_finite=False)
        return cf, scipy.linalg.cho_solve(cf, pb.y, check_finite=False)


def _inverse(cf) -> np.ndarray:
    """A^{-1} from A's Cholesky factor (LAPACK potri; a matrix product with it is faster than two triangular solves)."""
    with _one_thread():
        inv, info = scipy.linalg.lapack.dpotri(cf[0], lower=1)
    if info:
        raise np.linalg.LinAlgError(f"the inverse of the renormalized kernel failed (LAPACK info {info})")
    return np.tril(inv) + np.tril(inv, -1).T


class _At:
    """The action (C4) at one Q (S = inf off the SPD cone), and on demand its gradient (C5) and Hessian (C6)."""

    def __init__(self, pb: _Problem, Q, grad: bool = True):
        self.pb, self.Q = pb, _sym(np.asarray(Q, dtype=np.float64))
        self.S, self.G = np.inf, None
        try:
            self.Lq = np.linalg.cholesky(self.Q)
            self.cf, self.r = _factor(pb, self.Q)
        except (np.linalg.LinAlgError, scipy.linalg.LinAlgError):
            return
        logdet_A = 2.0 * np.sum(np.log(np.diag(self.cf[0])))
        data = pb.y @ self.r + logdet_A - pb.y.size * np.log(pb.T)
        self.S = float(np.trace(self.Q) - 2.0 * np.sum(np.log(np.diag(self.Lq))) + data / pb.N1)
        if grad:
            self.gradient()

    def gradient(self) -> np.ndarray | None:
        """(C5) (n, n), computed once; None off the SPD cone."""
        if self.G is None and self.spd:
            self.Ainv = _inverse(self.cf)
            self.Qinv = scipy.linalg.cho_solve((self.Lq, True), np.eye(self.pb.n))
            self.G = _sym(np.eye(self.pb.n) - self.Qinv + self._data(self.Ainv - np.outer(self.r, self.r)))
        return self.G

    @property
    def spd(self) -> bool:
        return np.isfinite(self.S)

    def _data(self, B: np.ndarray) -> np.ndarray:
        """The data term of (C5) for a symmetric B: (1/(C lambda1 n_p)) sum K_ij B_ab, as an (n, n) matrix."""
        pb = self.pb
        return pb.kernels.contract(B).reshape(pb.n, pb.n) * (pb.scale / pb.N1)

    def hvp(self, E: np.ndarray) -> np.ndarray:
        """The Hessian (C6) applied to a symmetric E (n, n)."""
        pb = self.pb
        dA = pb.kernels.combine(pb.four(E)) * pb.scale
        U = self.Ainv @ dA
        u = U @ self.r
        dB = -(U @ self.Ainv) + np.outer(u, self.r) + np.outer(self.r, u)
        return _sym(self.Qinv @ E @ self.Qinv + self._data(_sym(dB)))


# ----------------------------------------------------------------------------------------------
# the minimization
# ----------------------------------------------------------------------------------------------
def _pcg(st: _At, tol: float, maxiter: int) -> np.ndarray:
    """Solve H[x] = -G by conjugate gradients preconditioned by the prior's Hessian (its inverse is R -> Q R Q),
    stopping at |residual| <= tol or at a direction of non-positive curvature."""
    Q = st.Q
    x = np.zeros_like(Q)
    r = -st.G
    z = Q @ r @ Q
    p, rz = z, np.sum(r * z)
    for k in range(maxiter):
        Hp = st.hvp(p)
        pHp = np.sum(p * Hp)
        if pHp <= 0:
            return z if k == 0 else x
        step = rz / pHp
        x = x + step * p
        r = r - step * Hp
        if np.linalg.norm(r) <= tol:
            break
        z = Q @ r @ Q
        rz_new = np.sum(r * z)
        p, rz = z + (rz_new / rz) * p, rz_new
    return x


def _newton(pb: _Problem, st: _At, gtol: float, maxiter: int):
    """Newton-CG on symmetric Q from the state ``st`` (at an SPD Q, with its gradient) with a backtracking (Armijo)
    line search that keeps Q positive definite: ``(state, iterations, converged)``; it stops early where no step
    lowers S (far from the minimum)."""
    for it in range(maxiter):
        g_norm = float(np.linalg.norm(st.G))
        if g_norm <= gtol:
            return st, it, True
        dQ = _pcg(st, tol=min(0.5, np.sqrt(g_norm)) * g_norm, maxiter=max(20, pb.n))
        slope = np.sum(st.G * dQ)
        if not slope < 0:
            dQ = -(st.Q @ st.G @ st.Q)
            slope = np.sum(st.G * dQ)
        step = 1.0
        while step > 1e-10:
            new = pb.at(st.Q + step * dQ, grad=False)
            flat = new.spd and abs(new.S - st.S) <= 1e-12 * (1.0 + abs(st.S))
            if new.S <= st.S + 1e-4 * step * slope:
                break
            # S flat to round-off near the minimum: judge the step by the gradient instead
            if flat and np.linalg.norm(new.gradient()) < g_norm:
                break
            step *= 0.5
        else:
            return st, it, False
        st = new
        st.gradient()
    return st, maxiter, bool(np.linalg.norm(st.G) <= gtol)


def _lbfgs(pb: _Problem, Q, gtol: float, maxiter: int):
    """L-BFGS on a Cholesky factor of Q (log diagonal: always SPD), as the fully connected solver's fallback."""
    n = pb.n
    tri, diag = np.tril_indices(n), np.diag_indices(n)

    def fun(theta):
        Q, L = _tril_to_Q(theta, n)
        st = pb.at(Q)
        if not st.spd:
            return np.inf, np.zeros_like(theta)
        dL = 2.0 * st.G @ L
        dL[diag] *= L[diag]
        return st.S, dL[tri]

    res = scipy.optimize.minimize(fun, _Q_to_tril(Q), jac=True, method="L-BFGS-B",
                                  options=dict(maxiter=maxiter, maxcor=30, ftol=1e-15, gtol=gtol * 1e-2))
    return _tril_to_Q(res.x, n)[0], int(res.nit)


def _minimize(pb: _Problem, st: _At, gtol: float, maxiter: int):
    """Newton-CG from the state ``st``; where it stalls, L-BFGS and Newton-CG again. Returns ``(state, iterations)``."""
    st, n_iter, ok = _newton(pb, st, gtol, min(maxiter, 100))
    if ok or n_iter >= maxiter:
        return st, n_iter
    Q, n_lbfgs = _lbfgs(pb, st.Q, gtol, max(maxiter - n_iter, 1))
    st, n_newton, _ = _newton(pb, pb.at(Q), gtol, max(maxiter - n_iter - n_lbfgs, 1))
    return st, n_iter + n_lbfgs + n_newton


def _solve(pb: _Problem, method: str, gtol: float, maxiter: int):
    """``(state at Q, n_iter)`` of ``method``: Q = 1, the one-loop Q of (C7), or the minimum of (C4)."""
    eye = np.eye(pb.n)
    st = pb.at(eye)
    if method == "infinite_width":
        return st, 0
    Q1 = eye - st.G  # (C7): the prior's gradient vanishes at Q = 1
    if method == "one_loop":
        return pb.at(Q1), 0
    return _minimize(pb, pb.at(Q1) if np.linalg.eigvalsh(Q1)[0] > 0.05 else st, gtol, maxiter)


# ----------------------------------------------------------------------------------------------
# the result
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConvFit(FitShape):
    r"""The convolutional theory's result, from :func:`renormpp.theory.solve` with ``conv=`` (equations:
    :mod:`renormpp.theory.conv`).

    ``Q`` (D n_p, D n_p), index (a, i) -> a n_p + i; ``converged`` (``exact``: the gradient norm reached gtol;
    ``one_loop``: Q positive definite; ``infinite_width``: always); ``grad_norm`` (Frobenius norm of (C5) at Q);
    ``action`` (C4); ``method``; ``n_iter``; ``N1`` (= C channels), ``T``, ``lambda0``, ``lambda1``, ``activation``;
    ``conv`` the :class:`~renormpp.patches.Patches`. ``P``, ``D`` and ``alpha`` = P / N1 as for
    :class:`renormpp.theory.TheoryFit`; ``generalization_error`` (C9) and ``posterior_predictive`` from
    :class:`~renormpp.theory.prediction.FitShape`.
    """

    Q: np.ndarray
    converged: bool
    grad_norm: float
    action: float
    method: str
    n_iter: int
    N1: float
    T: float
    lambda0: float
    lambda1: float
    activation: ActivationLike
    conv: Patches
    X: np.ndarray = field(repr=False)
    kernels: PatchKernels = field(repr=False)
    y: np.ndarray = field(repr=False)  # the labels stacked by output, index (a, mu) -> a P + mu
    depth = 1  # one hidden layer (read by renormpp.theory.methods)
    nonodd = False  # odd activations only
    #: Methods of :data:`renormpp.theory.METHODS` that this theory does not have, and why
    #: (:func:`renormpp.theory.fit_or_reason`).
    not_derived = {m: "is not derived for the convolutional network" for m in METHODS if m not in CONV_METHODS}

    @property
    def D(self) -> int:
        return self.Q.shape[0] // self.conv.n_patches

    @property
    def n_patches(self) -> int:
        return self.conv.n_patches

    def __repr__(self) -> str:
        solved = get_method(self.method).note or f"n_iter={self.n_iter}"
        act = getattr(self.activation, "name", self.activation)
        ov = np.array2string(self.readout_overlap, precision=4, suppress_small=True, separator=", ").replace("\n", "")
        return (f"ConvFit(method={self.method!r}, N1={self.N1:g}, alpha={self.alpha:.3g}, D={self.D}, "
                f"image_shape={self.conv.image_shape}, patch={self.conv.patch}, n_p={self.n_patches}, "
                f"activation={act!r}, T={self.T:g}, converged={self.converged}, grad_norm={self.grad_norm:.2g}, "
                f"action={self.action:.6g}, {solved}, Q: {self.Q.shape}, readout_overlap={ov})")

    # --- order parameter -------------------------------------------------------------------------
    @property
    def local_overlap(self) -> np.ndarray:
        r"""(D, n_p, D, n_p): :math:`\langle v_{a,\cdot,i}\cdot v_{b,\cdot,j}\rangle/C = Q_{(ai),(bj)}/\lambda_1`
        (C10)."""
        n = self.n_patches
        return self.Q.reshape(self.D, n, self.D, n) / self.lambda1

    @property
    def readout_overlap(self) -> np.ndarray:
        r"""(D, D) :math:`\frac{1}{n_p}\sum_i Q_{(ai),(bi)}/\lambda_1`: the prediction for
        :math:`\sum_{c,i} v_{aci} v_{bci}/(C n_p)` of a sampled network (C10)."""
        return np.einsum("aibi->ab", self.local_overlap) / self.n_patches

    def _problem(self, N1=None, T=None, lambda1=None) -> _Problem:
        return _Problem(self.kernels, self.y, self.N1 if N1 is None else N1, self.T if T is None else T,
                        self.lambda1 if lambda1 is None else lambda1)

    def action_and_gradient(self, Q) -> tuple[float, np.ndarray]:
        """S(Q) (C4) and dS/dQ (C5) at any SPD Q (D n_p, D n_p), on this fit's data and parameters."""
        Q = np.asarray(Q, dtype=np.float64)
        if Q.shape != self.Q.shape:
            raise ValueError(f"Q must have shape {self.Q.shape}; got {Q.shape}")
        st = self._problem().at(Q)
        if not st.spd:
            raise ValueError("Q must be symmetric positive definite")
        return st.S, st.G

    def refit(self, method: str | None = None, *, N1=None, T=None, lambda1=None, gtol: float = 1e-8,
              maxiter: int = 500) -> "ConvFit":
        """Solve again with another method, width, temperature or readout prior, reusing the patch kernels (only
        ``lambda0`` and the activation change them)."""
        N1 = self.N1 if N1 is None else _positive("N1", N1, "number of channels C")
        T = self.T if T is None else _positive("T", T, "temperature")
        lambda1 = self.lambda1 if lambda1 is None else _positive("lambda1", lambda1, "prior precision of the readout")
        return _fit(self._problem(N1, T, lambda1), self.X, self.lambda0, self.activation,
                    self.method if method is None else method, gtol, maxiter)

    # --- predictions -----------------------------------------------------------------------------
    def _test_inputs(self, X0) -> np.ndarray:
        X0 = matrix(X0, "X0", "P0", "N0 features")
        self.conv.check(X0.shape[1], "X0")
        return X0

    def predict(self, X0, batch_size: int | None = None) -> Prediction:
        """Predictive mean (P0, D) and covariance (P0, D, D) of the outputs at the rows of X0 (C8)."""
        X0 = self._test_inputs(X0)
        try:
            cf, r = _factor(self._problem(), self.Q)
        except (np.linalg.LinAlgError, scipy.linalg.LinAlgError):
            raise ValueError(f"the renormalized kernel A of (C3) is not positive definite at this {self.method} Q "
                             f"(smallest eigenvalue of Q {np.linalg.eigvalsh(self.Q)[0]:.3g}): no predictions. Use "
                             "method='exact'") from None
        Ainv = _inverse(cf)
        W4 = self.local_overlap / self.n_patches  # Q / (lambda1 n_p)
        batch = batch_size or self.kernels.test_batch()
        means, covs = [], []
        for lo in range(0, X0.shape[0], batch):
            k0, k00 = self.kernels.test(X0[lo:lo + batch], W4)
            P0, D, PD = k0.shape
            means.append(k0 @ r)
            Ak0 = (k0.reshape(P0 * D, PD) @ Ainv).reshape(P0, D, PD)
            covs.append(k00 - k0 @ np.swapaxes(Ak0, 1, 2))
        return Prediction(mean=np.concatenate(means), cov=_sym_batch(np.concatenate(covs)))


def _sym_batch(C: np.ndarray) -> np.ndarray:
    return 0.5 * (C + np.swapaxes(C, 1, 2))


# ----------------------------------------------------------------------------------------------
# solve
# ----------------------------------------------------------------------------------------------
def check_method(method: str, activation: ActivationLike) -> None:
    """A ValueError unless ``method`` and ``activation`` are covered by the convolutional theory."""
    get_method(method)  # unknown names: the table's error
    if method not in CONV_METHODS:
        raise ValueError(f"method={method!r} is not derived for the convolutional network; use method='exact', "
                         "'one_loop' or 'infinite_width'")
    act = get_activation(activation)
    if not act.odd:
        raise ValueError(f"the convolutional theory holds for odd activations, and activation={act.name!r} is not "
                         "odd (its features have a mean, which would need a second order parameter: "
                         "renormpp.theory.nonodd derives it for the fully connected network only). Use "
                         "activation='erf', 'tanh' or 'linear'")


def solve(X, Y, N1, T: float = 0.01, lambda0: float = 1.0, lambda1: float = 1.0, activation: ActivationLike = "erf",
          method: str = "exact", *, conv: PatchesLike, gtol: float = 1e-8, maxiter: int = 500,
          kernel_memory: float = KERNEL_MEMORY) -> ConvFit:
    r"""The convolutional theory on images X (P, s*s) with labels Y (P, D) ((P,) means D = 1).

    ``conv``: a :class:`~renormpp.patches.Patches` or ``dict(image_shape=(s, s), patch=m)``; ``N1`` the number of
    channels C (alpha = P / C); ``method``: ``"exact"`` (the minimum of (C4), to ``|dS/dQ| <= gtol``, at most
    ``maxiter`` Newton iterations), ``"one_loop"`` ((C7)) or ``"infinite_width"`` (Q = 1); ``kernel_memory``: bytes
    of patch kernels held at once (beyond it they are recomputed at every pass: slower, same result). Odd activations.
    """
    conv = as_patches(conv)
    check_method(method, activation)
    X, Y = data_pair(X, Y)
    conv.check(X.shape[1])
    N1 = _positive("N1", N1, "number of channels C")
    T = _positive("T", T, "temperature")
    if np.ndim(lambda0) != 0:
        raise ValueError(f"lambda0 must be one number for the convolutional network (one hidden layer); got "
                         f"{lambda0!r}")
    lambda0 = _positive("lambda0", lambda0, "prior precision of the filters")
    lambda1 = _positive("lambda1", lambda1, "prior precision of the readout")
    gtol = _positive("gtol", gtol, "tolerance on |dS/dQ|")
    maxiter = positive_int("maxiter", maxiter, "Newton iterations")
    kernels = PatchKernels(X, conv, lambda0, activation, _positive("kernel_memory", kernel_memory, "bytes"))
    pb = _Problem(kernels, np.ascontiguousarray(Y.T).ravel(), N1, T, lambda1)
    return _fit(pb, X, lambda0, activation, method, gtol, maxiter)


def _fit(pb: _Problem, X, lambda0, activation, method, gtol, maxiter) -> ConvFit:
    check_method(method, activation)
    st, n_iter = _solve(pb, method, gtol, maxiter)
    record = METHODS[method]
    grad_norm = float(np.linalg.norm(st.G)) if st.spd else np.inf
    fit = ConvFit(Q=st.Q, converged=bool(record.convergence.holds(grad_norm, gtol, st.spd)), grad_norm=grad_norm,
                  action=st.S, method=method, n_iter=n_iter, N1=pb.N1, T=pb.T, lambda0=lambda0, lambda1=pb.lambda1,
                  activation=activation, conv=pb.kernels.conv, X=X, kernels=pb.kernels, y=pb.y)
    if not fit.converged:
        record.convergence.warn(fit, gtol)
    return fit
