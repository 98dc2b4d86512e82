"""What the figures share: matplotlib (imported on first use), the look of the sampled points (error bars over the
markers, hollow where the error bar does not hold), the log N1 axis ticked at the sampled widths, the theory's
curves over a grid of widths, and saving a figure to its files with one layout and one drawing per file."""
from __future__ import annotations

import numpy as np

from .. import theory


def _plt():
    import matplotlib.pyplot as plt

    return plt


#: Points with error bars: the bars drawn over the markers, their caps wider than a marker (so that a bar shorter than
#: the marker still shows), the points over the theory curves.
POINTS = dict(fmt="o", ms=5, capsize=4, barsabove=True, zorder=3)
HOLLOW = "not settled, or error bar does not hold"


def _mc_points(ax, N1s, rows, color, label, hollow_label=None):
    """MC means with error bars (:data:`POINTS`); hollow where the error bar does not hold (a run too short, or not
    settled: the chains disagree or the mean drifts), in the legend as ``hollow_label`` (default: ``label`` and why).
    Returns the bars' lower and upper ends."""
    mean = np.array([float(r.mc_mean) for r in rows])
    err = np.nan_to_num([float(r.mc_error) for r in rows])
    ok = np.array([bool(r.reliable) and bool(r.settled if "settled" in r else True) for r in rows])
    ax.errorbar(N1s[ok], mean[ok], yerr=err[ok], color=color, label=label, **POINTS)
    if (~ok).any():
        ax.errorbar(N1s[~ok], mean[~ok], yerr=err[~ok], color=color, mfc="none", **POINTS,
                    label=hollow_label if hollow_label is not None else (label + ": " if label else "") + HOLLOW)
    return mean - err, mean + err


def log_axis(ax, N1s) -> None:
    """A log N1 axis ticked at the sampled widths, written as plain numbers (40, not 4x10^1), no minor ticks.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The axes whose x axis it sets.
    N1s : array_like
        The sampled widths.
    """
    from matplotlib.ticker import NullLocator

    ticks = np.unique(np.asarray(N1s, dtype=float))
    ax.set_xscale("log")
    ax.set_xticks(ticks, [f"{n:.0f}" for n in ticks])
    ax.xaxis.set_minor_locator(NullLocator())


def save(fig, *paths, dpi: float = 110) -> None:
    """Write ``fig`` to each of ``paths`` (the format from the suffix) at ``dpi``: the same files as ``fig.savefig``,
    drawn once per file after one layout.

    ``fig.savefig`` of a figure with a layout engine (constrained layout, as every figure of :mod:`renormpp.plots`)
    draws the figure twice per file, each drawing solving the layout again; with text-heavy figures (the overlap
    heatmaps write every value) that is a third of a small run's time. Here the layout is solved once at ``dpi`` and
    held while the files are drawn; the figure keeps its layout engine and its dpi afterwards.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure.
    *paths : str or path
        The files, each in the format of its suffix.
    dpi : float, default 110
        The resolution of every file.
    """
    engine = fig.get_layout_engine()
    if engine is None:
        for path in paths:
            fig.savefig(path, dpi=dpi)
        return
    shown = fig.get_dpi()
    fig.set_dpi(dpi)  # the layout of the files' resolution (savefig lays out at its dpi too)
    engine.execute(fig)
    # positions kept, engine detached: savefig neither draws ahead nor solves the layout again. Matplotlib has no public
    # way to detach it (set_layout_engine("none") leaves a placeholder engine, which savefig draws ahead for); the
    # tests compare the files with savefig's and count the drawings.
    fig._layout_engine = None
    try:
        for path in paths:
            fig.savefig(path, dpi=dpi)
    finally:
        fig._layout_engine = engine
        fig.set_dpi(shown)


def theory_lines(fit, N1_grid, X_test=None, Y_test=None, methods=None) -> dict:
    """The curves of every theory method over a grid of widths, from one kernel eigendecomposition.

    Parameters
    ----------
    fit : TheoryFit
        A fit on the data; its refits at each width give the curves.
    N1_grid : array_like, shape (n,)
        The widths.
    X_test : array_like, shape (P0, N0), optional
        Test inputs; without a test set eps_g is NaN.
    Y_test : array_like, shape (P0, D), optional
        Test labels.
    methods : sequence of str, optional
        The methods (default: every one of :data:`renormpp.theory.METHODS`).

    Returns
    -------
    dict
        ``{method: {"eps_g": (n,), "Q": (n, D, D)}}``, NaN where a method does not apply
        (:func:`renormpp.theory.fit_or_reason`).
    """
    methods = tuple(theory.METHODS) if methods is None else tuple(methods)
    out = {m: {"eps_g": [], "Q": []} for m in methods}
    for N1 in N1_grid:
        for m in methods:
            th = theory.refit_or_none(fit, m, N1=N1)
            ok = th is not None
            out[m]["eps_g"].append(th.generalization_error(X_test, Y_test) if ok and X_test is not None else np.nan)
            out[m]["Q"].append(th.readout_overlap if ok else np.full((fit.D, fit.D), np.nan))
    return {m: {k: np.array(v) for k, v in d.items()} for m, d in out.items()}


def _N1_grid(results, N1_grid, fit=None):
    """The sampled N1 and the grid of the theory curves: 40 points, 12 for a non-odd activation (each of its solves is
    a root search in two order parameters, about 0.1 s) and for the CNN (each solve is seconds at P = 200,
    :mod:`renormpp.theory.conv`)."""
    N1s = np.array([r.attrs["N1"] for r in results])
    if N1_grid is None:
        costly = fit is not None and (fit.nonodd or isinstance(fit, theory.ConvFit))
        N1_grid = np.geomspace(N1s.min() / 1.5, N1s.max() * 1.5, 12 if costly else 40)
    return N1s, np.asarray(N1_grid, dtype=float)

