"""Where the theory holds: the relative deviation Delta = (MC - theory) / |theory| (signed, as
:func:`renormpp.diagnostics.compare`'s ``delta``) of the generalization loss over the validity map
(:func:`validity_map`), against N1 (:func:`discrepancy_vs_N1`, the supplement's discrepancy figure) and against 1/N1
with its extrapolation to infinite width (:func:`scaling`)."""
from __future__ import annotations

import numpy as np

from ..theory import THEORIES
from ._common import HOLLOW, POINTS, _plt


def validity_map(table, theories=("exact", "corrected", "infinite_width", "adaptive_kernel", "shared_field"),
                 title: str = ""):
    r"""One heatmap per theory over :math:`\alpha = P/N_1` (columns) and :math:`N_0/P` (rows) of one teacher and
    network of the validity map (:mod:`renormpp.experiments.validity`): the colour is the relative deviation
    :math:`\Delta = (\epsilon_{g,\rm MC} - \epsilon_{g,\rm th})/|\epsilon_{g,\rm th}|`, clipped at ±20%; the text is
    Δ in percent and whether the theory holds within 1% (✓✓) or 5% (✓), fails at 5% (✗) or the point does not
    decide (?); blank where the theory does not apply.

    Parameters
    ----------
    table : list of dict
        Rows of :func:`renormpp.experiments.validity.table` (one teacher and network).
    theories : tuple of str
        The theories drawn, names of :data:`renormpp.theory.THEORIES`.
    title : str, default ""
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure
    """
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


def discrepancy_vs_N1(table, theories=("exact", "corrected", "adaptive_kernel", "shared_field")):
    r"""The supplement's discrepancy figure, Eq. (S-discrep): :math:`|\Delta| = |\epsilon_{g,\rm MC} -
    \epsilon_{g,\rm th}|/|\epsilon_{g,\rm th}|` against :math:`N_1`, one colour per series (e.g. randomly projected
    MNIST at :math:`N_0 = 12^2` and :math:`28^2`), one line style per theory and marker
    per theory (its record of :data:`renormpp.theory.THEORIES`), error bars from the sampled mean's error; points
    whose error bar does not hold (``reliable`` False: a run too short or not settled) hollow.

    Parameters
    ----------
    table : list of dict
        Rows of :func:`renormpp.experiments.validity.table`.
    theories : tuple of str
        The theories drawn, names of :data:`renormpp.theory.THEORIES`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    plt = _plt()
    eps = table[(table.quantity == "eps_g") & table.theory.isin(theories)]
    fig, ax = plt.subplots(figsize=(7.5, 4.8), constrained_layout=True)
    hollow = False
    for i, (series, g) in enumerate(eps.groupby("series", sort=False)):
        for th in theories:
            h = g[(g.theory == th) & np.isfinite(g.delta)].sort_values("N1")
            if h.empty:
                continue
            y, ok = 100 * h.delta.abs().values, h.reliable.astype(bool).values
            ax.errorbar(h.N1, y, yerr=100 * h.mc_error / h.prediction.abs(), color=f"C{i}", ls=THEORIES[th].ls,
                        marker="none", capsize=3, label=f"{series}: {th.replace('_', ' ')}")
            for held, face in ((ok, f"C{i}"), (~ok, "none")):
                ax.plot(h.N1.values[held], y[held], ls="none", marker=THEORIES[th].marker, ms=5, color=f"C{i}",
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


def scaling(groups: dict, fits):
    """Finite-size scaling: the relative deviation Delta = (MC - theory) / |theory| against 1/N1 with error bars, one
    panel per quantity, one colour per theory, and the straight-line fits extrapolated to 1/N1 = 0.

    Parameters
    ----------
    groups : dict
        The rows of :func:`renormpp.experiments.report.scaling_table`, grouped by quantity and theory.
    fits : dict
        Their extrapolations (:func:`renormpp.diagnostics.extrapolate`), by the same keys.

    Returns
    -------
    matplotlib.figure.Figure
    """
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
        ax.set_ylabel("(MC − theory) / |theory|")
        ax.set_title(name)
        ax.legend(fontsize="small", title="theory (squares: extrapolated)")
    return fig

