"""Figures of the paper from renormpp's objects (matplotlib; arviz-plots for traces, autocorrelation, ESS), one module
per figure, named after it:

* :mod:`.generalization`: :func:`generalization_vs_N1`, loss against N1, every theory method of
  :data:`renormpp.theory.METHODS` in its record's line style (exact solid, one-loop dashed, infinite width
  dash-dotted, 1/N1-corrected dotted), MC points with error bars (paper Fig. 1); the y-limits follow the points, a
  theory that runs off is clipped and marked where it leaves. :func:`architectures_vs_N1`: several architectures on
  the same data (the CNN against the fully connected network, deep networks of several depths).
  :func:`baselines_vs_N1`: networks trained with Adam against the best infinite-width GP, train and test scores
  against N1 (paper Figs. 3 and 4).
* :mod:`.overlaps`: :func:`overlap_heatmaps`, Q*/lambda1 beside the sampled <v v^T>/N1 and their z-scores, with the
  values written in, one row per width (``paper_style=True``: the paper's Fig. 2, diagonals / 20);
  :func:`overlaps_vs_N1`, diagonal and off-diagonal overlaps against N1 (supplement's overlap figure);
  :func:`local_overlaps`, the CNN's overlaps over patch pairs.
* :mod:`.hidden_kernel`: :func:`kernel_vs_N1`, the posterior's hidden kernel against N1, sampled and predicted.
* :mod:`.validity`: :func:`validity_map`, :func:`discrepancy_vs_N1` and :func:`scaling`, the relative deviation of
  the theory from the sampled networks over a map, against N1 and against 1/N1.
* :mod:`.monte_carlo`: :func:`mc_analysis`, thermalization trace, histogram and blocking plateau (supplement's MC
  figure), for the pooled chains with the same estimate as the report; :func:`trace`, :func:`autocorr`,
  :func:`ess`: arviz-plots on a DataTree (:func:`renormpp.diagnostics.to_datatree`).
* ``_common``: what they share: :data:`POINTS`, :data:`HOLLOW`, :func:`log_axis`, :func:`theory_lines` (the
  curves of every theory method over a grid of widths) and :func:`save` (a figure to its files, laid out once).

Every function returns a :class:`matplotlib.figure.Figure`; save it with ``fig.savefig(path)``, or with
``rp.plots.save(fig, "a.png", "a.pdf")``: the same files, drawn once per file after one layout (faster). Points whose error
bar does not hold (a run too short: ``reliable`` False) or that have not settled (``settled`` False: the chains
disagree or the mean drifts) are drawn hollow. N1 axes are ticked at the sampled widths; legends and notes keep off the data.
"""
from ._common import HOLLOW, POINTS, log_axis, save, theory_lines
from .generalization import architectures_vs_N1, baselines_vs_N1, generalization_vs_N1
from .hidden_kernel import kernel_vs_N1
from .monte_carlo import autocorr, ess, mc_analysis, trace
from .overlaps import local_overlaps, overlap_heatmaps, overlaps_vs_N1
from .validity import discrepancy_vs_N1, scaling, validity_map

__all__ = ["HOLLOW", "POINTS", "architectures_vs_N1", "autocorr", "baselines_vs_N1", "discrepancy_vs_N1", "ess",
           "generalization_vs_N1", "kernel_vs_N1", "local_overlaps", "log_axis", "mc_analysis", "overlap_heatmaps",
           "overlaps_vs_N1", "save", "scaling", "theory_lines", "trace", "validity_map"]
