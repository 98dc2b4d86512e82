r"""The kernel-renormalization theory with a measured kernel in place of the NNGP kernel: the oracle test, as a theory
of the registry (``method="measured_kernel"``).

The exact theory (paper Eq. (1)) renormalizes the shape of the NNGP kernel K by the D x D order parameter Q. Given
the posterior hidden kernel :math:`K_{\rm post}` of sampled networks instead (:func:`sampled_kernel`), the same
saddle point on it asks whether the theory's error lies in the kernel (it then closes with :math:`K_{\rm post}`) or
in the renormalization itself (it does not): :mod:`renormpp.theory.hidden` and ``renormpp.diagnostics.kernel`` say
where each holds. The kernel is a function of two sets of inputs, so that the fit predicts at any test inputs with
the measured cross kernel (Eq. (H3)'s :math:`K_{\rm post}(X, x_0)` and :math:`K_{\rm post}(x_0, x_0)`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._checks import data_pair
from ..network import ActivationLike
from .action import Spectrum
from .fit import TheoryFit, _solve_spectrum
from .hidden import KERNEL_METHODS
from .prediction import FitShape, Prediction, predict_in_batches, renormalized_moments
from .single_neuron import features



def sampled_kernel(w, activation: ActivationLike = "erf") -> Callable:
    r"""The posterior hidden kernel of sampled networks as a function of two input sets:
    ``kernel(A, B)`` = :math:`\frac{1}{N_1}\langle s(A)\, s(B)^\top\rangle` over the draws of the hidden weights ``w``
    (..., N1, N0), :math:`s = \sigma(X w^\top/\sqrt{N_0})` (:func:`renormpp.theory.single_neuron.features`).

    Parameters
    ----------
    w : array_like, shape (..., N1, N0)
        Draws of the hidden weights (chains and draws in the leading axes), e.g. ``mcmc.get_samples()["w"]``.
    activation : str or callable, default "erf"
        The network's activation.

    Returns
    -------
    callable
        ``kernel(A, B) -> (len(A), len(B))``, float64.
    """
    w = np.asarray(w, dtype=np.float64)
    if w.ndim < 2:
        raise ValueError(f"w must be draws of the hidden weights, shape (..., N1, N0); got shape {w.shape}")
    w = w.reshape((-1,) + w.shape[-2:])

    def kernel(A, B):
        sA, sB = features(w, A, activation), features(w, B, activation)  # (n, P_A, N1), (n, P_B, N1)
        return np.einsum("npc,nqc->pq", sA, sB) / (w.shape[0] * w.shape[1])

    return kernel


@dataclass(frozen=True, eq=False)
class MeasuredKernelFit(FitShape):
    """The fit of :func:`solve`: the kernel-renormalization fit ``inner`` (a :class:`~renormpp.theory.TheoryFit` of
    the method ``theory``) on the measured ``kernel`` at the training inputs, and its predictions with the measured
    kernel at test inputs (``batch_size`` at a time). The fit protocol of :data:`renormpp.theory.PROTOCOL`."""

    inner: TheoryFit
    kernel: Callable
    batch_size: int = 512
    method = "measured_kernel"

    def __getattr__(self, name):  # the network's parameters and the saddle point: the inner fit's
        if name.startswith("__") or name == "inner":
            raise AttributeError(name)
        if name in ("X", "Q", "N1", "T", "lambda0", "lambda1", "activation", "converged", "reason", "spectrum"):
            return getattr(self.inner, name)
        raise AttributeError(name)

    @property
    def theory(self) -> str:
        """The kernel-renormalization method solved on the measured kernel."""
        return self.inner.method

    @property
    def readout_overlap(self) -> np.ndarray:
        """The predicted readout overlaps :math:`Q^*/\\lambda_1` (D, D)."""
        return self.Q / self.lambda1

    def predict(self, X0) -> Prediction:
        """The Gaussian prediction at test inputs ``X0`` (P0, N0) with the measured kernel (supplement, eq:SM_bias
        and eq:SM_var, with :math:`K_{\\rm post}` in place of K).

        Parameters
        ----------
        X0 : array_like, shape (P0, N0)
            Test inputs.

        Returns
        -------
        Prediction
        """
        X0 = self._test_inputs(X0)
        sp = self.spectrum

        def moments_of(B):
            cross, own = self.kernel(self.X, B), self.kernel(B, B)
            return renormalized_moments(sp, self.Q, self.T, self.lambda1, sp.V.T @ cross, np.diag(own).copy())

        return predict_in_batches(moments_of, X0, self.batch_size)


def solve(X, Y, N1, T: float = 0.01, lambda0=1.0, lambda1: float = 1.0, activation: ActivationLike = "erf", *,
          kernel: Callable, theory: str = "exact", gtol: float = 1e-8, maxiter: int = 5000,
          batch_size: int = 512) -> MeasuredKernelFit:
    r"""The kernel-renormalization theory ``theory`` (paper Eq. (1)) with ``kernel`` in place of the NNGP kernel.

    Parameters
    ----------
    X : array_like, shape (P, N0)
        Training inputs.
    Y : array_like, shape (P, D) or (P,)
        Training labels.
    N1, T, lambda0, lambda1, activation
        The network, as :func:`renormpp.theory.solve` takes it.
    kernel : callable
        ``kernel(A, B) -> (len(A), len(B))``, the measured kernel between two input sets, e.g.
        :func:`sampled_kernel` of a run's hidden weights.
    theory : {"exact", "one_loop", "infinite_width"}, default "exact"
        The method solved on the measured kernel.
    gtol, maxiter
        The minimization's tolerance and iterations.
    batch_size : int, default 512
        Test points per batch of the predictions.

    Returns
    -------
    MeasuredKernelFit

    Raises
    ------
    ValueError
        For another ``theory``, a kernel that is not a finite (P, P) matrix at the training inputs, or data of
        mismatched shapes.
    """
    if theory not in KERNEL_METHODS:
        raise ValueError(f"a measured kernel takes the methods {', '.join(KERNEL_METHODS)}; got theory={theory!r}")
    if not callable(kernel):
        raise ValueError("kernel must be a function kernel(A, B) of two input sets, e.g. "
                         "renormpp.theory.measured.sampled_kernel(w) of the sampled hidden weights")
    X, Y = data_pair(X, Y, "X", "Y", "P")
    K = np.asarray(kernel(X, X), dtype=np.float64)
    if K.shape != (len(X), len(X)) or not np.all(np.isfinite(K)):
        raise ValueError(f"kernel(X, X) must be a finite ({len(X)}, {len(X)}) matrix; got shape {K.shape}"
                         + ("" if K.shape != (len(X), len(X)) else " with NaN or inf entries"))
    spectrum = Spectrum.from_kernel(0.5 * (K + K.T), Y)
    inner = _solve_spectrum(spectrum, X, float(N1), float(T), lambda0, float(lambda1), activation, theory,
                            gtol=gtol, maxiter=maxiter)
    return MeasuredKernelFit(inner=inner, kernel=kernel, batch_size=int(batch_size))


__all__ = ["MeasuredKernelFit", "sampled_kernel", "solve"]
