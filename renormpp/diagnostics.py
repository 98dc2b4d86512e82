r"""Honest error bars for Monte Carlo series, and the comparison of sampled networks with the theory.

Error of the mean of a correlated series (supplement, "Details of numerical experiments with Langevin
dynamics": thermalization cut, blocking with its plateau, the Gamma method as a cross-check):

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

from . import theory
from .mcmc import base as _base

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
    """Draws to drop from the start of each chain: the cut that maximizes the effective sample size.

    The rule of Chodera (J. Chem. Theory Comput. 12, 1799, 2016): a transient both shifts the mean and
    inflates the apparent autocorrelation, so the cut d maximizing :math:`(n-d)/\tau_{\rm int}(d)` of the
    remaining draws removes it. ``candidates`` cuts are tried, evenly spaced up to ``max_fraction`` of the
    chain; long chains are block-averaged to at most 100,000 points for the search. The chains share one
    cut, computed on the pooled autocorrelation.
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
    """Error of the mean from ArviZ's effective sample size for the mean (``ess(method="mean")``)."""
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
    """Dispatch to :func:`gamma_method`, :func:`blocking` or :func:`ess_error`."""
    try:
        return ESTIMATORS[method](series, cut=cut)
    except KeyError:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(map(repr, ESTIMATORS))}") from None


# ---- equilibrium tests: drift, and the agreement of the chains --------------------------------------------
#: chance that one equilibrium test (:func:`drift`, :func:`chain_spread`) raises a false alarm on a series in
#: equilibrium: that of |z| > 3 for a standard normal z
FALSE_ALARM = 0.0026997960632601866

#: |z| of Geweke's test above which one series is flagged as still drifting (:func:`drift`; :func:`equilibrium_z`)
DRIFT_Z = 3.0


def equilibrium_z(family: int = 1) -> float:
    """|z| above which an equilibrium test raises its alarm when ``family`` series are judged together (the
    quantities of one run): Bonferroni's, so that the chance of any false alarm among them stays
    :data:`FALSE_ALARM`. 3 for one series, 4.06 for the 56 quantities of a D = 10 run."""
    from scipy.stats import norm

    if family < 1:
        raise ValueError(f"family must be a positive number of series; got {family}")
    return float(norm.isf(FALSE_ALARM / (2 * family)))


@dataclass(frozen=True)
class Drift:
    """Geweke's comparison of the start and the end of a series after the thermalization cut (:func:`drift`)."""

    z: float
    first_mean: float
    first_error: float
    last_mean: float
    last_error: float
    cut: int

    @property
    def drifting(self) -> bool:
        """|z| > :data:`DRIFT_Z`: the mean of the series still moves (:meth:`moves` for one series alone)."""
        return self.moves(1)

    def moves(self, family: int = 1) -> bool:
        """|z| > :func:`equilibrium_z` (``family``): the mean still moves, judged among ``family`` series."""
        return bool(np.isfinite(self.z) and abs(self.z) > equilibrium_z(family))


