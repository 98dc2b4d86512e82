r"""Synthetic data sets: Gaussian inputs with teacher labels, and the low-dimensional regression (Fig. 4)."""
from __future__ import annotations

import numpy as np
from scipy.special import erf

from ._common import Dataset, check_positive_ints

TEACHERS = ("linear", "erf_1hl")


def synthetic(P: int = 1000, P_test: int = 1000, N0: int = 144, D: int = 2, teacher: str = "linear",
              seed: int = 0, teacher_width: int = 1000, output_correlation: float = 0.0) -> Dataset:
    r"""Gaussian inputs :math:`x \sim \mathcal N(0, \mathbb 1_{N_0})` with labels from a teacher.

    * ``"linear"``: :math:`y = W x/\sqrt{N_0}`, :math:`W \in \mathbb R^{D\times N_0}` standard normal
      (paper, Fig. 1a: N0 = 12², D = 2).
    * ``"erf_1hl"``: :math:`y_a = \frac{1}{\sqrt{N_1}}\sum_i v_{ia}\,\mathrm{erf}(w_i\cdot x/\sqrt{N_0})`
      with ``teacher_width`` = N1 = 1000 hidden units and standard normal w, v (supplement).

    ``output_correlation`` = ρ correlates the teacher's outputs: the rows of W (linear) or the columns of v
    (erf_1hl) are drawn with correlation matrix :math:`(1-\rho)\,\mathbb 1_D + \rho\,\mathbf 1\mathbf 1^\top` (their
    standard normal draws times its Cholesky factor), so each pair of labels has correlation ρ over the inputs. The
    output-output correlations of the readout, Q*_ab, then stand out of the noise.

    Train and test come from the same teacher. Everything is drawn from ``numpy.random.default_rng(seed)``
    in this order: the (P + P_test, N0) inputs (train first), then W (D, N0), or w (N1, N0) and v (N1, D). The
    linear teacher's W is ``metadata["teacher_directions"]``.

    Parameters
    ----------
    P : int, default 1000
        Training examples.
    P_test : int, default 1000
        Test examples.
    N0 : int, default 144
        Input dimension.
    D : int, default 2
        Outputs.
    teacher : {"linear", "erf_1hl"}
        The teacher, as above.
    seed : int, default 0
        The seed of every draw.
    teacher_width : int, default 1000
        The hidden units N1 of the ``"erf_1hl"`` teacher.
    output_correlation : float, default 0
        The correlation ρ of every pair of the teacher's outputs, in (-1/(D-1), 1).

    Returns
    -------
    Dataset
        ``X``, ``Y`` (train) and ``X_test``, ``Y_test`` in float64, with ``metadata``.

    Raises
    ------
    ValueError
        For a size that is not a positive integer, an unknown teacher, or a correlation outside (-1/(D-1), 1).
    """
    check_positive_ints(P=P, P_test=P_test, N0=N0, D=D, teacher_width=teacher_width)
    if teacher not in TEACHERS:
        raise ValueError(f"unknown teacher {teacher!r}; choose one of {', '.join(map(repr, TEACHERS))}")
    rho = float(output_correlation)
    if not (-1.0 / max(D - 1, 1) < rho < 1.0) and rho != 0.0:
        raise ValueError(f"output_correlation = {output_correlation} makes no correlation matrix for D = {D}: choose "
                         f"it in (-1/(D-1), 1) = ({-1.0 / max(D - 1, 1):.3g}, 1)")
    mix = np.linalg.cholesky((1 - rho) * np.eye(D) + rho * np.ones((D, D)))  # the identity at rho = 0
    rng = np.random.default_rng(seed)
    X_all = rng.standard_normal((P + P_test, N0))
    if teacher == "linear":
        W = mix @ rng.standard_normal((D, N0))
        Y_all = X_all @ W.T / np.sqrt(N0)
    else:
        w = rng.standard_normal((teacher_width, N0))
        v = rng.standard_normal((teacher_width, D)) @ mix.T
        Y_all = erf(X_all @ w.T / np.sqrt(N0)) @ v / np.sqrt(teacher_width)
    meta = dict(P=P, P_test=P_test, N0=N0, D=D, teacher=teacher, seed=seed)
    if rho:
        meta["output_correlation"] = rho
    if teacher == "erf_1hl":
        meta["teacher_width"] = teacher_width
    else:  # the input directions the labels depend on (renormpp.diagnostics.kernel.diagnose)
        meta["teacher_directions"] = W
    return Dataset(X=X_all[:P], Y=Y_all[:P], X_test=X_all[P:], Y_test=Y_all[P:], name=f"synthetic-{teacher}",
                   class_names=tuple(f"y{a}" for a in range(D)), metadata=meta)


