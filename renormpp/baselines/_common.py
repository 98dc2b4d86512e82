"""What the two baselines share: input checks, the validation split and the scores (MSE and accuracy)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._checks import data_pair


def check_data(X, Y, X_test=None, Y_test=None):
    """float64 (P, N0), (P, D) [and test] arrays, finite and consistent; a (P,) Y means D = 1."""
    X, Y = data_pair(X, Y)
    if (X_test is None) != (Y_test is None):
        raise ValueError("give both X_test and Y_test, or neither")
    if X_test is not None:
        X_test, Y_test = data_pair(X_test, Y_test, "X_test", "Y_test", "P0")
        if X_test.shape[1] != X.shape[1] or Y_test.shape[1] != Y.shape[1]:
            raise ValueError(f"the test set has N0={X_test.shape[1]} inputs and D={Y_test.shape[1]} outputs; the "
                             f"training set has N0={X.shape[1]} and D={Y.shape[1]}")
    return X, Y, X_test, Y_test


@dataclass(frozen=True)
class Split:
    """The training data split into the part that is fitted and the validation part (rows ``val_index``)."""

    X: np.ndarray
    Y: np.ndarray
    X_val: np.ndarray
    Y_val: np.ndarray
    train_index: np.ndarray = field(repr=False)
    val_index: np.ndarray = field(repr=False)


def split(X, Y, val_fraction: float = 0.2, seed: int = 0) -> Split:
    """Hold out ``round(val_fraction * P)`` rows, drawn by ``numpy.random.default_rng(seed)``, for validation.

    The paper: "a validation set comprising around 20% of the training data" (supplement, "Hyperparameter
    Optimization"). The same ``seed`` gives the same split to Adam and to the GP, so that both are
    selected on the same validation set.

    Parameters
    ----------
    X : array_like, shape (P, N0)
        Training inputs.
    Y : array_like, shape (P, D)
        Training labels.
    val_fraction : float, default 0.2
        The fraction held out.
    seed : int, default 0
        The seed of the draw.

    Returns
    -------
    Split
        The fitted and validation parts, and their row indices.
    """
    P = X.shape[0]
    n_val = int(round(float(val_fraction) * P)) if np.isfinite(val_fraction) else -1
    if not 0 < val_fraction < 1 or not 1 <= n_val <= P - 1:
        raise ValueError(f"val_fraction must be in (0, 1) and leave at least one example on each side; got "
                         f"{val_fraction!r} for P = {P}")
    perm = np.random.default_rng(seed).permutation(P)
    val, tr = np.sort(perm[:n_val]), np.sort(perm[n_val:])
    return Split(X=X[tr], Y=Y[tr], X_val=X[val], Y_val=Y[val], train_index=tr, val_index=val)


def scores(Y, F):
    r"""``(mse, accuracy)`` of predictions F (P, D) of labels Y (P, D); works on numpy and JAX arrays.

    ``mse`` :math:`= \frac1P\sum_\mu \|y^\mu - f(x^\mu)\|^2`, summed over the D outputs: the package's
    :math:`\epsilon_g` of a deterministic predictor (the theory's ``generalization_error`` adds the posterior
    variance :math:`\operatorname{Tr}\Sigma` to the MSE of the mean). PyTorch's ``MSELoss`` is ``mse / D``.
    ``accuracy``: the fraction of rows with argmax f = argmax y (one-hot labels, D > 1), or with
    sign f = sign y (labels ±1, D = 1). It means nothing for regression targets.

    Parameters
    ----------
    Y : array_like, shape (P, D)
        Labels.
    F : array_like, shape (P, D)
        Predictions.

    Returns
    -------
    mse : float
    accuracy : float
    """
    mse = ((Y - F) ** 2).sum(-1).mean()
    hit = (F * Y > 0)[..., 0] if Y.shape[-1] == 1 else F.argmax(-1) == Y.argmax(-1)
    return mse, hit.mean()
