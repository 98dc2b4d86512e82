"""Figures of the paper from renormpp's objects (matplotlib; arviz-plots for traces, autocorrelation, ESS).

* :func:`overlap_heatmaps`: Q*/lambda1 beside the sampled <v v^T>/N1 and their z-scores, with the values written
  in, one row per width (``paper_style=True``: the paper's Fig. 2, diagonals / 20).
* :func:`generalization_vs_N1`: loss against N1, every theory method of :data:`renormpp.theory.METHODS` in its
  record's line style (exact solid, one-loop dashed, infinite width dash-dotted, 1/N1-corrected dotted), MC points
  with error bars (paper Fig. 1); the y-limits follow the points, a theory that runs off is clipped and marked where
  it leaves.
* :func:`overlaps_vs_N1`: diagonal and off-diagonal overlaps against N1 (supplement's overlap figure).
* :func:`mc_analysis`: thermalization trace, histogram and blocking plateau (supplement's MC figure), for the
  pooled chains with the same estimate as the report.
* :func:`trace`, :func:`autocorr`, :func:`ess`: arviz-plots on a DataTree (:func:`renormpp.diagnostics.to_datatree`).

Every function returns a :class:`matplotlib.figure.Figure`; save it with ``fig.savefig(path)``. Points whose error
bar does not hold (a run too short: ``reliable`` False) or that have not settled (``settled`` False: the chains disagree or the
mean drifts) are drawn hollow. N1 axes are ticked at the sampled widths; legends and notes keep off the data.
"""
from __future__ import annotations

import numpy as np

from . import diagnostics, theory

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


def overlap_heatmaps(results, class_names=None, paper_style: bool = False, diagonal_scale: float = 20.0):
    """Theory (the reference method's Q*/lambda1, :data:`renormpp.theory.REFERENCE`) beside the sampled <v v^T>/N1
    and their z-scores, from a :func:`~renormpp.diagnostics.compare` Dataset, or from several (a sweep: one row per
    width).

    Theory and sampled share one colour scale, across the rows too, with the values written in (the sampled ones with
    their error); the third panel shows z = (MC - theory) / error, |z| < 3 pale, so that a disagreement cannot look
    like agreement. ``paper_style=True`` draws the paper's Fig. 2 instead: two panels, diagonals divided by
    ``diagonal_scale``.
    """
    import xarray as xr

    plt = _plt()
    results = [results] if isinstance(results, xr.Dataset) else sorted(results, key=lambda r: r.attrs["N1"])
    D = int(results[0].attrs["D"])
    names = list(class_names) if class_names is not None else [str(a) for a in range(D)]
    scale = np.where(np.eye(D, dtype=bool), 1.0 / diagonal_scale if paper_style else 1.0, 1.0)
    ref = theory.REFERENCE
    mats = [[_matrix(ds, v) for v in (ds.prediction.sel(theory=ref), ds.mc_mean, ds.mc_error, ds.z.sel(theory=ref))]
            for ds in results]
    lim = np.nanmax([np.abs(m[:2]) * scale for m in mats])
    z_all = np.array([m[3] for m in mats])
    zlim = max(5.0, float(np.nanmax(np.abs(z_all))) if np.isfinite(z_all).any() else 5.0)
    panels = 2 if paper_style else 3
    fig, axes = plt.subplots(len(results), panels, figsize=(4.4 * panels + 1, 4.4 * len(results)),
                             constrained_layout=True, squeeze=False)
    titles = ("theory $Q^*/\\lambda_1$", "sampled $\\langle v v^\\top\\rangle/N_1$",
              "$z$ = (sampled − theory) / error")
    for row, ds, (predicted, sampled, errors, z) in zip(axes, results, mats):
        width = f"$N_1$={ds.attrs['N1']:g}: " if len(results) > 1 else ""
        for ax, m, title in zip(row, (predicted * scale, sampled * scale), titles):
            im = ax.imshow(m, cmap="RdBu_r", vmin=-lim, vmax=lim)
            ax.set_title(width + title)
        if not paper_style:
            _annotate(row[0], predicted, lambda a, b: f"{predicted[a, b]:.3f}", D, lim)
            _annotate(row[1], sampled, lambda a, b: f"{sampled[a, b]:.3f}\n±{errors[a, b]:.1g}", D, lim)
            zim = row[2].imshow(z, cmap="PuOr_r", vmin=-zlim, vmax=zlim)
            _annotate(row[2], z, lambda a, b: f"{z[a, b]:+.1f}", D, zlim)
            row[2].set_title(width + titles[2])
        for ax in row:
            ax.set_xticks(range(D), names, rotation=45 if D > 4 else 0)
            ax.set_yticks(range(D), names)
            ax.set_xlabel("output $b$")
            ax.set_ylabel("output $a$")
    label = f"overlap (diagonal divided by {diagonal_scale:g})" if paper_style else "overlap"
    fig.colorbar(im, ax=axes[:, :2], shrink=0.85, label=label)
    if not paper_style:
        fig.colorbar(zim, ax=axes[:, 2], shrink=0.85, label=f"z (|z| < {diagnostics.Z_AGREE:g}: agrees)")
    width = f"$N_1$={results[0].attrs['N1']:g}, " if len(results) == 1 else ""
    fig.suptitle(f"readout overlaps, {width}$P$={results[0].attrs['P']}"
                 + ("" if all(bool(ds.reliable.all()) for ds in results) else " (some error bars do not hold)"))
    return fig