def drift(series, cut="auto", first: float = 0.1, last: float = 0.5) -> Drift:
    r"""Geweke's drift test (Geweke 1992): after the thermalization cut, the mean of the first ``first`` fraction of
    the draws against the mean of the last ``last`` fraction (all chains), each with its error by the Gamma method
    (with the last part's :math:`\tau_{\rm int}` for both parts: the first is too short to resolve its own),

    .. math::  z = (\bar x_{\rm first} - \bar x_{\rm last}) / \sqrt{\sigma^2_{\rm first} + \sigma^2_{\rm last}}.

    In equilibrium z is about standard normal; :attr:`Drift.drifting` (|z| > :data:`DRIFT_Z`) flags a series whose
    mean still moves, so that its mean and error bar describe a moving target: sample longer, or cut more. z is NaN
    where a part has no error (a frozen chain, flagged elsewhere) or the series is too short (fewer than 8 draws)."""
    if not (0 < first < 1 and 0 < last < 1 and first + last <= 1):
        raise ValueError(f"need 0 < first, 0 < last and first + last <= 1; got first={first}, last={last}")
    x, cut = _apply_cut(series, cut)
    n = x.shape[1]
    if n < 8:
        return Drift(np.nan, float(x.mean()), np.nan, float(x.mean()), np.nan, cut)
    na, nb = max(4, int(round(first * n))), max(4, int(round(last * n)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShortRunWarning)  # the parts are short by design; z carries their errors
        b = gamma_method(x[:, n - nb:], cut=0)
    first = x[:, :na]
    # the first part is too short to resolve its own tau_int (an estimate from ~10 effective draws is rough and biased
    # low, which gives z heavy tails); in equilibrium it shares the last part's, so its error uses that tau_int
    a_error = float(np.sqrt(b.tau_int * first.var() / first.size))
    err = float(np.hypot(a_error, b.error))
    z = (first.mean() - b.mean) / err if err > 0 else np.nan
    return Drift(float(z), float(first.mean()), a_error, b.mean, b.error, cut)


# ---- agreement between chains --------------------------------------------------------------------------
#: the customary R-hat line (Vehtari, Gelman, Simpson, Carpenter & Bürkner 2021), shown beside each quantity. It
#: does not judge: with two chains and ~100 effective draws each, R-hat of chains in equilibrium exceeds it for 10-20%
#: of the quantities (its noise is ~1/ESS); :func:`chain_spread` asks the same question with a known false-alarm rate
RHAT_MAX = 1.01


def _chains_or_halves(x: np.ndarray) -> np.ndarray:
    """(chain, draw) as it is, or the two halves of a single chain as two chains."""
    if x.shape[0] > 1:
        return x
    h = x.shape[1] // 2
    return np.stack([x[0, :h], x[0, h:2 * h]])


def rhat(series, cut="auto") -> float:
    r"""The rank-normalized split-:math:`\hat R` of ``series`` (chain, draw) after the thermalization ``cut``
    (``arviz.rhat``; Vehtari et al. 2021): the spread of the means of the chains' halves against the spread within them.
    Near 1 when every chain samples the same distribution. One chain is split into two. NaN for a series too short
    (fewer than 8 draws per chain). Reported, not used to judge (:data:`RHAT_MAX`, :func:`chain_spread`)."""
    import arviz as az

    x = _chains_or_halves(_apply_cut(series, cut)[0])
    if x.shape[1] < 8 or np.ptp(x) == 0:
        return float("nan")
    return float(az.rhat(np.asarray(x, dtype=float)))


@dataclass(frozen=True)
class ChainSpread:
    """The means of the chains against their own error bars (:func:`chain_spread`)."""

    chi2: float
    dof: int
    p: float
    means: tuple
    errors: tuple
    cut: int

    def apart(self, family: int = 1) -> bool:
        """The chains disagree: p below :data:`FALSE_ALARM` / ``family`` (Bonferroni over the ``family`` series
        judged together); False where p is NaN (a series too short, or a frozen chain: flagged elsewhere)."""
        return bool(np.isfinite(self.p) and self.p < FALSE_ALARM / family)


def chain_spread(series, cut="auto") -> ChainSpread:
    r"""Do the chains of ``series`` (chain, draw) sample the same distribution? Each chain's mean :math:`m_c` after
    the thermalization ``cut``, with its own error :math:`\sigma_c` (:func:`gamma_method` on that chain alone),
    against their weighted mean :math:`\bar m = \sum_c m_c \sigma_c^{-2} / \sum_c \sigma_c^{-2}`:

    .. math::  \chi^2 = \sum_c (m_c - \bar m)^2 / \sigma_c^2 ,

    distributed as :math:`\chi^2_{C-1}` when the chains are in equilibrium and their error bars hold; p is its upper
    tail. A slow mode that holds each chain in its own region, which no chain's autocorrelation shows, makes the means
    differ by many error bars (p tiny). This is the question of :func:`rhat`, with a false-alarm rate that does not
    depend on the length of the run: R-hat's noise is of order 1/ESS, so a fixed R-hat line rejects short runs in
    equilibrium and passes long runs held apart by a few error bars. One chain is split into two halves."""
    from scipy.stats import chi2 as chi2_dist

    x, cut = _apply_cut(series, cut)
    x = _chains_or_halves(x)
    if x.shape[1] < 8:
        return ChainSpread(np.nan, x.shape[0] - 1, np.nan, tuple(x.mean(axis=1)), (np.nan,) * x.shape[0], cut)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShortRunWarning)  # a short chain's error is too small: the test is stricter
        est = [gamma_method(c[None], cut=0) for c in x]
    m, e = np.array([a.mean for a in est]), np.array([a.error for a in est])
    if not np.all(e > 0):
        return ChainSpread(np.nan, len(m) - 1, np.nan, tuple(m), tuple(e), cut)
    w = e ** -2.0
    chi2 = float(np.sum(w * (m - np.sum(w * m) / np.sum(w)) ** 2))
    return ChainSpread(chi2, len(m) - 1, float(chi2_dist.sf(chi2, len(m) - 1)), tuple(m), tuple(e), cut)


