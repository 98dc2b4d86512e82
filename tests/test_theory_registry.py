"""A theory method is one record of ``rp.theory.METHODS`` (issue 31, item 2; docs/architecture.md): a toy method
registered here, infinite width under another name with its own label, line style and colour, appears in
``theory.json``'s values, in the figures' legends and in the report's text, and its record's restriction gives the
reason it does not apply, without any of those modules being touched."""
import dataclasses
import importlib
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import renormpp as rp  # noqa: E402
from renormpp import plots, theory  # noqa: E402
from renormpp.experiments import stages, theories  # noqa: E402

report = importlib.import_module("renormpp.experiments.report")  # the module: rp.experiments.report is the function

LABEL = "toy theory ($Q=1$, again)"


@pytest.fixture
def toy(monkeypatch):
    """The record of infinite width as a fifth method "toy", in its own style."""
    record = dataclasses.replace(theory.METHODS["infinite_width"], name="toy", label=LABEL, ls=":", color="C5",
                                 noun="the toy theory")
    monkeypatch.setitem(theory.METHODS, "toy", record)
    monkeypatch.setitem(theory.THEORIES, "toy", theory.registry._kernel_record("toy"))
    return record


@pytest.fixture(scope="module")
def data():
    return rp.datasets.synthetic(P=40, P_test=30, N0=6, D=2)


def _sweep(d, fit):
    """compare() Datasets at three widths, MC draws on the exact theory (as in tests/test_plots.py)."""
    rng = np.random.default_rng(0)
    results = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for N1 in (10, 40, 160):
            f = fit.refit(N1=N1)
            mc = {"eps_g": f.generalization_error(d.X_test, d.Y_test) + 0.002 * rng.standard_normal((2, 300)),
                  "overlap": f.readout_overlap + 0.05 * rng.standard_normal((2, 300, 2, 2))}
            results.append(rp.diagnostics.compare(mc, f, d.X_test, d.Y_test, cut=0))
    return results


def test_a_registered_method_is_solved_and_stored_in_theory_json(toy, data):
    fit = theory.solve(data.X, data.Y, N1=20, method="infinite_width")
    assert list(theory.METHODS) == ["exact", "one_loop", "infinite_width", "corrected", "toy"]
    out = theories.theory_results(fit, data)
    assert list(out) == list(theory.METHODS)
    assert out["toy"] == out["infinite_width"] and out["toy"]["applies"]
    again = theory.solve(data.X, data.Y, N1=20, method="toy")
    assert again.method == "toy" and "infinite width: nothing solved" in repr(again)
    with pytest.raises(ValueError, match="'measured_kernel' or 'toy'"):
        theory.solve(data.X, data.Y, N1=20, method="two_loop")


def test_a_registered_method_is_drawn_with_its_label_and_style(toy, data):
    fit = theory.solve(data.X, data.Y, N1=40)
    results = _sweep(data, fit)
    assert "toy" in results[0].theory.values
    for fig in (plots.generalization_vs_N1(results, fit, data.X_test, data.Y_test),
                plots.generalization_vs_N1(results)):  # the curves on a grid, and the stored predictions
        ax = fig.axes[0]
        assert LABEL in [t.get_text() for t in ax.get_legend().get_texts()]
        (line,) = [line for line in ax.lines if line.get_label() == LABEL]
        assert line.get_color() == "C5" and line.get_linestyle() == ":"
        plt.close(fig)
    lines = plots.theory_lines(fit, [20.0, 80.0], data.X_test, data.Y_test)
    np.testing.assert_array_equal(lines["toy"]["eps_g"], lines["infinite_width"]["eps_g"])


def test_a_registered_method_is_in_the_report(toy, data):
    fit = theory.solve(data.X, data.Y, N1=40)
    results = _sweep(data, fit)
    text = "\n".join(report.answer_table(results, data.X.shape[0]) + report.verdict_sentences(results, data))
    assert "| toy Δ | toy z |" in text and "* **toy** (" in text, text
    assert "| toy | verdict |" in stages.comparison_markdown(results[0])
    assert "   toy " in results[0].attrs["summary"]


def test_the_reason_a_method_does_not_apply_comes_from_its_record(monkeypatch, data):
    odd_only = theory.METHODS["corrected"].restriction
    record = dataclasses.replace(theory.METHODS["infinite_width"], name="toy", restriction=odd_only)
    monkeypatch.setitem(theory.METHODS, "toy", record)
    monkeypatch.setitem(theory.THEORIES, "toy", theory.registry._kernel_record("toy"))
    relu = theory.solve(data.X, data.Y, N1=20, activation="relu", method="infinite_width")
    assert not theory.applies("toy", "relu") and theory.applies("toy", "erf")
    assert theory.why_not(relu, "toy") == "needs an odd activation (relu is not odd)"
    assert theory.refit_or_none(relu, "toy") is None
    with pytest.raises(ValueError, match="method='toy' needs an odd activation .* Use method='exact', 'one_loop' or "
                                         "'infinite_width', which hold for 'relu'"):
        theory.solve(data.X, data.Y, N1=20, activation="relu", method="toy")