def theory_lines(fit, N1_grid, X_test=None, Y_test=None) -> dict:
    """The curves of every theory method (:data:`renormpp.theory.METHODS`) over ``N1_grid`` from one kernel
    eigendecomposition: ``{method: {"eps_g": (n,), "Q": (n, D, D)}}`` (eps_g NaN without a test set; NaN where a
    method does not apply, :func:`renormpp.theory.fit_or_reason`)."""
    out = {m: {"eps_g": [], "Q": []} for m in theory.METHODS}
    for N1 in N1_grid:
        for m in theory.METHODS:
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


def log_axis(ax, N1s):
    """A log N1 axis ticked at the sampled widths ``N1s``, written as plain numbers (40, not 4x10^1), no minor ticks."""
    from matplotlib.ticker import NullLocator

    ticks = np.unique(np.asarray(N1s, dtype=float))
    ax.set_xscale("log")
    ax.set_xticks(ticks, [f"{n:.0f}" for n in ticks])
    ax.xaxis.set_minor_locator(NullLocator())


def generalization_vs_N1(results, fit=None, X_test=None, Y_test=None, N1_grid=None, ax=None, lines=None):
    """Generalization loss against N1 (paper Fig. 1) from several :func:`compare` Datasets.

    With ``fit`` (a TheoryFit on the same data) and the test set, the theory is drawn as curves on a fine N1
    grid, each method in its record's label, line style and colour (where the one-loop Q stops being positive definite
    its curve ends, marked by a dotted line and the record's ``breakdown`` note); otherwise
    the predictions stored in the Datasets are joined by lines. ``lines``: the curves, if already computed by
    :func:`theory_lines` on ``N1_grid``. The y-limits follow the MC points and the curves near them; a curve that
    runs off is clipped and marked where it leaves (:func:`_fit_ylim`).
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
    lo, hi = _mc_points(ax, N1s, [r.sel(quantity="eps_g") for r in results], "C3",
                        "finite networks (MC, $\\pm 1\\sigma$)")
    log_axis(ax, N1s)
    _fit_ylim(ax, lo, hi, {methods[m].tag: (x, y, methods[m].color) for m, y in curves.items()})
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
    r"""Generalization loss against the width for several architectures on the same data (issue 33: the CNN against
    the fully connected network): for each ``{label: (results, fit)}`` (the :func:`compare` Datasets of a sweep and a
    fit at one width, :class:`renormpp.theory.TheoryFit` or :class:`renormpp.theory.ConvFit`) the MC points and the
    curves of ``methods`` (each in its line style, :data:`renormpp.theory.METHODS`), one colour per architecture.

    Returns ``(figure, curves)``, ``curves`` a list of ``{"series", "theory", "N1", "eps_g"}`` rows."""
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


def local_overlaps(ds, outputs=(0, 0)):
    r"""The CNN's local order parameter (issue 33) from a :func:`renormpp.diagnostics.local.compare_local` Dataset,
    as its departure from the infinite width (:math:`\delta_{ab}\delta_{ij}/\lambda_1`), where the local structure
    shows: left, the sampled :math:`\sum_c v_{a,c,i}v_{b,c,j}/C - \delta_{ab}\delta_{ij}/\lambda_1` over the patch
    pairs (i, j) of the outputs ``outputs`` = (a, b); middle, the exact theory's
    :math:`(Q^*_{(ai),(bj)} - \delta)/\lambda_1` (Eq. (C10)) on the same colour scale; right, every independent entry
    (a i, b j), theory against sampled with error bars, the diagonal where they agree and 0 where the infinite width
    would be right; the legend gives the share of the sampled departure that each method misses
    (:func:`renormpp.diagnostics.local.compare_local`)."""
    plt = _plt()
    a, b = outputs
    D, n_p = ds.mc_mean.shape[:2]
    n = D * n_p
    wide = ds.prediction.sel(theory="infinite_width").values
    mc, ex = ds.mc_mean.values - wide, ds.prediction.sel(theory="exact").values - wide
    lim = float(np.nanmax(np.abs([mc[a, :, b, :], ex[a, :, b, :]]))) or 1.0
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.3), constrained_layout=True)
    titles = (f"sampled $\\sum_c v_{{{a}ci}}v_{{{b}cj}}/C - \\delta/\\lambda_1$",
              f"exact theory $(Q^*_{{({a}i),({b}j)}} - \\delta)/\\lambda_1$")
    for ax, M, title in zip(axes, (mc[a, :, b, :], ex[a, :, b, :]), titles):
        im = ax.imshow(M, cmap="RdBu_r", vmin=-lim, vmax=lim)
        ax.set_xlabel("patch $j$")
        ax.set_ylabel("patch $i$")
        ax.set_title(f"$C$={ds.attrs['N1']:g}: {title}", fontsize="medium")
    fig.colorbar(im, ax=axes[:2], shrink=0.8)
    iu = np.triu_indices(n)
    x, y = ex.reshape(n, n)[iu], mc.reshape(n, n)[iu]
    ax = axes[2]
    note = ", ".join(f"{theory.METHODS[str(m)].tag} misses {ds.attrs[f'rel_{m}']:.0%}" for m in ds.theory.values)
    ax.errorbar(x, y, yerr=ds.mc_error.values.reshape(n, n)[iu], fmt="o", ms=3, ls="none",
                color=theory.METHODS["exact"].color, alpha=0.7, label=f"entries ({note})")
    span = [min(x.min(), y.min()), max(x.max(), y.max())]
    ax.plot(span, span, color="0.5", lw=0.8, zorder=0, label="sampled = exact theory")
    ax.axhline(0, color=theory.METHODS["infinite_width"].color, ls=theory.METHODS["infinite_width"].ls, lw=0.8,
               label="infinite width")
    ax.set_xlabel("exact theory, minus infinite width")
    ax.set_ylabel("sampled (MC, $\\pm 1\\sigma$), minus infinite width")
    ax.set_title("every entry (a i, b j), i ≤ j", fontsize="medium")
    ax.legend(fontsize="small")
    return fig


def kernel_vs_N1(kernels: dict, fit=None, directions: int = 3, N1_grid=None):
    r"""The posterior's hidden kernel against N1 (issue 32): left, the spectrum ratios
    :math:`r_k = u_k^\top K_{\rm post} u_k / k_k` along the top ``directions`` eigenvectors of K (measured, with
    error bars), 1 under the prior, and as the exact theory predicts them (Eq. (H2) of
    :mod:`renormpp.theory.hidden`, curves over N1 with ``fit``, the point's theory otherwise); right, the
    kernel-target alignment of K, of the measured and of the predicted :math:`K_{\rm post}`.

    ``kernels``: {N1: diagnosis}, each a :class:`renormpp.diagnostics.kernel.KernelDiagnosis` or its dict (the
    ``kernel`` entry of a point's ``result.json``)."""
    from .theory import hidden as hidden_theory

    plt = _plt()
    rows = {float(n): (d.as_dict() if hasattr(d, "as_dict") else d) for n, d in sorted(kernels.items())}
    if not rows:
        raise ValueError("no hidden-kernel diagnosis to draw: run with run.kernel_diagnosis = true")
    N1s = np.array(list(rows))
    grid = np.geomspace(N1s.min() / 1.5, N1s.max() * 1.5, 30) if N1_grid is None else np.asarray(N1_grid, float)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.0), constrained_layout=True)
    exact = fit.refit("exact") if fit is not None else None
    top = np.argsort(exact.spectrum.k)[::-1][:directions] if exact is not None else None
    for i in range(min(directions, len(next(iter(rows.values()))["r"]))):
        color = f"C{i}"
        r = np.array([rows[n]["r"][i] for n in N1s])
        err = np.array([rows[n]["r_err"][i] for n in N1s])
        ax.errorbar(N1s, r, yerr=err, color=color, label=f"$u_{i + 1}$ measured", **POINTS)
        if exact is not None:
            th = [hidden_theory.spectrum_ratios(exact.refit(N1=n))[top[i]] for n in grid]
            ax.plot(grid, th, color=color, ls="--", lw=1, label=f"$u_{i + 1}$ theory (H2)")
        else:
            ax.plot(N1s, [rows[n]["r_theory"][i] for n in N1s], color=color, ls="--", lw=1,
                    label=f"$u_{i + 1}$ theory (H2)")
    ax.axhline(1.0, color="0.5", lw=1, ls=":", label="prior kernel K")
    ax.set_ylabel("$r_k = u_k^\\top K_{\\rm post} u_k / u_k^\\top K u_k$")
    a = np.array([rows[n]["alignment_post"] for n in N1s])
    bx.errorbar(N1s, a, yerr=[rows[n]["alignment_err"] for n in N1s], color="C3", label="$K_{\\rm post}$ measured",
                **POINTS)
    bx.plot(N1s, [rows[n]["alignment_theory"] for n in N1s], "s--", color="C0", ms=4, lw=1,
            label="$K_{\\rm post}$ theory (H1)")
    bx.axhline(rows[N1s[0]]["alignment"], color="0.5", lw=1, ls=":", label="prior kernel K")
    bx.set_ylabel("kernel-target alignment")
    for axis in (ax, bx):
        log_axis(axis, N1s)
        axis.set_xlabel("hidden units $N_1$")
        axis.legend(fontsize="small")
    return fig


