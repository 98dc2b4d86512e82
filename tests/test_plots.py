"""Figures that can be read: ticks at the sampled widths, y-limits that follow the data, notes and legends off the
curves, error bars over the markers, every width in the sweep's overlap figure (issue 30, item 5)."""
import re
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.legend import Legend  # noqa: E402

import renormpp as rp  # noqa: E402
from renormpp import diagnostics as dg  # noqa: E402
from renormpp import plots  # noqa: E402

WIDTHS = (5, 40, 400)


@pytest.fixture(scope="module")
def sweep():
    """MC points on the exact theory at three widths, P = 60: at alpha = 12 the one-loop Q is not positive definite."""
    d = rp.datasets.synthetic(P=60, P_test=40, N0=8, D=2)
    fit = rp.theory.solve(d.X, d.Y, N1=40, T=0.01)
    rng = np.random.default_rng(0)
    results = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for N1 in WIDTHS:
            f = fit.refit(N1=N1)
            mc = {"eps_g": f.generalization_error(d.X_test, d.Y_test) + 0.002 * rng.standard_normal((2, 400)),
                  "overlap": f.readout_overlap + 0.05 * rng.standard_normal((2, 400, 2, 2))}
            results.append(dg.compare(mc, f, d.X_test, d.Y_test, cut=0))
    return d, fit, results


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _display_paths(ax):
    """Every line of ``ax`` (curves, markers, error bars and their caps) as paths in display coordinates."""
    paths = [line.get_transform().transform_path(line.get_path()) for line in ax.lines]
    for c in ax.collections:
        paths += [c.get_transform().transform_path(p) for p in c.get_paths()]
    return paths


def test_log_axes_are_ticked_at_the_sampled_widths(sweep):
    d, fit, results = sweep
    loss = plots.generalization_vs_N1(results, fit, d.X_test, d.Y_test).axes[0]
    overlaps = plots.overlaps_vs_N1(results, fit).axes[1]  # the lower panel, which has the labels
    for ax in (loss, overlaps):
        ax.figure.canvas.draw()
        assert [t.get_text() for t in ax.get_xticklabels()] == [str(n) for n in WIDTHS]
        assert len(ax.xaxis.get_minorticklocs()) == 0


def test_y_limits_follow_the_points_and_clip_a_theory_that_runs_off(sweep):
    d, fit, results = sweep
    runaway = []
    for ds in results:  # the one-loop prediction ten times the others: drawn from the stored predictions
        ds = ds.copy(deep=True)
        ds.prediction.loc[dict(quantity="eps_g", theory="one_loop")] *= 10
        runaway.append(ds)
    for fig in (plots.generalization_vs_N1(runaway), plots.generalization_vs_N1(results, fit, d.X_test, d.Y_test)):
        ax = fig.axes[0]
        bottom, top = ax.get_ylim()
        eps = [r.sel(quantity="eps_g") for r in results]
        assert all(bottom < float(r.mc_mean - r.mc_error) and float(r.mc_mean + r.mc_error) < top for r in eps)
        exact = ax.lines[0].get_ydata()
        assert bottom < np.nanmin(exact) and np.nanmax(exact) < top
    one_loop = [float(r.prediction.sel(quantity="eps_g", theory="one_loop")) for r in runaway]
    ax = plots.generalization_vs_N1(runaway).axes[0]
    assert ax.get_ylim()[1] < np.nanmin(one_loop)  # clipped ...
    assert [t.get_text() for t in ax.texts] == ["one-loop ↑"]  # ... and said so, at the top edge
    assert ax.texts[0].xy[1] == ax.get_ylim()[1]


def test_the_one_loop_note_crosses_no_line(sweep):
    d, fit, results = sweep
    ax = plots.generalization_vs_N1(results, fit, d.X_test, d.Y_test).axes[0]
    ax.figure.canvas.draw()
    notes = [t for t in ax.texts if "not positive" in t.get_text()]
    notes += [a for a in ax.artists if isinstance(a, Legend) and "not positive" in a.get_title().get_text()]
    assert len(notes) == 1
    box = notes[0].get_window_extent()
    assert box.width > 0 and box.height > 0
    crossing = [p for p in _display_paths(ax) if p.intersects_bbox(box, filled=False)]
    assert not crossing


