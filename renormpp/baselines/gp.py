r"""The best infinite-width network: a grid search over :math:`T, \lambda_0, \lambda_1` of the NNGP posterior
(the theory at Q = 1) on the validation MSE, the solid lines of the paper's Figs. 3 and 4.

At Q = 1 the predictions of :mod:`renormpp.theory` (supplement, eq:SM_bias and eq:SM_var) reduce to

.. math::
    \Gamma(x_0) = \sum_\mu \frac{\kappa_\mu\,\tilde y_\mu}{T\lambda_1 + k_\mu}, \qquad
    \Sigma(x_0) = \frac{1}{\lambda_1}\Big[K(x_0,x_0)
    - \sum_\mu \frac{\kappa_\mu^2}{T\lambda_1 + k_\mu}\Big]\mathbb 1_D .

So the mean, and with it the validation MSE, depends on T and :math:`\lambda_1` only through the ridge
:math:`T\lambda_1` (for ReLU, whose kernel is homogeneous, :math:`K \propto 1/\lambda_0`, only through
:math:`\lambda_0 T\lambda_1`); the variance depends on :math:`\lambda_1` by itself. The MSE has a valley of
equal minima along these directions: among the grid points within a relative 1e-9 of the lowest MSE, the
one with the lowest validation negative log predictive density of
:math:`y \sim \mathcal N(\Gamma, \Sigma + T\,\mathbb 1)` is chosen, which also identifies the scale of the
prior and the noise.

Only :math:`\lambda_0` (and the activation) changes the kernel: one eigendecomposition per :math:`\lambda_0`
serves the whole (T, :math:`\lambda_1`) grid at :math:`O(P P_{\rm val} D)` per point (:func:`renormpp.theory.moments`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import xarray as xr

from .. import theory
from .._checks import positive
from ._common import check_data, scores, split

TIE_RTOL = 1e-9


@dataclass(frozen=True)
class GPResult:
    """The grid point (T, lambda0, lambda1) with the lowest validation MSE, and how it does.

    ``val_mse``, ``val_nll``: validation MSE of the posterior mean and negative log predictive density per
    example, as DataArrays with dims (T, lambda0, lambda1). ``fit``: the infinite-width
    :class:`~renormpp.theory.TheoryFit` at the best point (on all of (X, Y) if ``refit``, else on the fitted part;
    N1 plays no role at Q = 1 and is recorded as P). ``train_*``: on the data ``fit`` is conditioned on; ``test_*``:
    MSE and accuracy of the posterior mean (:func:`~renormpp.baselines.scores`), and ``test_eps_g``, the
    theory's :math:`\\epsilon_g` = MSE + mean Tr Sigma, the loss of one network drawn from the posterior (NaN
    without a test set). ``train_index``, ``val_index``: the rows of X in each part of the split.
    """

    T: float
    lambda0: float
    lambda1: float
    val_mse: xr.DataArray = field(repr=False)
    val_nll: xr.DataArray = field(repr=False)
    fit: theory.TheoryFit = field(repr=False)
    train_mse: float
    train_accuracy: float
    test_mse: float
    test_accuracy: float
    test_eps_g: float
    train_index: np.ndarray = field(repr=False)
    val_index: np.ndarray = field(repr=False)

    @property
    def best_val_mse(self) -> float:
        return float(self.val_mse.sel(T=self.T, lambda0=self.lambda0, lambda1=self.lambda1))


def _grid(name: str, values) -> np.ndarray:
    values = np.atleast_1d(np.asarray(values, dtype=np.float64))
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-d sequence of positive numbers; got shape {values.shape}")
    return np.array([positive(f"{name} entry", v) for v in values])


def best_gp(X, Y, *, T_grid, lambda0_grid, lambda1_grid, activation="relu", val_fraction: float = 0.2,
            X_test=None, Y_test=None, seed: int = 0, refit: bool = True) -> GPResult:
    """Grid search of the infinite-width GP (method ``"infinite_width"``) for the lowest validation MSE.

    ``val_fraction`` of the rows of (X, Y), drawn by ``seed`` (the split of
    :func:`~renormpp.baselines.train_adam` with ``split_seed=seed``), are the validation set; the GP is
    conditioned on the rest. ``refit``: condition the GP at the best point on all of (X, Y) for the reported
    train and test scores (default), or on the fitted part only. Ties in the MSE are broken as in the module
    docstring. Theory in float64.

    Parameters
    ----------
    X : array_like, shape (P, N0)
        Training inputs.
    Y : array_like, shape (P, D)
        Training labels.
    T_grid : array_like
        Temperatures tried.
    lambda0_grid : array_like
        Prior precisions of the hidden weights tried.
    lambda1_grid : array_like
        Prior precisions of the readout tried.
    activation : str or callable, default "relu"
        The network's activation.
    val_fraction : float, default 0.2
        The fraction of the rows held out for validation.
    X_test : array_like, shape (P0, N0), optional
        Test inputs, for the reported test scores.
    Y_test : array_like, shape (P0, D), optional
        Test labels.
    seed : int, default 0
        The seed of the split.
    refit : bool, default True
        Condition the GP at the best point on all of (X, Y) for the reported scores.

    Returns
    -------
    GPResult
        The best point (T, lambda0, lambda1), its validation MSE and NLL, its fit, and the train and test scores.
    """
    X, Y, X_test, Y_test = check_data(X, Y, X_test, Y_test)
    grids = {"T": _grid("T_grid", T_grid), "lambda0": _grid("lambda0_grid", lambda0_grid),
             "lambda1": _grid("lambda1_grid", lambda1_grid)}
    data = split(X, Y, val_fraction, seed)
    shape = tuple(g.size for g in grids.values())
    mse, nll = np.empty(shape), np.empty(shape)
    eye = np.eye(Y.shape[1])
    for j, lambda0 in enumerate(grids["lambda0"]):
        # one kernel and eigendecomposition for all (T, lambda1); the T and lambda1 given here do not enter it
        fit = theory.solve(data.X, data.Y, N1=len(data.X), lambda0=lambda0, activation=activation,
                           method="infinite_width")
        kappa, k00 = fit.test_kernel(data.X_val)
        for i, T in enumerate(grids["T"]):
            for k, lambda1 in enumerate(grids["lambda1"]):
                mean, s, U = theory.moments(fit.spectrum, eye, T, lambda1, kappa, k00)
                var, z = s + T, (data.Y_val - mean) @ U
                mse[i, j, k] = scores(data.Y_val, mean)[0]
                nll[i, j, k] = 0.5 * np.mean(np.sum(np.log(2 * np.pi * var) + z**2 / var, axis=1))
    ties = mse <= np.min(mse) * (1 + TIE_RTOL)
    i, j, k = np.unravel_index(np.argmin(np.where(ties, nll, np.inf)), shape)
    best = dict(T=grids["T"][i], lambda0=grids["lambda0"][j], lambda1=grids["lambda1"][k])
    Xf, Yf = (X, Y) if refit else (data.X, data.Y)
    fit = theory.solve(Xf, Yf, N1=len(Xf), activation=activation, method="infinite_width", **best)
    train_mse, train_acc = scores(Yf, fit.predict(Xf).mean)
    test = (np.nan,) * 3
    if X_test is not None:
        test = (*scores(Y_test, fit.predict(X_test).mean), fit.generalization_error(X_test, Y_test))
    dims = tuple(grids)
    return GPResult(**{name: float(v) for name, v in best.items()},
                    val_mse=xr.DataArray(mse, coords=grids, dims=dims, name="val_mse"),
                    val_nll=xr.DataArray(nll, coords=grids, dims=dims, name="val_nll"), fit=fit,
                    train_mse=float(train_mse), train_accuracy=float(train_acc), test_mse=float(test[0]),
                    test_accuracy=float(test[1]), test_eps_g=float(test[2]), train_index=data.train_index,
                    val_index=data.val_index)
