r"""The convolutional network's geometry: the patch kernels :math:`K_{ij}(\mu,\nu)` of (C1) between every pair of
patches (i, j) of the training images, held in memory or recomputed in chunks, and the passes over them that the
theory makes: (C3)'s sum into the renormalized kernel, (C5)'s contraction (its adjoint) and the test kernels of (C8).
The equations are in :mod:`renormpp.theory.conv`.
"""
from __future__ import annotations

import numpy as np

from ...network import ActivationLike, get_activation
from ...patches import Patches

#: Bytes of float64 patch kernels :math:`K_{ij}`, i <= j, held at once; beyond it they are recomputed at every pass.
KERNEL_MEMORY = 2**31
#: Bytes of kernel values computed at once (a chunk of train blocks, or the test kernels of a batch of test points).
CHUNK_MEMORY = 2**27


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
        r""":math:`K_{ij}` (P, P) on the training images (the held block, or computed; :math:`K_{ji}^\top` for i > j)."""
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