def test_error_bars_are_drawn_over_the_markers(sweep):
    d, fit, results = sweep
    ax = plots.generalization_vs_N1(results, fit, d.X_test, d.Y_test).axes[0]
    assert ax.containers
    for c in ax.containers:
        marker, caps, (bars,) = c.lines
        assert all(marker.get_zorder() < bar.get_zorder() for bar in (bars, *caps))
        assert all(cap.get_markersize() > marker.get_markersize() for cap in caps)  # caps wider than a marker
        assert marker.get_zorder() > max(line.get_zorder() for line in ax.lines[:4])  # points over the curves


def _legends_clear_of_data(fig):
    fig.canvas.draw()
    legends = [leg for ax in fig.axes if (leg := ax.get_legend()) is not None]
    assert legends
    for leg in legends:
        box = leg.get_window_extent()
        for ax in fig.axes:
            vertices = [p.vertices for p in _display_paths(ax)]
            assert not any(box.count_contains(v) for v in vertices if len(v)), (leg.get_texts()[0].get_text(), ax)


def test_legends_stay_off_the_traces():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 600))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.ShortRunWarning)
        _legends_clear_of_data(plots.mc_analysis(x))
    dt = dg.to_datatree({"eps_g": x, "overlap": rng.standard_normal((2, 600, 2, 2))})
    for kwargs in ({"var_names": ["eps_g"]}, {}):
        fig = plots.trace(dt, **kwargs)
        assert sum(ax.get_legend() is not None for ax in fig.axes) == 1  # the chains' colours are the same everywhere
        _legends_clear_of_data(fig)


def test_the_sweeps_overlap_figure_has_a_row_per_width(sweep):
    _, _, results = sweep
    fig = plots.overlap_heatmaps(results[::-1], class_names=["cat", "horse"])
    maps = [ax for ax in fig.axes if ax.images and ax.get_title()]
    assert len(maps) == 3 * len(WIDTHS) and len(fig.axes) == len(maps) + 2  # one colour bar per kind of panel
    for row, N1 in enumerate(WIDTHS):  # sorted by width
        titles = [ax.get_title() for ax in maps[3 * row: 3 * row + 3]]
        assert all(t.startswith(f"$N_1$={N1}: ") for t in titles), titles
    scales = {ax.images[0].get_clim() for ax in maps if "z" not in ax.get_title()}
    assert len(scales) == 1  # one colour scale for theory and sampled, every width
    single = plots.overlap_heatmaps(results[0])
    assert len(single.axes) == 5 and "$N_1$=5" in single._suptitle.get_text()


#: the code's language, which the report's hidden-kernel figure must not speak (issue 44, item 4)
CODE_WORDS = ("(H1)", "(H2)", "kernel-target", "u_", "K_{\\rm post}", "K_post")


def _kernel_diagnoses():
    """Hidden-kernel diagnoses at three widths, as a point's result.json holds them (renormpp.diagnostics.kernel)."""
    return {N1: dict(r=[1.6, 1.3, 0.9], r_err=[0.05] * 3, r_theory=[1.5, 1.25, 0.95], alignment=0.90,
                     alignment_post=0.94, alignment_err=0.005, alignment_theory=0.945,
                     verdict="kernel shape renormalization holds", theory_eps_g=0.03, oracle_eps_g=0.02,
                     oracle_err=0.001)
            for N1 in (5, 40, 400)}