def validity_map(table, theories=("exact", "corrected", "infinite_width", "adaptive"), title: str = ""):
    r"""One heatmap per theory over :math:`\alpha = P/N_1` (columns) and :math:`N_0/P` (rows) of one teacher and
    network of the validity map (:mod:`renormpp.experiments.validity`): the colour is the relative deviation
    :math:`\Delta = (\epsilon_{g,\rm MC} - \epsilon_{g,\rm th})/\epsilon_{g,\rm th}`, clipped at ±20%; the text is
    Δ in percent and whether the theory holds within 1% (✓✓) or 5% (✓), fails at 5% (✗) or the point does not
    decide (?); blank where the theory does not apply.

    ``table``: rows of :func:`renormpp.experiments.validity.table` (one teacher and network)."""
    plt = _plt()
    eps = table[table.quantity == "eps_g"]
    alphas, ratios = sorted(eps.alpha.unique()), sorted(eps.ratio.unique())
    fig, axes = plt.subplots(1, len(theories), figsize=(3.6 * len(theories) + 1, 3.6), constrained_layout=True,
                             squeeze=False)
    for ax, th in zip(axes[0], theories):
        Z = np.full((len(ratios), len(alphas)), np.nan)
        for r in eps[eps.theory == th].itertuples():
            i, j = ratios.index(r.ratio), alphas.index(r.alpha)
            Z[i, j] = r.delta
        im = ax.imshow(np.clip(100 * Z, -20, 20), cmap="RdBu_r", vmin=-20, vmax=20, origin="lower", aspect="auto")
        for r in eps[eps.theory == th].to_dict("records"):
            if np.isfinite(r["delta"]):
                mark = ("✓✓" if r["within_1%"] == "holds" else "✓" if r["within_5%"] == "holds"
                        else "✗" if r["within_5%"] == "fails" else "?")
                ax.text(alphas.index(r["alpha"]), ratios.index(r["ratio"]), f"{100 * r['delta']:+.1f}%\n{mark}",
                        ha="center", va="center", fontsize=8, color="w" if abs(r["delta"]) > 0.12 else "k")
        ax.set_xticks(range(len(alphas)), [f"{a:g}" for a in alphas])
        ax.set_yticks(range(len(ratios)), [f"{r:g}" for r in ratios])
        ax.set_xlabel(r"$\alpha = P/N_1$")
        ax.set_ylabel(r"$N_0/P$")
        ax.set_title(th.replace("_", " "))
    fig.colorbar(im, ax=axes, shrink=0.8, label=r"$\Delta$ on $\epsilon_g$ (%), clipped at ±20%")
    if title:
        fig.suptitle(title)
    return fig