@dataclass(frozen=True)
class Relaxation:
    """The short-span equilibrium test of a family of series (:func:`relaxation`)."""

    tau_int: float
    tau_int_chains: float
    drift_z: np.ndarray
    spread_p: np.ndarray
    family: int

    @property
    def relaxed(self) -> bool:
        """No series drifts (|z| <= :func:`equilibrium_z` (family)) and in none do the chains disagree (p >=
        :data:`FALSE_ALARM` / family); False where every series was frozen."""
        return bool(np.isfinite(self.tau_int) and np.all(np.abs(self.drift_z) <= equilibrium_z(self.family))
                    and np.all(self.spread_p >= FALSE_ALARM / self.family))


def _shared_tau(rows: np.ndarray, N: int) -> float:
    r""":math:`\tau_{\rm int}` (>= 1) shared by series of one dynamics: the mean of their normalized autocorrelations
    (each row (chain, draw) about its own mean) through Wolff's window for ``N`` draws (:func:`gamma_method`)."""
    rhos = [g / g[0] for g in map(_autocovariance, rows) if g[0] > 0]
    return max(2 * _windowed_tau(np.mean(rhos, axis=0), N)[0], 1.0) if rhos else np.nan


def relaxation(series: list) -> Relaxation:
    r"""Are the series of one run (each (chain, draw), the same draws: the quantities of a warmup span) in
    equilibrium? The questions of :func:`drift` (between the two halves) and :func:`chain_spread`, asked of spans
    of a few autocorrelation times, such as a warmup's.

    On 10-40 draws per chain, the Gamma method's :math:`\tau_{\rm int}` of one series is noisy and often far too
    small, so with 56 quantities judged together some error bar is too small at almost every check: families of
    56 AR(1) series in equilibrium (two chains, :math:`\tau_{\rm int}` = 4) fail those per-series tests at 97% of
    the checks on 10 draws per chain and 63% on 25. Here the series share one :math:`\tau_{\rm int}`
    (:func:`_shared_tau`: they come from one dynamics; the :math:`N` of one series is used, since they are
    correlated). With :math:`h` the draws of a half, :math:`n = 2h` those of a chain, :math:`C` the chains:

    .. math::  z = \frac{\bar x_{\rm first} - \bar x_{\rm last}}{\sqrt{2\tau\sigma^2_{\rm last}/(C h)}}, \qquad
               \chi^2 = \sum_c \frac{(\bar x_c - \bar x)^2}{\tau_c\,\sigma^2_{\rm within} / n},

    where :math:`\tau` and :math:`\sigma^2_{\rm last}` are those of the last half (a drift in the first half does
    not inflate them), and :math:`\tau_c` and :math:`\sigma^2_{\rm within}` those of each chain about its own mean
    (chains held apart do not inflate them). z is judged at :func:`equilibrium_z`; :math:`\chi^2/(C-1)` against
    :math:`F(C-1, \nu)`, :math:`\nu = C(n/\tau_c - 1)` (the within-chain scale is itself estimated from few
    draws), at :data:`FALSE_ALARM`; both with Bonferroni's correction over the family. On the AR(1) families
    above: false alarms at 23% of the checks on 10 draws per chain, 11-12% on 25 and 2% on 50 (11% with
    :math:`\tau_{\rm int}` = 10). In 3 of the 56 series, a relaxation tail falling from 5.5 to 0.4 standard
    deviations over 25 draws, a drift of 6 standard deviations and chains held 4 standard deviations apart are
    caught at every check; a drift of 3 standard deviations, at the resolution of ~6 independent draws per chain,
    at 35-66% (``tests/test_diagnostics.py``). One chain: the drift test alone. A series that does not vary in its
    last half (a frozen chain, flagged elsewhere) is left out; with none left, the family is not relaxed."""
    from scipy.stats import f as f_dist

    x = np.stack([_as_chains(s) for s in series])  # (series, chain, draw)
    K, C, n = x.shape
    if n < 8:
        raise ValueError(f"relaxation needs at least 8 draws per chain (4 in each half); got {n}")
    h = n // 2
    x = x[x[..., n - h:].reshape(K, -1).std(axis=1) > 0]
    if not len(x):
        return Relaxation(np.nan, np.nan, np.zeros(0), np.zeros(0), K)
    first, last = x[..., :h], x[..., n - h:]
    tau = _shared_tau(last, C * h)
    drift_z = (first.mean(axis=(1, 2)) - last.mean(axis=(1, 2))) / np.sqrt(
        2 * tau * last.reshape(len(x), -1).var(axis=1) / (C * h))
    if C == 1:
        return Relaxation(tau, np.nan, drift_z, np.ones(len(x)), K)
    tau_c = _shared_tau(x.reshape(-1, 1, n), n)
    m = x.mean(axis=2)
    with np.errstate(divide="ignore", invalid="ignore"):  # chains each frozen at its own value: apart (p = 0)
        chi2 = np.sum((m - m.mean(axis=1, keepdims=True)) ** 2, axis=1) / (tau_c * x.var(axis=2).mean(axis=1) / n)
    spread_p = f_dist.sf(chi2 / (C - 1), C - 1, max(C * (n / tau_c - 1), 1.0))
    return Relaxation(tau, tau_c, drift_z, spread_p, K)


