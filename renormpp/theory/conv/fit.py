r"""The convolutional network's theory as a user meets it: :func:`solve` (behind :func:`renormpp.theory.solve` with
``conv=``), its methods (:data:`CONV_METHODS`) and its result :class:`ConvFit`, with the predictions at test images
(C8), the generalization loss (C9) and the readout overlaps, per patch pair and averaged (C10). The equations are in
:mod:`renormpp.theory.conv`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.linalg

from ..._checks import data_pair, matrix, positive as _positive, positive_int
from ...network import ODD_ACTIVATIONS, ActivationLike, get_activation
from ...patches import Patches, PatchesLike, as_patches
from ..methods import METHODS, get_method, reason_of
from ..prediction import FitShape, Prediction
from .action import _factor, _inverse, _PatchData, _solve
from .patch_kernels import KERNEL_MEMORY, PatchKernels

#: The methods of the convolutional theory (the others of :data:`renormpp.theory.METHODS` are not derived for it).
CONV_METHODS = ("exact", "one_loop", "infinite_width")


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
    #: why the result does not hold ("" where it converged), in its method record's words
    reason = property(reason_of)
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

    def _problem(self, N1=None, T=None, lambda1=None) -> _PatchData:
        return _PatchData(self.kernels, self.y, self.N1 if N1 is None else N1, self.T if T is None else T,
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
                         f"activation={', '.join(map(repr, ODD_ACTIVATIONS[:-1]))} or {ODD_ACTIVATIONS[-1]!r}")


def solve(X, Y, N1, T: float = 0.01, lambda0: float = 1.0, lambda1: float = 1.0, activation: ActivationLike = "erf",
          method: str = "exact", *, conv: PatchesLike, gtol: float = 1e-8, maxiter: int = 500,
          kernel_memory: float = KERNEL_MEMORY) -> ConvFit:
    r"""The convolutional theory on images X (P, s*s) with labels Y (P, D) ((P,) means D = 1).

    Odd activations.

    Parameters
    ----------
    X : array_like, shape (P, s*s)
        Images, one per row.
    Y : array_like, shape (P, D) or (P,)
        Labels; (P,) means D = 1.
    N1 : float
        The number of channels C (alpha = P / C).
    T : float, default 0.01
        Temperature.
    lambda0 : float, default 1.0
        Prior precision of the filters.
    lambda1 : float, default 1.0
        Prior precision of the readout.
    activation : str or callable, default "erf"
        An odd activation.
    method : {"exact", "one_loop", "infinite_width"}
        ``"exact"``: the minimum of (C4), to ``|dS/dQ| <= gtol``, at most ``maxiter`` Newton iterations;
        ``"one_loop"``: (C7); ``"infinite_width"``: Q = 1.
    conv : Patches or dict
        A :class:`~renormpp.patches.Patches` or ``dict(image_shape=(s, s), patch=m)``.
    gtol : float, default 1e-8
        Convergence threshold on the gradient's norm.
    maxiter : int, default 500
        Newton iterations.
    kernel_memory : float, default 2 GiB
        Bytes of patch kernels held at once (beyond it they are recomputed at every pass: slower, same result).

    Returns
    -------
    ConvFit
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
    pb = _PatchData(kernels, np.ascontiguousarray(Y.T).ravel(), N1, T, lambda1)
    return _fit(pb, X, lambda0, activation, method, gtol, maxiter)


def _fit(pb: _PatchData, X, lambda0, activation, method, gtol, maxiter) -> ConvFit:
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
