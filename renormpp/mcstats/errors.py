r"""The error of the mean of a correlated Monte Carlo series (supplement, "Details of numerical experiments with
Langevin dynamics": thermalization cut, blocking with its plateau, the Gamma method as a cross-check):

* :func:`blocking`: Flyvbjerg-Petersen blocking; the plateau is found with the criterion of Lee, Filippi
  and Towler (PRE 83, 066706, 2011): the smallest block size :math:`B` with
  :math:`B^3 > 2 n\,(\sigma^2_B/\sigma^2_1)^2`.
* :func:`gamma_method`: Wolff's Gamma method (Comput. Phys. Commun. 156, 143, 2004) with his automatic
  window (S = 1.5) and bias correction; validated against pyerrors in the tests.
* :func:`ess_error`: the ESS-based MCSE of ArviZ.

Every estimate reports :math:`\tau_{\rm int}` in the convention :math:`\tau_{\rm int} = 1 + 2\sum_{t\ge1}\rho(t)`,
so that :math:`\mathrm{Var}(\bar x) = \tau_{\rm int}\,\sigma^2/n` and :math:`\tau_{\rm int} = n/\mathrm{ESS}`
(an AR(1) series with coefficient :math:`\phi` has :math:`\tau_{\rm int} = (1+\phi)/(1-\phi)`); Wolff's
:math:`\tau_{\rm int}` is half of it.

A series may have several chains: pass shape (chain, draw). The thermalization cut (``cut="auto"``:
:func:`thermalization_cut`, the cut that maximizes the effective sample size) is applied to every chain.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

#: fewer effective samples than this and an error estimate is flagged as unreliable
MIN_EFFECTIVE = 50


class ShortRunWarning(RuntimeWarning):
    """The series is too short (too few independent samples) for the error estimate to hold."""


class FrozenChainWarning(ShortRunWarning):
    """A chain did not move: every draw after the thermalization cut has the same value."""


@dataclass(frozen=True)
class ErrorEstimate:
    """Mean of a series and the standard error of that mean, with the integrated autocorrelation time.

    ``tau_int`` follows :math:`\\tau_{\\rm int} = 1 + 2\\sum_t\\rho(t) = n/\\mathrm{ESS}`. ``cut`` is the
    number of draws dropped from the start of each chain; ``n`` the draws used. ``details`` holds the
    method's own output (blocking curve, Gamma-method window, ...). ``reliable`` is False when the
    run is too short for the estimate to hold (a :class:`ShortRunWarning` was issued).
    """

    mean: float
    error: float
    tau_int: float
    tau_int_error: float
    n: int
    cut: int
    method: str
    reliable: bool = True
    details: dict = field(default_factory=dict, repr=False)

    @property
    def ess(self) -> float:
        return self.n / self.tau_int


# ---- input and thermalization --------------------------------------------------------------------
def _as_chains(series) -> np.ndarray:
    x = np.asarray(series, dtype=np.float64)
    if x.ndim == 1:
        x = x[None]
    if x.ndim != 2:
        raise ValueError(f"a scalar series must have shape (draw,) or (chain, draw); got {x.shape}")
    if x.shape[1] < 4:
        raise ValueError(f"the series has {x.shape[1]} draws per chain; need at least 4")
    if not np.all(np.isfinite(x)):
        raise ValueError("the series contains NaN or inf; a sampler diverged or the observable overflowed")
    return x


def _wolff_window(rho: np.ndarray, N: int, S: float = 1.5):
    """Wolff's automatic window: the first W with g(W) < 0. Returns (W, tau_W for W = 1, 2, ..., found)."""
    tau_w = 0.5 + np.cumsum(rho[1:])
    W = np.arange(1, len(tau_w) + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = np.where(tau_w > 0.5, S / np.log((2 * tau_w + 1) / (2 * tau_w - 1)), 1e-12)
        g = np.exp(-W / tau) - tau / np.sqrt(W * N)
    found = bool(np.any(g < 0))
    return (int(np.argmax(g < 0)) + 1 if found else len(W)), tau_w, found


def _tau_quick(x: np.ndarray) -> float:
    """tau_int = 1 + 2 sum rho with Wolff's window and no bias correction or warnings; >= 1."""
    gamma = _autocovariance(x)
    if gamma[0] <= 0 or x.shape[1] < 2:
        return 1.0
    W, tau_w, _ = _wolff_window(gamma / gamma[0], x.size)
    return max(1.0, 2 * float(tau_w[W - 1]))


def thermalization_cut(series, max_fraction: float = 0.5, candidates: int = 40) -> int:
    r"""Draws to drop from the start of each chain: the cut that maximizes the effective sample size.

    The rule of Chodera (J. Chem. Theory Comput. 12, 1799, 2016): a transient both shifts the mean and
    inflates the apparent autocorrelation, so the cut d maximizing :math:`(n-d)/\tau_{\rm int}(d)` of the
    remaining draws removes it. ``candidates`` cuts are tried, evenly spaced up to ``max_fraction`` of the
    chain; long chains are block-averaged to at most 100,000 points for the search. The chains share one
    cut, computed on the pooled autocorrelation.

    Parameters
    ----------
    series : array_like, shape (chain, draw) or (draw,)
        The Monte Carlo series of one quantity, one row per chain.
    max_fraction : float, default 0.5
        The largest cut tried, as a fraction of the chain.
    candidates : int, default 40
        The number of cuts tried.

    Returns
    -------
    int
        The draws to drop from the start of every chain.
    """
    x = _as_chains(series)
    n = x.shape[1]
    block = max(1, n // 100_000)
    xb = x[:, : n // block * block].reshape(x.shape[0], -1, block).mean(axis=2)
    nb = xb.shape[1]
    cuts = np.unique(np.linspace(0, int(max_fraction * nb), candidates).astype(int))
    cuts = cuts[nb - cuts >= 4]
    n_eff = [(nb - c) / _tau_quick(xb[:, c:]) for c in cuts]
    return int(cuts[int(np.argmax(n_eff))] * block)


def _apply_cut(series, cut) -> tuple[np.ndarray, int]:
    x = _as_chains(series)
    if cut == "auto":
        cut = thermalization_cut(x)
    cut = int(cut)
    if not 0 <= cut <= x.shape[1] - 4:
        raise ValueError(f"cut={cut} must leave at least 4 of the {x.shape[1]} draws per chain")
    return x[:, cut:], cut


def _frozen(x: np.ndarray, method: str) -> list[int]:
    """The chains of ``x`` (chain, draw) whose draws are all equal, with a :class:`FrozenChainWarning` if any."""
    stuck = [c for c in range(x.shape[0]) if np.ptp(x[c]) == 0]
    if stuck:
        warnings.warn(f"{method}: chain(s) {stuck} of {x.shape[0]} did not move (every draw after the thermalization "
                      "cut has the same value). A stuck chain (e.g. a step too large for its Metropolis test: "
                      "acceptance 0) does not sample the posterior, and no error bar holds: check the acceptance, "
                      "reduce the step.", FrozenChainWarning, stacklevel=3)
    return stuck


def _no_error(x: np.ndarray, cut: int, method: str) -> "ErrorEstimate":
    """Every chain is frozen: the mean, and no error (NaN), unreliable."""
    nan = float("nan")
    return ErrorEstimate(float(x.mean()), nan, nan, nan, int(x.size), cut, method, False, dict(frozen=True))


def _short(method: str, n_eff: float, what: str) -> bool:
    if n_eff >= MIN_EFFECTIVE:
        return True
    warnings.warn(f"{method}: only about {n_eff:.0f} independent samples ({what}); the error estimate does "
                  f"not hold. Run longer (aim for >= {MIN_EFFECTIVE} autocorrelation times).",
                  ShortRunWarning, stacklevel=3)
    return False


# ---- blocking -------------------------------------------------------------------------------------------
def _blocking_curve(chain: np.ndarray):
    """Flyvbjerg-Petersen: variance of the mean estimated at block sizes 1, 2, 4, ..."""
    sizes, var_mean, n_blocks = [], [], []
    x, size = chain, 1
    while len(x) >= 2:
        n = len(x)
        sizes.append(size)
        var_mean.append(np.var(x, ddof=1) / n)
        n_blocks.append(n)
        x = 0.5 * (x[: n // 2 * 2 : 2] + x[1: n // 2 * 2 : 2])
        size *= 2
    return np.array(sizes), np.array(var_mean), np.array(n_blocks)


def blocking(series, cut="auto") -> ErrorEstimate:
    """Error of the mean by blocking (Flyvbjerg & Petersen 1989) with automatic plateau detection.

    ``details`` has the curve for plotting: ``block_size``, ``error`` (standard error of the mean at that
    block size), ``error_error`` (its own uncertainty, :math:`\\epsilon/\\sqrt{2(n_B-1)}`) and ``optimal``
    (the block size chosen). Several chains: the curve of the first chain is returned, and the errors of
    the chain means are combined.

    Parameters
    ----------
    series : array_like, shape (draw,) or (chain, draw)
        The Monte Carlo series of one quantity, one row per chain.
    cut : int or "auto", default "auto"
        Draws dropped from the start of each chain; "auto" is :func:`thermalization_cut`. At least 4 draws per
        chain must remain.

    Returns
    -------
    ErrorEstimate
        The mean, its standard error and the integrated autocorrelation time.

    Raises
    ------
    ValueError
        Where the cut leaves fewer than 4 draws per chain.
    """
    x, cut = _apply_cut(series, cut)
    stuck = _frozen(x, "blocking")
    if len(stuck) == x.shape[0]:
        return _no_error(x, cut, "blocking")
    n = x.shape[1]
    curves, errors, reliable = [], [], not stuck
    for chain in x:
        sizes, var_mean, n_blocks = _blocking_curve(chain)
        with np.errstate(divide="ignore", invalid="ignore"):  # a frozen chain: 0 / 0
            ratio = var_mean / var_mean[0]
        ok = sizes**3 > 2 * n * ratio**2
        if ok.any():
            k = int(np.argmax(ok))
        else:
            k = len(sizes) - 1
            reliable = False
        curves.append((sizes, np.sqrt(var_mean), np.sqrt(var_mean / (2 * (n_blocks - 1))), sizes[k]))
        errors.append(np.sqrt(var_mean[k]))
    errors = np.array(errors)
    error = np.sqrt(np.sum(errors**2)) / len(errors)
    var0 = np.mean(np.var(x, axis=1, ddof=1))
    tau = float(error**2 * x.size / var0)
    if not reliable:
        warnings.warn("blocking: no plateau (the block size never satisfied the Lee-Filippi-Towler criterion); "
                      "the error is a lower bound. Run longer.", ShortRunWarning, stacklevel=2)
    reliable = reliable and _short("blocking", x.size / tau, f"{x.size} draws, tau_int ~ {tau:.1f}")
    sizes, err, err_err, opt = curves[0]
    return ErrorEstimate(mean=float(x.mean()), error=float(error), tau_int=tau,
                         tau_int_error=tau * float(np.sqrt(2.0 / max(n / opt - 1, 1))), n=int(x.size), cut=cut,
                         method="blocking", reliable=reliable,
                         details=dict(block_size=sizes, error=err, error_error=err_err, optimal=int(opt)))


# ---- Gamma method -------------------------------------------------------------------------------------
def _autocovariance(x: np.ndarray) -> np.ndarray:
    """Gamma(t) pooled over chains (deviations from the grand mean), by FFT; shape (n,)."""
    n = x.shape[1]
    d = x - x.mean()
    size = 1 << (2 * n - 1).bit_length()
    f = np.fft.rfft(d, size, axis=1)
    acov = np.fft.irfft(f * np.conj(f), size, axis=1)[:, :n].sum(axis=0)
    return acov / (x.shape[0] * (n - np.arange(n)))


def _windowed_tau(rho: np.ndarray, N: int, S: float = 1.5) -> tuple[float, int, bool]:
    r"""``(tau_W, W, found)``: Wolff's windowed sum of the normalized autocorrelation ``rho`` of ``N`` draws, with its
    bias correction :math:`1 + (2W+1)/N` (half of :math:`\tau_{\rm int}`, Wolff's convention)."""
    window, tau_w, found = _wolff_window(rho, N, S)
    return float(tau_w[window - 1] * (1 + (2 * window + 1) / N)), window, found


def gamma_method(series, cut="auto", S: float = 1.5) -> ErrorEstimate:
    r"""Error of the mean by Wolff's Gamma method with automatic windowing.

    :math:`\tau_W = \frac12 + \sum_{t=1}^W \rho(t)` (Wolff's convention) is summed up to the first W with
    :math:`g(W) = e^{-W/\tau} - \tau/\sqrt{W N} < 0`, :math:`\tau = S/\ln\frac{2\tau_W+1}{2\tau_W-1}`; the
    bias of the window sum is corrected by the factor :math:`1 + (2W+1)/N` (Wolff 2004). The error of
    :math:`\tau_{\rm int}` is Madras-Sokal's :math:`2\tau\sqrt{(W + 1/2 - \tau)/N}`. ``details``: ``window``,
    ``rho`` (normalized autocorrelation up to 2W for plotting). Returned ``tau_int`` is :math:`2\tau_W`.

    Parameters
    ----------
    series : array_like, shape (draw,) or (chain, draw)
        The Monte Carlo series of one quantity, one row per chain.
    cut : int or "auto", default "auto"
        Draws dropped from the start of each chain; "auto" is :func:`thermalization_cut`. At least 4 draws per
        chain must remain.
    S : float, default 1.5
        Wolff's S, the factor of the window criterion (larger: longer windows).

    Returns
    -------
    ErrorEstimate
        The mean, its standard error and the integrated autocorrelation time.

    Raises
    ------
    ValueError
        Where the cut leaves fewer than 4 draws per chain.
    """
    x, cut = _apply_cut(series, cut)
    stuck = _frozen(x, "gamma_method")
    N = x.size
    gamma = _autocovariance(x)
    if len(stuck) == x.shape[0] or gamma[0] <= 0:
        return _no_error(x, cut, "gamma")
    rho = gamma / gamma[0]
    tau_int, window, found = _windowed_tau(rho, N, S)
    if not found:
        warnings.warn("gamma_method: the automatic window was not found; the series is far too short",
                      ShortRunWarning, stacklevel=2)
    if tau_int <= 0:  # a sum of noisy anticorrelations: only in series far too short to say anything
        warnings.warn(f"gamma_method: the summed autocorrelation is negative (tau_W = {tau_int:.2g}) in {N} draws; "
                      "the error is the naive one and does not hold: sample longer", ShortRunWarning, stacklevel=2)
        tau_int, found = 0.5, False
    error = float(np.sqrt(2 * tau_int * gamma[0] / N))
    dtau = 2 * tau_int * np.sqrt(max(window + 0.5 - tau_int, 0.0) / N)
    reliable = _short("gamma_method", N / (2 * tau_int), f"{N} draws, tau_int = {2 * tau_int:.1f}") and not stuck \
        and found
    return ErrorEstimate(mean=float(x.mean()), error=error, tau_int=float(2 * tau_int), tau_int_error=float(2 * dtau),
                         n=N, cut=cut, method="gamma", reliable=reliable,
                         details=dict(window=int(window), rho=rho[: 2 * window + 1], S=S))


# ---- ESS-based ------------------------------------------------------------------------------------------
def ess_error(series, cut="auto") -> ErrorEstimate:
    """Error of the mean from ArviZ's effective sample size for the mean (``ess(method="mean")``).

    Parameters
    ----------
    series : array_like, shape (draw,) or (chain, draw)
        The Monte Carlo series of one quantity, one row per chain.
    cut : int or "auto", default "auto"
        Draws dropped from the start of each chain; "auto" is :func:`thermalization_cut`. At least 4 draws per
        chain must remain.

    Returns
    -------
    ErrorEstimate
        The mean, its standard error and the integrated autocorrelation time.

    Raises
    ------
    ValueError
        Where the cut leaves fewer than 4 draws per chain.
    """
    from arviz_stats import ess

    x, cut = _apply_cut(series, cut)
    stuck = _frozen(x, "ess_error")
    if len(stuck) == x.shape[0]:
        return _no_error(x, cut, "ess")
    n_eff = float(ess(x, method="mean"))
    tau = x.size / n_eff
    var = np.var(x, ddof=1)
    reliable = _short("ess_error", n_eff, f"{x.size} draws") and not stuck
    return ErrorEstimate(mean=float(x.mean()), error=float(np.sqrt(var / n_eff)), tau_int=float(tau),
                         tau_int_error=float("nan"), n=int(x.size), cut=cut, method="ess", reliable=reliable,
                         details=dict(ess=n_eff))


ESTIMATORS = {"gamma": gamma_method, "blocking": blocking, "ess": ess_error}


def error_of_mean(series, method: str = "gamma", cut="auto") -> ErrorEstimate:
    """Dispatch to :func:`gamma_method`, :func:`blocking` or :func:`ess_error`.

    Parameters
    ----------
    series : array_like, shape (chain, draw) or (draw,)
        The Monte Carlo series of one quantity, one row per chain.
    method : {"gamma", "blocking", "ess"}
        The estimator (:data:`ESTIMATORS`).
    cut : int or "auto", default "auto"
        Draws dropped from the start of each chain; "auto" is :func:`~.errors.thermalization_cut`.

    Returns
    -------
    ErrorEstimate

    Raises
    ------
    ValueError
        For an unknown method, or a cut that leaves fewer than 4 draws per chain.
    """
    try:
        return ESTIMATORS[method](series, cut=cut)
    except KeyError:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(map(repr, ESTIMATORS))}") from None