def scalar_series(draws: dict) -> dict:
    """The quantities a run is judged on, each a series (chain, draw): ``eps_g`` and ``overlap[a,b]`` for a <= b, from
    ``draws`` ``{"eps_g": (chain, draw), "overlap": (chain, draw, D, D)}`` (the names of :func:`compare`)."""
    overlap = np.asarray(draws["overlap"])
    D = overlap.shape[-1]
    return {"eps_g": np.asarray(draws["eps_g"])} | {f"overlap[{a},{b}]": overlap[..., a, b]
                                                   for a in range(D) for b in range(a, D)}


def converged(estimate: ErrorEstimate, series, family: int = 1) -> bool:
    """The error bar of ``estimate`` (of ``series``, after its cut) can be trusted: its autocorrelation time is resolved
    (``reliable``), the chains agree (:func:`chain_spread`) and the mean does not drift (:func:`drift`), both tests
    at the threshold for ``family`` series judged together (:func:`equilibrium_z`: the chance of a false alarm among
    all of them is :data:`FALSE_ALARM`). The stop on accuracy of ``renormpp run`` asks this of every quantity, with
    ``family`` the number of quantities."""
    spread = chain_spread(series, cut=estimate.cut)
    dz = drift(series, cut=estimate.cut).z
    return bool(estimate.reliable and np.isfinite(spread.p) and not spread.apart(family)
                and np.isfinite(dz) and abs(dz) <= equilibrium_z(family))


# ---- conversion ---------------------------------------------------------------------------------------
def to_datatree(source, *, coords: dict | None = None, sample_stats: dict | None = None):
    """An ArviZ DataTree with named dimensions from ``numpyro.infer.MCMC`` or a dict of samples.

    Dims: w (hidden, input), v (output, hidden), b (hidden), c (output), f (data, output), eps_g (),
    overlap (output, output_) (:data:`renormpp.models.DIMS`, :data:`renormpp.observables.DIMS`). A dict must have
    leading (chain, draw) axes (``get_samples(group_by_chain=True)``); ``sample_stats`` (a dict with the same
    leading axes) becomes the ``sample_stats`` group.
    """
    import arviz as az

    from .models import DIMS as MODEL_DIMS
    from .observables import DIMS as OBS_DIMS

    dims = {**MODEL_DIMS, **OBS_DIMS}
    if isinstance(source, dict):
        groups = {"posterior": {k: np.asarray(v) for k, v in source.items()}}
        if sample_stats is not None:
            groups["sample_stats"] = {k: np.asarray(v) for k, v in sample_stats.items()}
        return az.from_dict(groups, dims={k: v for k, v in dims.items() if k in groups["posterior"]}, coords=coords)
    return az.from_numpyro(source, dims=dims, coords=coords)


def _observable_draws(source, fit, X_test, Y_test) -> dict:
    """{"eps_g": (chain, draw), "overlap": (chain, draw, D, D)} from samples, a DataTree or MCMC."""
    from . import observables

    if hasattr(source, "get_samples"):  # numpyro MCMC
        source = source.get_samples(group_by_chain=True)
    if not isinstance(source, dict):  # DataTree or Dataset
        post = source["posterior"] if "posterior" in getattr(source, "children", {}) else source
        source = {k: np.asarray(post[k].values) for k in post.data_vars}
    samples = {k: np.asarray(v) for k, v in source.items()}
    if "eps_g" in samples and "overlap" in samples:
        eps, ov = samples["eps_g"], samples["overlap"]
        if eps.ndim == 1:
            eps, ov = eps[None], ov[None]
        return {"eps_g": eps, "overlap": ov}
    if "w" in samples and "v" in samples:
        if X_test is None or Y_test is None:
            raise ValueError("the samples hold weights: give X_test and Y_test to compute the generalization loss")
        batch = 2 if samples["w"].ndim == 4 else 1
        fn = observables.default(X_test, Y_test, fit.activation)
        out = observables.evaluate(fn, {k: v for k, v in samples.items() if k in ("w", "v", "b", "c")}, batch_dims=batch)
        out = {k: np.asarray(v) for k, v in out.items()}
        return out if batch == 2 else {k: v[None] for k, v in out.items()}
    raise ValueError(f"found sites {sorted(samples)}; need 'eps_g' and 'overlap' (recorded observables) or 'w' and 'v'")


