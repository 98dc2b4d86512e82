"""Figures of the paper from renormpp's objects (matplotlib; arviz-plots for traces, autocorrelation, ESS).

* :func:`overlap_heatmaps`: Q*/lambda1 beside the sampled <v v^T>/N1 and their z-scores, with the values written
  in (``paper_style=True``: the paper's Fig. 2, diagonals / 20).
* :func:`generalization_vs_N1`: loss against N1, exact theory solid, one-loop dashed, infinite width
  dash-dotted, MC points with error bars (paper Fig. 1).
* :func:`overlaps_vs_N1`: diagonal and off-diagonal overlaps against N1 (supplement's overlap figure).
* :func:`mc_analysis`: thermalization trace, histogram and blocking plateau (supplement's MC figure), for the
  pooled chains with the same estimate as the report.
* :func:`trace`, :func:`autocorr`, :func:`ess`: arviz-plots on a DataTree (:func:`renormpp.diagnostics.to_datatree`).

Every function returns a :class:`matplotlib.figure.Figure`; save it with ``fig.savefig(path)``. Points whose error
bar does not hold (a run too short: ``reliable`` False) or that have not settled (``settled`` False: the chains disagree or the
mean drifts) are drawn hollow.
"""
from __future__ import annotations

import numpy as np

from . import diagnostics, theory

#: How each theory method (:data:`renormpp.theory.METHODS`) is drawn: the paper's exact solid, one-loop dashed,
#: infinite width dash-dotted.
STYLE = {"exact": dict(ls="-", label="theory, exact $Q^*$"), "one_loop": dict(ls="--", label="theory, one-loop $Q$"),
         "infinite_width": dict(ls="-.", label="infinite width ($Q=1$)")}


def _style(method: str) -> dict:
    return STYLE.get(method, dict(ls=":", label=f"theory, {method}"))


def _plt():
    import matplotlib.pyplot as plt

    return plt


def _matrix(ds, values) -> np.ndarray:
    """Symmetric (D, D) matrix from the overlap[a,b] rows (a <= b) of a compare() Dataset."""
    D = int(ds.attrs["D"])
    M = np.full((D, D), np.nan)
    ov = ds.quantity.values[1:]
    for q, val in zip(ov, np.asarray(values)[1:]):
        a, b = int(ds.a.sel(quantity=q)), int(ds.b.sel(quantity=q))
        M[a, b] = M[b, a] = val
    return M


def _annotate(ax, M, text, D, lim):
    """Write ``text(a, b)`` in each cell, white on the dark cells of a diverging colour map of range ``lim``."""
    size = max(4.0, 11.0 - 0.6 * D)
    for a in range(D):
        for b in range(D):
            if np.isfinite(M[a, b]):
                dark = abs(M[a, b]) > 0.6 * lim
                ax.text(b, a, text(a, b), ha="center", va="center", fontsize=size, color="w" if dark else "k")


