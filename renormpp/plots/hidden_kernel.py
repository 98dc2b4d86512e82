"""The posterior's hidden kernel against the width: :func:`kernel_vs_N1`, the sampled networks'
hidden kernel along the top directions of the prior kernel and its alignment with the labels, against what the
theory predicts."""
from __future__ import annotations

import numpy as np

from ._common import POINTS, _plt, log_axis


def kernel_vs_N1(kernels: dict, fit=None, directions: int = 3, N1_grid=None):
    r"""The posterior's hidden kernel against N1, labelled in words for the report.

    Left, "along the top directions of the prior kernel": the spectrum ratios
    :math:`r_k = u_k^\top K_{\rm post} u_k / k_k` (how much the posterior's hidden kernel gained, above 1, or lost,
    below 1, against the prior kernel K along its eigenvector :math:`u_k` of the k-th largest eigenvalue
    :math:`k_k`) for the top ``directions``: the sampled networks' with error bars, and dashed what the exact theory
    predicts (Eq. (H2) of :mod:`renormpp.theory.hidden`; curves over N1 with ``fit``, the point's theory otherwise);
    1, dotted, is the prior kernel. Right, "how well the hidden kernel matches the labels": the kernel-target
    alignment (:func:`renormpp.diagnostics.kernel.alignment`) of the sampled :math:`K_{\rm post}`, of the one the
    theory predicts (Eq. (H1)), and of K (dotted).

    Parameters
    ----------
    kernels : dict
        ``{N1: diagnosis}``, each a :class:`renormpp.diagnostics.kernel.KernelDiagnosis` or its dict (the ``kernel``
        entry of a point's ``result.json``).
    fit : TheoryFit, optional
        A fit on the same data: the theory as curves over N1 (default: each point's theory).
    directions : int, default 3
        The top directions of the prior kernel drawn.
    N1_grid : array_like, optional
        The widths of the theory curves (default: a geometric grid around the sampled widths).

    Returns
    -------
    matplotlib.figure.Figure
    """
    from ..theory import hidden as hidden_theory

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
        ax.errorbar(N1s, r, yerr=err, color=color, label=f"direction {i + 1}" + (" (largest eigenvalue)" * (i == 0)),
                    **POINTS)
        if exact is not None:
            x, th = grid, [hidden_theory.spectrum_ratios(exact.refit(N1=n))[top[i]] for n in grid]
        else:
            x, th = N1s, [rows[n]["r_theory"][i] for n in N1s]
        ax.plot(x, th, color=color, ls="--", lw=1)
    sampled, predicted = "sampled networks ($\\pm 1\\sigma$)", "the theory's prediction"
    ax.plot([], [], "ko", ms=POINTS["ms"], label=sampled)
    ax.plot([], [], "k--", lw=1, label=predicted)
    ax.axhline(1.0, color="0.5", lw=1, ls=":", label="prior kernel (no change)")
    ax.set_title("along the top directions of the prior kernel", fontsize="medium")
    ax.set_ylabel("hidden kernel: posterior / prior")
    a = np.array([rows[n]["alignment_post"] for n in N1s])
    bx.errorbar(N1s, a, yerr=[rows[n]["alignment_err"] for n in N1s], color="C3", label=sampled, **POINTS)
    bx.plot(N1s, [rows[n]["alignment_theory"] for n in N1s], "s--", color="C0", ms=4, lw=1, label=predicted)
    bx.axhline(rows[N1s[0]]["alignment"], color="0.5", lw=1, ls=":", label="prior kernel")
    bx.set_title("how well the hidden kernel matches the labels", fontsize="medium")
    bx.set_ylabel("alignment of the kernel with the labels")
    for axis in (ax, bx):
        log_axis(axis, N1s)
        axis.set_xlabel("hidden units $N_1$")
        axis.legend(fontsize="small")
    return fig
