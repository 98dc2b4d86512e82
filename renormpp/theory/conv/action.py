r"""The convolutional network's action (C4) at one order parameter Q, with its renormalized kernel A (C3), its
gradient (C5) and its Hessian (C6), and its minimization: Newton's method with the Hessian applied by conjugate
gradients, preconditioned by the prior's Hessian, from the one-loop Q (C7); L-BFGS on a Cholesky factor of Q where
Newton stalls. The equations are in :mod:`renormpp.theory.conv`.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
import scipy.linalg

from ..action import _sym, minimize_cholesky
from .patch_kernels import PatchKernels


# ----------------------------------------------------------------------------------------------
# the action at one Q
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _PatchData:
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

    def terms(self, Q):
        """The action (C4) and its gradient (C5) at Q: ``(inf, None)`` off the SPD cone."""
        st = self.at(Q)
        return st.S, st.G


@cache
def _blas():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _one_thread():
    """One BLAS thread for LAPACK's factorizations: on busy cores their threads wait on each other (a Cholesky
    factorization of 1000 x 1000 took 1.3 s on two threads and 0.02 s on one under load; the solve at the target size
    3x less time), while the matrix products keep every thread."""
    return _blas().limit(limits=1, user_api="blas")


def _factor(pb: _PatchData, Q: np.ndarray):
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

    def __init__(self, pb: _PatchData, Q, grad: bool = True):
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


def _newton(pb: _PatchData, st: _At, gtol: float, maxiter: int):
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


def _minimize(pb: _PatchData, st: _At, gtol: float, maxiter: int):
    """Newton-CG from the state ``st``; where it stalls, L-BFGS on a Cholesky factor of Q (the fully connected solver's
    :func:`renormpp.theory.action.minimize_cholesky`) and Newton-CG again. Returns ``(state, iterations)``."""
    st, n_iter, ok = _newton(pb, st, gtol, min(maxiter, 100))
    if ok or n_iter >= maxiter:
        return st, n_iter
    lbfgs = minimize_cholesky(pb.terms, st.Q, gtol=gtol * 1e-2, maxiter=max(maxiter - n_iter, 1))
    st, n_newton, _ = _newton(pb, pb.at(lbfgs.Q), gtol, max(maxiter - n_iter - lbfgs.n_iter, 1))
    return st, n_iter + lbfgs.n_iter + n_newton


def _solve(pb: _PatchData, method: str, gtol: float, maxiter: int):
    """``(state at Q, n_iter)`` of ``method``: Q = 1, the one-loop Q of (C7), or the minimum of (C4)."""
    eye = np.eye(pb.n)
    st = pb.at(eye)
    if method == "infinite_width":
        return st, 0
    Q1 = eye - st.G  # (C7): the prior's gradient vanishes at Q = 1
    if method == "one_loop":
        return pb.at(Q1), 0
    return _minimize(pb, pb.at(Q1) if np.linalg.eigvalsh(Q1)[0] > 0.05 else st, gtol, maxiter)