def overlap_heatmaps(ds, class_names=None, paper_style: bool = False, diagonal_scale: float = 20.0):
    """Theory (exact Q*/lambda1) beside the sampled <v v^T>/N1 and their z-scores, from a
    :func:`~renormpp.diagnostics.compare` Dataset.

    Theory and sampled share one colour scale, with the values written in (the sampled ones with their error); the
    third panel shows z = (MC - theory) / error, |z| < 3 pale, so that a disagreement cannot look like agreement.
    ``paper_style=True`` draws the paper's Fig. 2 instead: two panels, diagonals divided by ``diagonal_scale``.
    """
    plt = _plt()
    predicted = _matrix(ds, ds.prediction.sel(theory="exact").values)
    sampled = _matrix(ds, ds.mc_mean.values)
    errors = _matrix(ds, ds.mc_error.values)
    z = _matrix(ds, ds.z.sel(theory="exact").values)
    D = predicted.shape[0]
    names = list(class_names) if class_names is not None else [str(a) for a in range(D)]
    shown = [predicted.copy(), sampled.copy()]
    if paper_style:
        for m in shown:
            np.fill_diagonal(m, np.diag(m) / diagonal_scale)
    lim = np.nanmax(np.abs(shown))
    panels = 2 if paper_style else 3
    fig, axes = plt.subplots(1, panels, figsize=(4.4 * panels + 1, 4.4), constrained_layout=True)
    titles = ("theory $Q^*/\\lambda_1$", "sampled $\\langle v v^\\top\\rangle/N_1$")
    for ax, m, title in zip(axes, shown, titles):
        im = ax.imshow(m, cmap="RdBu_r", vmin=-lim, vmax=lim)
        ax.set_title(title)
    label = f"overlap (diagonal divided by {diagonal_scale:g})" if paper_style else "overlap"
    fig.colorbar(im, ax=list(axes[:2]), shrink=0.85, label=label)
    if not paper_style:
        _annotate(axes[0], predicted, lambda a, b: f"{predicted[a, b]:.3f}", D, lim)
        _annotate(axes[1], sampled, lambda a, b: f"{sampled[a, b]:.3f}\n±{errors[a, b]:.1g}", D, lim)
        zlim = max(5.0, float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 5.0)
        zim = axes[2].imshow(z, cmap="PuOr_r", vmin=-zlim, vmax=zlim)
        _annotate(axes[2], z, lambda a, b: f"{z[a, b]:+.1f}", D, zlim)
        axes[2].set_title("$z$ = (sampled − theory) / error")
        fig.colorbar(zim, ax=axes[2], shrink=0.85, label=f"z (|z| < {diagnostics.Z_AGREE:g}: agrees)")
    for ax in axes:
        ax.set_xticks(range(D), names, rotation=45 if D > 4 else 0)
        ax.set_yticks(range(D), names)
        ax.set_xlabel("output $b$")
        ax.set_ylabel("output $a$")
    fig.suptitle(f"readout overlaps, $N_1$={ds.attrs['N1']:g}, $P$={ds.attrs['P']}"
                 + ("" if bool(ds.reliable.all()) else " (some error bars do not hold)"))
    return fig


def theory_lines(fit, N1_grid, X_test=None, Y_test=None) -> dict:
    """The exact / one-loop / infinite-width curves over ``N1_grid`` from one kernel eigendecomposition: ``{method:
    {"eps_g": (n,), "Q": (n, D, D)}}`` (eps_g NaN without a test set; NaN where a method does not apply)."""
    out = {m: {"eps_g": [], "Q": []} for m in theory.METHODS}
    for N1 in N1_grid:
        for m in theory.METHODS:
            th = diagnostics.theory_fit(fit, m, N1=N1)
            ok = th is not None
            out[m]["eps_g"].append(th.generalization_error(X_test, Y_test) if ok and X_test is not None else np.nan)
            out[m]["Q"].append(th.readout_overlap if ok else np.full((fit.D, fit.D), np.nan))
    return {m: {k: np.array(v) for k, v in d.items()} for m, d in out.items()}


def _N1_grid(results, N1_grid, fit=None):
    """The sampled N1 and the grid of the theory curves: 40 points, 12 for a non-odd activation (each of its solves is
    a root search in two order parameters, about 0.1 s)."""
    N1s = np.array([r.attrs["N1"] for r in results])
    if N1_grid is None:
        N1_grid = np.geomspace(N1s.min() / 1.5, N1s.max() * 1.5, 12 if fit is not None and fit.nonodd else 40)
    return N1s, np.asarray(N1_grid, dtype=float)


def _mc_points(ax, N1s, rows, color, label):
    """MC means with error bars; hollow where the error bar does not hold (a run too short, or not settled: the
    chains disagree or the mean drifts)."""
    mean = np.array([float(r.mc_mean) for r in rows])
    err = np.array([float(r.mc_error) for r in rows])
    ok = np.array([bool(r.reliable) and bool(r.settled if "settled" in r else True) for r in rows])
    ax.errorbar(N1s[ok], mean[ok], yerr=err[ok], fmt="o", color=color, capsize=3, label=label)
    if (~ok).any():
        ax.errorbar(N1s[~ok], mean[~ok], yerr=np.nan_to_num(err[~ok]), fmt="o", mfc="none", color=color, capsize=3,
                    label=(label + ": " if label else "") + "not settled, or error bar does not hold")


def _one_loop_note(ax, grid, values, P):
    """Mark where the one-loop Q stops being positive definite (the dashed curve ends there)."""
    finite = np.isfinite(values)
    if finite.any() and not finite.all():
        edge = grid[finite].min() if finite[-1] else grid[finite].max()
        ax.axvline(edge, color="C0", ls=":", lw=0.8)
        ax.annotate(f"one-loop $Q$ not positive\ndefinite beyond $\\alpha$ = {P / edge:.2g}", (edge, 0.97),
                    xycoords=("data", "axes fraction"), ha="left", va="top", fontsize="small", color="C0")


