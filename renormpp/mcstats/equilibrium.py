r"""Has a Monte Carlo run reached equilibrium? The tests of one series and of the quantities of a run judged together.

* :func:`drift`: Geweke's test, the start of a series after the thermalization cut against its end.
* :func:`chain_spread`: the chains' means against their own error bars (a :math:`\chi^2` with a known false-alarm
  rate); :func:`rhat`, the rank-normalized split-:math:`\hat R`, shown beside it.
* :func:`converged`: an error bar that can be trusted (resolved, no drift, the chains agree).
* :func:`relaxation`: the same questions asked of short spans (a warmup's), the quantities sharing one
  :math:`\tau_{\rm int}`; :func:`scalar_series` names the quantities of a run.

Several quantities judged together share one false-alarm rate :data:`FALSE_ALARM` (Bonferroni's correction,
:func:`equilibrium_z`).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from .errors import ErrorEstimate, ShortRunWarning, _apply_cut, _as_chains, _autocovariance, _windowed_tau, gamma_method


#: chance that one equilibrium test (:func:`drift`, :func:`chain_spread`) raises a false alarm on a series in
#: equilibrium: that of |z| > 3 for a standard normal z
FALSE_ALARM = 0.0026997960632601866

#: |z| of Geweke's test above which one series is flagged as still drifting (:func:`drift`; :func:`equilibrium_z`)
DRIFT_Z = 3.0


def equilibrium_z(family: int = 1) -> float:
    """|z| above which an equilibrium test raises its alarm when ``family`` series are judged together (the
    quantities of one run): Bonferroni's, so that the chance of any false alarm among them stays
    :data:`FALSE_ALARM`. 3 for one series, 4.06 for the 56 quantities of a D = 10 run.

    Parameters
    ----------
    family : int, default 1
        The number of series judged together.

    Returns
    -------
    float
        The threshold on |z|.
    """
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
    where a part has no error (a frozen chain, flagged elsewhere) or the series is too short (fewer than 8 draws).

    Parameters
    ----------
    series : array_like, shape (chain, draw) or (draw,)
        The Monte Carlo series of one quantity, one row per chain.
    cut : int or "auto", default "auto"
        Draws dropped from the start of each chain; "auto" is :func:`~.errors.thermalization_cut`.
    first : float, default 0.1
        The fraction of the draws at the start compared.
    last : float, default 0.5
        The fraction of the draws at the end compared.

    Returns
    -------
    Drift
        z, and whether it is beyond :data:`DRIFT_Z`.
    """
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
    (fewer than 8 draws per chain). Reported, not used to judge (:data:`RHAT_MAX`, :func:`chain_spread`).

    Parameters
    ----------
    series : array_like, shape (chain, draw) or (draw,)
        The Monte Carlo series of one quantity, one row per chain.
    cut : int or "auto", default "auto"
        Draws dropped from the start of each chain; "auto" is :func:`~.errors.thermalization_cut`.

    Returns
    -------
    float
        :math:`\hat R`.
    """
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


def chain_spread(series, cut="auto", groups=None) -> ChainSpread:
    r"""Do the chains of ``series`` (chain, draw) sample the same distribution? Each chain's mean :math:`m_c` after
    the thermalization ``cut``, with its own error :math:`\sigma_c` (:func:`gamma_method` on that chain alone),
    against their weighted mean :math:`\bar m = \sum_c m_c \sigma_c^{-2} / \sum_c \sigma_c^{-2}`:

    .. math::  \chi^2 = \sum_c (m_c - \bar m)^2 / \sigma_c^2 ,

    distributed as :math:`\chi^2_{C-1}` when the chains are in equilibrium and their error bars hold; p is its upper
    tail. A slow mode that holds each chain in its own region, which no chain's autocorrelation shows, makes the means
    differ by many error bars (p tiny). This is the question of :func:`rhat`, with a false-alarm rate that does not
    depend on the length of the run: R-hat's noise is of order 1/ESS, so a fixed R-hat line rejects short runs in
    equilibrium and passes long runs held apart by a few error bars. One chain is split into two halves.

    ``groups``: a label per chain (e.g. the kind of start of each, :mod:`renormpp.infer.starts`): then the means
    compared are those of the groups, each over all its chains with its own error, so that chains that agree within
    a group and sit apart from another group's (a trap each kind of start falls into) are found apart.

    Parameters
    ----------
    series : array_like, shape (chain, draw)
        The Monte Carlo series of one quantity, one row per chain.
    cut : int or "auto", default "auto"
        Draws dropped from the start of each chain; "auto" is :func:`~.errors.thermalization_cut`.
    groups : sequence, optional
        A label per chain; the means compared are then the groups'.

    Returns
    -------
    ChainSpread
        chi2, its degrees of freedom and upper-tail p, and the means compared with their errors.
    """
    from scipy.stats import chi2 as chi2_dist

    x, cut = _apply_cut(series, cut)
    if groups is not None:
        labels = list(groups)
        if len(labels) != x.shape[0]:
            raise ValueError(f"groups gives {len(labels)} labels for {x.shape[0]} chains")
        parts = [x[[c for c, g in enumerate(labels) if g == k]] for k in dict.fromkeys(labels)]
    else:
        parts = [c[None] for c in _chains_or_halves(x)]
    if x.shape[1] < 8 or len(parts) < 2:
        return ChainSpread(np.nan, len(parts) - 1, np.nan, tuple(p.mean() for p in parts), (np.nan,) * len(parts), cut)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ShortRunWarning)  # a short chain's error is too small: the test is stricter
        est = [gamma_method(p, cut=0) for p in parts]
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
    at 35-66% (``tests/test_mcstats.py``). One chain: the drift test alone. A series that does not vary in its
    last half (a frozen chain, flagged elsewhere) is left out; with none left, the family is not relaxed.

    Parameters
    ----------
    series : list of array_like
        The series of one run, each (chain, draw), over the same draws.

    Returns
    -------
    Relaxation
        The shared autocorrelation times, each series' drift z and chain-spread p, and whether the family is
        relaxed.
    """
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
    ``draws`` ``{"eps_g": (chain, draw), "overlap": (chain, draw, D, D)}`` (the names of :func:`compare`).

    Parameters
    ----------
    draws : dict
        ``{"eps_g": (chain, draw), "overlap": (chain, draw, D, D)}``.

    Returns
    -------
    dict
        ``{name: (chain, draw)}``, one series per quantity.
    """
    overlap = np.asarray(draws["overlap"])
    D = overlap.shape[-1]
    return {"eps_g": np.asarray(draws["eps_g"])} | {f"overlap[{a},{b}]": overlap[..., a, b]
                                                   for a in range(D) for b in range(a, D)}


def converged(estimate: ErrorEstimate, series, family: int = 1, groups=None) -> bool:
    """The error bar of ``estimate`` (of ``series``, after its cut) can be trusted: its autocorrelation time is resolved
    (``reliable``), the chains agree (:func:`chain_spread`) and the mean does not drift (:func:`drift`), both tests
    at the threshold for ``family`` series judged together (:func:`equilibrium_z`: the chance of a false alarm among
    all of them is :data:`FALSE_ALARM`). The stop on accuracy of ``renormpp run`` asks this of every quantity, with
    ``family`` the number of quantities. ``groups`` (a label per chain: its kind of start) adds the same test between
    the groups (:func:`chain_spread`): chains from different kinds of start must agree too.

    Parameters
    ----------
    estimate : ErrorEstimate
        The error estimate of ``series`` (its ``cut`` is used).
    series : array_like, shape (chain, draw)
        The series.
    family : int, default 1
        The number of series judged together.
    groups : sequence, optional
        A label per chain (its kind of start).

    Returns
    -------
    bool
    """
    spread = chain_spread(series, cut=estimate.cut)
    dz = drift(series, cut=estimate.cut).z
    starts_agree = groups is None or len(set(groups)) < 2 or not chain_spread(series, estimate.cut, groups).apart(family)
    return bool(estimate.reliable and np.isfinite(spread.p) and not spread.apart(family)
                and np.isfinite(dz) and abs(dz) <= equilibrium_z(family) and starts_agree)