# ---- did the sampler work? ---------------------------------------------------------------------------------
#: a chain whose mean acceptance (after the warmup) is below this hardly moves: it fails the health check (the
#: threshold of the kernels' own warning, renormpp.mcmc.base)
MIN_ACCEPT_PROB = _base.MIN_ACCEPT_PROB
#: a chain with more than this fraction of draws that made a divergent step fails the health check
MAX_DIVERGENT_FRACTION = 0.01
#: a theory "agrees" with the sampled mean where |z| is below this (and the error bar is reliable)
Z_AGREE = 3.0


class SamplerWarning(RuntimeWarning):
    """The sampler failed: a chain froze, hardly accepted its moves, or diverged; its draws are not the posterior."""


@dataclass(frozen=True)
class SamplerHealth:
    """Per-chain acceptance and divergence fraction (None where not recorded), the frozen chains, and the verdict:
    ``ok`` unless a chain froze, its mean acceptance is below :data:`MIN_ACCEPT_PROB`, or more than
    :data:`MAX_DIVERGENT_FRACTION` of its draws diverged; ``problems`` says which."""

    ok: bool
    problems: tuple = ()
    accept_prob: np.ndarray | None = None
    divergent_fraction: np.ndarray | None = None
    frozen: tuple = ()


def sampler_health(stats: dict | None = None, series=None, *, warn: bool = True) -> SamplerHealth:
    """Check the sampler statistics ``stats`` (``accept_prob`` and/or ``diverging``, axes (chain, draw), after the
    warmup) and an observable ``series`` (chain, draw) that a moving chain changes; a :class:`SamplerWarning` lists
    the problems."""
    stats = stats or {}
    problems = []
    acc = div = None
    if "accept_prob" in stats:
        acc = np.asarray(stats["accept_prob"], dtype=float).reshape(np.shape(stats["accept_prob"])[0], -1).mean(axis=1)
        low = [c for c, a in enumerate(acc) if a < MIN_ACCEPT_PROB]
        if low:
            problems.append(f"chain(s) {low} accepted {', '.join(f'{acc[c]:.3f}' for c in low)} of their moves (below "
                            f"{MIN_ACCEPT_PROB}): the step is too large for the Metropolis test")
    if "diverging" in stats:
        d = np.asarray(stats["diverging"], dtype=bool)
        div = d.reshape(d.shape[0], -1).mean(axis=1)
        bad = [c for c, f in enumerate(div) if f > MAX_DIVERGENT_FRACTION]
        if bad:
            problems.append(f"chain(s) {bad} diverged in {', '.join(f'{div[c]:.0%}' for c in bad)} of their draws "
                            f"(more than {MAX_DIVERGENT_FRACTION:.0%}): the step is too large")
    frozen = ()
    if series is not None:
        x = np.asarray(series, dtype=float)
        x = x.reshape(x.shape[0], -1) if x.ndim > 1 else x[None]
        frozen = tuple(c for c in range(x.shape[0]) if np.ptp(x[c]) == 0)
        if frozen:
            problems.append(f"chain(s) {list(frozen)} did not move: every draw is the same")
    if problems and warn:
        warnings.warn("the sampler failed, its draws are not samples of the posterior: " + "; ".join(problems),
                      SamplerWarning, stacklevel=2)
    return SamplerHealth(not problems, tuple(problems), acc, div, frozen)


def verdict(z: float, delta: float, reliable: bool, settled: bool = True, difference: float | None = None) -> str:
    """One quantity against one theory, in words: agrees, deviates (by Delta at z), or no verdict; "(not settled)"
    is added where the chains disagree or the mean drifts (``settled`` False: :func:`converged` without the tau test),
    so that a deviation of a run that has not reached equilibrium is not read as the theory's. Where the theory
    predicts 0 (Delta infinite) the deviation is the absolute ``difference`` MC - theory."""
    if not np.isfinite(delta) and not np.isfinite(z):
        return "does not apply"
    if not np.isfinite(z) or not reliable:
        return "no verdict: the error bar does not hold"
    caveat = "" if settled else " (not settled: the chains disagree or the mean drifts)"
    if abs(z) < Z_AGREE:
        return f"agrees (z = {z:+.1f}){caveat}"
    size = f"{delta:.2%}" if np.isfinite(delta) or difference is None else f"{difference:+.3g} (the theory predicts 0)"
    return f"deviates by {size} at z = {z:+.1f}{caveat}"