def discrepancy_vs_N1(table, theories=("exact", "corrected", "adaptive")):
    r"""The supplement's discrepancy figure, Eq. (S-discrep): :math:`|\Delta| = |\epsilon_{g,\rm MC} -
    \epsilon_{g,\rm th}|/\epsilon_{g,\rm th}` against :math:`N_1`, one colour per series (e.g. randomly projected
    MNIST at :math:`N_0 = 12^2` and :math:`28^2`), one line style per theory (as in
    :data:`renormpp.theory.METHODS`; the adaptive theory dashed), error bars from the sampled mean's error; points
    whose error bar does not hold (``reliable`` False: a run too short or not settled) hollow.

    ``table``: rows of :func:`renormpp.experiments.validity.table`."""
    plt = _plt()
    eps = table[(table.quantity == "eps_g") & table.theory.isin(theories)]
    styles = {"exact": "-", "corrected": ":", "infinite_width": "-.", "adaptive": "--", "one_loop": (0, (5, 2, 1, 2))}
    markers = {"exact": "o", "corrected": "s", "infinite_width": "^", "adaptive": "D"}
    fig, ax = plt.subplots(figsize=(7.5, 4.8), constrained_layout=True)
    hollow = False
    for i, (series, g) in enumerate(eps.groupby("series", sort=False)):
        for th in theories:
            h = g[(g.theory == th) & np.isfinite(g.delta)].sort_values("N1")
            if h.empty:
                continue
            y, ok = 100 * h.delta.abs().values, h.reliable.astype(bool).values
            ax.errorbar(h.N1, y, yerr=100 * h.mc_error / h.prediction.abs(), color=f"C{i}", ls=styles.get(th, "-"),
                        marker="none", capsize=3, label=f"{series}: {th.replace('_', ' ')}")
            for held, face in ((ok, f"C{i}"), (~ok, "none")):
                ax.plot(h.N1.values[held], y[held], ls="none", marker=markers.get(th, "o"), ms=5, color=f"C{i}",
                        mfc=face)
            hollow |= bool((~ok).any())
    if hollow:
        ax.plot([], [], "ko", mfc="none", label=f"hollow: {HOLLOW}")
    for level in (1, 5):
        ax.axhline(level, color="0.6", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("hidden units $N_1$")
    ax.set_ylabel(r"$|\Delta|$ on $\epsilon_g$ (%)")
    ax.legend(fontsize="x-small", ncols=2)
    return fig


def overlaps_vs_N1(results, fit=None, N1_grid=None, class_names=None, max_pairs: int = 6):
    """Readout overlaps against N1 (supplement's overlap figure): diagonal entries on top, off-diagonal below.

    Theory (:data:`renormpp.theory.REFERENCE`, exact) solid, infinite width (:data:`renormpp.theory.BASELINE`)
    dashed, MC points with error bars; one color per entry.
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
                ax.plot(grid, lines[theory.REFERENCE]["Q"][:, a, b], "-", color=color)
                ax.plot(grid, lines[theory.BASELINE]["Q"][:, a, b], "--", color=color, alpha=0.6)
            else:
                ax.plot(N1s, [float(r.prediction.sel(quantity=q, theory=theory.REFERENCE)) for r in results], "-",
                        color=color)
            _mc_points(ax, N1s, [r.sel(quantity=q) for r in results], color, label, hollow_label="_nolegend_")
        ax.legend(title="outputs $(a, b)$", fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    top.plot([], [], "k-", label="theory $Q^*_{ab}/\\lambda_1$")
    top.plot([], [], "k--", label="infinite width")
    top.plot([], [], "ko", mfc="none", label=f"hollow: {HOLLOW}")
    top.legend(title="outputs $(a, b)$", fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    top.set_ylabel("$\\langle v_a\\cdot v_a\\rangle/N_1$ (diagonal)")
    bottom.set_ylabel("$\\langle v_a\\cdot v_b\\rangle/N_1$, $a\\neq b$")
    bottom.set_xlabel("hidden units $N_1$")
    log_axis(bottom, N1s)
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
            ax.errorbar(x, sub.delta_rel, yerr=sub.delta_rel_error, color=color, label=th, **POINTS)
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
    chain that did not move is said so, not drawn as a histogram. The legends sit above the panels, off the traces.
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
    a legend of the chains right of the first panel (one colour per chain in every panel)."""
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
    """Autocorrelation functions (arviz-plots ``plot_autocorr``)."""
    return _arviz_plot("plot_autocorr", dt, **kwargs)


def ess(dt, **kwargs):
    """Local effective sample sizes (arviz-plots ``plot_ess``)."""
    return _arviz_plot("plot_ess", dt, **kwargs)