def log_axis(ax):
    """A log N1 axis with plain numbers (100, not 10^2; no 4x10^1 minor labels)."""
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())


def generalization_vs_N1(results, fit=None, X_test=None, Y_test=None, N1_grid=None, ax=None, lines=None):
    """Generalization loss against N1 (paper Fig. 1) from several :func:`compare` Datasets.

    With ``fit`` (a TheoryFit on the same data) and the test set, the theory is drawn as curves on a fine N1
    grid (where the one-loop Q stops being positive definite its curve ends, marked by a dotted line); otherwise
    the predictions stored in the Datasets are joined by lines. ``lines``: the curves, if already computed by
    :func:`theory_lines` on ``N1_grid``.
    """
    plt = _plt()
    results = sorted(results, key=lambda r: r.attrs["N1"])
    N1s, grid = _N1_grid(results, N1_grid, fit)
    fig = ax.figure if ax is not None else plt.subplots(figsize=(8.5, 4.2), constrained_layout=True)[0]
    ax = ax if ax is not None else fig.axes[0]
    if fit is not None and X_test is not None:
        lines = lines if lines is not None else theory_lines(fit, grid, X_test, Y_test)
        for m in theory.METHODS:
            ax.plot(grid, lines[m]["eps_g"], color="k" if m == "infinite_width" else "C0", **_style(m))
        _one_loop_note(ax, grid, lines["one_loop"]["eps_g"], fit.P)
    else:
        for m in theory.METHODS:
            ax.plot(N1s, [float(r.prediction.sel(quantity="eps_g", theory=m)) for r in results],
                    color="k" if m == "infinite_width" else "C0", **_style(m))
    _mc_points(ax, N1s, [r.sel(quantity="eps_g") for r in results], "C3", "finite networks (MC, $\\pm 1\\sigma$)")
    log_axis(ax)
    ax.set_xlabel("hidden units $N_1$")
    ax.set_ylabel("generalization loss $\\epsilon_g$")
    ax.set_title(f"$P$={results[0].attrs['P']}, $D$={results[0].attrs['D']}, $T$={results[0].attrs['T']:g}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small")
    return fig