def _sampler_stats(source) -> tuple[dict | None, str | None]:
    """The sampler statistics and a description of the sampler, where ``source`` has them."""
    if hasattr(source, "get_samples"):  # numpyro MCMC: the extra fields it collected
        extra = source.get_extra_fields(group_by_chain=True)
        stats = {k: np.asarray(extra[k]) for k in ("accept_prob", "diverging") if k in extra}
        kernel, state = source.sampler, source.last_state
        if hasattr(kernel, "describe"):
            text = kernel.describe(state)
        else:
            step = getattr(getattr(state, "adapt_state", None), "step_size", None)
            text = type(kernel).__name__ + (f", step_size={float(np.mean(np.asarray(step))):.3g}" if step is not None
                                            else "")
        return stats or None, text
    groups = getattr(source, "children", {})
    if "sample_stats" in groups:
        st = source["sample_stats"]
        return {k: np.asarray(st[k].values) for k in ("accept_prob", "diverging") if k in st.data_vars}, None
    return None, None


# ---- theory against sampling ------------------------------------------------------------------------------
def theory_fit(fit, method: str, **changes):
    """``fit.refit(method, **changes)``, or None where that theory does not apply: a one-loop Q that is
    not positive definite, or a method that does not hold for the activation (:func:`renormpp.theory.applies`);
    :func:`why_not` says which."""
    return _fit_or_reason(fit, method, **changes)[0]


def why_not(fit, method: str, **changes) -> str:
    """Why theory ``method`` does not apply at ``fit`` (its data, N1, activation and depth), in words; "" where it
    applies."""
    return _fit_or_reason(fit, method, **changes)[1]


def _fit_or_reason(fit, method, **changes):
    name = getattr(fit.activation, "name", fit.activation)
    if not theory.applies(method, fit.activation, fit.depth):
        if fit.depth > 1:
            return None, f"derived for one hidden layer (depth = {fit.depth})"
        return None, f"needs an odd activation ({name} is not odd)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # reported as the reason instead
        th = fit if (fit.method == method and not changes) else fit.refit(method, **changes)
    if th.converged:
        return th, ""
    alpha = fit.P / changes.get("N1", fit.N1)
    if method == "one_loop":
        q_min = float(np.min(np.linalg.eigvalsh(np.asarray(th.Q))))
        return None, (f"the one-loop Q is not positive definite at alpha = {alpha:.3g} (smallest eigenvalue "
                      f"{q_min:.3g}): perturbation theory has broken down")
    return None, f"the solve did not converge at alpha = {alpha:.3g} (gradient norm {th.grad_norm:.2g})"