def test_the_hidden_kernel_figure_and_its_report_section_speak_words(sweep):
    """Issue 44, item 4: the report's hidden-kernel figure is labelled in words (no equation numbers, no u_k, no
    K_post, no "kernel-target alignment"), on both panels, with the theory's curves over N1 (given a fit) or the
    points' predictions; under it in report.md one sentence says what it shows and how to read a gap, and names the
    docs page that holds the equations, which exists and holds them."""
    from renormpp.experiments.report import HIDDEN_KERNEL_DOCS, kernel_section

    _, fit, _ = sweep
    kernels = _kernel_diagnoses()
    for fig in (plots.kernel_vs_N1(kernels, fit=fit), plots.kernel_vs_N1(kernels)):
        assert len(fig.axes) == 2
        for ax in fig.axes:
            legend = [t.get_text() for t in ax.get_legend().get_texts()]
            texts = legend + [ax.get_xlabel(), ax.get_ylabel(), ax.get_title()]
            assert not [t for t in texts if any(w in t for w in CODE_WORDS)], texts
            assert any(t.startswith("sampled networks") for t in legend) and "the theory's prediction" in legend
            assert any(t.startswith("prior kernel") for t in legend)
            assert [line for line in ax.lines if line.get_linestyle() == "--" and len(line.get_xdata())]
        assert "direction 1 (largest eigenvalue)" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        assert "labels" in fig.axes[1].get_ylabel()

    section = "\n".join(kernel_section(kernels, figure=True))
    sentence = section.split("](kernel_vs_N1.png)\n")[1].strip().splitlines()[0]
    for words in ("hidden kernel", "against the prior kernel", "top directions", "labels", "sampled networks",
                  "theory's prediction", "a gap between a point and its line", "error bars", "does not predict"):
        assert words in sentence, words
    assert sentence.endswith(f"The equations, (H1) and (H2): {HIDDEN_KERNEL_DOCS}.")
    assert HIDDEN_KERNEL_DOCS not in "\n".join(kernel_section(kernels, figure=False))  # no figure, no caption
    page = Path(__file__).resolve().parents[1] / re.search(r"`(docs/[^`]+\.md)`", HIDDEN_KERNEL_DOCS).group(1)
    heading = re.search(r'section "([^"]+)"', HIDDEN_KERNEL_DOCS).group(1)
    assert f"## {heading}" in page.read_text(), f"{page.name} has no section {heading!r}"
    section_text = page.read_text().split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    assert "(H1)" in section_text and "(H2)" in section_text


@pytest.mark.parametrize("figure", ["overlap_heatmaps", "generalization_vs_N1"])
def test_save_writes_the_files_of_savefig_drawing_each_once(sweep, tmp_path, figure):
    """rp.plots.save (issue 44): the same PNG, pixel for pixel, and the same PDF pages as ``fig.savefig`` at the same
    dpi, with one drawing per file where savefig of a constrained-layout figure draws twice (each solving the
    layout); the figure keeps its layout engine."""
    from matplotlib.testing.compare import compare_images

    d, fit, results = sweep
    make = {"overlap_heatmaps": lambda: plots.overlap_heatmaps(results),
            "generalization_vs_N1": lambda: plots.generalization_vs_N1(results, fit, d.X_test, d.Y_test)}[figure]
    reference = make()
    reference.savefig(tmp_path / "reference.png", dpi=150)
    fig = make()
    engine, dpi, draws = fig.get_layout_engine(), fig.get_dpi(), []
    original = fig.draw
    fig.draw = lambda renderer: (draws.append(1), original(renderer))
    plots.save(fig, tmp_path / "saved.png", tmp_path / "saved.pdf", dpi=150)
    assert len(draws) == 2 and fig.get_layout_engine() is engine and fig.get_dpi() == dpi != 150
    assert compare_images(str(tmp_path / "reference.png"), str(tmp_path / "saved.png"), tol=0) is None
    pdf = (tmp_path / "saved.pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and pdf.count(b"/Type /Page\n") + pdf.count(b"/Type /Page ") >= 1
    draws.clear()
    reference.draw = lambda renderer: (draws.append(1), Figure.draw(reference, renderer))
    reference.savefig(tmp_path / "again.png", dpi=150)
    assert len(draws) == 2  # what save spares: savefig draws a constrained-layout figure twice per file


def test_save_passes_a_figure_without_layout_engine_through(tmp_path):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    fig.savefig(tmp_path / "reference.png", dpi=110)
    plots.save(fig, tmp_path / "saved.png")
    from matplotlib.testing.compare import compare_images

    assert fig.get_layout_engine() is None
    assert compare_images(str(tmp_path / "reference.png"), str(tmp_path / "saved.png"), tol=0) is None
