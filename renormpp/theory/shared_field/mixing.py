"""Anderson mixing of the fixed-point iteration of (F2) on fixed neurons (the ``"fitted"`` and ``"prior"``
proposals)."""
from __future__ import annotations

import numpy as np

from .equations import _positive


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