def compare(samples_or_datatree, fit, X_test=None, Y_test=None, *, method: str = "gamma", cut="auto",
            sampler: str | None = None):
    r"""Sampled generalization loss and readout overlaps against the three theory predictions.

    Parameters
    ----------
    samples_or_datatree : ``numpyro.infer.MCMC``, a dict of samples (leading chain, draw axes, or draw only),
        or an ArviZ DataTree, holding either the recorded observables ``eps_g`` and ``overlap`` or the weights
        ``w`` and ``v`` (then ``X_test``, ``Y_test`` are needed).
    fit : a :class:`renormpp.theory.TheoryFit` for the same data, N1, T and priors (any method: the other two
        are computed from its eigendecomposition).
    X_test, Y_test : the test set of the theory's generalization loss.
    method : error of the MC mean: ``"gamma"``, ``"blocking"`` or ``"ess"``. cut : thermalization cut
        (``"auto"`` or a number of draws per chain).
    sampler : a description of the sampler and its step, shown in the summary (taken from an MCMC's kernel if
        not given), so that a reader can judge a biased sampler (ULA at a large step) that its own error bars
        cannot show.

    Returns
    -------
    xarray.Dataset over ``quantity`` (``eps_g`` and ``overlap[a,b]`` for a <= b) and ``theory`` (every method of
    :data:`renormpp.theory.METHODS`): ``mc_mean``, ``mc_error``, ``tau_int``, ``reliable``, ``prediction``,
    ``z`` = (MC - TH) / MC error, ``delta`` = :math:`|{\rm MC} - {\rm TH}|/|{\rm TH}|` (supplement,
    eq:supp:discrep), ``verdict`` (a string per quantity and theory, :func:`verdict`: agrees where :math:`|z| <`
    :data:`Z_AGREE`) and ``not_applicable`` (per theory: why it does not apply here, :func:`why_not`; "" where it
    does); the equilibrium
    tests ``drift_z`` and ``drifting`` (:func:`drift`), ``chains_p`` and ``chains_apart`` (:func:`chain_spread`), both
    judged among all the quantities (:func:`equilibrium_z`), and ``settled`` (neither raises its alarm), and ``rhat`` (:func:`rhat`, shown, not judged).
    ``attrs``: ``sampler`` (the description), ``sampler_ok`` and ``sampler_problems`` (:func:`sampler_health`
    of the recorded acceptance, divergences, and the draws of eps_g), and ``summary`` (:func:`summary`).
    Where the sampler failed, every verdict is "no verdict: the sampler failed".
    """
    import xarray as xr

    obs = _observable_draws(samples_or_datatree, fit, X_test, Y_test)
    D = obs["overlap"].shape[-1]
    if D != fit.D:
        raise ValueError(f"the samples have D={D} outputs but the fit has D={fit.D}")
    if X_test is None or Y_test is None:
        raise ValueError("give X_test and Y_test: the theory's generalization loss needs the test set")
    stats, described = _sampler_stats(samples_or_datatree)
    health = sampler_health(stats, obs["eps_g"])
    pairs = [(a, b) for a in range(D) for b in range(a, D)]
    series = [obs["eps_g"]] + [obs["overlap"][..., a, b] for a, b in pairs]
    names = ["eps_g"] + [f"overlap[{a},{b}]" for a, b in pairs]
    estimates = [error_of_mean(s, method=method, cut=cut) for s in series]
    drifts = [drift(s, cut=e.cut) for s, e in zip(series, estimates)]

    pred = np.empty((len(names), len(theory.METHODS)))
    reasons = []
    for j, name in enumerate(theory.METHODS):
        th, reason = _fit_or_reason(fit, name)
        reasons.append(reason)
        if th is None:
            pred[:, j] = np.nan
            continue
        pred[0, j] = th.generalization_error(X_test, Y_test)
        pred[1:, j] = [th.readout_overlap[a, b] for a, b in pairs]
    mc = np.array([e.mean for e in estimates])
    err = np.array([e.error for e in estimates])
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (mc[:, None] - pred) / err[:, None]
        delta = np.abs(mc[:, None] - pred) / np.abs(pred)
    rhats = np.array([rhat(s, cut=e.cut) for s, e in zip(series, estimates)])
    spreads = [chain_spread(s, cut=e.cut) for s, e in zip(series, estimates)]
    drifting = [d.moves(len(names)) for d in drifts]
    apart = [c.apart(len(names)) for c in spreads]
    settled = [not (d or a) for d, a in zip(drifting, apart)]
    verdicts = [[verdict(z[i, j], delta[i, j], estimates[i].reliable, settled[i], mc[i] - pred[i, j])
                 if health.ok or not np.isfinite(pred[i, j])
                 else "no verdict: the sampler failed" for j in range(pred.shape[1])] for i in range(len(names))]
    ds = xr.Dataset(
        dict(mc_mean=("quantity", mc), mc_error=("quantity", err),
             tau_int=("quantity", [e.tau_int for e in estimates]),
             drift_z=("quantity", [d.z for d in drifts]),
             rhat=("quantity", rhats),
             chains_p=("quantity", [c.p for c in spreads]),
             drifting=("quantity", drifting), chains_apart=("quantity", apart),
             settled=("quantity", settled),
             reliable=("quantity", [e.reliable and health.ok for e in estimates]),
             prediction=(("quantity", "theory"), pred), z=(("quantity", "theory"), z),
             delta=(("quantity", "theory"), delta), verdict=(("quantity", "theory"), np.array(verdicts, dtype=object)),
             not_applicable=("theory", np.array(reasons, dtype=object))),
        coords=dict(quantity=names, theory=list(theory.METHODS),
                    a=("quantity", [-1] + [a for a, _ in pairs]), b=("quantity", [-1] + [b for _, b in pairs])),
        attrs=dict(N1=fit.N1, P=fit.P, D=D, T=fit.T, lambda0=fit.lambda0, lambda1=fit.lambda1,
                   error_method=method, cut=int(estimates[0].cut), draws=int(estimates[0].n),
                   sampler=sampler or described or "not given", sampler_ok=int(health.ok),
                   sampler_problems="; ".join(health.problems)),
    )
    ds.attrs["summary"] = summary(ds)
    return ds


def does_not_apply(ds, method: str) -> str:
    """Why ``method`` does not apply in :func:`compare`'s ``ds`` (datasets written before the reason was kept: a
    generic one)."""
    if "not_applicable" in ds:
        return str(ds.not_applicable.sel(theory=method).item())
    return "a non-odd activation, or a one-loop Q that is not positive definite"


