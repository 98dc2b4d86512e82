"""The generalization loss against the width: :func:`generalization_vs_N1` (paper Fig. 1: every theory method of
:data:`renormpp.theory.METHODS` in its record's line style, the sampled networks as points with error bars; the
y-limits follow the points, a theory that runs off is clipped and marked where it leaves) and
:func:`architectures_vs_N1` (several architectures on the same data, e.g. the CNN against the fully connected
network) and :func:`baselines_vs_N1` (paper Figs. 3 and 4: networks trained with Adam against the best
infinite-width GP, train and test scores against the width)."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .. import theory
from ._common import POINTS, _mc_points, _N1_grid, _plt, log_axis, theory_lines


def _fit_ylim(ax, lo, hi, curves: dict):
    """Y-limits that show the MC points (error bars from ``lo`` to ``hi``) and the theory curves that stay near them:
    within one span of the points (at least a tenth of their size). A curve that goes further (the one-loop one where
    the expansion breaks down) is clipped, and marked where it leaves (:func:`_mark_leaving`).

    ``curves``: ``{name: (N1, values, color)}``.
    """
    lo, hi = float(np.min(lo)), float(np.max(hi))
    near = max(hi - lo, 0.1 * max(abs(lo), abs(hi))) or 1.0
    kept = [lo, hi]
    for _, y, _ in curves.values():
        y = y[np.isfinite(y)]
        if len(y) and lo - near <= y.min() and y.max() <= hi + near:
            kept += [y.min(), y.max()]
    margin = 0.08 * max(max(kept) - min(kept), near)
    ax.set_ylim(min(kept) - margin, max(kept) + margin)
    for name, (x, y, color) in curves.items():
        _mark_leaving(ax, x, y, name, color)


def _mark_leaving(ax, x, y, name, color):
    """Write "name ↑" (or ↓) at the top (bottom) edge of a log-x axes where the curve (x, y) leaves it, on the side
    where it is out; where it leaves and comes back, between the two crossings."""
    bottom, top = ax.get_ylim()
    side = np.where(y > top, 1, np.where(y < bottom, -1, 0))  # NaN: 0, and not inside
    inside = np.isfinite(y) & (side == 0)
    for run in np.split(np.arange(len(y)), np.flatnonzero(np.diff(side)) + 1):
        s = side[run[0]]
        if s == 0:
            continue
        edge = top if s > 0 else bottom
        crossings = {}  # the side of the run the crossing is on: -1 left, +1 right
        for j, i, where in ((run[0] - 1, run[0], -1), (run[-1] + 1, run[-1], 1)):
            if 0 <= j < len(y) and inside[j]:
                t = (edge - y[j]) / (y[i] - y[j])
                crossings[where] = np.exp(np.log(x[j]) + t * (np.log(x[i]) - np.log(x[j])))
        at = np.exp(np.mean(np.log(list(crossings.values()) or [x[run[0]], x[run[-1]]])))
        toward = 0 if len(crossings) != 1 else -next(iter(crossings))  # the text goes over the run
        ax.annotate(f"{name} {'↑' if s > 0 else '↓'}", (at, edge), xytext=(4 * toward, -4 * s),
                    textcoords="offset points", ha={-1: "right", 0: "center", 1: "left"}[toward],
                    va="top" if s > 0 else "bottom", color=color, fontsize="small")


def _breakdown_note(ax, grid, values, P, method):
    """Mark where a method's curve ends (the one-loop Q stops being positive definite): a dotted line, and the record's
    ``breakdown`` note that matplotlib places, when the figure is drawn, in the corner where it covers the fewest
    curves and points (a legend without entries, ``loc="best"``)."""
    from matplotlib.legend import Legend

    finite = np.isfinite(values)
    if finite.any() and not finite.all():
        edge = grid[finite].min() if finite[-1] else grid[finite].max()
        ax.axvline(edge, color=method.color, ls=":", lw=0.8)
        note = Legend(ax, [], [], loc="best", title_fontsize="small", framealpha=0.9,
                      title=f"{method.breakdown}\nbeyond $\\alpha$ = {P / edge:.2g} (dotted)")
        note.get_title().set_color(method.color)
        ax.add_artist(note)


def generalization_vs_N1(results, fit=None, X_test=None, Y_test=None, N1_grid=None, ax=None, lines=None):
    """Generalization loss against N1 (paper Fig. 1) from several :func:`compare` Datasets.

    With ``fit`` (a TheoryFit on the same data) and the test set, the theory is drawn as curves on a fine N1
    grid, each method in its record's label, line style and colour (where the one-loop Q stops being positive definite
    its curve ends, marked by a dotted line and the record's ``breakdown`` note); otherwise
    the predictions stored in the Datasets are joined by lines. ``lines``: the curves, if already computed by
    :func:`theory_lines` on ``N1_grid``. The y-limits follow the MC points and the curves near them; a curve that
    runs off is clipped and marked where it leaves (:func:`_fit_ylim`).

    Parameters
    ----------
    results : list of xarray.Dataset
        :func:`~renormpp.diagnostics.compare` Datasets, one per width.
    fit : TheoryFit, optional
        A fit on the same data, for the theory curves.
    X_test : array_like, shape (P0, N0), optional
        Test inputs, with ``fit``.
    Y_test : array_like, shape (P0, D), optional
        Test labels, with ``fit``.
    N1_grid : array_like, optional
        The widths of the theory curves (default: a geometric grid around the sampled widths).
    ax : matplotlib.axes.Axes, optional
        The axes to draw on (default: a new figure).
    lines : dict, optional
        The curves of :func:`theory_lines` on ``N1_grid``, if already computed.

    Returns
    -------
    matplotlib.figure.Figure
    """
    plt = _plt()
    results = sorted(results, key=lambda r: r.attrs["N1"])
    N1s, grid = _N1_grid(results, N1_grid, fit)
    fig = ax.figure if ax is not None else plt.subplots(figsize=(8.5, 4.2), constrained_layout=True)[0]
    ax = ax if ax is not None else fig.axes[0]
    if fit is not None and X_test is not None:
        lines = lines if lines is not None else theory_lines(fit, grid, X_test, Y_test)
        x, curves = grid, {m: lines[m]["eps_g"] for m in theory.METHODS}
    else:
        x, curves = N1s, {m: np.array([float(r.prediction.sel(quantity="eps_g", theory=m)) for r in results])
                          for m in theory.METHODS}
    methods = {m: theory.METHODS[m] for m in curves}
    for m, y in curves.items():
        ax.plot(x, y, color=methods[m].color, ls=methods[m].ls, label=methods[m].label)
    beyond = {}
    for col in dict.fromkeys(str(t) for r in results for t in r.theory.values if str(t) not in theory.METHODS):
        name, _, variant = col.partition("[")
        rec = theory.THEORIES[name]
        y = np.array([float(r.prediction.sel(quantity="eps_g", theory=col)) if col in r.theory.values else np.nan
                      for r in results])
        label = rec.label + (f" ({variant[:-1]})" if variant else "")
        ax.plot(N1s, y, color=rec.color, ls=rec.ls, marker=rec.marker, label=label)  # solved at the sampled widths
        beyond[label] = (N1s, y, rec.color)
    lo, hi = _mc_points(ax, N1s, [r.sel(quantity="eps_g") for r in results], "C3",
                        "finite networks (MC, $\\pm 1\\sigma$)")
    log_axis(ax, N1s)
    _fit_ylim(ax, lo, hi, {**{methods[m].tag: (x, y, methods[m].color) for m, y in curves.items()}, **beyond})
    if fit is not None and X_test is not None:
        for m, y in curves.items():
            if methods[m].breakdown:
                _breakdown_note(ax, grid, y, fit.P, methods[m])
    ax.set_xlabel("hidden units $N_1$")
    ax.set_ylabel("generalization loss $\\epsilon_g$")
    ax.set_title(f"$P$={results[0].attrs['P']}, $D$={results[0].attrs['D']}, $T$={results[0].attrs['T']:g}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small")
    return fig


def architectures_vs_N1(series: dict, X_test, Y_test, methods=("exact", "infinite_width"), N1_grid=None, ax=None):
    r"""Generalization loss against the width for several architectures on the same data (e.g. the CNN against
    the fully connected network): for each ``{label: (results, fit)}`` (the :func:`compare` Datasets of a sweep and a
    fit at one width, :class:`renormpp.theory.TheoryFit` or :class:`renormpp.theory.ConvFit`) the MC points and the
    curves of ``methods`` (each in its line style, :data:`renormpp.theory.METHODS`), one colour per architecture.

    Parameters
    ----------
    series : dict
        ``{label: (results, fit)}``, one entry per architecture.
    X_test : array_like, shape (P0, N0)
        Test inputs, for the theory curves.
    Y_test : array_like, shape (P0, D)
        Test labels.
    methods : tuple of str, default ("exact", "infinite_width")
        The theory methods drawn.
    N1_grid : array_like, optional
        The widths of the theory curves (default: a geometric grid around the sampled widths).
    ax : matplotlib.axes.Axes, optional
        The axes to draw on (default: a new figure).

    Returns
    -------
    figure : matplotlib.figure.Figure
    curves : list of dict
        ``{"series", "theory", "N1", "eps_g"}`` rows.
    """
    plt = _plt()
    fig = ax.figure if ax is not None else plt.subplots(figsize=(8.5, 4.4), constrained_layout=True)[0]
    ax = ax if ax is not None else fig.axes[0]
    all_N1 = np.concatenate([[r.attrs["N1"] for r in res] for res, _ in series.values()])
    grid = (np.geomspace(all_N1.min() / 1.5, all_N1.max() * 1.5, 12) if N1_grid is None
            else np.asarray(N1_grid, dtype=float))
    lo, hi, rows, tags = [], [], [], {}
    for k, (label, (results, fit)) in enumerate(series.items()):
        color = f"C{k}"
        results = sorted(results, key=lambda r: r.attrs["N1"])
        for m in methods:
            rec = theory.METHODS[m]
            y = []
            for n in grid:
                th = theory.refit_or_none(fit, m, N1=n)
                y.append(th.generalization_error(X_test, Y_test) if th is not None else np.nan)
            y = np.array(y)
            ax.plot(grid, y, color=color, ls=rec.ls, label=f"{label}: {rec.label}")
            tags[f"{label} {rec.tag}"] = (grid, y, color)
            rows += [{"series": label, "theory": m, "N1": n, "eps_g": v} for n, v in zip(grid, y)]
        N1s = np.array([r.attrs["N1"] for r in results], dtype=float)
        l, h = _mc_points(ax, N1s, [r.sel(quantity="eps_g") for r in results], color, f"{label}: MC ($\\pm 1\\sigma$)")
        lo.append(l)
        hi.append(h)
    log_axis(ax, np.unique(all_N1))
    _fit_ylim(ax, np.concatenate(lo), np.concatenate(hi), tags)
    ax.set_xlabel("width: channels $C$ (CNN) or hidden units $N_1$")
    ax.set_ylabel("generalization loss $\\epsilon_g$")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small")
    return fig, rows


def _field(record, name: str):
    """``record[name]`` of a mapping (a result read back from JSON), else the attribute ``record.name``."""
    return record[name] if isinstance(record, Mapping) else getattr(record, name)


def baselines_vs_N1(results, curves=None, metrics=("mse", "accuracy"), title: str = "",
                    curve_label: str = "theory"):
    r"""Networks trained with Adam against the best infinite-width GP across the width (paper Figs. 3 and 4): one row
    per metric, the training set on the left and the test set on the right, one colour per training-set size P. The
    Adam baseline is drawn as points (mean ± std over its initializations, :data:`POINTS`), the best GP as a
    horizontal line, and optional curves (e.g. the posterior mean of the finite Bayesian network from the theory) as
    dashed lines.

    Parameters
    ----------
    results : dict
        ``{P: {"gp": gp, "adam": {N1: adam}}}``: ``gp`` a :class:`renormpp.baselines.GPResult` or a mapping of its
        scores (``train_mse``, ``test_mse``, ...), ``adam`` a :class:`renormpp.baselines.AdamBaseline` or a mapping
        with its ``"mean"`` and ``"std"`` dicts of the same scores.
    curves : dict, optional
        ``{P: pandas.DataFrame}`` indexed by the width, with a column per score (``train_mse``, ``test_mse``,
        ``train_accuracy``, ``test_accuracy``): drawn dashed in the colour of P.
    metrics : tuple of str, default ("mse", "accuracy")
        The rows: ``"mse"`` and/or ``"accuracy"`` (``("mse",)`` for a regression).
    title : str, default ""
        The figure's title.
    curve_label : str, default "theory"
        The legend's name of ``curves``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    plt = _plt()
    fig, axes = plt.subplots(len(metrics), 2, figsize=(10, 3.3 * len(metrics)), squeeze=False,
                             constrained_layout=True)
    widths = sorted({float(n) for r in results.values() for n in r["adam"]})
    for c, (P, r) in enumerate(results.items()):
        color = f"C{c}"
        N1s = sorted(r["adam"])
        adam = [r["adam"][n] for n in N1s]
        for row, metric in zip(axes, metrics):
            for ax, part in zip(row, ("train", "test")):
                key = f"{part}_{metric}"
                mean, std = (np.array([_field(a, stat)[key] for a in adam], dtype=float) for stat in ("mean", "std"))
                ax.errorbar(np.asarray(N1s, dtype=float), mean, yerr=std, color=color, label=f"Adam, P = {P}",
                            **POINTS)
                ax.axhline(_field(r["gp"], key), color=color, label=f"best GP, P = {P}")
                if curves is not None and P in curves:
                    ax.plot(curves[P].index, curves[P][key], "--", lw=1, color=color,
                            label=f"{curve_label}, P = {P}")
                log_axis(ax, widths)
                ax.set_xlabel("hidden units $N_1$")
                ax.set_ylabel(f"{part} {'MSE' if metric == 'mse' else metric}")
    axes[0, 0].legend(fontsize="small")
    if title:
        fig.suptitle(title)
    return fig
