"""Figures of the paper from renormpp's objects (matplotlib; arviz-plots for traces, autocorrelation, ESS).

* :func:`overlap_heatmaps`: Q*/lambda1 beside the sampled <v v^T>/N1, diagonals / 20 (paper Fig. 2).
* :func:`generalization_vs_N1`: loss against N1, exact theory solid, one-loop dashed, infinite width
  dash-dotted, MC points with error bars (paper Fig. 1).
* :func:`overlaps_vs_N1`: diagonal and off-diagonal overlaps against N1 (supplement's overlap figure).
* :func:`mc_analysis`: thermalization trace, histogram and blocking plateau (supplement's MC figure).
* :func:`trace`, :func:`autocorr`, :func:`ess`: arviz-plots on a DataTree (:func:`renormpp.diagnostics.to_datatree`).

Every function returns a :class:`matplotlib.figure.Figure`; save it with ``fig.savefig(path)``.
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


def overlap_heatmaps(ds, class_names=None, diagonal_scale: float = 20.0):
    """Theory (exact Q*/lambda1) beside the sampled <v v^T>/N1 from a :func:`~renormpp.diagnostics.compare` Dataset."""
    plt = _plt()
    predicted = _matrix(ds, ds.prediction.sel(theory="exact").values)
    sampled = _matrix(ds, ds.mc_mean.values)
    shown = [m.copy() for m in (predicted, sampled)]
    for m in shown:
        np.fill_diagonal(m, np.diag(m) / diagonal_scale)
    lim = np.nanmax(np.abs(shown))
    D = predicted.shape[0]
    names = list(class_names) if class_names is not None else [str(a) for a in range(D)]
    fig, axes = plt.subplots(1, 2, figsize=(4.2 * 2 + 1, 4.2), constrained_layout=True)
    for ax, m, title in zip(axes, shown, ("theory $Q^*/\\lambda_1$", "sampled $\\langle v v^\\top\\rangle/N_1$")):
        im = ax.imshow(m, cmap="RdBu_r", vmin=-lim, vmax=lim)
        ax.set_title(title)
        ax.set_xticks(range(D), names, rotation=45 if D > 4 else 0)
        ax.set_yticks(range(D), names)
        ax.set_xlabel("output $b$")
        ax.set_ylabel("output $a$")
    fig.colorbar(im, ax=axes, shrink=0.85, label=f"overlap (diagonal divided by {diagonal_scale:g})")
    fig.suptitle(f"readout overlaps, $N_1$={ds.attrs['N1']:g}, $P$={ds.attrs['P']}")
    return fig


def _theory_lines(fit, N1_grid, X_test=None, Y_test=None):
    """exact / one-loop / infinite-width curves over N1 from one kernel eigendecomposition."""
    out = {m: {"eps_g": [], "Q": []} for m in theory.METHODS}
    for N1 in N1_grid:
        for m in theory.METHODS:
            th = diagnostics.theory_fit(fit, m, N1=N1)
            ok = th is not None
            out[m]["eps_g"].append(th.generalization_error(X_test, Y_test) if ok and X_test is not None else np.nan)
            out[m]["Q"].append(th.readout_overlap if ok else np.full((fit.D, fit.D), np.nan))
    return {m: {k: np.array(v) for k, v in d.items()} for m, d in out.items()}


def _N1_grid(results, N1_grid):
    N1s = np.array([r.attrs["N1"] for r in results])
    if N1_grid is None:
        N1_grid = np.geomspace(N1s.min() / 1.5, N1s.max() * 1.5, 40)
    return N1s, np.asarray(N1_grid, dtype=float)


def generalization_vs_N1(results, fit=None, X_test=None, Y_test=None, N1_grid=None, ax=None):
    """Generalization loss against N1 (paper Fig. 1) from several :func:`compare` Datasets.

    With ``fit`` (a TheoryFit on the same data) and the test set, the theory is drawn as curves on a fine N1
    grid; otherwise the predictions stored in the Datasets are joined by lines.
    """
    plt = _plt()
    results = sorted(results, key=lambda r: r.attrs["N1"])
    N1s, grid = _N1_grid(results, N1_grid)
    fig = ax.figure if ax is not None else plt.subplots(figsize=(6, 4.2), constrained_layout=True)[0]
    ax = ax if ax is not None else fig.axes[0]
    if fit is not None and X_test is not None:
        lines = _theory_lines(fit, grid, X_test, Y_test)
        for m in theory.METHODS:
            ax.plot(grid, lines[m]["eps_g"], color="k" if m == "infinite_width" else "C0", **_style(m))
    else:
        for m in theory.METHODS:
            ax.plot(N1s, [float(r.prediction.sel(quantity="eps_g", theory=m)) for r in results],
                    color="k" if m == "infinite_width" else "C0", **_style(m))
    mc = [r.sel(quantity="eps_g") for r in results]
    ax.errorbar(N1s, [float(r.mc_mean) for r in mc], yerr=[float(r.mc_error) for r in mc], fmt="o", color="C3",
                capsize=3, label="finite networks (MC, $\\pm 1\\sigma$)")
    ax.set_xscale("log")
    ax.set_xlabel("hidden units $N_1$")
    ax.set_ylabel("generalization loss $\\epsilon_g$")
    ax.set_title(f"$P$={results[0].attrs['P']}, $D$={results[0].attrs['D']}, $T$={results[0].attrs['T']:g}")
    ax.legend()
    return fig


def overlaps_vs_N1(results, fit=None, N1_grid=None, class_names=None, max_pairs: int = 6):
    """Readout overlaps against N1 (supplement's overlap figure): diagonal entries on top, off-diagonal below.

    Theory exact solid, infinite width dashed, MC points with error bars; one color per entry.
    """
    plt = _plt()
    results = sorted(results, key=lambda r: r.attrs["N1"])
    N1s, grid = _N1_grid(results, N1_grid)
    D = int(results[0].attrs["D"])
    names = list(class_names) if class_names is not None else [str(a) for a in range(D)]
    lines = _theory_lines(fit, grid) if fit is not None else None
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.5, 7), sharex=True, constrained_layout=True)
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
            sel = [r.sel(quantity=q) for r in results]
            ax.errorbar(N1s, [float(s.mc_mean) for s in sel], yerr=[float(s.mc_error) for s in sel], fmt="o",
                        color=color, capsize=3, label=label)
        ax.legend(title="outputs $(a, b)$", fontsize="small", ncols=2)
    top.plot([], [], "k-", label="theory $Q^*_{ab}/\\lambda_1$")
    top.plot([], [], "k--", label="infinite width")
    top.legend(title="outputs $(a, b)$", fontsize="small", ncols=2)
    top.set_ylabel("$\\langle v_a\\cdot v_a\\rangle/N_1$ (diagonal)")
    bottom.set_ylabel("$\\langle v_a\\cdot v_b\\rangle/N_1$, $a\\neq b$")
    bottom.set_xlabel("hidden units $N_1$")
    bottom.set_xscale("log")
    return fig


def mc_analysis(series, name: str = "$\\epsilon_g$", cut="auto", draw_unit: str = "recorded draw"):
    """Supplement's Monte Carlo analysis figure for one scalar series of one chain.

    Left: the trace, thermalization in red and the thermalized signal in blue; middle: the histogram of the
    thermalized draws (area 1); right: the blocking curve, standard error of the mean against block size,
    with the plateau value (the error) as a horizontal line.
    """
    plt = _plt()
    x = np.asarray(series, dtype=np.float64)
    if x.ndim == 2:
        x = x[0]
    est = diagnostics.blocking(x, cut=cut)
    cut = est.cut
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(13, 3.8), constrained_layout=True)
    t = np.arange(len(x))
    a1.plot(t[: cut + 1], x[: cut + 1], color="C3", lw=0.8, label="thermalization")
    a1.plot(t[cut:], x[cut:], color="C0", lw=0.8, label="thermalized")
    a1.set_xlabel(draw_unit)
    a1.set_ylabel(name)
    a1.legend()
    a2.hist(x[cut:], bins=50, density=True, color="C0", alpha=0.8)
    a2.axvline(est.mean, color="k", ls="--", label=f"mean {est.mean:.4g}")
    a2.set_xlabel(name)
    a2.set_ylabel("density")
    a2.legend()
    d = est.details
    a3.errorbar(d["block_size"], d["error"], yerr=d["error_error"], fmt="o-", color="C4", ms=3, capsize=2,
                label="blocked estimate")
    a3.axhline(est.error, color="C1", label=f"plateau: error {est.error:.2g}")
    a3.axvline(d["optimal"], color="C1", ls=":", label=f"block size {d['optimal']}")
    a3.set_xscale("log", base=2)
    a3.set_xlabel(f"block size ({draw_unit}s)")
    a3.set_ylabel(f"standard error of the mean of {name}")
    a3.legend(fontsize="small")
    return fig


def _arviz_plot(fn, dt, **kwargs):
    import arviz_plots

    kwargs.setdefault("figure_kwargs", {"layout": "constrained"})  # titles clear of the axes above
    pc = getattr(arviz_plots, fn)(dt, backend="matplotlib", **kwargs)
    return pc.viz["figure"].item()


def trace(dt, **kwargs):
    """Traces of every variable of a DataTree (arviz-plots ``plot_trace``)."""
    return _arviz_plot("plot_trace", dt, **kwargs)


def autocorr(dt, **kwargs):
    """Autocorrelation functions (arviz-plots ``plot_autocorr``)."""
    return _arviz_plot("plot_autocorr", dt, **kwargs)


def ess(dt, **kwargs):
    """Local effective sample sizes (arviz-plots ``plot_ess``)."""
    return _arviz_plot("plot_ess", dt, **kwargs)
