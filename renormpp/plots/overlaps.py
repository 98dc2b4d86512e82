"""The readout overlaps, theory against sampled: :func:`overlap_heatmaps` (Q*/lambda1 beside the sampled
<v v^T>/N1 and their z-scores, one row per width; ``paper_style=True``: the paper's Fig. 2), :func:`overlaps_vs_N1`
(the supplement's overlap figure: the entries against N1) and :func:`local_overlaps` (the CNN's overlaps over patch
pairs)."""
from __future__ import annotations

import numpy as np

from .. import diagnostics, theory
from ._common import HOLLOW, _mc_points, _N1_grid, _plt, log_axis, theory_lines


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

    Parameters
    ----------
    results : xarray.Dataset or list of xarray.Dataset
        :func:`~renormpp.diagnostics.compare` Datasets, one per width.
    class_names : sequence of str, optional
        The names of the outputs (default: their indices).
    paper_style : bool, default False
        Draw the paper's Fig. 2.
    diagonal_scale : float, default 20.0
        What the diagonals are divided by in the paper's style.

    Returns
    -------
    matplotlib.figure.Figure
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


def overlaps_vs_N1(results, fit=None, N1_grid=None, class_names=None, max_pairs: int = 6):
    """Readout overlaps against N1 (supplement's overlap figure): diagonal entries on top, off-diagonal below.

    Theory (:data:`renormpp.theory.REFERENCE`, exact) solid, infinite width (:data:`renormpp.theory.BASELINE`)
    dashed, MC points with error bars; one color per entry.

    Parameters
    ----------
    results : xarray.Dataset or list of xarray.Dataset
        :func:`~renormpp.diagnostics.compare` Datasets, one per width.
    fit : TheoryFit, optional
        A fit on the same data, for the theory curves (default: the predictions stored in the Datasets).
    N1_grid : array_like, optional
        The widths of the theory curves (default: a geometric grid around the sampled widths).
    class_names : sequence of str, optional
        The names of the outputs (default: their indices).
    max_pairs : int, default 6
        The most entries drawn in each panel.

    Returns
    -------
    matplotlib.figure.Figure
    """
    plt = _plt()
    results = sorted(results, key=lambda r: r.attrs["N1"])
    N1s, grid = _N1_grid(results, N1_grid, fit)
    D = int(results[0].attrs["D"])
    names = list(class_names) if class_names is not None else [str(a) for a in range(D)]
    lines = theory_lines(fit, grid, methods=(theory.REFERENCE, theory.BASELINE)) if fit is not None else None
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


def local_overlaps(ds, outputs=(0, 0)):
    r"""The CNN's local order parameter from a :func:`renormpp.diagnostics.local.compare_local` Dataset,
    as its departure from the infinite width (:math:`\delta_{ab}\delta_{ij}/\lambda_1`), where the local structure
    shows: left, the sampled :math:`\sum_c v_{a,c,i}v_{b,c,j}/C - \delta_{ab}\delta_{ij}/\lambda_1` over the patch
    pairs (i, j) of the outputs ``outputs`` = (a, b); middle, the exact theory's
    :math:`(Q^*_{(ai),(bj)} - \delta)/\lambda_1` (Eq. (C10)) on the same colour scale; right, every independent entry
    (a i, b j), theory against sampled with error bars, the diagonal where they agree and 0 where the infinite width
    would be right; the legend gives the share of the sampled departure that each method misses
    (:func:`renormpp.diagnostics.local.compare_local`).

    Parameters
    ----------
    ds : xarray.Dataset
        A :func:`renormpp.diagnostics.local.compare_local` Dataset.
    outputs : tuple of int, default (0, 0)
        The outputs (a, b) of the left and middle panels.

    Returns
    -------
    matplotlib.figure.Figure
    """
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