def low_dimensional_targets(x: np.ndarray) -> np.ndarray:
    r"""The supplement's five noiseless targets of inputs ``x`` (n, n_features >= 10), columns y1..y5:

    .. math::
        y_1 = \sin 2\pi x_1 + \log(x_2 + 1), \quad y_2 = \cos 2\pi x_3 + x_4^2/10, \quad
        y_3 = \tan(2\pi x_5)/5 + \sqrt{\max(0, x_6)}, \quad y_4 = x_7^3/20 - \sin 2\pi x_8, \quad
        y_5 = (e^{x_9} - x_{10})/20.
    """
    x1, x2, x3, x4, x5, x6, x7, x8, x9, x10 = np.asarray(x, np.float64).T[:10]
    tau = 2 * np.pi
    return np.stack([np.sin(tau * x1) + np.log(x2 + 1), np.cos(tau * x3) + x4 ** 2 / 10,
                     np.tan(tau * x5) / 5 + np.sqrt(np.maximum(0, x6)), x7 ** 3 / 20 - np.sin(tau * x8),
                     (np.exp(x9) - x10) / 20], axis=1)


def low_dimensional(P: int = 1600, P_test: int = 400, n_features: int = 12, noise_ratio: float = 0.1,
                    seed: int = 0) -> Dataset:
    r"""The low-dimensional multi-output regression of the supplement ("Low-dimensional data", Fig. 4).

    Inputs uniform on [-1, 1] with ``n_features`` = N0 = 12 coordinates, of which only the first ten enter
    the five targets of :func:`low_dimensional_targets`. Each target gets Gaussian noise of variance
    ``noise_ratio`` times the variance of that noiseless target (over all P + P_test samples). Then inputs
    and targets are standardized per coordinate with the mean and standard deviation of the training part.
    The first P samples are the train set, the last P_test the test set (the samples are i.i.d.).

    The supplement is inconsistent on sizes; we choose (and record in ``metadata["choices"]``):

    * N0 = 12 inputs (the text's first sentence and Fig. 4's caption; it also says "D = 20 input variables");
    * D = 5 targets (the five listed functions; the text says "D = 10 scalar labels");
    * 2000 samples split 1600/400 (Fig. 4 has P = 1600; the text writes "N0 = 2000 samples");
    * ``noise_ratio`` = 0.1 (the text: "a chosen proportionality constant", not given);
    * inputs on (-1, 1], drawn as 1 - 2U with U uniform on [0, 1), so that log(x2 + 1) stays finite;
    * "normalized or scaled": standardization of inputs and targets with training statistics
      (``metadata`` holds ``x_mean``, ``x_std``, ``y_mean``, ``y_std`` to undo it).

    Note: tan(2 pi x5) has poles at x5 = ±1/4, ±3/4, so y3 is heavy-tailed and its variance (hence its
    noise) is set by the few samples nearest a pole. We keep the target as written.
    Draw order from ``numpy.random.default_rng(seed)``: the (P + P_test, n_features) uniforms, then the
    (P + P_test, 5) standard normals of the noise.

    Parameters
    ----------
    P : int, default 1600
        Training samples.
    P_test : int, default 400
        Test samples.
    n_features : int, default 12
        Input coordinates N0 (at least 10).
    noise_ratio : float, default 0.1
        Noise variance over target variance.
    seed : int, default 0
        The seed of every draw.

    Returns
    -------
    Dataset

    Raises
    ------
    ValueError
        For fewer than 10 features or a negative noise ratio.
    """
    check_positive_ints(P=P, P_test=P_test, n_features=n_features)
    if n_features < 10:
        raise ValueError(f"n_features must be at least 10 (the targets use x1..x10); got {n_features}")
    if not np.isfinite(noise_ratio) or noise_ratio < 0:
        raise ValueError(f"noise_ratio must be a non-negative number; got {noise_ratio!r}")
    rng = np.random.default_rng(seed)
    X = 1.0 - 2.0 * rng.random((P + P_test, n_features))
    F = low_dimensional_targets(X)
    noise_std = np.sqrt(noise_ratio * F.var(axis=0))
    Y = F + noise_std * rng.standard_normal(F.shape)
    (x_mean, x_std), (y_mean, y_std) = ((A[:P].mean(0), A[:P].std(0)) for A in (X, Y))
    X, Y = (X - x_mean) / x_std, (Y - y_mean) / y_std
    choices = ("N0 = n_features = 12 (text also says 20)", "D = 5 targets (text says 10)",
               "2000 samples: 1600 train, 400 test", "noise variance = noise_ratio * Var(noiseless target)",
               "inputs uniform on (-1, 1]", "inputs and targets standardized with training statistics")
    meta = dict(P=P, P_test=P_test, N0=n_features, D=5, noise_ratio=noise_ratio, seed=seed, choices=choices,
                noise_std=noise_std, x_mean=x_mean, x_std=x_std, y_mean=y_mean, y_std=y_std)
    return Dataset(X=X[:P], Y=Y[:P], X_test=X[P:], Y_test=Y[P:], name="low-dimensional",
                   class_names=tuple(f"y{a}" for a in range(1, 6)), metadata=meta)
