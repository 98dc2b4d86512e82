"""A fit's numbers on one test set, kept as plain JSON (a run's ``theory.json``) and read back as a fit that a
comparison takes: a theory that took minutes to solve is not solved again to report on it."""
from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field

import numpy as np

from ..network import activation_name


def fingerprint(*arrays) -> str:
    """A short hash of arrays (their float64 bytes and shapes): the data a recorded fit was solved and evaluated on."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(np.asarray(a, np.float64))
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class RecordedFit:
    """A fit of any theory reduced to what a comparison reads (the protocol of :data:`renormpp.theory.PROTOCOL`
    without ``predict``): its name (``method``, ``variant``), ``converged`` and ``reason``, ``Q`` and
    ``readout_overlap``, the generalization error ``eps_g`` on the test set whose :func:`fingerprint` is ``test``,
    its own Monte Carlo errors, the network's parameters, and the ``seconds`` the solve took.
    ``generalization_error`` refuses any other test set; ``train`` is the fingerprint of its training inputs
    (:meth:`solved_on` says whether it was solved on given ones)."""

    method: str
    variant: str
    converged: bool
    reason: str
    Q: np.ndarray
    readout_overlap: np.ndarray
    eps_g: float
    eps_g_error: float
    overlap_error: np.ndarray
    test: str
    train: str
    N1: float
    T: float
    lambda0: object
    lambda1: float
    activation: str
    P: int
    depth: int = 1
    draws: int = 0
    seconds: float = field(default=float("nan"), compare=False)

    @classmethod
    def of(cls, fit, X0, Y0, seconds: float = float("nan")) -> "RecordedFit":
        """The record of ``fit`` on the test set (X0, Y0)."""
        own = fit.monte_carlo_error(X0, Y0) if fit.converged else dict(eps_g=np.nan, overlap=np.full_like(fit.Q, np.nan))
        lam0 = np.atleast_1d(np.asarray(fit.lambda0, float))
        return cls(method=fit.method, variant=getattr(fit, "variant", ""), converged=bool(fit.converged),
                   reason=str(fit.reason), Q=np.asarray(fit.Q, float), readout_overlap=np.asarray(fit.readout_overlap, float),
                   eps_g=float(fit.generalization_error(X0, Y0)) if fit.converged else np.nan,
                   eps_g_error=float(own["eps_g"]), overlap_error=np.asarray(own["overlap"], float),
                   test=fingerprint(X0, Y0), train=fingerprint(fit.X), N1=float(fit.N1), T=float(fit.T),
                   lambda0=float(lam0[0]) if np.all(lam0 == lam0[0]) else lam0.tolist(), lambda1=float(fit.lambda1),
                   activation=activation_name(fit.activation), P=int(fit.P), depth=int(getattr(fit, "depth", 1)),
                   draws=int(getattr(fit, "draws", 0)), seconds=float(seconds))

    @property
    def D(self) -> int:
        """The number of outputs."""
        return self.Q.shape[0]

    def solved_on(self, X) -> bool:
        """Whether the fit was solved on the training inputs ``X``."""
        return fingerprint(X) == self.train

    def generalization_error(self, X0, Y0) -> float:
        """ε_g on the test set it was recorded on; a ValueError for any other."""
        if fingerprint(X0, Y0) != self.test:
            raise ValueError(f"this {self.method} fit was recorded on another test set: solve it again "
                             "(renormpp.theory.solve) to evaluate it on this one")
        return self.eps_g

    def monte_carlo_error(self, X0, Y0) -> dict:
        """The theory's own Monte Carlo error of ε_g and of the overlaps, on the test set it was recorded on."""
        self.generalization_error(X0, Y0)
        return dict(eps_g=self.eps_g_error, overlap=self.overlap_error)

    def to_dict(self) -> dict:
        """Plain JSON numbers (NaN as null)."""
        out = {}
        for k, v in asdict(self).items():
            v = v.tolist() if isinstance(v, np.ndarray) else v
            out[k] = None if isinstance(v, float) and not np.isfinite(v) else v
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "RecordedFit":
        """The record of :meth:`to_dict`."""
        nan = float("nan")
        arrays = {k: np.asarray(d[k], float) for k in ("Q", "readout_overlap")}
        arrays["overlap_error"] = np.asarray([[nan if x is None else x for x in row] for row in d["overlap_error"]])
        floats = {k: nan if d.get(k) is None else float(d[k]) for k in ("eps_g", "eps_g_error", "seconds")}
        return cls(**{**d, **arrays, **floats})