def overlaps_vs_N1(results, fit=None, N1_grid=None, class_names=None, max_pairs: int = 6):
    """Readout overlaps against N1 (supplement's overlap figure): diagonal entries on top, off-diagonal below.

    Theory exact solid, infinite width dashed, MC points with error bars; one color per entry.
    """
    plt = _plt()
    results = sorted(results, key=lambda r: r.attrs["N1"])
    N1s, grid = _N1_grid(results, N1_grid, fit)
    D = int(results[0].attrs["D"])
    names = list(class_names) if class_names is not None else [str(a) for a in range(D)]
    lines = theory_lines(fit, grid) if fit is not None else None
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10.5, 7), sharex=True, constrained_layout=True)
    diag = [(a, a) for a in range(D)][:max_pairs]
    off = [(a, b) for a in range(D) for b in range(a + 1, D)][:max_pairs]
    for ax, pairs in ((top, diag), (bottom, off)):
        for i, (a, b) in enumerate(pairs):
            color = f"C{i % 10}"
            q = f"overlap[{a},{b}]"
            label = f"({names[a]}, {names[b]})"
            if lines is not None:
                ax.plot(grid, lines["exact"]["Q"][:, a, b], "-", color=color)
                ax.plot(grid, lines["infinite_width"]["Q"][:, a, b], "--", color=color, alpha=0.6)
            else:
                ax.plot(N1s, [float(r.prediction.sel(quantity=q, theory="exact")) for r in results], "-", color=color)
            _mc_points(ax, N1s, [r.sel(quantity=q) for r in results], color, label)
        ax.legend(title="outputs $(a, b)$", fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    top.plot([], [], "k-", label="theory $Q^*_{ab}/\\lambda_1$")
    top.plot([], [], "k--", label="infinite width")
    top.legend(title="outputs $(a, b)$", fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    top.set_ylabel("$\\langle v_a\\cdot v_a\\rangle/N_1$ (diagonal)")
    bottom.set_ylabel("$\\langle v_a\\cdot v_b\\rangle/N_1$, $a\\neq b$")
    bottom.set_xlabel("hidden units $N_1$")
    log_axis(bottom)
    return fig


def scaling(groups: dict, fits):
    """Finite-size scaling: the relative deviation Delta = (MC - theory) / theory against 1/N1 with error bars, one
    panel per quantity, one colour per theory, and the straight-line fits extrapolated to 1/N1 = 0
    (``groups``, ``fits``: :func:`renormpp.experiments.report.scaling_table` grouped, and its extrapolations)."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(groups), figsize=(6 * len(groups), 4.2), constrained_layout=True, squeeze=False)
    for ax, (name, g) in zip(axes[0], groups.items()):
        for i, th in enumerate(g.theory.unique()):
            sub = g[g.theory == th].sort_values("N1")
            x = 1.0 / sub.N1.to_numpy()
            color = f"C{i}"
            ax.errorbar(x, sub.delta_rel, yerr=sub.delta_rel_error, fmt="o", color=color, capsize=3, label=th)
            f = fits[(fits.quantity == name) & (fits.theory == th)]
            if len(f) and np.isfinite(f.delta_inf.iloc[0]):
                xs = np.linspace(0.0, x.max() * 1.05, 50)
                ax.plot(xs, f.delta_inf.iloc[0] + f.slope.iloc[0] * xs, color=color, lw=1)
                ax.errorbar([0.0], [f.delta_inf.iloc[0]], yerr=[f.delta_inf_error.iloc[0]], fmt="s", color=color,
                            capsize=4, mfc="none")
        ax.axhline(0.0, color="k", lw=0.6)
        ax.set_xlabel("$1/N_1$")
        ax.set_ylabel("(MC − theory) / theory")
        ax.set_title(name)
        ax.legend(fontsize="small", title="theory (squares: extrapolated)")
    return fig


def mc_analysis(series, name: str = "$\\epsilon_g$", estimate=None, method: str = "gamma", cut="auto",
                draw_unit: str = "recorded draw"):
    """Supplement's Monte Carlo analysis figure for one scalar series, every chain shown and pooled as the report
    pools them.

    ``series`` (chain, draw) or (draw,); ``estimate`` is the report's :class:`~renormpp.diagnostics.ErrorEstimate`
    (else computed here by ``method`` and ``cut``, as :func:`renormpp.diagnostics.compare` does). Left: the traces,
    one colour per chain, thermalization (before the cut) faded; middle: the histogram of the pooled thermalized
    draws (area 1); right: the blocking curve of each chain, with the estimate's error as a horizontal line. A
    chain that did not move is said so, not drawn as a histogram.
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
    a1.legend(fontsize="small", ncols=2)
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
        a2.legend()
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
        a3.legend(fontsize="small")
    fig.suptitle(f"{name}: {estimate.mean:.5g} ± {error} ({estimate.method}, {x.shape[0]} chain(s) pooled, "
                 f"{estimate.n} draws after the cut)" + ("" if estimate.reliable else " — the error bar does not hold"))
    return fig


def _arviz_plot(fn, dt, **kwargs):
    import arviz_plots

    kwargs.setdefault("figure_kwargs", {"layout": "constrained"})  # titles clear of the axes above
    pc = getattr(arviz_plots, fn)(dt, backend="matplotlib", **kwargs)
    return pc.viz["figure"].item()


def trace(dt, **kwargs):
    """Traces of every variable of a DataTree (arviz-plots ``plot_trace``), with a legend of the chains and the
    variable's name on the y axis."""
    import arviz_plots

    kwargs.setdefault("figure_kwargs", {"layout": "constrained"})
    pc = arviz_plots.plot_trace(dt, backend="matplotlib", **kwargs)
    fig = pc.viz["figure"].item()
    for ax in fig.axes:
        title = ax.get_title()
        if title and not ax.get_ylabel():
            ax.set_ylabel(title)
        handles = ax.get_lines()
        chains = [h for h in handles if h.get_xdata().size > 1]
        if 1 < len(chains) <= 10:
            ax.legend(chains, [f"chain {c}" for c in range(len(chains))], fontsize="small")
    return fig


def autocorr(dt, **kwargs):
    """Autocorrelation functions (arviz-plots ``plot_autocorr``)."""
    return _arviz_plot("plot_autocorr", dt, **kwargs)


def ess(dt, **kwargs):
    """Local effective sample sizes (arviz-plots ``plot_ess``)."""
    return _arviz_plot("plot_ess", dt, **kwargs)