def summary(ds) -> str:
    """A few lines: the sampler, the MC generalization error against each theory with its verdict, and the worst
    overlap z-scores."""
    e = ds.sel(quantity="eps_g")
    lines = [f"N1={ds.attrs['N1']:g}, P={ds.attrs['P']}, D={ds.attrs['D']}, T={ds.attrs['T']:g}: "
             f"{ds.attrs['draws']} draws after a cut of {ds.attrs['cut']} per chain, errors by {ds.attrs['error_method']}",
             f"sampler: {ds.attrs.get('sampler', 'not given')}"]
    if not ds.attrs.get("sampler_ok", 1):
        lines.append(f"SAMPLER FAILED: {ds.attrs['sampler_problems']}. The draws are not the posterior; nothing "
                     "below is a comparison.")
    lines.append(f"eps_g  MC {float(e.mc_mean):.5g} +- {float(e.mc_error):.2g}")
    for th in ds.theory.values:
        p = float(e.prediction.sel(theory=th))
        lines.append(f"   {th:15s} {p:.5g}  {e.verdict.sel(theory=th).item()}" if np.isfinite(p) else
                     f"   {th:15s} (does not apply: {does_not_apply(ds, th)})")
    ov = ds.sel(quantity=ds.quantity[1:])
    for th in ("exact", "infinite_width"):
        zs = np.abs(ov.z.sel(theory=th).values)
        if not np.isfinite(zs).any():
            continue
        lines.append(f"overlaps vs {th}: max |z| = {np.nanmax(zs):.1f} over {zs.size} entries, "
                     f"{np.mean(zs < Z_AGREE):.0%} agree (|z| < {Z_AGREE:g})")
    family = ds.sizes["quantity"]
    if "drifting" in ds:
        moving = [f"{q} (z = {z:+.1f})" for q, z, m in zip(ds.quantity.values, ds.drift_z.values, ds.drifting.values)
                  if m]
        if moving:
            lines.append(f"DRIFT: {', '.join(moving)} still drift (Geweke: the first 10% of the draws after the cut "
                         f"against the last 50%, |z| > {equilibrium_z(family):.2f} among {family} quantities); sample "
                         "longer before trusting these means")
    if "chains_apart" in ds:
        apart = [f"{q} (p = {p:.1g}, R-hat {r:.3f})" for q, p, r, a in
                 zip(ds.quantity.values, ds.chains_p.values, ds.rhat.values, ds.chains_apart.values) if a]
        if apart:
            lines.append(f"CHAINS DISAGREE: their means differ by more than their error bars allow "
                         f"(p < {FALSE_ALARM / family:.1g}) "
                         f"for {', '.join(apart[:8])}" + (f" and {len(apart) - 8} more" if len(apart) > 8 else "")
                         + "; a slow mode holds the chains apart: sample longer before trusting these error bars")
    if not bool(ds.reliable.all()):
        lines.append("WARNING: some error bars do not hold (see ds.reliable: a run too short, or a frozen chain)")
    return "\n".join(lines)


# ---- finite-size scaling ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Extrapolation:
    """A straight-line fit y = ``intercept`` + ``slope`` x by weighted least squares, with the parameters' standard
    errors (scaled by sqrt(chi2/dof) where that exceeds 1, as is usual), ``chi2_dof``, and ``n`` points."""

    intercept: float
    intercept_error: float
    slope: float
    slope_error: float
    chi2_dof: float
    n: int


def extrapolate(x, y, error) -> Extrapolation:
    """Fit :math:`y = a + b x` to points with standard errors ``error`` and extrapolate to x = 0 (e.g. the deviation
    of the sampled finite networks from a theory against 1/N1: ``a`` is its value in the limit N1 -> infinity)."""
    x, y, error = (np.asarray(v, dtype=float) for v in (x, y, error))
    ok = np.isfinite(x) & np.isfinite(y) & np.isfinite(error) & (error > 0)
    x, y, error = x[ok], y[ok], error[ok]
    if len(x) < 2:
        nan = float("nan")
        return Extrapolation(nan, nan, nan, nan, nan, int(len(x)))
    A = np.stack([np.ones_like(x), x], axis=1) / error[:, None]
    coef, *_ = np.linalg.lstsq(A, y / error, rcond=None)
    cov = np.linalg.inv(A.T @ A)
    dof = len(x) - 2
    chi2 = float(np.sum(((y - coef[0] - coef[1] * x) / error) ** 2))
    chi2_dof = chi2 / dof if dof > 0 else float("nan")
    scale = np.sqrt(max(chi2_dof, 1.0)) if dof > 0 else 1.0
    return Extrapolation(float(coef[0]), float(scale * np.sqrt(cov[0, 0])), float(coef[1]),
                         float(scale * np.sqrt(cov[1, 1])), chi2_dof, int(len(x)))
