"""The Monte Carlo analysis of one run: :func:`mc_analysis` (the supplement's MC figure: thermalization trace,
histogram and blocking plateau, the chains pooled with the same estimate as the report) and :func:`trace`,
:func:`autocorr`, :func:`ess` (arviz-plots on a DataTree, :func:`renormpp.diagnostics.to_datatree`)."""
from __future__ import annotations

import numpy as np

from .. import diagnostics
from ._common import _plt


def mc_analysis(series, name: str = "$\\epsilon_g$", estimate=None, method: str = "gamma", cut="auto",
                draw_unit: str = "recorded draw"):
    """Supplement's Monte Carlo analysis figure for one scalar series, every chain shown and pooled as the report
    pools them.

    Left: the traces,
    one colour per chain, thermalization (before the cut) faded; middle: the histogram of the pooled thermalized
    draws (area 1); right: the blocking curve of each chain, with the estimate's error as a horizontal line. A
    chain that did not move is said so, not drawn as a histogram. The legends sit above the panels, off the traces.

    Parameters
    ----------
    series : array_like, shape (chain, draw) or (draw,)
        The series.
    name : str, default "$\\epsilon_g$"
        Its name on the axes.
    estimate : ErrorEstimate, optional
        The report's :class:`~renormpp.diagnostics.ErrorEstimate`; else computed here by ``method`` and ``cut``, as
        :func:`renormpp.diagnostics.compare` does.
    method : str, default "gamma"
        The error estimator (:data:`renormpp.diagnostics.ESTIMATORS`), without ``estimate``.
    cut : int or "auto", default "auto"
        The thermalization cut, without ``estimate``.
    draw_unit : str, default "recorded draw"
        What one step of the x axis is.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import warnings

    plt = _plt()
    x = np.asarray(series, dtype=np.float64)
    x = x[None] if x.ndim == 1 else x
    if estimate is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", diagnostics.ShortRunWarning)
            estimate = diagnostics.error_of_mean(x, method=method, cut=cut)
    cut = estimate.cut
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(13, 3.8), constrained_layout=True)
    t = np.arange(x.shape[1])
    for c, chain in enumerate(x):
        a1.plot(t[: cut + 1], chain[: cut + 1], color=f"C{c % 10}", lw=0.8, alpha=0.35)
        a1.plot(t[cut:], chain[cut:], color=f"C{c % 10}", lw=0.8, label=f"chain {c}")
    a1.axvline(cut, color="k", ls=":", lw=0.8, label=f"thermalization cut ({cut})")
    a1.set_xlabel(draw_unit)
    a1.set_ylabel(name)
    _legend_above(a1, ncols=3)
    kept = x[:, cut:]
    error = f"{estimate.error:.2g}" if np.isfinite(estimate.error) else "none (no error bar holds)"
    frozen = [c for c in range(kept.shape[0]) if np.ptp(kept[c]) == 0]
    if len(frozen) == kept.shape[0]:
        for ax in (a2, a3):
            ax.text(0.5, 0.5, "the chains did not move:\nevery draw of a chain is the same", ha="center",
                    va="center", transform=ax.transAxes, color="C3")
            ax.set_axis_off()
    else:
        a2.hist(kept.ravel(), bins=50, density=True, color="C0", alpha=0.8)
        a2.axvline(estimate.mean, color="k", ls="--", label=f"mean {estimate.mean:.4g}")
        a2.set_xlabel(name)
        a2.set_ylabel("density")
        _legend_above(a2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", diagnostics.ShortRunWarning)
            for c, chain in enumerate(kept):
                if np.ptp(chain) == 0:
                    continue
                d = diagnostics.blocking(chain, cut=0).details
                a3.errorbar(d["block_size"], d["error"], yerr=d["error_error"], fmt="o-", color=f"C{c % 10}", ms=3,
                            capsize=2, label=f"chain {c}, blocked")
        if np.isfinite(estimate.error):
            a3.axhline(estimate.error * np.sqrt(x.shape[0]), color="k",
                       label=f"{estimate.method} error x sqrt({x.shape[0]} chains)")
        if frozen:
            a3.text(0.02, 0.98, f"chain(s) {frozen} did not move", transform=a3.transAxes, va="top", color="C3")
        a3.set_xscale("log", base=2)
        a3.set_xlabel(f"block size ({draw_unit}s)")
        a3.set_ylabel("standard error of one chain's mean")
        _legend_above(a3)
    fig.suptitle(f"{name}: {estimate.mean:.5g} ± {error} ({estimate.method}, {x.shape[0]} chain(s) pooled, "
                 f"{estimate.n} draws after the cut)" + ("" if estimate.reliable else " — the error bar does not hold"))
    return fig


def _legend_above(ax, ncols: int = 2):
    """The axes' legend in the band between the axes and its title, off the data."""
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncols=ncols, fontsize="small", borderaxespad=0.2,
              frameon=False)


def _arviz_plot(fn, dt, **kwargs):
    import arviz_plots

    kwargs.setdefault("figure_kwargs", {"layout": "constrained"})  # titles clear of the axes above
    pc = getattr(arviz_plots, fn)(dt, backend="matplotlib", **kwargs)
    return pc.viz["figure"].item()


def trace(dt, **kwargs):
    """Traces of every variable of a DataTree (arviz-plots ``plot_trace``), with the variable's name on the y axis and
    a legend of the chains right of the first panel (one colour per chain in every panel).

    Parameters
    ----------
    dt : xarray.DataTree
        A run, e.g. from :func:`renormpp.diagnostics.to_datatree`.
    **kwargs
        Passed to arviz-plots' ``plot_trace``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = _arviz_plot("plot_trace", dt, **kwargs)
    for ax in fig.axes:
        if ax.get_title() and not ax.get_ylabel():
            ax.set_ylabel(ax.get_title())
    chains = [[h for h in ax.get_lines() if h.get_xdata().size > 1] for ax in fig.axes]
    first = next((i for i, c in enumerate(chains) if 1 < len(c) <= 10), None)
    if first is not None:
        fig.axes[first].legend(chains[first], [f"chain {c}" for c in range(len(chains[first]))], fontsize="small",
                               loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def autocorr(dt, **kwargs):
    """Autocorrelation functions (arviz-plots ``plot_autocorr``).

    Parameters
    ----------
    dt : xarray.DataTree
        A run, e.g. from :func:`renormpp.diagnostics.to_datatree`.
    **kwargs
        Passed to arviz-plots' ``plot_autocorr``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    return _arviz_plot("plot_autocorr", dt, **kwargs)


def ess(dt, **kwargs):
    """Local effective sample sizes (arviz-plots ``plot_ess``).

    Parameters
    ----------
    dt : xarray.DataTree
        A run, e.g. from :func:`renormpp.diagnostics.to_datatree`.
    **kwargs
        Passed to arviz-plots' ``plot_ess``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    return _arviz_plot("plot_ess", dt, **kwargs)
