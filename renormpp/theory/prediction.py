r"""What every fit of the theory predicts, whatever its method or architecture: the Gaussian :class:`Prediction` of
the outputs at test points, and :class:`FitShape`, the sizes of a fit (P, D, alpha) with the generalization error
and the predictive distribution computed from its ``predict`` (:class:`renormpp.theory.TheoryFit`,
:class:`renormpp.theory.conv.ConvFit`, :class:`renormpp.theory.adaptive_kernel.AdaptiveKernelFit`); the Gaussian process with the
renormalized kernel :math:`Q\otimes K/\lambda_1` (:func:`renormalized_moments`), whatever K is (the NNGP kernel, the
adaptive theory's :math:`K_{\rm eff}`, a measured kernel), and the loop over batches of test points
(:func:`predict_in_batches`)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._checks import data_pair, matrix
from .action import Spectrum, moments


@dataclass(frozen=True)
class Prediction:
    r"""Gaussian posterior of the network outputs at test points (supplement, eq:SM_bias and eq:SM_var).

    Parameters
    ----------
    mean : numpy.ndarray, shape (P0, D)
        The predictive mean :math:`\Gamma`.
    cov : numpy.ndarray, shape (P0, D, D)
        The predictive covariance :math:`\Sigma` (variance of f, without the observation noise T).
    """

    mean: np.ndarray
    cov: np.ndarray

    @property
    def var(self) -> np.ndarray:
        """Per-output predictive variances, the diagonal of ``cov``, shape (P0, D)."""
        return np.einsum("pdd->pd", self.cov)

    @property
    def cov_eigvals(self) -> np.ndarray:
        """Eigenvalues of each covariance, (P0, D), clipped at 0 against round-off."""
        return np.maximum(np.linalg.eigvalsh(self.cov), 0.0)


def renormalized_moments(spectrum: Spectrum, Q, T: float, lambda1: float, kappa, k00):
    r"""``(mean, cov)`` at test points of the Gaussian process with the renormalized kernel :math:`Q\otimes K/\lambda_1`
    (supplement, eq:SM_bias and eq:SM_var): the mean :math:`\Gamma` (P0, D) and the covariance :math:`\Sigma`
    (P0, D, D), without the observation noise T, from the eigendecomposition ``spectrum`` of the train kernel K, the
    train-test kernel in its eigenbasis ``kappa`` = V^T K(X, X0) (P, P0) and the test diagonal ``k00`` = K(x0, x0)
    (P0,) (:func:`renormpp.theory.action.moments`, which gives Σ in the eigenbasis of Q)."""
    mean, s, U = moments(spectrum, Q, T, lambda1, kappa, k00)
    return mean, np.einsum("ia,pa,ja->pij", U, s, U)


def predict_in_batches(moments_of, X0, batch_size: int) -> Prediction:
    """The :class:`Prediction` at the rows of ``X0`` from ``moments_of(X0[batch]) -> (mean, cov)``, ``batch_size`` test
    points at a time (memory: P x batch_size for the test kernel)."""
    parts = [moments_of(X0[lo:lo + batch_size]) for lo in range(0, X0.shape[0], batch_size)]
    return Prediction(mean=np.concatenate([part[0] for part in parts]),
                      cov=np.concatenate([part[1] for part in parts]))


class FitShape:
    """The sizes of a fit with training inputs ``X`` (P, N0), order parameter ``Q`` and width ``N1`` (its ``D``: the
    readout overlap's outputs), and what follows from its ``predict(X0) -> Prediction``; the defaults of the fit
    protocol (:data:`renormpp.theory.PROTOCOL`) for a theory of one hidden layer that samples nothing."""

    #: the number of hidden layers (a deep fit's own field overrides it)
    depth = 1
    #: the draws a sampled theory averages over; 0 where nothing is sampled
    draws = 0

    def monte_carlo_error(self, X0, Y0) -> dict:
        """The theory's own Monte Carlo error of ``generalization_error(X0, Y0)`` (``eps_g``) and of
        ``readout_overlap`` (``overlap``, D x D): zero for a theory that samples nothing.

        Parameters
        ----------
        X0, Y0 : array_like
            Test inputs and labels.

        Returns
        -------
        dict
        """
        return dict(eps_g=0.0, overlap=np.zeros((self.D, self.D)))

    @property
    def P(self) -> int:
        """The number of training points."""
        return self.X.shape[0]

    @property
    def D(self) -> int:
        """The number of outputs."""
        return self.Q.shape[0]

    @property
    def alpha(self) -> float:
        """alpha = P / N1."""
        return self.P / self.N1

    def _test_inputs(self, X0) -> np.ndarray:
        X0 = matrix(X0, "X0", "P0", "N0 features")
        if X0.shape[1] != self.X.shape[1]:
            raise ValueError(f"X0 has {X0.shape[1]} features but the training inputs have {self.X.shape[1]}")
        return X0

    def generalization_error(self, X0, Y0) -> float:
        r"""The generalization error :math:`\epsilon_g`, the mean over test points of
        :math:`\|y_0-\Gamma\|^2 + \operatorname{Tr}\Sigma` (Eq. (3)).

        Parameters
        ----------
        X0 : array_like, shape (P0, N0)
            Test inputs.
        Y0 : array_like, shape (P0, D) or (P0,)
            Test labels, with the training labels' D outputs.

        Returns
        -------
        float
            :math:`\epsilon_g`.

        Raises
        ------
        ValueError
            Where X0 or Y0 do not match the training data's features or outputs.
        """
        X0 = self._test_inputs(X0)
        X0, Y0 = data_pair(X0, Y0, "X0", "Y0", "P0")
        if Y0.shape[1] != self.D:
            raise ValueError(f"Y0 has D={Y0.shape[1]} outputs but the training labels have D={self.D}")
        pred = self.predict(X0)
        return float(np.mean(np.sum((Y0 - pred.mean) ** 2, axis=1) + pred.var.sum(axis=1)))

    def posterior_predictive(self, X0):
        """The predictive distribution as ``numpyro.distributions.MultivariateNormal``.

        Computed in float64; the distribution holds its parameters in JAX's default dtype (float32 unless
        ``jax_enable_x64`` is on).

        Parameters
        ----------
        X0 : array_like, shape (P0, N0)
            Test inputs.

        Returns
        -------
        numpyro.distributions.MultivariateNormal
            Batch shape (P0,), event shape (D,).
        """
        import jax.numpy as jnp
        import numpyro.distributions as dist

        pred = self.predict(X0)
        # square root U diag(sqrt(s)) -> lower-triangular factor by QR, valid also for singular cov
        s, U = np.linalg.eigh(pred.cov)
        root = U * np.sqrt(np.maximum(s, 0.0))[:, None, :]
        r = np.linalg.qr(np.swapaxes(root, 1, 2), mode="r")
        sign = np.where(np.diagonal(r, axis1=1, axis2=2) < 0, -1.0, 1.0)
        scale_tril = np.swapaxes(r * sign[:, :, None], 1, 2)
        return dist.MultivariateNormal(jnp.asarray(pred.mean), scale_tril=jnp.asarray(scale_tril))
